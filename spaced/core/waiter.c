/* SPDX-License-Identifier: Apache-2.0 */
#include <stddef.h>

#include "core/waiter.h"

void waiter_add(Waiter **list, Waiter *w) {
        w->list = list;
        w->prev = NULL;
        w->next = *list;
        if (*list)
                (*list)->prev = w;
        *list = w;
}

void waiter_unlink(Waiter *w) {
        if (!w->list)
                return;
        if (w->prev)
                w->prev->next = w->next;
        else
                *w->list = w->next;
        if (w->next)
                w->next->prev = w->prev;
        w->list = NULL;
        w->prev = w->next = NULL;
}

void waiters_wake(Waiter **list) {
        while (*list) {
                Waiter *w = *list;

                waiter_unlink(w);
                w->wake(w);
        }
}
