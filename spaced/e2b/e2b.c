/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base64.h"
#include "core/log.h"
#include "core/util.h"
#include "e2b/e2b-internal.h"
#include "e2b/e2b-parse.h"
#include "e2b/e2b.h"
#include "macro.h"
#include "string-util.h"
#include "template/template.h"
#include "user.h"

/* What the facade's files share: which sandbox and user an envd request is for, and Connect framing. */

static void get_health(Request *r, const RouteArgs *a);

const Route envd_meta_routes[] = {
        /* the SDKs' isRunning(): 204 while the sandbox runs, 502 when it does not */
        { "GET", "/health", get_health, .auth = ROUTE_AUTH_TOKEN, .ready = e2b_envd_ready,
          .errors = ERROR_STYLE_E2B },
        {},
};

int e2b_add_routes(void) {
        const Route *tables[] = { e2b_sandbox_routes, e2b_template_routes, envd_process_routes,
                                  envd_filesystem_routes, envd_meta_routes, e2b_volume_content_routes };
        int r;

        for (size_t i = 0; i < ELEMENTSOF(tables); i++) {
                r = http_add_routes(tables[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Every sandbox has both from its create (or, a row of an older daemon, from the start: sandbox_ensure_tokens),
 * so that giving one out or looking one up writes nothing. */
const char *e2b_sandbox_token(Sandbox *s) {
        return s->access_token;
}

const char *e2b_sandbox_traffic_token(Sandbox *s) {
        return s->traffic_token;
}

static bool token_matches(Sandbox *s, const char *token) {
        const char *want = s->access_token;

        return want && token && strlen(token) == SANDBOX_TOKEN_LEN &&
               memeq_const_time(want, token, SANDBOX_TOKEN_LEN);
}

/* Every sandbox's token is compared, whatever matches, so that the time taken says nothing about which
 * tokens exist. */
static Sandbox *sandbox_by_token(Manager *m, const char *token) {
        Sandbox *found = NULL;

        if (!token || strlen(token) != SANDBOX_TOKEN_LEN)
                return NULL;
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (!s->pooled && token_matches(s, token) && !found)
                        found = s;
        return found;
}

/* The sandbox an envd request names (E2b-Sandbox-Id, else its Host) and whose token it carries (or that an API
 * key opens), or the one whose token it carries when it names none; NULL without one. Looks, nothing more. */
static Sandbox *envd_find(Request *r, const char **ret_id) {
        Manager *m = http_manager(r->http);
        const char *id = http_header(r, "E2b-Sandbox-Id"), *token = http_header(r, "X-Access-Token");
        Sandbox *s;

        /* without the header, a Host of the form 49983-ID.DOMAIN names it (E2B's own routing) */
        if ((!id || !*id) && r->host_sandbox[0])
                id = r->host_sandbox;
        *ret_id = id;
        if (!id || !*id)
                return r->authenticated && !token ? NULL : sandbox_by_token(m, token);
        s = sandbox_find_by_id(m, id);
        if (s && s->pooled)
                s = NULL;
        /* the same answer for a sandbox that does not exist and one whose token is wrong */
        if (s && !r->authenticated && !token_matches(s, token))
                s = NULL;
        return s;
}

/* envd_find(), answering when there is none: 1 with *ret, < 0 when answered. */
static int envd_lookup(Request *r, Sandbox **ret) {
        const char *token = http_header(r, "X-Access-Token"), *id;
        Sandbox *s = envd_find(r, &id);

        if (!s && (!id || !*id) && r->authenticated && !token)
                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                          "say which sandbox: send E2b-Sandbox-Id (or its X-Access-Token)") ?: -EINVAL;
        if (!s) {
                if (!r->authenticated && !token)
                        return http_respond_error(r, ERROR_UNAUTHORIZED,
                                                  "envd requests need the sandbox's X-Access-Token (the "
                                                  "envdAccessToken of the create or connect answer)") ?: -EACCES;
                return http_respond_error(r, ERROR_SANDBOX_UNAVAILABLE,
                                          "sandbox %.64s not found, or the access token is not its own",
                                          id && *id ? id : "(by token)") ?: -ENOENT;
        }
        *ret = s;
        return 1;
}

bool e2b_envd_token_ok(Request *r) {
        Sandbox *s;

        return envd_lookup(r, &s) > 0;
}

/* Woken: what the request was about to do when it parked, from its headers (a streamed body's begin). */
static void envd_woken(Request *r, Sandbox *s, const RouteArgs *a) {
        http_begin(r);
}

void e2b_envd_ready(Request *r, const RouteArgs *a) {
        const char *id;
        Sandbox *s;

        /* a signed URL opens a running sandbox only (envd-files.c), and wakes none */
        if (http_query(r, "signature") && !http_header(r, "X-Access-Token") && !r->authenticated)
                return;
        s = envd_find(r, &id);
        if (s && (s->state == SANDBOX_SUSPENDED || s->state == SANDBOX_WAKING) && s->auto_resume)
                api_when_awake(r, s, a, envd_woken);
}

int e2b_envd_sandbox(Request *r, Sandbox **ret) {
        Sandbox *s = NULL;
        int q;

        q = envd_lookup(r, &s);
        if (q < 0)
                return q;
        if (s->state != SANDBOX_RUNNING)
                return http_respond_error(r, ERROR_SANDBOX_UNAVAILABLE,
                                          "sandbox %s is %s, not running%s", s->id, sandbox_state_to_string(s->state),
                                          s->state == SANDBOX_SUSPENDED || (s->state == SANDBOX_STOPPED && !s->error)
                                                  ? ": connect to it to resume it" : "")
                               ?: -EBUSY;
        /* resumed by use (its time to live suspended it), it gets that time to live again, from now */
        if (s->auto_resume && s->on_expiry == EXPIRY_SUSPEND)
                sandbox_restart_timeout(s);
        sandbox_touch(s);
        *ret = s;
        return 1;
}

int e2b_user_from_basic_auth(const char *v, char *buf) {
        char decoded[3 * E2B_USER_MAX];
        const char *b64;
        size_t n;
        long k;
        char *colon;

        if (strncasecmp(v, "Basic", 5) != 0 || !isblank((unsigned char) v[5]))
                return -EINVAL;
        b64 = v + 5;
        while (isblank((unsigned char) *b64))
                b64++;
        n = strlen(b64);
        if (n == 0 || n > 4 * E2B_USER_MAX)
                return -EINVAL;
        k = base64_decode(b64, n, (uint8_t *) decoded);
        if (k <= 0 || (size_t) k >= sizeof decoded)
                return -EINVAL;
        decoded[k] = 0;
        if (strlen(decoded) != (size_t) k)
                return -EINVAL; /* a NUL inside */
        colon = strchr(decoded, ':');
        if (colon)
                *colon = 0;
        if (strlen(decoded) > E2B_USER_MAX)
                return -EINVAL;
        strcpy(buf, decoded);
        return 0;
}

int e2b_envd_user(Request *r, Sandbox *s, bool basic_auth, char *buf) {
        const char *auth = http_header(r, MHD_HTTP_HEADER_AUTHORIZATION), *q = http_query(r, "username");
        const char *def;

        buf[0] = 0;
        if (q && *q) {
                if (strlen(q) > E2B_USER_MAX)
                        return http_respond_error(r, ERROR_INVALID_ARGUMENT, "username is too long") ?: -EINVAL;
                strcpy(buf, q);
        } else if (basic_auth && auth && strncasecmp(auth, "Basic", 5) == 0) {
                if (e2b_user_from_basic_auth(auth, buf) < 0)
                        return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                                  "Authorization: Basic must carry base64 of \"USER:\"") ?: -EINVAL;
        }
        if (!buf[0]) {
                def = template_default_user(http_manager(r->http), s);
                snprintf(buf, E2B_USER_MAX + 1, "%s", def && *def ? def : "root");
        }
        if (space_user_spec_parse(buf, NULL) < 0 || strchr(buf, ':'))
                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                          "user '%.64s' is not a user name or uid (letters, digits, '.', '_', '-')",
                                          buf) ?: -EINVAL;
        return 0;
}

/* The user's home as E2B's images have it: /root for root, else /home/NAME. */
static int user_home(const char *user, char **ret) {
        char *h;

        if (streq(user, "root") || streq(user, "0"))
                h = strdup("/root");
        else if (asprintf(&h, "/home/%s", user) < 0)
                h = NULL;
        if (!h)
                return -ENOMEM;
        *ret = h;
        return 0;
}

int e2b_resolve_path(const char *path, const char *user, char **ret) {
        _cleanup_free_ char *home = NULL;
        char *p;
        int r;

        if (path && path[0] == '/') {
                p = strdup(path);
                if (!p)
                        return -ENOMEM;
                *ret = p;
                return 0;
        }
        r = user_home(user, &home);
        if (r < 0)
                return r;
        if (!path || !*path || streq(path, "."))
                p = TAKE_PTR(home);
        else if (asprintf(&p, "%s/%s", home, path) < 0)
                return -ENOMEM;
        *ret = p;
        return 0;
}

static void get_health(Request *r, const RouteArgs *a) {
        Sandbox *s;

        /* without a sandbox named (or a token) it is the API's health: it answers */
        if (!http_header(r, "E2b-Sandbox-Id") && !http_header(r, "X-Access-Token") && !r->host_sandbox[0]) {
                http_respond_empty(r, 204);
                return;
        }
        if (e2b_envd_sandbox(r, &s) > 0)
                http_respond_empty(r, 204);
}

/* ---- Connect */

const char *const connect_stream_headers[] = {
        MHD_HTTP_HEADER_CONTENT_TYPE, "application/connect+json",
        MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache",
        NULL,
};

cJSON *connect_request_message(Request *r, bool streaming) {
        const char *data = (const char *) r->body.data;
        size_t n = r->body.len;
        cJSON *o;

        if (streaming) {
                uint32_t len;

                if (n < CONNECT_ENVELOPE_HEADER) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "a streaming call's body is one envelope (flags, length, JSON)");
                        return NULL;
                }
                len = (uint32_t) (uint8_t) data[1] << 24 | (uint32_t) (uint8_t) data[2] << 16 |
                      (uint32_t) (uint8_t) data[3] << 8 | (uint32_t) (uint8_t) data[4];
                if (data[0] != 0 || len != n - CONNECT_ENVELOPE_HEADER) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "the request envelope must be uncompressed (flags 0) and hold the whole "
                                           "body (%u bytes declared, %zu sent)",
                                           len, n - CONNECT_ENVELOPE_HEADER);
                        return NULL;
                }
                data += CONNECT_ENVELOPE_HEADER;
                n -= CONNECT_ENVELOPE_HEADER;
        }
        o = n > 0 ? cJSON_ParseWithLength(data, n) : cJSON_CreateObject();
        if (!cJSON_IsObject(o)) {
                cJSON_Delete(o);
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "the request message must be a JSON object");
                return NULL;
        }
        return o;
}

int connect_respond(Request *r, cJSON *message) {
        return http_respond_json(r, 200, message ?: cJSON_CreateObject());
}

int connect_envelope_append(SpaceBuf *buf, uint8_t flags, const char *json, size_t n) {
        uint8_t h[CONNECT_ENVELOPE_HEADER] = { flags, (uint8_t) (n >> 24), (uint8_t) (n >> 16), (uint8_t) (n >> 8),
                                               (uint8_t) n };

        if (n > CONNECT_MESSAGE_MAX * 16UL)
                return -E2BIG;
        if (space_buf_append(buf, h, sizeof h) < 0 || space_buf_append(buf, json, n) < 0)
                return -ENOMEM;
        return 0;
}

int connect_envelope_append_json(SpaceBuf *buf, uint8_t flags, const cJSON *message) {
        _cleanup_free_ char *text = cJSON_PrintUnformatted(message);

        if (!text)
                return -ENOMEM;
        return connect_envelope_append(buf, flags, text, strlen(text));
}

int connect_end_stream_append(SpaceBuf *buf, ConnectCode code, const char *message) {
        cJSON *o = cJSON_CreateObject(), *e;
        int r;

        if (!o)
                return -ENOMEM;
        if (code != CONNECT_OK) {
                e = cJSON_AddObjectToObject(o, "error");
                cJSON_AddStringToObject(e, "code", connect_code_to_string(code));
                cJSON_AddStringToObject(e, "message", message ?: connect_code_to_string(code));
        }
        r = connect_envelope_append_json(buf, CONNECT_FLAG_END_STREAM, o);
        cJSON_Delete(o);
        return r;
}

int connect_timeout_parse(const char *v, uint64_t *ret) {
        unsigned long long n;
        char *end;

        *ret = 0;
        if (!v)
                return 0;
        errno = 0;
        n = strtoull(v, &end, 10);
        /* the Connect spec: at most 10 digits; strtoull() would also take blanks and a sign, and " -1" as
         * ULLONG_MAX */
        if (errno || end == v || *end || !isdigit((unsigned char) v[0]) || strlen(v) > 10)
                return -EINVAL;
        *ret = n;
        return 0;
}

int connect_timeout_ms(Request *r, uint64_t *ret) {
        const char *v = http_header(r, "Connect-Timeout-Ms");

        if (connect_timeout_parse(v, ret) < 0)
                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                          "connect-timeout-ms must be a number of milliseconds, not '%.32s'", v)
                               ?: -EINVAL;
        return 0;
}

unsigned connect_keepalive_parse(const char *v) {
        unsigned long n;
        char *end;

        if (!v)
                return 0;
        errno = 0;
        n = strtoul(v, &end, 10);
        if (errno || end == v || *end || n > 3600)
                return 0;
        return (unsigned) n;
}

unsigned connect_keepalive_sec(Request *r) {
        return connect_keepalive_parse(http_header(r, "Keepalive-Ping-Interval"));
}

int connect_envelope_read(ConnectEnvelopeReader *er, const uint8_t *data, size_t n, size_t *ret_used,
                          ErrorCode *ret_code, const char **ret_message) {
        size_t used = 0, take;

        *ret_code = ERROR_NONE;
        *ret_message = NULL;
        while (er->head_len < CONNECT_ENVELOPE_HEADER) {
                if (used == n) {
                        *ret_used = used;
                        return 0;
                }
                er->head[er->head_len++] = data[used++];
                if (er->head_len < CONNECT_ENVELOPE_HEADER)
                        continue;
                er->msg_len = (uint32_t) er->head[1] << 24 | (uint32_t) er->head[2] << 16 |
                              (uint32_t) er->head[3] << 8 | er->head[4];
                *ret_used = used;
                if (er->head[0] != 0) {
                        *ret_code = ERROR_INVALID_ARGUMENT;
                        *ret_message = "envelopes must be uncompressed messages (flags 0)";
                        return -EINVAL;
                }
                if (er->msg_len > HTTP_BODY_MAX) {
                        *ret_code = ERROR_RESOURCE_EXHAUSTED;
                        *ret_message = "a message is over 1 MiB";
                        return -E2BIG;
                }
                er->msg.len = 0;
        }
        take = n - used;
        if (take > (size_t) er->msg_len - er->msg.len)
                take = (size_t) er->msg_len - er->msg.len;
        if (take > 0 && space_buf_append(&er->msg, data + used, take) < 0) {
                *ret_used = used;
                *ret_code = ERROR_RESOURCE_EXHAUSTED;
                *ret_message = "out of memory";
                return -ENOMEM;
        }
        used += take;
        *ret_used = used;
        if (er->msg.len < er->msg_len)
                return 0;
        er->head_len = 0; /* the next byte begins the next envelope */
        return 1;
}

bool connect_envelope_reader_inside(const ConnectEnvelopeReader *er) {
        return er->head_len > 0 || er->msg.len < er->msg_len;
}

void connect_envelope_reader_done(ConnectEnvelopeReader *er) {
        space_buf_done(&er->msg);
        *er = (ConnectEnvelopeReader) {};
}
