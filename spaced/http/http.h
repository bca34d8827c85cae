/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* libmicrohttpd inside the sd-event loop (the systemd-journal-remote model): MHD keeps its own epoll set,
 * whose fd we watch; streaming responses suspend their connection while they have nothing to send. */

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <stdbool.h>

#include "core/error.h"
#include "core/waiter.h"
#include "http/auth.h"
#include "proto.h"
#include "core/manager.h"

#define HTTP_BODY_MAX (1024 * 1024)
/* After an error answer, what is still sent of a body is read and dropped up to this much; then we hang up. */
#define HTTP_DRAIN_MAX (16 * 1024 * 1024)
/* TCP only: a connection idle this long (no request, or a request that stalls) is closed. SSE streams and
 * long polls are exempt. */
#define HTTP_TCP_IDLE_TIMEOUT_SEC 60
#define HTTP_TCP_CONNECTIONS_MAX 512
#define HTTP_UNIX_CONNECTIONS_MAX 1024

typedef enum RequestKind {
        REQUEST_JSON,      /* body collected (bounded), then routed */
        REQUEST_UPLOAD,    /* body streamed to a handler as it arrives (process stdin) */
} RequestKind;

typedef struct Request Request;

struct Request {
        Http *http;
        struct MHD_Connection *connection;
        const char *method;
        const char *url;
        RequestKind kind;
        SpaceBuf body;
        bool body_too_large;
        bool responded;
        bool suspended;
        bool peer_checked;
        /* Who asked. Over the unix socket: peer credentials, authenticated = true. Over TCP: authenticated
         * when a valid API key came with the request (key_id names it). Routes marked ROUTE_AUTH_TOKEN also
         * run without one (authenticated = false) and check their own token. */
        bool tcp;
        bool authenticated;
        char key_id[API_KEY_ID_LEN + 1];
        bool streaming;   /* the idle timeout is off for this connection */
        uint64_t drained; /* body bytes dropped after an early answer */
        /* Long-poll (?wait=): while suspended on a waiter, deadline in monotonic usec. */
        Waiter waiter;
        uint64_t deadline;
        sd_event_source *deadline_source;
        char wait_op[OPERATION_ID_LEN + 1];
        bool rerun;          /* parked until a sandbox woke up: route it again when resumed */
        int wait_kind;
        /* REQUEST_UPLOAD: the process whose stdin gets the body, looked up by pid for every chunk; `upload` is
         * set only while the request waits for credit. */
        char upload_sandbox[SANDBOX_ID_LEN + 1];
        int upload_pid;
        Process *upload;
        bool upload_failed;
        /* Set by process.c for SSE streams so a finished request can detach from its process. */
        Process *stream;
        /* A file operation this request runs (files.c). */
        FileXfer *file;
};

/* unix_fd: the API socket (peer credentials); tcp_fd: the TCP listener (API keys), or -1. */
int http_new(Manager *m, int unix_fd, int tcp_fd, Http **ret);
Http *http_free(Http *h);
Manager *http_manager(Http *h);
Auth *http_auth(Http *h);
/* "http://127.0.0.1:PORT" of the TCP listener, or NULL without one. */
const char *http_api_url(Http *h);
/* For long-lived responses (SSE): exempts the connection from the TCP idle timeout. Done automatically for
 * requests that set Request.stream. */
void http_set_streaming(Request *r);

int http_respond_json(Request *r, unsigned status, cJSON *body);  /* takes ownership of body */
/* {"code", "message"} with the code's HTTP status (core/error.h). */
int http_respond_error(Request *r, ErrorCode code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int http_respond_empty(Request *r, unsigned status);
const char *http_query(Request *r, const char *key);
const char *http_header(Request *r, const char *key);

/* Suspends the request until the waiter list is woken or the deadline passes; the route handler runs
 * again then. */
int http_wait_on(Request *r, Waiter **list, uint64_t deadline_usec);
/* For streaming responses and uploads. */
void http_suspend(Request *r);
void http_resume(Request *r);

/* api.c */
void api_route(Request *r);
/* Decides, from the URL of a request that has just started, whether its body is streamed. */
void api_classify(Request *r);
/* Uploads: hands body bytes to the process; returns how many it took (0 = suspend until credit). */
size_t api_upload(Request *r, const char *data, size_t n);
