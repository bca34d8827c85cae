/* SPDX-License-Identifier: Apache-2.0 */
/* What every MCP tool uses: results, tool errors made from the API's answers, arguments, operations. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "mcp-internal.h"
#include "mcp-tools-internal.h"

/* ---- results ---- */

static cJSON *result_new(const char *text, cJSON *structured, bool is_error) {
        cJSON *r = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(r, "content");
        cJSON *item = cJSON_CreateObject();

        if (!r || !content || !item || !cJSON_AddStringToObject(item, "type", "text") ||
            !cJSON_AddStringToObject(item, "text", text ?: "")) {
                cJSON_Delete(item);
                cJSON_Delete(structured);
                cJSON_Delete(r);
                return NULL;
        }
        cJSON_AddItemToArray(content, item);
        if (structured && !cJSON_AddItemToObject(r, "structuredContent", structured)) {
                cJSON_Delete(structured);
                cJSON_Delete(r);
                return NULL;
        }
        if (!cJSON_AddBoolToObject(r, "isError", is_error)) {
                cJSON_Delete(r);
                return NULL;
        }
        return r;
}

cJSON *mcp_result_text(const char *text, cJSON *structured) {
        return result_new(text, structured, false);
}

static cJSON *result_verrorf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static cJSON *result_verrorf(const char *fmt, va_list ap) {
        _cleanup_free_ char *text = NULL;

        if (vasprintf(&text, fmt, ap) < 0)
                return NULL;
        return result_new(text, NULL, true);
}

cJSON *mcp_result_errorf(const char *fmt, ...) {
        va_list ap;
        cJSON *r;

        va_start(ap, fmt);
        r = result_verrorf(fmt, ap);
        va_end(ap);
        return r;
}

/* What to do about an API error code, for an agent that cannot read the man pages. */
static const char *api_error_hint(const char *code) {
        static const struct {
                const char *code, *hint;
        } hints[] = {
                { "sandbox_not_found", "sandbox_list shows the sandboxes; leave sandbox_id out to use this "
                                       "session's own" },
                { "not_found", "check the name or path (file_list shows a directory's entries)" },
                { "template_not_found", "the daemon's templates are listed by `spacectl template ls`" },
                { "invalid_state", "sandbox_list shows its state; sandbox_wake wakes a suspended sandbox" },
                { "sandbox_busy", "processes started in it still run; wait for them or remove it anyway" },
                { "name_in_use", "pick another name (sandbox_list and checkpoint_list show the names in use)" },
                { "egress_profile_not_found", "egress_status shows the profiles a sandbox has" },
                { "port_unreachable", "nothing listens on that port in the sandbox: start the server first" },
                { "permission_denied", "the sandbox's user may not do that: run it as root (exec user=root)" },
                { "not_empty", "the directory has entries: pass recursive=true to remove them too" },
                { "exists", "something has that path already: remove it first or pick another path" },
                { "too_many_processes", "too many processes run or are kept in the sandbox: wait for some" },
                { "no_space", "the sandbox's disk is full: remove files, or create a sandbox with a bigger disk" },
        };

        if (!code)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(hints); i++)
                if (streq(hints[i].code, code))
                        return hints[i].hint;
        return NULL;
}

cJSON *mcp_result_api_error(const char *what, const SpaceHttpReply *reply) {
        const char *code = reply ? reply->error_code : NULL;
        const char *message = reply && reply->error_message ? reply->error_message : "no answer";
        const char *hint = api_error_hint(code);

        return mcp_result_errorf("%s: %s (%s)%s%s", what, message, code ?: "error", hint ? ". " : "", hint ?: "");
}

cJSON *mcp_result_transport_error(const char *what, SpaceHttp *h, int r) {
        if (r == -EINTR)
                return mcp_result_errorf("%s: cancelled", what);
        if (space_http_error_is_unreachable(r))
                return mcp_result_errorf("%s: the space daemon does not answer at %s: start it (spacectl daemon "
                                         "start) and try again", what, h ? space_http_endpoint(h) : "its socket");
        return mcp_result_errorf("%s: talking to the space daemon failed: %s%s%s", what, strerror(-r),
                                 h && *space_http_last_error(h) ? ": " : "", h ? space_http_last_error(h) : "");
}

static int result_add_item(cJSON *result, cJSON *item) {
        cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");

        if (!item)
                return -ENOMEM;
        if (!cJSON_IsArray(content)) {
                cJSON_Delete(item);
                return -EINVAL;
        }
        cJSON_AddItemToArray(content, item);
        return 0;
}

int mcp_result_add_image(cJSON *result, const char *base64, const char *mime) {
        cJSON *item = cJSON_CreateObject();

        if (!item || !cJSON_AddStringToObject(item, "type", "image") || !cJSON_AddStringToObject(item, "data", base64) ||
            !cJSON_AddStringToObject(item, "mimeType", mime)) {
                cJSON_Delete(item);
                return -ENOMEM;
        }
        return result_add_item(result, item);
}

int mcp_result_add_text(cJSON *result, const char *text) {
        cJSON *item = cJSON_CreateObject();

        if (!item || !cJSON_AddStringToObject(item, "type", "text") || !cJSON_AddStringToObject(item, "text", text)) {
                cJSON_Delete(item);
                return -ENOMEM;
        }
        return result_add_item(result, item);
}

/* ---- arguments ---- */

static int arg_error(cJSON **ret_error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int arg_error(cJSON **ret_error, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        *ret_error = result_verrorf(fmt, ap);
        va_end(ap);
        return *ret_error ? 1 : -ENOMEM;
}

/* A member that is there and not null (null stands for "left out", as many clients send it). */
static const cJSON *arg_get(const cJSON *args, const char *name) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, name);

        return cJSON_IsNull(v) ? NULL : v;
}

int mcp_arg_string(const cJSON *args, const char *name, bool required, const char **ret, cJSON **ret_error) {
        const cJSON *v = arg_get(args, name);

        *ret = NULL;
        if (!v) {
                if (required)
                        return arg_error(ret_error, "argument '%s' is required", name);
                return 0;
        }
        if (!cJSON_IsString(v))
                return arg_error(ret_error, "argument '%s' must be a string", name);
        if (required && !*v->valuestring)
                return arg_error(ret_error, "argument '%s' must not be empty", name);
        *ret = v->valuestring;
        return 0;
}

int mcp_arg_int(const cJSON *args, const char *name, int64_t min, int64_t max, int64_t def, int64_t *ret,
                cJSON **ret_error) {
        const cJSON *v = arg_get(args, name);

        *ret = def;
        if (!v)
                return 0;
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
                return arg_error(ret_error, "argument '%s' must be a whole number from %" PRId64 " to %" PRId64,
                                 name, min, max);
        if (v->valuedouble < (double) min || v->valuedouble > (double) max)
                return arg_error(ret_error, "argument '%s' is %.0f: it must be from %" PRId64 " to %" PRId64, name,
                                 v->valuedouble, min, max);
        *ret = (int64_t) v->valuedouble;
        return 0;
}

int mcp_arg_bool(const cJSON *args, const char *name, bool def, bool *ret, cJSON **ret_error) {
        const cJSON *v = arg_get(args, name);

        *ret = def;
        if (!v)
                return 0;
        if (!cJSON_IsBool(v))
                return arg_error(ret_error, "argument '%s' must be true or false", name);
        *ret = cJSON_IsTrue(v);
        return 0;
}

int mcp_arg_string_map(const cJSON *args, const char *name, const cJSON **ret, cJSON **ret_error) {
        const cJSON *v = arg_get(args, name), *e;

        *ret = NULL;
        if (!v)
                return 0;
        if (!cJSON_IsObject(v))
                return arg_error(ret_error, "argument '%s' must be an object of strings, e.g. {\"KEY\": \"value\"}",
                                 name);
        cJSON_ArrayForEach(e, v)
                if (!cJSON_IsString(e))
                        return arg_error(ret_error, "argument '%s': the value of '%.100s' must be a string", name,
                                         e->string);
        *ret = v;
        return 0;
}

int mcp_args_check(const McpTool *tool, const cJSON *args, cJSON **ret_error) {
        _cleanup_cjson_ cJSON *schema = cJSON_Parse(tool->input_schema);
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties"), *a;

        if (!schema)
                return -ENOMEM;
        cJSON_ArrayForEach(a, args)
                if (!cJSON_GetObjectItemCaseSensitive(props, a->string)) {
                        _cleanup_free_ char *known = NULL;
                        const cJSON *p;
                        size_t len = 0;

                        cJSON_ArrayForEach(p, props)
                                len += strlen(p->string) + 2;
                        known = calloc(1, len + 1);
                        if (!known)
                                return -ENOMEM;
                        cJSON_ArrayForEach(p, props) {
                                if (*known)
                                        strcat(known, ", ");
                                strcat(known, p->string);
                        }
                        return arg_error(ret_error, "%s has no argument '%.100s'; it takes: %s", tool->name, a->string,
                                         *known ? known : "none");
                }
        return 0;
}

/* ---- operations ---- */

int mcp_wait_operation(McpCall *call, const char *what, const cJSON *reply_json, cJSON **ret_op, cJSON **ret_error) {
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(reply_json, "operation") ?: reply_json;
        _cleanup_cjson_ cJSON *current = cJSON_Duplicate(op, true);

        if (ret_op)
                *ret_op = NULL;
        if (!current)
                return -ENOMEM;
        /* a progress note every few seconds, so that a client that asked for progress (and resets its timeout
         * on it) waits for a first create that boots a template */
        for (unsigned polls = 0;; polls++) {
                const cJSON *state = cJSON_GetObjectItemCaseSensitive(current, "state");
                const cJSON *id = cJSON_GetObjectItemCaseSensitive(current, "id");
                _cleanup_free_ char *path = NULL, *esc = NULL;
                SpaceHttpReply reply = {};
                int r;

                if (!cJSON_IsString(state) || !cJSON_IsString(id))
                        return arg_error(ret_error, "%s: the daemon answered no operation", what);
                if (streq(state->valuestring, "succeeded")) {
                        if (ret_op)
                                *ret_op = TAKE_PTR(current);
                        return 0;
                }
                if (streq(state->valuestring, "failed")) {
                        const cJSON *e = cJSON_GetObjectItemCaseSensitive(current, "error");
                        const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
                        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "code");

                        return arg_error(ret_error, "%s failed: %s (%s)", what,
                                         cJSON_IsString(m) ? m->valuestring : "no reason given",
                                         cJSON_IsString(c) ? c->valuestring : "error");
                }
                if (mcp_call_cancelled(call))
                        return -EINTR;
                if (polls > 0) {
                        char note[256];

                        snprintf(note, sizeof note, "%s: still %s", what, state->valuestring);
                        mcp_call_progress(call, polls, 0, note);
                }
                r = space_http_escape(id->valuestring, &esc);
                if (r < 0)
                        return r;
                if (asprintf(&path, "/v1/operations/%s?wait=5", esc) < 0)
                        return -ENOMEM;
                r = mcp_api_request(call, "GET", path, NULL, what, &reply, ret_error);
                if (r != 0)
                        return r;
                cJSON_Delete(current);
                current = TAKE_PTR(reply.json);
                space_http_reply_done(&reply);
                if (!current)
                        return arg_error(ret_error, "%s: the daemon answered no operation", what);
        }
}
