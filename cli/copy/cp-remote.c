/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copy/cp.h"
#include "macro.h"

/* The daemon's /v1/sandboxes/{id}/files routes, for cp. Errors are printed here, naming the sandbox and
 * the path: "sandbox 'x' has no /nope: No such file or directory". */

void cp_entry_done(CpEntry *e) {
        free(e->path);
        free(e->name);
        free(e->target);
        *e = (CpEntry) {};
}

void cp_entries_free(CpEntry *l, size_t n) {
        for (size_t i = 0; i < n; i++)
                cp_entry_done(&l[i]);
        free(l);
}

char *cp_join(const char *a, const char *b) {
        size_t n = strlen(a);
        char *s;

        while (*b == '/')
                b++;
        if (!*b)
                return strdup(a);
        if (asprintf(&s, "%s%s%s", a, n > 0 && a[n - 1] == '/' ? "" : "/", b) < 0)
                return NULL;
        return s;
}

static int errno_for_code(ErrorCode code) {
        static const int table[_ERROR_CODE_MAX] = {
                [ERROR_NOT_FOUND] = ENOENT,          [ERROR_EXISTS] = EEXIST,
                [ERROR_NOT_EMPTY] = ENOTEMPTY,       [ERROR_IS_A_DIRECTORY] = EISDIR,
                [ERROR_NOT_A_DIRECTORY] = ENOTDIR,   [ERROR_PERMISSION_DENIED] = EACCES,
                [ERROR_NO_SPACE] = ENOSPC,           [ERROR_INVALID_PATH] = EINVAL,
                [ERROR_SANDBOX_NOT_FOUND] = ESRCH,
        };
        return (unsigned) code < _ERROR_CODE_MAX && table[code] ? -table[code] : -EIO;
}

int cp_log_reply_error(CpContext *c, const SpaceHttpReply *reply, const char *path) {
        int r = errno_for_code(reply->error);

        if (r == -ENOENT)
                log_error("cp: sandbox '%s' has no %s: No such file or directory", c->ref, path);
        else if (r == -ESRCH || r == -EIO)
                log_error("cp: %s", reply->error_message);
        else
                log_error("cp: sandbox '%s': %s", c->ref, reply->error_message);
        return r;
}

static int transport_error(CpContext *c, int r) {
        if (r == -ENOMEM)
                log_error("out of memory");
        else
                cli_log_transport_error(c->http, r);
        return r;
}

/* files_path + suffix + "?path=<escaped>" + extra ("&k=v", already escaped) */
static char *url(CpContext *c, const char *suffix, const char *path, const char *extra) {
        _cleanup_free_ char *e = NULL;
        char *u;

        if (space_http_escape(path, &e) < 0)
                return NULL;
        if (asprintf(&u, "%s%s?path=%s%s", c->files_path, suffix, e, extra ?: "") < 0)
                return NULL;
        return u;
}

static int entry_from_json(const cJSON *o, CpEntry *ret) {
        const char *type = json_str(o, "type"), *path = json_str(o, "path"), *name = json_str(o, "name"),
                   *target = json_str(o, "target");
        double mode, size, mtime, uid, gid;
        CpEntry e = {};

        if (!type || !path || !name || !json_num(o, "mode", &mode) || !json_num(o, "size", &size) ||
            !json_num(o, "mtime", &mtime) || !json_num(o, "uid", &uid) || !json_num(o, "gid", &gid) || mode < 0 ||
            mode > 07777 || size < 0 || uid < 0 || gid < 0 || uid > UINT32_MAX || gid > UINT32_MAX)
                return -EBADMSG;
        e.type = streq(type, "file") ? CP_FILE : streq(type, "dir") ? CP_DIR : streq(type, "symlink") ? CP_SYMLINK
                                                                                                        : CP_OTHER;
        e.mode = (unsigned) mode;
        e.size = (uint64_t) size;
        e.mtime = (int64_t) mtime;
        e.uid = (uint32_t) uid;
        e.gid = (uint32_t) gid;
        e.path = strdup(path);
        e.name = strdup(name);
        e.target = target ? strdup(target) : NULL;
        if (!e.path || !e.name || (target && !e.target)) {
                cp_entry_done(&e);
                return -ENOMEM;
        }
        *ret = e;
        return 0;
}

int cp_remote_stat(CpContext *c, const char *path, bool follow, CpEntry *ret) {
        _cleanup_free_ char *u = url(c, "/stat", path, follow ? "&follow=1" : NULL);
        SpaceHttpReply reply = {};
        int r;

        if (!u)
                return transport_error(c, -ENOMEM);
        r = space_http_call(c->http, "GET", u, NULL, &reply);
        if (r < 0)
                return transport_error(c, r);
        if (!space_http_reply_ok(&reply)) {
                r = reply.error == ERROR_NOT_FOUND ? -ENOENT : cp_log_reply_error(c, &reply, path);
                space_http_reply_done(&reply);
                return r;
        }
        r = entry_from_json(reply.json, ret);
        space_http_reply_done(&reply);
        if (r < 0)
                log_error("cp: the daemon described %s in a way spacectl does not understand", path);
        return r;
}

int cp_remote_list(CpContext *c, const char *path, CpEntry **ret, size_t *ret_n) {
        _cleanup_free_ char *u = url(c, "/list", path, NULL);
        SpaceHttpReply reply = {};
        const cJSON *entries, *i;
        CpEntry *l;
        size_t n = 0;
        int r;

        if (!u)
                return transport_error(c, -ENOMEM);
        r = space_http_call(c->http, "GET", u, NULL, &reply);
        if (r < 0)
                return transport_error(c, r);
        if (!space_http_reply_ok(&reply)) {
                r = cp_log_reply_error(c, &reply, path);
                space_http_reply_done(&reply);
                return r;
        }
        entries = cJSON_GetObjectItemCaseSensitive(reply.json, "entries");
        if (!cJSON_IsArray(entries)) {
                space_http_reply_done(&reply);
                log_error("cp: the daemon's listing of %s has no entries", path);
                return -EBADMSG;
        }
        l = calloc((size_t) cJSON_GetArraySize(entries) + 1, sizeof *l);
        if (!l) {
                space_http_reply_done(&reply);
                return transport_error(c, -ENOMEM);
        }
        cJSON_ArrayForEach(i, entries) {
                r = entry_from_json(i, &l[n]);
                if (r < 0) {
                        cp_entries_free(l, n);
                        space_http_reply_done(&reply);
                        log_error("cp: the daemon listed %s in a way spacectl does not understand", path);
                        return r;
                }
                n++;
        }
        space_http_reply_done(&reply);
        *ret = l;
        *ret_n = n;
        return 0;
}

/* Numbers (-a) or --chown's owner for what an op makes; neither: the daemon's default. */
static void add_owner(cJSON *o, int64_t uid, int64_t gid, const char *chown) {
        if (uid >= 0)
                cJSON_AddNumberToObject(o, "uid", (double) uid);
        if (gid >= 0)
                cJSON_AddNumberToObject(o, "gid", (double) gid);
        if (uid < 0 && gid < 0 && chown)
                cJSON_AddStringToObject(o, "owner", chown);
}

/* POST files/<op> with body; not_ok_quiet: an error code that is returned without printing (as its -errno). */
static int post(CpContext *c, const char *op, cJSON *body, const char *path, ErrorCode quiet_code) {
        _cleanup_free_ char *u = NULL;
        SpaceHttpReply reply = {};
        int r;

        if (asprintf(&u, "%s/%s", c->files_path, op) < 0) {
                cJSON_Delete(body);
                return transport_error(c, -ENOMEM);
        }
        r = space_http_call(c->http, "POST", u, body, &reply);
        cJSON_Delete(body);
        if (r < 0)
                return transport_error(c, r);
        if (!space_http_reply_ok(&reply)) {
                r = quiet_code != ERROR_NONE && reply.error == quiet_code ? errno_for_code(quiet_code)
                                                                            : cp_log_reply_error(c, &reply, path);
                space_http_reply_done(&reply);
                return r;
        }
        space_http_reply_done(&reply);
        return 0;
}

int cp_remote_mkdir(CpContext *c, const char *path, unsigned mode, bool parents, int64_t uid, int64_t gid) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "path", path);
        cJSON_AddNumberToObject(o, "mode", mode);
        if (parents)
                cJSON_AddBoolToObject(o, "parents", true);
        add_owner(o, uid, gid, c->chown);
        return post(c, "mkdir", o, path, ERROR_EXISTS);
}

int cp_remote_symlink(CpContext *c, const char *path, const char *target, int64_t uid, int64_t gid) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "path", path);
        cJSON_AddStringToObject(o, "target", target);
        add_owner(o, uid, gid, c->chown);
        return post(c, "symlink", o, path, ERROR_EXISTS);
}

int cp_remote_attrs(CpContext *c, const char *path, int mode, int64_t mtime, int64_t uid, int64_t gid) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "path", path);
        if (mode >= 0)
                cJSON_AddNumberToObject(o, "mode", mode);
        if (mtime != INT64_MIN)
                cJSON_AddNumberToObject(o, "mtime", (double) mtime);
        add_owner(o, uid, gid, NULL); /* attrs makes nothing: an existing directory keeps its owner */
        return post(c, "attrs", o, path, ERROR_NONE);
}

int cp_remote_remove(CpContext *c, const char *path, bool recursive) {
        _cleanup_free_ char *u = url(c, "", path, recursive ? "&recursive=1" : NULL);
        SpaceHttpReply reply = {};
        int r;

        if (!u)
                return transport_error(c, -ENOMEM);
        r = space_http_call(c->http, "DELETE", u, NULL, &reply);
        if (r < 0)
                return transport_error(c, r);
        if (!space_http_reply_ok(&reply))
                r = reply.error == ERROR_NOT_FOUND ? -ENOENT : cp_log_reply_error(c, &reply, path);
        space_http_reply_done(&reply);
        return r;
}

int cp_remote_put(CpContext *c, const char *path, unsigned mode, int64_t mtime, int64_t uid, int64_t gid,
                  bool parents, SpaceHttpReadFn read, void *userdata) {
        _cleanup_free_ char *u = NULL, *extra = NULL;
        SpaceHttpReply reply = {};
        char owner[96] = "";
        int r;

        /* a --chown spec is [A-Za-z0-9._:-] only (space_user_spec_parse): nothing to escape */
        if (uid >= 0 && gid >= 0)
                snprintf(owner, sizeof owner, "&uid=%" PRId64 "&gid=%" PRId64, uid, gid);
        else if (c->chown)
                snprintf(owner, sizeof owner, "&owner=%s", c->chown);
        if (asprintf(&extra, "&mode=%04o&mtime=%" PRId64 "%s%s", mode, mtime, owner, parents ? "&parents=1" : "") < 0 ||
            !(u = url(c, "", path, extra)))
                return transport_error(c, -ENOMEM);
        r = space_http_upload(c->http, "PUT", u, -1, read, userdata, &reply);
        if (r < 0) {
                if (r == -EINTR || r == -ENOMEM || r == -EPROTO || r == -ECONNREFUSED || r == -ENOENT)
                        return transport_error(c, r);
                log_error("cp: reading what to copy to %s: %s", path, strerror(-r));
                return r;
        }
        if (!space_http_reply_ok(&reply))
                r = cp_log_reply_error(c, &reply, path);
        space_http_reply_done(&reply);
        return r;
}

typedef struct GetSink {
        SpaceHttpWriteFn write;
        void *userdata;
        uint64_t bytes;
} GetSink;

static int get_write(const void *p, size_t n, void *userdata) {
        GetSink *s = userdata;

        s->bytes += n;
        return s->write(p, n, s->userdata);
}

int cp_remote_get(CpContext *c, const char *path, SpaceHttpWriteFn write, void *userdata, uint64_t *ret_bytes) {
        _cleanup_free_ char *u = url(c, "", path, NULL);
        SpaceHttpReply reply = {};
        GetSink sink = { .write = write, .userdata = userdata };
        int r;

        if (!u)
                return transport_error(c, -ENOMEM);
        r = space_http_download(c->http, u, NULL, get_write, &sink, &reply);
        if (r == -EPROTO) {
                log_error("cp: the transfer of %s from sandbox '%s' broke off after %" PRIu64 " bytes (%s)", path,
                          c->ref, sink.bytes, space_http_last_error(c->http));
                return r;
        }
        if (r < 0) {
                if (r == -EINTR || r == -ENOMEM || r == -ECONNREFUSED || r == -ENOENT)
                        return transport_error(c, r);
                return r; /* the writer failed and said why */
        }
        if (!space_http_reply_ok(&reply))
                r = cp_log_reply_error(c, &reply, path);
        space_http_reply_done(&reply);
        if (ret_bytes)
                *ret_bytes = sink.bytes;
        return r;
}

void cp_note_skipped(CpContext *c, const char *what) {
        if (c->skipped++ == 0)
                c->first_skipped = strdup(what);
}

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000;
}

void cp_progress(CpContext *c, uint64_t bytes, bool done) {
        uint64_t now;

        c->bytes += bytes;
        if (!c->progress)
                return;
        now = now_usec();
        if (!done && now - c->progress_at < 200000)
                return;
        c->progress_at = now;
        fprintf(stderr, "\r\033[Kcopying: %" PRIu64 " file%s, %.1f MiB", c->files, c->files == 1 ? "" : "s",
                (double) c->bytes / (1024.0 * 1024.0));
        if (done)
                fputc('\n', stderr);
        fflush(stderr);
}
