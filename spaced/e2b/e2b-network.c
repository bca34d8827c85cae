/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "e2b/e2b-control.h"
#include "egress/egress.h"
#include "macro.h"
#include "string-util.h"

/* PUT /sandboxes/{sandboxID}/network (E2B's SandboxNetworkUpdateConfig -> 204): the sandbox's own allow and deny
 * lists replaced while it runs, as a create's network.allowOut, network.denyOut and allow_internet_access make
 * them (egress_lists_from_e2b()); what is left out is cleared, as E2B's update does. Its egress profiles stay as
 * they were (space-egress(5)). sandbox_set_egress_lists() checks, saves and has the gateway decide the next
 * connection by them; an entry that is refused names itself and leaves the lists as they were. */

/* What space has no counterpart for is refused when it asks for something: a SOCKS5 proxy behind the gateway,
 * and per-domain request transforms. dnsServers is taken and not used: the gateway resolves the names the
 * lists allow, and no DNS server is reached from a sandbox. */
static int check_unsupported(Request *r, cJSON *o) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "egressProxy");

        if (v && !cJSON_IsNull(v))
                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                          "egressProxy is not supported by space: its egress gateway connects "
                                          "itself; leave it out") ?: -EOPNOTSUPP;
        v = cJSON_GetObjectItemCaseSensitive(o, "rules");
        if (v && !cJSON_IsNull(v) && !(cJSON_IsObject(v) && cJSON_GetArraySize(v) == 0))
                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                          "rules (request transforms) are not supported by space; leave them out")
                               ?: -EOPNOTSUPP;
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
        _cleanup_strv_free_ char **allow_out = NULL, **deny_out = NULL, **allow = NULL, **deny = NULL;
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
        cJSON_Delete(o);
        if (e2b_find_sandbox(r, a->arg[0], &s) < 0)
                return;
        if (!e2b_state(s)) {
                http_respond_error(r, ERROR_SANDBOX_NOT_RUNNING, "sandbox %s is %s: its network cannot be changed",
                                   s->id, sandbox_state_to_string(s->state));
                return;
        }
        q = egress_lists_from_e2b(allow_out, deny_out, internet, &allow, &deny, &e);
        if (q >= 0)
                q = sandbox_set_egress_lists(s, allow, deny, &e);
        if (q < 0) {
                if (q == -ENOMEM && !e.message)
                        http_respond_error(r, ERROR_INTERNAL, "out of memory");
                else
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s", e.message ?: "bad network options");
                return;
        }
        log_info("sandbox %s: its E2B network changed: %zu allowed, %zu denied", s->id, count(allow), count(deny));
        http_respond_empty(r, 204);
}
