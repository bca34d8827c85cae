/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include <unistd.h>

#include "http/http.h"
#include "http/router.h"
#include "core/tls.h"
#include "sandbox/sandbox.h"
#include "core/log.h"
#include "macro.h"
#include "core/util.h"

/* MHD takes one listen socket per daemon: one daemon for the unix socket, one for TCP and one for TLS, sharing
 * the access handler; each has its own epoll fd and timer in the event loop. */
typedef struct Listener {
        Http *http;
        struct MHD_Daemon *daemon;
        sd_event_source *io;
        sd_event_source *timer;
        bool tcp;
        bool tls;               /* TCP with TLS (e2b_tls_listen): the same API, API keys and Host checks */
        /* TCP: the address and port it is bound to, for the Host check */
        char host[INET6_ADDRSTRLEN];
        unsigned port;
} Listener;

struct Http {
        Manager *manager;
        Auth *auth;
        Listener listeners[3];
        unsigned n_listeners;
        sd_event_source *kick;
        char *api_url;
        /* TLS: its URL, the e2b_domain it serves when none is configured, and its certificates (MHD reads the PEM
         * it is given for as long as it runs) */
        char *tls_url;
        char *tls_domain;
        TlsFiles tls;
};

Manager *http_manager(Http *h) {
        return h->manager;
}

Auth *http_auth(Http *h) {
        return h->auth;
}

const char *http_api_url(Http *h) {
        return h->api_url;
}

static uint16_t url_port(const char *url) {
        const char *colon = url ? strrchr(url, ':') : NULL;
        unsigned long p = colon ? strtoul(colon + 1, NULL, 10) : 0;

        return p <= 65535 ? (uint16_t) p : 0;
}

uint16_t http_api_port(Http *h) {
        return url_port(h->api_url);
}

const char *http_tls_url(Http *h) {
        return h->tls_url;
}

uint16_t http_tls_port(Http *h) {
        return url_port(h->tls_url);
}

const char *http_tls_ca_file(Http *h) {
        return h->tls.ca_file;
}

const char *http_tls_ca_bundle(Http *h) {
        return h->tls.ca_bundle;
}

const char *http_e2b_domain(Http *h) {
        return h->manager->config.e2b_domain ?: h->tls_domain;
}

static void listener_run(Listener *l);

static int on_kick(sd_event_source *s, void *userdata) {
        Http *h = userdata;

        for (unsigned i = 0; i < h->n_listeners; i++)
                listener_run(&h->listeners[i]);
        return 0;
}

/* MHD must run after a resume so the connection is handled promptly; a defer source batches that. */
static void http_schedule(Http *h) {
        (void) sd_event_source_set_enabled(h->kick, SD_EVENT_ONESHOT);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        listener_run(userdata);
        return 0;
}

static void listener_run(Listener *l) {
        MHD_UNSIGNED_LONG_LONG timeout;

        MHD_run(l->daemon);
        if (MHD_get_timeout(l->daemon, &timeout) == MHD_YES && timeout == 0)
                /* MHD has more to do right away (the next step of a response): run again, no timer */
                http_schedule(l->http);
        else if (MHD_get_timeout(l->daemon, &timeout) == MHD_YES) {
                uint64_t now;
                sd_event_now(l->http->manager->event, CLOCK_MONOTONIC, &now);
                (void) sd_event_source_set_time(l->timer, now + timeout * 1000ULL);
                (void) sd_event_source_set_enabled(l->timer, SD_EVENT_ONESHOT);
        } else
                (void) sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        listener_run(userdata);
        return 0;
}

/* A streaming response's link to its request: MHD may let the response go after the request. */
typedef struct StreamBody {
        Request *request;            /* NULL once the request is gone */
        HttpStream stream;
} StreamBody;

void http_stream_detach(Request *r) {
        HttpStream s = r->stream;

        r->stream = (HttpStream) {};
        if (s.detach)
                s.detach(s.userdata, r);
}

static void request_free(Request *r) {
        HttpUpload u;

        if (!r)
                return;
        waiter_unlink(&r->waiter);
        sd_event_source_disable_unref(r->deadline_source);
        sd_event_source_disable_unref(r->peer_check);
        if (r->body_reader)
                r->body_reader->request = NULL;
        http_stream_detach(r);
        u = r->upload;
        r->upload = (HttpUpload) {};
        if (u.detach)
                u.detach(u.userdata, r);
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

void http_continue(Request *r, HttpContinuation k, void *userdata) {
        r->cont = k;
        r->cont_userdata = userdata;
        http_suspend(r);
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

/* The operation finished: the request is resumed, and its continuation runs. */
static void on_waiter_wake(Waiter *w) {
        Request *r = container_of(w, Request, waiter);

        r->deadline_source = sd_event_source_disable_unref(r->deadline_source);
        http_resume(r);
}

int http_wait_on(Request *r, Waiter **list, uint64_t deadline_usec, HttpContinuation k, void *userdata) {
        int q;

        r->waiter.wake = on_waiter_wake;
        waiter_add(list, &r->waiter);
        r->deadline = deadline_usec;
        r->deadline_source = sd_event_source_disable_unref(r->deadline_source);
        q = sd_event_add_time(r->http->manager->event, &r->deadline_source, CLOCK_MONOTONIC, deadline_usec, 1000,
                              on_deadline, r);
        if (q < 0) {
                waiter_unlink(&r->waiter);
                return q;
        }
        http_continue(r, k, userdata);
        return 0;
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

/* The whole body of a Connect stream that ends before it began: one end-of-stream envelope (flags 0x02, a
 * big-endian length, the JSON). Takes o. */
static int respond_end_stream(Request *r, cJSON *o) {
        _cleanup_free_ char *text = cJSON_PrintUnformatted(o);
        struct MHD_Response *resp;
        uint8_t *body;
        size_t n;

        cJSON_Delete(o);
        if (!text)
                return -ENOMEM;
        n = strlen(text);
        body = malloc(n + 5);
        if (!body)
                return -ENOMEM;
        body[0] = 0x02;
        body[1] = (uint8_t) (n >> 24);
        body[2] = (uint8_t) (n >> 16);
        body[3] = (uint8_t) (n >> 8);
        body[4] = (uint8_t) n;
        memcpy(body + 5, text, n);
        resp = MHD_create_response_from_buffer(n + 5, body, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(body);
                return -ENOMEM;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/connect+json");
        return queue(r, MHD_HTTP_OK, resp);
}

int http_respond_error(Request *r, ErrorCode code, const char *fmt, ...) {
        cJSON *o = cJSON_CreateObject();
        unsigned status = error_code_http_status(code);
        char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        switch (r->error_style) {
        case ERROR_STYLE_E2B:
                cJSON_AddNumberToObject(o, "code", status);
                break;
        case ERROR_STYLE_CONNECT:
                cJSON_AddStringToObject(o, "code", connect_code_to_string(error_code_connect(code)));
                status = connect_code_status(error_code_connect(code));
                break;
        case ERROR_STYLE_CONNECT_STREAM: {
                cJSON *e = cJSON_AddObjectToObject(o, "error");

                cJSON_AddStringToObject(e, "code", connect_code_to_string(error_code_connect(code)));
                cJSON_AddStringToObject(e, "message", msg ?: error_code_to_string(code));
                free(msg);
                return respond_end_stream(r, o);
        }
        default:
                cJSON_AddStringToObject(o, "code", error_code_to_string(code));
        }
        cJSON_AddStringToObject(o, "message", msg ?: error_code_to_string(code));
        free(msg);
        return http_respond_json(r, status, o);
}

static int respond_unauthorized(Request *r, ErrorCode code, const char *message) {
        _cleanup_free_ char *text = NULL;
        struct MHD_Response *resp;
        cJSON *o = cJSON_CreateObject();

        if (r->error_style == ERROR_STYLE_E2B)
                cJSON_AddNumberToObject(o, "code", error_code_http_status(code));
        else
                cJSON_AddStringToObject(o, "code", r->error_style == ERROR_STYLE_CONNECT ||
                                                                   r->error_style == ERROR_STYLE_CONNECT_STREAM
                                                           ? connect_code_to_string(error_code_connect(code))
                                                           : error_code_to_string(code));
        cJSON_AddStringToObject(o, "message", message);
        text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!text)
                return -ENOMEM;
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return -ENOMEM;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"space\"");
        return queue(r, error_code_http_status(code), resp);
}

int http_respond_empty(Request *r, unsigned status) {
        return queue(r, status, MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT));
}

static ssize_t stream_body_read(void *cls, uint64_t pos, char *buf, size_t max) {
        StreamBody *b = cls;
        ssize_t n = b->stream.read(b->stream.userdata, buf, max);

        if (n == HTTP_STREAM_END)
                return MHD_CONTENT_READER_END_OF_STREAM;
        if (n < 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        if (n == 0 && b->request)
                http_suspend(b->request);
        return n;
}

static void stream_body_free(void *cls) {
        StreamBody *b = cls;

        if (b->request)
                b->request->body_reader = NULL;
        if (b->stream.release)
                b->stream.release(b->stream.userdata);
        free(b);
}

int http_respond_stream(Request *r, const char *const *headers) {
        return http_respond_stream_status(r, MHD_HTTP_OK, HTTP_SIZE_UNKNOWN, headers);
}

int http_respond_stream_status(Request *r, unsigned status, uint64_t size, const char *const *headers) {
        struct MHD_Response *resp;
        StreamBody *b;
        int q;

        assert(r->stream.read);
        b = calloc(1, sizeof *b);
        if (!b)
                return -ENOMEM;
        b->request = r;
        b->stream = r->stream;
        resp = MHD_create_response_from_callback(size == HTTP_SIZE_UNKNOWN ? MHD_SIZE_UNKNOWN : size, 64 * 1024,
                                                 stream_body_read, b, stream_body_free);
        if (!resp) {
                free(b);
                return -ENOMEM;
        }
        r->body_reader = b;
        for (const char *const *h = headers; h && h[0] && h[1]; h += 2)
                MHD_add_response_header(resp, h[0], h[1]);
        q = queue(r, status, resp);
        http_set_streaming(r);
        return q;
}

/* MHD sent the 101 head: the connection is the handler's now (MHD keeps it suspended until it is closed). */
static void on_upgrade(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in, size_t extra_in_size,
                       MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
        Request *r = con_cls;

        if (!r || !r->upgraded) {
                (void) MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
                return;
        }
        r->upgrade = urh;
        r->upgraded(r->upgraded_userdata, r, sock, extra_in, extra_in_size);
}

int http_respond_upgrade(Request *r, const char *const *headers, HttpUpgraded upgraded, void *userdata) {
        struct MHD_Response *resp;
        enum MHD_Result q;

        /* MHD refuses an upgrade on anything else, and HTTP/1.0 has no Upgrade */
        if (!r->version || !streq(r->version, MHD_HTTP_VERSION_1_1))
                return -EPROTONOSUPPORT;
        resp = MHD_create_response_for_upgrade(on_upgrade, NULL); /* it says "Connection: Upgrade" itself */
        if (!resp)
                return -ENOMEM;
        for (const char *const *h = headers; h && h[0] && h[1]; h += 2)
                MHD_add_response_header(resp, h[0], h[1]);
        r->upgraded = upgraded;
        r->upgraded_userdata = userdata;
        q = MHD_queue_response(r->connection, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
        MHD_destroy_response(resp);
        if (q != MHD_YES) {
                r->upgraded = NULL;
                return -EIO;
        }
        r->responded = true;
        return 0;
}

void http_upgrade_close(Request *r) {
        struct MHD_UpgradeResponseHandle *urh = TAKE_PTR(r->upgrade);

        if (!urh)
                return;
        /* a resume in MHD's eyes: the next run closes the socket and completes the request */
        (void) MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        http_schedule(r->http);
}

const char *http_query(Request *r, const char *key) {
        return MHD_lookup_connection_value(r->connection, MHD_GET_ARGUMENT_KIND, key);
}

const char *http_header(Request *r, const char *key) {
        return MHD_lookup_connection_value(r->connection, MHD_HEADER_KIND, key);
}

int http_content_length(Request *r, uint64_t *ret) {
        const char *v = http_header(r, "Content-Length");
        unsigned long long n;
        char *end;

        if (!v)
                return -ENODATA;
        errno = 0;
        n = strtoull(v, &end, 10);
        if (errno != 0 || end == v || *end != 0)
                return -ENODATA;
        *ret = n;
        return 0;
}

/* The unix socket is the user's own; still, only the same uid (or root) may talk to it. */
static bool peer_allowed(Request *r) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->connection,
                                                                     MHD_CONNECTION_INFO_CONNECTION_FD);
        struct ucred cred;
        socklen_t len = sizeof cred;

        if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return false;
        return cred.uid == getuid() || cred.uid == 0;
}

/* The API key of a TCP request: "Authorization: Bearer KEY" or "X-API-Key: KEY" (MHD compares header names
 * case-insensitively). */
static const char *request_api_key(Request *r) {
        const char *v = http_header(r, "X-API-Key");

        if (v && *v)
                return v;
        v = http_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
        if (!v || strncasecmp(v, "Bearer", 6) != 0 || !isblank((unsigned char) v[6]))
                return NULL;
        v += 6;
        while (isblank((unsigned char) *v))
                v++;
        return *v ? v : NULL;
}

/* Decides, before any body is read and before anything is looked up, whether a TCP request may go on. The
 * answer depends only on the key: an unknown path, an unknown sandbox and a known one get the same 401, so
 * that no one without a key learns what exists. */
static bool authenticate_tcp(Request *r, const Route *rt) {
        const char *key = request_api_key(r);
        ApiKey *k;

        if (key && auth_verify(r->http->auth, key, now_unix(), &k) >= 0) {
                r->authenticated = true;
                memcpy(r->key_id, k->id, sizeof r->key_id);
                return true;
        }
        if (rt && rt->auth != ROUTE_AUTH_KEY)
                return true; /* public, or the handler checks its own token (and says as little) */
        if (key)
                log_info("refused a TCP request for %s %s: unknown or revoked API key", r->method, r->url);
        respond_unauthorized(r, ERROR_UNAUTHORIZED,
                             key ? "the API key is not valid (unknown, revoked or malformed); create one with "
                                   "'spacectl key create' and send it as 'Authorization: Bearer KEY' or "
                                   "'X-API-Key: KEY'"
                                 : "this request needs an API key: create one with 'spacectl key create' and "
                                   "send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'");
        return false;
}

/* Compares host[0..n) with want, ASCII case-insensitively (host names are). */
static bool host_is(const char *host, size_t n, const char *want) {
        return strlen(want) == n && strncasecmp(host, want, n) == 0;
}

bool http_host_allowed(const char *host, const char *listen_host, unsigned port) {
        const char *colon;
        size_t name_len;
        bool v6 = listen_host && strchr(listen_host, ':');

        if (!host || !*host)
                return false;
        /* NAME[:PORT], where NAME may be a bracketed IPv6 address */
        if (host[0] == '[') {
                const char *close = strchr(host, ']');
                if (!close)
                        return false;
                name_len = (size_t) (close - host) + 1;
                colon = close[1] == ':' ? close + 1 : NULL;
                if (!colon && close[1])
                        return false;
        } else {
                colon = strchr(host, ':');
                name_len = colon ? (size_t) (colon - host) : strlen(host);
        }
        if (colon) {
                char *end;
                unsigned long p;

                if (colon[1] < '0' || colon[1] > '9')
                        return false; /* strtoul would take blanks and signs */
                errno = 0;
                p = strtoul(colon + 1, &end, 10);
                if (errno || *end || p != port)
                        return false;
        } else if (port != 80)
                return false; /* a browser names any other port */

        if (host_is(host, name_len, "localhost") || host_is(host, name_len, "127.0.0.1") ||
            host_is(host, name_len, "[::1]"))
                return true;
        if (listen_host && !v6 && host_is(host, name_len, listen_host))
                return true;
        if (listen_host && v6 && name_len == strlen(listen_host) + 2 && host[0] == '[' &&
            strncasecmp(host + 1, listen_host, name_len - 2) == 0)
                return true;
        return false;
}

int http_host_sandbox(const char *host, const char *domain, unsigned listen_port, unsigned *ret_port,
                      char ret_id[static SANDBOX_ID_LEN + 1]) {
        const char *dash, *dot, *name, *colon;
        size_t domain_len, name_len;
        unsigned long p;
        char *end;

        if (!host || !domain || !*domain || host[0] < '0' || host[0] > '9')
                return 0;
        domain_len = strcspn(domain, ":");
        errno = 0;
        p = strtoul(host, &end, 10);
        if (errno || *end != '-' || p == 0 || p > 65535)
                return 0;
        dash = end;
        /* exactly 32 lowercase hex digits, then the dot: the scan stops at a NUL before reading past it */
        for (size_t i = 1; i <= SANDBOX_ID_LEN; i++)
                if (!((dash[i] >= '0' && dash[i] <= '9') || (dash[i] >= 'a' && dash[i] <= 'f')))
                        return 0;
        dot = dash + 1 + SANDBOX_ID_LEN;
        if (*dot != '.')
                return 0;
        name = dot + 1;
        colon = strchr(name, ':');
        name_len = colon ? (size_t) (colon - name) : strlen(name);
        if (name_len != domain_len || strncasecmp(name, domain, domain_len) != 0)
                return 0;
        if (colon) {
                unsigned long lp;

                if (colon[1] < '0' || colon[1] > '9')
                        return 0;
                errno = 0;
                lp = strtoul(colon + 1, &end, 10);
                if (errno || *end || lp != listen_port)
                        return 0;
        } else if (listen_port != 80)
                return 0;
        memcpy(ret_id, dash + 1, SANDBOX_ID_LEN);
        ret_id[SANDBOX_ID_LEN] = 0;
        *ret_port = (unsigned) p;
        return 1;
}

bool http_host_api(const char *host, const char *domain, unsigned listen_port) {
        const char *colon;
        size_t domain_len, name_len;

        if (!host || !domain || !*domain || strncasecmp(host, "api.", 4) != 0)
                return false;
        host += 4;
        domain_len = strcspn(domain, ":");
        colon = strchr(host, ':');
        name_len = colon ? (size_t) (colon - host) : strlen(host);
        if (name_len != domain_len || strncasecmp(host, domain, domain_len) != 0)
                return false;
        if (colon) {
                unsigned long p;
                char *end;

                if (colon[1] < '0' || colon[1] > '9')
                        return false;
                errno = 0;
                p = strtoul(colon + 1, &end, 10);
                return !errno && !*end && p == listen_port;
        }
        return listen_port == 80;
}

/* A browser page from anywhere may make its name resolve to 127.0.0.1 (DNS rebinding) and then talk to us
 * as a same-origin site; it cannot make the Host header name us. The unix socket has no such neighbours. */
static bool host_ok(Listener *l, Request *r) {
        const char *host = http_header(r, MHD_HTTP_HEADER_HOST);
        const char *domain = http_e2b_domain(r->http);
        unsigned port;

        if (http_host_allowed(host, l->host, l->port))
                return true;
        /* api.DOMAIN is the control plane (E2B's SDKs given E2B_DOMAIN alone), as the listener's own names are */
        if (http_host_api(host, domain, l->port))
                return true;
        /* PORT-ID.DOMAIN names only the configured domain, which the user points at us */
        if (http_host_sandbox(host, domain, l->port, &port, r->host_sandbox) > 0) {
                /* any other port is the sandbox's own server, reached through the proxy (proxy/proxy.c) */
                if (port != HTTP_E2B_ENVD_PORT)
                        r->host_port = port;
                return true;
        }
        http_respond_error(r, ERROR_INVALID_HOST,
                           "this listener answers only to the names of its address (localhost:%u, 127.0.0.1:%u, "
                           "[::1]:%u or %s:%u), not to the Host header sent", l->port, l->port, l->port, l->host,
                           l->port);
        return false;
}

/* A declared body over the limit is refused before any of it is read (MHD then closes the connection). */
static bool body_size_ok(Request *r) {
        const char *v = http_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long n;
        char *end;

        if (!v || r->kind == REQUEST_UPLOAD)
                return true;
        errno = 0;
        n = strtoull(v, &end, 10);
        if (errno == 0 && end != v && *end == 0 && n <= HTTP_BODY_MAX)
                return true;
        http_respond_error(r, ERROR_PAYLOAD_TOO_LARGE,
                           "request body of %s bytes refused: JSON bodies are limited to %d bytes", v, HTTP_BODY_MAX);
        return false;
}

void http_set_streaming(Request *r) {
        /* MHD keeps suspended connections off its timeout lists: change the timeout only while active */
        if (r->streaming || r->suspended)
                return;
        r->streaming = true;
        if (r->tcp)
                (void) MHD_set_connection_option(r->connection, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned) 0);
}

void http_set_idle_timeout(Request *r, unsigned sec) {
        /* as above: a suspended connection is on no timeout list for MHD to move it between */
        if (r->suspended)
                return;
        (void) MHD_set_connection_option(r->connection, MHD_CONNECTION_OPTION_TIMEOUT, sec);
}

/* E2B's SDKs with E2B_SANDBOX_URL send what is for a server in a sandbox (the code interpreter's port 49999) to
 * that one URL, naming the sandbox and port in E2b-Sandbox-Id and E2b-Sandbox-Port: the same as a PORT-ID.DOMAIN
 * Host, so the port proxy's host route takes it, with the same tokens. envd's port stays with envd's routes.
 * False when it answered (a port that is not one). */
static bool header_sandbox_port(Request *r) {
        const char *port = http_header(r, "E2b-Sandbox-Port"), *id = http_header(r, "E2b-Sandbox-Id");
        unsigned long p;
        char *end;

        if (r->host_port || !port)
                return true;
        errno = 0;
        p = strtoul(port, &end, 10);
        if (errno || end == port || *end || p == 0 || p > 65535 || port[0] < '0' || port[0] > '9') {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "E2b-Sandbox-Port must be a port number (1-65535), "
                                   "not '%.32s'", port);
                return false;
        }
        if (p == HTTP_E2B_ENVD_PORT || !id || !*id)
                return true; /* envd's, or no sandbox named: E2B's routes say what is missing */
        /* an id of the wrong length is no sandbox of ours: the proxy's lookup says so, as for a Host */
        (void) snprintf(r->host_sandbox, sizeof r->host_sandbox, "%s",
                        strlen(id) == SANDBOX_ID_LEN ? id : "-");
        r->host_port = (unsigned) p;
        return true;
}

/* A client that closes its connection in the middle of an upload's body is not always seen by MHD: with its
 * edge-triggered epoll, a FIN that came while body bytes were still queued can be left unnoticed until the
 * idle timeout (and the unix socket has none), and the upload (a file in a volume) with it. So while such a
 * body comes, once a second: nothing left to read and the end of the stream means the client is gone (the body
 * is not whole, or the handler would have run and stopped this); shutting the socket down wakes MHD, which
 * ends the request. */
#define PEER_CHECK_USEC (1000 * 1000ULL)

static int on_peer_check(sd_event_source *s, uint64_t usec, void *userdata) {
        Request *r = userdata;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->connection,
                                                                      MHD_CONNECTION_INFO_CONNECTION_FD);
        char c;

        if (ci && !r->suspended && recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
                log_debug("%s %s: the client went away in the middle of the body", r->method, r->url);
                (void) shutdown(ci->connect_fd, SHUT_RDWR);
                http_schedule(r->http);
                return sd_event_source_set_enabled(s, SD_EVENT_OFF);
        }
        (void) sd_event_source_set_time(s, usec + PEER_CHECK_USEC);
        return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

static void peer_check_start(Request *r) {
        uint64_t now;

        if (r->kind != REQUEST_UPLOAD || r->responded || r->peer_check ||
            sd_event_now(r->http->manager->event, CLOCK_MONOTONIC, &now) < 0)
                return;
        (void) sd_event_add_time(r->http->manager->event, &r->peer_check, CLOCK_MONOTONIC, now + PEER_CHECK_USEC,
                                 100 * 1000, on_peer_check, r);
}

static void request_begin(Listener *l, Request *r) {
        const Route *rt;
        RouteArgs a;

        r->tcp = l->tcp;
        rt = http_find_route(r->method, r->url, &a, NULL);
        r->error_style = rt ? rt->errors : http_error_style_for(r->url);
        if (!l->tcp) {
                if (!peer_allowed(r)) {
                        http_respond_error(r, ERROR_PERMISSION_DENIED,
                                           "this socket belongs to another user");
                        return;
                }
                r->authenticated = true;
        } else {
                if (!host_ok(l, r) || !header_sandbox_port(r))
                        return;
                if (r->host_port) {
                        /* the whole host is one sandbox's server, whatever the path */
                        rt = http_request_route(r, &a, NULL);
                        r->error_style = rt->errors;
                }
                if (!authenticate_tcp(r, rt))
                        return;
                /* a token route's token, before it may send a body (up to HTTP_BODY_MAX) for nothing */
                if (rt && !r->authenticated && rt->auth == ROUTE_AUTH_TOKEN && rt->token_ok && !rt->token_ok(r))
                        return;
        }
        if (!rt) {
                http_route(r); /* 404 or 405, without reading a body */
                return;
        }
        http_classify(r);
        if (!r->responded && body_size_ok(r))
                http_prepare(r);
        peer_check_start(r);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *connection, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls) {
        Listener *l = cls;
        Request *r = *con_cls;

        if (!r) {
                r = calloc(1, sizeof *r);
                if (!r)
                        return MHD_NO;
                r->http = l->http;
                r->connection = connection;
                r->method = method;
                r->url = url;
                r->version = version;
                *con_cls = r;
                request_begin(l, r);
                return MHD_YES;
        }

        if (*upload_data_size > 0) {
                if (r->responded || r->body_too_large) {
                        /* answered already (an error), or too large: drop it, but not forever */
                        r->drained += *upload_data_size;
                        *upload_data_size = 0;
                        return r->drained > HTTP_DRAIN_MAX ? MHD_NO : MHD_YES;
                }
                if (r->kind == REQUEST_UPLOAD && !r->upload_failed) {
                        size_t took = *upload_data_size;

                        if (r->upload.write)
                                took = r->upload.write(r->upload.userdata, r, upload_data, took);
                        else
                                r->upload_failed = true; /* nobody takes it: dropped, the handler says so */
                        *upload_data_size -= took;
                        return MHD_YES;
                }
                if (r->body.len + *upload_data_size > HTTP_BODY_MAX) {
                        r->body_too_large = true;
                        space_buf_done(&r->body);
                        r->drained += *upload_data_size;
                } else if (space_buf_append(&r->body, upload_data, *upload_data_size) < 0)
                        return MHD_NO;
                *upload_data_size = 0;
                return MHD_YES;
        }

        /* the body is whole */
        r->peer_check = sd_event_source_disable_unref(r->peer_check);
        if (r->responded || r->suspended)
                return MHD_YES;
        if (r->body_too_large) {
                http_respond_error(r, ERROR_PAYLOAD_TOO_LARGE,
                                   "request body over %d bytes", HTTP_BODY_MAX);
                return MHD_YES;
        }
        if (r->cont) {
                HttpContinuation k = r->cont;

                r->cont = NULL;
                k(r, r->cont_userdata);
                return MHD_YES;
        }
        http_route(r);
        return MHD_YES;
}

/* MHD's messages about the TLS listener's connections: anyone who can reach the port can make it log a failed
 * handshake ("received handshake message out of context" for plain HTTP or garbage), so they are debug lines. */
__attribute__((format(printf, 2, 0))) static void tls_mhd_log(void *cls, const char *fmt, va_list ap) {
        char buf[512];
        size_t n;

        if (log_max_level < LOG_DEBUG_LEVEL)
                return;
        (void) vsnprintf(buf, sizeof buf, fmt, ap);
        n = strlen(buf);
        while (n > 0 && buf[n - 1] == '\n')
                buf[--n] = 0;
        log_debug("TLS listener: %s", buf);
}

static int listener_start(Http *h, Listener *l, int fd, bool tcp) {
        const union MHD_DaemonInfo *info;
        unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG;
        int r;

        l->http = h;
        l->tcp = tcp;
        /* Over TCP a connection that sends no request (or stalls in one) is closed after a while; the unix
         * socket is the user's own and keeps the old behaviour. Suspended connections (long polls, SSE
         * waiting for output) never time out, and http_set_streaming() exempts running streams. */
        /* MHD_ALLOW_UPGRADE: the port proxy's WebSockets. Without TLS, MHD hands over the connection's own socket
         * and only takes it back to close it, so this works with an external event loop (http_respond_upgrade).
         * With TLS it hands over one end of a socketpair and carries the bytes between it and the TLS session
         * itself, on its epoll set, which the loop watches: the same on_io runs it. */
        /* MHD logs an HTTPS option given to a daemon without TLS: only the TLS daemon gets them */
        struct MHD_OptionItem tls_options[] = {
                { MHD_OPTION_HTTPS_MEM_KEY, 0, h->tls.key_pem },
                { MHD_OPTION_HTTPS_MEM_CERT, 0, h->tls.cert_pem },
                { MHD_OPTION_EXTERNAL_LOGGER, (intptr_t) tls_mhd_log, l },
                { MHD_OPTION_END, 0, NULL },
        };

        if (l->tls)
                flags |= MHD_USE_TLS;
        l->daemon = MHD_start_daemon(flags, 0, NULL, NULL,
                                     on_access, l, MHD_OPTION_LISTEN_SOCKET, fd,
                                     MHD_OPTION_ARRAY, l->tls ? tls_options : tls_options + 3,
                                     MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                                     MHD_OPTION_CONNECTION_TIMEOUT, tcp ? (unsigned) HTTP_TCP_IDLE_TIMEOUT_SEC : 0U,
                                     MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t) (256 * 1024),
                                     MHD_OPTION_CONNECTION_LIMIT,
                                     tcp ? (unsigned) HTTP_TCP_CONNECTIONS_MAX : (unsigned) HTTP_UNIX_CONNECTIONS_MAX,
                                     MHD_OPTION_END);
        if (!l->daemon)
                return -EIO;
        info = MHD_get_daemon_info(l->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info)
                return -EIO;
        r = sd_event_add_io(h->manager->event, &l->io, info->epoll_fd, EPOLLIN, on_io, l);
        if (r < 0)
                return r;
        /* accuracy 1 us: sd-event's default of 250 ms would hold every response back that long */
        return sd_event_add_time(h->manager->event, &l->timer, CLOCK_MONOTONIC, UINT64_MAX, 1, on_timer, l);
}

static void listener_stop(Listener *l) {
        l->io = sd_event_source_disable_unref(l->io);
        l->timer = sd_event_source_disable_unref(l->timer);
        /* Suspended connections must be resumed before MHD stops; the process goes away anyway. */
        if (l->daemon)
                MHD_stop_daemon(l->daemon);
        l->daemon = NULL;
}

/* The TCP listener's bound address into l (for the Host check) and its URL into ret. */
static int listener_address(Listener *l, int fd, char **ret) {
        const char *scheme = l->tls ? "https" : "http";
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;

        if (getsockname(fd, (struct sockaddr *) &sa, &len) < 0)
                return -errno;
        if (sa.ss_family == AF_INET) {
                struct sockaddr_in *in = (struct sockaddr_in *) &sa;
                if (!inet_ntop(AF_INET, &in->sin_addr, l->host, sizeof l->host))
                        return -errno;
                l->port = ntohs(in->sin_port);
                return asprintf(ret, "%s://%s:%u", scheme, l->host, l->port) < 0 ? -ENOMEM : 0;
        }
        if (sa.ss_family == AF_INET6) {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &sa;
                if (!inet_ntop(AF_INET6, &in6->sin6_addr, l->host, sizeof l->host))
                        return -errno;
                l->port = ntohs(in6->sin6_port);
                return asprintf(ret, "%s://[%s]:%u", scheme, l->host, l->port) < 0 ? -ENOMEM : 0;
        }
        return -EAFNOSUPPORT;
}

int http_new(Manager *m, int unix_fd, int tcp_fd, Http **ret) {
        Http *h = calloc(1, sizeof *h);
        int r;

        if (!h)
                return -ENOMEM;
        h->manager = m;
        r = auth_new(m->store, &h->auth);
        if (r >= 0)
                r = sd_event_add_defer(m->event, &h->kick, on_kick, h);
        if (r >= 0) {
                (void) sd_event_source_set_enabled(h->kick, SD_EVENT_OFF);
                r = listener_start(h, &h->listeners[h->n_listeners++], unix_fd, false);
        }
        if (r >= 0 && tcp_fd >= 0) {
                Listener *l = &h->listeners[h->n_listeners++];

                r = listener_address(l, tcp_fd, &h->api_url);
                if (r >= 0)
                        r = listener_start(h, l, tcp_fd, true);
        }
        if (r < 0) {
                http_free(h);
                return r;
        }
        *ret = h;
        return 0;
}

int http_add_tls_listener(Http *h, int fd, const char *domain, TlsFiles *files) {
        Listener *l;
        int r;

        if (h->n_listeners >= ELEMENTSOF(h->listeners) || h->tls_url)
                return -EBUSY;
        l = &h->listeners[h->n_listeners];
        *l = (Listener) { .tls = true };
        h->tls = *files;
        *files = (TlsFiles) {};
        if (domain && !(h->tls_domain = strdup(domain)))
                return -ENOMEM;
        r = listener_address(l, fd, &h->tls_url);
        if (r < 0)
                return r;
        h->n_listeners++;
        return listener_start(h, l, fd, true);
}

Http *http_free(Http *h) {
        if (!h)
                return NULL;
        for (unsigned i = 0; i < h->n_listeners; i++)
                listener_stop(&h->listeners[i]);
        sd_event_source_disable_unref(h->kick);
        auth_free(h->auth);
        free(h->api_url);
        free(h->tls_url);
        free(h->tls_domain);
        tls_files_done(&h->tls);
        free(h);
        return NULL;
}

int resolve_sandbox(Request *r, const char *ref, Sandbox **ret) {
        int q = sandbox_resolve(http_manager(r->http), ref, ret);


        if (q == -ENOTUNIQ)
                http_respond_error(r, ERROR_AMBIGUOUS_REFERENCE,
                                   "'%s' matches more than one sandbox id; give more characters", ref);
        else if (q < 0)
                http_respond_error(r, ERROR_SANDBOX_NOT_FOUND,
                                   "no sandbox '%s'; 'spacectl ls' lists them", ref);
        return q;
}
