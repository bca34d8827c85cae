/* SPDX-License-Identifier: Apache-2.0 */

/*
 * Transparent capture (ARCHITECTURE.md, decision 10): a program that ignores HTTP_PROXY still gets out, but
 * only through the agent. At boot, in the initramfs (network configuration is kernel state: it survives the
 * root switch, while the initramfs and the tools in it are freed right after):
 *
 *   - lo comes up;
 *   - dummy0 holds an address of each family and the default routes, so that connect() to anywhere finds a
 *     route and a source address instead of failing with ENETUNREACH;
 *   - nftables redirects every TCP connection that does not stay on lo to the agent's transparent listener
 *     (net-proxy.c reads the original destination back with SO_ORIGINAL_DST), and rejects whatever else would
 *     leave through dummy0 (UDP, ICMP), so that it fails at once instead of vanishing; the DNS stub is on lo.
 *
 * The links and routes are set with busybox's ip, the rules with Debian's nft, shipped with its libraries and
 * loader in /lib/space-net (guest/build-initramfs.sh). None of it is fatal: a guest without capture still has
 * the proxy, and a kernel without the modules just logs why.
 *
 * After the root switch /etc/resolv.conf is made to name the stub (net_resolv_conf).
 */

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "net.h"

#define NET_DIR "/lib/space-net"
#define BUSYBOX "/bin/busybox"
#define CAPTURE_IF "dummy0"
/* What programs see as the sandbox's own addresses; nothing ever leaves through them. */
#define CAPTURE_ADDR4 "10.0.2.15/32"
#define CAPTURE_ADDR6 "fd00:5ace::15/128"
#define RESOLV_CONF "/run/space/resolv.conf"

static const char rules[] =
        "table inet space {\n"
        "        chain nat_output {\n"
        "                type nat hook output priority -100; policy accept;\n"
        "                oifname != \"lo\" meta l4proto tcp redirect to :3129\n"
        "        }\n"
        "        chain filter_output {\n"
        "                type filter hook output priority 0; policy accept;\n"
        "                oifname \"lo\" accept\n"
        "                meta l4proto tcp accept\n"
        "                reject\n"
        "        }\n"
        "}\n";

/* Runs argv and waits; returns its exit status, or -errno. PID 1 has no SIGCHLD handling yet here. */
static int run(char *const argv[]) {
        int status;
        pid_t pid;

        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                char *const envp[] = { "PATH=/bin:/sbin", NULL };
                execve(argv[0], argv, envp);
                _exit(127);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int ip(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5, const char *a6,
              const char *a7) {
        char *argv[] = { BUSYBOX, "ip", (char *) a1, (char *) a2, (char *) a3, (char *) a4, (char *) a5,
                         (char *) a6, (char *) a7, NULL };
        return run(argv);
}

static int link_up(const char *name) {
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = {};

        if (fd < 0)
                return -errno;
        (void) snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return -errno;
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                return -errno;
        return 0;
}

static int write_file(const char *path, const char *text) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        size_t l = strlen(text);

        if (fd < 0)
                return -errno;
        if (write(fd, text, l) != (ssize_t) l)
                return -EIO;
        return 0;
}

static bool capture_routes(void) {
        int r;

        if (access(BUSYBOX, X_OK) < 0) {
                log_warn("capture: no %s for the routes", BUSYBOX);
                return false;
        }
        /* the dummy module may have made dummy0 itself (numdummies defaults to 1) */
        if (if_nametoindex(CAPTURE_IF) == 0)
                (void) ip("link", "add", CAPTURE_IF, "type", "dummy", NULL, NULL);
        if (link_up(CAPTURE_IF) < 0) {
                log_warn("capture: no %s (dummy module missing?): %m", CAPTURE_IF);
                return false;
        }
        r = ip("addr", "add", CAPTURE_ADDR4, "dev", CAPTURE_IF, NULL, NULL);
        if (r == 0)
                r = ip("route", "add", "default", "dev", CAPTURE_IF, NULL, NULL);
        if (r != 0) {
                log_warn("capture: IPv4 address or route on %s failed (%d)", CAPTURE_IF, r);
                return false;
        }
        /* IPv6 is a bonus: without it IPv6 destinations are unreachable, as before */
        r = ip("-6", "addr", "add", CAPTURE_ADDR6, "dev", CAPTURE_IF, NULL);
        if (r == 0)
                r = ip("-6", "route", "add", "default", "dev", CAPTURE_IF, NULL);
        if (r != 0)
                log_warn("capture: IPv6 address or route on %s failed (%d)", CAPTURE_IF, r);
        return true;
}

static void capture_rules(void) {
        char *argv[] = { NET_DIR "/ld-linux-x86-64.so.2", "--library-path", NET_DIR, NET_DIR "/nft", "-f",
                         "/tmp/space.nft", NULL };
        int r;

        if (access(argv[0], X_OK) < 0 || access(argv[3], R_OK) < 0) {
                log_warn("capture: no nft in %s: outbound TCP only through the proxy", NET_DIR);
                return;
        }
        (void) mkdir("/tmp", 01777);
        r = write_file("/tmp/space.nft", rules);
        if (r < 0) {
                log_warn("capture: writing the rules: %s", strerror(-r));
                return;
        }
        r = run(argv);
        (void) unlink("/tmp/space.nft");
        if (r != 0)
                log_warn("capture: nft failed (%d): outbound TCP only through the proxy", r);
        else
                log_info("capture: outbound TCP goes to the agent");
}

void net_capture_setup(void) {
        int r;

        r = link_up("lo");
        if (r < 0)
                log_warn("bring up lo: %s", strerror(-r));
        /* Without the routes a redirect has nothing to catch: connects fail with ENETUNREACH. */
        if (capture_routes())
                capture_rules();
}

void net_resolv_conf(void) {
        struct stat st;
        int r;

        if (getpid() != 1 || dns_stub_fd() < 0)
                return;
        (void) mkdir("/run/space", 0755);
        r = write_file(RESOLV_CONF, "# space-agent: the sandbox's DNS stub (answers come from its host)\n"
                                    "nameserver 127.0.0.53\n");
        if (r < 0) {
                log_warn("write %s: %s", RESOLV_CONF, strerror(-r));
                return;
        }
        /* A file is covered by a bind mount, so the template's disk is left as it was. A symlink (to a
         * resolver's file that will not be there) or nothing is replaced by a symlink to ours. */
        if (lstat("/etc/resolv.conf", &st) == 0 && S_ISREG(st.st_mode)) {
                if (mount(RESOLV_CONF, "/etc/resolv.conf", NULL, MS_BIND, NULL) < 0)
                        log_warn("bind %s on /etc/resolv.conf: %m", RESOLV_CONF);
                return;
        }
        (void) unlink("/etc/resolv.conf.space");
        if (symlink(RESOLV_CONF, "/etc/resolv.conf.space") < 0 ||
            rename("/etc/resolv.conf.space", "/etc/resolv.conf") < 0)
                log_warn("point /etc/resolv.conf at %s: %m", RESOLV_CONF);
}
