/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"
#include "log.h"
#include "macro.h"
#include "process.h"

struct Http {
        Manager *manager;
        struct MHD_Daemon *daemon;
        sd_event_source *io;
        sd_event_source *timer;
        sd_event_source *kick;
};

Manager *http_manager(Http *h) {
        return h->manager;
}

static void http_run(Http *h);

static int on_kick(sd_event_source *s, void *userdata) {
        http_run(userdata);
        return 0;
}

/* MHD must run after a resume so the connection is handled promptly; a defer source batches that. */
static void http_schedule(Http *h) {
        (void) sd_event_source_set_enabled(h->kick, SD_EVENT_ONESHOT);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        http_run(userdata);
        return 0;
}

static void http_run(Http *h) {
        MHD_UNSIGNED_LONG_LONG timeout;

        MHD_run(h->daemon);
        if (MHD_get_timeout(h->daemon, &timeout) == MHD_YES && timeout == 0)
                /* MHD has more to do right away (the next step of a response): run again, no timer */
                http_schedule(h);
        else if (MHD_get_timeout(h->daemon, &timeout) == MHD_YES) {
                uint64_t now;
                sd_event_now(h->manager->event, CLOCK_MONOTONIC, &now);
                (void) sd_event_source_set_time(h->timer, now + timeout * 1000ULL);
                (void) sd_event_source_set_enabled(h->timer, SD_EVENT_ONESHOT);
        } else
                (void) sd_event_source_set_enabled(h->timer, SD_EVENT_OFF);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        http_run(userdata);
        return 0;
}

static void waiter_unlink(Waiter *w) {
        if (!w->list)
                return;
        if (w->prev)
                w->prev->next = w->next;
        else
                *w->list = w->next;
        if (w->next)
                w->next->prev = w->prev;
        w->list = NULL;
        w->prev = w->next = NULL;
}

static void request_free(Request *r) {
        if (!r)
                return;
        waiter_unlink(&r->waiter);
        sd_event_source_disable_unref(r->deadline_source);
        if (r->stream)
                process_detach_stream(r->stream, r);
        if (r->upload)
                process_detach_upload(r->upload, r);
        space_buf_done(&r->body);
        free(r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
        request_free(*con_cls);
        *con_cls = NULL;
}

void http_suspend(Request *r) {
        if (r->suspended)
                return;
        MHD_suspend_connection(r->connection);
        r->suspended = true;
}

void http_resume(Request *r) {
        if (!r->suspended)
                return;
        r->suspended = false;
        MHD_resume_connection(r->connection);
        http_schedule(r->http);
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        Request *r = userdata;

        waiter_unlink(&r->waiter);
        http_resume(r);
        return 0;
}

int http_wait_on(Request *r, Waiter **list, uint64_t deadline_usec) {
        int q;

        r->waiter.request = r;
        r->waiter.list = list;
        r->waiter.prev = NULL;
        r->waiter.next = *list;
        if (*list)
                (*list)->prev = &r->waiter;
        *list = &r->waiter;
        r->deadline = deadline_usec;
        r->deadline_source = sd_event_source_disable_unref(r->deadline_source);
        q = sd_event_add_time(r->http->manager->event, &r->deadline_source, CLOCK_MONOTONIC, deadline_usec, 1000,
                              on_deadline, r);
        if (q < 0) {
                waiter_unlink(&r->waiter);
                return q;
        }
        http_suspend(r);
        return 0;
}

void http_wake_waiters(Waiter **list) {
        while (*list) {
                Waiter *w = *list;
                Request *r = w->request;

                waiter_unlink(w);
                r->deadline_source = sd_event_source_disable_unref(r->deadline_source);
                http_resume(r);
        }
}

static int queue(Request *r, unsigned status, struct MHD_Response *resp) {
        enum MHD_Result q;

        if (!resp)
                return -ENOMEM;
        q = MHD_queue_response(r->connection, status, resp);
        MHD_destroy_response(resp);
        r->responded = true;
        return q == MHD_YES ? 0 : -EIO;
}

int http_respond_json(Request *r, unsigned status, cJSON *body) {
        char *text = cJSON_PrintUnformatted(body);
        struct MHD_Response *resp;
        size_t n;

        cJSON_Delete(body);
        if (!text)
                return -ENOMEM;
        n = strlen(text);
        text = realloc(text, n + 2) ?: text;
        text[n++] = '\n';
        resp = MHD_create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return -ENOMEM;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        return queue(r, status, resp);
}

int http_respond_error(Request *r, unsigned status, const char *code, const char *fmt, ...) {
        cJSON *o = cJSON_CreateObject();
        char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        cJSON_AddStringToObject(o, "code", code);
        cJSON_AddStringToObject(o, "message", msg ?: code);
        free(msg);
        return http_respond_json(r, status, o);
}

int http_respond_empty(Request *r, unsigned status) {
        return queue(r, status, MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT));
}

const char *http_query(Request *r, const char *key) {
        return MHD_lookup_connection_value(r->connection, MHD_GET_ARGUMENT_KIND, key);
}

const char *http_header(Request *r, const char *key) {
        return MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, key);
}

/* The unix socket is the user's own; still, only the same uid (or root) may talk to it. */
static bool peer_allowed(Request *r) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->connection,
                                                                     MHD_CONNECTION_INFO_CONNECTION_FD);
        struct ucred cred;
        socklen_t len = sizeof cred;

        if (!ci)
                return false;
        if (getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return true; /* not a unix socket: TCP is authenticated by API key (later) */
        return cred.uid == getuid() || cred.uid == 0;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *connection, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls) {
        Http *h = cls;
        Request *r = *con_cls;

        if (!r) {
                r = calloc(1, sizeof *r);
                if (!r)
                        return MHD_NO;
                r->http = h;
                r->connection = connection;
                r->method = method;
                r->url = url;
                *con_cls = r;
                if (!peer_allowed(r)) {
                        http_respond_error(r, MHD_HTTP_FORBIDDEN, "permission_denied",
                                           "this socket belongs to another user");
                        return MHD_YES;
                }
                api_classify(r);
                return MHD_YES;
        }

        if (*upload_data_size > 0) {
                if (r->responded) {
                        *upload_data_size = 0; /* answered already (an error): drain */
                        return MHD_YES;
                }
                if (r->kind == REQUEST_UPLOAD && !r->upload_failed) {
                        size_t took = api_upload(r, upload_data, *upload_data_size);
                        *upload_data_size -= took;
                        return MHD_YES;
                }
                if (r->body.len + *upload_data_size > HTTP_BODY_MAX)
                        r->body_too_large = true;
                else if (space_buf_append(&r->body, upload_data, *upload_data_size) < 0)
                        return MHD_NO;
                *upload_data_size = 0;
                return MHD_YES;
        }

        if (r->responded || r->suspended)
                return MHD_YES;
        if (r->body_too_large) {
                http_respond_error(r, MHD_HTTP_CONTENT_TOO_LARGE, "payload_too_large",
                                   "request body over %d bytes", HTTP_BODY_MAX);
                return MHD_YES;
        }
        api_route(r);
        return MHD_YES;
}

int http_new(Manager *m, int listen_fd, Http **ret) {
        _cleanup_free_ Http *h = calloc(1, sizeof *h);
        const union MHD_DaemonInfo *info;
        int r;

        if (!h)
                return -ENOMEM;
        h->manager = m;
        h->daemon = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                                     on_access, h, MHD_OPTION_LISTEN_SOCKET, listen_fd,
                                     MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                                     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) 0,
                                     MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t) (256 * 1024),
                                     MHD_OPTION_CONNECTION_LIMIT, (unsigned) 1024, MHD_OPTION_END);
        if (!h->daemon)
                return -EIO;
        info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info) {
                MHD_stop_daemon(h->daemon);
                return -EIO;
        }
        r = sd_event_add_io(m->event, &h->io, info->epoll_fd, EPOLLIN, on_io, h);
        if (r >= 0)
                /* accuracy 1 us: sd-event's default of 250 ms would hold every response back that long */
                r = sd_event_add_time(m->event, &h->timer, CLOCK_MONOTONIC, UINT64_MAX, 1, on_timer, h);
        if (r >= 0)
                r = sd_event_add_defer(m->event, &h->kick, on_kick, h);
        if (r < 0) {
                MHD_stop_daemon(h->daemon);
                return r;
        }
        (void) sd_event_source_set_enabled(h->kick, SD_EVENT_OFF);
        *ret = TAKE_PTR(h);
        return 0;
}

Http *http_free(Http *h) {
        if (!h)
                return NULL;
        sd_event_source_disable_unref(h->io);
        sd_event_source_disable_unref(h->timer);
        sd_event_source_disable_unref(h->kick);
        /* Suspended connections must be resumed before MHD stops; the process goes away anyway. */
        MHD_stop_daemon(h->daemon);
        free(h);
        return NULL;
}
