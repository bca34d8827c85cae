/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* libmicrohttpd inside the sd-event loop (the systemd-journal-remote model): MHD keeps its own epoll set,
 * whose fd we watch; streaming responses suspend their connection while they have nothing to send. */

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <stdbool.h>

#include "manager.h"

#define HTTP_BODY_MAX (1024 * 1024)

typedef enum RequestKind {
        REQUEST_JSON,      /* body collected (bounded), then routed */
        REQUEST_UPLOAD,    /* body streamed to a handler as it arrives (process stdin) */
} RequestKind;

typedef struct Request Request;

struct Waiter {
        Request *request;
        Waiter **list;
        Waiter *prev, *next;
};

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
        /* Long-poll (?wait=): while suspended on a waiter, deadline in monotonic usec. */
        Waiter waiter;
        uint64_t deadline;
        sd_event_source *deadline_source;
        char wait_op[OPERATION_ID_LEN + 1];
        int wait_kind;
        /* REQUEST_UPLOAD: the process whose stdin gets the body, looked up by pid for every chunk; `upload` is
         * set only while the request waits for credit. */
        char upload_sandbox[SANDBOX_ID_LEN + 1];
        int upload_pid;
        Process *upload;
        bool upload_failed;
        /* Set by process.c for SSE streams so a finished request can detach from its process. */
        Process *stream;
};

int http_new(Manager *m, int listen_fd, Http **ret);
Http *http_free(Http *h);
Manager *http_manager(Http *h);

int http_respond_json(Request *r, unsigned status, cJSON *body);  /* takes ownership of body */
int http_respond_error(Request *r, unsigned status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
int http_respond_empty(Request *r, unsigned status);
const char *http_query(Request *r, const char *key);
const char *http_header(Request *r, const char *key);

/* Suspends the request until the waiter list is woken or the deadline passes; the route handler runs
 * again then. */
int http_wait_on(Request *r, Waiter **list, uint64_t deadline_usec);
void http_wake_waiters(Waiter **list);
/* For streaming responses and uploads. */
void http_suspend(Request *r);
void http_resume(Request *r);

/* api.c */
void api_route(Request *r);
/* Decides, from the URL of a request that has just started, whether its body is streamed. */
void api_classify(Request *r);
/* Uploads: hands body bytes to the process; returns how many it took (0 = suspend until credit). */
size_t api_upload(Request *r, const char *data, size_t n);
