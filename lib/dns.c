/* SPDX-License-Identifier: Apache-2.0 */

/* Stub DNS messages: one question in, its answer out (lib/dns.h). */

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "dns.h"

static uint16_t get16(const uint8_t *p) {
        return (uint16_t) (p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v) {
        p[0] = (uint8_t) (v >> 8);
        p[1] = (uint8_t) v;
}

static bool label_char(uint8_t ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
               ch == '_';
}

/* Reads the name at p[off..n) into text (lowercase, dotted). Returns the wire length or -EINVAL. */
static int name_read(const uint8_t *p, size_t n, size_t off, char text[static DNS_NAME_MAX + 1]) {
        size_t start = off, t = 0;

        for (;;) {
                uint8_t l;

                if (off >= n)
                        return -EINVAL;
                l = p[off++];
                if (l == 0)
                        break;
                /* 0xc0: a compression pointer, which a question has nothing to point back at; 0x40, 0x80:
                 * reserved label types */
                if (l > 63 || off + l > n)
                        return -EINVAL;
                if (t + (t > 0) + l > DNS_NAME_MAX)
                        return -EINVAL;
                if (t > 0)
                        text[t++] = '.';
                for (size_t i = 0; i < l; i++) {
                        uint8_t ch = p[off + i];
                        if (!label_char(ch))
                                return -EINVAL;
                        text[t++] = (char) (ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
                }
                off += l;
        }
        text[t] = 0;
        if (off - start > DNS_WIRE_NAME_MAX)
                return -EINVAL;
        return (int) (off - start);
}

int dns_query_parse(const uint8_t *p, size_t n, DnsQuery *ret) {
        uint16_t flags;
        int l;

        if (!p || n < DNS_HEADER_SIZE)
                return -EBADMSG;
        flags = get16(p + 2);
        if (flags & 0x8000)
                return -EBADMSG; /* a response: answering it could start a loop */

        ret->id = get16(p);
        ret->rd = flags & 0x0100;
        ret->qtype = ret->qclass = 0;
        ret->name[0] = 0;
        ret->question_len = 0;

        if (((flags >> 11) & 0xf) != 0)
                return -EOPNOTSUPP;
        if (get16(p + 4) != 1)
                return -EINVAL;

        l = name_read(p, n, DNS_HEADER_SIZE, ret->name);
        if (l < 0)
                return l;
        if (DNS_HEADER_SIZE + (size_t) l + 4 > n) {
                ret->name[0] = 0;
                return -EINVAL;
        }
        ret->qtype = get16(p + DNS_HEADER_SIZE + l);
        ret->qclass = get16(p + DNS_HEADER_SIZE + l + 2);
        ret->question_len = (size_t) l + 4;
        memcpy(ret->question, p + DNS_HEADER_SIZE, ret->question_len);
        return 0;
}

int dns_answer_build(const DnsQuery *q, unsigned rcode, const DnsAddr *addrs, size_t n_addrs, uint32_t ttl,
                     uint8_t *out, size_t size, size_t *ret_len) {
        int family = q->qtype == DNS_TYPE_A ? AF_INET : q->qtype == DNS_TYPE_AAAA ? AF_INET6 : 0;
        size_t alen = family == AF_INET ? 4 : 16, len, count = 0;

        if (rcode > 15)
                return -EINVAL;
        if (q->question_len > sizeof q->question)
                return -EINVAL;
        if (size > DNS_UDP_MAX)
                size = DNS_UDP_MAX;
        len = DNS_HEADER_SIZE + q->question_len;
        if (len > size)
                return -ENOBUFS;

        /* QR, the opcode (QUERY), RD as asked, RA: we do recurse (through the host) */
        put16(out, q->id);
        put16(out + 2, (uint16_t) (0x8000 | (q->rd ? 0x0100 : 0) | 0x0080 | rcode));
        put16(out + 4, q->question_len > 0 ? 1 : 0);
        put16(out + 8, 0);
        put16(out + 10, 0);
        memcpy(out + DNS_HEADER_SIZE, q->question, q->question_len);

        /* Answers only to a good question of class IN: an error answer carries none. */
        if (rcode == DNS_RCODE_NOERROR && q->question_len > 0 && q->qclass == DNS_CLASS_IN && family != 0)
                for (size_t i = 0; i < n_addrs; i++) {
                        uint8_t *r = out + len;

                        if (addrs[i].family != family)
                                continue;
                        if (len + 12 + alen > size)
                                break;
                        put16(r, 0xc000 | DNS_HEADER_SIZE); /* the name: a pointer to the question's */
                        put16(r + 2, q->qtype);
                        put16(r + 4, DNS_CLASS_IN);
                        put16(r + 6, (uint16_t) (ttl >> 16));
                        put16(r + 8, (uint16_t) ttl);
                        put16(r + 10, (uint16_t) alen);
                        memcpy(r + 12, addrs[i].a, alen);
                        len += 12 + alen;
                        count++;
                }
        put16(out + 6, (uint16_t) count);
        *ret_len = len;
        return 0;
}
