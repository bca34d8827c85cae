/* SPDX-License-Identifier: Apache-2.0 */

/* Unit tests for lib/proxy-request.c, the heads a program sends the guest's HTTP proxy: CONNECT and absolute
 * URIs, the origin-form rewrite, and hostile heads that must name no destination (userinfo, folding, bare
 * CR, odd hosts and ports). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/macro.h"
#include "../../lib/proxy-request.h"
#include "tap.h"

static int parse(const char *head, ProxyRequest *r) {
        size_t n = strlen(head), hl = proxy_head_length(head, n);

        if (hl == 0)
                return -EAGAIN;
        return proxy_request_parse(head, hl, r);
}

static char *rewrite(const char *head) {
        SpaceBuf b = {};
        ProxyRequest r;
        char *s;

        if (parse(head, &r) < 0 || proxy_request_rewrite(head, &r, &b) < 0) {
                space_buf_done(&b);
                return NULL;
        }
        s = strndup((const char *) b.data, b.len);
        space_buf_done(&b);
        return s;
}

static void test_head_length(void) {
        ok(proxy_head_length("GET / HTTP/1.1\r\n", 16) == 0, "no empty line yet: 0");
        ok(proxy_head_length("GET / HTTP/1.1\r\n\r\nbody", 22) == 18, "CRLF CRLF ends it");
        ok(proxy_head_length("GET / HTTP/1.1\n\nx", 17) == 16, "LF LF ends it");
        ok(proxy_head_length("GET / HTTP/1.1\r\nA: b\n\r\n", 23) == 23, "mixed line ends");
        ok(proxy_head_length("", 0) == 0, "empty");
}

static void test_connect(void) {
        ProxyRequest r;

        ok(parse("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", &r) == 0 && r.connect &&
                   streq(r.host, "example.com") && r.port == 443 && !r.host_ipv6,
           "CONNECT host:port");
        ok(parse("CONNECT Example.COM:8443 HTTP/1.0\r\n\r\n", &r) == 0 && streq(r.host, "example.com") &&
                   r.port == 8443,
           "host lowercased, HTTP/1.0, no headers");
        ok(parse("CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n", &r) == 0 && r.host_ipv6 &&
                   streq(r.host, "2001:db8::1") && r.port == 443,
           "an IPv6 literal comes without brackets");
        ok(parse("CONNECT 10.0.0.1:22 HTTP/1.1\r\n\r\n", &r) == 0 && streq(r.host, "10.0.0.1") && r.port == 22,
           "an IPv4 literal");
        ok(parse("CONNECT example.com HTTP/1.1\r\n\r\n", &r) == -EINVAL, "CONNECT without a port");
        ok(parse("CONNECT example.com:0 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "port 0");
        ok(parse("CONNECT example.com:65536 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "port 65536");
        ok(parse("CONNECT example.com:+443 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "port +443");
        ok(parse("CONNECT example.com:443x HTTP/1.1\r\n\r\n", &r) == -EINVAL, "port 443x");
        ok(parse("CONNECT example.com:000443 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "port with six digits");
        ok(parse("CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "a zone id");
        ok(parse("CONNECT [::1:443 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "an unclosed bracket");
        ok(parse("CONNECT [example.com]:443 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "a name in brackets");
        ok(parse("CONNECT [::1]x:443 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "junk after the bracket");
        ok(parse("CONNECT a..b:443 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "an empty label");
        ok(parse("CONNECT .a:443 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "a leading dot");
        ok(parse("CONNECT a/b:443 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "a slash in the host");
        ok(parse("CONNECT a%2eb:443 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "percent-encoding in the host");
        ok(parse("CONNECT :443 HTTP/1.1\r\n\r\n", &r) == -EINVAL, "no host");
        ok(parse("connect example.com:443 HTTP/1.1\r\n\r\n", &r) == -EINVAL,
           "lowercase connect is another method, and then it needs an absolute URI");
}

static void test_absolute(void) {
        ProxyRequest r;
        char *s;

        ok(parse("GET http://example.com/a/b?c=d HTTP/1.1\r\nHost: example.com\r\n\r\n", &r) == 0 && !r.connect &&
                   streq(r.method, "GET") && streq(r.host, "example.com") && r.port == 80,
           "GET with an absolute URI, port 80 by default");
        ok(parse("POST HTTP://Example.com:8080 HTTP/1.1\r\n\r\n", &r) == 0 && streq(r.host, "example.com") &&
                   r.port == 8080 && r.path_len == 0,
           "the scheme is case-insensitive, no path");
        ok(parse("GET https://example.com/ HTTP/1.1\r\n\r\n", &r) == -EPROTONOSUPPORT, "https:// is not ours");
        ok(parse("GET ftp://example.com/ HTTP/1.1\r\n\r\n", &r) == -EPROTONOSUPPORT, "nor ftp://");
        ok(parse("GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n", &r) == -EINVAL,
           "origin form: the proxy is not a web server");
        ok(parse("OPTIONS * HTTP/1.1\r\n\r\n", &r) == -EINVAL, "asterisk form");
        ok(parse("GET http://allowed.example@evil.example/ HTTP/1.1\r\n\r\n", &r) == -EINVAL, "userinfo");
        ok(parse("GET http:///x HTTP/1.1\r\n\r\n", &r) == -EINVAL, "no authority");
        ok(parse("GET http://[::1]:8080/x HTTP/1.1\r\n\r\n", &r) == 0 && r.host_ipv6 && streq(r.host, "::1") &&
                   r.port == 8080,
           "an IPv6 literal in the URI");

        s = rewrite("GET http://example.com/a?b#frag HTTP/1.1\r\nHost: other.example\r\nAccept: */*\r\n"
                    "Proxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\n"
                    "Keep-Alive: 5\r\nUser-Agent: t\r\n\r\n");
        ok(s && streq(s, "GET /a?b HTTP/1.1\r\nAccept: */*\r\nUser-Agent: t\r\nHost: example.com\r\n"
                         "Connection: close\r\n\r\n"),
           "rewrite: origin form, no fragment, hop-by-hop headers gone, Host from the URI, Connection: close");
        free(s);

        s = rewrite("HEAD http://example.com:8080?q HTTP/1.0\n\n");
        ok(s && streq(s, "HEAD /?q HTTP/1.0\r\nHost: example.com:8080\r\nConnection: close\r\n\r\n"),
           "rewrite: a query without a path gets its /, the port goes into Host");
        free(s);

        s = rewrite("GET http://[2001:db8::2]/ws HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\n"
                    "Upgrade: websocket\r\n\r\n");
        ok(s && streq(s, "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nHost: [2001:db8::2]\r\n"
                         "Connection: Upgrade\r\n\r\n"),
           "rewrite: a WebSocket handshake keeps its Upgrade; IPv6 Host in brackets");
        free(s);

        s = rewrite("GET http://example.com/ HTTP/1.1\r\nConnection: upgraded-not\r\n\r\n");
        ok(s && strstr(s, "Connection: close\r\n"), "rewrite: 'upgraded-not' is not 'upgrade'");
        free(s);
}

static void test_hostile(void) {
        static const char *const bad[] = {
                "",
                "\r\n\r\n",
                "GET\r\n\r\n",
                "GET http://a/ \r\n\r\n",
                "GET  http://a/ HTTP/1.1\r\n\r\n",
                "GET http://a/ HTTP/1.1 \r\n\r\n",
                "GET http://a/ HTTP/2.0\r\n\r\n",
                "GET http://a/ HTTP/1.1x\r\n\r\n",
                "GET http://a/ http/1.1\r\n\r\n",
                "G(T http://a/ HTTP/1.1\r\n\r\n",
                "GET http://a/\x01 HTTP/1.1\r\n\r\n",
                "GET http://a/\x80 HTTP/1.1\r\n\r\n",
                "GET http://a/ HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
                "GET http://a/ HTTP/1.1\r\n\tfolded: x\r\n\r\n",
                "GET http://a/ HTTP/1.1\r\nNo colon\r\n\r\n",
                "GET http://a/ HTTP/1.1\r\n: empty name\r\n\r\n",
                "GET http://a/ HTTP/1.1\r\nBad Name: x\r\n\r\n",
                "GET http://a/ HTTP/1.1\r\nA: b\rc\r\n\r\n",
                "GET http://a/ HTTP/1.1\r\nA: b\x7f\r\n\r\n",
                "GET http://a/ HTTP/1.1\r\nA: b\x01\r\n\r\n",
                "GET http://a\r/ HTTP/1.1\r\n\r\n",
                "VERYLONGMETHODNAMEVERYLONGMETHODNAME http://a/ HTTP/1.1\r\n\r\n",
                NULL,
        };
        ProxyRequest r;
        char *big;
        size_t n;

        for (size_t i = 0; bad[i]; i++) {
                int q = parse(bad[i], &r);
                ok(q == -EINVAL || q == -EAGAIN, "hostile head %zu is refused (%d)", i, q);
        }

        /* a NUL in a header, with the length given explicitly */
        {
                static const char h[] = "GET http://a/ HTTP/1.1\r\nA: b\0c\r\n\r\n";
                ok(proxy_request_parse(h, sizeof h - 1, &r) == -EINVAL, "a NUL in a header");
        }
        /* n must end at the empty line */
        ok(proxy_request_parse("GET http://a/ HTTP/1.1\r\n\r\nextra", 32, &r) == -EINVAL,
           "bytes after the head are not part of it");
        ok(proxy_request_parse("GET http://a/ HTTP/1.1\r\n", 24, &r) == -EINVAL, "a head without its end");

        /* size limits */
        n = PROXY_HEAD_MAX + 1;
        big = malloc(n + 1);
        memset(big, 'a', n);
        memcpy(big, "GET http://a/ HTTP/1.1\r\nX: ", 27);
        memcpy(big + n - 4, "\r\n\r\n", 4);
        big[n] = 0;
        ok(proxy_request_parse(big, n, &r) == -E2BIG, "over PROXY_HEAD_MAX");
        memcpy(big + n - 5, "\r\n\r\n", 4);
        ok(proxy_request_parse(big, n - 1, &r) == 0, "exactly PROXY_HEAD_MAX is fine");
        free(big);

        {
                char host[300];
                char head[400];
                memset(host, 'a', 254);
                host[254] = 0;
                snprintf(head, sizeof head, "CONNECT %s:443 HTTP/1.1\r\n\r\n", host);
                ok(parse(head, &r) == -EINVAL, "a 254-character host");
                host[253] = 0;
                snprintf(head, sizeof head, "CONNECT %s:443 HTTP/1.1\r\n\r\n", host);
                ok(parse(head, &r) == 0 && strlen(r.host) == 253, "a 253-character host");
        }
}

/* http_chunk_size(): both syntaxes over the same lines. */
static int chunk(const char *line, HttpChunkSyntax syntax, uint64_t *ret) {
        return http_chunk_size(line, strlen(line), syntax, ret);
}

static void test_chunk_size(void) {
        static const char *const both[] = { "0", "a", "1F", "fff", "00000000000000f", "5;name=value", "5;",
                                            "5;a\tb" };
        static const uint64_t want[] = { 0, 10, 31, 4095, 15, 5, 5, 5 };
        static const char *const neither[] = { "", ";5", "g", "-1", "+1", "0x10", "1000000000000000", "5\x01",
                                               "5\r", "5\n" };
        uint64_t v;

        for (size_t i = 0; i < ELEMENTSOF(both); i++) {
                v = 1234;
                ok(chunk(both[i], HTTP_CHUNK_LENIENT, &v) == 0 && v == want[i], "lenient: '%s' is %llu", both[i],
                   (unsigned long long) want[i]);
                v = 1234;
                ok(chunk(both[i], HTTP_CHUNK_STRICT, &v) == 0 && v == want[i], "strict: '%s' is %llu", both[i],
                   (unsigned long long) want[i]);
        }
        for (size_t i = 0; i < ELEMENTSOF(neither); i++) {
                ok(chunk(neither[i], HTTP_CHUNK_LENIENT, &v) == -EBADMSG, "lenient refuses line %zu", i);
                ok(chunk(neither[i], HTTP_CHUNK_STRICT, &v) == -EBADMSG, "strict refuses line %zu", i);
        }
        v = 0;
        ok(chunk("fffffffffffffff", HTTP_CHUNK_STRICT, &v) == 0 && v == 0xfffffffffffffffULL,
           "15 hex digits are the most, and do not overflow");
        /* what a reader skips and a relay refuses */
        ok(chunk("5 ;x", HTTP_CHUNK_LENIENT, &v) == 0 && v == 5, "lenient: whitespace after the digits");
        ok(chunk("5 ;x", HTTP_CHUNK_STRICT, &v) == -EBADMSG, "strict: no whitespace after the digits");
        ok(chunk("5\tjunk", HTTP_CHUNK_LENIENT, &v) == 0 && v == 5, "lenient: anything after a tab");
        ok(chunk("5;a\x7f", HTTP_CHUNK_LENIENT, &v) == 0, "lenient: extensions unchecked");
        ok(chunk("5;a\x7f", HTTP_CHUNK_STRICT, &v) == -EBADMSG, "strict: DEL in an extension");
        ok(chunk("5;a\r", HTTP_CHUNK_STRICT, &v) == -EBADMSG, "strict: a bare CR in an extension");
        /* the length bounds the read: a digit past it is not seen */
        ok(http_chunk_size("12", 1, HTTP_CHUNK_STRICT, &v) == 0 && v == 1, "only len bytes are read");
}

int main(void) {
        test_head_length();
        test_connect();
        test_absolute();
        test_hostile();
        test_chunk_size();
        return done();
}
