/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: a hostile guest's VOLUME requests (spaced/volume/volume-guest*.c) on a real volume in a
 * scratch state directory (a real SQLite store, real files), set up again before each input: a file, a directory
 * with a file, links planted to /etc, to /etc/passwd and to a directory outside the volume, which holds a file.
 *
 * Input: up to 8 VOLUME payloads as the guest sends them (le32 n, n bytes of records, the bytes), separated by
 * "\n--REQ--\n", each handed to volume_guest_request() in turn, so that one request can work on what an earlier
 * one made. The invariants: an answer is 0 or one of the guest's errnos, with a message on failure that names no
 * host path (unless the guest wrote it) and no answer; a success is one payload within a frame whose records parse; after every request the
 * usage and the number of entries the daemon keeps are what a walk of the volume's directory finds and stay
 * within the quota and the bound on entries, and outside the volume's directory nothing changed. */

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz-util.h"
#include "macro.h"
#include "core/log.h"
#include "core/manager.h"
#include "core/store.h"
#include "volume/volume.h"

#define QUOTA (256U * 1024U)
#define ENTRIES_MAX 12U /* a bound a few requests reach: the 6 entries every input starts with, and 6 more */
#define REQUESTS_MAX 8

static Manager manager;
static Volume *volume;
static char vdir[512], outside[512], keep[600];

static void plant(const char *rel, const char *text, bool link) {
        char p[1024];

        snprintf(p, sizeof p, "%s/%s", vdir, rel);
        if (link)
                check(symlink(text, p) == 0);
        else if (!text)
                check(mkdir(p, 0700) == 0);
        else
                fuzz_write_file(p, text, strlen(text));
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        char db[600];
        Error e = {};

        log_max_level = 0;
        snprintf(db, sizeof db, "%s/space.db", fuzz_dir());
        snprintf(outside, sizeof outside, "%s/outside", fuzz_dir());
        snprintf(keep, sizeof keep, "%s/keep", outside);
        check(mkdir(outside, 0700) == 0);
        fuzz_write_file(keep, "keep", 4);
        manager.state_dir = (char *) fuzz_dir();
        manager.config.volume_entries_max = ENTRIES_MAX;
        check(store_open(db, &manager.store, &e) == 0);
        check(volumes_load(&manager, &e) == 0);
        check(volume_create(&manager, "fuzz", QUOTA, &volume, &e) == 0);
        snprintf(vdir, sizeof vdir, "%s/volume-data/%s", fuzz_dir(), volume->rec.id);
        return 0;
}

/* The volume as every input starts: emptied, then the same few entries. */
static void reset(void) {
        _cleanup_closedir_ DIR *d = opendir(vdir);
        struct dirent *de;

        check(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        check(volume_remove_tree_at(dirfd(d), de->d_name, 0, NULL, NULL) == 0);
        plant("a", "hello, volume", false);
        plant("d", NULL, false);
        plant("d/b", "b", false);
        plant("etc", "/etc", true);
        plant("passwd", "../../../../../../etc/passwd", true);
        plant("out", outside, true);
        volume->usage_known = false;
}

/* A fresh walk of the volume's files, as the daemon does at its first use after a start: its usage and entries. */
static void walk(uint64_t *ret_usage, uint64_t *ret_entries) {
        _cleanup_close_ int fd = open(vdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        unsigned stale = 0;

        *ret_usage = *ret_entries = 0;
        check(fd >= 0 && volume_walk_usage(fd, 0, ret_usage, ret_entries, &stale) == 0 && stale == 0);
}

static bool outside_unchanged(void) {
        _cleanup_closedir_ DIR *d = opendir(outside);
        struct dirent *de;
        struct stat st;
        unsigned n = 0;

        check(d);
        while ((de = readdir(d)))
                n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        return n == 1 && stat(keep, &st) == 0 && st.st_size == 4 && S_ISREG(st.st_mode);
}

static bool guest_errno(int r) {
        return IN_SET(-r, ENOENT, EEXIST, ENOTEMPTY, EISDIR, ENOTDIR, ENOSPC, EINVAL, ELOOP, ENAMETOOLONG, EACCES,
                      EPERM, ENOMEM, EBUSY, ENOSYS, EOPNOTSUPP, EFBIG, EMLINK, EROFS, EIO);
}

static void one(const uint8_t *p, size_t n) {
        _cleanup_(space_buf_done) SpaceBuf out = {};
        const uint8_t *kv, *data, *akv, *adata;
        size_t kv_len, data_len, akv_len, adata_len, off = 0, key_len;
        const char *key, *value;
        char msg[256];
        uint64_t usage, walked_usage, walked_entries;
        int r;

        if (space_volume_payload_split(p, n, &kv, &kv_len, &data, &data_len) < 0)
                return;
        memset(msg, 'x', sizeof msg);
        r = volume_guest_request(&manager, volume, kv, kv_len, data, data_len, &out, msg, sizeof msg);
        check(r == 0 || guest_errno(r));
        check(memchr(msg, '\0', sizeof msg));
        if (r < 0) {
                check(msg[0] && out.len == 0);
                /* (a guest that guessed it may hear its own text again) */
                check(!strstr(msg, fuzz_dir()) || memmem(p, n, fuzz_dir(), strlen(fuzz_dir())));
        } else {
                check(out.len <= SPACE_FRAME_PAYLOAD_MAX);
                check(space_volume_payload_split(out.data, out.len, &akv, &akv_len, &adata, &adata_len) == 0);
                check(adata_len <= SPACE_VOLUME_IO_MAX);
                while ((r = space_kv_next(akv, akv_len, &off, &key, &key_len, &value)) > 0)
                        ;
                check(r == 0);
        }
        check(volume_usage(&manager, volume, &usage, NULL) == 0);
        walk(&walked_usage, &walked_entries);
        check(usage == walked_usage && usage <= QUOTA);
        check(volume->entries == walked_entries && volume->entries <= ENTRIES_MAX);
        check(outside_unchanged());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *parts[REQUESTS_MAX];
        size_t lens[REQUESTS_MAX], n;

        reset();
        n = fuzz_split(data, size, "\n--REQ--\n", parts, lens, REQUESTS_MAX);
        for (size_t i = 0; i < n; i++)
                one(parts[i], lens[i]);
        return 0;
}
