/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A list of parties waiting for something to finish (an operation). The one who waits embeds a Waiter and
 * says how it is woken; the one who finishes calls waiters_wake() and knows nothing of who waited, so core
 * never calls into http (ARCHITECTURE.md, "Layers"). */

typedef struct Waiter Waiter;
struct Waiter {
        void (*wake)(Waiter *w);   /* called once, after the waiter is unlinked */
        Waiter **list;
        Waiter *prev, *next;
};

void waiter_add(Waiter **list, Waiter *w);
/* Takes w off its list, if it is on one. */
void waiter_unlink(Waiter *w);
/* Unlinks every waiter on the list and wakes each. */
void waiters_wake(Waiter **list);
