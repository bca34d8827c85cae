/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * What the tool families (lib/mcp-tools-*.c) share, in lib/mcp-tools-common.c: a handler's way out, reading the
 * daemon's JSON, the request every tool makes, and a text buffer that turns a guest's bytes into text a JSON
 * string can carry. Private to the tools; the engine's lib/mcp-session.c and lib/mcp-util.c use its requests
 * too. Nothing here is for lib/mcp.h's users.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcp-tool.h"

/* ---- a handler's way out ---- */

/* For a 1 (a tool error in *err) or < 0 from a helper: the error as the result and 0, or r. */
int mcp_tool_fail(int r, cJSON **err, cJSON **ret_result);
/* result (made by mcp_result_*(), NULL when out of memory) as the result: 0, or -ENOMEM. */
int mcp_result_or_enomem(cJSON *result, cJSON **ret_result);

/* ---- JSON from the daemon (and the guest behind it) ---- */

/* o[key] when it is a string, else NULL (o may be NULL). */
const char *mcp_json_string(const cJSON *o, const char *key);
/* true with *ret when o[key] is an integer within [min, max]. */
bool mcp_json_integer(const cJSON *o, const char *key, int64_t min, int64_t max, int64_t *ret);
/* A string member, or NULL when it is null or absent (*ret); false when it is anything else. */
bool mcp_json_string_or_null(const cJSON *o, const char *key, const char **ret);
/* The len bytes at data parsed, when they are a JSON object; NULL otherwise. */
cJSON *mcp_json_object_parse(const char *data, size_t len);
/* A valid UTF-8 copy of a guest's string, at most max bytes; "" for NULL. NULL when out of memory. */
char *mcp_string_clean(const char *s, size_t max);
/* The daemon answered 2xx without the valid member missing: a version skew, said as such. 1 with *ret_error,
 * or -ENOMEM. */
int mcp_bad_reply(const char *what, const char *missing, cJSON **ret_error);

/* ---- requests ---- */

/* "/v1/sandboxes/<ref><suffix>" with ref escaped; suffix may be NULL. */
int mcp_sandbox_path(const char *ref, const char *suffix, char **ret);
/* A transport failure (r < 0 from space_http_*() on the call's connection) as a tool error named by what: 1
 * with *ret_error; or r itself when it is to be returned: -ENOMEM, -EINTR (also once the call is cancelled). */
int mcp_transport_fail(McpCall *call, int r, const char *what, cJSON **ret_error);
/* A request on the call's connection: 0 with a 2xx reply in *ret_reply, 1 with *ret_error a tool error (a
 * refusal or a transport failure, named by what), < 0 (-EINTR when cancelled, -ENOMEM). */
int mcp_api_request(McpCall *call, const char *method, const char *path, const cJSON *body, const char *what,
                    SpaceHttpReply *ret_reply, cJSON **ret_error);
/* GET /v1/sandboxes/REF: 0 with the Sandbox (its id, template and state strings, its name a string or null), 1
 * with a tool error (*ret_missing, may be NULL, says whether it is because there is no such sandbox), < 0. */
int mcp_sandbox_get(McpCall *call, const char *ref, cJSON **ret, bool *ret_missing, cJSON **ret_error);
/* POST /v1/sandboxes/ID/VERB (suspend, wake, resume) and the wait for its operation: 0, 1 with a tool error naming
 * doing ("waking"), < 0. */
int mcp_sandbox_lifecycle(McpCall *call, const char *id, const char *verb, const char *doing, cJSON **ret_error);

/* ---- text ---- */

typedef struct McpText {
        char *data;             /* NUL-terminated once anything was added; NULL before */
        size_t len, size;
} McpText;

void mcp_text_done(McpText *t);
int mcp_text_append(McpText *t, const void *p, size_t n);
int mcp_text_puts(McpText *t, const char *s);
int mcp_text_printf(McpText *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text so far ("" when nothing was added). */
const char *mcp_text_str(const McpText *t);
/* Appends bytes from the guest as text a JSON string can carry: valid UTF-8 as it is, every other byte (and NUL)
 * as U+FFFD; at most max bytes of text, whole characters only. ret_taken (may be NULL): the input bytes used. */
int mcp_text_append_utf8(McpText *t, const void *buf, size_t n, size_t max, size_t *ret_taken);
/* Appends "name:\n<s>\n" (no second newline when s ends in one), or "name: (empty)\n". */
int mcp_text_add_stream(McpText *t, const char *name, const McpText *s);

/* ---- the run family's handlers, in files of their own (the table is lib/mcp-tools-run.c's) ---- */

int mcp_tool_exec(McpCall *call, const cJSON *args, cJSON **ret_result);       /* lib/mcp-tools-exec.c */
int mcp_tool_run_code(McpCall *call, const cJSON *args, cJSON **ret_result);   /* lib/mcp-tools-code.c */
