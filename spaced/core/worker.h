/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Threads for blocking work (restores, snapshots, imports). A worker never touches the model: it posts a
 * Completion, which runs on the event loop thread. */

#include <stdbool.h>

#include "core/manager.h"

struct Completion {
        void (*done)(Manager *m, void *userdata);
        void *userdata;
        bool worker_end;        /* posted by a worker_start() thread as its end: counted off workers_running */
        Completion *next;
};
int worker_start(Manager *m, void *(*fn)(void *), void *arg);
void completion_post(Manager *m, void (*done)(Manager *m, void *userdata), void *userdata);
/* The same from a thread worker_start() did not start (the MCP engine's calls), which ends no worker. */
void completion_post_foreign(Manager *m, void (*done)(Manager *m, void *userdata), void *userdata);
int completions_setup(Manager *m);

