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
#include "io-util.h"
#include "core/util.h"
#include "volume/volume-internal.h"

/* Changing a volume: writes at an offset (whole files are uploads, volume-upload.c), directories, removals,
 * renames, metadata (volume.h). The usage is counted before each write, which is refused whole when it would
 * pass the quota; the last component of a path is never
 * followed when it is a symlink (a write or a removal acts on the link, or is refused). */

#define TREE_DEPTH_MAX 256 /* a walk or a removal: open directories held at once */

/* Past TREE_DEPTH_MAX open directories a walk goes on holding one: it climbs back by ".." and finds its place
 * again by the directory's lseek() cookie (stable on ext4 and btrfs), or, removing, reads it again from the
 * start. Renames nest directories past any depth a path can name (a guest's too), and a tree the walks could not
 * finish would leave its volume's usage uncounted (every write refused) and its files on the disk after the
 * volume's removal. What it keeps is a cookie per level. */
typedef struct DeepWalk {
        bool remove;              /* remove everything below, else count */
        uint64_t *sum;            /* the sizes of the regular files counted, or removed */
        unsigned *stale;          /* the hidden files of unfinished uploads removed, or NULL */
} DeepWalk;

/* One entry: a directory to go down into (1), or counted or removed here (0). */
static int deep_visit(const DeepWalk *w, int dirfd, const char *name) {
        struct stat st;
        bool temp;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISDIR(st.st_mode)) {
                /* removing: an empty one goes at once, and a full one when it is met again after its contents */
                if (!w->remove || unlinkat(dirfd, name, AT_REMOVEDIR) == 0)
                        return !w->remove;
                return errno == ENOTEMPTY || errno == EEXIST ? 1 : -errno;
        }
        temp = S_ISREG(st.st_mode) && volume_temp_name(name);
        if (w->remove || (temp && w->stale)) {
                if (unlinkat(dirfd, name, 0) < 0)
                        return errno == ENOENT ? 0 : -errno;
                if (temp && w->stale)
                        (*w->stale)++;
        }
        if (S_ISREG(st.st_mode) && !temp && w->sum)
                *w->sum += (uint64_t) st.st_size;
        return 0;
}

/* Everything below the directory top (open for reading; taken), depth first, one directory open at a time. */
static int walk_deep(int top, const DeepWalk *w) {
        _cleanup_free_ off_t *stack = NULL;
        _cleanup_free_ uint8_t *buf = malloc(32 * 1024);
        _cleanup_close_ int cur = top;
        size_t depth = 0, allocated = 0;
        off_t pos = 0;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n;
                int r = 0;

                if (lseek(cur, pos, SEEK_SET) < 0 || (n = getdents64(cur, buf, 32 * 1024)) < 0)
                        return -errno;
                if (n == 0) {
                        int parent;

                        if (depth == 0)
                                return 0;
                        parent = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        if (parent < 0)
                                return -errno;
                        safe_close(cur);
                        cur = parent;
                        depth--;
                        pos = w->remove ? 0 : stack[depth];
                        continue;
                }
                for (ssize_t i = 0; i < n && r == 0;) {
                        const struct dirent64 *de = (const struct dirent64 *) (buf + i);

                        i += de->d_reclen;
                        pos = de->d_off;
                        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                                continue;
                        r = deep_visit(w, cur, de->d_name);
                        if (r < 0)
                                return r;
                        if (r == 0)
                                continue;
                        if (!w->remove && depth == allocated) {
                                size_t k = allocated ? allocated * 2 : 64;
                                off_t *bigger = reallocarray(stack, k, sizeof *bigger);
                                if (!bigger)
                                        return -ENOMEM;
                                stack = bigger;
                                allocated = k;
                        }
                        int child = openat(cur, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (child < 0)
                                return -errno;
                        if (!w->remove)
                                stack[depth] = pos;
                        depth++;
                        safe_close(cur);
                        cur = child;
                        pos = 0;
                }
        }
}

/* dirfd itself walked by walk_deep(), on a descriptor of its own. */
static int walk_deep_at(int dirfd, const char *name, const DeepWalk *w) {
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        return fd < 0 ? -errno : walk_deep(fd, w);
}

int volume_walk_usage(int dirfd, unsigned depth, uint64_t *ret, unsigned *ret_stale) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd, r;

        if (depth >= TREE_DEPTH_MAX)
                return walk_deep_at(dirfd, ".", &(const DeepWalk) { .sum = ret, .stale = ret_stale });
        fd = dup(dirfd);
        if (fd < 0 || !(d = fdopendir(fd))) {
                r = -errno;
                safe_close(fd);
                return r;
        }
        rewinddir(d);
        while ((errno = 0, de = readdir(d))) {
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                /* at the first use after a start no upload of ours is in progress: this one's daemon died */
                if (S_ISREG(st.st_mode) && volume_temp_name(de->d_name) && unlinkat(dirfd, de->d_name, 0) == 0)
                        (*ret_stale)++;
                else if (S_ISREG(st.st_mode))
                        *ret += (uint64_t) st.st_size;
                else if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int child =
                                openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (child < 0)
                                return -errno;
                        r = volume_walk_usage(child, depth + 1, ret, ret_stale);
                        if (r < 0)
                                return r;
                }
        }
        return errno ? -errno : 0;
}

int volume_remove_tree_at(int dirfd, const char *name, unsigned depth, uint64_t *ret_freed) {
        struct stat st;
        int r;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode)) {
                _cleanup_closedir_ DIR *d = NULL;
                struct dirent *de;
                int fd;

                if (depth >= TREE_DEPTH_MAX) {
                        r = walk_deep_at(dirfd, name, &(const DeepWalk) { .remove = true, .sum = ret_freed });
                        if (r < 0)
                                return r;
                        return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
                }
                fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                d = fdopendir(fd);
                if (!d) {
                        r = -errno;
                        safe_close(fd);
                        return r;
                }
                while ((errno = 0, de = readdir(d)))
                        if (!streq(de->d_name, ".") && !streq(de->d_name, "..")) {
                                r = volume_remove_tree_at(fd, de->d_name, depth + 1, ret_freed);
                                if (r < 0 && r != -ENOENT)
                                        return r;
                        }
                if (errno)
                        return -errno;
                return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
        }
        if (unlinkat(dirfd, name, 0) < 0)
                return -errno;
        /* an upload's hidden file was never counted (its upload fails at finish) */
        if (ret_freed && S_ISREG(st.st_mode) && !volume_temp_name(name))
                *ret_freed += (uint64_t) st.st_size;
        return 0;
}

/* Makes the directories of rel that are missing, each resolved inside the volume as any path is. */
static int mkdir_parents(int root, const char *rel) {
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
                        if (mkdirat(cur, name, 0700) < 0 && errno != EEXIST)
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

int volume_check_quota(Manager *m, Volume *v, uint64_t old_size, uint64_t new_size, uint64_t own_reserved,
                       const char *rel, Error *reterr) {
        uint64_t usage, taken;
        int r = volume_usage(m, v, &usage, reterr);

        if (r < 0)
                return r;
        taken = usage + (v->reserved - (own_reserved < v->reserved ? own_reserved : v->reserved));
        if (new_size > old_size && new_size - old_size > v->rec.quota - (taken < v->rec.quota ? taken : v->rec.quota))
                return error_set(reterr, ERROR_QUOTA_EXCEEDED,
                                 "volume '%s' holds %llu of its quota of %llu bytes%s: writing /%.512s (%llu bytes) "
                                 "would pass it; nothing was written",
                                 v->rec.name, (unsigned long long) usage, (unsigned long long) v->rec.quota,
                                 taken > usage ? ", with writes in progress more" : "", rel,
                                 (unsigned long long) new_size) ?: -ENOSPC;
        return 0;
}

void volume_usage_add(Volume *v, uint64_t old_size, uint64_t new_size) {
        v->usage = v->usage - (old_size < v->usage ? old_size : v->usage) + new_size;
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
        int root, r;

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
                        r = volume_root(m, v, &root, reterr);
                        if (r < 0)
                                return r;
                        r = mkdir_parents(root, rel);
                        if (r < 0)
                                return volume_fs_error(reterr, r, "make the directories of", rel);
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
        if (r < 0)
                return r;
        r = write_at(&t, data, len, o, existed);
        if (r < 0)
                return volume_fs_error(reterr, r, "write", t.rel);
        volume_usage_add(v, old_size, new_size);
        r = volume_entry_at(t.dirfd, t.leaf, t.rel, ret);
        return r < 0 ? volume_fs_error(reterr, r, "stat", t.rel) : 0;
}

int volume_mkdir(Manager *m, Volume *v, const char *path, bool parents, int64_t uid, int64_t gid, int64_t mode,
                 VolumeEntry *ret, Error *reterr) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        _cleanup_close_ int fd = -1;
        int root, r;

        if (mode > 07777 || uid > (int64_t) UINT32_MAX - 1 || gid > (int64_t) UINT32_MAX - 1)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "mode is 0 to 07777, uid and gid 0 to 4294967294")
                        ?: -EINVAL;
        if (parents) {
                _cleanup_free_ char *rel = NULL;

                r = volume_path_normalize(path, &rel, reterr);
                if (r < 0)
                        return r;
                r = volume_root(m, v, &root, reterr);
                if (r < 0)
                        return r;
                r = mkdir_parents(root, rel);
                if (r < 0)
                        return volume_fs_error(reterr, r, "make the directory", rel);
        }
        r = volume_resolve(m, v, path, &t, reterr);
        if (r < 0)
                return r;
        if (!parents) {
                if (!t.leaf)
                        return volume_fs_error(reterr, -EEXIST, "make the directory", t.rel);
                if (mkdirat(t.dirfd, t.leaf, 0700) < 0)
                        return volume_fs_error(reterr, -errno, "make the directory", t.rel);
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
        uint64_t usage, freed = 0;
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
        r = volume_remove_tree_at(t.dirfd, t.leaf, 0, &freed);
        volume_usage_add(v, freed, 0);
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
        /* a rename onto another name of the same file removes nothing (rename(2)): its size stays counted */
        if (S_ISREG(dst.st_mode) && !(dst.st_dev == src.st_dev && dst.st_ino == src.st_ino))
                volume_usage_add(v, (uint64_t) dst.st_size, 0);
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
