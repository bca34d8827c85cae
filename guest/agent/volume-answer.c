/* SPDX-License-Identifier: Apache-2.0 */

/*
 * The host's answer to a VOLUME request, made the kernel's reply (lib/proto.h, "Volume mounts"). The answer
 * came over the channel, so all of it is checked before the kernel sees any: an errno outside 1..4095, a
 * payload that does not split, an attr with a mode past 07777, a type the request cannot have made, a
 * nanosecond past a second, a read longer than asked: EIO to the caller, and the agent goes on.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../lib/macro.h"
#include "volume.h"

int volume_parse_u64(const char *s, uint64_t max, uint64_t *ret) {
        /* the host writes numbers with printf: a leading zero is not its */
        if (s[0] == '0' && s[1])
                return -EBADMSG;
        return space_kv_parse_u64(s, max, ret);
}

static int parse_s64(const char *s, int64_t *ret) {
        uint64_t v;
        bool neg = *s == '-';
        int r = volume_parse_u64(s + neg, neg ? (uint64_t) INT64_MAX + 1 : INT64_MAX, &v);

        if (r < 0)
                return r;
        *ret = neg ? (int64_t) (0 - v) : (int64_t) v;
        return 0;
}

int volume_type_parse(const char *v, uint32_t *ret) {
        if (streq(v, "file"))
                *ret = S_IFREG;
        else if (streq(v, "dir"))
                *ret = S_IFDIR;
        else if (streq(v, "symlink"))
                *ret = S_IFLNK;
        else if (streq(v, "other"))
                *ret = S_IFSOCK; /* a fifo or a device planted on the host: opening it fails (ENXIO) */
        else
                return -EBADMSG;
        return 0;
}

int volume_attr_parse(const uint8_t *kv, size_t n, struct fuse_attr *ret) {
        struct fuse_attr a = { .nlink = 1, .blksize = 4096 };
        size_t off = 0, klen;
        const char *k, *v;
        uint32_t type = 0;
        unsigned seen = 0; /* type, mode, size, uid, gid, ino: the records an attr must have */
        int r;

        while ((r = space_kv_next(kv, n, &off, &k, &klen, &v)) > 0) {
                uint64_t u = 0;
                int64_t s = 0;
#define KEY(x) (klen == sizeof(x) - 1 && memcmp(k, x, klen) == 0)
#define U(field, max, bit) (r = volume_parse_u64(v, max, &u), a.field = (__typeof__(a.field)) u, seen |= bit)
#define S(field) (r = parse_s64(v, &s), a.field = (uint64_t) s)
                if (KEY("type"))
                        r = volume_type_parse(v, &type), seen |= 1;
                else if (KEY("mode"))
                        U(mode, 07777, 2);
                else if (KEY("size"))
                        U(size, INT64_MAX, 4);
                else if (KEY("uid"))
                        U(uid, UINT32_MAX - 1, 8);
                else if (KEY("gid"))
                        U(gid, UINT32_MAX - 1, 16);
                else if (KEY("ino"))
                        U(ino, UINT64_MAX, 32);
                else if (KEY("nlink"))
                        U(nlink, UINT32_MAX, 0);
                else if (KEY("atime"))
                        S(atime);
                else if (KEY("mtime"))
                        S(mtime);
                else if (KEY("ctime"))
                        S(ctime);
                else if (KEY("atime_nsec"))
                        U(atimensec, 999999999, 0);
                else if (KEY("mtime_nsec"))
                        U(mtimensec, 999999999, 0);
                else if (KEY("ctime_nsec"))
                        U(ctimensec, 999999999, 0);
#undef S
#undef U
#undef KEY
                if (r < 0)
                        return -EBADMSG;
        }
        if (r < 0 || seen != 63)
                return -EBADMSG;
        a.mode |= type;
        a.blocks = (a.size + 511) / 512;
        *ret = a;
        return 0;
}

static void entry_reply(VolumeRequest *q, const struct fuse_attr *attr) {
        VolumeMount *m = q->mount;
        VolumeNode *parent = volume_node_get(&m->nodes, q->nodeid), *node;
        struct {
                struct fuse_entry_out e;
                struct fuse_open_out o; /* CREATE's */
        } out = {};

        if (!parent || volume_node_ref(&m->nodes, parent, q->name, attr->ino, &node) < 0) {
                volume_reply_err(m, q->unique, parent ? ENOMEM : ESTALE);
                return;
        }
        out.e = (struct fuse_entry_out) { .nodeid = node->id, .entry_valid = VOLUME_VALID_S,
                                          .attr_valid = VOLUME_VALID_S, .attr = *attr };
        if (volume_reply(m, q->unique, 0, &out, q->opcode == FUSE_CREATE ? sizeof out : sizeof out.e, NULL, 0) < 0)
                volume_node_forget(&m->nodes, node, 1); /* the kernel never got it: it will never forget it */
}

static void attr_reply(VolumeRequest *q, const struct fuse_attr *attr) {
        struct fuse_attr_out out = { .attr_valid = VOLUME_VALID_S, .attr = *attr };

        (void) volume_reply(q->mount, q->unique, 0, &out, sizeof out, NULL, 0);
}

static int statfs_reply(VolumeRequest *q, const uint8_t *kv, size_t n) {
        static const char *const keys[] = { "bsize", "blocks", "bfree", "files", "ffree" };
        uint64_t v[ELEMENTSOF(keys)];
        struct fuse_statfs_out out = {};

        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                const char *s;

                if (space_kv_get(kv, n, keys[i], &s) <= 0 || volume_parse_u64(s, INT64_MAX, &v[i]) < 0)
                        return -EBADMSG;
        }
        if (v[0] == 0 || v[0] > (1U << 20) || v[2] > v[1] || v[4] > v[3])
                return -EBADMSG;
        out.st = (struct fuse_kstatfs) { .bsize = (uint32_t) v[0], .frsize = (uint32_t) v[0], .blocks = v[1],
                                         .bfree = v[2], .bavail = v[2], .files = v[3], .ffree = v[4],
                                         .namelen = SPACE_FILE_NAME_MAX };
        (void) volume_reply(q->mount, q->unique, 0, &out, sizeof out, NULL, 0);
        return 0;
}

/* A VOLUME answer: 0 when replied, -EBADMSG when it is not what the op answers. */
static int answer_ok(VolumeRequest *q, const uint8_t *kv, size_t kv_len, const uint8_t *data, size_t data_len) {
        VolumeMount *m = q->mount;
        struct fuse_attr attr;
        const char *s;
        uint64_t u;

        switch (q->opcode) {
        case FUSE_LOOKUP:
        case FUSE_CREATE:
        case FUSE_MKNOD:
        case FUSE_MKDIR:
        case FUSE_SYMLINK:
                if (volume_attr_parse(kv, kv_len, &attr) < 0 || (q->want_type && (attr.mode & S_IFMT) != q->want_type))
                        return -EBADMSG;
                entry_reply(q, &attr);
                return 0;
        case FUSE_GETATTR:
        case FUSE_SETATTR:
                if (volume_attr_parse(kv, kv_len, &attr) < 0)
                        return -EBADMSG;
                attr_reply(q, &attr);
                return 0;
        case FUSE_READ:
                if (data_len > q->size)
                        return -EBADMSG;
                (void) volume_reply(m, q->unique, 0, data, data_len, NULL, 0);
                return 0;
        case FUSE_WRITE: {
                struct fuse_write_out out = {};

                /* the attr that follows is not the kernel's to see (it keeps the size itself), but it is checked */
                if (space_kv_get(kv, kv_len, "written", &s) <= 0 || volume_parse_u64(s, q->size, &u) < 0 ||
                    volume_attr_parse(kv, kv_len, &attr) < 0 || (attr.mode & S_IFMT) != S_IFREG)
                        return -EBADMSG;
                out.size = (uint32_t) u;
                (void) volume_reply(m, q->unique, 0, &out, sizeof out, NULL, 0);
                return 0;
        }
        case FUSE_READLINK: {
                size_t l;

                if (space_kv_get(kv, kv_len, "target", &s) <= 0 || (l = strlen(s)) == 0 || l > SPACE_FILE_PATH_MAX)
                        return -EBADMSG;
                (void) volume_reply(m, q->unique, 0, s, l, NULL, 0);
                return 0;
        }
        case FUSE_READDIR:
                volume_dir_answer(m, q->unique, q->fh, q->mark, q->offset, q->size, kv, kv_len);
                return 0;
        case FUSE_STATFS:
                return statfs_reply(q, kv, kv_len);
        case FUSE_UNLINK:
        case FUSE_RMDIR: {
                VolumeNode *parent = volume_node_get(&m->nodes, q->nodeid);

                if (parent)
                        volume_node_detach_at(&m->nodes, parent, q->name);
                volume_reply_err(m, q->unique, 0);
                return 0;
        }
        case FUSE_RENAME:
        case FUSE_RENAME2: {
                VolumeNode *parent = volume_node_get(&m->nodes, q->nodeid);
                VolumeNode *to_parent = volume_node_get(&m->nodes, q->nodeid2);

                if (parent && to_parent)
                        (void) volume_node_move(&m->nodes, parent, q->name, to_parent, q->name2);
                volume_reply_err(m, q->unique, 0);
                return 0;
        }
        default: /* FSYNC, FSYNCDIR */
                volume_reply_err(m, q->unique, 0);
                return 0;
        }
}

void volume_answer(VolumeRequest *q, uint8_t type, const uint8_t *p, size_t n) {
        const uint8_t *kv, *data;
        size_t kv_len, data_len;

        if (type == SPACE_F_ERROR) {
                const char *s;
                uint64_t err;

                if (space_kv_get(p, n, "errno", &s) <= 0 || volume_parse_u64(s, 4095, &err) < 0 || err == 0)
                        err = EIO;
                volume_reply_err(q->mount, q->unique, (int) err);
                return;
        }
        if (space_volume_payload_split(p, n, &kv, &kv_len, &data, &data_len) < 0 ||
            answer_ok(q, kv, kv_len, data, data_len) < 0) {
                log_warn("volume %s: a malformed answer to a %u request: EIO", q->mount->id, q->opcode);
                volume_reply_err(q->mount, q->unique, EIO);
        }
}
