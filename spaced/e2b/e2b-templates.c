/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "e2b/e2b-control.h"
#include "macro.h"
#include "template/template.h"

/* E2B's template lookups, read-only: the SDKs' Template.exists(name) (an alias lookup), Template lists and a
 * template's builds, answered from space's template store. A template's id is its digest, its names and
 * aliases are its tags. Builds are space's own (`spacectl template build`): E2B's build routes answer 501
 * saying so, in E2B's error shape, instead of a 404 that reads as "no such template". */

static void refuse_build(Request *r, const RouteArgs *a) {
        http_respond_error(r, ERROR_NOT_SUPPORTED,
                           "space does not build templates through E2B's API: build them with 'spacectl template "
                           "build DIR' (space-template(5)) and create sandboxes from their names");
}

/* A UUID-shaped build id (E2B's are UUIDs; the Python SDK parses them): the digest's first 128 bits. */
static void build_id_of(const Template *t, char buf[static 37]) {
        const char *h = t->digest + strlen("sha256:");

        snprintf(buf, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", h, h + 8, h + 12, h + 16, h + 20);
}

/* Tags without ":latest", as E2B names them, and with it: both find the template. */
static void add_names(cJSON *o, const Template *t) {
        cJSON *aliases = cJSON_AddArrayToObject(o, "aliases"), *names = cJSON_AddArrayToObject(o, "names");

        for (char **tag = t->tags; tag && *tag; tag++) {
                size_t n = strlen(*tag);

                cJSON_AddItemToArray(names, cJSON_CreateString(*tag));
                if (n > 7 && streq(*tag + n - 7, ":latest")) {
                        char *alias = strndup(*tag, n - 7);
                        if (alias)
                                cJSON_AddItemToArray(aliases, cJSON_CreateString(alias));
                        free(alias);
                } else
                        cJSON_AddItemToArray(aliases, cJSON_CreateString(*tag));
        }
}

static unsigned spawn_count(Manager *m, const Template *t) {
        unsigned n = 0;

        for (Sandbox *s = m->sandboxes; s; s = s->next)
                n += !s->pooled && streq_ptr(s->template_digest, t->digest);
        return n;
}

/* `Template` (a list item): everything the Python SDK requires. */
static cJSON *template_json(Manager *m, const Template *t) {
        cJSON *o = cJSON_CreateObject();
        char build[37];

        build_id_of(t, build);
        cJSON_AddStringToObject(o, "templateID", t->digest);
        cJSON_AddStringToObject(o, "buildID", build);
        cJSON_AddStringToObject(o, "buildStatus", "ready");
        cJSON_AddNumberToObject(o, "buildCount", 1);
        cJSON_AddNumberToObject(o, "cpuCount", t->vcpu);
        cJSON_AddNumberToObject(o, "memoryMB", (double) t->memory_mib);
        cJSON_AddNumberToObject(o, "diskSizeMB", (double) t->disk_mib);
        cJSON_AddStringToObject(o, "envdVersion", E2B_ENVD_VERSION);
        cJSON_AddBoolToObject(o, "public", false);
        cJSON_AddNullToObject(o, "createdBy");
        cJSON_AddNullToObject(o, "lastSpawnedAt");
        cJSON_AddNumberToObject(o, "spawnCount", spawn_count(m, t));
        api_add_time(o, "createdAt", t->created_at);
        api_add_time(o, "updatedAt", t->created_at);
        add_names(o, t);
        return o;
}

static void get_templates(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        cJSON *list = cJSON_CreateArray();

        for (Template *t = m->templates; t; t = t->next)
                cJSON_AddItemToArray(list, template_json(m, t));
        http_respond_json(r, 200, list);
}

/* A template a URL names (a tag or a digest), or 404 in E2B's shape. */
static Template *find_template(Request *r, const char *ref) {
        Template *t = template_find(http_manager(r->http), ref);

        if (!t)
                http_respond_error(r, ERROR_TEMPLATE_NOT_FOUND, "template '%s' not found", ref);
        return t;
}

/* `TemplateWithBuilds`: the template and its one build (space's images are built once). */
static void get_template(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        Template *t = find_template(r, a->arg[0]);
        cJSON *o, *builds, *b;
        char build[37];

        if (!t)
                return;
        o = template_json(m, t);
        builds = cJSON_AddArrayToObject(o, "builds");
        b = cJSON_CreateObject();
        build_id_of(t, build);
        cJSON_AddStringToObject(b, "buildID", build);
        cJSON_AddStringToObject(b, "status", "ready");
        cJSON_AddNumberToObject(b, "cpuCount", t->vcpu);
        cJSON_AddNumberToObject(b, "memoryMB", (double) t->memory_mib);
        cJSON_AddNumberToObject(b, "diskSizeMB", (double) t->disk_mib);
        cJSON_AddStringToObject(b, "envdVersion", E2B_ENVD_VERSION);
        api_add_time(b, "createdAt", t->created_at);
        api_add_time(b, "updatedAt", t->created_at);
        cJSON_AddItemToArray(builds, b);
        http_respond_json(r, 200, o);
}

/* Template.exists(name): 200 {templateID, public} when the name is a tag here, 404 otherwise. */
static void get_alias(Request *r, const RouteArgs *a) {
        Template *t = find_template(r, a->arg[0]);
        cJSON *o;

        if (!t)
                return;
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "templateID", t->digest);
        cJSON_AddBoolToObject(o, "public", false);
        http_respond_json(r, 200, o);
}

const Route e2b_template_routes[] = {
        E2B_ROUTE("GET", "/templates", get_templates),
        E2B_ROUTE("GET", "/templates/aliases/{ref}", get_alias),
        E2B_ROUTE("GET", "/templates/{ref}", get_template),
        E2B_ROUTE("POST", "/templates", refuse_build),
        E2B_ROUTE("POST", "/v2/templates", refuse_build),
        E2B_ROUTE("POST", "/v3/templates", refuse_build),
        E2B_ROUTE("POST", "/templates/{ref}", refuse_build),
        E2B_ROUTE("PATCH", "/templates/{ref}", refuse_build),
        E2B_ROUTE("POST", "/templates/{ref}/builds/{build}", refuse_build),
        E2B_ROUTE("POST", "/v2/templates/{ref}/builds/{build}", refuse_build),
        E2B_ROUTE("GET", "/templates/{ref}/builds/{build}/status", refuse_build),
        E2B_ROUTE("GET", "/templates/{ref}/builds/{build}/logs", refuse_build),
        E2B_ROUTE("GET", "/templates/{ref}/files/{hash}", refuse_build),
        E2B_ROUTE("POST", "/templates/tags", refuse_build),
        E2B_ROUTE("DELETE", "/templates/tags", refuse_build),
        {},
};
