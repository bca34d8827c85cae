/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "string-util.h"
#include "macro.h"
#include "channel/process.h"
#include "core/util.h"
#include "sandbox/sandbox.h"
#include "template/template.h"

/* Command sessions: a process forked and held in the guest, attached to later with a scoped, expiring token.
 * The stream route runs without an API key (ROUTE_AUTH_TOKEN): the token is checked here, on every
 * transport. */

/* The request of POST /sessions ended. */
static void creator_detach(void *userdata, Request *r) {
        process_creator_gone(userdata);
}

/* The 201 answer: the session, with a fresh attach token. */
static void respond_session(Request *r, Process *p) {
        const SessionToken *t;
        char ts[32], url[160];
        cJSON *o;

        if (process_session_token(p, &t) < 0) {
                http_respond_error(r, ERROR_INTERNAL, "cannot make an attach token");
                return;
        }
        format_rfc3339(t->expires_at, ts);
        snprintf(url, sizeof url, "/v1/sandboxes/%s/sessions/%s/stream", p->sandbox_id, p->session_id);
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "session_id", p->session_id);
        cJSON_AddNumberToObject(o, "pid", p->pid);
        cJSON_AddStringToObject(o, "attach_token", t->token);
        cJSON_AddStringToObject(o, "expires_at", ts);
        cJSON_AddStringToObject(o, "stream_url", url);
        http_respond_json(r, 201, o);
}

/* STARTED (or an error) arrived for the session r created: answers. */
static void session_started(Request *r, void *userdata) {
        Process *p = userdata;

        if (p->state == PROCESS_STARTING && !p->ended) {
                http_continue(r, session_started, p); /* a spurious wake-up: keep waiting for STARTED */
                return;
        }
        process_creator_done(p);
        r->stream = (HttpStream) {};
        if (p->pid <= 0) {
                ErrorCode code = p->error_code != ERROR_NONE ? p->error_code : ERROR_EXEC_FAILED;

                http_respond_error(r, code, "%s", p->error_message ?: "the process could not be created");
                process_maybe_free(p);
                return;
        }
        respond_session(r, p);
}

/* Forks the process held; r waits until it has a pid, then session_started() answers. */
static void create_session(Request *r, Sandbox *s, const ExecSpec *spec) {
        _cleanup_(error_done) Error err = {};
        ChannelWaiter w = api_request_waiter(r);
        Process *p;

        if (process_session_create(s, spec, &w, &p, &err) < 0) {
                respond_error_or(r, &err, "cannot create the session");
                return;
        }
        r->stream = (HttpStream) { .detach = creator_detach, .userdata = p };
        http_continue(r, session_started, p);
}

/* The rest of a POST /sessions, with the sandbox awake. */
static void post_sessions_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        static const char *const fields[] = { "argv", "env", "cwd", "stdin", "timeout", "pty", "rows", "cols", "user",
                                              NULL };
        _cleanup_strv_free_ char **env = NULL, **argv = NULL;
        ExecSpec spec;
        cJSON *o;

        o = parse_body_object(r, fields);
        if (!o)
                return;
        if (parse_exec_spec(r, o, true, &spec, &argv, &env) >= 0) {
                if (!spec.cwd)
                        spec.cwd = template_workdir(http_manager(r->http), s); /* the template's default */
                if (!spec.user)
                        spec.user = template_default_user(http_manager(r->http), s);
                if (s->state != SANDBOX_RUNNING)
                        http_respond_error(r, ERROR_SANDBOX_NOT_RUNNING, "sandbox %s is %s, not running", s->id,
                                           sandbox_state_to_string(s->state));
                else
                        create_session(r, s, &spec);
        }
        cJSON_Delete(o);
}

void api_post_sessions(Request *r, const RouteArgs *a) {
        Sandbox *s;

        if (resolve_sandbox(r, a->arg[0], &s) >= 0)
                api_when_awake(r, s, a, post_sessions_awake);
}

static bool session_id_valid(const char *sid) {
        return strncmp(sid, "ses-", 4) == 0 && string_is_hex(sid + 4, SESSION_ID_LEN - 4);
}

static Process *route_session(Request *r, const RouteArgs *a) {
        Sandbox *s;
        Process *p;

        if (resolve_sandbox(r, a->arg[0], &s) < 0)
                return NULL;
        if (!session_id_valid(a->arg[1])) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "'%s' is not a session id (ses-<16 hex>)", a->arg[1]);
                return NULL;
        }
        p = process_get_session(http_manager(r->http), s, a->arg[1]);
        if (!p)
                http_respond_error(r, ERROR_SESSION_NOT_FOUND, "no session %s in sandbox %s", a->arg[1], s->id);
        return p;
}

/* The attach token: Authorization: Bearer, else ?token=. */
static const char *request_token(Request *r) {
        const char *h = http_header(r, "Authorization");

        if (h && strncasecmp(h, "Bearer ", 7) == 0) {
                h += 7;
                while (*h == ' ')
                        h++;
                return h;
        }
        return http_query(r, "token");
}

/* Over TCP without an API key the token is all the caller has: an unknown sandbox, an unknown session and a
 * wrong token get this same answer, so that guessing tells nothing about what exists. */
static void respond_bad_token(Request *r) {
        http_respond_error(r, ERROR_INVALID_TOKEN, "the token is not an attach token of this session");
}

static Process *route_session_quiet(Request *r, const RouteArgs *a) {
        Sandbox *s;
        Process *p = NULL;

        if (sandbox_resolve(http_manager(r->http), a->arg[0], &s) >= 0 && session_id_valid(a->arg[1]))
                p = process_get_session(http_manager(r->http), s, a->arg[1]);
        if (!p)
                respond_bad_token(r);
        return p;
}

void api_get_session_stream(Request *r, const RouteArgs *a) {
        const char *token = request_token(r);
        uint64_t after;
        Process *p;
        int q;

        if (!token || !*token) {
                http_respond_error(r, ERROR_UNAUTHORIZED,
                                   "attaching needs the session's attach token (Authorization: Bearer TOKEN or "
                                   "?token=TOKEN)");
                return;
        }
        if (parse_last_event_id(r, &after) < 0)
                return;
        p = r->authenticated ? route_session(r, a) : route_session_quiet(r, a);
        if (!p)
                return;
        q = process_check_token(p, token);
        if (q == -EKEYEXPIRED)
                http_respond_error(r, ERROR_TOKEN_EXPIRED,
                                   "the attach token has expired; get a new one with POST .../sessions/%s/token",
                                   p->session_id);
        else if (q < 0 && !r->authenticated)
                respond_bad_token(r);
        else if (q < 0)
                http_respond_error(r, ERROR_INVALID_TOKEN, "the token is not an attach token of session %s",
                                   p->session_id);
        else if (api_process_attach(r, p, after, true, true) < 0 && !r->responded)
                http_respond_error(r, ERROR_INTERNAL, "cannot attach");
        (void) process_maybe_free(p);
}

void api_post_session_token(Request *r, const RouteArgs *a) {
        const SessionToken *t;
        char ts[32];
        Process *p;
        cJSON *o;

        if (!(p = route_session(r, a)))
                return;
        if (process_session_token(p, &t) < 0) {
                http_respond_error(r, ERROR_INTERNAL, "cannot make an attach token");
                return;
        }
        format_rfc3339(t->expires_at, ts);
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "attach_token", t->token);
        cJSON_AddStringToObject(o, "expires_at", ts);
        http_respond_json(r, 201, o);
}
