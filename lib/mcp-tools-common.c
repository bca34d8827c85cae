/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf, vasprintf */
#endif

/*
 * What the tool families share (lib/mcp-tools-internal.h). The text buffer is where a guest's bytes become text:
 * whatever they are, what comes out is valid UTF-8 without NUL, so that cJSON carries it whole.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "mcp-tools-internal.h"
#include "utf8.h"
#include "proto.h"

/* ---- a handler's way out ---- */

int mcp_tool_fail(int r, cJSON **err, cJSON **ret_result) {
        if (r < 0)
                return r;
        if (!*err)
                return -ENOMEM;
        *ret_result = TAKE_PTR(*err);
        return 0;
}

int mcp_result_or_enomem(cJSON *result, cJSON **ret_result) {
        if (!result)
                return -ENOMEM;
        *ret_result = result;
        return 0;
}

/* ---- JSON from the daemon ---- */

bool mcp_json_string_or_null(const cJSON *o, const char *key, const char **ret) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        *ret = cJSON_IsString(v) ? v->valuestring : NULL;
        return !v || cJSON_IsNull(v) || cJSON_IsString(v);
}

const char *mcp_json_string(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

bool mcp_json_integer(const cJSON *o, const char *key, int64_t min, int64_t max, int64_t *ret) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        double d;

        if (!cJSON_IsNumber(v))
                return false;
        d = v->valuedouble;
        if (!(d >= (double) min && d <= (double) max) || d != (double) (int64_t) d)
                return false;
        *ret = (int64_t) d;
        return true;
}

cJSON *mcp_json_object_parse(const char *data, size_t len) {
        cJSON *j = cJSON_ParseWithLength(data, len);

        if (!cJSON_IsObject(j)) {
                cJSON_Delete(j);
                return NULL;
        }
        return j;
}

char *mcp_string_clean(const char *s, size_t max) {
        McpText t = {};

        if (mcp_text_append_utf8(&t, s ?: "", s ? strlen(s) : 0, max, NULL) < 0) {
                mcp_text_done(&t);
                return NULL;
        }
        return t.data; /* "" when nothing was added: the append above made the buffer */
}

int mcp_bad_reply(const char *what, const char *missing, cJSON **ret_error) {
        *ret_error = mcp_result_errorf("%s: the daemon's answer has no valid %s; check that spaced and spacectl are "
                                       "the same version (spacectl version, spacectl info)", what, missing);
        return *ret_error ? 1 : -ENOMEM;
}

/* ---- requests ---- */

int mcp_sandbox_path(const char *ref, const char *suffix, char **ret) {
        _cleanup_free_ char *e = NULL;
        int r;

        r = space_http_escape(ref, &e);
        if (r < 0)
                return r;
        return asprintf(ret, "/v1/sandboxes/%s%s", e, suffix ?: "") < 0 ? -ENOMEM : 0;
}

int mcp_transport_fail(McpCall *call, int r, const char *what, cJSON **ret_error) {
        if (r == -ENOMEM)
                return r;
        /* whatever failed once the call is cancelled, nobody waits for its answer */
        if (r == -EINTR || mcp_call_cancelled(call))
                return -EINTR;
        *ret_error = mcp_result_transport_error(what, mcp_call_http(call), r);
        return *ret_error ? 1 : -ENOMEM;
}

int mcp_api_request(McpCall *call, const char *method, const char *path, const cJSON *body, const char *what,
                    SpaceHttpReply *ret_reply, cJSON **ret_error) {
        SpaceHttpReply reply = {};
        int r;

        r = space_http_call(mcp_call_http(call), method, path, body, &reply);
        if (r < 0)
                return mcp_transport_fail(call, r, what, ret_error);
        if (!space_http_reply_ok(&reply)) {
                *ret_error = mcp_result_api_error(what, &reply);
                space_http_reply_done(&reply);
                return *ret_error ? 1 : -ENOMEM;
        }
        *ret_reply = reply;
        return 0;
}

/* How long a lifecycle request waits in the daemon before mcp_wait_operation() polls the rest. */
#define LIFECYCLE_WAIT_SEC 60

int mcp_sandbox_get(McpCall *call, const char *ref, cJSON **ret, bool *ret_missing, cJSON **ret_error) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_free_ char *url = NULL, *what = NULL;
        const char *name;
        int r;

        if (ret_missing)
                *ret_missing = false;
        if (mcp_sandbox_path(ref, NULL, &url) < 0 || asprintf(&what, "looking up sandbox '%s'", ref) < 0)
                return -ENOMEM;
        r = space_http_call(mcp_call_http(call), "GET", url, NULL, &reply);
        if (r < 0)
                return mcp_transport_fail(call, r, what, ret_error);
        if (reply.status == 404) {
                if (ret_missing)
                        *ret_missing = true;
                *ret_error = mcp_result_errorf("no sandbox '%.100s': sandbox_list shows the sandboxes; leave "
                                               "sandbox_id out to use this session's own", ref);
                return *ret_error ? 1 : -ENOMEM;
        }
        if (!space_http_reply_ok(&reply)) {
                *ret_error = mcp_result_api_error(what, &reply);
                return *ret_error ? 1 : -ENOMEM;
        }
        if (!cJSON_IsObject(reply.json) || !mcp_json_string(reply.json, "id") ||
            !mcp_json_string(reply.json, "template") || !mcp_json_string(reply.json, "state") ||
            !mcp_json_string_or_null(reply.json, "name", &name))
                return mcp_bad_reply(what, "Sandbox (id, template, state)", ret_error);
        *ret = TAKE_PTR(reply.json);
        return 0;
}

int mcp_sandbox_lifecycle(McpCall *call, const char *id, const char *verb, const char *doing, cJSON **ret_error) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_free_ char *url = NULL, *suffix = NULL, *what = NULL;
        int r;

        if (asprintf(&suffix, "/%s?wait=%d", verb, LIFECYCLE_WAIT_SEC) < 0 || mcp_sandbox_path(id, suffix, &url) < 0 ||
            asprintf(&what, "%s sandbox %s", doing, id) < 0)
                return -ENOMEM;
        r = mcp_api_request(call, "POST", url, NULL, what, &reply, ret_error);
        if (r != 0)
                return r;
        return mcp_wait_operation(call, what, reply.json, NULL, ret_error);
}

/* ---- text ---- */

void mcp_text_done(McpText *t) {
        free(t->data);
        *t = (McpText) {};
}

int mcp_text_append(McpText *t, const void *p, size_t n) {
        /* libspace's growing buffer, with a NUL kept after the text (not counted in len) */
        SpaceBuf b = { .data = (uint8_t *) t->data, .len = t->len, .cap = t->size };
        int r;

        r = space_buf_append(&b, p, n);
        if (r >= 0)
                r = space_buf_append(&b, "", 1);
        t->data = (char *) b.data;
        t->size = b.cap;
        if (r < 0) {
                if (t->data)
                        t->data[t->len] = 0; /* what was added is dropped */
                return r;
        }
        t->len = b.len - 1;
        return 0;
}

int mcp_text_puts(McpText *t, const char *s) {
        return mcp_text_append(t, s, strlen(s));
}

int mcp_text_printf(McpText *t, const char *fmt, ...) {
        _cleanup_free_ char *s = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -ENOMEM;
        return mcp_text_append(t, s, (size_t) n);
}

const char *mcp_text_str(const McpText *t) {
        return t->data ?: "";
}

int mcp_text_add_stream(McpText *t, const char *name, const McpText *s) {
        if (s->len == 0)
                return mcp_text_printf(t, "%s: (empty)\n", name);
        return mcp_text_printf(t, "%s:\n%s%s", name, s->data, s->data[s->len - 1] == '\n' ? "" : "\n");
}

int mcp_text_append_utf8(McpText *t, const void *buf, size_t n, size_t max, size_t *ret_taken) {
        static const char replacement[] = "\xef\xbf\xbd";
        const uint8_t *p = buf;
        size_t i = 0, run = 0, added = 0;
        int r;

        while (i < n) {
                size_t k = utf8_char_len(p + i, n - i);
                size_t out = k > 0 ? k : 3;

                if (added + out > max)
                        break;
                if (k > 0) {
                        i += k;
                        run += k;
                        added += k;
                        continue;
                }
                r = mcp_text_append(t, p + i - run, run);
                if (r < 0)
                        return r;
                run = 0;
                r = mcp_text_append(t, replacement, 3);
                if (r < 0)
                        return r;
                i++;
                added += 3;
        }
        r = mcp_text_append(t, p + i - run, run);
        if (r < 0)
                return r;
        if (ret_taken)
                *ret_taken = i;
        return 0;
}
