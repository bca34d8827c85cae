/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: HTTP request bodies as the API parses them (spaced/api/api-util.c, api-processes.c,
 * lib/json-util.c). A Request with the input as its body and no connection (an error answer is built and
 * then refused by libmicrohttpd for want of one) goes through parse_body_object with the field lists of the
 * routes, then the field readers those routes use: parse_exec_spec (processes and sessions), get_uint_field
 * and get_env_field (sandbox create), and the string-list helpers the store uses on what was accepted.
 * Invariants: exactly one answer for a refused body and none for an accepted one; what is accepted is
 * within the bounds the readers promise. */

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-util.h"
#include "macro.h"
#include "string-util.h"
#include "json-util.h"
#include "user.h"
#include "http/http.h"
#include "api/api.h"
#include "channel/process.h"

static const char *const exec_fields[] = { "argv", "env", "cwd", "stdin", "timeout", "pty", "rows", "cols", "user",
                                           NULL };
static const char *const create_fields[] = { "template", "name", "vcpu", "memory_mib", "disk_mib", "env",
                                             "metadata", "timeout", "on_timeout", "idle_timeout", NULL };
static const char *const import_fields[] = { "source", "tag", "config", NULL };
static const char *const no_fields[] = { NULL };

static void new_request(Request *r, const uint8_t *data, size_t size) {
        *r = (Request) { .method = "POST", .url = "/v1/fuzz" };
        if (space_buf_append(&r->body, data, size) < 0)
                abort();
        r->body.len = size; /* the body as it came: no NUL after it */
}

static void check_strv(char **l, size_t max) {
        size_t n = 0;
        char *text;
        char **back;

        for (char **i = l; i && *i; i++)
                if (++n > max)
                        abort();
        text = strv_to_json_text(l);
        if (!text)
                abort();
        back = strv_from_json_text(text);
        if (!back)
                abort();
        for (size_t i = 0; i <= n; i++)
                if ((i < n) != (back[i] != NULL))
                        abort();
        for (size_t i = 0; i < n; i++)
                if (strcmp(back[i], l[i]) != 0)
                        abort();
        strv_free(back);
        free(text);
}

static void exec_body(const uint8_t *data, size_t size) {
        Request r;
        char **argv = NULL, **env = NULL;
        ExecSpec spec;
        cJSON *o;
        int q;

        new_request(&r, data, size);
        o = parse_body_object(&r, exec_fields);
        if (!o) {
                if (!r.responded && size > 0)
                        abort();
                goto out;
        }
        if (r.responded)
                abort();
        q = parse_exec_spec(&r, o, true, &spec, &argv, &env);
        if (q < 0 && !r.responded && q != -ENOMEM)
                abort();
        if (q == 0) {
                if (r.responded || !argv || !argv[0] || !*argv[0])
                        abort();
                if (spec.rows > 65535 || spec.cols > 65535)
                        abort();
                if (spec.cwd && spec.cwd[0] != '/')
                        abort();
                if (spec.user && space_user_spec_parse(spec.user, NULL) < 0)
                        abort();
                for (char **e = env; e && *e; e++)
                        if ((*e)[0] == '=' || !strchr(*e, '='))
                                abort();
                check_strv(argv, ARGV_MAX);
                check_strv(env, SANDBOX_ENV_MAX);
        }
        strv_free(argv);
        strv_free(env);
        cJSON_Delete(o);
out:
        space_buf_done(&r.body);
}

static void create_body(const uint8_t *data, size_t size) {
        Request r;
        char **env = NULL;
        uint64_t v = 0;
        cJSON *o;

        new_request(&r, data, size);
        o = parse_body_object(&r, create_fields);
        if (o) {
                if (get_uint_field(&r, o, "vcpu", 1, 64, &v) > 0 && (v < 1 || v > 64))
                        abort();
                if (get_uint_field(&r, o, "memory_mib", 64, 65536, &v) > 0 && (v < 64 || v > 65536))
                        abort();
                if (get_uint_field(&r, o, "timeout", 0, 10ULL * 365 * 86400, &v) > 0 && v > 10ULL * 365 * 86400)
                        abort();
                if (get_env_field(&r, o, &env) > 0) {
                        check_strv(env, SANDBOX_ENV_MAX);
                        strv_free(env);
                }
                cJSON_Delete(o);
        }
        space_buf_done(&r.body);

        new_request(&r, data, size);
        o = parse_body_object(&r, import_fields);
        if (o) {
                cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "config"), *i;
                if (cJSON_IsObject(c))
                        cJSON_ArrayForEach(i, c) {
                                char **l = NULL;
                                if (json_array_to_strv(i, &l) == 0) {
                                        check_strv(l, SIZE_MAX);
                                        strv_free(l);
                                }
                        }
                cJSON_Delete(o);
        }
        space_buf_done(&r.body);

        new_request(&r, data, size);
        o = parse_body_object(&r, no_fields);
        cJSON_Delete(o);
        space_buf_done(&r.body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        exec_body(data, size);
        create_body(data, size);
        return 0;
}
