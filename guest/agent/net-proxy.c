/* SPDX-License-Identifier: Apache-2.0 */

/*
 * The two ways a guest program's connection reaches a tunnel (ARCHITECTURE.md, decision 10):
 *
 *   - the HTTP proxy (HTTP_PROXY and friends point at it): the request head names the destination
 *     (lib/proxy-request.h); CONNECT waits for the host's OK before it answers 200, a plain request is
 *     forwarded in origin form once the host is connected;
 *   - the transparent listener, where nftables redirects every other outbound TCP connection
 *     (net-capture.c): the destination is the connection's original one (SO_ORIGINAL_DST), and the
 *     program's first bytes go to the host at once, since they are what the host decides on (TLS SNI, Host).
 */

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "../../lib/proxy-request.h"
#include "net.h"

/* <linux/netfilter_ipv4.h> and <linux/netfilter_ipv6/ip6_tables.h> clash with glibc's headers. */
#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif
#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

/* Accepting stops after this many per wakeup, so one busy listener cannot starve the channel. */
#define ACCEPT_BURST 16

static int accept_one(int listen_fd) {
        int fd;

        do
                fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        while (fd < 0 && errno == EINTR);
        return fd;
}

/* An answer of our own to a proxy client, then a close: short enough for the empty send buffer of a socket
 * that has not sent anything yet. */
#define EGRESS_HINT "The sandbox's egress policy refused this connection. Every decision is in " \
        "/run/space/egress-refused.log here and in 'spacectl egress log SANDBOX' on the host (space-egress(5)).\n"

/* The host's text as one line of a head: a control character could end it or start another. */
static void head_safe(char *s) {
        for (; *s; s++)
                if ((unsigned char) *s < 0x20 || *s == 0x7f)
                        *s = '?';
}

static void reply_and_close(Tunnel *t, int status, const char *reason, const char *text) {
        char buf[2048], line[256];
        size_t tl = strnlen(text, 512); /* a long message from the host is cut */
        int l;

        (void) snprintf(line, sizeof line, "%.*s", (int) tl, text);
        head_safe(line);
        /* The reason phrase carries why: many clients print only the status line ("Tunnel connection failed:
         * 403 ..."), and it is what pip and Python's http.client show. */
        l = snprintf(buf, sizeof buf,
                     "HTTP/1.1 %d %s%s%s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                     "X-Space-Reason: %s\r\nConnection: close\r\n\r\n%.*s\n%s",
                     status, reason, status == 403 ? " by space egress: " : "", status == 403 ? line : "",
                     tl + 1 + (status == 403 ? strlen(EGRESS_HINT) : 0), line, (int) tl, text,
                     status == 403 ? EGRESS_HINT : "");
        if (l > 0 && l < (int) sizeof buf)
                (void) !send(t->fd, buf, (size_t) l, MSG_NOSIGNAL);
        (void) shutdown(t->fd, SHUT_WR);
        tunnel_free(t, false);
}

void proxy_accept(Channel *c, int listen_fd) {
        for (int i = 0; i < ACCEPT_BURST; i++) {
                int fd = accept_one(listen_fd);
                Tunnel *t;

                if (fd < 0)
                        return;
                t = tunnel_new(TUNNEL_PROXY, TUNNEL_HEAD, fd);
                if (!t)
                        continue; /* full: reset, tunnel_new did it */
                t->deadline_ms = net_now_ms() + NET_HEAD_TIMEOUT_MS;
        }
        (void) c;
}

static void head_parsed(Channel *c, Tunnel *t, size_t head_len) {
        ProxyRequest r;
        int q;

        q = proxy_request_parse((const char *) t->head.data, head_len, &r);
        if (q == -EPROTONOSUPPORT) {
                reply_and_close(t, 501, "Not Implemented", "only http:// URIs and CONNECT are proxied");
                return;
        }
        if (q < 0) {
                reply_and_close(t, 400, "Bad Request", "malformed proxy request");
                return;
        }

        t->connect_method = r.connect;
        if (!r.connect && proxy_request_rewrite((const char *) t->head.data, &r, &t->pending) < 0) {
                reply_and_close(t, 500, "Internal Server Error", "out of memory");
                return;
        }
        /* what the client sent after its head (a body, an eager TLS ClientHello) follows */
        if (t->head.len > head_len &&
            space_buf_append(&t->pending, t->head.data + head_len, t->head.len - head_len) < 0) {
                reply_and_close(t, 500, "Internal Server Error", "out of memory");
                return;
        }
        space_buf_done(&t->head);

        q = tunnel_connect(c, t, r.host, r.port, "proxy");
        if (q < 0)
                reply_and_close(t, 502, "Bad Gateway", q == -ENOTCONN ? "the sandbox's host is not connected" :
                                                                         "cannot open a tunnel");
}

void proxy_head_read(Channel *c, Tunnel *t) {
        size_t room = PROXY_HEAD_MAX - t->head.len, hl;
        uint8_t buf[4096];
        ssize_t n;

        if (room > sizeof buf)
                room = sizeof buf;
        n = room > 0 ? recv(t->fd, buf, room, 0) : 0;
        if (n < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        tunnel_free(t, true);
                return;
        }
        if (n == 0 && room > 0) {
                tunnel_free(t, false); /* gone before its request was whole */
                return;
        }
        if (space_buf_append(&t->head, buf, (size_t) n) < 0) {
                tunnel_free(t, true);
                return;
        }
        hl = proxy_head_length((const char *) t->head.data, t->head.len);
        if (hl > 0)
                head_parsed(c, t, hl);
        else if (t->head.len >= PROXY_HEAD_MAX)
                reply_and_close(t, 431, "Request Header Fields Too Large", "the request head is too large");
}

void proxy_answer(Channel *c, Tunnel *t, bool ok, const char *code, const char *message) {
        static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        SpaceCode k;

        if (ok) {
                if (t->connect_method &&
                    send(t->fd, established, sizeof established - 1, MSG_NOSIGNAL) != (ssize_t) sizeof established - 1) {
                        tunnel_abort(c, t);
                        return;
                }
                tunnel_opened(c, t);
                return;
        }

        if (!message || !*message)
                message = code && *code ? code : "refused by the sandbox's host";
        net_note_refusal("proxy", t->target, message);
        if (space_code_from_string(code, &k) < 0)
                k = SPACE_CODE_DENIED;
        if (IN_SET(k, SPACE_CODE_UNREACHABLE, SPACE_CODE_TIMEOUT))
                reply_and_close(t, 502, "Bad Gateway", message);
        else if (k == SPACE_CODE_BUSY)
                reply_and_close(t, 503, "Service Unavailable", message);
        else
                reply_and_close(t, 403, "Forbidden", message);
}

void proxy_timeout(Channel *c, Tunnel *t) {
        if (t->state == TUNNEL_HEAD) {
                reply_and_close(t, 408, "Request Timeout", "the request head took too long");
                return;
        }
        if (t->id != 0)
                (void) channel_send(c, SPACE_F_CLOSE, 0, t->id, NULL, 0);
        t->id = 0;
        reply_and_close(t, 504, "Gateway Timeout", "the sandbox's host did not answer");
}

/* The destination the program asked for, before the redirect. -errno when the connection was not
 * redirected (a program that connected to the listener itself). */
static int original_dst(int fd, struct sockaddr_storage *ret) {
        struct sockaddr_storage local = {};
        socklen_t len = sizeof local, olen = sizeof *ret;
        char a[64], b[64];
        uint16_t pa, pb;

        if (getsockname(fd, (struct sockaddr *) &local, &len) < 0)
                return -errno;
        *ret = (struct sockaddr_storage) {};
        if (local.ss_family == AF_INET6) {
                if (getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, ret, &olen) < 0)
                        return -errno;
        } else if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, ret, &olen) < 0)
                return -errno;
        /* not redirected: the original destination is the listener */
        if (net_addr_text(ret, a, sizeof a, &pa) < 0 || net_addr_text(&local, b, sizeof b, &pb) < 0)
                return -EAFNOSUPPORT;
        if (pa == pb && streq(a, b))
                return -ELOOP;
        return 0;
}

void transparent_accept(Channel *c, int listen_fd) {
        for (int i = 0; i < ACCEPT_BURST; i++) {
                struct sockaddr_storage dst;
                char host[64];
                uint16_t port;
                Tunnel *t;
                int fd, r;

                fd = accept_one(listen_fd);
                if (fd < 0)
                        return;
                r = original_dst(fd, &dst);
                if (r >= 0)
                        r = net_addr_text(&dst, host, sizeof host, &port);
                if (r < 0) {
                        net_reset_fd(fd);
                        continue;
                }
                t = tunnel_new(TUNNEL_TRANSPARENT, TUNNEL_CONNECTING, fd);
                if (!t)
                        continue;
                if (tunnel_connect(c, t, host, port, "transparent") < 0)
                        tunnel_free(t, true);
        }
}
