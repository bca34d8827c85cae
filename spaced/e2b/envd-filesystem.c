/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2b/e2b-parse.h"
#include "e2b/envd-files.h"
#include "macro.h"
#include "string-util.h"
#include "user.h"

/*
 * envd's filesystem.Filesystem service over Connect RPC (JSON): Stat, ListDir, MakeDir, Move, Remove here,
 * the watchers in envd-watch.c, and the /files REST route in envd-files.c. Every call is one file operation
 * of the guest agent (channel/files.h), run as the request's user (envd's semantics: that user's permissions,
 * and what it creates is its own), routed once to start it and again when the guest answered.
 */

static void rpc_stat(Request *r, const RouteArgs *a);
static void rpc_list_dir(Request *r, const RouteArgs *a);
static void rpc_make_dir(Request *r, const RouteArgs *a);
static void rpc_move(Request *r, const RouteArgs *a);
static void rpc_remove(Request *r, const RouteArgs *a);

#define RPC(name, handler) ENVD_RPC("filesystem.Filesystem", name, handler)

const Route envd_filesystem_routes[] = {
        RPC("Stat", rpc_stat),
        RPC("ListDir", rpc_list_dir),
        RPC("MakeDir", rpc_make_dir),
        RPC("Move", rpc_move),
        RPC("Remove", rpc_remove),
        ENVD_STREAM("filesystem.Filesystem", "WatchDir", envd_watch_dir),
        RPC("CreateWatcher", envd_create_watcher),
        RPC("GetWatcherEvents", envd_get_watcher_events),
        RPC("RemoveWatcher", envd_remove_watcher),
        { "GET", "/files", envd_get_files, .auth = ROUTE_AUTH_TOKEN, .ready = e2b_envd_ready,
          .errors = ERROR_STYLE_E2B },
        { "POST", "/files", envd_post_files, .begin = envd_post_files_begin, .auth = ROUTE_AUTH_TOKEN,
          .ready = e2b_envd_ready, .errors = ERROR_STYLE_E2B },
        {},
};

/* ---- what every call shares */

int envd_check_path(Request *r, const char *what, const char *path) {
        size_t n = strlen(path);

        if (n > SPACE_FILE_PATH_MAX)
                return http_respond_error(r, ERROR_INVALID_PATH, "%s is longer than %u bytes", what,
                                          SPACE_FILE_PATH_MAX) ?: -EINVAL;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) path[i] < 0x20 || path[i] == 0x7f)
                        return http_respond_error(r, ERROR_INVALID_PATH,
                                                  "%s contains a control character (byte %zu)", what, i) ?: -EINVAL;
        return 0;
}

int envd_user_path(Request *r, Sandbox *s, char *user, const char *path, char **ret_path) {
        if (e2b_envd_user(r, s, true, user) < 0)
                return 0;
        return envd_resolve_path(r, user, path, ret_path);
}

int envd_resolve_path(Request *r, const char *user, const char *path, char **ret_path) {
        _cleanup_free_ char *p = NULL;
        size_t n;

        if (e2b_resolve_path(path, user, &p) < 0) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return 0;
        }
        if (envd_check_path(r, "path", p) < 0)
                return 0;
        /* "/a/b/" is "/a/b", as the guest's paths go */
        n = strlen(p);
        while (n > 1 && p[n - 1] == '/')
                p[--n] = 0;
        *ret_path = TAKE_PTR(p);
        return 1;
}

int envd_fs_target(Request *r, Sandbox **ret_s, char *user, const char *path, char **ret_path) {
        if (e2b_envd_sandbox(r, ret_s) <= 0)
                return 0;
        return envd_user_path(r, *ret_s, user, path, ret_path);
}

static void call_detach(void *userdata, Request *r) {
        EnvdCall *call = userdata;

        if (call->x)
                file_xfer_detach(call->x);
        space_buf_done(&call->json);
        free(call->path);
        free(call);
}

EnvdCall *envd_call_of(Request *r) {
        return r->stream.detach == call_detach ? r->stream.userdata : NULL;
}

EnvdCall *envd_call_start(Request *r, Sandbox *s, const char *user, const char *op, const char *path, SpaceBuf *kv,
                          HttpContinuation k) {
        _cleanup_(error_done) Error err = {};
        ChannelWaiter w = api_request_waiter(r);
        EnvdCall *call;

        if (space_kv_add(kv, "op", op) < 0 || space_kv_add(kv, "path", path) < 0 ||
            space_kv_add(kv, "user", user) < 0 || space_kv_add(kv, "names", "1") < 0) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return NULL;
        }
        call = calloc(1, sizeof *call);
        if (!call || !(call->path = strdup(path))) {
                free(call);
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return NULL;
        }
        if (file_xfer_start(s, op, path, kv, &w, &call->x, &err) < 0) {
                free(call->path);
                free(call);
                respond_error_or(r, &err, "cannot start the file operation");
                return NULL;
        }
        r->stream = (HttpStream) { .detach = call_detach, .userdata = call };
        http_continue(r, k, call);
        return call;
}

bool envd_call_answered(Request *r, EnvdCall *call, HttpContinuation k) {
        if (call->x->state != FILE_XFER_SENT)
                return true;
        http_continue(r, k, call);
        return false;
}

int envd_call_collect(Request *r, EnvdCall *call, HttpContinuation k) {
        char buf[64 * 1024];

        for (;;) {
                ssize_t n = file_xfer_read(call->x, buf, sizeof buf);

                if (n == CHANNEL_READ_END)
                        return 1;
                if (n == CHANNEL_READ_ERROR || call->x->state == FILE_XFER_FAILED) {
                        envd_respond_failed(r, call->x);
                        return -EIO;
                }
                if (n == 0) {
                        http_continue(r, k, call); /* the transfer wakes the request when more came */
                        return 0;
                }
                if (call->json.len + (size_t) n > ENVD_LIST_JSON_MAX)
                        return http_respond_error(r, ERROR_LIMIT_EXCEEDED,
                                                  "the listing is over %u MiB: list less deep",
                                                  ENVD_LIST_JSON_MAX >> 20) ?: -E2BIG;
                if (space_buf_append(&call->json, buf, (size_t) n) < 0)
                        return http_respond_error(r, ERROR_INTERNAL, "out of memory") ?: -ENOMEM;
        }
}

void envd_respond_failed(Request *r, FileXfer *x) {
        ErrorCode code = x->error_code != ERROR_NONE ? x->error_code : ERROR_IO_ERROR;
        const char *msg = x->error_message ?: error_code_to_string(code);

        /* envd answers an unknown user as unauthenticated; the agent's message says which failure it is */
        if (strncmp(msg, "unknown user", 12) == 0)
                code = ERROR_UNAUTHORIZED;
        http_respond_error(r, code, "%s", msg);
}

/* ---- EntryInfo */

/* Go's FileMode.String(), which envd sends: type and special-bit letters (or '-'), then rwxrwxrwx. */
static void permissions_string(const FileEntry *e, char buf[static 16]) {
        static const char rwx[] = "rwxrwxrwx";
        size_t n = 0;

        if (e->type == FILE_ENTRY_DIR)
                buf[n++] = 'd';
        else if (e->type == FILE_ENTRY_SYMLINK)
                buf[n++] = 'L';
        else if (e->type == FILE_ENTRY_OTHER)
                buf[n++] = '?';
        if (e->mode & 04000)
                buf[n++] = 'u';
        if (e->mode & 02000)
                buf[n++] = 'g';
        if (e->mode & 01000)
                buf[n++] = 't';
        if (n == 0)
                buf[n++] = '-';
        for (int i = 0; i < 9; i++)
                buf[n++] = e->mode & (0400 >> i) ? rwx[i] : '-';
        buf[n] = 0;
}

/* A google.protobuf.Timestamp as protojson writes it, which is what envd sends: RFC 3339 in UTC with 0, 3, 6
 * or 9 digits of the second's fraction, as few as hold the nanoseconds. */
static void timestamp_string(int64_t sec, uint32_t nsec, char buf[static 48]) {
        time_t t = (time_t) sec;
        struct tm tm;
        size_t n;

        if (!gmtime_r(&t, &tm) || (n = strftime(buf, 48, "%Y-%m-%dT%H:%M:%S", &tm)) == 0) {
                strcpy(buf, "1970-01-01T00:00:00Z");
                return;
        }
        if (nsec == 0 || nsec > 999999999)
                snprintf(buf + n, 48 - n, "Z");
        else if (nsec % 1000000 == 0)
                snprintf(buf + n, 48 - n, ".%03uZ", nsec / 1000000);
        else if (nsec % 1000 == 0)
                snprintf(buf + n, 48 - n, ".%06uZ", nsec / 1000);
        else
                snprintf(buf + n, 48 - n, ".%09uZ", nsec);
}

int envd_symlink_target(const char *path, const char *target, char **ret) {
        _cleanup_free_ char *joined = NULL;
        char *out, *o;
        size_t dir;

        if (!path || path[0] != '/' || !target || !*target)
                return -EINVAL;
        dir = (size_t) (strrchr(path, '/') - path);
        if (target[0] == '/')
                joined = strdup(target);
        else if (asprintf(&joined, "%.*s/%s", (int) dir, path, target) < 0)
                joined = NULL;
        out = joined ? malloc(strlen(joined) + 2) : NULL;
        if (!out)
                return -ENOMEM;
        o = out;
        /* one component at a time, as Go's filepath.Clean: "." goes, ".." takes the last one back (not past /) */
        for (const char *p = joined; *p;) {
                size_t n = strcspn(p, "/");

                if (n == 0 || (n == 1 && p[0] == '.'))
                        ;
                else if (n == 2 && p[0] == '.' && p[1] == '.') {
                        while (o > out && *--o != '/')
                                ;
                } else {
                        *o++ = '/';
                        memcpy(o, p, n);
                        o += n;
                }
                p += n + (p[n] == '/');
        }
        if (o == out)
                *o++ = '/';
        *o = 0;
        *ret = out;
        return 0;
}

/* envd's FileType of an entry: a symlink is that of what it leads to (Go's os.Stat of the resolved target;
 * unspecified when dangling). An agent before version 6 says nothing of it: such a link is a file, as before. */
static const char *entry_type(const FileEntry *e) {
        FileEntryType t = e->type;

        if (t == FILE_ENTRY_SYMLINK)
                t = e->has_target_type ? e->target_type : e->resolved ? FILE_ENTRY_OTHER : FILE_ENTRY_FILE;
        /* envd's proto has files and directories only (the SDKs drop other types): a device, a FIFO is
         * unspecified */
        return t == FILE_ENTRY_DIR ? "FILE_TYPE_DIRECTORY" : t == FILE_ENTRY_OTHER ? "FILE_TYPE_UNSPECIFIED"
                                                                                     : "FILE_TYPE_FILE";
}

/* symlinkTarget as envd gives it: Go's filepath.EvalSymlinks of the link, which the guest did (realpath, as the
 * user), or on failure (dangling, a loop) the link's own path. An agent before version 6 gives the text only:
 * then it is made absolute from the link's directory, without following links on the way. */
static int add_symlink_target(cJSON *o, const char *path, const FileEntry *e) {
        _cleanup_free_ char *abs = NULL;

        if (e->resolved) {
                cJSON_AddStringToObject(o, "symlinkTarget", e->resolved[0] ? e->resolved : path);
                return 0;
        }
        if (envd_symlink_target(path, e->target, &abs) == -ENOMEM)
                return -ENOMEM;
        cJSON_AddStringToObject(o, "symlinkTarget", abs ?: e->target);
        return 0;
}

/* metadata: taken (NULL or {}: left out, as protojson leaves an empty map out). */
static cJSON *entry_info(const char *path, const FileEntry *e, const char *owner, const char *group,
                         cJSON *metadata) {
        cJSON *o = cJSON_CreateObject();
        const char *name = strrchr(path, '/');
        char perms[16], when[48], num[16];
        unsigned mode = e->mode;

        if (!o) {
                cJSON_Delete(metadata);
                return NULL;
        }
        /* a symlink's mode is its target's (0 when dangling), its permissions string the link's own */
        if (e->type == FILE_ENTRY_SYMLINK && (e->has_target_type || e->resolved))
                mode = e->has_target_type ? e->target_mode : 0;
        name = name && name[1] ? name + 1 : path;
        permissions_string(e, perms);
        timestamp_string(e->mtime, e->mtime_nsec, when);
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddStringToObject(o, "type", entry_type(e));
        cJSON_AddStringToObject(o, "path", path);
        cJSON_AddNumberToObject(o, "size", (double) e->size);
        cJSON_AddNumberToObject(o, "mode", mode & 0777);
        cJSON_AddStringToObject(o, "permissions", perms);
        snprintf(num, sizeof num, "%u", e->uid);
        cJSON_AddStringToObject(o, "owner", owner ?: num);
        snprintf(num, sizeof num, "%u", e->gid);
        cJSON_AddStringToObject(o, "group", group ?: num);
        cJSON_AddStringToObject(o, "modifiedTime", when);
        if ((e->target && add_symlink_target(o, path, e) < 0)) {
                cJSON_Delete(metadata);
                cJSON_Delete(o);
                return NULL;
        }
        if (cJSON_GetArraySize(metadata) > 0)
                cJSON_AddItemToObject(o, "metadata", metadata);
        else
                cJSON_Delete(metadata);
        return o;
}

cJSON *envd_entry_info(const char *path, const FileEntry *e, const char *owner, const char *group) {
        cJSON *metadata = NULL;

        if (e->n_meta > 0 && !(metadata = file_entry_meta_json(e)))
                return NULL;
        return entry_info(path, e, owner, group, metadata);
}

/* A name the guest sent for an owner or group: the shape of a user name, else not used. */
static const char *valid_name(const char *v) {
        return v && *v && strlen(v) <= E2B_USER_MAX && space_user_spec_parse(v, NULL) >= 0 && !strchr(v, ':') ? v
                                                                                                           : NULL;
}

cJSON *envd_reply_entry_info(FileXfer *x, const char *path) {
        const char *owner = NULL, *group = NULL;
        FileEntry e;

        if (file_xfer_reply_entry(x, &e) < 0)
                return NULL;
        (void) space_kv_get(x->reply.data, x->reply.len, "owner", &owner);
        (void) space_kv_get(x->reply.data, x->reply.len, "group", &group);
        return envd_entry_info(path, &e, valid_name(owner), valid_name(group));
}

/* The name uname=/gname= records of a list's OK give id, or NULL. */
static const char *list_name(FileXfer *x, const char *key, uint32_t id) {
        size_t off = 0, klen;
        const char *k, *v;
        char want[16];
        size_t wl = (size_t) snprintf(want, sizeof want, "%u:", id);

        while (space_kv_next(x->reply.data, x->reply.len, &off, &k, &klen, &v) > 0)
                if (klen == strlen(key) && memcmp(k, key, klen) == 0 && strncmp(v, want, wl) == 0)
                        return valid_name(v + wl);
        return NULL;
}

static int json_u64(cJSON *o, const char *key, double max, uint64_t *ret) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > max)
                return -EBADMSG;
        *ret = (uint64_t) v->valuedouble;
        return 0;
}

int envd_list_entry_infos(FileXfer *x, const SpaceBuf *json, cJSON **ret_array) {
        cJSON *doc, *list, *out, *it;

        doc = cJSON_ParseWithLength((const char *) json->data, json->len);
        list = cJSON_GetObjectItemCaseSensitive(doc, "entries");
        out = cJSON_CreateArray();
        if (!cJSON_IsArray(list) || !out) {
                cJSON_Delete(doc);
                cJSON_Delete(out);
                return doc ? -EBADMSG : -ENOMEM;
        }
        /* channel/files.c made this JSON from entries it checked: only the shape is looked at again */
        cJSON_ArrayForEach(it, list) {
                cJSON *path = cJSON_GetObjectItemCaseSensitive(it, "path"),
                      *type = cJSON_GetObjectItemCaseSensitive(it, "type"),
                      *target = cJSON_GetObjectItemCaseSensitive(it, "target"),
                      *resolved = cJSON_GetObjectItemCaseSensitive(it, "resolved"),
                      *target_type = cJSON_GetObjectItemCaseSensitive(it, "target_type"),
                      *metadata = cJSON_DetachItemFromObjectCaseSensitive(it, "metadata");
                FileEntry e = {};
                cJSON *mtime = cJSON_GetObjectItemCaseSensitive(it, "mtime");
                uint64_t mode, uid, gid, nsec;
                cJSON *info;

                if (!cJSON_IsString(path) || !cJSON_IsString(type) || json_u64(it, "mode", 07777, &mode) < 0 ||
                    json_u64(it, "size", 9.0e15, &e.size) < 0 || json_u64(it, "uid", UINT32_MAX, &uid) < 0 ||
                    json_u64(it, "gid", UINT32_MAX, &gid) < 0) {
                        cJSON_Delete(metadata);
                        continue;
                }
                if (cJSON_IsNumber(mtime)) /* it may be before 1970 */
                        e.mtime = (int64_t) mtime->valuedouble;
                if (json_u64(it, "mtime_nsec", 999999999, &nsec) >= 0)
                        e.mtime_nsec = (uint32_t) nsec;
                e.type = streq(type->valuestring, "dir")       ? FILE_ENTRY_DIR
                         : streq(type->valuestring, "symlink") ? FILE_ENTRY_SYMLINK
                         : streq(type->valuestring, "file")    ? FILE_ENTRY_FILE
                                                               : FILE_ENTRY_OTHER;
                e.mode = (unsigned) mode;
                e.uid = (uint32_t) uid;
                e.gid = (uint32_t) gid;
                e.target = cJSON_IsString(target) ? target->valuestring : NULL;
                e.resolved = cJSON_IsString(resolved) ? resolved->valuestring : NULL;
                if (cJSON_IsString(target_type) && json_u64(it, "target_mode", 07777, &mode) >= 0) {
                        e.has_target_type = true;
                        e.target_type = streq(target_type->valuestring, "dir")    ? FILE_ENTRY_DIR
                                        : streq(target_type->valuestring, "file") ? FILE_ENTRY_FILE
                                                                                  : FILE_ENTRY_OTHER;
                        e.target_mode = (unsigned) mode;
                }
                info = entry_info(path->valuestring, &e, list_name(x, "uname", e.uid), list_name(x, "gname", e.gid),
                                  cJSON_IsObject(metadata) ? metadata : (cJSON_Delete(metadata), NULL));
                if (!info || !cJSON_AddItemToArray(out, info)) {
                        cJSON_Delete(info);
                        cJSON_Delete(doc);
                        cJSON_Delete(out);
                        return -ENOMEM;
                }
        }
        cJSON_Delete(doc);
        *ret_array = out;
        return 0;
}

/* ---- the request message */

/* The unary call's message; cJSON ends a string at an escaped NUL without saying so, so a body with one is
 * refused outright. NULL when answered. */
static cJSON *rpc_message(Request *r) {
        const char *b = (const char *) r->body.data;

        for (size_t i = 0; i + 6 <= r->body.len; i++)
                if (memcmp(b + i, "\\u0000", 6) == 0) {
                        http_respond_error(r, ERROR_INVALID_PATH, "the request contains a NUL character (\\u0000)");
                        return NULL;
                }
        return connect_request_message(r, false);
}

/* A string field (proto3: absent is ""); < 0 when answered. */
static int msg_string(Request *r, cJSON *o, const char *key, const char **ret) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        *ret = "";
        if (!v || cJSON_IsNull(v))
                return 0;
        if (!cJSON_IsString(v))
                return http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s must be a string", key) ?: -EINVAL;
        *ret = v->valuestring;
        return 0;
}

/* Starts op on the message's `path`, as the request's user. */
static void start_path_op(Request *r, const char *op, SpaceBuf *kv, HttpContinuation k) {
        _cleanup_free_ char *path = NULL;
        char user[E2B_USER_MAX + 1];
        const char *p;
        Sandbox *s;
        cJSON *o;

        o = rpc_message(r);
        if (!o)
                return;
        if (msg_string(r, o, "path", &p) >= 0 && envd_fs_target(r, &s, user, p, &path) > 0)
                envd_call_start(r, s, user, op, path, kv, k);
        cJSON_Delete(o);
}

/* The answer of a call whose answer is {"entry": EntryInfo}. */
static void answered_entry(Request *r, void *userdata) {
        EnvdCall *call = userdata;
        cJSON *o, *e;

        if (!envd_call_answered(r, call, answered_entry))
                return;
        if (call->x->state == FILE_XFER_FAILED) {
                envd_respond_failed(r, call->x);
                return;
        }
        e = envd_reply_entry_info(call->x, call->path);
        o = cJSON_CreateObject();
        if (!e || !o || !cJSON_AddItemToObject(o, "entry", e)) {
                cJSON_Delete(e);
                cJSON_Delete(o);
                http_respond_error(r, ERROR_PROTOCOL_ERROR, "the sandbox's agent sent a malformed entry");
                return;
        }
        connect_respond(r, o);
}

static void answered_remove(Request *r, void *userdata) {
        EnvdCall *call = userdata;

        if (!envd_call_answered(r, call, answered_remove))
                return;
        /* envd removes with os.RemoveAll: what is not there is removed already */
        if (call->x->state == FILE_XFER_FAILED && call->x->error_code != ERROR_NOT_FOUND)
                envd_respond_failed(r, call->x);
        else
                connect_respond(r, NULL);
}

/* The listing, read as it comes, answered as {"entries": [EntryInfo]}. */
static void answered_list(Request *r, void *userdata) {
        EnvdCall *call = userdata;
        cJSON *o, *entries;

        if (!envd_call_answered(r, call, answered_list))
                return;
        if (call->x->state == FILE_XFER_FAILED)
                return envd_respond_failed(r, call->x);
        if (envd_call_collect(r, call, answered_list) <= 0)
                return;
        if (envd_list_entry_infos(call->x, &call->json, &entries) < 0)
                return (void) http_respond_error(r, ERROR_PROTOCOL_ERROR, "cannot read the listing");
        o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToObject(o, "entries", entries)) {
                cJSON_Delete(entries);
                cJSON_Delete(o);
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        }
        connect_respond(r, o);
}

/* ---- the calls */

static void rpc_stat(Request *r, const RouteArgs *a) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};

        start_path_op(r, "stat", &kv, answered_entry);
}

static void rpc_make_dir(Request *r, const RouteArgs *a) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};

        /* envd: parents are made; a directory that exists is already_exists (the SDKs' false) */
        if (space_kv_add(&kv, "parents", "1") < 0 || space_kv_add(&kv, "exclusive", "1") < 0)
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        start_path_op(r, "mkdir", &kv, answered_entry);
}

static void rpc_remove(Request *r, const RouteArgs *a) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};

        if (space_kv_add(&kv, "recursive", "1") < 0)
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        start_path_op(r, "remove", &kv, answered_remove);
}

static void rpc_move(Request *r, const RouteArgs *a) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_free_ char *from = NULL, *to = NULL;
        char user[E2B_USER_MAX + 1];
        const char *src, *dst;
        Sandbox *s;
        cJSON *o;

        o = rpc_message(r);
        if (!o)
                return;
        if (msg_string(r, o, "source", &src) >= 0 && msg_string(r, o, "destination", &dst) >= 0 &&
            envd_fs_target(r, &s, user, src, &from) > 0) {
                if (e2b_resolve_path(dst, user, &to) < 0)
                        http_respond_error(r, ERROR_INTERNAL, "out of memory");
                else if (envd_check_path(r, "destination", to) < 0)
                        ;
                else if (streq(from, "/"))
                        http_respond_error(r, ERROR_INVALID_PATH, "refusing to move the sandbox's '/'");
                else if (space_kv_add(&kv, "to", to) < 0)
                        http_respond_error(r, ERROR_INTERNAL, "out of memory");
                else {
                        EnvdCall *call = envd_call_start(r, s, user, "move", from, &kv, answered_entry);

                        /* what is answered is the entry at the destination */
                        if (call) {
                                free(call->path);
                                call->path = TAKE_PTR(to);
                        }
                }
        }
        cJSON_Delete(o);
}

static void rpc_list_dir(Request *r, const RouteArgs *a) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_free_ char *path = NULL;
        char user[E2B_USER_MAX + 1];
        const char *p;
        Sandbox *s;
        cJSON *o, *v;
        double depth = 1;

        o = rpc_message(r);
        if (!o)
                return;
        v = cJSON_GetObjectItemCaseSensitive(o, "depth");
        if (cJSON_IsNumber(v))
                depth = v->valuedouble;
        else if (cJSON_IsString(v)) /* proto3 JSON may send numbers as strings */
                depth = strtod(v->valuestring, NULL);
        if (depth == 0)
                depth = 1; /* envd: 0 (the default) is 1 */
        if (!(depth >= 1) || depth != (double) (long) depth)
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "depth must be a whole number of at least 1");
        else if (msg_string(r, o, "path", &p) >= 0 && envd_fs_target(r, &s, user, p, &path) > 0) {
                /* deeper than the agent walks is as deep as it walks */
                if (space_kv_addf(&kv, "depth", "%u", depth > SPACE_FILE_LIST_DEPTH_MAX ? SPACE_FILE_LIST_DEPTH_MAX
                                                                                     : (unsigned) depth) < 0)
                        http_respond_error(r, ERROR_INTERNAL, "out of memory");
                else
                        envd_call_start(r, s, user, "list", path, &kv, answered_list);
        }
        cJSON_Delete(o);
}
