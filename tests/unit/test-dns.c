/* SPDX-License-Identifier: Apache-2.0 */

/* Unit tests for lib/dns.c, the guest DNS stub's messages: queries as resolvers send them, hostile ones
 * (truncated, compressed, oversized, responses, other opcodes), and the answers built for them. */

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../../lib/dns.h"
#include "../../lib/macro.h"
#include "tap.h"

/* A query for name (dotted) with the given type, flags word and question count. */
static size_t make_query(uint8_t *out, uint16_t id, uint16_t flags, uint16_t qdcount, const char *name,
                         uint16_t qtype) {
        size_t n = 0;

        out[n++] = (uint8_t) (id >> 8), out[n++] = (uint8_t) id;
        out[n++] = (uint8_t) (flags >> 8), out[n++] = (uint8_t) flags;
        out[n++] = (uint8_t) (qdcount >> 8), out[n++] = (uint8_t) qdcount;
        memset(out + n, 0, 6);
        n += 6;
        for (const char *p = name; *p;) {
                size_t l = strcspn(p, ".");
                out[n++] = (uint8_t) l;
                memcpy(out + n, p, l);
                n += l;
                p += l;
                if (*p == '.')
                        p++;
        }
        out[n++] = 0;
        out[n++] = (uint8_t) (qtype >> 8), out[n++] = (uint8_t) qtype;
        out[n++] = 0, out[n++] = DNS_CLASS_IN;
        return n;
}

static uint16_t g16(const uint8_t *p) {
        return (uint16_t) (p[0] << 8 | p[1]);
}

static void test_parse(void) {
        uint8_t m[600];
        DnsQuery q;
        size_t n;

        n = make_query(m, 0x1234, 0x0100, 1, "Example.COM", DNS_TYPE_A);
        ok(dns_query_parse(m, n, &q) == 0 && q.id == 0x1234 && q.rd && q.qtype == DNS_TYPE_A &&
                   q.qclass == DNS_CLASS_IN && streq(q.name, "example.com") && q.question_len == n - 12,
           "a plain A query parses, the name lowercased");
        ok(memcmp(q.question, m + 12, q.question_len) == 0 && q.question[1] == 'E',
           "the question is kept as it came (0x20 case)");

        n = make_query(m, 7, 0, 1, "_sip._tcp.a-b.example", DNS_TYPE_AAAA);
        ok(dns_query_parse(m, n, &q) == 0 && !q.rd && q.qtype == DNS_TYPE_AAAA &&
                   streq(q.name, "_sip._tcp.a-b.example"),
           "underscores and hyphens are fine");

        /* EDNS: an OPT record after the question is not looked at */
        n = make_query(m, 8, 0x0100, 1, "a.example", DNS_TYPE_A);
        m[11] = 1;
        memcpy(m + n, "\0\0\x29\x04\xd0\0\0\0\0\0\0", 11);
        ok(dns_query_parse(m, n + 11, &q) == 0 && streq(q.name, "a.example"), "an EDNS OPT record is ignored");

        n = make_query(m, 9, 0, 1, "", DNS_TYPE_A);
        ok(dns_query_parse(m, n, &q) == 0 && q.name[0] == 0 && q.question_len == 5, "the root name parses as \"\"");
}

static void test_hostile(void) {
        uint8_t m[700] = {};
        DnsQuery q;
        size_t n;

        ok(dns_query_parse(m, 0, &q) == -EBADMSG, "an empty datagram is dropped");
        ok(dns_query_parse(NULL, 0, &q) == -EBADMSG, "NULL is dropped");
        n = make_query(m, 1, 0, 1, "a.example", DNS_TYPE_A);
        ok(dns_query_parse(m, 11, &q) == -EBADMSG, "less than a header is dropped");

        m[2] |= 0x80;
        ok(dns_query_parse(m, n, &q) == -EBADMSG, "a response is dropped (no loops)");
        m[2] &= 0x7f;

        m[2] |= 2 << 3; /* opcode STATUS */
        ok(dns_query_parse(m, n, &q) == -EOPNOTSUPP && q.id == 1 && q.question_len == 0,
           "another opcode is NOTIMP, with the id kept");
        m[2] &= (uint8_t) ~(0xf << 3);

        for (size_t cut = 12; cut < n; cut++)
                if (dns_query_parse(m, cut, &q) != -EINVAL || q.question_len != 0) {
                        ok(false, "a question cut at %zu is FORMERR", cut);
                        break;
                } else if (cut == n - 1)
                        ok(true, "a question cut anywhere is FORMERR");

        m[5] = 0;
        ok(dns_query_parse(m, n, &q) == -EINVAL, "no question is FORMERR");
        m[5] = 2;
        ok(dns_query_parse(m, n, &q) == -EINVAL, "two questions are FORMERR");
        m[5] = 1;

        /* a compression pointer in the question, pointing at itself */
        n = 12;
        m[n++] = 0xc0, m[n++] = 12, m[n++] = 0, m[n++] = 1, m[n++] = 0, m[n++] = 1;
        ok(dns_query_parse(m, n, &q) == -EINVAL, "a compression pointer in a question is FORMERR");

        n = make_query(m, 1, 0, 1, "a.example", DNS_TYPE_A);
        m[12] = 0x41; /* reserved label type 01 */
        ok(dns_query_parse(m, n, &q) == -EINVAL, "a reserved label type is FORMERR");

        n = make_query(m, 1, 0, 1, "a b.example", DNS_TYPE_A);
        ok(dns_query_parse(m, n, &q) == -EINVAL, "a space in a label is FORMERR");
        n = make_query(m, 1, 0, 1, "a.example", DNS_TYPE_A);
        m[13] = 0;
        ok(dns_query_parse(m, n, &q) == -EINVAL, "a NUL in a label is FORMERR");
        m[13] = '.';
        ok(dns_query_parse(m, n, &q) == -EINVAL, "a dot inside a label is FORMERR (it would change the name)");

        /* 64-byte label */
        {
                char name[80];
                memset(name, 'a', 64);
                strcpy(name + 64, ".example");
                n = make_query(m, 1, 0, 1, name, DNS_TYPE_A);
                ok(dns_query_parse(m, n, &q) == -EINVAL, "a 64-byte label is FORMERR");
        }
        /* names of 253 and 255 characters: three labels of 63 and one of 61, then one more label */
        {
                char name[300] = "";
                for (int i = 0; i < 4; i++) {
                        size_t l = strlen(name);
                        memset(name + l, 'b', i < 3 ? 63 : 61);
                        name[l + (i < 3 ? 63 : 61)] = i < 3 ? '.' : 0;
                }
                n = make_query(m, 1, 0, 1, name, DNS_TYPE_A);
                ok(strlen(name) == 253 && dns_query_parse(m, n, &q) == 0 && strlen(q.name) == 253,
                   "a 253-character name parses");
                strcat(name, ".x");
                n = make_query(m, 1, 0, 1, name, DNS_TYPE_A);
                ok(dns_query_parse(m, n, &q) == -EINVAL, "a 255-character name is FORMERR");
        }
}

static void test_answer(void) {
        DnsAddr addrs[40];
        uint8_t m[600], out[1024];
        DnsQuery q;
        size_t n, len;

        for (size_t i = 0; i < ELEMENTSOF(addrs); i++) {
                addrs[i] = (DnsAddr) { .family = i % 2 ? AF_INET6 : AF_INET };
                addrs[i].a[0] = (uint8_t) i;
        }

        n = make_query(m, 0xbeef, 0x0100, 1, "a.example", DNS_TYPE_A);
        ok(dns_query_parse(m, n, &q) == 0, "query parses");
        ok(dns_answer_build(&q, DNS_RCODE_NOERROR, addrs, 3, 300, out, sizeof out, &len) == 0, "answer builds");
        ok(g16(out) == 0xbeef && g16(out + 2) == 0x8180 && g16(out + 4) == 1 && g16(out + 6) == 2 &&
                   g16(out + 8) == 0 && g16(out + 10) == 0,
           "header: id, QR RD RA, one question, two A answers (the AAAA skipped)");
        ok(memcmp(out + 12, m + 12, n - 12) == 0, "the question is echoed");
        ok(len == n + 2 * 16, "two 16-byte A records");
        ok(g16(out + n) == 0xc00c && g16(out + n + 2) == DNS_TYPE_A && g16(out + n + 4) == DNS_CLASS_IN &&
                   g16(out + n + 6) == 0 && g16(out + n + 8) == 300 && g16(out + n + 10) == 4 &&
                   out[n + 12] == 0 && out[n + 16 + 12] == 2,
           "A record: pointer, type, class, ttl, the address");

        n = make_query(m, 1, 0, 1, "a.example", DNS_TYPE_AAAA);
        (void) dns_query_parse(m, n, &q);
        ok(dns_answer_build(&q, DNS_RCODE_NOERROR, addrs, ELEMENTSOF(addrs), 60, out, sizeof out, &len) == 0 &&
                   len <= DNS_UDP_MAX && g16(out + 6) == (DNS_UDP_MAX - n) / 28 && g16(out + 2) == 0x8080,
           "AAAA: as many as fit in 512 bytes, no TC; RD not asked, not set");

        ok(dns_answer_build(&q, DNS_RCODE_NXDOMAIN, addrs, 3, 60, out, sizeof out, &len) == 0 && len == n &&
                   (g16(out + 2) & 0xf) == 3 && g16(out + 6) == 0,
           "NXDOMAIN carries no answers");

        /* MX question: empty NOERROR even with addresses offered */
        n = make_query(m, 1, 0, 1, "a.example", 15);
        (void) dns_query_parse(m, n, &q);
        ok(dns_answer_build(&q, DNS_RCODE_NOERROR, addrs, 3, 60, out, sizeof out, &len) == 0 && g16(out + 6) == 0,
           "another type gets no records");

        /* FORMERR for an unreadable question: header only */
        m[5] = 2;
        ok(dns_query_parse(m, n, &q) == -EINVAL, "bad query");
        ok(dns_answer_build(&q, DNS_RCODE_FORMERR, NULL, 0, 0, out, sizeof out, &len) == 0 && len == 12 &&
                   g16(out + 4) == 0 && (g16(out + 2) & 0xf) == 1,
           "FORMERR without a question");

        ok(dns_answer_build(&q, 16, NULL, 0, 0, out, sizeof out, &len) == -EINVAL, "rcode 16 is refused");
        ok(dns_answer_build(&q, 0, NULL, 0, 0, out, 11, &len) == -ENOBUFS, "no room for a header");
}

int main(void) {
        test_parse();
        test_hostile();
        test_answer();
        return done();
}
