/* SPDX-License-Identifier: Apache-2.0 */
/* What the egress gateway reads from a connection's first bytes (spaced/egress/sniff.c): the SNI of a TLS
 * ClientHello and the Host of an HTTP request, against the forms a hostile guest would send; and how it frames
 * the requests that follow on a plain HTTP connection (spaced/egress/http-stream.c). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress-internal.h"
#include "macro.h"
#include "tap.h"

static size_t put16(uint8_t *p, size_t v) {
        p[0] = (uint8_t) (v >> 8);
        p[1] = (uint8_t) v;
        return 2;
}

/* A ClientHello in one record: n_sni server_name extensions naming sni (none when NULL), after an unrelated
 * extension. extra_len is added to the server_name list's length (a lie when not 0). */
static size_t hello(uint8_t *out, const char *sni, int n_sni, int extra_len) {
        uint8_t body[4096], ext[2048];
        size_t b = 0, e = 0, o = 0, hs;

        /* an unrelated extension first: supported_versions */
        e += put16(ext + e, 43);
        e += put16(ext + e, 3);
        ext[e++] = 2, ext[e++] = 3, ext[e++] = 4;
        for (int i = 0; sni && i < n_sni; i++) {
                size_t l = strlen(sni);
                e += put16(ext + e, 0);
                e += put16(ext + e, l + 5);
                e += put16(ext + e, l + 3 + (size_t) extra_len);
                ext[e++] = 0;
                e += put16(ext + e, l);
                memcpy(ext + e, sni, l);
                e += l;
        }
        body[b++] = 3, body[b++] = 3;               /* legacy_version */
        memset(body + b, 0x11, 32), b += 32;         /* random */
        body[b++] = 0;                               /* session id */
        b += put16(body + b, 2);                     /* cipher suites */
        body[b++] = 0x13, body[b++] = 0x01;
        body[b++] = 1, body[b++] = 0;                /* compression */
        b += put16(body + b, e);
        memcpy(body + b, ext, e), b += e;

        hs = b + 4;
        out[o++] = 22, out[o++] = 3, out[o++] = 1;
        o += put16(out + o, hs);
        out[o++] = 1;
        out[o++] = (uint8_t) (b >> 16), out[o++] = (uint8_t) (b >> 8), out[o++] = (uint8_t) b;
        memcpy(out + o, body, b);
        return o + b;
}

static EgressSniff sniff(const void *p, size_t n, bool eof) {
        EgressSniff s;

        egress_sniff(p, n, eof, &s);
        return s;
}

static EgressSniff sniff_str(const char *s, bool eof) {
        return sniff(s, strlen(s), eof);
}


/* Heads that lenient servers read differently from a strict reader: each would let a Host past it. */
static void test_strict_heads(void) {
        static const struct {
                const char *head, *what;
        } refused[] = {
                { "GET / HTTP/1.1\r\nX: a\nHost: other.test\r\n\r\n", "a bare LF inside a header line" },
                { "GET / HTTP/1.1\r\nX: a\rHost: other.test\r\n\r\n", "a bare CR inside a header line" },
                { "GET / HTTP/1.1\r\nHost : other.test\r\n\r\n", "a blank before the colon ('Host :')" },
                { "GET / HTTP/1.1\r\nHost: a.test\r\nno colon here\r\n\r\n", "a header line without a colon" },
                { "GET / HTTP/1.1\r\nHost:\x0b" "other.test\r\n\r\n", "a control byte (VT) in a value" },
                { "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
                  "Content-Length and Transfer-Encoding both" },
                { "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
                  "two Content-Length headers" },
                { "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5, 5\r\n\r\n", "a Content-Length list" },
                { "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: +5\r\n\r\n", "a signed Content-Length" },
                { "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: gzip\r\n\r\n",
                  "a Transfer-Encoding that does not end in chunked" },
                { "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
                  "two Transfer-Encoding headers" },
                { "POST / HTTP/1.0\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n",
                  "Transfer-Encoding in HTTP/1.0" },
                { "\r\nGET / HTTP/1.1\r\nHost: other.test\r\n\r\n", "a request after an empty line" },
        };
        EgressSniff s;

        for (size_t i = 0; i < ELEMENTSOF(refused); i++)
                ok(sniff_str(refused[i].head, false).kind == EGRESS_SNIFF_BAD, "refused: %s", refused[i].what);
        ok(sniff("\r\x00\x00\x01\x85", 5, false).kind == EGRESS_SNIFF_OTHER,
           "a binary protocol whose first byte is CR (a length): another protocol");

        s = sniff_str("POST /x HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0012\r\n\r\nbody", false);
        ok(s.kind == EGRESS_SNIFF_HTTP && s.length == 12 && !s.chunked && s.head_len == 56,
           "Content-Length 0012: a body of 12 after a head of 56 bytes (%zu)", s.head_len);
        s = sniff_str("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, Chunked\r\nHost: a.test\r\n\r\n", false);
        ok(s.kind == EGRESS_SNIFF_HTTP && s.chunked, "Transfer-Encoding ending in chunked: a chunked body");
        s = sniff_str("GET /ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\n\r\n",
                      false);
        ok(s.kind == EGRESS_SNIFF_HTTP && s.upgrade, "a websocket upgrade is seen");
        s = sniff_str("GET / HTTP/1.1\r\nHost: a.test\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n", false);
        ok(s.kind == EGRESS_SNIFF_HTTP && !s.upgrade, "... an h2c one is not (it stays framed as HTTP)");
}

/* Feeds p to a stream chunk bytes at a time, as the gateway would (the unused bytes stay, more come), and
 * writes what it said: "H:name/len" for heads, "B:n" for body bytes (added up), "W" for a wait, "X:why". */
static void stream_run(const char *p, size_t n, size_t chunk, bool switched, char *out, size_t size) {
        EgressHttpStream st = {};
        size_t have = 0, off = 0, body = 0, o = 0;

        out[0] = 0;
        for (;;) {
                bool eof = have == n;
                EgressSniff h;
                const char *why;
                size_t used;
                EgressHttpStep r = egress_http_stream_step(&st, (const uint8_t *) p + off, have - off, eof, &used, &h,
                                                           &why);

                if (r != EGRESS_HTTP_BODY && r != EGRESS_HTTP_MORE && body > 0) {
                        o += (size_t) snprintf(out + o, size - o, "B:%zu ", body);
                        body = 0;
                }
                if (r == EGRESS_HTTP_HEAD)
                        o += (size_t) snprintf(out + o, size - o, "H:%s/%zu ", h.has_name ? h.name : "-", used);
                else if (r == EGRESS_HTTP_BODY)
                        body += used;
                else if (r == EGRESS_HTTP_BAD) {
                        (void) snprintf(out + o, size - o, "X:%s", why);
                        return;
                } else if (r == EGRESS_HTTP_WAIT) {
                        o += (size_t) snprintf(out + o, size - o, "W ");
                        egress_http_stream_switched(&st, switched);
                        continue;
                } else if (eof) {
                        if (body > 0)
                                o += (size_t) snprintf(out + o, size - o, "B:%zu ", body);
                        break;
                }
                else {
                        have = MIN(n, have + chunk);
                        continue;
                }
                off += used;
        }
        if (o > 0)
                out[o - 1] = 0;
}

/* What stream_run says for s, the same whole and a byte at a time. */
static const char *stream_says(const char *s, bool switched) {
        static char whole[1024];
        char bytewise[1024];

        stream_run(s, strlen(s), strlen(s), switched, whole, sizeof whole);
        stream_run(s, strlen(s), 1, switched, bytewise, sizeof bytewise);
        if (strcmp(whole, bytewise) != 0) {
                diag("whole: %s", whole);
                diag("a byte at a time: %s", bytewise);
                return "(differs when fed a byte at a time)";
        }
        return whole;
}

static void is_said(const char *s, bool switched, const char *want, const char *what) {
        const char *got = stream_says(s, switched);

        ok(strcmp(got, want) == 0, "%s: %s", what, got);
}

static void test_stream(void) {
        unsigned status = 0;

        is_said("GET / HTTP/1.1\r\nHost: a.test\r\n\r\nGET /2 HTTP/1.1\r\nHost: b.test\r\n\r\n", false,
                "H:a.test/32 H:b.test/33", "two requests in one packet: two heads, each with its Host");
        is_said("POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 32\r\n\r\nGET / HTTP/1.1\r\nHost: b.test\r\n\r\n"
                "GET / HTTP/1.1\r\nHost: c.test\r\n\r\n", false, "H:a.test/53 B:32 H:c.test/32",
                "a body that looks like a request is the first one's body, and the next head follows it");
        is_said("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5;n=v\r\nhello\r\n"
                "a\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nGET / HTTP/1.1\r\nHost: b.test\r\n\r\n", false,
                "H:a.test/61 B:42 H:b.test/32", "a chunked body with an extension and a trailer, then the next request");
        is_said("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n",
                false, "H:a.test/61 X:a chunk size that is not hex digits", "a blank after a chunk size: refused");
        is_said("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
                false, "H:a.test/61 X:a chunk size that is not hex digits", "a 0x chunk size: refused");
        is_said("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
                false, "H:a.test/61 X:a bare LF in a chunked body's framing", "a chunk size line ending in LF: refused");
        is_said("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
                false, "H:a.test/61 B:8 X:a chunk not followed by CRLF", "a chunk longer than it said: refused");
        is_said("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n", false,
                "H:a.test/61 X:a chunk size that is not hex digits", "a chunk size past 60 bits: refused");
        is_said("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n\x16\x03\x01\x00\x10", false,
                "H:a.test/32 X:a ClientHello cut short",
                "TLS bytes where the next request must start: refused");
        is_said("GET / HTTP/1.1\r\nHost: a.test\r\n\r\nGET / HTTP/1.1\r\nHost: b.test\r\nX: y\nHost: c.test\r\n\r\n",
                false, "H:a.test/32 X:an HTTP request head with a bare LF", "a second head with a bare LF: refused");
        is_said("GET / HTTP/1.1\r\nHost: a.test\r\n\r\nGET / HTTP/1.1\r\nHost: b.te", false,
                "H:a.test/32 X:an HTTP request head cut short", "a second head cut short by the end: refused");
        is_said("GET /ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x85" "abcdefghi",
                true, "H:a.test/75 W B:11", "a websocket upgrade the server took: what follows goes as it is");
        is_said("GET /ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
                "GET / HTTP/1.1\r\nHost: b.test\r\n\r\n", false, "H:a.test/75 W H:b.test/32",
                "an upgrade the server refused: what follows is requests again");
        is_said("GET / HTTP/1.1\r\nHost: a.test\r\n\r\nGET /ws HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\n\r\n\x81\x85", true,
                "H:a.test/32 H:a.test/75 X:bytes that are no HTTP request where a request must start",
                "an upgrade on a later request is not waited for (its answer cannot be told apart)");

        ok(egress_http_status((const uint8_t *) "HTTP/1.1 101 Switching Protocols\r\n", 34, &status) == 1 &&
           status == 101, "a status line: 101");
        ok(egress_http_status((const uint8_t *) "HTTP/1.1 200\r\n", 14, &status) == 1 && status == 200,
           "a status line without a reason: 200");
        ok(egress_http_status((const uint8_t *) "HTTP/1.", 7, &status) == 0, "half a status line: more");
        ok(egress_http_status((const uint8_t *) "SSH-2.0", 7, &status) == -EBADMSG, "no status line: refused");

        EgressHttpFirstAnswer a = {};
        bool switched = false;
        ok(egress_http_first_answer(&a, (const uint8_t *) "HTTP/1.1 1", 10, &switched) == 0 &&
                   egress_http_first_answer(&a, (const uint8_t *) "01 Switching Protocols\r\n", 24, &switched) == 1 &&
                   switched, "a first answer in two pieces: 101, switched");
        a = (EgressHttpFirstAnswer) {};
        switched = true;
        ok(egress_http_first_answer(&a, (const uint8_t *) "HTTP/1.1 200 OK\r\n", 17, &switched) == 1 && !switched,
           "a first answer of 200: not switched");
        a = (EgressHttpFirstAnswer) {};
        switched = true;
        ok(egress_http_first_answer(&a, (const uint8_t *) "SSH", 3, &switched) == 1 && !switched,
           "bytes that are no status line: not switched");
}

int main(void) {
        uint8_t buf[8192];
        EgressSniff s;
        size_t n;
        bool all_more = true;
        char *big;

        plan(0);

        n = hello(buf, "allowed.test", 1, 0);
        s = sniff(buf, n, false);
        ok(s.kind == EGRESS_SNIFF_TLS && s.has_name && strcmp(s.name, "allowed.test") == 0, "a ClientHello's SNI");
        for (size_t i = 1; i < n; i++)
                all_more = all_more && sniff(buf, i, false).kind == EGRESS_SNIFF_MORE;
        ok(all_more, "every shorter prefix asks for more bytes");
        ok(sniff(buf, n - 1, true).kind == EGRESS_SNIFF_BAD, "... and is refused when the client stops there");
        s = sniff(buf, n, true);
        ok(s.kind == EGRESS_SNIFF_TLS && s.has_name, "bytes after the record do not matter (eof)");

        n = hello(buf, "ALLOWED.Test.", 1, 0);
        s = sniff(buf, n, false);
        ok(s.has_name && strcmp(s.name, "allowed.test") == 0, "an SNI is compared normalized: ALLOWED.Test. is allowed.test");
        n = hello(buf, NULL, 0, 0);
        s = sniff(buf, n, false);
        ok(s.kind == EGRESS_SNIFF_TLS && !s.has_name, "a ClientHello without SNI: TLS, no name");
        n = hello(buf, "a.test", 2, 0);
        ok(sniff(buf, n, false).kind == EGRESS_SNIFF_BAD, "two server_name extensions: refused");
        n = hello(buf, "a.test", 1, 7);
        ok(sniff(buf, n, false).kind == EGRESS_SNIFF_BAD, "a server_name list longer than its extension: refused");
        n = hello(buf, "127.0.0.1", 1, 0);
        ok(sniff(buf, n, false).kind == EGRESS_SNIFF_BAD, "an SNI that is an IP literal: refused");
        n = hello(buf, "*.test", 1, 0);
        ok(sniff(buf, n, false).kind == EGRESS_SNIFF_BAD, "a wildcard SNI: refused");
        n = hello(buf, "x.test", 1, 0);
        buf[n - 3] = 0; /* "x.t\0st" */
        ok(sniff(buf, n, false).kind == EGRESS_SNIFF_BAD, "an SNI with a NUL byte: refused");
        n = hello(buf, "allowed.test", 1, 0);
        buf[8] ^= 0x01; /* handshake length no longer fills the record: a split ClientHello */
        ok(sniff(buf, n, false).kind == EGRESS_SNIFF_BAD, "a ClientHello not exactly one record: refused");
        n = hello(buf, "allowed.test", 1, 0);
        buf[5] = 2; /* a ServerHello */
        ok(sniff(buf, n, false).kind == EGRESS_SNIFF_BAD, "a handshake that is not a ClientHello: refused");
        buf[0] = 22, buf[1] = 3, buf[2] = 1, buf[3] = 0xff, buf[4] = 0xff;
        ok(sniff(buf, 5, false).kind == EGRESS_SNIFF_BAD, "a record length over 16 KiB: refused at once");
        buf[0] = '\r', buf[1] = '\n';
        n = 2 + hello(buf + 2, "allowed.test", 1, 0);
        s = sniff(buf, n, false);
        ok(s.kind == EGRESS_SNIFF_OTHER && !s.has_name && !s.name[0],
           "a ClientHello after an empty line: another protocol, and it names no host (found by fuzz-sniff)");

        s = sniff_str("GET / HTTP/1.1\r\nHost: allowed.test:8080\r\nAccept: */*\r\n\r\n", false);
        ok(s.kind == EGRESS_SNIFF_HTTP && s.has_name && strcmp(s.name, "allowed.test") == 0, "an HTTP Host, port dropped");
        s = sniff_str("GET / HTTP/1.1\r\nhOsT:   allowed.test  \r\n\r\n", false);
        ok(s.has_name && strcmp(s.name, "allowed.test") == 0, "a Host header in any case, with blanks");
        s = sniff_str("GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", false);
        ok(s.kind == EGRESS_SNIFF_HTTP && s.has_literal && s.literal.family == AF_INET6, "an IPv6 literal Host");
        s = sniff_str("GET / HTTP/1.1\r\nHost: 0x7f.1\r\n\r\n", false);
        ok(s.has_literal && s.literal.family == AF_INET && s.literal.a[0] == 127 && s.literal.a[3] == 1,
           "a Host in hex IPv4 is read as the address it means");
        ok(sniff_str("GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", false).kind == EGRESS_SNIFF_BAD,
           "two Host headers: refused");
        ok(sniff_str("GET http://other.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", false).kind == EGRESS_SNIFF_BAD,
           "an absolute-form target (a host of its own): refused");
        ok(sniff_str("GET / HTTP/1.1\r\nX: a\r\n b\r\nHost: a.test\r\n\r\n", false).kind == EGRESS_SNIFF_BAD,
           "a folded header: refused");
        ok(sniff_str("GET / HTTP/1.1\r\nHost: *.test\r\n\r\n", false).kind == EGRESS_SNIFF_BAD, "a wildcard Host: refused");
        ok(sniff_str("GET / HTTP/1.1\r\nHost: a.test:80x\r\n\r\n", false).kind == EGRESS_SNIFF_BAD, "a Host with a bad port: refused");
        s = sniff_str("GET / HTTP/1.0\r\n\r\n", false);
        ok(s.kind == EGRESS_SNIFF_HTTP && !s.has_name && !s.has_literal, "HTTP/1.0 without Host: no name");
        ok(sniff_str("GET / HTTP/1.1\r\nHost: a.te", false).kind == EGRESS_SNIFF_MORE, "a head cut short: more");
        ok(sniff_str("GET / HTTP/1.1\r\nHost: a.te", true).kind == EGRESS_SNIFF_BAD, "... refused at eof");
        ok(sniff_str("GET", false).kind == EGRESS_SNIFF_MORE, "a method without its space: more");
        big = malloc(20000);
        memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
        memset(big + 19, 'a', 20000 - 19);
        ok(sniff(big, 20000, false).kind == EGRESS_SNIFF_BAD, "a request head over 16 KiB: refused");
        free(big);
        ok(sniff("GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n", 29, false).kind == EGRESS_SNIFF_BAD, "a NUL in the head: refused");

        ok(sniff_str("SSH-2.0-OpenSSH_9.2\r\n", false).kind == EGRESS_SNIFF_OTHER, "SSH: another protocol");
        ok(sniff_str("PING x\r\n", false).kind == EGRESS_SNIFF_OTHER, "a line protocol's 'PING x': another protocol");
        ok(sniff_str("EHLO me\r\n\x01\x02", false).kind == EGRESS_SNIFF_OTHER, "SMTP's EHLO: another protocol");
        ok(sniff_str("GET key\r\n", false).kind == EGRESS_SNIFF_OTHER, "Redis' 'GET key': another protocol");
        ok(sniff_str("SET k v", false).kind == EGRESS_SNIFF_MORE, "an upper-case word and a space, no line yet: more");
        ok(sniff_str("SET k v", true).kind == EGRESS_SNIFF_OTHER, "... another protocol at eof");
        ok(sniff_str("GET / HTTP/1.1\nHost: other.test\n\n", false).kind == EGRESS_SNIFF_BAD,
           "a request line ending in a bare LF (a lenient server would read its Host): refused");
        ok(sniff("\x00\x01\x02", 3, false).kind == EGRESS_SNIFF_OTHER, "binary: another protocol");
        ok(sniff("", 0, true).kind == EGRESS_SNIFF_OTHER, "nothing, then eof: no name");
        ok(sniff("", 0, false).kind == EGRESS_SNIFF_MORE, "nothing yet: more");
        ok(sniff("\x16\x02", 2, false).kind == EGRESS_SNIFF_OTHER, "a record of TLS major version 2: another protocol");
        test_strict_heads();
        test_stream();
        return done();
}
