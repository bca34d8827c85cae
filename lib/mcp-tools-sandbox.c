/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf, open_memstream */
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "mcp-tools-internal.h"
#include "string-util.h"

/*
 * The sandbox family: create, list, remove, suspend, wake, checkpoint, checkpoint_list, restore, fork. Each is
 * a few /v1 requests (spaced/API.md) on the call's connection; slow ones ask with ?wait= and then follow the
 * operation with mcp_wait_operation(), which also notices a cancellation.
 */

/* How long a request waits on the daemon's side before the rest is polled by mcp_wait_operation(). */
#define LIFECYCLE_WAIT_SEC 60
/* Sandboxes and checkpoints shown by a list; more than an agent reads. */
#define LIST_MAX 500
#define EGRESS_MAX 64
#define FORK_MAX 10
/* How long a cancelled fork still waits to learn its forks' ids (the source's checkpoint, about a second). */
#define FORK_LATE_WAIT_SEC 15

#define SANDBOX_ID_HEX 32

/* A Sandbox of the API with the members the tools use, of the right types. */
static bool sandbox_json_valid(const cJSON *sb) {
        const char *name;

        return cJSON_IsObject(sb) && mcp_json_string(sb, "id") && mcp_json_string(sb, "template") &&
               mcp_json_string(sb, "state") && mcp_json_string_or_null(sb, "name", &name);
}

/* {sandbox_id, name, template, state} of a valid Sandbox. */
static cJSON *sandbox_summary(const cJSON *sb) {
        cJSON *o = cJSON_CreateObject();
        const char *name = mcp_json_string(sb, "name");

        if (!o || !cJSON_AddStringToObject(o, "sandbox_id", mcp_json_string(sb, "id")) ||
            !(name ? cJSON_AddStringToObject(o, "name", name) : cJSON_AddNullToObject(o, "name")) ||
            !cJSON_AddStringToObject(o, "template", mcp_json_string(sb, "template")) ||
            !cJSON_AddStringToObject(o, "state", mcp_json_string(sb, "state"))) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

static int empty_sandbox_id(cJSON **ret_error) {
        *ret_error = mcp_result_errorf("sandbox_id is empty: give a sandbox's id or name (sandbox_list shows them), "
                                       "or leave it out");
        return *ret_error ? 1 : -ENOMEM;
}

/* The sandbox a call names without creating or waking one (remove, suspend, wake): its sandbox_id, else the
 * session's sandbox; 1 with a tool error when there is none yet. */
static int sandbox_named(McpCall *call, const cJSON *args, bool required, cJSON **ret, cJSON **ret_error) {
        _cleanup_free_ char *session = NULL;
        const char *ref = NULL;
        int r;

        r = mcp_arg_string(args, "sandbox_id", required, &ref, ret_error);
        if (r != 0)
                return r;
        if (ref && !*ref)
                return empty_sandbox_id(ret_error);
        if (!ref) {
                session = mcp_session_sandbox_id(mcp_call_server(call));
                if (!session) {
                        *ret_error = mcp_result_errorf("this session has no sandbox yet: give sandbox_id (sandbox_list "
                                                       "shows them), or use another tool first, which makes one");
                        return *ret_error ? 1 : -ENOMEM;
                }
                ref = session;
        }
        return mcp_sandbox_get(call, ref, ret, NULL, ret_error);
}

static int add_egress(const cJSON *args, cJSON *body, cJSON **ret_error) {
        const cJSON *eg = cJSON_GetObjectItemCaseSensitive(args, "egress"), *i;
        cJSON *copy;

        if (!eg || cJSON_IsNull(eg))
                return 0;
        if (!cJSON_IsArray(eg) || cJSON_GetArraySize(eg) > EGRESS_MAX)
                goto bad;
        cJSON_ArrayForEach(i, eg)
                if (!cJSON_IsString(i) || !i->valuestring[0])
                        goto bad;
        copy = cJSON_Duplicate(eg, true);
        if (!copy || !cJSON_AddItemToObject(body, "egress_profiles", copy)) {
                cJSON_Delete(copy);
                return -ENOMEM;
        }
        return 0;
bad:
        *ret_error = mcp_result_errorf("egress must be an array of at most %d egress profile names, e.g. [\"pypi\", "
                                       "\"github\"]; spacectl egress profiles lists them", EGRESS_MAX);
        return *ret_error ? 1 : -ENOMEM;
}

/* The create request's body from the tool's arguments: 0, 1 with a tool error, < 0. */
static int create_body(const cJSON *args, cJSON **ret, cJSON **ret_error) {
        _cleanup_cjson_ cJSON *body = cJSON_CreateObject();
        const char *tmpl = NULL, *name = NULL;
        const cJSON *env = NULL;
        cJSON *copy;
        int64_t vcpu, memory;
        int r;

        if (!body)
                return -ENOMEM;
        if ((r = mcp_arg_string(args, "template", false, &tmpl, ret_error)) != 0 ||
            (r = mcp_arg_string(args, "name", false, &name, ret_error)) != 0 ||
            (r = mcp_arg_string_map(args, "env", &env, ret_error)) != 0 ||
            (r = mcp_arg_int(args, "vcpu", 1, 1024, 0, &vcpu, ret_error)) != 0 ||
            (r = mcp_arg_int(args, "memory_mib", 64, 65536, 0, &memory, ret_error)) != 0 ||
            (r = add_egress(args, body, ret_error)) != 0)
                return r;
        if ((tmpl && !cJSON_AddStringToObject(body, "template", tmpl)) ||
            (name && !cJSON_AddStringToObject(body, "name", name)) ||
            (vcpu > 0 && !cJSON_AddNumberToObject(body, "vcpu", (double) vcpu)) ||
            (memory > 0 && !cJSON_AddNumberToObject(body, "memory_mib", (double) memory)))
                return -ENOMEM;
        if (env) {
                copy = cJSON_Duplicate(env, true);
                if (!copy || !cJSON_AddItemToObject(body, "env", copy)) {
                        cJSON_Delete(copy);
                        return -ENOMEM;
                }
        }
        *ret = TAKE_PTR(body);
        return 0;
}

static int sandbox_create(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_cjson_ cJSON *body = NULL, *sb = NULL;
        _cleanup_free_ char *id = NULL, *text = NULL;
        cJSON *err = NULL, *o;
        const char *name;
        bool keep;
        int r;

        if ((r = mcp_arg_bool(args, "keep", false, &keep, &err)) != 0 || (r = create_body(args, &body, &err)) != 0)
                return mcp_tool_fail(r, &err, ret_result);
        /* no ?wait=: the id comes back at once and is recorded before a cancellation can lose it */
        r = mcp_api_request(call, "POST", "/v1/sandboxes", body, "creating a sandbox", &reply, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        o = cJSON_GetObjectItemCaseSensitive(reply.json, "sandbox");
        if (!mcp_json_string(o, "id")) {
                r = mcp_bad_reply("creating a sandbox", "sandbox.id", &err);
                return mcp_tool_fail(r, &err, ret_result);
        }
        id = strdup(mcp_json_string(o, "id"));
        if (!id)
                return -ENOMEM;
        /* recorded before the wait: a cancelled or failed create still goes at the session's end */
        r = mcp_session_add_sandbox(mcp_call_server(call), id, keep);
        if (r < 0)
                return r;
        r = mcp_wait_operation(call, "creating a sandbox", reply.json, NULL, &err);
        if (r == 0)
                r = mcp_sandbox_get(call, id, &sb, NULL, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);

        o = sandbox_summary(sb);
        if (!o || !cJSON_AddBoolToObject(o, "keep", keep))
                goto oom;
        name = mcp_json_string(sb, "name");
        if (asprintf(&text,
                     "Created sandbox %s (name: %s, template: %s), state %s. Give sandbox_id \"%s\" to the other "
                     "tools to work in it (without sandbox_id they use this session's own sandbox). %s",
                     id, name ?: "none", mcp_json_string(sb, "template"), mcp_json_string(sb, "state"), id,
                     keep ? "It is kept after this session ends (keep: true); sandbox_remove removes it."
                          : "It is removed when this session ends (keep: false).") < 0)
                goto oom;
        return mcp_result_or_enomem(mcp_result_text(text, o), ret_result);
oom:
        cJSON_Delete(o);
        return -ENOMEM;
}

/* One line of sandbox_list and its object; 0, or < 0. */
static int list_one(const cJSON *sb, const char *session, FILE *f, cJSON *list) {
        const char *id = mcp_json_string(sb, "id"), *name = mcp_json_string(sb, "name"),
                   *created = mcp_json_string(sb, "created_at");
        bool mine = streq_ptr(id, session);
        cJSON *o = sandbox_summary(sb);

        if (!o || !(created ? cJSON_AddStringToObject(o, "created_at", created)
                            : cJSON_AddNullToObject(o, "created_at")) ||
            !cJSON_AddBoolToObject(o, "session", mine) || !cJSON_AddItemToArray(list, o)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        fprintf(f, "- %s  name: %s  template: %s  state: %s  created: %s%s\n", id, name ?: "none",
                mcp_json_string(sb, "template"), mcp_json_string(sb, "state"), created ?: "unknown",
                mine ? "  (this session's sandbox, used when sandbox_id is left out)" : "");
        return 0;
}

static int sandbox_list(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_cjson_ cJSON *o = cJSON_CreateObject();
        _cleanup_free_ char *session = NULL, *text = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        const cJSON *all, *sb;
        cJSON *err = NULL, *list;
        size_t len = 0;
        int r, n = 0, total, skipped = 0;

        if (!o || !(list = cJSON_AddArrayToObject(o, "sandboxes")))
                return -ENOMEM;
        r = mcp_api_request(call, "GET", "/v1/sandboxes", NULL, "listing sandboxes", &reply, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        all = cJSON_GetObjectItemCaseSensitive(reply.json, "sandboxes");
        if (!cJSON_IsArray(all)) {
                r = mcp_bad_reply("listing sandboxes", "sandboxes array", &err);
                return mcp_tool_fail(r, &err, ret_result);
        }
        session = mcp_session_sandbox_id(mcp_call_server(call));
        f = open_memstream(&text, &len);
        if (!f)
                return -ENOMEM;
        total = cJSON_GetArraySize(all);
        fprintf(f, "%d sandbox%s%s\n", total, total == 1 ? "" : "es", total ? ":" : ". sandbox_create makes one; "
                "the other tools make this session's own on first use.");
        cJSON_ArrayForEach(sb, all) {
                if (!sandbox_json_valid(sb) || n >= LIST_MAX) {
                        skipped++;
                        continue;
                }
                r = list_one(sb, session, f, list);
                if (r < 0)
                        return r;
                n++;
        }
        if (skipped > 0)
                fprintf(f, "(%d more not shown: over %d, or not readable)\n", skipped, LIST_MAX);
        if (fclose(TAKE_PTR(f)) != 0)
                return -ENOMEM;
        return mcp_result_or_enomem(mcp_result_text(text, TAKE_PTR(o)), ret_result);
}

/* DELETE with force and wait, then the wait for what is left: 0, 1 with a tool error, < 0. */
static int remove_one(McpCall *call, const char *id, cJSON **ret_error) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_free_ char *url = NULL, *suffix = NULL, *what = NULL;
        int r;

        if (asprintf(&suffix, "?force=1&wait=%d", LIFECYCLE_WAIT_SEC) < 0 || mcp_sandbox_path(id, suffix, &url) < 0 ||
            asprintf(&what, "removing sandbox %s", id) < 0)
                return -ENOMEM;
        r = mcp_api_request(call, "DELETE", url, NULL, what, &reply, ret_error);
        if (r != 0)
                return r;
        return mcp_wait_operation(call, what, reply.json, NULL, ret_error);
}

static int sandbox_remove(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_cjson_ cJSON *sb = NULL;
        _cleanup_free_ char *text = NULL, *id = NULL;
        const char *name;
        cJSON *err = NULL, *o;
        int r;

        r = sandbox_named(call, args, true, &sb, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        id = strdup(mcp_json_string(sb, "id"));
        if (!id)
                return -ENOMEM;
        r = remove_one(call, id, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        mcp_session_forget_sandbox(mcp_call_server(call), id);

        name = mcp_json_string(sb, "name");
        o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "sandbox_id", id) ||
            !(name ? cJSON_AddStringToObject(o, "name", name) : cJSON_AddNullToObject(o, "name")) ||
            !cJSON_AddBoolToObject(o, "removed", true) ||
            asprintf(&text, "Removed sandbox %s (name: %s) and its disk; its checkpoints stay (checkpoint_list).", id,
                     name ?: "none") < 0) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        return mcp_result_or_enomem(mcp_result_text(text, o), ret_result);
}

/* POST /v1/sandboxes/{id}/<action> and its operation; then the sandbox as it is. */
static int lifecycle(McpCall *call, const char *id, const char *action, const char *doing, cJSON **ret_sb,
                     cJSON **ret_error) {
        int r = mcp_sandbox_lifecycle(call, id, action, doing, ret_error);

        if (r != 0)
                return r;
        return mcp_sandbox_get(call, id, ret_sb, NULL, ret_error);
}

/* suspend and wake: the action the sandbox's state calls for (NULL: none, it is there already). */
static int suspend_or_wake(McpCall *call, const cJSON *args, bool suspend, cJSON **ret_result) {
        _cleanup_cjson_ cJSON *sb = NULL, *after = NULL;
        _cleanup_free_ char *text = NULL, *id = NULL;
        const char *state, *action = NULL, *doing = NULL;
        cJSON *err = NULL, *o;
        int r;

        r = sandbox_named(call, args, false, &sb, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        id = strdup(mcp_json_string(sb, "id"));
        if (!id)
                return -ENOMEM;
        state = mcp_json_string(sb, "state");
        if (suspend && (streq(state, "running") || streq(state, "paused")))
                action = "suspend", doing = "suspending";
        else if (!suspend && streq(state, "suspended"))
                action = "wake", doing = "waking";
        else if (!suspend && streq(state, "paused"))
                action = "resume", doing = "resuming";
        else if (!streq(state, suspend ? "suspended" : "running")) {
                err = mcp_result_errorf("cannot %s sandbox %s: it is %s; wait until it is running or suspended "
                                        "(sandbox_list shows its state)", suspend ? "suspend" : "wake", id, state);
                return mcp_tool_fail(1, &err, ret_result);
        }
        if (action) {
                r = lifecycle(call, id, action, doing, &after, &err);
                if (r != 0)
                        return mcp_tool_fail(r, &err, ret_result);
        }
        o = sandbox_summary(after ?: sb);
        if (!o || !cJSON_AddBoolToObject(o, "changed", action != NULL) ||
            asprintf(&text, "Sandbox %s %s; state %s.%s", id,
                     !action ? (suspend ? "was already suspended" : "was already running")
                             : (suspend ? "is suspended: its memory is on disk and it uses no CPU or RAM"
                                        : "is running again where it left off"),
                     mcp_json_string(after ?: sb, "state"),
                     suspend ? " Any tool that uses it (or sandbox_wake) wakes it." : "") < 0) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        return mcp_result_or_enomem(mcp_result_text(text, o), ret_result);
}

static int sandbox_suspend(McpCall *call, const cJSON *args, cJSON **ret_result) {
        return suspend_or_wake(call, args, true, ret_result);
}

static int sandbox_wake(McpCall *call, const cJSON *args, cJSON **ret_result) {
        return suspend_or_wake(call, args, false, ret_result);
}

static int sandbox_checkpoint(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_cjson_ cJSON *body = cJSON_CreateObject(), *op = NULL;
        _cleanup_free_ char *id = NULL, *url = NULL, *suffix = NULL, *what = NULL, *text = NULL;
        const char *name = NULL, *cp;
        cJSON *err = NULL, *o;
        int r;

        if (!body)
                return -ENOMEM;
        r = mcp_arg_string(args, "name", false, &name, &err);
        if (r == 0)
                r = mcp_call_sandbox_running(call, args, &id, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if ((name && !cJSON_AddStringToObject(body, "name", name)) ||
            asprintf(&suffix, "/checkpoints?wait=%d", LIFECYCLE_WAIT_SEC) < 0 ||
            mcp_sandbox_path(id, suffix, &url) < 0 || asprintf(&what, "checkpointing sandbox %s", id) < 0)
                return -ENOMEM;
        r = mcp_api_request(call, "POST", url, body, what, &reply, &err);
        if (r == 0)
                r = mcp_wait_operation(call, what, reply.json, &op, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        cp = mcp_json_string(op, "checkpoint_id");
        if (!cp) {
                r = mcp_bad_reply(what, "checkpoint_id", &err);
                return mcp_tool_fail(r, &err, ret_result);
        }

        o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "checkpoint_id", cp) ||
            !(name ? cJSON_AddStringToObject(o, "name", name) : cJSON_AddNullToObject(o, "name")) ||
            !cJSON_AddStringToObject(o, "sandbox_id", id) ||
            asprintf(&text, "Took checkpoint %s (name: %s) of sandbox %s: its memory, processes and files as they "
                     "are now. sandbox_restore with checkpoint \"%s\" puts a sandbox back to it; sandbox_fork with "
                     "checkpoint \"%s\" makes new sandboxes from it.", cp, name ?: "none", id, name ?: cp,
                     name ?: cp) < 0) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        return mcp_result_or_enomem(mcp_result_text(text, o), ret_result);
}

/* The full id for checkpoint_list's filter: a live sandbox's id, or a removed one's full id as given. */
static int checkpoint_filter(McpCall *call, const char *ref, char **ret, cJSON **ret_error) {
        _cleanup_cjson_ cJSON *sb = NULL;
        cJSON *err = NULL;
        int r;

        r = mcp_sandbox_get(call, ref, &sb, NULL, &err);
        if (r == 1 && string_is_hex(ref, SANDBOX_ID_HEX)) {
                cJSON_Delete(err);
                *ret = strdup(ref);
                return *ret ? 0 : -ENOMEM;
        }
        if (r != 0) {
                *ret_error = err;
                return r;
        }
        *ret = strdup(mcp_json_string(sb, "id"));
        return *ret ? 0 : -ENOMEM;
}

static int checkpoint_one(const cJSON *cp, FILE *f, cJSON *list) {
        static const char *const keys[] = { "sandbox_id", "template", "created_at", "state" };
        const char *id = mcp_json_string(cp, "id"), *name = mcp_json_string(cp, "name");
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(cp, "size_bytes");
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddStringToObject(o, "checkpoint_id", id) ||
            !(name ? cJSON_AddStringToObject(o, "name", name) : cJSON_AddNullToObject(o, "name")))
                goto oom;
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                const char *v = mcp_json_string(cp, keys[i]);
                if (!(v ? cJSON_AddStringToObject(o, keys[i], v) : cJSON_AddNullToObject(o, keys[i])))
                        goto oom;
        }
        if (cJSON_IsNumber(size) && !cJSON_AddNumberToObject(o, "size_bytes", size->valuedouble))
                goto oom;
        if (!cJSON_AddItemToArray(list, o))
                goto oom;
        fprintf(f, "- %s  name: %s  sandbox: %s  template: %s  created: %s  state: %s", id, name ?: "none",
                mcp_json_string(cp, "sandbox_id") ?: "?", mcp_json_string(cp, "template") ?: "?",
                mcp_json_string(cp, "created_at") ?: "?", mcp_json_string(cp, "state") ?: "?");
        if (cJSON_IsNumber(size))
                fprintf(f, "  size: %.0f bytes", size->valuedouble);
        fputc('\n', f);
        return 0;
oom:
        cJSON_Delete(o);
        return -ENOMEM;
}

static int checkpoint_list(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_cjson_ cJSON *o = cJSON_CreateObject();
        _cleanup_free_ char *sid = NULL, *esc = NULL, *url = NULL, *text = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        const char *ref = NULL;
        const cJSON *all, *cp;
        cJSON *err = NULL, *list;
        size_t len = 0;
        int r, n = 0, skipped = 0;

        if (!o || !(list = cJSON_AddArrayToObject(o, "checkpoints")))
                return -ENOMEM;
        r = mcp_arg_string(args, "sandbox_id", false, &ref, &err);
        if (r == 0 && ref && !*ref)
                r = empty_sandbox_id(&err);
        else if (r == 0 && ref)
                r = checkpoint_filter(call, ref, &sid, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (sid) {
                if (space_http_escape(sid, &esc) < 0 || asprintf(&url, "/v1/checkpoints?sandbox=%s", esc) < 0)
                        return -ENOMEM;
        } else if (!(url = strdup("/v1/checkpoints")))
                return -ENOMEM;
        r = mcp_api_request(call, "GET", url, NULL, "listing checkpoints", &reply, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        all = cJSON_GetObjectItemCaseSensitive(reply.json, "checkpoints");
        if (!cJSON_IsArray(all)) {
                r = mcp_bad_reply("listing checkpoints", "checkpoints array", &err);
                return mcp_tool_fail(r, &err, ret_result);
        }
        if (sid && !cJSON_AddStringToObject(o, "sandbox_id", sid))
                return -ENOMEM;
        f = open_memstream(&text, &len);
        if (!f)
                return -ENOMEM;
        fprintf(f, "%d checkpoint%s%s%s%s\n", cJSON_GetArraySize(all), cJSON_GetArraySize(all) == 1 ? "" : "s",
                sid ? " of sandbox " : "", sid ?: "",
                cJSON_GetArraySize(all) ? ":" : ". sandbox_checkpoint takes one.");
        cJSON_ArrayForEach(cp, all) {
                const char *name;
                if (!mcp_json_string(cp, "id") || !mcp_json_string_or_null(cp, "name", &name) || n >= LIST_MAX) {
                        skipped++;
                        continue;
                }
                r = checkpoint_one(cp, f, list);
                if (r < 0)
                        return r;
                n++;
        }
        if (skipped > 0)
                fprintf(f, "(%d more not shown: over %d, or not readable)\n", skipped, LIST_MAX);
        if (fclose(TAKE_PTR(f)) != 0)
                return -ENOMEM;
        return mcp_result_or_enomem(mcp_result_text(text, TAKE_PTR(o)), ret_result);
}

static int sandbox_restore(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_cjson_ cJSON *body = cJSON_CreateObject(), *sb = NULL;
        _cleanup_free_ char *id = NULL, *url = NULL, *suffix = NULL, *what = NULL, *text = NULL;
        const char *cp = NULL;
        cJSON *err = NULL, *o;
        int r;

        if (!body)
                return -ENOMEM;
        r = mcp_arg_string(args, "checkpoint", true, &cp, &err);
        if (r == 0)
                r = mcp_call_sandbox(call, args, &id, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (!cJSON_AddStringToObject(body, "checkpoint", cp) ||
            asprintf(&suffix, "/restore?wait=%d", LIFECYCLE_WAIT_SEC) < 0 || mcp_sandbox_path(id, suffix, &url) < 0 ||
            asprintf(&what, "restoring sandbox %s to checkpoint '%s'", id, cp) < 0)
                return -ENOMEM;
        r = mcp_api_request(call, "POST", url, body, what, &reply, &err);
        if (r == 0)
                r = mcp_wait_operation(call, what, reply.json, NULL, &err);
        if (r == 0)
                r = mcp_sandbox_get(call, id, &sb, NULL, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);

        o = sandbox_summary(sb);
        if (!o || !cJSON_AddStringToObject(o, "checkpoint", cp) ||
            asprintf(&text, "Restored sandbox %s (name: %s) to checkpoint '%s'; state %s. Its memory, processes and "
                     "files are as they were at the checkpoint: what happened since is gone.", id,
                     mcp_json_string(sb, "name") ?: "none", cp, mcp_json_string(sb, "state")) < 0) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        return mcp_result_or_enomem(mcp_result_text(text, o), ret_result);
}

/* Records the forks an Operation names (sandbox_ids), so the session's end removes them. */
static int record_forks(McpCall *call, const cJSON *op, bool *recorded) {
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(op, "sandbox_ids"), *i;
        int r;

        if (*recorded || !cJSON_IsArray(ids) || cJSON_GetArraySize(ids) == 0)
                return 0;
        cJSON_ArrayForEach(i, ids)
                if (cJSON_IsString(i)) {
                        r = mcp_session_add_sandbox(mcp_call_server(call), i->valuestring, false);
                        if (r < 0)
                                return r;
                }
        *recorded = true;
        return 0;
}

/* A fork of a running sandbox names its forks only once the sandbox's checkpoint is taken: a call cancelled
 * before that asks once more, on the connection that is not cancelled, so the session's end still removes
 * them. -EINTR whatever it finds. */
static int fork_cancelled(McpCall *call, const cJSON *reply_json, bool *recorded) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_free_ char *esc = NULL, *url = NULL;
        SpaceHttp *h = mcp_call_http_uncancelled(call);
        const char *op = mcp_json_string(reply_json, "id");

        if (*recorded || !h || !op || space_http_escape(op, &esc) < 0 ||
            asprintf(&url, "/v1/operations/%s?wait=%d", esc, FORK_LATE_WAIT_SEC) < 0)
                return -EINTR;
        if (space_http_call(h, "GET", url, NULL, &reply) >= 0 && space_http_reply_ok(&reply))
                (void) record_forks(call, reply.json, recorded);
        return -EINTR;
}

/* The fork request: from a checkpoint when one is given, else from the sandbox (checkpointed in place). */
static int fork_url(McpCall *call, const cJSON *args, const char *cp, char **ret_source, char **ret_url,
                    cJSON **ret_error) {
        _cleanup_free_ char *id = NULL, *esc = NULL;
        int r;

        if (cp) {
                const cJSON *sb = cJSON_GetObjectItemCaseSensitive(args, "sandbox_id");

                if (sb && !cJSON_IsNull(sb)) {
                        *ret_error = mcp_result_errorf("give sandbox_id (fork a running sandbox) or checkpoint "
                                                       "(fork from a checkpoint), not both");
                        return *ret_error ? 1 : -ENOMEM;
                }
                if (space_http_escape(cp, &esc) < 0 || asprintf(ret_url, "/v1/checkpoints/%s/fork", esc) < 0 ||
                    asprintf(ret_source, "checkpoint '%s'", cp) < 0)
                        return -ENOMEM;
                return 0;
        }
        r = mcp_call_sandbox_running(call, args, &id, ret_error);
        if (r != 0)
                return r;
        if (mcp_sandbox_path(id, "/fork", ret_url) < 0 || asprintf(ret_source, "sandbox %s", id) < 0)
                return -ENOMEM;
        return 0;
}

static int sandbox_fork(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_cjson_ cJSON *body = cJSON_CreateObject(), *op = NULL, *o = cJSON_CreateObject();
        _cleanup_free_ char *source = NULL, *url = NULL, *what = NULL, *text = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        const char *cp = NULL, *name = NULL;
        const cJSON *ids, *i;
        cJSON *err = NULL, *list;
        bool recorded = false;
        size_t len = 0;
        int64_t count;
        int r;

        if (!body || !o || !(list = cJSON_AddArrayToObject(o, "sandboxes")))
                return -ENOMEM;
        if ((r = mcp_arg_string(args, "checkpoint", false, &cp, &err)) != 0 ||
            (r = mcp_arg_string(args, "name", false, &name, &err)) != 0 ||
            (r = mcp_arg_int(args, "count", 1, FORK_MAX, 1, &count, &err)) != 0 ||
            (r = fork_url(call, args, cp, &source, &url, &err)) != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (!cJSON_AddNumberToObject(body, "count", (double) count) ||
            (name && !cJSON_AddStringToObject(body, "name", name)) || asprintf(&what, "forking %s", source) < 0)
                return -ENOMEM;
        r = mcp_api_request(call, "POST", url, body, what, &reply, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        /* no ?wait= on the request: the ids come back at once and are recorded before a cancellation can lose
         * them (the forks then go at the session's end) */
        r = record_forks(call, reply.json, &recorded);
        if (r < 0)
                return r;
        r = mcp_wait_operation(call, what, reply.json, &op, &err);
        if (r == -EINTR)
                return fork_cancelled(call, reply.json, &recorded);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        r = record_forks(call, op, &recorded);
        if (r < 0)
                return r;
        ids = cJSON_GetObjectItemCaseSensitive(op, "sandbox_ids");
        if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) == 0) {
                r = mcp_bad_reply(what, "sandbox_ids (see sandbox_list for the new sandboxes)", &err);
                return mcp_tool_fail(r, &err, ret_result);
        }

        f = open_memstream(&text, &len);
        if (!f)
                return -ENOMEM;
        fprintf(f, "Forked %s into %d new sandbox%s with its memory and files, each going its own way from "
                "now (removed when this session ends; sandbox_remove removes one sooner):", source,
                cJSON_GetArraySize(ids), cJSON_GetArraySize(ids) == 1 ? "" : "es");
        cJSON_ArrayForEach(i, ids) {
                if (!cJSON_IsString(i))
                        continue;
                if (!cJSON_AddItemToArray(list, cJSON_CreateString(i->valuestring)))
                        return -ENOMEM;
                fprintf(f, "\n- %s", i->valuestring);
        }
        if (name && count > 1)
                fprintf(f, "\nNamed %s-1 ... %s-%" PRId64 ".", name, name, count);
        else if (name)
                fprintf(f, "\nNamed %s.", name);
        if (fclose(TAKE_PTR(f)) != 0)
                return -ENOMEM;
        return mcp_result_or_enomem(mcp_result_text(text, TAKE_PTR(o)), ret_result);
}

#define SANDBOX_ID_PROP                                                                                         \
        "\"sandbox_id\": {\"type\": \"string\", \"description\": \"The sandbox: an id, a unique id prefix or a " \
        "name (sandbox_list shows them). Default: this session's own sandbox.\"}"

const McpTool mcp_tools_sandbox[] = {
        {
                .name = "sandbox_create",
                .description = "Create a new sandbox (a microVM) and return its sandbox_id, to pass to the other "
                               "tools; it is removed when this session ends unless keep is true.",
                .input_schema =
                "{\"type\": \"object\", \"properties\": {"
                "\"template\": {\"type\": \"string\", \"description\": \"Template to boot, e.g. minimal or "
                "code-interpreter (default: minimal).\"},"
                "\"name\": {\"type\": \"string\", \"description\": \"A unique name, usable as sandbox_id.\"},"
                "\"env\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, "
                "\"description\": \"Environment variables for every command run in it.\"},"
                "\"egress\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": "
                "\"Egress profile names that decide what it may reach on the network.\"},"
                "\"vcpu\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"Virtual CPUs (default: the "
                "template's).\"},"
                "\"memory_mib\": {\"type\": \"integer\", \"minimum\": 64, \"maximum\": 65536, \"description\": "
                "\"Memory in MiB (default: the template's).\"},"
                "\"keep\": {\"type\": \"boolean\", \"description\": \"Keep it after this session ends (default "
                "false).\"}"
                "}, \"additionalProperties\": false}",
                .run = sandbox_create,
        },
        {
                .name = "sandbox_list",
                .description = "List all sandboxes with their id, name, template, state and creation time, "
                               "marking this session's own.",
                .input_schema = "{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": false}",
                .run = sandbox_list,
                .read_only = true,
        },
        {
                .name = "sandbox_remove",
                .description = "Remove a sandbox for good (stops it, deletes its disk; its checkpoints stay).",
                .input_schema =
                "{\"type\": \"object\", \"properties\": {"
                "\"sandbox_id\": {\"type\": \"string\", \"description\": \"The sandbox to remove: an id, a unique "
                "id prefix or a name.\"}"
                "}, \"required\": [\"sandbox_id\"], \"additionalProperties\": false}",
                .run = sandbox_remove,
                .destructive = true,
        },
        {
                .name = "sandbox_suspend",
                .description = "Suspend a sandbox: its memory goes to disk and it stops using CPU and RAM; "
                               "sandbox_wake (or any tool using it) brings it back as it was.",
                .input_schema = "{\"type\": \"object\", \"properties\": {" SANDBOX_ID_PROP
                                "}, \"additionalProperties\": false}",
                .run = sandbox_suspend,
        },
        {
                .name = "sandbox_wake",
                .description = "Wake a suspended (or resume a paused) sandbox; its processes go on where they "
                               "were.",
                .input_schema = "{\"type\": \"object\", \"properties\": {" SANDBOX_ID_PROP
                                "}, \"additionalProperties\": false}",
                .run = sandbox_wake,
        },
        {
                .name = "sandbox_checkpoint",
                .description = "Take a checkpoint of a sandbox (memory, processes and files) to restore or fork "
                               "from later; returns its checkpoint_id.",
                .input_schema =
                "{\"type\": \"object\", \"properties\": {" SANDBOX_ID_PROP ","
                "\"name\": {\"type\": \"string\", \"description\": \"A unique name for the checkpoint, usable "
                "wherever its id is.\"}"
                "}, \"additionalProperties\": false}",
                .run = sandbox_checkpoint,
        },
        {
                .name = "checkpoint_list",
                .description = "List checkpoints (id, name, sandbox, template, time), all or those of one "
                               "sandbox.",
                .input_schema =
                "{\"type\": \"object\", \"properties\": {"
                "\"sandbox_id\": {\"type\": \"string\", \"description\": \"Only this sandbox's checkpoints: an "
                "id, a unique id prefix or a name (a removed sandbox: its full id). Default: all.\"}"
                "}, \"additionalProperties\": false}",
                .run = checkpoint_list,
                .read_only = true,
        },
        {
                .name = "sandbox_restore",
                .description = "Put a sandbox back to a checkpoint in place (memory, processes, files); "
                               "everything since the checkpoint is lost.",
                .input_schema =
                "{\"type\": \"object\", \"properties\": {"
                "\"checkpoint\": {\"type\": \"string\", \"description\": \"The checkpoint: its id (cp-...), a "
                "unique id prefix or its name.\"}," SANDBOX_ID_PROP
                "}, \"required\": [\"checkpoint\"], \"additionalProperties\": false}",
                .run = sandbox_restore,
                .destructive = true,
        },
        {
                .name = "sandbox_fork",
                .description = "Make 1-10 new sandboxes that go on from a running sandbox or a checkpoint, with "
                               "the same memory and files; returns their ids.",
                .input_schema =
                "{\"type\": \"object\", \"properties\": {" SANDBOX_ID_PROP ","
                "\"checkpoint\": {\"type\": \"string\", \"description\": \"Fork from this checkpoint (id, prefix "
                "or name) instead of a sandbox; do not give sandbox_id with it.\"},"
                "\"count\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 10, \"description\": \"How many "
                "forks (default 1).\"},"
                "\"name\": {\"type\": \"string\", \"description\": \"The fork's name; with count > 1 the prefix "
                "of NAME-1 ... NAME-N.\"}"
                "}, \"additionalProperties\": false}",
                .run = sandbox_fork,
        },
};
const size_t mcp_tools_sandbox_count = ELEMENTSOF(mcp_tools_sandbox);
