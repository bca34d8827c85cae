/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MCP engine's JSON-RPC 2.0 side: one message in, its answers out through the transport's send. Quick
 * requests (initialize, ping, tools/list, a tools/call refused before it starts) are answered before
 * mcp_server_receive() returns; a tools/call runs on a thread of its own, so that a cancellation or a ping
 * is read while it runs (ARCHITECTURE.md, "MCP").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "macro.h"
#include "mcp-internal.h"
#include "string-util.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.0.0"
#endif

/* JSON-RPC's codes. */
#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_INTERNAL_ERROR -32603

const char *const mcp_protocol_versions[] = {
        "2024-11-05",
        "2025-03-26",
        "2025-06-18",
        "2025-11-25",
        NULL,
};

/* The table's own string for version, NULL when it is none of them. */
static const char *protocol_version_find(const char *version) {
        if (!version)
                return NULL;
        for (size_t i = 0; mcp_protocol_versions[i]; i++)
                if (streq(mcp_protocol_versions[i], version))
                        return mcp_protocol_versions[i];
        return NULL;
}

bool mcp_protocol_version_known(const char *version) {
        return protocol_version_find(version) != NULL;
}

const char *mcp_protocol_version_newest(void) {
        size_t n = 0;

        while (mcp_protocol_versions[n + 1])
                n++;
        return mcp_protocol_versions[n];
}

/* ---- sending ---- */

void mcp_send(McpServer *s, cJSON *message, void *context) {
        if (!message)
                return;
        pthread_mutex_lock(&s->send_lock);
        s->opts.send(message, context, s->opts.userdata);
        pthread_mutex_unlock(&s->send_lock);
        cJSON_Delete(message);
}

static void send_done(McpServer *s, void *context) {
        if (s->opts.done)
                s->opts.done(context, s->opts.userdata);
}

/* {"jsonrpc": "2.0", "id": id} with id copied (NULL: null). */
static cJSON *message_new(const cJSON *id) {
        cJSON *m = cJSON_CreateObject();
        cJSON *i = id ? cJSON_Duplicate(id, true) : cJSON_CreateNull();

        if (!m || !i || !cJSON_AddStringToObject(m, "jsonrpc", "2.0") || !cJSON_AddItemToObject(m, "id", i)) {
                if (m && !cJSON_GetObjectItemCaseSensitive(m, "id"))
                        cJSON_Delete(i);
                cJSON_Delete(m);
                return NULL;
        }
        return m;
}

cJSON *mcp_error_message(const cJSON *id, int code, const char *message) {
        cJSON *m = message_new(id), *e = cJSON_CreateObject();

        if (!m || !e || !cJSON_AddNumberToObject(e, "code", code) || !cJSON_AddStringToObject(e, "message", message) ||
            !cJSON_AddItemToObject(m, "error", e)) {
                if (m && !cJSON_GetObjectItemCaseSensitive(m, "error"))
                        cJSON_Delete(e);
                cJSON_Delete(m);
                return NULL;
        }
        return m;
}

static void send_result(McpServer *s, const cJSON *id, cJSON *result, void *context) {
        cJSON *m = message_new(id);

        if (!m || !result || !cJSON_AddItemToObject(m, "result", result)) {
                cJSON_Delete(result);
                cJSON_Delete(m);
                return;
        }
        mcp_send(s, m, context);
}

static void send_error(McpServer *s, const cJSON *id, int code, void *context, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
static void send_error(McpServer *s, const cJSON *id, int code, void *context, const char *fmt, ...) {
        _cleanup_free_ char *text = NULL;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&text, fmt, ap);
        va_end(ap);
        if (k >= 0)
                mcp_send(s, mcp_error_message(id, code, text), context);
}

/* ---- the calls ---- */

static McpCall *call_free(McpCall *c) {
        if (!c)
                return NULL;
        space_http_free(c->http);
        space_http_free(c->http_uncancelled);
        cJSON_Delete(c->id);
        cJSON_Delete(c->progress_token);
        cJSON_Delete(c->args);
        free(c);
        return NULL;
}

SpaceHttp *mcp_call_http(McpCall *call) {
        return call->http;
}

SpaceHttp *mcp_call_http_uncancelled(McpCall *call) {
        if (!call->http_uncancelled && mcp_connect(call->server, &call->http_uncancelled) < 0)
                call->http_uncancelled = NULL;
        return call->http_uncancelled;
}

bool mcp_call_cancelled(McpCall *call) {
        return call->cancelled != 0;
}

McpServer *mcp_call_server(McpCall *call) {
        return call->server;
}

void mcp_call_progress(McpCall *call, double progress, double total, const char *message) {
        cJSON *m, *p;

        /* MCP asks that progress grow with each notification; a tool that repeats itself is not sent again */
        if (!call->progress_token || call->cancelled || !isfinite(progress) ||
            (call->progress_sent && progress <= call->last_progress))
                return;
        m = cJSON_CreateObject();
        p = cJSON_CreateObject();
        if (!m || !p || !cJSON_AddStringToObject(m, "jsonrpc", "2.0") ||
            !cJSON_AddStringToObject(m, "method", "notifications/progress") ||
            !cJSON_AddItemToObject(p, "progressToken", cJSON_Duplicate(call->progress_token, true)) ||
            !cJSON_AddNumberToObject(p, "progress", progress) ||
            (total > 0 && !cJSON_AddNumberToObject(p, "total", total)) ||
            (message && !cJSON_AddStringToObject(p, "message", message)) ||
            !cJSON_AddItemToObject(m, "params", p)) {
                if (m && !cJSON_GetObjectItemCaseSensitive(m, "params"))
                        cJSON_Delete(p);
                cJSON_Delete(m);
                return;
        }
        call->last_progress = progress;
        call->progress_sent = true;
        mcp_send(call->server, m, call->context);
}

static void *call_thread(void *userdata) {
        McpCall *c = userdata;
        McpServer *s = c->server;
        cJSON *result = NULL;
        int r;

        r = c->tool->run(c, c->args, &result);
        /* a cancelled request gets no answer (MCP's cancellation); anything else gets one */
        if (!c->cancelled) {
                if (r < 0 && r != -EINTR) {
                        cJSON_Delete(result);
                        result = mcp_result_errorf("%s failed: %s", c->tool->name, strerror(-r));
                }
                if (result)
                        send_result(s, c->id, TAKE_PTR(result), c->context);
                else
                        send_error(s, c->id, RPC_INTERNAL_ERROR, c->context, "%s failed: %s", c->tool->name,
                                   strerror(r < 0 ? -r : ENOMEM));
        }
        cJSON_Delete(result);
        send_done(s, c->context);

        pthread_mutex_lock(&s->lock);
        for (McpCall **p = &s->calls; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        s->n_calls--;
        pthread_cond_broadcast(&s->calls_changed);
        pthread_mutex_unlock(&s->lock);
        /* s may be gone from here on: only the call is ours */
        call_free(c);
        return NULL;
}

/* Starts a tools/call on its own thread. 0 when started (the thread answers and calls done), 1 when refused
 * (answered here), < 0 when out of memory. */
static int call_start(McpServer *s, const McpTool *tool, const cJSON *id, const cJSON *params, const cJSON *args,
                      void *context) {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
        const cJSON *token = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
        _cleanup_free_ McpCall *c = calloc(1, sizeof *c);
        pthread_attr_t attr;
        int r;

        if (!c)
                return -ENOMEM;
        c->server = s;
        c->tool = tool;
        c->context = context;
        c->id = cJSON_Duplicate(id, true);
        c->args = args ? cJSON_Duplicate(args, true) : cJSON_CreateObject();
        if (cJSON_IsString(token) || cJSON_IsNumber(token))
                c->progress_token = cJSON_Duplicate(token, true);
        if (!c->id || !c->args || ((cJSON_IsString(token) || cJSON_IsNumber(token)) && !c->progress_token)) {
                call_free(TAKE_PTR(c));
                return -ENOMEM;
        }
        r = mcp_connect(s, &c->http);
        if (r < 0) {
                call_free(TAKE_PTR(c));
                send_result(s, id, mcp_result_errorf("%s: cannot reach the space daemon: %s", tool->name,
                                                     strerror(-r)), context);
                return 1;
        }
        space_http_set_cancel(c->http, &c->cancelled);

        pthread_mutex_lock(&s->lock);
        if (s->closing || s->n_calls >= MCP_CALLS_MAX) {
                bool closing = s->closing;

                pthread_mutex_unlock(&s->lock);
                call_free(TAKE_PTR(c));
                send_result(s, id, closing ? mcp_result_errorf("the session is ending") :
                            mcp_result_errorf("%u calls are running in this session already: wait for one to "
                                              "end, or cancel one", MCP_CALLS_MAX), context);
                return 1;
        }
        (void) pthread_attr_init(&attr);
        (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = -pthread_create(&c->thread, &attr, call_thread, c);
        (void) pthread_attr_destroy(&attr);
        if (r < 0) {
                pthread_mutex_unlock(&s->lock);
                call_free(TAKE_PTR(c));
                send_result(s, id, mcp_result_errorf("%s: cannot start a thread: %s", tool->name, strerror(-r)),
                            context);
                return 1;
        }
        c->next = s->calls;
        s->calls = c;
        s->n_calls++;
        TAKE_PTR(c);
        pthread_mutex_unlock(&s->lock);
        return 0;
}

/* notifications/cancelled: the call with that request id stops; its answer is not sent. */
static void cancel_request(McpServer *s, const cJSON *request_id) {
        if (!cJSON_IsString(request_id) && !cJSON_IsNumber(request_id))
                return;
        pthread_mutex_lock(&s->lock);
        for (McpCall *c = s->calls; c; c = c->next)
                if (cJSON_Compare(c->id, request_id, true))
                        c->cancelled = 1;
        pthread_mutex_unlock(&s->lock);
}

unsigned mcp_server_running(McpServer *s) {
        unsigned n;

        pthread_mutex_lock(&s->lock);
        n = s->n_calls;
        pthread_mutex_unlock(&s->lock);
        return n;
}

/* ---- the methods ---- */

static cJSON *tool_to_json(const McpTool *t) {
        cJSON *o = cJSON_CreateObject(), *schema = cJSON_Parse(t->input_schema), *ann = cJSON_CreateObject();

        if (!o || !schema || !ann || !cJSON_AddStringToObject(o, "name", t->name) ||
            !cJSON_AddStringToObject(o, "description", t->description) ||
            !cJSON_AddItemToObject(o, "inputSchema", schema)) {
                if (o && !cJSON_GetObjectItemCaseSensitive(o, "inputSchema"))
                        cJSON_Delete(schema);
                cJSON_Delete(ann);
                cJSON_Delete(o);
                return NULL;
        }
        if (!cJSON_AddBoolToObject(ann, "readOnlyHint", t->read_only) ||
            !cJSON_AddBoolToObject(ann, "destructiveHint", t->destructive) ||
            /* every tool works on sandboxes and the daemon, never on the world outside */
            !cJSON_AddBoolToObject(ann, "openWorldHint", false) || !cJSON_AddItemToObject(o, "annotations", ann)) {
                if (!cJSON_GetObjectItemCaseSensitive(o, "annotations"))
                        cJSON_Delete(ann);
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

static cJSON *tools_list(void) {
        cJSON *result = cJSON_CreateObject(), *tools = cJSON_AddArrayToObject(result, "tools");

        if (!tools) {
                cJSON_Delete(result);
                return NULL;
        }
        for (size_t i = 0; i < mcp_tools_count(); i++) {
                cJSON *t = tool_to_json(mcp_tool_at(i));

                if (!t) {
                        cJSON_Delete(result);
                        return NULL;
                }
                cJSON_AddItemToArray(tools, t);
        }
        return result;
}

static cJSON *initialize(McpServer *s, const cJSON *params) {
        const cJSON *asked = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
        /* the table's string, not the request's: it outlives the message, and a later initialize */
        const char *version = (cJSON_IsString(asked) ? protocol_version_find(asked->valuestring) : NULL) ?:
                mcp_protocol_version_newest();
        cJSON *result = cJSON_CreateObject(), *caps, *tools, *info;

        pthread_mutex_lock(&s->lock);
        s->protocol_version = version;
        pthread_mutex_unlock(&s->lock);

        if (!result || !cJSON_AddStringToObject(result, "protocolVersion", version) ||
            !(caps = cJSON_AddObjectToObject(result, "capabilities")) ||
            !(tools = cJSON_AddObjectToObject(caps, "tools")) || !cJSON_AddBoolToObject(tools, "listChanged", false) ||
            !(info = cJSON_AddObjectToObject(result, "serverInfo")) || !cJSON_AddStringToObject(info, "name", "space") ||
            !cJSON_AddStringToObject(info, "title", "space sandboxes") ||
            !cJSON_AddStringToObject(info, "version", PACKAGE_VERSION) ||
            !cJSON_AddStringToObject(result, "instructions",
                                     "Each tool runs in an isolated microVM sandbox. Without sandbox_id a tool "
                                     "uses this session's own sandbox, made on first use and removed when the "
                                     "session ends. Use sandbox_checkpoint and sandbox_fork to branch an "
                                     "attempt, egress_status to tell a blocked connection from a broken one.")) {
                cJSON_Delete(result);
                return NULL;
        }
        return result;
}

static void handle_tools_call(McpServer *s, const cJSON *id, const cJSON *params, void *context,
                              bool *ret_started) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
        const McpTool *tool;
        cJSON *error = NULL;

        *ret_started = false;
        if (!cJSON_IsObject(params) || !cJSON_IsString(name)) {
                send_error(s, id, RPC_INVALID_PARAMS, context, "tools/call needs params.name, a tool's name");
                return;
        }
        tool = mcp_tool_find(name->valuestring);
        if (!tool) {
                send_error(s, id, RPC_INVALID_PARAMS, context, "Unknown tool: %.100s (tools/list names them)",
                           name->valuestring);
                return;
        }
        if (args && !cJSON_IsNull(args) && !cJSON_IsObject(args)) {
                send_result(s, id, mcp_result_errorf("%s: arguments must be an object", tool->name), context);
                return;
        }
        if (cJSON_IsNull(args))
                args = NULL;
        if (args && mcp_args_check(tool, args, &error) != 0) {
                send_result(s, id, error, context);
                return;
        }
        if (call_start(s, tool, id, params, args, context) == 0)
                *ret_started = true;
        else
                (void) 0; /* refused and answered, or out of memory (the client's request times out) */
}

/* A request: answered here, or handed to a call thread (*ret_async). */
static void handle_request(McpServer *s, const char *method, const cJSON *id, const cJSON *params, void *context,
                           bool *ret_async) {
        *ret_async = false;
        if (params && !cJSON_IsObject(params)) {
                send_error(s, id, RPC_INVALID_PARAMS, context, "params must be an object");
                return;
        }
        if (streq(method, "initialize"))
                send_result(s, id, initialize(s, params), context);
        else if (streq(method, "ping"))
                send_result(s, id, cJSON_CreateObject(), context);
        else if (streq(method, "tools/list"))
                send_result(s, id, tools_list(), context);
        else if (streq(method, "tools/call"))
                handle_tools_call(s, id, params, context, ret_async);
        else
                send_error(s, id, RPC_METHOD_NOT_FOUND, context, "Method not found: %.100s", method);
}

static void handle_notification(McpServer *s, const char *method, const cJSON *params) {
        if (streq(method, "notifications/cancelled"))
                cancel_request(s, cJSON_GetObjectItemCaseSensitive(params, "requestId"));
        /* notifications/initialized, progress, roots: nothing to do; unknown ones are ignored, as JSON-RPC
         * asks of notifications */
}

int mcp_server_receive(McpServer *s, const char *text, size_t len, void *context, bool *ret_is_request) {
        _cleanup_cjson_ cJSON *m = NULL;
        const cJSON *jsonrpc, *method, *id, *params;
        bool async = false;

        if (ret_is_request)
                *ret_is_request = true;
        m = cJSON_ParseWithLength(text, len);
        if (!m) {
                send_error(s, NULL, RPC_PARSE_ERROR, context, "Parse error: the message is not JSON");
                goto done;
        }
        if (cJSON_IsArray(m)) {
                send_error(s, NULL, RPC_INVALID_REQUEST, context,
                           "Invalid Request: batches are not supported (MCP 2025-06-18 removed them): send one "
                           "message at a time");
                goto done;
        }
        id = cJSON_GetObjectItemCaseSensitive(m, "id");
        if (id && !cJSON_IsString(id) && !cJSON_IsNumber(id))
                id = NULL;
        jsonrpc = cJSON_GetObjectItemCaseSensitive(m, "jsonrpc");
        if (!cJSON_IsObject(m) || !cJSON_IsString(jsonrpc) || !streq(jsonrpc->valuestring, "2.0")) {
                send_error(s, id, RPC_INVALID_REQUEST, context, "Invalid Request: \"jsonrpc\" must be \"2.0\"");
                goto done;
        }
        method = cJSON_GetObjectItemCaseSensitive(m, "method");
        params = cJSON_GetObjectItemCaseSensitive(m, "params");
        if (!method) {
                /* a response to a request of ours: we send none, so there is nothing to match */
                if (cJSON_HasObjectItem(m, "result") || cJSON_HasObjectItem(m, "error")) {
                        if (ret_is_request)
                                *ret_is_request = false;
                        goto done;
                }
                send_error(s, id, RPC_INVALID_REQUEST, context, "Invalid Request: no \"method\"");
                goto done;
        }
        if (!cJSON_IsString(method)) {
                send_error(s, id, RPC_INVALID_REQUEST, context, "Invalid Request: \"method\" must be a string");
                goto done;
        }
        if (!cJSON_HasObjectItem(m, "id")) {
                if (ret_is_request)
                        *ret_is_request = false;
                handle_notification(s, method->valuestring, params);
                goto done;
        }
        if (!id) {
                send_error(s, NULL, RPC_INVALID_REQUEST, context,
                           "Invalid Request: \"id\" must be a string or a number");
                goto done;
        }
        handle_request(s, method->valuestring, id, params, context, &async);
        if (async)
                return 0; /* the call's thread says done */
done:
        send_done(s, context);
        return 0;
}

/* ---- the server ---- */

const char *mcp_server_session_id(McpServer *s) {
        return s->session_id;
}

const char *mcp_server_protocol_version(McpServer *s) {
        const char *v;

        pthread_mutex_lock(&s->lock);
        v = s->protocol_version;
        pthread_mutex_unlock(&s->lock);
        return v;
}

int mcp_connect(McpServer *s, SpaceHttp **ret) {
        if (s->opts.connect)
                return s->opts.connect(ret, s->opts.userdata);
        return space_http_new(ret);
}

int mcp_server_new(const McpServerOptions *opts, McpServer **ret) {
        _cleanup_free_ McpServer *s = NULL;
        uint8_t rnd[16];

        if (!opts || !opts->send || !ret)
                return -EINVAL;
        /* every schema must be JSON: a tool with a broken one would be listed as nothing */
        for (size_t i = 0; i < mcp_tools_count(); i++) {
                cJSON *schema = cJSON_Parse(mcp_tool_at(i)->input_schema);
                bool ok = cJSON_IsObject(schema);

                cJSON_Delete(schema);
                if (!ok)
                        return -EINVAL;
        }
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t) sizeof rnd)
                return errno > 0 ? -errno : -EIO;
        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->opts = *opts;
        if ((opts->template && !(s->template = strdup(opts->template))) ||
            (opts->name && !(s->name = strdup(opts->name)))) {
                free(s->template);
                free(s->name);
                return -ENOMEM;
        }
        s->opts.template = s->template;
        s->opts.name = s->name;
        string_hex_encode(rnd, sizeof rnd, s->session_id);
        pthread_mutex_init(&s->lock, NULL);
        pthread_mutex_init(&s->send_lock, NULL);
        pthread_mutex_init(&s->sandbox_lock, NULL);
        pthread_mutex_init(&s->sandboxes_lock, NULL);
        pthread_cond_init(&s->calls_changed, NULL);
        *ret = TAKE_PTR(s);
        return 0;
}

McpServer *mcp_server_free(McpServer *s) {
        if (!s)
                return NULL;
        pthread_mutex_lock(&s->lock);
        s->closing = true;
        for (McpCall *c = s->calls; c; c = c->next)
                c->cancelled = 1;
        while (s->n_calls > 0)
                pthread_cond_wait(&s->calls_changed, &s->lock);
        pthread_mutex_unlock(&s->lock);

        mcp_session_cleanup(s);
        mcp_session_free(s);
        pthread_cond_destroy(&s->calls_changed);
        pthread_mutex_destroy(&s->lock);
        pthread_mutex_destroy(&s->send_lock);
        pthread_mutex_destroy(&s->sandbox_lock);
        pthread_mutex_destroy(&s->sandboxes_lock);
        free(s->template);
        free(s->name);
        free(s);
        return NULL;
}
