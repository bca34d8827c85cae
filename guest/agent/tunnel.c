/* SPDX-License-Identifier: Apache-2.0 */

/*
 * Tunnels: a TCP socket in the guest bridged to a channel stream (lib/proto.h, "Tunnels"; ARCHITECTURE.md,
 * decision 10). The proxy and the transparent listener (net-proxy.c) open them with CONNECT, the host opens
 * them with PORT (here). Once open they are all alike:
 *
 *   socket -> DATA(s, fd 1)  while we have credit and the port's queue is under AGENT_OUTQ_HIGH, so a fast
 *                            guest program blocks in write() instead of filling our memory;
 *   DATA(s, fd 0) -> socket  buffered up to the window the host may use, credited back as written;
 *   read 0 -> EOF(s, fd 1),  EOF(s, fd 0) -> shutdown(SHUT_WR) once the buffer is written;
 *   CLOSE(s) -> reset,       a socket error -> CLOSE(s) to the host.
 *
 * A tunnel is forgotten once both directions have ended and everything was written, or at once on an abort.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "net.h"

static Tunnel *tunnels[SPACE_TUNNELS_MAX];
static size_t n_tunnels;

size_t tunnels_count(void) {
        return n_tunnels;
}

Tunnel *tunnel_find(uint32_t id) {
        if (id == 0)
                return NULL;
        for (size_t i = 0; i < n_tunnels; i++)
                if (tunnels[i]->id == id)
                        return tunnels[i];
        return NULL;
}

void net_reset_fd(int fd) {
        struct linger l = { .l_onoff = 1, .l_linger = 0 };

        if (fd < 0)
                return;
        (void) setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        (void) close(fd);
}

Tunnel *tunnel_new(TunnelKind kind, TunnelState state, int fd) {
        Tunnel *t;

        if (n_tunnels >= SPACE_TUNNELS_MAX || !(t = calloc(1, sizeof *t))) {
                net_reset_fd(fd);
                return NULL;
        }
        *t = (Tunnel) { .kind = kind, .state = state, .fd = fd };
        space_credit_init(&t->in_credit);
        space_credit_init(&t->out_credit);
        tunnels[n_tunnels++] = t;
        return t;
}

void tunnel_free(Tunnel *t, bool reset) {
        for (size_t i = 0; i < n_tunnels; i++)
                if (tunnels[i] == t) {
                        tunnels[i] = tunnels[--n_tunnels];
                        break;
                }
        if (reset)
                net_reset_fd(t->fd);
        else
                safe_close(t->fd);
        space_buf_done(&t->head);
        space_buf_done(&t->pending);
        space_buf_done(&t->to_sock);
        free(t);
}

void tunnel_abort(Channel *c, Tunnel *t) {
        if (t->id != 0)
                (void) channel_send(c, SPACE_F_CLOSE, 0, t->id, NULL, 0);
        tunnel_free(t, true);
}

int tunnel_connect(Channel *c, Tunnel *t, const char *host, unsigned port, const char *via) {
        SpaceBuf kv = {};
        int r;

        /* Nobody would answer: fail now rather than at the timeout. */
        if (!c->host_connected)
                return -ENOTCONN;
        t->id = net_id_next();
        (void) snprintf(t->target, sizeof t->target, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
        (void) space_kv_add(&kv, "host", host);
        (void) space_kv_addf(&kv, "port", "%u", port);
        r = space_kv_add(&kv, "via", via);
        if (r >= 0)
                r = channel_send_kv(c, SPACE_F_CONNECT, t->id, &kv);
        space_buf_done(&kv);
        if (r < 0) {
                t->id = 0;
                return r;
        }
        t->state = TUNNEL_CONNECTING;
        t->deadline_ms = net_now_ms() + NET_CONNECT_TIMEOUT_MS;
        return 0;
}

/* Sends what pending holds, as far as credit goes. */
static void pending_send(Channel *c, Tunnel *t) {
        while (t->pending.len > 0 && t->out_credit.available > 0) {
                size_t n = t->pending.len;

                if (n > t->out_credit.available)
                        n = (size_t) t->out_credit.available;
                if (n > SPACE_FRAME_PAYLOAD_MAX)
                        n = SPACE_FRAME_PAYLOAD_MAX;
                if (channel_send(c, SPACE_F_DATA, 1, t->id, t->pending.data, n) < 0)
                        return;
                (void) space_credit_take(&t->out_credit, n);
                space_buf_consume(&t->pending, n);
        }
        if (t->pending.len == 0)
                space_buf_done(&t->pending);
}

/* A proxy's bytes wait for the host's OK; a captured connection's go at once (the host reads them to decide). */
static bool may_send(const Tunnel *t) {
        return t->id != 0 && (t->state == TUNNEL_OPEN || t->kind == TUNNEL_TRANSPARENT);
}

int tunnel_queue(Channel *c, Tunnel *t, const void *p, size_t n) {
        int r = space_buf_append(&t->pending, p, n);

        if (r < 0)
                return r;
        if (may_send(t))
                pending_send(c, t);
        return 0;
}

/* Forgets a tunnel whose two directions have ended. */
static bool maybe_finish(Tunnel *t) {
        if (t->state != TUNNEL_OPEN || !t->shut || !t->sock_eof || t->pending.len > 0)
                return false;
        tunnel_free(t, false);
        return true;
}

static void credit_flush(Channel *c, Tunnel *t) {
        uint8_t le[4];

        if (t->credit_pending == 0)
                return;
        space_put_le32(le, t->credit_pending);
        (void) space_credit_give(&t->in_credit, t->credit_pending);
        (void) channel_send(c, SPACE_F_CREDIT, 0, t->id, le, sizeof le);
        t->credit_pending = 0;
}

/* Writes what the host sent; after its EOF, half-closes. Returns false when the tunnel is gone. */
static bool sock_write(Channel *c, Tunnel *t) {
        if (t->state != TUNNEL_OPEN)
                return true; /* not connected yet, or a proxy client still waiting for its 200 */
        while (t->to_sock.len > 0) {
                ssize_t w = send(t->fd, t->to_sock.data, t->to_sock.len, MSG_NOSIGNAL);

                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        tunnel_abort(c, t); /* EPIPE, ECONNRESET: the program is gone */
                        return false;
                }
                space_buf_consume(&t->to_sock, (size_t) w);
                t->credit_pending += (uint32_t) w;
        }
        if (t->to_sock.len == 0)
                space_buf_done(&t->to_sock);
        credit_flush(c, t);
        if (t->to_sock.len == 0 && t->host_eof && !t->shut) {
                (void) shutdown(t->fd, SHUT_WR);
                t->shut = true;
        }
        return !maybe_finish(t);
}

void tunnel_opened(Channel *c, Tunnel *t) {
        t->state = TUNNEL_OPEN;
        t->deadline_ms = 0;
        if (sock_write(c, t))
                pending_send(c, t);
}

static void sock_read(Channel *c, Tunnel *t) {
        static uint8_t buf[SPACE_FRAME_PAYLOAD_MAX];
        size_t want = t->out_credit.available < sizeof buf ? (size_t) t->out_credit.available : sizeof buf;
        ssize_t n;

        if (want == 0 || t->sock_eof)
                return;
        n = recv(t->fd, buf, want, 0);
        if (n < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        tunnel_abort(c, t);
                return;
        }
        if (n == 0) {
                t->sock_eof = true;
                (void) channel_send(c, SPACE_F_EOF, 1, t->id, NULL, 0);
                (void) maybe_finish(t);
                return;
        }
        (void) space_credit_take(&t->out_credit, (size_t) n);
        (void) channel_send(c, SPACE_F_DATA, 1, t->id, buf, (size_t) n);
}

static void send_port_error(Channel *c, uint32_t id, int err) {
        SpaceBuf kv = {};
        char msg[128];

        (void) snprintf(msg, sizeof msg, "connect to a guest port: %s", strerror(err));
        (void) space_kv_addf(&kv, "errno", "%d", err);
        (void) space_kv_add(&kv, "message", msg);
        (void) channel_send_kv(c, SPACE_F_ERROR, id, &kv);
        space_buf_done(&kv);
}

/* Starts a non-blocking connect to the guest port on 127.0.0.1 (family AF_INET) or [::1]. Returns 0 when
 * connected, 1 when in progress, -errno on failure. */
static int port_connect_start(Tunnel *t, int family) {
        struct sockaddr_storage ss = {};
        socklen_t len;
        int fd;

        if (family == AF_INET) {
                struct sockaddr_in *a = (struct sockaddr_in *) &ss;
                *a = (struct sockaddr_in) { .sin_family = AF_INET, .sin_port = htons(t->port) };
                a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                len = sizeof *a;
        } else {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *) &ss;
                *a = (struct sockaddr_in6) { .sin6_family = AF_INET6, .sin6_port = htons(t->port) };
                a->sin6_addr = in6addr_loopback;
                len = sizeof *a;
        }
        fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        safe_close(t->fd);
        t->fd = fd;
        t->port_family = family;
        if (connect(fd, (struct sockaddr *) &ss, len) == 0)
                return 0;
        return errno == EINPROGRESS ? 1 : -errno;
}

/* The connect finished with err (0: connected): OK, or the next family, or ERROR. */
static void port_connect_done(Channel *c, Tunnel *t, int err) {
        int r;

        while (err != 0) {
                if (t->port_family != AF_INET) {
                        /* the IPv4 answer is the more telling one: most programs listen there */
                        send_port_error(c, t->id, t->port_err4 ? t->port_err4 : err);
                        tunnel_free(t, true);
                        return;
                }
                t->port_err4 = err;
                r = port_connect_start(t, AF_INET6);
                if (r == 1)
                        return; /* wait for it */
                err = r < 0 ? -r : 0;
        }
        (void) channel_send(c, SPACE_F_OK, 0, t->id, NULL, 0);
        tunnel_opened(c, t);
}

void tunnel_port(Channel *c, uint32_t id, const uint8_t *p, size_t n) {
        const char *v = NULL;
        unsigned long port;
        char *end;
        Tunnel *t;
        int r;

        if (id & SPACE_STREAM_GUEST_BIT) {
                channel_send_error(c, id, EINVAL, "PORT on a guest stream id");
                return;
        }
        if (tunnel_find(id)) {
                channel_send_error(c, id, EEXIST, "stream id in use");
                return;
        }
        if (space_kv_get(p, n, "port", &v) <= 0) {
                channel_send_error(c, id, EINVAL, "PORT without port=");
                return;
        }
        errno = 0;
        port = strtoul(v, &end, 10);
        if (errno || end == v || *end || port == 0 || port > 65535 || v[0] < '0' || v[0] > '9') {
                channel_send_error(c, id, EINVAL, "PORT: port= is not 1..65535");
                return;
        }
        t = tunnel_new(TUNNEL_PORT, TUNNEL_CONNECTING, -1);
        if (!t) {
                channel_send_error(c, id, EAGAIN, "too many tunnels");
                return;
        }
        t->id = id;
        t->port = (uint16_t) port;
        t->deadline_ms = net_now_ms() + NET_PORT_TIMEOUT_MS;
        r = port_connect_start(t, AF_INET);
        if (r == 1)
                return;
        port_connect_done(c, t, r < 0 ? -r : 0);
}

static void port_connect_check(Channel *c, Tunnel *t) {
        socklen_t len = sizeof(int);
        int err = 0;

        if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
        port_connect_done(c, t, err);
}

static void host_data(Channel *c, Tunnel *t, const uint8_t *p, size_t n) {
        if (space_credit_take(&t->in_credit, n) < 0) {
                log_warn("tunnel %08x: host overran its credit, closing", t->id);
                tunnel_abort(c, t);
                return;
        }
        if (t->host_eof || t->shut)
                return; /* after its own EOF: nothing to write it to */
        if (space_buf_append(&t->to_sock, p, n) < 0) {
                tunnel_abort(c, t);
                return;
        }
        (void) sock_write(c, t);
}

bool tunnel_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p) {
        Tunnel *t = tunnel_find(h->stream);
        const char *code = NULL, *message = NULL;

        if (!t)
                return false;
        switch (h->type) {
        case SPACE_F_OK:
        case SPACE_F_ERROR:
                if (t->state != TUNNEL_CONNECTING || t->kind == TUNNEL_PORT)
                        break; /* only CONNECT is answered by the host */
                if (h->type == SPACE_F_ERROR) {
                        (void) space_kv_get(p, h->length, "code", &code);
                        (void) space_kv_get(p, h->length, "message", &message);
                        t->id = 0; /* the host has forgotten the stream */
                }
                if (t->kind == TUNNEL_PROXY)
                        proxy_answer(c, t, h->type == SPACE_F_OK, code, message);
                else if (h->type == SPACE_F_ERROR) {
                        /* a captured connection fails as a reset, which says nothing: the note says why */
                        net_note_refusal("transparent", t->target, message ?: code);
                        tunnel_free(t, true);
                } else
                        tunnel_opened(c, t);
                break;
        case SPACE_F_DATA:
                if (h->fd == 0)
                        host_data(c, t, p, h->length);
                break;
        case SPACE_F_EOF:
                if (h->fd == 0 && !t->host_eof) {
                        t->host_eof = true;
                        (void) sock_write(c, t);
                }
                break;
        case SPACE_F_CREDIT:
                if (h->fd == 1 && h->length == 4) {
                        /* clamp, do not refuse: a restarted host re-grants a whole window (proto.h) */
                        space_credit_give_clamp(&t->out_credit, space_get_le32(p));
                        if (may_send(t))
                                pending_send(c, t);
                }
                break;
        case SPACE_F_CLOSE:
                tunnel_free(t, true);
                break;
        default:
                break;
        }
        return true;
}

size_t tunnels_poll_fill(const Channel *c, struct pollfd *fds, size_t max, Tunnel **owners) {
        bool room = channel_queued(c) < AGENT_OUTQ_HIGH;
        size_t n = 0;

        for (size_t i = 0; i < n_tunnels && n < max; i++) {
                Tunnel *t = tunnels[i];
                short ev = 0;

                switch (t->state) {
                case TUNNEL_HEAD:
                        ev = POLLIN;
                        break;
                case TUNNEL_CONNECTING:
                        if (t->kind == TUNNEL_PORT)
                                ev = POLLOUT;
                        else if (t->kind == TUNNEL_TRANSPARENT && room && !t->sock_eof &&
                                 t->out_credit.available > 0)
                                ev = POLLIN; /* the first bytes go at once: the host reads SNI or Host */
                        break;
                case TUNNEL_OPEN:
                        if (room && !t->sock_eof && t->out_credit.available > 0 && t->pending.len == 0)
                                ev |= POLLIN;
                        if (t->to_sock.len > 0)
                                ev |= POLLOUT;
                        break;
                }
                /* Without events only a proxy client waiting for its answer is polled, for the POLLHUP of one
                 * that gave up; any other would spin on a POLLHUP until it may read or write again. */
                if (t->fd < 0 || (ev == 0 && !(t->kind == TUNNEL_PROXY && t->state == TUNNEL_CONNECTING)))
                        continue;
                owners[n] = t;
                fds[n++] = (struct pollfd) { .fd = t->fd, .events = ev };
        }
        return n;
}

void tunnels_poll_handle(Channel *c, const struct pollfd *fds, size_t n, Tunnel **owners) {
        for (size_t i = 0; i < n; i++) {
                Tunnel *t = owners[i];
                short re = fds[i].revents;

                /* Handling one tunnel never frees another, so owners[] stays valid through the round. */
                if (re == 0)
                        continue;
                if (t->kind == TUNNEL_PORT && t->state == TUNNEL_CONNECTING) {
                        port_connect_check(c, t);
                        continue;
                }
                if (t->state == TUNNEL_HEAD) {
                        proxy_head_read(c, t);
                        continue;
                }
                if (!(fds[i].events & (POLLIN | POLLOUT))) {
                        if (re & (POLLERR | POLLHUP))
                                tunnel_abort(c, t); /* a proxy client that gave up waiting */
                        continue;
                }
                if ((fds[i].events & POLLOUT) && (re & (POLLOUT | POLLERR | POLLHUP)))
                        if (!sock_write(c, t))
                                continue;
                if ((fds[i].events & POLLIN) && (re & (POLLIN | POLLERR | POLLHUP)))
                        sock_read(c, t);
        }
}

void tunnels_timeouts(Channel *c, uint64_t now, uint64_t *next) {
        for (size_t i = 0; i < n_tunnels;) {
                Tunnel *t = tunnels[i];

                if (t->deadline_ms == 0 || t->state == TUNNEL_OPEN) {
                        i++;
                        continue;
                }
                if (t->deadline_ms > now) {
                        if (*next == 0 || t->deadline_ms < *next)
                                *next = t->deadline_ms;
                        i++;
                        continue;
                }
                /* each of these frees t, which moves the last tunnel to i: look at i again */
                if (t->kind == TUNNEL_PORT) {
                        send_port_error(c, t->id, ETIMEDOUT);
                        tunnel_free(t, true);
                } else if (t->kind == TUNNEL_PROXY)
                        proxy_timeout(c, t);
                else
                        tunnel_abort(c, t);
        }
}

void tunnels_drop_all(void) {
        /* The host that knew these streams is gone; a new one knows nothing of them. */
        for (size_t i = 0; i < n_tunnels;)
                if (tunnels[i]->state == TUNNEL_HEAD)
                        i++; /* no stream yet: a client still sending its head keeps going */
                else
                        tunnel_free(tunnels[i], true); /* moves the last one to i */
}
