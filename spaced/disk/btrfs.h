/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The btrfs backend (btrfs.c), as the disk store's interface and qcow2 backend (disk.c) use it. */

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

#define VOLUME_DISK_NAME "disk.raw"

/* Is PATH on btrfs? */
bool path_on_btrfs(const char *path);

/* A new subvolume DIR/<random> with VOLUME_DISK_NAME inside: a reflink of SOURCE_FILE, or, when SOURCE_FILE
 * is itself a volume's disk, a snapshot of that volume (READ_ONLY for a checkpoint). The disk is then
 * extended to SIZE bytes if it is smaller. Returns the disk's path. */
int volume_clone(const char *dir, const char *source_file, bool read_only, uint64_t size, char **ret_disk,
                 Error *reterr);
/* Deletes the volume at PATH (a subvolume), read-only or not. */
int volume_delete(const char *path);
/* Is PATH a subvolume, and when was it made? */
int volume_created(const char *path, int64_t *ret_unix);
/* DST becomes a copy of SRC: a reflink when they share a btrfs, else a sparse copy. */
int file_clone_or_copy(const char *src, const char *dst);
