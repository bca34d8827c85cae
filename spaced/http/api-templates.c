/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/api.h"
#include "core/log.h"
#include "json-util.h"
#include "macro.h"
#include "template/template.h"
#include "core/util.h"
#include "sandbox/sandbox.h"

/* /v1/templates: the store (template.c) and imports (template-import.c).
 *   GET    /v1/templates               every image with its tags
 *   POST   /v1/templates/import        {"source", "tag", "config"} -> an operation
 *   POST   /v1/templates/gc            untagged unused images and stale base snapshots go
 *   GET    /v1/templates/{ref}         one image (ref: NAME[:TAG] or sha256:<hex>; its '/' may be raw or %2F)
 *   DELETE /v1/templates/{ref}         a tag goes (and the image with its last one) or, by digest, the image
 *   POST   /v1/templates/{ref}/tag     {"tag": "NAME:TAG"} points a tag at ref's image */

cJSON *template_to_json(Manager *m, Template *t) {
        cJSON *o = cJSON_CreateObject();
        _cleanup_free_ char *user = template_user(m, t);
        char when[32];

        if (!o)
                return NULL;
        cJSON_AddStringToObject(o, "digest", t->digest);
        if (t->tags && t->tags[0]) {
                /* the repository part of the first tag, as `name` was before tags */
                const char *colon = strrchr(t->tags[0], ':');
                _cleanup_free_ char *repo = strndup(t->tags[0], colon ? (size_t) (colon - t->tags[0]) : strlen(t->tags[0]));
                cJSON_AddStringToObject(o, "name", repo ?: t->tags[0]);
        } else
                cJSON_AddNullToObject(o, "name");
        cJSON_AddItemToObject(o, "tags", json_array_from_strv(t->tags));
        cJSON_AddNumberToObject(o, "size_bytes", (double) t->size_bytes);
        cJSON_AddNumberToObject(o, "image_bytes", (double) t->image_bytes);
        cJSON_AddNumberToObject(o, "files", (double) t->files);
        format_rfc3339(t->created_at, when);
        cJSON_AddStringToObject(o, "created_at", when);
        cJSON_AddStringToObject(o, "source", t->source ?: "");
        cJSON_AddBoolToObject(o, "in_use", user != NULL);
        if (user)
                cJSON_AddStringToObject(o, "used_by", user);
        else
                cJSON_AddNullToObject(o, "used_by");
        cJSON_AddStringToObject(o, "rootfs", t->rootfs);
        /* the defaults, flat (as before the store) and as the config object imports take */
        cJSON_AddNumberToObject(o, "vcpu", t->vcpu);
        cJSON_AddNumberToObject(o, "memory_mib", (double) t->memory_mib);
        cJSON_AddNumberToObject(o, "disk_mib", (double) t->disk_mib);
        cJSON_AddStringToObject(o, "description", t->description ?: "");
        cJSON_AddItemToObject(o, "config", template_config_to_json(t));
        return o;
}

void api_get_templates(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "templates");

        for (Template *t = m->templates; t; t = t->next)
                cJSON_AddItemToArray(list, template_to_json(m, t));
        http_respond_json(r, 200, o);
}

void api_get_template(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        Error e = {};
        Template *t;
        int q;

        q = template_resolve(m, a->arg[0], &t, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                error_done(&e);
                return;
        }
        http_respond_json(r, 200, template_to_json(m, t));
}

void api_post_template_import(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "source", "tag", "config", NULL };
        Manager *m = http_manager(r->http);
        _cleanup_free_ char *tag = NULL;
        _cleanup_(error_done) Error msg = {};
        Error e = {};
        const char *source = NULL;
        Operation *op;
        unsigned wait;
        cJSON *o, *v;
        int q;

        if (parse_wait(r, &wait) < 0)
                return;
        o = parse_body_object(r, fields);
        if (!o)
                return;
        v = cJSON_GetObjectItemCaseSensitive(o, "source");
        if (!cJSON_IsString(v) || v->valuestring[0] != '/') {
                http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                   "source must be the absolute path of a rootfs tarball, an OCI layout directory or "
                                   "an OCI archive");
                goto out;
        }
        source = v->valuestring;
        v = cJSON_GetObjectItemCaseSensitive(o, "tag");
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsString(v)) {
                        http_respond_error(r, ERROR_INVALID_REF, "tag must be a string NAME[:TAG]");
                        goto out;
                }
                if (template_tag_parse(v->valuestring, &tag, &msg) < 0) {
                        http_respond_error(r, ERROR_INVALID_REF, "%s", msg.message ?: "invalid tag");
                        goto out;
                }
        }
        v = cJSON_GetObjectItemCaseSensitive(o, "config");
        if (v && !cJSON_IsNull(v) && !cJSON_IsObject(v)) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "config must be an object");
                goto out;
        }
        {
                ImportRequest req = { .source = source, .tag = tag, .config = v && cJSON_IsObject(v) ? v : NULL };
                q = template_import_start(m, &req, &op, &e);
        }
        if (q < 0) {
                respond_operation_error(r, &e, q);
                error_done(&e);
                goto out;
        }
        start_wait(r, op, WAIT_IMPORT, wait);
out:
        cJSON_Delete(o);
}

void api_delete_template(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        _cleanup_free_ char *untagged = NULL;
        Error e = {};
        bool removed;
        uint64_t freed;
        cJSON *o;
        int q;

        q = template_remove(m, a->arg[0], &untagged, &removed, &freed, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                error_done(&e);
                return;
        }
        o = cJSON_CreateObject();
        if (untagged)
                cJSON_AddStringToObject(o, "untagged", untagged);
        else
                cJSON_AddNullToObject(o, "untagged");
        cJSON_AddBoolToObject(o, "removed", removed);
        cJSON_AddNumberToObject(o, "freed_bytes", (double) freed);
        http_respond_json(r, 200, o);
}

void api_post_template_tag(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "tag", NULL };
        Manager *m = http_manager(r->http);
        _cleanup_free_ char *tag = NULL;
        _cleanup_(error_done) Error msg = {};
        Error e = {};
        Template *t;
        cJSON *o, *v;
        int q;

        o = parse_body_object(r, fields);
        if (!o)
                return;
        v = cJSON_GetObjectItemCaseSensitive(o, "tag");
        if (!cJSON_IsString(v)) {
                http_respond_error(r, ERROR_INVALID_REF, "tag must be a string NAME[:TAG]");
                goto out;
        }
        if (template_tag_parse(v->valuestring, &tag, &msg) < 0) {
                http_respond_error(r, ERROR_INVALID_REF, "%s", msg.message ?: "invalid tag");
                goto out;
        }
        q = template_resolve(m, a->arg[0], &t, &e);
        if (q >= 0)
                q = template_tag_set(m, t, tag, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                error_done(&e);
                goto out;
        }
        pool_refill(m); /* a pool of this tag now makes sandboxes of the new image */
        http_respond_json(r, 200, template_to_json(m, t));
out:
        cJSON_Delete(o);
}

void api_post_templates_gc(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { NULL };
        Manager *m = http_manager(r->http);
        uint64_t freed = 0;
        unsigned images = 0, bases = 0;
        cJSON *o;

        o = parse_body_object(r, fields); /* no fields: a body with any is a mistake */
        if (!o)
                return;
        cJSON_Delete(o);
        (void) templates_gc(m, &freed, &images, &bases);
        log_info("template gc: %u images and %u base snapshots removed, %llu bytes freed", images, bases,
                 (unsigned long long) freed);
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "images_removed", images);
        cJSON_AddNumberToObject(o, "base_snapshots_removed", bases);
        cJSON_AddNumberToObject(o, "freed_bytes", (double) freed);
        http_respond_json(r, 200, o);
}
