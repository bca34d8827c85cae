/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "egress/egress-internal.h"
#include "macro.h"
#include "sandbox/sandbox.h"

/* What the gateway keeps of each sandbox between frames (ARCHITECTURE.md, decision 10):
 *  - its policy, built at its first question and kept: profiles are fixed for a sandbox's life, and the only
 *    change to its lists, a pool member handed out to a create, calls egress_gateway_policy_changed();
 *  - its lookups on worker threads, bounded per sandbox and in all. */

#define LOOKUPS_PER_SANDBOX_MAX 16U     /* names in flight on worker threads, per sandbox */
#define LOOKUPS_MAX 128U                /* and in all */

typedef struct GatewaySandbox {
        char *sandbox_id;
        GatewayPolicy *policy;          /* NULL: not built (yet, or again) */
        unsigned lookups;
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
                free(p);
        }
        return NULL;
}

int gateway_policy_get(Manager *m, Sandbox *s, GatewayPolicy **ret, Error *reterr) {
        GatewaySandbox *g = get(s->id);
        GatewayPolicy *p;
        int r;

        if (!g)
                return -ENOMEM;
        if (!g->policy) {
                p = calloc(1, sizeof *p);
                if (!p)
                        return -ENOMEM;
                r = egress_policy_build(&m->config.egress, s->egress_profiles, s->egress_allow, s->egress_deny,
                                        &p->policy, reterr);
                if (r < 0) {
                        free(p);
                        return r;
                }
                p->refs = 1;
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
