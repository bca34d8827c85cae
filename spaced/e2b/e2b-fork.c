/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "e2b/e2b-control.h"
#include "macro.h"
#include "string-util.h"

/* POST /sandboxes/{sandboxID}/fork (E2B's SandboxForkRequest -> 201 [SandboxForkResult]): space's own fork of a
 * running sandbox (fork_start(), as POST /v1/sandboxes/{id}/fork): the parent is checkpointed in place and keeps
 * its id and expiry; each fork is a sandbox of its own (a fresh id, envd and traffic tokens, as a create gives)
 * with the request's timeout, or an error of its own. The answer has one entry per fork asked for, each
 * {"sandbox": Sandbox} or {"error": {"code", "message"}}, answered once all of them run or failed. */

#define E2B_FORK_COUNT_MAX 20

static void fork_continue(Request *r, void *userdata);

static cJSON *fork_error_json(unsigned code, const char *message) {
        cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");

        cJSON_AddNumberToObject(e, "code", code);
        cJSON_AddStringToObject(e, "message", message);
        return o;
}

/* The fork's operation ended: one entry per fork asked for. */
static void fork_answer(Request *r, E2bWait *w) {
        Manager *m = http_manager(r->http);
        Operation *op = operation_find(m, w->fork_op);
        unsigned n = 0, made = 0;
        cJSON *list;

        if (!op) {
                http_respond_error(r, ERROR_INTERNAL, "fork operation %s is gone", w->fork_op);
                return;
        }
        for (char **i = op->children; i && *i; i++)
                made++;
        /* the checkpoint failed: no fork was made, and the request fails whole */
        if (op->state == OPERATION_FAILED && made == 0) {
                respond_operation_error(r, &op->error, -EIO);
                return;
        }
        list = cJSON_CreateArray();
        if (!list) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return;
        }
        for (char **id = op->children; id && *id; id++) {
                Sandbox *s = sandbox_find_by_id(m, *id);
                cJSON *o = NULL, *sb;

                if (n >= w->count)
                        break;
                n++;
                if (s && s->state == SANDBOX_RUNNING && (sb = e2b_sandbox_json(m, s))) {
                        /* its time to live counts from when it runs, as a create's */
                        sandbox_set_timeout(s, w->timeout);
                        o = cJSON_CreateObject();
                        cJSON_AddItemToObject(o, "sandbox", sb);
                } else {
                        _cleanup_free_ char *msg = NULL;
                        _cleanup_(error_done) Error e = {};
                        Operation *del;

                        if (asprintf(&msg, "fork %s did not start: %s", *id,
                                     s ? (s->error ?: sandbox_state_to_string(s->state)) : "it is gone") < 0)
                                msg = NULL;
                        o = fork_error_json(500, msg ?: "a fork did not start");
                        /* E2B never shows a failed sandbox: nothing is left of it */
                        if (s && s->state != SANDBOX_CREATING && !s->busy &&
                            sandbox_delete_start(m, s, true, &del, &e) < 0)
                                log_warning("fork %s: cannot remove its failed child %s: %s", op->id, *id,
                                            e.message ?: "?");
                }
                cJSON_AddItemToArray(list, o);
        }
        /* the forks whose create failed before a sandbox was made */
        for (; n < w->count; n++)
                cJSON_AddItemToArray(list, fork_error_json(error_code_http_status(op->error.code ?: ERROR_FORK_FAILED),
                                                           op->error.message ?: "the fork did not start"));
        log_info("sandbox %s: forked for E2B into %u (%u asked for)", op->sandbox_id, made, w->count);
        http_respond_json(r, 201, list);
}

/* The fork from the lookup on; after a wait for what kept the parent busy it starts here again. */
static void fork_step(Request *r, E2bWait *w) {
        Manager *m = http_manager(r->http);
        _cleanup_strv_free_ char **ids = NULL;
        _cleanup_(error_done) Error e = {};
        Operation *op;
        Sandbox *s;
        int q;

        if (e2b_find_sandbox(r, w->arg, &s) < 0)
                return;
        if (s->busy || s->state == SANDBOX_CREATING) {
                (void) e2b_wait_busy(r, s, fork_continue);
                return;
        }
        if (s->state != SANDBOX_RUNNING) {
                http_respond_error(r, ERROR_SANDBOX_NOT_RUNNING,
                                   "sandbox %s is %s: only a running sandbox can be forked%s", s->id,
                                   e2b_state(s) ?: sandbox_state_to_string(s->state),
                                   e2b_state(s) ? "; connect to it first" : "");
                return;
        }
        q = fork_start(m, s, NULL, w->count, NULL, &op, &ids, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                return;
        }
        /* a time to live from now on, in case the client leaves before the answer (it is set again then, to
         * count from when each fork runs): a fork nobody hears of must not run for ever */
        for (char **id = ids; id && *id; id++) {
                Sandbox *f = sandbox_find_by_id(m, *id);
                if (f)
                        sandbox_set_timeout(f, w->timeout);
        }
        log_info("sandbox %s: forking into %u for E2B (operation %s)", s->id, w->count, op->id);
        memcpy(w->fork_op, op->id, sizeof w->fork_op);
        /* not the request's own failure: a fork that fails is an entry of the answer */
        (void) e2b_wait_op(r, op, false, fork_continue);
}

static void fork_continue(Request *r, void *userdata) {
        E2bWait *w = userdata;

        if (e2b_wait_resume(r, w, fork_continue) <= 0)
                return;
        if (w->fork_op[0])
                fork_answer(r, w);
        else
                fork_step(r, w);
}

void e2b_post_fork(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "timeout", "count", NULL };
        int64_t timeout = E2B_TIMEOUT_DEFAULT;
        uint64_t count = 1;
        cJSON *o = e2b_body_object(r, fields);
        E2bWait *w;
        int q;

        if (!o)
                return;
        q = e2b_seconds_field(r, o, "timeout", E2B_TIMEOUT_MAX, &timeout);
        if (q >= 0)
                q = get_uint_field(r, o, "count", 1, E2B_FORK_COUNT_MAX, &count);
        cJSON_Delete(o);
        if (q < 0)
                return;
        w = e2b_wait_new(r, a->arg[0]);
        if (!w)
                return;
        w->timeout = timeout;
        w->count = (unsigned) count;
        fork_step(r, w);
}
