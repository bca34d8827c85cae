/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* libmicrohttpd inside the sd-event loop (the systemd-journal-remote model): MHD keeps its own epoll set,
 * whose fd we watch; streaming responses suspend their connection while they have nothing to send. */

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

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

/* After a 101 answer (http_respond_upgrade()) the connection is no longer HTTP: upgraded gets the client's
 * socket (read and write it, shut it down, never close it) and the bytes the client sent after its request
 * (extra, n: they come before anything read from fd). The handler owns the connection from then on and hands
 * it back with http_upgrade_close(); the request ends (r->stream.detach) soon after. */
typedef void (*HttpUpgraded)(void *userdata, Request *r, int fd, const char *extra, size_t n);

/* How a route's errors look (the same ErrorCode, the same message): the native API's {"code": "name"}, E2B's
 * control plane and envd REST {"code": <HTTP status>} (its SDKs parse that), or Connect RPC's
 * {"code": "not_found"} with the status Connect gives that code. Set from the route before anything is
 * answered, so every helper that answers errors speaks the route's dialect. */
typedef enum ErrorStyle {
        ERROR_STYLE_NATIVE,
        ERROR_STYLE_E2B,
        ERROR_STYLE_CONNECT,
        /* A Connect server stream: 200 and an end-of-stream envelope carrying the error, since the JS SDK
         * ignores the body of any other status on a stream and guesses the code from the status. */
        ERROR_STYLE_CONNECT_STREAM,
} ErrorStyle;

/* A streaming response body, fed by a subsystem object (a process's SSE client, a file download) through the
 * route handler's adapter: the object knows nothing of HTTP. */
#define HTTP_STREAM_END ((ssize_t) -1)   /* the body is complete */
#define HTTP_STREAM_ERROR ((ssize_t) -2) /* cut short: the client sees the transfer fail, not a truncated body */
typedef struct HttpStream {
        /* Up to max bytes into buf: how many, HTTP_STREAM_END or HTTP_STREAM_ERROR; 0 = nothing now, the
         * request is suspended until http_resume() (the object wakes the waiter the handler gave it). NULL for
         * a request that only waits. */
        ssize_t (*read)(void *userdata, char *buf, size_t max);
        /* The request ends (answered, or the client went away): r is not to be used after this. */
        void (*detach)(void *userdata, Request *r);
        /* Optional: the response body will not be read again; it may outlive the request. */
        void (*release)(void *userdata);
        void *userdata;
} HttpStream;

/* A request body streamed to a subsystem object as it arrives (process stdin, a file upload). */
/* What a parked handler does once what it waited for came (an operation, a channel object's answer). */
typedef void (*HttpContinuation)(Request *r, void *userdata);

typedef struct HttpUpload {
        /* Takes body bytes: returns how many (fewer than n: the request is suspended until http_resume()). It
         * sets r->upload_failed when the rest of the body is to be dropped. */
        size_t (*write)(void *userdata, Request *r, const char *data, size_t n);
        void (*detach)(void *userdata, Request *r);
        void *userdata;
} HttpUpload;

struct Request {
        Http *http;
        struct MHD_Connection *connection;
        const char *method;
        const char *url;
        const char *version;   /* "HTTP/1.1" */
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
        char host_sandbox[SANDBOX_ID_LEN + 1];   /* the sandbox a PORT-ID.DOMAIN Host names, else "" */
        unsigned host_port;     /* that PORT when it is not envd's: the request goes to the sandbox's server */
        ErrorStyle error_style;
        bool authenticated;
        char key_id[API_KEY_ID_LEN + 1];
        bool streaming;   /* the idle timeout is off for this connection */
        uint64_t drained; /* body bytes dropped after an early answer */
        /* While parked on a waiter (http_wait_on()); deadline in monotonic usec (the native long poll's). */
        Waiter waiter;
        uint64_t deadline;
        sd_event_source *deadline_source;
        char wait_op[OPERATION_ID_LEN + 1];
        HttpContinuation cont; /* parked with http_continue(): runs instead of the route when resumed */
        void *cont_userdata;
        int wait_kind;
        /* REQUEST_UPLOAD: where the body goes; upload_failed: the rest of it is dropped (the handler says why). */
        HttpUpload upload;
        bool upload_failed;
        sd_event_source *peer_check; /* while an upload's body comes: whether its client went away */
        /* What the request serves or waits for (a process stream, a file transfer): detached when it ends. */
        HttpStream stream;
        struct StreamBody *body_reader; /* the live streaming response, if any */
        /* A 101 answer: who takes the connection, and MHD's handle on it once taken. */
        HttpUpgraded upgraded;
        void *upgraded_userdata;
        struct MHD_UpgradeResponseHandle *upgrade;
};

/* unix_fd: the API socket (peer credentials); tcp_fd: the TCP listener (API keys), or -1. */
int http_new(Manager *m, int unix_fd, int tcp_fd, Http **ret);
Http *http_free(Http *h);
Manager *http_manager(Http *h);
Auth *http_auth(Http *h);
/* "http://127.0.0.1:PORT" of the TCP listener, or NULL without one. */
const char *http_api_url(Http *h);
/* The TCP API's port, 0 without one: the port no sandbox may reach (the egress gateway's self_port). */
uint16_t http_api_port(Http *h);
/* The TLS listener (e2b_tls_listen): the same router, API keys and Host checks as TCP, over TLS with the
 * certificates of files (taken, core/tls.h). domain: the e2b_domain to serve while the configuration names
 * none ("space.localhost:PORT"), or NULL. */
typedef struct TlsFiles TlsFiles;
int http_add_tls_listener(Http *h, int fd, const char *domain, TlsFiles *files);
/* "https://127.0.0.1:PORT" of the TLS listener and its port, or NULL and 0 without one. */
const char *http_tls_url(Http *h);
uint16_t http_tls_port(Http *h);
/* The local CA's certificate and the bundle of the host's CAs and ours (SSL_CERT_FILE), NULL without TLS. */
const char *http_tls_ca_file(Http *h);
const char *http_tls_ca_bundle(Http *h);
/* The e2b_domain in force: the configured one, else the TLS listener's default, else NULL. What create and
 * connect answer as `domain`, on every listener, and the DOMAIN of api.DOMAIN and PORT-ID.DOMAIN hosts. */
const char *http_e2b_domain(Http *h);
/* Whether Host is api.DOMAIN[:listen_port] (DOMAIN's own :port ignored): E2B's control plane by name. */
bool http_host_api(const char *host, const char *domain, unsigned listen_port);
/* Whether a TCP request's Host header (NAME[:PORT]) names the listener bound to listen_host (numeric, as
 * inet_ntop gives it) and port: localhost, 127.0.0.1, [::1] or listen_host, with the port (which only port 80
 * may leave out). The one place that decides which names a listener answers to. */
bool http_host_allowed(const char *host, const char *listen_host, unsigned port);
/* E2B's sandbox host names: Host is PORT-SANDBOXID.DOMAIN[:listen_port], DOMAIN the configured e2b_domain (its
 * own :port ignored). 1 with the port and the id, 0 when host is not one. Port HTTP_E2B_ENVD_PORT is envd,
 * served here; other ports would be the sandbox's own servers. */
#define HTTP_E2B_ENVD_PORT 49983
int http_host_sandbox(const char *host, const char *domain, unsigned listen_port, unsigned *ret_port,
                      char ret_id[static SANDBOX_ID_LEN + 1]);
/* For long-lived responses (SSE): exempts the connection from the TCP idle timeout. Done automatically for
 * requests answered with http_respond_stream(). */
void http_set_streaming(Request *r);
/* For a long-lived response that bounds its own idleness (the port proxy's): MHD closes the connection after
 * sec seconds without a byte sent or received, on either listener. Call it while the request is not
 * suspended (right after answering). It stays for the connection's later requests. */
void http_set_idle_timeout(Request *r, unsigned sec);

int http_respond_json(Request *r, unsigned status, cJSON *body);  /* takes ownership of body */
/* {"code", "message"} with the code's HTTP status (core/error.h), in the route's ErrorStyle. */
int http_respond_error(Request *r, ErrorCode code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int http_respond_empty(Request *r, unsigned status);
/* Answers 200 with a chunked body read from r->stream (set it first); headers: name, value, ..., NULL. */
int http_respond_stream(Request *r, const char *const *headers);
/* The same with another status and, unless HTTP_SIZE_UNKNOWN, a body of size bytes (a reverse proxy's answer). */
#define HTTP_SIZE_UNKNOWN UINT64_MAX
int http_respond_stream_status(Request *r, unsigned status, uint64_t size, const char *const *headers);
/* Answers 101 Switching Protocols with headers (name, value, ..., NULL; an Upgrade among them) and, once the
 * head is sent, hands the connection to upgraded. -EPROTONOSUPPORT for a request that is not HTTP/1.1. */
int http_respond_upgrade(Request *r, const char *const *headers, HttpUpgraded upgraded, void *userdata);
/* The upgraded connection is done: MHD closes the client's socket and ends the request. */
void http_upgrade_close(Request *r);
/* Detaches r from what it serves (calls r->stream.detach) and forgets it. */
void http_stream_detach(Request *r);
const char *http_query(Request *r, const char *key);
const char *http_header(Request *r, const char *key);
/* The body's declared size (Content-Length, decimal): 0, or -ENODATA when there is none or it is not a number
 * (a chunked body). For refusing a body by its size before it is read. */
int http_content_length(Request *r, uint64_t *ret);

/* Parks r on the waiter list until it is woken or the deadline passes; then k(r, userdata) runs, as after
 * http_continue(). On error (< 0) nothing is armed and k never runs. */
int http_wait_on(Request *r, Waiter **list, uint64_t deadline_usec, HttpContinuation k, void *userdata);
/* Parks the request; when it is resumed (http_resume(), by whatever it waits for) k(r, userdata) runs
 * instead of the route handler, once: to wait on, k calls http_continue() again. userdata is not owned and
 * must live as long as r (r->stream's, say). A request that ends while parked is freed without calling k. */
void http_continue(Request *r, HttpContinuation k, void *userdata);
/* For streaming responses and uploads. */
void http_suspend(Request *r);
void http_resume(Request *r);

/* A sandbox by id, unique id prefix or name; answers 404 (or 400 for an ambiguous prefix) itself. */
int resolve_sandbox(Request *r, const char *ref, Sandbox **ret);
