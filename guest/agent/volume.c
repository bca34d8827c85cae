/* SPDX-License-Identifier: Apache-2.0 */

/*
 * Volume mounts (lib/proto.h, "Volume mounts"; ARCHITECTURE.md, "Volumes"): each mounted volume is a FUSE file
 * system whose /dev/fuse the agent reads in its poll loop, one kernel request per read. The raw kernel
 * protocol, no libfuse: the agent is one static thread. What the guest alone can answer is answered here (INIT,
 * OPEN and RELEASE, OPENDIR, FORGET, the ops we do not serve); the rest goes to the host (volume-ops.c).
 *
 * OPEN keeps no state and no page cache (no FOPEN_KEEP_CACHE): every open reads what the host has now, which is
 * close-to-open consistency across guests; names and attributes are trusted for VOLUME_VALID_S. No writeback
 * cache, no readdirplus, no lock flags: the kernel keeps locks locally, and every write reaches the host before
 * write(2) returns. At most SPACE_VOLUME_OPS_MAX requests wait for the host: /dev/fuse is left out of poll
 * until one is answered, and the kernel queues the rest.
 */

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "volume.h"

VolumeMount *volume_mounts[SPACE_VOLUME_MOUNTS_MAX];
static uint8_t *read_buf;

int volume_reply(VolumeMount *m, uint64_t unique, int err, const void *a, size_t an, const void *b, size_t bn) {
        struct fuse_out_header oh = { .len = (uint32_t) (sizeof oh + an + bn), .error = -err, .unique = unique };
        struct iovec iov[3] = { { &oh, sizeof oh }, { (void *) a, an }, { (void *) b, bn } };

        if (!m || m->fd < 0)
                return -ENOTCONN;
        if (err)
                oh.len = sizeof oh, iov[1].iov_len = iov[2].iov_len = 0;
        if (writev(m->fd, iov, 3) >= 0)
                return 0;
        /* ENOENT: the request was interrupted and is gone; the rest cannot be helped here */
        if (errno != ENOENT && errno != EAGAIN)
                log_warn("volume %s: reply to the kernel: %m", m->id);
        return -errno;
}

void volume_reply_err(VolumeMount *m, uint64_t unique, int err) {
        (void) volume_reply(m, unique, err, NULL, 0, NULL, 0);
}

static void reply_init(VolumeMount *m, const struct fuse_in_header *h, const uint8_t *body, size_t n) {
        const struct fuse_init_in *in = (const void *) body;
        struct fuse_init_out out = {
                .major = FUSE_KERNEL_VERSION,
                .max_readahead = SPACE_VOLUME_IO_MAX,
                .flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_AUTO_INVAL_DATA | FUSE_PARALLEL_DIROPS,
                .max_write = SPACE_VOLUME_IO_MAX,
                .time_gran = 1,
                /* readahead and the like are "background" requests: let them fill what the host takes */
                .max_background = SPACE_VOLUME_OPS_MAX,
                .congestion_threshold = SPACE_VOLUME_OPS_MAX * 3 / 4,
        };

        /* The fuse_init_in of 7.23 and on is the only one we speak: Debian's guest kernel has 7.37. */
        if (n < offsetof(struct fuse_init_in, flags2) || in->major != FUSE_KERNEL_VERSION || in->minor < 23) {
                log_err("volume %s: the kernel speaks FUSE %u.%u, we need 7.23 at least", m->id,
                        n >= 8 ? in->major : 0, n >= 8 ? in->minor : 0);
                volume_reply_err(m, h->unique, EPROTO);
                return;
        }
        m->minor = in->minor < FUSE_KERNEL_MINOR_VERSION ? in->minor : FUSE_KERNEL_MINOR_VERSION;
        out.minor = m->minor;
        out.flags &= in->flags;
        if (in->max_readahead < out.max_readahead)
                out.max_readahead = in->max_readahead;
        (void) volume_reply(m, h->unique, 0, &out, sizeof out, NULL, 0);
}

static void forget(VolumeMount *m, uint64_t nodeid, uint64_t nlookup) {
        VolumeNode *node = volume_node_get(&m->nodes, nodeid);

        if (node)
                volume_node_forget(&m->nodes, node, nlookup);
}

static void batch_forget(VolumeMount *m, const uint8_t *body, size_t n) {
        const struct fuse_batch_forget_in *in = (const void *) body;
        const struct fuse_forget_one *one = (const void *) (body + sizeof *in);

        if (n < sizeof *in || in->count > (n - sizeof *in) / sizeof *one)
                return;
        for (uint32_t i = 0; i < in->count; i++)
                forget(m, one[i].nodeid, one[i].nlookup);
}

/* The requests the guest answers alone; false for those the host answers. */
static bool local(VolumeMount *m, const struct fuse_in_header *h, const uint8_t *body, size_t n) {
        switch (h->opcode) {
        case FUSE_INIT:
                reply_init(m, h, body, n);
                return true;
        case FUSE_FORGET:
                if (n >= sizeof(struct fuse_forget_in))
                        forget(m, h->nodeid, ((const struct fuse_forget_in *) body)->nlookup);
                return true; /* no reply */
        case FUSE_BATCH_FORGET:
                batch_forget(m, body, n);
                return true;
        case FUSE_INTERRUPT:    /* the host's answer comes soon enough, and a late reply is dropped */
        case FUSE_NOTIFY_REPLY:
                return true;
        case FUSE_OPEN: {
                struct fuse_open_out out = {}; /* no FOPEN_KEEP_CACHE: the page cache is dropped at open */
                (void) volume_reply(m, h->unique, 0, &out, sizeof out, NULL, 0);
                return true;
        }
        case FUSE_OPENDIR: {
                struct fuse_open_out out = {};
                int r = volume_dir_open(m, &out.fh);

                if (r < 0)
                        volume_reply_err(m, h->unique, -r);
                else
                        (void) volume_reply(m, h->unique, 0, &out, sizeof out, NULL, 0);
                return true;
        }
        case FUSE_RELEASEDIR:
                if (n >= sizeof(struct fuse_release_in))
                        volume_dir_release(m, ((const struct fuse_release_in *) body)->fh);
                volume_reply_err(m, h->unique, 0);
                return true;
        case FUSE_RELEASE:
        case FUSE_FLUSH:
        case FUSE_DESTROY:
                volume_reply_err(m, h->unique, 0);
                return true;
        case FUSE_LINK: /* a hard link has no path of its own: the host keeps none */
                volume_reply_err(m, h->unique, EPERM);
                return true;
        case FUSE_MKNOD:
                if (n >= sizeof(struct fuse_mknod_in) && S_ISREG(((const struct fuse_mknod_in *) body)->mode))
                        return false; /* a CREATE */
                volume_reply_err(m, h->unique, EPERM);
                return true;
        case FUSE_SETXATTR:
        case FUSE_GETXATTR:
        case FUSE_LISTXATTR:
        case FUSE_REMOVEXATTR:
                /* ENOSYS: the kernel answers EOPNOTSUPP itself from then on, without a round trip per write
                 * (file_remove_privs() asks for security.capability at each one) */
                volume_reply_err(m, h->unique, ENOSYS);
                return true;
        case FUSE_LOOKUP:
        case FUSE_GETATTR:
        case FUSE_SETATTR:
        case FUSE_READDIR:
        case FUSE_READ:
        case FUSE_WRITE:
        case FUSE_CREATE:
        case FUSE_MKDIR:
        case FUSE_SYMLINK:
        case FUSE_READLINK:
        case FUSE_UNLINK:
        case FUSE_RMDIR:
        case FUSE_RENAME:
        case FUSE_RENAME2:
        case FUSE_STATFS:
        case FUSE_FSYNC:
        case FUSE_FSYNCDIR:
                return false;
        default:
                /* ACCESS, locks, IOCTL, POLL, FALLOCATE, LSEEK, COPY_FILE_RANGE, BMAP, READDIRPLUS, TMPFILE...:
                 * the kernel stops asking, or does it itself */
                volume_reply_err(m, h->unique, ENOSYS);
                return true;
        }
}

/* The kernel ended the connection (an unmount): the mount is forgotten, so that an INIT may mount it again. */
static void mount_free(VolumeMount *m) {
        for (size_t i = 0; i < SPACE_VOLUME_MOUNTS_MAX; i++)
                if (volume_mounts[i] == m)
                        volume_mounts[i] = NULL;
        log_info("volume %s at %s: unmounted", m->id, m->path);
        volume_requests_orphan(m);
        volume_dirs_free(m);
        volume_nodes_done(&m->nodes);
        safe_close(m->fd);
        free(m->path);
        free(m);
}

/* Reads what the kernel asks until it has nothing more, the host has as many requests as it takes, or
 * VOLUME_READS_MAX were read: the rest of the loop (the channel above all) gets its turn between bursts of opens
 * and closes, which the guest answers alone. */
static void mount_read(Channel *c, VolumeMount *m) {
        if (!read_buf && !(read_buf = malloc(VOLUME_READ_BUF)))
                return;
        for (unsigned i = 0; i < VOLUME_READS_MAX && volume_requests_in_flight() < SPACE_VOLUME_OPS_MAX; i++) {
                const struct fuse_in_header *h = (const void *) read_buf;
                ssize_t n = read(m->fd, read_buf, VOLUME_READ_BUF);

                if (n < 0) {
                        if (errno == EINTR || errno == ENOENT) /* ENOENT: interrupted before we got it */
                                continue;
                        if (errno == ENODEV)
                                mount_free(m);
                        else if (errno != EAGAIN)
                                log_warn("volume %s: read /dev/fuse: %m", m->id);
                        return;
                }
                if ((size_t) n < sizeof *h || h->len != (size_t) n)
                        continue; /* not from the kernel we know */
                if (!local(m, h, read_buf + sizeof *h, (size_t) n - sizeof *h))
                        volume_forward(c, m, h, read_buf + sizeof *h, (size_t) n - sizeof *h);
        }
}

size_t volume_poll_fill(struct pollfd *fds, size_t max) {
        size_t n = 0;

        /* At the bound nothing is read: the kernel holds what the guest asks meanwhile. */
        if (volume_requests_in_flight() >= SPACE_VOLUME_OPS_MAX)
                return 0;
        for (size_t i = 0; i < SPACE_VOLUME_MOUNTS_MAX && n < max; i++)
                if (volume_mounts[i])
                        fds[n++] = (struct pollfd) { .fd = volume_mounts[i]->fd, .events = POLLIN };
        return n;
}

void volume_poll_handle(Channel *c, const struct pollfd *fds, size_t n) {
        for (size_t i = 0; i < n; i++) {
                if (!fds[i].revents)
                        continue;
                for (size_t j = 0; j < SPACE_VOLUME_MOUNTS_MAX; j++)
                        if (volume_mounts[j] && volume_mounts[j]->fd == fds[i].fd) {
                                mount_read(c, volume_mounts[j]);
                                break;
                        }
        }
}
