/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "macro.h"

/* How long create and rm wait for their operation, as the issue asks (wait=600). */
#define OPERATION_WAIT_SEC 600
/* Per long-poll request, so a daemon restart or a lost reply costs at most this. */
#define OPERATION_POLL_SEC 60

static bool operation_finished(const cJSON *op) {
        const char *state = json_str(op, "state");
        return streq_ptr(state, "succeeded") || streq_ptr(state, "failed");
}

static void wipe(const OperationWait *w) {
        if (w->wipe)
                w->wipe(w->userdata);
}

int cli_operation_wait(const OperationWait *w, cJSON **ret_op) {
        _cleanup_free_ char *eid = NULL;
        struct timespec start;
        cJSON *cur = NULL;
        int r;

        *ret_op = NULL;
        if (w->op && !(cur = cJSON_Duplicate(w->op, true))) {
                log_error("out of memory");
                return -ENOMEM;
        }
        clock_gettime(CLOCK_MONOTONIC, &start);

        while (!operation_finished(cur)) {
                _cleanup_free_ char *path = NULL;
                SpaceHttpReply reply = {};
                long wait = w->poll_sec;
                SpaceHttp *h;

                if (w->progress) {
                        r = w->progress(cur, &wait, w->userdata);
                        if (r < 0)
                                goto fail;
                }
                if (w->timeout > 0) {
                        struct timespec now;
                        long left;

                        clock_gettime(CLOCK_MONOTONIC, &now);
                        left = (long) w->timeout - (now.tv_sec - start.tv_sec);
                        if (left <= 0) {
                                *ret_op = cur;
                                return -ETIMEDOUT;
                        }
                        if (wait > left)
                                wait = left;
                }
                if (!w->id) {
                        wipe(w);
                        log_error("the daemon answered with an operation without an id");
                        r = -EBADMSG;
                        goto fail;
                }
                if ((!eid && space_http_escape(w->id, &eid) < 0) ||
                    (wait > 0 ? asprintf(&path, "/v1/operations/%s?wait=%ld", eid, wait)
                              : asprintf(&path, "/v1/operations/%s", eid)) < 0) {
                        wipe(w);
                        log_error("out of memory");
                        r = -ENOMEM;
                        goto fail;
                }
                h = cli_http();
                if (!h) {
                        r = -ENOTCONN;
                        goto fail;
                }
                r = space_http_call(h, "GET", path, NULL, &reply);
                if (r < 0) {
                        wipe(w);
                        if (r == -ENOMEM)
                                log_error("out of memory");
                        else if (r != -EINTR || !w->quiet_interrupt)
                                cli_log_transport_error(h, r);
                        goto fail;
                }
                if (!space_http_reply_ok(&reply) || !cJSON_IsObject(reply.json)) {
                        wipe(w);
                        if (!space_http_reply_ok(&reply) && reply.error_message)
                                log_error("%s", reply.error_message);
                        else
                                log_error("the daemon answered GET %s with something that is not an operation", path);
                        space_http_reply_done(&reply);
                        r = -EBADMSG;
                        goto fail;
                }
                cJSON_Delete(cur);
                cur = TAKE_PTR(reply.json);
                space_http_reply_done(&reply);
        }
        *ret_op = cur;
        return 0;

fail:
        cJSON_Delete(cur);
        return r;
}

int cli_operation_check(const cJSON *op) {
        const cJSON *err;

        if (!streq_ptr(json_str(op, "state"), "failed"))
                return 0;
        err = cJSON_GetObjectItemCaseSensitive(op, "error");
        log_error("%s", json_str(err, "message") ?: "the operation failed without saying why; see spaced's log");
        return -EIO;
}

int cli_wait_operation(const cJSON *op, cJSON **ret_op) {
        cJSON *cur;
        int r;

        r = cli_operation_wait(&(OperationWait) { .id = json_str(op, "id"), .op = op, .timeout = OPERATION_WAIT_SEC,
                                                  .poll_sec = OPERATION_POLL_SEC },
                               &cur);
        if (r == -ETIMEDOUT) {
                log_error("operation %s is still %s after %d s; check later with 'spacectl ls'", json_str(op, "id"),
                          json_str(cur, "state") ?: "running", OPERATION_WAIT_SEC);
                cJSON_Delete(cur);
                return r;
        }
        if (r < 0)
                return r;
        r = cli_operation_check(cur);
        if (ret_op)
                *ret_op = cur;
        else
                cJSON_Delete(cur);
        return r;
}
