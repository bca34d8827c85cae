/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * What an MCP tool is to the engine (lib/mcp-server.c): a name, a one-line description an agent can act on,
 * a JSON schema of its arguments, and a handler that runs on a thread of its own with a McpCall. Tools are
 * in lib/mcp-tools-*.c, each file one family, listed by mcp_tool_at() (lib/mcp-tools.c).
 */

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "http-client.h"
#include "json-util.h"

typedef struct McpServer McpServer;
typedef struct McpCall McpCall;

/* A handler fills *ret_result (a CallToolResult: mcp_result_*() make one) and returns 0, or returns < 0
 * (-ENOMEM, or -EINTR when cancelled: the engine then sends nothing, as MCP asks). Tool errors (bad
 * arguments, an API refusal) are results with isError, never < 0. */
typedef int (*McpToolFn)(McpCall *call, const cJSON *args, cJSON **ret_result);

typedef struct McpTool {
        const char *name;
        const char *description;
        const char *input_schema;       /* JSON text of the arguments' schema */
        McpToolFn run;
        bool read_only;                 /* annotations.readOnlyHint */
        bool destructive;               /* annotations.destructiveHint */
} McpTool;

/* Every tool, the families' tables in order (lib/mcp-tools.c): how many, the i-th, and one by name. */
size_t mcp_tools_count(void);
const McpTool *mcp_tool_at(size_t i);
const McpTool *mcp_tool_find(const char *name);

/* The families, each a table of its own (lib/mcp-tools-*.c). */
extern const McpTool mcp_tools_sandbox[];       /* create, list, remove, suspend, wake, checkpoints, fork */
extern const size_t mcp_tools_sandbox_count;
extern const McpTool mcp_tools_files[];         /* read, write, list, stat, remove, move, mkdir */
extern const size_t mcp_tools_files_count;
extern const McpTool mcp_tools_run[];           /* exec, run_code, port_url, egress_status */
extern const size_t mcp_tools_run_count;

/* ---- what a handler has ---- */

/* The call's own connection to the API (made for this thread); its transfers abort with -EINTR once the call
 * is cancelled. */
SpaceHttp *mcp_call_http(McpCall *call);
/* A second connection, not cancelled with the call: for the clean-up after a cancellation (killing the
 * process it started). Owned by the call. NULL when out of memory. */
SpaceHttp *mcp_call_http_uncancelled(McpCall *call);
bool mcp_call_cancelled(McpCall *call);
/* Sends notifications/progress when the caller asked for progress (a progressToken); progress must grow.
 * message may be NULL. A no-op otherwise. */
void mcp_call_progress(McpCall *call, double progress, double total, const char *message);
McpServer *mcp_call_server(McpCall *call);

/*
 * The sandbox a call is about: args' "sandbox_id" (an id, a unique prefix or a name) when given, otherwise
 * the session's own sandbox, created on first use from the session's template (mcp_call_sandbox_running()
 * also wakes it).
 * 0 with *ret_id (the full id, free()) set, or a tool error result in *ret_error (and 1 returned), or < 0.
 */
int mcp_call_sandbox(McpCall *call, const cJSON *args, char **ret_id, cJSON **ret_error);
/* The same, for tools that need the VM running: a suspended sandbox is woken and a paused one resumed first
 * (a sandbox in any other state than running is a tool error naming it). */
int mcp_call_sandbox_running(McpCall *call, const cJSON *args, char **ret_id, cJSON **ret_error);
/* Records a sandbox the session made (sandbox_create, sandbox_fork) so the session's end removes it (unless
 * the session keeps them, or keep is true). */
int mcp_session_add_sandbox(McpServer *s, const char *id, bool keep);
/* Forgets a sandbox (removed by a tool); when it was the session sandbox, the next call makes a new one. */
void mcp_session_forget_sandbox(McpServer *s, const char *id);
/* The id of the session's sandbox, NULL when none was made yet (a copy: free()). */
char *mcp_session_sandbox_id(McpServer *s);

/* ---- results ---- */

/* {"content": [{"type": "text", "text": text}], "structuredContent": structured (taken; may be NULL),
 * "isError": false}. NULL when out of memory. */
cJSON *mcp_result_text(const char *text, cJSON *structured);
/* The same with isError true, text made with printf. */
cJSON *mcp_result_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A tool error from an API reply (its code and message, and what to do), prefixed with what failed. */
cJSON *mcp_result_api_error(const char *what, const SpaceHttpReply *reply);
/* A tool error from a transport failure (r < 0 from space_http_*), prefixed with what failed. */
cJSON *mcp_result_transport_error(const char *what, SpaceHttp *h, int r);
/* Adds {"type": "image", "data": base64, "mimeType": mime} to a result's content. */
int mcp_result_add_image(cJSON *result, const char *base64, const char *mime);
/* Adds a text item. */
int mcp_result_add_text(cJSON *result, const char *text);

/* ---- arguments (each: 0 and the value, 0 and the default when absent, or 1 with *ret_error set) ---- */
int mcp_arg_string(const cJSON *args, const char *name, bool required, const char **ret, cJSON **ret_error);
int mcp_arg_int(const cJSON *args, const char *name, int64_t min, int64_t max, int64_t def, int64_t *ret,
                cJSON **ret_error);
int mcp_arg_bool(const cJSON *args, const char *name, bool def, bool *ret, cJSON **ret_error);
/* An object of string values (env), or NULL when absent; a borrowed pointer into args. */
int mcp_arg_string_map(const cJSON *args, const char *name, const cJSON **ret, cJSON **ret_error);
/* Fails (1 and an error naming it) when args has a member the tool's schema does not list. */
int mcp_args_check(const McpTool *tool, const cJSON *args, cJSON **ret_error);

/* Waits for an operation ({"operation": {...}} or the Operation itself) to finish: 0 when it succeeded, 1
 * with *ret_error a tool error naming what failed, < 0 (-EINTR when cancelled). ret_op (may be NULL) gets
 * the final Operation. */
int mcp_wait_operation(McpCall *call, const char *what, const cJSON *reply_json, cJSON **ret_op,
                       cJSON **ret_error);
