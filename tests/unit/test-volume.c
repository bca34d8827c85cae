/* SPDX-License-Identifier: Apache-2.0 */

/* spaced/volume/ against a real SQLite file and a real state directory: names and paths checked (the shapes an
 * attacker tries first: '..', an id's shape, over-long names and paths), and resolution inside a volume with
 * symlinks planted in its directory (absolute, relative and climbing, to a file and to a directory outside, a
 * magic link through /proc): a read, list, write, mkdir, attrs, rename or remove never reaches outside. The
 * quota refuses a write whole, usage is kept and counted again after a restart, and a remove takes row and files;
 * volume_entries_max is read from spaced.conf as the daemon reads it. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf */
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "core/manager.h"
#include "core/store.h"
#include "core/util.h"
#include "tap.h"
#include "volume/volume.h"

static bool norm_is(const char *in, const char *want) {
        _cleanup_free_ char *out = NULL;
        Error e = {};
        int r = volume_path_normalize(in, &out, &e);

        error_done(&e);
        return r == 0 && streq(out, want);
}

static bool norm_refused(const char *in) {
        _cleanup_free_ char *out = NULL;
        Error e = {};
        int r = volume_path_normalize(in, &out, &e);
        bool refused = r < 0 && e.code == ERROR_INVALID_PATH && e.message;

        error_done(&e);
        return refused;
}

static void test_checks(void) {
        char big[VOLUME_PATH_MAX + 2], name[VOLUME_COMPONENT_MAX + 3];

        ok(volume_name_valid("data") && volume_name_valid("A.b_c-1") && volume_name_valid("0"), "names: letters, digits, '.', '_', '-'");
        ok(!volume_name_valid("") && !volume_name_valid(NULL) && !volume_name_valid("../x") && !volume_name_valid("a/b") &&
           !volume_name_valid("-x") && !volume_name_valid(".x") && !volume_name_valid("a b"),
           "names: empty, '..', '/', a leading '-' or '.', a space are refused");
        ok(!volume_name_valid("vol-0123456789abcdef"), "a name in an id's shape is refused");
        ok(volume_name_valid("vol-0123456789abcdeg"), "... but one that only looks close is fine");
        memset(big, 'x', 64);
        big[64] = '\0';
        ok(!volume_name_valid(big) && (big[63] = '\0', volume_name_valid(big)), "names: 63 bytes at most");

        ok(norm_is("/", "") && norm_is("", "") && norm_is(NULL, "") && norm_is("//./", ""), "the root, however written");
        ok(norm_is("/a/b", "a/b") && norm_is("a/b/", "a/b") && norm_is("//a//./b/.", "a/b"), "'/', '//' and '.' dropped");
        ok(norm_is("/a/..b/c..", "a/..b/c..") && norm_is("/.../x", ".../x"), "'..b', 'c..' and '...' are names");
        ok(norm_refused("/" VOLUME_TEMP_PREFIX "0123456789abcdef") && norm_refused("a/" VOLUME_TEMP_PREFIX "0123456789abcdef/b") &&
           norm_is("/" VOLUME_TEMP_PREFIX "0123456789abcdeX", VOLUME_TEMP_PREFIX "0123456789abcdeX") &&
           norm_is(VOLUME_TEMP_PREFIX "0123456789abcdef0", VOLUME_TEMP_PREFIX "0123456789abcdef0"),
           "an upload's hidden name is the daemon's; names close to it are fine");
        ok(norm_refused("..") && norm_refused("/../etc/passwd") && norm_refused("/a/../b") && norm_refused("a/.."),
           "'..' anywhere is refused");
        memset(name, 'n', sizeof name - 1);
        name[sizeof name - 1] = '\0';
        ok(norm_refused(name), "a name of %d bytes is refused", VOLUME_COMPONENT_MAX + 2);
        name[VOLUME_COMPONENT_MAX] = '\0';
        ok(norm_is(name, name), "one of %d is fine", VOLUME_COMPONENT_MAX);
        for (size_t i = 0; i < sizeof big - 1; i++)
                big[i] = i % 2 ? '/' : 'a';
        big[sizeof big - 1] = '\0';
        ok(norm_refused(big), "a path of %d bytes is refused", VOLUME_PATH_MAX + 1);
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

static int put(Manager *m, Volume *v, const char *path, const char *data, Error *e) {
        VolumeWriteOptions o = VOLUME_WRITE_OPTIONS_INIT;
        VolumeEntry en = {};
        int r;

        error_done(e);
        r = volume_write(m, v, path, data, strlen(data), &o, &en, e);
        volume_entry_done(&en);
        return r;
}

/* The bytes of path in v, or NULL. */
static char *get(Manager *m, Volume *v, const char *path, ErrorCode *ret_code) {
        Error e = {};
        char *buf = NULL;
        uint64_t len = 0;
        int fd = -1;

        *ret_code = ERROR_NONE;
        if (volume_open_read(m, v, path, 0, 4096, &fd, &len, &e) < 0) {
                *ret_code = e.code;
                error_done(&e);
                return NULL;
        }
        buf = calloc(1, len + 1);
        if (buf && read(fd, buf, len) != (ssize_t) len)
                buf = mfree(buf);
        close(fd);
        return buf;
}

static char *slurp(const char *path) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        char buf[256];
        size_t n;

        if (!f)
                return NULL;
        n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        return strdup(buf);
}

static void test_escapes(Manager *m, Volume *v, const char *dir, const char *vdir) {
        _cleanup_free_ char *outside = NULL, *outdir = NULL, *l1 = NULL, *l2 = NULL, *l3 = NULL, *l4 = NULL,
                            *l5 = NULL, *keep = NULL, *made = NULL;
        VolumeEntry en = {};
        VolumeEntry *list = NULL;
        size_t n = 0;
        ErrorCode code;
        Error e = {};
        char *got;

        ASSERT(asprintf(&outside, "%s/outside.txt", dir) > 0 && asprintf(&outdir, "%s/outdir", dir) > 0);
        ASSERT(write_file_atomic(outside, "keep") == 0 && mkdir(outdir, 0700) == 0);
        ASSERT(asprintf(&l1, "%s/abs", vdir) > 0 && symlink(outside, l1) == 0);
        ASSERT(asprintf(&l2, "%s/rel", vdir) > 0 && symlink("../../outside.txt", l2) == 0);
        ASSERT(asprintf(&l3, "%s/dir", vdir) > 0 && symlink(outdir, l3) == 0);
        ASSERT(asprintf(&l4, "%s/up", vdir) > 0 && symlink("../../../../../../..", l4) == 0);
        ASSERT(asprintf(&l5, "%s/proc", vdir) > 0 && symlink("/proc/self/root", l5) == 0);

        got = get(m, v, "/abs", &code);
        ok(!got && code == ERROR_NOT_FOUND, "read through an absolute link to a file outside: not found inside");
        free(got);
        got = get(m, v, "/rel", &code);
        ok(!got && code == ERROR_NOT_FOUND, "read through a relative link that climbs: not found inside");
        free(got);
        got = get(m, v, "/proc/etc/passwd", &code);
        ok(!got && code != ERROR_NONE, "read through a link to /proc/self/root: refused");
        free(got);
        got = get(m, v, "/up/outside.txt", &code);
        ok(!got && code == ERROR_NOT_FOUND, "a link that climbs to / stops at the volume's root");
        free(got);
        ok(volume_list(m, v, "/up", 1, &list, &n, &e) == 0, "list through the climbing link works...");
        bool only_ours = true;
        for (size_t i = 0; i < n; i++)
                only_ours &= streq(list[i].name, "abs") || streq(list[i].name, "rel") || streq(list[i].name, "dir") ||
                             streq(list[i].name, "up") || streq(list[i].name, "proc") || streq(list[i].name, "f");
        ok(only_ours && n > 0, "... and lists the volume's own root (%zu entries)", n);
        volume_entries_free(list, n);
        error_done(&e);
        ok(volume_list(m, v, "/dir", 1, &list, &n, &e) < 0 && e.code == ERROR_NOT_FOUND,
           "list through a link to a directory outside: not found");
        error_done(&e);

        ok(put(m, v, "/abs", "owned", &e) < 0 && e.code == ERROR_INVALID_PATH, "a write to a planted link is refused");
        ok(put(m, v, "/dir/new", "owned", &e) < 0 && e.code == ERROR_NOT_FOUND, "a write under a link to a dir outside: not found");
        ASSERT(asprintf(&made, "%s/new", outdir) > 0);
        ok(access(made, F_OK) < 0, "... nothing was made outside");
        error_done(&e);
        ok(volume_mkdir(m, v, "/dir/made/deep", true, -1, -1, -1, &en, &e) < 0, "mkdir -p under a link to a dir outside: refused");
        error_done(&e);
        ok(volume_set_metadata(m, v, "/abs", -1, -1, 0777, &en, &e) < 0 && e.code == ERROR_INVALID_PATH,
           "attrs on a link: refused");
        error_done(&e);
        ok(volume_rename(m, v, "/dir/x", "/stolen", &e) < 0, "rename from under a link outside: refused");
        error_done(&e);
        ok(volume_stat(m, v, "/abs", &en, &e) == 0 && en.type == VOLUME_ENTRY_SYMLINK && streq_ptr(en.target, outside),
           "stat shows the link itself and its target");
        volume_entry_done(&en);
        ok(volume_remove_path(m, v, "/dir", &e) == 0 && access(outdir, F_OK) == 0, "remove of the link to a dir: the link only");
        ok(volume_remove_path(m, v, "/abs", &e) == 0, "remove of the link to a file");
        keep = slurp(outside);
        ok(streq_ptr(keep, "keep"), "the file outside is untouched");
        error_done(&e);
}

static void test_volumes(void) {
        char tmpl[] = "/tmp/test-volume.XXXXXX";
        const char *dir = mkdtemp(tmpl);
        _cleanup_free_ char *vdir = NULL, *leftover = NULL;
        VolumeEntry en = {};
        Manager m = {};
        Error e = {};
        Volume *v = NULL, *w = NULL;
        uint64_t usage = 0;
        ErrorCode code;
        char *got;
        struct stat st;

        ASSERT(dir);
        manager_open(&m, dir);
        ok(volume_create(&m, "data", 100, &v, &e) == 0 && v && v->rec.quota == 100, "create with a quota of 100 bytes");
        ok(volume_create(&m, "data", 0, &w, &e) == -EEXIST && e.code == ERROR_NAME_IN_USE, "the name is taken");
        error_done(&e);
        ok(volume_create(&m, "../x", 0, &w, &e) == -EINVAL && e.code == ERROR_INVALID_ARGUMENT, "'../x' is no name");
        error_done(&e);
        ok(volume_create(&m, "dflt", 0, &w, &e) == 0 && w->rec.quota == VOLUME_QUOTA_DEFAULT, "quota 0: the default");
        ok(strlen(v->rec.token) == VOLUME_TOKEN_LEN && volume_find_by_token(&m, v->rec.id, v->rec.token) == v &&
           !volume_find_by_token(&m, w->rec.id, v->rec.token) && !volume_find_by_token(&m, v->rec.id, "x"),
           "a token opens its own volume only");
        ASSERT(asprintf(&vdir, "%s/volume-data/%s", dir, v->rec.id) > 0);
        ok(stat(vdir, &st) == 0 && (st.st_mode & 0777) == 0700, "its directory is 0700");

        ok(put(&m, v, "/f", "0123456789", &e) == 0, "write 10 bytes");
        ok(put(&m, v, "/big", "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890",
               &e) < 0 && e.code == ERROR_QUOTA_EXCEEDED, "91 more would pass 100: quota_exceeded");
        got = get(&m, v, "/big", &code);
        ok(!got && code == ERROR_NOT_FOUND, "... and nothing is left of it");
        free(got);
        ok(volume_usage(&m, v, &usage, &e) == 0 && usage == 10, "usage is 10");
        got = get(&m, v, "f", &code);
        ok(streq_ptr(got, "0123456789"), "read it back");
        free(got);
        test_escapes(&m, v, dir, vdir);

        /* a restart: the usage is counted again, a directory no row names is removed */
        ASSERT(asprintf(&leftover, "%s/volume-data/vol-00000000000000aa", dir) > 0 && mkdir(leftover, 0700) == 0);
        manager_close(&m);
        manager_open(&m, dir);
        v = volume_find(&m, "data");
        ok(v && v->rec.quota == 100 && !v->usage_known, "after a restart the volume is there, its usage not yet counted");
        ok(v && volume_usage(&m, v, &usage, &e) == 0 && usage == 10, "... the walk counts 10 (links not followed)");
        ok(access(leftover, F_OK) < 0, "a directory no row names was removed");
        {
                _cleanup_free_ char *mp = NULL;
                Volume *mv = NULL;

                ok(volume_mount_check(&m, "data", "/mnt//data/", &mv, &mp, &e) == 0 && mv == v && streq_ptr(mp, "/mnt/data"),
                   "a valid mount is taken, its path made clean");
        }
        error_done(&e);
        {
                _cleanup_free_ char *mp = NULL;
                Volume *mv = NULL;

                ok(volume_mount_check(&m, "data", "/", &mv, &mp, &e) == -EINVAL &&
                   volume_mount_check(&m, "data", "/proc/x", &mv, &mp, &e) == -EINVAL &&
                   volume_mount_check(&m, "data", "/mnt/../etc", &mv, &mp, &e) == -EINVAL &&
                   volume_mount_check(&m, "data", "rel", &mv, &mp, &e) == -EINVAL &&
                   volume_mount_check(&m, "nope", "/x", &mv, &mp, &e) == -ENOENT && !mp,
                   "mounts at /, under /proc, with '..', relative, or of no volume: refused");
        }
        error_done(&e);
        ok(v && volume_remove(&m, v, &e) == 0 && access(vdir, F_OK) < 0 && !volume_find(&m, "data"),
           "remove takes the row and the files");
        manager_close(&m);
        manager_open(&m, dir);
        ok(!volume_find(&m, "data") && volume_find(&m, "dflt"), "... for good");
        manager_close(&m);
        volume_entry_done(&en);
        (void) rm_rf(dir);
}

/* How many hidden upload files are in dir. */
static unsigned temp_files(const char *dir) {
        _cleanup_closedir_ DIR *d = opendir(dir);
        struct dirent *de;
        unsigned n = 0;

        while (d && (de = readdir(d)))
                n += strncmp(de->d_name, VOLUME_TEMP_PREFIX, strlen(VOLUME_TEMP_PREFIX)) == 0;
        return n;
}

static uint64_t usage_of(Manager *m, Volume *v) {
        uint64_t u = UINT64_MAX;
        Error e = {};

        (void) volume_usage(m, v, &u, &e);
        error_done(&e);
        return u;
}

/* Whole files in parts (volume_upload_*()): the quota as bytes arrive and across uploads in progress, nothing
 * left by a failure, an abandoned upload or a removed volume, and a restart's walk removes a dead run's files. */
static void test_uploads(void) {
        char tmpl[] = "/tmp/test-volume-upload.XXXXXX";
        const char *dir = mkdtemp(tmpl);
        _cleanup_free_ char *vdir = NULL, *stale = NULL, *sub = NULL;
        VolumeWriteOptions o = VOLUME_WRITE_OPTIONS_INIT;
        VolumeUpload *u = NULL, *u2 = NULL;
        VolumeEntry en = {}, *list = NULL;
        char chunk[100], *got;
        size_t n = 0;
        ErrorCode code;
        Manager m = {};
        Error e = {};
        Volume *v = NULL;
        int r;

        ASSERT(dir);
        manager_open(&m, dir);
        ASSERT(volume_create(&m, "up", 1000, &v, &e) == 0);
        ASSERT(asprintf(&vdir, "%s/volume-data/%s", dir, v->rec.id) > 0);
        memset(chunk, 'a', sizeof chunk);

        ok(volume_upload_begin(&m, v, "/f", &o, VOLUME_SIZE_UNKNOWN, &u, &e) == 0 && temp_files(vdir) == 1,
           "begin makes one hidden file beside the target");
        ok(volume_list(&m, v, "/", 1, &list, &n, &e) == 0 && n == 0, "... which a listing leaves out");
        volume_entries_free(list, n);
        r = 0;
        for (int i = 0; i < 3 && r == 0; i++)
                r = volume_upload_append(u, chunk, sizeof chunk, &e);
        ok(r == 0 && access(vdir, F_OK) == 0 && !get(&m, v, "/f", &code) && code == ERROR_NOT_FOUND,
           "three parts appended; the target is not there yet");
        ok(volume_upload_finish(&m, u, &en, &e) == 0 && en.size == 300 && temp_files(vdir) == 0 && usage_of(&m, v) == 300,
           "finish puts 300 bytes in place; usage 300");
        volume_entry_done(&en);
        u = volume_upload_free(u);

        ok(volume_upload_begin(&m, v, "/f", &o, 1001, &u, &e) == -ENOSPC && e.code == ERROR_QUOTA_EXCEEDED && !u &&
           temp_files(vdir) == 0, "a declared size over the quota is refused before a file is made");
        error_done(&e);
        ok(volume_upload_begin(&m, v, "/f", &o, 1000, &u, &e) == 0, "... 1000 replacing 300 fits");
        r = 0;
        for (int i = 0; i < 10 && r == 0; i++)
                r = volume_upload_append(u, chunk, sizeof chunk, &e);
        ok(r == 0 && volume_upload_append(u, chunk, 1, &e) == -ENOSPC && e.code == ERROR_QUOTA_EXCEEDED,
           "the byte past the quota is refused as it arrives");
        error_done(&e);
        u = volume_upload_free(u);
        got = get(&m, v, "/f", &code);
        ok(temp_files(vdir) == 0 && usage_of(&m, v) == 300 && got && strlen(got) == 300,
           "... the hidden file is gone, the old file and the usage unchanged");
        free(got);

        ok(volume_upload_begin(&m, v, "/g", &o, VOLUME_SIZE_UNKNOWN, &u, &e) == 0 &&
           volume_upload_begin(&m, v, "/h", &o, VOLUME_SIZE_UNKNOWN, &u2, &e) == 0 && temp_files(vdir) == 2,
           "two uploads at once");
        r = 0;
        for (int i = 0; i < 4 && r == 0; i++)
                r = volume_upload_append(u, chunk, sizeof chunk, &e);
        ok(r == 0 && volume_upload_append(u2, chunk, sizeof chunk, &e) == 0 &&
           volume_upload_append(u2, chunk, sizeof chunk, &e) == 0 &&
           volume_upload_append(u2, chunk, sizeof chunk, &e) == 0 &&
           volume_upload_append(u2, chunk, sizeof chunk, &e) == -ENOSPC && e.code == ERROR_QUOTA_EXCEEDED,
           "together they fill the quota (300 + 400 + 300 of 1000) but cannot pass it");
        error_done(&e);
        ok(volume_upload_begin(&m, v, "/x", &o, 1, &u2, &e) < 0 && e.code == ERROR_QUOTA_EXCEEDED,
           "... nor can a third, while they are in progress");
        error_done(&e);
        ok(volume_upload_finish(&m, u, &en, &e) == 0 && usage_of(&m, v) == 700 && v->reserved == 300, "the first finishes");
        volume_entry_done(&en);
        u = volume_upload_free(u);
        u2 = volume_upload_free(u2);
        ok(temp_files(vdir) == 0 && v->reserved == 0 && !v->uploads && !get(&m, v, "/h", &code),
           "the second, abandoned, leaves nothing");

        ok(volume_mkdir(&m, v, "/d", false, -1, -1, -1, &en, &e) == 0, "a directory");
        volume_entry_done(&en);
        ok(volume_upload_begin(&m, v, "/d", &o, 0, &u, &e) < 0 && e.code == ERROR_IS_A_DIRECTORY, "... is not replaced");
        error_done(&e);
        o.at_offset = true;
        ok(volume_upload_begin(&m, v, "/n", &o, 0, &u, &e) == -EINVAL && e.code == ERROR_INVALID_ARGUMENT,
           "an upload at an offset is refused");
        error_done(&e);
        o.at_offset = false;
        o.exclusive = true;
        ok(volume_upload_begin(&m, v, "/f", &o, 0, &u, &e) < 0 && e.code == ERROR_EXISTS, "exclusive: one is there");
        error_done(&e);
        ok(volume_upload_begin(&m, v, "/n", &o, 0, &u, &e) == 0 && put(&m, v, "/n", "x", &e) == 0 &&
           volume_upload_finish(&m, u, &en, &e) < 0 && e.code == ERROR_EXISTS,
           "exclusive: one put there meanwhile is not replaced");
        error_done(&e);
        u = volume_upload_free(u);
        got = get(&m, v, "/n", &code);
        ok(streq_ptr(got, "x") && temp_files(vdir) == 0, "... it stays, the upload leaves nothing");
        free(got);
        o.exclusive = false;
        o.parents = true;
        ok(volume_upload_begin(&m, v, "/p/q/r", &o, 0, &u, &e) == 0 && volume_upload_finish(&m, u, &en, &e) == 0 &&
           streq(en.path, "/p/q/r"), "parents are made; an empty file");
        volume_entry_done(&en);
        u = volume_upload_free(u);

        /* a daemon that died mid-upload: its hidden files are removed by the first walk after the start */
        ASSERT(asprintf(&sub, "%s/d", vdir) > 0);
        ASSERT(asprintf(&stale, "%s/d/" VOLUME_TEMP_PREFIX "0123456789abcdef", vdir) > 0);
        FILE *f = fopen(stale, "we");
        ASSERT(f);
        fputs("half of a file", f);
        fclose(f);
        manager_close(&m);
        manager_open(&m, dir);
        v = volume_find(&m, "up");
        ok(v && usage_of(&m, v) == 701 && access(stale, F_OK) < 0 && temp_files(sub) == 0,
           "a restart's walk removes a dead upload's file and does not count it");

        ok(v && volume_upload_begin(&m, v, "/late", &o, VOLUME_SIZE_UNKNOWN, &u, &e) == 0 &&
           volume_remove(&m, v, &e) == 0, "a volume removed while an upload is in progress");
        ok(u && volume_upload_append(u, chunk, 1, &e) < 0 && e.code == ERROR_VOLUME_NOT_FOUND, "... the upload fails");
        error_done(&e);
        ok(u && volume_upload_finish(&m, u, &en, &e) < 0 && e.code == ERROR_VOLUME_NOT_FOUND && access(vdir, F_OK) < 0,
           "... and cannot finish; nothing is left");
        error_done(&e);
        u = volume_upload_free(u);
        manager_close(&m);
        (void) rm_rf(dir);
}

/* volume_entries_max in spaced.conf: text loaded as the daemon loads it, into m's config; config_load's result. */
static int load_entries_max(Manager *m, const char *dir, const char *text) {
        _cleanup_free_ char *path = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        Error e = {};
        int r;

        ASSERT(asprintf(&path, "%s/spaced.conf", dir) > 0 && (f = fopen(path, "we")));
        ASSERT(fputs(text, f) >= 0 && fflush(f) == 0);
        config_done(&m->config);
        m->config = (Config) {};
        r = config_load(&m->config, path, &e);
        error_done(&e);
        return r;
}

static void test_entries_config(void) {
        char tmpl[] = "/tmp/test-volume-conf.XXXXXX";
        const char *dir = mkdtemp(tmpl);
        Manager m = {};

        ASSERT(dir);
        ok(load_entries_max(&m, dir, "volume_quota = 1G\n") == 0 && volume_entries_max(&m) == 1048576,
           "volume_entries_max unset: 1048576");
        ok(load_entries_max(&m, dir, "volume_entries_max = 1000\n") == 0 && volume_entries_max(&m) == 1000,
           "volume_entries_max = 1000");
        ok(load_entries_max(&m, dir, "volume_entries_max = 4G\n") == 0 && volume_entries_max(&m) == (1ULL << 32),
           "... = 4G, the most");
        ok(load_entries_max(&m, dir, "volume_entries_max = 0\n") < 0 &&
           load_entries_max(&m, dir, "volume_entries_max = 4294967297\n") < 0 &&
           load_entries_max(&m, dir, "volume_entries_max = -1\n") < 0 &&
           load_entries_max(&m, dir, "volume_entries_max = many\n") < 0,
           "0, past 4G, negative, a word: refused");
        config_done(&m.config);
        (void) rm_rf(dir);
}

int main(void) {
        plan(0);
        test_checks();
        test_entries_config();
        test_volumes();
        test_uploads();
        return done();
}
