/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "api/api.h"
#include "http/sse.h"
#include "macro.h"
#include "sandbox/forward.h"
#include "sandbox/sandbox.h"

/* POST|GET /v1/sandboxes/{id}/ports, DELETE /v1/sandboxes/{id}/ports/{port}, GET /v1/ports: port forwards
 * (sandbox/forward.h). A forward asked for with "hold": true lives as long as the request: its answer is an
 * event stream that says where it listens and, should it go away first, why. One without it is kept in the
 * store and outlives a restart of the daemon. */

/* A held stream's comment line this often: a client that went away is only seen when a write to it fails. */
#define HOLD_KEEPALIVE_SEC 10

static cJSON *forward_to_json(const Forward *f) {
        cJSON *o = cJSON_CreateObject();
        char when[32], addr[32];

        snprintf(addr, sizeof addr, "127.0.0.1:%u", f->host_port);
        cJSON_AddStringToObject(o, "id", f->id);
        cJSON_AddStringToObject(o, "sandbox_id", f->sandbox->id);
        if (f->sandbox->name)
                cJSON_AddStringToObject(o, "sandbox_name", f->sandbox->name);
        else
                cJSON_AddNullToObject(o, "sandbox_name");
        cJSON_AddNumberToObject(o, "guest_port", f->guest_port);
        cJSON_AddNumberToObject(o, "host_port", f->host_port);
        cJSON_AddStringToObject(o, "address", addr);
        snprintf(addr, sizeof addr, "http://127.0.0.1:%u", f->host_port);
        cJSON_AddStringToObject(o, "url", addr);
        cJSON_AddBoolToObject(o, "held", f->gone != NULL);
        cJSON_AddBoolToObject(o, "any_user", f->any_user);
        format_rfc3339(f->created_at, when);
        cJSON_AddStringToObject(o, "created_at", when);
        cJSON_AddNumberToObject(o, "connections", (double) f->connections);
        cJSON_AddNumberToObject(o, "active", f->active);
        cJSON_AddNumberToObject(o, "refused", (double) f->refused);
        return o;
}

/* ---- a held forward's stream */

typedef struct Hold {
        Request *request;        /* NULL once the request ended */
        Forward *forward;        /* NULL once it went away */
        char *gone_why;          /* why, when not by its holder */
        sd_event_source *keepalive;
        SpaceBuf buf;
        size_t pos;
        unsigned sent;           /* events so far: 1 after "forward" */
        bool keepalive_due;
        bool ended;              /* "end" was sent */
        bool detached, released;
} Hold;

static void hold_free_if_done(Hold *h) {
        if (!h->detached || !h->released)
                return;
        sd_event_source_disable_unref(h->keepalive);
        space_buf_done(&h->buf);
        free(h->gone_why);
        free(h);
}

static void hold_gone(Forward *f, void *userdata) {
        Hold *h = userdata;

        h->forward = NULL;
        if (!h->gone_why)
                h->gone_why = strdup(f->sandbox->state == SANDBOX_DELETING ? "its sandbox was removed"
                                                                            : "it was removed");
        if (h->request)
                http_resume(h->request);
}

static int on_keepalive(sd_event_source *es, uint64_t usec, void *userdata) {
        Hold *h = userdata;

        h->keepalive_due = true;
        if (h->request)
                http_resume(h->request);
        (void) sd_event_source_set_time_relative(es, HOLD_KEEPALIVE_SEC * 1000000ULL);
        return 0;
}

static int hold_format(Hold *h, const char *event, cJSON *o) {
        _cleanup_free_ char *text = cJSON_PrintUnformatted(o);

        cJSON_Delete(o);
        h->pos = 0;
        if (!text)
                return -ENOMEM;
        return sse_format_event(&h->buf, ++h->sent, event, text, strlen(text), false);
}

static ssize_t hold_read(void *userdata, char *buf, size_t max) {
        Hold *h = userdata;
        size_t n;

        if (h->pos >= h->buf.len) {
                if (h->ended)
                        return HTTP_STREAM_END;
                if (h->sent == 0 && h->forward) {
                        if (hold_format(h, "forward", forward_to_json(h->forward)) < 0)
                                return HTTP_STREAM_ERROR;
                } else if (!h->forward) {
                        cJSON *o = cJSON_CreateObject();

                        cJSON_AddStringToObject(o, "reason", h->gone_why ?: "removed");
                        if (hold_format(h, "end", o) < 0)
                                return HTTP_STREAM_ERROR;
                        h->ended = true;
                } else if (h->keepalive_due) {
                        h->keepalive_due = false;
                        h->buf.len = 0;
                        h->pos = 0;
                        if (space_buf_append(&h->buf, ": keepalive\n\n", 13) < 0)
                                return HTTP_STREAM_ERROR;
                } else
                        return 0;
        }
        n = MIN(max, h->buf.len - h->pos);
        memcpy(buf, h->buf.data + h->pos, n);
        h->pos += n;
        return (ssize_t) n;
}

/* The client went away (or the stream ended): a held forward goes with it. */
static void hold_detach(void *userdata, Request *r) {
        Hold *h = userdata;
        Forward *f = h->forward;

        h->request = NULL;
        h->forward = NULL;
        h->keepalive = sd_event_source_disable_unref(h->keepalive);
        if (f) {
                f->gone = NULL;
                forward_remove(f);
        }
        h->detached = true;
        hold_free_if_done(h);
}

static void hold_release(void *userdata) {
        Hold *h = userdata;

        h->released = true;
        hold_free_if_done(h);
}

static void respond_held(Request *r, Forward *f) {
        Hold *h = calloc(1, sizeof *h);

        if (!h) {
                forward_remove(f);
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return;
        }
        h->request = r;
        h->forward = f;
        f->gone = hold_gone;
        f->gone_userdata = h;
        (void) sd_event_add_time_relative(http_manager(r->http)->event, &h->keepalive, CLOCK_MONOTONIC,
                                          HOLD_KEEPALIVE_SEC * 1000000ULL, 0, on_keepalive, h);
        if (h->keepalive)
                (void) sd_event_source_set_enabled(h->keepalive, SD_EVENT_ON);
        r->stream = (HttpStream) { .read = hold_read, .detach = hold_detach, .release = hold_release, .userdata = h };
        if (sse_respond(r) < 0 && !r->body_reader)
                h->released = true; /* no response holds it: the detach frees it */
}

/* ---- the routes */

void api_post_ports(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "guest_port", "host_port", "hold", "any_user", NULL };
        _cleanup_(error_done) Error e = {};
        uint64_t guest = 0, host = 0;
        bool hold = false, any_user = false;
        Forward *f;
        Sandbox *s;
        cJSON *o;
        int q;

        if (resolve_sandbox(r, a->arg[0], &s) < 0)
                return;
        o = parse_body_object(r, fields);
        if (!o)
                return;
        q = get_uint_field(r, o, "guest_port", 1, 65535, &guest);
        if (q == 0)
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "guest_port is required: the port in the sandbox to "
                                   "forward to (1 to 65535)");
        if (q <= 0 || get_uint_field(r, o, "host_port", 1, 65535, &host) < 0 ||
            get_bool_field(r, o, "hold", &hold) < 0 || get_bool_field(r, o, "any_user", &any_user) < 0)
                goto out;
        if (forward_add(s, (unsigned) guest, (unsigned) host, !hold, any_user, &f, &e) < 0) {
                http_respond_error(r, e.code, "%s", error_message(&e));
                goto out;
        }
        if (hold)
                respond_held(r, f);
        else
                http_respond_json(r, 201, forward_to_json(f));
out:
        cJSON_Delete(o);
}

static cJSON *forwards_to_json(Sandbox *s, cJSON *list) {
        for (Forward *f = s->forwards; f; f = f->next)
                cJSON_AddItemToArray(list, forward_to_json(f));
        return list;
}

void api_get_ports(Request *r, const RouteArgs *a) {
        cJSON *o;
        Sandbox *s;

        if (resolve_sandbox(r, a->arg[0], &s) < 0)
                return;
        o = cJSON_CreateObject();
        forwards_to_json(s, cJSON_AddArrayToObject(o, "forwards"));
        http_respond_json(r, 200, o);
}

void api_get_all_ports(Request *r, const RouteArgs *a) {
        cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "forwards");

        for (Sandbox *s = http_manager(r->http)->sandboxes; s; s = s->next)
                if (!s->pooled)
                        forwards_to_json(s, list);
        http_respond_json(r, 200, o);
}

void api_delete_port(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error e = {};
        Forward *f;
        Sandbox *s;

        if (resolve_sandbox(r, a->arg[0], &s) < 0)
                return;
        f = forward_find(s, a->arg[1]);
        if (!f) {
                http_respond_error(r, ERROR_FORWARD_NOT_FOUND, "sandbox %s has no port forward '%s' (a host port or "
                                   "a forward id; 'spacectl port ls' lists them)", s->id, a->arg[1]);
                return;
        }
        /* forgotten first: a removal that a restart would undo is refused, and the forward stays */
        if (forward_forget(f, &e) < 0) {
                http_respond_error(r, e.code, "%s", error_message(&e));
                return;
        }
        forward_remove(f);
        http_respond_empty(r, 204);
}
