/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Inside the agent's volume mounts (volume*.c; lib/proto.h, "Volume mounts"); agent.h has what init.c, main.c
 * and channel.c call. The kernel's FUSE requests are read from /dev/fuse (volume.c), answered there when the
 * guest alone knows the answer, else turned into VOLUME requests to the host (volume-ops.c), whose answers
 * become the FUSE replies (volume-answer.c, volume-dir.c). The kernel's node ids are mapped to paths in guest
 * memory (volume-node.c): the host keeps no state per node. */

#include <linux/fuse.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent.h"

#define VOLUME_ID_MAX 64U               /* bytes of a volume id in mount_volume= */
#define VOLUME_READ_BUF (SPACE_FRAME_PAYLOAD_MAX + 4096U) /* one /dev/fuse read: max_write and the headers */
#define VOLUME_MARKS_MAX 4096U          /* readdir batches one open directory remembers the cookie of */
#define VOLUME_DIR_CACHES_MAX 32U       /* open directories whose last batch is kept */
#define VOLUME_VALID_S 1U               /* entry_valid and attr_valid: no cross-guest invalidation */
#define VOLUME_READS_MAX 256U           /* kernel requests read from one mount per turn of the loop */

/* A node the kernel knows (nodeid), at (parent, name). The root is id 1 and has no parent; a detached node
 * (unlinked, or replaced by a rename) has none either and no path: the kernel may still hold it open. */
typedef struct VolumeNode VolumeNode;
struct VolumeNode {
        uint64_t id;
        VolumeNode *parent;
        char *name;
        uint64_t nlookup;         /* the kernel's references (LOOKUP and friends, less FORGET) */
        uint64_t ino;             /* the host's, as last answered: another one is another file */
        size_t children;          /* nodes whose parent this is: it lives while they do */
        VolumeNode *next_id, *next_name; /* hash chains */
};

typedef struct VolumeNodes {
        VolumeNode **by_id, **by_name;
        size_t n_buckets, n_nodes;
        uint64_t next_id;
        VolumeNode root;
} VolumeNodes;

int volume_nodes_init(VolumeNodes *t);
void volume_nodes_done(VolumeNodes *t);
VolumeNode *volume_node_get(VolumeNodes *t, uint64_t id);
/* The node at (parent, name) for the host's file ino, with one more kernel reference: made if there is none, or
 * if the one there was another file (replaced on the host: the old node is detached, the kernel drops it). */
int volume_node_ref(VolumeNodes *t, VolumeNode *parent, const char *name, uint64_t ino, VolumeNode **ret);
/* The kernel dropped n references (FORGET): freed once it has none and no children. */
void volume_node_forget(VolumeNodes *t, VolumeNode *n, uint64_t nlookup);
/* The node at (parent, name), if the kernel knows it, leaves its place: it is gone on the host. */
void volume_node_detach_at(VolumeNodes *t, VolumeNode *parent, const char *name);
/* A rename: what was at (to_parent, to_name) is detached, the node at (parent, name) moves there. */
int volume_node_move(VolumeNodes *t, VolumeNode *parent, const char *name, VolumeNode *to_parent, const char *to_name);
/* The node's path in the volume ("" for the root), with name below it when given, into buf (at least
 * SPACE_FILE_PATH_MAX + 1 bytes): -ENOENT for a detached node, -ENAMETOOLONG past SPACE_FILE_PATH_MAX. */
int volume_node_path(const VolumeNode *n, const char *name, char *buf, size_t size);
/* A name the kernel gave us as a path component: 1..SPACE_FILE_NAME_MAX bytes, not "." or "..", no '/'. */
bool volume_name_ok(const char *name, size_t len);

/* An open directory (OPENDIR's fh): where each batch of the host's readdir starts, as (index, cookie) marks, so
 * that the FUSE offset, an entry's index, can be resumed; the last batch is kept (VOLUME_DIR_CACHES_MAX in all). */
typedef struct VolumeDirEntry {
        const char *name;         /* into batch */
        uint32_t type;            /* DT_* */
        uint64_t ino;
} VolumeDirEntry;

typedef struct VolumeDir {
        uint64_t fh;
        struct { uint64_t index, cookie; } *marks;
        size_t n_marks;
        bool end;                 /* the host said cookie=0 after the last mark's batch... */
        uint64_t end_index;       /* ... which ends at this index */
        size_t cached_mark;       /* which mark batch starts at; valid while batch is set */
        uint8_t *batch;           /* the host's records of that batch */
        VolumeDirEntry *entries;
        size_t n_entries;
        uint64_t used;            /* for the eviction of the least recently used batch */
        struct VolumeDir *next;
} VolumeDir;

/* A mounted volume: its /dev/fuse and what the kernel knows of it. */
typedef struct VolumeMount {
        char id[VOLUME_ID_MAX + 1];
        char *path;               /* in the guest, as normalized: "/a/b" */
        int fd;                   /* /dev/fuse; -1 once the kernel ended the connection */
        dev_t dev;                /* the mount's, to refuse a mount below it */
        uint32_t minor;           /* the protocol's, agreed at FUSE_INIT */
        VolumeNodes nodes;
        VolumeDir *dirs;
        uint64_t next_fh;
} VolumeMount;

/* A request to the host waiting for its answer (at most SPACE_VOLUME_OPS_MAX). What the reply needs of the
 * kernel's request is kept by value: nodes are looked up again by id when the answer comes. */
typedef struct VolumeRequest {
        bool used;
        uint32_t stream;          /* 0 while unsent (no host) */
        VolumeMount *mount;       /* NULL once it was unmounted: the answer goes nowhere */
        uint64_t unique;          /* the kernel's request */
        uint32_t opcode;
        uint64_t nodeid, nodeid2; /* the node, or the parent of name; RENAME: the new parent */
        char name[SPACE_FILE_NAME_MAX + 1], name2[SPACE_FILE_NAME_MAX + 1];
        uint32_t size;            /* READ, WRITE, READDIR: the kernel's size */
        uint64_t offset;          /* READDIR: the kernel's offset */
        uint64_t fh;              /* READDIR */
        size_t mark;              /* READDIR: the batch asked for */
        uint32_t want_type;       /* CREATE, MKDIR, SYMLINK, MKNOD: the S_IF* the answer must have */
        SpaceBuf payload;         /* the VOLUME payload, kept to send again after a reconnect */
} VolumeRequest;

/* volume.c */
/* The mounts, for the mount table (volume-mount.c). */
extern VolumeMount *volume_mounts[SPACE_VOLUME_MOUNTS_MAX];
/* Writes a reply to the kernel: out_header then the parts. -ENOENT: the request was interrupted, and the
 * kernel took nothing of the reply (a new entry's reference is then not the kernel's). */
int volume_reply(VolumeMount *m, uint64_t unique, int err, const void *a, size_t an, const void *b, size_t bn);
void volume_reply_err(VolumeMount *m, uint64_t unique, int err);

/* volume-ops.c: a kernel request that the host answers. */
void volume_forward(Channel *c, VolumeMount *m, const struct fuse_in_header *h, const uint8_t *body, size_t n);
/* volume-host.c: the requests in flight. */
size_t volume_requests_in_flight(void);
VolumeRequest *volume_request_new(VolumeMount *m, const struct fuse_in_header *h);
void volume_request_free(VolumeRequest *q);
/* Sends q (its payload built): at once when there is a host, else at its return. */
void volume_request_send(Channel *c, VolumeRequest *q);
/* Its mount went away: answers to its requests are dropped. */
void volume_requests_orphan(VolumeMount *m);
/* In a forked child: the loop's requests are the loop's, never to be sent again from here. */
void volume_requests_forget(void);

/* volume-answer.c: an answer to q (VOLUME's payload or ERROR's kv), made the FUSE reply. */
void volume_answer(VolumeRequest *q, uint8_t type, const uint8_t *p, size_t n);
/* attr records as struct fuse_attr: -EBADMSG for anything a file system cannot have. */
int volume_attr_parse(const uint8_t *kv, size_t n, struct fuse_attr *ret);
/* An answer's type= (file, dir, symlink, other) as the S_IF* bits of a mode; -EBADMSG for anything else. "other"
 * (a FIFO or device planted on the host) is a socket to the guest: opening it fails. */
int volume_type_parse(const char *v, uint32_t *ret);
int volume_parse_u64(const char *s, uint64_t max, uint64_t *ret);

/* volume-dir.c: OPENDIR, READDIR, RELEASEDIR. */
int volume_dir_open(VolumeMount *m, uint64_t *ret_fh);
void volume_dir_release(VolumeMount *m, uint64_t fh);
void volume_dirs_free(VolumeMount *m);
/* READDIR from what is known (1: replied), or 0 with the cookie of the batch to ask the host for. */
int volume_dir_read(VolumeMount *m, uint64_t unique, uint64_t fh, uint64_t offset, uint32_t size, size_t *ret_mark,
                    uint64_t *ret_cookie);
/* The host's batch for mark: kept, and the kernel's READDIR answered from it. */
void volume_dir_answer(VolumeMount *m, uint64_t unique, uint64_t fh, size_t mark, uint64_t offset, uint32_t size,
                       const uint8_t *kv, size_t n);
