/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "macro.h"
#include "volume/volume-internal.h"

/* Reading a volume: resolution, stat, listing, reads (volume.h). Every path goes through volume_resolve() or
 * volume_open_in(): openat2() with RESOLVE_IN_ROOT, so an absolute symlink stored in the volume means the
 * volume's own root and a relative one cannot climb above it; RESOLVE_NO_MAGICLINKS keeps /proc-style links
 * out, RESOLVE_NO_XDEV any mount inside the directory. */

#define VOLUME_RESOLVE (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

int volume_open_in(int root, const char *rel, int flags, int *ret_fd) {
        /* openat2() refuses O_NOCTTY with O_PATH (EINVAL), where it means nothing anyway */
        struct open_how how = { .flags = (uint64_t) (flags | O_CLOEXEC | (flags & O_PATH ? 0 : O_NOCTTY)),
                                .resolve = VOLUME_RESOLVE };
        long fd = -1;

        /* EAGAIN: a rename raced the resolution (RESOLVE_IN_ROOT refuses to guess); a few tries */
        for (int i = 0; i < 8; i++) {
                fd = syscall(SYS_openat2, root, rel && *rel ? rel : ".", &how, sizeof how);
                if (fd >= 0 || errno != EAGAIN)
                        break;
        }
        if (fd < 0)
                return -errno;
        *ret_fd = (int) fd;
        return 0;
}

int volume_fs_error(Error *reterr, int r, const char *what, const char *rel) {
        const char *p = rel && *rel ? rel : "";

        switch (r) {
        case -ENOENT:
                return error_set(reterr, ERROR_NOT_FOUND, "cannot %s /%.512s: no such file or directory", what, p) ?: r;
        case -ENOTDIR:
                return error_set(reterr, ERROR_NOT_A_DIRECTORY, "cannot %s /%.512s: a part of it is not a directory",
                                 what, p) ?: r;
        case -EISDIR:
                return error_set(reterr, ERROR_IS_A_DIRECTORY, "cannot %s /%.512s: it is a directory", what, p) ?: r;
        case -EEXIST:
                return error_set(reterr, ERROR_EXISTS, "cannot %s /%.512s: it exists", what, p) ?: r;
        case -ENOTEMPTY:
                return error_set(reterr, ERROR_NOT_EMPTY, "cannot %s /%.512s: the directory is not empty", what, p)
                        ?: r;
        case -EXDEV:
                return error_set(reterr, ERROR_INVALID_PATH, "cannot %s /%.512s: it leads out of the volume", what, p)
                        ?: r;
        case -ELOOP:
                return error_set(reterr, ERROR_INVALID_PATH,
                                 "cannot %s /%.512s: too many symlinks, or a symlink where none is followed", what, p)
                        ?: r;
        case -ENAMETOOLONG:
                return error_set(reterr, ERROR_INVALID_PATH, "cannot %s /%.512s: the path is too long", what, p) ?: r;
        case -EINVAL:
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "cannot %s /%.512s: %s", what, p, strerror(-r)) ?: r;
        case -ENOSPC:
        case -EDQUOT:
                return error_set(reterr, ERROR_NO_SPACE, "cannot %s /%.512s: the host's disk is full", what, p) ?: r;
        default:
                return error_set(reterr, ERROR_IO_ERROR, "cannot %s /%.512s: %s", what, p, strerror(-r)) ?: r;
        }
}

void volume_target_done(VolumeTarget *t) {
        t->dirfd = safe_close(t->dirfd);
        t->rel = mfree(t->rel);
        t->leaf = NULL;
}

int volume_resolve(Manager *m, Volume *v, const char *path, VolumeTarget *ret, Error *reterr) {
        _cleanup_free_ char *rel = NULL, *parent = NULL;
        const char *slash;
        int root, fd = -1, r;

        r = volume_path_normalize(path, &rel, reterr);
        if (r < 0)
                return r;
        r = volume_root(m, v, &root, reterr);
        if (r < 0)
                return r;
        slash = strrchr(rel, '/');
        if (slash) {
                parent = strndup(rel, (size_t) (slash - rel));
                if (!parent)
                        return -ENOMEM;
        }
        r = volume_open_in(root, *rel ? parent ?: "" : "", O_PATH | O_DIRECTORY, &fd);
        if (r < 0)
                return volume_fs_error(reterr, r, "resolve", rel);
        /* leaf points into rel, whose buffer moves into ret as it is */
        const char *leaf = !*rel ? NULL : slash ? slash + 1 : rel;
        *ret = (VolumeTarget) { .dirfd = fd, .leaf = leaf };
        ret->rel = TAKE_PTR(rel);
        return 0;
}

void volume_entry_done(VolumeEntry *e) {
        free(e->name);
        free(e->path);
        free(e->target);
        *e = (VolumeEntry) {};
}

void volume_entries_free(VolumeEntry *e, size_t n) {
        for (size_t i = 0; e && i < n; i++)
                volume_entry_done(&e[i]);
        free(e);
}

const char *volume_entry_type_to_string(VolumeEntryType t) {
        static const char *const names[] = { "file", "directory", "symlink", "unknown" };

        return t <= VOLUME_ENTRY_UNKNOWN ? names[t] : "unknown";
}

static int64_t xattr_number(int fd, const char *name, int64_t max) {
        char buf[24];
        ssize_t n = fgetxattr(fd, name, buf, sizeof buf - 1);
        char *end;
        long long v;

        if (n <= 0)
                return -1;
        buf[n] = '\0';
        errno = 0;
        v = strtoll(buf, &end, 10);
        return errno || *end || end == buf || v < 0 || v > max ? -1 : v;
}

int volume_meta_set(int fd, int64_t uid, int64_t gid, int64_t mode) {
        const struct { const char *name; int64_t v; } set[] = {
                { VOLUME_XATTR_UID, uid }, { VOLUME_XATTR_GID, gid }, { VOLUME_XATTR_MODE, mode },
        };

        for (size_t i = 0; i < ELEMENTSOF(set); i++) {
                char buf[24];
                int n;

                if (set[i].v < 0)
                        continue;
                n = snprintf(buf, sizeof buf, "%lld", (long long) set[i].v);
                if (fsetxattr(fd, set[i].name, buf, (size_t) n, 0) < 0)
                        return -errno;
        }
        return 0;
}

int volume_entry_at(int dirfd, const char *leaf, const char *rel, VolumeEntry *ret) {
        return volume_entry_stat_at(dirfd, leaf, rel, ret, NULL);
}

int volume_entry_stat_at(int dirfd, const char *leaf, const char *rel, VolumeEntry *ret, struct stat *ret_st) {
        VolumeEntry e = {};
        struct stat st;
        _cleanup_close_ int fd = -1;

        if (fstatat(dirfd, leaf ?: "", &st, AT_SYMLINK_NOFOLLOW | (leaf ? 0 : AT_EMPTY_PATH)) < 0)
                return -errno;
        e.type = S_ISREG(st.st_mode) ? VOLUME_ENTRY_FILE : S_ISDIR(st.st_mode) ? VOLUME_ENTRY_DIRECTORY
                : S_ISLNK(st.st_mode) ? VOLUME_ENTRY_SYMLINK : VOLUME_ENTRY_UNKNOWN;
        e.size = (uint64_t) st.st_size;
        e.atime = st.st_atim;
        e.mtime = st.st_mtim;
        e.ctime = st.st_ctim;
        e.mode = e.type == VOLUME_ENTRY_DIRECTORY ? VOLUME_DIR_MODE_DEFAULT : VOLUME_FILE_MODE_DEFAULT;
        if (e.type == VOLUME_ENTRY_SYMLINK) {
                char buf[VOLUME_PATH_MAX + 1];
                ssize_t n = readlinkat(dirfd, leaf, buf, sizeof buf - 1);

                e.mode = 0777;
                if (n >= 0) {
                        buf[n] = '\0';
                        e.target = strdup(buf);
                        if (!e.target)
                                return -ENOMEM;
                }
        } else if (e.type != VOLUME_ENTRY_UNKNOWN) {
                /* O_NONBLOCK: never wait on a FIFO; the metadata is the file's, read through this open */
                fd = openat(dirfd, leaf ?: ".", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
                if (fd >= 0) {
                        int64_t uid = xattr_number(fd, VOLUME_XATTR_UID, UINT32_MAX - 1),
                                gid = xattr_number(fd, VOLUME_XATTR_GID, UINT32_MAX - 1),
                                mode = xattr_number(fd, VOLUME_XATTR_MODE, 07777);
                        e.uid = uid < 0 ? 0 : (uint32_t) uid;
                        e.gid = gid < 0 ? 0 : (uint32_t) gid;
                        if (mode >= 0)
                                e.mode = (uint32_t) mode;
                }
        }
        e.name = strdup(leaf ?: "");
        if (asprintf(&e.path, "/%s", rel ?: "") < 0)
                e.path = NULL;
        if (!e.name || !e.path) {
                volume_entry_done(&e);
                return -ENOMEM;
        }
        *ret = e;
        if (ret_st)
                *ret_st = st;
        return 0;
}

int volume_stat(Manager *m, Volume *v, const char *path, VolumeEntry *ret, Error *reterr) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        int r;

        r = volume_resolve(m, v, path, &t, reterr);
        if (r < 0)
                return r;
        r = volume_entry_at(t.dirfd, t.leaf, t.rel, ret);
        return r < 0 ? volume_fs_error(reterr, r, "stat", t.rel) : 0;
}

typedef struct Listing {
        VolumeEntry *e;
        size_t n, allocated;
} Listing;

static int list_dir(int dirfd, const char *rel, unsigned depth, Listing *l) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd = dup(dirfd), r = 0;

        if (fd < 0 || !(d = fdopendir(fd))) {
                r = -errno;
                safe_close(fd);
                return r;
        }
        while ((errno = 0, de = readdir(d))) {
                _cleanup_free_ char *sub = NULL;

                /* an upload in progress is not a file yet */
                if (streq(de->d_name, ".") || streq(de->d_name, "..") || volume_temp_name(de->d_name))
                        continue;
                if (l->n >= VOLUME_LIST_MAX)
                        return -E2BIG;
                if (l->n == l->allocated) {
                        size_t k = l->allocated ? l->allocated * 2 : 16;
                        VolumeEntry *bigger = reallocarray(l->e, k, sizeof *bigger);
                        if (!bigger)
                                return -ENOMEM;
                        l->e = bigger;
                        l->allocated = k;
                }
                if (asprintf(&sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name) < 0)
                        return -ENOMEM;
                r = volume_entry_at(dirfd, de->d_name, sub, &l->e[l->n]);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return r;
                l->n++;
                if (depth > 1 && l->e[l->n - 1].type == VOLUME_ENTRY_DIRECTORY) {
                        _cleanup_close_ int child =
                                openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (child < 0)
                                return -errno;
                        r = list_dir(child, sub, depth - 1, l);
                        if (r < 0)
                                return r;
                }
        }
        return errno ? -errno : 0;
}

/* path in v opened with flags (resolved as volume_open_in() does), and its normalized form for messages. */
static int open_path(Manager *m, Volume *v, const char *path, int flags, const char *what, char **ret_rel,
                     int *ret_fd, Error *reterr) {
        _cleanup_free_ char *rel = NULL;
        int root, r;

        r = volume_path_normalize(path, &rel, reterr);
        if (r < 0)
                return r;
        r = volume_root(m, v, &root, reterr);
        if (r < 0)
                return r;
        r = volume_open_in(root, rel, flags, ret_fd);
        if (r < 0)
                return volume_fs_error(reterr, r, what, rel);
        *ret_rel = TAKE_PTR(rel);
        return 0;
}

static int entry_cmp(const void *a, const void *b) {
        return strcmp(((const VolumeEntry *) a)->path, ((const VolumeEntry *) b)->path);
}

int volume_list(Manager *m, Volume *v, const char *path, unsigned depth, VolumeEntry **ret, size_t *ret_n,
                Error *reterr) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int fd = -1;
        Listing l = {};
        int r;

        r = open_path(m, v, path, O_RDONLY | O_DIRECTORY, "list", &rel, &fd, reterr);
        if (r < 0)
                return r;
        r = list_dir(fd, rel, depth < 1 ? 1 : depth > VOLUME_DEPTH_MAX ? VOLUME_DEPTH_MAX : depth, &l);
        if (r < 0) {
                volume_entries_free(l.e, l.n);
                if (r == -E2BIG)
                        return error_set(reterr, ERROR_TOO_MANY_ENTRIES,
                                         "/%.512s holds more than %d entries at that depth: list less deep", rel,
                                         VOLUME_LIST_MAX) ?: r;
                return volume_fs_error(reterr, r, "list", rel);
        }
        if (l.n > 1)
                qsort(l.e, l.n, sizeof *l.e, entry_cmp);
        *ret = l.e;
        *ret_n = l.n;
        return 0;
}

int volume_open_read(Manager *m, Volume *v, const char *path, uint64_t offset, uint64_t max, int *ret_fd,
                     uint64_t *ret_len, Error *reterr) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int fd = -1;
        struct stat st;
        int r;

        /* O_NONBLOCK: a FIFO planted in the volume does not hang the daemon */
        r = open_path(m, v, path, O_RDONLY | O_NONBLOCK, "read", &rel, &fd, reterr);
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0)
                return volume_fs_error(reterr, -errno, "read", rel);
        if (S_ISDIR(st.st_mode))
                return volume_fs_error(reterr, -EISDIR, "read", rel);
        if (!S_ISREG(st.st_mode))
                return error_set(reterr, ERROR_INVALID_PATH, "cannot read /%.512s: not a regular file", rel) ?: -EINVAL;
        if (offset > (uint64_t) st.st_size)
                offset = (uint64_t) st.st_size;
        if (lseek(fd, (off_t) offset, SEEK_SET) < 0)
                return volume_fs_error(reterr, -errno, "read", rel);
        *ret_len = (uint64_t) st.st_size - offset < max ? (uint64_t) st.st_size - offset : max;
        *ret_fd = TAKE_FD(fd);
        return 0;
}
