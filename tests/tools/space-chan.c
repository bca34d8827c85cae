/* SPDX-License-Identifier: Apache-2.0 */

/*
 * space-chan: a raw host-side client for the agent channel, without the daemon. For benchmark baselines
 * and debugging.
 *
 *   space-chan SOCKET ping [N]            N pings; prints {"n":N,"p50_us":..,"p90_us":..,"p99_us":..}
 *   space-chan SOCKET exec [-i] [-t] -- ARGV
 *                                         runs ARGV in the guest; stdout/stderr to ours; -i forwards stdin;
 *                                         -t asks for a pty; SIGINT/SIGTERM/SIGHUP are forwarded as SIGNAL;
 *                                         exits with the command's code (128+sig if killed, 127 on ENOENT)
 *   space-chan SOCKET init KEY=VALUE...   sends INIT with these records; prints OK or the error
 *   space-chan SOCKET par N -- ARGV       runs N copies of ARGV at once over this one connection (QEMU's
 *                                         chardev takes one client at a time); prints per-copy exit codes and
 *                                         output byte counts as JSON, exits 0 when all exited 0
 *
 * SOCKET is the QEMU chardev unix socket of the "agent" port.
 */

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "../../lib/proto.h"

static int sock = -1;
static volatile sig_atomic_t pending_signal;

static void on_signal(int sig) {
        pending_signal = sig;
}
static SpaceFrameReader reader;
static uint8_t rbuf[SPACE_FRAME_MAX];
static size_t rbuf_len, rbuf_off;

__attribute__((format(printf, 1, 2))) static _Noreturn void die(const char *fmt, ...) {
        va_list ap;

        fprintf(stderr, "space-chan: ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        exit(125);
}

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static void write_all(int fd, const void *p, size_t n) {
        const uint8_t *b = p;

        while (n > 0) {
                ssize_t w = write(fd, b, n);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        if (fd == sock)
                                die("write to channel: %s", strerror(errno));
                        return; /* our stdout went away: keep draining */
                }
                b += w;
                n -= (size_t) w;
        }
}

static void send_frame(uint8_t type, uint8_t fd, uint32_t stream, const void *payload, size_t n) {
        SpaceBuf b = {};

        if (space_frame_append(&b, type, fd, stream, payload, n) < 0)
                die("cannot build a %s frame", space_frame_type_to_string(type));
        write_all(sock, b.data, b.len);
        space_buf_done(&b);
}

/* Returns 1 and the next frame, or 0 when timeout_ms passed (-1: wait forever). Dies on EOF or garbage. */
static int next_frame(int timeout_ms, SpaceFrameHeader *h, const uint8_t **p) {
        for (;;) {
                while (rbuf_off < rbuf_len) {
                        size_t used;
                        int r = space_frame_reader_feed(&reader, rbuf + rbuf_off, rbuf_len - rbuf_off, &used, h, p);
                        rbuf_off += used;
                        if (r < 0)
                                die("malformed frame from the guest: %s", strerror(-r));
                        if (r > 0)
                                return 1;
                }
                /* The reader may still hold a complete frame from an earlier call: feeding nothing drops it. */
                (void) space_frame_reader_feed(&reader, NULL, 0, NULL, NULL, NULL);

                struct pollfd pfd = { .fd = sock, .events = POLLIN };
                int k = poll(&pfd, 1, timeout_ms);
                if (k < 0 && errno != EINTR)
                        die("poll: %s", strerror(errno));
                if (k == 0)
                        return 0;
                if (k < 0)
                        continue;

                ssize_t n = read(sock, rbuf, sizeof rbuf);
                if (n < 0 && errno != EINTR && errno != EAGAIN)
                        die("read: %s", strerror(errno));
                if (n == 0)
                        die("%s", "channel closed");
                rbuf_len = n > 0 ? (size_t) n : 0;
                rbuf_off = 0;
        }
}

static uint32_t new_stream_id(void) {
        uint32_t id = (uint32_t) (now_ns() ^ ((uint64_t) getpid() << 16)) & ~SPACE_STREAM_GUEST_BIT;
        return id ? id : 1;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static int cmd_ping(unsigned n) {
        _cleanup_free_ uint64_t *lat = calloc(n ? n : 1, sizeof *lat);
        uint32_t base = new_stream_id();

        if (!lat)
                die("%s", "out of memory");
        for (unsigned i = 0; i < n; i++) {
                uint32_t id = ((base + i) & ~SPACE_STREAM_GUEST_BIT) ?: 1;
                uint8_t payload[8];
                SpaceFrameHeader h;
                const uint8_t *p;
                uint64_t t0;

                space_put_le32(payload, i);
                space_put_le32(payload + 4, id);
                t0 = now_ns();
                send_frame(SPACE_F_PING, 0, id, payload, sizeof payload);
                for (;;) {
                        if (next_frame(10000, &h, &p) == 0)
                                die("%s", "no PONG within 10 s");
                        if (h.type == SPACE_F_PONG && h.stream == id && h.length == sizeof payload &&
                            memcmp(p, payload, sizeof payload) == 0)
                                break;
                }
                lat[i] = now_ns() - t0;
        }

        qsort(lat, n, sizeof *lat, cmp_u64);
#define PCT(q) (n ? (double) lat[(size_t) ((n - 1) * (q) / 100)] / 1000.0 : 0.0)
        printf("{\"n\":%u,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f}\n", n, PCT(50), PCT(90), PCT(99));
#undef PCT
        return 0;
}

static int cmd_init(int argc, char **argv) {
        SpaceBuf kv = {};
        uint32_t id = new_stream_id();
        SpaceFrameHeader h;
        const uint8_t *p;

        for (int i = 0; i < argc; i++) {
                char *eq = strchr(argv[i], '=');
                if (!eq)
                        die("not KEY=VALUE: %s", argv[i]);
                *eq = 0;
                if (space_kv_add(&kv, argv[i], eq + 1) < 0)
                        die("bad record: %s", argv[i]);
        }
        send_frame(SPACE_F_INIT, 0, id, kv.data, kv.len);
        space_buf_done(&kv);

        for (;;) {
                if (next_frame(10000, &h, &p) == 0)
                        die("%s", "no answer to INIT within 10 s");
                if (h.stream != id)
                        continue;
                if (h.type == SPACE_F_OK) {
                        printf("OK\n");
                        return 0;
                }
                if (h.type == SPACE_F_ERROR) {
                        const char *m = NULL;
                        (void) space_kv_get(p, h.length, "message", &m);
                        printf("ERROR %s\n", m ? m : "?");
                        return 1;
                }
        }
}

static int cmd_exec(bool with_stdin, bool pty, int argc, char **argv) {
        SpaceCredit in_credit, out_credit[3];
        uint32_t id = new_stream_id();
        bool stdin_open = with_stdin;
        SpaceBuf kv = {};
        SpaceFrameHeader h;
        const uint8_t *p;
        const char *v;
        int r;

        space_credit_init(&in_credit);
        for (int i = 0; i < 3; i++)
                space_credit_init(&out_credit[i]);

        for (int i = 0; i < argc; i++)
                if (space_kv_add(&kv, "argv", argv[i]) < 0)
                        die("bad argument: %s", argv[i]);
        (void) space_kv_add(&kv, "stdin", with_stdin ? "1" : "0");
        if (pty)
                (void) space_kv_add(&kv, "pty", "1");
        if (kv.len > SPACE_FRAME_PAYLOAD_MAX)
                die("%s", "command line too long");
        send_frame(SPACE_F_EXEC, 0, id, kv.data, kv.len);
        space_buf_done(&kv);

        /* STARTED or ERROR first. */
        for (;;) {
                if (next_frame(30000, &h, &p) == 0)
                        die("%s", "no answer to EXEC within 30 s");
                if (h.stream != id)
                        continue;
                if (h.type == SPACE_F_STARTED)
                        break;
                if (h.type == SPACE_F_ERROR) {
                        const char *m = NULL, *e = NULL;
                        (void) space_kv_get(p, h.length, "message", &m);
                        (void) space_kv_get(p, h.length, "errno", &e);
                        fprintf(stderr, "space-chan: %s\n", m ? m : "exec failed");
                        return e && atoi(e) == ENOENT ? 127 : 126;
                }
        }

        {
                struct sigaction sa = { .sa_handler = on_signal };
                sigaction(SIGINT, &sa, NULL);
                sigaction(SIGTERM, &sa, NULL);
                sigaction(SIGHUP, &sa, NULL);
        }

        for (;;) {
                struct pollfd pfd[2] = {
                        { .fd = sock, .events = POLLIN },
                        { .fd = STDIN_FILENO, .events = POLLIN },
                };
                bool want_in = stdin_open && in_credit.available > 0;

                /* Drain whatever frames are already buffered before sleeping. */
                r = rbuf_off < rbuf_len ? 1 : poll(pfd, want_in ? 2 : 1, -1);
                if (r < 0 && errno != EINTR)
                        die("poll: %s", strerror(errno));
                if (pending_signal) {
                        uint8_t le[4];
                        space_put_le32(le, (uint32_t) pending_signal);
                        pending_signal = 0;
                        send_frame(SPACE_F_SIGNAL, 0, id, le, sizeof le);
                }
                if (r < 0)
                        continue;

                if (want_in && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR))) {
                        static uint8_t buf[SPACE_FRAME_PAYLOAD_MAX];
                        size_t want = in_credit.available < sizeof buf ? in_credit.available : sizeof buf;
                        ssize_t n = read(STDIN_FILENO, buf, want);

                        if (n > 0) {
                                (void) space_credit_take(&in_credit, (size_t) n);
                                send_frame(SPACE_F_DATA, 0, id, buf, (size_t) n);
                        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                                send_frame(SPACE_F_EOF, 0, id, NULL, 0);
                                stdin_open = false;
                        }
                }

                if (rbuf_off >= rbuf_len && !(pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
                        continue;
                /* One frame at a time, so stdin gets its turn. */
                if (next_frame(-1, &h, &p) == 0 || h.stream != id)
                        continue;

                switch (h.type) {
                case SPACE_F_DATA:
                        if (h.fd != 1 && h.fd != 2)
                                die("%s", "DATA on fd 0 from the guest");
                        if (space_credit_take(&out_credit[h.fd], h.length) < 0)
                                die("%s", "guest overran its credit");
                        write_all(h.fd, p, h.length);
                        {
                                uint8_t le[4];
                                space_put_le32(le, h.length);
                                (void) space_credit_give(&out_credit[h.fd], h.length);
                                send_frame(SPACE_F_CREDIT, h.fd, id, le, sizeof le);
                        }
                        break;
                case SPACE_F_CREDIT:
                        if (h.fd != 0 || h.length != 4 || space_credit_give(&in_credit, space_get_le32(p)) < 0)
                                die("%s", "bad CREDIT from the guest");
                        break;
                case SPACE_F_EXIT:
                        send_frame(SPACE_F_CLOSE, 0, id, NULL, 0);
                        if (space_kv_get(p, h.length, "signal", &v) > 0)
                                return 128 + atoi(v);
                        if (space_kv_get(p, h.length, "code", &v) > 0)
                                return atoi(v);
                        die("%s", "EXIT without code or signal");
                default:
                        break;
                }
        }
}

static int cmd_par(unsigned n, int argc, char **argv) {
        _cleanup_free_ uint32_t *ids = calloc(n ? n : 1, sizeof *ids);
        _cleanup_free_ int *codes = calloc(n ? n : 1, sizeof *codes);
        _cleanup_free_ uint64_t *bytes = calloc(n ? n : 1, sizeof *bytes);
        uint32_t base = new_stream_id();
        unsigned left = n, started = 0;
        uint64_t t0 = now_ns();
        SpaceBuf kv = {};
        int rc = 0;

        if (!ids || !codes || !bytes)
                die("%s", "out of memory");
        for (int i = 0; i < argc; i++)
                if (space_kv_add(&kv, "argv", argv[i]) < 0)
                        die("bad argument: %s", argv[i]);
        for (unsigned i = 0; i < n; i++) {
                ids[i] = ((base + i) & ~SPACE_STREAM_GUEST_BIT) ?: 1;
                codes[i] = -1;
                send_frame(SPACE_F_EXEC, 0, ids[i], kv.data, kv.len);
        }
        space_buf_done(&kv);

        while (left > 0) {
                SpaceFrameHeader h;
                const uint8_t *p;
                const char *v;
                unsigned i;

                if (next_frame(120000, &h, &p) == 0)
                        die("%s", "no progress within 120 s");
                i = h.stream - ids[0];
                if (h.stream < ids[0] || i >= n || ids[i] != h.stream)
                        continue;
                switch (h.type) {
                case SPACE_F_STARTED:
                        started++;
                        break;
                case SPACE_F_ERROR:
                        codes[i] = 127;
                        left--;
                        break;
                case SPACE_F_DATA: {
                        uint8_t le[4];
                        bytes[i] += h.length;
                        space_put_le32(le, h.length);
                        send_frame(SPACE_F_CREDIT, h.fd, h.stream, le, sizeof le);
                        break;
                }
                case SPACE_F_EXIT:
                        codes[i] = space_kv_get(p, h.length, "code", &v) > 0 ? atoi(v) :
                                   space_kv_get(p, h.length, "signal", &v) > 0 ? 128 + atoi(v) : 255;
                        send_frame(SPACE_F_CLOSE, 0, h.stream, NULL, 0);
                        left--;
                        break;
                default:
                        break;
                }
        }

        printf("{\"n\":%u,\"started\":%u,\"ms\":%.1f,\"codes\":[", n, started, (double) (now_ns() - t0) / 1e6);
        for (unsigned i = 0; i < n; i++) {
                printf("%s%d", i ? "," : "", codes[i]);
                if (codes[i] != 0)
                        rc = 1;
        }
        printf("],\"bytes\":[");
        for (unsigned i = 0; i < n; i++)
                printf("%s%llu", i ? "," : "", (unsigned long long) bytes[i]);
        printf("]}\n");
        return rc;
}

int main(int argc, char *argv[]) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        if (argc < 3) {
                fprintf(stderr, "usage: space-chan SOCKET ping [N] | exec [-i] -- ARGV... | par N -- ARGV... | init K=V...\n");
                return 125;
        }
        if (strlen(argv[1]) >= sizeof sa.sun_path)
                die("socket path too long: %s", argv[1]);
        strcpy(sa.sun_path, argv[1]);
        sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (sock < 0 || connect(sock, (struct sockaddr *) &sa, sizeof sa) < 0)
                die("connect: %s", strerror(errno));

        if (streq(argv[2], "ping"))
                return cmd_ping(argc > 3 ? (unsigned) strtoul(argv[3], NULL, 10) : 10);
        if (streq(argv[2], "init"))
                return cmd_init(argc - 3, argv + 3);
        if (streq(argv[2], "par")) {
                if (argc < 6 || !streq(argv[4], "--"))
                        die("%s", "usage: par N -- ARGV...");
                return cmd_par((unsigned) strtoul(argv[3], NULL, 10), argc - 5, argv + 5);
        }
        if (streq(argv[2], "exec")) {
                bool with_stdin = false, pty = false;
                int i = 3;

                for (; i < argc && argv[i][0] == '-'; i++) {
                        if (streq(argv[i], "--")) {
                                i++;
                                break;
                        }
                        if (streq(argv[i], "-i"))
                                with_stdin = true;
                        else if (streq(argv[i], "-t"))
                                pty = true;
                        else
                                die("unknown option %s", argv[i]);
                }
                if (i >= argc)
                        die("%s", "exec needs a command");
                return cmd_exec(with_stdin, pty, argc - i, argv + i);
        }
        die("unknown command %s", argv[2]);
}
