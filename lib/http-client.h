/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The client side of spaced's HTTP API (spaced/API.md), used by spacectl: libcurl over the daemon's unix
 * socket (or TCP with an API key), JSON requests and replies through cJSON, an incremental parser for
 * text/event-stream bodies, and a stream runner that drives one SSE response and any number of small
 * requests at once (stdin chunks, signals) on one curl multi handle.
 *
 * Nothing here prints. Functions return 0 or -errno; transport failures map to -ENOENT / -ECONNREFUSED
 * (nobody listening), -ETIMEDOUT, -EINTR (cancelled), -EPERM (another user listens on the unix socket; see
 * space_http_peer_uid()), -EPROTO (anything else; see space_http_last_error()).
 */

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "error-code.h"

/* Caps on what a reply may make the client hold. */
#define SPACE_HTTP_REPLY_MAX (64U * 1024U * 1024U)
#define SPACE_SSE_EVENT_MAX (16U * 1024U * 1024U)

typedef struct SpaceHttp SpaceHttp;

/* Picks the target from the environment: $SPACE_API_URL selects TCP (with "Authorization: Bearer
 * $SPACE_API_KEY" when that is set), otherwise the unix socket at space_socket_path(). */
int space_http_new(SpaceHttp **ret);
/* The unix socket at socket_path, whatever the environment says (spaced talking to itself). */
int space_http_new_unix(const char *socket_path, SpaceHttp **ret);
SpaceHttp *space_http_free(SpaceHttp *h);
static inline void space_http_freep(SpaceHttp **h) {
        if (*h)
                space_http_free(*h);
}
#define _cleanup_space_http_ __attribute__((cleanup(space_http_freep)))

/* The unix socket path, or NULL when talking TCP. */
const char *space_http_socket_path(const SpaceHttp *h);
/* The socket path or the base URL, for messages. */
const char *space_http_endpoint(const SpaceHttp *h);
/* libcurl's description of the last transport failure, "" if none. */
const char *space_http_last_error(const SpaceHttp *h);
/* After -EPERM: the unix socket's peer (the process that listens there) runs as this uid, neither ours nor
 * root's. Every connection over the unix socket is checked so: a neighbour who got the socket's path first
 * would otherwise receive our requests and make up the answers. */
uid_t space_http_peer_uid(const SpaceHttp *h);
/* 0 when the peer of the connected unix socket fd is our own user or root, -EPERM when it is someone else
 * (ret_uid, may be NULL, gets who), or getsockopt's -errno. */
int space_socket_peer_check(int fd, uid_t *ret_uid);
/* Any transfer of this handle (and of its streams) aborts with -EINTR once *flag is non-zero. */
void space_http_set_cancel(SpaceHttp *h, volatile sig_atomic_t *flag);
/* True for the errors that mean "no daemon is listening there". */
bool space_http_error_is_unreachable(int r);

/* URL-escapes one path segment or query value. */
int space_http_escape(const char *s, char **ret);

typedef struct SpaceHttpReply {
        long status;            /* HTTP status */
        cJSON *json;            /* parsed body; NULL when empty or not JSON */
        char *error_code;       /* status >= 400: "code" of the error body, or "http_<status>" */
        ErrorCode error;        /* error_code read once (error_code_from_name()): ERROR_NONE if none of ours */
        char *error_message;    /* status >= 400: "message" of the error body, or a generic one */
} SpaceHttpReply;

void space_http_reply_done(SpaceHttpReply *r);
static inline bool space_http_reply_ok(const SpaceHttpReply *r) {
        return r->status >= 200 && r->status < 300;
}

/* One request. body (may be NULL) is sent as application/json. Returns 0 whenever an HTTP response arrived,
 * whatever its status: check ret->status. */
int space_http_call(SpaceHttp *h, const char *method, const char *path, const cJSON *body, SpaceHttpReply *ret);
/* Same with a raw body of the given content type. */
int space_http_call_raw(SpaceHttp *h, const char *method, const char *path, const char *content_type,
                        const void *body, size_t len, SpaceHttpReply *ret);

/*
 * Streamed bodies (files): nothing is held whole. An upload pulls its body from read() (bytes into buf, 0 at
 * the end, < 0 = -errno to abort, which is then returned); with size < 0 it is sent chunked. It asks with
 * "Expect: 100-continue", so an error the daemon knows from the headers comes before the body is sent; its
 * reply is in ret as for space_http_call(). A
 * download hands a 2xx body to write() as it arrives (< 0 aborts and is returned) after on_header() (may be
 * NULL) saw each response header; any other status fills ret's error fields. A body the daemon cuts short
 * (an unterminated chunked response) is -EPROTO.
 */
typedef ssize_t (*SpaceHttpReadFn)(void *buf, size_t max, void *userdata);
typedef int (*SpaceHttpWriteFn)(const void *buf, size_t n, void *userdata);
typedef int (*SpaceHttpHeaderFn)(const char *name, const char *value, void *userdata);

int space_http_upload(SpaceHttp *h, const char *method, const char *path, int64_t size, SpaceHttpReadFn read,
                      void *userdata, SpaceHttpReply *ret);
int space_http_download(SpaceHttp *h, const char *path, SpaceHttpHeaderFn on_header, SpaceHttpWriteFn write,
                        void *userdata, SpaceHttpReply *ret);
/* A POST of body (JSON; may be NULL) whose reply is handled as a download's: a 2xx body goes to write() as it
 * arrives, any other status fills ret's error fields. For answers that stream for long (a code interpreter's
 * lines of output): timeout_sec > 0 bounds the whole transfer, which then fails with -ETIMEDOUT (what write()
 * was given so far stays given). */
int space_http_post_streamed(SpaceHttp *h, const char *path, const cJSON *body, long timeout_sec,
                             SpaceHttpWriteFn write, void *userdata, SpaceHttpReply *ret);

/*
 * text/event-stream parser (WHATWG rules: LF, CRLF or CR line ends, "data" lines joined with LF, "event"
 * resets after each dispatch, "id" persists, ':' comments, events without data are not dispatched). Feed it
 * the body as it arrives, in pieces of any size. The handler's negative return stops parsing and is
 * returned from feed(). An event whose data exceeds SPACE_SSE_EVENT_MAX fails with -E2BIG.
 */
typedef struct SpaceSseParser SpaceSseParser;
typedef int (*SpaceSseHandler)(const char *event, const char *data, size_t data_len, const char *id,
                               void *userdata);

int space_sse_parser_new(SpaceSseHandler handler, void *userdata, SpaceSseParser **ret);
SpaceSseParser *space_sse_parser_free(SpaceSseParser *p);
int space_sse_parser_feed(SpaceSseParser *p, const void *buf, size_t len);
/* The last event id seen (for Last-Event-ID), or NULL. */
const char *space_sse_parser_last_id(const SpaceSseParser *p);

/*
 * A streaming request: POSTs body (JSON) to path and parses the text/event-stream reply, calling on_event
 * for each event, while it also
 *   - polls watched fds (e.g. stdin, a signal self-pipe) and calls their handler when readable, and
 *   - runs queued requests (space_stream_post()) concurrently, calling their done callback.
 * Callbacks may queue requests and (un)watch fds. Handlers returning < 0 end space_stream_run() with that.
 */
typedef struct SpaceStream SpaceStream;
typedef int (*SpaceStreamFdHandler)(SpaceStream *s, int fd, void *userdata);
/* r < 0: transport failure; otherwise see reply->status. */
typedef void (*SpaceStreamPostDone)(SpaceStream *s, int r, const SpaceHttpReply *reply, void *userdata);

int space_stream_new(SpaceHttp *h, const char *path, const cJSON *body, SpaceSseHandler on_event,
                     void *userdata, SpaceStream **ret);
/* The same for a GET of an existing stream (attach, logs): no body; last_event_id (may be NULL) is sent as
 * Last-Event-ID so only later events come; bearer (may be NULL) authenticates with that token (a session's
 * attach token) instead of $SPACE_API_KEY. -EINVAL when either holds a line break. */
int space_stream_new_get(SpaceHttp *h, const char *path, const char *last_event_id, const char *bearer,
                         SpaceSseHandler on_event, void *userdata, SpaceStream **ret);
SpaceStream *space_stream_free(SpaceStream *s);
static inline void space_stream_freep(SpaceStream **s) {
        if (*s)
                space_stream_free(*s);
}
#define _cleanup_space_stream_ __attribute__((cleanup(space_stream_freep)))

int space_stream_watch_fd(SpaceStream *s, int fd, SpaceStreamFdHandler handler, void *userdata);
int space_stream_unwatch_fd(SpaceStream *s, int fd);
/* Queues a POST of a copy of body (content_type NULL: no body). done may be NULL. */
int space_stream_post(SpaceStream *s, const char *path, const char *content_type, const void *body, size_t len,
                      SpaceStreamPostDone done, void *userdata);
/* Makes space_stream_run() return r (< 0) once the current callback returns; for callbacks that cannot
 * return an error themselves (done callbacks). The first call wins. */
void space_stream_stop(SpaceStream *s, int r);
/* Number of queued or running requests. */
unsigned space_stream_pending(const SpaceStream *s);
/* Runs until the streamed response ends. Returns 0 then, with ret->status set (and the error fields when the
 * daemon refused with a JSON error instead of a stream); < 0 on transport or handler failure. Requests still
 * running when the stream ends are abandoned. */
int space_stream_run(SpaceStream *s, SpaceHttpReply *ret);
