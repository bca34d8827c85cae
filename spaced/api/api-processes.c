/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "http/sse.h"
#include "json-util.h"
#include "macro.h"
#include "channel/process.h"
#include "user.h"
#include "sandbox/sandbox.h"
#include "template/template.h"

/* /v1/sandboxes/{id}/processes: exec with an SSE stream, list, attach, logs, stdin, signals, resize. */

#define PTY_SIZE_MAX 65535

int parse_exec_spec(Request *r, cJSON *o, bool stdin_default, ExecSpec *spec, char ***ret_argv, char ***ret_env) {
        _cleanup_strv_free_ char **env = NULL, **argv = NULL;
        uint64_t timeout = 0, rows = 0, cols = 0;
        cJSON *v;
        int q;

        *spec = (ExecSpec) { .want_stdin = stdin_default };
        v = cJSON_GetObjectItemCaseSensitive(o, "argv");
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 || cJSON_GetArraySize(v) > ARGV_MAX) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "argv must be a non-empty array of strings (at most %d)",
                                   ARGV_MAX);
                return -EINVAL;
        }
        q = json_array_to_strv(v, &argv);
        if (q == -ENOMEM)
                return q;
        if (q < 0) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "argv entries must be strings");
                return -EINVAL;
        }
        if (!*argv[0]) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "argv[0] must not be empty");
                return -EINVAL;
        }
        if (get_env_field(r, o, &env) < 0 || get_uint_field(r, o, "timeout", 0, 365ULL * 86400, &timeout) < 0 ||
            get_uint_field(r, o, "rows", 1, PTY_SIZE_MAX, &rows) < 0 ||
            get_uint_field(r, o, "cols", 1, PTY_SIZE_MAX, &cols) < 0 ||
            get_bool_field(r, o, "stdin", &spec->want_stdin) < 0 || get_bool_field(r, o, "pty", &spec->pty) < 0)
                return -EINVAL;
        v = cJSON_GetObjectItemCaseSensitive(o, "cwd");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsString(v) || v->valuestring[0] != '/') {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "cwd must be an absolute path");
                        return -EINVAL;
                }
                spec->cwd = v->valuestring;
        }
        v = cJSON_GetObjectItemCaseSensitive(o, "user");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsString(v) || space_user_spec_parse(v->valuestring, NULL) < 0) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "user must be NAME or UID, optionally followed by :GROUP or :GID (at most "
                                           "%d characters of A-Z a-z 0-9 . _ -)%s%.64s%s",
                                           SPACE_USER_SPEC_MAX, cJSON_IsString(v) ? ", not '" : "",
                                           cJSON_IsString(v) ? v->valuestring : "", cJSON_IsString(v) ? "'" : "");
                        return -EINVAL;
                }
                spec->user = v->valuestring;
        }
        spec->rows = (unsigned) rows;
        spec->cols = (unsigned) cols;
        spec->timeout_sec = timeout;
        spec->argv = argv;
        spec->env = env;
        *ret_argv = TAKE_PTR(argv);
        *ret_env = TAKE_PTR(env);
        return 0;
}

static int require_running(Request *r, Sandbox *s) {
        if (s->state == SANDBOX_RUNNING)
                return 0;
        http_respond_error(r, ERROR_SANDBOX_NOT_RUNNING, "sandbox %s is %s, not running%s%s", s->id,
                           sandbox_state_to_string(s->state), s->error ? ": " : "", s->error ?: "");
        return -EBUSY;
}

static int sse_format(void *userdata, SpaceBuf *buf, const ProcessEvent *e) {
        return sse_format_event(buf, e->id, e->name, e->data, e->n, event_type_is_data(e->type));
}

static ssize_t client_read(void *userdata, char *buf, size_t max) {
        return api_stream_result(process_client_read(userdata, buf, max));
}

/* The request of a stream ended. */
static void client_detach(void *userdata, Request *r) {
        process_client_close(userdata);
}

int api_process_attach(Request *r, Process *p, uint64_t after_id, bool follow, bool release) {
        ChannelWaiter w = api_request_waiter(r);
        ProcessClient *c;
        int q;

        q = process_client_new(p, after_id, follow, sse_format, NULL, &w, &c);
        if (q == -EMFILE)
                http_respond_error(r, ERROR_TOO_MANY_STREAMS,
                                   "sandbox %s has %u event streams open (attach, logs), the limit; close one first",
                                   p->sandbox_id, PROCESS_CLIENTS_MAX);
        if (q < 0)
                return q;
        r->stream = (HttpStream) { .read = client_read, .detach = client_detach, .userdata = c };
        q = sse_respond(r);
        if (q == -ENOMEM) {
                /* no response was made: nothing will read from the client */
                r->stream = (HttpStream) {};
                process_client_free(c);
                return q;
        }
        process_client_start(c, release);
        return q;
}

/* Starts the process and answers with its SSE stream. */
static int exec_process(Request *r, Sandbox *s, const ExecSpec *spec) {
        _cleanup_(error_done) Error err = {};
        Process *p;
        int q;

        q = process_exec(s, spec, &p, &err);
        if (q < 0) {
                respond_error_or(r, &err, "cannot start the process");
                return q;
        }
        q = api_process_attach(r, p, 0, true, false);
        if (q < 0)
                process_fail(p, ERROR_INTERNAL, "cannot answer the request");
        return q;
}

/* The rest of a POST /processes, with the sandbox awake. */
static void post_processes_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        static const char *const fields[] = { "argv", "env", "cwd", "stdin", "timeout", "pty", "rows", "cols", "user",
                                              NULL };
        _cleanup_strv_free_ char **env = NULL, **argv = NULL;
        ExecSpec spec;
        cJSON *o;

        o = parse_body_object(r, fields);
        if (!o)
                return;
        if (parse_exec_spec(r, o, false, &spec, &argv, &env) >= 0) {
                if (!spec.cwd)
                        spec.cwd = template_workdir(http_manager(r->http), s); /* the template's default */
                if (!spec.user)
                        spec.user = template_default_user(http_manager(r->http), s);
                if (require_running(r, s) >= 0 && exec_process(r, s, &spec) < 0 && !r->responded)
                        http_respond_error(r, ERROR_INTERNAL, "cannot start the process");
        }
        if (!r->responded && !r->suspended)
                http_respond_error(r, ERROR_INTERNAL, "cannot start the process");
        cJSON_Delete(o);
}

void api_post_processes(Request *r, const RouteArgs *a) {
        Sandbox *s;

        if (resolve_sandbox(r, a->arg[0], &s) >= 0)
                api_when_awake(r, s, a, post_processes_awake);
}

static int parse_pid(Request *r, const char *s, int *ret) {
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end || v <= 0 || v > INT_MAX) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "'%s' is not a process id", s);
                return -EINVAL;
        }
        *ret = (int) v;
        return 0;
}

int parse_last_event_id(Request *r, uint64_t *ret) {
        const char *v = http_header(r, "Last-Event-ID") ?: http_query(r, "last_event_id");
        char *end;
        unsigned long long n;

        *ret = 0;
        if (!v || !*v)
                return 0;
        errno = 0;
        n = strtoull(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-') {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "Last-Event-ID must be an event id (a number), not '%s'",
                                   v);
                return -EINVAL;
        }
        *ret = n;
        return 0;
}

/* Any process, live or finished. */
static Process *route_any(Request *r, const RouteArgs *a, Sandbox **ret_s) {
        Sandbox *s;
        Process *p;
        int pid;

        if (resolve_sandbox(r, a->arg[0], &s) < 0 || parse_pid(r, a->arg[1], &pid) < 0)
                return NULL;
        p = process_get(http_manager(r->http), s, pid);
        if (!p)
                http_respond_error(r, ERROR_PROCESS_NOT_FOUND, "no process %d in sandbox %s", pid, s->id);
        if (ret_s)
                *ret_s = s;
        return p;
}

/* A process that still runs in the guest: k runs with its sandbox awake (the pid is checked before). */
static void with_live(Request *r, const RouteArgs *a, ApiAwake k) {
        Sandbox *s;
        int pid;

        if (resolve_sandbox(r, a->arg[0], &s) >= 0 && parse_pid(r, a->arg[1], &pid) >= 0)
                api_when_awake(r, s, a, k);
}

/* In k: the process of with_live(), or NULL when it answered. */
static Process *live_process(Request *r, Sandbox *s, const RouteArgs *a) {
        Process *p;
        int pid;

        if (parse_pid(r, a->arg[1], &pid) < 0)
                return NULL;
        p = process_find_by_pid(s, pid);
        if (!p)
                http_respond_error(r, ERROR_PROCESS_NOT_FOUND, "no running process %d in sandbox %s", pid, s->id);
        return p;
}

void api_get_processes(Request *r, const RouteArgs *a) {
        ProcessRecord *recs = NULL;
        cJSON *o, *list;
        Sandbox *s;
        size_t n = 0;
        int q;

        if (resolve_sandbox(r, a->arg[0], &s) < 0)
                return;
        q = store_load_processes(http_manager(r->http)->store, s->id, NULL, &recs, &n);
        if (q < 0) {
                http_respond_error(r, ERROR_INTERNAL, "cannot read the process table: %s", strerror(-q));
                return;
        }
        o = cJSON_CreateObject();
        list = cJSON_AddArrayToObject(o, "processes");
        for (size_t i = 0; i < n; i++) {
                cJSON_AddItemToArray(list, process_record_to_json(&recs[i]));
                process_record_done(&recs[i]);
        }
        free(recs);
        http_respond_json(r, 200, o);
}

void api_get_process(Request *r, const RouteArgs *a) {
        Process *p = route_any(r, a, NULL);

        if (!p)
                return;
        http_respond_json(r, 200, process_to_json(p));
        (void) process_maybe_free(p);
}

void api_get_process_stream(Request *r, const RouteArgs *a) {
        Process *p;
        uint64_t after;

        if (parse_last_event_id(r, &after) < 0 || !(p = route_any(r, a, NULL)))
                return;
        if (api_process_attach(r, p, after, true, true) < 0 && !r->responded)
                http_respond_error(r, ERROR_INTERNAL, "cannot attach");
        (void) process_maybe_free(p);
}

void api_get_process_logs(Request *r, const RouteArgs *a) {
        const char *f = http_query(r, "follow");
        bool follow = f && (streq(f, "1") || streq(f, "true"));
        Process *p;
        uint64_t after;

        if (parse_last_event_id(r, &after) < 0 || !(p = route_any(r, a, NULL)))
                return;
        if (api_process_attach(r, p, after, follow, false) < 0 && !r->responded)
                http_respond_error(r, ERROR_INTERNAL, "cannot read the logs");
        (void) process_maybe_free(p);
}

static void close_stdin_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        Process *p = live_process(r, s, a);

        if (!p)
                return;
        (void) process_close_stdin(p);
        http_respond_empty(r, 204);
}

void api_post_close_stdin(Request *r, const RouteArgs *a) {
        with_live(r, a, close_stdin_awake);
}

static void signal_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        static const char *const fields[] = { "signal", NULL };
        Process *p = live_process(r, s, a);
        uint64_t sig = 15;
        cJSON *o;

        if (!p || !(o = parse_body_object(r, fields)))
                return;
        if (get_uint_field(r, o, "signal", 1, 64, &sig) >= 0) {
                if (process_signal(p, (int) sig) < 0)
                        http_respond_error(r, ERROR_PROCESS_NOT_RUNNING, "the process is not running (yet)");
                else
                        http_respond_empty(r, 204);
        }
        cJSON_Delete(o);
}

void api_post_signal(Request *r, const RouteArgs *a) {
        with_live(r, a, signal_awake);
}

static void resize_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        static const char *const fields[] = { "rows", "cols", NULL };
        Process *p = live_process(r, s, a);
        uint64_t rows = 0, cols = 0;
        cJSON *o;
        int q;

        if (!p || !(o = parse_body_object(r, fields)))
                return;
        if (!cJSON_GetObjectItemCaseSensitive(o, "rows") || !cJSON_GetObjectItemCaseSensitive(o, "cols"))
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "rows and cols are required");
        else if (get_uint_field(r, o, "rows", 1, PTY_SIZE_MAX, &rows) >= 0 &&
                 get_uint_field(r, o, "cols", 1, PTY_SIZE_MAX, &cols) >= 0) {
                q = process_resize(p, (unsigned) rows, (unsigned) cols);
                if (q == -ENOTTY)
                        http_respond_error(r, ERROR_NOT_A_TTY, "process %d has no terminal (start it with pty)",
                                           p->pid);
                else if (q < 0)
                        http_respond_error(r, ERROR_PROCESS_NOT_RUNNING, "the process is not running");
                else
                        http_respond_empty(r, 204);
        }
        cJSON_Delete(o);
}

void api_post_resize(Request *r, const RouteArgs *a) {
        with_live(r, a, resize_awake);
}

/* A stdin upload: the process is looked up by pid for every chunk (it may end meanwhile); `waiting` is set
 * only while the request waits for credit. */
typedef struct StdinUpload {
        Manager *manager;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        int pid;
        Process *waiting;
        ChannelWaiter waiter;
} StdinUpload;

static size_t stdin_write(void *userdata, Request *r, const char *data, size_t n) {
        StdinUpload *u = userdata;
        Sandbox *s;
        Process *p;
        ssize_t k;

        if (u->waiting)
                process_stdin_unwait(TAKE_PTR(u->waiting), &u->waiter);
        s = sandbox_find_by_id(u->manager, u->sandbox_id);
        p = s && u->pid > 0 ? process_find_by_pid(s, u->pid) : NULL;
        if (!p || p->stdin_closed) {
                r->upload_failed = true;
                return n;
        }
        k = process_write_stdin(p, data, n, &u->waiter);
        if (k < 0) {
                /* The process is gone: swallow the rest, the response says what happened. */
                r->upload_failed = true;
                return n;
        }
        if ((size_t) k < n) {
                u->waiting = p;
                http_suspend(r);
        }
        return (size_t) k;
}

static void stdin_detach(void *userdata, Request *r) {
        StdinUpload *u = userdata;

        if (u->waiting)
                process_stdin_unwait(u->waiting, &u->waiter);
        free(u);
}

/* r's body goes to the stdin of the process pid of s as credit allows. */
static int stdin_upload_begin(Request *r, Sandbox *s, int pid) {
        StdinUpload *u = calloc(1, sizeof *u);

        if (!u)
                return -ENOMEM;
        u->manager = s->manager;
        memcpy(u->sandbox_id, s->id, sizeof u->sandbox_id);
        u->pid = pid;
        u->waiter = api_request_waiter(r);
        r->upload = (HttpUpload) { .write = stdin_write, .detach = stdin_detach, .userdata = u };
        return 0;
}

/* Called when the request starts, before its body: stdin uploads stream, so find the process now. */
void api_stdin_begin(Request *r, const RouteArgs *a) {
        Sandbox *s;

        if (sandbox_resolve(http_manager(r->http), a->arg[0], &s) < 0) {
                r->upload_failed = true;
                return;
        }
        if (stdin_upload_begin(r, s, atoi(a->arg[1])) < 0)
                r->upload_failed = true;
}

void api_post_stdin(Request *r, const RouteArgs *a) {
        if (r->upload_failed)
                http_respond_error(r, ERROR_STDIN_CLOSED,
                                   "the process is not running or its stdin is closed (was it started with stdin?)");
        else
                http_respond_empty(r, 204);
}
