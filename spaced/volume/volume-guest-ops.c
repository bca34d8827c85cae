/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "volume/volume-internal.h"

/* The ops of a guest's VOLUME requests (lib/proto.h, "Volume mounts"; volume-guest.c parses them). Each resolves
 * its path inside the volume (volume_resolve(): the parent by openat2(RESOLVE_IN_ROOT)) and acts on the last
 * name with *at() calls that never follow it: a symlink is looked at, changed or removed as the link itself, and
 * only read through by the guest's own kernel. Growth is checked against the quota before anything is written,
 * and a new entry (create, mkdir, symlink) against the bound on entries before it is made (ENOSPC). */

#define UID_MAX_GUEST ((uint64_t) UINT32_MAX - 1) /* (uid_t) -1 means "unchanged" to chown(2): never an owner */
#define STATFS_BSIZE 4096
/* A readdir answer's records stop this far below a frame, leaving room for the length, cookie= and its NUL. */
#define READDIR_MARGIN 64

static int open_leaf(GuestRequest *q, const VolumeTarget *t, int flags, const char *what, int *ret_fd) {
        int fd = openat(t->dirfd, t->leaf ?: ".", flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

        if (fd < 0)
                return volume_fs_error(&q->error, -errno, what, t->rel);
        *ret_fd = fd;
        return 0;
}

static int lstat_leaf(GuestRequest *q, const VolumeTarget *t, const char *what, struct stat *ret) {
        if (fstatat(t->dirfd, t->leaf ?: "", ret, AT_SYMLINK_NOFOLLOW | (t->leaf ? 0 : AT_EMPTY_PATH)) < 0)
                return volume_fs_error(&q->error, -errno, what, t->rel);
        return 0;
}

/* The owner and mode of create, mkdir and symlink (all required but a symlink's, which is not kept). */
static int owner_and_mode(GuestRequest *q, bool required, int64_t *ret_uid, int64_t *ret_gid, int64_t *ret_mode) {
        int r = guest_number(q, GUEST_KEY_UID, UID_MAX_GUEST, required, ret_uid);

        if (r >= 0)
                r = guest_number(q, GUEST_KEY_GID, UID_MAX_GUEST, required, ret_gid);
        if (r >= 0)
                r = guest_number(q, GUEST_KEY_MODE, 07777, required, ret_mode);
        return r;
}

static int op_getattr(GuestRequest *q) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        int r = guest_resolve(q, &t);

        return r < 0 ? r : guest_answer_attr(q, &t);
}

/* What setattr asks, all checked before anything changes. */
typedef struct SetAttr {
        int64_t mode, uid, gid, size;
        struct timespec times[2];
} SetAttr;

static int setattr_parse(GuestRequest *q, SetAttr *ret) {
        int r = owner_and_mode(q, false, &ret->uid, &ret->gid, &ret->mode);

        if (r >= 0)
                r = guest_number(q, GUEST_KEY_SIZE, INT64_MAX, false, &ret->size);
        if (r >= 0)
                r = guest_time(q, GUEST_KEY_ATIME, GUEST_KEY_ATIME_NSEC, &ret->times[0]);
        if (r >= 0)
                r = guest_time(q, GUEST_KEY_MTIME, GUEST_KEY_MTIME_NSEC, &ret->times[1]);
        return r;
}

static int op_setattr(GuestRequest *q) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        _cleanup_close_ int fd = -1;
        bool times = false;
        struct stat st;
        SetAttr a;
        int r;

        r = setattr_parse(q, &a);
        if (r >= 0)
                r = guest_resolve(q, &t);
        if (r >= 0)
                r = lstat_leaf(q, &t, "change", &st);
        if (r < 0)
                return r;
        times = a.times[0].tv_nsec != UTIME_OMIT || a.times[1].tv_nsec != UTIME_OMIT;
        if (S_ISLNK(st.st_mode)) {
                /* a link's owner and mode are not kept (no user.* attributes on links): dropped, as symlink's */
                if (a.size >= 0)
                        return guest_invalid(q, "/%.512s is a symlink: it has no size to set", t.rel);
                if (times && utimensat(t.dirfd, t.leaf, a.times, AT_SYMLINK_NOFOLLOW) < 0)
                        return volume_fs_error(&q->error, -errno, "set the times of", t.rel);
                return guest_answer_attr(q, &t);
        }
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
                return guest_invalid(q, "/%.512s is not a file, a directory or a symlink", t.rel);
        /* a directory opened for writing is EISDIR: what a size on one is */
        r = open_leaf(q, &t, a.size >= 0 ? O_WRONLY : O_RDONLY, "change", &fd);
        if (r >= 0 && a.size >= 0)
                r = volume_truncate_fd(q->m, q->v, fd, (uint64_t) a.size, t.rel, &q->error);
        if (r >= 0 && (r = volume_meta_set(fd, a.uid, a.gid, a.mode)) < 0)
                r = volume_fs_error(&q->error, r, "set the metadata of", t.rel);
        if (r >= 0 && times && futimens(fd, a.times) < 0)
                r = volume_fs_error(&q->error, -errno, "set the times of", t.rel);
        return r < 0 ? r : guest_answer_attr(q, &t);
}

static const char *dirent_type(int dirfd, const struct dirent64 *de) {
        struct stat st;

        switch (de->d_type) {
        case DT_REG: return "file";
        case DT_DIR: return "dir";
        case DT_LNK: return "symlink";
        case DT_UNKNOWN:
                if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                        return S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir"
                                : S_ISLNK(st.st_mode) ? "symlink" : "other";
                return "other";
        default: return "other";
        }
}

/* The entries from cookie on (lseek() to it, getdents64() from there: d_off is the next one's cookie), as many as
 * fit in a frame, then cookie=NEXT or 0 at the end. Nothing is kept between requests: a cookie the guest made up
 * is a place in the directory like any other, or EINVAL from lseek(). */
static int readdir_from(GuestRequest *q, int fd, int64_t cookie, const char *rel) {
        _cleanup_free_ uint8_t *buf = malloc(SPACE_VOLUME_IO_MAX);
        const size_t budget = SPACE_FRAME_PAYLOAD_MAX - 4 - READDIR_MARGIN;
        int64_t next = cookie;
        bool end = false, full = false;
        int r = 0;

        if (!buf)
                return -ENOMEM;
        if (lseek(fd, (off_t) cookie, SEEK_SET) < 0)
                return guest_invalid(q, "cookie=%lld is no place in /%.512s", (long long) cookie, rel);
        while (!full && !end) {
                ssize_t n = getdents64(fd, buf, SPACE_VOLUME_IO_MAX);

                if (n < 0)
                        return volume_fs_error(&q->error, -errno, "read the directory", rel);
                end = n == 0;
                for (ssize_t i = 0; i < n;) {
                        const struct dirent64 *de = (const struct dirent64 *) (buf + i);
                        size_t name_len = strlen(de->d_name);

                        i += de->d_reclen;
                        /* "." and ".." are the guest kernel's; an upload in progress is no file yet */
                        if (!streq(de->d_name, ".") && !streq(de->d_name, "..") && !volume_temp_name(de->d_name)) {
                                /* name=, type=symlink, ino=20 digits, each with its NUL */
                                if (q->kv.len + 5 + name_len + 1 + 13 + 1 + 24 + 1 > budget) {
                                        full = true;
                                        break;
                                }
                                r = space_kv_add(&q->kv, "name", de->d_name);
                                if (r >= 0)
                                        r = space_kv_add(&q->kv, "type", dirent_type(fd, de));
                                if (r >= 0)
                                        r = space_kv_addf(&q->kv, "ino", "%llu", (unsigned long long) de->d_ino);
                                if (r < 0)
                                        return r;
                        }
                        next = de->d_off;
                }
        }
        return space_kv_addf(&q->kv, "cookie", "%lld", end ? 0LL : (long long) next);
}

static int op_readdir(GuestRequest *q) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        _cleanup_close_ int fd = -1;
        int64_t cookie;
        int r;

        r = guest_number(q, GUEST_KEY_COOKIE, INT64_MAX, true, &cookie);
        if (r >= 0)
                r = guest_resolve(q, &t);
        if (r >= 0)
                r = open_leaf(q, &t, O_RDONLY | O_DIRECTORY, "list", &fd);
        return r < 0 ? r : readdir_from(q, fd, cookie, t.rel);
}

/* offset + size fits in an off_t (lib/proto.h: no overflow), size at most max. */
static int io_range(GuestRequest *q, uint64_t size, uint64_t max, int64_t *ret_offset) {
        int r = guest_number(q, GUEST_KEY_OFFSET, INT64_MAX, true, ret_offset);

        if (r < 0)
                return r;
        if (size > max)
                return guest_invalid(q, "op=%s moves at most %llu bytes", q->op, (unsigned long long) max);
        if ((uint64_t) *ret_offset > (uint64_t) INT64_MAX - size)
                return guest_invalid(q, "offset=%lld and %llu bytes go past the largest offset", (long long) *ret_offset,
                                     (unsigned long long) size);
        return 0;
}

/* The regular file at t, opened with flags; a directory is EISDIR, anything else EINVAL. */
static int open_file(GuestRequest *q, const VolumeTarget *t, int flags, const char *what, int *ret_fd,
                     struct stat *ret_st) {
        _cleanup_close_ int fd = -1;
        int r;

        if (!t->leaf)
                return volume_fs_error(&q->error, -EISDIR, what, t->rel);
        r = open_leaf(q, t, flags, what, &fd);
        if (r < 0)
                return r;
        if (fstat(fd, ret_st) < 0)
                return volume_fs_error(&q->error, -errno, what, t->rel);
        if (S_ISDIR(ret_st->st_mode))
                return volume_fs_error(&q->error, -EISDIR, what, t->rel);
        if (!S_ISREG(ret_st->st_mode))
                return guest_invalid(q, "cannot %s /%.512s: not a regular file", what, t->rel);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int op_read(GuestRequest *q) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        _cleanup_close_ int fd = -1;
        int64_t size, offset;
        size_t got = 0;
        struct stat st;
        int r;

        r = guest_number(q, GUEST_KEY_SIZE, SPACE_VOLUME_IO_MAX, true, &size);
        if (r >= 0)
                r = io_range(q, (uint64_t) size, SPACE_VOLUME_IO_MAX, &offset);
        if (r >= 0)
                r = guest_resolve(q, &t);
        if (r >= 0)
                r = open_file(q, &t, O_RDONLY, "read", &fd, &st);
        if (r < 0)
                return r;
        q->out_buf = malloc(size > 0 ? (size_t) size : 1);
        if (!q->out_buf)
                return -ENOMEM;
        while (got < (size_t) size) {
                ssize_t n = pread(fd, (uint8_t *) q->out_buf + got, (size_t) size - got, (off_t) offset + (off_t) got);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return volume_fs_error(&q->error, -errno, "read", t.rel);
                if (n == 0)
                        break;
                got += (size_t) n;
        }
        q->out = q->out_buf;
        q->out_len = got;
        return 0;
}

static int op_write(GuestRequest *q) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        _cleanup_close_ int fd = -1;
        uint64_t old_size, new_size;
        int64_t offset;
        size_t done = 0;
        struct stat st;
        int r;

        r = io_range(q, q->data_len, SPACE_VOLUME_IO_MAX, &offset);
        if (r >= 0)
                r = guest_resolve(q, &t);
        /* no O_CREAT: the guest writes to a file it created or looked up; one gone meanwhile stays gone */
        if (r >= 0)
                r = open_file(q, &t, O_WRONLY, "write", &fd, &st);
        if (r < 0)
                return r;
        old_size = (uint64_t) st.st_size;
        new_size = q->data_len > 0 && (uint64_t) offset + q->data_len > old_size ? (uint64_t) offset + q->data_len
                                                                                : old_size;
        r = volume_check_quota(q->m, q->v, old_size, new_size, 0, t.rel, &q->error);
        if (r < 0)
                return r;
        while (done < q->data_len && r >= 0) {
                ssize_t n = pwrite(fd, q->data + done, q->data_len - done, (off_t) offset + (off_t) done);

                if (n < 0 && errno != EINTR)
                        r = volume_fs_error(&q->error, -errno, "write", t.rel);
                else if (n > 0)
                        done += (size_t) n;
        }
        /* what the file grew by, even when the host's disk stopped the write half way */
        if (fstat(fd, &st) == 0)
                volume_usage_add(q->v, old_size, (uint64_t) st.st_size);
        if (r < 0)
                return r;
        r = space_kv_addf(&q->kv, "written", "%zu", done);
        return r < 0 ? r : guest_answer_attr(q, &t);
}

static int op_create(GuestRequest *q) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        _cleanup_close_ int fd = -1;
        int64_t uid, gid, mode;
        bool exclusive;
        struct stat st;
        int r;

        r = owner_and_mode(q, true, &uid, &gid, &mode);
        if (r >= 0)
                r = guest_flag(q, GUEST_KEY_EXCLUSIVE, &exclusive);
        if (r >= 0)
                r = guest_resolve(q, &t);
        if (r < 0)
                return r;
        if (!t.leaf)
                return volume_fs_error(&q->error, exclusive ? -EEXIST : -EISDIR, "create", t.rel);
        r = volume_check_new_entry(q->m, q->v, t.dirfd, t.leaf, t.rel, &q->error);
        if (r < 0)
                return r;
        fd = openat(t.dirfd, t.leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
                    0600);
        if (fd < 0 && errno == EEXIST && !exclusive) {
                /* opened as it is: a regular file only (never a link followed, nor a directory) */
                r = lstat_leaf(q, &t, "create", &st);
                if (r < 0)
                        return r;
                if (!S_ISREG(st.st_mode))
                        return volume_fs_error(&q->error, S_ISDIR(st.st_mode) ? -EISDIR : -EEXIST, "create", t.rel);
                return guest_answer_attr(q, &t);
        }
        if (fd < 0)
                return volume_fs_error(&q->error, -errno, "create", t.rel);
        r = volume_meta_set(fd, uid, gid, mode);
        if (r < 0) {
                (void) unlinkat(t.dirfd, t.leaf, 0);
                return volume_fs_error(&q->error, r, "set the metadata of", t.rel);
        }
        volume_entries_add(q->v, 1);
        return guest_answer_attr(q, &t);
}

static int op_mkdir(GuestRequest *q) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        _cleanup_close_ int fd = -1;
        int64_t uid, gid, mode;
        int r;

        r = owner_and_mode(q, true, &uid, &gid, &mode);
        if (r >= 0)
                r = guest_resolve(q, &t);
        if (r < 0)
                return r;
        if (!t.leaf)
                return volume_fs_error(&q->error, -EEXIST, "make the directory", t.rel);
        r = volume_check_new_entry(q->m, q->v, t.dirfd, t.leaf, t.rel, &q->error);
        if (r < 0)
                return r;
        if (mkdirat(t.dirfd, t.leaf, 0700) < 0)
                return volume_fs_error(&q->error, -errno, "make the directory", t.rel);
        r = open_leaf(q, &t, O_RDONLY | O_DIRECTORY, "make the directory", &fd);
        if (r >= 0 && (r = volume_meta_set(fd, uid, gid, mode)) < 0)
                r = volume_fs_error(&q->error, r, "set the metadata of", t.rel);
        if (r < 0) {
                (void) unlinkat(t.dirfd, t.leaf, AT_REMOVEDIR);
                return r;
        }
        volume_entries_add(q->v, 1);
        return guest_answer_attr(q, &t);
}

static int op_symlink(GuestRequest *q) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        const char *target = q->rec[GUEST_KEY_TARGET];
        int64_t uid, gid, mode;
        int r;

        /* uid and gid checked, not kept: a link has no user.* attributes (it shows as 0:0, 0777) */
        r = owner_and_mode(q, false, &uid, &gid, &mode);
        if (r < 0)
                return r;
        if (!target || !*target || strlen(target) > SPACE_FILE_PATH_MAX)
                return guest_invalid(q, "op=symlink needs target= of 1 to %u bytes", SPACE_FILE_PATH_MAX);
        r = guest_resolve(q, &t);
        if (r < 0)
                return r;
        if (!t.leaf)
                return volume_fs_error(&q->error, -EEXIST, "make the symlink", t.rel);
        r = volume_check_new_entry(q->m, q->v, t.dirfd, t.leaf, t.rel, &q->error);
        if (r < 0)
                return r;
        /* stored as it is: the host never follows it but through volume_resolve(), inside the volume */
        if (symlinkat(target, t.dirfd, t.leaf) < 0)
                return volume_fs_error(&q->error, -errno, "make the symlink", t.rel);
        volume_entries_add(q->v, 1);
        return guest_answer_attr(q, &t);
}

static int op_readlink(GuestRequest *q) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        char buf[SPACE_FILE_PATH_MAX + 2];
        ssize_t n;
        int r;

        r = guest_resolve(q, &t);
        if (r < 0)
                return r;
        if (!t.leaf)
                return guest_invalid(q, "the volume's root is no symlink");
        n = readlinkat(t.dirfd, t.leaf, buf, sizeof buf - 1);
        if (n < 0)
                return volume_fs_error(&q->error, -errno, "read the symlink", t.rel);
        if ((size_t) n > SPACE_FILE_PATH_MAX)
                return volume_fs_error(&q->error, -ENAMETOOLONG, "read the symlink", t.rel);
        buf[n] = '\0';
        return space_kv_add(&q->kv, "target", buf);
}

static int op_unlink(GuestRequest *q) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        uint64_t usage;
        struct stat st;
        int r;

        r = guest_resolve(q, &t);
        if (r >= 0)
                r = volume_usage(q->m, q->v, &usage, &q->error);
        if (r >= 0 && !t.leaf)
                r = volume_fs_error(&q->error, -EISDIR, "remove", t.rel);
        if (r >= 0)
                r = lstat_leaf(q, &t, "remove", &st);
        if (r < 0)
                return r;
        if (S_ISDIR(st.st_mode))
                return volume_fs_error(&q->error, -EISDIR, "remove", t.rel);
        if (unlinkat(t.dirfd, t.leaf, 0) < 0)
                return volume_fs_error(&q->error, -errno, "remove", t.rel);
        if (S_ISREG(st.st_mode))
                volume_usage_add(q->v, (uint64_t) st.st_size, 0);
        volume_entries_add(q->v, -1);
        return 0;
}

static int op_rmdir(GuestRequest *q) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        int r = guest_resolve(q, &t);

        if (r < 0)
                return r;
        if (!t.leaf)
                return error_set(&q->error, ERROR_INVALID_PATH, "cannot remove a volume's root") ?: -EBUSY;
        /* on a symlink: ENOTDIR, the link is not followed */
        if (unlinkat(t.dirfd, t.leaf, AT_REMOVEDIR) < 0)
                return volume_fs_error(&q->error, -errno, "remove the directory", t.rel);
        volume_entries_add(q->v, -1);
        return 0;
}

static int op_rename(GuestRequest *q) {
        _cleanup_free_ char *from = NULL, *to = NULL;
        bool noreplace;
        int r;

        r = guest_path(q, GUEST_KEY_PATH, &from);
        if (r >= 0)
                r = guest_path(q, GUEST_KEY_TO, &to);
        if (r >= 0)
                r = guest_flag(q, GUEST_KEY_NOREPLACE, &noreplace);
        if (r < 0)
                return r;
        return volume_rename_flags(q->m, q->v, from, to, noreplace ? RENAME_NOREPLACE : 0, &q->error);
}

static int op_statfs(GuestRequest *q) {
        uint64_t usage, taken, quota = q->v->rec.quota, files = volume_entries_max(q->m);
        int r;

        r = volume_usage(q->m, q->v, &usage, &q->error);
        if (r < 0)
                return r;
        /* the uploads in progress are the volume's already (volume.h) */
        taken = usage + q->v->reserved;
        r = space_kv_addf(&q->kv, "bsize", "%u", STATFS_BSIZE);
        if (r >= 0)
                r = space_kv_addf(&q->kv, "blocks", "%llu", (unsigned long long) (quota / STATFS_BSIZE));
        if (r >= 0)
                r = space_kv_addf(&q->kv, "bfree", "%llu",
                                  (unsigned long long) (taken < quota ? (quota - taken) / STATFS_BSIZE : 0));
        /* the bound on entries is the guest's count of inodes (df -i) */
        if (r >= 0)
                r = space_kv_addf(&q->kv, "files", "%llu", (unsigned long long) files);
        if (r >= 0)
                r = space_kv_addf(&q->kv, "ffree", "%llu",
                                  (unsigned long long) (q->v->entries < files ? files - q->v->entries : 0));
        return r;
}

static int op_fsync(GuestRequest *q) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        _cleanup_close_ int fd = -1;
        int r;

        r = guest_resolve(q, &t);
        if (r >= 0)
                r = open_leaf(q, &t, O_RDONLY, "sync", &fd);
        if (r < 0)
                return r;
        if (fsync(fd) < 0)
                return volume_fs_error(&q->error, -errno, "sync", t.rel);
        return 0;
}

static const GuestOp ops[] = {
        { "lookup", op_getattr },   { "getattr", op_getattr }, { "setattr", op_setattr }, { "readdir", op_readdir },
        { "read", op_read },        { "write", op_write },     { "create", op_create },   { "mkdir", op_mkdir },
        { "symlink", op_symlink },  { "readlink", op_readlink }, { "unlink", op_unlink }, { "rmdir", op_rmdir },
        { "rename", op_rename },    { "statfs", op_statfs },   { "fsync", op_fsync },
};

const GuestOp *guest_op_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(ops); i++)
                if (streq(ops[i].name, name))
                        return &ops[i];
        return NULL;
}
