/* SPDX-License-Identifier: Apache-2.0 */

/*
 * A kernel request the host answers, as a VOLUME request (lib/proto.h, "Volume mounts"): volume=ID, op=NAME,
 * path=REL (from the node table) and the op's records. What the reply needs (the parent and name of a new
 * entry, a READDIR's position) is kept in the VolumeRequest; its payload too, to send again after a reconnect.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../../lib/macro.h"
#include "volume.h"

/* A NUL-terminated name at body[*off..n): copied to out (SPACE_FILE_NAME_MAX + 1 bytes); -EINVAL or
 * -ENAMETOOLONG when it cannot be a component of a path in the volume. */
static int take_name(const uint8_t *body, size_t n, size_t *off, char *out) {
        const uint8_t *p = body + *off;
        const uint8_t *nul = *off < n ? memchr(p, '\0', n - *off) : NULL;
        size_t l;

        if (!nul)
                return -EINVAL;
        l = (size_t) (nul - p);
        if (l > SPACE_FILE_NAME_MAX)
                return -ENAMETOOLONG;
        if (!volume_name_ok((const char *) p, l))
                return -EINVAL;
        memcpy(out, p, l + 1);
        *off += l + 1;
        return 0;
}

/* The path of nodeid (with name below it, when given) as path=. */
static int add_path(SpaceBuf *kv, VolumeMount *m, uint64_t nodeid, const char *name) {
        char buf[SPACE_FILE_PATH_MAX + 1];
        VolumeNode *node = volume_node_get(&m->nodes, nodeid);
        int r;

        if (!node)
                return -ESTALE;
        r = volume_node_path(node, name, buf, sizeof buf);
        return r < 0 ? r : space_kv_add(kv, "path", buf);
}

static int setattr_kv(SpaceBuf *kv, const uint8_t *body, size_t n) {
        const struct fuse_setattr_in *in = (const void *) body;
        int r = 0;

        if (n < sizeof *in)
                return -EINVAL;
        if (in->valid & FATTR_MODE)
                r = space_kv_addf(kv, "mode", "%u", in->mode & 07777);
        if (r >= 0 && (in->valid & FATTR_UID))
                r = space_kv_addf(kv, "uid", "%u", in->uid);
        if (r >= 0 && (in->valid & FATTR_GID))
                r = space_kv_addf(kv, "gid", "%u", in->gid);
        if (r >= 0 && (in->valid & FATTR_SIZE))
                r = in->size > INT64_MAX ? -EFBIG : space_kv_addf(kv, "size", "%llu", (unsigned long long) in->size);
        if (r >= 0 && (in->valid & FATTR_ATIME_NOW))
                r = space_kv_add(kv, "atime", "now");
        else if (r >= 0 && (in->valid & FATTR_ATIME)) {
                r = space_kv_addf(kv, "atime", "%lld", (long long) (int64_t) in->atime);
                if (r >= 0)
                        r = space_kv_addf(kv, "atime_nsec", "%u", in->atimensec);
        }
        if (r >= 0 && (in->valid & FATTR_MTIME_NOW))
                r = space_kv_add(kv, "mtime", "now");
        else if (r >= 0 && (in->valid & FATTR_MTIME)) {
                r = space_kv_addf(kv, "mtime", "%lld", (long long) (int64_t) in->mtime);
                if (r >= 0)
                        r = space_kv_addf(kv, "mtime_nsec", "%u", in->mtimensec);
        }
        return r;
}

/* The records of a request that makes an entry (CREATE, MKNOD, MKDIR, SYMLINK): its name is kept in q. */
static int entry_kv(SpaceBuf *kv, VolumeMount *m, VolumeRequest *q, const struct fuse_in_header *h,
                    const uint8_t *body, size_t n) {
        size_t off;
        uint32_t mode;
        bool exclusive = false;
        int r;

        switch (h->opcode) {
        case FUSE_CREATE:
                if (n < sizeof(struct fuse_create_in))
                        return -EINVAL;
                off = sizeof(struct fuse_create_in);
                mode = ((const struct fuse_create_in *) body)->mode;
                exclusive = ((const struct fuse_create_in *) body)->flags & O_EXCL;
                q->want_type = S_IFREG;
                break;
        case FUSE_MKNOD: /* a regular file's (volume.c): made as a CREATE that must be new */
                off = sizeof(struct fuse_mknod_in);
                mode = ((const struct fuse_mknod_in *) body)->mode;
                exclusive = true;
                q->want_type = S_IFREG;
                break;
        case FUSE_MKDIR:
                if (n < sizeof(struct fuse_mkdir_in))
                        return -EINVAL;
                off = sizeof(struct fuse_mkdir_in);
                mode = ((const struct fuse_mkdir_in *) body)->mode;
                q->want_type = S_IFDIR;
                break;
        default: /* FUSE_SYMLINK: the name, then the target */
                off = 0;
                mode = 0;
                q->want_type = S_IFLNK;
                break;
        }
        r = take_name(body, n, &off, q->name);
        if (r >= 0)
                r = add_path(kv, m, h->nodeid, q->name);
        if (r < 0)
                return r;
        if (h->opcode == FUSE_SYMLINK) {
                const char *target = (const char *) body + off;
                size_t l = off < n ? strnlen(target, n - off) : 0;

                if (l == 0 || l == n - off)
                        return -EINVAL;
                if (l > SPACE_FILE_PATH_MAX)
                        return -ENAMETOOLONG;
                r = space_kv_add(kv, "target", target);
        } else
                r = space_kv_addf(kv, "mode", "%u", mode & 07777);
        if (r >= 0 && h->opcode != FUSE_MKDIR && h->opcode != FUSE_SYMLINK)
                r = space_kv_add(kv, "exclusive", exclusive ? "1" : "0");
        /* what the guest's caller makes is the caller's (its fsuid and fsgid) */
        if (r >= 0)
                r = space_kv_addf(kv, "uid", "%u", h->uid);
        if (r >= 0)
                r = space_kv_addf(kv, "gid", "%u", h->gid);
        return r;
}

static int rename_kv(SpaceBuf *kv, VolumeMount *m, VolumeRequest *q, const struct fuse_in_header *h,
                     const uint8_t *body, size_t n) {
        char to[SPACE_FILE_PATH_MAX + 1];
        size_t off = h->opcode == FUSE_RENAME2 ? sizeof(struct fuse_rename2_in) : sizeof(struct fuse_rename_in);
        uint32_t flags = 0;
        VolumeNode *to_parent;
        int r;

        if (n < off)
                return -EINVAL;
        q->nodeid2 = ((const struct fuse_rename_in *) body)->newdir;
        if (h->opcode == FUSE_RENAME2)
                flags = ((const struct fuse_rename2_in *) body)->flags;
        if (flags & ~(uint32_t) RENAME_NOREPLACE)
                return -EINVAL; /* RENAME_EXCHANGE, RENAME_WHITEOUT: the host has neither */
        r = take_name(body, n, &off, q->name);
        if (r >= 0)
                r = take_name(body, n, &off, q->name2);
        if (r >= 0)
                r = add_path(kv, m, h->nodeid, q->name);
        if (r < 0)
                return r;
        to_parent = volume_node_get(&m->nodes, q->nodeid2);
        if (!to_parent)
                return -ESTALE;
        r = volume_node_path(to_parent, q->name2, to, sizeof to);
        if (r >= 0)
                r = space_kv_add(kv, "to", to);
        if (r >= 0)
                r = space_kv_add(kv, "noreplace", flags & RENAME_NOREPLACE ? "1" : "0");
        return r;
}

static int io_kv(SpaceBuf *kv, VolumeRequest *q, const struct fuse_in_header *h, const uint8_t *body, size_t n,
                 const uint8_t **ret_data, size_t *ret_len) {
        if (h->opcode == FUSE_READ) {
                const struct fuse_read_in *in = (const void *) body;
                int r;

                if (n < sizeof *in || in->offset > INT64_MAX)
                        return -EINVAL;
                q->size = in->size < SPACE_VOLUME_IO_MAX ? in->size : SPACE_VOLUME_IO_MAX;
                r = space_kv_addf(kv, "offset", "%llu", (unsigned long long) in->offset);
                return r < 0 ? r : space_kv_addf(kv, "size", "%u", q->size);
        }
        const struct fuse_write_in *in = (const void *) body;

        if (n < sizeof *in || in->size > n - sizeof *in || in->size > SPACE_VOLUME_IO_MAX)
                return -EINVAL;
        if (in->offset > (uint64_t) INT64_MAX - in->size)
                return -EFBIG;
        q->size = in->size;
        *ret_data = body + sizeof *in;
        *ret_len = in->size;
        return space_kv_addf(kv, "offset", "%llu", (unsigned long long) in->offset);
}

/* The op's records after volume= and op=; the bytes a write carries in *ret_data. */
static int op_kv(SpaceBuf *kv, VolumeMount *m, VolumeRequest *q, const struct fuse_in_header *h, const uint8_t *body,
                 size_t n, const uint8_t **ret_data, size_t *ret_len) {
        size_t off = 0;
        int r;

        switch (h->opcode) {
        case FUSE_LOOKUP:
        case FUSE_UNLINK:
        case FUSE_RMDIR:
                r = take_name(body, n, &off, q->name);
                return r < 0 ? r : add_path(kv, m, h->nodeid, q->name);
        case FUSE_CREATE:
        case FUSE_MKNOD:
        case FUSE_MKDIR:
        case FUSE_SYMLINK:
                return entry_kv(kv, m, q, h, body, n);
        case FUSE_RENAME:
        case FUSE_RENAME2:
                return rename_kv(kv, m, q, h, body, n);
        case FUSE_SETATTR:
                r = add_path(kv, m, h->nodeid, NULL);
                return r < 0 ? r : setattr_kv(kv, body, n);
        case FUSE_READ:
        case FUSE_WRITE:
                r = add_path(kv, m, h->nodeid, NULL);
                return r < 0 ? r : io_kv(kv, q, h, body, n, ret_data, ret_len);
        case FUSE_READDIR: {
                const struct fuse_read_in *in = (const void *) body;
                uint64_t cookie;

                if (n < sizeof *in)
                        return -EINVAL;
                q->fh = in->fh;
                q->offset = in->offset;
                q->size = in->size;
                r = volume_dir_read(m, h->unique, in->fh, in->offset, in->size, &q->mark, &cookie);
                if (r != 0)
                        return r < 0 ? r : 1; /* 1: answered from what the guest has */
                r = add_path(kv, m, h->nodeid, NULL);
                return r < 0 ? r : space_kv_addf(kv, "cookie", "%llu", (unsigned long long) cookie);
        }
        default: /* GETATTR, READLINK, STATFS, FSYNC, FSYNCDIR: the node's path alone */
                return add_path(kv, m, h->nodeid, NULL);
        }
}

static const char *op_name(uint32_t opcode) {
        switch (opcode) {
        case FUSE_LOOKUP: return "lookup";
        case FUSE_GETATTR: return "getattr";
        case FUSE_SETATTR: return "setattr";
        case FUSE_READDIR: return "readdir";
        case FUSE_READ: return "read";
        case FUSE_WRITE: return "write";
        case FUSE_CREATE:
        case FUSE_MKNOD: return "create";
        case FUSE_MKDIR: return "mkdir";
        case FUSE_SYMLINK: return "symlink";
        case FUSE_READLINK: return "readlink";
        case FUSE_UNLINK: return "unlink";
        case FUSE_RMDIR: return "rmdir";
        case FUSE_RENAME:
        case FUSE_RENAME2: return "rename";
        case FUSE_STATFS: return "statfs";
        default: return "fsync"; /* FSYNC, FSYNCDIR */
        }
}

void volume_forward(Channel *c, VolumeMount *m, const struct fuse_in_header *h, const uint8_t *body, size_t n) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        const uint8_t *data = NULL;
        size_t data_len = 0;
        VolumeRequest *q;
        int r;

        q = volume_request_new(m, h);
        if (!q) {
                volume_reply_err(m, h->unique, EAGAIN); /* cannot happen: volume.c reads only below the bound */
                return;
        }
        r = space_kv_add(&kv, "volume", m->id);
        if (r >= 0)
                r = space_kv_add(&kv, "op", op_name(h->opcode));
        if (r >= 0)
                r = op_kv(&kv, m, q, h, body, n, &data, &data_len);
        if (r > 0) { /* answered already */
                volume_request_free(q);
                return;
        }
        if (r >= 0)
                r = space_volume_payload_build(&q->payload, &kv, data, data_len);
        if (r < 0) {
                volume_reply_err(m, h->unique, r == -EMSGSIZE ? ENAMETOOLONG : -r);
                volume_request_free(q);
                return;
        }
        volume_request_send(c, q);
}
