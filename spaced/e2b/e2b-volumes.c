/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "e2b/e2b-control.h"
#include "volume/volume.h"

/* E2B's /volumes (the SDKs' Volume.create, getInfo, list, destroy; space-e2b(7)) on the daemon's volumes
 * (volume/volume.h): the same ones spacectl volume and /v1/volumes show. A create has E2B's fields only (a
 * name), so it gets the default quota (volume_quota in spaced.conf). The token given out is the volume's own
 * bearer for its content API (e2b-volume-content.c), good for that volume alone. */

/* E2B's VolumeAndToken; no domain: the SDKs then use E2B_VOLUME_API_URL, else api.<their domain>. */
static cJSON *volume_and_token_json(const Volume *v) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "volumeID", v->rec.id);
        cJSON_AddStringToObject(o, "name", v->rec.name);
        cJSON_AddStringToObject(o, "token", v->rec.token);
        return o;
}

static Volume *volume_from_route(Request *r, const RouteArgs *a) {
        Volume *v = volume_find(http_manager(r->http), a->arg[0]);

        if (!v)
                http_respond_error(r, ERROR_VOLUME_NOT_FOUND, "volume '%.64s' not found", a->arg[0]);
        return v;
}

/* POST /volumes {name}: 201 with VolumeAndToken. */
void e2b_post_volumes(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "name", NULL };
        _cleanup_(error_done) Error err = {};
        Volume *v = NULL;
        cJSON *o, *name;

        o = e2b_body_object(r, fields);
        if (!o)
                return;
        name = cJSON_GetObjectItemCaseSensitive(o, "name");
        if (!cJSON_IsString(name))
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "name must be a string: the volume's name");
        else if (volume_create(http_manager(r->http), name->valuestring, 0, &v, &err) < 0)
                respond_error_or(r, &err, "cannot make the volume");
        else
                http_respond_json(r, 201, volume_and_token_json(v));
        cJSON_Delete(o);
}

/* GET /volumes: [{volumeID, name}], oldest first. */
void e2b_get_volumes(Request *r, const RouteArgs *a) {
        cJSON *list = cJSON_CreateArray();

        for (Volume *v = http_manager(r->http)->volumes; v; v = v->next) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "volumeID", v->rec.id);
                cJSON_AddStringToObject(o, "name", v->rec.name);
                cJSON_AddItemToArray(list, o);
        }
        http_respond_json(r, 200, list);
}

void e2b_get_volume(Request *r, const RouteArgs *a) {
        Volume *v = volume_from_route(r, a);

        if (v)
                http_respond_json(r, 200, volume_and_token_json(v));
}

void e2b_delete_volume(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error err = {};
        Volume *v = volume_from_route(r, a);

        if (v && volume_remove(http_manager(r->http), v, &err) < 0)
                respond_error_or(r, &err, "cannot remove the volume");
        else if (v)
                http_respond_empty(r, 204);
}
