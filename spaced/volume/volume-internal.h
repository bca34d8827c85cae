/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What volume-fs.c and volume-write.c share: a path resolved to its parent directory and last name. */

#include <sys/stat.h>

#include "volume/volume.h"

/* A path in a volume: dirfd is its parent directory (O_PATH), resolved inside the volume; leaf its last name,
 * NULL for the volume's root (then dirfd is the root). rel: the normalized path ("" for the root). */
typedef struct VolumeTarget {
        int dirfd;
        char *rel;
        const char *leaf;
} VolumeTarget;
void volume_target_done(VolumeTarget *t);

/* Resolves path in v (volume.h: openat2 RESOLVE_IN_ROOT, no magic links, no other mounts). */
int volume_resolve(Manager *m, Volume *v, const char *path, VolumeTarget *ret, Error *reterr);
/* openat2() of rel below root, with the volume's resolve flags. */
int volume_open_in(int root, const char *rel, int flags, int *ret_fd);
/* An errno from an operation on path, as an error from the one table (volume.h), naming path. */
int volume_fs_error(Error *reterr, int r, const char *what, const char *rel);
/* The entry at leaf in dirfd (the directory itself for NULL), not following a symlink. */
int volume_entry_at(int dirfd, const char *leaf, const char *rel, VolumeEntry *ret);
/* ... and the lstat it came from (the inode number and link count a guest's attr carries). */
int volume_entry_stat_at(int dirfd, const char *leaf, const char *rel, VolumeEntry *ret, struct stat *ret_st);
/* A new volume's root directory dir: its guest-visible mode VOLUME_ROOT_MODE. */
int volume_root_mode_init(const char *dir);
/* Sets the guest-visible owner and mode (-1: leave) on the open file or directory fd. */
int volume_meta_set(int fd, int64_t uid, int64_t gid, int64_t mode);

/* What volume_write() and an upload check first (volume.h): the options, parents made, the path resolved, and
 * what is there (ret_old, when *ret_existed) one that may be replaced. */
int volume_write_target(Manager *m, Volume *v, const char *path, const VolumeWriteOptions *o, VolumeTarget *ret,
                        VolumeEntry *ret_old, bool *ret_existed, Error *reterr);
/* Whether a file of old_size bytes may become new_size: the usage, with the uploads in progress but own_reserved
 * (the caller's) counted, stays within the quota. ERROR_QUOTA_EXCEEDED, -ENOSPC when not. */
int volume_check_quota(Manager *m, Volume *v, uint64_t old_size, uint64_t new_size, uint64_t own_reserved,
                       const char *rel, Error *reterr);
void volume_usage_add(Volume *v, uint64_t old_size, uint64_t new_size);
/* Whether n more entries fit in v (volume.h: volume_entries_max): ERROR_QUOTA_EXCEEDED, -ENOSPC, naming the bound,
 * when not. Counts the volume first (volume_usage()). */
int volume_check_entries(Manager *m, Volume *v, uint64_t n, const char *rel, Error *reterr);
/* volume_check_entries() for one new entry at leaf in dirfd, when nothing is there yet (one that is there is the
 * op's to refuse, EEXIST, or to replace: no new entry). */
int volume_check_new_entry(Manager *m, Volume *v, int dirfd, const char *leaf, const char *rel, Error *reterr);
/* n entries made (n > 0) or removed (n < 0); nothing before the first walk, which counts them then. */
void volume_entries_add(Volume *v, int64_t n);
/* volume_rename() with renameat2()'s flags (RENAME_NOREPLACE: ERROR_EXISTS, -EEXIST when to exists). */
int volume_rename_flags(Manager *m, Volume *v, const char *from, const char *to, unsigned flags, Error *reterr);
/* The regular file open for writing at fd (rel names it in messages) cut or grown to size, within the quota
 * (ERROR_QUOTA_EXCEEDED, -ENOSPC, and nothing changed, when growing it would pass it). */
int volume_truncate_fd(Manager *m, Volume *v, int fd, uint64_t size, const char *rel, Error *reterr);
/* The volume is going away: its uploads are told (they fail from then on). */
void volume_uploads_orphan(Volume *v);

/* A guest's VOLUME request (volume-guest.c parses and answers it, volume-guest-ops.c does its op). */
typedef enum GuestKey {
        GUEST_KEY_OP,
        GUEST_KEY_PATH,
        GUEST_KEY_TO,
        GUEST_KEY_TARGET,
        GUEST_KEY_MODE,
        GUEST_KEY_UID,
        GUEST_KEY_GID,
        GUEST_KEY_SIZE,
        GUEST_KEY_OFFSET,
        GUEST_KEY_COOKIE,
        GUEST_KEY_EXCLUSIVE,
        GUEST_KEY_NOREPLACE,
        GUEST_KEY_ATIME,
        GUEST_KEY_ATIME_NSEC,
        GUEST_KEY_MTIME,
        GUEST_KEY_MTIME_NSEC,
        _GUEST_KEY_MAX,
} GuestKey;

typedef struct GuestRequest {
        Manager *m;
        Volume *v;
        const char *op;
        const char *rec[_GUEST_KEY_MAX]; /* each known record's value (pointing into the request), or NULL */
        const uint8_t *data;             /* a write's bytes */
        size_t data_len;
        SpaceBuf kv;                     /* the answer's records */
        const void *out;                 /* ... and its bytes (a read's) */
        size_t out_len;
        void *out_buf;                   /* what out points into, freed with the request */
        Error error;                     /* why it failed: the message the guest gets */
} GuestRequest;
void guest_request_done(GuestRequest *q);

typedef struct GuestOp {
        const char *name;
        int (*run)(GuestRequest *q);
} GuestOp;
const GuestOp *guest_op_find(const char *name);

/* -EINVAL, with the message in q->error. */
int guest_invalid(GuestRequest *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Record k as a decimal number of 0 to max: -1 when absent and not required; -EINVAL otherwise. */
int guest_number(GuestRequest *q, GuestKey k, uint64_t max, bool required, int64_t *ret);
/* Record k as 0 or 1 (absent: false). */
int guest_flag(GuestRequest *q, GuestKey k, bool *ret);
/* setattr's time of records k (seconds or "now") and k_nsec: UTIME_OMIT when absent, UTIME_NOW for "now". */
int guest_time(GuestRequest *q, GuestKey k, GuestKey k_nsec, struct timespec *ret);
/* Record k as a path in the volume, refused (-EINVAL) unless it is normal as it is (lib/proto.h). */
int guest_path(GuestRequest *q, GuestKey k, char **ret);
/* path= resolved in the volume. */
int guest_resolve(GuestRequest *q, VolumeTarget *ret);
/* The attr records (lib/proto.h) of what t names, not following a symlink, appended to q->kv. */
int guest_answer_attr(GuestRequest *q, const VolumeTarget *t);
