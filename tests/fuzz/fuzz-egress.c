/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: the egress policy (spaced/egress/egress.c): profile text from spaced.conf or
 * SPACE_EGRESS_PROFILES, IP literals as a guest may write them, and the decisions.
 *
 * Input: two bytes of port (big-endian), a byte of flags (bit 0: the daemon's API is on that port), then
 * profile text up to the first newline (egress_profiles_parse), then one destination per line: a literal
 * (decided as its address) or a name with an address after a space.
 * Invariants (abort on violation): no accepted rule holds a wildcard, and each rule's canonical text parses
 * back to the same rule; a literal's address formats and parses back to itself; an IPv4-mapped address is
 * decided as its IPv4 address; an allowed destination is matched by the allow rule that decided, by no deny
 * rule (denies win, also through an IPv6 form carrying a denied IPv4 address), is never the daemon's own
 * port on loopback, is in a protected class only through an IP rule inside that class's range (never a name,
 * never a wider range), and is on an SMTP port only through a rule that names ports. */

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-util.h"
#include "macro.h"
#include "egress/egress.h"

static bool in(const EgressAddr *a, const EgressAddr *net, unsigned prefix) {
        if (a->family != net->family)
                return false;
        for (unsigned i = 0; i < prefix; i++) {
                uint8_t m = (uint8_t) (0x80 >> (i % 8));
                if ((a->a[i / 8] & m) != (net->a[i / 8] & m))
                        return false;
        }
        return true;
}

static bool ports(const EgressRule *r, uint16_t port) {
        return r->port_min == 0 || (port >= r->port_min && port <= r->port_max);
}

static void check_rules(const EgressRules *rules) {
        for (size_t i = 0; i < rules->n; i++) {
                const EgressRule *r = &rules->rules[i];
                EgressRules again = {};
                Error e = {};

                check(r->text && strchr(r->text, '*') == NULL);
                check(!r->host || strchr(r->host, '*') == NULL);
                /* "allow X" / "deny X": the target parses back to the same rule */
                const char *target = strchr(r->text, ' ');
                check(target);
                check(egress_rule_parse(&again, r->action, target + 1, "again", &e) == 0);
                check(again.n == 1);
                if (!streq(again.rules[0].text, r->text))
                        fprintf(stderr, "rule '%s' parses back as '%s'\n", r->text, again.rules[0].text);
                check(streq(again.rules[0].text, r->text));
                check(again.rules[0].prefix == r->prefix && again.rules[0].port_min == r->port_min &&
                      again.rules[0].port_max == r->port_max);
                egress_rules_done(&again);
                error_done(&e);
        }
}

static void check_decision(const EgressSource *src, size_t n, const EgressQuery *q) {
        EgressDecision d;
        char host[EGRESS_HOST_MAX + 1];
        const char *h = q->host && egress_host_normalize(q->host, host) == 0 ? host : NULL;

        check(egress_decide(src, n, q, &d) == 0);
        check(d.addr.family == AF_INET || d.addr.family == AF_INET6);
        if (!d.allowed)
                return;
        check(d.reason == EGRESS_REASON_ALLOWED && d.rule && d.rule->action == EGRESS_ALLOW);
        check(q->port != 0);
        /* the deciding rule matches */
        check(ports(d.rule, q->port));
        if (d.rule->host)
                check(h && streq(h, d.rule->host));
        else
                check(in(&d.addr, &d.rule->addr, d.rule->prefix));
        /* no deny matches */
        for (size_t s = 0; s < n; s++)
                for (size_t i = 0; i < src[s].rules->n; i++) {
                        const EgressRule *r = &src[s].rules->rules[i];
                        if (r->action != EGRESS_DENY || !ports(r, q->port))
                                continue;
                        if (r->host)
                                check(!h || !streq(h, r->host));
                        else {
                                check(!in(&d.addr, &r->addr, r->prefix));
                                check(!d.cls.has_embedded || !in(&d.cls.embedded, &r->addr, r->prefix));
                        }
                }
        if (q->self_port && q->port == q->self_port)
                check(!IN_SET(d.cls.cls, EGRESS_CLASS_LOOPBACK, EGRESS_CLASS_THIS_NETWORK));
        if (d.cls.cls != EGRESS_CLASS_PUBLIC) {
                check(!d.rule->host);
                check(d.rule->prefix >= d.cls.prefix && in(&d.rule->addr, &d.cls.range, d.cls.prefix));
        }
        if (IN_SET(q->port, 25, 465, 587))
                check(d.rule->port_min != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        EgressConfig cfg = {};
        Error e = {};
        char *text, *save = NULL, *nl;
        uint16_t port, self;

        if (size < 3 || size > 8192)
                return 0;
        port = (uint16_t) (data[0] << 8 | data[1]);
        self = (data[2] & 1) ? port : 0;
        text = strndup((const char *) data + 3, size - 3);
        if (!text)
                return 0;
        nl = strchr(text, '\n');
        if (nl)
                *nl = 0;

        if (egress_profiles_parse(&cfg, text, &e) < 0)
                check(e.message != NULL);
        error_done(&e);
        (void) egress_rules_parse(&cfg.base, text, "base", &e);
        error_done(&e);
        check_rules(&cfg.base);
        for (size_t i = 0; i < cfg.n_profiles; i++)
                check_rules(&cfg.profiles[i].rules);

        EgressSource src[EGRESS_PROFILES_MAX + 1];
        size_t n = 0;
        src[n++] = (EgressSource) { "base", &cfg.base };
        for (size_t i = 0; i < cfg.n_profiles; i++)
                src[n++] = (EgressSource) { cfg.profiles[i].name, &cfg.profiles[i].rules };

        for (char *line = nl ? strtok_r(nl + 1, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
                EgressQuery q = { .port = port, .self_port = self };
                char *space = strchr(line, ' '), buf[EGRESS_ADDR_STRLEN];
                EgressAddr again;

                if (space) {
                        *space = 0;
                        q.host = line;
                        line = space + 1;
                }
                if (egress_addr_parse_literal(line, &q.addr) < 0)
                        continue;
                egress_addr_format(&q.addr, buf);
                check(egress_addr_parse_literal(buf, &again) == 0);
                check(again.family == q.addr.family && memcmp(again.a, q.addr.a, 16) == 0);
                check_decision(src, n, &q);

                if (q.addr.family == AF_INET) {
                        /* ::ffff:a.b.c.d is decided as a.b.c.d */
                        EgressQuery m = q;
                        EgressDecision d4, d6;

                        m.addr = (EgressAddr) { .family = AF_INET6, .a = { [10] = 0xff, [11] = 0xff } };
                        memcpy(m.addr.a + 12, q.addr.a, 4);
                        check_decision(src, n, &m);
                        check(egress_decide(src, n, &q, &d4) == 0 && egress_decide(src, n, &m, &d6) == 0);
                        check(d4.allowed == d6.allowed && d4.reason == d6.reason && d4.rule == d6.rule);
                        /* and NAT64 or 6to4 forms of a protected address are protected too */
                        EgressClassification c4, c6;
                        egress_classify(&q.addr, &c4);
                        m.addr = (EgressAddr) { .family = AF_INET6, .a = { 0x00, 0x64, 0xff, 0x9b } };
                        memcpy(m.addr.a + 12, q.addr.a, 4);
                        egress_classify(&m.addr, &c6);
                        check(c6.cls == c4.cls);
                        m.addr = (EgressAddr) { .family = AF_INET6, .a = { 0x20, 0x02 } };
                        memcpy(m.addr.a + 2, q.addr.a, 4);
                        egress_classify(&m.addr, &c6);
                        check(c6.cls == c4.cls);
                        check_decision(src, n, &m);
                }
        }
        egress_config_done(&cfg);
        free(text);
        return 0;
}
