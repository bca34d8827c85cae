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

/* Whole-file writes whose bytes come in parts (volume.h): a hidden file beside the target, renamed over it at
 * the end. While one is in progress what it has grown its file by is the volume's (v->reserved), so that two
 * uploads at once cannot pass the quota together. */

struct VolumeUpload {
        VolumeUpload *next;    /* in volume->uploads */
        Volume *volume;        /* NULL once finished, or once the volume is removed */
        int dirfd;             /* the target's directory */
        int fd;                /* the hidden file */
        char *rel;             /* the target, normalized */
        char *leaf;
        char tmp[sizeof VOLUME_TEMP_PREFIX + 16]; /* the hidden file's name; "" when there is none to remove */
        int64_t uid, gid, mode;
        bool exclusive;
        uint64_t old_size;     /* of the file it replaces, at begin */
        uint64_t size;         /* bytes written */
        uint64_t reserved;     /* what it counts for in volume->reserved */
};

/* Out of its volume's list, its reservation given back. */
static void upload_release(VolumeUpload *u) {
        Volume *v = u->volume;

        if (!v)
                return;
        v->reserved -= u->reserved < v->reserved ? u->reserved : v->reserved;
        for (VolumeUpload **p = &v->uploads; *p; p = &(*p)->next)
                if (*p == u) {
                        *p = u->next;
                        break;
                }
        u->volume = NULL;
        u->next = NULL;
        u->reserved = 0;
}

void volume_uploads_orphan(Volume *v) {
        while (v->uploads)
                upload_release(v->uploads);
}

VolumeUpload *volume_upload_free(VolumeUpload *u) {
        if (!u)
                return NULL;
        if (u->tmp[0])
                (void) unlinkat(u->dirfd, u->tmp, 0);
        upload_release(u);
        safe_close(u->fd);
        safe_close(u->dirfd);
        free(u->rel);
        free(u->leaf);
        free(u);
        return NULL;
}

static int upload_gone(VolumeUpload *u, Error *reterr) {
        return error_set(reterr, ERROR_VOLUME_NOT_FOUND,
                         "the volume was removed while /%.512s was being written", u->rel) ?: -ENOENT;
}

int volume_upload_begin(Manager *m, Volume *v, const char *path, const VolumeWriteOptions *o, uint64_t size,
                        VolumeUpload **ret, Error *reterr) {
        _cleanup_(volume_target_done) VolumeTarget t = { .dirfd = -1 };
        _cleanup_(volume_entry_done) VolumeEntry old = {};
        _cleanup_(volume_upload_freep) VolumeUpload *u = NULL;
        bool existed = false;
        char hex[17], tmp[sizeof u->tmp];
        int r;

        if (o->at_offset)
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                 "an upload replaces a file whole; a write at an offset is not one") ?: -EINVAL;
        r = volume_write_target(m, v, path, o, &t, &old, &existed, reterr);
        if (r < 0)
                return r;
        /* a size declared over what is left is refused before a byte; an unknown one is checked as it comes */
        r = volume_check_quota(m, v, existed ? old.size : 0, size == VOLUME_SIZE_UNKNOWN ? 0 : size, 0, t.rel,
                               reterr);
        /* a new file is an entry more (the hidden one is not counted): checked here, and at finish again */
        if (r >= 0 && !existed)
                r = volume_check_entries(m, v, 1, t.rel, reterr);
        if (r < 0)
                return r;
        u = calloc(1, sizeof *u);
        if (!u)
                return -ENOMEM;
        *u = (VolumeUpload) {
                .dirfd = TAKE_FD(t.dirfd), .fd = -1,
                .rel = strdup(t.rel), .leaf = strdup(t.leaf),
                .uid = o->uid >= 0 ? o->uid : existed ? (int64_t) old.uid : -1,
                .gid = o->gid >= 0 ? o->gid : existed ? (int64_t) old.gid : -1,
                .mode = o->mode >= 0 ? o->mode : existed ? (int64_t) old.mode : -1,
                .exclusive = o->exclusive,
                .old_size = existed ? old.size : 0,
        };
        if (!u->rel || !u->leaf)
                return -ENOMEM;
        r = random_hex(hex, 16);
        if (r < 0)
                return volume_fs_error(reterr, r, "write", u->rel);
        snprintf(tmp, sizeof tmp, VOLUME_TEMP_PREFIX "%s", hex);
        u->fd = openat(u->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (u->fd < 0)
                return volume_fs_error(reterr, -errno, "write", u->rel);
        memcpy(u->tmp, tmp, sizeof tmp);
        u->volume = v;
        u->next = v->uploads;
        v->uploads = u;
        *ret = TAKE_PTR(u);
        return 0;
}

int volume_upload_append(VolumeUpload *u, const void *data, size_t n, Error *reterr) {
        Volume *v = u->volume;
        uint64_t size, growth, taken;
        int r;

        if (!v)
                return upload_gone(u, reterr);
        size = n > VOLUME_QUOTA_MAX ? UINT64_MAX : u->size + n; /* past any quota, without overflowing */
        growth = size > u->old_size ? size - u->old_size : 0;
        taken = v->usage + (v->reserved - u->reserved);
        if (growth > u->reserved && growth > v->rec.quota - (taken < v->rec.quota ? taken : v->rec.quota))
                return error_set(reterr, ERROR_QUOTA_EXCEEDED,
                                 "volume '%s' holds %llu of its quota of %llu bytes%s: writing /%.512s passed it at "
                                 "%llu bytes; nothing was written",
                                 v->rec.name, (unsigned long long) v->usage, (unsigned long long) v->rec.quota,
                                 taken > v->usage ? ", with writes in progress more" : "", u->rel,
                                 (unsigned long long) size) ?: -ENOSPC;
        r = loop_write(u->fd, data, n);
        if (r < 0)
                return volume_fs_error(reterr, r, "write", u->rel);
        v->reserved += growth - u->reserved;
        u->reserved = growth;
        u->size = size;
        return 0;
}

int volume_upload_finish(Manager *m, VolumeUpload *u, VolumeEntry *ret, Error *reterr) {
        Volume *v = u->volume;
        uint64_t old_size = 0;
        bool replaces = false;
        struct stat st;
        int r;

        if (!v)
                return upload_gone(u, reterr);
        r = volume_meta_set(u->fd, u->uid, u->gid, u->mode);
        if (r < 0)
                return volume_fs_error(reterr, r, "write", u->rel);
        /* what is there now: another write may have put or removed a file there since begin */
        if (fstatat(u->dirfd, u->leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (u->exclusive)
                        return volume_fs_error(reterr, -EEXIST, "write", u->rel);
                if (S_ISDIR(st.st_mode))
                        return volume_fs_error(reterr, -EISDIR, "write", u->rel);
                if (!S_ISREG(st.st_mode))
                        return error_set(reterr, ERROR_INVALID_PATH,
                                         "cannot write /%.512s: something not a file was put there meanwhile",
                                         u->rel) ?: -EINVAL;
                old_size = (uint64_t) st.st_size;
                replaces = true;
        }
        r = volume_check_quota(m, v, old_size, u->size, u->reserved, u->rel, reterr);
        if (r >= 0 && !replaces)
                r = volume_check_entries(m, v, 1, u->rel, reterr);
        if (r < 0)
                return r;
        if (renameat2(u->dirfd, u->tmp, u->dirfd, u->leaf, u->exclusive ? RENAME_NOREPLACE : 0) < 0)
                return volume_fs_error(reterr, -errno, "write", u->rel);
        u->tmp[0] = '\0';
        upload_release(u);
        volume_usage_add(v, old_size, u->size);
        volume_entries_add(v, !replaces);
        r = volume_entry_at(u->dirfd, u->leaf, u->rel, ret);
        return r < 0 ? volume_fs_error(reterr, r, "stat", u->rel) : 0;
}
