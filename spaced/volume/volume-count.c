/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "volume/volume-internal.h"

/* What a volume holds (volume.h): its usage (the bytes of its regular files) and its entries, counted by a walk
 * at its first use after a start and by a tree's removal, then kept by every change; and the checks a change
 * passes first, against the quota and against the bound on entries (volume_entries_max). */

#define TREE_DEPTH_MAX 256 /* a walk or a removal: open directories held at once */

/* Past TREE_DEPTH_MAX open directories a walk goes on holding one: it climbs back by ".." and finds its place
 * again by the directory's lseek() cookie (stable on ext4 and btrfs), or, removing, reads it again from the
 * start. Renames nest directories past any depth a path can name (a guest's too), and a tree the walks could not
 * finish would leave its volume's usage uncounted (every write refused) and its files on the disk after the
 * volume's removal. What it keeps is a cookie per level. */
typedef struct DeepWalk {
        bool remove;              /* remove everything below, else count */
        uint64_t *sum;            /* the sizes of the regular files counted, or removed */
        uint64_t *entries;        /* the entries counted, or removed (hidden upload files not), or NULL */
        unsigned *stale;          /* the hidden files of unfinished uploads removed, or NULL */
} DeepWalk;

static void deep_count(const DeepWalk *w) {
        if (w->entries)
                (*w->entries)++;
}

/* One entry: a directory to go down into (1), or counted or removed here (0). */
static int deep_visit(const DeepWalk *w, int dirfd, const char *name) {
        struct stat st;
        bool temp;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISDIR(st.st_mode)) {
                /* removing: an empty one goes at once, and a full one when it is met again after its contents */
                if (!w->remove || unlinkat(dirfd, name, AT_REMOVEDIR) == 0) {
                        deep_count(w);
                        return !w->remove;
                }
                return errno == ENOTEMPTY || errno == EEXIST ? 1 : -errno;
        }
        temp = S_ISREG(st.st_mode) && volume_temp_name(name);
        if (w->remove || (temp && w->stale)) {
                if (unlinkat(dirfd, name, 0) < 0)
                        return errno == ENOENT ? 0 : -errno;
                if (temp && w->stale)
                        (*w->stale)++;
        }
        if (!temp)
                deep_count(w);
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

int volume_walk_usage(int dirfd, unsigned depth, uint64_t *ret, uint64_t *ret_entries, unsigned *ret_stale) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd, r;

        if (depth >= TREE_DEPTH_MAX)
                return walk_deep_at(dirfd, ".",
                                    &(const DeepWalk) { .sum = ret, .entries = ret_entries, .stale = ret_stale });
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
                if (S_ISREG(st.st_mode) && volume_temp_name(de->d_name) && unlinkat(dirfd, de->d_name, 0) == 0) {
                        (*ret_stale)++;
                        continue;
                }
                (*ret_entries)++;
                if (S_ISREG(st.st_mode))
                        *ret += (uint64_t) st.st_size;
                else if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int child =
                                openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (child < 0)
                                return -errno;
                        r = volume_walk_usage(child, depth + 1, ret, ret_entries, ret_stale);
                        if (r < 0)
                                return r;
                }
        }
        return errno ? -errno : 0;
}

/* The empty directory name in dirfd removed, and counted in *ret_removed (when not NULL). */
static int rmdir_counted(int dirfd, const char *name, uint64_t *ret_removed) {
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
                return -errno;
        if (ret_removed)
                (*ret_removed)++;
        return 0;
}

int volume_remove_tree_at(int dirfd, const char *name, unsigned depth, uint64_t *ret_freed, uint64_t *ret_removed) {
        struct stat st;
        int r;

        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode)) {
                _cleanup_closedir_ DIR *d = NULL;
                struct dirent *de;
                int fd;

                if (depth >= TREE_DEPTH_MAX) {
                        r = walk_deep_at(dirfd, name,
                                         &(const DeepWalk) { .remove = true, .sum = ret_freed, .entries = ret_removed });
                        if (r < 0)
                                return r;
                        return rmdir_counted(dirfd, name, ret_removed);
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
                                r = volume_remove_tree_at(fd, de->d_name, depth + 1, ret_freed, ret_removed);
                                if (r < 0 && r != -ENOENT)
                                        return r;
                        }
                if (errno)
                        return -errno;
                return rmdir_counted(dirfd, name, ret_removed);
        }
        if (unlinkat(dirfd, name, 0) < 0)
                return -errno;
        /* an upload's hidden file was never counted (its upload fails at finish) */
        if (S_ISREG(st.st_mode) && volume_temp_name(name))
                return 0;
        if (ret_freed && S_ISREG(st.st_mode))
                *ret_freed += (uint64_t) st.st_size;
        if (ret_removed)
                (*ret_removed)++;
        return 0;
}

int volume_check_entries(Manager *m, Volume *v, uint64_t n, const char *rel, Error *reterr) {
        uint64_t usage, max = volume_entries_max(m);
        int r = volume_usage(m, v, &usage, reterr);

        if (r < 0)
                return r;
        if (n > max || v->entries > max - n)
                return error_set(reterr, ERROR_QUOTA_EXCEEDED,
                                 "volume '%s' holds %llu entries, and volume_entries_max (spaced.conf) bounds a volume "
                                 "to %llu: making /%.512s%s would pass it; nothing was made",
                                 v->rec.name, (unsigned long long) v->entries, (unsigned long long) max, rel,
                                 n > 1 ? " and its parents" : "") ?: -ENOSPC;
        return 0;
}

int volume_check_new_entry(Manager *m, Volume *v, int dirfd, const char *leaf, const char *rel, Error *reterr) {
        struct stat st;

        if (leaf && fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return 0;
        return volume_check_entries(m, v, 1, rel, reterr);
}

void volume_entries_add(Volume *v, int64_t n) {
        if (!v->usage_known)
                return;
        if (n >= 0)
                v->entries += (uint64_t) n;
        else
                v->entries -= (uint64_t) -n < v->entries ? (uint64_t) -n : v->entries;
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
