/* SPDX-License-Identifier: Apache-2.0 */

/*
 * The watcher of a VM's run state (vmm.h, "the VM's run state"): a QMP client in the event loop on QEMU's second
 * monitor, which carries nothing but events and the few commands that explain them. A STOP is asked about with
 * query-status: the daemon's own stops (pause, checkpoint, save) leave the VM paused or post-migrate and are let
 * be; internal-error, guest-panicked and shutdown are QEMU's, and fail it. Then the guest's console is drained
 * on the same monitor for the panic line, and the owner is told once. Lines are bounded and every write is a
 * few bytes, sent without blocking: a monitor that does not take them is given up, never waited for.
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf */
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "macro.h"
#include "vm/vmm.h"

/* The console is read in pieces of this many bytes: an answer (JSON escapes of up to 6 bytes a byte) then
 * stays under VM_EVENTS_LINE_MAX, while QEMU's ring (128 KiB) is drained in at most CONSOLE_READS_MAX. */
#define CONSOLE_CHUNK 4096U
#define CONSOLE_READS_MAX 40U
/* A watcher's buffer starts this small and doubles up to VM_EVENTS_LINE_MAX: every running VM has one, and
 * events are a few hundred bytes; only the console's answers are larger. */
#define BUF_INITIAL 4096U
/* What is kept of the console: its tail, where the panic is. */
#define CONSOLE_KEEP (16U * 1024U)

struct VmEvents {
        sd_event_source *io;
        int fd;
        char *buf;              /* bytes of the line being read */
        size_t len, cap;        /* cap: BUF_INITIAL doubling to VM_EVENTS_LINE_MAX */
        bool greeted;
        VmRunFailure failure;   /* found: the console is being read, then the owner told */
        char *shutdown_reason;  /* the guest's last SHUTDOWN's */
        char *console;          /* the console's tail read so far */
        size_t console_len;
        unsigned console_reads;
        VmEventsFn fn;
        void *userdata;
};

VmEvents *vm_events_free(VmEvents *w) {
        if (!w)
                return NULL;
        sd_event_source_disable_unref(w->io);
        safe_close(w->fd);
        free(w->buf);
        free(w->shutdown_reason);
        free(w->console);
        free(w);
        return NULL;
}

/* Ends the watch and tells the owner, who may free w: nothing may touch it after. */
static void watch_end(VmEvents *w, VmRunFailure f, const char *reason) {
        (void) sd_event_source_set_enabled(w->io, SD_EVENT_OFF);
        w->fn(w, f, reason, w->userdata);
}

/* Commands are a few bytes and one goes at a time: a socket that cannot take them now is a monitor to give
 * up on, not one to queue for. */
static int send_line(VmEvents *w, const char *line) {
        size_t n = strlen(line);
        ssize_t k = send(w->fd, line, n, MSG_DONTWAIT | MSG_NOSIGNAL);

        if (k < 0)
                return -errno;
        return (size_t) k == n ? 0 : -EAGAIN;
}

static int console_read_next(VmEvents *w) {
        char cmd[160];

        snprintf(cmd, sizeof(cmd),
                 "{\"execute\":\"ringbuf-read\",\"arguments\":{\"device\":\"con0\",\"size\":%u,"
                 "\"format\":\"utf8\"},\"id\":\"console\"}\n", CONSOLE_CHUNK);
        w->console_reads++;
        return send_line(w, cmd);
}

/* The tail of the console, CONSOLE_KEEP bytes at most, with text added. */
static int console_append(VmEvents *w, const char *text) {
        size_t n = strlen(text);

        if (n >= CONSOLE_KEEP) {
                text += n - CONSOLE_KEEP + 1;
                n = CONSOLE_KEEP - 1;
        }
        if (!w->console && !(w->console = malloc(CONSOLE_KEEP)))
                return -ENOMEM;
        if (w->console_len + n >= CONSOLE_KEEP) {
                size_t drop = w->console_len + n - (CONSOLE_KEEP - 1);
                memmove(w->console, w->console + drop, w->console_len - drop);
                w->console_len -= drop;
        }
        memcpy(w->console + w->console_len, text, n);
        w->console_len += n;
        w->console[w->console_len] = 0;
        return 0;
}

static void failure_report(VmEvents *w) {
        _cleanup_free_ char *reason = NULL;

        if (vm_run_failure_reason(w->failure, w->shutdown_reason, w->console, &reason) < 0)
                reason = NULL;
        watch_end(w, w->failure, reason ?: "the VM stopped by itself");
}

/* A failure was found: read the console before telling anyone (QEMU still holds the stopped VM). */
static int failure_found(VmEvents *w, VmRunFailure f) {
        if (f == VM_RUN_OK || w->failure != VM_RUN_OK)
                return 0;
        w->failure = f;
        return console_read_next(w);
}

/* 1 when the watch ended (w may be gone), 0 to go on, -errno for a monitor to give up on. */
static int on_message(VmEvents *w, VmQmpMsg *m) {
        switch (m->kind) {
        case VM_QMP_GREETING:
                if (w->greeted)
                        return 0;
                w->greeted = true;
                return send_line(w, "{\"execute\":\"qmp_capabilities\",\"id\":\"caps\"}\n");
        case VM_QMP_STOP:
                return w->failure == VM_RUN_OK ? send_line(w, "{\"execute\":\"query-status\",\"id\":\"status\"}\n") : 0;
        case VM_QMP_GUEST_PANICKED:
                return failure_found(w, VM_RUN_GUEST_PANICKED);
        case VM_QMP_SHUTDOWN:
                if (m->guest) {
                        free(w->shutdown_reason);
                        w->shutdown_reason = TAKE_PTR(m->text);
                }
                return 0;
        case VM_QMP_ERROR:
                if (streq(m->id, "console")) {
                        failure_report(w);
                        return 1;
                }
                /* capabilities or query-status refused: this monitor is not one to learn from */
                return streq(m->id, "caps") || streq(m->id, "status") ? -EPROTO : 0;
        case VM_QMP_RETURN:
                if (streq(m->id, "caps"))
                        /* what happened before the watch began (a daemon restart): ask once */
                        return send_line(w, "{\"execute\":\"query-status\",\"id\":\"status\"}\n");
                if (streq(m->id, "status"))
                        return failure_found(w, vm_run_status_failure(m->text));
                if (streq(m->id, "console") && w->failure != VM_RUN_OK) {
                        int r = console_append(w, m->text ?: "");
                        if (r < 0)
                                return r;
                        if (m->text && m->text[0] && w->console_reads < CONSOLE_READS_MAX)
                                return console_read_next(w);
                        failure_report(w);
                        return 1;
                }
                return 0;
        default:
                return 0;
        }
}

/* Takes the complete lines out of the buffer. 1 when the watch ended. */
static int on_lines(VmEvents *w) {
        char *start = w->buf, *nl;

        while ((nl = memchr(start, '\n', w->len - (size_t) (start - w->buf)))) {
                /* a NUL inside the line would hide its rest from the parser: not QMP */
                bool nul = memchr(start, 0, (size_t) (nl - start)) != NULL;
                VmQmpMsg m = {};
                int r;

                *nl = 0;
                if (nl > start && nl[-1] == '\r')
                        nl[-1] = 0;
                r = nul ? -EBADMSG : vm_qmp_msg_parse(start, &m);
                if (r >= 0) {
                        r = on_message(w, &m);
                        vm_qmp_msg_done(&m);
                }
                if (r > 0)
                        return 1;
                if (r < 0) {
                        _cleanup_free_ char *why = NULL;
                        if (asprintf(&why, "QEMU's event monitor broke QMP (%s); its run state is no longer watched",
                                     r == -EBADMSG ? "a line that is not QMP's JSON" : strerror(-r)) < 0)
                                why = NULL;
                        watch_end(w, VM_RUN_OK, why ?: "QEMU's event monitor broke QMP");
                        return 1;
                }
                start = nl + 1;
        }
        w->len -= (size_t) (start - w->buf);
        memmove(w->buf, start, w->len);
        return 0;
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        VmEvents *w = userdata;
        ssize_t n;

        (void) s;
        (void) revents;
        if (w->len == w->cap) {
                size_t cap = MIN(w->cap * 2, (size_t) VM_EVENTS_LINE_MAX);
                char *b = realloc(w->buf, cap);
                if (!b) {
                        watch_end(w, VM_RUN_OK, "out of memory for QEMU's event monitor; its run state is no longer "
                                                "watched");
                        return 0;
                }
                w->buf = b;
                w->cap = cap;
        }
        n = recv(fd, w->buf + w->len, w->cap - w->len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                /* QEMU exited (killed by the daemon, or on its own) or closed the monitor */
                watch_end(w, VM_RUN_OK, NULL);
                return 0;
        }
        w->len += (size_t) n;
        if (on_lines(w) > 0)
                return 0;
        /* a whole buffer without a newline: the rest of the line is not held for */
        if (w->len >= VM_EVENTS_LINE_MAX)
                watch_end(w, VM_RUN_OK, "QEMU's event monitor sent a line over 64 KiB; its run state is no "
                                        "longer watched");
        return 0;
}

int vm_events_watch(sd_event *e, const char *run_dir, VmEventsFn fn, void *userdata, VmEvents **ret) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -1;
        VmEvents *w;
        int r;

        if (!e || !run_dir || !fn || !ret)
                return -EINVAL;
        r = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" VM_EVENTS_SOCKET, run_dir);
        if (r < 0 || (size_t) r >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* A unix socket's connect does not wait for the server: it is queued, or refused at once. */
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
                return -errno;

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->fd = -1;
        w->fn = fn;
        w->userdata = userdata;
        w->cap = BUF_INITIAL;
        w->buf = malloc(w->cap);
        if (!w->buf) {
                vm_events_free(w);
                return -ENOMEM;
        }
        r = sd_event_add_io(e, &w->io, fd, EPOLLIN, on_io, w);
        if (r < 0) {
                vm_events_free(w);
                return r;
        }
        w->fd = TAKE_FD(fd);
        *ret = w;
        return 0;
}
