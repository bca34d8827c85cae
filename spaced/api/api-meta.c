/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "core/util.h"
#include "egress/egress.h"
#include "macro.h"
#include "sandbox/sandbox.h"

/* What the API says about itself and the daemon: the OpenAPI document, /v1/info, the list of operations,
 * and a reload of the configuration. */

#define OPERATIONS_LIST_MAX 500

void api_get_openapi(Request *r, const RouteArgs *a) {
        struct MHD_Response *resp;

        resp = MHD_create_response_from_buffer(openapi_json_len, (void *) openapi_json, MHD_RESPMEM_PERSISTENT);
        if (!resp) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        if (MHD_queue_response(r->connection, 200, resp) == MHD_YES)
                r->responded = true;
        MHD_destroy_response(resp);
}

/* The configuration in force: which file, when it was read, what it holds of egress, and what it changed that
 * takes a restart. */
static cJSON *config_to_json(const Manager *m) {
        cJSON *o = cJSON_CreateObject(), *restart;
        char when[32];

        cJSON_AddStringToObject(o, "file", m->config_path ?: "");
        cJSON_AddBoolToObject(o, "exists", m->config_path && access(m->config_path, F_OK) == 0);
        format_rfc3339(m->config_loaded_at, when);
        cJSON_AddStringToObject(o, "loaded_at", when);
        cJSON_AddNumberToObject(o, "egress_profiles", (double) m->egress->policy.n_profiles);
        cJSON_AddNumberToObject(o, "egress_base_rules", (double) m->egress->policy.base.n);
        restart = cJSON_AddArrayToObject(o, "restart_needed");
        for (char **k = m->config_restart_needed; k && *k; k++)
                cJSON_AddItemToArray(restart, cJSON_CreateString(*k));
        return o;
}

static void add_string_or_null(cJSON *o, const char *key, const char *v) {
        if (v)
                cJSON_AddStringToObject(o, key, v);
        else
                cJSON_AddNullToObject(o, key);
}

/* Where E2B's SDKs find the daemon, for `spacectl e2b env`: the plain listener's URLs (E2B_API_URL and
 * E2B_SANDBOX_URL), the domain (E2B_DOMAIN) and the TLS listener with the CA its certificate is signed by. */
static cJSON *e2b_to_json(Http *h) {
        cJSON *o = cJSON_CreateObject();

        add_string_or_null(o, "api_url", http_api_url(h));
        add_string_or_null(o, "sandbox_url", http_api_url(h));
        add_string_or_null(o, "domain", http_e2b_domain(h));
        add_string_or_null(o, "tls_url", http_tls_url(h));
        add_string_or_null(o, "ca_file", http_tls_ca_file(h));
        add_string_or_null(o, "ca_bundle", http_tls_ca_bundle(h));
        return o;
}

void api_get_info(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        const char *url = http_api_url(r->http);
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "version", PACKAGE_VERSION);
        cJSON_AddStringToObject(o, "api", "v1");
        cJSON_AddStringToObject(o, "accel", m->accel == VM_ACCEL_KVM ? "kvm" : "tcg");
        if (m->accel_reason)
                cJSON_AddStringToObject(o, "accel_reason", m->accel_reason);
        else
                cJSON_AddNullToObject(o, "accel_reason");
        if (m->accel_probe)
                cJSON_AddStringToObject(o, "accel_probe", m->accel_probe);
        else
                cJSON_AddNullToObject(o, "accel_probe");
        if (m->host_fingerprint)
                cJSON_AddStringToObject(o, "host", m->host_fingerprint);
        else
                cJSON_AddNullToObject(o, "host");
        cJSON_AddStringToObject(o, "confine", confine_to_string(m->config.confine));
        cJSON_AddBoolToObject(o, "confined", m->confined);
        if (!m->confined && m->unconfined_reason)
                cJSON_AddStringToObject(o, "unconfined_reason", m->unconfined_reason);
        else
                cJSON_AddNullToObject(o, "unconfined_reason");
        cJSON_AddStringToObject(o, "socket", m->socket_path);
        if (url)
                cJSON_AddStringToObject(o, "api_url", url);
        else
                cJSON_AddNullToObject(o, "api_url");
        cJSON_AddNumberToObject(o, "pid", getpid());
        cJSON_AddStringToObject(o, "state_dir", m->state_dir);
        cJSON_AddNumberToObject(o, "memory_limit_mib", (double) m->memory_limit_mib);
        cJSON_AddNumberToObject(o, "memory_in_use_mib", (double) manager_memory_in_use(m));
        cJSON_AddItemToObject(o, "config", config_to_json(m));
        cJSON_AddItemToObject(o, "e2b", e2b_to_json(r->http));
        http_respond_json(r, 200, o);
}

/* POST /v1/daemon/reload: re-reads spaced.conf (as SIGHUP does); a bad file is a 400 naming the line, and the
 * configuration in use stays. */
void api_post_daemon_reload(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error e = {};
        Manager *m = http_manager(r->http);
        int q;

        if (!m->reload) {
                http_respond_error(r, ERROR_INTERNAL, "this daemon cannot reload its configuration");
                return;
        }
        q = m->reload(m, &e);
        if (q < 0) {
                http_respond_error(r, e.code ?: ERROR_INTERNAL, "%s; the configuration in use stays as it was",
                                   e.message ?: strerror(-q));
                return;
        }
        http_respond_json(r, 200, config_to_json(m));
}

static int newest_first(const void *a, const void *b) {
        const Operation *x = *(const Operation *const *) a, *y = *(const Operation *const *) b;

        if (x->created_at != y->created_at)
                return x->created_at > y->created_at ? -1 : 1;
        return -strcmp(x->id, y->id);
}

void api_get_operations(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        const char *filter = http_query(r, "sandbox");
        _cleanup_free_ Operation **v = NULL;
        size_t n = 0, cap = 0;
        cJSON *o, *list;

        if (filter) {
                size_t len = strlen(filter);
                Sandbox *s;
                int q;

                if (len == 0 || len > 64 ||
                    strspn(filter, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != len) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "sandbox=: expected a sandbox id or name (1 to 64 letters, digits, '.', "
                                           "'_' or '-')");
                        return;
                }
                /* a live sandbox by any reference; a deleted one by its full id */
                q = sandbox_resolve(m, filter, &s);
                if (q == -ENOTUNIQ) {
                        http_respond_error(r, ERROR_AMBIGUOUS_REFERENCE,
                                           "'%s' matches more than one sandbox id; give more characters", filter);
                        return;
                }
                if (q >= 0)
                        filter = s->id;
        }

        for (Operation *op = m->operations; op; op = op->next) {
                if (filter && !streq(op->sandbox_id, filter))
                        continue;
                if (n == cap) {
                        size_t ncap = cap ? cap * 2 : 64;
                        Operation **nv = realloc(v, ncap * sizeof *v);
                        if (!nv) {
                                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                                return;
                        }
                        v = nv;
                        cap = ncap;
                }
                v[n++] = op;
        }
        if (n > 0)
                qsort(v, n, sizeof *v, newest_first);

        o = cJSON_CreateObject();
        list = cJSON_AddArrayToObject(o, "operations");
        for (size_t i = 0; i < n && i < OPERATIONS_LIST_MAX; i++)
                cJSON_AddItemToArray(list, operation_to_json(v[i]));
        http_respond_json(r, 200, o);
}
