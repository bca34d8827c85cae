/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "core/log.h"
#include "macro.h"
#include "core/util.h"
#include "sandbox/sandbox.h"

#define WAKE_ON_DEMAND_WAIT_SEC 120

/* POST /v1/sandboxes/{id}/pause|resume|suspend|wake|stop|start[?wait=SECONDS]: operations, like create. */

static void post_lifecycle(Request *r, const RouteArgs *a, LifecycleKind kind) {
        Error e = {};
        Operation *op;
        Sandbox *s;
        unsigned wait;
        int q;

        if (parse_wait(r, &wait) < 0 || resolve_sandbox(r, a->arg[0], &s) < 0)
                return;
        q = sandbox_lifecycle_start(http_manager(r->http), s, kind, &op, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                error_done(&e);
                return;
        }
        start_wait(r, op, WAIT_LIFECYCLE, wait);
}

void api_post_pause(Request *r, const RouteArgs *a) {
        post_lifecycle(r, a, LIFECYCLE_PAUSE);
}

void api_post_resume(Request *r, const RouteArgs *a) {
        post_lifecycle(r, a, LIFECYCLE_RESUME);
}

void api_post_suspend(Request *r, const RouteArgs *a) {
        post_lifecycle(r, a, LIFECYCLE_SUSPEND);
}

void api_post_wake(Request *r, const RouteArgs *a) {
        post_lifecycle(r, a, LIFECYCLE_WAKE);
}

void api_post_stop(Request *r, const RouteArgs *a) {
        post_lifecycle(r, a, LIFECYCLE_STOP);
}

void api_post_start(Request *r, const RouteArgs *a) {
        post_lifecycle(r, a, LIFECYCLE_START);
}

/* The wake a use of s waits for (ARCHITECTURE.md, decision 6): 1 when s can be used now, 0 with *ret_op the
 * wake (started here, or the one under way), < 0 when it answered with an error. */
static int wake_for_use(Request *r, Sandbox *s, Operation **ret_op) {
        Manager *m = http_manager(r->http);
        Error e = {};
        Operation *op = NULL;
        int q;

        /* running something in it is use; looking at it (inspect, ls) is not */
        sandbox_touch(s);
        if (s->state != SANDBOX_SUSPENDED && s->state != SANDBOX_WAKING)
                return 1;
        if (s->state == SANDBOX_SUSPENDED) {
                q = sandbox_lifecycle_start(m, s, LIFECYCLE_WAKE, &op, &e);
                if (q < 0) {
                        respond_operation_error(r, &e, q);
                        error_done(&e);
                        return q;
                }
                log_info("sandbox %s: waking on demand for %s %s", s->id, r->method, r->url);
        } else
                for (Operation *i = m->operations; i && !op; i = i->next)
                        if (streq(i->kind, "wake") && streq(i->sandbox_id, s->id) && i->state == OPERATION_RUNNING)
                                op = i;
        if (!op) {
                http_respond_error(r, ERROR_SANDBOX_BUSY, "sandbox %s is waking up; try again", s->id);
                return -EBUSY;
        }
        *ret_op = op;
        return 0;
}

/* A request parked on a wake on demand: what it carries on with, and the route's arguments for that. */
typedef struct AwakeWait {
        char sandbox_id[SANDBOX_ID_LEN + 1];
        char op_id[OPERATION_ID_LEN + 1];
        uint64_t deadline;
        ApiAwake k;
        RouteArgs args;
} AwakeWait;

static void awake_detach(void *userdata, Request *r) {
        free(userdata);
}

static void awake_continue(Request *r, void *userdata);

static int awake_park(Request *r, AwakeWait *w, Operation *op) {
        int q = http_wait_on(r, &op->waiters, w->deadline, awake_continue, w);

        if (q < 0)
                http_respond_error(r, ERROR_INTERNAL, "cannot wait for the wake: %s", strerror(-q));
        return q;
}

/* The wake finished (or the deadline passed): its failure is the answer, else the handler carries on with the
 * sandbox, found again by id (it may have gone meanwhile). */
static void awake_continue(Request *r, void *userdata) {
        AwakeWait *w = userdata;
        Manager *m = http_manager(r->http);
        Operation *op = operation_find(m, w->op_id);
        Sandbox *s;

        if (op && op->state != OPERATION_SUCCEEDED && op->state != OPERATION_FAILED) {
                if (now_usec_monotonic() < w->deadline)
                        (void) awake_park(r, w, op);
                else
                        http_respond_error(r, ERROR_SANDBOX_BUSY, "sandbox %s did not wake up within %d s; try again",
                                           w->sandbox_id, WAKE_ON_DEMAND_WAIT_SEC);
                return;
        }
        if (op && op->state == OPERATION_FAILED) {
                respond_operation_error(r, &op->error, -EIO);
                return;
        }
        s = sandbox_find_by_id(m, w->sandbox_id);
        if (!s) {
                http_respond_error(r, ERROR_SANDBOX_NOT_FOUND, "sandbox %s went away while it woke up",
                                   w->sandbox_id);
                return;
        }
        /* w is no longer what the request waits for: k may give it something else to serve */
        r->stream = (HttpStream) {};
        sandbox_touch(s);
        w->k(r, s, &w->args);
        free(w);
}

void api_when_awake(Request *r, Sandbox *s, const RouteArgs *a, ApiAwake k) {
        Operation *op = NULL;
        AwakeWait *w;
        int q;

        q = wake_for_use(r, s, &op);
        if (q < 0)
                return;
        if (q > 0) {
                k(r, s, a);
                return;
        }
        assert(!r->stream.detach);
        w = calloc(1, sizeof *w);
        if (!w) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return;
        }
        memcpy(w->sandbox_id, s->id, sizeof w->sandbox_id);
        memcpy(w->op_id, op->id, sizeof w->op_id);
        w->deadline = now_usec_monotonic() + WAKE_ON_DEMAND_WAIT_SEC * USEC_PER_SEC;
        w->k = k;
        /* the arguments point into the router's buffers, which are gone when k runs: copied */
        for (unsigned i = 0; a && i < ROUTE_ARGS_MAX && a->arg[i]; i++) {
                snprintf(w->args.buf[i], sizeof w->args.buf[i], "%s", a->arg[i]);
                w->args.arg[i] = w->args.buf[i];
        }
        r->stream = (HttpStream) { .detach = awake_detach, .userdata = w };
        if (awake_park(r, w, op) < 0)
                http_stream_detach(r);
}
