/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Volumes (ARCHITECTURE.md, "Volumes"): named storage that outlives sandboxes. This door keeps them: a row in
 * the store per volume (id, name, quota, its content token, created_at) and its files under
 * $state/volume-data/<id>/ (0700), and it is the only way to their files: every path a client or a guest that
 * mounts the volume names is resolved inside the volume's directory by openat2(RESOLVE_IN_ROOT), so that no "..", no
 * symlink stored in the volume and no mount point leads out of it. The daemon is the only writer, so it keeps
 * each volume's usage (a walk when the volume is first used after start, then every write and remove) and
 * refuses with ERROR_QUOTA_EXCEEDED a write that would take it past its quota, before anything is written, and
 * likewise a create, mkdir or symlink that would take its number of entries past volume_entries_max. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "core/error.h"
#include "core/manager.h"
#include "core/store.h"
#include "proto.h"

#define VOLUME_NAME_MAX 63
#define VOLUMES_MAX 1024
#define VOLUME_TOKEN_LEN 64           /* hex */
#define VOLUME_PATH_MAX 4095          /* bytes of a path in a volume, as PATH_MAX less its NUL */
#define VOLUME_COMPONENT_MAX 255      /* bytes of one of its names, as NAME_MAX */
#define VOLUME_DEPTH_MAX 64           /* directories deep that a listing or a removal goes */
#define VOLUME_LIST_MAX 10000         /* entries of one listing */
#define VOLUME_QUOTA_MAX (1ULL << 50) /* 1 PiB: past any disk, and far from overflowing a sum of sizes */
/* Guest-visible ownership and mode are kept in these extended attributes, never applied to the host files
 * (which stay 0600/0700, the daemon's own). */
#define VOLUME_XATTR_UID "user.space.uid"
#define VOLUME_XATTR_GID "user.space.gid"
#define VOLUME_XATTR_MODE "user.space.mode"
#define VOLUME_FILE_MODE_DEFAULT 0644
#define VOLUME_DIR_MODE_DEFAULT 0755
#define VOLUME_ROOT_MODE 0777         /* a new volume's root: any user of any sandbox that mounts it writes there */

typedef struct VolumeUpload VolumeUpload;

struct Volume {
        Volume *next;
        VolumeRecord rec;     /* id, name, quota, token, created_at */
        int root_fd;          /* its directory (O_PATH), opened on first use; -1 before */
        bool usage_known;     /* the walk has run since start */
        uint64_t usage;       /* bytes: the sizes of its regular files */
        uint64_t entries;     /* its files, directories, symlinks, anything but its root (hidden upload files not):
                               * each an inode of the host's, bounded by volume_entries_max */
        VolumeUpload *uploads; /* the whole-file writes in progress */
        uint64_t reserved;    /* what they have grown their files by so far: counted against the quota */
};

typedef enum VolumeEntryType {
        VOLUME_ENTRY_FILE,
        VOLUME_ENTRY_DIRECTORY,
        VOLUME_ENTRY_SYMLINK,
        VOLUME_ENTRY_UNKNOWN,
} VolumeEntryType;

/* What E2B's volume API says of an entry (its VolumeEntryStat). */
typedef struct VolumeEntry {
        char *name;           /* the last component; "" for the volume's root */
        char *path;           /* absolute within the volume: "/a/b" ("/" for the root) */
        VolumeEntryType type;
        uint64_t size;
        uint32_t mode;        /* permission bits, as set through the API (defaults 0644, 0755) */
        uint32_t uid, gid;    /* likewise (default 0) */
        struct timespec atime, mtime, ctime;
        char *target;         /* a symlink's target as stored, else NULL */
} VolumeEntry;
void volume_entry_done(VolumeEntry *e);
void volume_entries_free(VolumeEntry *e, size_t n);
const char *volume_entry_type_to_string(VolumeEntryType t);

/* 1 to VOLUME_NAME_MAX letters, digits, '.', '_' and '-', starting with a letter or digit, and not the shape
 * of an id ("vol-" and 16 hex digits). */
bool volume_name_valid(const char *name);
/* path (absolute or not, "" or NULL for the root) as the relative path it names in a volume ("" for the root,
 * else "a/b" with no empty, "." or trailing components), or -EINVAL with reterr (ERROR_INVALID_PATH) saying
 * what is wrong: a "..", a name over VOLUME_COMPONENT_MAX, a path over VOLUME_PATH_MAX. Pure: the fuzz target's. */
int volume_path_normalize(const char *path, char **ret, Error *reterr);

/* By id, then by exact name; NULL when there is none. */
Volume *volume_find(Manager *m, const char *ref);
/* The volume whose token is token (compared in constant time); NULL when none. */
Volume *volume_find_by_token(Manager *m, const char *id, const char *token);
size_t volumes_count(Manager *m);
/* The quota a create that names none gets (volume_quota in spaced.conf, else VOLUME_QUOTA_DEFAULT). */
uint64_t volume_quota_default(Manager *m);
/* The most entries a volume may hold (volume_entries_max in spaced.conf, else VOLUME_ENTRIES_MAX_DEFAULT): the
 * quota counts bytes only, and empty files, directories and links cost the host inodes. */
uint64_t volume_entries_max(Manager *m);

/* A new volume: name checked (ERROR_INVALID_ARGUMENT, ERROR_NAME_IN_USE), quota 0 for the default, else 1 to
 * VOLUME_QUOTA_MAX. Its directory is made before its row. Logs what it did. */
int volume_create(Manager *m, const char *name, uint64_t quota, Volume **ret, Error *reterr);
/* Removes v: its row, then its files. ERROR_VOLUME_IN_USE (naming the sandboxes) while sandboxes mount it
 * (volume_set_users()). */
int volume_remove(Manager *m, Volume *v, Error *reterr);
/* Its usage, walking its files the first time after start (which counts v->entries too). */
int volume_usage(Manager *m, Volume *v, uint64_t *ret, Error *reterr);

/* The file operations (volume-fs.c), each on a path volume_path_normalize() takes; errors in reterr with a
 * code from the one table (ERROR_NOT_FOUND, ERROR_INVALID_PATH, ERROR_IS_A_DIRECTORY, ERROR_NOT_A_DIRECTORY,
 * ERROR_EXISTS, ERROR_NOT_EMPTY, ERROR_QUOTA_EXCEEDED, ERROR_IO_ERROR). Symlinks: stat and remove act on the
 * link itself; read and list follow it, inside the volume only; write, mkdir and rename never go through one
 * at their last component. */
int volume_stat(Manager *m, Volume *v, const char *path, VolumeEntry *ret, Error *reterr);
/* The entries under a directory, depth levels deep (1: its own), sorted by path; at most VOLUME_LIST_MAX. */
int volume_list(Manager *m, Volume *v, const char *path, unsigned depth, VolumeEntry **ret, size_t *ret_n,
                Error *reterr);
/* An open file for reading at offset, and how many bytes are left in it from there (at most max). */
int volume_open_read(Manager *m, Volume *v, const char *path, uint64_t offset, uint64_t max, int *ret_fd,
                     uint64_t *ret_len, Error *reterr);
typedef struct VolumeWriteOptions {
        bool at_offset;       /* write data at offset into what is there (a FUSE write) instead of replacing */
        uint64_t offset;
        bool exclusive;       /* refuse (ERROR_EXISTS) when something is at path */
        bool parents;         /* make missing parent directories */
        int64_t uid, gid, mode; /* -1: unchanged (a new file: the defaults) */
} VolumeWriteOptions;
#define VOLUME_WRITE_OPTIONS_INIT { .uid = -1, .gid = -1, .mode = -1 }
/* Writes len bytes: replacing (an upload of len bytes, below) or at an offset; either refused before anything
 * is written when the volume's quota would be passed. */
int volume_write(Manager *m, Volume *v, const char *path, const void *data, size_t len, const VolumeWriteOptions *o,
                 VolumeEntry *ret, Error *reterr);

/* A file replaced whole by bytes that arrive in parts (an HTTP body), the one way a whole file is written:
 * written to a hidden ".space-write-<16 hex>" file beside it, renamed over it at the end, so that a reader sees
 * the old file or the new one. begin checks what a write checks (the path, parents made with o->parents,
 * exclusive, no directory and nothing but a regular file replaced; o->at_offset is refused) and the quota for
 * size bytes (VOLUME_SIZE_UNKNOWN: checked as they come), then makes the hidden file. append refuses
 * (ERROR_QUOTA_EXCEEDED, -ENOSPC) the bytes that would take the volume past its quota, counting the uploads in
 * progress; finish gives the file its owner and mode and puts it in place (ERROR_EXISTS when exclusive and one
 * came meanwhile). free unlinks the hidden file of an upload that did not finish: a failure or a client that
 * went away leaves nothing. An upload outlives its volume's removal (it then fails, ERROR_VOLUME_NOT_FOUND). */
#define VOLUME_SIZE_UNKNOWN UINT64_MAX
#define VOLUME_TEMP_PREFIX ".space-write-"
int volume_upload_begin(Manager *m, Volume *v, const char *path, const VolumeWriteOptions *o, uint64_t size,
                        VolumeUpload **ret, Error *reterr);
int volume_upload_append(VolumeUpload *u, const void *data, size_t n, Error *reterr);
int volume_upload_finish(Manager *m, VolumeUpload *u, VolumeEntry *ret, Error *reterr);
VolumeUpload *volume_upload_free(VolumeUpload *u);
static inline void volume_upload_freep(VolumeUpload **u) {
        *u = volume_upload_free(*u);
}
/* Whether name is one of those hidden files (listings leave them out, the first walk after a start removes
 * them: an upload the daemon did not live to finish). */
bool volume_temp_name(const char *name);
/* A directory (and its parents with parents); an existing directory is fine with parents, else ERROR_EXISTS. */
int volume_mkdir(Manager *m, Volume *v, const char *path, bool parents, int64_t uid, int64_t gid, int64_t mode,
                 VolumeEntry *ret, Error *reterr);
/* A file, a symlink, or a directory and everything in it. Not the root. */
int volume_remove_path(Manager *m, Volume *v, const char *path, Error *reterr);
int volume_rename(Manager *m, Volume *v, const char *from, const char *to, Error *reterr);
/* The guest-visible owner and mode (-1: unchanged). */
int volume_set_metadata(Manager *m, Volume *v, const char *path, int64_t uid, int64_t gid, int64_t mode,
                        VolumeEntry *ret, Error *reterr);

/* Mounts into sandboxes: checks a mount of volume ref at path: the volume exists (ERROR_VOLUME_NOT_FOUND), the
 * path is absolute, clean, not / and not under /proc, /sys or /dev (ERROR_INVALID_PATH). *ret_path: it made
 * clean ("/a/b"). */
int volume_mount_check(Manager *m, const char *ref, const char *path, Volume **ret, char **ret_path,
                       Error *reterr);
/* Who mounts a volume, told by the sandboxes above (sandbox/ops.c): the ids of those that have volume_id mounted
 * (NULL-terminated; NULL or empty: none). volume_remove() refuses while there are any. */
typedef int (*VolumeUsersFn)(Manager *m, const char *volume_id, char ***ret_ids);
void volume_set_users(VolumeUsersFn fn);

/* A guest's VOLUME request on v (lib/proto.h, "Volume mounts"; volume/volume-guest.c): kv and data as
 * space_volume_payload_split() gave them, volume= already matched to v by the caller. Returns 0 with the answer's
 * whole VOLUME payload appended to ret, or -errno, the guest's errno to send in ERROR, with msg saying why. Every
 * path goes through volume_path_normalize() and the volume's openat2() resolution; writes count against the
 * quota (-ENOSPC). Bounded: one answer fits in a frame; a read moves at most SPACE_VOLUME_IO_MAX bytes. */
int volume_guest_request(Manager *m, Volume *v, const uint8_t *kv, size_t kv_len, const uint8_t *data,
                         size_t data_len, SpaceBuf *ret, char *msg, size_t msg_size);

/* At start: the rows, the directory; directories no row names (a create or remove interrupted) removed. */
int volumes_load(Manager *m, Error *reterr);
void volumes_free(Manager *m);

/* Helpers of volume-fs.c and volume.c (not for other subsystems). */
int volume_root(Manager *m, Volume *v, int *ret_fd, Error *reterr);
/* Removes name in dirfd and all under it; adds the sizes of the regular files removed to *ret_freed and the
 * number of entries removed (name's too) to *ret_removed, either NULL, hidden upload files in neither. */
int volume_remove_tree_at(int dirfd, const char *name, unsigned depth, uint64_t *ret_freed, uint64_t *ret_removed);
/* Adds the sizes of the regular files under dirfd to *ret and the number of entries under it to *ret_entries;
 * removes the hidden files of unfinished uploads (counted in *ret_stale, not in the others). */
int volume_walk_usage(int dirfd, unsigned depth, uint64_t *ret, uint64_t *ret_entries, unsigned *ret_stale);
