/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "log.h"
#include "macro.h"
#include "process.h"

/* /v1/sandboxes/{id}/processes: exec with an SSE stream, stdin, signals. */

void api_post_processes(Request *r, const RouteArgs *a) {
        Sandbox *s;

        static const char *const fields[] = { "argv", "env", "cwd", "stdin", "timeout", NULL };
        _cleanup_strv_free_ char **env = NULL, **argv = NULL;
        ExecSpec spec = {};
        uint64_t timeout = 0;
        cJSON *o, *v, *i;
        size_t n = 0;

        if (resolve_sandbox(r, a->arg[0], &s) < 0)
                return;
        o = parse_body_object(r, fields);
        if (!o)
                return;
        v = cJSON_GetObjectItemCaseSensitive(o, "argv");
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 || cJSON_GetArraySize(v) > ARGV_MAX) {
                http_respond_error(r, 400, "invalid_argument", "argv must be a non-empty array of strings (at most %d)",
                                   ARGV_MAX);
                goto out;
        }
        argv = calloc((size_t) cJSON_GetArraySize(v) + 1, sizeof(char *));
        if (!argv)
                goto out;
        cJSON_ArrayForEach(i, v) {
                if (!cJSON_IsString(i) || !(argv[n] = strdup(i->valuestring))) {
                        http_respond_error(r, 400, "invalid_argument", "argv entries must be strings");
                        goto out;
                }
                n++;
        }
        if (!*argv[0]) {
                http_respond_error(r, 400, "invalid_argument", "argv[0] must not be empty");
                goto out;
        }
        if (get_env_field(r, o, &env) < 0 || get_uint_field(r, o, "timeout", 0, 365ULL * 86400, &timeout) < 0)
                goto out;
        v = cJSON_GetObjectItemCaseSensitive(o, "cwd");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsString(v) || v->valuestring[0] != '/') {
                        http_respond_error(r, 400, "invalid_argument", "cwd must be an absolute path");
                        goto out;
                }
                spec.cwd = v->valuestring;
        }
        v = cJSON_GetObjectItemCaseSensitive(o, "stdin");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsBool(v)) {
                        http_respond_error(r, 400, "invalid_argument", "stdin must be true or false");
                        goto out;
                }
                spec.want_stdin = cJSON_IsTrue(v);
        }
        if (s->state != SANDBOX_RUNNING) {
                http_respond_error(r, 409, "sandbox_not_running", "sandbox %s is %s, not running%s%s", s->id,
                                   sandbox_state_to_string(s->state), s->error ? ": " : "", s->error ?: "");
                goto out;
        }
        spec.argv = argv;
        spec.env = env;
        spec.timeout_sec = timeout;
        if (process_start(r, s, &spec) < 0 && !r->responded)
                http_respond_error(r, 500, "internal", "cannot start the process");
out:
        cJSON_Delete(o);
}

static int parse_pid(Request *r, const char *s, int *ret) {
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end || v <= 0 || v > INT_MAX) {
                http_respond_error(r, 400, "invalid_argument", "'%s' is not a process id", s);
                return -EINVAL;
        }
        *ret = (int) v;
        return 0;
}

static Process *find_process(Request *r, Sandbox *s, const char *pid_str) {
        Process *p;
        int pid;

        if (parse_pid(r, pid_str, &pid) < 0)
                return NULL;
        p = process_find_by_pid(s, pid);
        if (!p || p->ended)
                http_respond_error(r, 404, "process_not_found", "no running process %d in sandbox %s", pid, s->id);
        return p && !p->ended ? p : NULL;
}

static Process *route_process(Request *r, const RouteArgs *a) {
        Sandbox *s;

        if (resolve_sandbox(r, a->arg[0], &s) < 0)
                return NULL;
        return find_process(r, s, a->arg[1]);
}

void api_post_close_stdin(Request *r, const RouteArgs *a) {
        Process *p = route_process(r, a);

        if (!p)
                return;
        (void) process_close_stdin(p);
        http_respond_empty(r, 204);
}

void api_post_signal(Request *r, const RouteArgs *a) {
        Process *p = route_process(r, a);

        static const char *const fields[] = { "signal", NULL };
        uint64_t sig = 15;
        cJSON *o;

        if (!p || !(o = parse_body_object(r, fields)))
                return;
        if (get_uint_field(r, o, "signal", 1, 64, &sig) >= 0) {
                if (process_signal(p, (int) sig) < 0)
                        http_respond_error(r, 409, "process_not_found", "the process is gone");
                else
                        http_respond_empty(r, 204);
        }
        cJSON_Delete(o);
}

/* Called when the request starts, before its body: stdin uploads stream, so find the process now. */
void api_stdin_begin(Request *r, const RouteArgs *a) {
        Sandbox *s;

        if (sandbox_resolve(http_manager(r->http), a->arg[0], &s) < 0) {
                r->upload_failed = true;
                return;
        }
        memcpy(r->upload_sandbox, s->id, sizeof r->upload_sandbox);
        r->upload_pid = atoi(a->arg[1]);
}

size_t api_upload(Request *r, const char *data, size_t n) {
        Sandbox *s;
        Process *p;

        if (r->upload) {
                p = r->upload;
                p->upload = NULL;
                r->upload = NULL;
                (void) process_maybe_free(p);
        }
        s = sandbox_find_by_id(http_manager(r->http), r->upload_sandbox);
        p = s && r->upload_pid > 0 ? process_find_by_pid(s, r->upload_pid) : NULL;
        if (!p || p->ended || p->stdin_closed) {
                r->upload_failed = true;
                return n;
        }
        return process_upload(p, r, data, n);
}

void api_post_stdin(Request *r, const RouteArgs *a) {
        if (r->upload_failed)
                http_respond_error(r, 409, "stdin_closed",
                                   "the process is not running or its stdin is closed (was it started with stdin?)");
        else
                http_respond_empty(r, 204);
}
