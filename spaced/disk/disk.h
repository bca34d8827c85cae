/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The disk store (ARCHITECTURE.md, decision 5): a sandbox's writable layer is a btrfs subvolume
 * snapshot or reflink when $state is on btrfs, a qcow2 overlay otherwise. */

#include <stdbool.h>
#include <stdint.h>

#include "core/host.h"   /* DiskBackend */
#include "vm/vmm.h"

typedef struct Manager Manager;

/* disk.c, btrfs.c: the disk store (ARCHITECTURE.md, decision 5); btrfs volumes when $state is on btrfs, qcow2
 * overlays otherwise. */
DiskBackend disk_backend_detect(const char *state_dir);
const char *disk_backend_to_string(DiskBackend b);
const char *disk_format(const char *disk);      /* QEMU's format= for a disk of the store: "qcow2" or "raw" */
/* The disk a template's base snapshot boots on, in DIR. */
int disk_base_new(DiskBackend b, const char *rootfs, const char *dir, char **ret_path, Error *reterr);
/* A new writable disk with SOURCE's content (a base snapshot's or a checkpoint's disk), SIZE_MIB large. */
int disk_clone(const char *state_dir, const char *source, uint64_t size_mib, char **ret_path, Error *reterr);
/* A disk nobody uses any more: deleted now when it cannot be shared, else left to layers_gc. */
void disk_forget(const char *disk);
/* A checkpoint's disk: prepare before stopping the VM, take while it is stopped, done in any case. */
typedef struct DiskCheckpoint {
        char *top;           /* the sandbox's disk */
        char *next_top;      /* qcow2: the layer the sandbox goes on in */
        char *frozen;        /* the checkpoint's disk, once taken */
} DiskCheckpoint;
int disk_checkpoint_prepare(const char *state_dir, const char *data_dir, uint64_t size_mib, DiskCheckpoint *ret,
                            Error *reterr);
int disk_checkpoint_take(Qmp *q, const char *state_dir, const char *data_dir, DiskCheckpoint *c, Error *reterr);
void disk_checkpoint_done(DiskCheckpoint *c, bool keep);
/* The name QEMU opens the sandbox's disk by, and the directory of the sandbox's own that holds it, to bind
 * writable into a confined QEMU's namespace (NULL: bind the disk itself). For a qcow2 layer a hard link in
 * data_dir/qemu, made afresh: call it only while no QEMU of the sandbox runs. */
int disk_qemu_path(const char *data_dir, const char *disk, char **ret_path, char **ret_dir);
int sandbox_disk_set(const char *data_dir, const char *disk);
int sandbox_disk_get(const char *data_dir, char **ret);
int qcow2_backing_file(const char *path, char **ret);
int layers_gc(Manager *m);
/* The disks in use, for layers_gc: fn for each one a sandbox is on (by its data_dir's link, sandbox_disk_get())
 * or a checkpoint keeps. sandbox/ sets it at start (sandbox_register_ops()); unset, gc keeps everything. */
typedef void (*DiskUsedFn)(const char *disk, void *userdata);
typedef void (*DiskUsersFn)(Manager *m, DiskUsedFn fn, void *userdata);
void disk_set_users(DiskUsersFn f);

/* Bytes a path takes on disk (allocated blocks), recursively. */
uint64_t disk_usage(const char *path);
