/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf */
#endif

/*
 * The run family of MCP tools: exec (lib/mcp-tools-exec.c), run_code (lib/mcp-tools-code.c), and here port_url
 * (a forward to a guest port), egress_status (the sandbox's egress policy and its recent refusals) and the
 * family's table.
 *
 * What the guest sends is hostile (the egress log's host names come from its DNS questions): every value shown
 * is checked for its type, bounded and made valid UTF-8 first.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "mcp-tools-internal.h"

#define EGRESS_PAGE 1000                        /* the daemon's most per request */
#define EGRESS_PAGES_MAX 64                     /* its log is two files of 1 MiB: far fewer pages */
#define EGRESS_LIMIT_DEFAULT 20
#define EGRESS_LIMIT_MAX 200
#define EGRESS_FIELD_MAX 512                    /* bytes of one field shown (host names come from the guest) */

/* Adds a cleaned copy of s to o as key (null for NULL). */
static int json_add_clean(cJSON *o, const char *key, const char *s, size_t max) {
        _cleanup_free_ char *c = NULL;

        if (!s)
                return cJSON_AddNullToObject(o, key) ? 0 : -ENOMEM;
        c = mcp_string_clean(s, max);
        if (!c || !cJSON_AddStringToObject(o, key, c))
                return -ENOMEM;
        return 0;
}

/* ---- port_url ---- */

/* An existing forward of guest_port that lasts (not held by some client's stream), NULL if none. */
static const cJSON *port_find(const cJSON *reply, int64_t guest_port) {
        const cJSON *f;

        cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(reply, "forwards")) {
                int64_t g, h;

                if (mcp_json_integer(f, "guest_port", 1, 65535, &g) && g == guest_port &&
                    mcp_json_integer(f, "host_port", 1, 65535, &h) &&
                    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "held")))
                        return f;
        }
        return NULL;
}

static int port_result(const char *id, const cJSON *fwd, int64_t guest_port, bool reused, cJSON **ret_result) {
        _cleanup_cjson_ cJSON *o = cJSON_CreateObject();
        _cleanup_free_ char *url = NULL, *text = NULL;
        const cJSON *fid;
        int64_t host_port;

        if (!mcp_json_integer(fwd, "host_port", 1, 65535, &host_port)) {
                *ret_result = mcp_result_errorf("port_url: spaced answered without a valid host_port; try again");
                return *ret_result ? 0 : -ENOMEM;
        }
        if (!o || asprintf(&url, "http://127.0.0.1:%" PRId64, host_port) < 0 ||
            !cJSON_AddStringToObject(o, "url", url) || !cJSON_AddNumberToObject(o, "host_port", (double) host_port) ||
            !cJSON_AddNumberToObject(o, "guest_port", (double) guest_port) ||
            json_add_clean(o, "forward_id", mcp_json_string(fwd, "id"), 64) < 0 ||
            !cJSON_AddBoolToObject(o, "reused", reused))
                return -ENOMEM;
        fid = cJSON_GetObjectItemCaseSensitive(o, "forward_id");
        if (asprintf(&text, "%s reaches port %" PRId64 " in sandbox %s (%s forward%s%s). It listens on this host's "
                     "loopback and serves this user only; it answers once something in the sandbox listens on port "
                     "%" PRId64 ".", url, guest_port, id, reused ? "an existing" : "a new",
                     cJSON_IsString(fid) ? " " : "", cJSON_IsString(fid) ? fid->valuestring : "", guest_port) < 0)
                return -ENOMEM;
        *ret_result = mcp_result_text(text, TAKE_PTR(o));
        return *ret_result ? 0 : -ENOMEM;
}

static int tool_port_url(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_free_ char *id = NULL, *path = NULL;
        _cleanup_cjson_ cJSON *body = NULL;
        SpaceHttpReply reply = {};
        const cJSON *fwd;
        int64_t port;
        int r;

        if ((r = mcp_arg_int(args, "port", 1, 65535, 0, &port, ret_result)) != 0 ||
            (r = mcp_call_sandbox(call, args, &id, ret_result)) != 0)
                return r < 0 ? r : 0;
        if (port == 0) {
                *ret_result = mcp_result_errorf("port_url: port is required: the guest port a server listens on "
                                                "(1..65535), e.g. port=8000");
                return *ret_result ? 0 : -ENOMEM;
        }
        if (mcp_sandbox_path(id, "/ports", &path) < 0)
                return -ENOMEM;

        r = mcp_api_request(call, "GET", path, NULL, "port_url: listing the sandbox's forwards", &reply, ret_result);
        if (r != 0)
                return r < 0 ? r : 0;
        fwd = port_find(reply.json, port);
        if (fwd) {
                r = port_result(id, fwd, port, true, ret_result);
                space_http_reply_done(&reply);
                return r;
        }
        space_http_reply_done(&reply);

        body = cJSON_CreateObject();
        if (!body || !cJSON_AddNumberToObject(body, "guest_port", (double) port))
                return -ENOMEM;
        r = mcp_api_request(call, "POST", path, body, "port_url: making a forward", &reply, ret_result);
        if (r != 0)
                return r < 0 ? r : 0;
        r = port_result(id, reply.json, port, false, ret_result);
        space_http_reply_done(&reply);
        return r;
}

/* ---- egress_status ---- */

/* A refusal: a connection denied, or a DNS question that was not answered for policy (nxdomain is a name
 * that does not exist: broken, not blocked). */
static bool egress_entry_denied(const cJSON *e) {
        const char *event = mcp_json_string(e, "event"), *reason = mcp_json_string(e, "reason");

        if (!event)
                return false;
        if (streq(event, "deny"))
                return true;
        return streq(event, "dns") && reason && !streq(reason, "allowed") && !streq(reason, "nxdomain");
}

static cJSON *egress_entry_compact(const cJSON *e) {
        static const char *const keys[] = { "time", "via", "host", "address", "reason", "rule", "message" };
        _cleanup_cjson_ cJSON *o = cJSON_CreateObject();
        int64_t port;

        if (!o)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if (json_add_clean(o, keys[i], mcp_json_string(e, keys[i]), EGRESS_FIELD_MAX) < 0)
                        return NULL;
        if (!(mcp_json_integer(e, "port", 0, 65535, &port) ? cJSON_AddNumberToObject(o, "port", (double) port)
                                                         : cJSON_AddNullToObject(o, "port")))
                return NULL;
        return TAKE_PTR(o);
}

typedef struct EgressScan {
        cJSON *denied;                          /* the newest `limit`, oldest first */
        uint64_t n_denied, n_entries, after;
        bool cut;                               /* stopped before the log's end */
} EgressScan;

/* One page of the log after s->after; 1 when it was the last. */
static int egress_scan_page(McpCall *call, const char *base, int64_t limit, EgressScan *s, cJSON **ret_error) {
        _cleanup_free_ char *path = NULL;
        SpaceHttpReply reply = {};
        const cJSON *list, *e;
        uint64_t before = s->after;
        int r, n = 0;

        if (asprintf(&path, "%s?after=%" PRIu64 "&limit=%d", base, s->after, EGRESS_PAGE) < 0)
                return -ENOMEM;
        r = mcp_api_request(call, "GET", path, NULL, "egress_status: reading the egress log", &reply, ret_error);
        if (r != 0)
                return r < 0 ? r : 2;
        list = cJSON_GetObjectItemCaseSensitive(reply.json, "entries");
        if (!cJSON_IsArray(list))
                list = NULL;
        cJSON_ArrayForEach(e, list) {
                int64_t seq;

                n++;
                if (!cJSON_IsObject(e) || !mcp_json_integer(e, "seq", 0, INT64_MAX / 2, &seq))
                        continue;
                if ((uint64_t) seq > s->after)
                        s->after = (uint64_t) seq;
                s->n_entries++;
                if (!egress_entry_denied(e))
                        continue;
                s->n_denied++;
                if (!cJSON_AddItemToArray(s->denied, egress_entry_compact(e))) {
                        space_http_reply_done(&reply);
                        return -ENOMEM;
                }
                if (cJSON_GetArraySize(s->denied) > limit)
                        cJSON_DeleteItemFromArray(s->denied, 0);
        }
        space_http_reply_done(&reply);
        /* a short page is the end; a page that does not move on would loop */
        return n < EGRESS_PAGE || s->after == before ? 1 : 0;
}

static int egress_lists_text(const cJSON *sb, cJSON *o, McpText *t) {
        static const char *const keys[] = { "egress_profiles", "egress_allow", "egress_deny" };
        static const char *const names[] = { "profiles", "own allow list", "own deny list" };
        int r;

        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                const cJSON *l = cJSON_GetObjectItemCaseSensitive(sb, keys[i]), *v;
                cJSON *a = cJSON_AddArrayToObject(o, keys[i]);
                int n = 0;

                if (!cJSON_IsArray(l))
                        l = NULL; /* a list that is not one shows as none */
                if (!a || (r = mcp_text_printf(t, "%s: ", names[i])) < 0)
                        return -ENOMEM;
                cJSON_ArrayForEach(v, l) {
                        _cleanup_free_ char *c = cJSON_IsString(v) ? mcp_string_clean(v->valuestring, 256) : NULL;

                        if (!cJSON_IsString(v))
                                continue;
                        if (!c || !cJSON_AddItemToArray(a, cJSON_CreateString(c)) ||
                            mcp_text_printf(t, "%s%s", n++ ? ", " : "", c) < 0)
                                return -ENOMEM;
                }
                r = mcp_text_puts(t, n ? "\n" : i == 0 ? "none (the base policy only)\n" : "none\n");
                if (r < 0)
                        return r;
        }
        return 0;
}

static int egress_denied_text(const EgressScan *s, McpText *t) {
        const cJSON *e;
        int r;

        if (s->n_denied == 0)
                return mcp_text_printf(t, "no refusals in the egress log (%" PRIu64 " entries)%s: a failing request "
                                       "was not blocked by the egress policy\n", s->n_entries,
                                       s->cut ? ", read up to a limit" : "");
        r = mcp_text_printf(t, "%" PRIu64 " refusals in the egress log; the last %d, oldest first:\n", s->n_denied,
                            cJSON_GetArraySize(s->denied));
        cJSON_ArrayForEach(e, s->denied) {
                const cJSON *port = cJSON_GetObjectItemCaseSensitive(e, "port");
                const char *host = mcp_json_string(e, "host"), *addr = mcp_json_string(e, "address");
                const char *rule = mcp_json_string(e, "rule"), *msg = mcp_json_string(e, "message");

                if (r >= 0)
                        r = mcp_text_printf(t, "  %s %s %s%s%s%s", mcp_json_string(e, "time") ?: "?",
                                            mcp_json_string(e, "via") ?: "?", host ?: addr ?: "?",
                                            host && addr ? " (" : "", host && addr ? addr : "",
                                            host && addr ? ")" : "");
                if (r >= 0 && cJSON_IsNumber(port) && port->valuedouble > 0)
                        r = mcp_text_printf(t, " port %.0f", port->valuedouble);
                if (r >= 0)
                        r = mcp_text_printf(t, ": %s%s%s%s%s%s\n", mcp_json_string(e, "reason") ?: "?", msg ? " (" : "",
                                            msg ?: "", msg ? ")" : "", rule ? " rule " : "", rule ?: "");
        }
        if (r >= 0)
                r = mcp_text_puts(t, "A refused destination needs an egress profile that allows it: make a sandbox "
                                  "with sandbox_create egress=[PROFILE] (the daemon's operator defines profiles)\n");
        return r;
}

static int tool_egress_status(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_free_ char *id = NULL, *path = NULL, *log_path = NULL;
        _cleanup_cjson_ cJSON *o = cJSON_CreateObject();
        _cleanup_(mcp_text_done) McpText t = {};
        EgressScan s = {};
        SpaceHttpReply reply = {};
        int64_t limit;
        int r;

        if ((r = mcp_arg_int(args, "limit", 1, EGRESS_LIMIT_MAX, EGRESS_LIMIT_DEFAULT, &limit, ret_result)) != 0 ||
            (r = mcp_call_sandbox(call, args, &id, ret_result)) != 0)
                return r < 0 ? r : 0;
        if (!o || mcp_sandbox_path(id, "", &path) < 0 || mcp_sandbox_path(id, "/egress/log", &log_path) < 0 ||
            !cJSON_AddStringToObject(o, "sandbox_id", id) || mcp_text_printf(&t, "sandbox %s egress policy\n", id) < 0)
                return -ENOMEM;

        r = mcp_api_request(call, "GET", path, NULL, "egress_status: reading the sandbox", &reply, ret_result);
        if (r != 0)
                return r < 0 ? r : 0;
        r = egress_lists_text(reply.json, o, &t);
        space_http_reply_done(&reply);
        if (r < 0)
                return r;

        s.denied = cJSON_AddArrayToObject(o, "denied");
        if (!s.denied)
                return -ENOMEM;
        for (int page = 0;; page++) {
                if (page == EGRESS_PAGES_MAX) {
                        s.cut = true;
                        break;
                }
                r = egress_scan_page(call, log_path, limit, &s, ret_result);
                if (r < 0)
                        return r;
                if (r == 2)
                        return 0;
                if (r == 1)
                        break;
        }
        if (egress_denied_text(&s, &t) < 0 || !cJSON_AddNumberToObject(o, "denied_total", (double) s.n_denied) ||
            !cJSON_AddNumberToObject(o, "log_entries", (double) s.n_entries))
                return -ENOMEM;
        *ret_result = mcp_result_text(mcp_text_str(&t), TAKE_PTR(o));
        return *ret_result ? 0 : -ENOMEM;
}

/* ---- the table ---- */

#define SANDBOX_ID_PROPERTY                                                                                        \
        "\"sandbox_id\": {\"type\": \"string\", \"description\": \"The sandbox: an id, a unique id prefix or a "  \
        "name. Default: this session's sandbox (made on first use).\"}"

const McpTool mcp_tools_run[] = {
        {
                .name = "exec",
                .description = "Run a command in a sandbox and wait for it: its exit code, stdout and stderr (64 KiB "
                               "of each kept: head and tail). Output streams as progress while it runs. A non-zero "
                               "exit is a normal result.",
                .input_schema =
                        "{\"type\": \"object\", \"properties\": {"
                        "\"command\": {\"type\": \"string\", \"description\": \"A shell command line, run with "
                        "/bin/sh -c (pipes, redirections, && work). Give this or argv.\"},"
                        "\"argv\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"minItems\": 1, "
                        "\"description\": \"The program and its arguments, run without a shell. Give this or "
                        "command.\"},"
                        "\"cwd\": {\"type\": \"string\", \"description\": \"Absolute working directory. Default: the "
                        "template's workdir, else the user's home.\"},"
                        "\"env\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, "
                        "\"description\": \"Environment variables to set, {NAME: value}.\"},"
                        "\"timeout\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 3600, \"description\": "
                        "\"Seconds before the command is killed (default 60).\"},"
                        "\"stdin\": {\"type\": \"string\", \"description\": \"Text given to the command on its "
                        "standard input (then end of file). Default: no input.\"},"
                        "\"user\": {\"type\": \"string\", \"description\": \"USER[:GROUP] to run as, names or "
                        "numbers. Default: the template's user, else root.\"},"
                        SANDBOX_ID_PROPERTY
                        "}, \"additionalProperties\": false}",
                .run = mcp_tool_exec,
                .read_only = false,
                .destructive = false,
        },
        {
                .name = "run_code",
                .description = "Run code in the sandbox's code interpreter (a Jupyter kernel that keeps its state "
                               "between calls): stdout, stderr, results (charts as images) and any error raised. "
                               "Needs a sandbox from the code-interpreter template.",
                .input_schema =
                        "{\"type\": \"object\", \"properties\": {"
                        "\"code\": {\"type\": \"string\", \"description\": \"The code to run.\"},"
                        "\"language\": {\"type\": \"string\", \"description\": \"python (default), javascript, "
                        "typescript, r, java, bash: whatever the interpreter serves. Not with context_id.\"},"
                        "\"context_id\": {\"type\": \"string\", \"description\": \"A context (kernel) made before, "
                        "to run in its state. Default: the language's default context.\"},"
                        "\"timeout\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 3600, \"description\": "
                        "\"Seconds before the execution is interrupted (default 300).\"},"
                        SANDBOX_ID_PROPERTY
                        "}, \"required\": [\"code\"], \"additionalProperties\": false}",
                .run = mcp_tool_run_code,
                .read_only = false,
                .destructive = false,
        },
        {
                .name = "port_url",
                .description = "Give a URL on this host (http://127.0.0.1:P) that reaches a TCP port in the sandbox, "
                               "e.g. a web server started with exec; an existing forward of that port is reused.",
                .input_schema =
                        "{\"type\": \"object\", \"properties\": {"
                        "\"port\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 65535, \"description\": "
                        "\"The port a server listens on inside the sandbox.\"},"
                        SANDBOX_ID_PROPERTY
                        "}, \"required\": [\"port\"], \"additionalProperties\": false}",
                .run = tool_port_url,
                .read_only = false,
                .destructive = false,
        },
        {
                .name = "egress_status",
                .description = "Show what the sandbox may reach on the network (its egress profiles and allow/deny "
                               "lists) and its most recent refused connections with the reason, to tell a blocked "
                               "request from a broken one.",
                .input_schema =
                        "{\"type\": \"object\", \"properties\": {"
                        "\"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 200, \"description\": "
                        "\"How many of the most recent refusals to show (default 20).\"},"
                        SANDBOX_ID_PROPERTY
                        "}, \"additionalProperties\": false}",
                .run = tool_egress_status,
                .read_only = true,
                .destructive = false,
        },
};
const size_t mcp_tools_run_count = ELEMENTSOF(mcp_tools_run);
