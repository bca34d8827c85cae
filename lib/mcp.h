/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * An MCP server (the Model Context Protocol, JSON-RPC 2.0) whose tools are space's sandboxes: the engine that
 * `spacectl mcp` runs on stdio and spaced serves at /mcp over MCP's streamable HTTP (ARCHITECTURE.md, "MCP").
 * It is a client of the /v1 API like spacectl: every tool is a few requests through lib/http-client.h, so it
 * answers with the API's own validation and errors, and it keeps no state but its session's sandboxes.
 *
 * A transport hands it each message it reads (mcp_server_receive()) with a context of its own (the HTTP
 * request it came on; NULL on stdio), and gets back every message to write through McpSendFn, with the
 * context of the request it answers or reports progress for. Requests that take time (tools/call) run on a
 * thread each, so a cancellation or a ping is read while they run. Nothing here prints.
 */

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

typedef struct McpServer McpServer;
typedef struct SpaceHttp SpaceHttp;

/* The protocol revisions of the initialize handshake, oldest first; an initialize asking for another gets
 * the newest. */
extern const char *const mcp_protocol_versions[];

/* Called with one message to write, and the context given with the message it answers or reports progress
 * for. From any thread; calls are serialized. Its return is ignored (a transport that lost its peer says so
 * by ending the session). */
typedef void (*McpSendFn)(const cJSON *message, void *context, void *userdata);
/* Called once every response to the messages received with context has been sent (at once for
 * notifications, after a tool's answer for tools/call): the streamable HTTP transport then ends that POST's
 * stream. */
typedef void (*McpDoneFn)(void *context, void *userdata);
/* A new connection to the API for one thread (each tool call has its own). */
typedef int (*McpConnectFn)(SpaceHttp **ret, void *userdata);

typedef struct McpServerOptions {
        const char *template;   /* the session sandbox's template; NULL: code-interpreter, seed or minimal */
        bool keep;              /* leave the session's sandboxes at the end; the session sandbox is named */
        const char *name;       /* with keep: the session sandbox's name (NULL: "mcp-<template>"), reused */
        McpConnectFn connect;   /* NULL: space_http_new() (the environment's daemon) */
        McpSendFn send;
        McpDoneFn done;         /* may be NULL */
        void *userdata;
} McpServerOptions;

int mcp_server_new(const McpServerOptions *opts, McpServer **ret);
/* Ends the session: cancels running calls and waits for them, then removes the sandboxes the session made
 * (unless keep). NULL is fine. */
McpServer *mcp_server_free(McpServer *s);
static inline void mcp_server_freep(McpServer **s) {
        if (*s)
                mcp_server_free(*s);
}
#define _cleanup_mcp_server_ __attribute__((cleanup(mcp_server_freep)))

/* One message as read (len bytes, not NUL-terminated): a request, a notification, a response or garbage.
 * Malformed input is answered with JSON-RPC's error codes through send; the return is < 0 only when out of
 * memory. ret_is_request (may be NULL) says whether a response will follow (HTTP answers 202 otherwise). */
int mcp_server_receive(McpServer *s, const char *text, size_t len, void *context, bool *ret_is_request);

/* The session's id: 32 random hex digits, made by mcp_server_new(); the streamable HTTP transport's
 * Mcp-Session-Id, and the "mcp_session" label of the sandboxes the session makes. */
const char *mcp_server_session_id(McpServer *s);
/* Whether version is one of mcp_protocol_versions[]. */
bool mcp_protocol_version_known(const char *version);
/* The newest of them: what an initialize asking for another gets. */
const char *mcp_protocol_version_newest(void);
/* {"jsonrpc": "2.0", "id": id (a copy; NULL: null), "error": {"code", "message"}}: the engine's error answers,
 * and a transport's for a message it refuses before the engine sees it. NULL when out of memory. */
cJSON *mcp_error_message(const cJSON *id, int code, const char *message);
/* The protocol revision the session's initialize settled on, NULL before one. */
const char *mcp_server_protocol_version(McpServer *s);
/* Calls still running. */
unsigned mcp_server_running(McpServer *s);
