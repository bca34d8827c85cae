/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include <unistd.h>

#include "channel/tunnel.h"
#include "core/log.h"
#include "core/util.h"
#include "proxy/proxy.h"
#include "proxy/proxy-answer.h"
#include "proxy/proxy-upgrade.h"
#include "macro.h"
#include "sandbox/forward.h"
#include "sandbox/sandbox.h"
#include "string-util.h"

/*
 * The reverse proxy to a server in a sandbox: /v1/sandboxes/{id}/ports/{port}/{path} and any request whose Host
 * is PORT-ID.DOMAIN (E2B's getHost(port)). The request (its body collected like any other, HTTP_BODY_MAX) is
 * written as HTTP/1.1 with "Connection: close" into one end of a socketpair whose other end a PORT tunnel
 * carries to 127.0.0.1:port in the guest; the answer's head is parsed here and its body streamed back as it
 * comes, never held whole: the server in the guest is as untrusted as the guest, so its heads are bounded
 * together and checked (proxy/proxy-answer.c, fuzzed), and its body goes through the tunnel's credit.
 *
 * Time is bounded too: the answer's head must come within proxy_head_timeout (spaced.conf) of the request
 * leaving, or the client gets 504; the body may then go proxy_idle_timeout without a byte either way, after
 * which it is cut short. Both matter because a suspended request would not notice its client leave: without
 * them a server that never answers, or stalls, would hold a tunnel and the request until the sandbox went.
 * What the client does not read MHD stops sending, and its own timeout (set to the same idle time) closes
 * the connection; meanwhile credit holds the guest back.
 *
 * Secrets of ours never enter the guest: X-API-Key, E2B's access tokens and an Authorization holding a value
 * shaped like our API keys are dropped from every request, whichever of them authenticated it.
 *
 * A request that asks to switch protocols (Connection: Upgrade with an Upgrade, in HTTP/1.1: a WebSocket) goes
 * with its Upgrade and Connection: Upgrade instead of Connection: close. A 101 from the server is answered with
 * the server's headers through MHD's upgrade support, and from then on proxy-upgrade.c carries bytes both ways
 * between the client's socket and the tunnel; any other answer is passed back as usual. A server answers a
 * switch at once if at all, so its head has at most PROXY_UPGRADE_HEAD_SEC (or the head's deadline if shorter).
 */

#define PROXY_PATH_MAX 8192           /* of the path and query sent on */
#define PROXY_WAKE_WAIT_SEC 120
#define PROXY_UPGRADE_HEAD_SEC 30
#define PROXY_UPGRADE_VALUE_MAX 256  /* of the Upgrade header sent on */

typedef enum ProxyState {
        PROXY_OPENING,    /* PORT sent, the guest has not answered */
        PROXY_EXCHANGE,   /* the request goes out, the answer's head comes in */
        PROXY_HEAD,       /* the head is parsed, not yet answered */
        PROXY_BODY,       /* answered: the body streams */
        PROXY_FAILED,     /* error and message say why; answered when the request is resumed */
        PROXY_UPGRADING,  /* 101 queued: MHD sends it, then hands over the client's socket */
        PROXY_BRIDGE,     /* switched: bytes go both ways (bridge) */
        PROXY_CLOSED,     /* switched and over: the socket went back to MHD */
} ProxyState;

typedef struct Proxy {
        Request *request;          /* NULL once the request ended */
        Tunnel *tunnel;            /* NULL once it ended */
        int fd;                    /* our end of the socketpair */
        sd_event_source *io;
        ProxyState state;
        ErrorCode error;
        char *message;
        unsigned port;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        const char *path;          /* what is asked of the server, and the protocol to switch to (or NULL): */
        const char *upgrade;       /* the request's own strings */
        uint64_t wake_deadline;    /* while it waits for the sandbox to come up */
        unsigned head_sec;         /* the head's deadline, from the request's start */
        unsigned idle_sec;         /* the body's most time without a byte either way */
        sd_event_source *timer;    /* the head's deadline, then the body's idle timeout */
        uint64_t active_usec;      /* PROXY_BODY: when a byte last went either way */
        Bridge *bridge;            /* PROXY_BRIDGE */
        SpaceBuf out;              /* the request, as it goes to the server */
        size_t out_pos;
        SpaceBuf in;               /* what the server sent that was not passed on yet */
        size_t in_pos;
        bool eof;                  /* the server closed its side */
        bool broken;               /* the tunnel ended abnormally */
        bool reader_waiting;       /* the response body waits for bytes */
        ProxyHeadParser parser;    /* whether a 101 is final, a body follows, how much of the heads came */
        ProxyHead head;            /* the final head */
        ProxyBody body;
        bool detached, released;
} Proxy;

static void proxy_free(Proxy *p) {
        sd_event_source_disable_unref(p->io);
        sd_event_source_disable_unref(p->timer);
        bridge_free(p->bridge);
        safe_close(p->fd);
        space_buf_done(&p->out);
        space_buf_done(&p->in);
        proxy_head_done(&p->head);
        free(p->message);
        free(p);
}

static void proxy_free_if_done(Proxy *p) {
        if (p->detached && p->released && !p->tunnel)
                proxy_free(p);
}

static void proxy_update_io(Proxy *p) {
        uint32_t events = 0;

        if (!p->io)
                return;
        if (p->state != PROXY_OPENING && p->state != PROXY_FAILED) {
                if (p->out_pos < p->out.len)
                        events |= EPOLLOUT;
                if (p->state == PROXY_EXCHANGE || (p->state == PROXY_BODY && p->reader_waiting))
                        events |= EPOLLIN;
        }
        if (events == 0) {
                (void) sd_event_source_set_enabled(p->io, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_io_events(p->io, events);
        (void) sd_event_source_set_enabled(p->io, SD_EVENT_ON);
}

static void proxy_wake(Proxy *p) {
        if (p->request)
                http_resume(p->request);
}

static void proxy_fail(Proxy *p, ErrorCode code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void proxy_fail(Proxy *p, ErrorCode code, const char *fmt, ...) {
        va_list ap;

        if (p->state == PROXY_FAILED)
                return;
        if (p->state != PROXY_OPENING && p->state != PROXY_EXCHANGE) {
                p->broken = true; /* answered already: the body is cut short instead */
                return;
        }
        p->state = PROXY_FAILED;
        p->error = code;
        free(p->message);
        va_start(ap, fmt);
        if (vasprintf(&p->message, fmt, ap) < 0)
                p->message = NULL;
        va_end(ap);
        proxy_update_io(p);
        proxy_wake(p);
}

/* ---- the body */

static ssize_t proxy_read(void *userdata, char *buf, size_t max) {
        Proxy *p = userdata;

        for (;;) {
                char tmp[16 * 1024];
                size_t used;
                ssize_t n;

                if (p->broken)
                        return HTTP_STREAM_ERROR;
                n = proxy_body_decode(&p->body, (const char *) p->in.data + p->in_pos, p->in.len - p->in_pos, &used,
                                      buf, max);
                p->in_pos += used;
                if (n < 0) {
                        log_info("proxy to port %u of sandbox %s: malformed chunked body", p->port, p->sandbox_id);
                        return HTTP_STREAM_ERROR;
                }
                if (n > 0) {
                        p->active_usec = now_usec_monotonic();
                        return n;
                }
                if (p->body.done)
                        return HTTP_STREAM_END;
                if (p->eof)
                        /* the server closed: the end of a body framed by that, else one cut short */
                        return p->body.framing == PROXY_BODY_CLOSE ? HTTP_STREAM_END : HTTP_STREAM_ERROR;
                /* everything held was passed on, or is a partial line (at most PROXY_ANSWER_LINE_MAX, the
                 * decoder said): make room, then read on */
                if (p->in_pos > 0) {
                        space_buf_consume(&p->in, p->in_pos);
                        p->in_pos = 0;
                }
                n = read(p->fd, tmp, MIN(sizeof tmp, max));
                if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                        p->reader_waiting = true;
                        proxy_update_io(p);
                        return 0;
                }
                if (n < 0)
                        return HTTP_STREAM_ERROR;
                if (n == 0)
                        p->eof = true;
                else if (space_buf_append(&p->in, tmp, (size_t) n) < 0)
                        return HTTP_STREAM_ERROR;
        }
}

static void proxy_detach(void *userdata, Request *r) {
        Proxy *p = userdata;

        p->request = NULL;
        p->io = sd_event_source_disable_unref(p->io);
        p->timer = sd_event_source_disable_unref(p->timer);
        /* a switched connection still bridged (MHD let it go first): its socket is closed right after this */
        p->bridge = bridge_free(p->bridge);
        /* a body framed by its length is complete before the server closes: its tunnel ends here (ended runs
         * right away, which is why detached is set only after); a switched connection that ended cleanly lets
         * its tunnel deliver what it still holds */
        if (p->tunnel && p->state != PROXY_CLOSED)
                tunnel_abort(p->tunnel, "the HTTP request ended");
        p->detached = true;
        proxy_free_if_done(p);
}

static void proxy_release(void *userdata) {
        Proxy *p = userdata;

        p->released = true;
        proxy_free_if_done(p);
}

/* ---- a switch of protocols */

/* The switched connection is over: why is NULL when both sides closed their sending halves and everything was
 * delivered; then the tunnel (if it has not ended yet) still passes on what it holds, and ends by itself. */
static void proxy_end_bridge(Proxy *p, const char *why) {
        if (p->state == PROXY_CLOSED)
                return;
        p->state = PROXY_CLOSED;
        if (why)
                log_debug("proxy to port %u of sandbox %s: the switched connection ended: %s", p->port,
                          p->sandbox_id, why);
        p->bridge = bridge_free(p->bridge);
        p->io = sd_event_source_disable_unref(p->io);
        p->fd = safe_close(p->fd); /* the tunnel still reads what was written before */
        if (why && p->tunnel)
                tunnel_abort(p->tunnel, why);
        if (p->request)
                http_upgrade_close(p->request);
}

static void bridge_done(Bridge *b, const char *why, void *userdata) {
        proxy_end_bridge(userdata, why);
}

/* MHD sent our 101 and hands over the client's socket: the rest of the request (if the server answered before
 * taking it all) and what the client sent since go to the server first, what the server sent after its head
 * to the client. */
static void proxy_upgraded(void *userdata, Request *r, int fd, const char *extra, size_t n) {
        Proxy *p = userdata;
        size_t to_server, to_client;
        int q;

        p->io = sd_event_source_disable_unref(p->io); /* the bridge watches p->fd from now on */
        p->state = PROXY_BRIDGE;
        if (p->broken || p->fd < 0) {
                proxy_end_bridge(p, "the connection into the sandbox ended before the switch");
                return;
        }
        if (p->out_pos > 0) {
                space_buf_consume(&p->out, p->out_pos);
                p->out_pos = 0;
        }
        if (p->in_pos > 0) {
                space_buf_consume(&p->in, p->in_pos);
                p->in_pos = 0;
        }
        if (n > 0 && space_buf_append(&p->out, extra, n) < 0) {
                proxy_end_bridge(p, "out of memory");
                return;
        }
        to_server = p->out.len;
        to_client = p->in.len;
        q = bridge_new(http_manager(r->http)->event, fd, p->fd, p->out.data, to_server, p->in.data, to_client,
                       bridge_done, p, &p->bridge);
        space_buf_done(&p->out);
        space_buf_done(&p->in);
        if (q < 0)
                proxy_end_bridge(p, "cannot bridge the connection");
}

/* The server's 101: the same to the client, with the server's headers (its Upgrade, Sec-WebSocket-Accept). */
static void proxy_switch(Request *r, Proxy *p) {
        int q;

        if (p->broken) {
                p->state = PROXY_FAILED;
                http_respond_error(r, ERROR_PORT_UNREACHABLE, "the connection to port %u of sandbox %s ended as "
                                   "it switched protocols", p->port, p->sandbox_id);
                return;
        }
        p->state = PROXY_UPGRADING;
        q = http_respond_upgrade(r, (const char *const *) p->head.headers, proxy_upgraded, p);
        if (q < 0) {
                p->state = PROXY_FAILED;
                http_respond_error(r, ERROR_INTERNAL, "cannot switch protocols: %s", strerror(-q));
        }
        proxy_update_io(p); /* what is left of the request still goes out until the switch */
}

/* Whether an Upgrade value can be sent on as it is: printable ASCII (tokens, "/", ","), not long. */
static bool upgrade_value_ok(const char *v) {
        size_t n = strlen(v);

        if (n == 0 || n > PROXY_UPGRADE_VALUE_MAX)
                return false;
        for (const unsigned char *c = (const unsigned char *) v; *c; c++)
                if ((*c < 0x20 && *c != '\t') || *c >= 0x7f)
                        return false;
        return true;
}

/* ---- time */

/* Until the head: its deadline. Then, while the body streams: its idle timeout, which moves with each byte
 * either way (checked when it fires, not re-armed per byte). */
static int on_proxy_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Proxy *p = userdata;
        uint64_t now = now_usec_monotonic(), due = p->active_usec + p->idle_sec * USEC_PER_SEC;

        if (p->state == PROXY_BODY && now < due) {
                if (sd_event_source_set_time(s, due) >= 0 && sd_event_source_set_enabled(s, SD_EVENT_ONESHOT) >= 0)
                        return 0;
        }
        p->timer = sd_event_source_disable_unref(p->timer);
        if (p->state == PROXY_OPENING || p->state == PROXY_EXCHANGE) {
                if (p->parser.upgrade)
                        proxy_fail(p, ERROR_DEADLINE_EXCEEDED, "the server on port %u of sandbox %s did not answer "
                                   "the upgrade within %u s", p->port, p->sandbox_id,
                                   MIN(p->head_sec, (unsigned) PROXY_UPGRADE_HEAD_SEC));
                else
                        proxy_fail(p, ERROR_DEADLINE_EXCEEDED, "the server on port %u of sandbox %s sent no answer "
                                   "head within %u s", p->port, p->sandbox_id, p->head_sec);
        } else if (p->state == PROXY_BODY) {
                log_info("proxy to port %u of sandbox %s: no byte either way for %u s, the answer is cut short",
                         p->port, p->sandbox_id, p->idle_sec);
                p->broken = true;
                proxy_wake(p); /* a reader waiting for the server sees it; MHD's own timeout ends one that is not */
        }
        return 0;
}

/* The body's idle timeout, from now; the connection's own in MHD to the same, for a client that stops reading
 * (MHD then stops asking for the body, so only its timeout notices). */
static void proxy_arm_idle(Proxy *p, Request *r) {
        int q;

        p->active_usec = now_usec_monotonic();
        p->timer = sd_event_source_disable_unref(p->timer);
        q = sd_event_add_time(http_manager(r->http)->event, &p->timer, CLOCK_MONOTONIC,
                              p->active_usec + p->idle_sec * USEC_PER_SEC, 0, on_proxy_timer, p);
        if (q < 0)
                log_warning("proxy to port %u of sandbox %s: no idle timeout for the answer: %s", p->port,
                            p->sandbox_id, strerror(-q));
        http_set_idle_timeout(r, p->idle_sec);
}

/* ---- the socket */

static void exchange_read(Proxy *p) {
        char tmp[16 * 1024];
        ssize_t n;
        size_t used;
        int q;

        while (p->state == PROXY_EXCHANGE) {
                /* what is held is a partial head: the heads together stay within their bound, so does this */
                size_t held = p->in.len - p->in_pos,
                       room = PROXY_ANSWER_HEAD_MAX - MIN(p->parser.taken + held, (size_t) PROXY_ANSWER_HEAD_MAX);

                if (room == 0) {
                        proxy_fail(p, ERROR_BAD_GATEWAY, "the server on port %u of sandbox %s answered with heads "
                                   "over %d KiB", p->port, p->sandbox_id, PROXY_ANSWER_HEAD_MAX / 1024);
                        return;
                }
                n = read(p->fd, tmp, MIN(sizeof tmp, room));
                if (n < 0) {
                        if (errno != EAGAIN && errno != EINTR)
                                proxy_fail(p, ERROR_BAD_GATEWAY, "reading the answer of port %u of sandbox %s: %s",
                                           p->port, p->sandbox_id, strerror(errno));
                        return;
                }
                if (n == 0) {
                        p->eof = true;
                        proxy_fail(p, p->broken ? ERROR_PORT_UNREACHABLE : ERROR_BAD_GATEWAY,
                                   "the server on port %u of sandbox %s closed the connection without an answer",
                                   p->port, p->sandbox_id);
                        return;
                }
                if (space_buf_append(&p->in, tmp, (size_t) n) < 0) {
                        proxy_fail(p, ERROR_INTERNAL, "out of memory");
                        return;
                }
                q = proxy_head_parse(&p->parser, (const char *) p->in.data + p->in_pos, p->in.len - p->in_pos, &used,
                                     &p->head);
                p->in_pos += used;
                if (q == -E2BIG) {
                        proxy_fail(p, ERROR_BAD_GATEWAY, "the server on port %u of sandbox %s answered with heads "
                                   "over %d KiB (interim 1xx heads count too)", p->port, p->sandbox_id,
                                   PROXY_ANSWER_HEAD_MAX / 1024);
                        return;
                }
                if (q == -ENOMEM) {
                        proxy_fail(p, ERROR_INTERNAL, "out of memory");
                        return;
                }
                if (q < 0) {
                        proxy_fail(p, ERROR_BAD_GATEWAY, "the server on port %u of sandbox %s answered with no valid "
                                   "HTTP/1.x response head", p->port, p->sandbox_id);
                        return;
                }
                if (q > 0) {
                        p->state = PROXY_HEAD;
                        p->timer = sd_event_source_disable_unref(p->timer);
                        proxy_body_init(&p->body, &p->head);
                        proxy_update_io(p);
                        proxy_wake(p);
                        return;
                }
                /* interim heads were taken and dropped: so are their bytes */
                if (p->in_pos > 0) {
                        space_buf_consume(&p->in, p->in_pos);
                        p->in_pos = 0;
                }
        }
}

static int on_proxy_io(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        Proxy *p = userdata;

        while (p->out_pos < p->out.len) {
                ssize_t n = write(p->fd, p->out.data + p->out_pos, p->out.len - p->out_pos);

                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        break;
                if (n < 0) {
                        /* the server stopped reading: what it answered (a 413, say) may still come */
                        p->out_pos = p->out.len;
                        break;
                }
                p->out_pos += (size_t) n;
                p->active_usec = now_usec_monotonic(); /* the rest of a request body counts as the body's bytes */
        }
        if (p->out_pos >= p->out.len && p->out.data) {
                space_buf_done(&p->out);
                p->out_pos = 0;
        }
        if (p->state == PROXY_EXCHANGE)
                exchange_read(p);
        else if (p->state == PROXY_BODY && p->reader_waiting && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
                p->reader_waiting = false;
                proxy_wake(p);
        }
        proxy_update_io(p);
        return 0;
}

static void tunnel_opened(Tunnel *t, int err, const char *message, void *userdata) {
        Proxy *p = userdata;

        if (err < 0) {
                p->tunnel = NULL; /* it ends right after, without ended */
                proxy_fail(p, ERROR_PORT_UNREACHABLE, "nothing accepts connections on port %u in sandbox %s: %s",
                           p->port, p->sandbox_id, message && *message ? message : strerror(-err));
                proxy_free_if_done(p);
                return;
        }
        if (p->state != PROXY_OPENING)
                return; /* failed meanwhile (the head's deadline): the request ends, and the tunnel with it */
        p->state = PROXY_EXCHANGE;
        proxy_update_io(p);
}

static void tunnel_ended(Tunnel *t, const TunnelStats *st, const char *why, void *userdata) {
        Proxy *p = userdata;

        p->tunnel = NULL;
        if (why) {
                p->broken = p->broken || p->state == PROXY_BODY || p->state == PROXY_HEAD ||
                            p->state == PROXY_UPGRADING;
                if (p->state == PROXY_OPENING || p->state == PROXY_EXCHANGE)
                        proxy_fail(p, ERROR_PORT_UNREACHABLE, "the connection to port %u of sandbox %s ended: %s",
                                   p->port, p->sandbox_id, why);
                else if (p->state == PROXY_BODY)
                        proxy_wake(p); /* the body reader sees it */
                else if (p->state == PROXY_BRIDGE)
                        proxy_end_bridge(p, why); /* the sandbox or its server went away: so does the client */
        }
        proxy_free_if_done(p);
}

static const TunnelOps proxy_tunnel_ops = {
        .opened = tunnel_opened,
        .ended = tunnel_ended,
};

/* ---- the request */

/* Percent-encodes what is not safe as it is in a path (or, query, a query's key or value). */
static int append_encoded(SpaceBuf *b, const char *s, bool query) {
        static const char hex[] = "0123456789ABCDEF";

        for (const unsigned char *c = (const unsigned char *) s; *c; c++) {
                bool plain = isalnum(*c) || strchr(query ? "-._~!$'()*,;:@/?" : "-._~!$&'()*+,;=:@/", *c);
                char e[3] = { '%', hex[*c >> 4], hex[*c & 15] };

                if (space_buf_append(b, plain ? (const char *) c : e, plain ? 1 : 3) < 0)
                        return -ENOMEM;
        }
        return 0;
}

typedef struct HeaderCopy {
        SpaceBuf *out;
        const char *connection;   /* the client's Connection header: the headers it names are its own */
        int error;
} HeaderCopy;

static bool named_in_connection(const char *connection, const char *name) {
        size_t n = strlen(name);

        for (const char *c = connection; c && *c;) {
                size_t k;

                c += strspn(c, " \t,");
                k = strcspn(c, " \t,");
                if (k == n && strncasecmp(c, name, n) == 0)
                        return true;
                c += k;
        }
        return false;
}

/* Whether a request header carries a secret of ours, which the guest never sees: the API key's header, E2B's
 * access tokens, an Authorization holding something shaped like our keys. Every one of them is dropped, not
 * only the one that authenticated the request. The shape, not a lookup among the keys: a revoked key, or
 * another daemon's, is as much a secret. */
static bool secret_header(const char *key, const char *value) {
        return strcasecmp(key, "X-API-Key") == 0 || strcasecmp(key, "X-Access-Token") == 0 ||
               strcasecmp(key, "E2b-Traffic-Access-Token") == 0 ||
               (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0 && api_key_shape_in(value));
}

static enum MHD_Result copy_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        HeaderCopy *h = cls;

        if (!key || !value || proxy_hop_by_hop(key, strlen(key)) || strcasecmp(key, "Host") == 0 ||
            strcasecmp(key, "Expect") == 0 || secret_header(key, value) || named_in_connection(h->connection, key))
                return MHD_YES;
        if (space_buf_append(h->out, key, strlen(key)) < 0 || space_buf_append(h->out, ": ", 2) < 0 ||
            space_buf_append(h->out, value, strlen(value)) < 0 || space_buf_append(h->out, "\r\n", 2) < 0)
                h->error = -ENOMEM;
        return MHD_YES;
}

typedef struct QueryCopy {
        SpaceBuf *out;
        bool first;
        int error;
} QueryCopy;

static enum MHD_Result copy_query(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        QueryCopy *q = cls;

        if (!key)
                return MHD_YES;
        if (space_buf_append(q->out, q->first ? "?" : "&", 1) < 0 || append_encoded(q->out, key, true) < 0 ||
            (value && (space_buf_append(q->out, "=", 1) < 0 || append_encoded(q->out, value, true) < 0)))
                q->error = -ENOMEM;
        q->first = false;
        return MHD_YES;
}

/* The request as it goes to the server: path is what the client asked for under the prefix; upgrade the
 * protocol it asks to switch to, or NULL. */
static int build_request(Request *r, const char *path, unsigned port, const char *upgrade, SpaceBuf *out) {
        const char *host = http_header(r, MHD_HTTP_HEADER_HOST);
        HeaderCopy h = { .out = out, .connection = http_header(r, MHD_HTTP_HEADER_CONNECTION) };
        QueryCopy qc = { .out = out, .first = true };
        char line[512];

        if (space_buf_append(out, r->method, strlen(r->method)) < 0 || space_buf_append(out, " ", 1) < 0 ||
            append_encoded(out, path, false) < 0)
                return -ENOMEM;
        MHD_get_connection_values(r->connection, MHD_GET_ARGUMENT_KIND, copy_query, &qc);
        if (qc.error < 0)
                return qc.error;
        if (out->len > PROXY_PATH_MAX)
                return -E2BIG;
        /* E2B's host form keeps its Host (servers build links from it); the native path names the guest's */
        if (r->host_port && host)
                snprintf(line, sizeof line, " HTTP/1.1\r\nHost: %.400s\r\n", host);
        else
                snprintf(line, sizeof line, " HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n", port);
        if (space_buf_append(out, line, strlen(line)) < 0)
                return -ENOMEM;
        MHD_get_connection_values(r->connection, MHD_HEADER_KIND, copy_header, &h);
        if (h.error < 0)
                return h.error;
        if (host && !strpbrk(host, "\r\n")) {
                snprintf(line, sizeof line, "X-Forwarded-Host: %.400s\r\n", host);
                if (space_buf_append(out, line, strlen(line)) < 0)
                        return -ENOMEM;
        }
        /* a switch keeps the connection (after the 101 it is the new protocol's), anything else is one request */
        if (upgrade)
                snprintf(line, sizeof line, "X-Forwarded-Proto: http\r\nConnection: Upgrade\r\nUpgrade: %.*s\r\n",
                         PROXY_UPGRADE_VALUE_MAX, upgrade);
        else
                snprintf(line, sizeof line, "X-Forwarded-Proto: http\r\nConnection: close\r\n");
        if (space_buf_append(out, line, strlen(line)) < 0)
                return -ENOMEM;
        /* a WebSocket handshake is a GET without a body: some servers refuse one that declares a length */
        if (!upgrade || r->body.len > 0) {
                snprintf(line, sizeof line, "Content-Length: %zu\r\n", r->body.len);
                if (space_buf_append(out, line, strlen(line)) < 0)
                        return -ENOMEM;
        }
        if (space_buf_append(out, "\r\n", 2) < 0 || space_buf_append(out, r->body.data, r->body.len) < 0)
                return -ENOMEM;
        return 0;
}

/* The rest of the URL after /v1/sandboxes/ID/ports/PORT: from the '/' that follows (api.c's route made sure). */
static const char *url_tail(const char *url, unsigned segments) {
        const char *u = url;

        for (unsigned i = 0; i < segments; i++) {
                u += strspn(u, "/");
                u += strcspn(u, "/");
        }
        return u;
}

static bool path_ok(const char *path) {
        /* no dot segments: what a server in the guest makes of /a/../b is its own, but we do not send what a
         * normalizing proxy would not */
        for (const char *c = path; *c;) {
                size_t k;

                c += strspn(c, "/");
                k = strcspn(c, "/");
                if ((k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                c += k;
        }
        return true;
}

/* The E2B host form authenticates with an API key or the sandbox's traffic token (E2B's trafficAccessToken),
 * which opens its ports and nothing else: the envd token, which runs commands, is not taken here, so that a
 * link to a web app in the sandbox need not carry it. An unknown sandbox and a wrong token get the same answer.
 * Looks only: it runs before the request's body is read (the route's token_ok) and again in the handler. */
static Sandbox *host_sandbox(Request *r) {
        Sandbox *s = sandbox_find_by_id(http_manager(r->http), r->host_sandbox);
        const char *token = http_header(r, "E2b-Traffic-Access-Token");

        if (s && s->pooled)
                s = NULL;
        if (s && !r->authenticated &&
            !(token && s->traffic_token && strlen(token) == SANDBOX_TOKEN_LEN &&
              memeq_const_time(token, s->traffic_token, SANDBOX_TOKEN_LEN)))
                s = NULL;
        if (!s) {
                if (!r->authenticated && (!token || !*token))
                        http_respond_error(r, ERROR_UNAUTHORIZED, "a sandbox's port needs an API key or the sandbox's "
                                           "traffic token (E2b-Traffic-Access-Token: the trafficAccessToken of the "
                                           "create or connect answer; its envd token is not taken here)");
                else
                        http_respond_error(r, ERROR_SANDBOX_NOT_FOUND, "sandbox %s not found, or the traffic token "
                                           "is not its own", r->host_sandbox);
        }
        return s;
}

static bool proxy_token_ok(Request *r) {
        return host_sandbox(r) != NULL;
}

static void proxy_answered(Request *r, void *userdata);

/* With the sandbox running: the PORT tunnel into it, with our end of a socketpair that carries the request, and
 * the request parked until the server's head came or something failed (proxy_answered). */
static void proxy_connect(Request *r, Proxy *p, Sandbox *s) {
        Manager *m = http_manager(r->http);
        int sv[2] = { -EBADF, -EBADF }, q;

        if (!s->channel.agent) {
                http_respond_error(r, ERROR_CHANNEL_LOST, "the agent channel of sandbox %s is reconnecting; try again",
                                   s->id);
                return;
        }
        q = build_request(r, p->path, p->port, p->upgrade, &p->out);
        if (q == -E2BIG) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "the path and query are over %d bytes", PROXY_PATH_MAX);
                return;
        }
        if (q < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
                http_respond_error(r, ERROR_INTERNAL, "cannot set up the connection: %s", strerror(q < 0 ? -q : errno));
                return;
        }
        p->fd = sv[0];
        q = sd_event_add_io(m->event, &p->io, p->fd, EPOLLOUT, on_proxy_io, p);
        if (q >= 0)
                q = sd_event_add_time(m->event, &p->timer, CLOCK_MONOTONIC, now_usec_monotonic() +
                                      (p->upgrade ? MIN(p->head_sec, (unsigned) PROXY_UPGRADE_HEAD_SEC) : p->head_sec) *
                                      USEC_PER_SEC, 0, on_proxy_timer, p);
        if (q >= 0) {
                (void) sd_event_source_set_enabled(p->io, SD_EVENT_OFF);
                q = tunnel_open_port(s->channel.agent, (uint16_t) p->port, sv[1], &proxy_tunnel_ops, p, &p->tunnel);
        }
        if (q < 0) {
                safe_close(sv[1]);
                p->tunnel = NULL;
                if (q == -EMFILE)
                        http_respond_error(r, ERROR_TOO_MANY_STREAMS, "sandbox %s has as many connections open as it "
                                           "may; try again", s->id);
                else
                        http_respond_error(r, ERROR_CHANNEL_LOST, "cannot open a connection into sandbox %s: %s",
                                           s->id, strerror(-q));
                return;
        }
        http_continue(r, proxy_answered, p);
}

/* The sandbox (found by id: it may have gone while the request waited), woken or resumed first if it has to
 * be: the request is parked on that operation and comes back here when it finished, or its deadline passed. */
static void proxy_ready(Request *r, void *userdata) {
        _cleanup_(error_done) Error e = {};
        Proxy *p = userdata;
        Sandbox *s = sandbox_find_by_id(http_manager(r->http), p->sandbox_id);
        Operation *op;
        int q;

        if (!s) {
                http_respond_error(r, ERROR_SANDBOX_NOT_FOUND, "sandbox %s is gone", p->sandbox_id);
                return;
        }
        q = sandbox_ready_for_use(s, &op, &e);
        if (q < 0) {
                http_respond_error(r, e.code, "%s", error_message(&e));
                return;
        }
        if (q > 0) {
                proxy_connect(r, p, s);
                return;
        }
        if (p->wake_deadline == 0)
                p->wake_deadline = now_usec_monotonic() + PROXY_WAKE_WAIT_SEC * USEC_PER_SEC;
        else if (now_usec_monotonic() >= p->wake_deadline) {
                http_respond_error(r, ERROR_SANDBOX_BUSY, "sandbox %s did not come up within %d s", s->id,
                                   PROXY_WAKE_WAIT_SEC);
                return;
        }
        if (http_wait_on(r, &op->waiters, p->wake_deadline, proxy_ready, p) < 0)
                http_respond_error(r, ERROR_INTERNAL, "cannot wait for sandbox %s to come up", s->id);
}

/* What the client asked for: the port, the path sent on and a switch of protocols, checked; the sandbox (by
 * its Host or the URL); then proxy_ready(). */
static void proxy_start(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        const char *path, *upgrade;
        unsigned long port;
        Sandbox *s;
        Proxy *p;

        if (r->host_port) {
                port = r->host_port;
                path = r->url;
        } else {
                char *end;

                errno = 0;
                port = strtoul(a->arg[1], &end, 10);
                if (errno || *end || port < 1 || port > 65535) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "port '%s' in the URL is not a TCP port (1 to "
                                           "65535)", a->arg[1]);
                        return;
                }
                path = url_tail(r->url, 5);
        }
        if (!*path)
                path = "/";
        if (!path_ok(path)) {
                http_respond_error(r, ERROR_INVALID_PATH, "the path sent on may not have '.' or '..' segments");
                return;
        }
        /* an Upgrade counts only where Connection names it, and never in HTTP/1.0 (RFC 9110, 7.8): else it is
         * dropped like any hop-by-hop header */
        upgrade = http_header(r, MHD_HTTP_HEADER_UPGRADE);
        if (!upgrade || !*upgrade || !named_in_connection(http_header(r, MHD_HTTP_HEADER_CONNECTION), "upgrade") ||
            !r->version || !streq(r->version, MHD_HTTP_VERSION_1_1))
                upgrade = NULL;
        if (upgrade && !upgrade_value_ok(upgrade)) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "the Upgrade header is over %d bytes or not "
                                   "printable ASCII", PROXY_UPGRADE_VALUE_MAX);
                return;
        }
        if (r->host_port)
                s = host_sandbox(r);
        else if (resolve_sandbox(r, a->arg[0], &s) < 0)
                s = NULL;
        if (!s)
                return;
        p = calloc(1, sizeof *p);
        if (!p) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return;
        }
        p->fd = -EBADF;
        p->request = r;
        p->port = (unsigned) port;
        p->path = path;
        p->upgrade = upgrade;
        p->released = true; /* no response body holds it yet */
        p->parser = (ProxyHeadParser) { .head_only = streq(r->method, "HEAD"), .upgrade = upgrade != NULL };
        p->head_sec = m->config.proxy_head_timeout ?: PROXY_HEAD_TIMEOUT_DEFAULT;
        p->idle_sec = m->config.proxy_idle_timeout ?: PROXY_IDLE_TIMEOUT_DEFAULT;
        memcpy(p->sandbox_id, s->id, sizeof p->sandbox_id);
        r->stream = (HttpStream) { .read = proxy_read, .detach = proxy_detach, .release = proxy_release,
                                   .userdata = p };
        proxy_ready(r, p);
}

/* The guest answered PORT and the server its head, or something failed (parked again while neither). */
static void proxy_answered(Request *r, void *userdata) {
        Proxy *p = userdata;
        int q;

        switch (p->state) {
        case PROXY_OPENING:
        case PROXY_EXCHANGE:
                http_continue(r, proxy_answered, p);
                return;
        case PROXY_FAILED:
                http_respond_error(r, p->error, "%s", p->message ?: error_code_to_string(p->error));
                return;
        case PROXY_HEAD: {
                uint64_t size = HTTP_SIZE_UNKNOWN;

                if (p->head.status == 101) {
                        proxy_switch(r, p);
                        return;
                }
                p->state = PROXY_BODY;
                if (p->head.framing == PROXY_BODY_LENGTH ||
                    (p->head.framing == PROXY_BODY_NONE && p->head.status != 304 && p->head.length > 0))
                        size = p->head.length;
                else if (p->head.framing == PROXY_BODY_NONE && !p->parser.head_only)
                        size = 0;
                p->released = false;
                q = http_respond_stream_status(r, p->head.status, size, (const char *const *) p->head.headers);
                if (q < 0 && !r->body_reader)
                        p->released = true;
                proxy_arm_idle(p, r);
                proxy_update_io(p);
                return;
        }
        case PROXY_BODY:
        case PROXY_UPGRADING:
        case PROXY_BRIDGE:
        case PROXY_CLOSED:
                return;
        }
}

void api_proxy(Request *r, const RouteArgs *a) {
        proxy_start(r, a);
}

const Route proxy_host_route = {
        .method = "*",
        .pattern = "",
        .handler = api_proxy,
        .auth = ROUTE_AUTH_TOKEN,
        .token_ok = proxy_token_ok,
        .errors = ERROR_STYLE_NATIVE,
};
