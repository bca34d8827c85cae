/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>

#include "api.h"
#include "macro.h"

/* POST /v1/sandboxes/{id}/pause|resume|suspend|wake[?wait=SECONDS]: operations, like create. */

static void post_lifecycle(Request *r, const RouteArgs *a, LifecycleKind kind) {
        OperationError e = {};
        Operation *op;
        Sandbox *s;
        unsigned wait;
        int q;

        if (parse_wait(r, &wait) < 0 || resolve_sandbox(r, a->arg[0], &s) < 0)
                return;
        q = sandbox_lifecycle_start(http_manager(r->http), s, kind, &op, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                operation_error_done(&e);
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
