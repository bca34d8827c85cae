/* SPDX-License-Identifier: Apache-2.0 */

/*
 * The agent's side of the channel: reads frames from the virtio-serial port and dispatches them, queues and
 * writes frames back.
 *
 * The port's poll() reports POLLHUP for as long as no host is connected to QEMU's chardev, so a level-triggered
 * poll would spin. The port therefore sits in an edge-triggered epoll set (itself polled by the main loop):
 * every data arrival, write space or host (dis)connect wakes us once, and we then read and write until
 * EAGAIN. A read of 0 means "no host": the reader is reset so that a host that reconnects starts on a frame
 * boundary, and a half-written output frame is dropped for the same reason.
 */

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "agent.h"

int channel_setup(Channel *c, int port_fd) {
        struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLET };

        *c = (Channel) { .fd = port_fd, .host_connected = true };
        c->reader = calloc(1, sizeof *c->reader);
        if (!c->reader)
                return -ENOMEM;
        c->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (c->epoll_fd < 0)
                return -errno;
        if (epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, port_fd, &ev) < 0)
                return -errno;
        return 0;
}

size_t channel_queued(const Channel *c) {
        return c->out.len - c->out_off;
}

int channel_send(Channel *c, uint8_t type, uint8_t fd, uint32_t stream, const void *payload, size_t n) {
        int r;

        /* Reclaim the written prefix before growing, so the buffer stays about as big as what is queued. */
        if (c->out_off > 0 && (c->out_off == c->out.len || c->out_off >= c->out.len / 2)) {
                space_buf_consume(&c->out, c->out_off);
                c->out_off = 0;
        }
        r = space_frame_append(&c->out, type, fd, stream, payload, n);
        if (r < 0)
                log_err("queue %s frame: %s", space_frame_type_to_string(type), strerror(-r));
        return r;
}

int channel_send_kv(Channel *c, uint8_t type, uint32_t stream, const SpaceBuf *kv) {
        return channel_send(c, type, 0, stream, kv->data, kv->len);
}

void channel_send_error(Channel *c, uint32_t stream, int err, const char *message) {
        SpaceBuf kv = {};

        (void) space_kv_addf(&kv, "errno", "%d", err);
        (void) space_kv_add(&kv, "message", message ? message : strerror(err));
        (void) channel_send_kv(c, SPACE_F_ERROR, stream, &kv);
        space_buf_done(&kv);
}

void channel_send_hello(Channel *c) {
        SpaceBuf kv = {};

        (void) space_kv_addf(&kv, "version", "%d", SPACE_PROTO_VERSION);
        (void) space_kv_add(&kv, "agent", "space-agent");
        (void) channel_send_kv(c, SPACE_F_HELLO, 0, &kv);
        space_buf_done(&kv);
}

/* Frames kept while the workload is frozen (freeze.c): EXEC and RELEASE, whose child would stop before its
 * exec while the agent waits for that exec, and every later frame of their streams, so that none overtakes
 * them. Replayed in order at the thaw. Bounded: the host sends a stream's stdin only within its window. */
#define DEFERRED_STREAMS_MAX 16U
#define DEFERRED_BYTES_MAX (8U * 1024U * 1024U)

static SpaceBuf deferred;
static uint32_t deferred_ids[DEFERRED_STREAMS_MAX];
static size_t n_deferred_ids;

static bool deferred_stream(uint32_t stream) {
        for (size_t i = 0; i < n_deferred_ids; i++)
                if (deferred_ids[i] == stream)
                        return true;
        return false;
}

/* Whether the frame was kept (or refused) for after the thaw. */
static bool defer(Channel *c, const SpaceFrameHeader *h, const uint8_t *p) {
        bool known = deferred_stream(h->stream);

        if (!work_frozen() || h->type == SPACE_F_PING || h->type == SPACE_F_INIT ||
            (!known && h->type != SPACE_F_EXEC && h->type != SPACE_F_RELEASE))
                return false;
        if ((!known && n_deferred_ids >= DEFERRED_STREAMS_MAX) ||
            deferred.len + SPACE_FRAME_HEADER_SIZE + h->length > DEFERRED_BYTES_MAX ||
            space_frame_append(&deferred, h->type, h->fd, h->stream, p, h->length) < 0) {
                if (h->type == SPACE_F_EXEC)
                        channel_send_error(c, h->stream, EBUSY, "the sandbox is being saved; too many commands wait");
                else
                        log_warn("stream %u: %s frame dropped while the workload is frozen", h->stream,
                                 space_frame_type_to_string(h->type));
                return true;
        }
        if (!known)
                deferred_ids[n_deferred_ids++] = h->stream;
        return true;
}

static void dispatch(Channel *c, const SpaceFrameHeader *h, const uint8_t *p);

static void replay_deferred(Channel *c) {
        SpaceBuf b = deferred;
        size_t off = 0;

        if (work_frozen() || b.len == 0)
                return;
        deferred = (SpaceBuf) {};
        n_deferred_ids = 0;
        while (off + SPACE_FRAME_HEADER_SIZE <= b.len) {
                SpaceFrameHeader h;

                if (space_frame_header_unpack(b.data + off, &h) < 0)
                        break; /* we wrote it: cannot happen */
                dispatch(c, &h, b.data + off + SPACE_FRAME_HEADER_SIZE);
                off += SPACE_FRAME_HEADER_SIZE + h.length;
        }
        space_buf_done(&b);
}

/* PING "freeze" and PING "stop" (lib/proto.h), under way: the workload was asked to stop, and the loop goes on
 * until it has, for one of its tasks may be waiting on a volume mount that only the loop serves (volume*.c): the
 * task reaches the freezer once its answer came. A stop's sync runs in a child, for the same reason: the pages a
 * task dirtied through a shared mapping of a volume's file are written back by requests the loop serves. One at
 * a time: the host waits for the answer. */
static struct {
        bool active, stop;
        uint32_t stream;
        uint64_t deadline_ms;
        int sync_pidfd;           /* a stop's sync() in a child, -1 when none runs */
} freezing = { .sync_pidfd = -1 };

static uint64_t now_ms(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000U + (uint64_t) ts.tv_nsec / 1000000U;
}

/* A stop's sync(), in a child whose end the loop polls (a pidfd): 0, or -errno when it ran here instead. */
static int sync_begin(void) {
        pid_t pid = fork();
        int fd;

        if (pid == 0) {
                sync();
                _exit(0);
        }
        if (pid < 0 || (fd = (int) syscall(SYS_pidfd_open, pid, 0)) < 0) {
                sync(); /* no child to wait on: here, then */
                return -ENOSYS;
        }
        freezing.sync_pidfd = fd;
        return 0;
}

/* The answer, r < 0 when the workload did not freeze. "freeze": PONG "frozen" or ERROR. "stop": the VM is shut
 * down after the answer and boots again from its disk alone, so what the page cache holds must be on the disk
 * first; frozen first, so that nothing the workload writes after the sync is lost without a trace. The host
 * shuts it down whatever the answer: a failed freeze only says so. Returns true when it is still to come (a stop's
 * sync runs); r = -EINPROGRESS: that sync is done. */
static bool freeze_answer(Channel *c, uint32_t stream, bool stop, int r) {
        if (stop && r != -EINPROGRESS) {
                if (r < 0)
                        log_warn("stop: the workload was not frozen (%s): syncing anyway", strerror(-r));
                if (sync_begin() >= 0)
                        return true; /* channel_freeze_tick() answers once it is done */
        }
        if (stop) {
                (void) channel_send(c, SPACE_F_PONG, 0, stream, SPACE_PONG_SYNCED, strlen(SPACE_PONG_SYNCED));
                return false;
        }
        if (r < 0) {
                channel_send_error(c, stream, -r, r == -ETIMEDOUT ? "the workload did not freeze in time" :
                                                  r == -EOPNOTSUPP ? "no cgroup for the workload" :
                                                  r == -EBUSY ? "a freeze is under way" : NULL);
                return false;
        }
        (void) channel_send(c, SPACE_F_PONG, 0, stream, SPACE_PONG_FROZEN, strlen(SPACE_PONG_FROZEN));
        return false;
}

static void freeze_begin(Channel *c, uint32_t stream, bool stop) {
        int r;

        if (freezing.active) {
                if (!stop)
                        (void) freeze_answer(c, stream, false, -EBUSY);
                else /* the host shuts the VM down anyway: a second sync is only slower */
                        (void) channel_send(c, SPACE_F_PONG, 0, stream, SPACE_PONG_SYNCED, strlen(SPACE_PONG_SYNCED));
                return;
        }
        freezing.active = true;
        freezing.stop = stop;
        freezing.stream = stream;
        freezing.deadline_ms = now_ms() + AGENT_FREEZE_TIMEOUT_MS;
        r = work_freeze_begin();
        if (r < 0) {
                freezing.active = freeze_answer(c, stream, stop, r);
                return;
        }
        channel_freeze_tick(c); /* a workload that stands still already is answered at once */
}

void channel_freeze_tick(Channel *c) {
        int r;

        if (!freezing.active)
                return;
        if (freezing.sync_pidfd >= 0) {
                struct pollfd p = { .fd = freezing.sync_pidfd, .events = POLLIN };

                if (poll(&p, 1, 0) <= 0)
                        return;
                freezing.sync_pidfd = safe_close(freezing.sync_pidfd);
                freezing.active = freeze_answer(c, freezing.stream, true, -EINPROGRESS); /* synced: the answer */
                return;
        }
        r = work_frozen() ? work_freeze_check() : -ECANCELED; /* an INIT thawed it meanwhile */
        if (r == 0 && now_ms() < freezing.deadline_ms)
                return;
        if (r <= 0) {
                r = r == 0 ? -ETIMEDOUT : r;
                work_thaw(); /* half frozen helps no one: the host saves without it */
        }
        freezing.active = freeze_answer(c, freezing.stream, freezing.stop, r < 0 ? r : 0);
}

int channel_freeze_fd(short *ret_events) {
        if (!freezing.active)
                return -1;
        if (freezing.sync_pidfd >= 0) {
                *ret_events = POLLIN; /* the sync's child ended */
                return freezing.sync_pidfd;
        }
        *ret_events = POLLPRI; /* cgroup.events changed */
        return work_events_fd();
}

int channel_freeze_timeout(void) {
        uint64_t now = now_ms();

        if (!freezing.active || freezing.sync_pidfd >= 0)
                return -1;
        return freezing.deadline_ms > now ? (int) (freezing.deadline_ms - now) : 0;
}

/* A watch in a volume mount: inotify there sees this guest's changes only, not other sandboxes' nor the API's,
 * and the loop that serves the mount must not enter it (agent.h, volume*): refused. */
static bool watch_on_volume(Channel *c, uint32_t stream, const uint8_t *p, size_t n) {
        if (!files_child_wanted(p, n))
                return false;
        channel_send_error(c, stream, EXDEV, "watching a directory in a volume mount is not served: the volume "
                                              "changes in other sandboxes and through its API too");
        return true;
}

static void dispatch(Channel *c, const SpaceFrameHeader *h, const uint8_t *p) {
        Stream *s;

        if (defer(c, h, p))
                return;
        switch (h->type) {
        case SPACE_F_PING:
                if (h->length == strlen(SPACE_PING_FREEZE) && memcmp(p, SPACE_PING_FREEZE, h->length) == 0) {
                        freeze_begin(c, h->stream, false);
                        return;
                }
                if (h->length == strlen(SPACE_PING_STOP) && memcmp(p, SPACE_PING_STOP, h->length) == 0) {
                        freeze_begin(c, h->stream, true);
                        return;
                }
                (void) channel_send(c, SPACE_F_PONG, 0, h->stream, p,
                                    h->length < SPACE_PING_PAYLOAD_MAX ? h->length : SPACE_PING_PAYLOAD_MAX);
                return;
        case SPACE_F_INIT:
                init_handle(c, h->stream, p, h->length);
                return;
        case SPACE_F_EXEC:
                exec_start(c, h->stream, p, h->length);
                return;
        case SPACE_F_ADOPT:
                stream_adopt(c, h->stream);
                return;
        case SPACE_F_FILE:
                if (watch_is_request(p, h->length)) {
                        if (!watch_on_volume(c, h->stream, p, h->length))
                                watch_handle(c, h->stream, p, h->length);
                } else if (files_child_wanted(p, h->length))
                        files_child_start(c, h->stream, p, h->length); /* the loop serves the mount meanwhile */
                else
                        files_handle(c, h->stream, p, h->length);
                return;
        case SPACE_F_PORT:
                net_port(c, h->stream, p, h->length);
                return;
        default:
                break;
        }

        if (files_child_frame(c, h, p) || files_frame(c, h, p) || watch_frame(c, h, p) || net_frame(c, h, p) || volume_frame(c, h, p))
                return;
        s = stream_find(h->stream);
        if (!s)
                return; /* a stream we forgot, or never had: drop */

        switch (h->type) {
        case SPACE_F_DATA:
                if (h->fd == 0)
                        stream_input(c, s, p, h->length);
                break;
        case SPACE_F_EOF:
                if (h->fd == 0)
                        stream_input_eof(c, s);
                break;
        case SPACE_F_CREDIT:
                if (h->length == 4)
                        stream_credit(s, h->fd, space_get_le32(p));
                break;
        case SPACE_F_SIGNAL:
                if (h->length == 4)
                        stream_signal(s, (int) space_get_le32(p));
                break;
        case SPACE_F_RESIZE:
                if (h->length == 4)
                        stream_resize(s, space_get_le16(p), space_get_le16(p + 2));
                break;
        case SPACE_F_RELEASE:
                stream_release(c, s);
                break;
        case SPACE_F_CLOSE:
                stream_close(s);
                break;
        default:
                break; /* frames only the guest sends: drop */
        }
}

static void host_gone(Channel *c) {
        if (!c->host_connected)
                return;
        c->host_connected = false;
        c->reader->have = 0;
        files_drop_all(); /* nobody will finish them */
        files_child_drop_all();
        watch_drop_all();
        net_drop_all(c);
        volume_host_gone(); /* kept, to be sent again */
        if (c->head_left > 0) {
                c->out_off += c->head_left;
                c->head_left = 0;
        }
}

static void host_back(Channel *c) {
        if (c->host_connected)
                return;
        c->host_connected = true;
        files_drop_all(); /* a new host knows nothing of them */
        files_child_drop_all();
        watch_drop_all();
        net_drop_all(c);
        channel_send_hello(c);
        volume_host_back(c); /* after HELLO: the host knows our version first */
}

/* Returns true when it stopped because the output queue is full, not because the port ran dry. */
static bool channel_read(Channel *c) {
        static uint8_t buf[SPACE_FRAME_MAX];

        /* Stop taking requests while the host is not reading our answers. */
        while (channel_queued(c) < AGENT_OUTQ_HARD) {
                ssize_t n = read(c->fd, buf, sizeof buf);
                size_t off = 0;

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                log_warn("read port: %m");
                        return false;
                }
                if (n == 0) {
                        host_gone(c);
                        return false;
                }
                host_back(c);

                while (off < (size_t) n) {
                        SpaceFrameHeader h;
                        const uint8_t *p;
                        size_t used;
                        int r;

                        r = space_frame_reader_feed(c->reader, buf + off, (size_t) n - off, &used, &h, &p);
                        off += used;
                        if (r < 0) {
                                /* No way to find the next frame boundary: drop what we have. */
                                log_err("malformed frame from host, dropping %zu bytes", (size_t) n - off);
                                c->reader->have = 0;
                                break;
                        }
                        if (r == 0)
                                break;
                        dispatch(c, &h, p);
                        replay_deferred(c); /* after the INIT that thawed */
                }
        }
        return true;
}

/* Advances head_left over w freshly written bytes starting at out_off. */
static void track_frames(Channel *c, size_t w) {
        size_t off = c->out_off, d;

        d = w < c->head_left ? w : c->head_left;
        c->head_left -= d;
        off += d;
        w -= d;
        while (w > 0) {
                size_t flen = SPACE_FRAME_HEADER_SIZE + space_get_le32(c->out.data + off);
                d = w < flen ? w : flen;
                off += d;
                w -= d;
                c->head_left = flen - d;
        }
}

static void channel_write(Channel *c) {
        while (channel_queued(c) > 0) {
                ssize_t n = write(c->fd, c->out.data + c->out_off, channel_queued(c));

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                log_warn("write port: %m");
                        return;
                }
                track_frames(c, (size_t) n);
                c->out_off += (size_t) n;
                host_back(c); /* may queue HELLO: only after out_off is settled */
        }
        c->out.len = 0;
        c->out_off = 0;
}

void channel_io(Channel *c) {
        struct epoll_event evs[4];
        int n;

        n = epoll_wait(c->epoll_fd, evs, ELEMENTSOF(evs), 0);
        for (int i = 0; i < n; i++)
                if ((evs[i].events & EPOLLHUP) && !(evs[i].events & EPOLLIN))
                        host_gone(c);
                else if (evs[i].events & EPOLLOUT)
                        host_back(c);

        /* The port is edge-triggered: keep going until it is dry or we are blocked on writing. */
        for (;;) {
                bool capped = channel_read(c);

                channel_write(c);
                if (!capped || channel_queued(c) >= AGENT_OUTQ_HARD)
                        break;
        }
}
