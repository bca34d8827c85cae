/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Port forwards into a sandbox (spacectl port): a listener on 127.0.0.1 that the daemon owns; each connection
 * it accepts becomes a PORT tunnel to a port of the guest (channel/tunnel.h). Loopback is every local user's:
 * a connection whose client socket another user owns (the kernel says whose, lib/sock-diag.h) is closed before
 * anything else happens, unless the forward was made open to any user. A forward lives until it is
 * removed, its holder goes away (a held forward: spacectl port in the foreground) or its sandbox does. A
 * connection to a suspended or paused sandbox wakes it first and waits for that. A background forward (not
 * held) has a row in the store and outlives a restart of the daemon: the next one listens on its port again. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "core/error.h"
#include "core/waiter.h"
#include "sandbox/sandbox.h"

#define FORWARDS_MAX 64            /* per sandbox */
#define FORWARD_PENDING_MAX 64     /* accepted connections waiting for their sandbox to wake, per forward */
#define FORWARD_WAKE_WAIT_SEC 120  /* how long they wait */

typedef struct Forward Forward;
typedef struct ForwardConn ForwardConn;

struct Forward {
        char id[FORWARD_ID_LEN + 1];
        Sandbox *sandbox;
        uint16_t guest_port;
        uint16_t host_port;
        int64_t created_at;
        uint64_t connections;      /* accepted so far */
        unsigned active;           /* tunnels open now */
        uint64_t bytes_up;         /* from the guest, of the tunnels that ended */
        uint64_t bytes_down;
        bool kept;                 /* a background forward: its row in the store brings it back after a restart */
        bool any_user;             /* every local user may connect; else only the daemon's user and root */
        uint64_t refused;          /* connections of other users, closed unserved */
        /* Held: told once when the forward goes away by anything but forward_remove() of the holder itself (a
         * `port rm`, its sandbox removed); the holder must not touch f after. NULL: not held. */
        void (*gone)(Forward *f, void *userdata);
        void *gone_userdata;

        /* private */
        sd_event_source *listener;
        ForwardConn *conns;
        int pending[FORWARD_PENDING_MAX];   /* connections parked until the sandbox runs */
        unsigned n_pending;
        Waiter waiter;                      /* on the operation that wakes the sandbox */
        sd_event_source *pending_deadline;
        Forward *next;
};

/* Listens on 127.0.0.1:host_port (0: a free port, chosen by the kernel) and forwards to guest_port. keep: a
 * background forward, recorded in the store before this returns (a held one is not: its holder does not outlive
 * the daemon). any_user: connections of every local user are served, not only the daemon's own user's. Errors: invalid_argument (a port out of range), port_in_use, permission_denied (a privileged
 * port), limit_exceeded (FORWARDS_MAX), sandbox_not_running (a sandbox being removed or failed), internal
 * (the store cannot be written). */
int forward_add(Sandbox *s, unsigned guest_port, unsigned host_port, bool keep, bool any_user, Forward **ret,
                Error *reterr);
/* By id, or by host port (decimal). */
Forward *forward_find(Sandbox *s, const char *ref);
/* Deletes a kept forward's row, so that it does not come back after a restart: before forward_remove() of a
 * `port rm`, which fails whole (the forward stays) when the store cannot be written. 0 for one not kept. */
int forward_forget(Forward *f, Error *reterr);
/* Closes the listener, ends its open connections and frees f (and its row in the store, if it still has one).
 * Calls f->gone (when set) unless it is cleared. */
void forward_remove(Forward *f);
/* Every forward of s (the sandbox goes away). */
void forwards_free(Sandbox *s);
/* At start, once the sandboxes are loaded and reconciled: each recorded forward listens again on its host port
 * with its id. One whose sandbox is gone or whose port cannot be had (taken by something else by now) is
 * dropped, its row deleted, with a warning that names it, its port and why. */
void forwards_restore(Manager *m);

/* Readies s for a connection or a request: 1 when it runs now; 0 with *ret_op the operation to wait for (a
 * wake of a suspended sandbox, a resume of a paused one, or whatever change is already under way); < 0 with
 * reterr set when it cannot be used (removed, failed). Counts as use (last_active). */
int sandbox_ready_for_use(Sandbox *s, Operation **ret_op, Error *reterr);
