/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "proxy/proxy.h"
#include "core/log.h"
#include "macro.h"
#include "core/util.h"
#include "egress/egress.h"
#include "sandbox/sandbox.h"

/* The native /v1 API (spaced/API.md): a table of routes, and the handlers for templates, sandboxes and
 * operations. Handlers run on the event loop; lifecycle work goes to operations. */

#define SEGMENTS_MAX 8

static void get_version(Request *r, const RouteArgs *a);
static void get_sandboxes(Request *r, const RouteArgs *a);
static void post_sandboxes(Request *r, const RouteArgs *a);
static void get_sandbox(Request *r, const RouteArgs *a);
static void delete_sandbox(Request *r, const RouteArgs *a);
static void get_operation(Request *r, const RouteArgs *a);
static void delete_operation(Request *r, const RouteArgs *a);

/* Every route the daemon serves; tests/unit/test-openapi.c checks this table against openapi.json. */
const Route api_routes[] = {
        { "GET", "/v1/version", get_version },
        { "GET", "/v1/templates", api_get_templates },
        { "POST", "/v1/templates/import", api_post_template_import, .begin = api_post_template_import_begin },
        { "POST", "/v1/templates/gc", api_post_templates_gc },
        /* before GET {ref}, which would take "seed/rootfs" as a reference (a template named NAME/rootfs is
         * reached with %2F) */
        { "GET", "/v1/templates/{ref}/rootfs", api_get_template_rootfs },
        { "GET", "/v1/templates/{ref}", api_get_template },
        { "DELETE", "/v1/templates/{ref}", api_delete_template },
        { "POST", "/v1/templates/{ref}/tag", api_post_template_tag },
        { "GET", "/v1/sandboxes", get_sandboxes },
        { "POST", "/v1/sandboxes", post_sandboxes },
        { "GET", "/v1/sandboxes/{id}", get_sandbox },
        { "DELETE", "/v1/sandboxes/{id}", delete_sandbox },
        { "GET", "/v1/operations/{op}", get_operation },
        { "DELETE", "/v1/operations/{op}", delete_operation },
        { "POST", "/v1/sandboxes/{id}/pause", api_post_pause },
        { "POST", "/v1/sandboxes/{id}/resume", api_post_resume },
        { "POST", "/v1/sandboxes/{id}/suspend", api_post_suspend },
        { "POST", "/v1/sandboxes/{id}/wake", api_post_wake },
        { "POST", "/v1/sandboxes/{id}/stop", api_post_stop },
        { "POST", "/v1/sandboxes/{id}/start", api_post_start },
        { "POST", "/v1/sandboxes/{id}/checkpoints", api_post_checkpoints },
        { "POST", "/v1/sandboxes/{id}/restore", api_post_restore },
        { "POST", "/v1/sandboxes/{id}/fork", api_post_sandbox_fork },
        { "GET", "/v1/pools", api_get_pools },
        { "PUT", "/v1/pools/{template}", api_put_pool },
        { "GET", "/v1/checkpoints", api_get_checkpoints },
        { "GET", "/v1/checkpoints/{cp}", api_get_checkpoint },
        { "DELETE", "/v1/checkpoints/{cp}", api_delete_checkpoint },
        { "POST", "/v1/checkpoints/{cp}/fork", api_post_checkpoint_fork },
        { "POST", "/v1/sandboxes/{id}/processes", api_post_processes },
        { "POST", "/v1/sandboxes/{id}/processes/{pid}/stdin", api_post_stdin, .begin = api_stdin_begin },
        { "POST", "/v1/sandboxes/{id}/processes/{pid}/close-stdin", api_post_close_stdin },
        { "POST", "/v1/sandboxes/{id}/processes/{pid}/signal", api_post_signal },
        { "GET", "/v1/sandboxes/{id}/processes", api_get_processes },
        { "GET", "/v1/sandboxes/{id}/processes/{pid}", api_get_process },
        { "GET", "/v1/sandboxes/{id}/processes/{pid}/stream", api_get_process_stream },
        { "GET", "/v1/sandboxes/{id}/processes/{pid}/logs", api_get_process_logs },
        { "POST", "/v1/sandboxes/{id}/processes/{pid}/resize", api_post_resize },
        { "POST", "/v1/sandboxes/{id}/sessions", api_post_sessions },
        { "GET", "/v1/sandboxes/{id}/sessions/{sid}/stream", api_get_session_stream, .auth = ROUTE_AUTH_TOKEN },
        { "POST", "/v1/sandboxes/{id}/sessions/{sid}/token", api_post_session_token },
        { "GET", "/v1/openapi.json", api_get_openapi, .auth = ROUTE_AUTH_NONE },
        { "GET", "/v1/info", api_get_info },
        { "POST", "/v1/daemon/reload", api_post_daemon_reload },
        { "GET", "/v1/operations", api_get_operations },
        { "POST", "/v1/keys", api_post_keys },
        { "GET", "/v1/keys", api_get_keys },
        { "DELETE", "/v1/keys/{key}", api_delete_key },
        { "GET", "/v1/secrets", api_get_secrets },
        { "GET", "/v1/secrets/{secret}", api_get_secret },
        { "PUT", "/v1/secrets/{secret}", api_put_secret },
        { "DELETE", "/v1/secrets/{secret}", api_delete_secret },
        { "GET", "/v1/volumes", api_get_volumes },
        { "POST", "/v1/volumes", api_post_volumes },
        { "GET", "/v1/volumes/{volume}", api_get_volume },
        { "DELETE", "/v1/volumes/{volume}", api_delete_volume },
        { "GET", "/v1/volumes/{volume}/files", api_get_volume_file },
        { "PUT", "/v1/volumes/{volume}/files", api_put_volume_file, api_put_volume_file_begin },
        { "DELETE", "/v1/volumes/{volume}/files", api_delete_volume_file },
        { "GET", "/v1/volumes/{volume}/files/stat", api_get_volume_stat },
        { "GET", "/v1/volumes/{volume}/files/list", api_get_volume_list },
        { "POST", "/v1/volumes/{volume}/files/mkdir", api_post_volume_mkdir },
        { "POST", "/v1/volumes/{volume}/files/attrs", api_post_volume_attrs },
        { "POST", "/v1/volumes/{volume}/files/move", api_post_volume_move },
        { "GET", "/v1/sandboxes/{id}/files", api_get_file },
        { "PUT", "/v1/sandboxes/{id}/files", api_put_file, .begin = api_put_file_begin },
        { "DELETE", "/v1/sandboxes/{id}/files", api_delete_file },
        { "GET", "/v1/sandboxes/{id}/files/stat", api_get_file_stat },
        { "GET", "/v1/sandboxes/{id}/files/list", api_get_file_list },
        { "POST", "/v1/sandboxes/{id}/files/mkdir", api_post_file_mkdir },
        { "POST", "/v1/sandboxes/{id}/files/move", api_post_file_move },
        { "POST", "/v1/sandboxes/{id}/files/symlink", api_post_file_symlink },
        { "POST", "/v1/sandboxes/{id}/files/attrs", api_post_file_attrs },
        { "GET", "/v1/egress/profiles", api_get_egress_profiles },
        { "GET", "/v1/egress/profiles/{name}", api_get_egress_profile },
        { "POST", "/v1/sandboxes/{id}/egress/test", api_post_egress_test },
        { "GET", "/v1/sandboxes/{id}/egress/log", api_get_egress_log },
        /* the proxy before DELETE .../ports/{port}: {path} needs the '/' after the port, which that has not */
        { "GET", "/v1/sandboxes/{id}/ports/{port}/{path}", api_proxy },
        { "HEAD", "/v1/sandboxes/{id}/ports/{port}/{path}", api_proxy },
        { "POST", "/v1/sandboxes/{id}/ports/{port}/{path}", api_proxy },
        { "PUT", "/v1/sandboxes/{id}/ports/{port}/{path}", api_proxy },
        { "PATCH", "/v1/sandboxes/{id}/ports/{port}/{path}", api_proxy },
        { "DELETE", "/v1/sandboxes/{id}/ports/{port}/{path}", api_proxy },
        { "OPTIONS", "/v1/sandboxes/{id}/ports/{port}/{path}", api_proxy },
        { "POST", "/v1/sandboxes/{id}/ports", api_post_ports },
        { "GET", "/v1/sandboxes/{id}/ports", api_get_ports },
        { "DELETE", "/v1/sandboxes/{id}/ports/{port}", api_delete_port },
        { "GET", "/v1/ports", api_get_all_ports },
        {},
};

static void get_version(Request *r, const RouteArgs *a) {
        cJSON *o = cJSON_CreateObject();
        Manager *m = http_manager(r->http);

        cJSON_AddStringToObject(o, "version", PACKAGE_VERSION);
        cJSON_AddStringToObject(o, "api", "v1");
        cJSON_AddStringToObject(o, "accel", m->accel == VM_ACCEL_KVM ? "kvm" : "tcg");
        cJSON_AddStringToObject(o, "socket", m->socket_path);
        cJSON_AddNumberToObject(o, "pid", getpid());
        cJSON_AddNumberToObject(o, "memory_limit_mib", (double) m->memory_limit_mib);
        cJSON_AddNumberToObject(o, "memory_in_use_mib", (double) manager_memory_in_use(m));
        http_respond_json(r, 200, o);
}

static void get_sandboxes(Request *r, const RouteArgs *a) {
        cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "sandboxes");

        for (Sandbox *s = http_manager(r->http)->sandboxes; s; s = s->next)
                if (!s->pooled)
                        cJSON_AddItemToArray(list, sandbox_to_json(s));
        http_respond_json(r, 200, o);
}

/* Woken by the operation or the deadline: answer with what it has come to, or wait on. */
static void wait_continue(Request *r, void *userdata) {
        respond_wait_result(r);
}

void respond_wait_result(Request *r) {
        Manager *m = http_manager(r->http);
        Operation *op = operation_find(m, r->wait_op);
        bool done;
        cJSON *o;

        if (!op) {
                http_respond_error(r, ERROR_OPERATION_NOT_FOUND, "operation %s is gone", r->wait_op);
                return;
        }
        done = op->state == OPERATION_SUCCEEDED || op->state == OPERATION_FAILED;
        if (!done && now_usec_monotonic() < r->deadline &&
            http_wait_on(r, &op->waiters, r->deadline, wait_continue, NULL) >= 0)
                return;
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
        if (r->wait_kind == WAIT_CREATE || r->wait_kind == WAIT_LIFECYCLE) {
                Sandbox *s = sandbox_find_by_id(m, op->sandbox_id);
                if (s)
                        cJSON_AddItemToObject(o, "sandbox", sandbox_to_json(s));
        }
        http_respond_json(r, done ? (r->wait_kind == WAIT_CREATE ? 201 : 200) : 202, o);
}

void start_wait(Request *r, Operation *op, int kind, unsigned wait) {
        memcpy(r->wait_op, op->id, sizeof r->wait_op);
        r->wait_kind = kind;
        r->deadline = now_usec_monotonic() + (uint64_t) wait * 1000000ULL;
        respond_wait_result(r);
}

static void post_sandboxes(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "template", "name", "vcpu", "memory_mib", "disk_mib", "env",
                                              "metadata", "timeout", "on_timeout", "idle_timeout", "egress_profiles",
                                              "egress_allow", "egress_deny", "volume_mounts", NULL };
        _cleanup_strv_free_ char **env = NULL, **egress_profiles = NULL, **egress_header = NULL, **egress_allow = NULL,
                                 **egress_deny = NULL, **mounts = NULL;
        _cleanup_free_ char *metadata = NULL;
        Error e = {};
        const char *tmpl = "minimal", *name = NULL;
        uint64_t vcpu = 0, memory = 0, disk = 0, ttl = 0, idle = 0;
        bool idle_set = false;
        int on_expiry = EXPIRY_REMOVE;
        Manager *m = http_manager(r->http);
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
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "template must be a non-empty string");
                        goto out;
                }
                tmpl = v->valuestring;
        }
        v = cJSON_GetObjectItemCaseSensitive(o, "name");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsString(v)) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "name must be a string");
                        goto out;
                }
                name = v->valuestring;
        }
        if (get_uint_field(r, o, "vcpu", 1, m->host_cpus, &vcpu) < 0 ||
            get_uint_field(r, o, "memory_mib", MEMORY_MIB_MIN, MEMORY_MIB_MAX, &memory) < 0 ||
            get_uint_field(r, o, "disk_mib", 64, DISK_MIB_MAX, &disk) < 0 || get_env_field(r, o, &env) < 0 ||
            get_metadata_field(r, o, "metadata", &metadata) < 0 ||
            get_uint_field(r, o, "timeout", 0, 10ULL * 365 * 86400, &ttl) < 0)
                goto out;
        q = get_uint_field(r, o, "idle_timeout", 0, 10ULL * 365 * 86400, &idle);
        if (q < 0)
                goto out;
        idle_set = q > 0;
        if (get_strv_field(r, o, "egress_profiles", EGRESS_PROFILES_MAX, &egress_profiles) < 0 ||
            get_strv_field(r, o, "egress_allow", EGRESS_RULES_MAX, &egress_allow) < 0 ||
            get_strv_field(r, o, "egress_deny", EGRESS_RULES_MAX, &egress_deny) < 0 ||
            api_egress_header(r, &egress_header) < 0)
                goto out;
        if (egress_profiles && egress_header) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                   "egress profiles came in the body and in X-Space-Egress-Profiles: give one");
                goto out;
        }
        if (api_volume_mounts_parse(r, cJSON_GetObjectItemCaseSensitive(o, "volume_mounts"), &mounts) < 0)
                goto out;
        v = cJSON_GetObjectItemCaseSensitive(o, "on_timeout");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsString(v) || (!streq(v->valuestring, "remove") && !streq(v->valuestring, "suspend") &&
                                           !streq(v->valuestring, "stop"))) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "on_timeout must be \"remove\", \"suspend\" or \"stop\"");
                        goto out;
                }
                on_expiry = streq(v->valuestring, "suspend") ? EXPIRY_SUSPEND
                          : streq(v->valuestring, "stop") ? EXPIRY_STOP : EXPIRY_REMOVE;
        }

        SandboxSpec spec = {
                .template_ref = tmpl,
                .name = name,
                .vcpu = (unsigned) vcpu,
                .memory_mib = memory,
                .disk_mib = disk,
                .env = env,
                .metadata = metadata,
                .egress_profiles = egress_profiles ?: egress_header,
                .egress_allow = egress_allow,
                .egress_deny = egress_deny,
                .volume_mounts = mounts,
                .ttl = (int64_t) ttl,
                .on_expiry = ttl > 0 || idle_set ? on_expiry : EXPIRY_REMOVE,
                .idle_timeout_set = idle_set,
                .idle_timeout = (int64_t) idle,
        };
        q = sandbox_create(m, &spec, &op, &s, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                error_done(&e);
                goto out;
        }
        start_wait(r, op, WAIT_CREATE, wait);
out:
        cJSON_Delete(o);
}

static void get_sandbox(Request *r, const RouteArgs *a) {
        Sandbox *s;

        if (resolve_sandbox(r, a->arg[0], &s) >= 0)
                http_respond_json(r, 200, sandbox_to_json(s));
}

static void delete_sandbox(Request *r, const RouteArgs *a) {
        const char *ref = a->arg[0];
        Error e = {};
        const char *force = http_query(r, "force");
        Operation *op;
        Sandbox *s;
        unsigned wait;
        int q;

        if (parse_wait(r, &wait) < 0 || resolve_sandbox(r, ref, &s) < 0)
                return;
        q = sandbox_delete_start(http_manager(r->http), s, force && (streq(force, "1") || streq(force, "true")), &op, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                error_done(&e);
                return;
        }
        start_wait(r, op, WAIT_DELETE, wait);
}

static void get_operation(Request *r, const RouteArgs *a) {
        const char *id = a->arg[0];
        Operation *op = operation_find(http_manager(r->http), id);
        unsigned wait;

        if (parse_wait(r, &wait) < 0)
                return;
        if (!op) {
                http_respond_error(r, ERROR_OPERATION_NOT_FOUND, "no operation '%s'", id);
                return;
        }
        start_wait(r, op, WAIT_OPERATION, wait);
}

/* Cancel: the worker stops at its next block and the operation ends failed with `cancelled`; ?wait= waits for
 * that. A finished operation, or one that cannot stop early, is a 409. */
static void delete_operation(Request *r, const RouteArgs *a) {
        const char *id = a->arg[0];
        Operation *op = operation_find(http_manager(r->http), id);
        _cleanup_(error_done) Error e = {};
        unsigned wait;

        if (parse_wait(r, &wait) < 0)
                return;
        if (!op) {
                http_respond_error(r, ERROR_OPERATION_NOT_FOUND, "no operation '%s'", id);
                return;
        }
        if (operation_cancel(op, &e) < 0) {
                http_respond_error(r, e.code, "%s", error_message(&e));
                return;
        }
        log_info("operation %s (%s): cancel requested", op->id, op->kind);
        if (wait > 0) {
                start_wait(r, op, WAIT_OPERATION, wait);
                return;
        }
        http_respond_json(r, 202, operation_to_json(op));
}
