/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: what the egress gateway reads from a connection's first bytes (spaced/egress/sniff.c): the
 * SNI of a TLS ClientHello, the Host of an HTTP request; and how it frames the requests that follow on a plain
 * HTTP connection (spaced/egress/http-stream.c). The bytes come from the guest.
 *
 * Input: the bytes as the guest sends them (the last byte also picks how the stream is cut into pieces and
 * whether the server takes an upgrade).
 * Invariants (abort on violation): a name read is an exact host name (it normalizes to itself, has no
 * wildcard, is not numeric); a verdict on a prefix stands when more bytes come (the gateway decides on what
 * it holds, and what follows must not change what it decided); with eof nothing is left undecided. The
 * stream: the same heads, names, body bytes and refusal whether the bytes come at once or in pieces; a head
 * is the bytes sniff says it is, ends in an empty line, and no step uses bytes it was not given. */

#include <errno.h>
#include <string.h>

#include "fuzz-util.h"
#include "egress/egress-internal.h"

static void check_verdict(const EgressSniff *s) {
        char again[EGRESS_HOST_MAX + 1];

        check(s->kind >= EGRESS_SNIFF_MORE && s->kind <= EGRESS_SNIFF_BAD);
        check(!(s->has_name && s->has_literal));
        if (s->kind == EGRESS_SNIFF_BAD)
                check(s->why != NULL);
        if (s->has_name) {
                check(s->kind == EGRESS_SNIFF_TLS || s->kind == EGRESS_SNIFF_HTTP);
                check(egress_host_normalize(s->name, again) == 0);
                check(strcmp(again, s->name) == 0);
                check(!strchr(s->name, '*'));
                check(!egress_host_is_numeric(s->name));
        }
}

#define EVENTS_MAX 256

/* What a stream said, body bytes between other steps added up. */
typedef struct Event {
        EgressHttpStep step;
        size_t n;                /* HEAD: its length; BODY: bytes */
        char name[EGRESS_HOST_MAX + 1];
} Event;

static size_t stream_events(const uint8_t *data, size_t size, unsigned piece, bool switched, Event *ev) {
        EgressHttpStream st = {};
        size_t have = 0, off = 0, k = 0;
        uint32_t seed = piece;

        while (k < EVENTS_MAX - 1) {
                bool eof = have == size;
                const char *why = NULL;
                EgressSniff h;
                size_t used = 99;
                EgressHttpStep r = egress_http_stream_step(&st, data + off, have - off, eof, &used, &h, &why);

                check(used <= have - off);
                if (r == EGRESS_HTTP_MORE) {
                        check(used == 0);
                        if (eof)
                                break;
                        seed = seed * 1103515245U + 12345U;
                        have = piece == 0 ? size : have + 1 + (seed >> 16) % (piece * 7);
                        have = have > size ? size : have;
                        continue;
                }
                if (r == EGRESS_HTTP_BODY) {
                        check(used > 0);
                        if (k > 0 && ev[k - 1].step == EGRESS_HTTP_BODY)
                                ev[k - 1].n += used;
                        else
                                ev[k++] = (Event) { .step = r, .n = used };
                        off += used;
                        continue;
                }
                ev[k] = (Event) { .step = r };
                if (r == EGRESS_HTTP_HEAD) {
                        check(h.kind == EGRESS_SNIFF_HTTP && used == h.head_len && used >= 4);
                        check(memcmp(data + off + used - 4, "\r\n\r\n", 4) == 0);
                        check_verdict(&h);
                        ev[k].n = used;
                        if (h.has_name)
                                strcpy(ev[k].name, h.name);
                        off += used;
                } else if (r == EGRESS_HTTP_WAIT) {
                        check(used == 0 && k == 1 && ev[0].step == EGRESS_HTTP_HEAD);
                        egress_http_stream_switched(&st, switched);
                } else {
                        check(r == EGRESS_HTTP_BAD && why != NULL && used == 0);
                        k++;
                        break;
                }
                k++;
        }
        return k;
}

static void check_stream(const uint8_t *data, size_t size) {
        static Event whole[EVENTS_MAX], pieces[EVENTS_MAX];
        unsigned piece = size > 0 ? 1 + data[size - 1] % 5 : 1;
        bool switched = size > 0 && (data[size - 1] & 0x80);
        size_t a = stream_events(data, size, 0, switched, whole), b = stream_events(data, size, piece, switched, pieces);

        if (a >= EVENTS_MAX - 1 || b >= EVENTS_MAX - 1)
                return; /* cut off at different places */
        check(a == b);
        for (size_t i = 0; i < a; i++) {
                check(whole[i].step == pieces[i].step && whole[i].n == pieces[i].n);
                check(strcmp(whole[i].name, pieces[i].name) == 0);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        EgressSniff whole, part, end;
        unsigned status = 1000;
        int r;

        egress_sniff(data, size, false, &whole);
        check_verdict(&whole);
        egress_sniff(data, size, true, &end);
        check_verdict(&end);
        check(end.kind != EGRESS_SNIFF_MORE);

        /* Every prefix that already had a verdict has this one. */
        for (size_t n = 0; n < size && n < 2048; n++) {
                egress_sniff(data, n, false, &part);
                check_verdict(&part);
                if (part.kind == EGRESS_SNIFF_MORE)
                        continue;
                check(part.kind == whole.kind);
                check(part.has_name == whole.has_name);
                if (part.has_name)
                        check(strcmp(part.name, whole.name) == 0);
                if (part.kind == EGRESS_SNIFF_HTTP)
                        check(part.head_len == whole.head_len && part.length == whole.length &&
                              part.chunked == whole.chunked && part.upgrade == whole.upgrade);
                break;
        }

        check_stream(data, size);
        r = egress_http_status(data, size, &status);
        check(r == 0 || r == -EBADMSG || (r == 1 && status < 1000));
        return 0;
}
