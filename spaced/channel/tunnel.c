/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "channel/agent-internal.h"
#include "channel/tunnel.h"
#include "macro.h"
#include "channel/channel.h"

/* A socket on the host bridged to a channel stream (lib/proto.h, "Tunnels"). Bytes from the guest arrive as
 * DATA fd 1 and are bounded by the credit we gave: up never holds more than SPACE_STREAM_WINDOW bytes, and we
 * return credit only for bytes the socket took. Bytes for the guest go as DATA fd 0 while the guest has given
 * us credit and the channel's queue is short. */

#define TUNNEL_READ_MAX (64U * 1024U)

struct Tunnel {
        AgentConn *agent;
        Tunnel *next;
        uint32_t stream;
        bool inbound;             /* PORT: we opened it; else the guest's CONNECT */
        bool opened;              /* PORT: the guest answered OK */
        bool ok_sent;             /* CONNECT: OK went to the guest */
        bool released;            /* guest bytes go to the socket */
        int fd;                   /* -1 until attached */
        sd_event_source *io;
        const TunnelOps *ops;
        void *userdata;
        void (*peek_wake)(Tunnel *t, void *userdata);
        TunnelGate gate;          /* released, but only up_pass bytes of up may go */
        size_t up_pass;
        void (*down_watch)(Tunnel *t, const uint8_t *p, size_t n, void *userdata);

        SpaceBuf up;              /* guest bytes the socket has not taken yet */
        size_t up_injected;       /* bytes in up the gate put there (tunnel_pass_replace), credited already */
        bool regate_when_sent;    /* the gate waits for those to be sent (tunnel_gate_when_sent) */
        SpaceCredit up_window;    /* what the guest may still send */
        bool up_eof;              /* the guest sent EOF */
        bool up_shut;             /* and we passed it on (shutdown SHUT_WR) */

        SpaceCredit down_credit;  /* what we may still send to the guest */
        bool down_eof;            /* the socket read end: EOF sent to the guest */
        TunnelStats st;
};

static int tunnel_link(AgentConn *a, Tunnel *t) {
        if (a->n_tunnels >= SPACE_TUNNELS_MAX)
                return -EMFILE;
        t->agent = a;
        t->next = a->tunnels;
        a->tunnels = t;
        a->n_tunnels++;
        return 0;
}

static void tunnel_unlink(Tunnel *t) {
        AgentConn *a = t->agent;

        if (!a)
                return;
        for (Tunnel **i = &a->tunnels; *i; i = &(*i)->next)
                if (*i == t) {
                        *i = t->next;
                        a->n_tunnels--;
                        break;
                }
        t->agent = NULL;
        t->next = NULL;
}

static Tunnel *tunnel_new(const TunnelOps *ops, void *userdata) {
        Tunnel *t = calloc(1, sizeof *t);

        if (!t)
                return NULL;
        t->fd = -1;
        t->ops = ops;
        t->userdata = userdata;
        space_credit_init(&t->up_window);
        space_credit_init(&t->down_credit);
        return t;
}

static void tunnel_free(Tunnel *t) {
        tunnel_unlink(t);
        sd_event_source_disable_unref(t->io);
        safe_close(t->fd);
        space_buf_done(&t->up);
        free(t);
}

/* A socket closed with a reset, so its peer sees the connection fail rather than end. */
static void reset_fd(int fd) {
        struct linger l = { .l_onoff = 1, .l_linger = 0 };

        if (fd >= 0)
                (void) setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

static void tunnel_end(Tunnel *t, const char *why, bool send_close) {
        TunnelStats st = t->st;
        const TunnelOps *ops = t->ops;
        void *userdata = t->userdata;

        if (send_close && t->agent)
                (void) agent_send(t->agent, SPACE_F_CLOSE, 0, t->stream, NULL, 0);
        if (why)
                reset_fd(t->fd);
        tunnel_free(t);
        if (ops && ops->ended)
                ops->ended(t, &st, why, userdata);
}

void tunnel_abort(Tunnel *t, const char *why) {
        tunnel_end(t, why ?: "aborted", true);
}

Tunnel *tunnel_find(AgentConn *a, uint32_t stream) {
        for (Tunnel *t = a ? a->tunnels : NULL; t; t = t->next)
                if (t->stream == stream)
                        return t;
        return NULL;
}

static bool want_read(const Tunnel *t) {
        return t->fd >= 0 && !t->down_eof && t->down_credit.available > 0 && (!t->inbound || t->opened);
}

/* The guest bytes that may go to the socket now. */
static size_t sendable(const Tunnel *t) {
        return t->gate ? MIN(t->up_pass, t->up.len) : t->up.len;
}

static bool want_write(const Tunnel *t) {
        return t->fd >= 0 && t->released && (sendable(t) > 0 || (t->up_eof && !t->up_shut && t->up.len == 0));
}

static void update_events(Tunnel *t) {
        uint32_t ev = 0;

        if (!t->io)
                return;
        if (want_read(t)) {
                if (t->agent && agent_queued(t->agent) >= AGENT_TUNNEL_QUEUE_MAX)
                        t->agent->tunnels_throttled = true;
                else
                        ev |= EPOLLIN;
        }
        if (want_write(t) && sendable(t) > 0)
                ev |= EPOLLOUT;
        /* epoll reports a hangup even for no events: switch the source off while we want nothing. */
        if (ev == 0)
                (void) sd_event_source_set_enabled(t->io, SD_EVENT_OFF);
        else {
                (void) sd_event_source_set_io_events(t->io, ev);
                (void) sd_event_source_set_enabled(t->io, SD_EVENT_ON);
        }
}

/* 1: the tunnel is over and freed; 0: carry on. */
static int maybe_finished(Tunnel *t) {
        if (t->up_shut && t->up.len == 0 && t->down_eof) {
                tunnel_end(t, NULL, false);
                return 1;
        }
        return 0;
}

static void send_credit(Tunnel *t, size_t n) {
        uint8_t le[4];

        space_put_le32(le, (uint32_t) n);
        (void) agent_send(t->agent, SPACE_F_CREDIT, 1, t->stream, le, 4);
        space_credit_give_clamp(&t->up_window, (uint32_t) n);
}

/* Writes what the guest sent to the socket and returns credit for it. 1: the tunnel ended. */
static int flush_up(Tunnel *t) {
        size_t written = 0;

        while (sendable(t) > 0) {
                ssize_t n = send(t->fd, t->up.data, sendable(t), MSG_NOSIGNAL);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        tunnel_end(t, "the connection failed while sending", true);
                        return 1;
                }
                space_buf_consume(&t->up, (size_t) n);
                written += (size_t) n;
                if (t->gate)
                        t->up_pass -= (size_t) n;
        }
        if (written > 0) {
                /* the gate's own bytes were never the guest's: their guest bytes got their credit back then */
                size_t injected = MIN(written, t->up_injected);

                t->up_injected -= injected;
                t->st.up += written;
                if (written > injected)
                        send_credit(t, written - injected);
        }
        if (t->up.len == 0 && t->up_eof && !t->up_shut) {
                (void) shutdown(t->fd, SHUT_WR);
                t->up_shut = true;
                return maybe_finished(t);
        }
        return 0;
}

/* Reads the socket into DATA frames while the guest has room. 1: the tunnel ended. */
static int pump_down(Tunnel *t) {
        uint8_t buf[TUNNEL_READ_MAX];

        while (want_read(t) && agent_queued(t->agent) < AGENT_TUNNEL_QUEUE_MAX) {
                size_t want = MIN((size_t) t->down_credit.available, sizeof buf);
                ssize_t n = recv(t->fd, buf, want, 0);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        tunnel_end(t, "the connection was reset", true);
                        return 1;
                }
                if (n > 0 && t->down_watch)
                        t->down_watch(t, buf, (size_t) n, t->userdata);
                if (n == 0) {
                        t->down_eof = true;
                        (void) agent_send(t->agent, SPACE_F_EOF, 0, t->stream, NULL, 0);
                        return maybe_finished(t);
                }
                if (agent_send(t->agent, SPACE_F_DATA, 0, t->stream, buf, (size_t) n) < 0) {
                        tunnel_end(t, "the channel to the guest is full", true);
                        return 1;
                }
                (void) space_credit_take(&t->down_credit, (size_t) n);
                t->st.down += (uint64_t) n;
        }
        return 0;
}

static int on_tunnel_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Tunnel *t = userdata;

        if ((revents & EPOLLOUT) && flush_up(t))
                return 0;
        if (t->regate_when_sent && t->up_injected == 0) {
                t->regate_when_sent = false;
                tunnel_regate(t); /* it may end the tunnel: nothing of t after this */
                return 0;
        }
        if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) && pump_down(t))
                return 0;
        if ((revents & EPOLLERR) && !want_read(t)) {
                tunnel_end(t, "the connection failed", true);
                return 0;
        }
        update_events(t);
        return 0;
}

void tunnels_kick(AgentConn *a) {
        Tunnel *next;

        a->tunnels_throttled = false;
        for (Tunnel *t = a->tunnels; t; t = next) {
                next = t->next;
                update_events(t);
        }
}

static int start_io(Tunnel *t) {
        Sandbox *s = agent_sandbox(t->agent);

        if (!s)
                return -ENOTCONN;
        return sd_event_add_io(channel_sandbox->manager(s)->event, &t->io, t->fd, EPOLLIN, on_tunnel_io, t);
}

int tunnel_open_port(AgentConn *a, uint16_t guest_port, int fd, const TunnelOps *ops, void *userdata,
                     Tunnel **ret) {
        SpaceBuf kv = {};
        Tunnel *t;
        int r;

        if (!a || guest_port == 0)
                return -EINVAL;
        t = tunnel_new(ops, userdata);
        if (!t)
                return -ENOMEM;
        t->inbound = true;
        t->released = true;
        t->stream = agent_new_free_stream(a);
        r = tunnel_link(a, t);
        if (r < 0) {
                free(t);
                return r;
        }
        r = space_kv_addf(&kv, "port", "%u", guest_port);
        if (r >= 0)
                r = agent_send(a, SPACE_F_PORT, 0, t->stream, kv.data, kv.len);
        space_buf_done(&kv);
        if (r < 0) {
                tunnel_free(t);
                return r;
        }
        t->fd = fd;
        if (ret)
                *ret = t;
        return 0;
}

int tunnel_accept_guest(AgentConn *a, uint32_t stream, const TunnelOps *ops, void *userdata, Tunnel **ret) {
        Tunnel *t;
        int r;

        if (!a || !(stream & SPACE_STREAM_GUEST_BIT))
                return -EINVAL;
        if (tunnel_find(a, stream))
                return -EEXIST;
        t = tunnel_new(ops, userdata);
        if (!t)
                return -ENOMEM;
        t->stream = stream;
        r = tunnel_link(a, t);
        if (r < 0) {
                free(t);
                return r;
        }
        *ret = t;
        return 0;
}

void tunnel_held(Tunnel *t, const uint8_t **ret_data, size_t *ret_len, bool *ret_eof) {
        *ret_data = t->up.data;
        *ret_len = t->up.len;
        *ret_eof = t->up_eof;
}

void tunnel_set_peek_waiter(Tunnel *t, void (*wake)(Tunnel *t, void *userdata)) {
        t->peek_wake = wake;
}

int tunnel_attach(Tunnel *t, int fd, const char *addr_text) {
        SpaceBuf kv = {};
        int r;

        if (t->fd >= 0 || t->inbound) {
                safe_close(fd);
                return -EBUSY;
        }
        t->fd = fd;
        r = start_io(t);
        if (r < 0)
                return r;
        r = space_kv_add(&kv, "addr", addr_text ?: "");
        if (r >= 0)
                r = agent_send(t->agent, SPACE_F_OK, 0, t->stream, kv.data, kv.len);
        space_buf_done(&kv);
        if (r < 0)
                return r;
        t->ok_sent = true;
        update_events(t);
        return 0;
}

int tunnel_swap_socket(Tunnel *t, int fd, int *ret_old) {
        int r;

        if (t->fd < 0 || t->released || t->st.down > 0 || t->st.up > 0 || t->down_eof)
                return -EBUSY;
        t->io = sd_event_source_disable_unref(t->io);
        *ret_old = t->fd;
        t->fd = fd;
        r = start_io(t);
        if (r < 0) {
                t->fd = *ret_old;
                *ret_old = -1;
                (void) start_io(t);
                return r;
        }
        update_events(t);
        return 0;
}

void tunnel_release(Tunnel *t) {
        if ((t->released && !t->gate) || t->fd < 0)
                return;
        t->released = true;
        t->gate = NULL;
        t->peek_wake = NULL;
        if (flush_up(t))
                return;
        update_events(t);
}

void tunnel_release_gated(Tunnel *t, TunnelGate gate) {
        if (t->released || t->fd < 0)
                return;
        t->released = true;
        t->gate = gate;
        t->up_pass = 0;
        t->peek_wake = NULL;
        tunnel_regate(t);
}

void tunnel_unchecked(Tunnel *t, const uint8_t **ret_data, size_t *ret_len, bool *ret_eof) {
        size_t pass = MIN(t->up_pass, t->up.len);

        *ret_data = t->up.data + pass;
        *ret_len = t->up.len - pass;
        *ret_eof = t->up_eof;
}

void tunnel_pass(Tunnel *t, size_t n) {
        t->up_pass = MIN(t->up_pass + n, t->up.len);
}

int tunnel_pass_replace(Tunnel *t, size_t n, const void *data, size_t len) {
        size_t pass = MIN(t->up_pass, t->up.len);
        SpaceBuf nb = {};

        if (!t->gate || n > t->up.len - pass)
                return -EINVAL;
        if (space_buf_append(&nb, t->up.data, pass) < 0 || space_buf_append(&nb, data, len) < 0 ||
            space_buf_append(&nb, t->up.data + pass + n, t->up.len - pass - n) < 0) {
                explicit_bzero(nb.data, nb.len);
                space_buf_done(&nb);
                return -ENOMEM;
        }
        space_buf_done(&t->up);
        t->up = nb;
        t->up_pass = pass + len;
        t->up_injected += len;
        if (n > 0)
                send_credit(t, n);
        return 0;
}

size_t tunnel_injected(Tunnel *t) {
        return t->up_injected;
}

void tunnel_gate_when_sent(Tunnel *t) {
        t->regate_when_sent = true;
}

void tunnel_regate(Tunnel *t) {
        if (t->gate && t->gate(t, t->userdata))
                return;
        if (want_write(t) && flush_up(t))
                return;
        update_events(t);
}

void tunnel_watch_down(Tunnel *t, void (*watch)(Tunnel *t, const uint8_t *p, size_t n, void *userdata)) {
        t->down_watch = watch;
}

const TunnelStats *tunnel_stats(Tunnel *t) {
        return &t->st;
}

void tunnel_refuse(Tunnel *t, SpaceCode code, const char *message) {
        if (t->agent)
                channel_refuse_guest_stream(t->agent, t->stream, code, message);
        tunnel_free(t);
}

static void on_port_answer(Tunnel *t, const SpaceFrameHeader *h, const uint8_t *p) {
        const TunnelOps *ops = t->ops;
        void *userdata = t->userdata;

        if (h->type == SPACE_F_OK) {
                t->opened = true;
                if (start_io(t) < 0) {
                        tunnel_end(t, "cannot watch the connection", true);
                        return;
                }
                if (ops && ops->opened)
                        ops->opened(t, 0, NULL, userdata);
                update_events(t);
                return;
        }
        if (h->type == SPACE_F_ERROR) {
                const char *msg = NULL, *err = NULL;
                long e;

                (void) space_kv_get(p, h->length, "message", &msg);
                (void) space_kv_get(p, h->length, "errno", &err);
                e = err ? strtol(err, NULL, 10) : 0;
                reset_fd(t->fd);
                tunnel_free(t);
                if (ops && ops->opened)
                        ops->opened(t, -(e > 0 && e < 4096 ? (int) e : ECONNREFUSED),
                                    msg ?: "the guest refused the connection", userdata);
                return;
        }
        /* Anything else before the answer is the guest breaking the protocol. */
        tunnel_end(t, "the guest answered PORT with something else", true);
}

void tunnel_on_frame(Tunnel *t, const SpaceFrameHeader *h, const uint8_t *p) {
        if (t->inbound && !t->opened) {
                on_port_answer(t, h, p);
                return;
        }
        switch (h->type) {
        case SPACE_F_DATA:
                if (h->fd != 1 || t->up_eof) {
                        tunnel_end(t, "the guest sent data it may not send", true);
                        return;
                }
                if (space_credit_take(&t->up_window, h->length) < 0) {
                        tunnel_end(t, "the guest overran its window", true);
                        return;
                }
                if (space_buf_append(&t->up, p, h->length) < 0) {
                        tunnel_end(t, "out of memory", true);
                        return;
                }
                break;
        case SPACE_F_EOF:
                if (h->fd != 1)
                        return;
                t->up_eof = true;
                break;
        case SPACE_F_CREDIT:
                if (h->fd != 0 || h->length != 4)
                        return;
                if (space_credit_give(&t->down_credit, space_get_le32(p)) < 0) {
                        tunnel_end(t, "the guest gave more credit than the window", true);
                        return;
                }
                break;
        case SPACE_F_CLOSE:
                tunnel_end(t, "the guest closed the connection", false);
                return;
        default:
                return;
        }

        if (!t->released) {
                if (t->peek_wake)
                        t->peek_wake(t, t->userdata); /* may attach, release, refuse or abort t */
                return;
        }
        if (t->gate && IN_SET(h->type, SPACE_F_DATA, SPACE_F_EOF) && t->gate(t, t->userdata))
                return;
        if (want_write(t) && flush_up(t))
                return;
        if (pump_down(t))
                return;
        update_events(t);
}

void tunnels_lost(AgentConn *a, const char *why) {
        while (a->tunnels) {
                Tunnel *t = a->tunnels;

                tunnel_unlink(t);
                tunnel_end(t, why, false);
        }
}
