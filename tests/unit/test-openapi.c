/* SPDX-License-Identifier: Apache-2.0 */

/* spaced/api/openapi.json (compiled into the daemon) against the route table in spaced/api/api.c, both ways: every
 * (method, pattern) the daemon serves is described, and everything described is served. Also: the document
 * parses, path parameters are declared, every $ref resolves, the core schemas exist, and only public routes
 * opt out of authentication. */

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/macro.h"
#include "api/api.h"
#include "tap.h"
#include "core/operation.h"
#include "sandbox/sandbox.h"
#include "template/template.h"

static const char *const methods[] = { "get", "put", "post", "delete", "patch", "head", "options", "trace", NULL };

static void lower(const char *in, char *out, size_t n) {
        size_t i;

        for (i = 0; i + 1 < n && in[i]; i++)
                out[i] = (char) tolower((unsigned char) in[i]);
        out[i] = 0;
}

static const Route *find_route(const char *method_lower, const char *path) {
        for (const Route *rt = api_routes; rt->method; rt++) {
                char m[16];

                lower(rt->method, m, sizeof m);
                if (streq(m, method_lower) && streq(rt->pattern, path))
                        return rt;
        }
        return NULL;
}

static cJSON *doc;

/* "#/components/KIND/NAME" -> the object, or NULL. */
static cJSON *resolve(const char *ref) {
        char kind[32];
        const char *p = "#/components/", *name;
        size_t k;

        if (strncmp(ref, p, strlen(p)) != 0)
                return NULL;
        ref += strlen(p);
        k = strcspn(ref, "/");
        if (k >= sizeof kind || ref[k] != '/')
                return NULL;
        memcpy(kind, ref, k);
        kind[k] = 0;
        name = ref + k + 1;
        return cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "components"), kind), name);
}

static cJSON *deref(cJSON *o) {
        cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "$ref");
        return cJSON_IsString(r) ? resolve(r->valuestring) : o;
}

/* Every {name} in the path has a matching "in: path" parameter (on the operation or the path item). */
static bool path_params_declared(const char *path, cJSON *item, cJSON *op, char *missing, size_t n) {
        for (const char *p = strchr(path, '{'); p; p = strchr(p + 1, '{')) {
                size_t len = strcspn(p + 1, "}");
                bool found = false;
                cJSON *lists[2] = { cJSON_GetObjectItemCaseSensitive(op, "parameters"),
                                    cJSON_GetObjectItemCaseSensitive(item, "parameters") };

                for (unsigned l = 0; l < 2 && !found; l++) {
                        cJSON *prm;
                        cJSON_ArrayForEach(prm, lists[l]) {
                                prm = deref(prm);
                                if (!prm)
                                        continue;
                                cJSON *name = cJSON_GetObjectItemCaseSensitive(prm, "name");
                                cJSON *in = cJSON_GetObjectItemCaseSensitive(prm, "in");
                                if (cJSON_IsString(name) && cJSON_IsString(in) && streq(in->valuestring, "path") &&
                                    strlen(name->valuestring) == len && strncmp(name->valuestring, p + 1, len) == 0)
                                        found = true;
                        }
                }
                if (!found) {
                        snprintf(missing, n, "%.*s", (int) len, p + 1);
                        return false;
                }
        }
        return true;
}

static unsigned bad_refs;

static void check_refs(cJSON *node) {
        cJSON *i;

        if (cJSON_IsString(node) && node->string && streq(node->string, "$ref")) {
                if (!resolve(node->valuestring)) {
                        diag("unresolved $ref %s", node->valuestring);
                        bad_refs++;
                }
                return;
        }
        cJSON_ArrayForEach(i, node)
                check_refs(i);
}

int main(void) {
        static const char *const schemas_needed[] = { "Sandbox", "Operation", "Process", "Error", "Template",
                                                      "Key", NULL };
        cJSON *paths, *item, *schemas;
        unsigned routes = 0, described = 0;

        plan(0);
        ok(strlen(openapi_json) == openapi_json_len, "the embedded document is %zu bytes, NUL-terminated",
           openapi_json_len);
        doc = cJSON_ParseWithLength(openapi_json, openapi_json_len);
        if (!ok(cJSON_IsObject(doc), "openapi.json parses as a JSON object"))
                return done();
        ok(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(doc, "openapi")) &&
                   strncmp(cJSON_GetObjectItemCaseSensitive(doc, "openapi")->valuestring, "3.0.", 4) == 0,
           "it is an OpenAPI 3.0 document");
        ok(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "info")), "it has info");
        paths = cJSON_GetObjectItemCaseSensitive(doc, "paths");
        if (!ok(cJSON_IsObject(paths), "it has paths"))
                return done();

        /* served -> described */
        for (const Route *rt = api_routes; rt->method; rt++) {
                cJSON *op;
                char m[16];
                char missing[64] = "";
                bool public_doc;

                routes++;
                lower(rt->method, m, sizeof m);
                item = cJSON_GetObjectItemCaseSensitive(paths, rt->pattern);
                op = cJSON_GetObjectItemCaseSensitive(item, m);
                if (!ok(cJSON_IsObject(op), "route %s %s is described", rt->method, rt->pattern))
                        continue;
                ok(path_params_declared(rt->pattern, item, op, missing, sizeof missing),
                   "%s %s declares its path parameters%s%s", rt->method, rt->pattern, *missing ? ": missing " : "",
                   missing);
                ok(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(op, "responses")) &&
                           cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(op, "responses")) > 0,
                   "%s %s has responses", rt->method, rt->pattern);
                ok(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(op, "operationId")),
                   "%s %s has an operationId", rt->method, rt->pattern);
                {
                        cJSON *sec = cJSON_GetObjectItemCaseSensitive(op, "security");
                        public_doc = cJSON_IsArray(sec) && cJSON_GetArraySize(sec) == 0;
                }
                ok(public_doc == (rt->auth == ROUTE_AUTH_NONE),
                   "%s %s is %s in both the table and the document", rt->method, rt->pattern,
                   rt->auth == ROUTE_AUTH_NONE ? "public" : "authenticated");
        }

        /* described -> served */
        cJSON_ArrayForEach(item, paths) {
                cJSON *op;

                cJSON_ArrayForEach(op, item) {
                        bool is_method = false;

                        for (const char *const *x = methods; *x; x++)
                                if (streq(op->string, *x))
                                        is_method = true;
                        if (!is_method)
                                continue;
                        described++;
                        ok(find_route(op->string, item->string) != NULL, "documented %s %s is served",
                           op->string, item->string);
                }
        }
        ok(described == routes, "%u routes served, %u operations documented", routes, described);

        schemas = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "components"), "schemas");
        for (const char *const *s = schemas_needed; *s; s++)
                ok(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(schemas, *s)), "schema %s is defined", *s);
        check_refs(doc);
        ok(bad_refs == 0, "every $ref resolves (%u do not)", bad_refs);
        {
                cJSON *sch = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "components"),
                                                              "securitySchemes");
                ok(cJSON_GetObjectItemCaseSensitive(sch, "bearer") && cJSON_GetObjectItemCaseSensitive(sch, "apiKey"),
                   "both ways to send an API key are described");
        }

        cJSON_Delete(doc);
        return done();
}
