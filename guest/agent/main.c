/* SPDX-License-Identifier: Apache-2.0 */

/*
 * space-agent: PID 1 of every sandbox. Boots the guest, then serves the host over the virtio-serial port
 * "agent" forever. It never exits: errors are logged and it carries on; only a missing port (nothing to
 * serve) powers the VM off.
 *
 * Outside a VM (not PID 1) it skips the boot and serves the file named by $SPACE_AGENT_PORT instead, which is
 * how it can be tried against a socketpair or a pty.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "agent.h"

/* the port, the signalfd, a freeze's events, three per process, then the network's listeners and tunnels, the watches, the
 * volume mounts */
#define POLL_STREAMS (3 + 3 * SPACE_STREAMS_MAX)
#define POLL_MAX (POLL_STREAMS + AGENT_NET_POLL_MAX + SPACE_WATCHES_MAX + SPACE_VOLUME_MOUNTS_MAX + SPACE_FILE_XFERS_MAX)

static int open_port(void) {
        const char *path = getenv("SPACE_AGENT_PORT");
        int fd;

        /* fd:N, an inherited socket (a test's socketpair: a socket has no path to open) */
        if (getpid() != 1 && path && strncmp(path, "fd:", 3) == 0) {
                char *end;
                long n = strtol(path + 3, &end, 10);

                if (end == path + 3 || *end || n < 3 || fcntl((int) n, F_SETFL, O_NONBLOCK) < 0)
                        return -EBADF;
                (void) fcntl((int) n, F_SETFD, FD_CLOEXEC);
                return (int) n;
        }
        if (getpid() != 1 && path) {
                fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
                return fd < 0 ? -errno : fd;
        }
        return boot_open_port("agent", 10000);
}

int main(int argc, char *argv[]) {
        static struct pollfd fds[POLL_MAX];
        static Stream *owners[POLL_MAX];
        Channel c;
        sigset_t mask;
        int port, sfd, r;

        if (getpid() == 1) {
                BootConfig bc;

                boot_early();
                boot_load_modules("/lib/modules-space");
                net_capture_setup(); /* with the initramfs's tools, before they are freed */
                boot_read_cmdline(&bc);
                (void) boot_switch_root(&bc);
                boot_late_mounts();
                work_setup(NULL);
        } else if (getenv("SPACE_AGENT_WORK_CGROUP"))
                work_setup(getenv("SPACE_AGENT_WORK_CGROUP")); /* a test's: the machine's own are not ours */
        net_init();
        net_resolv_conf();

        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        (void) sigprocmask(SIG_BLOCK, &mask, NULL);
        (void) signal(SIGPIPE, SIG_IGN);
        sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
        if (sfd < 0)
                log_err("signalfd: %m");

        port = open_port();
        if (port < 0) {
                log_err("no virtio-serial port named \"agent\": %s; powering off", strerror(-port));
                if (getpid() == 1) {
                        sync();
                        (void) reboot(RB_POWER_OFF);
                }
                return 1;
        }

        streams_init();
        r = channel_setup(&c, port);
        if (r < 0) {
                log_err("channel setup: %s", strerror(-r));
                if (getpid() != 1)
                        return 1;
        }
        log_info("serving the channel");
        channel_send_hello(&c);
        channel_io(&c);

        for (;;) {
                size_t n = 0, ns, nn, nw, nv, nf;
                int timeout = streams_poll_timeout(), nt = net_poll_timeout(), st = service_poll_timeout();
                int ft = channel_freeze_timeout();

                fds[n++] = (struct pollfd) { .fd = c.epoll_fd, .events = POLLIN };
                fds[n++] = (struct pollfd) { .fd = sfd, .events = POLLIN };
                /* a freeze under way: the group's events change when it stands still (-1: poll skips it) */
                fds[n] = (struct pollfd) { .fd = -1 };
                fds[n].fd = channel_freeze_fd(&fds[n].events);
                n++;
                ns = streams_poll_fill(&c, fds + n, POLL_STREAMS - n, owners);
                nn = net_poll_fill(&c, fds + n + ns,
                                   POLL_MAX - SPACE_WATCHES_MAX - SPACE_VOLUME_MOUNTS_MAX - SPACE_FILE_XFERS_MAX - n - ns);
                nw = watch_poll_fill(fds + n + ns + nn, POLL_MAX - SPACE_VOLUME_MOUNTS_MAX - SPACE_FILE_XFERS_MAX - n - ns - nn);
                nv = volume_poll_fill(fds + n + ns + nn + nw, POLL_MAX - SPACE_FILE_XFERS_MAX - n - ns - nn - nw);
                nf = files_child_poll_fill(&c, fds + n + ns + nn + nw + nv, POLL_MAX - n - ns - nn - nw - nv);

                /* file reads and lists have no fd to wait on: go round again at once while they can send */
                if (files_want_pump(&c) || watch_want_pump(&c))
                        timeout = 0;
                else if (nt >= 0 && (timeout < 0 || nt < timeout))
                        timeout = nt;
                if (st >= 0 && (timeout < 0 || st < timeout))
                        timeout = st;
                if (ft >= 0 && (timeout < 0 || ft < timeout))
                        timeout = ft;
                if (poll(fds, n + ns + nn + nw + nv + nf, timeout) < 0) {
                        if (errno != EINTR)
                                log_err("poll: %m");
                        continue;
                }

                if (fds[1].revents) {
                        struct signalfd_siginfo si;
                        while (read(sfd, &si, sizeof si) == (ssize_t) sizeof si)
                                ;
                }
                /* Output first, then exits (EXIT must follow the last DATA and EOF), then the host. */
                streams_poll_handle(&c, fds + n, ns, owners);
                net_poll_handle(&c, fds + n + ns, nn);
                watch_poll_handle(&c, fds + n + ns + nn, nw);
                volume_poll_handle(&c, fds + n + ns + nn + nw, nv);
                files_child_poll_handle(&c, fds + n + ns + nn + nw + nv, nf);
                channel_freeze_tick(&c);
                streams_reap(&c);
                service_tick();
                files_pump(&c);
                watch_pump(&c);
                channel_io(&c);
        }
}
