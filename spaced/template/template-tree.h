/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A template's root filesystem while it is imported: a staging directory with the files' content, and a
 * table with what the image gets for every path (type, mode, owner, mtime, content digest). Ownership and
 * modes never touch the host: the staging tree is written with our own uid and safe modes, and the table is
 * applied inside the ext4 image (template-image.c). Nothing here logs. */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"

struct archive;

typedef struct TreeEntry {
        char *path;          /* relative to the root, no leading or trailing '/'; "" is the root itself */
        mode_t mode;         /* S_IFDIR, S_IFREG or S_IFLNK, and the permission bits (07777) */
        uid_t uid;
        gid_t gid;
        int64_t mtime;       /* seconds */
        uint64_t size;       /* regular file: bytes; symlink: target length */
        uint8_t sha256[32];  /* regular file: its content; symlink: its target */
        unsigned layer;      /* the OCI layer that wrote it last (whiteouts hide lower layers only) */
        bool live;           /* false: removed (a tombstone in the hash table) */
} TreeEntry;

typedef struct Tree Tree;

/* What one import may cost, shared by every tree it extracts (an OCI archive's layout and its rootfs), so that
 * a hostile archive fails fast with ERROR_LIMIT_EXCEEDED naming the limit instead of filling the disk or
 * hashing zeros for hours. Sizes are checked from each header before its data is read, and the bytes
 * libarchive actually decompressed are counted too. A zero limit is no limit. cancel, when set, stops the
 * extraction with ERROR_CANCELLED at the next block. */
typedef struct TreeBudget {
        uint64_t max_bytes;        /* logical: sum of the entries' sizes (a sparse file counts in full) */
        uint64_t max_disk_bytes;   /* data actually written to the staging trees */
        uint64_t max_entries;
        uint64_t max_entry_bytes;  /* one file's size */
        uint64_t max_path;         /* bytes of an entry's path */
        const atomic_bool *cancel;
        /* spent so far */
        uint64_t bytes;
        uint64_t disk_bytes;
        uint64_t entries;
} TreeBudget;

/* Progress: bytes read from the source so far; the extraction calls it between entries. */
typedef void (*tree_progress_fn)(void *userdata);

/* root must exist and be empty; the tree keeps an fd to it. */
int tree_new(const char *root, Tree **ret);
Tree *tree_free(Tree *t);
void tree_set_layer(Tree *t, unsigned layer);
void tree_set_progress(Tree *t, tree_progress_fn fn, void *userdata);
int tree_root_fd(Tree *t);
/* budget (may be NULL: no limits) must outlive t. */
void tree_set_budget(Tree *t, TreeBudget *budget);

/* Extracts every entry of an open archive into the tree. Hostile input is refused with a message naming the
 * entry (absolute paths, '..', entries through a symlink, hard links to anything but a regular file
 * extracted before, names with control characters, which no debugfs command can carry); device nodes, fifos
 * and sockets are dropped and counted. whiteouts: OCI layer semantics for .wh.NAME and .wh..wh..opq. Over
 * the budget: -EFBIG, ERROR_LIMIT_EXCEEDED; cancelled: -ECANCELED, ERROR_CANCELLED. */
int tree_extract(Tree *t, struct archive *a, bool whiteouts, Error *reterr);

/* A live entry, or NULL. */
const TreeEntry *tree_lookup(Tree *t, const char *path);

/* The sha256 of the canonical manifest (see the comment in template-tree.c) as "sha256:<hex>". */
int tree_digest(Tree *t, char **ret_digest);
/* The manifest itself, for inspection and tests. */
int tree_write_manifest(Tree *t, FILE *f);
/* debugfs commands that give every path its mode, owner and times inside an image made with mkfs -d. */
int tree_write_debugfs_script(Tree *t, FILE *f);

uint64_t tree_files(Tree *t);          /* live entries, the root included */
uint64_t tree_content_bytes(Tree *t);  /* file content, rounded up to 4 KiB blocks, plus a block per entry */
uint64_t tree_size_bytes(Tree *t);     /* regular file and symlink bytes */
unsigned tree_dropped(Tree *t);        /* device nodes, fifos and sockets left out */

/* Removes path below dirfd (never following symlinks). */
int rm_rf_at(int dirfd, const char *name);
