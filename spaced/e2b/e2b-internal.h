/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the facade's files share: finding the sandbox and user an envd request is for, paths, and Connect RPC
 * framing (JSON codec only; see space-e2b(7) for the wire format as the SDKs use it). */

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/api.h"
#include "sandbox/sandbox.h"

/* The envd version we report: the SDKs gate features on it (recursive watch 0.1.4, stdin 0.3.0, the default
 * user 0.4.0, closeStdin 0.5.2, octet-stream uploads 0.5.7, file metadata 0.6.2, watch events with their entry
 * 0.6.3, watches of network mounts 0.6.4), and with 0.6.4 they use all of those, each of which we serve. */
#define E2B_ENVD_VERSION "0.6.4"
#define E2B_ENVD_PORT 49983
#define E2B_CLIENT_ID "space"
/* Connect envelopes: 1 byte of flags, 4 of big-endian length, then the message. */
#define CONNECT_ENVELOPE_HEADER 5
#define CONNECT_FLAG_COMPRESSED 0x01
#define CONNECT_FLAG_END_STREAM 0x02
#define CONNECT_MESSAGE_MAX (1024 * 1024)
#define E2B_USER_MAX 64

/* A control-plane route: an API key, E2B's error shape. */
#define E2B_ROUTE(method, pattern, handler) { method, pattern, handler, .errors = ERROR_STYLE_E2B }
/* An envd call, POST /SERVICE/METHOD: the sandbox's token instead of a key; Connect's errors, or on a server
 * stream an end-of-stream envelope (more fields, such as .begin, may follow the handler). */
#define ENVD_RPC(service, method, handler, ...)                                                              \
        { "POST", "/" service "/" method, handler, .auth = ROUTE_AUTH_TOKEN, .token_ok = e2b_envd_token_ok,   \
          .ready = e2b_envd_ready, .errors = ERROR_STYLE_CONNECT, __VA_ARGS__ }
#define ENVD_STREAM(service, method, handler)                                                                \
        { "POST", "/" service "/" method, handler, .auth = ROUTE_AUTH_TOKEN, .token_ok = e2b_envd_token_ok,   \
          .ready = e2b_envd_ready, .errors = ERROR_STYLE_CONNECT_STREAM }

/* Whether an envd call without an API key carries the token of the sandbox it names (or of some sandbox,
 * when it names none): the lookup of e2b_envd_sandbox() alone, before the body is read. Answers as it would
 * when not. */
bool e2b_envd_token_ok(Request *r);
/* Every envd route's ready (router.h): a suspended sandbox with auto_resume that the request names and opens
 * is woken before the request's body is read, and its begin (or, after the body, its handler) runs once it is
 * up; a wake that fails is the answer. Anything else is left to the handler (e2b_envd_sandbox()). */
void e2b_envd_ready(Request *r, const RouteArgs *a);

/* Each file of the facade has its table (ends with an entry whose method is NULL). */
extern const Route e2b_sandbox_routes[];     /* e2b-sandboxes.c: the control plane */
extern const Route e2b_template_routes[];    /* e2b-templates.c: template lookups */
extern const Route envd_process_routes[];    /* envd-process.c: process.Process */
extern const Route envd_filesystem_routes[]; /* envd-filesystem.c: filesystem.Filesystem, /files */
extern const Route envd_meta_routes[];       /* e2b.c: /health */
extern const Route e2b_volume_content_routes[]; /* e2b-volume-content.c: /volumecontent, a volume's token */

/* The sandbox's envd access token and its traffic token (its ports', proxy/proxy.c), made (and saved) now for a
 * sandbox that has none yet (a fork, one from before the facade): for answers that give them out. */
const char *e2b_sandbox_token(Sandbox *s);
const char *e2b_sandbox_traffic_token(Sandbox *s);

/* The sandbox an envd request is for: named by E2b-Sandbox-Id, else found by X-Access-Token. The token must
 * match unless the request carries an API key (or came over the unix socket). A sandbox that is not running
 * answers 502 (the SDKs' "sandbox not running"); a suspended one with auto_resume was woken before the handler
 * ran (e2b_envd_ready()). Returns 1 with *ret, < 0 when answered. */
int e2b_envd_sandbox(Request *r, Sandbox **ret);

/* The user an envd request runs as: ?username=, else (when basic_auth: not for a signed URL, whose user is
 * the signed query's alone) Authorization: Basic base64("NAME:"), else the template's default user (E2B's
 * "user"), else root. Checked against lib/user.h's rules; copied to buf (E2B_USER_MAX + 1). Returns 0, or < 0
 * when answered (400/401). */
int e2b_envd_user(Request *r, Sandbox *s, bool basic_auth, char *buf);
/* path made absolute: a relative one (or empty) counts from the user's home as E2B's images have it (/root
 * for root, else /home/NAME). */
int e2b_resolve_path(const char *path, const char *user, char **ret);


/* ---- Connect RPC (JSON) */

/* The request message: a unary call's body is the JSON; a server-streaming call's body is one envelope
 * holding it. Responds 400 (invalid_argument) itself and returns NULL when it is neither. */
cJSON *connect_request_message(Request *r, bool streaming);
/* A unary call's answer: 200, application/json, the message (taken). */
int connect_respond(Request *r, cJSON *message);
/* Appends one envelope (flags, then the JSON text of message or the given text) to buf. */
int connect_envelope_append(SpaceBuf *buf, uint8_t flags, const char *json, size_t n);
int connect_envelope_append_json(SpaceBuf *buf, uint8_t flags, const cJSON *message);
/* The end-of-stream envelope: {} on success (CONNECT_OK), else {"error": {"code", "message"}}. */
int connect_end_stream_append(SpaceBuf *buf, ConnectCode code, const char *message);
/* Headers of a streaming answer (application/connect+json, no caching) for http_respond_stream(). */
extern const char *const connect_stream_headers[];
/* connect-timeout-ms of the request: 0 when absent; < 0 (answered) when malformed. */
int connect_timeout_ms(Request *r, uint64_t *ret);
/* Keepalive-Ping-Interval in seconds (the SDKs send 50); 0 when absent. */
unsigned connect_keepalive_sec(Request *r);
