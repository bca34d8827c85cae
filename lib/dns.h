/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The little DNS the guest agent's stub speaks (ARCHITECTURE.md, decision 10): one question per query, A and
 * AAAA answered from the host's RESOLVE, everything else answered at once without asking anyone. Pure
 * functions over buffers: no I/O, no allocation, so they can be unit-tested and fuzzed.
 *
 * Only what a stub resolver needs of RFC 1035: no compression pointers in questions (a query has no earlier
 * name to point at), answers of at most DNS_UDP_MAX bytes (plain UDP; an EDNS record in the query is ignored
 * and answered without one, which every resolver accepts).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNS_HEADER_SIZE 12U
#define DNS_NAME_MAX 253U      /* the dotted text of a name, without a trailing dot */
#define DNS_WIRE_NAME_MAX 255U /* the same name in wire form, with its length bytes and the root label */
#define DNS_UDP_MAX 512U       /* answers stay in plain DNS's UDP size: fewer records rather than TC */

enum {
        DNS_RCODE_NOERROR = 0,
        DNS_RCODE_FORMERR = 1,
        DNS_RCODE_SERVFAIL = 2,
        DNS_RCODE_NXDOMAIN = 3,
        DNS_RCODE_NOTIMP = 4,
        DNS_RCODE_REFUSED = 5,
};

enum {
        DNS_TYPE_A = 1,
        DNS_TYPE_AAAA = 28,
        DNS_CLASS_IN = 1,
};

typedef struct DnsQuery {
        uint16_t id;
        bool rd;                        /* recursion desired: echoed in the answer */
        uint16_t qtype, qclass;
        char name[DNS_NAME_MAX + 1];    /* lowercase, dotted, no trailing dot; "" for the root */
        uint8_t question[DNS_WIRE_NAME_MAX + 4]; /* the question as it came (its case too: 0x20 randomization) */
        size_t question_len;            /* 0 when the query's question could not be read */
} DnsQuery;

typedef struct DnsAddr {
        int family;                     /* AF_INET or AF_INET6 */
        uint8_t a[16];
} DnsAddr;

/* Parses a query. Returns 0 with *ret filled in; otherwise:
 *   -EBADMSG     not worth an answer: shorter than a header, or a response (QR set); *ret is untouched
 *   -EOPNOTSUPP  an opcode other than QUERY: answer NOTIMP
 *   -EINVAL      the question is malformed, or there is not exactly one, or the name has a character other
 *                than [A-Za-z0-9_-] in a label: answer FORMERR
 * With -EOPNOTSUPP and -EINVAL, ret->id and ret->rd are set and ret->question_len is 0, so that
 * dns_answer_build() makes the error answer. Sections after the question (EDNS) are not looked at. */
int dns_query_parse(const uint8_t *p, size_t n, DnsQuery *ret);

/* Builds the answer to q with this rcode into out[0..size): the header, the question as it came, then one A
 * (AAAA) record per address of addrs whose family matches q->qtype (the others are skipped), each with ttl,
 * as many as fit in min(size, DNS_UDP_MAX) bytes. Returns 0 and *ret_len; -ENOBUFS if not even the header
 * and question fit; -EINVAL for an rcode over 15. */
int dns_answer_build(const DnsQuery *q, unsigned rcode, const DnsAddr *addrs, size_t n_addrs, uint32_t ttl,
                     uint8_t *out, size_t size, size_t *ret_len);
