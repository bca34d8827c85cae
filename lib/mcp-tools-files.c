/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf, open_memstream */
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base64.h"
#include "macro.h"
#include "mcp-tools-internal.h"
#include "utf8.h"

/*
 * The files family: read, write, list, stat, remove, move, mkdir, on the daemon's /v1/sandboxes/{id}/files
 * routes (spaced/API.md, "files in and out of sandboxes"). Paths are absolute guest paths, nothing else: a
 * relative one would depend on a working directory an agent cannot see.
 */

#define READ_DEFAULT_BYTES (1024 * 1024)
#define READ_MAX_BYTES (16 * 1024 * 1024)
/* The daemon's own limit on a path (SPACE_FILE_PATH_MAX). */
#define PATH_MAX_BYTES 4096
/* Entries a listing shows; the daemon allows far more than an agent reads. */
#define LIST_ENTRIES_MAX 1000
#define LIST_DEPTH_MAX 8

static bool json_uint(const cJSON *o, const char *key, double max, double *ret) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > max)
                return false;
        *ret = v->valuedouble;
        return true;
}

/* "/v1/sandboxes/<id>/files<suffix>[?path=<path>]<extra>", every value escaped (extra: "&k=v", escaped). */
static int files_url(const char *id, const char *suffix, const char *path, const char *extra, char **ret) {
        _cleanup_free_ char *epath = NULL, *rest = NULL;

        if (path && space_http_escape(path, &epath) < 0)
                return -ENOMEM;
        if (asprintf(&rest, "/files%s%s%s%s", suffix ?: "", epath ? "?path=" : "", epath ?: "", extra ?: "") < 0)
                return -ENOMEM;
        return mcp_sandbox_path(id, rest, ret);
}

/* A required absolute path argument. */
static int arg_path(const cJSON *args, const char *name, const char **ret, cJSON **ret_error) {
        int r;

        r = mcp_arg_string(args, name, true, ret, ret_error);
        if (r != 0)
                return r;
        if ((*ret)[0] != '/')
                *ret_error = mcp_result_errorf("%s '%.200s' is not absolute: give an absolute path, e.g. /%.200s or "
                                               "/home/user/%.200s", name, *ret, *ret, *ret);
        else if (strlen(*ret) > PATH_MAX_BYTES)
                *ret_error = mcp_result_errorf("%s is longer than %d bytes: give a shorter path", name,
                                               PATH_MAX_BYTES);
        else
                return 0;
        return *ret_error ? 1 : -ENOMEM;
}

/* ---- entries (FileEntry of the API) ---- */

static const char *type_letter(const char *type) {
        return streq(type, "dir") ? "d" : streq(type, "file") ? "-" : streq(type, "symlink") ? "l" : "?";
}

static void format_time(double t, char buf[static 32]) {
        time_t tt = (time_t) t;
        struct tm tm;

        if (!gmtime_r(&tt, &tm) || strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                snprintf(buf, 32, "%.0f", t);
}

/* The tool's view of a FileEntry: {path, name, type, size, mode "0644", mtime RFC 3339, uid, gid[, target]};
 * NULL with *ret_bad when the entry is not one, or when out of memory. */
static cJSON *entry_to_json(const cJSON *e, bool *ret_bad) {
        const char *path = mcp_json_string(e, "path"), *name = mcp_json_string(e, "name"),
                   *type = mcp_json_string(e, "type"), *target = mcp_json_string(e, "target");
        double mode, size, mtime, uid, gid;
        char m[8], when[32];
        cJSON *o;

        *ret_bad = !path || !name || !type || !json_uint(e, "mode", 07777, &mode) ||
                   !json_uint(e, "size", 9007199254740992.0, &size) || !json_uint(e, "mtime", 1e15, &mtime) ||
                   !json_uint(e, "uid", UINT32_MAX, &uid) || !json_uint(e, "gid", UINT32_MAX, &gid);
        if (*ret_bad)
                return NULL;
        snprintf(m, sizeof m, "%04o", (unsigned) mode);
        format_time(mtime, when);
        o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "path", path) || !cJSON_AddStringToObject(o, "name", name) ||
            !cJSON_AddStringToObject(o, "type", type) || !cJSON_AddNumberToObject(o, "size", size) ||
            !cJSON_AddStringToObject(o, "mode", m) || !cJSON_AddStringToObject(o, "mtime", when) ||
            !cJSON_AddNumberToObject(o, "uid", uid) || !cJSON_AddNumberToObject(o, "gid", gid) ||
            (target && !cJSON_AddStringToObject(o, "target", target))) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

/* One line of an entry made by entry_to_json(): "d 0755 1000:1000 4096 2024-01-01T00:00:00Z /path [-> t]". */
static void entry_line(FILE *f, const cJSON *o) {
        const char *target = mcp_json_string(o, "target");

        fprintf(f, "%s %s %.0f:%.0f %.0f %s %s%s%s\n", type_letter(mcp_json_string(o, "type")),
                mcp_json_string(o, "mode"), cJSON_GetObjectItemCaseSensitive(o, "uid")->valuedouble,
                cJSON_GetObjectItemCaseSensitive(o, "gid")->valuedouble,
                cJSON_GetObjectItemCaseSensitive(o, "size")->valuedouble, mcp_json_string(o, "mtime"),
                mcp_json_string(o, "path"), target ? " -> " : "", target ?: "");
}

/* A reply's entry as the tool's object, or a tool error: 0, 1, < 0. */
static int reply_entry(const SpaceHttpReply *reply, const char *what, cJSON **ret, cJSON **ret_error) {
        bool bad;

        *ret = entry_to_json(reply->json, &bad);
        if (bad)
                return mcp_bad_reply(what, "file entry (path, type, mode, size, mtime, uid, gid)", ret_error);
        return *ret ? 0 : -ENOMEM;
}

/* A result of one entry, with text made of a sentence (before) and the entry's line. */
static int entry_result(cJSON *entry, const char *before, cJSON **ret_result) {
        _cleanup_cjson_ cJSON *o = entry;
        _cleanup_free_ char *text = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        size_t len = 0;

        f = open_memstream(&text, &len);
        if (!f)
                return -ENOMEM;
        fprintf(f, "%s\ntype mode uid:gid size mtime path\n", before);
        entry_line(f, o);
        if (fclose(TAKE_PTR(f)) != 0)
                return -ENOMEM;
        return mcp_result_or_enomem(mcp_result_text(text, TAKE_PTR(o)), ret_result);
}

/* ---- file_read ---- */

typedef struct ReadBuf {
        uint8_t *data;
        size_t len, cap, max;   /* max: what is kept, one byte more than asked for to tell there is more */
} ReadBuf;

static int read_write(const void *p, size_t n, void *userdata) {
        ReadBuf *b = userdata;
        size_t take = MIN(n, b->max - b->len);

        if (take > b->cap - b->len) {
                size_t cap = b->cap * 2 > 64 * 1024 ? b->cap * 2 : 64 * 1024;
                uint8_t *d;

                if (cap < b->len + take)
                        cap = b->len + take;
                cap = MIN(cap, b->max);
                d = realloc(b->data, cap + 1); /* + 1: room for a NUL */
                if (!d)
                        return -ENOMEM;
                b->data = d;
                b->cap = cap;
        }
        if (take > 0)
                memcpy(b->data + b->len, p, take);
        b->len += take;
        /* one byte over what was asked for: there is more, and it is not wanted */
        return b->len == b->max ? -EFBIG : 0;
}

static void read_buf_done(ReadBuf *b) {
        free(b->data);
}

/* Whether the n bytes at s are UTF-8 text without NUL; a multibyte character cut off at the end is fine when
 * the content was cut there. *ret_len: the bytes up to such a cut. */
static bool utf8_text(const uint8_t *s, size_t n, bool cut, size_t *ret_len) {
        size_t whole = n - (cut ? utf8_incomplete_tail(s, n) : 0);

        if (!utf8_valid(s, whole))
                return false;
        *ret_len = whole;
        return true;
}

/* The MIME type of an image MCP clients show, by its magic bytes; NULL for anything else. */
static const char *image_mime(const uint8_t *d, size_t n) {
        if (n >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0)
                return "image/png";
        if (n >= 3 && memcmp(d, "\xff\xd8\xff", 3) == 0)
                return "image/jpeg";
        if (n >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0))
                return "image/gif";
        if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
                return "image/webp";
        return NULL;
}

/* The file's size by stat (following symlinks), for saying how much a cut left out; -1 when unknown. */
static int64_t file_size(McpCall *call, const char *id, const char *path) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_free_ char *url = NULL;
        double size;

        if (files_url(id, "/stat", path, "&follow=1", &url) < 0 ||
            space_http_call(mcp_call_http(call), "GET", url, NULL, &reply) < 0 || !space_http_reply_ok(&reply) ||
            !json_uint(reply.json, "size", 9007199254740992.0, &size))
                return -1;
        return (int64_t) size;
}

/* "[cut: ...]" for content cut after shown bytes, or "" when it was not. */
static int cut_note(McpCall *call, const char *id, const char *path, bool cut, size_t shown, cJSON *o, char **ret) {
        int64_t size;

        if (!cut) {
                *ret = strdup("");
                return *ret ? 0 : -ENOMEM;
        }
        size = file_size(call, id, path);
        if (size >= 0 && (!cJSON_AddNumberToObject(o, "size", (double) size) ||
                          !cJSON_AddNumberToObject(o, "bytes_left", (double) (size > (int64_t) shown ?
                                                                               size - (int64_t) shown : 0))))
                return -ENOMEM;
        if (size >= 0 && (uint64_t) size > shown)
                return asprintf(ret, "[cut: these are the first %zu bytes of %" PRId64 "; %" PRId64 " bytes left. "
                                "Raise max_bytes (up to %d), or read a part with exec, e.g. tail -c 4096 %s]", shown,
                                size, size - (int64_t) shown, READ_MAX_BYTES, path) < 0 ? -ENOMEM : 0;
        return asprintf(ret, "[cut after %zu bytes: there is more. Raise max_bytes (up to %d), or read a part "
                        "with exec, e.g. tail -c 4096 %s]", shown, READ_MAX_BYTES, path) < 0 ? -ENOMEM : 0;
}

static int read_result(McpCall *call, const char *id, const char *path, ReadBuf *b, bool cut, cJSON **ret_result) {
        _cleanup_cjson_ cJSON *o = cJSON_CreateObject();
        _cleanup_free_ char *note = NULL, *text = NULL, *b64 = NULL;
        const char *sniffed = image_mime(b->data, b->len), *mime = cut ? NULL : sniffed;
        size_t shown = b->len;
        bool is_text = !mime && utf8_text(b->data, b->len, cut, &shown);
        cJSON *result;

        if (!o || !cJSON_AddStringToObject(o, "path", path) ||
            !cJSON_AddStringToObject(o, "encoding", mime ? "image" : is_text ? "utf-8" : "base64") ||
            (mime && !cJSON_AddStringToObject(o, "mime_type", mime)) ||
            !cJSON_AddNumberToObject(o, "bytes", (double) shown) || !cJSON_AddBoolToObject(o, "truncated", cut) ||
            cut_note(call, id, path, cut, shown, o, &note) < 0)
                return -ENOMEM;
        if (is_text) {
                b->data[shown] = 0;
                if (shown == 0 && !cut)
                        return mcp_result_or_enomem(mcp_result_text("(the file is empty: 0 bytes)", TAKE_PTR(o)),
                                                    ret_result);
                result = mcp_result_text((const char *) b->data, TAKE_PTR(o));
                if (result && cut && mcp_result_add_text(result, note) < 0)
                        result = (cJSON_Delete(result), NULL);
                return mcp_result_or_enomem(result, ret_result);
        }
        b64 = malloc(base64_encoded_len(b->len) + 1);
        if (!b64)
                return -ENOMEM;
        base64_encode(b->data, b->len, b64);
        b64[base64_encoded_len(b->len)] = 0;
        if (mime ? asprintf(&text, "%s: an image (%s) of %zu bytes, in the next content item.", path, mime, b->len) < 0
                 : asprintf(&text, "%s is %s%s%s: %zu bytes%s follow as base64 in the next content item.%s%s",
                            path, sniffed ? "an image (" : "not UTF-8 text", sniffed ?: "",
                            sniffed ? ") longer than max_bytes; read it whole to get it as an image" : "", b->len,
                            cut ? " (cut)" : "", cut ? " " : "", note) < 0)
                return -ENOMEM;
        result = mcp_result_text(text, TAKE_PTR(o));
        if (result && (mime ? mcp_result_add_image(result, b64, mime) : mcp_result_add_text(result, b64)) < 0)
                result = (cJSON_Delete(result), NULL);
        return mcp_result_or_enomem(result, ret_result);
}

static int file_read(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_(read_buf_done) ReadBuf b = {};
        _cleanup_free_ char *id = NULL, *url = NULL, *what = NULL;
        const char *path;
        cJSON *err = NULL;
        int64_t max;
        bool cut;
        int r;

        if ((r = arg_path(args, "path", &path, &err)) != 0 ||
            (r = mcp_arg_int(args, "max_bytes", 1, READ_MAX_BYTES, READ_DEFAULT_BYTES, &max, &err)) != 0 ||
            (r = mcp_call_sandbox(call, args, &id, &err)) != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (files_url(id, NULL, path, NULL, &url) < 0 || asprintf(&what, "reading %s", path) < 0)
                return -ENOMEM;
        b.max = (size_t) max + 1;
        r = space_http_download(mcp_call_http(call), url, NULL, read_write, &b, &reply);
        cut = r == -EFBIG;
        if (r < 0 && !cut)
                return mcp_tool_fail(mcp_transport_fail(call, r, what, &err), &err, ret_result);
        if (!cut && !space_http_reply_ok(&reply)) {
                if (reply.error == ERROR_IS_A_DIRECTORY)
                        err = mcp_result_errorf("%s is a directory: file_list lists its entries", path);
                else
                        err = mcp_result_api_error(what, &reply);
                return mcp_tool_fail(1, &err, ret_result);
        }
        if (cut)
                b.len = (size_t) max;
        if (!b.data && !(b.data = malloc(1)))
                return -ENOMEM;
        return read_result(call, id, path, &b, cut, ret_result);
}

/* ---- file_write ---- */

/* content as bytes: the text itself, or the base64 decoded (whitespace and missing padding are forgiven). */
static int write_content(const char *content, const char *encoding, uint8_t **ret, size_t *ret_len,
                         cJSON **ret_error) {
        _cleanup_free_ char *clean = NULL;
        _cleanup_free_ uint8_t *out = NULL;
        size_t n = 0, len = strlen(content);
        long k;

        if (!encoding || streq(encoding, "utf-8")) {
                *ret = (uint8_t *) strdup(content);
                *ret_len = len;
                return *ret ? 0 : -ENOMEM;
        }
        if (!streq(encoding, "base64")) {
                *ret_error = mcp_result_errorf("encoding '%.40s' is not known: give \"utf-8\" (content is the text) "
                                               "or \"base64\" (content is the bytes in base64)", encoding);
                return *ret_error ? 1 : -ENOMEM;
        }
        clean = malloc(len + 4);
        if (!clean)
                return -ENOMEM;
        for (size_t i = 0; i < len; i++)
                if (!strchr(" \t\r\n", content[i]))
                        clean[n++] = content[i];
        while (n % 4 != 0 && n % 4 != 1)
                clean[n++] = '=';
        out = malloc(n / 4 * 3 + 1);
        if (!out)
                return -ENOMEM;
        k = base64_decode(clean, n, out);
        if (k < 0) {
                *ret_error = mcp_result_errorf("content is not valid base64 (A-Z, a-z, 0-9, +, / and = padding): "
                                               "encode the bytes again, or give encoding \"utf-8\" for text");
                return *ret_error ? 1 : -ENOMEM;
        }
        *ret = TAKE_PTR(out);
        *ret_len = (size_t) k;
        return 0;
}

/* mode as 1 to 4 octal digits. */
static int write_mode(const char *mode, cJSON **ret_error) {
        size_t n = mode ? strlen(mode) : 0;

        if (!mode)
                return 0;
        if (n >= 1 && n <= 4 && strspn(mode, "01234567") == n)
                return 0;
        *ret_error = mcp_result_errorf("mode '%.20s' is not octal permission bits: give e.g. \"0644\" (rw-r--r--) or "
                                       "\"0755\" (rwxr-xr-x)", mode);
        return *ret_error ? 1 : -ENOMEM;
}

static int file_write(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_free_ char *id = NULL, *url = NULL, *extra = NULL, *what = NULL, *before = NULL;
        _cleanup_free_ uint8_t *data = NULL;
        const char *path, *content = NULL, *encoding = NULL, *mode = NULL;
        cJSON *err = NULL, *entry = NULL;
        size_t len = 0;
        int r;

        if ((r = arg_path(args, "path", &path, &err)) != 0 ||
            (r = mcp_arg_string(args, "content", false, &content, &err)) != 0 ||
            (r = mcp_arg_string(args, "encoding", false, &encoding, &err)) != 0 ||
            (r = mcp_arg_string(args, "mode", false, &mode, &err)) != 0 || (r = write_mode(mode, &err)) != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (!content) {
                err = mcp_result_errorf("argument 'content' is required: the file's text (\"\" for an empty file), "
                                        "or its bytes in base64 with encoding \"base64\"");
                return mcp_tool_fail(1, &err, ret_result);
        }
        if ((r = write_content(content, encoding, &data, &len, &err)) != 0 ||
            (r = mcp_call_sandbox(call, args, &id, &err)) != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (asprintf(&extra, "&parents=1%s%s", mode ? "&mode=" : "", mode ?: "") < 0 ||
            files_url(id, NULL, path, extra, &url) < 0 || asprintf(&what, "writing %s", path) < 0)
                return -ENOMEM;
        r = space_http_call_raw(mcp_call_http(call), "PUT", url, "application/octet-stream", data, len, &reply);
        if (r < 0)
                return mcp_tool_fail(mcp_transport_fail(call, r, what, &err), &err, ret_result);
        if (!space_http_reply_ok(&reply)) {
                err = reply.error == ERROR_IS_A_DIRECTORY
                              ? mcp_result_errorf("%s is a directory: give the path of a file in it", path)
                              : mcp_result_api_error(what, &reply);
                return mcp_tool_fail(1, &err, ret_result);
        }
        r = reply_entry(&reply, what, &entry, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (asprintf(&before, "Wrote %zu bytes to %s (any missing parent directories were made).", len, path) < 0) {
                cJSON_Delete(entry);
                return -ENOMEM;
        }
        return entry_result(entry, before, ret_result);
}

/* ---- file_list, file_stat ---- */

static int list_entries(const cJSON *all, FILE *f, cJSON *list, const char *what, size_t *ret_shown,
                        cJSON **ret_error) {
        const cJSON *e;
        size_t n = 0;

        cJSON_ArrayForEach(e, all) {
                cJSON *o;
                bool bad;

                if (n >= LIST_ENTRIES_MAX)
                        break;
                o = entry_to_json(e, &bad);
                if (bad)
                        return mcp_bad_reply(what, "entries", ret_error);
                if (!o || !cJSON_AddItemToArray(list, o)) {
                        cJSON_Delete(o);
                        return -ENOMEM;
                }
                entry_line(f, o);
                n++;
        }
        *ret_shown = n;
        return 0;
}

static int file_list(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_cjson_ cJSON *o = cJSON_CreateObject();
        _cleanup_free_ char *id = NULL, *url = NULL, *extra = NULL, *what = NULL, *text = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        const cJSON *all;
        const char *path;
        cJSON *err = NULL, *list;
        size_t len = 0, shown = 0;
        int64_t depth;
        int r, total;

        if (!o)
                return -ENOMEM;
        if ((r = arg_path(args, "path", &path, &err)) != 0 ||
            (r = mcp_arg_int(args, "depth", 1, LIST_DEPTH_MAX, 1, &depth, &err)) != 0 ||
            (r = mcp_call_sandbox(call, args, &id, &err)) != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (asprintf(&extra, "&depth=%" PRId64, depth) < 0 || files_url(id, "/list", path, extra, &url) < 0 ||
            asprintf(&what, "listing %s", path) < 0)
                return -ENOMEM;
        r = space_http_call(mcp_call_http(call), "GET", url, NULL, &reply);
        if (r < 0)
                return mcp_tool_fail(mcp_transport_fail(call, r, what, &err), &err, ret_result);
        if (!space_http_reply_ok(&reply)) {
                err = reply.error == ERROR_NOT_A_DIRECTORY
                              ? mcp_result_errorf("%s is not a directory: file_stat tells what it is, file_read reads "
                                                  "a file", path)
                              : mcp_result_api_error(what, &reply);
                return mcp_tool_fail(1, &err, ret_result);
        }
        all = cJSON_GetObjectItemCaseSensitive(reply.json, "entries");
        if (!cJSON_IsArray(all))
                return mcp_tool_fail(mcp_bad_reply(what, "entries", &err), &err, ret_result);
        total = cJSON_GetArraySize(all);
        if (!cJSON_AddStringToObject(o, "path", path) || !cJSON_AddNumberToObject(o, "depth", (double) depth) ||
            !(list = cJSON_AddArrayToObject(o, "entries")))
                return -ENOMEM;
        f = open_memstream(&text, &len);
        if (!f)
                return -ENOMEM;
        fprintf(f, "%s: %d entr%s%s\n", path, total, total == 1 ? "y" : "ies",
                depth > 1 ? " (each directory's entries right after it)" : "");
        if (total > 0)
                fputs("type mode uid:gid size mtime path\n", f);
        r = list_entries(all, f, list, what, &shown, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (shown < (size_t) total) {
                fprintf(f, "(%zu more not shown: list a subdirectory, or with less depth)\n", (size_t) total - shown);
                if (!cJSON_AddNumberToObject(o, "entries_not_shown", (double) ((size_t) total - shown)))
                        return -ENOMEM;
        }
        if (fclose(TAKE_PTR(f)) != 0)
                return -ENOMEM;
        return mcp_result_or_enomem(mcp_result_text(text, TAKE_PTR(o)), ret_result);
}

static int file_stat(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_free_ char *id = NULL, *url = NULL, *what = NULL, *text = NULL;
        const char *path;
        cJSON *err = NULL, *entry = NULL, *o;
        int r;

        if ((r = arg_path(args, "path", &path, &err)) != 0 || (r = mcp_call_sandbox(call, args, &id, &err)) != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (files_url(id, "/stat", path, NULL, &url) < 0 || asprintf(&what, "looking at %s", path) < 0)
                return -ENOMEM;
        r = space_http_call(mcp_call_http(call), "GET", url, NULL, &reply);
        if (r < 0)
                return mcp_tool_fail(mcp_transport_fail(call, r, what, &err), &err, ret_result);
        /* not there is an answer, not a failure: "does it exist?" is what stat is often asked */
        if (reply.error == ERROR_NOT_FOUND) {
                o = cJSON_CreateObject();
                if (!o || !cJSON_AddStringToObject(o, "path", path) || !cJSON_AddBoolToObject(o, "exists", false) ||
                    asprintf(&text, "%s does not exist (exists: false).", path) < 0) {
                        cJSON_Delete(o);
                        return -ENOMEM;
                }
                return mcp_result_or_enomem(mcp_result_text(text, o), ret_result);
        }
        if (!space_http_reply_ok(&reply)) {
                err = mcp_result_api_error(what, &reply);
                return mcp_tool_fail(1, &err, ret_result);
        }
        r = reply_entry(&reply, what, &entry, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (!cJSON_AddBoolToObject(entry, "exists", true) ||
            asprintf(&text, "%s exists (exists: true); a symlink is shown as itself, not what it points to.",
                     path) < 0) {
                cJSON_Delete(entry);
                return -ENOMEM;
        }
        return entry_result(entry, text, ret_result);
}

/* ---- file_remove, file_move, file_mkdir ---- */

static int file_remove(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_free_ char *id = NULL, *url = NULL, *what = NULL, *text = NULL;
        const char *path;
        cJSON *err = NULL, *o;
        bool recursive;
        int r;

        if ((r = arg_path(args, "path", &path, &err)) != 0 ||
            (r = mcp_arg_bool(args, "recursive", false, &recursive, &err)) != 0 ||
            (r = mcp_call_sandbox(call, args, &id, &err)) != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (files_url(id, NULL, path, recursive ? "&recursive=1" : NULL, &url) < 0 ||
            asprintf(&what, "removing %s", path) < 0)
                return -ENOMEM;
        r = mcp_api_request(call, "DELETE", url, NULL, what, &reply, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "path", path) || !cJSON_AddBoolToObject(o, "removed", true) ||
            !cJSON_AddBoolToObject(o, "recursive", recursive) ||
            asprintf(&text, "Removed %s%s.", path, recursive ? " and everything under it" : "") < 0) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        return mcp_result_or_enomem(mcp_result_text(text, o), ret_result);
}

static int file_move(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_cjson_ cJSON *body = cJSON_CreateObject();
        _cleanup_free_ char *id = NULL, *url = NULL, *what = NULL, *before = NULL;
        const char *from, *to;
        cJSON *err = NULL, *entry = NULL;
        int r;

        if (!body)
                return -ENOMEM;
        if ((r = arg_path(args, "from", &from, &err)) != 0 || (r = arg_path(args, "to", &to, &err)) != 0 ||
            (r = mcp_call_sandbox(call, args, &id, &err)) != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (!cJSON_AddStringToObject(body, "from", from) || !cJSON_AddStringToObject(body, "to", to) ||
            files_url(id, "/move", NULL, NULL, &url) < 0 || asprintf(&what, "moving %s to %s", from, to) < 0)
                return -ENOMEM;
        r = mcp_api_request(call, "POST", url, body, what, &reply, &err);
        if (r == 0)
                r = reply_entry(&reply, what, &entry, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (!cJSON_AddStringToObject(entry, "from", from) ||
            asprintf(&before, "Moved %s to %s (from: %s); it is now:", from, to, from) < 0) {
                cJSON_Delete(entry);
                return -ENOMEM;
        }
        return entry_result(entry, before, ret_result);
}

static int file_mkdir(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_cjson_ cJSON *body = cJSON_CreateObject();
        _cleanup_free_ char *id = NULL, *url = NULL, *what = NULL, *before = NULL;
        const char *path;
        cJSON *err = NULL, *entry = NULL;
        bool parents;
        int r;

        if (!body)
                return -ENOMEM;
        if ((r = arg_path(args, "path", &path, &err)) != 0 ||
            (r = mcp_arg_bool(args, "parents", true, &parents, &err)) != 0 ||
            (r = mcp_call_sandbox(call, args, &id, &err)) != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (!cJSON_AddStringToObject(body, "path", path) || !cJSON_AddBoolToObject(body, "parents", parents) ||
            files_url(id, "/mkdir", NULL, NULL, &url) < 0 || asprintf(&what, "making directory %s", path) < 0)
                return -ENOMEM;
        r = mcp_api_request(call, "POST", url, body, what, &reply, &err);
        if (r == 0)
                r = reply_entry(&reply, what, &entry, &err);
        if (r != 0)
                return mcp_tool_fail(r, &err, ret_result);
        if (asprintf(&before, "%s is a directory now%s.", path,
                     parents ? " (with any missing parents; one that was there already is fine)" : "") < 0) {
                cJSON_Delete(entry);
                return -ENOMEM;
        }
        return entry_result(entry, before, ret_result);
}

#define SANDBOX_ID_PROP                                                                                         \
        "\"sandbox_id\": {\"type\": \"string\", \"description\": \"The sandbox: an id, a unique id prefix or a " \
        "name (sandbox_list shows them). Default: this session's own sandbox.\"}"
#define PATH_PROP(name, what)                                                                                  \
        "\"" name "\": {\"type\": \"string\", \"description\": \"" what ": an absolute path in the sandbox, e.g. " \
        "/home/user/notes.txt.\"}"

const McpTool mcp_tools_files[] = {
        {
                .name = "file_read",
                .description = "Read a file in a sandbox: UTF-8 text as text, PNG/JPEG/GIF/WebP as an image, "
                               "anything else as base64; cut at max_bytes with a note.",
                .input_schema =
                "{\"type\": \"object\", \"properties\": {" PATH_PROP("path", "The file to read") ","
                "\"max_bytes\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 16777216, \"description\": "
                "\"Read at most this many bytes (default 1048576, at most 16777216).\"}," SANDBOX_ID_PROP
                "}, \"required\": [\"path\"], \"additionalProperties\": false}",
                .run = file_read,
                .read_only = true,
        },
        {
                .name = "file_write",
                .description = "Write a file in a sandbox (replacing it if it exists, making missing parent "
                               "directories) from text or base64.",
                .input_schema =
                "{\"type\": \"object\", \"properties\": {" PATH_PROP("path", "The file to write") ","
                "\"content\": {\"type\": \"string\", \"description\": \"The file's content: text, or base64 with "
                "encoding base64.\"},"
                "\"encoding\": {\"type\": \"string\", \"enum\": [\"utf-8\", \"base64\"], \"description\": \"How "
                "content is given (default utf-8).\"},"
                "\"mode\": {\"type\": \"string\", \"pattern\": \"^[0-7]{1,4}$\", \"description\": \"Permission "
                "bits in octal, e.g. 0755 for a script (default: 0644 for a new file, kept for an existing "
                "one).\"}," SANDBOX_ID_PROP
                "}, \"required\": [\"path\", \"content\"], \"additionalProperties\": false}",
                .run = file_write,
                .destructive = true,
        },
        {
                .name = "file_list",
                .description = "List a directory in a sandbox (type, mode, owner, size, mtime, path), down to "
                               "depth levels.",
                .input_schema =
                "{\"type\": \"object\", \"properties\": {" PATH_PROP("path", "The directory") ","
                "\"depth\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 8, \"description\": \"How many "
                "levels down (default 1: its own entries).\"}," SANDBOX_ID_PROP
                "}, \"required\": [\"path\"], \"additionalProperties\": false}",
                .run = file_list,
                .read_only = true,
        },
        {
                .name = "file_stat",
                .description = "Tell whether a path exists in a sandbox and its type, size, mode, owner and "
                               "mtime.",
                .input_schema =
                "{\"type\": \"object\", \"properties\": {" PATH_PROP("path", "The path to look at") ","
                SANDBOX_ID_PROP "}, \"required\": [\"path\"], \"additionalProperties\": false}",
                .run = file_stat,
                .read_only = true,
        },
        {
                .name = "file_remove",
                .description = "Remove a file, symlink or empty directory in a sandbox; with recursive, a "
                               "directory and all it holds.",
                .input_schema =
                "{\"type\": \"object\", \"properties\": {" PATH_PROP("path", "What to remove") ","
                "\"recursive\": {\"type\": \"boolean\", \"description\": \"Remove a directory with everything "
                "in it (default false).\"}," SANDBOX_ID_PROP
                "}, \"required\": [\"path\"], \"additionalProperties\": false}",
                .run = file_remove,
                .destructive = true,
        },
        {
                .name = "file_move",
                .description = "Move or rename a file or directory in a sandbox (replaces a file or empty "
                               "directory at the destination).",
                .input_schema =
                "{\"type\": \"object\", \"properties\": {" PATH_PROP("from", "What to move") ","
                PATH_PROP("to", "Its new path (the full path, not the directory to move it into)") ","
                SANDBOX_ID_PROP "}, \"required\": [\"from\", \"to\"], \"additionalProperties\": false}",
                .run = file_move,
                .destructive = true,
        },
        {
                .name = "file_mkdir",
                .description = "Make a directory in a sandbox, with its missing parents unless parents is "
                               "false.",
                .input_schema =
                "{\"type\": \"object\", \"properties\": {" PATH_PROP("path", "The directory to make") ","
                "\"parents\": {\"type\": \"boolean\", \"description\": \"Make missing parent directories too, "
                "and accept one that exists (default true).\"}," SANDBOX_ID_PROP
                "}, \"required\": [\"path\"], \"additionalProperties\": false}",
                .run = file_mkdir,
        },
};
const size_t mcp_tools_files_count = ELEMENTSOF(mcp_tools_files);
