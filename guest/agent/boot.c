/* SPDX-License-Identifier: Apache-2.0 */

/* Boot duties of PID 1: kernel filesystems, modules, the root switch, finding the agent port. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>

#include "../../lib/macro.h"
#include "agent.h"

static void sleep_ms(long ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
        (void) nanosleep(&ts, NULL);
}

static void mount_one(const char *src, const char *dst, const char *type, unsigned long flags, const char *opts) {
        (void) mkdir(dst, 0755);
        if (mount(src, dst, type, flags, opts) < 0 && errno != EBUSY)
                log_warn("mount %s on %s: %m", type, dst);
}

static bool is_mountpoint(const char *path) {
        struct stat a, b;
        char parent[4096];

        if (stat(path, &a) < 0)
                return false;
        (void) snprintf(parent, sizeof parent, "%s/..", path);
        if (stat(parent, &b) < 0)
                return false;
        return a.st_dev != b.st_dev || a.st_ino == b.st_ino;
}

void boot_early(void) {
        struct rlimit rl;

        mount_one("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
        mount_one("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
        mount_one("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
        log_open();

        /* Without /dev/console in the initramfs we start with no fds 0-2; pipes would land there. */
        for (int fd = 0; fd < 3; fd++)
                if (fcntl(fd, F_GETFD) < 0) {
                        int n = open("/dev/null", O_RDWR | O_NOCTTY);
                        if (n >= 0 && n != fd) {
                                (void) dup2(n, fd);
                                (void) close(n);
                        }
                }

        /* Each process costs us 3 fds. */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
}

void boot_load_modules(const char *dir) {
        _cleanup_fclose_ FILE *f = NULL;
        char path[4096], line[256];

        (void) snprintf(path, sizeof path, "%s/order", dir);
        f = fopen(path, "re");
        if (!f) {
                if (errno != ENOENT)
                        log_warn("open %s: %m", path);
                return;
        }

        while (fgets(line, sizeof line, f)) {
                _cleanup_close_ int fd = -1;

                line[strcspn(line, "\r\n")] = 0;
                if (line[0] == 0 || line[0] == '#')
                        continue;
                if (line[0] == '/')
                        (void) snprintf(path, sizeof path, "%s", line);
                else
                        (void) snprintf(path, sizeof path, "%s/%s", dir, line);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        log_warn("module %s: %m", path);
                        continue;
                }
                if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
                        log_warn("finit_module %s: %m", path);
        }
}

/* Copies the value of "key=" from the kernel command line. */
static void cmdline_get(const char *cmdline, const char *key, char *out, size_t size) {
        size_t kl = strlen(key);

        for (const char *p = cmdline; *p;) {
                size_t wl;

                p += strspn(p, " \t\n");
                wl = strcspn(p, " \t\n");
                if (wl > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
                        size_t vl = wl - kl - 1;
                        if (vl >= size)
                                vl = size - 1;
                        memcpy(out, p + kl + 1, vl);
                        out[vl] = 0;
                }
                p += wl;
        }
}

void boot_read_cmdline(BootConfig *ret) {
        _cleanup_fclose_ FILE *f = NULL;
        char cmdline[4096] = "";

        *ret = (BootConfig) {};
        f = fopen("/proc/cmdline", "re");
        if (f && !fgets(cmdline, sizeof cmdline, f))
                cmdline[0] = 0;

        cmdline_get(cmdline, "space.root", ret->root, sizeof ret->root);
        cmdline_get(cmdline, "space.rootfstype", ret->rootfstype, sizeof ret->rootfstype);
        if (ret->rootfstype[0] == 0)
                strcpy(ret->rootfstype, "ext4");
}

/* Empties the initramfs we are leaving, as switch_root does, so its files do not pin guest memory. Stays on
 * one filesystem: mounts (the new root, /dev, ...) are never entered. */
static void delete_contents(int dfd, dev_t dev) {
        _cleanup_closedir_ DIR *d = fdopendir(dfd);
        struct dirent *de;

        if (!d) {
                (void) close(dfd);
                return;
        }
        while ((de = readdir(d))) {
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != dev)
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0)
                                delete_contents(sub, dev);
                        (void) unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
                } else
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        }
}

static void free_initramfs(void) {
        struct statfs sfs;
        struct stat st;
        int fd;

        if (statfs("/", &sfs) < 0 || (sfs.f_type != RAMFS_MAGIC && sfs.f_type != TMPFS_MAGIC) || stat("/", &st) < 0)
                return;
        fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0)
                delete_contents(fd, st.st_dev);
}

int boot_switch_root(const BootConfig *c) {
        static const char *const moved[] = { "/dev", "/proc", "/sys" };
        char path[64];

        if (c->root[0] == 0)
                return 0;

        /* virtio_blk probes asynchronously after the module loads. */
        for (int i = 0; access(c->root, F_OK) < 0 && i < 500; i++)
                sleep_ms(10);

        (void) mkdir("/newroot", 0755);
        if (mount(c->root, "/newroot", c->rootfstype, 0, NULL) < 0) {
                int r = -errno;
                log_err("mount %s (%s) on /newroot: %m; staying in the initramfs", c->root, c->rootfstype);
                return r;
        }

        for (size_t i = 0; i < ELEMENTSOF(moved); i++) {
                (void) snprintf(path, sizeof path, "/newroot%s", moved[i]);
                (void) mkdir(path, 0755);
                if (mount(moved[i], path, NULL, MS_MOVE, NULL) < 0)
                        log_warn("move %s: %m", moved[i]);
        }

        /* What switch_root does, minus exec: we stay PID 1, running from memory. */
        free_initramfs();
        if (chdir("/newroot") < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
            chdir("/") < 0) {
                int r = -errno;
                log_err("switch to the new root: %m");
                return r;
        }
        return 1;
}

void boot_late_mounts(void) {
        _cleanup_fclose_ FILE *f = NULL;
        char name[256];

        if (!is_mountpoint("/tmp"))
                mount_one("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
        if (!is_mountpoint("/run"))
                mount_one("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
        if (!is_mountpoint("/dev/pts"))
                mount_one("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "gid=5,mode=620,ptmxmode=666");
        if (!is_mountpoint("/dev/shm"))
                mount_one("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");

        f = fopen("/etc/hostname", "re");
        if (f && fgets(name, sizeof name, f)) {
                name[strcspn(name, " \t\r\n")] = 0;
                if (name[0] && sethostname(name, strlen(name)) < 0)
                        log_warn("sethostname: %m");
        }
}

/* Finds /sys/class/virtio-ports/vportNpM whose name is `name`, waiting for it to appear. */
int boot_open_port(const char *name, int timeout_ms) {
        for (int waited = 0;; waited += 10) {
                _cleanup_closedir_ DIR *d = opendir("/sys/class/virtio-ports");
                struct dirent *de;

                while (d && (de = readdir(d))) {
                        _cleanup_fclose_ FILE *f = NULL;
                        char path[512], buf[128] = "";
                        int fd;

                        if (de->d_name[0] == '.')
                                continue;
                        (void) snprintf(path, sizeof path, "/sys/class/virtio-ports/%s/name", de->d_name);
                        f = fopen(path, "re");
                        if (!f || !fgets(buf, sizeof buf, f))
                                continue;
                        buf[strcspn(buf, "\n")] = 0;
                        if (!streq(buf, name))
                                continue;

                        (void) snprintf(path, sizeof path, "/dev/%s", de->d_name);
                        fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
                        if (fd >= 0)
                                return fd;
                        /* devtmpfs may not have the node yet */
                }

                if (waited >= timeout_ms)
                        return -ENOENT;
                sleep_ms(10);
        }
}
