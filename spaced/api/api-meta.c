/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "macro.h"
#include "sandbox/sandbox.h"

/* What the API says about itself and the daemon: the OpenAPI document, /v1/info and the list of
 * operations. */

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

void api_get_info(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        const char *url = http_api_url(r->http);
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "version", PACKAGE_VERSION);
        cJSON_AddStringToObject(o, "api", "v1");
        cJSON_AddStringToObject(o, "accel", m->accel == VM_ACCEL_KVM ? "kvm" : "tcg");
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
        http_respond_json(r, 200, o);
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
