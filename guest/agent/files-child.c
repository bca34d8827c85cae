/* SPDX-License-Identifier: Apache-2.0 */

/*
 * FILE requests that reach into a volume mount run in a child process, one per request.
 *
 * The agent serves each volume's FUSE mount itself, in its one loop (volume*.c): a stat, open or read there in
 * the loop would wait for an answer only the loop can give. So a FILE request whose path (or move's to=) is in
 * a mount, or leads there through symlinks, is handed to a forked child that runs files.c as the loop would,
 * talking frames with us over a socketpair: we pass it the host's frames of its stream and pass its frames on
 * to the host, and go on serving the mount meanwhile. The child ends once its transfer is done (files_idle()).
 * Watches are not handed over: inotify on a mount sees this guest's changes only, and a watch lives as long as
 * the host wants; one in a mount is refused (channel.c).
 */

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "agent.h"

typedef struct FileChild {
        uint32_t id;              /* the FILE stream it serves */
        pid_t pid;
        int fd;                   /* our end of the socketpair, nonblocking */
        SpaceFrameReader *rd;     /* its frames */
        SpaceBuf to_child;        /* the host's frames for it, not yet written */
        size_t to_off;
        bool answered;            /* it sent the host something: an end without a word is ours to tell */
} FileChild;

static FileChild *kids[SPACE_FILE_XFERS_MAX];

#define HOPS_MAX 40 /* symlinks followed, as the kernel's limit */

/* Whether opening path would enter a volume mount: lexically, or through a symlink on the way. Each prefix is
 * checked before it is looked at, so nothing here enters a mount itself. */
static bool may_enter_volume(const char *path) {
        char cur[2 * SPACE_FILE_PATH_MAX + 2];
        unsigned hops = 0;

        if (!path || path[0] != '/' || strlen(path) > SPACE_FILE_PATH_MAX)
                return path && volume_path_mounted(path);
        (void) snprintf(cur, sizeof cur, "%s", path);
again:
        for (size_t end = 1;; end++) {
                char save, target[SPACE_FILE_PATH_MAX + 1], next[sizeof cur];
                struct stat st;
                ssize_t n;

                if (cur[end] != '/' && cur[end] != '\0')
                        continue;
                save = cur[end];
                cur[end] = '\0';
                if (volume_path_mounted(cur)) {
                        cur[end] = save;
                        return true;
                }
                if (lstat(cur, &st) < 0) {
                        cur[end] = save;
                        return false; /* nothing there: nothing further to follow */
                }
                if (!S_ISLNK(st.st_mode)) {
                        cur[end] = save;
                        if (save == '\0' || !S_ISDIR(st.st_mode))
                                return false;
                        continue;
                }
                n = readlink(cur, target, sizeof target - 1);
                cur[end] = save;
                if (n <= 0 || ++hops > HOPS_MAX)
                        return false;
                target[n] = '\0';
                if (target[0] == '/')
                        (void) snprintf(next, sizeof next, "%s%s", target, cur + end);
                else {
                        size_t dir = end;

                        while (dir > 0 && cur[dir - 1] != '/')
                                dir--;
                        (void) snprintf(next, sizeof next, "%.*s%s%s", (int) dir, cur, target, cur + end);
                }
                memcpy(cur, next, sizeof cur);
                if (strlen(cur) > SPACE_FILE_PATH_MAX)
                        return false;
                goto again;
        }
}

bool files_child_wanted(const uint8_t *p, size_t n) {
        const char *path = NULL, *to = NULL;

        (void) space_kv_get(p, n, "path", &path);
        (void) space_kv_get(p, n, "to", &to);
        return (path && may_enter_volume(path)) || (to && may_enter_volume(to));
}

/* ---- the child ---- */

static _Noreturn void child_run(int fd, uint32_t id, const uint8_t *p, size_t n) {
        Channel cc;

        /* what the loop had is the loop's: its transfers (their files left as they are), its mounts (the child
         * enters them freely: the loop serves them) */
        files_forget_inherited();
        volume_forget_inherited();
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (channel_setup(&cc, fd) < 0)
                _exit(1);
        files_handle(&cc, id, p, n);
        for (;;) {
                struct pollfd pfd = { .fd = cc.epoll_fd, .events = POLLIN };

                channel_io(&cc);
                files_pump(&cc);
                channel_io(&cc);
                if (!cc.host_connected || (files_idle() && channel_queued(&cc) == 0))
                        _exit(0);
                (void) poll(&pfd, 1, files_want_pump(&cc) ? 0 : 1000);
        }
}

/* ---- the loop's side ---- */

static FileChild *kid_find(uint32_t id) {
        for (size_t i = 0; i < ELEMENTSOF(kids); i++)
                if (kids[i] && kids[i]->id == id)
                        return kids[i];
        return NULL;
}

static void kid_free(size_t i) {
        FileChild *k = kids[i];

        if (!k)
                return;
        safe_close(k->fd);
        free(k->rd);
        space_buf_done(&k->to_child);
        free(k);
        kids[i] = NULL; /* its process is reaped with every other child (streams_reap) */
}

void files_child_start(Channel *c, uint32_t id, const uint8_t *p, size_t n) {
        size_t slot = ELEMENTSOF(kids);
        int sv[2];
        FileChild *k;
        pid_t pid;

        for (size_t i = 0; i < ELEMENTSOF(kids); i++)
                if (!kids[i]) {
                        slot = i;
                        break;
                }
        if (slot == ELEMENTSOF(kids) || kid_find(id)) {
                channel_send_error(c, id, EBUSY, "too many file operations in volume mounts at once");
                return;
        }
        k = calloc(1, sizeof *k);
        if (k)
                k->rd = calloc(1, sizeof *k->rd);
        if (!k || !k->rd || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
                if (k)
                        free(k->rd);
                free(k);
                channel_send_error(c, id, ENOMEM, "cannot start a file operation in a volume mount");
                return;
        }
        pid = fork();
        if (pid < 0) {
                int err = errno;

                safe_close(sv[0]);
                safe_close(sv[1]);
                free(k->rd);
                free(k);
                channel_send_error(c, id, err, "cannot start a file operation in a volume mount");
                return;
        }
        if (pid == 0) {
                safe_close(sv[0]);
                child_run(sv[1], id, p, n);
        }
        safe_close(sv[1]);
        k->id = id;
        k->pid = pid;
        k->fd = sv[0];
        kids[slot] = k;
}

static void kid_flush(FileChild *k) {
        while (k->to_off < k->to_child.len) {
                ssize_t w = write(k->fd, k->to_child.data + k->to_off, k->to_child.len - k->to_off);

                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return; /* EAGAIN: POLLOUT brings us back; a dead child: its EOF ends it */
                }
                k->to_off += (size_t) w;
        }
        k->to_child.len = k->to_off = 0;
}

bool files_child_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p) {
        FileChild *k = kid_find(h->stream);

        (void) c;
        if (!k)
                return false;
        /* bounded: the host sends a stream's DATA within its window, and little else */
        (void) space_frame_append(&k->to_child, h->type, h->fd, h->stream, p, h->length);
        kid_flush(k);
        return true;
}

size_t files_child_poll_fill(const Channel *c, struct pollfd *fds, size_t max) {
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(kids) && n < max; i++) {
                FileChild *k = kids[i];
                short ev = 0;

                if (!k)
                        continue;
                /* its output waits while the host does not read ours */
                if (channel_queued(c) < AGENT_OUTQ_HIGH)
                        ev |= POLLIN;
                if (k->to_off < k->to_child.len)
                        ev |= POLLOUT;
                fds[n++] = (struct pollfd) { .fd = k->fd, .events = ev };
        }
        return n;
}

/* Its frames, on to the host; 1 when it hung up. */
static int kid_read(Channel *c, FileChild *k) {
        static uint8_t buf[SPACE_FRAME_MAX];
        ssize_t n = read(k->fd, buf, sizeof buf);

        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : 1;
        if (n == 0)
                return 1;
        for (size_t off = 0; off < (size_t) n;) {
                SpaceFrameHeader h;
                const uint8_t *payload;
                size_t used = 0;
                int r = space_frame_reader_feed(k->rd, buf + off, (size_t) n - off, &used, &h, &payload);

                off += used;
                if (r < 0)
                        return 1;
                if (r == 0)
                        break;
                if (h.stream != k->id)
                        continue; /* ours to send are its stream's frames only */
                k->answered = true;
                (void) channel_send(c, h.type, h.fd, h.stream, payload, h.length);
        }
        return 0;
}

void files_child_poll_handle(Channel *c, const struct pollfd *fds, size_t n) {
        for (size_t j = 0; j < n; j++)
                for (size_t i = 0; i < ELEMENTSOF(kids); i++) {
                        FileChild *k = kids[i];

                        if (!k || k->fd != fds[j].fd || !fds[j].revents)
                                continue;
                        if (fds[j].revents & POLLOUT)
                                kid_flush(k);
                        if ((fds[j].revents & (POLLIN | POLLHUP | POLLERR)) && kid_read(c, k) > 0) {
                                if (!k->answered)
                                        channel_send_error(c, k->id, EIO,
                                                           "the file operation in a volume mount ended without an answer");
                                kid_free(i);
                        }
                        break;
                }
}

void files_child_drop_all(void) {
        for (size_t i = 0; i < ELEMENTSOF(kids); i++)
                if (kids[i]) {
                        (void) kill(kids[i]->pid, SIGKILL);
                        kid_free(i);
                }
}
