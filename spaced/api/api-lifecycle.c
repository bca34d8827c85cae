/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>

#include "api/api.h"
#include "core/log.h"
#include "macro.h"
#include "core/util.h"
#include "sandbox/sandbox.h"

#define WAKE_ON_DEMAND_WAIT_SEC 120

/* POST /v1/sandboxes/{id}/pause|resume|suspend|wake[?wait=SECONDS]: operations, like create. */

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

/* A sandbox that is used while suspended is woken first (ARCHITECTURE.md, decision 6): the request is parked on the wake
 * operation and routed again when it finishes. Returns 1 when s can be used now, 0 when the request was
 * parked, < 0 when it was answered with an error. */
int api_ensure_awake(Request *r, Sandbox *s) {
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
        r->rerun = true;
        q = http_wait_on(r, &op->waiters, now_usec_monotonic() + WAKE_ON_DEMAND_WAIT_SEC * 1000000ULL);
        if (q < 0) {
                http_respond_error(r, ERROR_INTERNAL, "cannot wait for the wake: %s", strerror(-q));
                return q;
        }
        return 0;
}
