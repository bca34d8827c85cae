/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* secure_getenv, vasprintf */
#endif

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "http-client.h"
#include "macro.h"
#include "paths.h"

#define STREAM_WATCH_MAX 8U

typedef struct Buf {
        char *data;
        size_t len, cap;
} Buf;

/* What the check of a connection's peer needs: the handle to report to, and the transfer whose socket it is. */
typedef struct PeerCheck {
        struct SpaceHttp *http;
        CURL *easy;             /* the transfer */
        curl_socket_t fd;       /* the connection libcurl made for it, if it made one */
} PeerCheck;

struct SpaceHttp {
        CURL *easy;             /* reused by space_http_call*() so the connection stays open */
        char *socket_path;      /* NULL: TCP */
        char *base_url;
        char *auth_header;
        char errbuf[CURL_ERROR_SIZE];
        volatile sig_atomic_t *cancel;
        int peer_error;         /* the unix socket's peer was refused: -EPERM (peer_uid says who it is) */
        uid_t peer_uid;
        PeerCheck peer_check;   /* of easy */
        bool peer_refused;      /* some connection's peer was refused: kept-alive ones are not trusted either */
};

/* ---- small helpers ---- */

static int buf_append(Buf *b, const void *p, size_t n, size_t max) {
        if (n > max || b->len > max - n)
                return -E2BIG;
        if (b->len + n + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 256;
                char *d;

                while (cap < b->len + n + 1)
                        cap *= 2;
                d = realloc(b->data, cap);
                if (!d)
                        return -ENOMEM;
                b->data = d;
                b->cap = cap;
        }
        memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = 0;
        return 0;
}

static void buf_done(Buf *b) {
        free(b->data);
        *b = (Buf) {};
}

static char *strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *strdup_printf(const char *fmt, ...) {
        va_list ap;
        char *s;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

static int curl_to_errno(SpaceHttp *h, CURL *e, CURLcode c, int write_error) {
        long os_errno = 0;

        if (c != CURLE_OK && h->peer_error < 0) {
                if (h->peer_error == -EPERM)
                        snprintf(h->errbuf, sizeof h->errbuf, "the process listening there runs as uid %u, not as us",
                                 (unsigned) h->peer_uid);
                else
                        snprintf(h->errbuf, sizeof h->errbuf, "cannot tell who listens there: %s",
                                 strerror(-h->peer_error));
                return h->peer_error;
        }
        switch (c) {
        case CURLE_OK:
                return 0;
        case CURLE_COULDNT_CONNECT:
                (void) curl_easy_getinfo(e, CURLINFO_OS_ERRNO, &os_errno);
                if (os_errno == ENOENT || os_errno == ENOTDIR)
                        return -ENOENT;
                if (os_errno > 0 && os_errno != ECONNREFUSED)
                        return (int) -os_errno;
                return -ECONNREFUSED;
        case CURLE_COULDNT_RESOLVE_HOST:
                return -EHOSTUNREACH;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_ABORTED_BY_CALLBACK:
                return -EINTR;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_WRITE_ERROR:
                return write_error < 0 ? write_error : -EIO;
        default:
                return -EPROTO;
        }
}

bool space_http_error_is_unreachable(int r) {
        return r == -ENOENT || r == -ECONNREFUSED;
}

int space_http_escape(const char *s, char **ret) {
        char *c, *d;

        c = curl_easy_escape(NULL, s, 0);
        if (!c)
                return -ENOMEM;
        d = strdup(c);
        curl_free(c);
        if (!d)
                return -ENOMEM;
        *ret = d;
        return 0;
}

/* ---- the handle ---- */

/* A handle for base_url (taken), without a target of its own yet. */
static int handle_new(char *base_url, SpaceHttp **ret) {
        _cleanup_free_ char *url = base_url;
        _cleanup_space_http_ SpaceHttp *h = NULL;

        if (!url)
                return -ENOMEM;
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return -ENOMEM;
        h = calloc(1, sizeof *h);
        if (!h)
                return -ENOMEM;
        h->base_url = TAKE_PTR(url);
        h->easy = curl_easy_init();
        if (!h->easy)
                return -ENOMEM;
        *ret = TAKE_PTR(h);
        return 0;
}

int space_http_new(SpaceHttp **ret) {
        _cleanup_space_http_ SpaceHttp *h = NULL;
        _cleanup_free_ char *path = NULL;
        const char *url, *key;
        size_t n;
        int r;

        url = secure_getenv("SPACE_API_URL");
        if (!url || !*url) {
                r = space_socket_path(&path);
                if (r < 0)
                        return r;
                return space_http_new_unix(path, ret);
        }
        n = strlen(url);
        while (n > 0 && url[n - 1] == '/')
                n--;
        r = handle_new(strndup(url, n), &h);
        if (r < 0)
                return r;
        key = secure_getenv("SPACE_API_KEY");
        if (key && *key) {
                if (strpbrk(key, "\r\n"))
                        return -EINVAL;
                h->auth_header = strdup_printf("Authorization: Bearer %s", key);
                if (!h->auth_header)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(h);
        return 0;
}

int space_http_new_unix(const char *socket_path, SpaceHttp **ret) {
        _cleanup_space_http_ SpaceHttp *h = NULL;
        int r;

        if (!socket_path || !*socket_path)
                return -EINVAL;
        r = handle_new(strdup("http://localhost"), &h);
        if (r < 0)
                return r;
        h->socket_path = strdup(socket_path);
        if (!h->socket_path)
                return -ENOMEM;
        *ret = TAKE_PTR(h);
        return 0;
}

SpaceHttp *space_http_free(SpaceHttp *h) {
        if (!h)
                return NULL;
        if (h->easy)
                curl_easy_cleanup(h->easy);
        free(h->socket_path);
        free(h->base_url);
        free(h->auth_header);
        free(h);
        return NULL;
}

const char *space_http_socket_path(const SpaceHttp *h) {
        return h->socket_path;
}

const char *space_http_endpoint(const SpaceHttp *h) {
        return h->socket_path ?: h->base_url;
}

const char *space_http_last_error(const SpaceHttp *h) {
        return h->errbuf;
}

uid_t space_http_peer_uid(const SpaceHttp *h) {
        return h->peer_uid;
}

void space_http_set_cancel(SpaceHttp *h, volatile sig_atomic_t *flag) {
        h->cancel = flag;
}

static int xferinfo_cb(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
        SpaceHttp *h = userdata;

        return h->cancel && *h->cancel ? 1 : 0;
}

int space_socket_peer_check(int fd, uid_t *ret_uid) {
        struct ucred cred;
        socklen_t len = sizeof cred;

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        if (ret_uid)
                *ret_uid = cred.uid;
        /* root could read our files anyway; anyone else is a neighbour in the socket's place */
        return cred.uid == geteuid() || cred.uid == 0 ? 0 : -EPERM;
}

/* libcurl made a socket for a new connection: which one, for unix_prereq_cb(). */
static int unix_sockopt_cb(void *userdata, curl_socket_t fd, curlsocktype purpose) {
        PeerCheck *pc = userdata;

        if (purpose == CURLSOCKTYPE_IPCXN)
                pc->fd = fd;
        return CURL_SOCKOPT_OK;
}

/* Runs once libcurl is connected, before each request is sent: the peer checked is the one the request goes
 * to (a probe of our own would race with a swap of the socket). */
static int unix_prereq_cb(void *userdata, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
                          int conn_local_port) {
        PeerCheck *pc = userdata;
        curl_socket_t fd = CURL_SOCKET_BAD;

        if (curl_easy_getinfo(pc->easy, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK || fd == CURL_SOCKET_BAD)
                fd = pc->fd;
        /* No socket of its own and none libcurl names: the transfer reuses a kept-alive connection, which the
         * transfer that made it checked here. Once any peer was refused, none is taken on trust. */
        if (fd == CURL_SOCKET_BAD && !pc->http->peer_refused)
                return CURL_PREREQFUNC_OK;
        pc->http->peer_error = space_socket_peer_check(fd, &pc->http->peer_uid);
        if (pc->http->peer_error >= 0)
                return CURL_PREREQFUNC_OK;
        pc->http->peer_refused = true;
        return CURL_PREREQFUNC_ABORT; /* not even ENOTCONN: we cannot tell who it is */
}

/* Everything but the body callbacks: URL, transport, method, headers. */
static int setup_easy(SpaceHttp *h, CURL *e, PeerCheck *pc, char *errbuf, const char *method, const char *path,
                      const char *content_type, const void *body, size_t len, const char *auth_header,
                      bool expect_continue, struct curl_slist **ret_headers) {
        _cleanup_free_ char *url = NULL;
        struct curl_slist *hdr = NULL, *t;
        _cleanup_free_ char *ct = NULL;

        if (!path || path[0] != '/')
                return -EINVAL;
        url = strdup_printf("%s%s", h->base_url, path);
        if (!url)
                return -ENOMEM;

        errbuf[0] = 0;
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(e, CURLOPT_URL, url); /* libcurl copies strings */
        if (h->socket_path) {
                curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, h->socket_path);
                *pc = (PeerCheck) { .http = h, .easy = e, .fd = CURL_SOCKET_BAD };
                curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, unix_sockopt_cb);
                curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, pc);
                curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, unix_prereq_cb);
                curl_easy_setopt(e, CURLOPT_PREREQDATA, pc);
        }
        h->peer_error = 0;
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 15L);
        curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
        curl_easy_setopt(e, CURLOPT_XFERINFODATA, h);

        if (streq(method, "GET"))
                curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        else {
                if (streq(method, "POST") || body) {
                        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) (body ? len : 0));
                        curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body ? (const char *) body : "");
                }
                if (!streq(method, "POST"))
                        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
        }

        /* No "Expect: 100-continue" round trip before bodies over 1 KiB; streamed uploads want it, so that an
         * error the daemon knows from the headers comes before the body is sent. */
        t = curl_slist_append(hdr, expect_continue ? "Expect: 100-continue" : "Expect:");
        if (!t)
                goto oom;
        hdr = t;
        if (content_type) {
                ct = strdup_printf("Content-Type: %s", content_type);
                if (!ct || !(t = curl_slist_append(hdr, ct)))
                        goto oom;
                hdr = t;
        }
        if (!auth_header)
                auth_header = h->auth_header;
        if (auth_header) {
                if (!(t = curl_slist_append(hdr, auth_header)))
                        goto oom;
                hdr = t;
        }
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdr);
        *ret_headers = hdr;
        return 0;
oom:
        curl_slist_free_all(hdr);
        return -ENOMEM;
}

typedef struct BodySink {
        Buf buf;
        int error;
} BodySink;

static size_t body_write_cb(char *p, size_t size, size_t n, void *userdata) {
        BodySink *s = userdata;
        int r;

        r = buf_append(&s->buf, p, n, SPACE_HTTP_REPLY_MAX);
        if (r < 0) {
                s->error = r;
                return 0;
        }
        return n;
}

void space_http_reply_done(SpaceHttpReply *r) {
        if (!r)
                return;
        cJSON_Delete(r->json);
        free(r->error_code);
        free(r->error_message);
        *r = (SpaceHttpReply) {};
}

/* Fills ret from a status and a body; the body is parsed when it looks like JSON. */
static int reply_fill(SpaceHttpReply *ret, long status, const char *body, size_t len) {
        const cJSON *code = NULL, *message = NULL;
        size_t i = 0;

        *ret = (SpaceHttpReply) { .status = status };

        while (i < len && strchr(" \t\r\n", body[i]))
                i++;
        if (i < len && (body[i] == '{' || body[i] == '['))
                ret->json = cJSON_ParseWithLength(body, len);

        if (status < 400)
                return 0;

        if (cJSON_IsObject(ret->json)) {
                code = cJSON_GetObjectItemCaseSensitive(ret->json, "code");
                message = cJSON_GetObjectItemCaseSensitive(ret->json, "message");
        }
        if (cJSON_IsString(code) && code->valuestring[0])
                ret->error_code = strdup(code->valuestring);
        else
                ret->error_code = strdup_printf("http_%ld", status);
        if (cJSON_IsString(message) && message->valuestring[0])
                ret->error_message = strdup(message->valuestring);
        else
                ret->error_message = strdup_printf("the daemon answered HTTP %ld without an error message", status);
        ret->error = error_code_from_name(ret->error_code);
        if (!ret->error_code || !ret->error_message) {
                space_http_reply_done(ret);
                return -ENOMEM;
        }
        return 0;
}

int space_http_call_raw(SpaceHttp *h, const char *method, const char *path, const char *content_type,
                        const void *body, size_t len, SpaceHttpReply *ret) {
        struct curl_slist *hdr = NULL;
        BodySink sink = {};
        long status = 0;
        CURLcode c;
        int r;

        curl_easy_reset(h->easy);
        r = setup_easy(h, h->easy, &h->peer_check, h->errbuf, method, path, content_type, body, len, NULL, false,
                       &hdr);
        if (r < 0)
                return r;
        curl_easy_setopt(h->easy, CURLOPT_WRITEFUNCTION, body_write_cb);
        curl_easy_setopt(h->easy, CURLOPT_WRITEDATA, &sink);

        c = curl_easy_perform(h->easy);
        curl_easy_setopt(h->easy, CURLOPT_HTTPHEADER, NULL);
        curl_slist_free_all(hdr);
        r = curl_to_errno(h, h->easy, c, sink.error);
        if (r < 0) {
                if (!h->errbuf[0])
                        snprintf(h->errbuf, sizeof h->errbuf, "%s", curl_easy_strerror(c));
                buf_done(&sink.buf);
                return r;
        }

        (void) curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &status);
        r = reply_fill(ret, status, sink.buf.data ?: "", sink.buf.len);
        buf_done(&sink.buf);
        return r;
}

int space_http_call(SpaceHttp *h, const char *method, const char *path, const cJSON *body, SpaceHttpReply *ret) {
        _cleanup_free_ char *text = NULL;

        if (body) {
                text = cJSON_PrintUnformatted(body);
                if (!text)
                        return -ENOMEM;
        }
        return space_http_call_raw(h, method, path, text ? "application/json" : NULL, text,
                                   text ? strlen(text) : 0, ret);
}

/* ---- streamed bodies ---- */

typedef struct Upload {
        SpaceHttpReadFn read;
        void *userdata;
        int error;
} Upload;

static size_t upload_read_cb(char *p, size_t size, size_t n, void *userdata) {
        Upload *u = userdata;
        ssize_t k = u->read(p, size * n, u->userdata);

        if (k < 0) {
                u->error = (int) k;
                return CURL_READFUNC_ABORT;
        }
        return (size_t) k;
}

/* Reply bodies of streamed requests: a download's 2xx body goes to the caller, anything else is kept (bounded)
 * for ret. */
typedef struct Download {
        SpaceHttp *h;
        SpaceHttpHeaderFn on_header;
        SpaceHttpWriteFn write;
        void *userdata;
        BodySink error_body;
        int error;
} Download;

static bool status_ok(CURL *e) {
        long status = 0;

        (void) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
        return status >= 200 && status < 300;
}

static size_t download_header_cb(char *p, size_t size, size_t n, void *userdata) {
        Download *d = userdata;
        _cleanup_free_ char *name = NULL, *value = NULL;
        size_t len = size * n, nl, vl;
        const char *colon, *v;
        int r;

        /* Only the final response's headers, and only "Name: value" lines (not the status line, not 100). */
        if (!d->on_header || len < 2 || !status_ok(d->h->easy))
                return len;
        colon = memchr(p, ':', len);
        if (!colon)
                return len;
        nl = (size_t) (colon - p);
        v = colon + 1;
        vl = len - nl - 1;
        while (vl > 0 && (*v == ' ' || *v == '\t'))
                v++, vl--;
        while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
                vl--;
        name = strndup(p, nl);
        value = strndup(v, vl);
        if (!name || !value) {
                d->error = -ENOMEM;
                return 0;
        }
        r = d->on_header(name, value, d->userdata);
        if (r < 0) {
                d->error = r;
                return 0;
        }
        return len;
}

static size_t download_write_cb(char *p, size_t size, size_t n, void *userdata) {
        Download *d = userdata;
        int r;

        /* an upload's reply, or an error: kept (bounded) for ret */
        if (!d->write || !status_ok(d->h->easy))
                return body_write_cb(p, size, n, &d->error_body);
        r = d->write(p, size * n, d->userdata);
        if (r < 0) {
                d->error = r;
                return 0;
        }
        return size * n;
}

static int perform_streamed(SpaceHttp *h, struct curl_slist *hdr, Download *d, int read_error_of(void *),
                            void *upload, SpaceHttpReply *ret) {
        long status = 0;
        CURLcode c;
        int r;

        curl_easy_setopt(h->easy, CURLOPT_WRITEFUNCTION, download_write_cb);
        curl_easy_setopt(h->easy, CURLOPT_WRITEDATA, d);
        curl_easy_setopt(h->easy, CURLOPT_HEADERFUNCTION, download_header_cb);
        curl_easy_setopt(h->easy, CURLOPT_HEADERDATA, d);
        c = curl_easy_perform(h->easy);
        curl_easy_setopt(h->easy, CURLOPT_HTTPHEADER, NULL);
        curl_slist_free_all(hdr);
        r = curl_to_errno(h, h->easy, c, d->error ?: d->error_body.error);
        if (r == -EINTR && upload && read_error_of(upload) < 0)
                r = read_error_of(upload);
        if (r < 0) {
                if (!h->errbuf[0])
                        snprintf(h->errbuf, sizeof h->errbuf, "%s", curl_easy_strerror(c));
                buf_done(&d->error_body.buf);
                return r;
        }
        (void) curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &status);
        r = reply_fill(ret, status, d->error_body.buf.data ?: "", d->error_body.buf.len);
        buf_done(&d->error_body.buf);
        return r;
}

static int upload_error(void *u) {
        return ((Upload *) u)->error;
}

int space_http_upload(SpaceHttp *h, const char *method, const char *path, int64_t size, SpaceHttpReadFn read,
                      void *userdata, SpaceHttpReply *ret) {
        struct curl_slist *hdr = NULL;
        Upload u = { .read = read, .userdata = userdata };
        Download d = { .h = h };
        int r;

        curl_easy_reset(h->easy);
        r = setup_easy(h, h->easy, &h->peer_check, h->errbuf, method, path, "application/octet-stream", NULL, 0,
                       NULL, true, &hdr);
        if (r < 0)
                return r;
        curl_easy_setopt(h->easy, CURLOPT_UPLOAD, 1L);
        /* CURLOPT_UPLOAD means PUT to curl; a POST (a template import) names its method */
        if (!streq(method, "PUT"))
                curl_easy_setopt(h->easy, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(h->easy, CURLOPT_READFUNCTION, upload_read_cb);
        curl_easy_setopt(h->easy, CURLOPT_READDATA, &u);
        /* without a size, curl sends the body chunked */
        if (size >= 0)
                curl_easy_setopt(h->easy, CURLOPT_INFILESIZE_LARGE, (curl_off_t) size);
        /* the daemon answers 100 once the guest is ready, which may take a wake-up */
        curl_easy_setopt(h->easy, CURLOPT_EXPECT_100_TIMEOUT_MS, 120000L);
        return perform_streamed(h, hdr, &d, upload_error, &u, ret);
}

/* A request whose 2xx body streams to write() (a download's reply), with a JSON body (text, may be NULL) and a
 * bound on the whole transfer (timeout_sec, 0: none). */
static int request_streamed(SpaceHttp *h, const char *method, const char *path, const char *text, long timeout_sec,
                            SpaceHttpHeaderFn on_header, SpaceHttpWriteFn write, void *userdata,
                            SpaceHttpReply *ret) {
        struct curl_slist *hdr = NULL;
        Download d = { .h = h, .on_header = on_header, .write = write, .userdata = userdata };
        int r;

        curl_easy_reset(h->easy);
        r = setup_easy(h, h->easy, &h->peer_check, h->errbuf, method, path, text ? "application/json" : NULL, text,
                       text ? strlen(text) : 0, NULL, false, &hdr);
        if (r < 0)
                return r;
        /* the reset above takes it off again for the handle's next transfer */
        if (timeout_sec > 0)
                curl_easy_setopt(h->easy, CURLOPT_TIMEOUT, timeout_sec);
        return perform_streamed(h, hdr, &d, NULL, NULL, ret);
}

int space_http_download(SpaceHttp *h, const char *path, SpaceHttpHeaderFn on_header, SpaceHttpWriteFn write,
                        void *userdata, SpaceHttpReply *ret) {
        return request_streamed(h, "GET", path, NULL, 0, on_header, write, userdata, ret);
}

int space_http_post_streamed(SpaceHttp *h, const char *path, const cJSON *body, long timeout_sec,
                             SpaceHttpWriteFn write, void *userdata, SpaceHttpReply *ret) {
        _cleanup_free_ char *text = NULL;

        if (body) {
                text = cJSON_PrintUnformatted(body);
                if (!text)
                        return -ENOMEM;
        }
        return request_streamed(h, "POST", path, text, timeout_sec, NULL, write, userdata, ret);
}

/* ---- text/event-stream ---- */

struct SpaceSseParser {
        SpaceSseHandler handler;
        void *userdata;
        Buf line;
        Buf data;
        bool have_data;
        char *event;
        char *last_id;
        bool skip_lf;           /* the previous chunk ended in CR: an LF right after it belongs to it */
        bool seen_bytes;        /* for the optional BOM at the start */
};

int space_sse_parser_new(SpaceSseHandler handler, void *userdata, SpaceSseParser **ret) {
        SpaceSseParser *p = calloc(1, sizeof *p);

        if (!p)
                return -ENOMEM;
        p->handler = handler;
        p->userdata = userdata;
        *ret = p;
        return 0;
}

SpaceSseParser *space_sse_parser_free(SpaceSseParser *p) {
        if (!p)
                return NULL;
        buf_done(&p->line);
        buf_done(&p->data);
        free(p->event);
        free(p->last_id);
        free(p);
        return NULL;
}

const char *space_sse_parser_last_id(const SpaceSseParser *p) {
        return p->last_id;
}

static int sse_dispatch(SpaceSseParser *p) {
        _cleanup_free_ char *event = TAKE_PTR(p->event);
        int r;

        if (!p->have_data)
                return 0;
        /* Drop the LF added after the last data line. */
        if (p->data.len > 0)
                p->data.data[--p->data.len] = 0;
        p->have_data = false;
        r = p->handler(event ?: "message", p->data.data ?: "", p->data.len, p->last_id, p->userdata);
        p->data.len = 0;
        if (p->data.data)
                p->data.data[0] = 0;
        return r < 0 ? r : 0;
}

static int sse_line(SpaceSseParser *p, const char *line, size_t len) {
        const char *colon, *value;
        size_t flen, vlen;
        int r;

        if (len == 0)
                return sse_dispatch(p);
        if (line[0] == ':')
                return 0;

        colon = memchr(line, ':', len);
        if (colon) {
                flen = colon - line;
                value = colon + 1;
                vlen = len - flen - 1;
                if (vlen > 0 && value[0] == ' ')
                        value++, vlen--;
        } else {
                flen = len;
                value = "";
                vlen = 0;
        }

        if (flen == 5 && memcmp(line, "event", 5) == 0) {
                char *e = strndup(value, vlen);
                if (!e)
                        return -ENOMEM;
                free(p->event);
                p->event = e;
        } else if (flen == 4 && memcmp(line, "data", 4) == 0) {
                r = buf_append(&p->data, value, vlen, SPACE_SSE_EVENT_MAX);
                if (r < 0)
                        return r;
                r = buf_append(&p->data, "\n", 1, SPACE_SSE_EVENT_MAX);
                if (r < 0)
                        return r;
                p->have_data = true;
        } else if (flen == 2 && memcmp(line, "id", 2) == 0) {
                char *id;

                if (memchr(value, 0, vlen))
                        return 0;
                id = strndup(value, vlen);
                if (!id)
                        return -ENOMEM;
                free(p->last_id);
                p->last_id = id;
        }
        /* "retry" and unknown fields are ignored. */
        return 0;
}

int space_sse_parser_feed(SpaceSseParser *p, const void *buf, size_t len) {
        const char *s = buf, *end = s + len;
        int r;

        if (!p->seen_bytes && len > 0) {
                /* A UTF-8 BOM may start the stream (only recognised when it arrives in one piece). */
                if (len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)
                        s += 3;
                p->seen_bytes = true;
        }

        while (s < end) {
                const char *t = s;

                if (p->skip_lf) {
                        p->skip_lf = false;
                        if (*s == '\n') {
                                s++;
                                continue;
                        }
                }
                while (t < end && *t != '\n' && *t != '\r')
                        t++;
                r = buf_append(&p->line, s, t - s, SPACE_SSE_EVENT_MAX);
                if (r < 0)
                        return r;
                if (t == end)
                        break;

                if (*t == '\r')
                        p->skip_lf = true;
                s = t + 1;

                r = sse_line(p, p->line.data ?: "", p->line.len);
                p->line.len = 0;
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- streams ---- */

typedef struct Request {
        SpaceStream *stream;
        CURL *easy;
        struct curl_slist *headers;
        BodySink sink;
        SpaceStreamPostDone done;
        void *userdata;
        bool added;
        char errbuf[CURL_ERROR_SIZE];
        PeerCheck peer_check;
        struct Request *next;
} Request;

typedef struct Watch {
        int fd;
        SpaceStreamFdHandler handler;
        void *userdata;
} Watch;

struct SpaceStream {
        SpaceHttp *http;
        CURLM *multi;
        Request *main;
        SpaceSseParser *parser;
        bool decided, is_sse;
        int write_error;
        Watch watches[STREAM_WATCH_MAX];
        size_t n_watches;
        Request *requests;
        int stop;               /* < 0: space_stream_stop() asked space_stream_run() to return this */
};

static Request *request_free(SpaceStream *s, Request *q) {
        if (!q)
                return NULL;
        if (q->easy) {
                if (q->added)
                        curl_multi_remove_handle(s->multi, q->easy);
                curl_easy_cleanup(q->easy);
        }
        curl_slist_free_all(q->headers);
        buf_done(&q->sink.buf);
        free(q);
        return NULL;
}

static int request_new(SpaceStream *s, const char *method, const char *path, const char *content_type,
                       const void *body, size_t len, const char *auth_header, Request **ret) {
        Request *q = calloc(1, sizeof *q);
        int r;

        if (!q)
                return -ENOMEM;
        q->stream = s;
        q->easy = curl_easy_init();
        if (!q->easy) {
                free(q);
                return -ENOMEM;
        }
        r = setup_easy(s->http, q->easy, &q->peer_check, q->errbuf, method, path, content_type, body, len,
                       auth_header, false, &q->headers);
        if (r < 0) {
                request_free(s, q);
                return r;
        }
        curl_easy_setopt(q->easy, CURLOPT_PRIVATE, q);
        *ret = q;
        return 0;
}

static size_t stream_write_cb(char *p, size_t size, size_t n, void *userdata) {
        SpaceStream *s = userdata;
        int r;

        if (!s->decided) {
                long status = 0;
                char *ct = NULL;

                (void) curl_easy_getinfo(s->main->easy, CURLINFO_RESPONSE_CODE, &status);
                (void) curl_easy_getinfo(s->main->easy, CURLINFO_CONTENT_TYPE, &ct);
                s->is_sse = status >= 200 && status < 300 && ct &&
                            strncasecmp(ct, "text/event-stream", 17) == 0;
                s->decided = true;
        }

        if (!s->is_sse)
                return body_write_cb(p, size, n, &s->main->sink);

        r = space_sse_parser_feed(s->parser, p, n);
        if (r < 0) {
                s->write_error = r;
                return 0;
        }
        return n;
}

/* Header values come from the environment or the daemon: refuse anything that would split the header. */
static bool header_value_ok(const char *v) {
        return !strpbrk(v, "\r\n");
}

static int stream_new(SpaceHttp *h, const char *method, const char *path, const cJSON *body,
                      const char *last_event_id, const char *bearer, SpaceSseHandler on_event, void *userdata,
                      SpaceStream **ret) {
        _cleanup_free_ char *text = NULL, *auth = NULL, *leid = NULL;
        SpaceStream *s;
        struct curl_slist *t;
        int r;

        if ((bearer && !header_value_ok(bearer)) || (last_event_id && !header_value_ok(last_event_id)))
                return -EINVAL;
        if (bearer && !(auth = strdup_printf("Authorization: Bearer %s", bearer)))
                return -ENOMEM;
        if (last_event_id && !(leid = strdup_printf("Last-Event-ID: %s", last_event_id)))
                return -ENOMEM;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->http = h;

        s->multi = curl_multi_init();
        if (!s->multi) {
                r = -ENOMEM;
                goto fail;
        }
        r = space_sse_parser_new(on_event, userdata, &s->parser);
        if (r < 0)
                goto fail;

        if (body) {
                text = cJSON_PrintUnformatted(body);
                if (!text) {
                        r = -ENOMEM;
                        goto fail;
                }
        }
        r = request_new(s, method, path, text ? "application/json" : NULL, text, text ? strlen(text) : 0, auth,
                        &s->main);
        if (r < 0)
                goto fail;
        t = curl_slist_append(s->main->headers, "Accept: text/event-stream");
        if (!t) {
                r = -ENOMEM;
                goto fail;
        }
        s->main->headers = t;
        if (leid) {
                t = curl_slist_append(s->main->headers, leid);
                if (!t) {
                        r = -ENOMEM;
                        goto fail;
                }
                s->main->headers = t;
        }
        curl_easy_setopt(s->main->easy, CURLOPT_HTTPHEADER, s->main->headers);
        curl_easy_setopt(s->main->easy, CURLOPT_WRITEFUNCTION, stream_write_cb);
        curl_easy_setopt(s->main->easy, CURLOPT_WRITEDATA, s);

        *ret = s;
        return 0;
fail:
        space_stream_free(s);
        return r;
}

int space_stream_new(SpaceHttp *h, const char *path, const cJSON *body, SpaceSseHandler on_event,
                     void *userdata, SpaceStream **ret) {
        return stream_new(h, "POST", path, body, NULL, NULL, on_event, userdata, ret);
}

int space_stream_new_get(SpaceHttp *h, const char *path, const char *last_event_id, const char *bearer,
                         SpaceSseHandler on_event, void *userdata, SpaceStream **ret) {
        return stream_new(h, "GET", path, NULL, last_event_id, bearer, on_event, userdata, ret);
}

SpaceStream *space_stream_free(SpaceStream *s) {
        if (!s)
                return NULL;
        while (s->requests) {
                Request *q = s->requests;
                s->requests = q->next;
                request_free(s, q);
        }
        request_free(s, s->main);
        if (s->multi)
                curl_multi_cleanup(s->multi);
        space_sse_parser_free(s->parser);
        free(s);
        return NULL;
}

int space_stream_watch_fd(SpaceStream *s, int fd, SpaceStreamFdHandler handler, void *userdata) {
        for (size_t i = 0; i < s->n_watches; i++)
                if (s->watches[i].fd == fd) {
                        s->watches[i].handler = handler;
                        s->watches[i].userdata = userdata;
                        return 0;
                }
        if (s->n_watches >= STREAM_WATCH_MAX)
                return -ENOSPC;
        s->watches[s->n_watches++] = (Watch) { fd, handler, userdata };
        return 0;
}

int space_stream_unwatch_fd(SpaceStream *s, int fd) {
        for (size_t i = 0; i < s->n_watches; i++)
                if (s->watches[i].fd == fd) {
                        s->watches[i] = s->watches[--s->n_watches];
                        return 0;
                }
        return -ENOENT;
}

int space_stream_post(SpaceStream *s, const char *path, const char *content_type, const void *body, size_t len,
                      SpaceStreamPostDone done, void *userdata) {
        Request *q, **tail;
        int r;

        r = request_new(s, "POST", path, content_type, body, len, NULL, &q);
        if (r < 0)
                return r;
        curl_easy_setopt(q->easy, CURLOPT_WRITEFUNCTION, body_write_cb);
        curl_easy_setopt(q->easy, CURLOPT_WRITEDATA, &q->sink);
        q->done = done;
        q->userdata = userdata;

        /* Keep queue order: requests are added to the multi handle in the order they were posted. */
        for (tail = &s->requests; *tail; tail = &(*tail)->next)
                ;
        *tail = q;
        return 0;
}

void space_stream_stop(SpaceStream *s, int r) {
        if (r < 0 && s->stop == 0)
                s->stop = r;
}

unsigned space_stream_pending(const SpaceStream *s) {
        unsigned n = 0;

        for (const Request *q = s->requests; q; q = q->next)
                n++;
        return n;
}

static int stream_add_queued(SpaceStream *s) {
        for (Request *q = s->requests; q; q = q->next) {
                if (q->added)
                        continue;
                if (curl_multi_add_handle(s->multi, q->easy) != CURLM_OK)
                        return -ENOMEM;
                q->added = true;
        }
        return 0;
}

static void stream_finish_request(SpaceStream *s, Request *q, CURLcode c) {
        SpaceHttpReply reply = {};
        Request **pp;
        long status = 0;
        int r;

        for (pp = &s->requests; *pp && *pp != q; pp = &(*pp)->next)
                ;
        if (*pp)
                *pp = q->next;

        r = curl_to_errno(s->http, q->easy, c, q->sink.error);
        if (r >= 0) {
                (void) curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &status);
                r = reply_fill(&reply, status, q->sink.buf.data ?: "", q->sink.buf.len);
        }
        if (q->done)
                q->done(s, r, &reply, q->userdata);
        space_http_reply_done(&reply);
        request_free(s, q);
}

int space_stream_run(SpaceStream *s, SpaceHttpReply *ret) {
        CURLcode main_result = CURLE_OK;
        bool main_done = false;
        long status = 0;
        int r;

        if (curl_multi_add_handle(s->multi, s->main->easy) != CURLM_OK)
                return -ENOMEM;
        s->main->added = true;

        while (!main_done) {
                struct curl_waitfd extra[STREAM_WATCH_MAX];
                Watch snapshot[STREAM_WATCH_MAX];
                size_t n_snapshot;
                int running = 0, left;
                CURLMsg *msg;

                r = stream_add_queued(s);
                if (r < 0)
                        return r;

                if (curl_multi_perform(s->multi, &running) != CURLM_OK)
                        return -EPROTO;

                while ((msg = curl_multi_info_read(s->multi, &left))) {
                        Request *q = NULL;

                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        (void) curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &q);
                        if (q == s->main) {
                                main_done = true;
                                main_result = msg->data.result;
                        } else if (q)
                                stream_finish_request(s, q, msg->data.result);
                }
                if (main_done)
                        break;

                if (s->http->cancel && *s->http->cancel)
                        return -EINTR;
                if (s->stop < 0)
                        return s->stop;

                /* A done callback queued more: add it before sleeping. */
                bool queued = false;
                for (Request *q = s->requests; q; q = q->next)
                        if (!q->added)
                                queued = true;
                if (queued)
                        continue;

                /* Handlers may change the watch list, so poll and dispatch a copy. */
                n_snapshot = s->n_watches;
                memcpy(snapshot, s->watches, n_snapshot * sizeof(Watch));
                for (size_t i = 0; i < n_snapshot; i++)
                        extra[i] = (struct curl_waitfd) { .fd = snapshot[i].fd, .events = CURL_WAIT_POLLIN };

                if (curl_multi_poll(s->multi, extra, (unsigned) n_snapshot, 1000, NULL) != CURLM_OK)
                        return -EPROTO;

                for (size_t i = 0; i < n_snapshot; i++) {
                        bool still = false;

                        if (!extra[i].revents)
                                continue;
                        /* Skip fds a previous handler of this round unwatched. */
                        for (size_t j = 0; j < s->n_watches; j++)
                                if (s->watches[j].fd == snapshot[i].fd)
                                        still = true;
                        if (!still)
                                continue;
                        r = snapshot[i].handler(s, snapshot[i].fd, snapshot[i].userdata);
                        if (r < 0)
                                return r;
                }
                if (s->stop < 0)
                        return s->stop;
        }

        r = curl_to_errno(s->http, s->main->easy, main_result, s->write_error ?: s->main->sink.error);
        if (r < 0) {
                snprintf(s->http->errbuf, sizeof s->http->errbuf, "%s",
                         s->main->errbuf[0] ? s->main->errbuf : curl_easy_strerror(main_result));
                return r;
        }
        (void) curl_easy_getinfo(s->main->easy, CURLINFO_RESPONSE_CODE, &status);
        if (s->is_sse) {
                *ret = (SpaceHttpReply) { .status = status };
                return 0;
        }
        return reply_fill(ret, status, s->main->sink.buf.data ?: "", s->main->sink.buf.len);
}
