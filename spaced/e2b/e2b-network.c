/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "e2b/e2b-control.h"
#include "e2b/e2b-parse.h"
#include "egress/egress.h"
#include "macro.h"
#include "string-util.h"

/* PUT /sandboxes/{sandboxID}/network (E2B's SandboxNetworkUpdateConfig -> 204): the sandbox's own allow and deny
 * lists replaced while it runs, as a create's network.allowOut, network.denyOut and allow_internet_access make
 * them (egress_lists_from_e2b()); what is left out is cleared, as E2B's update does. Its egress profiles stay as
 * they were (space-egress(5)). rules replace the sandbox's own secret bindings the same way (ARCHITECTURE.md,
 * "Secrets"). sandbox_set_egress_lists() checks, saves and has the gateway decide the next
 * connection by them; an entry that is refused names itself and leaves the lists as they were. */

/* ---- network.rules */

#define RULE_FIELD "network.rules[\"%.64s\"][%d]"

/* One header of a rule as a binding line, checked by parsing it back: a name or value that would read as more
 * than it says (a colon in the name, a reference to what is not a secret) is refused. */
static int rule_header(const char *host, int i, const cJSON *h, char **ret, Error *reterr) {
        _cleanup_(egress_binding_done) EgressBinding b = {};
        _cleanup_(error_done) Error e = {};
        _cleanup_free_ char *line = NULL;
        const char *value;
        int r;

        if (!cJSON_IsString(h))
                return error_set(reterr, ERROR_INVALID_ARGUMENT, RULE_FIELD ".transform.headers[\"%.64s\"] must be "
                                 "a string", host, i, h->string) ?: -EINVAL;
        value = h->valuestring + strspn(h->valuestring, " \t");
        if (asprintf(&line, "%s header %s: %s", host, h->string, value) < 0)
                return -ENOMEM;
        r = egress_binding_parse_own(line, &b, &e);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || !streq(b.header, h->string) || !streq(b.template, value))
                return error_set(reterr, ERROR_INVALID_ARGUMENT, RULE_FIELD ".transform.headers[\"%.64s\"]: %s", host,
                                 i, h->string, r < 0 && e.message ? e.message : "not a header name") ?: -EINVAL;
        *ret = TAKE_PTR(line);
        return 0;
}

/* A line for host and header in lines, replaced (a later header of that name wins) or added. */
static int put_line(char ***lines, char *line, const char *host, const char *header) {
        size_t hl = strlen(host), nl = strlen(header);

        for (char **l = *lines; l && *l; l++)
                if (strncmp(*l, host, hl) == 0 && strncmp(*l + hl, " header ", 8) == 0 &&
                    strncasecmp(*l + hl + 8, header, nl) == 0 && (*l)[hl + 8 + nl] == ':') {
                        free(*l);
                        *l = line;
                        return 0;
                }
        if (strv_extend(lines, line) < 0) {
                free(line);
                return -ENOMEM;
        }
        free(line);
        return 0;
}

static int rule_bindings(const char *host, int i, const cJSON *rule, char ***lines, Error *reterr) {
        const cJSON *t, *headers, *h, *f;
        int r;

        if (!cJSON_IsObject(rule))
                return error_set(reterr, ERROR_INVALID_ARGUMENT, RULE_FIELD " must be an object {transform: "
                                 "{headers: {NAME: VALUE}}}", host, i) ?: -EINVAL;
        cJSON_ArrayForEach(f, rule)
                if (!streq(f->string, "transform"))
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, RULE_FIELD ": unknown field '%.64s'", host, i,
                                         f->string) ?: -EINVAL;
        t = cJSON_GetObjectItemCaseSensitive(rule, "transform");
        if (!t || cJSON_IsNull(t))
                return 0;
        if (!cJSON_IsObject(t))
                return error_set(reterr, ERROR_INVALID_ARGUMENT, RULE_FIELD ".transform must be an object", host, i)
                               ?: -EINVAL;
        cJSON_ArrayForEach(f, t)
                if (!streq(f->string, "headers"))
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, RULE_FIELD ".transform: unknown field "
                                         "'%.64s' (space applies headers only)", host, i, f->string) ?: -EINVAL;
        headers = cJSON_GetObjectItemCaseSensitive(t, "headers");
        if (!headers || cJSON_IsNull(headers))
                return 0;
        if (!cJSON_IsObject(headers))
                return error_set(reterr, ERROR_INVALID_ARGUMENT, RULE_FIELD ".transform.headers must be an object of "
                                 "strings", host, i) ?: -EINVAL;
        cJSON_ArrayForEach(h, headers) {
                char *line = NULL;

                r = rule_header(host, i, h, &line, reterr);
                if (r >= 0)
                        r = put_line(lines, line, host, h->string);
                if (r < 0)
                        return r;
        }
        return 0;
}

int e2b_rules_to_bindings(const cJSON *rules, char ***ret, Error *reterr) {
        _cleanup_strv_free_ char **lines = NULL;
        const cJSON *host, *rule;
        size_t n = 0;
        int r, i;

        *ret = NULL;
        if (!rules || cJSON_IsNull(rules))
                return 0;
        if (!cJSON_IsObject(rules))
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "network.rules must be an object {HOST: [{transform: "
                                 "{headers: {NAME: VALUE}}}]}") ?: -EINVAL;
        cJSON_ArrayForEach(host, rules) {
                char name[EGRESS_HOST_MAX + 1];

                if (strchr(host->string, '*'))
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "network.rules[\"%.64s\"]: wildcards are not "
                                         "supported by space: name each host", host->string) ?: -EINVAL;
                if (egress_host_normalize(host->string, name) < 0)
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "network.rules[\"%.64s\"]: not a host name "
                                         "(space binds secrets to names, not addresses)", host->string) ?: -EINVAL;
                if (!cJSON_IsArray(host))
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "network.rules[\"%.64s\"] must be an array "
                                         "of rules", host->string) ?: -EINVAL;
                i = 0;
                cJSON_ArrayForEach(rule, host) {
                        r = rule_bindings(name, i++, rule, &lines, reterr);
                        if (r < 0)
                                return r;
                }
        }
        while (lines && lines[n])
                n++;
        if (n > EGRESS_OWN_BINDINGS_MAX)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "network.rules: more than %u headers in all",
                                 EGRESS_OWN_BINDINGS_MAX) ?: -E2BIG;
        *ret = TAKE_PTR(lines);
        return 0;
}

cJSON *e2b_rules_from_bindings(char *const *bindings) {
        cJSON *o = cJSON_CreateObject();

        for (char *const *l = bindings; o && l && *l; l++) {
                _cleanup_(egress_binding_done) EgressBinding b = {};
                cJSON *list, *headers;

                if (egress_binding_parse_own(*l, &b, NULL) < 0 || b.dests.n == 0)
                        continue;
                /* one rule per host, with all of its headers */
                list = cJSON_GetObjectItemCaseSensitive(o, b.dests.rules[0].host);
                if (!list) {
                        cJSON *rule = cJSON_CreateObject(), *t = cJSON_AddObjectToObject(rule, "transform");

                        list = cJSON_AddArrayToObject(o, b.dests.rules[0].host);
                        if (!rule || !t || !list || !cJSON_AddObjectToObject(t, "headers")) {
                                cJSON_Delete(rule);
                                break;
                        }
                        cJSON_AddItemToArray(list, rule);
                }
                headers = cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, 0), "transform"), "headers");
                if (headers)
                        cJSON_AddStringToObject(headers, b.header, b.template);
        }
        return o;
}

/* What space has no counterpart for is refused when it asks for something: a SOCKS5 proxy behind the gateway.
 * dnsServers is taken and not used: the gateway resolves the names the
 * lists allow, and no DNS server is reached from a sandbox. */
static int check_unsupported(Request *r, cJSON *o) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "egressProxy");

        if (v && !cJSON_IsNull(v))
                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                          "egressProxy is not supported by space: its egress gateway connects "
                                          "itself; leave it out") ?: -EOPNOTSUPP;
        v = cJSON_GetObjectItemCaseSensitive(o, "dnsServers");
        if (v && !cJSON_IsNull(v)) {
                cJSON *i;

                if (!cJSON_IsArray(v))
                        return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                                  "dnsServers must be an array of IPv4 addresses") ?: -EINVAL;
                cJSON_ArrayForEach(i, v)
                        if (!cJSON_IsString(i))
                                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                                          "dnsServers must be an array of IPv4 addresses") ?: -EINVAL;
        }
        return 0;
}

static size_t count(char *const *l) {
        size_t n = 0;

        while (l && l[n])
                n++;
        return n;
}

void e2b_put_network(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "allowOut", "denyOut", "allow_internet_access", "dnsServers",
                                              "egressProxy", "rules", NULL };
        _cleanup_strv_free_ char **allow_out = NULL, **deny_out = NULL, **allow = NULL, **deny = NULL,
                                 **bindings = NULL;
        _cleanup_(error_done) Error e = {};
        bool internet = true;
        Sandbox *s;
        cJSON *o;
        int q;

        o = e2b_body_object(r, fields);
        if (!o)
                return;
        if ((q = check_unsupported(r, o)) < 0 ||
            (q = get_strv_field(r, o, "allowOut", EGRESS_RULES_MAX, &allow_out)) < 0 ||
            (q = get_strv_field(r, o, "denyOut", EGRESS_RULES_MAX, &deny_out)) < 0 ||
            (q = get_bool_field(r, o, "allow_internet_access", &internet)) < 0) {
                cJSON_Delete(o);
                return;
        }
        q = e2b_rules_to_bindings(cJSON_GetObjectItemCaseSensitive(o, "rules"), &bindings, &e);
        cJSON_Delete(o);
        if (q < 0) {
                http_respond_error(r, q == -ENOMEM ? ERROR_INTERNAL : ERROR_INVALID_ARGUMENT, "%s",
                                   e.message ?: "out of memory");
                return;
        }
        if (e2b_find_sandbox(r, a->arg[0], &s) < 0)
                return;
        if (!e2b_state(s)) {
                http_respond_error(r, ERROR_SANDBOX_NOT_RUNNING, "sandbox %s is %s: its network cannot be changed",
                                   s->id, sandbox_state_to_string(s->state));
                return;
        }
        q = egress_lists_from_e2b(allow_out, deny_out, internet, &allow, &deny, &e);
        if (q >= 0)
                q = sandbox_set_egress_lists(s, allow, deny, bindings, &e);
        if (q < 0) {
                if (q == -ENOMEM && !e.message)
                        http_respond_error(r, ERROR_INTERNAL, "out of memory");
                else
                        http_respond_error(r, e.code ?: ERROR_INVALID_ARGUMENT, "%s", e.message ?: "bad network options");
                return;
        }
        log_info("sandbox %s: its E2B network changed: %zu allowed, %zu denied, %zu secret headers", s->id,
                 count(allow), count(deny), count(bindings));
        http_respond_empty(r, 204);
}
