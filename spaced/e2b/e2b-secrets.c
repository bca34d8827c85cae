/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "core/log.h"
#include "core/util.h"
#include "e2b/e2b-control.h"
#include "secret/secret.h"

/* E2B's /secrets (the SDKs' Secret.create, update, getInfo, list, destroy; space-e2b(7)) on the daemon's
 * secrets (secret/secret.h): the same store spacectl secret and /v1/secrets use. Values are write-only. */

/* E2B's `Secret` */
static cJSON *secret_json(const Secret *s) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "secretID", s->rec.id);
        cJSON_AddStringToObject(o, "name", s->rec.name);
        cJSON_AddNumberToObject(o, "currentVersion", (double) s->rec.version);
        cJSON_AddItemToObject(o, "metadata", secret_metadata_json(s));
        api_add_time(o, "createdAt", s->rec.created_at);
        api_add_time(o, "updatedAt", s->rec.updated_at);
        return o;
}

static Secret *secret_from_route(Request *r, const RouteArgs *a) {
        Secret *s = secret_find(http_manager(r->http), a->arg[0]);

        if (!s)
                http_respond_error(r, ERROR_SECRET_NOT_FOUND, "secret '%.64s' not found", a->arg[0]);
        return s;
}

/* POST /secrets {name, value, metadata} (201) and POST /secrets/{secretID} {value, metadata} (200). */
static void set_secret(Request *r, const char *ref, bool create) {
        static const char *const create_fields[] = { "name", "value", "metadata", NULL };
        static const char *const update_fields[] = { "value", "metadata", NULL };
        Manager *m = http_manager(r->http);
        _cleanup_(error_done) Error err = {};
        _cleanup_free_ char *metadata = NULL;
        cJSON *o, *v, *md, *name;
        Secret *s = NULL;

        o = parse_secret_body(r, create ? create_fields : update_fields);
        if (!o)
                return;
        if (create) {
                name = cJSON_GetObjectItemCaseSensitive(o, "name");
                if (!cJSON_IsString(name)) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "name must be a string: the secret's name");
                        goto out;
                }
                ref = name->valuestring;
        }
        v = cJSON_GetObjectItemCaseSensitive(o, "value");
        if (!cJSON_IsString(v)) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "value must be a string: the secret's value");
                goto out;
        }
        md = cJSON_GetObjectItemCaseSensitive(o, "metadata");
        if (md && !cJSON_IsNull(md) && secret_metadata_check(md, &metadata, &err) < 0) {
                http_respond_error(r, err.code, "%s", err.message ?: "invalid metadata");
                goto out;
        }
        if (secret_set(m, ref, v->valuestring, strlen(v->valuestring), metadata,
                       create ? SECRET_CREATE : SECRET_UPDATE, &s, NULL, &err) < 0)
                http_respond_error(r, err.code ?: ERROR_INTERNAL, "%s", err.message ?: "out of memory");
        else
                http_respond_json(r, create ? 201 : 200, secret_json(s));
out:
        secret_body_free(o);
}

void e2b_post_secrets(Request *r, const RouteArgs *a) {
        set_secret(r, NULL, true);
}

void e2b_post_secret(Request *r, const RouteArgs *a) {
        if (secret_from_route(r, a))
                set_secret(r, a->arg[0], false);
}

void e2b_get_secret(Request *r, const RouteArgs *a) {
        Secret *s = secret_from_route(r, a);

        if (s)
                http_respond_json(r, 200, secret_json(s));
}

void e2b_delete_secret(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error err = {};
        Secret *s = secret_from_route(r, a);

        if (s && secret_remove(http_manager(r->http), s, &err) < 0)
                http_respond_error(r, err.code ?: ERROR_INTERNAL, "%s", err.message ?: "out of memory");
        else if (s)
                http_respond_empty(r, 204);
}

/* GET /secrets?limit=&nextToken=: oldest first; the token is the id of the last one a page showed, so a page
 * goes on after it even when secrets before it were removed meanwhile (the list keeps its order). */
void e2b_get_secrets(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        const char *token = http_query(r, "nextToken");
        Secret *s = m->secrets;
        unsigned limit, taken = 0;
        cJSON *list;

        if (e2b_query_limit(r, &limit) < 0)
                return;
        if (token && *token) {
                Secret *after = secret_find(m, token);

                if (!after || !streq(after->rec.id, token)) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "nextToken=%.64s is not a token of this server (or its secret was "
                                           "removed): pass the x-next-token of the previous page", token);
                        return;
                }
                s = after->next;
        }
        list = cJSON_CreateArray();
        for (; s && taken < limit; s = s->next, taken++)
                cJSON_AddItemToArray(list, secret_json(s));
        /* s is the first one not shown: a next page starts after the last one shown */
        if (s) {
                Secret *last = m->secrets;
                while (last->next != s)
                        last = last->next;
                e2b_respond_json_headers(r, 200, list, (const char *const[]) { "x-next-token", last->rec.id, NULL });
                return;
        }
        e2b_respond_json_headers(r, 200, list, NULL);
}
