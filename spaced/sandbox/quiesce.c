/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "macro.h"
#include "sandbox/sandbox.h"
#include "channel/channel.h"

/* The workload stands still before a save others restore from (ARCHITECTURE.md, "Checkpoint, fork and
 * restore"): the agent freezes every process it started, and the INIT that gives a copy its clock and seed
 * thaws them, so no process of a fork, a restore or a wake runs an instruction with the snapshot's RNG state or
 * clock. A freeze that fails does not stop the save: the guest can only have broken its own agent (or it is
 * an older one, which cannot freeze), it hurts no one but its own copies, and a checkpoint that a guest could
 * refuse would be one it could hold hostage. It is said in the log instead. */

typedef struct Quiesce {
        Manager *manager;
        char id[SANDBOX_ID_LEN + 1];
        SandboxQuiesced then;
        void *job;
        uint64_t started;
} Quiesce;

static void quiesce_done(int r, const char *message, void *userdata) {
        Quiesce *q = userdata;
        uint64_t usec = now_usec_monotonic() - q->started;

        if (r > 0)
                log_debug("sandbox %s: workload frozen in %.1f ms", q->id, (double) usec / 1000.0);
        else if (r == 0)
                log_info("sandbox %s: its agent is older and cannot freeze the workload: copies restored from this "
                         "save may run a moment with its random state and clock", q->id);
        else
                log_warning("sandbox %s: the workload was not frozen for the save (%s): copies restored from it may "
                            "run a moment with its random state and clock", q->id, message ?: strerror(-r));
        q->then(q->manager, q->job, usec);
        free(q);
}

void sandbox_quiesce(Manager *m, Sandbox *s, SandboxQuiesced then, void *job) {
        Quiesce *q;
        int r;

        /* one without a channel cannot be asked */
        if (!s->channel.agent) {
                then(m, job, 0);
                return;
        }
        q = calloc(1, sizeof *q);
        if (!q) {
                then(m, job, 0);
                return;
        }
        *q = (Quiesce) { .manager = m, .then = then, .job = job, .started = now_usec_monotonic() };
        memcpy(q->id, s->id, sizeof q->id);
        r = agent_freeze(s->channel.agent, AGENT_FREEZE_TIMEOUT_USEC, quiesce_done, q);
        if (r < 0)
                quiesce_done(r, NULL, q);
}
