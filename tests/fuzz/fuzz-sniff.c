/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: what the egress gateway reads from a connection's first bytes (spaced/egress/sniff.c): the
 * SNI of a TLS ClientHello, the Host of an HTTP request. The bytes come from the guest.
 *
 * Input: the bytes as the guest sends them.
 * Invariants (abort on violation): a name read is an exact host name (it normalizes to itself, has no
 * wildcard, is not numeric); a verdict on a prefix stands when more bytes come (the gateway decides on what
 * it holds, and what follows must not change what it decided); with eof nothing is left undecided. */

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        EgressSniff whole, part, end;

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
                break;
        }
        return 0;
}
