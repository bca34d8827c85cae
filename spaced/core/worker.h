/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Threads for blocking work (restores, snapshots, imports). A worker never touches the model: it posts a
 * Completion, which runs on the event loop thread. */

#include "core/manager.h"

struct Completion {
        void (*done)(Manager *m, void *userdata);
        void *userdata;
        Completion *next;
};
int worker_start(Manager *m, void *(*fn)(void *), void *arg);
void completion_post(Manager *m, void (*done)(Manager *m, void *userdata), void *userdata);
int completions_setup(Manager *m);

