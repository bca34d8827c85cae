/* SPDX-License-Identifier: Apache-2.0 */

/* The egress gateway (spaced/egress/gateway.c) and the host's tunnels (spaced/channel/tunnel.c) against a
 * hostile guest: the test speaks the channel protocol itself on a socketpair, as root in a guest could, to
 * the real agent.c, with servers on 127.0.33.x as the destinations. What an attacker tries first:
 *  - a CONNECT to a name no rule names, or malformed: refused, and nothing connects anywhere;
 *  - an allowed name whose ClientHello names another host: the server accepts but receives not one byte;
 *  - more data than the window, more credit than the window: the tunnel is closed;
 *  - a flood of CONNECTs: held tunnels are capped, the rest refused as busy, the channel stays up;
 *  - DNS questions for names no rule names: NXDOMAIN;
 *  - a second request on a plain HTTP connection that names another host (in the same packet as the first, or
 *    after it): the connection ends and the server never sees it;
 *  - more DNS questions or CONNECTs a second than the sandbox's rate: refused as busy at once, logged once.
 * And the way it should work: an allowed name with the right SNI gets through, both ways; later requests to
 * the same host, and bodies that look like requests, go through as they are. Audit lines are written together,
 * a moment later, or when the log is read. */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "channel/channel.h"
#include "core/log.h"
#include "core/store.h"
#include "core/util.h"
#include "core/worker.h"
#include <cjson/cJSON.h>
#include "egress/egress.h"
#include "io-util.h"
#include "sandbox/sandbox.h"
#include "tap.h"

#define ALLOWED "127.0.33.2"

static Manager manager;
static char tmpdir[] = "/tmp/test-gateway-XXXXXX";
static int guest = -1;                 /* our end of the channel: we are the guest */
static SpaceFrameReader reader;
static uint32_t next_stream = SPACE_STREAM_GUEST_BIT | 1;

typedef struct Frame {
        SpaceFrameHeader h;
        uint8_t payload[SPACE_FRAME_PAYLOAD_MAX + 1];
} Frame;

static void send_frame(uint8_t type, uint8_t fd, uint32_t stream, const void *p, size_t n) {
        _cleanup_(space_buf_done) SpaceBuf b = {};

        ASSERT(space_frame_append(&b, type, fd, stream, p, n) >= 0);
        ASSERT(loop_write(guest, b.data, b.len) >= 0);
}

static void send_kv(uint8_t type, uint32_t stream, const char *k1, const char *v1, const char *k2, const char *v2,
                    const char *k3, const char *v3) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};

        if (k1)
                ASSERT(space_kv_add(&kv, k1, v1) >= 0);
        if (k2)
                ASSERT(space_kv_add(&kv, k2, v2) >= 0);
        if (k3)
                ASSERT(space_kv_add(&kv, k3, v3) >= 0);
        send_frame(type, 0, stream, kv.data, kv.len);
}

static uint32_t connect_to(const char *host, const char *port, const char *via) {
        uint32_t s = next_stream++;

        send_kv(SPACE_F_CONNECT, s, "host", host, "port", port, "via", via);
        return s;
}

/* Runs the host's loop for up to usec and hands each frame the host sends to on_frame until it returns true
 * (true then; false when the time ran out). One buffer for every reader, so no frame is lost between them. */
static bool pump(uint64_t usec, bool (*on_frame)(const SpaceFrameHeader *h, const uint8_t *payload, void *ud),
                 void *ud) {
        uint64_t end = now_usec_monotonic() + usec;
        static uint8_t pending[SPACE_FRAME_MAX * 2];
        static size_t n_pending;

        while (now_usec_monotonic() < end) {
                while (n_pending > 0) {
                        SpaceFrameHeader h;
                        const uint8_t *payload;
                        size_t used = 0;
                        int r = space_frame_reader_feed(&reader, pending, n_pending, &used, &h, &payload);

                        memmove(pending, pending + used, n_pending - used);
                        n_pending -= used;
                        ASSERT(r >= 0);
                        if (r == 0)
                                break;
                        if (on_frame(&h, payload, ud))
                                return true;
                }
                (void) sd_event_run(manager.event, 1000);
                ssize_t n = recv(guest, pending + n_pending, sizeof pending - n_pending, MSG_DONTWAIT);
                if (n > 0)
                        n_pending += (size_t) n;
        }
        return false;
}

typedef struct Wanted {
        uint32_t stream;
        Frame *frame;
} Wanted;

static bool take_wanted(const SpaceFrameHeader *h, const uint8_t *payload, void *ud) {
        Wanted *w = ud;

        if (h->stream != w->stream || h->type == SPACE_F_CREDIT)
                return false;
        w->frame->h = *h;
        memcpy(w->frame->payload, payload, h->length);
        w->frame->payload[h->length] = 0;
        return true;
}

/* The next frame the host sends on stream (frames on others, and CREDIT, are skipped), within usec; false when
 * none came. */
static bool next_frame(uint32_t stream, uint64_t usec, Frame *ret) {
        return pump(usec, take_wanted, &(Wanted) { .stream = stream, .frame = ret });
}

static const char *kv(const Frame *f, const char *key) {
        const char *v = NULL;

        return space_kv_get(f->payload, f->h.length, key, &v) > 0 ? v : "";
}

/* A server on ALLOWED: accepts one connection and counts what it reads. */
static int server_listen_buf(uint16_t *ret_port, int rcvbuf) {
        struct sockaddr_in a = { .sin_family = AF_INET };
        socklen_t len = sizeof a;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

        ASSERT(fd >= 0);
        /* a server that hardly takes anything: what the host holds for it is bounded by the window alone */
        if (rcvbuf > 0)
                ASSERT(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) >= 0);
        ASSERT(inet_pton(AF_INET, ALLOWED, &a.sin_addr) == 1);
        ASSERT(bind(fd, (struct sockaddr *) &a, sizeof a) >= 0);
        ASSERT(listen(fd, 16) >= 0);
        ASSERT(getsockname(fd, (struct sockaddr *) &a, &len) >= 0);
        *ret_port = ntohs(a.sin_port);
        return fd;
}

static int server_listen(uint16_t *ret_port) {
        return server_listen_buf(ret_port, 0);
}

static size_t hello(uint8_t *out, const char *sni) {
        size_t l = strlen(sni), o = 0, ext = l + 9, body = 2 + 32 + 1 + 4 + 2 + 2 + ext, hs = body + 4;

        out[o++] = 22, out[o++] = 3, out[o++] = 1, out[o++] = (uint8_t) (hs >> 8), out[o++] = (uint8_t) hs;
        out[o++] = 1, out[o++] = 0, out[o++] = (uint8_t) (body >> 8), out[o++] = (uint8_t) body;
        out[o++] = 3, out[o++] = 3;
        memset(out + o, 7, 32), o += 32;
        out[o++] = 0;
        out[o++] = 0, out[o++] = 2, out[o++] = 0x13, out[o++] = 1;
        out[o++] = 1, out[o++] = 0;
        out[o++] = (uint8_t) (ext >> 8), out[o++] = (uint8_t) ext;
        out[o++] = 0, out[o++] = 0, out[o++] = (uint8_t) ((l + 5) >> 8), out[o++] = (uint8_t) (l + 5);
        out[o++] = (uint8_t) ((l + 3) >> 8), out[o++] = (uint8_t) (l + 3), out[o++] = 0;
        out[o++] = (uint8_t) (l >> 8), out[o++] = (uint8_t) l;
        memcpy(out + o, sni, l);
        return o + l;
}

/* Reads what the accepted connection has, until it ends or usec pass: the byte count, -1 if never accepted. */
static ssize_t server_drain(int lfd, uint64_t usec, char *buf, size_t size) {
        uint64_t end = now_usec_monotonic() + usec;
        int c = -1;
        size_t got = 0;

        while (now_usec_monotonic() < end) {
                (void) sd_event_run(manager.event, 1000);
                if (c < 0) {
                        c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                        continue;
                }
                ssize_t n = recv(c, buf + got, size - got, 0);
                if (n == 0 || (n < 0 && errno != EAGAIN))
                        break;
                if (n > 0)
                        got += (size_t) n;
        }
        if (c < 0)
                return -1;
        close(c);
        return (ssize_t) got;
}

static void test_refusals(void) {
        bool got;
        Frame f;
        uint32_t s;

        s = connect_to("denied.test", "443", "proxy");
        got = next_frame(s, 2000000, &f);
        ok(got && f.h.type == SPACE_F_ERROR && streq(kv(&f, "code"), "denied"),
           "CONNECT to a name no rule names: ERROR denied (%s)", kv(&f, "message"));
        s = next_stream++;
        send_kv(SPACE_F_CONNECT, s, "host", "allowed.test", "via", "proxy", NULL, NULL);
        ok(next_frame(s, 2000000, &f) && f.h.type == SPACE_F_ERROR && streq(kv(&f, "code"), "invalid"),
           "CONNECT without a port: ERROR invalid");
        s = connect_to("allowed.test", "0", "proxy");
        ok(next_frame(s, 2000000, &f) && f.h.type == SPACE_F_ERROR, "port 0: refused");
        s = connect_to("allowed.test", "443", "magic");
        ok(next_frame(s, 2000000, &f) && f.h.type == SPACE_F_ERROR, "via other than proxy or transparent: refused");
        s = connect_to("0x7f.0x2103", "443", "proxy");   /* 127.0.33.3 in hex: other.test's, which no IP rule opens */
        got = next_frame(s, 2000000, &f);
        ok(got && f.h.type == SPACE_F_ERROR && streq(kv(&f, "code"), "denied"),
           "an IP literal in hex through the proxy: decided as 127.0.33.3 and refused (%s)", kv(&f, "message"));
        s = connect_to("other.test", "443", "proxy");
        got = next_frame(s, 5000000, &f);
        ok(got && f.h.type == SPACE_F_ERROR && streq(kv(&f, "code"), "denied"),
           "an allowed name at an address no IP rule opens: refused (%s)", kv(&f, "message"));
        s = connect_to("both.test", "443", "proxy");
        got = next_frame(s, 5000000, &f);
        ok(got && f.h.type == SPACE_F_ERROR && streq(kv(&f, "code"), "denied"),
           "a name with an allowed and a denied address: refused, not served from the allowed one (%s)",
           kv(&f, "message"));
        s = next_stream++;
        send_kv(SPACE_F_RESOLVE, s, "name", "both.test", "family", "4", NULL, NULL);
        ok(next_frame(s, 5000000, &f) && f.h.type == SPACE_F_ERROR, "... and the DNS stub is not answered it");
        s = connect_to("169.254.169.254", "80", "transparent");
        ok(next_frame(s, 2000000, &f) && f.h.type == SPACE_F_ERROR, "the metadata address, captured: refused");
        s = connect_to("*.test", "443", "proxy");
        ok(next_frame(s, 2000000, &f) && f.h.type == SPACE_F_ERROR && streq(kv(&f, "code"), "invalid"),
           "a wildcard as the host: invalid");

        s = next_stream++;
        send_kv(SPACE_F_RESOLVE, s, "name", "c2VjcmV0.exfil.test", "family", "4", NULL, NULL);
        ok(next_frame(s, 2000000, &f) && f.h.type == SPACE_F_ERROR && streq(kv(&f, "code"), "nxdomain"),
           "RESOLVE of a name no rule names: nxdomain, never looked up");
        s = next_stream++;
        send_kv(SPACE_F_RESOLVE, s, "name", "allowed.test", "family", "4", NULL, NULL);
        got = next_frame(s, 5000000, &f);
        ok(got && f.h.type == SPACE_F_OK && strncmp(kv(&f, "addr"), "198.18.", 7) == 0,
           "RESOLVE allowed.test: a stand-in for the host's loopback (%s)", kv(&f, "addr"));
        s = next_stream++;
        send_frame(SPACE_F_DATA, 1, s, "junk", 4);   /* data on a stream that does not exist */
        s = next_stream++;
        send_kv(SPACE_F_RESOLVE, s, "name", "denied.test", "family", "6", NULL, NULL);
        ok(next_frame(s, 2000000, &f) && f.h.type == SPACE_F_ERROR, "data on an unknown stream: dropped, the channel serves on");
}

static void test_sni_mismatch(void) {
        uint16_t port;
        int lfd = server_listen(&port);
        char p[8], buf[4096];
        uint8_t ch[512];
        size_t n;
        Frame f;
        uint32_t s;
        ssize_t got;

        snprintf(p, sizeof p, "%u", port);
        s = connect_to("allowed.test", p, "proxy");
        ok(next_frame(s, 5000000, &f) && f.h.type == SPACE_F_OK && streq(kv(&f, "addr"), ALLOWED),
           "CONNECT allowed.test: OK, connected to %s", ALLOWED);
        n = hello(ch, "other.test");
        send_frame(SPACE_F_DATA, 1, s, ch, n);
        ok(next_frame(s, 2000000, &f) && f.h.type == SPACE_F_CLOSE, "a ClientHello naming other.test: CLOSE");
        got = server_drain(lfd, 500000, buf, sizeof buf);
        ok(got == 0, "... and the server got not one byte of it (%zd)", got);

        s = connect_to(ALLOWED, p, "proxy");
        ok(next_frame(s, 5000000, &f) && f.h.type == SPACE_F_OK, "CONNECT to the allowed address: OK");
        send_frame(SPACE_F_DATA, 1, s, "PING x\r\n", 8);
        send_frame(SPACE_F_EOF, 1, s, NULL, 0);
        got = server_drain(lfd, 2000000, buf, sizeof buf);
        ok(got == 8 && memcmp(buf, "PING x\r\n", 8) == 0,
           "a line protocol that starts like a request ('PING x'): goes through as what it is");

        s = connect_to("allowed.test", p, "proxy");
        ok(next_frame(s, 5000000, &f) && f.h.type == SPACE_F_OK, "CONNECT allowed.test again: OK");
        n = hello(ch, "allowed.test");
        send_frame(SPACE_F_DATA, 1, s, ch, n);
        send_frame(SPACE_F_EOF, 1, s, NULL, 0);
        got = server_drain(lfd, 2000000, buf, sizeof buf);
        ok(got == (ssize_t) n && memcmp(buf, ch, n) == 0, "the right SNI: the server gets the ClientHello whole");
        close(lfd);
}

static void test_window(void) {
        uint16_t port;
        int lfd = server_listen_buf(&port, 1024);
        static uint8_t big[SPACE_FRAME_PAYLOAD_MAX];
        uint8_t le[4];
        char p[8];
        Frame f;
        uint32_t s;
        bool closed = false;

        snprintf(p, sizeof p, "%u", port);
        /* an address an IP rule allows on this port, without SNI: through at once, and the server never reads */
        s = connect_to(ALLOWED, p, "transparent");
        ok(next_frame(s, 5000000, &f) && f.h.type == SPACE_F_OK, "CONNECT to an allowed address: OK");
        memset(big, 'x', sizeof big);
        send_frame(SPACE_F_DATA, 1, s, "plain", 5);
        for (unsigned i = 0; i < 40 && !closed; i++) {   /* 2.5 MiB, far past the window */
                send_frame(SPACE_F_DATA, 1, s, big, sizeof big);
                closed = next_frame(s, 20000, &f) && f.h.type == SPACE_F_CLOSE;
        }
        ok(closed, "data past the window: the host closes the tunnel");

        s = connect_to(ALLOWED, p, "transparent");
        ok(next_frame(s, 5000000, &f) && f.h.type == SPACE_F_OK, "another: OK");
        space_put_le32(le, 0x7fffffff);
        send_frame(SPACE_F_CREDIT, 0, s, le, 4);
        ok(next_frame(s, 2000000, &f) && f.h.type == SPACE_F_CLOSE, "credit past the window: CLOSE");
        close(lfd);
}

typedef struct Tally {
        uint32_t first;
        unsigned *busy, *other;
} Tally;

static bool count_frame(const SpaceFrameHeader *h, const uint8_t *payload, void *ud) {
        Tally *t = ud;
        const char *code = NULL;

        if (h->stream < t->first || h->type == SPACE_F_CREDIT)
                return false;
        if (h->type == SPACE_F_ERROR && space_kv_get(payload, h->length, "code", &code) > 0 && streq(code, "busy"))
                (*t->busy)++;
        else
                (*t->other)++;
        return false;
}

/* Reads every frame the host sends for usec: how many were ERROR with code busy, and how many anything else
 * (CREDIT aside) on streams from first on. */
static void drain(uint32_t first, uint64_t usec, unsigned *ret_busy, unsigned *ret_other) {
        (void) pump(usec, count_frame, &(Tally) { .first = first, .busy = ret_busy, .other = ret_other });
}

static void test_flood(void) {
        unsigned busy = 0, other = 0, late_busy = 0, late_other = 0;
        uint32_t first = next_stream;
        Frame f;

        /* Captured connections to a public address with no rule wait for a name in their first bytes: each
         * holds a tunnel. */
        for (unsigned i = 0; i < SPACE_TUNNELS_MAX + 40; i++) {
                (void) connect_to("93.184.216.34", "80", "transparent");
                (void) sd_event_run(manager.event, 0);   /* the host reads as a real one would */
        }
        drain(first, 1000000, &busy, &other);
        ok(busy == 40 && other == 0, "%u CONNECTs: the 40 past %u refused as busy (%u), the rest held (%u answered)",
           SPACE_TUNNELS_MAX + 40, SPACE_TUNNELS_MAX, busy, other);
        {
                uint32_t q = next_stream++;

                send_kv(SPACE_F_RESOLVE, q, "name", "allowed.test", "family", "4", NULL, NULL);
                ok(next_frame(q, 5000000, &f) && f.h.type == SPACE_F_OK, "... and the channel still answers");
        }
        /* the held ones give up after the naming timeout: refused, not leaked */
        drain(first, 6000000, &late_busy, &late_other);
        ok(late_other == SPACE_TUNNELS_MAX, "the %u held ones that never name a host are refused after the naming "
           "timeout (%u)", SPACE_TUNNELS_MAX, late_other);
        (void) connect_to("93.184.216.34", "80", "transparent");
        drain(next_stream - 1, 200000, &late_busy, &late_other);
        ok(late_busy == 0, "... which frees their places");
}


/* Reads what the accepted connection has until it ends, usec pass or want bytes came. */
static size_t server_read(int c, uint64_t usec, char *buf, size_t size, size_t want) {
        uint64_t end = now_usec_monotonic() + usec;
        size_t got = 0;

        while (now_usec_monotonic() < end && got < want) {
                (void) sd_event_run(manager.event, 1000);
                ssize_t n = recv(c, buf + got, size - got, 0);
                if (n == 0 || (n < 0 && errno != EAGAIN))
                        break;
                if (n > 0)
                        got += (size_t) n;
        }
        return got;
}

static int server_accept(int lfd, uint64_t usec) {
        uint64_t end = now_usec_monotonic() + usec;

        while (now_usec_monotonic() < end) {
                int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (c >= 0)
                        return c;
                (void) sd_event_run(manager.event, 1000);
        }
        return -1;
}

#define REQ_ALLOWED "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
#define REQ_OTHER "GET /x HTTP/1.1\r\nHost: other.test\r\n\r\n"

static void test_second_request(void) {
        static const char body_req[] = "POST / HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 37\r\n\r\n" REQ_OTHER;
        uint16_t port;
        int lfd = server_listen(&port), c;
        char p[8], buf[4096];
        Frame f;
        uint32_t s;
        size_t got;

        snprintf(p, sizeof p, "%u", port);
        /* both requests in one DATA frame: the first goes, the second never */
        s = connect_to("allowed.test", p, "proxy");
        ok(next_frame(s, 5000000, &f) && f.h.type == SPACE_F_OK, "CONNECT allowed.test: OK");
        send_frame(SPACE_F_DATA, 1, s, REQ_ALLOWED REQ_OTHER, strlen(REQ_ALLOWED REQ_OTHER));
        ok(next_frame(s, 2000000, &f) && f.h.type == SPACE_F_CLOSE,
           "a second request naming other.test in the same packet as the first: CLOSE");
        c = server_accept(lfd, 2000000);
        got = c >= 0 ? server_read(c, 500000, buf, sizeof buf, sizeof buf) : 0;
        /* the connection is reset at the refusal: what was let go before it may be lost with it */
        ok(got <= strlen(REQ_ALLOWED) && memcmp(buf, REQ_ALLOWED, got) == 0,
           "... the server got not one byte of the second request (%zu bytes, of the first at most)", got);
        if (c >= 0)
                close(c);

        /* the second after the first was served */
        s = connect_to("allowed.test", p, "proxy");
        ok(next_frame(s, 5000000, &f) && f.h.type == SPACE_F_OK, "CONNECT allowed.test again: OK");
        send_frame(SPACE_F_DATA, 1, s, REQ_ALLOWED, strlen(REQ_ALLOWED));
        c = server_accept(lfd, 2000000);
        got = c >= 0 ? server_read(c, 2000000, buf, sizeof buf, strlen(REQ_ALLOWED)) : 0;
        ok(got == strlen(REQ_ALLOWED), "the first request goes through (%zu bytes)", got);
        send_frame(SPACE_F_DATA, 1, s, REQ_ALLOWED, strlen(REQ_ALLOWED));
        got = c >= 0 ? server_read(c, 2000000, buf, sizeof buf, strlen(REQ_ALLOWED)) : 0;
        ok(got == strlen(REQ_ALLOWED), "... a second to the same host too: keep-alive works (%zu bytes)", got);
        send_frame(SPACE_F_DATA, 1, s, "GET /y HTTP/1.1\r\nHost: other", 29);
        send_frame(SPACE_F_DATA, 1, s, ".test\r\n\r\n", 9);
        ok(next_frame(s, 2000000, &f) && f.h.type == SPACE_F_CLOSE, "a third naming other.test, in two pieces: CLOSE");
        got = c >= 0 ? server_read(c, 500000, buf, sizeof buf, sizeof buf) : 0;
        ok(got == 0, "... and the server got none of it (%zu bytes)", got);
        if (c >= 0)
                close(c);

        /* a body that looks like a request is a body */
        s = connect_to("allowed.test", p, "proxy");
        ok(next_frame(s, 5000000, &f) && f.h.type == SPACE_F_OK, "CONNECT allowed.test: OK");
        send_frame(SPACE_F_DATA, 1, s, body_req, strlen(body_req));
        send_frame(SPACE_F_DATA, 1, s, REQ_ALLOWED, strlen(REQ_ALLOWED));
        c = server_accept(lfd, 2000000);
        got = c >= 0 ? server_read(c, 2000000, buf, sizeof buf, strlen(body_req) + strlen(REQ_ALLOWED)) : 0;
        ok(got == strlen(body_req) + strlen(REQ_ALLOWED), "a body of 37 bytes that reads like a request, then a "
           "request to the same host: all of it goes (%zu bytes)", got);
        if (c >= 0)
                close(c);
        send_frame(SPACE_F_CLOSE, 0, s, NULL, 0);

        /* framing two servers could read apart */
        s = connect_to("allowed.test", p, "proxy");
        ok(next_frame(s, 5000000, &f) && f.h.type == SPACE_F_OK, "CONNECT allowed.test: OK");
        send_frame(SPACE_F_DATA, 1, s, REQ_ALLOWED "GET / HTTP/1.1\r\nHost: allowed.test\r\nX: 1\nHost: other.test\r\n\r\n",
                   strlen(REQ_ALLOWED) + 62);
        ok(next_frame(s, 2000000, &f) && f.h.type == SPACE_F_CLOSE, "a second head with a bare LF: CLOSE");
        c = server_accept(lfd, 2000000);
        got = c >= 0 ? server_read(c, 500000, buf, sizeof buf, sizeof buf) : 0;
        ok(got <= strlen(REQ_ALLOWED), "... the server got nothing of the second (%zu bytes)", got);
        if (c >= 0)
                close(c);
        close(lfd);
}

/* The entries of the sandbox's audit log whose reason is reason, and whose message has needle. */
static unsigned audit_count(Sandbox *sb, const char *reason, const char *needle) {
        cJSON *list = NULL, *e;
        unsigned n = 0;

        ASSERT(egress_audit_read(sb->id, sb->data_dir, 0, 100000, &list) >= 0);
        cJSON_ArrayForEach(e, list) {
                cJSON *r = cJSON_GetObjectItem(e, "reason"), *m = cJSON_GetObjectItem(e, "message");

                if (cJSON_IsString(r) && streq(r->valuestring, reason) &&
                    (!needle || (cJSON_IsString(m) && strstr(m->valuestring, needle))))
                        n++;
        }
        cJSON_Delete(list);
        return n;
}

static void test_rates(Sandbox *sb) {
        unsigned busy = 0, other = 0;
        uint32_t first = next_stream;
        Frame f;
        uint32_t s;

        manager.egress->limits = (EgressLimits) { .resolve_rate = 5, .resolve_burst = 10, .connect_rate = 5,
                                                        .connect_burst = 10 };
        for (unsigned i = 0; i < 50; i++) {
                char name[64];

                snprintf(name, sizeof name, "q%u.exfil.test", i);
                send_kv(SPACE_F_RESOLVE, next_stream++, "name", name, "family", "4", NULL, NULL);
        }
        drain(first, 500000, &busy, &other);
        ok(other == 10 && busy == 40, "50 DNS questions at a rate of 5 a second, a burst of 10: 10 answered, 40 refused "
           "as busy at once (%u, %u)", other, busy);
        ok(audit_count(sb, "rate_limited", "over the sandbox's rate of 5 DNS questions") == 1,
           "... and logged once, with the reason rate_limited");

        first = next_stream;
        busy = other = 0;
        for (unsigned i = 0; i < 30; i++)
                (void) connect_to("denied.test", "443", "proxy");
        drain(first, 500000, &busy, &other);
        ok(other == 10 && busy == 20, "30 CONNECTs at 5 a second, a burst of 10: 10 decided, 20 refused as busy (%u, %u)",
           other, busy);
        ok(audit_count(sb, "rate_limited", "over the sandbox's rate of 5 connections") == 1, "... logged once");

        /* a quiet second later: admitted again, and the burst is counted */
        (void) pump(1100000, count_frame, &(Tally) { .first = UINT32_MAX, .busy = &busy, .other = &other });
        s = next_stream++;
        send_kv(SPACE_F_RESOLVE, s, "name", "allowed.test", "family", "4", NULL, NULL);
        ok(next_frame(s, 5000000, &f) && f.h.type == SPACE_F_OK, "a second later the sandbox is answered again");
        ok(audit_count(sb, "rate_limited", "39 more DNS questions refused") == 1,
           "... and the log counts the burst's other refusals in one entry");
        manager.egress->limits = (EgressLimits) {};
}

static void test_audit_batched(Sandbox *sb) {
        _cleanup_free_ char *log = NULL;
        struct stat before, after;
        Frame f;
        uint32_t s;

        (void) asprintf(&log, "%s/egress.log", sb->data_dir);
        (void) audit_count(sb, "", NULL); /* writes what waits */
        ASSERT(stat(log, &before) == 0);
        s = next_stream++;
        send_kv(SPACE_F_RESOLVE, s, "name", "batched.exfil.test", "family", "4", NULL, NULL);
        ok(next_frame(s, 2000000, &f) && f.h.type == SPACE_F_ERROR, "a DNS question no rule allows: refused");
        ASSERT(stat(log, &after) == 0);
        ok(after.st_size == before.st_size, "... its audit line is not written at once");
        (void) pump(400000, count_frame, &(Tally) { .first = UINT32_MAX, .busy = &(unsigned) { 0 },
                                                     .other = &(unsigned) { 0 } });
        ASSERT(stat(log, &after) == 0);
        ok(after.st_size > before.st_size, "... but within a fraction of a second");
}

int main(void) {
        _cleanup_free_ char *db = NULL, *hosts = NULL, *run = NULL;
        Error err = {};
        Sandbox *s;
        int sv[2];
        FILE *f;

        plan(0);
        log_max_level = LOG_ERR_LEVEL;
        (void) signal(SIGPIPE, SIG_IGN);
        ASSERT(mkdtemp(tmpdir));
        (void) asprintf(&db, "%s/state.db", tmpdir);
        (void) asprintf(&hosts, "%s/hosts", tmpdir);
        (void) asprintf(&run, "%s/run", tmpdir);
        ASSERT(mkdir(run, 0700) >= 0);
        f = fopen(hosts, "we");
        ASSERT(f);
        fprintf(f, "%s allowed.test\n127.0.33.3 other.test\n%s both.test\n127.0.33.3 both.test\n", ALLOWED, ALLOWED);
        fclose(f);

        ASSERT((manager.egress = egress_settings_new()));
        ASSERT(sd_event_new(&manager.event) >= 0);
        ASSERT(completions_setup(&manager) >= 0);
        ASSERT(store_open(db, &manager.store, &err) >= 0);
        manager.state_dir = tmpdir;
        manager.egress->hosts_file = strdup(hosts);
        manager.egress->hosts_only = true;
        ASSERT(egress_profiles_parse(&manager.egress->policy, "t: allow allowed.test, other.test, both.test, " ALLOWED, &err) >= 0);
        sandbox_register_ops();   /* what the gateway reads of a sandbox */
        egress_gateway_setup(0, 0);

        s = calloc(1, sizeof *s);
        s->manager = &manager;
        snprintf(s->id, sizeof s->id, "%s", "0000000000000000000000000000abcd");
        s->state = SANDBOX_RUNNING;
        s->template_name = strdup("minimal");
        s->template_digest = strdup("0123456789abcdef");
        s->run_dir = strdup(run);
        (void) asprintf(&s->data_dir, "%s/data", tmpdir);
        (void) mkdir(s->data_dir, 0700);
        s->egress_profiles = calloc(2, sizeof(char *));
        s->egress_profiles[0] = strdup("t");
        s->next = manager.sandboxes;
        manager.sandboxes = s;

        ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) >= 0);
        ASSERT(agent_attach(s, sv[0]) >= 0);
        guest = sv[1];

        test_refusals();
        test_sni_mismatch();
        test_second_request();
        test_window();
        test_flood();
        test_rates(s);
        test_audit_batched(s);

        {
                struct stat st;
                _cleanup_free_ char *log = NULL;

                (void) asprintf(&log, "%s/egress.log", s->data_dir);
                ok(stat(log, &st) == 0 && st.st_size > 0, "every decision went to the audit log");
        }
        s->channel.agent = agent_free(s->channel.agent);
        close(guest);
        {
                _cleanup_free_ char *cmd = NULL;
                (void) asprintf(&cmd, "rm -rf %s", tmpdir);
                (void) system(cmd);
        }
        return done();
}
