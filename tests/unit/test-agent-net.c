/* SPDX-License-Identifier: Apache-2.0 */

/* The guest agent's tunnels, outside a VM: the real guest/space-agent serves a socketpair (SPACE_AGENT_PORT=
 * fd:3) and listens where $SPACE_AGENT_PROXY_LISTEN and $SPACE_AGENT_DNS_LISTEN say, and this test plays the
 * host: PORT to a listener of its own, CONNECT through the proxy (allowed, denied, a plain request rewritten,
 * a malformed head), RESOLVE from the DNS stub, and the proxy variables in what EXEC starts; and INIT's CA (ca.c)
 * under $SPACE_AGENT_CA_ROOT. */

#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "../../lib/proto.h"
#include "tap.h"

#ifndef AGENT_BINARY
#define AGENT_BINARY "guest/space-agent"
#endif

static char refused_log[128];   /* $SPACE_AGENT_REFUSED_LOG: where the agent notes refusals outside a VM */

static int chan = -1;
static SpaceFrameReader reader;
static uint8_t payload[SPACE_FRAME_PAYLOAD_MAX + 1];

typedef struct Frame {
        SpaceFrameHeader h;
        uint8_t *p; /* payload, NUL-terminated */
} Frame;

static void send_frame(uint8_t type, uint8_t fd, uint32_t stream, const void *p, size_t n) {
        SpaceBuf b = {};

        if (space_frame_append(&b, type, fd, stream, p, n) < 0 || write(chan, b.data, b.len) != (ssize_t) b.len)
                abort();
        space_buf_done(&b);
}

static void send_kv(uint8_t type, uint32_t stream, const char *k1, const char *v1, const char *k2, const char *v2) {
        SpaceBuf kv = {};

        (void) space_kv_add(&kv, k1, v1);
        if (k2)
                (void) space_kv_add(&kv, k2, v2);
        send_frame(type, 0, stream, kv.data, kv.len);
        space_buf_done(&kv);
}

/* The next frame from the agent, within 5 s. */
static bool read_frame(Frame *f) {
        static uint8_t buf[4096];
        static size_t have, off;

        for (;;) {
                const uint8_t *p;
                size_t used;
                int r;

                if (off < have) {
                        r = space_frame_reader_feed(&reader, buf + off, have - off, &used, &f->h, &p);
                        off += used;
                        if (r < 0)
                                return false;
                        if (r > 0) {
                                memcpy(payload, p, f->h.length);
                                payload[f->h.length] = 0;
                                f->p = payload;
                                return true;
                        }
                        continue;
                }
                struct pollfd pfd = { .fd = chan, .events = POLLIN };
                if (poll(&pfd, 1, 5000) <= 0)
                        return false;
                ssize_t n = read(chan, buf, sizeof buf);
                if (n <= 0)
                        return false;
                have = (size_t) n;
                off = 0;
        }
}

/* The next frame that is not CREDIT (credit comes back as the agent writes; most checks do not care). */
static bool next(Frame *f) {
        while (read_frame(f))
                if (f->h.type != SPACE_F_CREDIT)
                        return true;
        return false;
}

static const char *kv(const Frame *f, const char *key) {
        const char *v = NULL;

        return space_kv_get(f->p, f->h.length, key, &v) > 0 ? v : "";
}

static int listen_tcp(uint16_t *ret_port) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t l = sizeof a;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof a) < 0 || listen(fd, 8) < 0 ||
            getsockname(fd, (struct sockaddr *) &a, &l) < 0)
                abort();
        *ret_port = ntohs(a.sin_port);
        return fd;
}

static uint16_t free_port(int type) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t l = sizeof a;
        int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

        if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof a) < 0 || getsockname(fd, (struct sockaddr *) &a, &l) < 0)
                abort();
        close(fd);
        return ntohs(a.sin_port);
}

static int connect_tcp(uint16_t port) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct timeval tv = { .tv_sec = 5 };

        if (fd < 0)
                abort();
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        for (int i = 0; i < 100; i++) {
                if (connect(fd, (struct sockaddr *) &a, sizeof a) == 0)
                        return fd;
                usleep(20000); /* the agent may still be starting */
        }
        abort();
}

/* Reads from fd until want bytes or EOF; returns what came, NUL-terminated. */
static size_t recv_some(int fd, char *buf, size_t size, size_t want) {
        size_t n = 0;

        while (n < want && n + 1 < size) {
                ssize_t r = recv(fd, buf + n, size - 1 - n, 0);
                if (r <= 0)
                        break;
                n += (size_t) r;
        }
        buf[n] = 0;
        return n;
}

static void test_port(void) {
        uint16_t lport, dead;
        char buf[256], ps[16];
        Frame f;
        int l, a;

        l = listen_tcp(&lport);
        snprintf(ps, sizeof ps, "%u", lport);
        send_kv(SPACE_F_PORT, 11, "port", ps, NULL, NULL);
        ok(next(&f) && f.h.type == SPACE_F_OK && f.h.stream == 11, "PORT to a listening port: OK");
        a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        ok(a >= 0, "the guest program gets the connection");
        struct timeval tv = { .tv_sec = 5 };
        (void) setsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

        send_frame(SPACE_F_DATA, 0, 11, "hello", 5);
        ok(recv_some(a, buf, sizeof buf, 5) == 5 && streq(buf, "hello"), "DATA fd 0 reaches the program");
        ok(read_frame(&f) && f.h.type == SPACE_F_CREDIT && f.h.fd == 0 && f.h.stream == 11 &&
                   space_get_le32(f.p) == 5,
           "and comes back as CREDIT fd 0");
        ok(send(a, "world", 5, 0) == 5 && next(&f) && f.h.type == SPACE_F_DATA && f.h.fd == 1 &&
                   f.h.length == 5 && memcmp(f.p, "world", 5) == 0,
           "the program's bytes come as DATA fd 1");
        send_frame(SPACE_F_EOF, 0, 11, NULL, 0);
        ok(recv(a, buf, sizeof buf, 0) == 0, "EOF fd 0 is a half close for the program");
        close(a);
        ok(next(&f) && f.h.type == SPACE_F_EOF && f.h.fd == 1 && f.h.stream == 11, "its close is EOF fd 1");
        close(l);

        dead = free_port(SOCK_STREAM);
        snprintf(ps, sizeof ps, "%u", dead);
        send_kv(SPACE_F_PORT, 12, "port", ps, NULL, NULL);
        ok(next(&f) && f.h.type == SPACE_F_ERROR && f.h.stream == 12 && streq(kv(&f, "errno"), "111"),
           "PORT to a closed port: ERROR errno=111");
        send_kv(SPACE_F_PORT, 13, "port", "0", NULL, NULL);
        ok(next(&f) && f.h.type == SPACE_F_ERROR && f.h.stream == 13 && streq(kv(&f, "errno"), "22"),
           "PORT port=0: EINVAL");
        send_kv(SPACE_F_PORT, 0x80000005, "port", "80", NULL, NULL);
        ok(next(&f) && f.h.type == SPACE_F_ERROR && f.h.stream == 0x80000005, "PORT on a guest id: refused");
}

static void test_proxy(uint16_t proxy) {
        static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        char buf[2048];
        uint32_t s;
        Frame f;
        int c;

        c = connect_tcp(proxy);
        dprintf(c, "CONNECT Example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
        ok(next(&f) && f.h.type == SPACE_F_CONNECT && (f.h.stream & SPACE_STREAM_GUEST_BIT) &&
                   streq(kv(&f, "host"), "example.com") && streq(kv(&f, "port"), "443") &&
                   streq(kv(&f, "via"), "proxy"),
           "CONNECT through the proxy: CONNECT host=example.com port=443 via=proxy on a guest id");
        s = f.h.stream;
        send_kv(SPACE_F_OK, s, "addr", "192.0.2.1", NULL, NULL);
        ok(recv_some(c, buf, sizeof buf, sizeof established - 1) == sizeof established - 1 &&
                   streq(buf, established),
           "OK: the client gets 200 Connection established");
        ok(send(c, "ping", 4, 0) == 4 && next(&f) && f.h.type == SPACE_F_DATA && f.h.stream == s &&
                   f.h.fd == 1 && f.h.length == 4 && memcmp(f.p, "ping", 4) == 0,
           "client bytes: DATA fd 1");
        send_frame(SPACE_F_DATA, 0, s, "pong", 4);
        ok(recv_some(c, buf, sizeof buf, 4) == 4 && streq(buf, "pong"), "DATA fd 0: to the client");
        send_frame(SPACE_F_CLOSE, 0, s, NULL, 0);
        errno = 0;
        ok(recv(c, buf, sizeof buf, 0) <= 0, "CLOSE: the client's connection ends (%s)", strerror(errno));
        close(c);

        c = connect_tcp(proxy);
        dprintf(c, "CONNECT denied.example:22 HTTP/1.1\r\n\r\n");
        ok(next(&f) && f.h.type == SPACE_F_CONNECT && streq(kv(&f, "host"), "denied.example"), "CONNECT sent");
        send_kv(SPACE_F_ERROR, f.h.stream, "code", "denied", "message", "denied.example: no allow rule");
        recv_some(c, buf, sizeof buf, sizeof buf);
#define DENIED_LINE "HTTP/1.1 403 Forbidden by space egress: denied.example: no allow rule\r\n"
        ok(strncmp(buf, DENIED_LINE, strlen(DENIED_LINE)) == 0 &&
                   strstr(buf, "\r\nX-Space-Reason: denied.example: no allow rule\r\n") &&
                   strstr(buf, "\r\n\r\ndenied.example: no allow rule\n"),
           "ERROR code=denied: 403 with the message in the status line, a header and the body");
        close(c);

        /* a message that would end the head early or start another line stays one line */
        c = connect_tcp(proxy);
        dprintf(c, "CONNECT evil.example:443 HTTP/1.1\r\n\r\n");
        ok(next(&f) && f.h.type == SPACE_F_CONNECT, "CONNECT sent");
        send_kv(SPACE_F_ERROR, f.h.stream, "code", "denied", "message", "x\r\nSet-Cookie: a=b\r\n\r\nHTTP/1.1 200 OK");
        memset(buf, 0, sizeof buf);
        recv_some(c, buf, sizeof buf, sizeof buf);
        {
                char *end = strstr(buf, "\r\n\r\n");   /* the head only: the body may say anything */
                if (end)
                        *end = 0;
        }
        ok(strstr(buf, "\r\nSet-Cookie") == NULL && strncmp(buf, "HTTP/1.1 403 Forbidden by space egress: x??Set-Cookie", strlen("HTTP/1.1 403 Forbidden by space egress: x??Set-Cookie")) == 0,
           "control characters of the host's message never reach the head");
        {
                char line[512] = "";
                FILE *lf = fopen(refused_log, "re");

                ok(lf && fgets(line, sizeof line, lf) && strstr(line, " proxy denied.example:22: denied.example: no allow rule\n"),
                   "the refusal is a line of the refusal log: %s", line);
                if (lf)
                        fclose(lf);
        }
        close(c);

        c = connect_tcp(proxy);
        dprintf(c, "CONNECT far.example:443 HTTP/1.1\r\n\r\n");
        ok(next(&f) && f.h.type == SPACE_F_CONNECT, "CONNECT sent");
        send_kv(SPACE_F_ERROR, f.h.stream, "code", "unreachable", "message", "no route");
        recv_some(c, buf, sizeof buf, sizeof buf);
        ok(strncmp(buf, "HTTP/1.1 502 Bad Gateway\r\n", 26) == 0, "ERROR code=unreachable: 502");
        close(c);

        c = connect_tcp(proxy);
        dprintf(c, "GET http://example.com:8080/x?y HTTP/1.1\r\nHost: example.com:8080\r\nProxy-Authorization: x\r\n"
                   "Accept: */*\r\n\r\n");
        ok(next(&f) && f.h.type == SPACE_F_CONNECT && streq(kv(&f, "host"), "example.com") &&
                   streq(kv(&f, "port"), "8080") && streq(kv(&f, "via"), "proxy"),
           "plain HTTP: CONNECT to the URI's host and port");
        s = f.h.stream;
        send_kv(SPACE_F_OK, s, "addr", "192.0.2.1", NULL, NULL);
        ok(next(&f) && f.h.type == SPACE_F_DATA && f.h.stream == s &&
                   streq((char *) f.p, "GET /x?y HTTP/1.1\r\nAccept: */*\r\nHost: example.com:8080\r\n"
                                       "Connection: close\r\n\r\n"),
           "after OK, the request in origin form, without Proxy-* headers");
        send_frame(SPACE_F_DATA, 0, s, "HTTP/1.1 204 No Content\r\n\r\n", 27);
        send_frame(SPACE_F_EOF, 0, s, NULL, 0);
        ok(recv_some(c, buf, sizeof buf, sizeof buf) == 27 && strstr(buf, "204"), "the answer reaches the client");
        close(c);
        ok(next(&f) && f.h.type == SPACE_F_EOF && f.h.stream == s && f.h.fd == 1, "its close: EOF fd 1");

        c = connect_tcp(proxy);
        dprintf(c, "GET /not-absolute HTTP/1.1\r\nHost: x\r\n\r\n");
        recv_some(c, buf, sizeof buf, sizeof buf);
        ok(strncmp(buf, "HTTP/1.1 400 ", 13) == 0, "origin form to the proxy: 400, and no CONNECT");
        close(c);
}

static size_t dns_query(char *out, uint16_t id, const char *name, uint16_t qtype) {
        size_t n = 12;

        memset(out, 0, 12);
        out[0] = (char) (id >> 8), out[1] = (char) id, out[2] = 1, out[5] = 1;
        for (const char *p = name; *p;) {
                size_t l = strcspn(p, ".");
                out[n++] = (char) l;
                memcpy(out + n, p, l);
                n += l;
                p += l + (p[l] == '.');
        }
        out[n++] = 0;
        out[n++] = 0, out[n++] = (char) qtype, out[n++] = 0, out[n++] = 1;
        return n;
}

static void test_dns(uint16_t port) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        struct timeval tv = { .tv_sec = 5 };
        unsigned char ans[600];
        char q[300];
        ssize_t n;
        size_t ql;
        Frame f;
        int u;

        u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        (void) setsockopt(u, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (connect(u, (struct sockaddr *) &a, sizeof a) < 0)
                abort();

        ql = dns_query(q, 0x4242, "WWW.Example.com", 1);
        ok(send(u, q, ql, 0) == (ssize_t) ql && next(&f) && f.h.type == SPACE_F_RESOLVE &&
                   (f.h.stream & SPACE_STREAM_GUEST_BIT) && streq(kv(&f, "name"), "www.example.com") &&
                   streq(kv(&f, "family"), "4"),
           "an A question: RESOLVE name=www.example.com family=4");
        {
                SpaceBuf b = {};
                (void) space_kv_add(&b, "addr", "192.0.2.7");
                (void) space_kv_add(&b, "addr", "2001:db8::1");
                (void) space_kv_add(&b, "addr", "198.51.100.9");
                (void) space_kv_add(&b, "ttl", "42");
                send_frame(SPACE_F_OK, 0, f.h.stream, b.data, b.len);
                space_buf_done(&b);
        }
        n = recv(u, ans, sizeof ans, 0);
        ok(n == (ssize_t) ql + 32 && ans[0] == 0x42 && ans[1] == 0x42 && (ans[3] & 0xf) == 0 && ans[7] == 2 &&
                   ans[ql + 9] == 42 && memcmp(ans + ql + 12, "\xc0\x00\x02\x07", 4) == 0 &&
                   memcmp(ans + 12, q + 12, ql - 12) == 0,
           "OK: two A records (the AAAA left out), ttl 42, the question echoed as sent");

        ql = dns_query(q, 7, "nope.example", 28);
        ok(send(u, q, ql, 0) == (ssize_t) ql && next(&f) && f.h.type == SPACE_F_RESOLVE &&
                   streq(kv(&f, "family"), "6"),
           "an AAAA question: family=6");
        send_kv(SPACE_F_ERROR, f.h.stream, "code", "nxdomain", "message", "no such name");
        n = recv(u, ans, sizeof ans, 0);
        ok(n == (ssize_t) ql && (ans[3] & 0xf) == 3 && ans[7] == 0, "ERROR code=nxdomain: NXDOMAIN");

        ql = dns_query(q, 8, "bad.example", 1);
        send(u, q, ql, 0);
        ok(next(&f) && f.h.type == SPACE_F_RESOLVE, "RESOLVE");
        send_kv(SPACE_F_ERROR, f.h.stream, "code", "invalid", "message", "?");
        n = recv(u, ans, sizeof ans, 0);
        ok(n == (ssize_t) ql && (ans[3] & 0xf) == 2, "ERROR code=invalid: SERVFAIL");

        ql = dns_query(q, 9, "example.com", 15);
        send(u, q, ql, 0);
        n = recv(u, ans, sizeof ans, 0);
        ok(n == (ssize_t) ql && (ans[3] & 0xf) == 0 && ans[7] == 0, "MX: an empty NOERROR at once, no RESOLVE");

        ql = dns_query(q, 10, "localhost", 1);
        send(u, q, ql, 0);
        n = recv(u, ans, sizeof ans, 0);
        ok(n == (ssize_t) ql + 16 && memcmp(ans + ql + 12, "\x7f\0\0\x01", 4) == 0, "localhost: 127.0.0.1, locally");

        q[2] = (char) 0x80; /* a response: dropped */
        send(u, q, ql, 0);
        ql = dns_query(q, 11, "a", 1);
        q[5] = 2; /* two questions: FORMERR */
        send(u, q, ql, 0);
        n = recv(u, ans, sizeof ans, 0);
        ok(n == 12 && ans[1] == 11 && (ans[3] & 0xf) == 1, "a response is dropped, two questions are FORMERR");
        close(u);
}

static void test_exec_env(const char *proxy_url) {
        char want[128], out[8192] = "";
        size_t len = 0;
        Frame f;

        for (int round = 0; round < 2; round++) {
                SpaceBuf b = {};
                out[0] = '\n'; /* so that every variable starts after a newline */
                len = 1;
                (void) space_kv_add(&b, "argv", "/usr/bin/env");
                if (round == 1)
                        (void) space_kv_add(&b, "env", "https_proxy=http://mine:1");
                send_frame(SPACE_F_EXEC, 0, 30 + round, b.data, b.len);
                space_buf_done(&b);
                while (next(&f) && f.h.type != SPACE_F_EXIT)
                        if (f.h.type == SPACE_F_DATA && f.h.fd == 1 && len + f.h.length < sizeof out) {
                                memcpy(out + len, f.p, f.h.length);
                                len += f.h.length;
                        }
                out[len] = 0;
                if (round == 0) {
                        snprintf(want, sizeof want, "\nhttps_proxy=http://%s\n", proxy_url);
                        ok(strstr(out, want) && strstr(out, "\nNO_PROXY=localhost,127.0.0.1,::1\n") &&
                                   strstr(out, "\nHTTP_PROXY="),
                           "EXEC'd processes get the proxy variables");
                } else
                        ok(strstr(out, "\nhttps_proxy=http://mine:1\n") && !strstr(out, want),
                           "an EXEC's own env wins");
        }
}

/* PING "freeze" outside a VM: no cgroup of ours, so ERROR, and the workload runs on; any other PING is echoed. */
static void test_freeze(void) {
        Frame f;
        bool got;

        send_frame(SPACE_F_PING, 0, 40, "freeze", 6);
        got = next(&f);
        ok(got && f.h.type == SPACE_F_ERROR && f.h.stream == 40 && atoi(kv(&f, "errno")) == EOPNOTSUPP,
           "PING \"freeze\" without the workload's cgroup is ERROR(EOPNOTSUPP): %s", got ? kv(&f, "message") : "");
        send_frame(SPACE_F_PING, 0, 41, "frozen", 6);
        ok(next(&f) && f.h.type == SPACE_F_PONG && f.h.stream == 41 && f.h.length == 6 && memcmp(f.p, "frozen", 6) == 0,
           "any other PING is echoed");
}

#define PEM(b64) "-----BEGIN CERTIFICATE-----\n" b64 "\n-----END CERTIFICATE-----\n"
#define SYSTEM_CA PEM("c3lzdGVt")

static char ca_root[128];   /* $SPACE_AGENT_CA_ROOT: the guest's / for ca.c outside a VM */

static char *slurp(const char *rel) {
        char path[256], *buf = calloc(1, 65536);
        FILE *f;

        snprintf(path, sizeof path, "%s%s", ca_root, rel);
        if (!buf || !(f = fopen(path, "re"))) {
                free(buf);
                return NULL;
        }
        (void) fread(buf, 1, 65535, f);
        fclose(f);
        return buf;
}

/* The env of `env` run by EXEC on stream, into out. */
static void exec_env(uint32_t stream, char *out, size_t size) {
        SpaceBuf b = {};
        size_t len = 1;
        Frame f;

        out[0] = '\n';
        (void) space_kv_add(&b, "argv", "/usr/bin/env");
        send_frame(SPACE_F_EXEC, 0, stream, b.data, b.len);
        space_buf_done(&b);
        while (next(&f) && f.h.type != SPACE_F_EXIT)
                if (f.h.type == SPACE_F_DATA && f.h.fd == 1 && len + f.h.length < size) {
                        memcpy(out + len, f.p, f.h.length);
                        len += f.h.length;
                }
        out[len] = 0;
}

/* INIT ca=: the CA alone in /etc/space/ca.pem and beside the system's CAs in their bundle, the variables in what
 * EXEC starts (INIT's env wins), a new CA in place of the old, anything but one certificate refused. */
static void test_ca(void) {
        char out[8192];
        _cleanup_free_ char *file = NULL, *bundle = NULL, *local = NULL;
        Frame f;

        exec_env(50, out, sizeof out);
        ok(!strstr(out, "\nSSL_CERT_FILE="), "before any INIT ca=, no SSL_CERT_FILE");
        send_kv(SPACE_F_INIT, 51, "ca", PEM("b25l"), NULL, NULL);
        ok(next(&f) && f.h.type == SPACE_F_OK && f.h.stream == 51, "INIT ca=PEM: OK");
        file = slurp("/etc/space/ca.pem");
        bundle = slurp("/etc/ssl/certs/ca-certificates.crt");
        local = slurp("/usr/local/share/ca-certificates/space-local-ca.crt");
        ok(file && streq(file, PEM("b25l")), "the CA alone in /etc/space/ca.pem");
        ok(bundle && streq(bundle, SYSTEM_CA PEM("b25l")), "the system bundle keeps its CAs and ends with ours");
        ok(local && streq(local, PEM("b25l")), "... and update-ca-certificates's directory has it");
        exec_env(52, out, sizeof out);
        ok(strstr(out, "\nSSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt\n") &&
                   strstr(out, "\nREQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt\n") &&
                   strstr(out, "\nNODE_EXTRA_CA_CERTS=/etc/space/ca.pem\n"),
           "EXEC'd processes get SSL_CERT_FILE, REQUESTS_CA_BUNDLE and NODE_EXTRA_CA_CERTS");

        send_kv(SPACE_F_INIT, 53, "ca", PEM("dHdv"), "env", "SSL_CERT_FILE=/x");
        ok(next(&f) && f.h.type == SPACE_F_OK, "INIT with another CA: OK");
        file = mfree(file);
        bundle = mfree(bundle);
        file = slurp("/etc/space/ca.pem");
        bundle = slurp("/etc/ssl/certs/ca-certificates.crt");
        ok(file && streq(file, PEM("dHdv")) && bundle && streq(bundle, SYSTEM_CA PEM("dHdv")),
           "the new CA replaces the old one in both files");
        exec_env(54, out, sizeof out);
        ok(strstr(out, "\nSSL_CERT_FILE=/x\n") && strstr(out, "\nNODE_EXTRA_CA_CERTS=/etc/space/ca.pem\n"),
           "INIT's own SSL_CERT_FILE wins over ours");

        send_kv(SPACE_F_INIT, 55, "ca", PEM("dHdv") "-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----\n",
                NULL, NULL);
        ok(next(&f) && f.h.type == SPACE_F_ERROR && atoi(kv(&f, "errno")) == EINVAL, "a PEM with a key: ERROR");
        send_kv(SPACE_F_INIT, 56, "ca", "not a certificate", NULL, NULL);
        ok(next(&f) && f.h.type == SPACE_F_ERROR, "... and anything but a certificate");
        bundle = mfree(bundle);
        bundle = slurp("/etc/ssl/certs/ca-certificates.crt");
        ok(bundle && streq(bundle, SYSTEM_CA PEM("dHdv")), "... which change nothing");
}

int main(void) {
        char proxy_spec[64], dns_spec[64], tr_spec[64], log_dir[] = "/tmp/test-agent-net-XXXXXX";
        uint16_t proxy, dns;
        int sv[2];
        pid_t pid;
        Frame f;

        if (access(AGENT_BINARY, X_OK) < 0) {
                printf("1..0 # SKIP no %s\n", AGENT_BINARY);
                return 0;
        }
        if (!mkdtemp(log_dir))
                abort();
        snprintf(refused_log, sizeof refused_log, "%s/egress-refused.log", log_dir);
        snprintf(ca_root, sizeof ca_root, "%s/root", log_dir);
        {
                char cmd[512];
                FILE *sys;

                snprintf(cmd, sizeof cmd, "mkdir -p %s/etc/ssl/certs %s/usr/local/share/ca-certificates", ca_root, ca_root);
                if (system(cmd) != 0)
                        abort();
                snprintf(cmd, sizeof cmd, "%s/etc/ssl/certs/ca-certificates.crt", ca_root);
                if (!(sys = fopen(cmd, "we")) || fputs(SYSTEM_CA, sys) < 0 || fclose(sys) != 0)
                        abort();
        }
        proxy = free_port(SOCK_STREAM);
        dns = free_port(SOCK_DGRAM);
        snprintf(proxy_spec, sizeof proxy_spec, "127.0.0.1:%u", proxy);
        snprintf(dns_spec, sizeof dns_spec, "127.0.0.1:%u", dns);
        snprintf(tr_spec, sizeof tr_spec, "127.0.0.1:%u", free_port(SOCK_STREAM));
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                abort();
        pid = fork();
        if (pid == 0) {
                dup2(sv[1], 3);
                setenv("SPACE_AGENT_PORT", "fd:3", 1);
                setenv("SPACE_AGENT_PROXY_LISTEN", proxy_spec, 1);
                setenv("SPACE_AGENT_DNS_LISTEN", dns_spec, 1);
                setenv("SPACE_AGENT_TRANSPARENT_LISTEN", tr_spec, 1);
                setenv("SPACE_AGENT_REFUSED_LOG", refused_log, 1);
                setenv("SPACE_AGENT_CA_ROOT", ca_root, 1);
                execl(AGENT_BINARY, "space-agent", NULL);
                _exit(127);
        }
        close(sv[1]);
        chan = sv[0];

        ok(next(&f) && f.h.type == SPACE_F_HELLO && atoi(kv(&f, "version")) == SPACE_PROTO_VERSION, "HELLO version=%d",
           SPACE_PROTO_VERSION);
        test_port();
        test_proxy(proxy);
        test_dns(dns);
        test_exec_env(proxy_spec);
        test_freeze();
        test_ca();

        kill(pid, SIGTERM);
        (void) waitpid(pid, NULL, 0);
        {
                char cmd[256];
                snprintf(cmd, sizeof cmd, "rm -rf %s", log_dir);
                (void) system(cmd);
        }
        return done();
}
