/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Between the files of spaced/mcp/: sessions (mcp-http-session.c) and what one POST gets back
 * (mcp-http-post.c); the routes are mcp-http.c. Everything here lives on the loop thread; the engine's
 * threads reach a McpPost only through completions (mcp_post_send(), mcp_post_done()). */

#include <stdbool.h>
#include <stdint.h>

#include "core/manager.h"
#include "http/auth.h"
#include "http/http.h"
#include "http/router.h"
#include "json-util.h"
#include "mcp.h"
#include "proto.h"

extern const Route mcp_routes[];

#define MCP_SESSIONS_MAX 64
#define MCP_SESSION_ID_LEN 32
#define MCP_SESSION_IDLE_USEC (3600ULL * 1000000ULL)
/* Bytes of events a POST holds for a client that reads slowly: beyond, notifications are dropped (never the
 * response). */
#define MCP_POST_QUEUE_MAX (4U * 1024U * 1024U)

typedef struct McpSession McpSession;
typedef struct McpPost McpPost;

struct McpSession {
        McpSession *next;               /* in the table while live */
        Manager *manager;
        McpServer *server;              /* NULL once freed */
        char id[MCP_SESSION_ID_LEN + 1];
        bool tcp;                       /* made over TCP or TLS: owned by key_id; else by the unix socket's user */
        char key_id[API_KEY_ID_LEN + 1];
        unsigned ref;                   /* the table's (then the end's), and one per McpPost */
        unsigned calls;                 /* posts whose done has not come */
        uint64_t last_active;           /* monotonic usec: the last POST, or the last answer */
        uint64_t next_event_id;
        bool ending;
        McpPost *posts;                 /* those posts, finished by force once the server is freed */
};

struct McpPost {
        McpPost *next, *prev;           /* in session->posts until done */
        McpSession *session;            /* a reference */
        Request *request;               /* NULL once the request ended */
        unsigned ref;                   /* the request's, the response body's, the engine's (until done) */
        char *request_id;               /* the request's id as JSON text; NULL for anything but a request */
        bool answered;                  /* the answer's form is decided (after mcp_server_receive()) */
        bool sse;                       /* then: an event stream, else the response alone (JSON) */
        bool done;
        bool got_result, got_error;     /* what the response was */
        char *response;                 /* the response as sent inside mcp_server_receive(), for JSON */
        SpaceBuf out;                   /* bytes not read yet (from out_off) */
        size_t out_off;
        unsigned dropped;               /* notifications dropped, the queue being full */
};

/* ---- sessions (mcp-http-session.c) ---- */
McpSession *mcp_session_find(const char *id);
unsigned mcp_sessions_count(void);
bool mcp_sessions_closed(void);         /* shutting down: no new session */
/* A session owned by r's authentication, with its engine; logs and returns -errno. */
int mcp_session_new(Manager *m, Request *r, McpSession **ret);
bool mcp_session_owned_by(McpSession *s, Request *r);
McpSession *mcp_session_ref(McpSession *s);
void mcp_session_unref(McpSession *s);
/* Takes s out of the table and frees its engine on a worker; ended(userdata) then runs on the loop (may be
 * NULL). -errno when no worker could start (s stays as it was). */
int mcp_session_end(McpSession *s, const char *why, void (*ended)(void *userdata), void *userdata);

/* ---- one POST's answer (mcp-http-post.c) ---- */
McpPost *mcp_post_new(McpSession *s, Request *r);
void mcp_post_unref(McpPost *p);
/* The engine's callbacks (opts.send, opts.done), context being a McpPost. */
void mcp_post_send(const cJSON *message, void *context, void *userdata);
void mcp_post_done(void *context, void *userdata);
/* The engine's done, on the loop: also used when a session ends with posts it never finished. */
void mcp_post_finish(McpPost *p);
/* Answers r from p's queue as an event stream (sse) or as the response alone; session_id (may be NULL) goes
 * in Mcp-Session-Id. */
int mcp_post_respond_stream(McpPost *p, bool sse, const char *session_id);
/* Remembers the thread that runs the loop: what the engine sends from it (inside mcp_server_receive()) is
 * taken at once. */
void mcp_post_setup(void);

/* ---- answers (mcp-http.c) ---- */
/* Answers with body (taken, may be NULL for none) and its type; session_id and allow (may be NULL) add
 * Mcp-Session-Id and Allow. */
int mcp_respond(Request *r, unsigned status, const char *type, char *body, size_t n, const char *session_id,
                const char *allow);
/* A JSON-RPC error object (id null) with status. */
int mcp_respond_error(Request *r, unsigned status, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
