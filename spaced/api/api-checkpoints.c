/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>

#include "api/api.h"
#include "macro.h"
#include "sandbox/sandbox.h"

/* Checkpoints, restore and fork. */

static int resolve_checkpoint(Request *r, const char *ref, Checkpoint **ret) {
        Checkpoint *c = checkpoint_find(http_manager(r->http), ref);

        if (!c) {
                http_respond_error(r, ERROR_CHECKPOINT_NOT_FOUND,
                                   "no checkpoint '%s' (or the prefix is ambiguous); 'spacectl checkpoint ls' lists them",
                                   ref);
                return -ENOENT;
        }
        *ret = c;
        return 0;
}

void api_post_checkpoints(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "name", NULL };
        Error e = {};
        const char *name = NULL;
        Operation *op;
        Checkpoint *c;
        Sandbox *s;
        unsigned wait;
        cJSON *o, *v;
        int q;

        if (parse_wait(r, &wait) < 0 || resolve_sandbox(r, a->arg[0], &s) < 0 || !(o = parse_body_object(r, fields)))
                return;
        v = cJSON_GetObjectItemCaseSensitive(o, "name");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsString(v) || !*v->valuestring || strlen(v->valuestring) > SANDBOX_NAME_MAX) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "name must be a string of 1 to %d characters",
                                           SANDBOX_NAME_MAX);
                        goto out;
                }
                name = v->valuestring;
        }
        q = checkpoint_create_start(http_manager(r->http), s, name, &op, &c, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                error_done(&e);
                goto out;
        }
        start_wait(r, op, WAIT_OPERATION, wait);
out:
        cJSON_Delete(o);
}

void api_get_checkpoints(Request *r, const RouteArgs *a) {
        cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "checkpoints");
        const char *sandbox = http_query(r, "sandbox");

        for (Checkpoint *c = http_manager(r->http)->checkpoints; c; c = c->next)
                if (!sandbox || streq(sandbox, c->sandbox_id))
                        cJSON_AddItemToArray(list, checkpoint_to_json(c));
        http_respond_json(r, 200, o);
}

void api_get_checkpoint(Request *r, const RouteArgs *a) {
        Checkpoint *c;

        if (resolve_checkpoint(r, a->arg[0], &c) >= 0)
                http_respond_json(r, 200, checkpoint_to_json(c));
}

void api_delete_checkpoint(Request *r, const RouteArgs *a) {
        Error e = {};
        Checkpoint *c;
        int q;

        if (resolve_checkpoint(r, a->arg[0], &c) < 0)
                return;
        q = checkpoint_remove(http_manager(r->http), c, &e);
        if (q < 0)
                respond_operation_error(r, &e, q);
        else
                http_respond_empty(r, 204);
        error_done(&e);
}

void api_post_restore(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "checkpoint", NULL };
        Error e = {};
        Operation *op;
        Checkpoint *c;
        Sandbox *s;
        unsigned wait;
        cJSON *o, *v;
        int q;

        if (parse_wait(r, &wait) < 0 || resolve_sandbox(r, a->arg[0], &s) < 0 || !(o = parse_body_object(r, fields)))
                return;
        v = cJSON_GetObjectItemCaseSensitive(o, "checkpoint");
        if (!cJSON_IsString(v)) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "checkpoint (an id or name) is required");
                goto out;
        }
        if (resolve_checkpoint(r, v->valuestring, &c) < 0)
                goto out;
        q = sandbox_restore_start(http_manager(r->http), s, c, &op, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                error_done(&e);
                goto out;
        }
        start_wait(r, op, WAIT_LIFECYCLE, wait);
out:
        cJSON_Delete(o);
}

static void post_fork(Request *r, Sandbox *s, Checkpoint *c) {
        static const char *const fields[] = { "count", "name", NULL };
        _cleanup_strv_free_ char **ids = NULL;
        const char *name = NULL;
        Error e = {};
        uint64_t count = 1;
        Operation *op;
        unsigned wait;
        cJSON *o, *v;
        int q;

        if (parse_wait(r, &wait) < 0 || !(o = parse_body_object(r, fields)))
                return;
        if (get_uint_field(r, o, "count", 1, 64, &count) < 0)
                goto out;
        v = cJSON_GetObjectItemCaseSensitive(o, "name");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsString(v)) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "name must be a string: the forks' name, "
                                           "or their prefix (NAME-1 ... NAME-N) when there are several");
                        goto out;
                }
                name = v->valuestring;
        }
        q = fork_start(http_manager(r->http), s, c, (unsigned) count, name, &op, &ids, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                error_done(&e);
                goto out;
        }
        start_wait(r, op, WAIT_OPERATION, wait);
out:
        cJSON_Delete(o);
}

void api_post_sandbox_fork(Request *r, const RouteArgs *a) {
        Sandbox *s;

        if (resolve_sandbox(r, a->arg[0], &s) >= 0)
                post_fork(r, s, NULL);
}

void api_post_checkpoint_fork(Request *r, const RouteArgs *a) {
        Checkpoint *c;

        if (resolve_checkpoint(r, a->arg[0], &c) >= 0)
                post_fork(r, NULL, c);
}
