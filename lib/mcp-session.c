/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sandboxes of an MCP session: the one a tool uses when it names none (made on the first such call from
 * the session's template, labelled with the session's id, and removed at the session's end unless kept), and
 * the ones its tools made (sandbox_create, sandbox_fork), removed with it too.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "mcp-internal.h"
#include "mcp-tools-internal.h"

#define SESSION_REMOVE_WAIT_SEC 60

/* ---- the list ---- */

int mcp_session_add_sandbox(McpServer *s, const char *id, bool keep) {
        McpSessionSandbox *e = calloc(1, sizeof *e);

        if (!e || !(e->id = strdup(id))) {
                free(e);
                return -ENOMEM;
        }
        e->keep = keep || s->opts.keep;
        pthread_mutex_lock(&s->sandboxes_lock);
        e->next = s->sandboxes;
        s->sandboxes = e;
        pthread_mutex_unlock(&s->sandboxes_lock);
        return 0;
}

void mcp_session_forget_sandbox(McpServer *s, const char *id) {
        pthread_mutex_lock(&s->sandboxes_lock);
        for (McpSessionSandbox **p = &s->sandboxes; *p;)
                if (streq((*p)->id, id)) {
                        McpSessionSandbox *e = *p;

                        *p = e->next;
                        free(e->id);
                        free(e);
                } else
                        p = &(*p)->next;
        if (s->session_sandbox && streq(s->session_sandbox, id))
                s->session_sandbox = mfree(s->session_sandbox);
        pthread_mutex_unlock(&s->sandboxes_lock);
}

char *mcp_session_sandbox_id(McpServer *s) {
        char *id;

        pthread_mutex_lock(&s->sandboxes_lock);
        id = s->session_sandbox ? strdup(s->session_sandbox) : NULL;
        pthread_mutex_unlock(&s->sandboxes_lock);
        return id;
}

void mcp_session_free(McpServer *s) {
        while (s->sandboxes) {
                McpSessionSandbox *e = s->sandboxes;

                s->sandboxes = e->next;
                free(e->id);
                free(e);
        }
        s->session_sandbox = mfree(s->session_sandbox);
}

void mcp_session_cleanup(McpServer *s) {
        _cleanup_space_http_ SpaceHttp *h = NULL;

        if (!s->sandboxes || mcp_connect(s, &h) < 0)
                return;
        for (McpSessionSandbox *e = s->sandboxes; e; e = e->next) {
                _cleanup_free_ char *esc = NULL, *path = NULL;
                SpaceHttpReply reply = {};

                if (e->keep || space_http_escape(e->id, &esc) < 0 ||
                    asprintf(&path, "/v1/sandboxes/%s?force=1&wait=%d", esc, SESSION_REMOVE_WAIT_SEC) < 0)
                        continue;
                /* best effort: what is left is labelled mcp_session=ID for `spacectl ls` to show */
                (void) space_http_call(h, "DELETE", path, NULL, &reply);
                space_http_reply_done(&reply);
        }
}

/* ---- looking sandboxes up ---- */

/* The session's template: the configured one, else the first of these the daemon has. */
static int session_template(McpCall *call, char **ret, cJSON **ret_error) {
        static const char *const preferred[] = { "code-interpreter", "seed", "minimal" };
        McpServer *s = mcp_call_server(call);
        SpaceHttpReply reply = {};
        const cJSON *list, *t;
        int r;

        if (s->opts.template) {
                *ret = strdup(s->opts.template);
                return *ret ? 0 : -ENOMEM;
        }
        r = space_http_call(mcp_call_http(call), "GET", "/v1/templates", NULL, &reply);
        if (r < 0) {
                if (r == -EINTR || r == -ENOMEM)
                        return r;
                *ret_error = mcp_result_transport_error("listing the templates", mcp_call_http(call), r);
                return *ret_error ? 1 : -ENOMEM;
        }
        list = cJSON_GetObjectItemCaseSensitive(reply.json, "templates");
        for (size_t i = 0; i < ELEMENTSOF(preferred); i++)
                cJSON_ArrayForEach(t, list) {
                        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");

                        if (cJSON_IsString(name) && streq(name->valuestring, preferred[i])) {
                                space_http_reply_done(&reply);
                                *ret = strdup(preferred[i]);
                                return *ret ? 0 : -ENOMEM;
                        }
                }
        space_http_reply_done(&reply);
        *ret_error = mcp_result_errorf("the daemon has none of the templates code-interpreter, seed or minimal: "
                                       "build one (spacectl template build templates/minimal), or start the "
                                       "server with --template NAME");
        return *ret_error ? 1 : -ENOMEM;
}

static void session_sandbox_set(McpServer *s, const char *id) {
        pthread_mutex_lock(&s->sandboxes_lock);
        free(s->session_sandbox);
        /* out of memory: none, and the next call looks again */
        s->session_sandbox = strdup(id);
        pthread_mutex_unlock(&s->sandboxes_lock);
}

static int session_sandbox_create(McpCall *call, const char *template, const char *name, char **ret_id,
                                  cJSON **ret_error) {
        McpServer *s = mcp_call_server(call);
        _cleanup_cjson_ cJSON *body = cJSON_CreateObject();
        _cleanup_cjson_ cJSON *op = NULL;
        cJSON *meta;
        const cJSON *sb, *id;
        SpaceHttpReply reply = {};
        int r;

        if (!body || !cJSON_AddStringToObject(body, "template", template) ||
            (name && !cJSON_AddStringToObject(body, "name", name)) ||
            !(meta = cJSON_AddObjectToObject(body, "metadata")) ||
            !cJSON_AddStringToObject(meta, "mcp_session", s->session_id))
                return -ENOMEM;
        /* no ?wait: the id comes back at once and is recorded before the wait, so that a call cancelled
         * while the sandbox is made leaves it to the session (and its end) rather than to nobody */
        r = mcp_api_request(call, "POST", "/v1/sandboxes", body, "creating this session's sandbox", &reply, ret_error);
        if (r != 0)
                return r;
        sb = cJSON_GetObjectItemCaseSensitive(reply.json, "sandbox") ?: reply.json;
        id = cJSON_GetObjectItemCaseSensitive(sb, "id");
        if (!cJSON_IsString(id)) {
                space_http_reply_done(&reply);
                *ret_error = mcp_result_errorf("creating this session's sandbox: the daemon answered no sandbox id");
                return *ret_error ? 1 : -ENOMEM;
        }
        *ret_id = strdup(id->valuestring);
        if (!*ret_id) {
                space_http_reply_done(&reply);
                return -ENOMEM;
        }
        r = mcp_session_add_sandbox(s, *ret_id, false);
        if (r < 0) {
                space_http_reply_done(&reply);
                *ret_id = mfree(*ret_id);
                return r;
        }
        /* the session's sandbox from now on, even if this call is cancelled while it is made */
        session_sandbox_set(s, *ret_id);
        if (reply.status == 202)
                r = mcp_wait_operation(call, "creating this session's sandbox", reply.json, &op, ret_error);
        space_http_reply_done(&reply);
        if (r == 1)
                mcp_session_forget_sandbox(s, *ret_id); /* it failed: the next call makes another */
        if (r != 0)
                *ret_id = mfree(*ret_id);
        return r;
}

/* The session's sandbox: the one made before if it is still there, the kept one of that name, or a new one.
 * *ret_sb gets the Sandbox when it was looked up on the way (NULL for a new one). */
static int session_sandbox(McpCall *call, char **ret_id, cJSON **ret_sb, cJSON **ret_error) {
        McpServer *s = mcp_call_server(call);
        _cleanup_free_ char *template = NULL, *name = NULL, *id = NULL;
        _cleanup_cjson_ cJSON *sb = NULL;
        cJSON *ignored = NULL;
        bool missing;
        int r;

        pthread_mutex_lock(&s->sandbox_lock);
        id = mcp_session_sandbox_id(s);
        if (id) {
                r = mcp_sandbox_get(call, id, &sb, &missing, &ignored);
                cJSON_Delete(ignored);
                if (r == 0 || !missing) {
                        /* there, or the daemon did not say it is gone: go on with it */
                        pthread_mutex_unlock(&s->sandbox_lock);
                        if (r < 0)
                                return r;
                        *ret_id = TAKE_PTR(id);
                        *ret_sb = TAKE_PTR(sb);
                        return 0;
                }
                mcp_session_forget_sandbox(s, id); /* removed by someone else: make another */
                id = mfree(id);
        }
        r = session_template(call, &template, ret_error);
        if (r == 0 && s->opts.keep) {
                name = s->opts.name ? strdup(s->opts.name) : NULL;
                if (!name && asprintf(&name, "mcp-%s", template) < 0)
                        name = NULL;
                if (!name)
                        r = -ENOMEM;
        }
        if (r == 0 && name) {
                /* a kept sandbox of an earlier session goes on where it was left */
                r = mcp_sandbox_get(call, name, &sb, &missing, &ignored);
                cJSON_Delete(ignored);
                if (r == 0) {
                        id = strdup(mcp_json_string(sb, "id"));
                        r = id ? mcp_session_add_sandbox(s, id, true) : -ENOMEM;
                } else if (r == 1 && missing)
                        r = 0;
        }
        if (r == 0 && !id)
                r = session_sandbox_create(call, template, name, &id, ret_error);
        else if (r == 0)
                session_sandbox_set(s, id);
        pthread_mutex_unlock(&s->sandbox_lock);
        if (r == 0) {
                *ret_id = TAKE_PTR(id);
                *ret_sb = TAKE_PTR(sb);
        }
        return r;
}

/* mcp_call_sandbox(), and the Sandbox when it was looked up on the way (*ret_sb, else NULL). */
static int call_sandbox(McpCall *call, const cJSON *args, char **ret_id, cJSON **ret_sb, cJSON **ret_error) {
        _cleanup_cjson_ cJSON *sb = NULL;
        const char *ref = NULL;
        int r;

        *ret_sb = NULL;
        r = mcp_arg_string(args, "sandbox_id", false, &ref, ret_error);
        if (r != 0)
                return r;
        if (!ref)
                return session_sandbox(call, ret_id, ret_sb, ret_error);
        if (!*ref) {
                *ret_error = mcp_result_errorf("sandbox_id is empty: give a sandbox's id or name, or leave it out "
                                               "to use this session's own sandbox");
                return *ret_error ? 1 : -ENOMEM;
        }
        r = mcp_sandbox_get(call, ref, &sb, NULL, ret_error);
        if (r != 0)
                return r;
        *ret_id = strdup(mcp_json_string(sb, "id"));
        if (!*ret_id)
                return -ENOMEM;
        *ret_sb = TAKE_PTR(sb);
        return 0;
}

int mcp_call_sandbox(McpCall *call, const cJSON *args, char **ret_id, cJSON **ret_error) {
        _cleanup_cjson_ cJSON *sb = NULL;

        return call_sandbox(call, args, ret_id, &sb, ret_error);
}

int mcp_call_sandbox_running(McpCall *call, const cJSON *args, char **ret_id, cJSON **ret_error) {
        _cleanup_free_ char *id = NULL;
        _cleanup_cjson_ cJSON *sb = NULL;
        const char *state;
        int r;

        r = call_sandbox(call, args, &id, &sb, ret_error);
        if (r == 0 && !sb)
                r = mcp_sandbox_get(call, id, &sb, NULL, ret_error);
        if (r != 0)
                return r;
        state = mcp_json_string(sb, "state");
        if (streq(state, "suspended"))
                r = mcp_sandbox_lifecycle(call, id, "wake", "waking", ret_error);
        else if (streq(state, "paused"))
                r = mcp_sandbox_lifecycle(call, id, "resume", "resuming", ret_error);
        else if (!streq(state, "running") && !streq(state, "creating") && !streq(state, "waking")) {
                *ret_error = mcp_result_errorf("sandbox %s is %s, not running: %s", id, state,
                                               streq(state, "error") || streq(state, "stopped") ?
                                               "remove it (sandbox_remove) and make another" :
                                               "wait for it and try again");
                return *ret_error ? 1 : -ENOMEM;
        }
        if (r == 0)
                *ret_id = TAKE_PTR(id);
        return r;
}
