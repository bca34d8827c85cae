/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * What the engine's own files share (lib/mcp-server.c: JSON-RPC and the calls; lib/mcp-session.c: the
 * session's sandboxes; lib/mcp-util.c: results and arguments). Tools see none of it: lib/mcp-tool.h is theirs,
 * and lib/mcp-tools-internal.h what the tool families share.
 */

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>

#include "mcp-tool.h"
#include "mcp.h"

/* At most this many tools/call run at once in one session; more are answered with a tool error. */
#define MCP_CALLS_MAX 32U

/* A sandbox the session made: removed at its end unless kept. */
typedef struct McpSessionSandbox {
        char *id;
        bool keep;
        struct McpSessionSandbox *next;
} McpSessionSandbox;

struct McpCall {
        McpServer *server;
        const McpTool *tool;
        cJSON *id;              /* the request's id (a copy) */
        cJSON *progress_token;  /* params._meta.progressToken (a copy), or NULL */
        cJSON *args;            /* arguments (a copy; an empty object when absent) */
        void *context;
        volatile sig_atomic_t cancelled;
        double last_progress;
        bool progress_sent;
        SpaceHttp *http;
        SpaceHttp *http_uncancelled;
        pthread_t thread;
        McpCall *next;
};

struct McpServer {
        McpServerOptions opts;
        char *template;         /* opts.template, owned */
        char *name;             /* opts.name, owned */
        char session_id[33];
        const char *protocol_version; /* one of mcp_protocol_versions[] */

        pthread_mutex_t lock;   /* calls, n_calls, protocol_version, closing */
        pthread_cond_t calls_changed;
        McpCall *calls;
        unsigned n_calls;
        bool closing;

        pthread_mutex_t send_lock; /* one message at a time through opts.send */

        /* The session's sandboxes (lib/mcp-session.c). sandbox_lock is held while the session sandbox is
         * made, so that two calls at once make one; sandboxes_lock guards the list. */
        pthread_mutex_t sandbox_lock;
        pthread_mutex_t sandboxes_lock;
        char *session_sandbox;
        McpSessionSandbox *sandboxes;
};

/* Sends one JSON-RPC message (taken) to the transport. */
void mcp_send(McpServer *s, cJSON *message, void *context);
/* A connection to the API for a thread (opts.connect, or the environment's daemon). */
int mcp_connect(McpServer *s, SpaceHttp **ret);
/* Removes the sandboxes the session made and did not keep (the session's end). */
void mcp_session_cleanup(McpServer *s);
/* Frees the list and the ids. */
void mcp_session_free(McpServer *s);
