/* SPDX-License-Identifier: Apache-2.0 */

/* volume_guest_request() (spaced/volume/volume-guest*.c), the host half of a volume mounted in a guest, against a
 * real SQLite file and a real volume in a temporary state directory: every op of lib/proto.h's "Volume mounts",
 * done and refused, and what a hostile guest tries first: paths that are not normal ("..", "//", "/a", "./a",
 * "a/", 4096+ bytes), symlinks planted in the volume's directory to /etc and to a directory outside, used as the
 * last component and in the middle, made-up readdir cookies, offsets at INT64_MAX, writes and truncations past the
 * quota (uploads in progress counted), files, directories and links past the bound on entries (and the API's
 * writes and mkdirs beside them), malformed, missing, repeated and oversized records. No answer names a host
 * path, every answer fits in a frame, and nothing outside the volume's directory changes. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf */
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "core/manager.h"
#include "core/store.h"
#include "core/util.h"
#include "tap.h"
#include "volume/volume.h"

static const char *state_dir;
static unsigned leaks, oversized;

typedef struct Answer {
        int r;
        char msg[512];
        SpaceBuf buf;
        const uint8_t *kv, *data;
        size_t kv_len, data_len;
} Answer;

static void answer_done(Answer *a) {
        space_buf_done(&a->buf);
        *a = (Answer) {};
}

/* Sends raw records kv (and data) for volume v; the answer in a (split when it succeeded). */
static int send_raw(Manager *m, Volume *v, const void *kv, size_t kv_len, const void *data, size_t data_len, Answer *a) {
        answer_done(a);
        a->r = volume_guest_request(m, v, kv, kv_len, data, data_len, &a->buf, a->msg, sizeof a->msg);
        if (a->r < 0 && (strstr(a->msg, state_dir) || strstr(a->msg, "volume-data")))
                leaks++;
        if (a->r < 0 && a->buf.len != 0)
                leaks++; /* a failure appends nothing */
        if (a->r == 0) {
                if (a->buf.len > SPACE_FRAME_PAYLOAD_MAX)
                        oversized++;
                ASSERT(space_volume_payload_split(a->buf.data, a->buf.len, &a->kv, &a->kv_len, &a->data,
                                                  &a->data_len) == 0);
        }
        return a->r;
}

/* key, value pairs up to NULL; data of data_len bytes. */
static int reqd(Manager *m, Volume *v, Answer *a, const void *data, size_t data_len, ...) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        const char *k, *val;
        va_list ap;

        va_start(ap, data_len);
        while ((k = va_arg(ap, const char *))) {
                val = va_arg(ap, const char *);
                ASSERT(space_kv_add(&kv, k, val) == 0);
        }
        va_end(ap);
        return send_raw(m, v, kv.data, kv.len, data, data_len, a);
}
#define req(m, v, a, ...) reqd(m, v, a, NULL, 0, __VA_ARGS__, NULL)

static const char *get(const Answer *a, const char *key) {
        const char *val = NULL;

        return a->r == 0 && space_kv_get(a->kv, a->kv_len, key, &val) == 1 ? val : NULL;
}

static bool has(const Answer *a, const char *key, const char *want) {
        return streq_ptr(get(a, key), want);
}

/* Whether a readdir answer has name (of type, followed by an ino). */
static bool has_name(const Answer *a, const char *name, const char *type) {
        const char *key, *val;
        size_t off = 0, klen;
        int state = 0;

        while (a->r == 0 && space_kv_next(a->kv, a->kv_len, &off, &key, &klen, &val) > 0) {
                if (state == 0 && klen == 4 && strncmp(key, "name", 4) == 0 && streq(val, name))
                        state = 1;
                else if (state == 1)
                        state = klen == 4 && strncmp(key, "type", 4) == 0 && streq(val, type) ? 2 : -1;
                else if (state == 2)
                        return klen == 3 && strncmp(key, "ino", 3) == 0 && strtoull(val, NULL, 10) > 0;
        }
        return false;
}

static void manager_open(Manager *m, const char *dir) {
        _cleanup_free_ char *db = NULL;
        Error e = {};

        ASSERT(asprintf(&db, "%s/space.db", dir) > 0);
        ASSERT(store_open(db, &m->store, &e) == 0);
        m->state_dir = (char *) dir;
        m->volumes = NULL;
        ASSERT(volumes_load(m, &e) == 0);
}

static void manager_close(Manager *m) {
        volumes_free(m);
        m->store = store_close(m->store);
}

static uint64_t usage_of(Manager *m, Volume *v) {
        uint64_t u = 0;
        Error e = {};

        ASSERT(volume_usage(m, v, &u, &e) == 0);
        return u;
}

static char *host_path(const char *vdir, const char *rel) {
        char *p;

        ASSERT(asprintf(&p, "%s/%s", vdir, rel) > 0);
        return p;
}

static off_t host_size(const char *vdir, const char *rel) {
        _cleanup_free_ char *p = host_path(vdir, rel);
        struct stat st;

        return lstat(p, &st) < 0 ? -1 : st.st_size;
}

static void test_files(Manager *m, Volume *v, const char *vdir) {
        Answer a = {};

        ok(req(m, v, &a, "op", "getattr", "path", "") == 0 && has(&a, "type", "dir") && has(&a, "mode", "511") &&
           get(&a, "ino") && get(&a, "nlink") && get(&a, "ctime_nsec"), "getattr of the root: a directory, 0777 (a new volume's), every attr record");
        ok(req(m, v, &a, "op", "lookup", "path", "f") == -ENOENT && a.msg[0], "lookup of nothing: ENOENT, with a message");
        ok(req(m, v, &a, "op", "create", "path", "f", "mode", "420", "uid", "1000", "gid", "1001", "exclusive", "1") == 0 &&
           has(&a, "type", "file") && has(&a, "mode", "420") && has(&a, "uid", "1000") && has(&a, "gid", "1001") &&
           has(&a, "size", "0") && has(&a, "nlink", "1"), "create: a file with the guest's owner and mode");
        ok(host_size(vdir, "f") == 0, "... a real file in the volume's directory");
        ok(req(m, v, &a, "op", "create", "path", "f", "mode", "384", "uid", "0", "gid", "0", "exclusive", "1") == -EEXIST,
           "create exclusive of what exists: EEXIST");
        ok(req(m, v, &a, "op", "create", "path", "f", "mode", "384", "uid", "0", "gid", "0", "exclusive", "0") == 0 &&
           has(&a, "mode", "420") && has(&a, "uid", "1000"), "create without exclusive opens it as it is");
        ok(reqd(m, v, &a, "hello", 5, "op", "write", "path", "f", "offset", "0", NULL) == 0 && has(&a, "written", "5") &&
           has(&a, "size", "5") && has(&a, "type", "file"), "write: written=5, then the attr");
        ok(req(m, v, &a, "op", "read", "path", "f", "offset", "0", "size", "100") == 0 && a.kv_len == 0 &&
           a.data_len == 5 && memcmp(a.data, "hello", 5) == 0, "read: no records, the bytes (fewer at EOF)");
        ok(req(m, v, &a, "op", "read", "path", "f", "offset", "2", "size", "2") == 0 && a.data_len == 2 &&
           memcmp(a.data, "ll", 2) == 0, "read at an offset");
        ok(req(m, v, &a, "op", "read", "path", "f", "offset", "1000", "size", "10") == 0 && a.data_len == 0,
           "read past the end: no bytes");
        ok(reqd(m, v, &a, "xy", 2, "op", "write", "path", "f", "offset", "10", NULL) == 0 && has(&a, "size", "12") &&
           usage_of(m, v) == 12, "write past the end grows the file; usage follows");
        ok(req(m, v, &a, "op", "read", "path", "", "offset", "0", "size", "1") == -EISDIR, "read of a directory: EISDIR");
        ok(reqd(m, v, &a, "x", 1, "op", "write", "path", "nothing", "offset", "0", NULL) == -ENOENT &&
           host_size(vdir, "nothing") < 0, "write to a file that is not there: ENOENT, nothing made");

        ok(req(m, v, &a, "op", "mkdir", "path", "d", "mode", "448", "uid", "5", "gid", "6") == 0 && has(&a, "type", "dir") &&
           has(&a, "mode", "448") && has(&a, "uid", "5") && has(&a, "gid", "6"), "mkdir with the guest's owner and mode");
        ok(req(m, v, &a, "op", "mkdir", "path", "d", "mode", "448", "uid", "5", "gid", "6") == -EEXIST, "mkdir again: EEXIST");
        ok(req(m, v, &a, "op", "mkdir", "path", "", "mode", "448", "uid", "5", "gid", "6") == -EEXIST, "mkdir of the root: EEXIST");
        ok(req(m, v, &a, "op", "create", "path", "d/x", "mode", "420", "uid", "0", "gid", "0") == 0, "create in it");
        ok(req(m, v, &a, "op", "rmdir", "path", "d") == -ENOTEMPTY, "rmdir of a full directory: ENOTEMPTY");
        ok(req(m, v, &a, "op", "unlink", "path", "d") == -EISDIR, "unlink of a directory: EISDIR");
        ok(req(m, v, &a, "op", "rmdir", "path", "f") == -ENOTDIR, "rmdir of a file: ENOTDIR");
        ok(req(m, v, &a, "op", "create", "path", "f/x", "mode", "420", "uid", "0", "gid", "0") == -ENOTDIR,
           "create below a file: ENOTDIR");
        ok(req(m, v, &a, "op", "rmdir", "path", "") == -EBUSY, "rmdir of the root: refused");
        ok(req(m, v, &a, "op", "unlink", "path", "d/x") == 0 && req(m, v, &a, "op", "rmdir", "path", "d") == 0 &&
           host_size(vdir, "d") < 0, "unlink, then rmdir");

        ok(req(m, v, &a, "op", "symlink", "path", "l", "target", "../f", "uid", "3", "gid", "3") == 0 &&
           has(&a, "type", "symlink") && has(&a, "size", "4") && has(&a, "mode", "511"), "symlink: a link, 0777, size of its text");
        ok(req(m, v, &a, "op", "readlink", "path", "l") == 0 && has(&a, "target", "../f"), "readlink: its text as stored");
        ok(req(m, v, &a, "op", "readlink", "path", "f") == -EINVAL, "readlink of a file: EINVAL");
        ok(req(m, v, &a, "op", "lookup", "path", "l") == 0 && has(&a, "type", "symlink"), "lookup does not follow it");
        ok(req(m, v, &a, "op", "read", "path", "l", "offset", "0", "size", "10") == -ELOOP, "read does not follow it: ELOOP");
        ok(reqd(m, v, &a, "x", 1, "op", "write", "path", "l", "offset", "0", NULL) == -ELOOP, "nor write");
        ok(req(m, v, &a, "op", "symlink", "path", "l", "target", "x") == -EEXIST, "symlink over one: EEXIST");
        ok(req(m, v, &a, "op", "symlink", "path", "l2", "target", "") == -EINVAL, "an empty target: EINVAL");
        {
                _cleanup_free_ char *target = malloc(SPACE_FILE_PATH_MAX + 2), *lpath = host_path(vdir, "l");
                char back[16] = "";

                ASSERT(target);
                memset(target, 't', SPACE_FILE_PATH_MAX + 1);
                target[SPACE_FILE_PATH_MAX + 1] = '\0';
                ok(req(m, v, &a, "op", "symlink", "path", "l2", "target", target) == -EINVAL && host_size(vdir, "l2") < 0,
                   "a target over %u bytes: EINVAL", SPACE_FILE_PATH_MAX);
                ok(readlink(lpath, back, sizeof back - 1) == 4 && streq(back, "../f"), "on the host it is a real symlink");
        }

        ok(req(m, v, &a, "op", "setattr", "path", "f", "mode", "1517", "uid", "7", "gid", "8") == 0 &&
           has(&a, "mode", "1517") && has(&a, "uid", "7") && has(&a, "gid", "8"), "setattr of mode (with sticky bit) and owner");
        ok(req(m, v, &a, "op", "setattr", "path", "f", "size", "3") == 0 && has(&a, "size", "3") && usage_of(m, v) == 3 &&
           host_size(vdir, "f") == 3, "setattr size truncates; usage follows");
        ok(req(m, v, &a, "op", "setattr", "path", "f", "atime", "1000", "atime_nsec", "5", "mtime", "-20") == 0 &&
           has(&a, "atime", "1000") && has(&a, "atime_nsec", "5") && has(&a, "mtime", "-20") && has(&a, "mtime_nsec", "0"),
           "setattr of times (before 1970 too)");
        ok(req(m, v, &a, "op", "setattr", "path", "f", "mtime", "now") == 0 && strtoll(get(&a, "mtime") ?: "0", NULL, 10) > 1000000000,
           "mtime=now");
        ok(req(m, v, &a, "op", "setattr", "path", "", "mode", "504") == 0 && has(&a, "mode", "504"), "setattr of the root's mode");
        ok(req(m, v, &a, "op", "setattr", "path", "", "size", "0") == -EISDIR, "a size on a directory: EISDIR");
        ok(req(m, v, &a, "op", "setattr", "path", "l", "uid", "9", "mtime", "77") == 0 && has(&a, "type", "symlink") &&
           has(&a, "mtime", "77") && has(&a, "uid", "0"), "setattr of a link: its times; its owner is not kept");
        ok(req(m, v, &a, "op", "setattr", "path", "l", "size", "0") == -EINVAL && host_size(vdir, "f") == 3,
           "a size on a link: EINVAL, its target untouched");

        ok(req(m, v, &a, "op", "create", "path", "g", "mode", "420", "uid", "0", "gid", "0") == 0 &&
           reqd(m, v, &a, "12345678", 8, "op", "write", "path", "g", "offset", "0", NULL) == 0 && usage_of(m, v) == 11,
           "a second file of 8 bytes");
        ok(req(m, v, &a, "op", "rename", "path", "f", "to", "g", "noreplace", "1") == -EEXIST && host_size(vdir, "g") == 8,
           "rename noreplace onto a file: EEXIST");
        ok(req(m, v, &a, "op", "rename", "path", "f", "to", "f") == 0 && usage_of(m, v) == 11, "rename onto itself changes nothing");
        ok(req(m, v, &a, "op", "rename", "path", "f", "to", "g") == 0 && host_size(vdir, "g") == 3 && host_size(vdir, "f") < 0 &&
           usage_of(m, v) == 3, "rename replaces; the replaced file leaves the usage");
        ok(req(m, v, &a, "op", "rename", "path", "", "to", "x") == -EINVAL, "rename of the root: EINVAL");
        ok(req(m, v, &a, "op", "rename", "path", "l", "to", "l3") == 0 && req(m, v, &a, "op", "readlink", "path", "l3") == 0 &&
           has(&a, "target", "../f"), "rename of a link moves the link");
        ok(req(m, v, &a, "op", "fsync", "path", "g") == 0 && req(m, v, &a, "op", "fsync", "path", "") == 0, "fsync of a file, of a directory");
        ok(req(m, v, &a, "op", "statfs", "path", "") == 0 && has(&a, "bsize", "4096") && has(&a, "blocks", "256") &&
           has(&a, "bfree", "255") && has(&a, "files", "1048576") && has(&a, "ffree", "1048574"),
           "statfs: the quota (1 MiB) in 4 KiB blocks, what is left of it free; the bound on entries, less g and l3");
        answer_done(&a);
}

/* Pages of a directory bigger than a frame, hidden upload files left out, and cookies the guest made up. */
static void test_readdir(Manager *m, Volume *v, const char *vdir) {
        _cleanup_free_ char *hidden = host_path(vdir, "big/" VOLUME_TEMP_PREFIX "0123456789abcdef");
        const unsigned files = 600; /* 200-byte names: about 2 frames' worth */
        char name[256], path[300];
        unsigned seen = 0, pages = 0, dots = 0, bad = 0;
        char cookie[32] = "0";
        Answer a = {};
        int fd;

        ASSERT(req(m, v, &a, "op", "mkdir", "path", "big", "mode", "493", "uid", "0", "gid", "0") == 0);
        for (unsigned i = 0; i < files; i++) {
                memset(name, 'n', 200);
                snprintf(name + 200, sizeof name - 200, "%05u", i);
                snprintf(path, sizeof path, "big/%s", name);
                ASSERT(req(m, v, &a, "op", "create", "path", path, "mode", "420", "uid", "0", "gid", "0") == 0);
        }
        fd = open(hidden, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ASSERT(fd >= 0);
        close(fd);
        do {
                const char *key, *val;
                size_t off = 0, klen;

                if (req(m, v, &a, "op", "readdir", "path", "big", "cookie", cookie) < 0 || ++pages > 100)
                        break;
                while (space_kv_next(a.kv, a.kv_len, &off, &key, &klen, &val) > 0) {
                        if (klen == 4 && strncmp(key, "name", 4) == 0) {
                                seen++;
                                dots += streq(val, ".") || streq(val, "..") || volume_temp_name(val);
                                bad += strlen(val) != 205;
                        } else if (klen == 6 && strncmp(key, "cookie", 6) == 0)
                                snprintf(cookie, sizeof cookie, "%s", val);
                        else if (!(klen == 4 && strncmp(key, "type", 4) == 0 && streq(val, "file")) &&
                                 !(klen == 3 && strncmp(key, "ino", 3) == 0))
                                bad++;
                }
        } while (!streq(cookie, "0"));
        ok(a.r == 0 && seen == files && pages >= 2 && dots == 0 && bad == 0,
           "readdir pages through %u entries in %u answers, each within a frame; no '.', '..' or upload files", seen, pages);
        ok(req(m, v, &a, "op", "readdir", "path", "", "cookie", "0") == 0 && has_name(&a, "big", "dir") &&
           has_name(&a, "g", "file") && has_name(&a, "l3", "symlink") && has(&a, "cookie", "0"),
           "readdir of the root: name, type, ino of each, cookie=0 at the end");
        {
                _cleanup_free_ char *ino = NULL;
                const char *key, *val;
                size_t off = 0, klen;

                ok(req(m, v, &a, "op", "lookup", "path", "big") == 0 && (ino = strdup(get(&a, "ino") ?: "")) &&
                   req(m, v, &a, "op", "readdir", "path", "", "cookie", "0") == 0, "lookup and readdir of the root");
                while (space_kv_next(a.kv, a.kv_len, &off, &key, &klen, &val) > 0 && !(klen == 4 && streq(val, "big")))
                        ;
                ok(space_kv_next(a.kv, a.kv_len, &off, &key, &klen, &val) > 0 &&
                   space_kv_next(a.kv, a.kv_len, &off, &key, &klen, &val) > 0 && klen == 3 && streq(val, ino),
                   "readdir's ino is lookup's");
        }
        ok(req(m, v, &a, "op", "readdir", "path", "big", "cookie", "9223372036854775807") <= 0 &&
           req(m, v, &a, "op", "readdir", "path", "big", "cookie", "123456789") <= 0 &&
           req(m, v, &a, "op", "readdir", "path", "big", "cookie", "9223372036854775808") == -EINVAL,
           "made-up cookies: an answer or an error, never a crash; past INT64_MAX: EINVAL");
        ok(req(m, v, &a, "op", "readdir", "path", "g", "cookie", "0") == -ENOTDIR, "readdir of a file: ENOTDIR");
        ok(req(m, v, &a, "op", "readdir", "path", "big") == -EINVAL, "readdir without a cookie: EINVAL");
        ok(req(m, v, &a, "op", "lookup", "path", "big/" VOLUME_TEMP_PREFIX "0123456789abcdef") == -EINVAL,
           "an upload's hidden file cannot be named");
        answer_done(&a);
}

/* Paths a guest must send normal, and links planted in the volume's directory (by the host's admin, or a file
 * system restored from elsewhere: the guest itself can make only links the host never follows out). */
static void test_escapes(Manager *m, Volume *v, const char *vdir, const char *outside) {
        _cleanup_free_ char *etc = host_path(vdir, "etc"), *out = host_path(vdir, "out"), *up = host_path(vdir, "up"),
                            *fifo = host_path(vdir, "fifo"),
                            *keep = NULL, *long_path = malloc(VOLUME_PATH_MAX + 10);
        const char *bad[] = { "..", "../f", "a/../g", "/g", "g/", "a//g", "./g", "g/.", ".", "/", "//" };
        char name[VOLUME_COMPONENT_MAX + 2];
        struct stat passwd_before, passwd_after, out_before, out_after;
        unsigned refused = 0;
        Answer a = {};

        ASSERT(long_path);
        ASSERT(asprintf(&keep, "%s/keep", outside) > 0);
        ASSERT(stat("/etc/passwd", &passwd_before) == 0 && stat(keep, &out_before) == 0);
        ASSERT(symlink("/etc", etc) == 0 && symlink(outside, out) == 0 && symlink("../../../../../../etc/passwd", up) == 0);

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                refused += req(m, v, &a, "op", "lookup", "path", bad[i]) == -EINVAL && a.msg[0];
        ok(refused == ELEMENTSOF(bad), "'..', '/' first or last, '//', '.': refused (EINVAL), not normalized");
        ok(req(m, v, &a, "op", "rename", "path", "g", "to", "../g") == -EINVAL && host_size(vdir, "g") == 3,
           "rename to '../g': EINVAL");
        memset(name, 'n', sizeof name - 1);
        name[sizeof name - 1] = '\0';
        ok(req(m, v, &a, "op", "lookup", "path", name) == -ENAMETOOLONG, "a name of 256 bytes: ENAMETOOLONG");
        for (size_t i = 0; i < VOLUME_PATH_MAX + 9; i++)
                long_path[i] = i % 2 ? '/' : 'a';
        long_path[VOLUME_PATH_MAX + 9] = '\0';
        ok(req(m, v, &a, "op", "lookup", "path", long_path) == -ENAMETOOLONG, "a path of 4104 bytes: ENAMETOOLONG");

        ok(req(m, v, &a, "op", "lookup", "path", "etc") == 0 && has(&a, "type", "symlink"), "a planted link to /etc is a link");
        ok(req(m, v, &a, "op", "lookup", "path", "etc/passwd") == -ELOOP, "lookup through it: /etc is the volume's own, the link itself (ELOOP)");
        ok(req(m, v, &a, "op", "read", "path", "etc/passwd", "offset", "0", "size", "100") == -ELOOP, "read through it: ELOOP");
        ok(reqd(m, v, &a, "x", 1, "op", "write", "path", "etc/passwd", "offset", "0", NULL) == -ELOOP, "write through it: ELOOP");
        ok(req(m, v, &a, "op", "setattr", "path", "etc/passwd", "size", "0", "mode", "511") == -ELOOP, "setattr through it: ELOOP");
        ok(req(m, v, &a, "op", "unlink", "path", "etc/passwd") == -ELOOP, "unlink through it: ELOOP");
        ok(req(m, v, &a, "op", "create", "path", "etc/space-test", "mode", "420", "uid", "0", "gid", "0") == -ELOOP &&
           access("/etc/space-test", F_OK) < 0, "create through it: ELOOP, nothing in /etc");
        ok(req(m, v, &a, "op", "readdir", "path", "etc", "cookie", "0") == -ENOTDIR, "readdir of it: not followed (ENOTDIR)");
        ok(req(m, v, &a, "op", "lookup", "path", "out/keep") == -ENOENT &&
           req(m, v, &a, "op", "create", "path", "out/new", "mode", "420", "uid", "0", "gid", "0") == -ENOENT &&
           req(m, v, &a, "op", "mkdir", "path", "out/new", "mode", "420", "uid", "0", "gid", "0") == -ENOENT &&
           req(m, v, &a, "op", "rename", "path", "g", "to", "out/g") == -ENOENT,
           "a link to a directory outside, in the middle of a path: resolved inside the volume (ENOENT)");
        ok(req(m, v, &a, "op", "read", "path", "up", "offset", "0", "size", "100") == -ELOOP &&
           req(m, v, &a, "op", "setattr", "path", "up", "size", "0") == -EINVAL &&
           req(m, v, &a, "op", "setattr", "path", "up", "mode", "511", "uid", "0", "mtime", "5") == 0 &&
           req(m, v, &a, "op", "fsync", "path", "up") == -ELOOP,
           "a climbing link as the last component: never followed (read, truncate, setattr, fsync)");
        ok(req(m, v, &a, "op", "symlink", "path", "mine", "target", "/etc/passwd") == 0 &&
           req(m, v, &a, "op", "read", "path", "mine", "offset", "0", "size", "10") == -ELOOP &&
           req(m, v, &a, "op", "unlink", "path", "mine") == 0,
           "a link the guest makes to /etc/passwd is stored, never read through, and unlinked as a link");
        ok(req(m, v, &a, "op", "mkdir", "path", "real", "mode", "493", "uid", "0", "gid", "0") == 0 &&
           req(m, v, &a, "op", "symlink", "path", "via", "target", "/real") == 0 &&
           req(m, v, &a, "op", "create", "path", "via/x", "mode", "420", "uid", "0", "gid", "0") == 0 &&
           host_size(vdir, "real/x") == 0, "a link in the middle that stays inside: resolved from the volume's root");
        ok(req(m, v, &a, "op", "unlink", "path", "etc") == 0 && req(m, v, &a, "op", "unlink", "path", "out") == 0 &&
           req(m, v, &a, "op", "unlink", "path", "up") == 0 && access("/etc", F_OK) == 0 && access(keep, F_OK) == 0,
           "unlink of the planted links removes the links alone");
        ASSERT(mkfifo(fifo, 0600) == 0);
        ok(req(m, v, &a, "op", "lookup", "path", "fifo") == 0 && has(&a, "type", "other") &&
           req(m, v, &a, "op", "read", "path", "fifo", "offset", "0", "size", "10") == -EINVAL &&
           reqd(m, v, &a, "x", 1, "op", "write", "path", "fifo", "offset", "0", NULL) == -EIO &&
           req(m, v, &a, "op", "setattr", "path", "fifo", "mode", "511") == -EINVAL &&
           req(m, v, &a, "op", "unlink", "path", "fifo") == 0,
           "a FIFO planted in the volume: 'other', never waited on, removable");
        ASSERT(stat("/etc/passwd", &passwd_after) == 0 && stat(keep, &out_after) == 0);
        ok(passwd_after.st_size == passwd_before.st_size && passwd_after.st_ctim.tv_sec == passwd_before.st_ctim.tv_sec &&
           passwd_after.st_ctim.tv_nsec == passwd_before.st_ctim.tv_nsec && out_after.st_size == out_before.st_size &&
           out_after.st_ctim.tv_nsec == out_before.st_ctim.tv_nsec, "/etc/passwd and the file outside are unchanged");
        answer_done(&a);
}

/* Numbers, ranges and records a hostile agent sends. */
static void test_records(Manager *m, Volume *v) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        static uint8_t big[SPACE_VOLUME_IO_MAX + 1];
        const char *numbers[] = { "-1", "+5", " 5", "5 ", "0x10", "", "18446744073709551616", "4096x" };
        unsigned refused = 0;
        Answer a = {};

        ok(req(m, v, &a, "op", "getattr") == -EINVAL && req(m, v, &a, "path", "g") == -EINVAL, "no path=, no op=: EINVAL");
        ok(req(m, v, &a, "op", "getattr", "op", "unlink", "path", "g") == -EINVAL &&
           req(m, v, &a, "op", "getattr", "path", "g", "path", "x") == -EINVAL, "a record twice: EINVAL");
        ok(req(m, v, &a, "op", "format", "path", "") == -ENOSYS, "an op the host does not know: ENOSYS");
        ok(req(m, v, &a, "op", "getattr", "path", "g", "volume", "vol-x", "future", "1") == 0, "unknown records are passed over");
        ok(send_raw(m, v, "op=getattr\0path=g", 17, NULL, 0, &a) == -EINVAL, "a record without its NUL: EINVAL");
        ok(send_raw(m, v, NULL, 0, NULL, 0, &a) == -EINVAL, "no records at all: EINVAL");
        for (unsigned i = 0; i < SPACE_KV_RECORDS_MAX + 1; i++)
                ASSERT(space_kv_add(&kv, "x", "1") == 0);
        ASSERT(space_kv_add(&kv, "op", "statfs") == 0);
        ok(send_raw(m, v, kv.data, kv.len, NULL, 0, &a) == -EINVAL, "more than %u records: EINVAL", SPACE_KV_RECORDS_MAX);

        for (size_t i = 0; i < ELEMENTSOF(numbers); i++)
                refused += req(m, v, &a, "op", "setattr", "path", "g", "mode", numbers[i]) == -EINVAL;
        ok(refused == ELEMENTSOF(numbers), "a number is decimal digits alone: signs, spaces, hex, overflow refused");
        ok(req(m, v, &a, "op", "setattr", "path", "g", "mode", "4096") == -EINVAL &&
           req(m, v, &a, "op", "create", "path", "h", "mode", "33188", "uid", "0", "gid", "0") == -EINVAL,
           "mode past 07777 (a file type's bits): EINVAL");
        ok(req(m, v, &a, "op", "setattr", "path", "g", "uid", "4294967295") == -EINVAL &&
           req(m, v, &a, "op", "setattr", "path", "g", "gid", "4294967295") == -EINVAL &&
           req(m, v, &a, "op", "setattr", "path", "g", "uid", "4294967294") == 0, "uid and gid: 0 to 4294967294");
        ok(req(m, v, &a, "op", "setattr", "path", "g", "atime_nsec", "5") == -EINVAL &&
           req(m, v, &a, "op", "setattr", "path", "g", "atime", "5", "atime_nsec", "1000000000") == -EINVAL &&
           req(m, v, &a, "op", "setattr", "path", "g", "atime", "now", "atime_nsec", "1") == -EINVAL &&
           req(m, v, &a, "op", "setattr", "path", "g", "mtime", "yesterday") == -EINVAL, "times: nsec alone, past a second, with now, words: EINVAL");
        ok(req(m, v, &a, "op", "create", "path", "h", "uid", "0", "gid", "0") == -EINVAL &&
           req(m, v, &a, "op", "mkdir", "path", "h", "mode", "493") == -EINVAL &&
           req(m, v, &a, "op", "create", "path", "h", "mode", "420", "uid", "0", "gid", "0", "exclusive", "2") == -EINVAL &&
           req(m, v, &a, "op", "rename", "path", "g") == -EINVAL && req(m, v, &a, "op", "symlink", "path", "h") == -EINVAL &&
           req(m, v, &a, "op", "read", "path", "g", "offset", "0") == -EINVAL &&
           req(m, v, &a, "op", "write", "path", "g") == -EINVAL, "an op's missing records: EINVAL");

        ok(req(m, v, &a, "op", "read", "path", "g", "offset", "0", "size", "32769") == -EINVAL &&
           req(m, v, &a, "op", "read", "path", "g", "offset", "0", "size", "32768") == 0, "read: at most 32 KiB");
        ok(req(m, v, &a, "op", "read", "path", "g", "offset", "9223372036854775807", "size", "1") == -EINVAL &&
           req(m, v, &a, "op", "read", "path", "g", "offset", "9223372036854775807", "size", "0") == 0 && a.data_len == 0 &&
           req(m, v, &a, "op", "read", "path", "g", "offset", "9223372036854775808", "size", "0") == -EINVAL,
           "read: offset + size past INT64_MAX is EINVAL");
        ok(reqd(m, v, &a, big, sizeof big, "op", "write", "path", "g", "offset", "0", NULL) == -EINVAL &&
           host_size(state_dir, "nothing") < 0, "write of 32 KiB + 1: EINVAL");
        ok(reqd(m, v, &a, "x", 1, "op", "write", "path", "g", "offset", "9223372036854775807", NULL) == -EINVAL &&
           reqd(m, v, &a, "x", 1, "op", "write", "path", "g", "offset", "9223372036854775806", NULL) == -ENOSPC &&
           reqd(m, v, &a, "", 0, "op", "write", "path", "g", "offset", "9223372036854775807", NULL) == 0 &&
           has(&a, "written", "0") && has(&a, "size", "3"),
           "write at INT64_MAX: EINVAL; just below: ENOSPC; nothing at it: written=0, the file as it was");
        ok(req(m, v, &a, "op", "setattr", "path", "g", "size", "9223372036854775808") == -EINVAL &&
           req(m, v, &a, "op", "setattr", "path", "g", "size", "9223372036854775807") == -ENOSPC &&
           req(m, v, &a, "op", "getattr", "path", "g") == 0 && has(&a, "size", "3"), "setattr size: past INT64_MAX EINVAL, huge ENOSPC");
        answer_done(&a);
}

/* The quota: writes and truncations that would pass it change nothing; uploads in progress count. */
static void test_quota(Manager *m, Volume *q, const char *qdir) {
        VolumeWriteOptions o = VOLUME_WRITE_OPTIONS_INIT;
        _cleanup_(volume_upload_freep) VolumeUpload *u = NULL;
        char sixty[60], fifty[50];
        Answer a = {};
        Error e = {};

        memset(sixty, 's', sizeof sixty);
        memset(fifty, 'f', sizeof fifty);
        ASSERT(req(m, q, &a, "op", "create", "path", "a", "mode", "420", "uid", "0", "gid", "0") == 0);
        ok(reqd(m, q, &a, sixty, sizeof sixty, "op", "write", "path", "a", "offset", "0", NULL) == 0 && usage_of(m, q) == 60,
           "60 of 100 bytes written");
        ok(reqd(m, q, &a, fifty, sizeof fifty, "op", "write", "path", "a", "offset", "60", NULL) == -ENOSPC &&
           host_size(qdir, "a") == 60 && usage_of(m, q) == 60 && strstr(a.msg, "quota"),
           "50 more: ENOSPC, saying why; nothing written");
        ok(reqd(m, q, &a, fifty, sizeof fifty, "op", "write", "path", "a", "offset", "10", NULL) == 0 && host_size(qdir, "a") == 60,
           "50 over what is there: fine (it does not grow)");
        ok(req(m, q, &a, "op", "setattr", "path", "a", "size", "101", "mode", "511") == -ENOSPC && host_size(qdir, "a") == 60 &&
           req(m, q, &a, "op", "getattr", "path", "a") == 0 && has(&a, "mode", "420"),
           "setattr size 101: ENOSPC, and the mode asked with it is not set either");
        ok(req(m, q, &a, "op", "setattr", "path", "a", "size", "100") == 0 && usage_of(m, q) == 100, "size 100: the quota exactly");
        ok(req(m, q, &a, "op", "statfs", "path", "") == 0 && has(&a, "blocks", "0") && has(&a, "bfree", "0"), "statfs: none free");
        ok(req(m, q, &a, "op", "create", "path", "b", "mode", "420", "uid", "0", "gid", "0") == 0 &&
           reqd(m, q, &a, "x", 1, "op", "write", "path", "b", "offset", "0", NULL) == -ENOSPC && host_size(qdir, "b") == 0,
           "a new file's first byte: ENOSPC");
        ok(req(m, q, &a, "op", "setattr", "path", "a", "size", "10") == 0 && usage_of(m, q) == 10, "truncated to 10: usage 10");
        ASSERT(volume_upload_begin(m, q, "/c", &o, VOLUME_SIZE_UNKNOWN, &u, &e) == 0);
        ASSERT(volume_upload_append(u, sixty, sizeof sixty, &e) == 0);
        ok(reqd(m, q, &a, fifty, sizeof fifty, "op", "write", "path", "b", "offset", "0", NULL) == -ENOSPC &&
           host_size(qdir, "b") == 0, "with an upload of 60 in progress, 50 more: ENOSPC");
        ok(req(m, q, &a, "op", "readdir", "path", "", "cookie", "0") == 0 && !has(&a, "name", "c"), "... whose file readdir leaves out");
        u = volume_upload_free(u);
        ok(reqd(m, q, &a, fifty, sizeof fifty, "op", "write", "path", "b", "offset", "0", NULL) == 0 && usage_of(m, q) == 60,
           "once it is gone, they fit");
        ok(req(m, q, &a, "op", "unlink", "path", "a") == 0 && usage_of(m, q) == 50, "unlink gives its bytes back");
        error_done(&e);
        answer_done(&a);
}

static uint64_t entries_of(Manager *m, Volume *v) {
        (void) usage_of(m, v);
        return v->entries;
}

/* What a fresh walk of the volume's directory counts. */
static uint64_t walked_entries(const char *vdir) {
        _cleanup_close_ int fd = open(vdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        uint64_t sum = 0, n = 0;
        unsigned stale = 0;

        ASSERT(fd >= 0 && volume_walk_usage(fd, 0, &sum, &n, &stale) == 0);
        return n;
}

/* A new file of one byte written through the API. */
static int put_new(Manager *m, Volume *v, const char *path) {
        VolumeWriteOptions o = VOLUME_WRITE_OPTIONS_INIT;
        VolumeEntry en = {};
        Error e = {};
        int r = volume_write(m, v, path, "1", 1, &o, &en, &e);

        volume_entry_done(&en);
        error_done(&e);
        return r;
}

/* The bound on entries (volume_entries_max): creates, mkdirs, symlinks and writes of new files past it refused
 * with nothing made, whether a guest or the API asks; removals and renames onto an entry give room back. */
static void test_entries(Manager *m, const char *dir) {
        VolumeWriteOptions o = VOLUME_WRITE_OPTIONS_INIT;
        _cleanup_(volume_upload_freep) VolumeUpload *u = NULL;
        _cleanup_free_ char *edir = NULL, *stale = NULL;
        VolumeEntry en = {};
        Volume *v = NULL;
        Answer a = {};
        Error e = {};
        uint64_t before;
        int fd;

        m->config.volume_entries_max = 5;
        ASSERT(volume_create(m, "e", 1 << 20, &v, &e) == 0);
        ASSERT(asprintf(&edir, "%s/volume-data/%s", dir, v->rec.id) > 0);
        ok(req(m, v, &a, "op", "statfs", "path", "") == 0 && has(&a, "files", "5") && has(&a, "ffree", "5"),
           "statfs of an empty volume: files and ffree are the bound, 5");
        ok(req(m, v, &a, "op", "mkdir", "path", "d", "mode", "493", "uid", "0", "gid", "0") == 0 &&
           req(m, v, &a, "op", "create", "path", "d/a", "mode", "420", "uid", "0", "gid", "0") == 0 &&
           req(m, v, &a, "op", "symlink", "path", "l", "target", "/d/a") == 0 &&
           req(m, v, &a, "op", "create", "path", "b", "mode", "420", "uid", "0", "gid", "0") == 0 &&
           req(m, v, &a, "op", "create", "path", "c", "mode", "420", "uid", "0", "gid", "0") == 0 &&
           entries_of(m, v) == 5, "a directory, a file in it, a symlink and two files: 5 entries, the bound");
        ok(req(m, v, &a, "op", "statfs", "path", "") == 0 && has(&a, "files", "5") && has(&a, "ffree", "0"),
           "statfs: none free");
        ok(req(m, v, &a, "op", "create", "path", "x", "mode", "420", "uid", "0", "gid", "0") == -ENOSPC &&
           strstr(a.msg, "volume_entries_max") && strstr(a.msg, " 5") && host_size(edir, "x") < 0,
           "a sixth file: ENOSPC, naming the bound; nothing made");
        ok(req(m, v, &a, "op", "create", "path", "x", "mode", "420", "uid", "0", "gid", "0", "exclusive", "1") == -ENOSPC &&
           req(m, v, &a, "op", "mkdir", "path", "y", "mode", "493", "uid", "0", "gid", "0") == -ENOSPC &&
           req(m, v, &a, "op", "symlink", "path", "z", "target", "b") == -ENOSPC &&
           req(m, v, &a, "op", "mkdir", "path", "d/y", "mode", "493", "uid", "0", "gid", "0") == -ENOSPC &&
           host_size(edir, "y") < 0 && host_size(edir, "z") < 0 && host_size(edir, "d/y") < 0 && entries_of(m, v) == 5,
           "... nor an exclusive one, a directory, a symlink, anything deeper");
        ok(req(m, v, &a, "op", "create", "path", "c", "mode", "420", "uid", "0", "gid", "0") == 0 &&
           req(m, v, &a, "op", "mkdir", "path", "d", "mode", "493", "uid", "0", "gid", "0") == -EEXIST &&
           req(m, v, &a, "op", "symlink", "path", "l", "target", "x") == -EEXIST &&
           reqd(m, v, &a, "data", 4, "op", "write", "path", "c", "offset", "0", NULL) == 0,
           "at the bound what exists is opened (EEXIST for a mkdir, as ever) and written");

        ok(volume_write(m, v, "/n", "x", 1, &o, &en, &e) == -ENOSPC && e.code == ERROR_QUOTA_EXCEEDED &&
           strstr(e.message, "volume_entries_max") && host_size(edir, "n") < 0,
           "the API: a new file is quota_exceeded, naming the bound; nothing made");
        error_done(&e);
        o.parents = true;
        ok(volume_write(m, v, "/p/q/n", "x", 1, &o, &en, &e) == -ENOSPC && e.code == ERROR_QUOTA_EXCEEDED &&
           host_size(edir, "p") < 0, "... a new file with its parents: not even the parents are made");
        error_done(&e);
        o.parents = false;
        ok(volume_mkdir(m, v, "/m", false, -1, -1, -1, &en, &e) == -ENOSPC && e.code == ERROR_QUOTA_EXCEEDED &&
           volume_mkdir(m, v, "/m/k", true, -1, -1, -1, &en, &e) == -ENOSPC && host_size(edir, "m") < 0,
           "... a mkdir, with parents or not");
        error_done(&e);
        ok(volume_mkdir(m, v, "/d", true, -1, -1, -1, &en, &e) == 0, "... a mkdir -p of what is there is fine");
        volume_entry_done(&en);
        ok(volume_upload_begin(m, v, "/u", &o, VOLUME_SIZE_UNKNOWN, &u, &e) == -ENOSPC && !u &&
           e.code == ERROR_QUOTA_EXCEEDED, "... an upload of a new file is refused at begin");
        error_done(&e);
        ok(volume_write(m, v, "/b", "replaced", 8, &o, &en, &e) == 0 && entries_of(m, v) == 5,
           "... a whole file replaced is no new entry");
        volume_entry_done(&en);
        o.at_offset = true;
        ok(volume_write(m, v, "/b", "!", 1, &o, &en, &e) == 0 && volume_write(m, v, "/o", "!", 1, &o, &en, &e) == -ENOSPC &&
           host_size(edir, "o") < 0, "... a write at an offset: to a file that is there, not to a new one");
        volume_entry_done(&en);
        error_done(&e);
        o.at_offset = false;

        ok(req(m, v, &a, "op", "unlink", "path", "b") == 0 && entries_of(m, v) == 4 &&
           volume_upload_begin(m, v, "/u", &o, VOLUME_SIZE_UNKNOWN, &u, &e) == 0,
           "an unlink makes room: an upload of a new file begins");
        ok(req(m, v, &a, "op", "create", "path", "x", "mode", "420", "uid", "0", "gid", "0") == 0 &&
           volume_upload_finish(m, u, &en, &e) == -ENOSPC && e.code == ERROR_QUOTA_EXCEEDED && host_size(edir, "u") < 0,
           "... a guest took the room meanwhile: the upload is refused at finish, nothing put in place");
        error_done(&e);
        u = volume_upload_free(u);
        ok(entries_of(m, v) == 5 && walked_entries(edir) == 5, "5 entries, as a walk counts");
        ok(req(m, v, &a, "op", "rename", "path", "c", "to", "x") == 0 && entries_of(m, v) == 4 && host_size(edir, "c") < 0,
           "a rename onto an existing file: one fewer");
        ok(req(m, v, &a, "op", "rename", "path", "x", "to", "x") == 0 && entries_of(m, v) == 4,
           "a rename onto itself: as many");
        ok(req(m, v, &a, "op", "rename", "path", "l", "to", "l2", "noreplace", "1") == 0 && entries_of(m, v) == 4,
           "a rename to a new name: as many");
        ok(req(m, v, &a, "op", "rename", "path", "l2", "to", "x", "noreplace", "1") == -EEXIST && entries_of(m, v) == 4,
           "a rename refused (noreplace): as many");
        ok(req(m, v, &a, "op", "mkdir", "path", "e", "mode", "493", "uid", "0", "gid", "0") == 0 &&
           req(m, v, &a, "op", "unlink", "path", "d/a") == 0 && req(m, v, &a, "op", "rename", "path", "e", "to", "d") == 0 &&
           entries_of(m, v) == 3 && walked_entries(edir) == 3, "a directory renamed over an empty one: one fewer");
        ok(volume_rename(m, v, "/l2", "/x", &e) == 0 && entries_of(m, v) == 2 && walked_entries(edir) == 2,
           "the API's rename of a link onto a file: one fewer");
        ok(volume_mkdir(m, v, "/t/u/w/y", true, -1, -1, -1, &en, &e) == -ENOSPC && host_size(edir, "t") < 0,
           "a mkdir -p of 4 with room for 3: nothing made");
        error_done(&e);
        ok(volume_mkdir(m, v, "/t/u/w", true, -1, -1, -1, &en, &e) == 0 && entries_of(m, v) == 5, "... of 3: made");
        volume_entry_done(&en);
        ok(volume_remove_path(m, v, "/t", &e) == 0 && entries_of(m, v) == 2 && walked_entries(edir) == 2,
           "a tree removed gives back all of it");
        ok(req(m, v, &a, "op", "mkdir", "path", "t", "mode", "493", "uid", "0", "gid", "0") == 0 &&
           req(m, v, &a, "op", "mkdir", "path", "t/u", "mode", "493", "uid", "0", "gid", "0") == 0 &&
           req(m, v, &a, "op", "rmdir", "path", "t/u") == 0 && req(m, v, &a, "op", "rmdir", "path", "t") == 0 &&
           entries_of(m, v) == 2, "a guest's rmdir gives one back");

        /* a restart: the walk counts the same, and a dead upload's hidden file is removed, not counted */
        ASSERT(asprintf(&stale, "%s/d/" VOLUME_TEMP_PREFIX "0123456789abcdef", edir) > 0);
        fd = open(stale, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ASSERT(fd >= 0);
        close(fd);
        before = entries_of(m, v);
        manager_close(m);
        manager_open(m, dir);
        v = volume_find(m, "e");
        ASSERT(v);
        ok(!v->usage_known && entries_of(m, v) == before && access(stale, F_OK) < 0,
           "after a restart the walk counts the same %llu entries", (unsigned long long) before);
        ok(put_new(m, v, "/n1") == 0 && put_new(m, v, "/n2") == 0 && put_new(m, v, "/n3") == 0 &&
           put_new(m, v, "/n4") == -ENOSPC, "... and the bound holds: 3 more, not 4");
        ok(volume_remove(m, v, &e) == 0, "the volume removed");
        m->config.volume_entries_max = 0;
        answer_done(&a);
}

/* A chain of depth directories named name from the root (each made by a guest's mkdir); its path in path. */
static void chain(Manager *m, Volume *v, const char *name, unsigned depth, char *path, size_t size) {
        Answer a = {};

        path[0] = '\0';
        for (unsigned i = 0; i < depth; i++) {
                ASSERT(strlen(path) + strlen(name) + 2 < size);
                strcat(path, i ? "/" : "");
                strcat(path, name);
                ASSERT(req(m, v, &a, "op", "mkdir", "path", path, "mode", "493", "uid", "0", "gid", "0") == 0);
        }
        answer_done(&a);
}

/* Directories nested deeper than the walks hold open (renames nest them past any path): the usage after a
 * restart, a removal through the API, a volume's removal. Returns the volume g again (the restart made it anew). */
static Volume *test_deep(Manager *m, const char *dir) {
        char a_path[1024], b_path[1024], file[1100], stale[1400];
        Volume *v = volume_find(m, "g"), *d = NULL;
        _cleanup_free_ char *ddir = NULL;
        uint64_t before = usage_of(m, v), entries;
        Answer a = {};
        Error e = {};
        int fd;

        chain(m, v, "a", 300, a_path, sizeof a_path);
        chain(m, v, "b", 300, b_path, sizeof b_path);
        snprintf(file, sizeof file, "%s/f", b_path);
        ASSERT(req(m, v, &a, "op", "create", "path", file, "mode", "420", "uid", "0", "gid", "0") == 0);
        ASSERT(reqd(m, v, &a, "1234567", 7, "op", "write", "path", file, "offset", "0", NULL) == 0);
        snprintf(file, sizeof file, "%s/b", a_path);
        ok(req(m, v, &a, "op", "rename", "path", "b", "to", file) == 0, "a chain of 300 directories renamed to the "
           "bottom of another: 601 deep, a file of 7 bytes at the bottom");
        snprintf(stale, sizeof stale, "%s/volume-data/%s/%s/" VOLUME_TEMP_PREFIX "0123456789abcdef", dir, v->rec.id, a_path);
        fd = open(stale, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ASSERT(fd >= 0 && write(fd, "xxxx", 4) == 4);
        close(fd);
        entries = entries_of(m, v);
        manager_close(m);
        manager_open(m, dir);
        v = volume_find(m, "g");
        ASSERT(v);
        ok(usage_of(m, v) == before + 7 && access(stale, F_OK) < 0 && v->entries == entries,
           "after a restart the walk counts it all (bytes and %llu entries), and removes a dead upload's file 300 "
           "deep", (unsigned long long) entries);
        ok(req(m, v, &a, "op", "create", "path", "after", "mode", "420", "uid", "0", "gid", "0") == 0 &&
           reqd(m, v, &a, "x", 1, "op", "write", "path", "after", "offset", "0", NULL) == 0 && usage_of(m, v) == before + 8,
           "... and writes go on");
        ok(volume_remove_path(m, v, "/a", &e) == 0 && usage_of(m, v) == before + 1 &&
           req(m, v, &a, "op", "lookup", "path", "a") == -ENOENT && v->entries == entries + 1 - 601,
           "a removal through the API takes the whole tree, and gives back its 601 entries");
        error_done(&e);

        ASSERT(volume_create(m, "deep", 1 << 20, &d, &e) == 0);
        ASSERT(asprintf(&ddir, "%s/volume-data/%s", dir, d->rec.id) > 0);
        chain(m, d, "a", 300, a_path, sizeof a_path);
        chain(m, d, "b", 300, b_path, sizeof b_path);
        ASSERT(req(m, d, &a, "op", "rename", "path", "b", "to", (snprintf(file, sizeof file, "%s/b", a_path), file)) == 0);
        ok(volume_remove(m, d, &e) == 0 && access(ddir, F_OK) < 0, "removing a volume 600 deep leaves nothing on the disk");
        error_done(&e);
        answer_done(&a);
        return v;
}

/* Nothing but the store and volume-data/ in the state directory, and only the volumes' directories in that. */
static bool state_unchanged(const char *dir) {
        _cleanup_free_ char *data = NULL;
        _cleanup_closedir_ DIR *d = opendir(dir), *dd = NULL;
        struct dirent *de;
        unsigned other = 0, volumes = 0;

        ASSERT(d && asprintf(&data, "%s/volume-data", dir) > 0 && (dd = opendir(data)));
        while ((de = readdir(d)))
                other += !streq(de->d_name, ".") && !streq(de->d_name, "..") && !streq(de->d_name, "volume-data") &&
                         strncmp(de->d_name, "space.db", 8) != 0;
        while ((de = readdir(dd)))
                volumes += !streq(de->d_name, ".") && !streq(de->d_name, "..");
        return other == 0 && volumes == 2;
}

static double now_us(void) {
        struct timespec ts;

        ASSERT(clock_gettime(CLOCK_MONOTONIC, &ts) == 0);
        return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec / 1e3;
}

/* What one request costs here (diag only: the machine is shared). */
static void measure(Manager *m, Volume *v) {
        static uint8_t block[SPACE_VOLUME_IO_MAX];
        const unsigned n = 2000;
        char off[32];
        Answer a = {};
        double t0;
        unsigned fails = 0;

        ASSERT(req(m, v, &a, "op", "create", "path", "bench", "mode", "420", "uid", "0", "gid", "0") == 0);
        t0 = now_us();
        for (unsigned i = 0; i < n; i++)
                fails += req(m, v, &a, "op", "getattr", "path", "real/x") != 0;
        diag("getattr: %.1f us each", (now_us() - t0) / n);
        t0 = now_us();
        for (unsigned i = 0; i < 16; i++) {
                snprintf(off, sizeof off, "%u", i * SPACE_VOLUME_IO_MAX);
                fails += reqd(m, v, &a, block, sizeof block, "op", "write", "path", "bench", "offset", off, NULL) != 0;
        }
        diag("write of 32 KiB: %.1f us each", (now_us() - t0) / 16);
        t0 = now_us();
        for (unsigned i = 0; i < n; i++) {
                snprintf(off, sizeof off, "%u", (i % 16) * SPACE_VOLUME_IO_MAX);
                fails += req(m, v, &a, "op", "read", "path", "bench", "offset", off, "size", "32768") != 0 ||
                         a.data_len != SPACE_VOLUME_IO_MAX;
        }
        diag("read of 32 KiB: %.1f us each", (now_us() - t0) / n);
        ok(fails == 0, "%u getattrs, 16 writes and %u reads of 32 KiB", n, n);
        answer_done(&a);
}

int main(void) {
        char tmpl[] = "/tmp/test-volume-guest.XXXXXX", out_tmpl[] = "/tmp/test-volume-guest-out.XXXXXX";
        _cleanup_free_ char *vdir = NULL, *qdir = NULL, *keep = NULL;
        const char *outside;
        Manager m = {};
        Volume *v = NULL, *q = NULL;
        Error e = {};
        int fd;

        plan(0);
        state_dir = mkdtemp(tmpl);
        outside = mkdtemp(out_tmpl);
        ASSERT(state_dir && outside);
        ASSERT(asprintf(&keep, "%s/keep", outside) > 0);
        fd = open(keep, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ASSERT(fd >= 0 && write(fd, "keep", 4) == 4);
        close(fd);
        manager_open(&m, state_dir);
        ASSERT(volume_create(&m, "g", 1 << 20, &v, &e) == 0);
        ASSERT(volume_create(&m, "q", 100, &q, &e) == 0);
        ASSERT(asprintf(&vdir, "%s/volume-data/%s", state_dir, v->rec.id) > 0);
        ASSERT(asprintf(&qdir, "%s/volume-data/%s", state_dir, q->rec.id) > 0);

        test_files(&m, v, vdir);
        test_readdir(&m, v, vdir);
        test_escapes(&m, v, vdir, outside);
        test_records(&m, v);
        test_quota(&m, q, qdir);
        test_entries(&m, state_dir);
        v = test_deep(&m, state_dir);
        ok(state_unchanged(state_dir), "the state directory holds the store and the two volumes' directories, nothing else");
        measure(&m, v);
        ok(leaks == 0, "no message named a host path, and no failure left an answer");
        ok(oversized == 0, "every answer fit in a frame");

        manager_close(&m);
        (void) rm_rf(state_dir);
        (void) rm_rf(outside);
        return done();
}
