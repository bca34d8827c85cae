/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "base64.h"
#include "core/util.h"
#include "e2b/e2b-parse.h"
#include "e2b/envd-files.h"
#include "macro.h"
#include "string-util.h"

/*
 * envd's /files: GET streams a file's bytes (with its size as Content-Length), POST writes files from a
 * multipart/form-data body (every part a file, its filename the target path) or from a raw
 * application/octet-stream body (?path=). Both run as the request's user (?username=, else the template's).
 * A URL signed with the sandbox's token (the SDKs' downloadUrl()/uploadUrl()) stands in for the token header.
 *
 * Uploads stream: the body is taken in slices, each slice goes through MHD's multipart parser into a queue of
 * at most about a slice of data and part ends, and the body is not read on while the queue has anything the
 * guest has not taken (credit). The parts are written one after another, each a FILE write of its own.
 * A body sent with Content-Encoding: gzip is inflated on the way, a slice of output at a time under the same
 * rule, so a small body that inflates to a lot costs no memory and stops at the sandbox's disk size.
 */

#define UPLOAD_SLICE (16U * 1024U)
#define UPLOAD_FILES_MAX 1000U
#define UPLOAD_PP_BUFFER (8U * 1024U)

/* ---- signed URLs */

/* "v1_" + base64(sha256("{path}:{read|write}:{user}:{token}[:{exp}]")) without '=' padding, as the SDKs
 * make it. */
int envd_signature_of(const char *path, const char *op, const char *user, const char *token, const char *exp,
                      char ret[static SIGNATURE_MAX]) {
        _cleanup_free_ char *raw = NULL;
        unsigned char md[32];
        unsigned mdlen = 0;
        int n;

        n = exp ? asprintf(&raw, "%s:%s:%s:%s:%s", path, op, user, token, exp)
                : asprintf(&raw, "%s:%s:%s:%s", path, op, user, token);
        if (n < 0)
                return -ENOMEM;
        if (EVP_Digest(raw, (size_t) n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != sizeof md)
                return -EIO;
        memcpy(ret, "v1_", 3);
        base64_encode(md, sizeof md, ret + 3);
        n = 3 + (int) base64_encoded_len(sizeof md);
        while (n > 3 && ret[n - 1] == '=')
                n--;
        ret[n] = 0;
        return 0;
}

int envd_signature_expiration_parse(const char *exp, long long *ret) {
        char *end;
        long long e;

        errno = 0;
        e = strtoll(exp, &end, 10);
        if (errno || end == exp || *end || strlen(exp) > 20)
                return -EINVAL;
        *ret = e;
        return 0;
}

/* A request without the token header but with ?signature=: the sandbox whose token signed it (every running
 * sandbox is tried, whichever matches, so the time says nothing of which). 1 with *ret, < 0 when answered. */
static int signed_sandbox(Request *r, const char *op, Sandbox **ret) {
        Manager *m = http_manager(r->http);
        const char *sig = http_query(r, "signature"), *exp = http_query(r, "signature_expiration"),
                   *path = http_query(r, "path") ?: "", *user = http_query(r, "username") ?: "";
        char want[SIGNATURE_MAX];
        Sandbox *found = NULL;
        size_t n = strlen(sig);

        if (exp) {
                long long e;

                if (envd_signature_expiration_parse(exp, &e) < 0)
                        return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                                  "signature_expiration must be unix seconds") ?: -EINVAL;
                if (e < now_unix())
                        return http_respond_error(r, ERROR_UNAUTHORIZED, "the signed URL has expired") ?: -EACCES;
        }
        for (Sandbox *s = m->sandboxes; s; s = s->next) {
                const char *token;

                if (s->pooled || !(token = s->access_token))
                        continue;
                if (envd_signature_of(path, op, user, token, exp, want) < 0)
                        return http_respond_error(r, ERROR_INTERNAL, "cannot compute the signature") ?: -EIO;
                if (strlen(want) == n && memeq_const_time(want, sig, n) && !found)
                        found = s;
        }
        if (!found)
                return http_respond_error(r, ERROR_UNAUTHORIZED,
                                          "the URL's signature is not one of a sandbox's token") ?: -EACCES;
        if (found->state != SANDBOX_RUNNING)
                return http_respond_error(r, ERROR_SANDBOX_UNAVAILABLE, "sandbox %s is %s, not running", found->id,
                                          sandbox_state_to_string(found->state)) ?: -EBUSY;
        sandbox_touch(found);
        *ret = found;
        return 1;
}

/* The sandbox, user and path of a /files request: 1 to go on, 0 when parked or answered. A signed URL grants
 * what its signature binds and nothing else: the path, the operation, the user of the signed query (never an
 * Authorization header, which anyone holding the link can add) and the expiry; *ret_signed tells the upload
 * to write that path alone. */
static int files_target(Request *r, const char *op, Sandbox **ret_s, char *user, const char *path,
                        char **ret_path, bool *ret_signed) {
        bool sig = http_query(r, "signature") && !http_header(r, "X-Access-Token") && !r->authenticated;

        if (ret_signed)
                *ret_signed = sig;
        if (sig) {
                if (signed_sandbox(r, op, ret_s) < 0)
                        return 0;
        } else if (e2b_envd_sandbox(r, ret_s) <= 0)
                return 0;
        if (e2b_envd_user(r, *ret_s, !sig, user) < 0)
                return 0;
        if (!path) {
                if (sig)
                        return http_respond_error(r, ERROR_INVALID_PATH, "a signed URL must name the file it "
                                                  "%s (?path=, as the signature binds it)",
                                                  streq(op, "read") ? "reads" : "writes"), 0;
                return 1;
        }
        return envd_resolve_path(r, user, path, ret_path);
}

/* A query value with its length (MHD's decoding may leave a NUL inside): NULL when absent; < 0 answered. */
static int query_path(Request *r, const char **ret) {
        const char *v = NULL;
        size_t len = 0;

        *ret = NULL;
        if (MHD_lookup_connection_value_n(r->connection, MHD_GET_ARGUMENT_KIND, "path", 4, &v, &len) != MHD_YES ||
            !v)
                return 0;
        if (strlen(v) != len)
                return http_respond_error(r, ERROR_INVALID_PATH, "path contains a NUL byte") ?: -EINVAL;
        *ret = v;
        return 0;
}

/* ---- GET /files */

/* The response body: the file's bytes from the transfer, as many as its size (Content-Length). MHD may free
 * the response after the request, and the request may end first: each forgets the other. */
typedef struct Download {
        Request *r;
        FileXfer *x;
        bool responding;
} Download;

static void download_detach(void *userdata, Request *r) {
        Download *d = userdata;

        d->r = NULL;
        file_xfer_detach(d->x); /* freed unless the response still reads from it */
        if (!d->responding)
                free(d);
}

static ssize_t download_read(void *cls, uint64_t pos, char *buf, size_t max) {
        Download *d = cls;
        ssize_t n = file_xfer_read(d->x, buf, max);

        if (n == CHANNEL_READ_END)
                return MHD_CONTENT_READER_END_OF_STREAM;
        if (n < 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        if (n == 0 && d->r)
                http_suspend(d->r); /* the transfer's waiter resumes it */
        return n;
}

static void download_free(void *cls) {
        Download *d = cls;

        d->responding = false;
        file_xfer_close_reader(d->x); /* freed if the request let go of it already */
        if (!d->r)
                free(d);
}

static void download_respond(Request *r, Download *d) {
        struct MHD_Response *resp;
        FileEntry e;
        enum MHD_Result q;

        if (file_xfer_reply_entry(d->x, &e) < 0)
                return (void) http_respond_error(r, ERROR_PROTOCOL_ERROR, "the sandbox's agent sent a malformed entry");
        file_xfer_open_reader(d->x);
        d->responding = true;
        resp = MHD_create_response_from_callback(e.size, 64 * 1024, download_read, d, download_free);
        if (!resp) {
                d->responding = false;
                file_xfer_close_reader(d->x);
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
        q = MHD_queue_response(r->connection, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        r->responded = true;
        if (q != MHD_YES)
                return;
        http_set_streaming(r);
}

/* The guest answered the read: the file, or why not. */
static void download_answered(Request *r, void *userdata) {
        Download *d = userdata;

        if (d->x->state == FILE_XFER_SENT)
                http_continue(r, download_answered, d);
        else if (d->x->state == FILE_XFER_FAILED)
                envd_respond_failed(r, d->x);
        else
                download_respond(r, d);
}

void envd_get_files(Request *r, const RouteArgs *a) {
        _cleanup_(error_done) Error err = {};
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_free_ char *path = NULL;
        char user[E2B_USER_MAX + 1];
        ChannelWaiter w = api_request_waiter(r);
        const char *p;
        Download *d;
        Sandbox *s;

        if (query_path(r, &p) < 0)
                return;
        if (!p)
                return (void) http_respond_error(r, ERROR_INVALID_PATH, "path is required");
        if (files_target(r, "read", &s, user, p, &path, NULL) <= 0)
                return;
        if (space_kv_add(&kv, "op", "read") < 0 || space_kv_add(&kv, "path", path) < 0 ||
            space_kv_add(&kv, "user", user) < 0)
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        d = calloc(1, sizeof *d);
        if (!d)
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        if (file_xfer_start(s, "read", path, &kv, &w, &d->x, &err) < 0) {
                free(d);
                return respond_error_or(r, &err, "cannot start the file operation");
        }
        d->r = r;
        r->stream = (HttpStream) { .detach = download_detach, .userdata = d };
        http_continue(r, download_answered, d);
}

/* ---- POST /files */

typedef struct UploadPart {
        char *path;
        char *filename;           /* as the part named it */
        uint64_t bytes;
} UploadPart;

typedef struct Upload {
        Request *r;
        Manager *manager;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        char user[E2B_USER_MAX + 1];
        char *query_path;             /* ?path=, resolved: the first part's target */
        bool signed_url;              /* by a signed URL: query_path is the only file it may write */
        struct MHD_PostProcessor *pp; /* multipart; NULL for a raw body */
        UploadPart *parts;
        size_t n_parts;
        /* What the parser produced and the guest has not taken yet: records of le32 part, le32 length (or
         * UINT32_MAX: the part ends), bytes. */
        SpaceBuf queue;
        size_t queue_off;
        size_t current;               /* the part being written */
        FileXfer *x;                  /* its write */
        bool body_done;
        z_stream *z;                  /* Content-Encoding: gzip */
        uint8_t *z_out;               /* UPLOAD_SLICE of inflated bytes */
        bool z_pending;               /* the last inflate filled z_out: more may come without input */
        bool z_end;
        uint64_t inflated, inflate_max;
        SpaceBuf meta;                /* X-Metadata-*: meta_key=/meta_value= records for every part's write */
        ErrorCode error;              /* the first failure, answered after the body */
        char *error_message;
        cJSON *results;
} Upload;

static void upload_fail(Upload *u, ErrorCode code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void upload_fail(Upload *u, ErrorCode code, const char *fmt, ...) {
        va_list ap;

        if (u->error != ERROR_NONE)
                return;
        u->error = code;
        va_start(ap, fmt);
        if (vasprintf(&u->error_message, fmt, ap) < 0)
                u->error_message = NULL;
        va_end(ap);
}

static void upload_free(Upload *u) {
        if (u->z) {
                inflateEnd(u->z);
                free(u->z);
        }
        free(u->z_out);
        if (u->pp)
                MHD_destroy_post_processor(u->pp);
        if (u->x)
                file_xfer_detach(u->x);
        for (size_t i = 0; i < u->n_parts; i++)
                free(u->parts[i].path), free(u->parts[i].filename);
        free(u->parts);
        space_buf_done(&u->queue);
        space_buf_done(&u->meta);
        free(u->query_path);
        free(u->error_message);
        cJSON_Delete(u->results);
        free(u);
}

static void upload_detach(void *userdata, Request *r) {
        upload_free(userdata);
}

static int queue_record(Upload *u, uint32_t part, uint32_t len, const char *data) {
        uint8_t h[8];

        space_put_le32(h, part);
        space_put_le32(h + 4, len);
        if (space_buf_append(&u->queue, h, sizeof h) < 0 ||
            (len != UINT32_MAX && len > 0 && space_buf_append(&u->queue, data, len) < 0))
                return -ENOMEM;
        return 0;
}

int envd_part_path(const char *name, const char *given, const char *user, char **ret_path, char *err,
                   size_t err_size) {
        _cleanup_free_ char *p = NULL;
        size_t n;

        *ret_path = NULL;
        if (given)
                p = strdup(given);
        else {
                if (!name || !*name) {
                        snprintf(err, err_size, "a part has no filename: it must be the file's path");
                        return -EINVAL;
                }
                n = strlen(name);
                if (n > SPACE_FILE_PATH_MAX) {
                        snprintf(err, err_size, "a part's filename is longer than %u bytes", SPACE_FILE_PATH_MAX);
                        return -EINVAL;
                }
                for (size_t i = 0; i < n; i++)
                        if ((unsigned char) name[i] < 0x20 || name[i] == 0x7f) {
                                snprintf(err, err_size, "a part's filename contains a control character");
                                return -EINVAL;
                        }
                if (e2b_resolve_path(name, user, &p) < 0)
                        p = NULL;
        }
        if (!p) {
                snprintf(err, err_size, "out of memory");
                return -ENOMEM;
        }
        n = strlen(p);
        if (n == 0 || n > SPACE_FILE_PATH_MAX || p[n - 1] == '/') {
                snprintf(err, err_size, "'%.200s' is not a file's path", p);
                return -EINVAL;
        }
        *ret_path = TAKE_PTR(p);
        return 0;
}

/* A new part whose target is name (the part's filename) or, for the first, ?path=. */
static int part_add(Upload *u, const char *name) {
        _cleanup_free_ char *p = NULL;
        char err[256];
        UploadPart *l;
        int k;

        if (u->signed_url && u->n_parts > 0) {
                upload_fail(u, ERROR_PERMISSION_DENIED, "a signed URL writes only the file it was signed for (%s); "
                            "this body has a second file part: send one part, or one request per file",
                            u->query_path);
                return -EPERM;
        }
        if (u->n_parts >= UPLOAD_FILES_MAX) {
                upload_fail(u, ERROR_LIMIT_EXCEEDED, "more than %u files in one upload", UPLOAD_FILES_MAX);
                return -E2BIG;
        }
        k = envd_part_path(name, u->n_parts == 0 ? u->query_path : NULL, u->user, &p, err, sizeof err);
        if (k < 0) {
                upload_fail(u, k == -ENOMEM ? ERROR_INTERNAL : ERROR_INVALID_PATH, "%s", err);
                return k;
        }
        l = reallocarray(u->parts, u->n_parts + 1, sizeof *l);
        if (!l) {
                upload_fail(u, ERROR_INTERNAL, "out of memory");
                return -ENOMEM;
        }
        u->parts = l;
        u->parts[u->n_parts] = (UploadPart) { .path = TAKE_PTR(p), .filename = strdup(name ?: "") };
        if (!u->parts[u->n_parts++].filename) {
                upload_fail(u, ERROR_INTERNAL, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                               const char *content_type, const char *transfer_encoding, const char *data,
                               uint64_t off, size_t size) {
        Upload *u = cls;
        UploadPart *cur = u->n_parts > 0 ? &u->parts[u->n_parts - 1] : NULL;

        if (!key || !streq(key, "file"))
                return MHD_YES; /* not a file: envd ignores it too */
        /* a part begins at offset 0; MHD may announce one without data first, then give its data from 0 */
        if (off == 0 && !(cur && cur->bytes == 0 && size > 0 && streq(cur->filename, filename ?: ""))) {
                if (cur && queue_record(u, (uint32_t) (u->n_parts - 1), UINT32_MAX, NULL) < 0)
                        return MHD_NO;
                if (part_add(u, filename) < 0)
                        return MHD_NO;
                cur = &u->parts[u->n_parts - 1];
        }
        if (size > 0) {
                if (queue_record(u, (uint32_t) (u->n_parts - 1), (uint32_t) size, data) < 0) {
                        upload_fail(u, ERROR_INTERNAL, "out of memory");
                        return MHD_NO;
                }
                cur->bytes += size;
        }
        return MHD_YES;
}

/* Starts the write of part i; the request is woken when the guest answered. */
static int part_start(Upload *u, size_t i) {
        _cleanup_(error_done) Error err = {};
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        ChannelWaiter w = api_request_waiter(u->r);
        Sandbox *s = sandbox_find_by_id(u->manager, u->sandbox_id);
        const char *path = u->parts[i].path;

        if (!s) {
                upload_fail(u, ERROR_SANDBOX_UNAVAILABLE, "the sandbox is gone");
                return -ENOENT;
        }
        /* envd makes the parents (as the user) and replaces what is there */
        if (space_kv_add(&kv, "op", "write") < 0 || space_kv_add(&kv, "path", path) < 0 ||
            space_kv_add(&kv, "user", u->user) < 0 || space_kv_add(&kv, "parents", "1") < 0) {
                upload_fail(u, ERROR_INTERNAL, "out of memory");
                return -ENOMEM;
        }
        if (space_buf_append(&kv, u->meta.data, u->meta.len) < 0) {
                upload_fail(u, ERROR_INTERNAL, "out of memory");
                return -ENOMEM;
        }
        if (file_xfer_start(s, "write", path, &kv, &w, &u->x, &err) < 0) {
                if (err.code != ERROR_NONE)
                        upload_fail(u, err.code, "%s", error_message(&err));
                else
                        upload_fail(u, ERROR_INTERNAL, "cannot start the write");
                return -EIO;
        }
        u->current = i;
        return 0;
}

static int part_done(Upload *u) {
        const char *path = u->parts[u->current].path, *name = strrchr(path, '/');
        cJSON *o = cJSON_CreateObject();
        FileEntry e;

        /* name, type and path (older Python SDKs make a WriteInfo(**item) of it), and the metadata the file
         * has now, read back as envd does, when it has some (which such an SDK never asked for) */
        if (!o || !cJSON_AddStringToObject(o, "name", name ? name + 1 : path) ||
            !cJSON_AddStringToObject(o, "type", "file") || !cJSON_AddStringToObject(o, "path", path) ||
            (file_xfer_reply_entry(u->x, &e) >= 0 && e.n_meta > 0 &&
             !cJSON_AddItemToObject(o, "metadata", file_entry_meta_json(&e))) ||
            !cJSON_AddItemToArray(u->results, o)) {
                cJSON_Delete(o);
                upload_fail(u, ERROR_INTERNAL, "out of memory");
                return -ENOMEM;
        }
        file_xfer_detach(u->x);
        u->x = NULL;
        return 0;
}

/* Moves the queue on as far as the guest lets it: true when it is empty. */
static bool upload_pump(Upload *u) {
        while (u->error == ERROR_NONE && u->queue_off < u->queue.len) {
                const uint8_t *h = u->queue.data + u->queue_off;
                uint32_t part = space_get_le32(h), len = space_get_le32(h + 4);

                if (!u->x && part_start(u, part) < 0)
                        break;
                if (u->x->state == FILE_XFER_SENT)
                        return false;
                if (u->x->state == FILE_XFER_FAILED) {
                        upload_fail(u, u->x->error_code ?: ERROR_IO_ERROR, "%s",
                                    u->x->error_message ?: "the write failed");
                        if (strncmp(u->x->error_message ?: "", "unknown user", 12) == 0)
                                u->error = ERROR_UNAUTHORIZED;
                        break;
                }
                if (len == UINT32_MAX) {
                        if (u->x->state == FILE_XFER_DONE) {
                                if (part_done(u) < 0)
                                        break;
                                u->queue_off += 8;
                                continue;
                        }
                        if (file_xfer_finish_upload(u->x) < 0) {
                                upload_fail(u, ERROR_CHANNEL_LOST, "lost the sandbox's agent during the upload");
                                break;
                        }
                        return false; /* until the guest renamed it into place */
                } else {
                        size_t took = file_xfer_upload(u->x, (const char *) h + 8, len);

                        if (took < len) {
                                /* keep the rest as a shorter record */
                                u->queue_off += took;
                                space_put_le32(u->queue.data + u->queue_off, part);
                                space_put_le32(u->queue.data + u->queue_off + 4, len - (uint32_t) took);
                                return false;
                        }
                        u->queue_off += 8 + len;
                }
        }
        if (u->error != ERROR_NONE) {
                u->queue.len = u->queue_off = 0;
                return true;
        }
        u->queue.len = u->queue_off = 0;
        return true;
}

/* Body bytes (inflated, when gzip) to the multipart parser or, for a raw body, to the queue. */
static void upload_feed(Upload *u, const char *data, size_t k) {
        if (u->pp) {
                if (MHD_post_process(u->pp, data, k) != MHD_YES)
                        upload_fail(u, ERROR_INVALID_ARGUMENT, "the multipart/form-data body is malformed");
        } else if (u->n_parts == 0 && part_add(u, NULL) < 0)
                ;
        else if (queue_record(u, 0, (uint32_t) k, data) < 0)
                upload_fail(u, ERROR_INTERNAL, "out of memory");
}

/* One inflate of up to k input bytes into at most a slice of output, which is fed on; *ret_consumed says
 * how much input zlib took. */
static void upload_inflate(Upload *u, const char *in, size_t k, size_t *ret_consumed) {
        size_t produced;
        int q;

        u->z->next_in = (Bytef *) in;
        u->z->avail_in = (uInt) k;
        u->z->next_out = u->z_out;
        u->z->avail_out = UPLOAD_SLICE;
        q = inflate(u->z, Z_NO_FLUSH);
        *ret_consumed = k - u->z->avail_in;
        produced = UPLOAD_SLICE - u->z->avail_out;
        u->z_pending = u->z->avail_out == 0;
        if (q == Z_STREAM_END)
                u->z_end = true;
        else if (q != Z_OK && q != Z_BUF_ERROR) {
                upload_fail(u, ERROR_INVALID_ARGUMENT, "the gzip body is malformed: %s",
                            u->z->msg ?: "inflate failed");
                return;
        }
        if (u->z_end && *ret_consumed < k) {
                upload_fail(u, ERROR_INVALID_ARGUMENT, "the body goes on after the end of its gzip stream");
                return;
        }
        u->inflated += produced;
        if (u->inflated > u->inflate_max) {
                upload_fail(u, ERROR_LIMIT_EXCEEDED, "the gzip body inflates to more than the sandbox's disk "
                            "(%" PRIu64 " MiB)", u->inflate_max >> 20);
                return;
        }
        if (produced > 0)
                upload_feed(u, (const char *) u->z_out, produced);
}

static size_t upload_write_gzip(Upload *u, Request *r, const char *data, size_t n) {
        size_t done = 0, k, consumed;

        while (u->error == ERROR_NONE && (done < n || u->z_pending)) {
                if (!upload_pump(u)) {
                        http_suspend(r);
                        return done;
                }
                k = n - done < UPLOAD_SLICE ? n - done : UPLOAD_SLICE;
                upload_inflate(u, data + done, k, &consumed);
                done += consumed;
                if (consumed == 0 && !u->z_pending && k > 0 && u->error == ERROR_NONE)
                        upload_fail(u, ERROR_INVALID_ARGUMENT, "the gzip body is malformed");
        }
        if (u->error == ERROR_NONE && !upload_pump(u))
                http_suspend(r);
        return n;
}

/* At the end of a gzip body: what zlib still holds goes out, and the stream must have ended. Returns false
 * while that waits for the guest. */
static bool upload_finish_gzip(Upload *u) {
        size_t consumed;

        while (u->error == ERROR_NONE && !u->z_end) {
                if (!upload_pump(u))
                        return false;
                upload_inflate(u, NULL, 0, &consumed);
                if (!u->z_pending && !u->z_end && u->error == ERROR_NONE)
                        upload_fail(u, ERROR_INVALID_ARGUMENT, "the gzip body is cut short");
        }
        return true;
}

static size_t upload_write(void *userdata, Request *r, const char *data, size_t n) {
        Upload *u = userdata;
        size_t done = 0;

        if (u->z)
                return upload_write_gzip(u, r, data, n);

        /* Slice by slice while the guest keeps up; MHD is only called back for the rest when we suspend
         * (after a partial take it waits for the socket instead). */
        while (done < n) {
                size_t k = n - done < UPLOAD_SLICE ? n - done : UPLOAD_SLICE;

                if (u->error != ERROR_NONE)
                        return n; /* dropped as it comes; the answer after the body says why */
                if (!upload_pump(u)) {
                        http_suspend(r);
                        return done;
                }
                upload_feed(u, data + done, k);
                done += k;
        }
        if (u->error == ERROR_NONE && !upload_pump(u))
                http_suspend(r);
        return n;
}

static void upload_respond(Request *r, Upload *u) {
        if (u->error != ERROR_NONE) {
                http_respond_error(r, u->error, "%s", u->error_message ?: error_code_to_string(u->error));
                return;
        }
        http_respond_json(r, 200, TAKE_PTR(u->results));
}

/* The body is complete (MHD's last call), or the guest moved on since: finish the last part, answer. */
static void upload_finish(Request *r, void *userdata) {
        Upload *u = userdata;

        if (!u->body_done) {
                if (u->z && !upload_finish_gzip(u)) {
                        http_continue(r, upload_finish, u);
                        return;
                }
                u->body_done = true;
                if (u->pp) {
                        /* the parser may hold the end of the last part; it says whether the body ended well */
                        if (MHD_destroy_post_processor(u->pp) != MHD_YES)
                                upload_fail(u, ERROR_INVALID_ARGUMENT,
                                            "the multipart/form-data body is malformed or cut short");
                        u->pp = NULL;
                }
                if (u->error == ERROR_NONE && u->n_parts == 0) {
                        /* an empty raw body, or one file with ?path= whose part had no data at all */
                        if (!u->query_path)
                                upload_fail(u, ERROR_INVALID_ARGUMENT, "the body has no part named 'file'");
                        else
                                (void) part_add(u, NULL);
                }
                if (u->error == ERROR_NONE &&
                    queue_record(u, (uint32_t) (u->n_parts - 1), UINT32_MAX, NULL) < 0)
                        upload_fail(u, ERROR_INTERNAL, "out of memory");
        }
        if (u->error == ERROR_NONE && !upload_pump(u)) {
                http_continue(r, upload_finish, u);
                return;
        }
        upload_respond(r, u);
}

void envd_post_files(Request *r, const RouteArgs *a) {
        Upload *u = r->upload.write == upload_write ? r->upload.userdata : NULL;

        if (!u) {
                if (!r->responded)
                        http_respond_error(r, ERROR_INTERNAL, "the upload was not started");
                return;
        }
        upload_finish(r, u);
}

/* X-Metadata-KEY: VALUE headers (envd 0.6.2), read as envd reads them: the key is what follows the prefix,
 * lowercased; an empty one is ignored; the first of a repeated key counts. Checked by envd's rules (its
 * filesystem.ValidateMetadata): printable US-ASCII keys and values, keys of at most SPACE_FILE_META_KEY_MAX
 * bytes, SPACE_FILE_META_BYTES_MAX in all with the user.e2b. prefix counted per key. */
typedef struct MetaHeaders {
        SpaceBuf *kv;
        size_t total;
        char error[200];
} MetaHeaders;

static const char *non_printable(const char *s) {
        for (; *s; s++)
                if ((unsigned char) *s < 0x20 || (unsigned char) *s > 0x7e)
                        return s;
        return NULL;
}

static bool meta_has(const SpaceBuf *kv, const char *key) {
        size_t off = 0, klen;
        const char *k, *v;

        while (space_kv_next(kv->data, kv->len, &off, &k, &klen, &v) > 0)
                if (klen == 8 && memcmp(k, "meta_key", 8) == 0 && streq(v, key))
                        return true;
        return false;
}

static enum MHD_Result on_meta_header(void *cls, enum MHD_ValueKind kind, const char *name, const char *value) {
        static const char prefix[] = "x-metadata-";
        MetaHeaders *m = cls;
        char key[SPACE_FILE_META_KEY_MAX + 1];
        const char *bad;
        size_t n;

        if (!name || strncasecmp(name, prefix, sizeof prefix - 1) != 0 || !name[sizeof prefix - 1])
                return MHD_YES;
        name += sizeof prefix - 1;
        value = value ?: "";
        n = strlen(name);
        if (n > SPACE_FILE_META_KEY_MAX) {
                snprintf(m->error, sizeof m->error, "invalid metadata: metadata key \"%.32s...\" exceeds %u bytes",
                         name, SPACE_FILE_META_KEY_MAX);
                return MHD_NO;
        }
        for (size_t i = 0; i <= n; i++)
                key[i] = (char) tolower((unsigned char) name[i]);
        bad = non_printable(key);
        if (bad || (bad = non_printable(value))) {
                snprintf(m->error, sizeof m->error,
                         "invalid metadata: metadata %s \"%.32s\" contains non-printable-ASCII byte 0x%02x",
                         non_printable(key) ? "key" : "value for key", key, (unsigned char) *bad);
                return MHD_NO;
        }
        if (meta_has(m->kv, key))
                return MHD_YES;
        m->total += strlen(SPACE_FILE_META_PREFIX) + n + strlen(value);
        if (m->total > SPACE_FILE_META_BYTES_MAX) {
                snprintf(m->error, sizeof m->error, "invalid metadata: total metadata size exceeds %u bytes",
                         SPACE_FILE_META_BYTES_MAX);
                return MHD_NO;
        }
        if (space_kv_add(m->kv, "meta_key", key) < 0 || space_kv_add(m->kv, "meta_value", value) < 0) {
                snprintf(m->error, sizeof m->error, "out of memory");
                return MHD_NO;
        }
        return MHD_YES;
}

/* From the headers: what kind of body, for which sandbox and user; the body then streams to upload_write. */
void envd_post_files_begin(Request *r, const RouteArgs *a) {
        const char *ct = http_header(r, MHD_HTTP_HEADER_CONTENT_TYPE), *ce = http_header(r, "Content-Encoding"), *p;
        _cleanup_free_ char *path = NULL;
        bool multipart;
        Sandbox *s;
        Upload *u;

        multipart = ct && strncasecmp(ct, "multipart/form-data", 19) == 0;
        if (!multipart && !(ct && strncasecmp(ct, "application/octet-stream", 24) == 0))
                return (void) http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                                 "send multipart/form-data (parts named 'file') or "
                                                 "application/octet-stream with ?path=");
        if (ce && strcasecmp(ce, "identity") != 0 && strcasecmp(ce, "gzip") != 0)
                return (void) http_respond_error(r, ERROR_NOT_SUPPORTED,
                                                 "Content-Encoding %.32s is not supported: send the body as it is, "
                                                 "or gzip", ce);
        if (query_path(r, &p) < 0)
                return;
        if (!multipart && !p)
                return (void) http_respond_error(r, ERROR_INVALID_PATH,
                                                 "an application/octet-stream upload needs ?path=");
        u = calloc(1, sizeof *u);
        if (!u)
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        if (files_target(r, "write", &s, u->user, p, &path, &u->signed_url) <= 0) {
                free(u);
                return;
        }
        u->r = r;
        u->manager = http_manager(r->http);
        memcpy(u->sandbox_id, s->id, sizeof u->sandbox_id);
        u->query_path = TAKE_PTR(path);
        u->results = cJSON_CreateArray();
        if (ce && strcasecmp(ce, "gzip") == 0) {
                u->z = calloc(1, sizeof *u->z);
                u->z_out = malloc(UPLOAD_SLICE);
                /* 16 + 15: a gzip wrapper (not zlib's), the largest window */
                if (!u->z || !u->z_out || inflateInit2(u->z, 16 + MAX_WBITS) != Z_OK) {
                        free(u->z);
                        u->z = NULL;
                        upload_free(u);
                        return (void) http_respond_error(r, ERROR_INTERNAL, "cannot set up gzip decoding");
                }
                u->inflate_max = s->disk_mib << 20;
        }
        if (multipart)
                u->pp = MHD_create_post_processor(r->connection, UPLOAD_PP_BUFFER, on_part, u);
        if (!u->results || (multipart && !u->pp)) {
                upload_free(u);
                return (void) http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                                 "cannot read the multipart/form-data body (no boundary?)");
        }
        /* refused after the body, which is dropped as it comes: a client still sending it (fetch) would not
         * read an answer that came before */
        MetaHeaders meta = { .kv = &u->meta };
        (void) MHD_get_connection_values(r->connection, MHD_HEADER_KIND, on_meta_header, &meta);
        if (meta.error[0])
                upload_fail(u, streq(meta.error, "out of memory") ? ERROR_INTERNAL : ERROR_INVALID_ARGUMENT, "%s",
                            meta.error);
        r->upload = (HttpUpload) { .write = upload_write, .detach = upload_detach, .userdata = u };
        http_set_streaming(r);
}
