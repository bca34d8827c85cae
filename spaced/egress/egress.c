/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress.h"
#include "macro.h"
#include "string-util.h"

/* The egress policy (ARCHITECTURE.md, decision 10; space-egress(5)). Everything here is pure: the gateway
 * and the API call it with what they resolved. */

static const uint16_t smtp_ports[] = { 25, 465, 587 };

void egress_rules_done(EgressRules *r) {
        for (size_t i = 0; i < r->n; i++) {
                free(r->rules[i].host);
                free(r->rules[i].text);
        }
        free(r->rules);
        *r = (EgressRules) {};
}

void egress_config_done(EgressConfig *c) {
        egress_rules_done(&c->base);
        for (size_t i = 0; i < c->n_profiles; i++) {
                free(c->profiles[i].name);
                egress_rules_done(&c->profiles[i].rules);
                for (size_t k = 0; k < c->profiles[i].n_bindings; k++)
                        egress_binding_done(&c->profiles[i].bindings[k]);
                free(c->profiles[i].bindings);
        }
        free(c->profiles);
        *c = (EgressConfig) {};
}

bool egress_profile_name_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;

        if (n == 0 || n > EGRESS_PROFILE_NAME_MAX || !(islower((unsigned char) s[0]) || isdigit((unsigned char) s[0])))
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

/* ---- IP literals ---- */

/* One part of an inet_aton address: decimal, octal with a leading 0, hex with 0x. */
static int parse_aton_part(const char *s, size_t n, uint64_t *ret) {
        unsigned base = 10;
        uint64_t v = 0;

        if (n == 0)
                return -EINVAL;
        if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
                base = 16;
                s += 2;
                n -= 2;
                if (n == 0) /* "0x" alone is 0 to inet_aton */
                        return *ret = 0, 0;
        } else if (n >= 2 && s[0] == '0')
                base = 8;
        for (size_t i = 0; i < n; i++) {
                int d;
                char c = (char) tolower((unsigned char) s[i]);

                if (c >= '0' && c <= '9')
                        d = c - '0';
                else if (c >= 'a' && c <= 'f')
                        d = c - 'a' + 10;
                else
                        return -EINVAL;
                if ((unsigned) d >= base)
                        return -EINVAL;
                v = v * base + (unsigned) d;
                if (v > UINT32_MAX)
                        return -ERANGE;
        }
        *ret = v;
        return 0;
}

/* inet_aton's grammar, without its tolerance of trailing garbage: a, a.b, a.b.c, a.b.c.d where the last part
 * fills the bytes that are left. */
static int parse_ipv4_aton(const char *s, uint8_t ret[4]) {
        uint64_t parts[4];
        unsigned n = 0;
        uint32_t v;

        for (const char *p = s;;) {
                size_t len = strcspn(p, ".");

                if (n == 4 || parse_aton_part(p, len, &parts[n]) < 0)
                        return -EINVAL;
                n++;
                if (!p[len])
                        break;
                p += len + 1;
        }
        for (unsigned i = 0; i + 1 < n; i++)
                if (parts[i] > 255)
                        return -EINVAL;
        if (parts[n - 1] > (UINT32_MAX >> (8 * (n - 1))))
                return -EINVAL;
        v = (uint32_t) parts[n - 1];
        for (unsigned i = 0; i + 1 < n; i++)
                v |= (uint32_t) parts[i] << (24 - 8 * i);
        ret[0] = (uint8_t) (v >> 24);
        ret[1] = (uint8_t) (v >> 16);
        ret[2] = (uint8_t) (v >> 8);
        ret[3] = (uint8_t) v;
        return 0;
}

int egress_addr_parse_literal(const char *s, EgressAddr *ret) {
        char buf[EGRESS_ADDR_STRLEN + 2];
        size_t n = s ? strlen(s) : 0;

        if (n == 0 || n >= sizeof buf)
                return -EINVAL;
        if (s[0] == '[') {
                if (n < 3 || s[n - 1] != ']')
                        return -EINVAL;
                memcpy(buf, s + 1, n - 2);
                buf[n - 2] = 0;
        } else
                memcpy(buf, s, n + 1);

        *ret = (EgressAddr) {};
        if (strchr(buf, ':')) {
                /* no zone ids (fe80::1%eth0): a guest names no host interface */
                if (inet_pton(AF_INET6, buf, ret->a) != 1)
                        return -EINVAL;
                ret->family = AF_INET6;
                return 0;
        }
        if (s[0] == '[' || parse_ipv4_aton(buf, ret->a) < 0)
                return -EINVAL;
        ret->family = AF_INET;
        return 0;
}

void egress_addr_format(const EgressAddr *a, char buf[static EGRESS_ADDR_STRLEN]) {
        if (!inet_ntop(a->family == AF_INET ? AF_INET : AF_INET6, a->a, buf, EGRESS_ADDR_STRLEN))
                snprintf(buf, EGRESS_ADDR_STRLEN, "?");
}

/* ---- names ---- */

bool egress_host_is_numeric(const char *s) {
        const char *last;
        size_t n;

        if (!s)
                return false;
        n = strlen(s);
        if (n > 0 && s[n - 1] == '.')
                n--;
        if (n == 0)
                return false;
        /* the last label, as WHATWG URL parsers decide "ends in a number" */
        last = s + n;
        while (last > s && last[-1] != '.')
                last--;
        n = (size_t) (s + n - last);
        if (n == 0)
                return false;
        if (n >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X')) {
                for (size_t i = 2; i < n; i++)
                        if (!isxdigit((unsigned char) last[i]))
                                return false;
                return true;
        }
        for (size_t i = 0; i < n; i++)
                if (!isdigit((unsigned char) last[i]))
                        return false;
        return true;
}

int egress_host_normalize(const char *s, char ret[static EGRESS_HOST_MAX + 1]) {
        size_t n = s ? strlen(s) : 0, label = 0;

        if (n > 0 && s[n - 1] == '.')
                n--;
        if (n == 0)
                return -EINVAL;
        if (n > EGRESS_HOST_MAX)
                return -ENAMETOOLONG;
        for (size_t i = 0; i < n; i++) {
                char c = (char) tolower((unsigned char) s[i]);

                if (c == '.') {
                        if (label == 0 || ret[i - 1] == '-')
                                return -EINVAL;
                        label = 0;
                } else if (isalnum((unsigned char) c) || c == '_' || (c == '-' && label > 0)) {
                        if (++label > 63)
                                return -EINVAL;
                } else
                        return -EINVAL;   /* '*' among them: wildcards are no exact name */
                ret[i] = c;
        }
        if (label == 0 || ret[n - 1] == '-')   /* "a.." : an empty last label */
                return -EINVAL;
        ret[n] = 0;
        return egress_host_is_numeric(ret) ? -EINVAL : 0;
}

/* ---- rules ---- */

static bool addr_in(const EgressAddr *a, const EgressAddr *net, unsigned prefix) {
        unsigned full = prefix / 8, rest = prefix % 8;

        if (a->family != net->family)
                return false;
        if (memcmp(a->a, net->a, full) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t mask = (uint8_t) (0xff << (8 - rest));
        return (a->a[full] & mask) == (net->a[full] & mask);
}

static unsigned family_bits(int family) {
        return family == AF_INET ? 32 : 128;
}

static bool has_host_bits(const EgressAddr *a, unsigned prefix) {
        unsigned bits = family_bits(a->family);

        for (unsigned i = prefix; i < bits; i++)
                if (a->a[i / 8] & (0x80 >> (i % 8)))
                        return true;
        return false;
}

static int rules_add(EgressRules *rules, EgressRule *rule) {
        EgressRule *n;

        if (rules->n >= EGRESS_RULES_MAX)
                return -E2BIG;
        n = reallocarray(rules->rules, rules->n + 1, sizeof *n);
        if (!n)
                return -ENOMEM;
        rules->rules = n;
        rules->rules[rules->n++] = *rule;
        *rule = (EgressRule) {};
        return 0;
}

static int parse_ports(const char *s, uint16_t *ret_min, uint16_t *ret_max) {
        unsigned long a, b;
        char *end;

        if (!isdigit((unsigned char) *s))
                return -EINVAL;
        errno = 0;
        a = strtoul(s, &end, 10);
        if (errno || a < 1 || a > 65535)
                return -EINVAL;
        b = a;
        if (*end == '-') {
                if (!isdigit((unsigned char) end[1]))
                        return -EINVAL;
                b = strtoul(end + 1, &end, 10);
                if (errno || b < a || b > 65535)
                        return -EINVAL;
        }
        if (*end)
                return -EINVAL;
        *ret_min = (uint16_t) a;
        *ret_max = (uint16_t) b;
        return 0;
}

static int rule_set_text(EgressRule *rule) {
        char addr[EGRESS_ADDR_STRLEN], ports[16] = "";
        const char *verb = rule->action == EGRESS_ALLOW ? "allow" : "deny";
        int r;

        if (rule->port_min == rule->port_max && rule->port_min)
                snprintf(ports, sizeof ports, ":%u", rule->port_min);
        else if (rule->port_min)
                snprintf(ports, sizeof ports, ":%u-%u", rule->port_min, rule->port_max);
        if (rule->host)
                r = asprintf(&rule->text, "%s %s%s", verb, rule->host, ports);
        else {
                bool v6 = rule->addr.family == AF_INET6;
                bool whole = rule->prefix == family_bits(rule->addr.family);
                char len[8] = "";

                egress_addr_format(&rule->addr, addr);
                if (!whole)
                        snprintf(len, sizeof len, "/%u", rule->prefix);
                r = asprintf(&rule->text, "%s %s%s%s%s%s", verb, v6 && *ports ? "[" : "", addr, len,
                             v6 && *ports ? "]" : "", ports);
        }
        if (r < 0) {
                rule->text = NULL;
                return -ENOMEM;
        }
        return 0;
}

static int bad_rule(Error *reterr, const char *where, EgressAction action, const char *target, const char *why) {
        return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s: rule '%s %s': %s", where,
                         action == EGRESS_ALLOW ? "allow" : "deny", target, why) ?: -EINVAL;
}

/* An address or a network: canonical forms only (a config says what it means; odd forms are for guests). */
static int parse_network(const char *s, EgressAddr *ret, unsigned *ret_prefix, const char **ret_why) {
        char buf[EGRESS_ADDR_STRLEN + 8];
        const char *slash;
        unsigned long prefix;
        char *end;

        if (strlen(s) >= sizeof buf)
                return *ret_why = "not an address", -EINVAL;
        strcpy(buf, s);
        slash = strchr(buf, '/');
        if (slash)
                buf[slash - buf] = 0;
        *ret = (EgressAddr) {};
        if (inet_pton(AF_INET6, buf, ret->a) == 1)
                ret->family = AF_INET6;
        else if (inet_pton(AF_INET, buf, ret->a) == 1)
                ret->family = AF_INET;
        else
                return *ret_why = "not an IP address: write IPv4 as four decimal numbers (10.0.0.1), IPv6 in "
                                  "its usual form", -EINVAL;
        prefix = family_bits(ret->family);
        if (slash) {
                const char *p = s + (slash - buf) + 1;

                errno = 0;
                prefix = strtoul(p, &end, 10);
                if (!isdigit((unsigned char) *p) || errno || *end || prefix > family_bits(ret->family))
                        return *ret_why = "bad prefix length", -EINVAL;
                if (has_host_bits(ret, (unsigned) prefix))
                        return *ret_why = "the address has bits set beyond the prefix length: write the network "
                                          "address (10.1.0.0/16, not 10.1.2.3/16)", -EINVAL;
        }
        *ret_prefix = (unsigned) prefix;
        return 0;
}

int egress_rule_parse(EgressRules *rules, EgressAction action, const char *target, const char *where, Error *reterr) {
        _cleanup_free_ char *copy = NULL;
        EgressRule rule = { .action = action };
        char *host, *ports = NULL, name[EGRESS_HOST_MAX + 1];
        const char *why = NULL;
        int r;

        copy = strdup(target ?: "");
        if (!copy)
                return -ENOMEM;
        host = string_strip(copy);
        if (!*host)
                return bad_rule(reterr, where, action, target ?: "", "empty target");
        if (strchr(host, '*'))
                return bad_rule(reterr, where, action, host,
                                "wildcard domains are not allowed: name each host exactly (example.com, "
                                "www.example.com), or an IP range");
        if (strpbrk(host, " \t,;"))
                return bad_rule(reterr, where, action, host, "one target per rule, separated by ','");

        if (host[0] == '[') {
                char *close = strchr(host, ']');
                if (!close)
                        return bad_rule(reterr, where, action, host, "no ']' after the IPv6 address");
                *close = 0;
                if (close[1] == ':')
                        ports = close + 2;
                else if (close[1])
                        return bad_rule(reterr, where, action, target, "expected ':PORT' after ']'");
                host++;
                if (!strchr(host, ':'))
                        return bad_rule(reterr, where, action, target, "only IPv6 addresses go in brackets");
        } else {
                char *colon = strchr(host, ':');
                if (colon && !strchr(colon + 1, ':')) {
                        *colon = 0;
                        ports = colon + 1;
                }
                /* two colons or more: a bare IPv6 address (ports need brackets) */
        }
        if (ports && parse_ports(ports, &rule.port_min, &rule.port_max) < 0)
                return bad_rule(reterr, where, action, target, "bad port: 1 to 65535, or a range N-M");

        /* anything with ':' or '/', or whose last label is a number, is meant as an address */
        if (strchr(host, ':') || strchr(host, '/') || egress_host_is_numeric(host)) {
                if (parse_network(host, &rule.addr, &rule.prefix, &why) < 0)
                        return bad_rule(reterr, where, action, target, why);
        } else if (egress_host_normalize(host, name) == 0) {
                rule.host = strdup(name);
                if (!rule.host)
                        return -ENOMEM;
        } else
                return bad_rule(reterr, where, action, target,
                                "not an exact host name, IP address or network (letters, digits, '-', '_' and "
                                "dots, at most 253 bytes; internationalised names as xn--)");
        r = rule_set_text(&rule);
        if (r >= 0)
                r = rules_add(rules, &rule);
        if (r < 0) {
                free(rule.host);
                free(rule.text);
                if (r == -E2BIG)
                        return error_set(reterr, ERROR_LIMIT_EXCEEDED, "%s: more than %d rules", where,
                                         EGRESS_RULES_MAX) ?: r;
        }
        return r;
}

/* "allow A, B" or "deny A" */
static int parse_clause(EgressRules *rules, char *clause, const char *where, Error *reterr) {
        EgressAction action;
        char *p, *save = NULL;
        size_t verb;

        clause = string_strip(clause);
        if (!*clause)
                return 0;
        verb = strcspn(clause, " \t");
        if (verb == 5 && strncmp(clause, "allow", 5) == 0)
                action = EGRESS_ALLOW;
        else if (verb == 4 && strncmp(clause, "deny", 4) == 0)
                action = EGRESS_DENY;
        else
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                 "%s: '%s': expected 'allow TARGET[, TARGET...]' or 'deny TARGET[, ...]'", where,
                                 clause) ?: -EINVAL;
        p = clause + verb;
        if (!*string_strip(p))
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s: '%s' names no target", where, clause) ?: -EINVAL;
        for (char *t = strtok_r(p, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int r = egress_rule_parse(rules, action, t, where, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

int egress_rules_parse(EgressRules *rules, const char *text, const char *where, Error *reterr) {
        _cleanup_free_ char *copy = strdup(text ?: "");
        char *save = NULL;

        if (!copy)
                return -ENOMEM;
        for (char *c = strtok_r(copy, ";", &save); c; c = strtok_r(NULL, ";", &save)) {
                int r = parse_clause(rules, c, where, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

const EgressProfile *egress_profile_find(const EgressConfig *c, const char *name) {
        for (size_t i = 0; name && i < c->n_profiles; i++)
                if (streq(c->profiles[i].name, name))
                        return &c->profiles[i];
        return NULL;
}

int egress_profile_get(EgressConfig *c, const char *name, EgressProfile **ret, Error *reterr) {
        EgressProfile *n;

        for (size_t i = 0; i < c->n_profiles; i++)
                if (streq(c->profiles[i].name, name))
                        return *ret = &c->profiles[i], 0;
        if (!egress_profile_name_valid(name))
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                 "'%s' is not a profile name: 1 to %d lowercase letters, digits, '_', '.' or '-', "
                                 "starting with a letter or digit", name, EGRESS_PROFILE_NAME_MAX) ?: -EINVAL;
        if (c->n_profiles >= EGRESS_PROFILES_MAX)
                return error_set(reterr, ERROR_LIMIT_EXCEEDED, "more than %d egress profiles",
                                 EGRESS_PROFILES_MAX) ?: -E2BIG;
        n = reallocarray(c->profiles, c->n_profiles + 1, sizeof *n);
        if (!n)
                return -ENOMEM;
        c->profiles = n;
        n[c->n_profiles] = (EgressProfile) { .name = strdup(name) };
        if (!n[c->n_profiles].name)
                return -ENOMEM;
        *ret = &n[c->n_profiles++];
        return 0;
}

/* text is "NAME: clauses"; *ret_profile the profile it named. */
static int profile_segment(EgressConfig *c, char *text, EgressProfile **ret_profile, Error *reterr) {
        _cleanup_free_ char *where = NULL;
        EgressProfile *p = NULL;
        char *colon = strchr(text, ':'), *name;
        int r;

        if (!colon)
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                 "'%s': expected 'NAME: allow TARGET[, ...][; deny TARGET[, ...]]'", text) ?: -EINVAL;
        *colon = 0;
        name = string_strip(text);
        r = egress_profile_get(c, name, &p, reterr);
        if (r < 0)
                return r;
        if (asprintf(&where, "egress profile %s", name) < 0)
                return -ENOMEM;
        r = parse_clause(&p->rules, colon + 1, where, reterr);
        if (r < 0)
                return r;
        *ret_profile = p;
        return 0;
}

int egress_profile_parse(EgressConfig *c, const char *text, Error *reterr) {
        _cleanup_free_ char *copy = strdup(text ?: "");
        _cleanup_free_ char *where = NULL;
        EgressProfile *p = NULL;
        char *save = NULL, *first;
        int r;

        if (!copy)
                return -ENOMEM;
        first = strtok_r(copy, ";", &save);
        if (!first)
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                 "expected 'NAME: allow TARGET[, ...][; deny TARGET[, ...]]'") ?: -EINVAL;
        r = profile_segment(c, first, &p, reterr);
        if (r < 0)
                return r;
        if (asprintf(&where, "egress profile %s", p->name) < 0)
                return -ENOMEM;
        for (char *s = strtok_r(NULL, ";", &save); s; s = strtok_r(NULL, ";", &save)) {
                r = parse_clause(&p->rules, s, where, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A segment that starts a profile: its first word ends with ':' ("pypi:", "pypi :"), where a clause starts
 * with allow or deny and a space. */
static bool starts_profile(const char *s) {
        size_t n;

        s += strspn(s, " \t\n");
        n = strcspn(s, " \t\n:");
        return n > 0 && s[n + strspn(s + n, " \t")] == ':' && !(n == 5 && strncmp(s, "allow", 5) == 0) &&
               !(n == 4 && strncmp(s, "deny", 4) == 0);
}

int egress_profiles_parse(EgressConfig *c, const char *text, Error *reterr) {
        _cleanup_free_ char *copy = strdup(text ?: "");
        EgressProfile *p = NULL;
        char *save = NULL;
        int r;

        if (!copy)
                return -ENOMEM;
        for (char *s = strtok_r(copy, ";\n", &save); s; s = strtok_r(NULL, ";\n", &save)) {
                _cleanup_free_ char *where = NULL;

                if (!*string_strip(s))
                        continue;
                if (starts_profile(s)) {
                        r = profile_segment(c, s, &p, reterr);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (!p)
                        return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                         "'%s': rules before any 'NAME:' that says whose they are", s) ?: -EINVAL;
                if (asprintf(&where, "egress profile %s", p->name) < 0)
                        return -ENOMEM;
                r = parse_clause(&p->rules, s, where, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

int egress_set_defaults(EgressConfig *c, const char *names, Error *reterr) {
        _cleanup_free_ char *copy = strdup(names ?: "");
        char *save = NULL;

        if (!copy)
                return -ENOMEM;
        for (char *n = strtok_r(copy, ", \t", &save); n; n = strtok_r(NULL, ", \t", &save)) {
                EgressProfile *p = (EgressProfile *) egress_profile_find(c, n);
                if (!p)
                        return error_set(reterr, ERROR_EGRESS_PROFILE_NOT_FOUND,
                                         "egress_default names profile '%s', which no egress_profile defines", n)
                                       ?: -ENOENT;
                p->is_default = true;
        }
        return 0;
}

static bool strv_has(char *const *l, const char *s) {
        for (; l && *l; l++)
                if (streq(*l, s))
                        return true;
        return false;
}

int egress_profiles_select(const EgressConfig *c, char *const *requested, char ***ret, Error *reterr) {
        _cleanup_strv_free_ char **l = calloc(1, sizeof(char *));

        if (!l)
                return -ENOMEM;
        if (!requested) {
                for (size_t i = 0; i < c->n_profiles; i++)
                        if (c->profiles[i].is_default && strv_extend(&l, c->profiles[i].name) < 0)
                                return -ENOMEM;
        } else
                for (char *const *n = requested; *n; n++) {
                        if (!egress_profile_find(c, *n)) {
                                _cleanup_free_ char *known = NULL;
                                size_t len = 0;

                                for (size_t i = 0; i < c->n_profiles; i++)
                                        len += strlen(c->profiles[i].name) + 2;
                                known = calloc(1, len + 1);
                                for (size_t i = 0; known && i < c->n_profiles; i++) {
                                        if (i)
                                                strcat(known, ", ");
                                        strcat(known, c->profiles[i].name);
                                }
                                return error_set(reterr, ERROR_EGRESS_PROFILE_NOT_FOUND,
                                                 "no egress profile '%s' (the daemon has: %s); see spacectl egress ls",
                                                 *n, known && *known ? known : "none") ?: -ENOENT;
                        }
                        if (!strv_has(l, *n) && strv_extend(&l, *n) < 0)
                                return -ENOMEM;
                }
        *ret = TAKE_PTR(l);
        return 0;
}

int egress_list_check(char *const *list, EgressAction action, const char *what, Error *reterr) {
        EgressRules rules = {};
        int r = 0;

        for (char *const *t = list; t && *t && r >= 0; t++)
                r = egress_rule_parse(&rules, action, *t, what, reterr);
        egress_rules_done(&rules);
        return r;
}

/* E2B's network options onto a sandbox's own lists. In E2B an allowOut entry wins over a denyOut entry that
 * holds it (denyOut ["0.0.0.0/0"] with allowOut ["1.1.1.1"] means "only 1.1.1.1"), and allow_internet_access
 * false is denyOut everything. Here denies win and everything not allowed is denied already, so a deny that
 * holds one of the allows is what E2B means by "nothing else": it is dropped, and only the allows open
 * anything. A deny that holds no allow stays, and wins over the sandbox's profiles too. */
static bool rule_holds(const EgressRule *outer, const EgressRule *inner) {
        if (outer->host)
                return inner->host && streq(outer->host, inner->host);
        if (inner->host)
                return outer->prefix == 0; /* a name may resolve anywhere: only "all of it" surely holds it */
        return inner->addr.family == outer->addr.family && inner->prefix >= outer->prefix &&
               addr_in(&inner->addr, &outer->addr, outer->prefix);
}

int egress_lists_from_e2b(char *const *allow_out, char *const *deny_out, bool internet, char ***ret_allow,
                          char ***ret_deny, Error *reterr) {
        _cleanup_(egress_rules_done) EgressRules allows = {}, denies = {};
        _cleanup_strv_free_ char **allow = NULL, **deny = NULL;
        int r;

        for (char *const *t = allow_out; t && *t; t++) {
                r = egress_rule_parse(&allows, EGRESS_ALLOW, *t, "network.allowOut", reterr);
                if (r < 0)
                        return r;
                if (strv_extend(&allow, *t) < 0)
                        return -ENOMEM;
        }
        for (char *const *t = deny_out; t && *t; t++) {
                r = egress_rule_parse(&denies, EGRESS_DENY, *t, "network.denyOut", reterr);
                if (r < 0)
                        return r;
        }
        if (!internet) {
                r = egress_rule_parse(&denies, EGRESS_DENY, "0.0.0.0/0", "allow_internet_access", reterr);
                if (r >= 0)
                        r = egress_rule_parse(&denies, EGRESS_DENY, "::/0", "allow_internet_access", reterr);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < denies.n; i++) {
                bool holds = false;

                for (size_t j = 0; j < allows.n && !holds; j++)
                        holds = rule_holds(&denies.rules[i], &allows.rules[j]);
                if (!holds && strv_extend(&deny, denies.rules[i].text + strlen("deny ")) < 0)
                        return -ENOMEM;
        }
        *ret_allow = TAKE_PTR(allow);
        *ret_deny = TAKE_PTR(deny);
        return 0;
}

/* ---- address classes ---- */

typedef struct ClassRange {
        EgressClass cls;
        int family;
        uint8_t a[16];
        unsigned prefix;
} ClassRange;

/* Most specific first: the first range that holds an address is its class. */
static const ClassRange class_ranges[] = {
        { EGRESS_CLASS_METADATA, AF_INET, { 169, 254, 169, 254 }, 32 },
        { EGRESS_CLASS_BROADCAST, AF_INET, { 255, 255, 255, 255 }, 32 },
        { EGRESS_CLASS_THIS_NETWORK, AF_INET, { 0 }, 8 },
        { EGRESS_CLASS_LOOPBACK, AF_INET, { 127 }, 8 },
        { EGRESS_CLASS_PRIVATE, AF_INET, { 10 }, 8 },
        { EGRESS_CLASS_PRIVATE, AF_INET, { 172, 16 }, 12 },
        { EGRESS_CLASS_PRIVATE, AF_INET, { 192, 168 }, 16 },
        { EGRESS_CLASS_SHARED, AF_INET, { 100, 64 }, 10 },
        { EGRESS_CLASS_LINK_LOCAL, AF_INET, { 169, 254 }, 16 },
        { EGRESS_CLASS_RESERVED, AF_INET, { 192, 0, 0 }, 24 },   /* IETF protocol assignments */
        { EGRESS_CLASS_DOCUMENTATION, AF_INET, { 192, 0, 2 }, 24 },
        { EGRESS_CLASS_DOCUMENTATION, AF_INET, { 198, 51, 100 }, 24 },
        { EGRESS_CLASS_DOCUMENTATION, AF_INET, { 203, 0, 113 }, 24 },
        { EGRESS_CLASS_BENCHMARKING, AF_INET, { 198, 18 }, 15 },
        { EGRESS_CLASS_MULTICAST, AF_INET, { 224 }, 4 },
        { EGRESS_CLASS_RESERVED, AF_INET, { 240 }, 4 },
        { EGRESS_CLASS_THIS_NETWORK, AF_INET6, { 0 }, 128 },
        { EGRESS_CLASS_LOOPBACK, AF_INET6, { [15] = 1 }, 128 },
        { EGRESS_CLASS_METADATA, AF_INET6, { 0xfd, 0x00, 0x0e, 0xc2, [15] = 0x54, [14] = 0x02 }, 128 },
        { EGRESS_CLASS_NAT64_LOCAL, AF_INET6, { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48 },
        { EGRESS_CLASS_RESERVED, AF_INET6, { 0x01, 0x00 }, 64 },             /* 100::/64 discard-only */
        { EGRESS_CLASS_BENCHMARKING, AF_INET6, { 0x20, 0x01, 0x00, 0x02, 0x00, 0x00 }, 48 },
        { EGRESS_CLASS_DOCUMENTATION, AF_INET6, { 0x20, 0x01, 0x0d, 0xb8 }, 32 },
        { EGRESS_CLASS_DOCUMENTATION, AF_INET6, { 0x3f, 0xff }, 20 },
        { EGRESS_CLASS_LINK_LOCAL, AF_INET6, { 0xfe, 0x80 }, 10 },
        { EGRESS_CLASS_PRIVATE, AF_INET6, { 0xfe, 0xc0 }, 10 },               /* site-local, deprecated */
        { EGRESS_CLASS_UNIQUE_LOCAL, AF_INET6, { 0xfc }, 7 },
        { EGRESS_CLASS_MULTICAST, AF_INET6, { 0xff }, 8 },
};

static const char *const class_names[_EGRESS_CLASS_MAX] = {
        [EGRESS_CLASS_PUBLIC] = "public",
        [EGRESS_CLASS_THIS_NETWORK] = "this-network",
        [EGRESS_CLASS_LOOPBACK] = "loopback",
        [EGRESS_CLASS_PRIVATE] = "private",
        [EGRESS_CLASS_SHARED] = "shared",
        [EGRESS_CLASS_LINK_LOCAL] = "link-local",
        [EGRESS_CLASS_METADATA] = "metadata",
        [EGRESS_CLASS_UNIQUE_LOCAL] = "unique-local",
        [EGRESS_CLASS_MULTICAST] = "multicast",
        [EGRESS_CLASS_BROADCAST] = "broadcast",
        [EGRESS_CLASS_DOCUMENTATION] = "documentation",
        [EGRESS_CLASS_BENCHMARKING] = "benchmarking",
        [EGRESS_CLASS_RESERVED] = "reserved",
        [EGRESS_CLASS_NAT64_LOCAL] = "nat64-local-use",
};

const char *egress_class_to_string(EgressClass c) {
        return (unsigned) c < _EGRESS_CLASS_MAX ? class_names[c] : "?";
}

static bool plain_class(const EgressAddr *a, EgressClassification *ret) {
        for (size_t i = 0; i < ELEMENTSOF(class_ranges); i++) {
                const ClassRange *c = &class_ranges[i];
                EgressAddr net = { .family = c->family };

                memcpy(net.a, c->a, sizeof net.a);
                if (addr_in(a, &net, c->prefix)) {
                        ret->cls = c->cls;
                        ret->range = net;
                        ret->prefix = c->prefix;
                        return true;
                }
        }
        return false;
}

/* IPv4 addresses inside IPv6 ones: where they sit (a bit offset) and what the form is called. */
typedef struct Embedding {
        const char *via;
        uint8_t prefix_bytes[16];
        unsigned prefix;        /* of the IPv6 form */
        unsigned offset;        /* bit offset of the IPv4 address */
        bool xor;               /* Teredo's client address is inverted */
} Embedding;

static const Embedding embeddings[] = {
        { "IPv4-mapped", { [10] = 0xff, [11] = 0xff }, 96, 96, false },
        { "IPv4-translated", { [8] = 0xff, [9] = 0xff }, 96, 96, false },
        { "NAT64", { 0x00, 0x64, 0xff, 0x9b }, 96, 96, false },
        { "IPv4-compatible", { 0 }, 96, 96, false },
        { "6to4", { 0x20, 0x02 }, 16, 16, false },
        { "Teredo server", { 0x20, 0x01, 0x00, 0x00 }, 32, 32, false },
        { "Teredo client", { 0x20, 0x01, 0x00, 0x00 }, 32, 96, true },
};

static void get_v4(const EgressAddr *a, unsigned offset, bool xor, EgressAddr *ret) {
        *ret = (EgressAddr) { .family = AF_INET };
        for (unsigned i = 0; i < 32; i++) {
                unsigned bit = offset + i;
                if (a->a[bit / 8] & (0x80 >> (bit % 8)))
                        ret->a[i / 8] |= (uint8_t) (0x80 >> (i % 8));
        }
        if (xor)
                for (unsigned i = 0; i < 4; i++)
                        ret->a[i] ^= 0xff;
}

/* The IPv6 range an embedded IPv4 class spans: the embedding's prefix, then the class's bits at offset.
 * Teredo's scattered form gives the whole address (/128): only an exact rule names it. */
static void embedded_range(const EgressAddr *a, const Embedding *e, const EgressClassification *v4,
                           EgressClassification *ret) {
        ret->range = (EgressAddr) { .family = AF_INET6 };
        if (e->xor || e->offset != e->prefix) {
                ret->range = *a;
                ret->prefix = 128;
                return;
        }
        memcpy(ret->range.a, e->prefix_bytes, sizeof ret->range.a);
        for (unsigned i = 0; i < v4->prefix; i++)
                if (v4->range.a[i / 8] & (0x80 >> (i % 8))) {
                        unsigned bit = e->offset + i;
                        ret->range.a[bit / 8] |= (uint8_t) (0x80 >> (bit % 8));
                }
        ret->prefix = e->offset + v4->prefix;
}

void egress_classify(const EgressAddr *a, EgressClassification *ret) {
        *ret = (EgressClassification) { .cls = EGRESS_CLASS_PUBLIC, .range = *a,
                                        .prefix = family_bits(a->family) };
        if (a->family == AF_INET6) {
                /* :: and ::1 are in ::/96 too: the plain classes come first for those */
                if (addr_in(a, &(EgressAddr) { .family = AF_INET6 }, 127)) {
                        (void) plain_class(a, ret);
                        return;
                }
                for (size_t i = 0; i < ELEMENTSOF(embeddings); i++) {
                        const Embedding *e = &embeddings[i];
                        EgressAddr net = { .family = AF_INET6 }, v4;
                        EgressClassification c4 = {};

                        memcpy(net.a, e->prefix_bytes, sizeof net.a);
                        if (!addr_in(a, &net, e->prefix))
                                continue;
                        get_v4(a, e->offset, e->xor, &v4);
                        if (!ret->has_embedded) {
                                ret->has_embedded = true;
                                ret->embedded = v4;
                                ret->via = e->via;
                        }
                        if (!plain_class(&v4, &c4))
                                continue;
                        ret->cls = c4.cls;
                        ret->via = e->via;
                        ret->embedded = v4;
                        embedded_range(a, e, &c4, ret);
                        return;
                }
        }
        (void) plain_class(a, ret);
}

/* ---- the decision ---- */

static const struct {
        const char *name;
        SpaceCode told;
} reason_table[_EGRESS_REASON_MAX] = {
        [EGRESS_REASON_ALLOWED] = { "allowed", SPACE_CODE_DENIED },
        [EGRESS_REASON_DENIED_BY_RULE] = { "denied_by_rule", SPACE_CODE_DENIED },
        [EGRESS_REASON_PROTECTED] = { "protected_address", SPACE_CODE_DENIED },
        [EGRESS_REASON_SMTP] = { "smtp_port", SPACE_CODE_DENIED },
        [EGRESS_REASON_SELF] = { "daemon_api", SPACE_CODE_DENIED },
        [EGRESS_REASON_NO_RULE] = { "no_rule", SPACE_CODE_DENIED },
        [EGRESS_REASON_INVALID] = { "invalid", SPACE_CODE_INVALID },
        [EGRESS_REASON_HOST_MISMATCH] = { "host_mismatch", SPACE_CODE_DENIED },
        [EGRESS_REASON_SNI_MISMATCH] = { "sni_mismatch", SPACE_CODE_DENIED },
        [EGRESS_REASON_NAME_MISMATCH] = { "name_mismatch", SPACE_CODE_DENIED },
        [EGRESS_REASON_NO_NAME] = { "no_name", SPACE_CODE_DENIED },
        [EGRESS_REASON_NO_SNI] = { "no_sni", SPACE_CODE_DENIED },
        [EGRESS_REASON_BAD_REQUEST] = { "bad_request", SPACE_CODE_DENIED },
        [EGRESS_REASON_BAD_FIRST_BYTES] = { "bad_first_bytes", SPACE_CODE_DENIED },
        [EGRESS_REASON_RESOLVE_FAILED] = { "resolve_failed", SPACE_CODE_UNREACHABLE },
        [EGRESS_REASON_NXDOMAIN] = { "nxdomain", SPACE_CODE_NXDOMAIN },
        [EGRESS_REASON_DENIED] = { "denied", SPACE_CODE_DENIED },
        [EGRESS_REASON_UNREACHABLE] = { "unreachable", SPACE_CODE_UNREACHABLE },
        [EGRESS_REASON_BUSY] = { "busy", SPACE_CODE_BUSY },
        [EGRESS_REASON_RATE_LIMITED] = { "rate_limited", SPACE_CODE_BUSY },
        [EGRESS_REASON_INTERNAL] = { "internal", SPACE_CODE_UNREACHABLE },
        [EGRESS_REASON_UPSTREAM_CERTIFICATE] = { "upstream_certificate", SPACE_CODE_DENIED },
        [EGRESS_REASON_CLOSED] = { "closed", SPACE_CODE_DENIED },
        [EGRESS_REASON_ABORTED] = { "aborted", SPACE_CODE_DENIED },
};

const char *egress_reason_to_string(EgressReason r) {
        return (unsigned) r < _EGRESS_REASON_MAX ? reason_table[r].name : "?";
}

SpaceCode egress_reason_code(EgressReason r) {
        return (unsigned) r < _EGRESS_REASON_MAX ? reason_table[r].told : SPACE_CODE_DENIED;
}

static bool is_smtp(uint16_t port) {
        for (size_t i = 0; i < ELEMENTSOF(smtp_ports); i++)
                if (port == smtp_ports[i])
                        return true;
        return false;
}

static bool port_in(const EgressRule *r, uint16_t port) {
        return r->port_min == 0 || (port >= r->port_min && port <= r->port_max);
}

/* Whether the rule's network lies inside the class's range: only such a rule names a protected address. */
static bool rule_inside(const EgressRule *r, const EgressClassification *c) {
        return r->addr.family == c->range.family && r->prefix >= c->prefix && addr_in(&r->addr, &c->range, c->prefix);
}

static bool deny_matches(const EgressRule *r, const char *host, const EgressAddr *a,
                         const EgressClassification *c, uint16_t port) {
        if (!port_in(r, port))
                return false;
        if (r->host)
                return host && streq(host, r->host);
        /* a denied IPv4 network is denied in every IPv6 form that carries it too */
        return addr_in(a, &r->addr, r->prefix) || (c->has_embedded && addr_in(&c->embedded, &r->addr, r->prefix));
}

static int decided(EgressDecision *d, bool allowed, EgressReason reason, const char *owner, const EgressRule *rule,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int decided(EgressDecision *d, bool allowed, EgressReason reason, const char *owner, const EgressRule *rule,
                   const char *fmt, ...) {
        va_list ap;

        d->allowed = allowed;
        d->reason = reason;
        d->owner = owner;
        d->rule = rule;
        va_start(ap, fmt);
        vsnprintf(d->message, sizeof d->message, fmt, ap);
        va_end(ap);
        return 0;
}

static void describe_class(const EgressClassification *c, char *buf, size_t size) {
        char range[EGRESS_ADDR_STRLEN], v4[EGRESS_ADDR_STRLEN];

        egress_addr_format(&c->range, range);
        if (c->via && c->cls != EGRESS_CLASS_PUBLIC) {
                egress_addr_format(&c->embedded, v4);
                snprintf(buf, size, "%s (%s form of %s, %s/%u)", egress_class_to_string(c->cls), c->via, v4, range,
                         c->prefix);
        } else
                snprintf(buf, size, "%s (%s/%u)", egress_class_to_string(c->cls), range, c->prefix);
}

int egress_decide(const EgressSource *sources, size_t n_sources, const EgressQuery *q, EgressDecision *ret) {
        const EgressRule *name_only = NULL, *too_broad = NULL, *smtp_rule = NULL;
        const char *name_only_owner = NULL, *smtp_owner = NULL;
        char host[EGRESS_HOST_MAX + 1], addr[EGRESS_ADDR_STRLEN], cls[160];
        const char *h = NULL;
        EgressDecision *d = ret;

        if (!q || !ret || (q->addr.family != AF_INET && q->addr.family != AF_INET6))
                return -EINVAL;
        *d = (EgressDecision) { .addr = q->addr };
        /* ::ffff:a.b.c.d is a.b.c.d on a dual-stack socket: decide it as that, so IPv4 rules apply */
        if (q->addr.family == AF_INET6 && addr_in(&q->addr, &(EgressAddr) { AF_INET6, { [10] = 0xff, [11] = 0xff } }, 96)) {
                d->addr = (EgressAddr) { .family = AF_INET };
                memcpy(d->addr.a, q->addr.a + 12, 4);
        }
        egress_classify(&d->addr, &d->cls);
        egress_addr_format(&d->addr, addr);
        describe_class(&d->cls, cls, sizeof cls);

        if (q->port == 0)
                return decided(d, false, EGRESS_REASON_INVALID, NULL, NULL, "port 0 is no destination");
        if (q->host) {
                if (egress_host_normalize(q->host, host) < 0)
                        return decided(d, false, EGRESS_REASON_INVALID, NULL, NULL,
                                       "'%.100s' is not an exact host name", q->host);
                h = host;
        }
        if (((q->self_port && q->port == q->self_port) || (q->self_tls_port && q->port == q->self_tls_port)) &&
            IN_SET(d->cls.cls, EGRESS_CLASS_LOOPBACK, EGRESS_CLASS_THIS_NETWORK))
                return decided(d, false, EGRESS_REASON_SELF, NULL, NULL,
                               "%s:%u is the daemon's own API: never reachable from a sandbox", addr, q->port);

        for (size_t s = 0; s < n_sources; s++)
                for (size_t i = 0; sources[s].rules && i < sources[s].rules->n; i++) {
                        const EgressRule *r = &sources[s].rules->rules[i];
                        if (r->action == EGRESS_DENY && deny_matches(r, h, &d->addr, &d->cls, q->port))
                                return decided(d, false, EGRESS_REASON_DENIED_BY_RULE, sources[s].owner, r,
                                               "denied by %s: %s (denies win over allows)", sources[s].owner, r->text);
                }

        for (size_t s = 0; s < n_sources; s++)
                for (size_t i = 0; sources[s].rules && i < sources[s].rules->n; i++) {
                        const EgressRule *r = &sources[s].rules->rules[i];

                        if (r->action != EGRESS_ALLOW || !port_in(r, q->port))
                                continue;
                        if (r->host) {
                                if (!h || !streq(h, r->host))
                                        continue;
                                if (d->cls.cls != EGRESS_CLASS_PUBLIC) {
                                        /* a name never opens a protected address: its DNS is not ours */
                                        if (!name_only)
                                                name_only = r, name_only_owner = sources[s].owner;
                                        continue;
                                }
                        } else {
                                if (!addr_in(&d->addr, &r->addr, r->prefix))
                                        continue;
                                if (d->cls.cls != EGRESS_CLASS_PUBLIC && !rule_inside(r, &d->cls)) {
                                        if (!too_broad)
                                                too_broad = r;
                                        continue;
                                }
                        }
                        if (is_smtp(q->port) && r->port_min == 0) {
                                if (!smtp_rule)
                                        smtp_rule = r, smtp_owner = sources[s].owner;
                                continue;
                        }
                        return decided(d, true, EGRESS_REASON_ALLOWED, sources[s].owner, r, "allowed by %s: %s",
                                       sources[s].owner, r->text);
                }

        if (d->cls.cls != EGRESS_CLASS_PUBLIC) {
                if (name_only)
                        return decided(d, false, EGRESS_REASON_PROTECTED, NULL, NULL,
                                       "%s is allowed by %s (%s) but resolves to %s, which is %s: only an IP rule "
                                       "inside that range reaches it",
                                       h, name_only_owner, name_only->text, addr, cls);
                return decided(d, false, EGRESS_REASON_PROTECTED, NULL, NULL,
                               "%s is %s: never reachable unless an IP rule inside that range names it%s%s", addr, cls,
                               too_broad ? "; too broad to count: " : "", too_broad ? too_broad->text : "");
        }
        if (smtp_rule)
                return decided(d, false, EGRESS_REASON_SMTP, NULL, NULL,
                               "port %u is SMTP, closed unless a rule names the port (%s allows the host, not the "
                               "port: %s)", q->port, smtp_owner, smtp_rule->text);
        if (h)
                return decided(d, false, EGRESS_REASON_NO_RULE, NULL, NULL, "no rule allows %s (%s) port %u", h, addr,
                               q->port);
        return decided(d, false, EGRESS_REASON_NO_RULE, NULL, NULL, "no rule allows %s port %u", addr, q->port);
}

/* ---- a sandbox's policy ---- */

void egress_policy_done(EgressPolicy *p) {
        egress_rules_done(&p->own);
        free(p->sources);
        strv_free(p->owners);
        free(p->bindings);
        for (size_t i = 0; i < p->n_own_bindings; i++)
                egress_binding_done(&p->own_bindings[i]);
        free(p->own_bindings);
        *p = (EgressPolicy) {};
}

bool egress_name_permitted(const EgressPolicy *p, const char *host, uint16_t *ret_port, const char **ret_why) {
        bool allowed = false;
        uint16_t port = 443;

        for (size_t s = 0; s < p->n_sources; s++)
                for (size_t i = 0; p->sources[s].rules && i < p->sources[s].rules->n; i++) {
                        const EgressRule *r = &p->sources[s].rules->rules[i];

                        if (!r->host || !streq(r->host, host))
                                continue;
                        if (r->action == EGRESS_DENY && r->port_min == 0) {
                                *ret_why = "denied by a rule naming it (denies win over allows)";
                                return false;
                        }
                        if (r->action == EGRESS_ALLOW && !allowed) {
                                allowed = true;
                                if (r->port_min != 0)
                                        port = r->port_min;
                        }
                }
        *ret_why = allowed ? NULL : "no allow rule names it";
        if (ret_port)
                *ret_port = port;
        return allowed;
}

int egress_policy_build(const EgressConfig *c, char *const *profiles, char *const *allow, char *const *deny,
                        EgressPolicy *ret, Error *reterr) {
        EgressPolicy p = {};
        size_t n = 2;
        int r = 0;

        for (char *const *a = allow; a && *a && r >= 0; a++)
                r = egress_rule_parse(&p.own, EGRESS_ALLOW, *a, "sandbox", reterr);
        for (char *const *a = deny; a && *a && r >= 0; a++)
                r = egress_rule_parse(&p.own, EGRESS_DENY, *a, "sandbox", reterr);
        for (char *const *a = profiles; a && *a; a++)
                n++;
        p.sources = calloc(n, sizeof *p.sources);
        if (r >= 0 && !p.sources)
                r = -ENOMEM;
        if (r < 0) {
                egress_policy_done(&p);
                return r;
        }
        p.sources[p.n_sources++] = (EgressSource) { "base policy", &c->base };
        /* owners first, all of them: sources point into the list, which grows as it is made */
        for (char *const *a = profiles; a && *a; a++) {
                _cleanup_free_ char *owner = NULL;

                if (!egress_profile_find(c, *a))
                        continue;
                if (asprintf(&owner, "profile %s", *a) < 0 || strv_extend(&p.owners, owner) < 0) {
                        egress_policy_done(&p);
                        return -ENOMEM;
                }
        }
        size_t k = 0;
        for (char *const *a = profiles; a && *a; a++) {
                const EgressProfile *prof = egress_profile_find(c, *a);
                if (!prof)
                        continue;
                p.sources[p.n_sources++] = (EgressSource) { p.owners[k++], &prof->rules };
                for (size_t i = 0; i < prof->n_bindings; i++) {
                        const EgressBinding **b = reallocarray(p.bindings, p.n_bindings + 1, sizeof *b);
                        if (!b) {
                                egress_policy_done(&p);
                                return -ENOMEM;
                        }
                        p.bindings = b;
                        p.bindings[p.n_bindings++] = &prof->bindings[i];
                }
        }
        p.sources[p.n_sources++] = (EgressSource) { "sandbox", &p.own };
        *ret = p;
        /* the sandbox's own rules live in *ret now: repoint */
        ret->sources[ret->n_sources - 1].rules = &ret->own;
        return 0;
}
