/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>

#include "api/api.h"
#include "core/log.h"
#include "core/util.h"

/* POST/GET/DELETE /v1/keys: API keys for the TCP listener (auth.c). A key is shown once, in the answer to
 * POST; afterwards only its id, name and times. */

static cJSON *key_to_json(const ApiKey *k) {
        cJSON *o = cJSON_CreateObject();
        char when[32];

        cJSON_AddStringToObject(o, "id", k->id);
        if (k->name)
                cJSON_AddStringToObject(o, "name", k->name);
        else
                cJSON_AddNullToObject(o, "name");
        format_rfc3339(k->created_at, when);
        cJSON_AddStringToObject(o, "created_at", when);
        if (k->last_used_at) {
                format_rfc3339(k->last_used_at, when);
                cJSON_AddStringToObject(o, "last_used_at", when);
        } else
                cJSON_AddNullToObject(o, "last_used_at");
        return o;
}

static bool name_valid(const char *n) {
        size_t len = strlen(n);

        if (len == 0 || len > API_KEY_NAME_MAX)
                return false;
        for (const unsigned char *c = (const unsigned char *) n; *c; c++)
                if (*c < 0x20 || *c == 0x7f)
                        return false;
        return true;
}

void api_post_keys(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "name", NULL };
        char key[API_KEY_LEN + 1];
        const char *name = NULL;
        ApiKey *k;
        cJSON *o, *v, *reply;
        int q;

        o = parse_body_object(r, fields);
        if (!o)
                return;
        v = cJSON_GetObjectItemCaseSensitive(o, "name");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsString(v) || !name_valid(v->valuestring)) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "name must be a string of 1 to %d printable characters", API_KEY_NAME_MAX);
                        goto out;
                }
                name = v->valuestring;
        }
        q = auth_mint(http_auth(r->http), name, key, &k);
        if (q < 0) {
                log_error_errno(q, "cannot create an API key");
                http_respond_error(r, ERROR_INTERNAL, "cannot create an API key: %s", strerror(-q));
                goto out;
        }
        log_info("created API key %s%s%s", k->id, name ? " named " : "", name ?: "");
        reply = key_to_json(k);
        cJSON_DeleteItemFromObjectCaseSensitive(reply, "last_used_at");
        cJSON_AddStringToObject(reply, "key", key);
        explicit_bzero(key, sizeof key);
        http_respond_json(r, 201, reply);
out:
        cJSON_Delete(o);
}

void api_get_keys(Request *r, const RouteArgs *a) {
        cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "keys");

        for (ApiKey *k = auth_keys(http_auth(r->http)); k; k = k->next)
                cJSON_AddItemToArray(list, key_to_json(k));
        http_respond_json(r, 200, o);
}

void api_delete_key(Request *r, const RouteArgs *a) {
        const char *id = a->arg[0];
        int q;

        if (!api_key_id_valid(id)) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                   "'%s' is not a key id: expected the %d hex digits after 'e2b_' ('spacectl key ls' "
                                   "lists them)", id, API_KEY_ID_LEN);
                return;
        }
        q = auth_delete(http_auth(r->http), id);
        if (q == -ENOENT) {
                http_respond_error(r, ERROR_KEY_NOT_FOUND, "no API key '%s'; 'spacectl key ls' lists them", id);
                return;
        }
        if (q < 0) {
                log_error_errno(q, "cannot delete API key %s", id);
                http_respond_error(r, ERROR_INTERNAL, "cannot delete the key: %s", strerror(-q));
                return;
        }
        log_info("deleted API key %s", id);
        http_respond_empty(r, 204);
}
