/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: the request heads the guest's HTTP proxy reads from any program in the sandbox
 * (lib/proxy-request.c), and the origin-form head it forwards.
 *
 * Input: the bytes a client sends; the head is what proxy_head_length finds in them.
 * The input's first line is also a chunk's size line (http_chunk_size, both syntaxes).
 * Invariants (abort on violation): the strict syntax takes no line the lenient one refuses, with the same
 * size; the head length is 0 or ends at a LF within the input; the parse returns
 * 0, -EINVAL, -EPROTONOSUPPORT or -E2BIG; a parsed destination is a non-empty lowercase host of at most 253
 * bytes without '@', '/', ':' (unless an IPv6 literal), whitespace or control characters, and a port 1..65535;
 * a plain request's rewrite is one whole head (its length is its proxy_head_length), starts with the method
 * and " /", has no Proxy-* or Keep-Alive header, exactly one Host header naming the parsed host, and ends with
 * a Connection header. */

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "fuzz-util.h"
#include "proxy-request.h"

static size_t count_lines(const char *s, size_t n, const char *prefix) {
        size_t c = 0, pl = strlen(prefix);

        for (size_t i = 0; i < n; i++)
                if (i > 0 && s[i - 1] == '\n' && n - i >= pl && strncasecmp(s + i, prefix, pl) == 0)
                        c++;
        return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *head = (const char *) data;
        ProxyRequest r;
        SpaceBuf out = {};
        size_t hl;
        int q;

        if (size > PROXY_HEAD_MAX + 1024)
                return 0;
        /* the input's first line as a chunk's size line: what the strict syntax takes the lenient one takes
         * too, as the same size, and no size needs more than 15 hex digits */
        {
                const char *nl = memchr(head, '\n', size);
                size_t ll = nl ? (size_t) (nl - head) : size;
                uint64_t lenient = 0, strict = 0;
                int ql, qs;

                ql = http_chunk_size(head, ll, HTTP_CHUNK_LENIENT, &lenient);
                qs = http_chunk_size(head, ll, HTTP_CHUNK_STRICT, &strict);
                check(ql == 0 || ql == -EBADMSG);
                check(qs == 0 || qs == -EBADMSG);
                check(qs < 0 || (ql == 0 && lenient == strict));
                check(ql < 0 || lenient < (1ULL << 60));
        }
        hl = proxy_head_length(head, size);
        check(hl <= size);
        if (hl == 0)
                return 0;
        check(head[hl - 1] == '\n');

        q = proxy_request_parse(head, hl, &r);
        check(q == 0 || q == -EINVAL || q == -EPROTONOSUPPORT || q == -E2BIG);
        check(q != -E2BIG || hl > PROXY_HEAD_MAX);
        if (q < 0)
                return 0;

        size_t l = strlen(r.host);
        check(l > 0 && l <= PROXY_HOST_MAX);
        for (size_t i = 0; i < l; i++) {
                char ch = r.host[i];
                check(ch > 0x20 && ch < 0x7f && !(ch >= 'A' && ch <= 'Z') && ch != '@' && ch != '/');
                check(ch != ':' || r.host_ipv6);
        }
        check(r.port >= 1);
        check(r.head_len == hl);

        if (r.connect) {
                check(proxy_request_rewrite(head, &r, &out) == -EINVAL);
                space_buf_done(&out);
                return 0;
        }

        check(proxy_request_rewrite(head, &r, &out) == 0);
        const char *s = (const char *) out.data;
        check(proxy_head_length(s, out.len) == out.len);
        check(out.len > strlen(r.method) + 2 && memcmp(s, r.method, strlen(r.method)) == 0);
        check(s[strlen(r.method)] == ' ' && s[strlen(r.method) + 1] == '/');
        check(count_lines(s, out.len, "proxy-") == 0);
        check(count_lines(s, out.len, "keep-alive:") == 0);
        check(count_lines(s, out.len, "host:") == 1);
        check(count_lines(s, out.len, "connection:") == 1);
        const char *h = memmem(s, out.len, "\r\nHost: ", 8);
        check(h);
        h += 8;
        if (r.host_ipv6)
                check(*h++ == '[');
        check((size_t) (s + out.len - h) > l && memcmp(h, r.host, l) == 0);
        /* the rewrite parses as a head in its own right, as an origin server would read it */
        check(memmem(s, out.len, "\r\n\r\n", 4) == s + out.len - 4);
        space_buf_done(&out);
        return 0;
}
