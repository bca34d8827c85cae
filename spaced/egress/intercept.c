/* SPDX-License-Identifier: Apache-2.0 */
/* HTTPS to a host a secret is bound to (ARCHITECTURE.md, "Secrets"): the gateway stands in the middle. The
 * guest's TLS ends here with a certificate for the host from the daemon's CA (which guests trust); the server's
 * is verified against the host's trust store (and egress_tls_ca) before a byte of the guest's goes to it; in
 * between, the plaintext is HTTP/1.1 (ALPN says so to both sides) and each request head goes to the event loop,
 * which checks it and adds the secrets as it does for plain HTTP (gateway.c), then it goes on re-encrypted.
 *
 * TLS runs on threads, not on the loop: a handshake is a few milliseconds of CPU and the sessions block. Each
 * intercepted connection has two: one reads the guest and writes the server (and asks the loop about each
 * head), the other the way back; GnuTLS allows a session's sending and receiving on two threads. The tunnel
 * keeps carrying the guest's bytes, now to a socketpair whose other end is the guest-side thread's; a second
 * socketpair (SEQPACKET: a message per head) is how the threads and the loop talk. Only the loop touches the
 * gateway's state, the secret store and the audit log. */
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/tls.h"
#include "core/util.h"
#include "egress/egress-internal.h"
#include "macro.h"

#define HANDSHAKE_TIMEOUT_MS 10000U
/* after the guest's end, how long the server may take to finish its answer */
#define DRAIN_TIMEOUT_SEC 30
/* what the guest-side thread holds of plaintext: a request head (the sniffer's bound) and a record after it */
#define PLAIN_MAX (EGRESS_SNIFF_MAX + 16U * 1024U)
#define REPLY_MAX (EGRESS_INTERCEPT_HEAD_MAX + 16U)
#define INTERCEPTS_MAX 256U

/* Thread to loop: a head to check, or the end. Loop to thread: a verdict. */
enum {
        MSG_HEAD = 'H',
        MSG_END = 'E',
        REPLY_PASS = 'P',        /* the head goes as it was */
        REPLY_REPLACE = 'R',     /* these bytes go in its place */
        REPLY_REFUSE = 'X',      /* the connection ends */
};

typedef struct HeadMsg {
        char type;
        unsigned request;
        EgressSniff sn;
        uint8_t head[];
} HeadMsg;

typedef struct EndMsg {
        char type;
        EgressInterceptEnd end;
} EndMsg;

struct EgressIntercept {
        Manager *manager;
        const EgressInterceptOps *ops;
        void *userdata;
        char host[EGRESS_HOST_MAX + 1];
        InterceptCert *cert;
        gnutls_certificate_credentials_t trust;
        int guest_fd, server_fd;         /* the threads' */
        int ctl_thread, ctl_loop;
        sd_event_source *io;
        gnutls_session_t guest, server;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool status_known, switched, over, down_done;
        uint64_t down_bytes;
        EgressHttpFirstAnswer first;
        EgressInterceptEnd end;          /* the threads' account, sent to the loop at the end */
};

static unsigned n_intercepts;

static int fd_blocking(int fd, bool blocking) {
        int flags = fcntl(fd, F_GETFL);

        if (flags < 0 || fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK) < 0)
                return -errno;
        return 0;
}

/* ---- the threads ---- */

static ssize_t send_all(gnutls_session_t s, const uint8_t *p, size_t n) {
        size_t done = 0;

        while (done < n) {
                ssize_t k = gnutls_record_send(s, p + done, n - done);
                if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED)
                        continue;
                if (k < 0)
                        return k;
                done += (size_t) k;
        }
        return (ssize_t) done;
}

static void set_why(EgressIntercept *x, EgressReason reason, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_why(EgressIntercept *x, EgressReason reason, const char *fmt, ...) {
        va_list ap;

        pthread_mutex_lock(&x->lock);
        /* once one side ended, the other's errors are the shutdown's */
        if (!x->end.why[0] && !x->over) {
                x->end.reason = reason;
                va_start(ap, fmt);
                (void) vsnprintf(x->end.why, sizeof x->end.why, fmt, ap);
                va_end(ap);
        }
        pthread_mutex_unlock(&x->lock);
}

/* Both sides are told to stop: each thread's blocking read returns. */
static void stop_both(EgressIntercept *x) {
        pthread_mutex_lock(&x->lock);
        x->over = true;
        pthread_cond_broadcast(&x->cond);
        pthread_mutex_unlock(&x->lock);
        (void) shutdown(x->guest_fd, SHUT_RDWR);
        (void) shutdown(x->server_fd, SHUT_RDWR);
}

/* The loop's verdict on a head: what goes in its place into reply (REPLY_*), -1 when the loop is gone. */
static ssize_t ask_loop(EgressIntercept *x, const uint8_t *head, size_t n, const EgressSniff *sn, unsigned request,
                        uint8_t *reply) {
        _cleanup_free_ HeadMsg *m = malloc(sizeof *m + n);
        ssize_t k;

        if (!m)
                return -1;
        m->type = MSG_HEAD;
        m->request = request;
        m->sn = *sn;
        memcpy(m->head, head, n);
        if (send(x->ctl_thread, m, sizeof *m + n, MSG_NOSIGNAL) < 0)
                return -1;
        do
                k = recv(x->ctl_thread, reply, REPLY_MAX, 0);
        while (k < 0 && errno == EINTR);
        return k > 0 ? k : -1;
}

/* The server's way back to the guest, and the status of its first answer (an upgrade waits for it). */
static void *down_thread(void *userdata) {
        EgressIntercept *x = userdata;
        uint8_t buf[16384];

        for (;;) {
                ssize_t k = gnutls_record_recv(x->server, buf, sizeof buf);

                if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED)
                        continue;
                if (k == GNUTLS_E_PREMATURE_TERMINATION)
                        k = 0; /* servers that close without close_notify: the guest is told it ended */
                if (k < 0) {
                        set_why(x, EGRESS_REASON_ABORTED, "the server's TLS: %s", gnutls_strerror((int) k));
                        break;
                }
                if (k == 0) {
                        (void) gnutls_bye(x->guest, GNUTLS_SHUT_WR);
                        break;
                }
                pthread_mutex_lock(&x->lock);
                if (!x->status_known && egress_http_first_answer(&x->first, buf, (size_t) k, &x->switched) > 0) {
                        x->status_known = true;
                        pthread_cond_broadcast(&x->cond);
                }
                x->down_bytes += (uint64_t) k;
                pthread_mutex_unlock(&x->lock);
                if (send_all(x->guest, buf, (size_t) k) < 0)
                        break;
        }
        pthread_mutex_lock(&x->lock);
        x->down_done = true;
        pthread_cond_broadcast(&x->cond);
        pthread_mutex_unlock(&x->lock);
        stop_both(x);
        return NULL;
}

/* An upgrade was asked for: whether the server switched, by its first answer (none came before this request's). */
static bool wait_switched(EgressIntercept *x) {
        bool switched;

        pthread_mutex_lock(&x->lock);
        while (!x->status_known && !x->over)
                pthread_cond_wait(&x->cond, &x->lock);
        switched = x->status_known && x->switched;
        pthread_mutex_unlock(&x->lock);
        return switched;
}

/* The guest's requests, each head checked by the loop, bodies as their framing says; after a switch to another
 * protocol (a websocket), everything. false: the connection is to end (why is set). */
static bool pump_up(EgressIntercept *x) {
        _cleanup_free_ uint8_t *buf = malloc(PLAIN_MAX), *reply = malloc(REPLY_MAX);
        EgressHttpStream hs = {};
        bool eof = false, raw = false;
        size_t len = 0;

        if (!buf || !reply)
                return false;
        for (;;) {
                const char *why = NULL;
                EgressSniff sn;
                size_t used = 0;
                ssize_t k;

                if (raw && len > 0) {
                        if (send_all(x->server, buf, len) < 0)
                                return false;
                        len = 0;
                }
                if (!raw && len > 0) {
                        switch (egress_http_stream_step(&hs, buf, len, eof, &used, &sn, &why)) {
                        case EGRESS_HTTP_MORE:
                                if (len == PLAIN_MAX) {
                                        set_why(x, EGRESS_REASON_BAD_REQUEST, "refused request %u on the connection: "
                                                "its head is over %u KiB", hs.requests + 1, EGRESS_SNIFF_MAX / 1024);
                                        return false;
                                }
                                break;
                        case EGRESS_HTTP_BAD:
                                set_why(x, EGRESS_REASON_BAD_REQUEST, "refused request %u on the connection: %s",
                                        hs.requests + 1, why);
                                return false;
                        case EGRESS_HTTP_WAIT:
                                pthread_mutex_lock(&x->lock);
                                bool answered = x->down_bytes > 0 && !x->status_known;
                                pthread_mutex_unlock(&x->lock);
                                /* only the first answer on the connection can be the upgrade's */
                                raw = !answered && hs.requests == 1 && wait_switched(x);
                                egress_http_stream_switched(&hs, raw);
                                continue;
                        case EGRESS_HTTP_HEAD: {
                                ssize_t n = ask_loop(x, buf, used, &sn, hs.requests, reply);

                                if (n < 1 || reply[0] == REPLY_REFUSE)
                                        return false;   /* the loop said why, or is gone */
                                if (reply[0] == REPLY_REPLACE) {
                                        k = send_all(x->server, reply + 1, (size_t) n - 1);
                                        explicit_bzero(reply, (size_t) n);
                                } else
                                        k = send_all(x->server, buf, used);
                                if (k < 0)
                                        return false;
                                x->end.requests = hs.requests;
                                break;
                        }
                        case EGRESS_HTTP_BODY:
                                if (send_all(x->server, buf, used) < 0)
                                        return false;
                                break;
                        }
                        if (used > 0) {
                                x->end.up += used;
                                memmove(buf, buf + used, len - used);
                                len -= used;
                                continue;
                        }
                }
                if (eof)
                        return true;
                k = gnutls_record_recv(x->guest, buf + len, PLAIN_MAX - len);
                if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED)
                        continue;
                if (k == GNUTLS_E_PREMATURE_TERMINATION)
                        k = 0;
                if (k < 0) {
                        set_why(x, EGRESS_REASON_ABORTED, "the guest's TLS: %s", gnutls_strerror((int) k));
                        return false;
                }
                if (k == 0) {
                        eof = true;
                        if (len == 0)
                                return true;
                }
                len += (size_t) k;
        }
}

static int session_new(gnutls_session_t *ret, unsigned flags, gnutls_certificate_credentials_t cred, int fd) {
        static const gnutls_datum_t http11 = { (unsigned char *) "http/1.1", 8 };
        int g;

        g = gnutls_init(ret, flags);
        if (g < 0)
                return g;
        if ((g = gnutls_set_default_priority(*ret)) < 0 ||
            (g = gnutls_credentials_set(*ret, GNUTLS_CRD_CERTIFICATE, cred)) < 0 ||
            (g = gnutls_alpn_set_protocols(*ret, &http11, 1, flags & GNUTLS_SERVER ? GNUTLS_ALPN_SERVER_PRECEDENCE : 0)) <
                    0)
                return g;
        gnutls_transport_set_int(*ret, fd);
        gnutls_handshake_set_timeout(*ret, HANDSHAKE_TIMEOUT_MS);
        return 0;
}

static int handshake(gnutls_session_t s) {
        int g;

        do
                g = gnutls_handshake(s);
        while (g < 0 && !gnutls_error_is_fatal(g));
        return g;
}

/* The server's certificate was refused: the guest, whose TLS is ours, reads why as the answer to its request. */
static void answer_refusal(EgressIntercept *x) {
        char body[EGRESS_MESSAGE_MAX + 256], head[256];
        uint8_t buf[4096];
        int n, h;

        if (session_new(&x->guest, GNUTLS_SERVER, intercept_cert_credentials(x->cert), x->guest_fd) < 0 || handshake(x->guest) < 0)
                return;
        (void) gnutls_record_recv(x->guest, buf, sizeof buf);   /* its request (head), then the answer */
        n = snprintf(body, sizeof body, "space egress: refused: %s (space-egress(5), \"Secrets\")\n", x->end.why);
        h = snprintf(head, sizeof head, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                     "Connection: close\r\n\r\n", n);
        if (send_all(x->guest, (const uint8_t *) head, (size_t) h) >= 0)
                (void) send_all(x->guest, (const uint8_t *) body, (size_t) n);
        (void) gnutls_bye(x->guest, GNUTLS_SHUT_WR);
}

/* The server first (its certificate decides whether anything goes), then the guest, then the two pumps. */
static void intercept_run(EgressIntercept *x) {
        pthread_t down;
        int g;

        g = session_new(&x->server, GNUTLS_CLIENT, x->trust, x->server_fd);
        if (g >= 0)
                g = gnutls_server_name_set(x->server, GNUTLS_NAME_DNS, x->host, strlen(x->host));
        if (g >= 0) {
                gnutls_session_set_verify_cert(x->server, x->host, 0);
                g = handshake(x->server);
        }
        if (g == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
                gnutls_datum_t out = {};
                unsigned status = gnutls_session_get_verify_cert_status(x->server);

                if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) < 0)
                        out.data = NULL;
                set_why(x, EGRESS_REASON_UPSTREAM_CERTIFICATE, "the certificate of %s is not trusted: %s", x->host,
                        out.data ? (const char *) out.data : gnutls_strerror(g));
                gnutls_free(out.data);
                return answer_refusal(x);
        }
        if (g < 0)
                return set_why(x, EGRESS_REASON_UNREACHABLE, "TLS with %s failed: %s", x->host, gnutls_strerror(g));
        g = session_new(&x->guest, GNUTLS_SERVER, intercept_cert_credentials(x->cert), x->guest_fd);
        if (g >= 0)
                g = handshake(x->guest);
        if (g < 0)
                return set_why(x, EGRESS_REASON_ABORTED, "the guest's TLS handshake failed (does it trust the "
                               "daemon's CA?): %s", gnutls_strerror(g));
        if (pthread_create(&down, NULL, down_thread, x) != 0)
                return set_why(x, EGRESS_REASON_INTERNAL, "cannot start a thread: %m");
        /* The guest is done sending: the server is told, and has a while to finish its answer. */
        if (pump_up(x)) {
                struct timespec until;

                (void) gnutls_bye(x->server, GNUTLS_SHUT_WR);
                (void) shutdown(x->server_fd, SHUT_WR);
                (void) clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += DRAIN_TIMEOUT_SEC;
                pthread_mutex_lock(&x->lock);
                while (!x->down_done && pthread_cond_timedwait(&x->cond, &x->lock, &until) == 0)
                        ;
                pthread_mutex_unlock(&x->lock);
        }
        stop_both(x);
        (void) pthread_join(down, NULL);
        x->end.down = x->down_bytes;
}

static void *intercept_thread(void *userdata) {
        EgressIntercept *x = userdata;
        EndMsg m = { .type = MSG_END };

        intercept_run(x);
        if (x->guest)
                gnutls_deinit(x->guest);
        if (x->server)
                gnutls_deinit(x->server);
        x->guest = x->server = NULL;
        x->guest_fd = safe_close(x->guest_fd);
        x->server_fd = safe_close(x->server_fd);
        m.end = x->end;
        /* the last thing the threads do: the loop frees x once it reads this (or the socket's end) */
        (void) send(x->ctl_thread, &m, sizeof m, MSG_NOSIGNAL);
        return NULL;
}

/* ---- the loop's side ---- */

static void intercept_free(EgressIntercept *x) {
        x->io = sd_event_source_disable_unref(x->io);
        safe_close(x->ctl_loop);
        safe_close(x->ctl_thread);
        safe_close(x->guest_fd);
        safe_close(x->server_fd);
        intercept_cert_unref(x->cert);
        pthread_mutex_destroy(&x->lock);
        pthread_cond_destroy(&x->cond);
        n_intercepts--;
        free(x);
}

static int on_ctl(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        EgressIntercept *x = userdata;
        _cleanup_free_ uint8_t *msg = malloc(sizeof(HeadMsg) + EGRESS_SNIFF_MAX + sizeof(EndMsg));
        ssize_t k;

        if (!msg)
                return 0;
        k = recv(fd, msg, sizeof(HeadMsg) + EGRESS_SNIFF_MAX + sizeof(EndMsg), MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (k >= (ssize_t) sizeof(HeadMsg) && msg[0] == MSG_HEAD) {
                const HeadMsg *h = (const HeadMsg *) msg;
                SpaceBuf out = {};
                int r;

                r = x->ops->head(x->userdata, h->head, (size_t) k - sizeof *h, &h->sn, h->request, &out);
                if (r > 0) {
                        /* the verdict and the head as one message, without another copy of the secrets */
                        uint8_t verdict = REPLY_REPLACE;
                        struct iovec iov[2] = { { &verdict, 1 }, { out.data, out.len } };
                        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

                        if (sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                                r = -1;
                } else if (r == 0 && send(fd, (uint8_t[]) { REPLY_PASS }, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                        r = -1;
                if (r < 0)
                        (void) send(fd, (uint8_t[]) { REPLY_REFUSE }, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (out.data)
                        explicit_bzero(out.data, out.len);
                space_buf_done(&out);
                return 0;
        }
        if (k == (ssize_t) sizeof(EndMsg) && msg[0] == MSG_END) {
                EgressInterceptEnd e = ((const EndMsg *) msg)->end;

                x->ops->ended(x->userdata, &e);
        } else {
                EgressInterceptEnd e = { .reason = EGRESS_REASON_INTERNAL };

                (void) snprintf(e.why, sizeof e.why, "the interception's threads ended without a word");
                x->ops->ended(x->userdata, &e);
        }
        /* the thread has sent its last: it is over (it detached itself) */
        intercept_free(x);
        return 0;
}

int egress_intercept_new(Manager *m, const char *host, const char *trust_file, const EgressInterceptOps *ops,
                         void *userdata, EgressIntercept **ret, int *ret_tunnel_fd, Error *reterr) {
        _cleanup_close_ int pair_a = -1, pair_b = -1;
        EgressIntercept *x;
        int sv[2], ctl[2], r;

        if (n_intercepts >= INTERCEPTS_MAX)
                return error_set(reterr, ERROR_RESOURCE_EXHAUSTED, "%u intercepted connections are open already", INTERCEPTS_MAX) ?:
                               -EBUSY;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        pair_a = sv[0];
        pair_b = sv[1];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
                return -errno;
        x = calloc(1, sizeof *x);
        if (!x) {
                safe_close(ctl[0]);
                safe_close(ctl[1]);
                return -ENOMEM;
        }
        *x = (EgressIntercept) { .manager = m, .ops = ops, .userdata = userdata, .guest_fd = -1, .server_fd = -1,
                                 .ctl_loop = ctl[0], .ctl_thread = ctl[1] };
        pthread_mutex_init(&x->lock, NULL);
        pthread_cond_init(&x->cond, NULL);
        n_intercepts++;
        (void) snprintf(x->host, sizeof x->host, "%s", host);
        r = intercept_cert_get(m, host, &x->cert, reterr);
        if (r >= 0)
                r = intercept_trust_get(trust_file, &x->trust, reterr);
        if (r >= 0)
                r = fd_blocking(pair_a, false);
        if (r < 0) {
                intercept_free(x);
                return r;
        }
        x->guest_fd = TAKE_FD(pair_b);
        *ret = x;
        *ret_tunnel_fd = TAKE_FD(pair_a);
        return 0;
}

void egress_intercept_abandon(EgressIntercept *x) {
        if (x)
                intercept_free(x);
}

int egress_intercept_go(EgressIntercept *x, int server_fd) {
        pthread_attr_t attr;
        pthread_t t;
        int r;

        r = fd_blocking(server_fd, true);
        if (r >= 0)
                r = sd_event_add_io(x->manager->event, &x->io, x->ctl_loop, EPOLLIN, on_ctl, x);
        if (r < 0)
                return r;
        x->server_fd = server_fd;
        if (pthread_attr_init(&attr) != 0)
                return -ENOMEM;
        r = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (r == 0)
                r = pthread_create(&t, &attr, intercept_thread, x);
        pthread_attr_destroy(&attr);
        if (r != 0) {
                x->server_fd = -1;
                x->io = sd_event_source_disable_unref(x->io);
                return -r;
        }
        return 0;
}
