/* SPDX-License-Identifier: Apache-2.0 */

/* Unit tests for the MCP engine's JSON-RPC side (lib/mcp-server.c, lib/mcp-util.c): the handshake, tools/list
 * and every tool's schema, the spec's error codes for garbage, arguments refused before a tool runs, a call
 * that cannot reach the daemon, and a mutation fuzz of messages (every request gets exactly one answer, and
 * nothing crashes under ASan). No daemon: the connection the engine asks for is refused. */

#define _GNU_SOURCE 1
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "../../lib/mcp-tool.h"
#include "../../lib/mcp.h"
#include "tap.h"

typedef struct Sink {
        pthread_mutex_t lock;
        pthread_cond_t changed;
        cJSON *messages; /* array of what was sent */
        unsigned done;
} Sink;

static void sink_send(const cJSON *m, void *context, void *userdata) {
        Sink *k = userdata;

        (void) context;
        pthread_mutex_lock(&k->lock);
        cJSON_AddItemToArray(k->messages, cJSON_Duplicate(m, true));
        pthread_cond_broadcast(&k->changed);
        pthread_mutex_unlock(&k->lock);
}

static void sink_done(void *context, void *userdata) {
        Sink *k = userdata;

        (void) context;
        pthread_mutex_lock(&k->lock);
        k->done++;
        pthread_cond_broadcast(&k->changed);
        pthread_mutex_unlock(&k->lock);
}

static int refuse_connect(SpaceHttp **ret, void *userdata) {
        (void) ret;
        (void) userdata;
        return -ECONNREFUSED;
}

/* Sends text and waits for the done of it; returns the last message sent for it (a copy), or NULL. */
static cJSON *roundtrip(McpServer *s, Sink *k, const char *text) {
        unsigned before_done, before_n;
        cJSON *last = NULL;

        pthread_mutex_lock(&k->lock);
        before_done = k->done;
        before_n = (unsigned) cJSON_GetArraySize(k->messages);
        pthread_mutex_unlock(&k->lock);
        ASSERT(mcp_server_receive(s, text, strlen(text), NULL, NULL) == 0);
        pthread_mutex_lock(&k->lock);
        while (k->done == before_done)
                pthread_cond_wait(&k->changed, &k->lock);
        if ((unsigned) cJSON_GetArraySize(k->messages) > before_n)
                last = cJSON_Duplicate(cJSON_GetArrayItem(k->messages, cJSON_GetArraySize(k->messages) - 1), true);
        pthread_mutex_unlock(&k->lock);
        return last;
}

static int error_code(const cJSON *m) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "error"), "code");

        return cJSON_IsNumber(c) ? c->valueint : 0;
}

static const char *result_text(const cJSON *m) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "result");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "content"), 0), "text");

        return cJSON_IsString(t) ? t->valuestring : "";
}

static bool result_is_error(const cJSON *m) {
        return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "result"), "isError"));
}

static void test_handshake(McpServer *s, Sink *k) {
        cJSON *m;
        const cJSON *r;

        m = roundtrip(s, k, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                      "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
        r = cJSON_GetObjectItemCaseSensitive(m, "result");
        ok(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(r, "protocolVersion")) &&
           streq(cJSON_GetObjectItemCaseSensitive(r, "protocolVersion")->valuestring, "2025-06-18"),
           "initialize settles on the revision asked for when it is known");
        ok(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "capabilities"), "tools")),
           "... and offers tools");
        ok(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "id")) == 1, "... answering its id");
        ok(mcp_server_protocol_version(s) && streq(mcp_server_protocol_version(s), "2025-06-18"),
           "mcp_server_protocol_version() says which");
        cJSON_Delete(m);

        m = roundtrip(s, k, "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
                      "\"1999-01-01\"}}");
        r = cJSON_GetObjectItemCaseSensitive(m, "result");
        ok(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(r, "protocolVersion")) &&
           mcp_protocol_version_known(cJSON_GetObjectItemCaseSensitive(r, "protocolVersion")->valuestring),
           "an unknown revision is answered with one we speak");
        cJSON_Delete(m);

        m = roundtrip(s, k, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
        ok(!m, "a notification gets no answer");
        cJSON_Delete(m);
        m = roundtrip(s, k, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}");
        ok(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(m, "result")), "ping answers {}");
        cJSON_Delete(m);
        ok(strlen(mcp_server_session_id(s)) == 32, "the session id is 32 hex digits");
}

static void test_tools_list(McpServer *s, Sink *k) {
        static const char *const expected[] = {
                "sandbox_create", "sandbox_list", "sandbox_remove", "sandbox_suspend", "sandbox_wake",
                "sandbox_checkpoint", "checkpoint_list", "sandbox_restore", "sandbox_fork", "exec", "run_code",
                "port_url", "egress_status", "file_read", "file_write", "file_list", "file_stat", "file_remove",
                "file_move", "file_mkdir",
        };
        cJSON *m = roundtrip(s, k, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
        const cJSON *tools = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "result"), "tools");
        const cJSON *t;
        bool schemas_ok = true, described = true, unique = true;

        ok(cJSON_GetArraySize(tools) == (int) mcp_tools_count(), "tools/list lists every tool (%d)",
           cJSON_GetArraySize(tools));
        for (size_t i = 0; i < ELEMENTSOF(expected); i++)
                ok(mcp_tool_find(expected[i]) != NULL, "tool %s is there", expected[i]);
        cJSON_ArrayForEach(t, tools) {
                const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "inputSchema");
                const cJSON *desc = cJSON_GetObjectItemCaseSensitive(t, "description");
                const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties"), *p;
                const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
                const cJSON *addl = cJSON_GetObjectItemCaseSensitive(schema, "additionalProperties");

                if (!cJSON_IsString(type) || !streq(type->valuestring, "object") || !cJSON_IsObject(props) ||
                    !cJSON_IsFalse(addl)) {
                        diag("%s: schema is not an object of properties without additional ones",
                             cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "name")));
                        schemas_ok = false;
                }
                cJSON_ArrayForEach(p, props)
                        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p, "description"))) {
                                diag("%s.%s has no description",
                                     cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "name")), p->string);
                                described = false;
                        }
                if (!cJSON_IsString(desc) || strlen(desc->valuestring) < 10)
                        described = false;
                for (const cJSON *u = t->next; u; u = u->next)
                        if (cJSON_Compare(cJSON_GetObjectItemCaseSensitive(t, "name"),
                                          cJSON_GetObjectItemCaseSensitive(u, "name"), true))
                                unique = false;
        }
        ok(schemas_ok, "every schema is an object with additionalProperties false");
        ok(described, "every tool and every argument has a description");
        ok(unique, "tool names are unique");
        cJSON_Delete(m);
}

static void test_garbage(McpServer *s, Sink *k) {
        static const struct {
                const char *text;
                int code;
                const char *what;
        } cases[] = {
                { "{not json", -32700, "not JSON: parse error" },
                { "", -32700, "an empty message: parse error" },
                { "[]", -32600, "an empty batch: invalid request" },
                { "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", -32600, "a batch: invalid request" },
                { "42", -32600, "a number: invalid request" },
                { "{\"id\":1,\"method\":\"ping\"}", -32600, "no jsonrpc: invalid request" },
                { "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", -32600, "jsonrpc 1.0: invalid request" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", -32600, "a method that is a number" },
                { "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", -32600, "an id that is an object" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1}", -32600, "no method" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"nope/nope\"}", -32601, "an unknown method" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\"}", -32601,
                  "server/discover (2026's probe): method not found, so clients fall back to initialize" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[1]}", -32602, "params an array" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}", -32602,
                  "tools/call without a name" },
                { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"rm_rf\"}}", -32602,
                  "tools/call of an unknown tool" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                cJSON *m = roundtrip(s, k, cases[i].text);

                ok(error_code(m) == cases[i].code, "%s (%d, got %d)", cases[i].what, cases[i].code, error_code(m));
                cJSON_Delete(m);
        }
        {
                cJSON *m = roundtrip(s, k, "{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}");

                ok(!m, "a response from the client gets no answer");
                cJSON_Delete(m);
        }
}

static void test_arguments(McpServer *s, Sink *k) {
        cJSON *m;

        m = roundtrip(s, k, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"exec\","
                      "\"arguments\":{\"comand\":\"ls\"}}}");
        ok(result_is_error(m) && strstr(result_text(m), "comand") && strstr(result_text(m), "command"),
           "an unknown argument is a tool error naming it and the ones the tool takes: %s", result_text(m));
        cJSON_Delete(m);
        m = roundtrip(s, k, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"exec\","
                      "\"arguments\":[1]}}");
        ok(result_is_error(m), "arguments that are not an object: a tool error");
        cJSON_Delete(m);
        m = roundtrip(s, k, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_list\"}}");
        ok(result_is_error(m) && strstr(result_text(m), "daemon"),
           "a call while the daemon is unreachable: a tool error saying so: %s", result_text(m));
        cJSON_Delete(m);
}

/* Flips, inserts and deletes bytes of well-formed messages; every message is answered at most once and
 * requests exactly once (counted by done), and the server keeps answering a ping. */
static void test_fuzz(McpServer *s, Sink *k) {
        static const char *const seeds[] = {
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\"}}",
                "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\",\"params\":{\"name\":\"exec\",\"arguments\":{\"x\":1}}}",
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}",
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{\"cursor\":\"x\"}}",
                "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"file_read\",\"arguments\":{\"pat\":\"/\"},\"_meta\":{\"progressToken\":5}}}",
        };
        unsigned seed = 0x5eed, answered_twice = 0, runs = 20000;
        char buf[512];
        cJSON *m;

        for (unsigned i = 0; i < runs; i++) {
                const char *base = seeds[i % ELEMENTSOF(seeds)];
                size_t n = strlen(base), before;

                memcpy(buf, base, n);
                for (unsigned j = 0; j < 1 + (i % 4); j++) {
                        size_t at;

                        seed = seed * 1103515245 + 12345;
                        at = (seed >> 8) % n;
                        switch ((seed >> 4) % 3) {
                        case 0:
                                buf[at] = (char) (seed >> 16);
                                break;
                        case 1:
                                if (n + 1 < sizeof buf) {
                                        memmove(buf + at + 1, buf + at, n - at);
                                        buf[at] = "{}[]\":,\\0x"[(seed >> 16) % 10];
                                        n++;
                                }
                                break;
                        default:
                                memmove(buf + at, buf + at + 1, n - at - 1);
                                n--;
                        }
                }
                pthread_mutex_lock(&k->lock);
                before = (size_t) cJSON_GetArraySize(k->messages);
                pthread_mutex_unlock(&k->lock);
                buf[n] = '\0';
                m = roundtrip(s, k, buf);
                pthread_mutex_lock(&k->lock);
                if ((size_t) cJSON_GetArraySize(k->messages) > before + 1)
                        answered_twice++;
                /* keep the record small */
                while (cJSON_GetArraySize(k->messages) > 16)
                        cJSON_DeleteItemFromArray(k->messages, 0);
                pthread_mutex_unlock(&k->lock);
                cJSON_Delete(m);
        }
        ok(answered_twice == 0, "%u mutated messages: none answered twice", runs);
        m = roundtrip(s, k, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}");
        ok(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(m, "result")), "... and the server still answers a ping");
        cJSON_Delete(m);
}

int main(void) {
        Sink k = { .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER };
        McpServer *s = NULL;

        k.messages = cJSON_CreateArray();
        ASSERT(k.messages);
        ASSERT(mcp_server_new(&(McpServerOptions) {
                .connect = refuse_connect,
                .send = sink_send,
                .done = sink_done,
                .userdata = &k,
        }, &s) == 0);

        test_handshake(s, &k);
        test_tools_list(s, &k);
        test_garbage(s, &k);
        test_arguments(s, &k);
        test_fuzz(s, &k);

        mcp_server_free(s);
        cJSON_Delete(k.messages);
        return done();
}
