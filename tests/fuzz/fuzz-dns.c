/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: the guest DNS stub's messages (lib/dns.c), which any program in the sandbox can send.
 *
 * Input: one query datagram as the stub receives it. The parse result is answered as the stub would, with
 * addresses made from the input's last bytes, for each rcode.
 * Invariants (abort on violation): the parse returns 0, -EBADMSG, -EOPNOTSUPP or -EINVAL and nothing else; a
 * parsed name is lowercase [a-z0-9_-] labels of 1..63 bytes joined by dots, at most 253 bytes, and its wire
 * form (re-encoded) is the question's name, case aside; an answer fits in 512 bytes and the buffer it is
 * given, echoes the id and the question, sets QR, counts only records of the question's type, and carries
 * no record with an rcode other than NOERROR. */

#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "fuzz-util.h"
#include "dns.h"

static void check_name(const DnsQuery *q) {
        size_t l = strlen(q->name), label = 0, wire = 0;
        uint8_t enc[DNS_WIRE_NAME_MAX + 1];

        check(l <= DNS_NAME_MAX);
        for (size_t i = 0; i <= l; i++) {
                char ch = q->name[i];
                if (ch == '.' || ch == 0) {
                        if (l == 0)
                                break;
                        check(label >= 1 && label <= 63);
                        enc[wire] = (uint8_t) label;
                        memcpy(enc + wire + 1, q->name + i - label, label);
                        wire += label + 1;
                        label = 0;
                        continue;
                }
                check((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_');
                label++;
        }
        enc[wire++] = 0;
        check(wire + 4 == q->question_len);
        for (size_t i = 0; i < wire; i++)
                check(enc[i] == q->question[i] || (enc[i] >= 'a' && enc[i] <= 'z' && enc[i] - 32 == q->question[i]));
}

static void check_answer(const DnsQuery *q, unsigned rcode, const DnsAddr *addrs, size_t n, size_t size) {
        uint8_t out[1024];
        size_t len = 0;
        int r;

        r = dns_answer_build(q, rcode, addrs, n, 3600, out, size, &len);
        if (r < 0) {
                check(r == -ENOBUFS && size < 12 + q->question_len);
                return;
        }
        check(len <= size && len <= DNS_UDP_MAX && len >= 12 + q->question_len);
        check((out[0] << 8 | out[1]) == q->id);
        check(out[2] & 0x80);
        check((out[3] & 0xf) == rcode);
        check(memcmp(out + 12, q->question, q->question_len) == 0);
        unsigned an = (unsigned) (out[6] << 8 | out[7]);
        size_t want = 0, rec = q->qtype == DNS_TYPE_A ? 16 : 28;
        for (size_t i = 0; i < n; i++)
                if (addrs[i].family == (q->qtype == DNS_TYPE_A ? AF_INET : AF_INET6))
                        want++;
        if (rcode != DNS_RCODE_NOERROR || q->question_len == 0 || q->qclass != DNS_CLASS_IN ||
            (q->qtype != DNS_TYPE_A && q->qtype != DNS_TYPE_AAAA))
                check(an == 0);
        check(an <= want);
        check(len == 12 + q->question_len + an * rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        DnsAddr addrs[32];
        DnsQuery q;
        size_t n = 0;
        int r;

        if (size > 4096)
                return 0;
        memset(&q, 0xa5, sizeof q);
        r = dns_query_parse(data, size, &q);
        check(r == 0 || r == -EBADMSG || r == -EOPNOTSUPP || r == -EINVAL);
        if (r == -EBADMSG)
                return 0;
        if (r < 0)
                check(q.question_len == 0);
        else {
                check(q.question_len >= 5 && q.question_len <= sizeof q.question && q.question_len + 12 <= size);
                check(memcmp(q.question, data + 12, q.question_len) == 0);
                check_name(&q);
        }

        /* addresses from the tail of the input, both families */
        for (size_t off = size; off >= 17 && n < 32; off -= 17) {
                addrs[n].family = data[off - 17] & 1 ? AF_INET6 : AF_INET;
                memcpy(addrs[n].a, data + off - 16, 16);
                n++;
        }
        for (unsigned rcode = 0; rcode <= 5; rcode++)
                check_answer(&q, rcode, addrs, n, sizeof(uint8_t[1024]));
        check_answer(&q, 0, addrs, n, size % 600);
        return 0;
}
