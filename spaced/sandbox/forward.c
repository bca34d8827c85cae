/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "channel/tunnel.h"
#include "core/log.h"
#include "core/operation.h"
#include "core/store.h"
#include "core/util.h"
#include "macro.h"
#include "sandbox/forward.h"
#include "sandbox/sandbox.h"
#include "sock-diag.h"

/* One accepted connection while its tunnel is open. */
struct ForwardConn {
        Forward *forward;
        Tunnel *tunnel;
        ForwardConn *prev, *next;
};

static void conn_unlink(ForwardConn *c) {
        Forward *f = c->forward;

        if (c->prev)
                c->prev->next = c->next;
        else if (f)
                f->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        if (f && f->active > 0)
                f->active--;
        free(c);
}

static void conn_opened(Tunnel *t, int err, const char *message, void *userdata) {
        ForwardConn *c = userdata;

        if (err >= 0)
                return;
        /* the guest refused (nothing listens there): the tunnel resets the client's connection */
        if (c->forward)
                log_debug("forward %s: port %u in sandbox %s refused a connection: %s", c->forward->id,
                          c->forward->guest_port, c->forward->sandbox->id, message ?: strerror(-err));
        conn_unlink(c);
}

static void conn_ended(Tunnel *t, const TunnelStats *st, const char *why, void *userdata) {
        ForwardConn *c = userdata;

        if (c->forward) {
                c->forward->bytes_up += st->up;
                c->forward->bytes_down += st->down;
                c->forward->sandbox->last_active = now_unix();
        }
        conn_unlink(c);
}

static const TunnelOps conn_ops = {
        .opened = conn_opened,
        .ended = conn_ended,
};

static Operation *running_operation(Sandbox *s) {
        for (Operation *op = s->manager->operations; op; op = op->next)
                if (streq(op->sandbox_id, s->id) &&
                    (op->state == OPERATION_RUNNING || op->state == OPERATION_PENDING))
                        return op;
        return NULL;
}

int sandbox_ready_for_use(Sandbox *s, Operation **ret_op, Error *reterr) {
        Operation *op;
        int q;

        s->last_active = now_unix();
        if (s->state == SANDBOX_RUNNING)
                return 1;
        if (IN_SET(s->state, SANDBOX_DELETING, SANDBOX_ERROR, SANDBOX_STOPPED, SANDBOX_POOLED))
                return error_set(reterr, ERROR_SANDBOX_NOT_RUNNING, "sandbox %s is %s, not running", s->id,
                                 sandbox_state_to_string(s->state)) ?: -EBUSY;
        op = running_operation(s);
        if (!op && s->state == SANDBOX_SUSPENDED) {
                q = sandbox_lifecycle_start(s->manager, s, LIFECYCLE_WAKE, &op, reterr);
                if (q < 0)
                        return q;
                log_info("sandbox %s: waking on demand for a connection to a forwarded port", s->id);
        } else if (!op && s->state == SANDBOX_PAUSED) {
                q = sandbox_lifecycle_start(s->manager, s, LIFECYCLE_RESUME, &op, reterr);
                if (q < 0)
                        return q;
                log_info("sandbox %s: resuming on demand for a connection to a forwarded port", s->id);
        }
        if (!op)
                return error_set(reterr, ERROR_SANDBOX_NOT_RUNNING, "sandbox %s is %s, not running", s->id,
                                 sandbox_state_to_string(s->state)) ?: -EBUSY;
        *ret_op = op;
        return 0;
}

static void conn_start(Forward *f, int fd);

static void pending_flush(Forward *f, bool retry) {
        int fds[FORWARD_PENDING_MAX];
        unsigned n = f->n_pending;

        memcpy(fds, f->pending, n * sizeof fds[0]);
        f->n_pending = 0;
        waiter_unlink(&f->waiter);
        f->pending_deadline = sd_event_source_disable_unref(f->pending_deadline);
        for (unsigned i = 0; i < n; i++)
                if (retry)
                        conn_start(f, fds[i]);
                else
                        safe_close(fds[i]);
}

/* The operation that readies the sandbox finished (either way): the parked connections try again. */
static void on_ready(Waiter *w) {
        pending_flush(container_of(w, Forward, waiter), true);
}

static int on_pending_deadline(sd_event_source *es, uint64_t usec, void *userdata) {
        Forward *f = userdata;

        log_warning("forward %s: sandbox %s did not come up within %d s; dropped %u waiting connections", f->id,
                    f->sandbox->id, FORWARD_WAKE_WAIT_SEC, f->n_pending);
        pending_flush(f, false);
        return 0;
}

static int park(Forward *f, Operation *op, int fd) {
        int q;

        if (f->n_pending >= FORWARD_PENDING_MAX)
                return -EBUSY;
        if (!f->waiter.list) {
                f->waiter.wake = on_ready;
                waiter_add(&op->waiters, &f->waiter);
        }
        if (!f->pending_deadline) {
                q = sd_event_add_time_relative(f->sandbox->manager->event, &f->pending_deadline, CLOCK_MONOTONIC,
                                               FORWARD_WAKE_WAIT_SEC * 1000000ULL, 0, on_pending_deadline, f);
                if (q < 0)
                        return q;
        }
        f->pending[f->n_pending++] = fd;
        return 0;
}

/* Takes fd: a tunnel to the guest port when the sandbox runs, parked while it is readied, else closed. */
static void conn_start(Forward *f, int fd) {
        Sandbox *s = f->sandbox;
        _cleanup_(error_done) Error e = {};
        Operation *op = NULL;
        ForwardConn *c;
        int q;

        q = sandbox_ready_for_use(s, &op, &e);
        if (q == 0) {
                q = park(f, op, fd);
                if (q >= 0)
                        return;
                log_warning_errno(q, "forward %s: cannot hold a connection until sandbox %s runs: %m", f->id, s->id);
                safe_close(fd);
                return;
        }
        if (q < 0 || !s->channel.agent) {
                log_info("forward %s: refused a connection: %s", f->id,
                         q < 0 ? error_message(&e) : "the sandbox's agent channel is not connected");
                safe_close(fd);
                return;
        }
        c = calloc(1, sizeof *c);
        if (!c) {
                safe_close(fd);
                return;
        }
        c->forward = f;
        q = tunnel_open_port(s->channel.agent, f->guest_port, fd, &conn_ops, c, &c->tunnel);
        if (q < 0) {
                log_info("forward %s: cannot open a tunnel to port %u of sandbox %s: %s", f->id, f->guest_port,
                         s->id, strerror(-q));
                free(c);
                safe_close(fd);
                return;
        }
        c->next = f->conns;
        if (c->next)
                c->next->prev = c;
        f->conns = c;
        f->active++;
}

/* Whether the client at the other end of cfd may use f: its socket is the daemon's user's or root's, or f is
 * open to anyone. Asked before the sandbox is woken or anything is sent into it. */
static bool client_allowed(Forward *f, int cfd) {
        uid_t uid;
        int q;

        if (f->any_user)
                return true;
        q = tcp_peer_uid(cfd, &uid);
        if (q >= 0 && (uid == getuid() || uid == 0))
                return true;
        f->refused++;
        /* once per forward and then every 64th: a neighbour's loop must not fill the log */
        if (f->refused % 64 == 1) {
                if (q < 0)
                        log_warning_errno(q, "forward %s: closed a connection whose owner cannot be told: %m", f->id);
                else
                        log_warning("forward %s: closed a connection of uid %u: the forward is its creator's (open it "
                                    "to every local user with 'spacectl port --any-user'); %" PRIu64 " so far",
                                    f->id, (unsigned) uid, f->refused);
        }
        return false;
}

static int on_accept(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        Forward *f = userdata;

        /* a bounded batch: a flood of connections must not keep the loop from everything else */
        for (unsigned i = 0; i < 64; i++) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (cfd < 0) {
                        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                                log_warning_errno(-errno, "forward %s: accept: %m", f->id);
                        break;
                }
                if (!client_allowed(f, cfd)) {
                        safe_close(cfd);
                        continue;
                }
                f->connections++;
                conn_start(f, cfd);
        }
        return 0;
}

static int listen_on(unsigned port, int *ret_fd, unsigned *ret_port) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof sa;
        int one = 1;

        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* a port of a forward just removed may still have connections in TIME_WAIT */
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0 || listen(fd, 128) < 0 ||
            getsockname(fd, (struct sockaddr *) &sa, &len) < 0)
                return -errno;
        *ret_port = ntohs(sa.sin_port);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The listener and the Forward, linked into s->forwards, with id (NULL: a new one). Checks the limit but not
 * the ports nor the sandbox's state: forward_add checks those; a restored forward comes back to a sandbox in
 * whatever state, as it would have stayed with it in a daemon that kept running. */
static int forward_open(Sandbox *s, const char *id, unsigned guest_port, unsigned host_port, bool any_user,
                        Forward **ret, Error *reterr) {
        _cleanup_free_ Forward *f = NULL;
        unsigned n = 0, bound = 0;
        int fd = -EBADF, q;

        for (Forward *i = s->forwards; i; i = i->next)
                n++;
        if (n >= FORWARDS_MAX)
                return error_set(reterr, ERROR_LIMIT_EXCEEDED, "sandbox %s has %u port forwards already, the most "
                                 "it may have", s->id, n) ?: -E2BIG;
        q = listen_on(host_port, &fd, &bound);
        if (q == -EADDRINUSE)
                return error_set(reterr, ERROR_PORT_IN_USE, "host port %u on 127.0.0.1 is in use; pick another or "
                                 "leave it out for a free one", host_port) ?: q;
        if (q == -EACCES)
                return error_set(reterr, ERROR_PERMISSION_DENIED, "host port %u is privileged: the daemon may not "
                                 "listen on it; use a port from 1024 up", host_port) ?: q;
        if (q < 0)
                return error_set(reterr, ERROR_INTERNAL, "cannot listen on 127.0.0.1:%u: %s", host_port,
                                 strerror(-q)) ?: q;
        f = calloc(1, sizeof *f);
        if (!f) {
                safe_close(fd);
                return error_set(reterr, ERROR_INTERNAL, "out of memory") ?: -ENOMEM;
        }
        if (id) {
                snprintf(f->id, sizeof f->id, "%s", id);
                q = 0;
        } else {
                memcpy(f->id, "fw-", 3);
                q = random_hex(f->id + 3, FORWARD_ID_LEN - 3);
        }
        if (q >= 0)
                q = sd_event_add_io(s->manager->event, &f->listener, fd, EPOLLIN, on_accept, f);
        if (q < 0) {
                safe_close(fd);
                return error_set(reterr, ERROR_INTERNAL, "cannot watch the forward's listener: %s", strerror(-q))
                               ?: q;
        }
        (void) sd_event_source_set_io_fd_own(f->listener, true);
        f->sandbox = s;
        f->guest_port = (uint16_t) guest_port;
        f->host_port = (uint16_t) bound;
        f->any_user = any_user;
        f->created_at = now_unix();
        f->next = s->forwards;
        s->forwards = f;
        *ret = TAKE_PTR(f);
        return 0;
}

/* Unlinks f, closes its listener and ends its connections; the caller frees it. */
static void forward_close(Forward *f) {
        Sandbox *s = f->sandbox;

        for (Forward **i = &s->forwards; *i; i = &(*i)->next)
                if (*i == f) {
                        *i = f->next;
                        break;
                }
        f->listener = sd_event_source_disable_unref(f->listener);
        pending_flush(f, false);
        /* the open connections end with it: a removed forward leaves nothing behind */
        while (f->conns) {
                ForwardConn *c = f->conns;

                f->conns = c->next;
                if (f->conns)
                        f->conns->prev = NULL;
                c->forward = NULL;
                c->prev = c->next = NULL;
                tunnel_abort(c->tunnel, "the port forward was removed");
        }
}

static ForwardRecord forward_record(const Forward *f) {
        ForwardRecord r = { .guest_port = f->guest_port, .host_port = f->host_port, .created_at = f->created_at,
                            .any_user = f->any_user };

        memcpy(r.id, f->id, sizeof r.id);
        memcpy(r.sandbox_id, f->sandbox->id, sizeof r.sandbox_id);
        return r;
}

int forward_add(Sandbox *s, unsigned guest_port, unsigned host_port, bool keep, bool any_user, Forward **ret,
                Error *reterr) {
        Forward *f;
        int q;

        if (guest_port < 1 || guest_port > 65535)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "guest port %u is not a TCP port (1 to 65535)",
                                 guest_port) ?: -EINVAL;
        if (host_port > 65535)
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                 "host port %u is not a TCP port (1 to 65535, or none for a free one)",
                                 host_port) ?: -EINVAL;
        if (IN_SET(s->state, SANDBOX_DELETING, SANDBOX_ERROR, SANDBOX_STOPPED, SANDBOX_POOLED))
                return error_set(reterr, ERROR_SANDBOX_NOT_RUNNING, "sandbox %s is %s: nothing to forward to",
                                 s->id, sandbox_state_to_string(s->state)) ?: -EBUSY;
        q = forward_open(s, NULL, guest_port, host_port, any_user, &f, reterr);
        if (q < 0)
                return q;
        if (keep) {
                /* recorded before the client hears of it: a forward it was told of survives a crash */
                ForwardRecord r = forward_record(f);

                q = store_put_forward(s->manager->store, &r);
                if (q < 0) {
                        forward_close(f);
                        free(f);
                        return error_set(reterr, ERROR_INTERNAL, "cannot record the port forward in the state "
                                         "database: %s", strerror(-q)) ?: q;
                }
                f->kept = true;
        }
        log_info("forward %s: 127.0.0.1:%u to port %u of sandbox %s%s%s", f->id, f->host_port, f->guest_port, s->id,
                 keep ? "" : " (held)", any_user ? ", open to every local user" : "");
        *ret = f;
        return 0;
}

Forward *forward_find(Sandbox *s, const char *ref) {
        char *end;
        unsigned long port;

        for (Forward *f = s->forwards; f; f = f->next)
                if (streq(f->id, ref))
                        return f;
        errno = 0;
        port = strtoul(ref, &end, 10);
        if (errno || end == ref || *end || ref[0] < '0' || ref[0] > '9')
                return NULL;
        for (Forward *f = s->forwards; f; f = f->next)
                if (f->host_port == port)
                        return f;
        return NULL;
}

int forward_forget(Forward *f, Error *reterr) {
        int q;

        if (!f->kept)
                return 0;
        q = store_delete_forward(f->sandbox->manager->store, f->id);
        if (q < 0)
                return error_set(reterr, ERROR_INTERNAL, "cannot delete the port forward from the state database: "
                                 "%s", strerror(-q)) ?: q;
        f->kept = false;
        return 0;
}

void forward_remove(Forward *f) {
        Sandbox *s = f->sandbox;
        int q;

        if (f->kept) {
                /* its sandbox goes (a port rm forgot it first): a row left behind is dropped at the next start */
                q = store_delete_forward(s->manager->store, f->id);
                if (q < 0)
                        log_warning_errno(q, "forward %s: cannot delete it from the state database: %m", f->id);
        }
        forward_close(f);
        log_info("forward %s: removed (127.0.0.1:%u to port %u of sandbox %s)", f->id, f->host_port, f->guest_port,
                 s->id);
        if (f->gone)
                f->gone(f, f->gone_userdata);
        free(f);
}

void forwards_free(Sandbox *s) {
        while (s->forwards)
                forward_remove(s->forwards);
}

static void restore_one(Manager *m, const ForwardRecord *r) {
        _cleanup_(error_done) Error e = {};
        Sandbox *s = sandbox_find_by_id(m, r->sandbox_id);
        const char *why;
        Forward *f;
        int q;

        if (!s)
                why = "its sandbox is gone";
        else if (forward_open(s, r->id, r->guest_port, r->host_port, r->any_user, &f, &e) >= 0) {
                f->created_at = r->created_at;
                f->kept = true;
                log_info("forward %s: 127.0.0.1:%u to port %u of sandbox %s, again after the restart", f->id,
                         f->host_port, f->guest_port, s->id);
                return;
        } else if (e.code == ERROR_PORT_IN_USE)
                why = "the port is in use by something else now";
        else
                why = error_message(&e);
        log_warning("forward %s: dropped after the restart (127.0.0.1:%u to port %u of sandbox %s): %s", r->id,
                    r->host_port, r->guest_port, r->sandbox_id, why);
        q = store_delete_forward(m->store, r->id);
        if (q < 0)
                log_warning_errno(q, "forward %s: cannot delete it from the state database: %m", r->id);
}

void forwards_restore(Manager *m) {
        _cleanup_free_ ForwardRecord *rows = NULL;
        size_t n = 0;
        int q;

        q = store_load_forwards(m->store, &rows, &n);
        if (q < 0) {
                log_warning_errno(q, "cannot read the port forwards from the state database: %m");
                return;
        }
        for (size_t i = 0; i < n; i++)
                restore_one(m, &rows[i]);
}
