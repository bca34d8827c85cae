/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Operations (ARCHITECTURE.md, decision 6): slow changes journaled in SQLite, reported by GET and
 * long polls, finished or rolled back by the next daemon after a crash. */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "core/error.h"
#include "core/manager.h"
#include "core/waiter.h"

typedef enum OperationState {
        OPERATION_PENDING,
        OPERATION_RUNNING,
        OPERATION_SUCCEEDED,
        OPERATION_FAILED,
        _OPERATION_STATE_MAX,
} OperationState;

/* What a running operation has done so far (imports); shared with its worker thread under lock. */
typedef struct OperationProgress {
        pthread_mutex_t lock;
        const char *phase;   /* a static string */
        uint64_t bytes_done;
        uint64_t bytes_total;
        unsigned layer;
        unsigned layers;
        /* Set by the worker before it starts when its work can stop early (imports): DELETE on the operation
         * sets cancel, which the worker reads between blocks, without the lock. */
        bool cancellable;
        atomic_bool cancel;
} OperationProgress;
/* A VmSaveProgress for an OperationProgress: phase "writing memory", bytes written of (written + RAM to go). */
void operation_progress_save(uint64_t written, uint64_t remaining, void *userdata);

/* Not journaled: a create loaded from the store says neither. */
typedef enum FromPool {
        FROM_POOL_UNKNOWN,
        FROM_POOL_NO,
        FROM_POOL_YES,
} FromPool;

struct Operation {
        Manager *manager;
        char id[OPERATION_ID_LEN + 1];
        char *kind;
        OperationState state;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        int64_t created_at;
        int64_t finished_at;
        Error error;
        Waiter *waiters;     /* who waits for it to finish (long polls) */
        unsigned pending;    /* a fork: children still being created */
        unsigned failed;
        char **children;     /* a fork: the sandboxes it made */
        char checkpoint_id[CHECKPOINT_ID_LEN + 1]; /* a checkpoint: the one it takes */
        bool drop_checkpoint; /* a fork of a sandbox: checkpoint_id, its own, goes once the children are made */
        OperationProgress *progress; /* while running, when the work reports progress (the worker's) */
        char *result;        /* JSON of what a finished operation made (an import: digest, tags, ...) */
        FromPool from_pool;  /* a create of this daemon's: whether a warm pool member served it */
        Operation *next;
};

const char *operation_state_to_string(OperationState s);
int operation_state_from_string(const char *s, OperationState *ret);

Operation *operation_new(Manager *m, const char *kind, const char *sandbox_id);
Operation *operation_find(Manager *m, const char *id);
/* Finishes op: succeeded with ERROR_NONE, else failed with code and message. */
void operation_finish(Operation *op, ErrorCode code, const char *message);
/* Asks a running operation to stop (it then ends failed with ERROR_CANCELLED): -EALREADY when it finished,
 * -EOPNOTSUPP when its kind cannot stop early; either with a message in reterr (ERROR_INVALID_STATE). */
int operation_cancel(Operation *op, Error *reterr);
int operation_save(Operation *op);
void operations_free(Manager *m);

