/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "proxy/proxy-upgrade.h"
#include "macro.h"

/*
 * Two ways, each a buffer of at most BRIDGE_BUFFER_MAX (more only for what was read before the switch): a way
 * reads its source only while it has room and writes its destination whenever it holds bytes. A source's end
 * (EOF) becomes, once what it sent was delivered, a shutdown of the destination's sending half, so a client or
 * a server that half-closes keeps receiving. Both sockets are level-triggered sources that ask only for what
 * their ways can do now; one that can do nothing is switched off (epoll reports a hangup even for no events).
 */

/* Rounds of read-then-write per way and wake-up: a fast pair goes back to the loop after at most this many
 * buffers, so it cannot keep other requests waiting. */
#define BRIDGE_ROUNDS 16

enum { CLIENT, SERVER };

typedef struct Way {
        uint8_t *buf;
        size_t cap, start, end;  /* the bytes held are buf[start..end) */
        bool eof;                /* the source closed its sending half */
        bool shut;               /* and that was passed on, after the last byte */
} Way;

struct Bridge {
        int fd[2];
        sd_event_source *io[2];
        Way way[2];              /* way[i] goes from fd[i] to fd[!i] */
        BridgeDone done;
        void *userdata;
};

static int way_init(Way *w, const void *held, size_t n) {
        w->cap = n > BRIDGE_BUFFER_MAX ? n : (size_t) BRIDGE_BUFFER_MAX;
        w->buf = malloc(w->cap);
        if (!w->buf)
                return -ENOMEM;
        if (n > 0)
                memcpy(w->buf, held, n);
        w->end = n;
        return 0;
}

/* Moves bytes from src through w to dst until neither can go on: 0, or -errno when a socket failed (on the
 * side *ret_side names). */
static int way_pump(Way *w, int src, int dst, int src_side, int *ret_side) {
        for (unsigned round = 0; round < BRIDGE_ROUNDS; round++) {
                bool progress = false;
                ssize_t n;

                if (w->start < w->end) {
                        n = send(dst, w->buf + w->start, w->end - w->start, MSG_NOSIGNAL | MSG_DONTWAIT);
                        if (n < 0 && errno != EAGAIN && errno != EINTR) {
                                *ret_side = !src_side;
                                return -errno;
                        }
                        if (n > 0) {
                                w->start += (size_t) n;
                                progress = true;
                        }
                }
                if (w->start == w->end)
                        w->start = w->end = 0;
                if (w->eof) {
                        if (w->start == w->end && !w->shut) {
                                /* a peer already gone shows itself on the next send or recv */
                                (void) shutdown(dst, SHUT_WR);
                                w->shut = true;
                        }
                        return 0;
                }
                if (w->end == w->cap && w->start > 0) {
                        memmove(w->buf, w->buf + w->start, w->end - w->start);
                        w->end -= w->start;
                        w->start = 0;
                }
                if (w->end < w->cap) {
                        n = recv(src, w->buf + w->end, w->cap - w->end, MSG_DONTWAIT);
                        if (n < 0 && errno != EAGAIN && errno != EINTR) {
                                *ret_side = src_side;
                                return -errno;
                        }
                        if (n == 0)
                                w->eof = true;
                        else if (n > 0)
                                w->end += (size_t) n;
                        progress = progress || n >= 0;
                }
                if (!progress)
                        return 0;
        }
        return 0;
}

static bool way_can_read(const Way *w) {
        return !w->eof && (w->end < w->cap || w->start > 0);
}

static bool way_can_write(const Way *w) {
        return w->start < w->end;
}

static void update_events(Bridge *b) {
        for (int i = CLIENT; i <= SERVER; i++) {
                uint32_t ev = (way_can_read(&b->way[i]) ? EPOLLIN : 0) | (way_can_write(&b->way[!i]) ? EPOLLOUT : 0);

                if (ev == 0)
                        (void) sd_event_source_set_enabled(b->io[i], SD_EVENT_OFF);
                else {
                        (void) sd_event_source_set_io_events(b->io[i], ev);
                        (void) sd_event_source_set_enabled(b->io[i], SD_EVENT_ON);
                }
        }
}

static int on_bridge_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Bridge *b = userdata;
        const char *why = NULL;
        int side = CLIENT, q = 0;

        for (int i = CLIENT; i <= SERVER && q >= 0; i++)
                q = way_pump(&b->way[i], b->fd[i], b->fd[!i], i, &side);
        if (q < 0)
                why = side == CLIENT ? "the client's connection failed" : "the connection into the sandbox failed";
        if (q < 0 || (b->way[CLIENT].shut && b->way[SERVER].shut)) {
                /* the callee may free b */
                b->done(b, why, b->userdata);
                return 0;
        }
        update_events(b);
        return 0;
}

int bridge_new(sd_event *e, int client, int server, const void *to_server, size_t to_server_len,
               const void *to_client, size_t to_client_len, BridgeDone done, void *userdata, Bridge **ret) {
        Bridge *b = calloc(1, sizeof *b);
        int one = 1, q;

        if (!b)
                return -ENOMEM;
        b->fd[CLIENT] = client;
        b->fd[SERVER] = server;
        b->done = done;
        b->userdata = userdata;
        q = way_init(&b->way[CLIENT], to_server, to_server_len);
        if (q >= 0)
                q = way_init(&b->way[SERVER], to_client, to_client_len);
        for (int i = CLIENT; i <= SERVER && q >= 0; i++)
                q = sd_event_add_io(e, &b->io[i], b->fd[i], EPOLLIN, on_bridge_io, b);
        if (q < 0) {
                bridge_free(b);
                return q;
        }
        /* frames of an interactive protocol are small: do not hold them back for Nagle (a unix socket says no) */
        (void) setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        update_events(b);
        *ret = b;
        return 0;
}

Bridge *bridge_free(Bridge *b) {
        if (!b)
                return NULL;
        for (int i = CLIENT; i <= SERVER; i++) {
                sd_event_source_disable_unref(b->io[i]);
                free(b->way[i].buf);
        }
        free(b);
        return NULL;
}
