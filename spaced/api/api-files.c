/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "channel/files.h"
#include "macro.h"
#include "sandbox/sandbox.h"
#include "template/template.h"
#include "user.h"

/*
 * /v1/sandboxes/{id}/files: read (GET, streamed), write (PUT, streamed), remove (DELETE), stat, list, mkdir,
 * move, symlink, attrs. Each request is one file operation on the sandbox's channel (files.c): the handler
 * starts it (once its sandbox is awake: api_when_awake()) and parks the request on a continuation that answers
 * when the guest did. A PUT is started from its headers (the route's begin hook), so that an error (no such
 * directory) is the answer before any of the body is read, and the body then streams to the guest under
 * credit; the route's handler runs after the body, once.
 */

static bool flag_value(const char *v) {
        return v && (streq(v, "1") || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0);
}

/* An absolute path of at most SPACE_FILE_PATH_MAX bytes without NUL; trailing slashes are dropped. */
static int check_path(Request *r, const char *what, const char *v, size_t len, char **ret) {
        char *p;
        size_t n = len;

        if (!v) {
                http_respond_error(r, ERROR_INVALID_PATH, "%s is required: an absolute path in the sandbox", what);
                return -EINVAL;
        }
        if (strlen(v) != len) {
                http_respond_error(r, ERROR_INVALID_PATH, "%s contains a NUL byte", what);
                return -EINVAL;
        }
        if (v[0] != '/') {
                http_respond_error(r, ERROR_INVALID_PATH, "%s '%.200s' is not absolute: paths in a sandbox start with '/'",
                                   what, v);
                return -EINVAL;
        }
        if (len > SPACE_FILE_PATH_MAX) {
                http_respond_error(r, ERROR_INVALID_PATH, "%s is longer than %u bytes", what, SPACE_FILE_PATH_MAX);
                return -EINVAL;
        }
        while (n > 1 && v[n - 1] == '/')
                n--;
        p = strndup(v, n);
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

static int query_path(Request *r, const char *key, char **ret) {
        const char *v = NULL;
        size_t len = 0;

        if (MHD_lookup_connection_value_n(r->connection, MHD_GET_ARGUMENT_KIND, key, strlen(key), &v, &len) != MHD_YES)
                v = NULL;
        return check_path(r, key, v, len, ret);
}

static int body_path(Request *r, cJSON *o, const char *key, char **ret) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        if (v && !cJSON_IsString(v)) {
                http_respond_error(r, ERROR_INVALID_PATH, "%s must be a string", key);
                return -EINVAL;
        }
        return check_path(r, key, v ? v->valuestring : NULL, v ? strlen(v->valuestring) : 0, ret);
}

/* cJSON ends a string at an escaped NUL without saying so: a body with one is refused outright. */
static int refuse_escaped_nul(Request *r) {
        const char *b = (const char *) r->body.data;

        for (size_t i = 0; i + 6 <= r->body.len; i++)
                if (b[i] == '\\' && b[i + 1] == 'u' && b[i + 2] == '0' && b[i + 3] == '0' && b[i + 4] == '0' &&
                    b[i + 5] == '0') {
                        http_respond_error(r, ERROR_INVALID_PATH, "the request contains a NUL character (\\u0000)");
                        return -EINVAL;
                }
        return 0;
}

/* Octal permission bits from a query value ("0644", "755"). */
static int query_mode(Request *r, unsigned *ret, bool *ret_set) {
        const char *v = http_query(r, "mode");
        char *end;
        unsigned long m;

        *ret_set = false;
        if (!v)
                return 0;
        errno = 0;
        m = strtoul(v, &end, 8);
        if (errno || !*v || *end || v[0] == '-' || v[0] == '+' || m > 07777) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "mode=%.20s: expected octal permission bits, e.g. 0644", v);
                return -EINVAL;
        }
        *ret = (unsigned) m;
        *ret_set = true;
        return 0;
}

static int query_number(Request *r, const char *key, long long min, long long max, long long *ret, bool *ret_set) {
        const char *v = http_query(r, key);
        char *end;
        long long n;

        *ret_set = false;
        if (!v)
                return 0;
        errno = 0;
        n = strtoll(v, &end, 10);
        if (errno || !*v || *end || v[0] == '+' || v[0] == ' ' || n < min || n > max) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s=%.20s: expected a whole number from %lld to %lld", key,
                                   v, min, max);
                return -EINVAL;
        }
        *ret = n;
        *ret_set = true;
        return 0;
}

/* mode in a JSON body: a number (the permission bits, as stat shows them) or a string of octal digits. */
static int body_mode(Request *r, cJSON *o, unsigned *ret, bool *ret_set) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "mode");
        uint64_t m;
        int q;

        *ret_set = false;
        if (!v || cJSON_IsNull(v))
                return 0;
        if (cJSON_IsString(v)) {
                char *end;

                errno = 0;
                m = strtoul(v->valuestring, &end, 8);
                if (errno || !v->valuestring[0] || *end || v->valuestring[0] == '-' || m > 07777) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "mode \"%.20s\": expected octal permission bits",
                                           v->valuestring);
                        return -EINVAL;
                }
        } else {
                q = get_uint_field(r, o, "mode", 0, 07777, &m);
                if (q < 0)
                        return q;
        }
        *ret = (unsigned) m;
        *ret_set = true;
        return 0;
}

/* Who owns what an op makes: uid/gid as numbers, or owner as NAME|UID[:GROUP|GID] (resolved in the guest),
 * or, when neither is given and the op creates (creates), the sandbox's default user where that user could
 * have made it and root elsewhere, as spacectl cp does (ARCHITECTURE.md, "Files and owners"). */
typedef struct FileOwner {
        bool uid_set, gid_set;
        uint64_t uid, gid;
        const char *owner;
} FileOwner;

static int add_owner(Request *r, Sandbox *s, const FileOwner *o, bool creates, SpaceBuf *kv) {
        const char *def;
        int q = 0;

        if (o->owner && (o->uid_set || o->gid_set)) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "give owner or uid/gid, not both");
                return -EINVAL;
        }
        if (o->owner && space_user_spec_parse(o->owner, NULL) < 0) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                   "owner \"%.70s\": expected NAME or UID, optionally followed by :GROUP or :GID",
                                   o->owner);
                return -EINVAL;
        }
        if (o->owner)
                q = space_kv_add(kv, "chown", o->owner);
        else if (o->uid_set || o->gid_set) {
                if (o->uid_set)
                        q = space_kv_addf(kv, "uid", "%llu", (unsigned long long) o->uid);
                if (q >= 0 && o->gid_set)
                        q = space_kv_addf(kv, "gid", "%llu", (unsigned long long) o->gid);
        } else if (creates && (def = template_default_user(http_manager(r->http), s)) && !streq(def, "root") &&
                   !streq(def, "0"))
                q = space_kv_add(kv, "chown", def) < 0 ? -ENOMEM : space_kv_add(kv, "chown_if", "writable");
        if (q < 0) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

/* Runs k with the sandbox of the URL, woken first if it was suspended (api_when_awake()). */
static void files_run(Request *r, const RouteArgs *a, ApiAwake k) {
        Sandbox *s;

        if (resolve_sandbox(r, a->arg[0], &s) >= 0)
                api_when_awake(r, s, a, k);
}

/* In files_run()'s k: whether s runs with its agent connected; answers when it does not. */
static bool files_running(Request *r, Sandbox *s) {
        if (s->state != SANDBOX_RUNNING || !s->channel.agent) {
                http_respond_error(r, ERROR_SANDBOX_NOT_RUNNING, "sandbox %s is %s, not running%s", s->id,
                                   sandbox_state_to_string(s->state),
                                   s->state == SANDBOX_PAUSED ? ": resume it first" : "");
                return false;
        }
        return true;
}

static void respond_failed(Request *r, FileXfer *x) {
        ErrorCode code = x->error_code != ERROR_NONE ? x->error_code : ERROR_IO_ERROR;

        http_respond_error(r, code, "%s", x->error_message ?: error_code_to_string(code));
}

/* Answers with the entry the guest sent, at path. */
static void respond_entry(Request *r, FileXfer *x, const char *path, unsigned status) {
        FileEntry e;

        if (file_xfer_reply_entry(x, &e) < 0) {
                http_respond_error(r, ERROR_PROTOCOL_ERROR, "the sandbox's agent sent a malformed entry");
                return;
        }
        http_respond_json(r, status, file_entry_to_json(path, &e));
}

/* The request ended: the transfer it served is done with it. */
static void xfer_detach(void *userdata, Request *r) {
        file_xfer_detach(userdata);
}

/* The transfer r serves, or NULL. */
static FileXfer *xfer_of(Request *r) {
        return r->stream.detach == xfer_detach ? r->stream.userdata : NULL;
}

/* Sends FILE with kv (op= and path= among them; path is what the transfer reports) and parks the request
 * until the answer, which k (with the transfer) answers; NULL when it answered instead. */
static FileXfer *send_op(Request *r, Sandbox *s, const char *op, const char *path, const SpaceBuf *kv,
                         HttpContinuation k) {
        _cleanup_(error_done) Error err = {};
        ChannelWaiter w = api_request_waiter(r);
        FileXfer *x;

        if (file_xfer_start(s, op, path, kv, &w, &x, &err) < 0) {
                respond_error_or(r, &err, "cannot start the file operation");
                return NULL;
        }
        r->stream = (HttpStream) { .detach = xfer_detach, .userdata = x };
        http_continue(r, k, x);
        return x;
}

/* Adds op= and path= to kv, then as send_op(). */
static FileXfer *start(Request *r, Sandbox *s, const char *op, const char *path, SpaceBuf *kv,
                       HttpContinuation k) {
        if (space_kv_add(kv, "op", op) < 0 || space_kv_add(kv, "path", path) < 0) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return NULL;
        }
        return send_op(r, s, op, path, kv, k);
}

static ssize_t xfer_read(void *userdata, char *buf, size_t max) {
        return api_stream_result(file_xfer_read(userdata, buf, max));
}

static void xfer_release(void *userdata) {
        file_xfer_close_reader(userdata);
}

/* Answers a read or list with a streaming (chunked) response fed by the transfer; for a read the headers carry
 * the file's mode and mtime from the OK. */
static int respond_stream(Request *r, FileXfer *x) {
        bool list = streq(x->op, "list");
        const char *headers[7] = { "Content-Type", list ? "application/json" : "application/octet-stream" };
        char mode[32], mtime[32];
        int q;

        if (!list) {
                FileEntry e;

                if (file_xfer_reply_entry(x, &e) >= 0) {
                        snprintf(mode, sizeof mode, "%04o", e.mode);
                        snprintf(mtime, sizeof mtime, "%" PRId64, e.mtime);
                        headers[2] = "X-Space-Mode";
                        headers[3] = mode;
                        headers[4] = "X-Space-Mtime";
                        headers[5] = mtime;
                }
        }
        r->stream.read = xfer_read;
        r->stream.release = xfer_release;
        file_xfer_open_reader(x);
        q = http_respond_stream(r, headers);
        if (q == -ENOMEM)
                file_xfer_close_reader(x); /* no response was made; the request still holds the transfer */
        return q;
}

/* A continuation's first step: false while the guest has not answered (parked again, on k). */
static bool xfer_answered(Request *r, FileXfer *x, HttpContinuation k) {
        if (x->state != FILE_XFER_SENT)
                return true;
        http_continue(r, k, x);
        return false;
}

/* Answers an operation whose answer is an entry: the guest's entry with status, or why it failed. */
static void answer_entry(Request *r, FileXfer *x, int status) {
        if (x->state == FILE_XFER_FAILED)
                respond_failed(r, x);
        else
                respond_entry(r, x, x->path, status);
}

static void answered_entry_200(Request *r, void *userdata) {
        if (xfer_answered(r, userdata, answered_entry_200))
                answer_entry(r, userdata, 200);
}

static void answered_entry_201(Request *r, void *userdata) {
        if (xfer_answered(r, userdata, answered_entry_201))
                answer_entry(r, userdata, 201);
}

/* A read or a list answered: its stream, or why it failed. */
static void answered_stream(Request *r, void *userdata) {
        FileXfer *x = userdata;

        if (!xfer_answered(r, x, answered_stream))
                return;
        if (x->state == FILE_XFER_FAILED)
                respond_failed(r, x);
        else if (respond_stream(r, x) < 0 && !r->responded)
                http_respond_error(r, ERROR_INTERNAL, "cannot answer the request");
}

static void answered_remove(Request *r, void *userdata) {
        FileXfer *x = userdata;

        if (!xfer_answered(r, x, answered_remove))
                return;
        if (x->state == FILE_XFER_FAILED)
                respond_failed(r, x);
        else
                http_respond_empty(r, 204);
}

/* ---- GET /files (read), GET /files/stat, GET /files/list ---- */

static void get_file_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_free_ char *path = NULL;

        if (!files_running(r, s) || query_path(r, "path", &path) < 0)
                return;
        start(r, s, "read", path, &kv, answered_stream);
}

void api_get_file(Request *r, const RouteArgs *a) {
        files_run(r, a, get_file_awake);
}

static void get_file_stat_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_free_ char *path = NULL;

        if (!files_running(r, s) || query_path(r, "path", &path) < 0)
                return;
        if (flag_value(http_query(r, "follow")) && space_kv_add(&kv, "follow", "1") < 0)
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        start(r, s, "stat", path, &kv, answered_entry_200);
}

void api_get_file_stat(Request *r, const RouteArgs *a) {
        files_run(r, a, get_file_stat_awake);
}

static void get_file_list_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_free_ char *path = NULL;
        long long depth = 1;
        bool set;

        if (!files_running(r, s) || query_path(r, "path", &path) < 0 ||
            query_number(r, "depth", 1, SPACE_FILE_LIST_DEPTH_MAX, &depth, &set) < 0)
                return;
        if (space_kv_addf(&kv, "depth", "%lld", depth) < 0)
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        start(r, s, "list", path, &kv, answered_stream);
}

void api_get_file_list(Request *r, const RouteArgs *a) {
        files_run(r, a, get_file_list_awake);
}

/* ---- DELETE /files ---- */

static void delete_file_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_free_ char *path = NULL;

        if (!files_running(r, s) || query_path(r, "path", &path) < 0)
                return;
        if (streq(path, "/"))
                return (void) http_respond_error(r, ERROR_INVALID_PATH, "refusing to remove the sandbox's '/'");
        if (flag_value(http_query(r, "recursive")) && space_kv_add(&kv, "recursive", "1") < 0)
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        start(r, s, "remove", path, &kv, answered_remove);
}

void api_delete_file(Request *r, const RouteArgs *a) {
        files_run(r, a, delete_file_awake);
}

/* ---- POST /files/mkdir, /files/move, /files/symlink, /files/attrs ---- */

/* The shared part of the JSON routes: the body, parsed (NULL: answered). */
static cJSON *json_route(Request *r, Sandbox *s, const char *const *fields) {
        if (!files_running(r, s) || refuse_escaped_nul(r) < 0)
                return NULL;
        return parse_body_object(r, fields);
}

static int body_owner(Request *r, Sandbox *s, cJSON *o, bool creates, SpaceBuf *kv) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "owner");
        FileOwner fo = {};
        int qu, qg;

        qu = get_uint_field(r, o, "uid", 0, UINT32_MAX - 1, &fo.uid);
        if (qu < 0)
                return qu;
        qg = get_uint_field(r, o, "gid", 0, UINT32_MAX - 1, &fo.gid);
        if (qg < 0)
                return qg;
        fo.uid_set = qu > 0;
        fo.gid_set = qg > 0;
        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsString(v)) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "owner must be a string: NAME|UID[:GROUP|GID]");
                        return -EINVAL;
                }
                fo.owner = v->valuestring;
        }
        return add_owner(r, s, &fo, creates, kv);
}

static void post_file_mkdir_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        static const char *const fields[] = { "path", "mode", "parents", "uid", "gid", "owner", NULL };
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_free_ char *path = NULL;
        unsigned mode = 0;
        bool mode_set, parents = false;
        cJSON *o;

        o = json_route(r, s, fields);
        if (!o)
                return;
        if (body_path(r, o, "path", &path) >= 0 && body_mode(r, o, &mode, &mode_set) >= 0 &&
            get_bool_field(r, o, "parents", &parents) >= 0 && body_owner(r, s, o, true, &kv) >= 0) {
                if ((mode_set && space_kv_addf(&kv, "mode", "%u", mode) < 0) ||
                    (parents && space_kv_add(&kv, "parents", "1") < 0))
                        http_respond_error(r, ERROR_INTERNAL, "out of memory");
                else
                        start(r, s, "mkdir", path, &kv, answered_entry_201);
        }
        cJSON_Delete(o);
}

void api_post_file_mkdir(Request *r, const RouteArgs *a) {
        files_run(r, a, post_file_mkdir_awake);
}

static void post_file_move_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        static const char *const fields[] = { "from", "to", NULL };
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_free_ char *from = NULL, *to = NULL;
        cJSON *o;

        /* the transfer's path is `to` */
        o = json_route(r, s, fields);
        if (!o)
                return;
        if (body_path(r, o, "from", &from) >= 0 && body_path(r, o, "to", &to) >= 0) {
                if (streq(from, "/"))
                        http_respond_error(r, ERROR_INVALID_PATH, "refusing to move the sandbox's '/'");
                else if (space_kv_add(&kv, "op", "move") < 0 || space_kv_add(&kv, "path", from) < 0 ||
                         space_kv_add(&kv, "to", to) < 0)
                        http_respond_error(r, ERROR_INTERNAL, "out of memory");
                else
                        send_op(r, s, "move", to, &kv, answered_entry_200);
        }
        cJSON_Delete(o);
}

void api_post_file_move(Request *r, const RouteArgs *a) {
        files_run(r, a, post_file_move_awake);
}

static void post_file_symlink_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        static const char *const fields[] = { "path", "target", "uid", "gid", "owner", NULL };
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_free_ char *path = NULL;
        cJSON *o, *t;

        o = json_route(r, s, fields);
        if (!o)
                return;
        t = cJSON_GetObjectItemCaseSensitive(o, "target");
        if (body_path(r, o, "path", &path) < 0)
                ;
        else if (!cJSON_IsString(t) || !t->valuestring[0] || strlen(t->valuestring) > SPACE_FILE_PATH_MAX)
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "target must be a non-empty string of at most %u bytes",
                                   SPACE_FILE_PATH_MAX);
        else if (body_owner(r, s, o, true, &kv) >= 0) {
                if (space_kv_add(&kv, "target", t->valuestring) < 0)
                        http_respond_error(r, ERROR_INTERNAL, "out of memory");
                else
                        start(r, s, "symlink", path, &kv, answered_entry_201);
        }
        cJSON_Delete(o);
}

void api_post_file_symlink(Request *r, const RouteArgs *a) {
        files_run(r, a, post_file_symlink_awake);
}

static void post_file_attrs_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        static const char *const fields[] = { "path", "mode", "mtime", "uid", "gid", "owner", NULL };
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_free_ char *path = NULL;
        unsigned mode = 0;
        bool mode_set;
        cJSON *o, *mt;

        o = json_route(r, s, fields);
        if (!o)
                return;
        mt = cJSON_GetObjectItemCaseSensitive(o, "mtime");
        if (body_path(r, o, "path", &path) < 0 || body_mode(r, o, &mode, &mode_set) < 0)
                ;
        else if (mt && !cJSON_IsNull(mt) &&
                 (!cJSON_IsNumber(mt) || mt->valuedouble != floor(mt->valuedouble) || fabs(mt->valuedouble) > 1e15))
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "mtime must be a whole number of seconds since 1970");
        else if (body_owner(r, s, o, false, &kv) >= 0) {
                if ((mode_set && space_kv_addf(&kv, "mode", "%u", mode) < 0) ||
                    (mt && cJSON_IsNumber(mt) && space_kv_addf(&kv, "mtime", "%lld", (long long) mt->valuedouble) < 0))
                        http_respond_error(r, ERROR_INTERNAL, "out of memory");
                else
                        start(r, s, "attrs", path, &kv, answered_entry_200);
        }
        cJSON_Delete(o);
}

void api_post_file_attrs(Request *r, const RouteArgs *a) {
        files_run(r, a, post_file_attrs_awake);
}

/* ---- PUT /files ---- */

/* The body, as it comes (r->upload); the transfer lives as long as r. */
static size_t upload_write(void *userdata, Request *r, const char *data, size_t n) {
        FileXfer *x = userdata;

        size_t took;

        if (x->state == FILE_XFER_OPEN) {
                took = file_xfer_upload(x, data, n);
                if (took < n)
                        http_suspend(r); /* until credit comes back */
                return took;
        }
        /* The write failed while the body came (no_space): the rest is dropped as it comes, which costs the
         * daemon nothing but reading it, and the answer after the body says what went wrong. */
        r->drained += n;
        return n;
}

/* The guest answered the write's FILE (or did not yet: parked again): its error is the answer before any of
 * the body is read, else the body may come now (upload_write streams it, under credit). */
static void put_opened(Request *r, void *userdata) {
        FileXfer *x = userdata;

        if (!xfer_answered(r, x, put_opened))
                return;
        if (x->state == FILE_XFER_FAILED) {
                respond_failed(r, x);
                return;
        }
        http_set_streaming(r);
}

/* EOF went after the body: the guest renames its temporary file into place (parked until it did), and the
 * answer is the new entry, or why the write failed. */
static void put_done(Request *r, void *userdata) {
        FileXfer *x = userdata;

        if (x->state == FILE_XFER_SENT || x->state == FILE_XFER_OPEN) {
                http_continue(r, put_done, x);
                return;
        }
        if (x->state == FILE_XFER_FAILED)
                respond_failed(r, x);
        else
                respond_entry(r, x, x->path, 201);
}

/* From the headers, with the sandbox awake: start the write, and park until the guest opened its temporary
 * file (put_opened). */
static void put_begin_awake(Request *r, Sandbox *s, const RouteArgs *a) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_free_ char *path = NULL;
        long long mtime = 0, uid = 0, gid = 0;
        bool mode_set, mtime_set, uid_set, gid_set;
        FileOwner fo;
        unsigned mode = 0;
        const char *raw;
        FileXfer *x;

        if (!files_running(r, s) || query_path(r, "path", &path) < 0 || query_mode(r, &mode, &mode_set) < 0 ||
            query_number(r, "mtime", -(1LL << 40), 1LL << 40, &mtime, &mtime_set) < 0 ||
            query_number(r, "uid", 0, UINT32_MAX - 1, &uid, &uid_set) < 0 ||
            query_number(r, "gid", 0, UINT32_MAX - 1, &gid, &gid_set) < 0)
                return;
        raw = http_query(r, "path");
        if (streq(path, "/") || (raw && raw[0] && raw[strlen(raw) - 1] == '/'))
                return (void) http_respond_error(r, ERROR_IS_A_DIRECTORY,
                                                 "'%.200s' names a directory (it ends in '/'): name a file to write", raw);
        fo = (FileOwner) { .uid_set = uid_set, .uid = (uint64_t) uid, .gid_set = gid_set, .gid = (uint64_t) gid,
                           .owner = http_query(r, "owner") };
        if (add_owner(r, s, &fo, true, &kv) < 0)
                return;
        if ((mode_set && space_kv_addf(&kv, "mode", "%u", mode) < 0) ||
            (mtime_set && space_kv_addf(&kv, "mtime", "%lld", mtime) < 0) ||
            (flag_value(http_query(r, "parents")) && space_kv_add(&kv, "parents", "1") < 0))
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        x = start(r, s, "write", path, &kv, put_opened);
        if (x)
                r->upload = (HttpUpload) { .write = upload_write, .userdata = x };
}

/* The route's begin, from the headers: an error (no such directory) is the answer before any of the body is
 * read. The body never waits in memory: it is not read while the request is parked, on the wake or on the
 * guest's open. */
void api_put_file_begin(Request *r, const RouteArgs *a) {
        files_run(r, a, put_begin_awake);
}

/* After the body (which went to the guest as it came): send EOF, then put_done(). */
void api_put_file(Request *r, const RouteArgs *a) {
        FileXfer *x = xfer_of(r);

        if (!x) {
                http_respond_error(r, ERROR_INTERNAL, "the write did not start");
                return;
        }
        if (x->state == FILE_XFER_OPEN && file_xfer_finish_upload(x) < 0) {
                http_respond_error(r, ERROR_CHANNEL_LOST, "lost the sandbox's agent during the upload");
                return;
        }
        put_done(r, x);
}
