/* SPDX-License-Identifier: Apache-2.0 */

/*
 * QEMU's own user, mount, pid, network, IPC and UTS namespaces (ARCHITECTURE.md, decision 12). An escaped QEMU
 * runs as the user, and seccomp alone leaves it every file the user can reach (the state database, the home
 * directory, every other sandbox's disk and sockets), every process it may signal and the user's whole
 * network. In its namespaces it sees a read-only tmpfs holding only what it needs, each bound at the path it
 * has outside, so QEMU's command line and the sockets the daemon connects to are the same as without them; it
 * is pid 1 and alone, and its network is a loopback that is down.
 *
 * Done by hand in the forked children rather than with bwrap: no process stays between setsid and QEMU (the
 * pid the daemon records and vm_pid_alive() checks stays QEMU's), and no new dependency.
 *
 * vm_jail_new() runs in the daemon and does everything that allocates; vm_jail_unshare() (in the helper that
 * forks QEMU) and vm_jail_enter() (in QEMU's process) run between fork and exec in a copy of a multi-threaded
 * process, so they only make system calls on what was prepared.
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <endian.h>
#include <linux/securebits.h>

#include "vm/vmm.h"
#include "macro.h"
#include "paths.h"
#include "vm/vmm-internal.h"

/* QEMU's new root is a tmpfs mounted here in its own mount namespace (nothing of it shows outside). Sources
 * are bound from O_PATH fds opened first, so a state or run directory under /tmp is still reachable once it is
 * covered. */
#define JAIL_STAGE "/tmp"
/* A qcow2 chain deeper than this is not ours (disk.c keeps far fewer layers in a chain). */
#define JAIL_CHAIN_MAX 512

enum {
        JAIL_RW = 1 << 0,   /* writable (else remounted read-only) */
        JAIL_DEV = 1 << 1,  /* a device node: no nodev */
        JAIL_DIR = 1 << 2,  /* the mount point is a directory (else an empty file) */
        JAIL_LINK = 1 << 3, /* a symlink to `link` instead of a bind */
};

typedef struct JailMount {
        int fd;             /* O_PATH of the source, opened in the child: a bind's source must be in the
                             * caller's mount namespace, so one opened before unshare() gives EINVAL */
        char src[32];       /* /proc/self/fd/N */
        char *path;         /* the source, and the path inside */
        char *dst;          /* JAIL_STAGE + path */
        char *link;
        unsigned flags;
} JailMount;

struct VmJail {
        VmConfine mode;
        char uid_map[64], gid_map[64];
        JailMount *m;
        size_t n;
};

VmJail *vm_jail_free(VmJail *j) {
        if (!j)
                return NULL;
        for (size_t i = 0; i < j->n; i++) {
                free(j->m[i].path);
                free(j->m[i].dst);
                free(j->m[i].link);
        }
        free(j->m);
        free(j);
        return NULL;
}

const char *vm_jail_step_name(const VmJail *j, int step, char *buf, size_t size) {
        switch (step) {
        case JAIL_STEP_USERNS:
                return "user and pid namespaces";
        case JAIL_STEP_NETNS:
                return "network, IPC and UTS namespaces";
        case JAIL_STEP_MNTNS:
                return "mount namespace";
        case JAIL_STEP_MAPS:
                return "uid/gid map";
        case JAIL_STEP_ROOT:
                return "new root";
        case JAIL_STEP_PIVOT:
                return "pivot_root";
        case JAIL_STEP_CAPS:
                return "dropping capabilities";
        }
        if (!j || step < 0 || (size_t) step >= j->n)
                return "?";
        snprintf(buf, size, "bind %s", j->m[step].path);
        return buf;
}

VmConfine vm_jail_mode(const VmJail *j) {
        return j ? j->mode : VM_CONFINE_OFF;
}

bool vm_jail_refused(int step, int err) {
        switch (step) {
        case JAIL_STEP_USERNS:
        case JAIL_STEP_NETNS:
        case JAIL_STEP_MNTNS:
                /* sysctls and limits (EPERM, ENOSPC, EUSERS), seccomp (EPERM, ENOSYS), no kernel support */
                return IN_SET(err, EPERM, EACCES, EINVAL, ENOSPC, EUSERS, ENOSYS);
        case JAIL_STEP_MAPS:
        case JAIL_STEP_ROOT:
                /* AppArmor's restricted user namespaces: unshare() works, but nothing may be done in them */
                return IN_SET(err, EPERM, EACCES);
        }
        return false;
}

static int jail_alloc(VmConfine mode, VmJail **ret) {
        VmJail *j = calloc(1, sizeof(VmJail));

        if (!j)
                return -ENOMEM;
        j->mode = mode;
        snprintf(j->uid_map, sizeof(j->uid_map), "%u %u 1\n", (unsigned) getuid(), (unsigned) getuid());
        snprintf(j->gid_map, sizeof(j->gid_map), "%u %u 1\n", (unsigned) getgid(), (unsigned) getgid());
        *ret = j;
        return 0;
}

/* A new entry for path (its place in the staging tree made up), not yet counted: the caller fills in the
 * rest and counts it (j->n++) once nothing can fail any more. */
static int jail_push(VmJail *j, const char *path, unsigned flags, JailMount **ret) {
        JailMount *nm = realloc(j->m, (j->n + 1) * sizeof(JailMount)), *m;

        if (!nm)
                return -ENOMEM;
        j->m = nm;
        m = &j->m[j->n];
        *m = (JailMount) { .fd = -1, .flags = flags };
        if (asprintf(&m->dst, JAIL_STAGE "%s", path) < 0)
                return -ENOMEM;
        m->path = strdup(path);
        if (!m->path) {
                free(m->dst);
                return -ENOMEM;
        }
        *ret = m;
        return 0;
}

static int jail_add_link(VmJail *j, const char *path, const char *target) {
        JailMount *m;
        int r = jail_push(j, path, JAIL_LINK, &m);

        if (r < 0)
                return r;
        m->link = strdup(target);
        if (!m->link) {
                free(m->dst);
                free(m->path);
                return -ENOMEM;
        }
        j->n++;
        return 0;
}

/* Binds path at the same path inside. A missing optional path is skipped. */
static int jail_add(VmJail *j, const char *path, unsigned flags, bool optional) {
        struct stat st;
        JailMount *m;
        int r;

        if (!path || path[0] != '/')
                return -EINVAL;
        /* Bound twice (a kernel next to the disk, say): once is enough, and the writable one wins. */
        for (size_t i = 0; i < j->n; i++)
                if (streq(j->m[i].path, path)) {
                        j->m[i].flags |= flags & JAIL_RW;
                        return 0;
                }
        /* Inside a directory bound read-only already (an installed kernel under /usr/local/lib/space, inside
         * /usr): it is there, and no mount point could be made for it in a read-only bind. */
        for (size_t i = 0; i < j->n; i++)
                if ((j->m[i].flags & JAIL_DIR) && !(j->m[i].flags & (JAIL_RW | JAIL_LINK)) && !(flags & JAIL_RW) &&
                    strncmp(path, j->m[i].path, strlen(j->m[i].path)) == 0 && path[strlen(j->m[i].path)] == '/')
                        return 0;

        if (stat(path, &st) < 0)
                return optional && errno == ENOENT ? 0 : -errno;

        r = jail_push(j, path, flags | (S_ISDIR(st.st_mode) ? JAIL_DIR : 0), &m);
        if (r < 0)
                return r;
        j->n++;
        return 0;
}

/* Whether path is a direct entry of dir. */
static bool path_under(const char *path, const char *dir) {
        size_t n = strlen(dir);
        return strncmp(path, dir, n) == 0 && path[n] == '/' && path[n + 1] && !strchr(path + n + 1, '/');
}

/* The top-level entries QEMU's libraries are found under: on a merged /usr they are symlinks into it. */
static int jail_add_system(VmJail *j) {
        static const char *const top[] = { "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };
        int r;

        r = jail_add(j, "/usr", 0, false);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(top); i++) {
                char target[PATH_MAX];
                ssize_t k = readlink(top[i], target, sizeof(target) - 1);
                if (k > 0) {
                        target[k] = 0;
                        r = jail_add_link(j, top[i], target);
                } else
                        r = jail_add(j, top[i], 0, true);
                if (r < 0)
                        return r;
        }
        /* The dynamic loader's cache; without it ld.so searches the default directories, which works but
         * is slower. */
        return jail_add(j, "/etc/ld.so.cache", 0, true);
}

/* The name of path's backing file from its qcow2 header, made absolute; NULL when it has none or is not
 * qcow2. The same reading as disk.c's, which this layer below it cannot include. */
static int qcow2_backing(const char *path, char **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        uint8_t h[20];
        uint64_t off;
        uint32_t len;

        *ret = NULL;
        if (fd < 0)
                return -errno;
        if (pread(fd, h, sizeof h, 0) != (ssize_t) sizeof h || memcmp(h, "QFI\xfb", 4) != 0)
                return 0;
        memcpy(&off, h + 8, 8);
        memcpy(&len, h + 16, 4);
        off = be64toh(off);
        len = be32toh(len);
        if (off == 0 || len == 0)
                return 0;
        if (len >= PATH_MAX || off > 65536)
                return -EBADMSG;
        _cleanup_free_ char *name = calloc(1, len + 1);
        if (!name)
                return -ENOMEM;
        if (pread(fd, name, len, (off_t) off) != (ssize_t) len)
                return -EIO;
        if (strchr(name, ':'))
                return -EMEDIUMTYPE; /* a protocol (nbd:, json:): never one of ours */
        if (name[0] == '/') {
                *ret = TAKE_PTR(name);
                return 0;
        }
        /* Relative names are relative to the image's directory, as QEMU reads them. */
        const char *slash = strrchr(path, '/');
        if (asprintf(ret, "%.*s/%s", (int) (slash - path), path, name) < 0)
                return -ENOMEM;
        return 0;
}

int vm_jail_new(const VmConfig *c, const char *binary, VmJail **ret, Error *reterr) {
        _cleanup_(vm_jail_freep) VmJail *j = NULL;
        int r;

        if (!c || !ret)
                return -EINVAL;
        *ret = NULL;
        if (c->confine == VM_CONFINE_OFF)
                return 0;

        r = jail_alloc(c->confine, &j);
        if (r < 0)
                return r;
        r = jail_add_system(j);
        if (r < 0)
                goto fail;
        if (strncmp(binary, "/usr/", 5) != 0 && (r = jail_add(j, binary, 0, false)) < 0)
                goto fail;
        /* Sockets, pid file, log. */
        if ((r = jail_add(j, c->run_dir, JAIL_RW, false)) < 0 || (r = jail_add(j, c->kernel, 0, false)) < 0 ||
            (c->initrd && (r = jail_add(j, c->initrd, 0, false)) < 0))
                goto fail;

        /* The base memory file. A sandbox maps it privately (share=off) and never writes it, but QEMU 7.2
         * opens it O_RDWR whatever share= says (file_ram_open()), and readonly=on maps guest RAM read-only
         * too: writable it stays until QEMU has rom=off (8.2), and then it can be bound read-only. While a base snapshot is built QEMU creates the file: make it
         * here, empty, so there is something to bind (QEMU sizes an empty file itself). */
        if (c->mem_share) {
                _cleanup_close_ int fd = open(c->mem_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0) {
                        r = -errno;
                        goto fail;
                }
        }
        if ((r = jail_add(j, c->mem_path, JAIL_RW, false)) < 0)
                goto fail;

        /* The disk, and for qcow2 its backing chain, which QEMU opens read-only by the names in the headers.
         * A disk in disk_dir comes with it: the daemon links the layers of later checkpoints there, and
         * takes the link away once one is frozen, so that only the top is ever writable in here. */
        if (c->disk && c->disk_dir &&
            ((r = jail_add(j, c->disk_dir, JAIL_RW, false)) < 0 || !path_under(c->disk, c->disk_dir))) {
                r = r < 0 ? r : -EINVAL;
                goto fail;
        }
        if (c->disk && !c->disk_dir && (r = jail_add(j, c->disk, JAIL_RW, false)) < 0)
                goto fail;
        if (c->disk && streq(c->disk_format, "qcow2")) {
                _cleanup_free_ char *cur = strdup(c->disk);
                if (!cur) {
                        r = -ENOMEM;
                        goto fail;
                }
                for (unsigned depth = 0;; depth++) {
                        char *next = NULL;
                        if (depth >= JAIL_CHAIN_MAX) {
                                r = -ELOOP;
                                goto fail;
                        }
                        r = qcow2_backing(cur, &next);
                        if (r < 0)
                                goto fail;
                        free(cur);
                        cur = next;
                        if (!cur)
                                break;
                        if ((r = jail_add(j, cur, 0, false)) < 0)
                                goto fail;
                }
        }

        /* Devices by bind: a user namespace cannot mknod. */
        if ((r = jail_add(j, "/dev/null", JAIL_RW | JAIL_DEV, false)) < 0 ||
            (r = jail_add(j, "/dev/zero", JAIL_RW | JAIL_DEV, true)) < 0 ||
            (r = jail_add(j, "/dev/urandom", JAIL_RW | JAIL_DEV, true)) < 0 ||
            (r = jail_add(j, "/dev/random", JAIL_RW | JAIL_DEV, true)) < 0 ||
            (c->accel == VM_ACCEL_KVM && (r = jail_add(j, "/dev/kvm", JAIL_RW | JAIL_DEV, false)) < 0))
                goto fail;

        *ret = TAKE_PTR(j);
        return 0;
fail:
        (void) error_set(reterr, ERROR_INTERNAL, "cannot prepare QEMU's namespace: %s", strerror(-r));
        return r;
}

/* ---- between fork and exec: system calls only ---- */

static int write_all(const char *path, const char *s) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t n = strlen(s);
        ssize_t k = write(fd, s, n);
        int e = errno;
        (void) close(fd);
        return k == (ssize_t) n ? 0 : -(k < 0 ? e : EIO);
}

/* A remount inside a user namespace must keep the flags it inherited locked (nosuid, nodev, noexec, atime),
 * or the kernel refuses it. */
static unsigned long locked_flags(const char *path) {
        struct statvfs sv;
        unsigned long f = 0;

        if (statvfs(path, &sv) < 0)
                return 0;
        if (sv.f_flag & ST_NOSUID)
                f |= MS_NOSUID;
        if (sv.f_flag & ST_NODEV)
                f |= MS_NODEV;
        if (sv.f_flag & ST_NOEXEC)
                f |= MS_NOEXEC;
        if (sv.f_flag & ST_NOATIME)
                f |= MS_NOATIME;
        if (sv.f_flag & ST_NODIRATIME)
                f |= MS_NODIRATIME;
        if (sv.f_flag & ST_RELATIME)
                f |= MS_RELATIME;
        return f;
}

/* snprintf is not async-signal-safe. */
static void fd_path(char *buf, int fd) {
        char digits[12];
        int n = 0;

        do
                digits[n++] = (char) ('0' + fd % 10);
        while ((fd /= 10) > 0);
        strcpy(buf, "/proc/self/fd/");
        buf += strlen(buf);
        while (n > 0)
                *buf++ = digits[--n];
        *buf = 0;
}

static int bind_one(const JailMount *m) {
        int r = space_mkdir_parents(m->dst);
        if (r < 0)
                return r;
        if (m->flags & JAIL_LINK)
                return symlink(m->link, m->dst) < 0 && errno != EEXIST ? -errno : 0;
        if (m->flags & JAIL_DIR) {
                if (mkdir(m->dst, 0755) < 0 && errno != EEXIST)
                        return -errno;
        } else {
                int fd = open(m->dst, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
                if (fd < 0)
                        return -errno;
                (void) close(fd);
        }
        if (mount(m->src, m->dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                return -errno;
        unsigned long f = MS_BIND | MS_REMOUNT | MS_NOSUID | locked_flags(m->dst);
        if (!(m->flags & JAIL_DEV))
                f |= MS_NODEV;
        if (!(m->flags & JAIL_RW))
                f |= MS_RDONLY;
        return mount(NULL, m->dst, NULL, f, NULL) < 0 ? -errno : 0;
}

int vm_jail_unshare(VmJail *j, int *ret_step) {
        int r;

        *ret_step = JAIL_STEP_USERNS;
        if (!j)
                return 0;
        /* A pid namespace of its own: QEMU can then signal no process but itself (a user namespace alone
         * keeps it from tracing others, not from killing or stopping them). */
        if (unshare(CLONE_NEWUSER | CLONE_NEWPID) < 0)
                return -errno;
        /* The user's uid and gid map to themselves: files keep their owners, and QEMU's sockets belong to the
         * user outside. */
        *ret_step = JAIL_STEP_MAPS;
        if ((r = write_all("/proc/self/setgroups", "deny")) < 0 || (r = write_all("/proc/self/uid_map", j->uid_map)) < 0 ||
            (r = write_all("/proc/self/gid_map", j->gid_map)) < 0)
                return r;
        /* QEMU needs no network: its sockets are unix sockets by path (which any network namespace reaches) and
         * snapshots come as fds. So its own, with a loopback that stays down: no host address, LAN or metadata
         * service, no loopback server and no abstract unix socket (an X server's) of the host's. IPC: the
         * host's System V objects and POSIX message queues; UTS because it costs nothing. */
        *ret_step = JAIL_STEP_NETNS;
        if (unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0)
                return -errno;
        return 0;
}

int vm_jail_enter(VmJail *j, int *ret_step) {
        int r;

        *ret_step = JAIL_STEP_MNTNS;
        if (!j)
                return 0;
        if (unshare(CLONE_NEWNS) < 0)
                return -errno;
        /* Nothing mounted here propagates back to the host. */
        *ret_step = JAIL_STEP_ROOT;
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        for (size_t i = 0; i < j->n; i++) {
                if (j->m[i].flags & JAIL_LINK)
                        continue;
                *ret_step = (int) i;
                j->m[i].fd = open(j->m[i].path, O_PATH | O_CLOEXEC);
                if (j->m[i].fd < 0)
                        return -errno;
                fd_path(j->m[i].src, j->m[i].fd);
        }
        *ret_step = JAIL_STEP_ROOT;
        if (mount("tmpfs", JAIL_STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k,nr_inodes=4096") < 0)
                return -errno;
        for (size_t i = 0; i < j->n; i++) {
                *ret_step = (int) i;
                if ((r = bind_one(&j->m[i])) < 0)
                        return r;
        }
        *ret_step = JAIL_STEP_PIVOT;
        if (chdir(JAIL_STAGE) < 0)
                return -errno;
        /* pivot_root(".", "."): the old root ends up on top of the new one, and the detach below drops it and
         * with it every path of the host that was not bound. */
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                return -errno;
        if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
                return -errno;
        if (mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
                return -errno;

        *ret_step = JAIL_STEP_CAPS;
        /* The namespace gave us every capability in it, and root keeps them across exec: drop them all, so
         * QEMU cannot undo the read-only binds or unmount its way out, whoever runs the daemon. */
        for (unsigned long cap = 0; cap <= 63; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
                        return -errno;
        (void) prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

/* ---- in the daemon: can QEMU be confined here, and if not, why ---- */

static bool sysctl_value(const char *name, long *ret) {
        char path[128], buf[32];
        _cleanup_close_ int fd = -1;
        ssize_t n;

        snprintf(path, sizeof path, "/proc/sys/%s", name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || (n = read(fd, buf, sizeof buf - 1)) <= 0)
                return false;
        buf[n] = 0;
        return sscanf(buf, "%ld", ret) == 1;
}

/* The first of the user.max_*_namespaces limits of step's namespaces that is 0, as "user.max_X_namespaces". */
static const char *zero_limit(int step) {
        static const char *const user[] = { "user/max_user_namespaces", "user/max_pid_namespaces", NULL },
                          *const net[] = { "user/max_net_namespaces", "user/max_ipc_namespaces",
                                           "user/max_uts_namespaces", NULL },
                          *const mnt[] = { "user/max_mnt_namespaces", NULL };
        const char *const *l = step == JAIL_STEP_USERNS ? user : step == JAIL_STEP_NETNS ? net : mnt;
        long v;

        for (; *l; l++)
                if (sysctl_value(*l, &v) && v == 0)
                        return *l + strlen("user/");
        return NULL;
}

int vm_confine_explain(const VmJail *j, int step, int err, char **ret) {
        char buf[PATH_MAX + 16], hint[256] = "";
        const char *limit;
        long v;

        /* Root may make user namespaces whatever unprivileged_userns_clone says. */
        if (step == JAIL_STEP_USERNS && geteuid() != 0 && sysctl_value("kernel/unprivileged_userns_clone", &v) && v == 0)
                snprintf(hint, sizeof hint, "kernel.unprivileged_userns_clone is 0, which forbids user namespaces "
                         "to users other than root; sysctl kernel.unprivileged_userns_clone=1 allows them");
        else if (IN_SET(err, EPERM, EACCES) && sysctl_value("kernel/apparmor_restrict_unprivileged_userns", &v) && v != 0)
                snprintf(hint, sizeof hint, "AppArmor restricts unprivileged user namespaces "
                         "(kernel.apparmor_restrict_unprivileged_userns is %ld); an AppArmor profile for spaced "
                         "that allows userns lifts it, as sysctl kernel.apparmor_restrict_unprivileged_userns=0 "
                         "does for every program", v);
        else if (err == ENOSPC && (limit = zero_limit(step)))
                snprintf(hint, sizeof hint, "user.%s is 0 (/proc/sys/user/%s), which allows none; sysctl "
                         "user.%s=N allows N", limit, limit, limit);
        else if (err == ENOSPC)
                snprintf(hint, sizeof hint, "a limit of /proc/sys/user/max_*_namespaces is reached");
        else if (err == EUSERS)
                snprintf(hint, sizeof hint, "user namespaces nest 32 deep at most, and spaced runs that deep");
        else if (IN_SET(err, EPERM, ENOSYS) && step != JAIL_STEP_MAPS)
                snprintf(hint, sizeof hint, "a seccomp filter or security module refuses unshare(2), as a "
                         "container's default profile does");
        else if (err == EINVAL && step != JAIL_STEP_MAPS)
                snprintf(hint, sizeof hint, "the kernel lacks these namespaces (CONFIG_USER_NS and the like)");

        return asprintf(ret, "%s: %s%s%s", vm_jail_step_name(j, step, buf, sizeof buf), strerror(err),
                        hint[0] ? "; " : "", hint) < 0 ? -ENOMEM : 0;
}

/* The probe's child reports the step that failed and its errno, as the spawn helpers do. */
static void probe_report(int fd, int step, int err) {
        int m[2] = { step, err };
        (void) !write(fd, m, sizeof m);
}

int vm_confine_probe(char **ret_reason) {
        _cleanup_(vm_jail_freep) VmJail *j = NULL;
        _cleanup_close_ int rfd = -1, wfd = -1;
        int p[2], m[2], r;
        pid_t pid;

        *ret_reason = NULL;
        r = jail_alloc(VM_CONFINE_ON, &j);
        if (r < 0)
                return r;
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        rfd = p[0];
        wfd = p[1];
        /* What vm_spawn()'s helpers do, with nothing bound: namespaces, maps, a new root, no capabilities. */
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int step, k = vm_jail_unshare(j, &step);
                if (k < 0) {
                        probe_report(wfd, step, -k);
                        _exit(1);
                }
                pid_t g = fork();
                if (g < 0) {
                        probe_report(wfd, JAIL_STEP_USERNS, errno);
                        _exit(1);
                }
                if (g == 0) {
                        k = vm_jail_enter(j, &step);
                        if (k < 0)
                                probe_report(wfd, step, -k);
                        _exit(k < 0);
                }
                int st = 0;
                while (waitpid(g, &st, 0) < 0 && errno == EINTR)
                        ;
                _exit(WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1);
        }
        wfd = safe_close(wfd);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        ssize_t n;
        while ((n = read(rfd, m, sizeof m)) < 0 && errno == EINTR)
                ;
        if (n == (ssize_t) sizeof m) {
                r = vm_confine_explain(j, m[0], m[1], ret_reason);
                return r < 0 ? r : -m[1];
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        *ret_reason = strdup("the probe of QEMU's namespaces died without a word");
        return -EIO;
}
