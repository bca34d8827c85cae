/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/util.h"
#include "core/worker.h"
#include "egress/egress.h"
#include "api/api.h"
#include "macro.h"
#include "sandbox/sandbox.h"

/* GET /v1/egress/profiles[/{name}], POST /v1/sandboxes/{id}/egress/test and GET /v1/sandboxes/{id}/egress/log
 * (space-egress(5)): the policy as loaded, what it says of a destination (names resolved as the gateway
 * resolves them), and the gateway's audit log of a sandbox. */

#define RESOLVE_TIMEOUT_USEC (15ULL * 1000000ULL)
#define AUDIT_READ_MAX 1000

static cJSON *rules_to_json(const EgressRules *rules) {
        cJSON *a = cJSON_CreateArray();

        for (size_t i = 0; a && i < rules->n; i++)
                cJSON_AddItemToArray(a, cJSON_CreateString(rules->rules[i].text));
        return a;
}

static cJSON *profile_to_json(const EgressProfile *p) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "name", p->name);
        cJSON_AddBoolToObject(o, "default", p->is_default);
        cJSON_AddItemToObject(o, "rules", rules_to_json(&p->rules));
        return o;
}

void api_get_egress_profiles(Request *r, const RouteArgs *a) {
        const EgressConfig *c = &http_manager(r->http)->egress->policy;
        cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "profiles");

        for (size_t i = 0; i < c->n_profiles; i++)
                cJSON_AddItemToArray(list, profile_to_json(&c->profiles[i]));
        cJSON_AddItemToObject(o, "base", rules_to_json(&c->base));
        cJSON_AddBoolToObject(o, "enforced", true);
        http_respond_json(r, 200, o);
}

void api_get_egress_profile(Request *r, const RouteArgs *a) {
        const EgressProfile *p = egress_profile_find(&http_manager(r->http)->egress->policy, a->arg[0]);

        if (!p) {
                http_respond_error(r, ERROR_EGRESS_PROFILE_NOT_FOUND, "no egress profile '%s'; 'spacectl egress ls' "
                                   "lists them", a->arg[0]);
                return;
        }
        http_respond_json(r, 200, profile_to_json(p));
}

/* A name resolved the gateway's way (egress_resolve), the request parked until it is done. */
typedef struct ResolveJob {
        int err;
        EgressAddr addrs[EGRESS_RESOLVE_ADDRS_MAX];
        size_t n_addrs;
        bool done;
        bool orphaned;       /* the request went away first: the completion frees the job */
        Waiter *waiters;
        /* what the answer needs once the lookup is back */
        char sandbox_id[SANDBOX_ID_LEN + 1];
        char host[EGRESS_HOST_MAX + 1];
        char name[EGRESS_HOST_MAX + 1];
        uint16_t port;
} ResolveJob;

static void resolve_done_cb(Manager *m, void *userdata, int err, const EgressAddr *addrs, size_t n) {
        ResolveJob *j = userdata;

        j->err = err;
        j->n_addrs = MIN(n, (size_t) EGRESS_RESOLVE_ADDRS_MAX);
        memcpy(j->addrs, addrs, j->n_addrs * sizeof *addrs);
        j->done = true;
        if (j->orphaned)
                free(j);
        else
                waiters_wake(&j->waiters);
}

static void resolve_detach(void *userdata, Request *r) {
        ResolveJob *j = userdata;

        waiter_unlink(&r->waiter);
        if (j->done)
                free(j);
        else
                j->orphaned = true;
}

static cJSON *decision_to_json(const EgressDecision *d) {
        cJSON *o = cJSON_CreateObject();
        char addr[EGRESS_ADDR_STRLEN];
        _cleanup_free_ char *rule = NULL;

        egress_addr_format(&d->addr, addr);
        cJSON_AddStringToObject(o, "address", addr);
        cJSON_AddBoolToObject(o, "allowed", d->allowed);
        cJSON_AddStringToObject(o, "reason", d->message);
        cJSON_AddStringToObject(o, "reason_code", egress_reason_to_string(d->reason));
        if (d->rule && asprintf(&rule, "%s: %s", d->owner ?: "?", d->rule->text) >= 0)
                cJSON_AddStringToObject(o, "rule", rule);
        else
                cJSON_AddNullToObject(o, "rule");
        cJSON_AddStringToObject(o, "class", egress_class_to_string(d->cls.cls));
        return o;
}

static cJSON *answer_new(const Sandbox *s, const char *host, uint16_t port) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "sandbox", s->id);
        cJSON_AddStringToObject(o, "host", host);
        cJSON_AddNumberToObject(o, "port", port);
        return o;
}

/* A refusal decided before any address exists, as the gateway decides it: a name no allow rule names is never
 * resolved (no_rule), an allowed name that does not resolve cannot be reached (resolve_failed). */
static void respond_denied_name(Request *r, const Sandbox *s, const char *host, uint16_t port, EgressReason reason,
                                const char *why) {
        cJSON *o = answer_new(s, host, port);

        cJSON_AddFalseToObject(o, "allowed");
        cJSON_AddStringToObject(o, "reason", why);
        cJSON_AddStringToObject(o, "reason_code", egress_reason_to_string(reason));
        cJSON_AddNullToObject(o, "rule");
        cJSON_AddNullToObject(o, "address");
        cJSON_AddArrayToObject(o, "addresses");
        cJSON_AddBoolToObject(o, "enforced", true);
        http_respond_json(r, 200, o);
}

/* Decides every address; the answer is the first denied one (a name is only as safe as all it resolves to,
 * or the next lookup could pick the denied one), else the first. */
static void respond_decisions(Request *r, const Sandbox *s, const EgressPolicy *p, const char *host,
                              const char *name, const EgressAddr *addrs, size_t n, uint16_t port) {
        cJSON *o, *list, *answer = NULL;

        list = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) {
                EgressQuery query = { .host = name, .addr = addrs[i], .port = port, .self_port = http_api_port(r->http),
                                      .self_tls_port = http_tls_port(r->http) };
                EgressDecision d;
                cJSON *one;

                if (egress_decide(p->sources, p->n_sources, &query, &d) < 0)
                        continue;
                one = decision_to_json(&d);
                cJSON_AddItemToArray(list, one);
                if (!answer || (!d.allowed && cJSON_IsTrue(cJSON_GetObjectItem(answer, "allowed"))))
                        answer = one;
        }
        if (!answer) {
                cJSON_Delete(list);
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s has no IPv4 or IPv6 address", host);
                return;
        }
        o = answer_new(s, host, port);
        cJSON_AddItemToObject(o, "allowed", cJSON_Duplicate(cJSON_GetObjectItem(answer, "allowed"), true));
        cJSON_AddItemToObject(o, "reason", cJSON_Duplicate(cJSON_GetObjectItem(answer, "reason"), true));
        cJSON_AddItemToObject(o, "reason_code", cJSON_Duplicate(cJSON_GetObjectItem(answer, "reason_code"), true));
        cJSON_AddItemToObject(o, "rule", cJSON_Duplicate(cJSON_GetObjectItem(answer, "rule"), true));
        cJSON_AddItemToObject(o, "address", cJSON_Duplicate(cJSON_GetObjectItem(answer, "address"), true));
        cJSON_AddItemToObject(o, "addresses", list);
        cJSON_AddBoolToObject(o, "enforced", true);
        http_respond_json(r, 200, o);
}

static int policy_of(Request *r, const Sandbox *s, EgressPolicy *ret) {
        _cleanup_(error_done) Error e = {};

        if (egress_policy_build(&http_manager(r->http)->egress->policy, s->egress_profiles, s->egress_allow,
                                s->egress_deny, ret, &e) < 0) {
                respond_error_or(r, &e, "cannot build the sandbox's egress policy");
                return -EINVAL;
        }
        return 0;
}

/* The lookup is back, or its deadline passed: decide what it found with the policy as it is now. */
static void egress_test_resolved(Request *r, void *userdata) {
        _cleanup_(egress_policy_done) EgressPolicy p = {};
        _cleanup_free_ char *why = NULL;
        ResolveJob *j = userdata;
        Sandbox *s = sandbox_find_by_id(http_manager(r->http), j->sandbox_id);

        if (!s)
                http_respond_error(r, ERROR_SANDBOX_NOT_FOUND, "sandbox %s was removed", j->sandbox_id);
        else if (!j->done)
                http_respond_error(r, ERROR_DEADLINE_EXCEEDED, "resolving %s took longer than %llu s", j->name,
                                   RESOLVE_TIMEOUT_USEC / 1000000ULL);
        else if (j->err < 0 || j->n_addrs == 0) {
                if (asprintf(&why, "cannot resolve %s: %s", j->name,
                             j->err == -ENOENT || j->n_addrs == 0 ? "no such name" : strerror(-j->err)) < 0)
                        why = NULL;
                respond_denied_name(r, s, j->host, j->port, EGRESS_REASON_RESOLVE_FAILED, why ?: "cannot resolve");
        } else if (policy_of(r, s, &p) >= 0)
                respond_decisions(r, s, &p, j->host, j->name, j->addrs, j->n_addrs, j->port);
        http_stream_detach(r);
}

/* Looks name up on a worker (getaddrinfo blocks) and parks the request until egress_test_resolved. */
static void egress_test_resolve(Request *r, const Sandbox *s, const char *host, const char *name, uint16_t port) {
        ResolveJob *j = calloc(1, sizeof *j);
        int q;

        if (!j) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return;
        }
        strcpy(j->sandbox_id, s->id);
        snprintf(j->host, sizeof j->host, "%s", host);
        strcpy(j->name, name);
        j->port = port;
        q = egress_resolve(http_manager(r->http), name, resolve_done_cb, j);
        if (q < 0) {
                free(j);
                http_respond_error(r, ERROR_INTERNAL, "cannot resolve %s: %s", name, strerror(-q));
                return;
        }
        r->stream = (HttpStream) { .detach = resolve_detach, .userdata = j };
        q = http_wait_on(r, &j->waiters, now_usec_monotonic() + RESOLVE_TIMEOUT_USEC, egress_test_resolved, j);
        if (q < 0) {
                http_stream_detach(r);
                http_respond_error(r, ERROR_INTERNAL, "cannot wait: %s", strerror(-q));
        }
}

/* POST /v1/sandboxes/{id}/egress/test: decided in the gateway's order, so that the answer and its reason are
 * the gateway's: a literal as the address it means; a name first by the rules that name it (never resolved
 * when none allows it), then every address it resolves to. */
void api_post_egress_test(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "host", "port", NULL };
        _cleanup_(egress_policy_done) EgressPolicy p = {};
        char name[EGRESS_HOST_MAX + 1];
        const char *host, *why;
        uint64_t port = 443;
        EgressAddr literal;
        Sandbox *s;
        cJSON *o, *v;

        o = parse_body_object(r, fields);
        if (!o)
                return;
        v = cJSON_GetObjectItemCaseSensitive(o, "host");
        if (!cJSON_IsString(v) || !*v->valuestring) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "host is required: a name or an IP address");
                goto out;
        }
        host = v->valuestring;
        if (get_uint_field(r, o, "port", 1, 65535, &port) < 0 || resolve_sandbox(r, a->arg[0], &s) < 0 ||
            policy_of(r, s, &p) < 0)
                goto out;

        /* a literal in any spelling is decided as the address it means, never looked up */
        if (egress_addr_parse_literal(host, &literal) >= 0)
                respond_decisions(r, s, &p, host, NULL, &literal, 1, (uint16_t) port);
        else if (egress_host_normalize(host, name) < 0)
                http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                   "'%.100s' is neither an IP address nor an exact host name%s", host,
                                   egress_host_is_numeric(host) ? " (it ends in a number, so it would be read as an "
                                                                  "IPv4 address, and it is not a valid one)" : "");
        else if (!egress_name_permitted(&p, name, NULL, &why)) {
                _cleanup_free_ char *reason = NULL;

                if (asprintf(&reason, "%s: %s", name, why) < 0)
                        reason = NULL;
                respond_denied_name(r, s, host, (uint16_t) port, EGRESS_REASON_NO_RULE, reason ?: why);
        } else
                egress_test_resolve(r, s, host, name, (uint16_t) port);
out:
        cJSON_Delete(o);
}

/* GET /v1/sandboxes/{id}/egress/log?after=SEQ&limit=N: the entries numbered above SEQ, oldest first. A
 * follower asks again with the last seq it saw. */
void api_get_egress_log(Request *r, const RouteArgs *a) {
        const char *after_s = http_query(r, "after"), *limit_s = http_query(r, "limit");
        unsigned long long after = 0, limit = AUDIT_READ_MAX;
        cJSON *o, *list = NULL;
        Sandbox *s;
        char *end;
        int q;

        if (after_s) {
                errno = 0;
                after = strtoull(after_s, &end, 10);
                if (errno || *end || end == after_s || after_s[0] == '-') {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "after must be an entry number (seq), got '%.40s'",
                                           after_s);
                        return;
                }
        }
        if (limit_s) {
                errno = 0;
                limit = strtoull(limit_s, &end, 10);
                if (errno || *end || end == limit_s || limit == 0 || limit > AUDIT_READ_MAX) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "limit must be 1..%d, got '%.40s'", AUDIT_READ_MAX,
                                           limit_s);
                        return;
                }
        }
        if (resolve_sandbox(r, a->arg[0], &s) < 0)
                return;
        q = egress_audit_read(s->id, s->data_dir, after, (size_t) limit, &list);
        if (q < 0) {
                http_respond_error(r, ERROR_INTERNAL, "cannot read the egress log: %s", strerror(-q));
                return;
        }
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "sandbox", s->id);
        cJSON_AddItemToObject(o, "entries", list);
        http_respond_json(r, 200, o);
}
