/* SPDX-License-Identifier: Apache-2.0 */
/* The answers of servers in sandboxes as the port proxy parses them (spaced/proxy/proxy-answer.c): heads fed in
 * slices as the proxy reads them, interim heads and their shared bound, garbage, chunked bodies. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/proxy-answer.h"
#include "tap.h"

typedef struct Fed {
        int result;
        size_t taken;         /* bytes of heads taken, the final head's included */
        size_t held_max;      /* the most bytes held at once, as the proxy would */
        ProxyHead head;
        char rest[4096];      /* what followed the final head */
        size_t rest_len;
} Fed;

/* Feeds data to a parser slice bytes at a time, holding and dropping bytes as proxy/proxy.c does. */
static Fed feed(const char *data, size_t n, size_t slice, bool upgrade) {
        ProxyHeadParser p = { .upgrade = upgrade };
        char *held = malloc(PROXY_ANSWER_HEAD_MAX + slice);
        size_t len = 0, pos = 0;
        Fed f = { .result = 0 };

        ASSERT(held);
        while (f.result == 0 && pos < n) {
                size_t k = slice < n - pos ? slice : n - pos, used;

                /* the proxy reads no more than the bound leaves room for */
                if (p.taken + len + k > PROXY_ANSWER_HEAD_MAX)
                        k = PROXY_ANSWER_HEAD_MAX - p.taken - len;
                ASSERT(k > 0);
                memcpy(held + len, data + pos, k);
                len += k;
                pos += k;
                if (len > f.held_max)
                        f.held_max = len;
                f.result = proxy_head_parse(&p, held, len, &used, &f.head);
                f.taken += used;
                memmove(held, held + used, len - used);
                len -= used;
        }
        if (f.result > 0) {
                ASSERT(len + (n - pos) <= sizeof f.rest);
                memcpy(f.rest, held, len);
                memcpy(f.rest + len, data + pos, n - pos);
                f.rest_len = len + (n - pos);
        }
        free(held);
        return f;
}

static const char *header(const ProxyHead *h, const char *name) {
        for (char **l = h->headers; l && l[0] && l[1]; l += 2)
                if (strcasecmp(l[0], name) == 0)
                        return l[1];
        return NULL;
}

static void test_heads(void) {
        static const char plain[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b \r\nConnection: close\r\n\r\nhello";
        static const char early[] = "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
                                    "HTTP/1.0 404 Not Found\nTransfer-Encoding: gzip, chunked\n\n5\r\nhello\r\n0\r\n\r\n";
        Fed f;

        for (size_t slice = 1; slice <= sizeof plain; slice *= 3) {
                f = feed(plain, strlen(plain), slice, false);
                ok(f.result == 1 && f.head.status == 200 && f.head.framing == PROXY_BODY_LENGTH &&
                   f.head.length == 5 && f.rest_len == 5 && memcmp(f.rest, "hello", 5) == 0,
                   "a plain head in slices of %zu: 200, a length of 5, the body after it", slice);
                ok(header(&f.head, "X-A") && strcmp(header(&f.head, "X-A"), "b") == 0 &&
                   !header(&f.head, "Connection") && !header(&f.head, "Content-Length"),
                   "... its headers without blanks around values and without hop-by-hop ones");
                proxy_head_done(&f.head);
        }
        f = feed(early, strlen(early), 7, false);
        ok(f.result == 1 && f.head.status == 404 && f.head.framing == PROXY_BODY_CHUNKED && !header(&f.head, "Link"),
           "a 103 and a 100 before a 404: the 404 is the answer, chunked, without the interim heads' headers");
        proxy_head_done(&f.head);

        f = feed("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", 56, 100, false);
        ok(f.result == -EBADMSG, "a 101 the client did not ask for is refused");
        f = feed("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", 56, 100, true);
        ok(f.result == 1 && f.head.status == 101 && f.head.framing == PROXY_BODY_NONE && header(&f.head, "Upgrade"),
           "... one it asked for is the answer, with its Upgrade");
        proxy_head_done(&f.head);
        f = feed("HTTP/1.1 101 Switching Protocols\r\n\r\n", 36, 100, true);
        ok(f.result == -EBADMSG, "... but not without an Upgrade");

        f = feed("SSH-2.0-OpenSSH_9.2\r\n", 21, 3, false);
        ok(f.result == -EBADMSG && f.taken == 0, "garbage is refused at its first bytes (%d)", f.result);
        f = feed("HTTP/1.1 2", 10, 10, false);
        ok(f.result == 0, "a head that has not come whole yet: more needed");
        f = feed("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 57, 100, false);
        ok(f.result == -EBADMSG, "two Content-Length that differ are refused");
        f = feed("HTTP/1.1 200 OK\r\n folded: no\r\n\r\n", 33, 100, false);
        ok(f.result == -EBADMSG, "a folded line is refused");
        f = feed("HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n", 26, 100, false);
        ok(f.result == -EBADMSG, "a control character in a value is refused");
        f = feed("HTTP/1.1 099 Low\r\n\r\n", 20, 100, false);
        ok(f.result == -EBADMSG, "a status under 100 is refused");
        f = feed("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", 46, 100, false);
        ok(f.result == 1 && f.head.framing == PROXY_BODY_NONE, "a 204 has no body, whatever its length says");
        proxy_head_done(&f.head);
}

/* n bytes of interim heads (each 64 bytes), then a final one. */
static char *interim_flood(size_t n, size_t *ret_len) {
        static const char h[] = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nX: 1234\r\n\r\n";
        static const char fin[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        char *s = malloc(n + sizeof h + sizeof fin);
        size_t len = 0;

        ASSERT(s && strlen(h) == 70);
        while (len + strlen(h) <= n) {
                memcpy(s + len, h, strlen(h));
                len += strlen(h);
        }
        memcpy(s + len, fin, strlen(fin));
        *ret_len = len + strlen(fin);
        return s;
}

static void test_bound(void) {
        size_t n, big = 4 * PROXY_ANSWER_HEAD_MAX;
        char *s = interim_flood(PROXY_ANSWER_HEAD_MAX - 100, &n), *one;
        Fed f;

        f = feed(s, n, 16 * 1024, false);
        ok(f.result == 1 && f.head.status == 200 && f.taken == n,
           "interim heads and the final one within %d bytes together: the answer comes", PROXY_ANSWER_HEAD_MAX);
        proxy_head_done(&f.head);
        free(s);
        s = interim_flood(big, &n);
        f = feed(s, n, 16 * 1024, false);
        ok(f.result == -E2BIG && f.taken <= PROXY_ANSWER_HEAD_MAX && f.held_max <= PROXY_ANSWER_HEAD_MAX,
           "a flood of 103 heads: refused once the heads pass the bound, with at most the bound held (%zu)",
           f.held_max);
        f = feed(s, n, 1, false);
        ok(f.result == -E2BIG && f.taken <= PROXY_ANSWER_HEAD_MAX, "... fed a byte at a time too");
        free(s);

        /* one head of exactly the bound, and one a byte over */
        one = malloc(PROXY_ANSWER_HEAD_MAX + 1);
        ASSERT(one);
        memcpy(one, "HTTP/1.1 200 OK\r\nX: ", 20);
        memset(one + 20, 'a', PROXY_ANSWER_HEAD_MAX - 24);
        memcpy(one + PROXY_ANSWER_HEAD_MAX - 4, "\r\n\r\n", 4);
        f = feed(one, PROXY_ANSWER_HEAD_MAX, 1000, false);
        ok(f.result == 1 && f.taken == PROXY_ANSWER_HEAD_MAX, "a head of exactly %d bytes is taken",
           PROXY_ANSWER_HEAD_MAX);
        proxy_head_done(&f.head);
        memset(one + 20, 'a', PROXY_ANSWER_HEAD_MAX - 23);
        memcpy(one + PROXY_ANSWER_HEAD_MAX - 3, "\r\n\r\n", 4);
        f = feed(one, PROXY_ANSWER_HEAD_MAX + 1, 1000, false);
        ok(f.result == -E2BIG, "... one a byte longer is not");
        free(one);
}

/* Decodes a body given whole, into out; the result of the last call. */
static ssize_t decode_all(ProxyFraming framing, uint64_t length, const char *in, size_t n, size_t slice, char *out,
                          size_t max, size_t *ret_out, bool *ret_done) {
        ProxyHead h = { .status = 200, .framing = framing, .length = length };
        ProxyBody b;
        char held[2048];
        size_t len = 0, pos = 0, produced = 0;
        ssize_t q = 0;

        proxy_body_init(&b, &h);
        while (!b.done) {
                size_t k = slice < n - pos ? slice : n - pos, used;

                if (len + k > sizeof held)
                        k = sizeof held - len;
                memcpy(held + len, in + pos, k);
                len += k;
                pos += k;
                q = proxy_body_decode(&b, held, len, &used, out + produced, max - produced);
                if (q < 0)
                        break;
                produced += (size_t) q;
                memmove(held, held + used, len - used);
                len -= used;
                if (pos == n && q == 0)
                        break;
        }
        *ret_out = produced;
        *ret_done = b.done;
        return q;
}

static void test_bodies(void) {
        static const char chunked[] = "5\r\nhello\r\n7;ext=1\r\n-chunks\r\n0\r\nX-Trailer: t\r\n\r\n";
        char out[4096], *in;
        size_t n;
        bool done;
        ssize_t q;

        for (size_t slice = 1; slice <= sizeof chunked; slice += 5) {
                q = decode_all(PROXY_BODY_CHUNKED, 0, chunked, strlen(chunked), slice, out, sizeof out, &n, &done);
                ok(q >= 0 && done && n == 12 && memcmp(out, "hello-chunks", 12) == 0,
                   "a chunked body in slices of %zu: decoded, its trailer dropped", slice);
        }
        q = decode_all(PROXY_BODY_LENGTH, 4, "abcdefgh", 8, 3, out, sizeof out, &n, &done);
        ok(q >= 0 && done && n == 4 && memcmp(out, "abcd", 4) == 0, "a length of 4: 4 bytes, then done");
        q = decode_all(PROXY_BODY_CHUNKED, 0, "zz\r\n", 4, 4, out, sizeof out, &n, &done);
        ok(q == -EBADMSG, "a chunk size that is not hex is refused");
        q = decode_all(PROXY_BODY_CHUNKED, 0, "1234567890abcdef0\r\n", 19, 19, out, sizeof out, &n, &done);
        ok(q == -EBADMSG, "a chunk size of 17 hex digits is refused");
        q = decode_all(PROXY_BODY_CHUNKED, 0, "3\r\nabcX\r\n", 9, 9, out, sizeof out, &n, &done);
        ok(q == -EBADMSG, "a chunk longer than it said is refused");

        in = malloc(64 * 1024);
        ASSERT(in);
        memcpy(in, "1;", 2);
        memset(in + 2, 'e', 2000);
        q = decode_all(PROXY_BODY_CHUNKED, 0, in, 2002, 100, out, sizeof out, &n, &done);
        ok(q == -EBADMSG, "a size line over %d bytes is refused before its end", PROXY_ANSWER_LINE_MAX);
        n = 0;
        memcpy(in, "0\r\n", 3);
        for (n = 3; n + 10 < 64 * 1024; n += 10)
                memcpy(in + n, "X-T: abc\r\n", 10);
        q = decode_all(PROXY_BODY_CHUNKED, 0, in, n, 1000, out, sizeof out, &n, &done);
        ok(q == -EBADMSG && !done, "trailers without end are refused after %d bytes", PROXY_ANSWER_TRAILERS_MAX);
        free(in);
}

int main(void) {
        test_heads();
        test_bound();
        test_bodies();
        return done();
}
