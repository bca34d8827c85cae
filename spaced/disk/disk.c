/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk/disk.h"
#include "disk/btrfs.h"
#include "core/log.h"
#include "macro.h"
#include "string-util.h"
#include "paths.h"
#include "core/manager.h"
#include "core/util.h"

/* The disk store (ARCHITECTURE.md, decision 5). A sandbox's data_dir/disk is a symlink to its writable disk; QEMU is always
 * given the real path, because qcow2 records its backing file by the name it was opened with.
 *
 * The backend is chosen once, for the base snapshot's disk, by the filesystem $state is on: on btrfs a raw
 * file that sandboxes get reflinks and subvolume snapshots of (btrfs.c); elsewhere a qcow2 overlay
 * on the template image, and qcow2 overlays on top of that. Every later disk is made from an earlier one and
 * follows its format (disk_format() reads it from the name), so nothing else needs to know which backend
 * is in use.
 *
 * qcow2: a checkpoint freezes the top layer and the sandbox goes on in a new one on top of it, so checkpoint,
 * restore and fork never copy disk data. A layer lives as long as a sandbox or checkpoint reaches it through
 * its backing chain (layers_gc). */

#define LAYER_CHAIN_MAX 256
#define DISK_QEMU_DIR "qemu"
/* What a worker made a moment ago may not be recorded yet: only collected when no worker runs, or when
 * older than this. */
#define GC_GRACE_SEC 60

static int layers_dir(const char *state_dir, char **ret) {
        return asprintf(ret, "%s/layers", state_dir) < 0 ? -ENOMEM : 0;
}

static int volumes_dir(const char *state_dir, char **ret) {
        return asprintf(ret, "%s/volumes", state_dir) < 0 ? -ENOMEM : 0;
}

DiskBackend disk_backend_detect(const char *state_dir) {
        return path_on_btrfs(state_dir) ? DISK_BACKEND_BTRFS : DISK_BACKEND_QCOW2;
}

const char *disk_backend_to_string(DiskBackend b) {
        return b == DISK_BACKEND_BTRFS ? "btrfs" : "qcow2";
}

static bool endswith(const char *s, const char *suffix) {
        size_t n = strlen(s), k = strlen(suffix);
        return n >= k && streq(s + n - k, suffix);
}

const char *disk_format(const char *disk) {
        return endswith(disk, ".raw") ? "raw" : "qcow2";
}

/* A disk that is alone in a btrfs volume of ours (never shared, so its user may delete it). */
static bool is_volume_disk(const char *disk) {
        return endswith(disk, "/" VOLUME_DISK_NAME);
}

static int qemu_img_overlay(const char *backing, const char *backing_format, uint64_t size_mib, const char *path,
                            Error *reterr) {
        _cleanup_free_ char *size = NULL, *out = NULL;
        int r;

        if (asprintf(&size, "%lluM", (unsigned long long) size_mib) < 0)
                return -ENOMEM;
        char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-F", (char *) backing_format, "-b", (char *) backing,
                         (char *) path, size, NULL };
        r = run_command(argv, &out);
        if (r < 0 && out)
                (void) error_set(reterr, ERROR_INTERNAL, "%s", out);
        return r;
}

static uint64_t fnv1a64(uint64_t h, const void *data, size_t n) {
        for (size_t i = 0; i < n; i++)
                h = (h ^ ((const uint8_t *) data)[i]) * 0x100000001b3ULL;
        return h;
}

/* Whether path is an empty overlay of backing with this size, as qemu-img wrote it. */
static bool blank_matches(const char *path, const char *backing, uint64_t size_mib) {
        _cleanup_free_ char *b = NULL;
        _cleanup_close_ int fd = -1;
        uint64_t size;

        if (qcow2_backing_file(path, &b) < 0 || !streq_ptr(b, backing))
                return false;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || pread(fd, &size, sizeof size, 24) != (ssize_t) sizeof size)
                return false;
        return be64toh(size) == size_mib << 20;
}

/* qemu-img writes the same bytes for the same backing file, format and size (a qcow2 header has no identity of
 * its own), and starting it costs every create, fork and checkpoint 10-20 ms on the way: such an empty overlay is
 * made once, in layers/.blank (layers_gc skips dot names and removes blanks whose backing is gone), and copied. */
static int blank_get(const char *layers, const char *backing, const char *backing_format, uint64_t size_mib,
                     char **ret_path) {
        _cleanup_free_ char *dir = NULL, *path = NULL, *tmp = NULL;
        uint64_t h = 0xcbf29ce484222325ULL;
        char name[17];
        int r;

        h = fnv1a64(h, backing, strlen(backing) + 1);
        h = fnv1a64(h, backing_format, strlen(backing_format) + 1);
        h = fnv1a64(h, &size_mib, sizeof size_mib);
        if (asprintf(&dir, "%s/.blank", layers) < 0 ||
            asprintf(&path, "%s/%016llx-%llu.qcow2", dir, (unsigned long long) h, (unsigned long long) size_mib) < 0)
                return -ENOMEM;
        if (access(path, F_OK) < 0) {
                if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                        return -errno;
                /* two workers may make it at once: each its own, and the rename that comes last wins */
                if (random_hex(name, 16) < 0 || asprintf(&tmp, "%s/.new-%s.qcow2", dir, name) < 0)
                        return -ENOMEM;
                r = qemu_img_overlay(backing, backing_format, size_mib, tmp, NULL);
                if (r >= 0 && rename(tmp, path) < 0)
                        r = -errno;
                if (r < 0) {
                        (void) unlink(tmp);
                        return r;
                }
        }
        if (!blank_matches(path, backing, size_mib))
                return -ESTALE;
        *ret_path = TAKE_PTR(path);
        return 0;
}

static int layer_new(const char *state_dir, const char *backing, const char *backing_format, uint64_t size_mib,
                     char **ret_path, Error *reterr) {
        _cleanup_free_ char *dir = NULL, *path = NULL, *blank = NULL;
        char name[17];
        int r;

        r = layers_dir(state_dir, &dir);
        if (r >= 0)
                r = space_mkdir_p(dir, 0700);
        if (r >= 0)
                r = random_hex(name, 16);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/%s.qcow2", dir, name) < 0)
                return -ENOMEM;
        r = blank_get(dir, backing, backing_format, size_mib, &blank);
        if (r >= 0)
                r = file_clone_or_copy(blank, path);
        if (r < 0) {
                /* no blank to copy (a full disk, a read error): make this one directly, as before */
                (void) unlink(path);
                r = qemu_img_overlay(backing, backing_format, size_mib, path, reterr);
                if (r < 0)
                        return r;
        }
        *ret_path = TAKE_PTR(path);
        return 0;
}

int disk_base_new(DiskBackend b, const char *rootfs, const char *dir, char **ret_path, Error *reterr) {
        _cleanup_free_ char *path = NULL;
        int r;

        if (asprintf(&path, "%s/base.%s", dir, b == DISK_BACKEND_BTRFS ? "raw" : "qcow2") < 0)
                return -ENOMEM;
        if (b == DISK_BACKEND_BTRFS) {
                /* The template image may live elsewhere (no reflink then): one copy per base snapshot. */
                r = file_clone_or_copy(rootfs, path);
                if (r < 0) {
                        (void) error_set(reterr, error_code_from_errno(r), "cannot copy %s to %s: %s", rootfs, path,
                                         strerror(-r));
                        return r;
                }
        } else {
                char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", (char *) rootfs, path,
                                 NULL };
                char *out = NULL;

                r = run_command(argv, &out);
                if (r < 0) {
                        (void) error_set(reterr, ERROR_INTERNAL, "qemu-img create failed: %s", out ?: "?");
                        free(out);
                        return r;
                }
        }
        *ret_path = TAKE_PTR(path);
        return 0;
}

int disk_clone(const char *state_dir, const char *source, uint64_t size_mib, char **ret_path, Error *reterr) {
        _cleanup_free_ char *dir = NULL;

        if (streq(disk_format(source), "qcow2"))
                return layer_new(state_dir, source, "qcow2", size_mib, ret_path, reterr);
        if (volumes_dir(state_dir, &dir) < 0)
                return -ENOMEM;
        return volume_clone(dir, source, false, size_mib << 20, ret_path, reterr);
}

void disk_forget(const char *disk) {
        _cleanup_free_ char *copy = NULL;

        /* A qcow2 layer may back others: layers_gc decides. */
        if (!disk || !is_volume_disk(disk) || !(copy = strdup(disk)))
                return;
        (void) volume_delete(dirname(copy));
}

int disk_checkpoint_prepare(const char *state_dir, const char *data_dir, uint64_t size_mib, DiskCheckpoint *ret,
                            Error *reterr) {
        _cleanup_free_ char *top = NULL, *next = NULL;
        int r;

        r = sandbox_disk_get(data_dir, &top);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "the sandbox's disk is missing: %s", strerror(-r));
                return r;
        }
        /* qcow2: the layer the sandbox goes on in is made now, so it costs nothing while the guest is stopped */
        if (streq(disk_format(top), "qcow2")) {
                r = layer_new(state_dir, top, "qcow2", size_mib, &next, reterr);
                if (r < 0)
                        return r;
        }
        *ret = (DiskCheckpoint) { .top = TAKE_PTR(top), .next_top = TAKE_PTR(next) };
        return 0;
}

/* data_dir/qemu: the only directory of layers a confined QEMU sees (ARCHITECTURE.md, decision 12). A qcow2
 * layer is handed to QEMU as a hard link in it, at start and at each checkpoint, and the link goes once the
 * layer is frozen: then no path to it is writable inside, and an escaped QEMU cannot change a checkpoint
 * that other sandboxes are forked from. A layer made while QEMU runs gets in this way too, since QEMU's
 * namespace has only what existed when it started. */
static int qemu_dir(const char *data_dir, char **ret) {
        _cleanup_free_ char *dir = NULL;

        if (asprintf(&dir, "%s/" DISK_QEMU_DIR, data_dir) < 0)
                return -ENOMEM;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        *ret = TAKE_PTR(dir);
        return 0;
}

static const char *base_name(const char *path) {
        const char *slash = strrchr(path, '/');
        return slash ? slash + 1 : path;
}

/* Links layer into dir under its own name; the name is random, so an entry there already is a stale one. */
static int qemu_link(const char *dir, const char *layer, char **ret_path) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/%s", dir, base_name(layer)) < 0)
                return -ENOMEM;
        (void) unlink(path);
        if (link(layer, path) < 0)
                return -errno;
        *ret_path = TAKE_PTR(path);
        return 0;
}

/* Removes every entry of dir but keep (NULL: all): a link left there keeps its layer's blocks from
 * layers_gc. */
static void qemu_dir_prune(const char *dir, const char *keep) {
        _cleanup_closedir_ DIR *d = opendir(dir);
        struct dirent *de;

        while (d && (de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..") && !(keep && streq(de->d_name, keep)))
                        (void) unlinkat(dirfd(d), de->d_name, 0);
}

int disk_qemu_path(const char *data_dir, const char *disk, char **ret_path, char **ret_dir) {
        _cleanup_free_ char *dir = NULL, *path = NULL, *backing = NULL;
        int r;

        /* A btrfs volume is the sandbox's alone and never becomes a checkpoint's (that is a snapshot of it):
         * QEMU gets it by its own name. So does a layer with a relative backing name, which QEMU would look
         * for next to the link. */
        if (streq(disk_format(disk), "qcow2") && qcow2_backing_file(disk, &backing) >= 0 &&
            (!backing || backing[0] == '/')) {
                r = qemu_dir(data_dir, &dir);
                if (r < 0)
                        return r;
                /* No QEMU of this sandbox runs now: whatever is there is a leftover. */
                qemu_dir_prune(dir, NULL);
                r = qemu_link(dir, disk, &path);
                if (r >= 0) {
                        *ret_path = TAKE_PTR(path);
                        *ret_dir = TAKE_PTR(dir);
                        return 0;
                }
                /* EXDEV: data_dir was moved to another file system. QEMU runs on the disk's own name then,
                 * and confined it cannot take a checkpoint. */
                if (r != -EXDEV)
                        return r;
        }
        path = strdup(disk);
        if (!path)
                return -ENOMEM;
        *ret_path = TAKE_PTR(path);
        *ret_dir = NULL;
        return 0;
}

/* NULL: nothing was linked. */
static void unlink_handed(const char *handed) {
        if (handed)
                (void) unlink(handed);
}

static int checkpoint_qcow2(Qmp *q, const char *data_dir, DiskCheckpoint *c, Error *reterr) {
        _cleanup_free_ char *dir = NULL, *handed = NULL;
        const char *file;
        int r;

        r = qemu_dir(data_dir, &dir);
        if (r >= 0)
                r = qemu_link(dir, c->next_top, &handed);
        /* EXDEV as in disk_qemu_path(): by its own name, which only an unconfined QEMU can open */
        file = r >= 0 ? handed : c->next_top;
        if (r < 0 && r != -EXDEV) {
                (void) error_set(reterr, ERROR_INTERNAL, "cannot hand the new layer to QEMU: %s", strerror(-r));
                return r;
        }
        /* Link first: if we die between the two, the link names an empty overlay on the layer QEMU still
         * writes, which reads the same; the other order could leave the link on a layer QEMU left. */
        r = sandbox_disk_set(data_dir, c->next_top);
        if (r < 0) {
                unlink_handed(handed);
                (void) error_set(reterr, ERROR_INTERNAL, "cannot switch the sandbox's disk: %s", strerror(-r));
                return r;
        }
        crash_point("checkpoint-layer-switched");
        r = vm_disk_snapshot(q, file, 10000, reterr);
        if (r < 0) {
                (void) sandbox_disk_set(data_dir, c->top);
                unlink_handed(handed);
                return r;
        }
        crash_point("checkpoint-linked");
        /* QEMU has reopened the old top read-only by its name in dir (the command returns after that):
         * taking the name away leaves it no writable path to the frozen layer. */
        qemu_dir_prune(dir, base_name(c->next_top));
        c->frozen = strdup(c->top);
        return c->frozen ? 0 : -ENOMEM;
}

int disk_checkpoint_take(Qmp *q, const char *state_dir, const char *data_dir, DiskCheckpoint *c,
                         Error *reterr) {
        _cleanup_free_ char *dir = NULL;
        int r;

        if (c->next_top)
                return checkpoint_qcow2(q, data_dir, c, reterr);
        /* btrfs: a read-only snapshot of the sandbox's volume; QEMU's stop has drained and flushed its I/O
         * (cache=none writes bypass the page cache), and the VM goes on writing its own volume. */
        if (volumes_dir(state_dir, &dir) < 0)
                return -ENOMEM;
        r = volume_clone(dir, c->top, true, 0, &c->frozen, reterr);
        if (r < 0)
                return r;
        crash_point("checkpoint-snapshotted");
        return 0;
}

void disk_checkpoint_done(DiskCheckpoint *c, bool keep) {
        /* A failed btrfs checkpoint's snapshot is nobody's; a qcow2 frozen layer stays in the sandbox's chain. */
        if (!keep && c->frozen && !c->next_top)
                disk_forget(c->frozen);
        free(c->top);
        free(c->next_top);
        free(c->frozen);
        *c = (DiskCheckpoint) {};
}

/* data_dir/disk; sandboxes made before the btrfs backend have data_dir/disk.qcow2. */
int sandbox_disk_set(const char *data_dir, const char *disk) {
        _cleanup_free_ char *link = NULL, *tmp = NULL, *legacy = NULL;

        if (asprintf(&link, "%s/disk", data_dir) < 0 || asprintf(&tmp, "%s/.disk.new", data_dir) < 0 ||
            asprintf(&legacy, "%s/disk.qcow2", data_dir) < 0)
                return -ENOMEM;
        (void) unlink(tmp);
        if (symlink(disk, tmp) < 0)
                return -errno;
        if (rename(tmp, link) < 0) {
                int r = -errno;
                (void) unlink(tmp);
                return r;
        }
        (void) unlink(legacy);
        return 0;
}

int sandbox_disk_get(const char *data_dir, char **ret) {
        _cleanup_free_ char *link = NULL, *legacy = NULL;
        char *real;

        if (asprintf(&link, "%s/disk", data_dir) < 0 || asprintf(&legacy, "%s/disk.qcow2", data_dir) < 0)
                return -ENOMEM;
        real = realpath(link, NULL);
        if (!real && errno == ENOENT)
                real = realpath(legacy, NULL);
        if (!real)
                return -errno;
        *ret = real;
        return 0;
}

/* Reads the backing file name from a qcow2 header (big-endian: offset 8 u64, size at 16 u32). Our own files,
 * but still bounded: a torn or foreign file must not make us read far. */
int qcow2_backing_file(const char *path, char **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        uint8_t h[20];
        uint64_t off;
        uint32_t len;
        char *name;

        if (fd < 0)
                return -errno;
        if (pread(fd, h, sizeof h, 0) != (ssize_t) sizeof h)
                return -EIO;
        if (memcmp(h, "QFI\xfb", 4) != 0)
                return -EMEDIUMTYPE;
        memcpy(&off, h + 8, 8);
        memcpy(&len, h + 16, 4);
        off = be64toh(off);
        len = be32toh(len);
        if (off == 0 || len == 0) {
                *ret = NULL;
                return 0;
        }
        if (len >= PATH_MAX || off > 65536)
                return -EBADMSG;
        name = calloc(1, len + 1);
        if (!name)
                return -ENOMEM;
        if (pread(fd, name, len, (off_t) off) != (ssize_t) len) {
                free(name);
                return -EIO;
        }
        *ret = name;
        return 0;
}

static void mark_chain(const char *layers, const char *top, char ***live) {
        _cleanup_free_ char *cur = top ? strdup(top) : NULL;

        for (unsigned depth = 0; cur && depth < LAYER_CHAIN_MAX; depth++) {
                char *next = NULL;
                size_t n = strlen(layers);

                if (strncmp(cur, layers, n) != 0 || cur[n] != '/')
                        break; /* reached the base snapshot's disk: not ours to collect */
                (void) strv_extend(live, cur);
                if (qcow2_backing_file(cur, &next) < 0)
                        break;
                free(cur);
                cur = next;
        }
}

static bool too_young(int64_t born, int64_t grace) {
        return grace > 0 && born > now_unix() - grace;
}

/* A blank (see blank_get) goes with its backing file; a half-made one (.new-*) from a crash goes too. */
static void blanks_gc(const char *layers) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;

        if (asprintf(&dir, "%s/.blank", layers) < 0 || !(d = opendir(dir)))
                return;
        while ((de = readdir(d))) {
                _cleanup_free_ char *backing = NULL;
                struct stat st;

                bool half_made = strncmp(de->d_name, ".new-", 5) == 0;

                if (de->d_name[0] == '.' && !half_made)
                        continue;
                if (half_made) {
                        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) >= 0 &&
                            !too_young(st.st_mtime, GC_GRACE_SEC))
                                (void) unlinkat(dirfd(d), de->d_name, 0);
                        continue;
                }
                _cleanup_free_ char *path = NULL;
                if (asprintf(&path, "%s/%s", dir, de->d_name) < 0)
                        return;
                if (qcow2_backing_file(path, &backing) < 0 || !backing || access(backing, F_OK) < 0)
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        }
}

static DiskUsersFn disk_users;

void disk_set_users(DiskUsersFn f) {
        disk_users = f;
}

typedef struct LiveChain {
        const char *layers;
        char ***live;
} LiveChain;

static void mark_live_chain(const char *disk, void *userdata) {
        LiveChain *l = userdata;
        mark_chain(l->layers, disk, l->live);
}

static void mark_live(const char *disk, void *userdata) {
        if (disk)
                (void) strv_extend(userdata, disk);
}

static int layers_gc_qcow2(Manager *m, int64_t grace) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_strv_free_ char **live = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        unsigned removed = 0;

        if (layers_dir(m->state_dir, &dir) < 0)
                return -ENOMEM;
        d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        disk_users(m, mark_live_chain, &(LiveChain) { dir, &live });

        while ((de = readdir(d))) {
                _cleanup_free_ char *path = NULL;
                struct stat st;
                bool keep = false;

                if (de->d_name[0] == '.')
                        continue;
                if (asprintf(&path, "%s/%s", dir, de->d_name) < 0)
                        return -ENOMEM;
                for (char **l = live; l && *l && !keep; l++)
                        keep = streq(*l, path);
                if (!keep && lstat(path, &st) >= 0 && too_young(st.st_mtime, grace))
                        keep = true;
                if (!keep && unlink(path) >= 0)
                        removed++;
        }
        if (removed)
                log_debug("removed %u disk layer(s) nothing uses", removed);
        blanks_gc(dir);
        return (int) removed;
}

/* Volumes are never shared: one is live when a sandbox's link or a checkpoint names the disk in it. */
static int layers_gc_volumes(Manager *m, int64_t grace) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_strv_free_ char **live = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        unsigned removed = 0;

        if (volumes_dir(m->state_dir, &dir) < 0)
                return -ENOMEM;
        d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        disk_users(m, mark_live, &live);

        while ((de = readdir(d))) {
                _cleanup_free_ char *path = NULL, *disk = NULL;
                int64_t born = 0;
                bool keep = false;

                if (de->d_name[0] == '.')
                        continue;
                if (asprintf(&path, "%s/%s", dir, de->d_name) < 0 ||
                    asprintf(&disk, "%s/" VOLUME_DISK_NAME, path) < 0)
                        return -ENOMEM;
                for (char **l = live; l && *l && !keep; l++)
                        keep = streq(*l, disk);
                if (!keep && volume_created(path, &born) >= 0 && too_young(born, grace))
                        keep = true;
                if (!keep) {
                        int r = volume_delete(path);
                        if (r < 0)
                                log_warning_errno(r, "cannot delete the unused volume %s", path);
                        else
                                removed++;
                }
        }
        if (removed)
                log_debug("removed %u disk volume(s) nothing uses", removed);
        return (int) removed;
}

int layers_gc(Manager *m) {
        /* Workers make disks and hand them back through completions; with none running, whatever no sandbox
         * or checkpoint names is an orphan (of a crash or a failure) right away. */
        int64_t grace = m->workers_running > 0 ? GC_GRACE_SEC : 0;
        if (!disk_users)
                return 0;   /* nobody says what is in use: nothing is known to be unused */
        int a = layers_gc_qcow2(m, grace), b = layers_gc_volumes(m, grace);

        return a < 0 ? a : b < 0 ? b : a + b;
}

static uint64_t usage_at(int parent_fd, const char *name) {
        struct stat st;
        uint64_t n;

        if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        n = (uint64_t) st.st_blocks * 512;
        if (S_ISDIR(st.st_mode)) {
                int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
                struct dirent *de;

                if (!d) {
                        safe_close(fd);
                        return n;
                }
                while ((de = readdir(d)))
                        if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                                n += usage_at(dirfd(d), de->d_name);
                closedir(d);
        }
        return n;
}

uint64_t disk_usage(const char *path) {
        return usage_at(AT_FDCWD, path);
}
