/* SPDX-License-Identifier: Apache-2.0 */
#include <btrfsutil.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "disk/btrfs.h"
#include "io-util.h"
#include "macro.h"
#include "paths.h"
#include "core/util.h"

/* The btrfs backend of the disk store (ARCHITECTURE.md, decision 5): each writable disk is a raw file alone in its own
 * subvolume under $state/volumes. A sandbox's first disk is a reflink of its base snapshot's disk; a
 * checkpoint is a read-only snapshot of the sandbox's volume, and restore and fork take writable snapshots
 * of that. No volume is ever shared, so nothing needs reference counting: whoever stops using one deletes
 * it, and layers_gc deletes those a crash left unrecorded. Everything is copy-on-write extents, never a copy
 * of data, and QEMU sees a plain raw file. */

bool path_on_btrfs(const char *path) {
        struct statfs sf;
        return statfs(path, &sf) == 0 && (unsigned long) sf.f_type == (unsigned long) BTRFS_SUPER_MAGIC;
}

static int btrfs_error(enum btrfs_util_error e, const char *what, const char *path, Error *reterr) {
        int r = errno > 0 ? -errno : -EIO;

        (void) error_set(reterr, error_code_from_errno(r), "%s %s: %s (%s)", what, path, btrfs_util_strerror(e),
                         strerror(-r));
        return r;
}

static int random_volume_path(const char *dir, char **ret) {
        char name[17];
        int r = random_hex(name, 16);

        if (r < 0)
                return r;
        return asprintf(ret, "%s/%s", dir, name) < 0 ? -ENOMEM : 0;
}

static int reflink(const char *src, const char *dst) {
        _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int out = -1;

        if (in < 0)
                return -errno;
        out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (out < 0)
                return -errno;
        if (ioctl(out, FICLONE, in) < 0) {
                int r = -errno;
                (void) unlink(dst);
                return r;
        }
        return 0;
}

int volume_clone(const char *dir, const char *source_file, bool read_only, uint64_t size, char **ret_disk,
                 Error *reterr) {
        _cleanup_free_ char *src_copy = strdup(source_file), *vol = NULL, *disk = NULL;
        enum btrfs_util_error e;
        const char *src_dir;
        struct stat st;
        int r;

        if (!src_copy)
                return -ENOMEM;
        src_dir = dirname(src_copy);
        r = space_mkdir_p(dir, 0700);
        if (r < 0) {
                (void) error_set(reterr, error_code_from_errno(r), "cannot create %s: %s", dir, strerror(-r));
                return r;
        }
        r = random_volume_path(dir, &vol);
        if (r < 0)
                return r;
        if (asprintf(&disk, "%s/" VOLUME_DISK_NAME, vol) < 0)
                return -ENOMEM;

        if (btrfs_util_is_subvolume(src_dir) == BTRFS_UTIL_OK) {
                /* a volume's disk: snapshot the volume, which is one tree root, whatever the file's size */
                e = btrfs_util_create_snapshot(src_dir, vol, read_only ? BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY : 0,
                                               NULL, NULL);
                if (e != BTRFS_UTIL_OK)
                        return btrfs_error(e, "cannot snapshot", src_dir, reterr);
        } else {
                /* the base snapshot's disk: a new volume with a reflink of it */
                e = btrfs_util_create_subvolume(vol, 0, NULL, NULL);
                if (e != BTRFS_UTIL_OK)
                        return btrfs_error(e, "cannot create the subvolume", vol, reterr);
                r = reflink(source_file, disk);
                if (r < 0) {
                        (void) error_set(reterr, error_code_from_errno(r), "cannot reflink %s into %s: %s", source_file,
                                         vol, strerror(-r));
                        (void) volume_delete(vol);
                        return r;
                }
                if (read_only) {
                        e = btrfs_util_set_subvolume_read_only(vol, true);
                        if (e != BTRFS_UTIL_OK) {
                                r = btrfs_error(e, "cannot make read-only", vol, reterr);
                                (void) volume_delete(vol);
                                return r;
                        }
                }
        }
        /* Grow, never shrink: the guest's filesystem may already fill the disk it was given. */
        if (!read_only && stat(disk, &st) == 0 && (uint64_t) st.st_size < size && truncate(disk, (off_t) size) < 0) {
                r = -errno;
                (void) error_set(reterr, error_code_from_errno(r), "cannot extend %s to %llu bytes: %s", disk,
                                 (unsigned long long) size, strerror(-r));
                (void) volume_delete(vol);
                return r;
        }
        *ret_disk = TAKE_PTR(disk);
        return 0;
}

int volume_delete(const char *path) {
        enum btrfs_util_error e;

        e = btrfs_util_is_subvolume(path);
        if (e == BTRFS_UTIL_ERROR_NOT_SUBVOLUME || e == BTRFS_UTIL_ERROR_NOT_BTRFS)
                return rm_rf(path); /* not one of ours: a plain directory or file */
        if (e != BTRFS_UTIL_OK)
                return errno == ENOENT ? 0 : (errno > 0 ? -errno : -EIO);
        e = btrfs_util_delete_subvolume(path, 0);
        if (e == BTRFS_UTIL_OK)
                return 0;
        if (errno == ENOENT)
                return 0;
        if (errno != EPERM && errno != EACCES)
                return errno > 0 ? -errno : -EIO;
        /* Without CAP_SYS_ADMIN (and no user_subvol_rm_allowed), the owner may still empty a subvolume and
         * rmdir it (Linux 4.18+); a read-only snapshot must be made writable first. */
        (void) btrfs_util_set_subvolume_read_only(path, false);
        return rm_rf(path);
}

int volume_created(const char *path, int64_t *ret_unix) {
        struct btrfs_util_subvolume_info info;
        enum btrfs_util_error e;

        e = btrfs_util_subvolume_info(path, 0, &info);
        if (e != BTRFS_UTIL_OK)
                return e == BTRFS_UTIL_ERROR_NOT_SUBVOLUME ? -ENOTDIR : (errno > 0 ? -errno : -EIO);
        *ret_unix = (int64_t) info.otime.tv_sec;
        return 0;
}

static int copy_range(int in, int out, off_t from, off_t to, bool *use_cfr) {
        _cleanup_free_ char *buf = NULL;

        for (off_t o = from; o < to && *use_cfr;) {
                loff_t io = o, oo = o;
                ssize_t n = copy_file_range(in, &io, out, &oo, (size_t) (to - o), 0);
                if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS)) {
                        *use_cfr = false; /* across filesystems since Linux 5.19: plain reads and writes */
                        break;
                }
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -EIO;
                o += n;
                from = o;
        }
        if (from >= to)
                return 0;
        buf = malloc(1 << 20);
        if (!buf)
                return -ENOMEM;
        for (off_t o = from; o < to;) {
                size_t want = (size_t) (to - o) < (1u << 20) ? (size_t) (to - o) : (1u << 20);
                ssize_t n = pread(in, buf, want, o);
                int r;

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                r = loop_pwrite(out, buf, (size_t) n, (uint64_t) o);
                if (r < 0)
                        return r;
                o += n;
        }
        return 0;
}

/* Copies what SRC holds, skipping its holes, so a sparse template image stays sparse. */
static int sparse_copy(int in, int out, off_t size) {
        bool use_cfr = true;
        off_t pos = 0;

        while (pos < size) {
                off_t data = lseek(in, pos, SEEK_DATA), hole;
                int r;

                if (data < 0)
                        return errno == ENXIO ? 0 : -errno;
                hole = lseek(in, data, SEEK_HOLE);
                if (hole < 0)
                        return -errno;
                r = copy_range(in, out, data, hole, &use_cfr);
                if (r < 0)
                        return r;
                pos = hole;
        }
        return 0;
}

int file_clone_or_copy(const char *src, const char *dst) {
        _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC), out = -1;
        struct stat st;
        int r;

        if (in < 0 || fstat(in, &st) < 0)
                return -errno;
        out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out < 0)
                return -errno;
        if (ioctl(out, FICLONE, in) == 0)
                return 0;
        /* EXDEV (the template lives on another filesystem), EOPNOTSUPP, EINVAL: copy instead */
        if (ftruncate(out, st.st_size) < 0)
                return -errno;
        r = sparse_copy(in, out, st.st_size);
        if (r >= 0 && fsync(out) < 0)
                r = -errno;
        return r;
}
