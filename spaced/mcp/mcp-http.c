/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "macro.h"
#include "mcp/mcp-http.h"
#include "mcp/mcp-http-internal.h"

/* The routes of /mcp: MCP's streamable HTTP transport. What the HTTP layer checked already (the Host, the API
 * key over TCP, the body's 1 MiB) is not checked again; what MCP adds is: Origin, Accept, MCP-Protocol-Version
 * and Mcp-Session-Id, answered with JSON-RPC error objects as the SDKs read them. */

/* JSON-RPC's codes, and the one the SDKs use for the transport's own refusals. */
#define JSONRPC_PARSE_ERROR (-32700)
#define JSONRPC_INTERNAL_ERROR (-32603)
#define MCP_TRANSPORT_ERROR (-32000)

int mcp_respond(Request *r, unsigned status, const char *type, char *body, size_t n, const char *session_id,
                const char *allow) {
        struct MHD_Response *resp;
        enum MHD_Result q;

        resp = body ? MHD_create_response_from_buffer(n, body, MHD_RESPMEM_MUST_FREE)
                    : MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        if (!resp) {
                free(body);
                return -ENOMEM;
        }
        if (type)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        if (session_id)
                MHD_add_response_header(resp, "Mcp-Session-Id", session_id);
        if (allow)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
        q = MHD_queue_response(r->connection, status, resp);
        MHD_destroy_response(resp);
        r->responded = true;
        return q == MHD_YES ? 0 : -EIO;
}

/* A JSON-RPC error object (id null) with status, and Allow (may be NULL). */
static int respond_error_allow(Request *r, unsigned status, int code, const char *allow, const char *message) {
        _cleanup_cjson_ cJSON *o = mcp_error_message(NULL, code, message);
        char *text = o ? cJSON_PrintUnformatted(o) : NULL;

        if (!text)
                return -ENOMEM;
        return mcp_respond(r, status, "application/json", text, strlen(text), NULL, allow);
}

int mcp_respond_error(Request *r, unsigned status, int code, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&msg, fmt, ap);
        va_end(ap);
        return respond_error_allow(r, status, code, NULL, k < 0 ? "error" : msg);
}

/* ---- the checks of every request ---- */

/* Whether host[0..n) is name, ASCII case-insensitively. */
static bool name_is(const char *host, size_t n, const char *name, size_t name_len) {
        return n == name_len && strncasecmp(host, name, n) == 0;
}

/* A page a browser shows may send us requests (its DNS name rebound to 127.0.0.1 passes the Host check only
 * when it is ours, but a page on localhost's other ports, or anywhere with a form, sends its own Origin): only
 * loopback names and our own E2B domain (DOMAIN, *.DOMAIN) are let in, any port, http or https. */
static bool origin_allowed(Request *r, const char *origin) {
        const char *host, *domain = http_e2b_domain(r->http), *end;
        size_t n, dn;

        if (strncasecmp(origin, "http://", 7) == 0)
                host = origin + 7;
        else if (strncasecmp(origin, "https://", 8) == 0)
                host = origin + 8;
        else
                return false; /* "null" (a sandboxed page, a file) among them */
        if (host[0] == '[') {
                end = strchr(host, ']');
                if (!end)
                        return false;
                end++;
        } else
                end = host + strcspn(host, ":/");
        n = (size_t) (end - host);
        if (*end == ':') {
                const char *p = end + 1;
                size_t digits = strspn(p, "0123456789");

                if (digits == 0 || digits > 5 || p[digits])
                        return false;
        } else if (*end)
                return false; /* an Origin has no path */
        if (name_is(host, n, "localhost", 9) || name_is(host, n, "127.0.0.1", 9) || name_is(host, n, "[::1]", 5))
                return true;
        if (!domain)
                return false;
        dn = strcspn(domain, ":");
        if (name_is(host, n, domain, dn))
                return true;
        return n > dn + 1 && host[n - dn - 1] == '.' && strncasecmp(host + n - dn, domain, dn) == 0;
}

/* Whether the Accept header lists type (or a wildcard that covers it). */
static bool accepts(const char *accept, const char *type) {
        const char *slash = strchr(type, '/');
        char family[32];

        if (!accept)
                return false;
        (void) snprintf(family, sizeof family, "%.*s/*", (int) (slash - type), type);
        return strcasestr(accept, type) || strcasestr(accept, family) || strstr(accept, "*/*");
}

/* Origin (403), Accept for a POST (406: it must take JSON or events), MCP-Protocol-Version (400). False when
 * it answered. */
static bool headers_ok(Request *r, bool post, bool *ret_json, bool *ret_sse) {
        const char *origin = http_header(r, "Origin"), *accept = http_header(r, MHD_HTTP_HEADER_ACCEPT);
        const char *version = http_header(r, "MCP-Protocol-Version");

        if (origin && !origin_allowed(r, origin)) {
                log_info("refused %s /mcp from Origin %.100s", r->method, origin);
                mcp_respond_error(r, MHD_HTTP_FORBIDDEN, MCP_TRANSPORT_ERROR,
                                  "Forbidden: Origin %.100s may not use this server (only localhost, 127.0.0.1, "
                                  "[::1] and the daemon's E2B domain may)", origin);
                return false;
        }
        if (post) {
                *ret_json = accepts(accept, "application/json");
                *ret_sse = accepts(accept, "text/event-stream");
                if (!*ret_json && !*ret_sse) {
                        mcp_respond_error(r, MHD_HTTP_NOT_ACCEPTABLE, MCP_TRANSPORT_ERROR,
                                          "Not Acceptable: send 'Accept: application/json, text/event-stream'");
                        return false;
                }
        }
        if (version && !mcp_protocol_version_known(version)) {
                mcp_respond_error(r, MHD_HTTP_BAD_REQUEST, MCP_TRANSPORT_ERROR,
                                  "Bad Request: unsupported MCP-Protocol-Version %.40s (this server speaks %s to "
                                  "%s)", version, mcp_protocol_versions[0], mcp_protocol_version_newest());
                return false;
        }
        return true;
}

/* The session r names, its own: 400 without Mcp-Session-Id, 404 for one that is unknown, ended or another's
 * (the same answer, so that ids of others cannot be told from made-up ones). NULL when it answered. */
static McpSession *request_session(Request *r) {
        const char *id = http_header(r, "Mcp-Session-Id");
        McpSession *s;

        if (!id || !*id) {
                mcp_respond_error(r, MHD_HTTP_BAD_REQUEST, MCP_TRANSPORT_ERROR,
                                  "Bad Request: no Mcp-Session-Id header; a session starts with an initialize "
                                  "request, whose answer carries it");
                return NULL;
        }
        s = mcp_session_find(id);
        if (!s || !mcp_session_owned_by(s, r)) {
                mcp_respond_error(r, MHD_HTTP_NOT_FOUND, MCP_TRANSPORT_ERROR,
                                  "Session not found: it ended (deleted, idle for an hour, or the daemon "
                                  "restarted) or was never ours; start a new one with initialize");
                return NULL;
        }
        return s;
}

static bool is_initialize(const cJSON *msg) {
        const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");

        return cJSON_IsObject(msg) && cJSON_IsString(method) && streq(method->valuestring, "initialize") &&
               cJSON_HasObjectItem(msg, "id");
}

/* An initialize without a session makes one, unless there are too many or the daemon is stopping (503). */
static McpSession *session_start(Request *r, const cJSON *msg) {
        McpSession *s;

        if (!msg) {
                mcp_respond_error(r, MHD_HTTP_BAD_REQUEST, JSONRPC_PARSE_ERROR, "Parse error: the body is not JSON");
                return NULL;
        }
        if (!is_initialize(msg)) {
                (void) request_session(r); /* says what is missing */
                return NULL;
        }
        if (mcp_sessions_closed()) {
                mcp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, MCP_TRANSPORT_ERROR,
                                  "Service Unavailable: the daemon is stopping; try again once it is back");
                return NULL;
        }
        if (mcp_sessions_count() >= MCP_SESSIONS_MAX) {
                log_warning("refused a new MCP session: %u are open, the limit", MCP_SESSIONS_MAX);
                mcp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, MCP_TRANSPORT_ERROR,
                                  "Service Unavailable: %u MCP sessions are open, the limit; end one (DELETE "
                                  "/mcp with its Mcp-Session-Id) or wait for an idle one to end (after an hour)",
                                  MCP_SESSIONS_MAX);
                return NULL;
        }
        if (mcp_session_new(http_manager(r->http), r, &s) < 0) {
                mcp_respond_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_INTERNAL_ERROR,
                                  "Internal error: cannot start a session (see the daemon's log)");
                return NULL;
        }
        return s;
}

/* A request gets its response as JSON when the engine gave it at once and the client takes JSON, else as
 * events (progress first), or, for a client that takes only JSON, the response alone once it comes. Anything
 * else is 202, or 400 with the engine's error for a message it could not take. */
static void post_answer(McpPost *p, bool is_request, bool json, bool sse, const char *session_id) {
        Request *r = p->request;
        char *text;
        int q;

        if (is_request && p->done && p->response && json) {
                text = TAKE_PTR(p->response);
                q = mcp_respond(r, MHD_HTTP_OK, "application/json", text, strlen(text), session_id, NULL);
        } else if (is_request) {
                q = mcp_post_respond_stream(p, sse, session_id);
                if (q != -ENOMEM)
                        return; /* the request's reference goes with its detach */
        } else if (p->response) {
                text = TAKE_PTR(p->response);
                q = mcp_respond(r, MHD_HTTP_BAD_REQUEST, "application/json", text, strlen(text), NULL, NULL);
        } else
                q = mcp_respond(r, MHD_HTTP_ACCEPTED, NULL, NULL, 0, NULL, NULL);
        if (q == -ENOMEM && !r->responded)
                (void) mcp_respond_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_INTERNAL_ERROR,
                                         "Internal error: out of memory");
        if (r->stream.userdata != p) {
                /* answered whole: what the engine still sends for it has nowhere to go */
                p->request = NULL;
                mcp_post_unref(p);
        }
}

static char *request_id_text(const cJSON *msg) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");

        if (!cJSON_IsObject(msg) || !cJSON_HasObjectItem(msg, "method") || !id)
                return NULL;
        return cJSON_PrintUnformatted(id);
}

static void post_mcp(Request *r, const RouteArgs *a) {
        _cleanup_cjson_ cJSON *msg = NULL;
        bool json, sse, fresh = false, is_request = false;
        McpSession *s;
        McpPost *p;
        int q;

        if (!headers_ok(r, true, &json, &sse))
                return;
        msg = cJSON_ParseWithLength((const char *) r->body.data, r->body.len);
        if (http_header(r, "Mcp-Session-Id")) {
                s = request_session(r);
        } else {
                s = session_start(r, msg);
                fresh = s;
        }
        if (!s)
                return;
        p = mcp_post_new(s, r);
        if (!p) {
                mcp_respond_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory");
                if (fresh)
                        (void) mcp_session_end(s, "out of memory", NULL, NULL);
                return;
        }
        p->request_id = request_id_text(msg);
        q = mcp_server_receive(s->server, (const char *) r->body.data, r->body.len, p, &is_request);
        if (q < 0) {
                log_error_errno(q, "MCP session %.8s: cannot take a message", s->id);
                mcp_respond_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_INTERNAL_ERROR,
                                  "Internal error: out of memory");
                p->request = NULL;
                mcp_post_unref(p);
                if (fresh)
                        (void) mcp_session_end(s, "out of memory", NULL, NULL);
                return;
        }
        /* input that is no request (not JSON, a batch, no usable id) was answered with an error at once: 400 */
        if (!p->request_id)
                is_request = false;
        /* a session whose initialize failed is not kept: the client starts over */
        if (fresh && p->done && !p->got_result) {
                (void) mcp_session_end(s, "its initialize failed", NULL, NULL);
                fresh = false;
        }
        post_answer(p, is_request, json, sse, fresh ? s->id : NULL);
}


static void get_mcp(Request *r, const RouteArgs *a) {
        if (!headers_ok(r, false, NULL, NULL))
                return;
        /* no server-initiated messages: MCP lets a server refuse the GET stream so */
        (void) respond_error_allow(r, MHD_HTTP_METHOD_NOT_ALLOWED, MCP_TRANSPORT_ERROR, "POST, DELETE",
                                   "Method Not Allowed: this server sends no messages of its own; POST requests "
                                   "to /mcp");
}

/* A DELETE waits for the session's end (its sandboxes removed), which a worker does; its client may leave. */
typedef struct DeleteJob {
        Request *request;       /* NULL once it ended */
        bool ended;
} DeleteJob;

static void delete_ended(void *userdata) {
        DeleteJob *j = userdata;

        j->ended = true;
        if (j->request)
                http_resume(j->request); /* delete_resumed() answers */
        else
                free(j);
}

static void delete_detach(void *userdata, Request *r) {
        DeleteJob *j = userdata;

        j->request = NULL;
        if (j->ended)
                free(j);
}

static void delete_resumed(Request *r, void *userdata) {
        DeleteJob *j = userdata;

        r->stream = (HttpStream) {};
        free(j);
        (void) mcp_respond(r, MHD_HTTP_NO_CONTENT, NULL, NULL, 0, NULL, NULL);
}

static void delete_mcp(Request *r, const RouteArgs *a) {
        DeleteJob *j;
        McpSession *s;

        if (!headers_ok(r, false, NULL, NULL))
                return;
        s = request_session(r);
        if (!s)
                return;
        j = calloc(1, sizeof *j);
        if (!j) {
                mcp_respond_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, JSONRPC_INTERNAL_ERROR, "Internal error: out of memory");
                return;
        }
        j->request = r;
        if (mcp_session_end(s, "deleted by its client", delete_ended, j) < 0) {
                free(j);
                mcp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, MCP_TRANSPORT_ERROR,
                                  "Service Unavailable: cannot end the session now (no worker thread); try again");
                return;
        }
        r->stream = (HttpStream) { .detach = delete_detach, .userdata = j };
        http_continue(r, delete_resumed, j);
}

const Route mcp_routes[] = {
        { "POST", "/mcp", post_mcp },
        { "GET", "/mcp", get_mcp },
        { "DELETE", "/mcp", delete_mcp },
        {},
};
