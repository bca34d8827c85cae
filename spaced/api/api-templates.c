/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "core/log.h"
#include "json-util.h"
#include "macro.h"
#include "template/template.h"
#include "core/util.h"
#include "core/worker.h"
#include "sandbox/sandbox.h"

/* /v1/templates: the store (template.c) and imports (template-import.c).
 *   GET    /v1/templates               every image with its tags
 *   POST   /v1/templates/import        {"source", "tag", "config"} (unix socket only) or the archive as the
 *                                      body with ?tag=&config= (any listener) -> an operation
 *   POST   /v1/templates/gc            untagged unused images and stale base snapshots go
 *   GET    /v1/templates/{ref}         one image (ref: NAME[:TAG] or sha256:<hex>; its '/' may be raw or %2F)
 *   DELETE /v1/templates/{ref}         a tag goes (and the image with its last one) or, by digest, the image
 *   POST   /v1/templates/{ref}/tag     {"tag": "NAME:TAG"} points a tag at ref's image
 *   GET    /v1/templates/{ref}/rootfs  the image's tree as a tar (template-export.c), for builds on top of it */

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

/* ---- GET /v1/templates/{ref}/rootfs ---- */

/* A worker writes the tar into an unnamed file of $state/templates, so that its failure (an image that does not
 * match its manifest) is still an error answer, and the answer has a Content-Length. The request, the worker
 * and MHD's response each hold the export; the last to let go frees it. */
typedef struct Export {
        Manager *manager;
        Request *r;          /* NULL once the request ended */
        char *dir, *digest, *tmp_parent;
        int fd;
        uint64_t size, pos;
        bool working, responding;
        int result;
        Error error;
} Export;

static void export_unref(Export *x) {
        if (x->r || x->working || x->responding)
                return;
        free(x->dir);
        free(x->digest);
        free(x->tmp_parent);
        safe_close(x->fd);
        error_done(&x->error);
        free(x);
}

static void export_detach(void *userdata, Request *r) {
        Export *x = userdata;

        x->r = NULL;
        export_unref(x);
}

static void export_release(void *userdata) {
        Export *x = userdata;

        x->responding = false;
        export_unref(x);
}

static ssize_t export_read(void *userdata, char *buf, size_t max) {
        Export *x = userdata;
        ssize_t n;

        if (x->pos >= x->size)
                return HTTP_STREAM_END;
        if (max > x->size - x->pos)
                max = (size_t) (x->size - x->pos);
        n = pread(x->fd, buf, max, (off_t) x->pos);
        if (n <= 0)
                return HTTP_STREAM_ERROR;
        x->pos += (uint64_t) n;
        return n;
}

static void export_done(Manager *m, void *userdata) {
        Export *x = userdata;

        x->working = false;
        if (x->r)
                http_resume(x->r);
        else
                export_unref(x);
}

static void *export_worker(void *userdata) {
        Export *x = userdata;
        struct stat st;

        x->result = template_export(x->dir, x->digest, x->tmp_parent, x->fd, &x->error);
        if (x->result >= 0) {
                if (fstat(x->fd, &st) < 0)
                        x->result = error_set(&x->error, ERROR_INTERNAL, "cannot stat the tar: %m") ?: -errno;
                else
                        x->size = (uint64_t) st.st_size;
        }
        completion_post(x->manager, export_done, x);
        return NULL;
}

static void export_answer(Request *r, void *userdata) {
        static const char *const headers[] = { "Content-Type", "application/x-tar", NULL };
        Export *x = userdata;

        if (x->working)
                return http_continue(r, export_answer, x); /* a spurious wake-up */
        if (x->result < 0)
                return respond_error_or(r, &x->error, "the export failed");
        r->stream.read = export_read;
        r->stream.release = export_release;
        x->responding = true;
        if (http_respond_stream_status(r, 200, x->size, headers) < 0) {
                x->responding = false;
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
        }
}

void api_get_template_rootfs(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        Error e = {};
        Template *t;
        Export *x;
        int q;

        q = template_resolve(m, a->arg[0], &t, &e);
        if (q >= 0)
                q = template_export_check(t, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                error_done(&e);
                return;
        }
        x = calloc(1, sizeof *x);
        if (!x)
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        x->manager = m;
        x->fd = -1;
        x->dir = strdup(t->dir);
        x->digest = strdup(t->digest);
        if (asprintf(&x->tmp_parent, "%s/templates", m->state_dir) < 0)
                x->tmp_parent = NULL;
        q = x->dir && x->digest && x->tmp_parent ? template_import_tmpfile(m, &x->fd) : -ENOMEM;
        if (q >= 0) {
                x->working = true;
                q = worker_start(m, export_worker, x);
                x->working = q >= 0;
        }
        if (q < 0) {
                export_unref(x);
                return (void) http_respond_error(r, error_code_from_errno(q), "cannot start the export: %s",
                                                 strerror(-q));
        }
        x->r = r;
        r->stream = (HttpStream) { .detach = export_detach, .userdata = x };
        http_continue(r, export_answer, x);
}

/* ---- the archive as the body: streamed to an unnamed file in the state directory, bounded ---- */

typedef struct ImportUpload {
        Manager *manager;
        int fd;
        uint64_t received;
        uint64_t max;        /* import_max_disk_bytes */
        bool over;           /* the body went over max: the rest is dropped, the answer says so */
        uint64_t dropped;
        char *tag;
        cJSON *config;
} ImportUpload;

static void upload_free(ImportUpload *u) {
        if (!u)
                return;
        safe_close(u->fd);
        free(u->tag);
        cJSON_Delete(u->config);
        free(u);
}

static void upload_detach(void *userdata, Request *r) {
        upload_free(userdata);
}

static void respond_over(Request *r, ImportUpload *u) {
        http_respond_error(r, ERROR_LIMIT_EXCEEDED,
                           "the uploaded archive is over the import limit of %llu bytes (import_max_disk_bytes in "
                           "spaced.conf)", (unsigned long long) u->max);
}

static size_t upload_write(void *userdata, Request *r, const char *data, size_t n) {
        ImportUpload *u = userdata;

        if (u->over || u->received + n > u->max) {
                /* Never written: the rest is read and dropped so that the client gets the answer after its body,
                 * up to HTTP_DRAIN_MAX; a client that sends more is answered now and cut off. */
                u->over = true;
                u->dropped += n;
                if (u->dropped > HTTP_DRAIN_MAX)
                        respond_over(r, u);
                return n;
        }
        for (size_t done = 0; done < n;) {
                ssize_t w = write(u->fd, data + done, n - done);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0) {
                        int e = errno;
                        http_respond_error(r, error_code_from_errno(-e), "cannot store the uploaded archive: %s",
                                           strerror(e));
                        return n;
                }
                done += (size_t) w;
        }
        u->received += n;
        return n;
}

/* An archive body: any of these; everything else is the JSON form. */
static bool is_archive_type(const char *ct) {
        static const char *const types[] = { "application/octet-stream", "application/x-tar", "application/gzip",
                                             "application/x-gzip", "application/zstd", "application/x-xz", NULL };
        if (!ct)
                return false;
        for (const char *const *t = types; *t; t++) {
                size_t n = strlen(*t);
                if (strncasecmp(ct, *t, n) == 0 && (ct[n] == 0 || ct[n] == ';' || ct[n] == ' '))
                        return true;
        }
        return false;
}

/* From the headers, before any body is read: a JSON import over TCP is refused (it names a host path, which
 * only the unix socket's user may; the answer is the same whether or not the path exists, since none is
 * looked at), an archive body gets its file and its limit. */
void api_post_template_import_begin(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        ImportLimits limits = config_import_limits(&m->config);
        _cleanup_(error_done) Error msg = {};
        const char *ct = http_header(r, "Content-Type"), *v;
        ImportUpload *u;
        uint64_t declared;
        int q;

        if (!is_archive_type(ct)) {
                r->kind = REQUEST_JSON;
                if (r->tcp)
                        http_respond_error(r, ERROR_PERMISSION_DENIED,
                                           "over TCP an import takes the archive itself as the request body "
                                           "(Content-Type: application/octet-stream, ?tag=NAME:TAG, optional "
                                           "?config=JSON); a host path (\"source\") is accepted on the unix socket only");
                return;
        }
        if (http_content_length(r, &declared) >= 0 && declared > limits.max_disk_bytes)
                return (void) http_respond_error(r, ERROR_LIMIT_EXCEEDED,
                                                 "an archive of %llu bytes is over the import limit of %llu bytes "
                                                 "(import_max_disk_bytes in spaced.conf)",
                                                 (unsigned long long) declared,
                                                 (unsigned long long) limits.max_disk_bytes);
        u = calloc(1, sizeof *u);
        if (!u)
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        u->manager = m;
        u->fd = -1;
        u->max = limits.max_disk_bytes;
        v = http_query(r, "tag");
        if (v && *v && template_tag_parse(v, &u->tag, &msg) < 0) {
                upload_free(u);
                return (void) http_respond_error(r, ERROR_INVALID_REF, "%s", msg.message ?: "invalid tag");
        }
        v = http_query(r, "config");
        if (v && *v) {
                u->config = cJSON_Parse(v);
                if (!cJSON_IsObject(u->config)) {
                        upload_free(u);
                        return (void) http_respond_error(r, ERROR_INVALID_ARGUMENT, "config must be a JSON object");
                }
        }
        q = template_import_tmpfile(m, &u->fd);
        if (q < 0) {
                upload_free(u);
                return (void) http_respond_error(r, error_code_from_errno(q), "cannot store the upload: %s",
                                                 strerror(-q));
        }
        r->upload = (HttpUpload) { .write = upload_write, .detach = upload_detach, .userdata = u };
}

/* After the body: the file holds the whole archive. */
static void import_uploaded(Request *r) {
        ImportUpload *u = r->upload.userdata;
        Error e = {};
        Operation *op;
        unsigned wait;
        int q;

        if (!u || r->upload_failed)
                return (void) http_respond_error(r, ERROR_INTERNAL, "the upload was not stored");
        if (u->over)
                return respond_over(r, u);
        if (parse_wait(r, &wait) < 0)
                return;
        if (u->received == 0)
                return (void) http_respond_error(r, ERROR_INVALID_SOURCE,
                                                 "the request body is empty: send the archive (a rootfs tarball, plain "
                                                 "or compressed, or an OCI archive)");
        {
                ImportRequest req = { .source = "upload", .has_fd = true, .fd = u->fd, .tag = u->tag,
                                      .config = u->config };
                q = template_import_start(u->manager, &req, &op, &e);
        }
        if (q < 0) {
                respond_operation_error(r, &e, q);
                error_done(&e);
                return;
        }
        start_wait(r, op, WAIT_IMPORT, wait);
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

        if (r->kind == REQUEST_UPLOAD)
                return import_uploaded(r);
        if (r->tcp) /* refused from the headers already (begin); never a host path over TCP */
                return (void) http_respond_error(r, ERROR_PERMISSION_DENIED,
                                                 "a host path (\"source\") is accepted on the unix socket only");
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
        uint64_t freed, size;
        cJSON *o;
        int q;

        q = template_remove(m, a->arg[0], &untagged, &removed, &size, &freed, &e);
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
        cJSON_AddNumberToObject(o, "size_bytes", (double) size);
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
