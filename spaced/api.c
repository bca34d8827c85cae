/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "log.h"
#include "macro.h"
#include "process.h"

/* The native /v1 API (spaced/API.md). Handlers run on the event loop; lifecycle work goes to operations. */

#define WAIT_MAX_SEC 3600
#define MEMORY_MIB_MIN 64
#define MEMORY_MIB_MAX 65536
#define DISK_MIB_MAX 1048576
#define ARGV_MAX 4096

enum {
        WAIT_NONE,
        WAIT_CREATE,
        WAIT_DELETE,
        WAIT_OPERATION,
};

#define SEGMENTS_MAX 8

typedef struct Path {
        char buf[2048];
        char *seg[SEGMENTS_MAX];
        unsigned n;
} Path;

static int path_split(const char *url, Path *p) {
        char *save = NULL, *tok;

        if (strlen(url) >= sizeof p->buf)
                return -ENAMETOOLONG;
        strcpy(p->buf, url);
        p->n = 0;
        for (tok = strtok_r(p->buf, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
                if (p->n == SEGMENTS_MAX)
                        return -E2BIG;
                p->seg[p->n++] = tok;
        }
        return 0;
}

static bool path_is(const Path *p, unsigned n, ...) {
        va_list ap;
        bool match = p->n == n;

        va_start(ap, n);
        for (unsigned i = 0; match && i < n; i++) {
                const char *want = va_arg(ap, const char *);
                if (want && !streq(want, p->seg[i]))
                        match = false;
        }
        va_end(ap);
        return match;
}

static Manager *M(Request *r) {
        return http_manager(r->http);
}

/* ---- JSON views ---- */

static cJSON *sandbox_to_json(Sandbox *s) {
        cJSON *o = cJSON_CreateObject(), *env = cJSON_CreateObject();
        char when[32];

        cJSON_AddStringToObject(o, "id", s->id);
        if (s->name)
                cJSON_AddStringToObject(o, "name", s->name);
        else
                cJSON_AddNullToObject(o, "name");
        cJSON_AddStringToObject(o, "template", s->template_name);
        cJSON_AddStringToObject(o, "template_digest", s->template_digest ?: "");
        cJSON_AddStringToObject(o, "state", sandbox_state_to_string(s->state));
        cJSON_AddNumberToObject(o, "vcpu", s->vcpu);
        cJSON_AddNumberToObject(o, "memory_mib", (double) s->memory_mib);
        cJSON_AddNumberToObject(o, "disk_mib", (double) s->disk_mib);
        for (char **e = s->env; e && *e; e++) {
                const char *eq = strchr(*e, '=');
                _cleanup_free_ char *k = eq ? strndup(*e, (size_t) (eq - *e)) : NULL;
                if (k)
                        cJSON_AddStringToObject(env, k, eq + 1);
        }
        cJSON_AddItemToObject(o, "env", env);
        format_rfc3339(s->created_at, when);
        cJSON_AddStringToObject(o, "created_at", when);
        cJSON_AddNumberToObject(o, "qemu_pid", s->qemu_pid);
        cJSON_AddStringToObject(o, "accel", s->manager->accel == VM_ACCEL_KVM ? "kvm" : "tcg");
        if (s->error)
                cJSON_AddStringToObject(o, "error", s->error);
        else
                cJSON_AddNullToObject(o, "error");
        return o;
}

static cJSON *operation_to_json(Operation *op) {
        cJSON *o = cJSON_CreateObject();
        char when[32];

        cJSON_AddStringToObject(o, "id", op->id);
        cJSON_AddStringToObject(o, "kind", op->kind);
        cJSON_AddStringToObject(o, "state", operation_state_to_string(op->state));
        if (op->sandbox_id[0])
                cJSON_AddStringToObject(o, "sandbox_id", op->sandbox_id);
        else
                cJSON_AddNullToObject(o, "sandbox_id");
        format_rfc3339(op->created_at, when);
        cJSON_AddStringToObject(o, "created_at", when);
        if (op->finished_at) {
                format_rfc3339(op->finished_at, when);
                cJSON_AddStringToObject(o, "finished_at", when);
        } else
                cJSON_AddNullToObject(o, "finished_at");
        if (op->error.code) {
                cJSON *e = cJSON_AddObjectToObject(o, "error");
                cJSON_AddStringToObject(e, "code", op->error.code);
                cJSON_AddStringToObject(e, "message", op->error.message ?: op->error.code);
        } else
                cJSON_AddNullToObject(o, "error");
        return o;
}

static unsigned status_for_code(const char *code) {
        static const struct {
                const char *code;
                unsigned status;
        } table[] = {
                { "invalid_argument", 400 },     { "template_not_found", 404 }, { "sandbox_not_found", 404 },
                { "operation_not_found", 404 },  { "process_not_found", 404 },  { "ambiguous_reference", 409 },
                { "name_in_use", 409 },          { "sandbox_busy", 409 },       { "sandbox_not_running", 409 },
                { "insufficient_memory", 507 },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(table[i].code, code))
                        return table[i].status;
        return 500;
}

static void respond_operation_error(Request *r, const OperationError *e, int err) {
        if (e->code)
                http_respond_error(r, status_for_code(e->code), e->code, "%s", e->message ?: e->code);
        else
                http_respond_error(r, 500, "internal", "%s", strerror(err < 0 ? -err : EIO));
}

/* ---- request parsing ---- */

static int parse_wait(Request *r, unsigned *ret) {
        const char *v = http_query(r, "wait");
        char *end;
        double d;

        *ret = 0;
        if (!v)
                return 0;
        errno = 0;
        d = strtod(v, &end);
        if (errno || end == v || *end || !(d >= 0) || d > WAIT_MAX_SEC) {
                http_respond_error(r, 400, "invalid_argument", "wait=%s: expected seconds from 0 to %d", v, WAIT_MAX_SEC);
                return -EINVAL;
        }
        *ret = (unsigned) ceil(d);
        return 0;
}

static cJSON *parse_body_object(Request *r, const char *const *allowed) {
        cJSON *o, *i;

        if (r->body.len == 0)
                return cJSON_CreateObject();
        o = cJSON_ParseWithLength((const char *) r->body.data, r->body.len);
        if (!o || !cJSON_IsObject(o)) {
                cJSON_Delete(o);
                http_respond_error(r, 400, "invalid_argument", "the request body is not a JSON object");
                return NULL;
        }
        cJSON_ArrayForEach(i, o) {
                bool ok = false;
                for (const char *const *a = allowed; *a; a++)
                        if (i->string && streq(i->string, *a))
                                ok = true;
                if (!ok) {
                        http_respond_error(r, 400, "invalid_argument", "unknown field '%s'", i->string ?: "?");
                        cJSON_Delete(o);
                        return NULL;
                }
        }
        return o;
}

/* Reads an optional integer field in [min, max]; responds and returns -EINVAL when it is bad. */
static int get_uint_field(Request *r, cJSON *o, const char *key, uint64_t min, uint64_t max, uint64_t *ret) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!v || cJSON_IsNull(v))
                return 0;
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double) min ||
            v->valuedouble > (double) max) {
                http_respond_error(r, 400, "invalid_argument", "%s must be a whole number from %llu to %llu", key,
                                   (unsigned long long) min, (unsigned long long) max);
                return -EINVAL;
        }
        *ret = (uint64_t) v->valuedouble;
        return 1;
}

static bool env_key_valid(const char *k) {
        if (!*k || strchr(k, '='))
                return false;
        return true;
}

/* env may be {"K": "V"} or ["K=V"]. */
static int get_env_field(Request *r, cJSON *o, char ***ret) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "env"), *i;
        char **env;
        size_t n = 0;

        *ret = NULL;
        if (!v || cJSON_IsNull(v))
                return 0;
        if ((!cJSON_IsObject(v) && !cJSON_IsArray(v)) || cJSON_GetArraySize(v) > SANDBOX_ENV_MAX) {
                http_respond_error(r, 400, "invalid_argument", "env must be an object of strings (at most %d)",
                                   SANDBOX_ENV_MAX);
                return -EINVAL;
        }
        env = calloc((size_t) cJSON_GetArraySize(v) + 1, sizeof(char *));
        if (!env)
                return -ENOMEM;
        cJSON_ArrayForEach(i, v) {
                char *e = NULL;
                if (cJSON_IsObject(v)) {
                        if (!cJSON_IsString(i) || !env_key_valid(i->string) || asprintf(&e, "%s=%s", i->string, i->valuestring) < 0)
                                e = NULL;
                } else if (cJSON_IsString(i) && strchr(i->valuestring, '=') && i->valuestring[0] != '=')
                        e = strdup(i->valuestring);
                if (!e) {
                        strv_free(env);
                        http_respond_error(r, 400, "invalid_argument",
                                           "env entries must be NAME=VALUE with a non-empty NAME");
                        return -EINVAL;
                }
                env[n++] = e;
        }
        *ret = env;
        return 1;
}

static int resolve_sandbox(Request *r, const char *ref, Sandbox **ret) {
        int q = sandbox_resolve(M(r), ref, ret);

        if (q == -ENOTUNIQ)
                http_respond_error(r, 409, "ambiguous_reference",
                                   "'%s' matches more than one sandbox id; give more characters", ref);
        else if (q < 0)
                http_respond_error(r, 404, "sandbox_not_found",
                                   "no sandbox '%s'; 'spacectl ls' lists them", ref);
        return q;
}

/* ---- handlers ---- */

static void get_version(Request *r) {
        cJSON *o = cJSON_CreateObject();
        Manager *m = M(r);

        cJSON_AddStringToObject(o, "version", PACKAGE_VERSION);
        cJSON_AddStringToObject(o, "api", "v1");
        cJSON_AddStringToObject(o, "accel", m->accel == VM_ACCEL_KVM ? "kvm" : "tcg");
        cJSON_AddStringToObject(o, "socket", m->socket_path);
        cJSON_AddNumberToObject(o, "pid", getpid());
        cJSON_AddNumberToObject(o, "memory_limit_mib", (double) m->memory_limit_mib);
        cJSON_AddNumberToObject(o, "memory_in_use_mib", (double) manager_memory_in_use(m));
        http_respond_json(r, 200, o);
}

static void get_templates(Request *r) {
        cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "templates");

        for (Template *t = M(r)->templates; t; t = t->next) {
                cJSON *j = cJSON_CreateObject();
                cJSON_AddStringToObject(j, "name", t->name);
                cJSON_AddStringToObject(j, "digest", t->digest);
                cJSON_AddNumberToObject(j, "size_bytes", (double) t->size_bytes);
                cJSON_AddNumberToObject(j, "vcpu", t->vcpu);
                cJSON_AddNumberToObject(j, "memory_mib", (double) t->memory_mib);
                cJSON_AddNumberToObject(j, "disk_mib", (double) t->disk_mib);
                cJSON_AddStringToObject(j, "description", t->description ?: "");
                cJSON_AddItemToArray(a, j);
        }
        http_respond_json(r, 200, o);
}

static void get_sandboxes(Request *r) {
        cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "sandboxes");

        for (Sandbox *s = M(r)->sandboxes; s; s = s->next)
                cJSON_AddItemToArray(a, sandbox_to_json(s));
        http_respond_json(r, 200, o);
}

static void respond_wait_result(Request *r) {
        Manager *m = M(r);
        Operation *op = operation_find(m, r->wait_op);
        bool done;
        cJSON *o;

        if (!op) {
                http_respond_error(r, 404, "operation_not_found", "operation %s is gone", r->wait_op);
                return;
        }
        done = op->state == OPERATION_SUCCEEDED || op->state == OPERATION_FAILED;
        if (!done && now_usec_monotonic() < r->deadline) {
                (void) http_wait_on(r, &op->waiters, r->deadline);
                return;
        }
        if (r->wait_kind == WAIT_OPERATION) {
                http_respond_json(r, 200, operation_to_json(op));
                return;
        }
        if (done && op->state == OPERATION_FAILED) {
                respond_operation_error(r, &op->error, -EIO);
                return;
        }
        o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "operation", operation_to_json(op));
        if (r->wait_kind == WAIT_CREATE) {
                Sandbox *s = sandbox_find_by_id(m, op->sandbox_id);
                if (s)
                        cJSON_AddItemToObject(o, "sandbox", sandbox_to_json(s));
        }
        http_respond_json(r, done ? (r->wait_kind == WAIT_CREATE ? 201 : 200) : 202, o);
}

static void start_wait(Request *r, Operation *op, int kind, unsigned wait) {
        memcpy(r->wait_op, op->id, sizeof r->wait_op);
        r->wait_kind = kind;
        r->deadline = now_usec_monotonic() + (uint64_t) wait * 1000000ULL;
        respond_wait_result(r);
}

static void post_sandboxes(Request *r) {
        static const char *const fields[] = { "template", "name", "vcpu", "memory_mib", "disk_mib", "env",
                                              "metadata", "timeout", NULL };
        _cleanup_strv_free_ char **env = NULL;
        OperationError e = {};
        const char *tmpl = "minimal", *name = NULL;
        uint64_t vcpu = 0, memory = 0, disk = 0;
        Manager *m = M(r);
        Operation *op;
        Sandbox *s;
        unsigned wait;
        cJSON *o, *v;
        int q;

        if (parse_wait(r, &wait) < 0)
                return;
        o = parse_body_object(r, fields);
        if (!o)
                return;
        v = cJSON_GetObjectItemCaseSensitive(o, "template");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsString(v) || !*v->valuestring) {
                        http_respond_error(r, 400, "invalid_argument", "template must be a non-empty string");
                        goto out;
                }
                tmpl = v->valuestring;
        }
        v = cJSON_GetObjectItemCaseSensitive(o, "name");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsString(v)) {
                        http_respond_error(r, 400, "invalid_argument", "name must be a string");
                        goto out;
                }
                name = v->valuestring;
        }
        if (get_uint_field(r, o, "vcpu", 1, m->host_cpus, &vcpu) < 0 ||
            get_uint_field(r, o, "memory_mib", MEMORY_MIB_MIN, MEMORY_MIB_MAX, &memory) < 0 ||
            get_uint_field(r, o, "disk_mib", 64, DISK_MIB_MAX, &disk) < 0 || get_env_field(r, o, &env) < 0)
                goto out;

        q = sandbox_create_start(m, tmpl, name, (unsigned) vcpu, memory, disk, env, &op, &s, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                operation_error_done(&e);
                goto out;
        }
        start_wait(r, op, WAIT_CREATE, wait);
out:
        cJSON_Delete(o);
}

static void delete_sandbox(Request *r, const char *ref) {
        OperationError e = {};
        const char *force = http_query(r, "force");
        Operation *op;
        Sandbox *s;
        unsigned wait;
        int q;

        if (parse_wait(r, &wait) < 0 || resolve_sandbox(r, ref, &s) < 0)
                return;
        q = sandbox_delete_start(M(r), s, force && (streq(force, "1") || streq(force, "true")), &op, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                operation_error_done(&e);
                return;
        }
        start_wait(r, op, WAIT_DELETE, wait);
}

static void get_operation(Request *r, const char *id) {
        Operation *op = operation_find(M(r), id);
        unsigned wait;

        if (parse_wait(r, &wait) < 0)
                return;
        if (!op) {
                http_respond_error(r, 404, "operation_not_found", "no operation '%s'", id);
                return;
        }
        start_wait(r, op, WAIT_OPERATION, wait);
}

static void post_processes(Request *r, Sandbox *s) {
        static const char *const fields[] = { "argv", "env", "cwd", "stdin", "timeout", NULL };
        _cleanup_strv_free_ char **env = NULL, **argv = NULL;
        ExecSpec spec = {};
        uint64_t timeout = 0;
        cJSON *o, *v, *i;
        size_t n = 0;

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

static void post_signal(Request *r, Process *p) {
        static const char *const fields[] = { "signal", NULL };
        uint64_t sig = 15;
        cJSON *o = parse_body_object(r, fields);

        if (!o)
                return;
        if (get_uint_field(r, o, "signal", 1, 64, &sig) >= 0) {
                if (process_signal(p, (int) sig) < 0)
                        http_respond_error(r, 409, "process_not_found", "the process is gone");
                else
                        http_respond_empty(r, 204);
        }
        cJSON_Delete(o);
}

void api_classify(Request *r) {
        Path p;
        Sandbox *s;

        if (!streq(r->method, "POST") || path_split(r->url, &p) < 0 ||
            !path_is(&p, 6, "v1", "sandboxes", NULL, "processes", NULL, "stdin"))
                return;
        r->kind = REQUEST_UPLOAD;
        if (sandbox_resolve(M(r), p.seg[2], &s) < 0) {
                r->upload_failed = true;
                return;
        }
        memcpy(r->upload_sandbox, s->id, sizeof r->upload_sandbox);
        r->upload_pid = atoi(p.seg[4]);
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
        s = sandbox_find_by_id(M(r), r->upload_sandbox);
        p = s && r->upload_pid > 0 ? process_find_by_pid(s, r->upload_pid) : NULL;
        if (!p || p->ended || p->stdin_closed) {
                r->upload_failed = true;
                return n;
        }
        return process_upload(p, r, data, n);
}

static void finish_upload(Request *r) {
        if (r->upload_failed)
                http_respond_error(r, 409, "stdin_closed",
                                   "the process is not running or its stdin is closed (was it started with stdin?)");
        else
                http_respond_empty(r, 204);
}

void api_route(Request *r) {
        Path p;
        Sandbox *s;
        Process *proc;
        bool get = streq(r->method, "GET"), post = streq(r->method, "POST"), del = streq(r->method, "DELETE");

        if (r->wait_op[0]) {
                respond_wait_result(r);
                return;
        }
        if (r->kind == REQUEST_UPLOAD) {
                finish_upload(r);
                return;
        }
        if (path_split(r->url, &p) < 0 || p.n < 2 || !streq(p.seg[0], "v1")) {
                http_respond_error(r, 404, "not_found", "no such route: %s %s", r->method, r->url);
                return;
        }
        if (path_is(&p, 2, "v1", "version") && get)
                return get_version(r);
        if (path_is(&p, 2, "v1", "templates") && get)
                return get_templates(r);
        if (path_is(&p, 2, "v1", "sandboxes")) {
                if (get)
                        return get_sandboxes(r);
                if (post)
                        return post_sandboxes(r);
        }
        if (path_is(&p, 3, "v1", "operations", NULL) && get)
                return get_operation(r, p.seg[2]);
        if (path_is(&p, 3, "v1", "sandboxes", NULL)) {
                if (get) {
                        if (resolve_sandbox(r, p.seg[2], &s) >= 0)
                                http_respond_json(r, 200, sandbox_to_json(s));
                        return;
                }
                if (del)
                        return delete_sandbox(r, p.seg[2]);
        }
        if (path_is(&p, 4, "v1", "sandboxes", NULL, "processes") && post) {
                if (resolve_sandbox(r, p.seg[2], &s) >= 0)
                        post_processes(r, s);
                return;
        }
        if (path_is(&p, 6, "v1", "sandboxes", NULL, "processes", NULL, NULL) && post) {
                if (resolve_sandbox(r, p.seg[2], &s) < 0 || !(proc = find_process(r, s, p.seg[4])))
                        return;
                if (streq(p.seg[5], "close-stdin")) {
                        (void) process_close_stdin(proc);
                        http_respond_empty(r, 204);
                        return;
                }
                if (streq(p.seg[5], "signal"))
                        return post_signal(r, proc);
        }
        http_respond_error(r, 404, "not_found", "no such route: %s %s", r->method, r->url);
}
