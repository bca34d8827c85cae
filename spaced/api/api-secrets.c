/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "api/api.h"
#include "core/log.h"
#include "core/util.h"
#include "secret/secret.h"

/* GET/PUT/DELETE /v1/secrets: secrets (secret/secret.h). A value goes in with PUT and never comes out: no
 * answer, error or log line holds it. */

static cJSON *secret_to_json(const Secret *s) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "id", s->rec.id);
        cJSON_AddStringToObject(o, "name", s->rec.name);
        cJSON_AddNumberToObject(o, "version", (double) s->rec.version);
        cJSON_AddItemToObject(o, "metadata", secret_metadata_json(s));
        api_add_time(o, "created_at", s->rec.created_at);
        api_add_time(o, "updated_at", s->rec.updated_at);
        if (s->rec.last_used_at)
                api_add_time(o, "last_used_at", s->rec.last_used_at);
        else
                cJSON_AddNullToObject(o, "last_used_at");
        cJSON_AddBoolToObject(o, "value_missing", s->value_missing);
        return o;
}

/* The secret {secret} names, or answers 404. */
static Secret *secret_from_route(Request *r, const RouteArgs *a) {
        Secret *s = secret_find(http_manager(r->http), a->arg[0]);

        if (!s)
                http_respond_error(r, ERROR_SECRET_NOT_FOUND, "no secret '%.64s'; 'spacectl secret ls' lists them",
                                   a->arg[0]);
        return s;
}

void api_get_secrets(Request *r, const RouteArgs *a) {
        cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "secrets");

        for (Secret *s = http_manager(r->http)->secrets; s; s = s->next)
                cJSON_AddItemToArray(list, secret_to_json(s));
        http_respond_json(r, 200, o);
}

void api_get_secret(Request *r, const RouteArgs *a) {
        Secret *s = secret_from_route(r, a);

        if (s)
                http_respond_json(r, 200, secret_to_json(s));
}

/* PUT /v1/secrets/{name} {"value": "...", "metadata": {...}}: makes the secret (201) or a new version of it
 * (200), which the next request through a binding uses. Metadata left out keeps what the secret had. */
void api_put_secret(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "value", "metadata", NULL };
        Manager *m = http_manager(r->http);
        _cleanup_(error_done) Error err = {};
        _cleanup_free_ char *metadata = NULL;
        cJSON *o, *v, *md;
        bool created = false;
        Secret *s = NULL;

        o = parse_secret_body(r, fields);
        if (!o)
                return;
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
        if (secret_set(m, a->arg[0], v->valuestring, strlen(v->valuestring), metadata, SECRET_UPSERT, &s, &created,
                       &err) < 0)
                http_respond_error(r, err.code ?: ERROR_INTERNAL, "%s", err.message ?: "out of memory");
        else
                http_respond_json(r, created ? 201 : 200, secret_to_json(s));
out:
        secret_body_free(o);
}

void api_delete_secret(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error err = {};
        Secret *s = secret_from_route(r, a);

        if (s && secret_remove(http_manager(r->http), s, &err) < 0)
                http_respond_error(r, err.code ?: ERROR_INTERNAL, "%s", err.message ?: "out of memory");
        else if (s)
                http_respond_empty(r, 204);
}
