/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "e2b/e2b-parse.h"
#include "e2b/envd-process.h"
#include "macro.h"
#include "string-util.h"
#include "template/template.h"

/* envd's process.Process service over Connect RPC (JSON): Start and Connect stream a process's events, the
 * rest are unary. Processes are the daemon's own (channel/process.h); what envd keeps besides (the tag, the
 * env as given) rides along in memory. */

#define ENVD_ENVS_MAX 1024
#define ENVD_ARG_MAX (64 * 1024)
#define PTY_SIZE_MAX 65535

static void process_start(Request *r, const RouteArgs *a);
static void process_connect(Request *r, const RouteArgs *a);
static void process_list(Request *r, const RouteArgs *a);
static void process_send_signal(Request *r, const RouteArgs *a);
static void process_update(Request *r, const RouteArgs *a);

#define ENVD_ROUTE(name, fn, ...) ENVD_RPC("process.Process", name, fn, __VA_ARGS__)
#define ENVD_STREAM_ROUTE(name, fn) ENVD_STREAM("process.Process", name, fn)

const Route envd_process_routes[] = {
        ENVD_STREAM_ROUTE("Start", process_start),
        ENVD_STREAM_ROUTE("Connect", process_connect),
        ENVD_ROUTE("List", process_list),
        ENVD_ROUTE("SendInput", envd_process_send_input),
        ENVD_ROUTE("StreamInput", envd_process_stream_input, .begin = envd_process_stream_input_begin),
        ENVD_ROUTE("CloseStdin", envd_process_close_stdin),
        ENVD_ROUTE("SendSignal", process_send_signal),
        ENVD_ROUTE("Update", process_update),
        {},
};

/* ---- request fields */

/* uint32 in protobuf JSON: a number, or a decimal string. */
static int json_uint(const cJSON *v, uint64_t max, uint64_t *ret) {
        if (cJSON_IsNumber(v)) {
                double d = v->valuedouble;

                if (!(d >= 0) || d > (double) max || floor(d) != d)
                        return -EINVAL;
                *ret = (uint64_t) d;
                return 0;
        }
        if (cJSON_IsString(v)) {
                char *end;
                unsigned long long n;

                if (v->valuestring[0] < '0' || v->valuestring[0] > '9')
                        return -EINVAL;
                errno = 0;
                n = strtoull(v->valuestring, &end, 10);
                if (errno || *end || n > max)
                        return -EINVAL;
                *ret = n;
                return 0;
        }
        return -EINVAL;
}

static bool json_absent(const cJSON *v) {
        return !v || cJSON_IsNull(v);
}

int envd_selector_parse(const cJSON *selector, uint64_t *ret_pid, const char **ret_tag) {
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(selector, "pid"),
                    *tag = cJSON_GetObjectItemCaseSensitive(selector, "tag");

        *ret_pid = 0;
        *ret_tag = NULL;
        if (!cJSON_IsObject(selector) || json_absent(pid) == json_absent(tag))
                return -EINVAL;
        if (!json_absent(pid))
                return json_uint(pid, UINT32_MAX, ret_pid) < 0 ? -EINVAL : 0;
        if (!cJSON_IsString(tag) || strlen(tag->valuestring) > ENVD_TAG_MAX)
                return -EINVAL;
        *ret_tag = tag->valuestring;
        return 0;
}

int envd_selector_find(Sandbox *s, const cJSON *selector, Process **ret, char *ret_what, size_t what_size) {
        const char *tag;
        uint64_t n;

        *ret = NULL;
        if (envd_selector_parse(selector, &n, &tag) < 0)
                return -EINVAL;
        if (!tag) {
                snprintf(ret_what, what_size, "process with pid %llu", (unsigned long long) n);
                *ret = n > 0 && n <= INT_MAX ? process_find_by_pid(s, (int) n) : NULL;
        } else {
                snprintf(ret_what, what_size, "process with tag %.64s", tag);
                *ret = process_find_by_tag(s, tag);
        }
        return *ret ? 1 : 0;
}

int envd_base64_field(const cJSON *v, size_t max, uint8_t **ret, size_t *ret_size) {
        _cleanup_free_ char *norm = NULL;
        _cleanup_free_ uint8_t *out = NULL;
        size_t n, m;
        long k;

        *ret = NULL;
        *ret_size = 0;
        if (json_absent(v))
                return 0;
        if (!cJSON_IsString(v))
                return -EINVAL;
        n = strlen(v->valuestring);
        if (n / 4 * 3 > max + 3)
                return -E2BIG;
        /* protobuf JSON parsers take URL-safe and unpadded base64 too */
        norm = malloc(n + 4);
        if (!norm)
                return -ENOMEM;
        for (m = 0; m < n; m++) {
                char c = v->valuestring[m];
                norm[m] = c == '-' ? '+' : c == '_' ? '/' : c;
        }
        while (m % 4 != 0)
                norm[m++] = '=';
        out = malloc(m / 4 * 3 + 1);
        if (!out)
                return -ENOMEM;
        k = base64_decode(norm, m, out);
        if (k < 0)
                return -EINVAL;
        if ((size_t) k > max)
                return -E2BIG;
        *ret = TAKE_PTR(out);
        *ret_size = (size_t) k;
        return 0;
}

void envd_start_request_done(StartRequest *q) {
        strv_free(q->argv);
        strv_free(q->env);
        free(q->cwd);
}

static int parse_strings(const cJSON *a, size_t max_count, char ***l, const char **ret_err) {
        const cJSON *i;

        if (json_absent(a))
                return 0;
        if (!cJSON_IsArray(a) || (size_t) cJSON_GetArraySize(a) > max_count) {
                *ret_err = "process.args must be an array of at most 4096 strings";
                return -EINVAL;
        }
        cJSON_ArrayForEach(i, a) {
                if (!cJSON_IsString(i) || strlen(i->valuestring) > ENVD_ARG_MAX) {
                        *ret_err = "process.args must hold strings of at most 64 KiB";
                        return -EINVAL;
                }
                if (strv_extend(l, i->valuestring) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int parse_envs(const cJSON *o, char ***l, const char **ret_err) {
        const cJSON *i;
        size_t n = 0;

        if (json_absent(o))
                return 0;
        if (!cJSON_IsObject(o)) {
                *ret_err = "process.envs must be an object of strings";
                return -EINVAL;
        }
        cJSON_ArrayForEach(i, o) {
                _cleanup_free_ char *kv = NULL;

                if (++n > ENVD_ENVS_MAX || !cJSON_IsString(i) || !i->string || !i->string[0] ||
                    strchr(i->string, '=') || strlen(i->string) > ENVD_ARG_MAX ||
                    strlen(i->valuestring) > ENVD_ARG_MAX) {
                        *ret_err = "process.envs must map at most 1024 names (without '=') to strings";
                        return -EINVAL;
                }
                if (asprintf(&kv, "%s=%s", i->string, i->valuestring) < 0 || strv_extend(l, kv) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int envd_parse_pty(const cJSON *o, StartRequest *q, const char **ret_err) {
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(o, "size");
        uint64_t rows = 0, cols = 0;

        if (json_absent(o))
                return 0;
        if (!cJSON_IsObject(o) || (!json_absent(size) && !cJSON_IsObject(size)) ||
            (cJSON_GetObjectItemCaseSensitive(size, "rows") &&
             json_uint(cJSON_GetObjectItemCaseSensitive(size, "rows"), PTY_SIZE_MAX, &rows) < 0) ||
            (cJSON_GetObjectItemCaseSensitive(size, "cols") &&
             json_uint(cJSON_GetObjectItemCaseSensitive(size, "cols"), PTY_SIZE_MAX, &cols) < 0)) {
                *ret_err = "pty must be {\"size\": {\"cols\": N, \"rows\": N}} with sizes up to 65535";
                return -EINVAL;
        }
        q->pty = true;
        q->rows = (unsigned) rows ?: 24;
        q->cols = (unsigned) cols ?: 80;
        return 0;
}

/* A cwd as envd takes it: ~ is the user's home, a relative one counts from there. */
static int resolve_cwd(const char *cwd, const char *user, char **ret) {
        if (cwd[0] == '~' && (cwd[1] == 0 || cwd[1] == '/'))
                cwd += cwd[1] ? 2 : 1;
        return e2b_resolve_path(cwd, user, ret);
}

int envd_parse_start_request(const cJSON *o, const char *user, StartRequest *q, const char **ret_err) {
        const cJSON *proc = cJSON_GetObjectItemCaseSensitive(o, "process"),
                    *cmd = cJSON_GetObjectItemCaseSensitive(proc, "cmd"),
                    *cwd = cJSON_GetObjectItemCaseSensitive(proc, "cwd"),
                    *tag = cJSON_GetObjectItemCaseSensitive(o, "tag"),
                    *in = cJSON_GetObjectItemCaseSensitive(o, "stdin");
        int r;

        *q = (StartRequest) { .want_stdin = true }; /* envd: stdin unless it is said false */
        if (!cJSON_IsObject(proc) || !cJSON_IsString(cmd) || !cmd->valuestring[0] ||
            strlen(cmd->valuestring) > ENVD_ARG_MAX) {
                *ret_err = "process.cmd must be a non-empty string";
                return -EINVAL;
        }
        if (strv_extend(&q->argv, cmd->valuestring) < 0)
                return -ENOMEM;
        r = parse_strings(cJSON_GetObjectItemCaseSensitive(proc, "args"), ARGV_MAX - 1, &q->argv, ret_err);
        if (r >= 0)
                r = parse_envs(cJSON_GetObjectItemCaseSensitive(proc, "envs"), &q->env, ret_err);
        if (r >= 0)
                r = envd_parse_pty(cJSON_GetObjectItemCaseSensitive(o, "pty"), q, ret_err);
        if (r < 0)
                return r;
        if (!json_absent(cwd)) {
                if (!cJSON_IsString(cwd) || strlen(cwd->valuestring) > PATH_MAX) {
                        *ret_err = "process.cwd must be a path";
                        return -EINVAL;
                }
                if (cwd->valuestring[0] && resolve_cwd(cwd->valuestring, user, &q->cwd) < 0)
                        return -ENOMEM;
        }
        if (!json_absent(tag)) {
                if (!cJSON_IsString(tag) || strlen(tag->valuestring) > ENVD_TAG_MAX) {
                        *ret_err = "tag must be a string of at most 256 bytes";
                        return -EINVAL;
                }
                q->tag = tag->valuestring;
        }
        if (!json_absent(in)) {
                if (!cJSON_IsBool(in)) {
                        *ret_err = "stdin must be true or false";
                        return -EINVAL;
                }
                q->want_stdin = cJSON_IsTrue(in);
        }
        return 0;
}

/* ---- Start */

/* The tag and the env as given, for Connect by tag and List. */
static int remember_request(Process *p, const StartRequest *q) {
        if (q->tag && !(p->tag = strdup(q->tag)))
                return -ENOMEM;
        if (q->env) {
                for (char **e = q->env; *e; e++)
                        if (strv_extend(&p->request_env, *e) < 0)
                                return -ENOMEM;
        }
        return 0;
}

static void process_start(Request *r, const RouteArgs *a) {
        _cleanup_(envd_start_request_done) StartRequest q = {};
        _cleanup_(cjson_deletep) cJSON *o = NULL;
        _cleanup_(error_done) Error err = {};
        char user[E2B_USER_MAX + 1];
        const char *msg = NULL;
        uint64_t timeout_ms;
        EnvdStreamSpec ss;
        ExecSpec spec;
        Sandbox *s;
        Process *p;
        int k;

        if (e2b_envd_sandbox(r, &s) <= 0 || e2b_envd_user(r, s, true, user) < 0 || connect_timeout_ms(r, &timeout_ms) < 0)
                return;
        o = connect_request_message(r, true);
        if (!o)
                return;
        k = envd_parse_start_request(o, user, &q, &msg);
        if (k == -EINVAL) {
                envd_stream_error(r, ERROR_INVALID_ARGUMENT, "%s", msg);
                return;
        }
        if (k < 0) {
                envd_stream_error(r, ERROR_INTERNAL, "out of memory");
                return;
        }
        spec = (ExecSpec) {
                .argv = q.argv,
                .env = q.env,
                /* envd: the template's workdir, else the user's home (the agent's choice without a cwd) */
                .cwd = q.cwd ?: template_workdir(http_manager(r->http), s),
                .user = user,
                .want_stdin = q.want_stdin,
                .pty = q.pty,
                .rows = q.rows,
                .cols = q.cols,
                /* envd kills the process when the request's deadline passes: the stream does that to the
                 * millisecond; this (whole seconds from its start) is for when nobody follows it any more */
                .timeout_sec = (timeout_ms + 999) / 1000,
        };
        k = process_exec(s, &spec, &p, &err);
        if (k < 0) {
                envd_stream_error(r, err.code ?: ERROR_INTERNAL, "%s",
                                  err.code ? error_message(&err) : "cannot start the process");
                return;
        }
        ss = (EnvdStreamSpec) {
                .from_start = true,
                .keepalive_sec = connect_keepalive_sec(r),
                .deadline_ms = timeout_ms,
        };
        if (remember_request(p, &q) < 0 || envd_stream_attach(r, p, &ss) < 0) {
                process_fail(p, ERROR_INTERNAL, "cannot answer the request");
                if (!r->responded)
                        envd_stream_error(r, ERROR_INTERNAL, "cannot answer the request");
        }
}

/* ---- Connect */

static void process_connect(Request *r, const RouteArgs *a) {
        _cleanup_(cjson_deletep) cJSON *o = NULL;
        char what[96];
        uint64_t timeout_ms;
        EnvdStreamSpec ss;
        Sandbox *s;
        Process *p;
        int k;

        if (e2b_envd_sandbox(r, &s) <= 0 || connect_timeout_ms(r, &timeout_ms) < 0)
                return;
        o = connect_request_message(r, true);
        if (!o)
                return;
        k = envd_selector_find(s, cJSON_GetObjectItemCaseSensitive(o, "process"), &p, what, sizeof what);
        if (k < 0) {
                envd_stream_error(r, ERROR_INVALID_ARGUMENT, "process must be {\"pid\": N} or {\"tag\": \"...\"}");
                return;
        }
        if (k == 0) {
                envd_stream_error(r, ERROR_PROCESS_NOT_FOUND, "%s not found", what);
                return;
        }
        ss = (EnvdStreamSpec) {
                /* envd streams what comes from now on; replay (newer envd) asks for what came before too */
                .after_id = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "replay")) ? 0 : p->last_id,
                .keepalive_sec = connect_keepalive_sec(r),
                .deadline_ms = timeout_ms,
        };
        if (envd_stream_attach(r, p, &ss) < 0 && !r->responded)
                envd_stream_error(r, ERROR_INTERNAL, "cannot answer the request");
}

/* ---- unary calls */

static cJSON *process_info(Process *p) {
        cJSON *o = cJSON_CreateObject(), *c, *args, *envs;

        if (!o)
                return NULL;
        c = cJSON_AddObjectToObject(o, "config");
        cJSON_AddStringToObject(c, "cmd", p->argv && p->argv[0] ? p->argv[0] : "");
        args = cJSON_AddArrayToObject(c, "args");
        for (char **i = p->argv && p->argv[0] ? p->argv + 1 : NULL; i && *i; i++)
                cJSON_AddItemToArray(args, cJSON_CreateString(*i));
        envs = cJSON_AddObjectToObject(c, "envs");
        for (char **e = p->request_env; e && *e; e++) {
                _cleanup_free_ char *k = strdup(*e);
                char *eq = k ? strchr(k, '=') : NULL;

                if (eq) {
                        *eq = 0;
                        cJSON_AddStringToObject(envs, k, eq + 1);
                }
        }
        if (p->cwd)
                cJSON_AddStringToObject(c, "cwd", p->cwd);
        cJSON_AddNumberToObject(o, "pid", p->pid);
        if (p->tag)
                cJSON_AddStringToObject(o, "tag", p->tag);
        return o;
}

static void process_list(Request *r, const RouteArgs *a) {
        _cleanup_(cjson_deletep) cJSON *o = NULL;
        cJSON *res, *list;
        Sandbox *s;

        if (e2b_envd_sandbox(r, &s) <= 0 || !(o = connect_request_message(r, false)))
                return;
        res = cJSON_CreateObject();
        list = cJSON_AddArrayToObject(res, "processes");
        for (Process *p = process_next_live(s, NULL); p; p = process_next_live(s, p))
                cJSON_AddItemToArray(list, process_info(p));
        connect_respond(r, res);
}

/* The process a unary request names in "process"; answers (not_found, invalid_argument) when there is none. */
static Process *request_process(Request *r, Sandbox *s, const cJSON *o) {
        char what[96];
        Process *p;
        int k = envd_selector_find(s, cJSON_GetObjectItemCaseSensitive(o, "process"), &p, what, sizeof what);

        if (k < 0)
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "process must be {\"pid\": N} or {\"tag\": \"...\"}");
        else if (k == 0)
                http_respond_error(r, ERROR_PROCESS_NOT_FOUND, "%s not found", what);
        return k > 0 ? p : NULL;
}

Process *envd_unary_process(Request *r, cJSON **ret_message) {
        cJSON *o;
        Sandbox *s;
        Process *p;

        *ret_message = NULL;
        if (e2b_envd_sandbox(r, &s) <= 0 || !(o = connect_request_message(r, false)))
                return NULL;
        p = request_process(r, s, o);
        if (!p) {
                cJSON_Delete(o);
                return NULL;
        }
        *ret_message = o;
        return p;
}

int envd_parse_signal(const cJSON *v, int *ret) {
        uint64_t n;

        if (cJSON_IsString(v) && streq(v->valuestring, "SIGNAL_SIGKILL"))
                n = SIGKILL;
        else if (cJSON_IsString(v) && streq(v->valuestring, "SIGNAL_SIGTERM"))
                n = SIGTERM;
        else if (json_uint(v, 64, &n) < 0 || (n != SIGKILL && n != SIGTERM))
                return -EINVAL;
        *ret = (int) n;
        return 0;
}

static void process_send_signal(Request *r, const RouteArgs *a) {
        _cleanup_(cjson_deletep) cJSON *o = NULL;
        Process *p = envd_unary_process(r, &o);
        int sig;

        if (!p)
                return;
        if (envd_parse_signal(cJSON_GetObjectItemCaseSensitive(o, "signal"), &sig) < 0) {
                http_respond_error(r, ERROR_NOT_SUPPORTED, "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
                return;
        }
        /* the agent signals the process group: what the command started goes too */
        if (process_signal(p, sig) < 0) {
                http_respond_error(r, ERROR_INTERNAL, "cannot signal process %d: it is not running (yet)", p->pid);
                return;
        }
        connect_respond(r, NULL);
}

static void process_update(Request *r, const RouteArgs *a) {
        _cleanup_(cjson_deletep) cJSON *o = NULL;
        Process *p = envd_unary_process(r, &o);
        StartRequest q = {};
        const char *msg = NULL;
        const cJSON *pty;
        int k;

        if (!p)
                return;
        pty = cJSON_GetObjectItemCaseSensitive(o, "pty");
        if (json_absent(pty)) {
                connect_respond(r, NULL);
                return;
        }
        if (envd_parse_pty(pty, &q, &msg) < 0) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s", msg);
                return;
        }
        k = process_resize(p, q.rows, q.cols);
        if (k == -ENOTTY)
                envd_unary_error(r, ERROR_NOT_A_TTY, 400, "process %d has no terminal (start it with pty)",
                                 p->pid);
        else if (k < 0)
                http_respond_error(r, ERROR_INTERNAL, "cannot resize the terminal of process %d", p->pid);
        else
                connect_respond(r, NULL);
}
