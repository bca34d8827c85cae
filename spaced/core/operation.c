/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/operation.h"
#include "core/store.h"
#include "core/waiter.h"
#include "core/log.h"
#include "macro.h"
#include "core/util.h"

static const char *const operation_states[_OPERATION_STATE_MAX] = {
        [OPERATION_PENDING] = "pending",
        [OPERATION_RUNNING] = "running",
        [OPERATION_SUCCEEDED] = "succeeded",
        [OPERATION_FAILED] = "failed",
};

const char *operation_state_to_string(OperationState s) {
        return s < _OPERATION_STATE_MAX ? operation_states[s] : "unknown";
}

int operation_state_from_string(const char *s, OperationState *ret) {
        for (int i = 0; i < _OPERATION_STATE_MAX; i++)
                if (streq(s, operation_states[i])) {
                        *ret = (OperationState) i;
                        return 0;
                }
        return -EINVAL;
}

Operation *operation_new(Manager *m, const char *kind, const char *sandbox_id) {
        Operation *op = calloc(1, sizeof *op);

        if (!op)
                return NULL;
        op->manager = m;
        memcpy(op->id, "op-", 3);
        if (random_hex(op->id + 3, 16) < 0 || !(op->kind = strdup(kind))) {
                free(op);
                return NULL;
        }
        op->state = OPERATION_RUNNING;
        if (sandbox_id)
                snprintf(op->sandbox_id, sizeof op->sandbox_id, "%s", sandbox_id);
        op->created_at = now_unix();
        op->next = m->operations;
        m->operations = op;
        (void) operation_save(op);
        return op;
}

Operation *operation_find(Manager *m, const char *id) {
        for (Operation *op = m->operations; op; op = op->next)
                if (streq(op->id, id))
                        return op;
        return NULL;
}

int operation_save(Operation *op) {
        int r = store_put_operation(op->manager->store, op);
        if (r < 0)
                log_warning_errno(r, "Failed to save operation %s, ignoring", op->id);
        return r;
}

void operation_finish(Operation *op, ErrorCode code, const char *message) {
        op->state = code != ERROR_NONE ? OPERATION_FAILED : OPERATION_SUCCEEDED;
        op->finished_at = now_unix();
        if (code != ERROR_NONE)
                (void) error_set(&op->error, code, "%s", message ?: error_code_to_string(code));
        (void) operation_save(op);
        waiters_wake(&op->waiters);
}

int operation_cancel(Operation *op, Error *reterr) {
        if (op->state == OPERATION_SUCCEEDED || op->state == OPERATION_FAILED)
                return error_set(reterr, ERROR_INVALID_STATE, "operation %s has already %s: there is nothing to cancel",
                                 op->id, op->state == OPERATION_SUCCEEDED ? "succeeded" : "failed") ?: -EALREADY;
        if (!op->progress || !op->progress->cancellable)
                return error_set(reterr, ERROR_INVALID_STATE,
                                 "operation %s (%s) cannot be cancelled: only imports can; wait for it to finish",
                                 op->id, op->kind) ?: -EOPNOTSUPP;
        atomic_store(&op->progress->cancel, true);
        return 0;
}

void operations_free(Manager *m) {
        while (m->operations) {
                Operation *op = m->operations;
                m->operations = op->next;
                free(op->kind);
                strv_free(op->children);
                free(op->result);
                error_done(&op->error);
                free(op);
        }
}

void operation_progress_save(uint64_t written, uint64_t remaining, void *userdata) {
        OperationProgress *p = userdata;

        pthread_mutex_lock(&p->lock);
        p->phase = "writing memory";
        p->bytes_done = written;
        /* an estimate that only shrinks toward the truth: zero pages still to go take almost no bytes */
        p->bytes_total = written + remaining;
        pthread_mutex_unlock(&p->lock);
}
