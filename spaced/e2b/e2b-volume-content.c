/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "core/log.h"
#include "e2b/e2b-control.h"
#include "volume/volume.h"

/* E2B's volume content API, /volumecontent/{volumeID}/... (the SDKs' Volume.list, makeDir, getInfo, exists,
 * updateMetadata, readFile, writeFile, remove; space-e2b(7)), on volume/volume.h's file operations. The SDKs
 * send the volume's token (its VolumeAndToken's) as `Authorization: Bearer`: it opens that volume and no other,
 * and no other route (it is no API key). Errors are the API's {"code": "name", "message"}, its Error model. */

#define VOLUMECONTENT_PREFIX "/volumecontent/"

static const char *bearer(Request *r) {
        const char *h = http_header(r, "Authorization");

        return h && strncasecmp(h, "Bearer ", 7) == 0 ? h + 7 : NULL;
}

/* Before any of the body is read: the volume the URL names and the token that opens it. An unknown volume and a
 * wrong token look the same (401); a token of another volume is 403. */
static bool volume_token_ok(Request *r) {
        Manager *m = http_manager(r->http);
        const char *token = bearer(r), *id = r->url + strlen(VOLUMECONTENT_PREFIX);
        char buf[VOLUME_ID_LEN + 1];
        size_t n = strcspn(id, "/");
        bool other = false;

        if (!token) {
                http_respond_error(r, ERROR_UNAUTHORIZED,
                                   "this request needs the volume's token (Volume.create or getInfo gives it) as "
                                   "'Authorization: Bearer TOKEN'");
                return false;
        }
        if (n == VOLUME_ID_LEN) {
                memcpy(buf, id, n);
                buf[n] = '\0';
                if (volume_find_by_token(m, buf, token))
                        return true;
        }
        for (Volume *v = m->volumes; v; v = v->next)
                other |= volume_find_by_token(m, v->rec.id, token) != NULL;
        if (other) {
                log_info("refused a volume content request for %s: the token is another volume's", r->url);
                http_respond_error(r, ERROR_PERMISSION_DENIED, "the token is for another volume");
        } else
                http_respond_error(r, ERROR_INVALID_TOKEN, "the volume token is not valid for this volume");
        return false;
}

/* The volume of the route; without an API key (or the unix socket) its token again, for the handler's own
 * certainty. NULL when it answered. */
static Volume *content_volume(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        Volume *v;

        if (!r->authenticated) {
                v = volume_find_by_token(m, a->arg[0], bearer(r));
                if (!v)
                        http_respond_error(r, ERROR_INVALID_TOKEN, "the volume token is not valid for this volume");
                return v;
        }
        for (v = m->volumes; v && strcmp(v->rec.id, a->arg[0]) != 0; v = v->next)
                ;
        if (!v)
                http_respond_error(r, ERROR_VOLUME_NOT_FOUND, "volume '%.64s' not found", a->arg[0]);
        return v;
}

/* uid, gid and mode (decimal, as the SDKs send them) from the query; < 0 when it answered. */
static int query_meta(Request *r, int64_t *uid, int64_t *gid, int64_t *mode) {
        if (api_query_int(r, "uid", 10, UINT32_MAX - 1, uid) < 0 ||
            api_query_int(r, "gid", 10, UINT32_MAX - 1, gid) < 0 || api_query_int(r, "mode", 10, 07777, mode) < 0)
                return -EINVAL;
        return 0;
}

static const char *query_path(Request *r) {
        const char *p = http_query(r, "path");

        if (!p)
                http_respond_error(r, ERROR_INVALID_PATH, "path is required: a path in the volume");
        return p;
}

/* GET /volumecontent/{volumeID}/path?path=P: the entry (VolumeEntryStat). */
static void get_path(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error err = {};
        Volume *v = content_volume(r, a);
        VolumeEntry e = {};
        const char *p;

        if (!v || !(p = query_path(r)))
                return;
        if (volume_stat(http_manager(r->http), v, p, &e, &err) < 0)
                respond_error_or(r, &err, "cannot stat");
        else
                api_respond_volume_entry(r, 200, &e);
}

/* DELETE /volumecontent/{volumeID}/path?path=P: a file, a link, or a directory with all in it (204). */
static void delete_path(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error err = {};
        Volume *v = content_volume(r, a);
        const char *p;

        if (!v || !(p = query_path(r)))
                return;
        if (volume_remove_path(http_manager(r->http), v, p, &err) < 0)
                respond_error_or(r, &err, "cannot remove");
        else
                http_respond_empty(r, 204);
}

/* PATCH /volumecontent/{volumeID}/path?path=P {uid, gid, mode} */
static void patch_path(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "uid", "gid", "mode", NULL };
        _cleanup_(error_done) Error err = {};
        uint64_t u = 0, g = 0, md = 0;
        Volume *v = content_volume(r, a);
        VolumeEntry e = {};
        int qu = -1, qg = -1, qm = -1;
        const char *p;
        cJSON *o;

        if (!v || !(p = query_path(r)) || !(o = e2b_body_object(r, fields)))
                return;
        if ((qu = get_uint_field(r, o, "uid", 0, UINT32_MAX - 1, &u)) >= 0 &&
            (qg = get_uint_field(r, o, "gid", 0, UINT32_MAX - 1, &g)) >= 0 &&
            (qm = get_uint_field(r, o, "mode", 0, 07777, &md)) >= 0) {
                if (volume_set_metadata(http_manager(r->http), v, p, qu > 0 ? (int64_t) u : -1,
                                        qg > 0 ? (int64_t) g : -1, qm > 0 ? (int64_t) md : -1, &e, &err) < 0)
                        respond_error_or(r, &err, "cannot set the metadata");
                else
                        api_respond_volume_entry(r, 200, &e);
        }
        cJSON_Delete(o);
}

/* GET /volumecontent/{volumeID}/dir?path=P[&depth=N]: [VolumeEntryStat] */
static void get_dir(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error err = {};
        Volume *v = content_volume(r, a);
        VolumeEntry *entries = NULL;
        size_t n = 0;
        int64_t depth;
        cJSON *list;

        if (!v || api_query_int(r, "depth", 10, VOLUME_DEPTH_MAX, &depth) < 0)
                return;
        if (volume_list(http_manager(r->http), v, http_query(r, "path"), depth < 1 ? 1 : (unsigned) depth, &entries, &n,
                        &err) < 0) {
                respond_error_or(r, &err, "cannot list");
                return;
        }
        list = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++)
                cJSON_AddItemToArray(list, volume_entry_to_json(&entries[i]));
        volume_entries_free(entries, n);
        http_respond_json(r, 200, list);
}

static bool query_true(Request *r, const char *key) {
        const char *f = http_query(r, key);

        return f && (streq(f, "true") || streq(f, "1"));
}

/* POST /volumecontent/{volumeID}/dir?path=P[&uid&gid&mode][&force=true]: force makes the parents (201). */
static void post_dir(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error err = {};
        Volume *v = content_volume(r, a);
        int64_t uid, gid, mode;
        VolumeEntry e = {};
        const char *p;

        if (!v || !(p = query_path(r)) || query_meta(r, &uid, &gid, &mode) < 0)
                return;
        if (volume_mkdir(http_manager(r->http), v, p, query_true(r, "force"), uid, gid, mode, &e, &err) < 0)
                respond_error_or(r, &err, "cannot make the directory");
        else
                api_respond_volume_entry(r, 201, &e);
}

/* GET /volumecontent/{volumeID}/file?path=P: the bytes. */
static void get_file(Request *r, const RouteArgs *a) {
        Volume *v = content_volume(r, a);
        const char *p;

        if (v && (p = query_path(r)))
                (void) api_volume_respond_file(r, v, p, 0, UINT64_MAX);
}

/* PUT /volumecontent/{volumeID}/file?path=P[&uid&gid&mode][&force=BOOL], the body the content: the file made or
 * replaced whole, with its parents (201), streamed into the volume as it arrives. force=false refuses to
 * replace one that is there. From the headers (after volume_token_ok()): the checks, then the upload. */
static void put_file_begin(Request *r, const RouteArgs *a) {
        VolumeWriteOptions o = VOLUME_WRITE_OPTIONS_INIT;
        Volume *v = content_volume(r, a);
        const char *p, *force;

        if (!v || !(p = query_path(r)) || query_meta(r, &o.uid, &o.gid, &o.mode) < 0)
                return;
        force = http_query(r, "force");
        o.exclusive = force && (streq(force, "false") || streq(force, "0"));
        o.parents = true;
        (void) api_volume_upload_begin(r, v, p, &o);
}

/* Once the body is in. */
static void put_file(Request *r, const RouteArgs *a) {
        api_volume_upload_end(r, 201);
}

#define VOLUME_CONTENT(method, pattern, handler)                                                              \
        { method, VOLUMECONTENT_PREFIX "{volumeID}" pattern, handler, .auth = ROUTE_AUTH_TOKEN,                 \
          .token_ok = volume_token_ok, .errors = ERROR_STYLE_NATIVE }

const Route e2b_volume_content_routes[] = {
        VOLUME_CONTENT("GET", "/path", get_path),
        VOLUME_CONTENT("DELETE", "/path", delete_path),
        VOLUME_CONTENT("PATCH", "/path", patch_path),
        VOLUME_CONTENT("GET", "/dir", get_dir),
        VOLUME_CONTENT("POST", "/dir", post_dir),
        VOLUME_CONTENT("GET", "/file", get_file),
        { "PUT", VOLUMECONTENT_PREFIX "{volumeID}/file", put_file, put_file_begin, .auth = ROUTE_AUTH_TOKEN,
          .token_ok = volume_token_ok, .errors = ERROR_STYLE_NATIVE },
        {},
};
