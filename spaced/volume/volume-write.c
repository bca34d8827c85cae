/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "io-util.h"
#include "core/util.h"
#include "volume/volume-internal.h"

/* Changing a volume: writes at an offset (whole files are uploads, volume-upload.c), directories, removals,
 * renames, metadata (volume.h). The usage is counted before each write, which is refused whole when it would
 * pass the quota, and each new entry (a file, a directory, its parents) is refused before it is made when it
 * would pass the bound on entries; the last component of a path is never
 * followed when it is a symlink (a write or a removal acts on the link, or is refused). */

/* How many of the directories of rel are missing: all from the first that is not there. */
static int count_missing(int root, const char *rel, uint64_t *ret) {
        size_t len = strlen(rel);
        uint64_t n = 0;
        int r;

        for (size_t i = 0; i < len;) {
                size_t k = strcspn(rel + i, "/");

                if (n == 0) {
                        _cleanup_free_ char *prefix = strndup(rel, i + k);
                        _cleanup_close_ int fd = -1;

                        if (!prefix)
                                return -ENOMEM;
                        r = volume_open_in(root, prefix, O_PATH | O_DIRECTORY, &fd);
                        if (r < 0 && r != -ENOENT)
                                return r;
                        n += r == -ENOENT;
                } else
                        n++;
                i += k + 1;
        }
        *ret = n;
        return 0;
}

/* Makes the directories of rel that are missing, each resolved inside the volume as any path is; how many it
 * made in *ret_made, also when it fails half way. */
static int mkdir_parents(int root, const char *rel, uint64_t *ret_made) {
        _cleanup_close_ int cur = -1;
        size_t len = strlen(rel);
        int r;

        r = volume_open_in(root, "", O_PATH | O_DIRECTORY, &cur);
        if (r < 0)
                return r;
        for (size_t i = 0; i < len;) {
                size_t n = strcspn(rel + i, "/");
                _cleanup_free_ char *prefix = strndup(rel, i + n), *name = strndup(rel + i, n);
                int next = -1;

                if (!prefix || !name)
                        return -ENOMEM;
                r = volume_open_in(root, prefix, O_PATH | O_DIRECTORY, &next);
                if (r == -ENOENT) {
                        if (mkdirat(cur, name, 0700) == 0)
                                (*ret_made)++;
                        else if (errno != EEXIST)
                                return -errno;
                        r = volume_open_in(root, prefix, O_PATH | O_DIRECTORY, &next);
                }
                if (r < 0)
                        return r;
                safe_close(cur);
                cur = next;
                i += n + 1;
        }
        return 0;
}

/* The directories of rel that are missing, made when they and extra more entries (what the caller then makes
 * below them) fit in the volume's bound on entries, and counted in it. */
static int make_parents(Manager *m, Volume *v, const char *rel, uint64_t extra, const char *what, Error *reterr) {
        uint64_t missing = 0, made = 0;
        int root, r;

        r = volume_root(m, v, &root, reterr);
        if (r < 0)
                return r;
        r = count_missing(root, rel, &missing);
        if (r < 0)
                return volume_fs_error(reterr, r, what, rel);
        if (missing == 0)
                return 0;
        r = volume_check_entries(m, v, missing + extra, rel, reterr);
        if (r < 0)
                return r;
        r = mkdir_parents(root, rel, &made);
        volume_entries_add(v, (int64_t) made);
        return r < 0 ? volume_fs_error(reterr, r, what, rel) : 0;
}

static int write_at(VolumeTarget *t, const void *data, size_t len, const VolumeWriteOptions *o, bool existed) {
        _cleanup_close_ int fd = -1;
        const char *p = data;
        int r = 0;

        fd = openat(t->dirfd, t->leaf, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        for (size_t done = 0; done < len && r >= 0;) {
                ssize_t n = pwrite(fd, p + done, len - done, (off_t) (o->offset + done));
                if (n < 0)
                        r = errno == EINTR ? 0 : -errno;
                else
                        done += (size_t) n;
        }
        if (r >= 0)
                r = volume_meta_set(fd, o->uid, o->gid, o->mode);
        if (r < 0 && !existed)
                (void) unlinkat(t->dirfd, t->leaf, 0);
        return r;
}

int volume_write_target(Manager *m, Volume *v, const char *path, const VolumeWriteOptions *o, VolumeTarget *ret,
                        VolumeEntry *ret_old, bool *ret_existed, Error *reterr) {
        int r;

        if ((o->mode > 07777) || o->uid > (int64_t) UINT32_MAX - 1 || o->gid > (int64_t) UINT32_MAX - 1 ||
            o->offset > VOLUME_QUOTA_MAX)
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                 "mode is 0 to 07777, uid and gid 0 to 4294967294, an offset at most 1P") ?: -EINVAL;
        if (o->parents) {
                _cleanup_free_ char *rel = NULL;
                char *slash;

                r = volume_path_normalize(path, &rel, reterr);
                if (r < 0)
                        return r;
                slash = strrchr(rel, '/');
                if (slash) {
                        *slash = '\0';
                        /* and the file, below them */
                        r = make_parents(m, v, rel, 1, "make the directories of", reterr);
                        if (r < 0)
                                return r;
                }
        }
        r = volume_resolve(m, v, path, ret, reterr);
        if (r < 0)
                return r;
        if (!ret->leaf)
                return volume_fs_error(reterr, -EISDIR, "write", ret->rel);
        r = volume_entry_at(ret->dirfd, ret->leaf, ret->rel, ret_old);
        if (r < 0 && r != -ENOENT)
                return volume_fs_error(reterr, r, "write", ret->rel);
        *ret_existed = r >= 0;
        if (*ret_existed && o->exclusive)
                return volume_fs_error(reterr, -EEXIST, "write", ret->rel);
        if (*ret_existed && ret_old->type == VOLUME_ENTRY_DIRECTORY)
                return volume_fs_error(reterr, -EISDIR, "write", ret->rel);
        if (*ret_existed && ret_old->type != VOLUME_ENTRY_FILE)
                return error_set(reterr, ERROR_INVALID_PATH,
                                 "cannot write /%.512s: it is a %s, and writes never go through one",
                                 ret->rel, volume_entry_type_to_string(ret_old->type)) ?: -EINVAL;
        return 0;
}

/* A whole file: an upload that has all its bytes at once. */
static int write_whole(Manager *m, Volume *v, const char *path, const void *data, size_t len,
                       const VolumeWriteOptions *o, VolumeEntry *ret, Error *reterr) {
        _cleanup_(volume_upload_freep) VolumeUpload *u = NULL;
        int r;

        r = volume_upload_begin(m, v, path, o, len, &u, reterr);
        if (r >= 0)
                r = volume_upload_append(u, data, len, reterr);
        if (r >= 0)
                r = volume_upload_finish(m, u, ret, reterr);
        return r;
}

int volume_write(Manager *m, Volume *v, const char *path, const void *data, size_t len, const VolumeWriteOptions *o,
                 VolumeEntry *ret, Error *reterr) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        _cleanup_(volume_entry_done) VolumeEntry old = {};
        uint64_t old_size, new_size;
        bool existed = false;
        int r;

        if (!o->at_offset)
                return write_whole(m, v, path, data, len, o, ret, reterr);
        r = volume_write_target(m, v, path, o, &t, &old, &existed, reterr);
        if (r < 0)
                return r;
        old_size = existed ? old.size : 0;
        new_size = o->offset + len > old_size ? o->offset + len : old_size;
        r = volume_check_quota(m, v, old_size, new_size, 0, t.rel, reterr);
        if (r >= 0 && !existed)
                r = volume_check_entries(m, v, 1, t.rel, reterr);
        if (r < 0)
                return r;
        r = write_at(&t, data, len, o, existed);
        if (r < 0)
                return volume_fs_error(reterr, r, "write", t.rel);
        volume_usage_add(v, old_size, new_size);
        volume_entries_add(v, !existed);
        r = volume_entry_at(t.dirfd, t.leaf, t.rel, ret);
        return r < 0 ? volume_fs_error(reterr, r, "stat", t.rel) : 0;
}

int volume_mkdir(Manager *m, Volume *v, const char *path, bool parents, int64_t uid, int64_t gid, int64_t mode,
                 VolumeEntry *ret, Error *reterr) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        _cleanup_close_ int fd = -1;
        int r;

        if (mode > 07777 || uid > (int64_t) UINT32_MAX - 1 || gid > (int64_t) UINT32_MAX - 1)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "mode is 0 to 07777, uid and gid 0 to 4294967294")
                        ?: -EINVAL;
        if (parents) {
                _cleanup_free_ char *rel = NULL;

                r = volume_path_normalize(path, &rel, reterr);
                if (r < 0)
                        return r;
                r = make_parents(m, v, rel, 0, "make the directory", reterr);
                if (r < 0)
                        return r;
        }
        r = volume_resolve(m, v, path, &t, reterr);
        if (r < 0)
                return r;
        if (!parents) {
                if (!t.leaf)
                        return volume_fs_error(reterr, -EEXIST, "make the directory", t.rel);
                r = volume_check_new_entry(m, v, t.dirfd, t.leaf, t.rel, reterr);
                if (r < 0)
                        return r;
                if (mkdirat(t.dirfd, t.leaf, 0700) < 0)
                        return volume_fs_error(reterr, -errno, "make the directory", t.rel);
                volume_entries_add(v, 1);
        }
        fd = openat(t.dirfd, t.leaf ?: ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return volume_fs_error(reterr, -errno, "make the directory", t.rel);
        r = volume_meta_set(fd, uid, gid, mode);
        if (r < 0)
                return volume_fs_error(reterr, r, "set the metadata of", t.rel);
        r = volume_entry_at(t.dirfd, t.leaf, t.rel, ret);
        return r < 0 ? volume_fs_error(reterr, r, "stat", t.rel) : 0;
}

int volume_remove_path(Manager *m, Volume *v, const char *path, Error *reterr) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        uint64_t usage, freed = 0, removed = 0;
        int r;

        r = volume_resolve(m, v, path, &t, reterr);
        if (r < 0)
                return r;
        if (!t.leaf)
                return error_set(reterr, ERROR_INVALID_PATH,
                                 "cannot remove a volume's root: remove what is in it, or the volume") ?: -EINVAL;
        r = volume_usage(m, v, &usage, reterr);
        if (r < 0)
                return r;
        r = volume_remove_tree_at(t.dirfd, t.leaf, 0, &freed, &removed);
        volume_usage_add(v, freed, 0);
        volume_entries_add(v, -(int64_t) removed);
        return r < 0 ? volume_fs_error(reterr, r, "remove", t.rel) : 0;
}

int volume_rename(Manager *m, Volume *v, const char *from, const char *to, Error *reterr) {
        return volume_rename_flags(m, v, from, to, 0, reterr);
}

int volume_rename_flags(Manager *m, Volume *v, const char *from, const char *to, unsigned flags, Error *reterr) {
        _cleanup_(volume_target_done) VolumeTarget a = { .dirfd = -1 }, b = { .dirfd = -1 };
        uint64_t usage;
        struct stat src, dst;
        int r;

        r = volume_resolve(m, v, from, &a, reterr);
        if (r >= 0)
                r = volume_resolve(m, v, to, &b, reterr);
        if (r < 0)
                return r;
        if (!a.leaf || !b.leaf)
                return error_set(reterr, ERROR_INVALID_PATH, "cannot rename a volume's root") ?: -EINVAL;
        r = volume_usage(m, v, &usage, reterr);
        if (r < 0)
                return r;
        if (fstatat(a.dirfd, a.leaf, &src, AT_SYMLINK_NOFOLLOW) < 0)
                return volume_fs_error(reterr, -errno, "rename", a.rel);
        if (fstatat(b.dirfd, b.leaf, &dst, AT_SYMLINK_NOFOLLOW) < 0)
                dst.st_mode = 0;
        if (renameat2(a.dirfd, a.leaf, b.dirfd, b.leaf, flags) < 0)
                return volume_fs_error(reterr, -errno, "rename", a.rel);
        /* a rename onto another name of the same file removes nothing (rename(2)): its size stays counted; onto
         * another entry (a file, a link, an empty directory), that one is gone */
        if (dst.st_mode != 0 && !(dst.st_dev == src.st_dev && dst.st_ino == src.st_ino)) {
                if (S_ISREG(dst.st_mode))
                        volume_usage_add(v, (uint64_t) dst.st_size, 0);
                volume_entries_add(v, -1);
        }
        return 0;
}

int volume_truncate_fd(Manager *m, Volume *v, int fd, uint64_t size, const char *rel, Error *reterr) {
        struct stat st;
        int r;

        if (size > INT64_MAX)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "a size is at most 2^63-1") ?: -EINVAL;
        if (fstat(fd, &st) < 0)
                return volume_fs_error(reterr, -errno, "truncate", rel);
        if (S_ISDIR(st.st_mode))
                return volume_fs_error(reterr, -EISDIR, "truncate", rel);
        if (!S_ISREG(st.st_mode))
                return error_set(reterr, ERROR_INVALID_PATH, "cannot truncate /%.512s: not a regular file", rel)
                        ?: -EINVAL;
        r = volume_check_quota(m, v, (uint64_t) st.st_size, size, 0, rel, reterr);
        if (r < 0)
                return r;
        if (ftruncate(fd, (off_t) size) < 0)
                return volume_fs_error(reterr, -errno, "truncate", rel);
        volume_usage_add(v, (uint64_t) st.st_size, size);
        return 0;
}

int volume_set_metadata(Manager *m, Volume *v, const char *path, int64_t uid, int64_t gid, int64_t mode,
                        VolumeEntry *ret, Error *reterr) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        _cleanup_close_ int fd = -1;
        int r;

        if (mode > 07777 || uid > (int64_t) UINT32_MAX - 1 || gid > (int64_t) UINT32_MAX - 1)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "mode is 0 to 07777, uid and gid 0 to 4294967294")
                        ?: -EINVAL;
        r = volume_resolve(m, v, path, &t, reterr);
        if (r < 0)
                return r;
        fd = openat(t.dirfd, t.leaf ?: ".", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return volume_fs_error(reterr, errno == ELOOP ? -ELOOP : -errno, "set the metadata of", t.rel);
        r = volume_meta_set(fd, uid, gid, mode);
        if (r < 0)
                return volume_fs_error(reterr, r, "set the metadata of", t.rel);
        r = volume_entry_at(t.dirfd, t.leaf, t.rel, ret);
        return r < 0 ? volume_fs_error(reterr, r, "stat", t.rel) : 0;
}
