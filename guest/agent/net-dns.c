/* SPDX-License-Identifier: Apache-2.0 */

/*
 * The DNS stub on 127.0.0.53:53 that /etc/resolv.conf names (ARCHITECTURE.md, decision 10). A sandbox has no
 * network of its own: A and AAAA questions become RESOLVE on the channel, answered from the host's own
 * resolution and only for names its policy allows; everything else is answered here at once, so that no
 * resolver waits on a question nobody will ask. Messages are parsed and built by lib/dns.c.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../lib/dns.h"
#include "../../lib/macro.h"
#include "net.h"

#define DNS_TTL_DEFAULT 60U
#define DNS_TTL_MAX 86400U
#define DNS_READ_BURST 64

typedef struct DnsPending {
        uint32_t id;
        DnsQuery q;
        struct sockaddr_storage from;
        socklen_t from_len;
        uint64_t deadline_ms;
} DnsPending;

static int stub_fd = -1;
static DnsPending *pending[SPACE_RESOLVES_MAX];
static size_t n_pending;

int dns_stub_fd(void) {
        return stub_fd;
}

bool dns_stub_has(uint32_t id) {
        for (size_t i = 0; i < n_pending; i++)
                if (pending[i]->id == id)
                        return true;
        return false;
}

static void answer(const DnsQuery *q, unsigned rcode, const DnsAddr *addrs, size_t n, uint32_t ttl,
                   const struct sockaddr_storage *to, socklen_t to_len) {
        uint8_t buf[DNS_UDP_MAX];
        size_t len;

        if (dns_answer_build(q, rcode, addrs, n, ttl, buf, sizeof buf, &len) < 0)
                return;
        (void) sendto(stub_fd, buf, len, MSG_DONTWAIT, (const struct sockaddr *) to, to_len);
}

static void pending_free(size_t i) {
        free(pending[i]);
        pending[i] = pending[--n_pending];
}

/* "localhost" and names under it are ours to answer (RFC 6761), not the host's. */
static bool is_localhost(const char *name) {
        size_t l = strlen(name);

        return streq(name, "localhost") || (l > 10 && streq(name + l - 10, ".localhost"));
}

static void question(Channel *c, const uint8_t *p, size_t n, const struct sockaddr_storage *from,
                     socklen_t from_len) {
        DnsQuery q;
        DnsPending *d;
        SpaceBuf kv = {};
        int r;

        r = dns_query_parse(p, n, &q);
        if (r == -EBADMSG)
                return;
        if (r == -EOPNOTSUPP) {
                answer(&q, DNS_RCODE_NOTIMP, NULL, 0, 0, from, from_len);
                return;
        }
        if (r < 0) {
                answer(&q, DNS_RCODE_FORMERR, NULL, 0, 0, from, from_len);
                return;
        }
        if (q.qclass != DNS_CLASS_IN) {
                answer(&q, DNS_RCODE_NOTIMP, NULL, 0, 0, from, from_len);
                return;
        }
        /* MX, TXT, HTTPS, ...: "no such records", at once */
        if ((q.qtype != DNS_TYPE_A && q.qtype != DNS_TYPE_AAAA) || q.name[0] == 0) {
                answer(&q, DNS_RCODE_NOERROR, NULL, 0, 0, from, from_len);
                return;
        }
        if (is_localhost(q.name)) {
                DnsAddr lo[2] = { { .family = AF_INET, .a = { 127, 0, 0, 1 } },
                                  { .family = AF_INET6, .a = { [15] = 1 } } };
                answer(&q, DNS_RCODE_NOERROR, lo, 2, DNS_TTL_MAX, from, from_len);
                return;
        }
        if (!c->host_connected || n_pending >= SPACE_RESOLVES_MAX) {
                answer(&q, DNS_RCODE_SERVFAIL, NULL, 0, 0, from, from_len);
                return;
        }

        d = calloc(1, sizeof *d);
        if (!d) {
                answer(&q, DNS_RCODE_SERVFAIL, NULL, 0, 0, from, from_len);
                return;
        }
        *d = (DnsPending) { .id = net_id_next(), .q = q, .from_len = from_len,
                            .deadline_ms = net_now_ms() + NET_RESOLVE_TIMEOUT_MS };
        memcpy(&d->from, from, from_len);
        (void) space_kv_add(&kv, "name", q.name);
        r = space_kv_add(&kv, "family", q.qtype == DNS_TYPE_A ? "4" : "6");
        if (r >= 0)
                r = channel_send_kv(c, SPACE_F_RESOLVE, d->id, &kv);
        space_buf_done(&kv);
        if (r < 0) {
                answer(&q, DNS_RCODE_SERVFAIL, NULL, 0, 0, from, from_len);
                free(d);
                return;
        }
        pending[n_pending++] = d;
}

void dns_stub_read(Channel *c) {
        for (int i = 0; i < DNS_READ_BURST; i++) {
                struct sockaddr_storage from;
                socklen_t from_len = sizeof from;
                uint8_t buf[DNS_UDP_MAX * 2];
                ssize_t n;

                n = recvfrom(stub_fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *) &from, &from_len);
                if (n < 0)
                        return;
                question(c, buf, (size_t) n, &from, from_len);
        }
}

/* The host's answer: OK(addr=..., ttl=) or ERROR(code=). */
static void host_answer(const DnsPending *d, const SpaceFrameHeader *h, const uint8_t *p) {
        DnsAddr addrs[SPACE_RESOLVE_ADDRS_MAX];
        uint32_t ttl = DNS_TTL_DEFAULT;
        size_t off = 0, klen, n = 0;
        const char *k, *v;
        int r;

        if (h->type == SPACE_F_ERROR) {
                const char *code = NULL, *message = NULL;
                SpaceCode sc;

                (void) space_kv_get(p, h->length, "code", &code);
                (void) space_kv_get(p, h->length, "message", &message);
                net_note_refusal("dns", d->q.name, message ?: code);
                answer(&d->q,
                       space_code_from_string(code, &sc) >= 0 && IN_SET(sc, SPACE_CODE_NXDOMAIN, SPACE_CODE_DENIED)
                               ? DNS_RCODE_NXDOMAIN
                               : DNS_RCODE_SERVFAIL,
                       NULL, 0, 0, &d->from, d->from_len);
                return;
        }

        while ((r = space_kv_next(p, h->length, &off, &k, &klen, &v)) > 0) {
                if (klen == 4 && memcmp(k, "addr", 4) == 0 && n < ELEMENTSOF(addrs)) {
                        if (inet_pton(AF_INET, v, addrs[n].a) == 1)
                                addrs[n++].family = AF_INET;
                        else if (inet_pton(AF_INET6, v, addrs[n].a) == 1)
                                addrs[n++].family = AF_INET6;
                } else if (klen == 3 && memcmp(k, "ttl", 3) == 0) {
                        char *end;
                        unsigned long t = strtoul(v, &end, 10);
                        if (end != v && !*end)
                                ttl = t > DNS_TTL_MAX ? DNS_TTL_MAX : (uint32_t) t;
                }
        }
        answer(&d->q, r < 0 ? DNS_RCODE_SERVFAIL : DNS_RCODE_NOERROR, addrs, n, ttl, &d->from, d->from_len);
}

bool dns_stub_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p) {
        (void) c;
        for (size_t i = 0; i < n_pending; i++) {
                if (pending[i]->id != h->stream)
                        continue;
                if (h->type == SPACE_F_OK || h->type == SPACE_F_ERROR) {
                        host_answer(pending[i], h, p);
                        pending_free(i);
                } else if (h->type == SPACE_F_CLOSE)
                        pending_free(i);
                return true;
        }
        return false;
}

void dns_stub_timeouts(Channel *c, uint64_t now, uint64_t *next) {
        for (size_t i = 0; i < n_pending;) {
                DnsPending *d = pending[i];

                if (d->deadline_ms > now) {
                        if (*next == 0 || d->deadline_ms < *next)
                                *next = d->deadline_ms;
                        i++;
                        continue;
                }
                /* a host that does not know RESOLVE ignores it: fail, and tell it to forget the question */
                answer(&d->q, DNS_RCODE_SERVFAIL, NULL, 0, 0, &d->from, d->from_len);
                (void) channel_send(c, SPACE_F_CLOSE, 0, d->id, NULL, 0);
                pending_free(i);
        }
}

void dns_stub_drop_all(Channel *c) {
        (void) c;
        while (n_pending > 0) {
                DnsPending *d = pending[n_pending - 1];
                answer(&d->q, DNS_RCODE_SERVFAIL, NULL, 0, 0, &d->from, d->from_len);
                pending_free(n_pending - 1);
        }
}

void dns_stub_set_fd(int fd) {
        stub_fd = fd;
}
