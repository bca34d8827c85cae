/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "macro.h"
#include "volume/volume-internal.h"

/* A guest's VOLUME requests (lib/proto.h, "Volume mounts"; ARCHITECTURE.md, "Volumes"): the host half of a volume
 * mounted in a guest, which the agent serves over FUSE path by path. No state is kept between requests: each
 * names its path from the volume's root, and everything it says is checked here before the disk is touched.
 * This file parses and answers; volume-guest-ops.c does the ops. */

/* The records a request may carry, by GuestKey. */
static const char *const key_names[_GUEST_KEY_MAX] = {
        [GUEST_KEY_OP] = "op",
        [GUEST_KEY_PATH] = "path",
        [GUEST_KEY_TO] = "to",
        [GUEST_KEY_TARGET] = "target",
        [GUEST_KEY_MODE] = "mode",
        [GUEST_KEY_UID] = "uid",
        [GUEST_KEY_GID] = "gid",
        [GUEST_KEY_SIZE] = "size",
        [GUEST_KEY_OFFSET] = "offset",
        [GUEST_KEY_COOKIE] = "cookie",
        [GUEST_KEY_EXCLUSIVE] = "exclusive",
        [GUEST_KEY_NOREPLACE] = "noreplace",
        [GUEST_KEY_ATIME] = "atime",
        [GUEST_KEY_ATIME_NSEC] = "atime_nsec",
        [GUEST_KEY_MTIME] = "mtime",
        [GUEST_KEY_MTIME_NSEC] = "mtime_nsec",
};

int guest_invalid(GuestRequest *q, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = error_setv(&q->error, ERROR_INVALID_ARGUMENT, fmt, ap);
        va_end(ap);
        return r ?: -EINVAL;
}

int guest_number(GuestRequest *q, GuestKey k, uint64_t max, bool required, int64_t *ret) {
        const char *s = q->rec[k];
        uint64_t v;

        if (!s) {
                if (required)
                        return guest_invalid(q, "op=%s needs %s=", q->op, key_names[k]);
                *ret = -1;
                return 0;
        }
        if (space_kv_parse_u64(s, max, &v) < 0)
                return guest_invalid(q, "%s='%.32s' is not a number of 0 to %llu", key_names[k], s,
                                     (unsigned long long) max);
        *ret = (int64_t) v;
        return 0;
}

int guest_flag(GuestRequest *q, GuestKey k, bool *ret) {
        const char *s = q->rec[k];

        if (s && !streq(s, "0") && !streq(s, "1"))
                return guest_invalid(q, "%s is 0 or 1", key_names[k]);
        *ret = s && streq(s, "1");
        return 0;
}

/* A time of setattr: seconds (signed: before 1970 is a time) and nanoseconds, or "now"; absent: left as is. */
int guest_time(GuestRequest *q, GuestKey k, GuestKey k_nsec, struct timespec *ret) {
        const char *s = q->rec[k], *digits;
        int64_t nsec;
        uint64_t sec;
        int r;

        *ret = (struct timespec) { .tv_nsec = UTIME_OMIT };
        if (!s) {
                if (q->rec[k_nsec])
                        return guest_invalid(q, "%s= without %s=", key_names[k_nsec], key_names[k]);
                return 0;
        }
        if (streq(s, "now")) {
                if (q->rec[k_nsec])
                        return guest_invalid(q, "%s=now takes no %s=", key_names[k], key_names[k_nsec]);
                ret->tv_nsec = UTIME_NOW;
                return 0;
        }
        digits = s[0] == '-' ? s + 1 : s;
        if (space_kv_parse_u64(digits, INT64_MAX, &sec) < 0)
                return guest_invalid(q, "%s='%.32s' is not a time in seconds, nor 'now'", key_names[k], s);
        r = guest_number(q, k_nsec, 999999999, false, &nsec);
        if (r < 0)
                return r;
        ret->tv_sec = s[0] == '-' ? -(time_t) sec : (time_t) sec;
        ret->tv_nsec = nsec < 0 ? 0 : (long) nsec;
        return 0;
}

int guest_path(GuestRequest *q, GuestKey k, char **ret) {
        _cleanup_free_ char *rel = NULL;
        const char *p = q->rec[k];
        int r;

        if (!p)
                return guest_invalid(q, "op=%s needs %s=", q->op, key_names[k]);
        r = volume_path_normalize(p, &rel, &q->error);
        if (r < 0)
                return r;
        /* the agent sends paths as they are: one that normalizing would change is not its, and is refused */
        if (!streq(rel, p))
                return error_set(&q->error, ERROR_INVALID_PATH,
                                 "%s='%.64s': a path in a volume is names joined by '/' with no empty, '.' or '..' "
                                 "name, and no '/' first or last", key_names[k], p) ?: -EINVAL;
        *ret = TAKE_PTR(rel);
        return 0;
}

int guest_resolve(GuestRequest *q, VolumeTarget *ret) {
        _cleanup_free_ char *rel = NULL;
        int r;

        r = guest_path(q, GUEST_KEY_PATH, &rel);
        if (r < 0)
                return r;
        return volume_resolve(q->m, q->v, rel, ret, &q->error);
}

static const char *attr_type(const struct stat *st) {
        return S_ISREG(st->st_mode) ? "file" : S_ISDIR(st->st_mode) ? "dir" : S_ISLNK(st->st_mode) ? "symlink" : "other";
}

int guest_answer_attr(GuestRequest *q, const VolumeTarget *t) {
        _cleanup_(volume_entry_done) VolumeEntry e = {};
        struct stat st;
        int r;

        r = volume_entry_stat_at(t->dirfd, t->leaf, t->rel, &e, &st);
        if (r < 0)
                return volume_fs_error(&q->error, r, "stat", t->rel);
        const struct { const char *key; long long v; } num[] = {
                { "mode", (long long) (e.mode & 07777) },
                { "size", (long long) st.st_size },
                { "uid", (long long) e.uid },
                { "gid", (long long) e.gid },
                { "nlink", (long long) st.st_nlink },
                { "atime", (long long) st.st_atim.tv_sec },
                { "atime_nsec", (long long) st.st_atim.tv_nsec },
                { "mtime", (long long) st.st_mtim.tv_sec },
                { "mtime_nsec", (long long) st.st_mtim.tv_nsec },
                { "ctime", (long long) st.st_ctim.tv_sec },
                { "ctime_nsec", (long long) st.st_ctim.tv_nsec },
        };
        r = space_kv_add(&q->kv, "type", attr_type(&st));
        if (r >= 0) /* unsigned on the wire, whatever its bits */
                r = space_kv_addf(&q->kv, "ino", "%llu", (unsigned long long) st.st_ino);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(num); i++)
                r = space_kv_addf(&q->kv, num[i].key, "%lld", num[i].v);
        return r;
}

/* The host's errno as the guest's caller should see it (lib/proto.h: the errnos a FUSE file system returns);
 * anything else of the host's is an I/O error to it. */
static int guest_errno(int r) {
        switch (r) {
        case -ENOENT: case -EEXIST: case -ENOTEMPTY: case -EISDIR: case -ENOTDIR: case -ENOSPC: case -EINVAL:
        case -ELOOP: case -ENAMETOOLONG: case -EACCES: case -EPERM: case -ENOMEM: case -EBUSY: case -ENOSYS:
        case -EOPNOTSUPP: case -EFBIG: case -EMLINK: case -EROFS:
                return r;
        case -EDQUOT:
                return -ENOSPC;
        case -EXDEV: /* a mount inside the volume's directory: not the guest's to reach */
                return -EACCES;
        default:
                return -EIO;
        }
}

/* The records, each known key at most once (a second is refused, never a guess at which one counts); unknown
 * keys are a newer agent's and are passed over. */
static int parse_records(GuestRequest *q, const uint8_t *kv, size_t kv_len) {
        const char *key, *value;
        size_t off = 0, key_len;
        int r;

        while ((r = space_kv_next(kv, kv_len, &off, &key, &key_len, &value)) > 0)
                for (size_t k = 0; k < _GUEST_KEY_MAX; k++) {
                        if (strlen(key_names[k]) != key_len || strncmp(key, key_names[k], key_len) != 0)
                                continue;
                        if (q->rec[k])
                                return guest_invalid(q, "%s= twice", key_names[k]);
                        q->rec[k] = value;
                }
        if (r < 0)
                return guest_invalid(q, "malformed records");
        q->op = q->rec[GUEST_KEY_OP];
        if (!q->op)
                return guest_invalid(q, "no op=");
        return 0;
}

int volume_guest_request(Manager *m, Volume *v, const uint8_t *kv, size_t kv_len, const uint8_t *data,
                         size_t data_len, SpaceBuf *ret, char *msg, size_t msg_size) {
        _cleanup_(guest_request_done) GuestRequest q = { .m = m, .v = v, .data = data, .data_len = data_len };
        const GuestOp *op;
        int r;

        r = parse_records(&q, kv, kv_len);
        if (r >= 0) {
                op = guest_op_find(q.op);
                r = op ? op->run(&q) : error_set(&q.error, ERROR_NOT_SUPPORTED, "op=%.32s is not one the host serves",
                                                 q.op) ?: -ENOSYS;
        }
        if (r >= 0)
                r = space_volume_payload_build(ret, &q.kv, q.out, q.out_len);
        if (r < 0) {
                if (msg_size > 0)
                        snprintf(msg, msg_size, "%s", q.error.code != ERROR_NONE ? error_message(&q.error)
                                                                                  : strerror(-r));
                return guest_errno(r);
        }
        if (msg_size > 0)
                msg[0] = '\0';
        return 0;
}

void guest_request_done(GuestRequest *q) {
        space_buf_done(&q->kv);
        free(q->out_buf);
        error_done(&q->error);
}
