/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>

#include "api/api.h"
#include "macro.h"
#include "sandbox/sandbox.h"

/* GET /v1/pools, PUT /v1/pools/{template} {"size": N}: warm pools (pool.c). */

#define POOL_SIZE_MAX 64

static cJSON *pool_to_json(Manager *m, const char *template_name, unsigned size) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "template", template_name);
        cJSON_AddNumberToObject(o, "size", size);
        cJSON_AddNumberToObject(o, "ready", pool_count(m, template_name, true));
        cJSON_AddNumberToObject(o, "filling", pool_count(m, template_name, false) - pool_count(m, template_name, true));
        return o;
}

void api_get_pools(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "pools");

        for (PoolConfig *p = m->pools; p; p = p->next)
                if (p->size > 0)
                        cJSON_AddItemToArray(list, pool_to_json(m, p->template_name, p->size));
        http_respond_json(r, 200, o);
}

void api_put_pool(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "size", NULL };
        Manager *m = http_manager(r->http);
        _cleanup_(error_done) Error err = {};
        uint64_t size = 0;
        cJSON *o;
        int q;

        if (!(o = parse_body_object(r, fields)))
                return;
        if (!cJSON_GetObjectItemCaseSensitive(o, "size")) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "size is required (0 to %d; 0 removes the pool)",
                                   POOL_SIZE_MAX);
                goto out;
        }
        if (get_uint_field(r, o, "size", 0, POOL_SIZE_MAX, &size) < 0)
                goto out;
        q = pool_set(m, a->arg[0], (unsigned) size, &err);
        if (q == -ENOENT)
                http_respond_error(r, ERROR_TEMPLATE_NOT_FOUND, "%s; 'spacectl template ls' lists them", err.message ?: "no such template");
        else if (q < 0)
                http_respond_error(r, ERROR_INTERNAL, "cannot save the pool: %s", strerror(-q));
        else
                http_respond_json(r, 200, pool_to_json(m, a->arg[0], (unsigned) size));
out:
        cJSON_Delete(o);
}
