/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: what an MCP client sends (lib/mcp-server.c, lib/mcp-util.c: mcp_server_receive() and the
 * argument checks it makes before a tool runs). One server for the whole run, whose connection to the daemon is
 * refused, so that a tools/call is answered at once ("cannot reach the daemon") instead of on a thread.
 * Invariants: every message is done with exactly once, before mcp_server_receive() returns; a request gets
 * exactly one answer and anything else none; every answer is a JSON-RPC 2.0 response with an id and exactly one
 * of result and error, an error's code being one of JSON-RPC's, and a result of tools/call a CallToolResult
 * (content, isError). */

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-util.h"
#include "macro.h"
#include "mcp.h"

static unsigned sent, done, bad;

static bool response_valid(const cJSON *m) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, "jsonrpc");
        const cJSON *result = cJSON_GetObjectItemCaseSensitive(m, "result");
        const cJSON *error = cJSON_GetObjectItemCaseSensitive(m, "error");
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(error, "code");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");

        if (!cJSON_IsString(v) || !streq(v->valuestring, "2.0") || !id || (!result == !error))
                return false;
        if (!cJSON_IsString(id) && !cJSON_IsNumber(id) && !cJSON_IsNull(id))
                return false;
        if (error)
                return cJSON_IsNumber(code) &&
                       IN_SET(code->valueint, -32700, -32600, -32601, -32602, -32603) &&
                       cJSON_IsString(cJSON_GetObjectItemCaseSensitive(error, "message"));
        /* a tool's result, or one of the other methods' (initialize, ping, tools/list): an object */
        if (!cJSON_IsObject(result))
                return false;
        if (cJSON_HasObjectItem(result, "isError"))
                return cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(result, "isError")) &&
                       cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(result, "content"));
        return true;
}

static void on_send(const cJSON *m, void *context, void *userdata) {
        (void) context;
        (void) userdata;
        sent++;
        if (!response_valid(m))
                bad++;
}

static void on_done(void *context, void *userdata) {
        (void) context;
        (void) userdata;
        done++;
}

static int refuse(SpaceHttp **ret, void *userdata) {
        (void) ret;
        (void) userdata;
        return -ECONNREFUSED;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static McpServer *s;
        bool is_request = false;

        if (!s)
                check(mcp_server_new(&(McpServerOptions) { .connect = refuse, .send = on_send, .done = on_done },
                                     &s) == 0);
        sent = done = bad = 0;
        check(mcp_server_receive(s, (const char *) data, size, NULL, &is_request) == 0);
        check(done == 1);
        check(sent == (is_request ? 1U : 0U));
        check(bad == 0);
        check(mcp_server_running(s) == 0);
        return 0;
}
