/* SPDX-License-Identifier: Apache-2.0 */
/* The egress policy (spaced/egress/egress.c): the rule and profile syntax, wildcards refused at load, IP
 * literals in every form a guest may write, the protected address classes and their IPv6 embeddings, SMTP,
 * the daemon's own port, and denies winning. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress.h"
#include "egress/egress-internal.h"
#include "macro.h"
#include "tap.h"

static EgressConfig cfg;

static EgressAddr lit(const char *s) {
        EgressAddr a = {};
        if (egress_addr_parse_literal(s, &a) < 0)
                diag("not a literal: %s", s);
        return a;
}

/* Decides host (may be NULL) at literal addr:port for the given profiles and lists. */
static EgressDecision decide4(const char *host, const char *addr, unsigned port, char **profiles, char **allow,
                              char **deny, uint16_t self_port) {
        EgressPolicy p = {};
        EgressDecision d = {};
        Error e = {};
        EgressQuery q = { .host = host, .addr = lit(addr), .port = (uint16_t) port, .self_port = self_port };

        if (egress_policy_build(&cfg, profiles, allow, deny, &p, &e) < 0)
                diag("policy: %s", error_message(&e));
        if (egress_decide(p.sources, p.n_sources, &q, &d) < 0)
                diag("decide failed");
        egress_policy_done(&p);
        error_done(&e);
        return d;
}

static EgressDecision decide(const char *host, const char *addr, unsigned port, char **profiles) {
        return decide4(host, addr, port, profiles, NULL, NULL, 7070);
}

static void check_literal(const char *s, const char *want) {
        EgressAddr a;
        char buf[EGRESS_ADDR_STRLEN] = "";
        int r = egress_addr_parse_literal(s, &a);

        if (r >= 0)
                egress_addr_format(&a, buf);
        if (want)
                ok(r >= 0 && streq(buf, want), "literal '%s' is %s (got %s)", s, want, r >= 0 ? buf : "an error");
        else
                ok(r < 0, "'%s' is no literal (got %s)", s, r >= 0 ? buf : "an error");
}

static void check_parse_error(const char *line, const char *needle) {
        EgressConfig c = {};
        Error e = {};
        int r = egress_profile_parse(&c, line, &e);

        ok(r < 0 && e.message && strstr(e.message, needle), "'%s' is refused, saying '%s' (%s)", line, needle,
           e.message ?: "no message");
        error_done(&e);
        egress_config_done(&c);
}

static void check_denied(const char *addr, unsigned port, char **profiles, EgressReason why, const char *needle) {
        EgressDecision d = decide(NULL, addr, port, profiles);

        ok(!d.allowed && d.reason == why && (!needle || strstr(d.message, needle)),
           "%s:%u denied (%s): %s", addr, port, egress_reason_to_string(why), d.message);
}

static void check_allowed(const char *host, const char *addr, unsigned port, char **profiles, const char *rule) {
        EgressDecision d = decide(host, addr, port, profiles);

        ok(d.allowed && d.rule && streq(d.rule->text, rule), "%s %s:%u allowed by '%s': %s", host ?: "-", addr, port,
           rule, d.message);
}

/* egress_secret lines and the head rewrite (binding.c), exactly. */
static void test_bindings(void) {
        static const char head[] = "GET /v1/x HTTP/1.1\r\nHost: api.test\r\nauthorization: Bearer forged\r\n"
                                   "X-Key: a space-secret-k-0123456789abcdef b\r\n"
                                   "X-Space-Secret-K-0123456789abcdef: n\r\n\r\n";
        static const EgressValue v1 = { .ref = "{value}", .value = "V1", .value_len = 2 },
                                 ph = { .ref = "space-secret-k-0123456789abcdef", .value = "P", .value_len = 1 };
        EgressInjection inj[] = {
                { .header = "Authorization", .template = "Bearer {value}", .values = &v1, .n_values = 1 },
                { .values = &ph, .n_values = 1 },
        };
        EgressConfig c = {};
        SpaceBuf out = {};
        unsigned done = 0;
        Error e = {};
        const EgressBinding *b;

        ok(egress_binding_parse(&c, "api: tok api.test:443, b.test header Authorization: Bearer {value}, x", &e) == 0 &&
           c.n_profiles == 1 && c.profiles[0].n_bindings == 1, "a header binding parses (a comma in its value too)");
        b = &c.profiles[0].bindings[0];
        ok(b->secrets[0] && !b->secrets[1] && streq(b->secrets[0], "tok") && streq(b->refs[0], "{value}") && b->dests.n == 2 && streq(b->header, "Authorization") &&
           streq(b->template, "Bearer {value}, x"), "... its secret, two destinations, header and value");
        ok(egress_binding_applies(b, "api.test", 443) && !egress_binding_applies(b, "api.test", 80) &&
           egress_binding_applies(b, "b.test", 8080) && !egress_binding_applies(b, "b.test", 25) &&
           !egress_binding_applies(b, "c.test", 443) && !egress_binding_applies(b, NULL, 443),
           "it applies to its hosts and ports only (no port: every one but SMTP's)");
        ok(egress_binding_parse(&c, "api: ph api.test", &e) == 0 && c.profiles[0].n_bindings == 2 &&
           !c.profiles[0].bindings[1].header, "a placeholder binding parses");
        ok(egress_binding_parse(&c, "api: tok 10.0.0.1", &e) < 0 && e.message && strstr(e.message, "is an address"),
           "an address as destination is refused: %s", e.message ?: "");
        error_done(&e);
        ok(egress_binding_parse(&c, "api: tok a.test header Host: {value}", &e) < 0, "a binding may not set Host");
        error_done(&e);
        ok(egress_binding_parse(&c, "api: tok a.test header content-LENGTH: {value}", &e) < 0,
           "nor a framing header, whatever its case");
        error_done(&e);
        ok(egress_binding_parse(&c, "api: tok a.test header X: none", &e) < 0, "a header value without {value}");
        error_done(&e);
        ok(egress_binding_parse(&c, "api: tok", &e) < 0, "no destination");
        error_done(&e);
        ok(egress_binding_parse(&c, "api: -x a.test", &e) < 0, "a bad secret name");
        error_done(&e);
        ok(egress_binding_parse(&c, "API: tok a.test", &e) < 0, "a bad profile name");
        error_done(&e);
        ok(egress_binding_parse(&c, "api tok a.test", &e) < 0, "no profile");
        error_done(&e);
        egress_config_done(&c);

        ok(egress_head_rewrite((const uint8_t *) head, strlen(head), inj, 2, 4096, &out, &done) == 0 && done == 2,
           "the head is rewritten: one header added, one placeholder replaced (done=%u)", done);
        ok(out.len == strlen("GET /v1/x HTTP/1.1\r\nHost: api.test\r\nX-Key: a P b\r\n"
                             "X-Space-Secret-K-0123456789abcdef: n\r\nAuthorization: Bearer V1\r\n\r\n") &&
           memcmp(out.data, "GET /v1/x HTTP/1.1\r\nHost: api.test\r\nX-Key: a P b\r\n"
                            "X-Space-Secret-K-0123456789abcdef: n\r\nAuthorization: Bearer V1\r\n\r\n", out.len) == 0,
           "... the forged header gone, the value in the placeholder's place, names as they were");
        space_buf_done(&out);
        out = (SpaceBuf) {};
        ok(egress_head_rewrite((const uint8_t *) head, strlen(head), inj, 2, 64, &out, &done) == -E2BIG,
           "over the bound: -E2BIG");
        space_buf_done(&out);
        out = (SpaceBuf) {};
        ok(egress_head_rewrite((const uint8_t *) "GET / HTTP/1.1\r\n", 16, inj, 2, 4096, &out, &done) == -EINVAL,
           "not a whole head: -EINVAL");
        space_buf_done(&out);

        char *var = NULL;
        ok(egress_placeholder_variable("openai-key.v2", &var) == 0 && streq(var, "SPACE_SECRET_OPENAI_KEY_V2"),
           "the placeholder's variable: %s", var ?: "-");
        free(var);
        ok(egress_placeholder_valid("k", "space-secret-k-0123456789abcdef") &&
           !egress_placeholder_valid("k", "space-secret-k-0123") && !egress_placeholder_valid("k", "x") &&
           !egress_placeholder_valid("k", "space-secret-kk-0123456789abcdef"), "placeholders have one shape");
}

/* A sandbox's own bindings (E2B's network.rules): a header whose value names secrets as ${e2b.secrets.NAME},
 * with text around them, or none; and the policy they join, which they never widen. */
static void test_own_bindings(void) {
        static const char head[] = "POST /x HTTP/1.1\r\nHost: api.test\r\nX-Auth: forged\r\nContent-Length: 0\r\n\r\n";
        static const char want[] = "POST /x HTTP/1.1\r\nHost: api.test\r\nContent-Length: 0\r\n"
                                   "X-Auth: id=A1 key=${e2b.secrets.b}, {value} B2\r\n\r\n";
        EgressBinding b = {};
        Error e = {};
        SpaceBuf out = {};
        unsigned done = 0;

        ok(egress_binding_parse_own("api.test, b.test:8443 header X-Auth: id=${e2b.secrets.a} key=${e2b.secrets.b}, "
                                    "{value} ${e2b.secrets.b2}", &b, &e) == 0,
           "an own binding parses: %s", e.message ?: "");
        ok(b.secrets && streq(b.secrets[0], "a") && streq(b.secrets[1], "b") && streq(b.secrets[2], "b2") &&
           !b.secrets[3] && streq(b.refs[1], "${e2b.secrets.b}") && streq(b.header, "X-Auth") && b.dests.n == 2,
           "... three secrets, each with its reference, the header and two destinations");
        ok(egress_binding_applies(&b, "api.test", 80) && egress_binding_applies(&b, "b.test", 8443) &&
           !egress_binding_applies(&b, "b.test", 443), "... which it applies to");
        /* b's value is a's reference: it goes in as text, never read again; {value} is text here */
        EgressValue v[] = {
                { .ref = b.refs[0], .value = "A1", .value_len = 2 },
                { .ref = b.refs[1], .value = "${e2b.secrets.b}", .value_len = 16 },
                { .ref = b.refs[2], .value = "B2", .value_len = 2 },
        };
        EgressInjection inj = { .header = b.header, .template = b.template, .values = v, .n_values = 3 };
        ok(egress_head_rewrite((const uint8_t *) head, strlen(head), &inj, 1, 4096, &out, &done) == 0 && done == 1 &&
           out.len == strlen(want) && memcmp(out.data, want, out.len) == 0,
           "the header replaces the client's, each reference replaced once, the text around kept");
        space_buf_done(&out);
        egress_binding_done(&b);

        ok(egress_binding_parse_own("api.test header X-Fixed: literal", &b, &e) == 0 && !b.secrets,
           "a header naming no secret is a fixed header");
        egress_binding_done(&b);
        ok(egress_binding_parse_own("api.test header X: ${e2b.identity.tokens.aws}", &b, &e) < 0 && e.message &&
           strstr(e.message, "only ${e2b.secrets.NAME}"), "another ${e2b. reference is refused: %s", e.message ?: "");
        error_done(&e);
        ok(egress_binding_parse_own("api.test header X: ${e2b.secrets.a b}", &b, &e) < 0 && e.message &&
           strstr(e.message, "does not name a secret"), "a bad secret name: %s", e.message ?: "");
        error_done(&e);
        ok(egress_binding_parse_own("api.test header X: ${e2b.secrets.a", &b, &e) < 0, "an unclosed reference");
        error_done(&e);
        ok(egress_binding_parse_own("api.test header Host: x", &b, &e) < 0, "Host is not set");
        error_done(&e);
        ok(egress_binding_parse_own("10.0.0.1 header X: y", &b, &e) < 0, "an address is no destination");
        error_done(&e);
        ok(egress_binding_parse_own("api.test", &b, &e) < 0, "no header");
        error_done(&e);

        /* the policy: the binding is there, the host it names stays closed */
        EgressConfig c = {};
        EgressPolicy p = {};
        char *lines[] = { "api.test header X: ${e2b.secrets.a}", NULL };
        const char *why = NULL;
        ok(egress_policy_build(&c, NULL, NULL, NULL, &p, &e) == 0 && egress_policy_add_bindings(&p, lines, &e) == 0 &&
           p.n_bindings == 1 && p.bindings[0] == &p.own_bindings[0] && streq(p.bindings[0]->secrets[0], "a"),
           "own bindings join the policy");
        ok(!egress_name_permitted(&p, "api.test", NULL, &why), "... and open nothing: %s", why ?: "");
        egress_policy_done(&p);
        egress_config_done(&c);
        error_done(&e);
}

int main(void) {
        Error e = {};
        char *none[] = { NULL };
        char *web[] = { "web", NULL };
        char *local[] = { "local", NULL };
        char *both[] = { "web", "local", NULL };
        char *mail[] = { "mail", NULL };
        char *broad[] = { "broad", NULL };
        char *wide[] = { "wide", NULL };
        char **sel = NULL;
        int r;

        plan(0);
        test_bindings();
        test_own_bindings();

        /* ---- literals: inet_aton's forms normalise, so no spelling slips past */
        check_literal("127.0.0.1", "127.0.0.1");
        check_literal("2130706433", "127.0.0.1");
        check_literal("0177.0.0.1", "127.0.0.1");
        check_literal("0x7f.1", "127.0.0.1");
        check_literal("0x7f000001", "127.0.0.1");
        check_literal("127.1", "127.0.0.1");
        check_literal("127.0.1", "127.0.0.1");
        check_literal("017700000001", "127.0.0.1");
        check_literal("0xA9.0xFE.0xA9.0xFE", "169.254.169.254");
        check_literal("2852039166", "169.254.169.254");
        check_literal("0251.0376.0251.0376", "169.254.169.254");
        check_literal("::1", "::1");
        check_literal("[::1]", "::1");
        check_literal("::ffff:127.0.0.1", "::ffff:127.0.0.1");
        check_literal("64:ff9b::7f00:1", "64:ff9b::7f00:1");
        check_literal("256.0.0.1", NULL);
        check_literal("1.2.3.4.5", NULL);
        check_literal("4294967296", NULL);
        check_literal("08.0.0.1", NULL);
        check_literal("1..2", NULL);
        check_literal("127.0.0.1 ", NULL);
        check_literal("127.0.0.1.", NULL);
        check_literal("example.com", NULL);
        check_literal("[127.0.0.1]", NULL);
        check_literal("fe80::1%eth0", NULL);
        check_literal("", NULL);

        /* ---- names */
        char h[EGRESS_HOST_MAX + 1];
        ok(egress_host_normalize("PyPI.Org.", h) == 0 && streq(h, "pypi.org"), "names are lowercased, final dot dropped");
        ok(egress_host_normalize("*.example.com", h) < 0, "a wildcard is no exact name");
        ok(egress_host_normalize("example.123", h) < 0, "a name ending in a number is an address in disguise");
        ok(egress_host_normalize("a..b", h) < 0 && egress_host_normalize("-a.b", h) < 0 &&
           egress_host_normalize("a-.b", h) < 0 && egress_host_normalize("a b", h) < 0 &&
           egress_host_normalize("a.b..", h) < 0 && egress_host_normalize(".", h) < 0,
           "empty labels, hyphens at the ends and spaces are refused");
        ok(egress_host_is_numeric("0x7f.1") && egress_host_is_numeric("127.1") && !egress_host_is_numeric("a1.b"),
           "numeric last labels are recognised");

        /* ---- the syntax, and what load refuses */
        r = egress_profile_parse(&cfg, "web: allow example.com, 93.184.216.34:443, [2606:2800::/32]:80-90", &e);
        ok(r == 0, "profile web parses (%s)", r < 0 ? error_message(&e) : "");
        ok(egress_profile_parse(&cfg, "web: deny bad.example.com", &e) == 0, "a second line adds to web");
        r = egress_profile_parse(&cfg, "local: allow 127.0.0.5:8080, 10.1.0.0/16:5432; deny 10.1.2.3", &e);
        ok(r == 0, "profile local parses (%s)", r < 0 ? error_message(&e) : "");
        r = egress_profiles_parse(&cfg, "mail: allow smtp.example.net:587, mx.example.net; broad: allow 0.0.0.0/0, "
                                        "::/0; wide: allow 127.0.0.0/8; allow 169.254.0.0/16, [fd00:ec2::254]", &e);
        ok(r == 0, "several profiles in one ';'-separated string (%s)", r < 0 ? error_message(&e) : "");
        const EgressProfile *p = egress_profile_find(&cfg, "web");
        ok(p && p->rules.n == 4, "web has 4 rules (%zu)", p ? p->rules.n : 0);
        ok(p && streq(p->rules.rules[2].text, "allow [2606:2800::/32]:80-90"), "canonical text: %s",
           p ? p->rules.rules[2].text : "-");
        ok(egress_profile_find(&cfg, "wide") && egress_profile_find(&cfg, "wide")->rules.n == 3,
           "a clause after a profile's first continues it");
        r = egress_rules_parse(&cfg.base, "deny 8.8.4.0/24; allow 9.9.9.9:53", "egress_base", &e);
        ok(r == 0, "the base policy parses (%s)", r < 0 ? error_message(&e) : "");

        check_parse_error("wild: allow *.example.com", "egress profile wild: rule 'allow *.example.com': wildcard");
        check_parse_error("wild: allow *", "wildcard");
        check_parse_error("wild: deny foo.*.com", "wildcard");
        check_parse_error("x: allow 10.1.2.3/16", "bits set beyond the prefix");
        check_parse_error("x: allow 0x7f.1", "four decimal numbers");
        check_parse_error("x: allow 127.1", "four decimal numbers");
        check_parse_error("x: allow example.com:0", "bad port");
        check_parse_error("x: allow example.com:90-80", "bad port");
        check_parse_error("x: allow example.com:70000", "bad port");
        check_parse_error("x: permit example.com", "expected 'allow");
        check_parse_error("Bad Name: allow a.com", "not a profile name");
        check_parse_error("x: allow a.com b.com", "one target per rule");
        check_parse_error("x: allow", "names no target");
        check_parse_error("no colon here", "expected 'NAME:");
        check_parse_error("x: allow [::1", "no ']'");
        check_parse_error("x: allow 10.0.0.0/33", "bad prefix");
        check_parse_error("x: allow ex_ample.com:443:1", "IP address");
        {
                EgressConfig c = {};
                ok(egress_profiles_parse(&c, "allow a.com", &e) < 0 && strstr(error_message(&e), "before any"),
                   "rules before any profile name are refused");
                egress_config_done(&c);
        }

        ok(egress_set_defaults(&cfg, "web", &e) == 0, "web is the default");
        r = egress_set_defaults(&cfg, "nope", &e);
        ok(r < 0 && e.code == ERROR_EGRESS_PROFILE_NOT_FOUND, "an unknown default is refused: %s", error_message(&e));
        ok(egress_profiles_select(&cfg, NULL, &sel, &e) == 0 && sel[0] && streq(sel[0], "web") && !sel[1],
           "none chosen: the default profile");
        strv_free(sel);
        char *dup[] = { "local", "local", "web", NULL };
        ok(egress_profiles_select(&cfg, dup, &sel, &e) == 0 && streq(sel[0], "local") && streq(sel[1], "web") && !sel[2],
           "chosen ones, duplicates dropped");
        strv_free(sel);
        ok(egress_profiles_select(&cfg, none, &sel, &e) == 0 && !sel[0], "an empty choice is no profile at all");
        strv_free(sel);
        char *unknown[] = { "web", "nope", NULL };
        r = egress_profiles_select(&cfg, unknown, &sel, &e);
        ok(r < 0 && e.code == ERROR_EGRESS_PROFILE_NOT_FOUND && strstr(error_message(&e), "'nope'"),
           "an unknown profile is refused: %s", error_message(&e));
        char *bad_list[] = { "*.evil.com", NULL };
        ok(egress_list_check(bad_list, EGRESS_ALLOW, "egress_allow", &e) < 0, "per-sandbox lists refuse wildcards too");

        /* ---- decisions: names and addresses */
        check_allowed("example.com", "93.184.216.34", 443, web, "allow example.com");
        check_allowed("EXAMPLE.com.", "93.184.216.34", 80, web, "allow example.com");
        check_allowed(NULL, "93.184.216.34", 443, web, "allow 93.184.216.34:443");
        check_denied("93.184.216.34", 80, web, EGRESS_REASON_NO_RULE, "no rule");
        check_allowed(NULL, "2606:2800::1", 85, web, "allow [2606:2800::/32]:80-90");
        check_denied("2606:2800::1", 91, web, EGRESS_REASON_NO_RULE, NULL);
        check_denied("93.184.216.34", 443, none, EGRESS_REASON_NO_RULE, NULL);
        {
                EgressDecision d = decide("other.com", "93.184.216.34", 8443, web);
                ok(!d.allowed && d.reason == EGRESS_REASON_NO_RULE, "a name in no profile is denied: %s", d.message);
                d = decide("bad.example.com", "93.184.216.34", 443, web);
                ok(!d.allowed && d.reason == EGRESS_REASON_DENIED_BY_RULE, "an explicit deny of a name: %s", d.message);
                d = decide("9.9.9.9", "9.9.9.9", 53, none);
                ok(!d.allowed && d.reason == EGRESS_REASON_INVALID, "a numeric host name is no name: %s", d.message);
                d = decide(NULL, "9.9.9.9", 53, none);
                ok(d.allowed && d.owner && streq(d.owner, "base policy"), "the base policy applies to every sandbox");
                d = decide(NULL, "8.8.4.4", 443, broad);
                ok(!d.allowed && d.reason == EGRESS_REASON_DENIED_BY_RULE, "a base deny beats a profile allow: %s",
                   d.message);
        }

        /* ---- protected classes: a name or a broad range never opens them */
        static const char *const protected[] = {
                "127.0.0.1", "127.255.255.254", "0.0.0.0", "0.1.2.3", "10.0.0.1", "172.16.0.1", "172.31.255.255",
                "192.168.1.1", "100.64.0.1", "169.254.1.1", "169.254.169.254", "224.0.0.1", "239.255.255.250",
                "255.255.255.255", "192.0.2.1", "198.51.100.1", "203.0.113.1", "198.18.0.1", "198.19.255.255",
                "240.0.0.1", "192.0.0.170", "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "fd00:ec2::254",
                "ff02::1", "2001:db8::1", "3fff::1", "fec0::1", "100::1", "2001:2::1",
                /* IPv4 inside IPv6 */
                "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "::127.0.0.1", "::ffff:0:127.0.0.1",
                "64:ff9b::127.0.0.1", "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::10.1.2.3",
                "64:ff9b:1::1", "64:ff9b:1:ffff::5db8:d822", "2002:7f00:1::1", "2002:a9fe:a9fe::1",
                "2002:0a00:0001::", "2001:0:7f00:1::1", "2001:0:5db8:d822::80ff:fffe" /* client 127.0.0.1 */,
                /* odd IPv4 spellings, parsed first */
                "2130706433", "0177.0.0.1", "0x7f.1", "127.1", "0xa9fea9fe", "0251.0376.0251.0376", "10.1",
        };
        for (size_t i = 0; i < ELEMENTSOF(protected); i++) {
                EgressDecision d = decide("example.com", protected[i], 443, broad);
                ok(!d.allowed && d.reason == EGRESS_REASON_PROTECTED,
                   "%s is protected, for a name and for 0.0.0.0/0 and ::/0: %s", protected[i], d.message);
        }
        check_denied("2001:0:5db8:d822::80ff:fffe", 443, broad, EGRESS_REASON_PROTECTED, "Teredo client");
        check_denied("64:ff9b::7f00:1", 443, local, EGRESS_REASON_PROTECTED, "NAT64 form of 127.0.0.1");
        check_denied("::ffff:169.254.169.254", 80, broad, EGRESS_REASON_PROTECTED, "metadata");
        {
                EgressDecision d = decide("example.com", "127.0.0.1", 443, web);
                ok(!d.allowed && strstr(d.message, "example.com is allowed by profile web"),
                   "an allowed name resolving to loopback is refused, and says why: %s", d.message);
        }
        check_allowed(NULL, "8.8.8.8", 443, broad, "allow 0.0.0.0/0");
        check_allowed(NULL, "64:ff9b::808:808", 443, broad, "allow ::/0");
        check_allowed(NULL, "2002:808:808::1", 443, broad, "allow ::/0");

        /* ---- an explicit IP rule inside the class opens it, on its port only */
        check_allowed(NULL, "127.0.0.5", 8080, local, "allow 127.0.0.5:8080");
        check_allowed(NULL, "::ffff:127.0.0.5", 8080, local, "allow 127.0.0.5:8080");
        check_allowed(NULL, "0x7f000005", 8080, local, "allow 127.0.0.5:8080");
        check_denied("127.0.0.5", 8081, local, EGRESS_REASON_PROTECTED, NULL);
        check_denied("127.0.0.6", 8080, local, EGRESS_REASON_PROTECTED, NULL);
        check_allowed(NULL, "10.1.9.9", 5432, local, "allow 10.1.0.0/16:5432");
        check_denied("10.1.2.3", 5432, local, EGRESS_REASON_DENIED_BY_RULE, "deny 10.1.2.3");
        check_denied("::ffff:10.1.2.3", 5432, local, EGRESS_REASON_DENIED_BY_RULE, NULL);
        check_denied("64:ff9b::10.1.2.3", 5432, local, EGRESS_REASON_DENIED_BY_RULE, NULL);
        check_allowed(NULL, "127.9.9.9", 22, wide, "allow 127.0.0.0/8");
        check_allowed(NULL, "169.254.1.1", 22, wide, "allow 169.254.0.0/16");
        check_denied("169.254.169.254", 80, wide, EGRESS_REASON_PROTECTED, "too broad to count: allow 169.254.0.0/16");
        check_allowed(NULL, "fd00:ec2::254", 80, wide, "allow fd00:ec2::254");
        {
                /* denies in another profile still win */
                EgressDecision d = decide(NULL, "10.1.2.3", 5432, both);
                ok(!d.allowed && d.reason == EGRESS_REASON_DENIED_BY_RULE, "a deny in one profile beats others: %s",
                   d.message);
        }

        /* ---- the daemon's own API, even when a profile opens all of loopback */
        check_denied("127.0.0.1", 7070, wide, EGRESS_REASON_SELF, "daemon's own API");
        check_denied("127.3.2.1", 7070, wide, EGRESS_REASON_SELF, NULL);
        check_denied("::ffff:127.0.0.1", 7070, wide, EGRESS_REASON_SELF, NULL);
        check_denied("0.0.0.0", 7070, wide, EGRESS_REASON_SELF, NULL);
        check_allowed(NULL, "127.0.0.1", 7071, wide, "allow 127.0.0.0/8");

        /* ---- SMTP is closed unless a rule names the port */
        check_allowed("smtp.example.net", "93.184.216.40", 587, mail, "allow smtp.example.net:587");
        {
                EgressDecision d = decide("mx.example.net", "93.184.216.41", 25, mail);
                ok(!d.allowed && d.reason == EGRESS_REASON_SMTP, "port 25 with a rule without ports: %s", d.message);
                d = decide("mx.example.net", "93.184.216.41", 465, mail);
                ok(!d.allowed && d.reason == EGRESS_REASON_SMTP, "port 465 too");
                d = decide(NULL, "8.8.8.8", 25, broad);
                ok(!d.allowed && d.reason == EGRESS_REASON_SMTP, "0.0.0.0/0 does not open SMTP: %s", d.message);
                d = decide("mx.example.net", "93.184.216.41", 2525, mail);
                ok(d.allowed, "other ports are open for a rule without ports");
        }

        /* ---- per-sandbox lists */
        {
                char *allow[] = { "93.184.216.0/24", "api.example.org:443", NULL };
                char *deny[] = { "93.184.216.99", NULL };
                EgressDecision d = decide4(NULL, "93.184.216.10", 443, none, allow, deny, 0);
                ok(d.allowed && d.owner && streq(d.owner, "sandbox"), "a sandbox's own allow: %s", d.message);
                d = decide4(NULL, "93.184.216.99", 443, none, allow, deny, 0);
                ok(!d.allowed && d.reason == EGRESS_REASON_DENIED_BY_RULE, "a sandbox's own deny: %s", d.message);
                d = decide4("example.com", "93.184.216.99", 443, web, NULL, deny, 0);
                ok(!d.allowed, "a sandbox's deny beats its profile's allow");
                d = decide4("api.example.org", "93.184.217.1", 443, none, allow, deny, 0);
                ok(d.allowed, "a sandbox's allowed name");
        }
        {
                EgressDecision d = decide(NULL, "8.8.8.8", 0, broad);
                ok(!d.allowed && d.reason == EGRESS_REASON_INVALID, "port 0 is refused");
                EgressQuery q = {};
                ok(egress_decide(NULL, 0, &q, &d) == -EINVAL, "a query without an address is -EINVAL");
        }
        {
                /* a profile removed from the config takes its allowances with it */
                char *gone[] = { "gone", NULL };
                EgressDecision d = decide(NULL, "93.184.216.34", 443, gone);
                ok(!d.allowed, "a profile no longer defined allows nothing");
        }

        error_done(&e);
        egress_config_done(&cfg);
        return done();
}
