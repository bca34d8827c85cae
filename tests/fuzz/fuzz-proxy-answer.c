/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: what a hostile server in a sandbox answers the port proxy (spaced/proxy/proxy-answer.c):
 * heads, interim heads, bodies by length, chunked or until the close.
 *
 * Input: byte 0: flags (bit 0: the client asked to switch protocols, bit 1: a HEAD request); byte 1: the size
 * of each read (1 to 256); byte 2: the most body bytes taken per call (1 to 256); then the server's bytes.
 * They are fed as proxy/proxy.c feeds them: in reads, never more held than the heads' bound leaves room for,
 * taken bytes dropped.
 * Invariants (abort on violation): the heads parse to 0, 1, -EBADMSG or -E2BIG, and to the same result,
 * status and framing whether fed in reads or whole; no more than PROXY_ANSWER_HEAD_MAX is ever held or taken
 * for heads; a final head has a status of 200 to 599 (101 only when asked for), at most
 * PROXY_ANSWER_HEADERS_MAX headers, names of token characters that are not hop-by-hop (but a 101's
 * Upgrade), values without control characters or blanks at their ends; a HEAD's answer has no body. A body
 * decodes to 0 or more bytes or -EBADMSG, the same whether fed in reads or whole; each call produces at most
 * what it may and takes at most what it got, a call that neither produces nor finishes leaves at most
 * PROXY_ANSWER_LINE_MAX bytes held, and a body by length gives no more than its length. */

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz-util.h"
#include "proxy/proxy-answer.h"

typedef struct Heads {
        int result;
        size_t taken;        /* of the input, for heads */
        ProxyHead head;
} Heads;

static Heads parse_heads(const char *in, size_t n, size_t slice, bool upgrade, bool head_only) {
        ProxyHeadParser p = { .upgrade = upgrade, .head_only = head_only };
        char *held = malloc(PROXY_ANSWER_HEAD_MAX);
        size_t len = 0, pos = 0;
        Heads h = { .result = 0 };

        check(held);
        while (h.result == 0 && pos < n) {
                size_t k = slice < n - pos ? slice : n - pos, used;

                check(p.taken + len < PROXY_ANSWER_HEAD_MAX);
                if (p.taken + len + k > PROXY_ANSWER_HEAD_MAX)
                        k = PROXY_ANSWER_HEAD_MAX - p.taken - len;
                memcpy(held + len, in + pos, k);
                len += k;
                pos += k;
                h.result = proxy_head_parse(&p, held, len, &used, &h.head);
                check(used <= len);
                check(h.result == 0 || h.result == 1 || h.result == -EBADMSG || h.result == -E2BIG);
                h.taken += used;
                check(h.taken <= PROXY_ANSWER_HEAD_MAX);
                memmove(held, held + used, len - used);
                len -= used;
        }
        free(held);
        return h;
}

static void check_head(const ProxyHead *h, bool upgrade, bool head_only) {
        size_t count = 0;

        check(h->status >= 200 ? h->status <= 599 : h->status == 101 && upgrade);
        check(!head_only || h->framing == PROXY_BODY_NONE);
        check(h->status != 101 || h->framing == PROXY_BODY_NONE);
        for (char **l = h->headers; l && l[0]; l += 2, count++) {
                size_t nl = strlen(l[0]), vl;

                check(l[1]);
                vl = strlen(l[1]);
                check(nl > 0);
                for (size_t i = 0; i < nl; i++)
                        check(isalnum((unsigned char) l[0][i]) || strchr("!#$%&'*+-.^_`|~", l[0][i]));
                check(!proxy_hop_by_hop(l[0], nl) || (h->status == 101 && strcasecmp(l[0], "upgrade") == 0));
                for (size_t i = 0; i < vl; i++)
                        check(((unsigned char) l[1][i] >= 0x20 || l[1][i] == '\t') && l[1][i] != 0x7f);
                check(vl == 0 || (l[1][0] != ' ' && l[1][0] != '\t' && l[1][vl - 1] != ' ' && l[1][vl - 1] != '\t'));
        }
        check(count <= PROXY_ANSWER_HEADERS_MAX);
}

/* Decodes the body in[0..n) in reads of slice, taking at most max per call, into out (n bytes at least):
 * how many bytes came out, or -EBADMSG. */
static ssize_t decode_body(const ProxyHead *h, const char *in, size_t n, size_t slice, size_t max, char *out,
                           bool *ret_done) {
        char held[PROXY_ANSWER_LINE_MAX + 256];
        size_t len = 0, pos = 0, produced = 0;
        ProxyBody b;

        proxy_body_init(&b, h);
        for (;;) {
                size_t used;
                ssize_t q = proxy_body_decode(&b, held, len, &used, out + produced, max);

                if (q < 0) {
                        check(q == -EBADMSG);
                        return q;
                }
                check((size_t) q <= max && used <= len);
                produced += (size_t) q;
                memmove(held, held + used, len - used);
                len -= used;
                if (b.done)
                        break;
                if (q > 0)
                        continue;
                /* nothing came out of what is held: a partial line at most, as proxy.c relies on */
                check(len <= PROXY_ANSWER_LINE_MAX);
                if (pos == n)
                        break;
                size_t k = slice < n - pos ? slice : n - pos;
                memcpy(held + len, in + pos, k);
                len += k;
                pos += k;
        }
        check(h->framing != PROXY_BODY_LENGTH || produced <= h->length);
        check(h->framing != PROXY_BODY_NONE || produced == 0);
        check(produced <= n);
        *ret_done = b.done;
        return (ssize_t) produced;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *in = (const char *) data + 3;
        size_t n, slice, max;
        bool upgrade, head_only;
        Heads sliced, whole;

        if (size < 3 || size > 4 * PROXY_ANSWER_HEAD_MAX)
                return 0;
        upgrade = data[0] & 1;
        head_only = data[0] & 2;
        slice = (size_t) data[1] + 1;
        max = (size_t) data[2] + 1;
        n = size - 3;

        sliced = parse_heads(in, n, slice, upgrade, head_only);
        whole = parse_heads(in, n, PROXY_ANSWER_HEAD_MAX, upgrade, head_only);
        check(sliced.result == whole.result);
        if (sliced.result != 1) {
                check(sliced.result != 0 || n - sliced.taken < PROXY_ANSWER_HEAD_MAX);
                return 0;
        }
        check(sliced.taken == whole.taken && sliced.head.status == whole.head.status &&
              sliced.head.framing == whole.head.framing && sliced.head.length == whole.head.length);
        check_head(&sliced.head, upgrade, head_only);

        char *a = malloc(n + 1), *b = malloc(n + 1);
        bool done_a, done_b;
        ssize_t qa, qb;

        check(a && b);
        qa = decode_body(&sliced.head, in + sliced.taken, n - sliced.taken, slice, max, a, &done_a);
        qb = decode_body(&sliced.head, in + sliced.taken, n - sliced.taken, 256, 256, b, &done_b);
        check((qa < 0) == (qb < 0));
        if (qa >= 0)
                check(qa == qb && done_a == done_b && memcmp(a, b, (size_t) qa) == 0);
        free(a);
        free(b);
        proxy_head_done(&sliced.head);
        proxy_head_done(&whole.head);
        return 0;
}
