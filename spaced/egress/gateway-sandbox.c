/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "egress/egress-internal.h"
#include "macro.h"
#include "string-util.h"

/* What the gateway keeps of each sandbox between frames (ARCHITECTURE.md, decision 10):
 *  - its policy, built at its first question and kept: profiles are fixed for a sandbox's life, and each
 *    change to its lists (a pool member handed out to a create, E2B's network update through
 *    sandbox_set_egress_lists()) calls egress_gateway_policy_changed();
 *  - its lookups on worker threads, bounded per sandbox and in all;
 *  - a token bucket per kind of frame (RESOLVE, CONNECT), so that a guest that floods is refused at once,
 *    costs the daemon a lookup in this list and an ERROR frame, and leaves the others' share alone. Its
 *    refusals are logged once a burst: the first, then one entry with the count when it ends (or a minute
 *    later, if it goes on), never one a frame. */

#define LOOKUPS_PER_SANDBOX_MAX 16U     /* names in flight on worker threads, per sandbox */
#define LOOKUPS_MAX 128U                /* and in all */
#define BURST_QUIET_USEC 1000000ULL     /* a burst ends with an admitted frame this long after its last refusal */
#define BURST_REPORT_USEC 60000000ULL   /* a burst that goes on is counted in the log this often */

typedef struct Bucket {
        double tokens;
        uint64_t last_usec;             /* 0: full, never used */
} Bucket;

/* A burst of refusals over one limit, going on or not. */
typedef struct Burst {
        bool on;
        const char *via, *reason;       /* the first refusal's */
        uint64_t refused;               /* not logged yet */
        uint64_t first_usec, last_usec, reported_usec;
} Burst;

static const EgressSandboxOps *sandbox_ops;

void egress_set_sandbox_ops(const EgressSandboxOps *ops) {
        sandbox_ops = ops;
}

Sandbox *gateway_sandbox_find(Manager *m, const char *id) {
        return sandbox_ops->find(m, id);
}

Manager *gateway_sandbox_manager(Sandbox *s) {
        return sandbox_ops->manager(s);
}

const char *gateway_sandbox_id(Sandbox *s) {
        return sandbox_ops->id(s);
}

const char *gateway_sandbox_data_dir(Sandbox *s) {
        return sandbox_ops->data_dir(s);
}

AgentConn *gateway_sandbox_agent(Sandbox *s) {
        return sandbox_ops->agent(s);
}

typedef struct GatewaySandbox {
        char *sandbox_id;
        GatewayPolicy *policy;          /* NULL: not built (yet, or again) */
        unsigned lookups;
        Bucket buckets[_GATEWAY_KIND_MAX];
        Burst bursts[_GATEWAY_KIND_MAX][_GATEWAY_LIMIT_MAX];
        struct GatewaySandbox *next;
} GatewaySandbox;

static struct {
        GatewaySandbox *sandboxes;
        unsigned lookups;
} gws;

static GatewaySandbox *find(const char *sandbox_id) {
        for (GatewaySandbox **i = &gws.sandboxes; *i; i = &(*i)->next)
                if (streq((*i)->sandbox_id, sandbox_id)) {
                        GatewaySandbox *g = *i;

                        /* to the front: a sandbox that floods is found first */
                        *i = g->next;
                        g->next = gws.sandboxes;
                        gws.sandboxes = g;
                        return g;
                }
        return NULL;
}

static GatewaySandbox *get(const char *sandbox_id) {
        GatewaySandbox *g = find(sandbox_id);

        if (g)
                return g;
        g = calloc(1, sizeof *g);
        if (!g || !(g->sandbox_id = strdup(sandbox_id))) {
                free(g);
                return NULL;
        }
        g->next = gws.sandboxes;
        gws.sandboxes = g;
        return g;
}

GatewayPolicy *gateway_policy_ref(GatewayPolicy *p) {
        if (p)
                p->refs++;
        return p;
}

GatewayPolicy *gateway_policy_unref(GatewayPolicy *p) {
        if (p && --p->refs == 0) {
                egress_policy_done(&p->policy);
                egress_settings_unref(p->settings);
                strv_free(p->placeholders);
                free(p);
        }
        return NULL;
}

/* The placeholders the sandbox holds for its bindings' secrets, read from its environment: only values in a
 * placeholder's shape count, so that no short or common text is taken for one. */
static int policy_placeholders(GatewayPolicy *p, char **env) {
        for (size_t i = 0; i < p->policy.n_bindings; i++) {
                const char *secret = p->policy.bindings[i]->secrets[0];
                _cleanup_free_ char *var = NULL;
                bool seen = false;
                size_t vl;

                if (p->policy.bindings[i]->header)
                        continue;
                for (char **k = p->placeholders; k && *k && !seen; k += 2)
                        seen = streq(*k, secret);
                if (seen || egress_placeholder_variable(secret, &var) < 0)
                        continue;
                vl = strlen(var);
                for (char **e = env; e && *e; e++)
                        if (strncmp(*e, var, vl) == 0 && (*e)[vl] == '=' && egress_placeholder_valid(secret, *e + vl + 1)) {
                                if (strv_extend(&p->placeholders, secret) < 0 ||
                                    strv_extend(&p->placeholders, *e + vl + 1) < 0)
                                        return -ENOMEM;
                                break;
                        }
        }
        return 0;
}

int gateway_policy_get(Manager *m, Sandbox *s, GatewayPolicy **ret, Error *reterr) {
        GatewaySandbox *g = get(gateway_sandbox_id(s));
        GatewayPolicy *p;
        int r;

        if (!g)
                return -ENOMEM;
        /* a reload replaced the settings: the sandbox's profiles are decided by their new definitions from its
         * next connection on (space-egress(5), "Reload") */
        if (g->policy && g->policy->settings != m->egress)
                g->policy = gateway_policy_unref(g->policy);
        if (!g->policy) {
                p = calloc(1, sizeof *p);
                if (!p)
                        return -ENOMEM;
                char **profiles, **allow, **deny;
                sandbox_ops->egress(s, &profiles, &allow, &deny);
                r = egress_policy_build(&m->egress->policy, profiles, allow, deny,
                                        &p->policy, reterr);
                if (r < 0) {
                        free(p);
                        return r;
                }
                r = egress_policy_add_bindings(&p->policy, sandbox_ops->bindings ? sandbox_ops->bindings(s) : NULL,
                                               reterr);
                if (r < 0) {
                        egress_policy_done(&p->policy);
                        free(p);
                        return r;
                }
                p->refs = 1;
                p->settings = egress_settings_ref(m->egress);
                r = policy_placeholders(p, sandbox_ops->env ? sandbox_ops->env(s) : NULL);
                if (r < 0) {
                        gateway_policy_unref(p);
                        return r;
                }
                g->policy = p;
        }
        *ret = gateway_policy_ref(g->policy);
        return 0;
}

void egress_gateway_policy_changed(const char *sandbox_id) {
        GatewaySandbox *g = find(sandbox_id);

        /* connections in flight keep the policy they were decided with, by their reference */
        if (g)
                g->policy = gateway_policy_unref(g->policy);
}

bool gateway_lookup_take(const char *sandbox_id) {
        GatewaySandbox *g;

        if (gws.lookups >= LOOKUPS_MAX)
                return false;
        g = get(sandbox_id);
        if (!g || g->lookups >= LOOKUPS_PER_SANDBOX_MAX)
                return false;
        g->lookups++;
        gws.lookups++;
        return true;
}

void gateway_lookup_put(const char *sandbox_id) {
        GatewaySandbox *g = find(sandbox_id);

        /* the sandbox may be gone meanwhile: its lookup still counted in all */
        if (g && g->lookups > 0)
                g->lookups--;
        if (gws.lookups > 0)
                gws.lookups--;
}

static const char *kind_noun(GatewayKind kind) {
        return kind == GATEWAY_RESOLVE ? "DNS questions" : "connections";
}

static void burst_log(Manager *m, Sandbox *s, GatewayKind kind, Burst *b, uint64_t now, bool ended) {
        char msg[EGRESS_MESSAGE_MAX];
        EgressAuditEntry e = {
                .event = "deny",
                .via = b->via,
                .reason = b->reason,
                .message = msg,
        };

        (void) snprintf(msg, sizeof msg, "%" PRIu64 " more %s refused in %.1f s%s", b->refused, kind_noun(kind),
                        (double) (now - (ended ? b->first_usec : b->reported_usec)) / 1e6,
                        ended ? ": the burst is over" : ", and it goes on");
        egress_audit(m, gateway_sandbox_id(s), gateway_sandbox_data_dir(s), &e);
        b->refused = 0;
        b->reported_usec = now;
}

void gateway_refused(Manager *m, Sandbox *s, GatewayKind kind, GatewayLimit limit, const EgressAuditEntry *e) {
        GatewaySandbox *g = get(gateway_sandbox_id(s));
        uint64_t now = now_usec_monotonic();
        Burst *b;

        if (!g) {
                egress_audit(m, gateway_sandbox_id(s), gateway_sandbox_data_dir(s), e);
                return;
        }
        b = &g->bursts[kind][limit];
        if (!b->on) {
                *b = (Burst) { .on = true, .via = e->via, .reason = e->reason, .first_usec = now, .reported_usec = now };
                egress_audit(m, gateway_sandbox_id(s), gateway_sandbox_data_dir(s), e);
        } else {
                b->refused++;
                if (now - b->reported_usec >= BURST_REPORT_USEC)
                        burst_log(m, s, kind, b, now, false);
        }
        b->last_usec = now;
}

/* Refills b for the time since it was last used and takes a token. */
static bool bucket_take(Bucket *b, unsigned rate, unsigned burst, uint64_t now) {
        if (b->last_usec == 0)
                b->tokens = burst;
        else
                b->tokens = MIN((double) burst, b->tokens + (double) (now - b->last_usec) * rate / 1e6);
        b->last_usec = now;
        if (b->tokens < 1.0)
                return false;
        b->tokens -= 1.0;
        return true;
}

bool gateway_admit(Manager *m, Sandbox *s, GatewayKind kind, EgressAuditEntry *e, char *ret_message, size_t size) {
        EgressLimits l = egress_settings_limits(m->egress);
        unsigned rate = kind == GATEWAY_RESOLVE ? l.resolve_rate : l.connect_rate;
        unsigned burst = kind == GATEWAY_RESOLVE ? l.resolve_burst : l.connect_burst;
        GatewaySandbox *g = get(gateway_sandbox_id(s));
        uint64_t now = now_usec_monotonic();

        if (!g)
                return true; /* out of memory: the other bounds still hold */
        if (bucket_take(&g->buckets[kind], rate, burst, now)) {
                /* a frame let in a quiet while after the last refusal ends a burst: its count is logged */
                for (GatewayLimit i = 0; i < _GATEWAY_LIMIT_MAX; i++) {
                        Burst *b = &g->bursts[kind][i];

                        if (b->on && now - b->last_usec >= BURST_QUIET_USEC) {
                                if (b->refused > 0)
                                        burst_log(m, s, kind, b, now, true);
                                b->on = false;
                        }
                }
                return true;
        }
        (void) snprintf(ret_message, size, "over the sandbox's rate of %u %s a second (a burst of %u): refused until "
                        "it slows down; more refusals in this burst are counted, not logged one by one", rate,
                        kind_noun(kind), burst);
        e->event = "deny";
        e->reason = egress_reason_to_string(EGRESS_REASON_RATE_LIMITED);
        e->message = ret_message;
        gateway_refused(m, s, kind, GATEWAY_LIMIT_RATE, e);
        return false;
}

void gateway_sandbox_forget(const char *sandbox_id) {
        for (GatewaySandbox **i = &gws.sandboxes; *i; i = &(*i)->next)
                if (streq((*i)->sandbox_id, sandbox_id)) {
                        GatewaySandbox *g = *i;

                        *i = g->next;
                        gateway_policy_unref(g->policy);
                        free(g->sandbox_id);
                        free(g);
                        return;
                }
}
