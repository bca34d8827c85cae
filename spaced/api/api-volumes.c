/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "string-util.h"
#include "api/api.h"
#include "core/log.h"
#include "volume/volume.h"

/* /v1/volumes: volumes (volume/volume.h) and their files. A file's content goes in as the raw body of a PUT,
 * streamed into the volume when it replaces the file whole (api-volume-upload.c; at most HTTP_BODY_MAX per
 * request at an offset=), and comes out as the raw body of a GET, streamed from the file. */

cJSON *volume_to_json(Manager *m, Volume *v) {
        cJSON *o = cJSON_CreateObject();
        uint64_t usage;

        cJSON_AddStringToObject(o, "id", v->rec.id);
        cJSON_AddStringToObject(o, "name", v->rec.name);
        cJSON_AddNumberToObject(o, "quota", (double) v->rec.quota);
        if (volume_usage(m, v, &usage, NULL) >= 0) {
                cJSON_AddNumberToObject(o, "usage", (double) usage);
                cJSON_AddNumberToObject(o, "entries", (double) v->entries); /* counted by the same walk */
        } else {
                cJSON_AddNullToObject(o, "usage");
                cJSON_AddNullToObject(o, "entries");
        }
        api_add_time(o, "created_at", v->rec.created_at);
        return o;
}

cJSON *volume_entry_to_json(const VolumeEntry *e) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "name", e->name);
        cJSON_AddStringToObject(o, "type", volume_entry_type_to_string(e->type));
        cJSON_AddStringToObject(o, "path", e->path);
        cJSON_AddNumberToObject(o, "size", (double) e->size);
        cJSON_AddNumberToObject(o, "mode", e->mode);
        cJSON_AddNumberToObject(o, "uid", e->uid);
        cJSON_AddNumberToObject(o, "gid", e->gid);
        api_add_time(o, "atime", e->atime.tv_sec);
        api_add_time(o, "mtime", e->mtime.tv_sec);
        api_add_time(o, "ctime", e->ctime.tv_sec);
        if (e->target)
                cJSON_AddStringToObject(o, "target", e->target);
        return o;
}

/* The volume {volume} names, or answers 404. */
static Volume *volume_from_route(Request *r, const RouteArgs *a) {
        Volume *v = volume_find(http_manager(r->http), a->arg[0]);

        if (!v)
                http_respond_error(r, ERROR_VOLUME_NOT_FOUND, "no volume '%.64s'; 'spacectl volume ls' lists them",
                                   a->arg[0]);
        return v;
}

void api_get_volumes(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "volumes");

        for (Volume *v = m->volumes; v; v = v->next)
                cJSON_AddItemToArray(list, volume_to_json(m, v));
        http_respond_json(r, 200, o);
}

void api_get_volume(Request *r, const RouteArgs *a) {
        Volume *v = volume_from_route(r, a);

        if (v)
                http_respond_json(r, 200, volume_to_json(http_manager(r->http), v));
}

/* POST /v1/volumes {"name": "...", "quota": BYTES}: 201 with the volume. */
void api_post_volumes(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "name", "quota", NULL };
        Manager *m = http_manager(r->http);
        _cleanup_(error_done) Error err = {};
        uint64_t quota = 0;
        Volume *v = NULL;
        cJSON *o, *name;

        o = parse_body_object(r, fields);
        if (!o)
                return;
        name = cJSON_GetObjectItemCaseSensitive(o, "name");
        if (!cJSON_IsString(name))
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "name must be a string: the volume's name");
        else if (get_uint_field(r, o, "quota", 1, VOLUME_QUOTA_MAX, &quota) >= 0) {
                if (volume_create(m, name->valuestring, quota, &v, &err) < 0)
                        respond_error_or(r, &err, "cannot make the volume");
                else
                        http_respond_json(r, 201, volume_to_json(m, v));
        }
        cJSON_Delete(o);
}

void api_delete_volume(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error err = {};
        Volume *v = volume_from_route(r, a);

        if (v && volume_remove(http_manager(r->http), v, &err) < 0)
                respond_error_or(r, &err, "cannot remove the volume");
        else if (v)
                http_respond_empty(r, 204);
}

int api_query_int(Request *r, const char *key, int base, int64_t max, int64_t *ret) {
        const char *v = http_query(r, key);
        char *end;
        long long n;

        *ret = -1;
        if (!v)
                return 0;
        errno = 0;
        n = strtoll(v, &end, base);
        if (errno || !*v || *end || v[0] == '-' || v[0] == '+' || v[0] == ' ' || n > max) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s=%.20s: expected a whole number from 0 to %lld%s", key,
                                   v, (long long) max, base == 8 ? " in octal" : "");
                return -EINVAL;
        }
        *ret = n;
        return 0;
}

static bool query_flag(Request *r, const char *key) {
        const char *v = http_query(r, key);

        return v && (streq(v, "1") || streq(v, "true") || streq(v, "yes"));
}

typedef struct FileReader {
        int fd;
        uint64_t left;
} FileReader;

static ssize_t file_reader_read(void *userdata, char *buf, size_t max) {
        FileReader *f = userdata;
        ssize_t n;

        if (f->left == 0)
                return HTTP_STREAM_END;
        n = read(f->fd, buf, max < f->left ? max : (size_t) f->left);
        if (n < 0 && errno == EINTR)
                return 0;
        if (n <= 0) /* shorter than it was: cut short, not a truncated body that looks whole */
                return HTTP_STREAM_ERROR;
        f->left -= (uint64_t) n;
        return n;
}

static void file_reader_detach(void *userdata, Request *r) {
}

static void file_reader_release(void *userdata) {
        FileReader *f = userdata;

        safe_close(f->fd);
        free(f);
}

int api_volume_respond_file(Request *r, Volume *v, const char *path, uint64_t offset, uint64_t length) {
        static const char *const headers[] = { "Content-Type", "application/octet-stream", NULL };
        _cleanup_(error_done) Error err = {};
        FileReader *f;
        int fd, q;
        uint64_t len;

        if (volume_open_read(http_manager(r->http), v, path, offset, length, &fd, &len, &err) < 0)
                {
                respond_error_or(r, &err, "cannot read the file");
                return -EIO;
        }
        f = calloc(1, sizeof *f);
        if (!f) {
                safe_close(fd);
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return -ENOMEM;
        }
        *f = (FileReader) { .fd = fd, .left = len };
        r->stream = (HttpStream) { .read = file_reader_read, .detach = file_reader_detach,
                                   .release = file_reader_release, .userdata = f };
        q = http_respond_stream_status(r, 200, len, headers);
        if (q < 0) {
                r->stream = (HttpStream) {};
                file_reader_release(f);
                http_respond_error(r, ERROR_INTERNAL, "cannot answer the request");
        }
        return q;
}

void api_respond_volume_entry(Request *r, unsigned status, VolumeEntry *e) {
        http_respond_json(r, status, volume_entry_to_json(e));
        volume_entry_done(e);
}

/* GET /v1/volumes/{volume}/files?path=P[&offset=N][&length=N]: the file's bytes. */
void api_get_volume_file(Request *r, const RouteArgs *a) {
        Volume *v = volume_from_route(r, a);
        int64_t offset, length;

        if (!v || api_query_int(r, "offset", 10, INT64_MAX, &offset) < 0 ||
            api_query_int(r, "length", 10, INT64_MAX, &length) < 0)
                return;
        (void) api_volume_respond_file(r, v, http_query(r, "path"), offset < 0 ? 0 : (uint64_t) offset,
                                       length < 0 ? UINT64_MAX : (uint64_t) length);
}

/* The query of a PUT: its volume, path and options; NULL when it answered. */
static Volume *put_options(Request *r, const RouteArgs *a, VolumeWriteOptions *o) {
        Volume *v = volume_from_route(r, a);
        int64_t offset;

        if (!v || api_query_int(r, "offset", 10, INT64_MAX, &offset) < 0 ||
            api_query_int(r, "mode", 8, 07777, &o->mode) < 0 || api_query_int(r, "uid", 10, UINT32_MAX - 1, &o->uid) < 0 ||
            api_query_int(r, "gid", 10, UINT32_MAX - 1, &o->gid) < 0)
                return NULL;
        if (!http_query(r, "path")) {
                http_respond_error(r, ERROR_INVALID_PATH, "path= is required: the file in the volume");
                return NULL;
        }
        o->at_offset = offset >= 0;
        o->offset = offset < 0 ? 0 : (uint64_t) offset;
        o->exclusive = query_flag(r, "exclusive");
        o->parents = query_flag(r, "parents");
        return v;
}

/* From the headers: a whole file is streamed into the volume (its quota the only bound); a write at an offset
 * is a part of at most HTTP_BODY_MAX, collected first. */
void api_put_volume_file_begin(Request *r, const RouteArgs *a) {
        VolumeWriteOptions o = VOLUME_WRITE_OPTIONS_INIT;
        const char *cl = http_header(r, "Content-Length");
        Volume *v;

        if (http_query(r, "offset")) {
                r->kind = REQUEST_JSON;
                if (cl && strtoull(cl, NULL, 10) > HTTP_BODY_MAX)
                        http_respond_error(r, ERROR_PAYLOAD_TOO_LARGE,
                                           "a write at an offset takes at most %d bytes; a whole file (no offset=) "
                                           "has no limit but the quota", HTTP_BODY_MAX);
                return;
        }
        v = put_options(r, a, &o);
        if (v)
                (void) api_volume_upload_begin(r, v, http_query(r, "path"), &o);
}

/* PUT /v1/volumes/{volume}/files?path=P[&offset=N][&exclusive=1][&parents=1][&mode=0644][&uid=N][&gid=N]: the
 * body is the content; without offset it replaces the file whole (streamed: api_put_volume_file_begin()). */
void api_put_volume_file(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error err = {};
        VolumeWriteOptions o = VOLUME_WRITE_OPTIONS_INIT;
        VolumeEntry e = {};
        Volume *v;

        if (r->kind == REQUEST_UPLOAD)
                return api_volume_upload_end(r, 200);
        v = put_options(r, a, &o);
        if (!v)
                return;
        if (volume_write(http_manager(r->http), v, http_query(r, "path"), r->body.data, r->body.len, &o, &e, &err) < 0)
                return respond_error_or(r, &err, "cannot write the file");
        api_respond_volume_entry(r, 200, &e);
}

void api_delete_volume_file(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error err = {};
        Volume *v = volume_from_route(r, a);

        if (!v)
                return;
        if (!http_query(r, "path"))
                return (void) http_respond_error(r, ERROR_INVALID_PATH, "path= is required: what to remove");
        if (volume_remove_path(http_manager(r->http), v, http_query(r, "path"), &err) < 0)
                {
                respond_error_or(r, &err, "cannot remove");
                return;
        }
        http_respond_empty(r, 204);
}

void api_get_volume_stat(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error err = {};
        VolumeEntry e = {};
        Volume *v = volume_from_route(r, a);

        if (!v)
                return;
        if (volume_stat(http_manager(r->http), v, http_query(r, "path"), &e, &err) < 0)
                {
                respond_error_or(r, &err, "cannot stat");
                return;
        }
        api_respond_volume_entry(r, 200, &e);
}

void api_get_volume_list(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error err = {};
        VolumeEntry *entries = NULL;
        size_t n = 0;
        int64_t depth;
        cJSON *o, *list;
        Volume *v = volume_from_route(r, a);

        if (!v || api_query_int(r, "depth", 10, VOLUME_DEPTH_MAX, &depth) < 0)
                return;
        if (volume_list(http_manager(r->http), v, http_query(r, "path"), depth < 1 ? 1 : (unsigned) depth, &entries, &n,
                        &err) < 0)
                {
                respond_error_or(r, &err, "cannot list");
                return;
        }
        o = cJSON_CreateObject();
        list = cJSON_AddArrayToObject(o, "entries");
        for (size_t i = 0; i < n; i++)
                cJSON_AddItemToArray(list, volume_entry_to_json(&entries[i]));
        volume_entries_free(entries, n);
        http_respond_json(r, 200, o);
}

/* The path, uid, gid and mode of a JSON body (mkdir, attrs); answers and returns < 0 when one is wrong. */
static int body_meta(Request *r, cJSON *o, const char **ret_path, int64_t *uid, int64_t *gid, int64_t *mode) {
        cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "path");
        uint64_t u = 0, g = 0, md = 0;
        int qu, qg, qm;

        if (!cJSON_IsString(p)) {
                http_respond_error(r, ERROR_INVALID_PATH, "path must be a string: a path in the volume");
                return -EINVAL;
        }
        qu = get_uint_field(r, o, "uid", 0, UINT32_MAX - 1, &u);
        qg = qu < 0 ? -EINVAL : get_uint_field(r, o, "gid", 0, UINT32_MAX - 1, &g);
        qm = qg < 0 ? -EINVAL : get_uint_field(r, o, "mode", 0, 07777, &md);
        if (qm < 0)
                return -EINVAL;
        *ret_path = p->valuestring;
        *uid = qu > 0 ? (int64_t) u : -1;
        *gid = qg > 0 ? (int64_t) g : -1;
        *mode = qm > 0 ? (int64_t) md : -1;
        return 0;
}

/* POST /v1/volumes/{volume}/files/mkdir {"path", "parents", "uid", "gid", "mode"} */
void api_post_volume_mkdir(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "path", "parents", "uid", "gid", "mode", NULL };
        _cleanup_(error_done) Error err = {};
        Volume *v = volume_from_route(r, a);
        VolumeEntry e = {};
        const char *path;
        int64_t uid, gid, mode;
        cJSON *o;

        if (!v || !(o = parse_body_object(r, fields)))
                return;
        if (body_meta(r, o, &path, &uid, &gid, &mode) >= 0) {
                bool parents = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "parents"));

                if (volume_mkdir(http_manager(r->http), v, path, parents, uid, gid, mode, &e, &err) < 0)
                        respond_error_or(r, &err, "cannot make the directory");
                else
                        api_respond_volume_entry(r, 201, &e);
        }
        cJSON_Delete(o);
}

/* POST /v1/volumes/{volume}/files/attrs {"path", "uid", "gid", "mode"} */
void api_post_volume_attrs(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "path", "uid", "gid", "mode", NULL };
        _cleanup_(error_done) Error err = {};
        Volume *v = volume_from_route(r, a);
        VolumeEntry e = {};
        const char *path;
        int64_t uid, gid, mode;
        cJSON *o;

        if (!v || !(o = parse_body_object(r, fields)))
                return;
        if (body_meta(r, o, &path, &uid, &gid, &mode) >= 0) {
                if (volume_set_metadata(http_manager(r->http), v, path, uid, gid, mode, &e, &err) < 0)
                        respond_error_or(r, &err, "cannot set the metadata");
                else
                        api_respond_volume_entry(r, 200, &e);
        }
        cJSON_Delete(o);
}

/* POST /v1/volumes/{volume}/files/move {"from", "to"} */
void api_post_volume_move(Request *r, const RouteArgs *a) {
        static const char *const fields[] = { "from", "to", NULL };
        _cleanup_(error_done) Error err = {};
        Volume *v = volume_from_route(r, a);
        cJSON *o, *from, *to;

        if (!v || !(o = parse_body_object(r, fields)))
                return;
        from = cJSON_GetObjectItemCaseSensitive(o, "from");
        to = cJSON_GetObjectItemCaseSensitive(o, "to");
        if (!cJSON_IsString(from) || !cJSON_IsString(to))
                http_respond_error(r, ERROR_INVALID_PATH, "from and to must be strings: paths in the volume");
        else if (volume_rename(http_manager(r->http), v, from->valuestring, to->valuestring, &err) < 0)
                respond_error_or(r, &err, "cannot move");
        else
                http_respond_empty(r, 204);
        cJSON_Delete(o);
}

int api_volume_mounts_parse(Request *r, const cJSON *mounts, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        const cJSON *i;

        *ret = NULL;
        if (!mounts || cJSON_IsNull(mounts) || (cJSON_IsArray(mounts) && cJSON_GetArraySize(mounts) == 0))
                return 0;
        if (!cJSON_IsArray(mounts) || cJSON_GetArraySize(mounts) > (int) SPACE_VOLUME_MOUNTS_MAX) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                   "volume mounts are a list of {\"name\", \"path\"} (at most %u)",
                                   SPACE_VOLUME_MOUNTS_MAX);
                return -EINVAL;
        }
        cJSON_ArrayForEach(i, mounts) {
                const cJSON *name = cJSON_GetObjectItemCaseSensitive(i, "name"),
                            *path = cJSON_GetObjectItemCaseSensitive(i, "path");
                _cleanup_free_ char *line = NULL;

                if (!cJSON_IsObject(i) || !cJSON_IsString(name) || !cJSON_IsString(path)) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "a volume mount is {\"name\": VOLUME, \"path\": \"/ABSOLUTE/PATH\"}");
                        return -EINVAL;
                }
                /* no volume name or id has one: the sandbox's checks name what is wrong with the rest */
                if (strchr(name->valuestring, ':')) {
                        http_respond_error(r, ERROR_VOLUME_NOT_FOUND,
                                           "no volume '%.64s' to mount; 'spacectl volume ls' lists them",
                                           name->valuestring);
                        return -ENOENT;
                }
                if (asprintf(&line, "%s:%s", name->valuestring, path->valuestring) < 0 || strv_extend(&l, line) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}
