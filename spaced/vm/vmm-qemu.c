/* SPDX-License-Identifier: Apache-2.0 */

/*
 * The QEMU -M microvm driver: command line, detached spawn, process helpers and snapshot save/restore over QMP
 * (qmp.c). See vmm.h for the contract and reference/vmm-notes.md §7 for why each step is there.
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf, close_range */
#endif

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/kvm.h>

#include <cJSON.h>

#include "vm/vmm.h"
#include "macro.h"
#include "vm/vmm-internal.h"

/* The guest console goes to an in-QEMU ring buffer: a hostile guest can write to hvc0 forever, and a file
 * chardev would grow without bound. Read it with vm_console_read() while QEMU runs. */
#define VM_CONSOLE_RING_SIZE (128U * 1024U)
/* How long vm_spawn() waits for QEMU to get past argument parsing (the QMP socket appears). */
#define VM_SPAWN_START_TIMEOUT_MS 10000
#define VM_LOG_TAIL_MAX 2048U
/* Far above any disk; QEMU 7.2's default of 128 MiB/s makes snapshots crawl (vmm-notes §7). */
#define VM_MIGRATE_MAX_BANDWIDTH "68719476736"


static void cjson_deletep(cJSON **j) {
        if (*j)
                cJSON_Delete(*j);
}
#define _cleanup_cjson_ _cleanup_(cjson_deletep)

/* ---- accelerator and host facts ---- */

unsigned vm_host_tsc_khz(void) {
        char line[256];

        {
                _cleanup_fclose_ FILE *f = fopen("/sys/devices/system/cpu/cpu0/tsc_freq_khz", "re");
                unsigned long khz;
                if (f && fgets(line, sizeof(line), f) && sscanf(line, "%lu", &khz) == 1 && khz > 0 &&
                    khz < UINT_MAX)
                        return (unsigned) khz;
        }

        /* "cpu MHz : 2100.000": on hosts with a constant TSC (and in VMs) this is the TSC rate. */
        _cleanup_fclose_ FILE *f = fopen("/proc/cpuinfo", "re");
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f)) {
                unsigned long mhz = 0, frac = 0;
                int fracdigits = 0;
                char *p;

                if (strncmp(line, "cpu MHz", 7) != 0 || !(p = strchr(line, ':')))
                        continue;
                p++;
                while (*p == ' ' || *p == '\t')
                        p++;
                if (!isdigit((unsigned char) *p))
                        return 0;
                mhz = strtoul(p, &p, 10);
                if (*p == '.')
                        for (p++; isdigit((unsigned char) *p) && fracdigits < 3; p++, fracdigits++)
                                frac = frac * 10 + (unsigned long) (*p - '0');
                for (; fracdigits < 3; fracdigits++)
                        frac *= 10;
                if (mhz == 0 || mhz > 100000)
                        return 0;
                return (unsigned) (mhz * 1000 + frac);
        }
        return 0;
}

/* ---- command line ---- */

typedef struct Strv {
        char **v;
        size_t n;
        int error;
} Strv;

static void strv_add(Strv *s, const char *str) {
        if (s->error)
                return;
        char *c = strdup(str);
        char **nv = c ? realloc(s->v, (s->n + 2) * sizeof(char *)) : NULL;
        if (!nv) {
                free(c);
                s->error = -ENOMEM;
                return;
        }
        s->v = nv;
        s->v[s->n++] = c;
        s->v[s->n] = NULL;
}

static void strv_addf(Strv *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void strv_addf(Strv *s, const char *fmt, ...) {
        va_list ap;
        char *m;

        if (s->error)
                return;
        va_start(ap, fmt);
        int r = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (r < 0) {
                s->error = -ENOMEM;
                return;
        }
        strv_add(s, m);
        free(m);
}

/* QEMU's option parser splits on ',' and reads ",," as a literal comma. */
static char *qemu_opt_escape(const char *s) {
        size_t n = 0;
        for (const char *p = s; *p; p++)
                n += *p == ',' ? 2 : 1;
        char *r = malloc(n + 1), *o = r;
        if (!r)
                return NULL;
        for (const char *p = s; *p; p++) {
                *o++ = *p;
                if (*p == ',')
                        *o++ = ',';
        }
        *o = 0;
        return r;
}

static bool path_ok(const char *p) {
        /* Absolute, so "-drive file=" never reads it as a protocol ("nbd:...") and the cmdline names the run
         * dir exactly as vm_pid_alive() looks for it. */
        return p && p[0] == '/' && !strchr(p, '\n');
}

/* The devices and monitors: a restore's must be the saved VM's (but the monitors and -no-shutdown, which are
 * not device state). */
static void add_devices(Strv *v, const VmConfig *c, const char *run, const char *disk) {
        strv_add(v, "-device");
        strv_add(v, "virtio-serial-device");
        strv_add(v, "-chardev");
        strv_addf(v, "socket,path=%s/agent.sock,server=on,wait=off,id=agent0", run);
        strv_add(v, "-device");
        strv_add(v, "virtserialport,chardev=agent0,name=agent");
        strv_add(v, "-chardev");
        strv_addf(v, "ringbuf,id=con0,size=%u", VM_CONSOLE_RING_SIZE);
        strv_add(v, "-device");
        strv_add(v, "virtconsole,chardev=con0");
        if (c->disk) {
                strv_add(v, "-drive");
                strv_addf(v, "file=%s,if=none,id=d0,format=%s,cache=none,aio=threads,discard=unmap", disk,
                          c->disk_format);
                strv_add(v, "-device");
                strv_add(v, "virtio-blk-device,drive=d0");
        }
        /* A panicking kernel says so (the guest's pvpanic_mmio, ACPI QEMU0001): QEMU then stops the VM in
         * guest-panicked, which vm_events_watch() reports, even when root in the guest set kernel.panic=0 and
         * the kernel would spin instead of resetting. QEMU 7.2's pvpanic has no device state and microvm's
         * ACPI tables are a resizable block, so snapshots made before it was added restore with it (their
         * guests never bound it: their panics still show as a reset, held by -no-shutdown). */
        strv_add(v, "-device");
        strv_add(v, "pvpanic");
        /* -chardev + -mon rather than "-qmp unix:PATH,...": the same thing, with ",," escaping that works. */
        strv_add(v, "-chardev");
        strv_addf(v, "socket,id=qmp0,path=%s/qmp.sock,server=on,wait=off", run);
        strv_add(v, "-mon");
        strv_add(v, "chardev=qmp0,mode=control");
        /* A second monitor that the daemon's event loop holds for QEMU's events alone (vm-events-watch.c), so
         * that a guest panic or a KVM internal error is seen while the first one serves blocking commands on
         * workers. Monitors are no device: a snapshot saved without this one restores with it. */
        strv_add(v, "-chardev");
        strv_addf(v, "socket,id=qmp1,path=%s/" VM_EVENTS_SOCKET ",server=on,wait=off", run);
        strv_add(v, "-mon");
        strv_add(v, "chardev=qmp1,mode=control");
        /* A guest that resets (a panic under panic=-1 and -no-reboot) or powers off stays in QEMU, stopped,
         * instead of QEMU exiting: its console still holds why, for the reason its sandbox fails with. The
         * daemon then kills it. Run state, not device state: snapshots made without it restore with it. */
        if (c->hold_at_shutdown)
                strv_add(v, "-no-shutdown");
}

int vm_build_argv(const VmConfig *c, char ***ret_argv) {
        _cleanup_free_ char *run = NULL, *mem = NULL, *disk = NULL;
        Strv s = {};
        unsigned tsc_khz;

        if (!c || !ret_argv)
                return -EINVAL;
        if (!path_ok(c->run_dir) || !path_ok(c->kernel) || (c->disk && !path_ok(c->disk)) ||
            !path_ok(c->mem_path) || (c->initrd && !path_ok(c->initrd)))
                return -EINVAL;
        if (c->disk && (!c->disk_format || !(streq(c->disk_format, "qcow2") || streq(c->disk_format, "raw"))))
                return -EINVAL;
        if (c->vcpus < 1 || c->vcpus > 64 || c->memory_mib < 16 || c->memory_mib > 1024 * 1024)
                return -EINVAL;
        if (c->accel != VM_ACCEL_TCG && c->accel != VM_ACCEL_KVM)
                return -EINVAL;

        run = qemu_opt_escape(c->run_dir);
        mem = qemu_opt_escape(c->mem_path);
        disk = c->disk ? qemu_opt_escape(c->disk) : strdup("");
        if (!run || !mem || !disk)
                return -ENOMEM;

        strv_add(&s, c->qemu_binary ?: "qemu-system-x86_64");
        strv_add(&s, "-M");
        /* The legacy devices named: left to auto, KVM would get no RTC where TCG has one, and a snapshot taken
         * under one accelerator would not hold the other's devices. Under TCG this is the auto set, device for
         * device, so bases made before still restore. */
        strv_add(&s, "microvm,x-option-roms=off,rtc=on,pit=on,pic=on,ioapic2=on,memory-backend=" VM_MEM_BACKEND_ID);
        if (c->accel == VM_ACCEL_KVM) {
                strv_add(&s, "-accel");
                strv_add(&s, "kvm");
                strv_add(&s, "-cpu");
                /* an untrusted guest gets neither nested virtualization nor the host's performance counters */
                strv_add(&s, "host,vmx=off,svm=off,pmu=off");
        } else {
                strv_add(&s, "-accel");
                strv_addf(&s, "tcg,tb-size=%u", c->tcg_cache_mib ?: VM_TCG_CACHE_MIB_DEFAULT);
                strv_add(&s, "-cpu");
                strv_add(&s, "max");
        }
        strv_add(&s, "-m");
        strv_addf(&s, "%" PRIu64 "M", c->memory_mib);
        strv_add(&s, "-smp");
        strv_addf(&s, "%u", c->vcpus);
        strv_add(&s, "-nodefaults");
        strv_add(&s, "-no-user-config");
        strv_add(&s, "-display");
        strv_add(&s, "none");
        /* A guest that reboots (or panics, panic=-1) ends QEMU instead of cold-booting again: the daemon sees the
         * sandbox die rather than a silently reset one. */
        strv_add(&s, "-no-reboot");
        strv_add(&s, "-object");
        strv_addf(&s, "memory-backend-file,id=" VM_MEM_BACKEND_ID ",size=%" PRIu64 "M,mem-path=%s,share=%s",
                  c->memory_mib, mem, c->mem_share ? "on" : "off");
        strv_add(&s, "-kernel");
        strv_add(&s, c->kernel);
        if (c->initrd) {
                strv_add(&s, "-initrd");
                strv_add(&s, c->initrd);
        }

        /* microvm under TCG has no way to calibrate the TSC: without tsc_early_khz the guest hangs at
         * "Marking TSC unstable" (vmm-notes §2). Under TCG the guest TSC is the host's. */
        tsc_khz = c->tsc_khz;
        if (c->accel == VM_ACCEL_TCG && tsc_khz == 0)
                tsc_khz = vm_host_tsc_khz();
        _cleanup_free_ char *tsc = NULL;
        if (c->accel == VM_ACCEL_TCG && tsc_khz > 0 && asprintf(&tsc, " tsc_early_khz=%u tsc=reliable", tsc_khz) < 0)
                return strv_free(s.v), -ENOMEM;
        strv_add(&s, "-append");
        strv_addf(&s, "console=hvc0 quiet%s panic=-1%s%s%s", tsc ?: "", c->disk ? " space.root=/dev/vda" : "",
                  c->kernel_args && c->kernel_args[0] ? " " : "", c->kernel_args ?: "");

        add_devices(&s, c, run, disk);
        strv_add(&s, "-sandbox");
        strv_add(&s, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
        if (c->incoming) {
                strv_add(&s, "-incoming");
                strv_add(&s, "defer");
        }

        if (s.error) {
                strv_free(s.v);
                return s.error;
        }
        *ret_argv = s.v;
        return 0;
}

/* ---- process helpers ---- */

/* Alive and not a zombie: QEMU is not our child, so nobody here reaps it and kill(pid, 0) alone would report a
 * dead QEMU as alive until its real parent gets to it. */
static bool pid_running(pid_t pid) {
        char path[64], buf[512];

        if (pid <= 0)
                return false;
        (void) waitpid(pid, NULL, WNOHANG); /* in case we are its reaper after all (subreaper) */
        if (kill(pid, 0) < 0 && errno == ESRCH)
                return false;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return false;
        buf[n] = 0;
        char *e = strrchr(buf, ')');
        if (!e || e[1] != ' ')
                return false;
        return e[2] != 'Z' && e[2] != 'X' && e[2] != 'x';
}

bool vm_pid_alive(pid_t pid, const char *run_dir) {
        char path[64];
        char *buf = NULL;
        size_t len = 0;

        if (!run_dir || !run_dir[0] || !pid_running(pid))
                return false;

        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int) pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;

        /* QEMU's cmdline is a few KiB; cap what we hold. */
        const size_t cap = 256 * 1024;
        buf = malloc(cap + 1);
        if (!buf)
                return false;
        while (len < cap) {
                ssize_t k = read(fd, buf + len, cap - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                len += (size_t) k;
        }
        buf[len] = 0;

        /* Every file of the run dir appears as "RUN/..." in some argument ("RUN/" so that /x/sb1 does not match
         * /x/sb10), with commas doubled as on the command line we built. */
        _cleanup_free_ char *needle = NULL, *escaped = qemu_opt_escape(run_dir);
        bool found = false;
        if (escaped && asprintf(&needle, "%s/", escaped) >= 0)
                for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
                        if (strstr(buf + i, needle)) {
                                found = true;
                                break;
                        }
        free(buf);
        return found;
}

int vm_kill(pid_t pid, const char *run_dir, int timeout_ms) {
        int64_t deadline = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);

        if (!vm_pid_alive(pid, run_dir))
                return 0;
        if (kill(pid, SIGTERM) < 0)
                return errno == ESRCH ? 0 : -errno;

        for (unsigned i = 0; pid_running(pid); i++) {
                if (remaining_ms(deadline) == 0) {
                        /* Check it is still ours before escalating: the pid may have been reused. */
                        if (!vm_pid_alive(pid, run_dir))
                                return 0;
                        if (kill(pid, SIGKILL) < 0)
                                return errno == ESRCH ? 0 : -errno;
                        for (int j = 0; j < 2000 && pid_running(pid); j++)
                                (void) usleep(1000);
                        return pid_running(pid) ? -ETIMEDOUT : 0;
                }
                (void) usleep(i < 20 ? 1000 : 5000);
        }
        return 0;
}

int vm_log_tail(const char *run_dir, size_t max, char **ret) {
        _cleanup_free_ char *path = NULL;
        struct stat st;

        if (!run_dir || !ret || max == 0)
                return -EINVAL;
        if (asprintf(&path, "%s/qemu.log", run_dir) < 0)
                return -ENOMEM;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        off_t off = st.st_size > (off_t) max ? st.st_size - (off_t) max : 0;
        char *buf = malloc(max + 1);
        if (!buf)
                return -ENOMEM;
        ssize_t n = pread(fd, buf, max, off);
        if (n < 0) {
                free(buf);
                return -errno;
        }
        /* QEMU's messages can quote guest-controlled text: keep it printable. */
        for (ssize_t i = 0; i < n; i++)
                if (buf[i] != '\n' && (buf[i] < 0x20 || buf[i] > 0x7e))
                        buf[i] = '?';
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
                n--;
        buf[n] = 0;
        *ret = buf;
        return 0;
}

int vm_log_trim(const char *run_dir, uint64_t max_bytes) {
        _cleanup_free_ char *path = NULL;
        struct stat st;

        if (asprintf(&path, "%s/qemu.log", run_dir) < 0)
                return -ENOMEM;
        /* Through an fd opened without following symlinks: truncate(path) would cut whatever one points at. */
        _cleanup_close_ int fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0)
                return -errno;
        /* QEMU holds it O_APPEND, so truncating is safe: its next write lands at the new end. */
        if (S_ISREG(st.st_mode) && (uint64_t) st.st_size > max_bytes && ftruncate(fd, 0) < 0)
                return -errno;
        return 0;
}

int vm_read_pidfile(const char *run_dir, pid_t *ret_pid) {
        _cleanup_free_ char *path = NULL;
        char buf[32];

        if (!run_dir || !ret_pid)
                return -EINVAL;
        if (asprintf(&path, "%s/qemu.pid", run_dir) < 0)
                return -ENOMEM;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        char *e;
        errno = 0;
        long v = strtol(buf, &e, 10);
        if (errno != 0 || e == buf || (*e != 0 && *e != '\n') || v <= 1 || v > INT_MAX)
                return -EBADMSG;
        *ret_pid = (pid_t) v;
        return 0;
}

static char *run_file(const char *run_dir, const char *name) {
        char *p;
        return asprintf(&p, "%s/%s", run_dir, name) < 0 ? NULL : p;
}

/* Resolves the binary before forking: the grandchild then only needs async-signal-safe calls. */
static int find_binary(const char *name, char **ret) {
        if (strchr(name, '/')) {
                *ret = strdup(name);
                return *ret ? 0 : -ENOMEM;
        }
        const char *path = getenv("PATH") ?: "/usr/local/bin:/usr/bin:/bin";
        for (const char *p = path; *p;) {
                size_t n = strcspn(p, ":");
                char *cand;
                if (n > 0) {
                        if (asprintf(&cand, "%.*s/%s", (int) n, p, name) < 0)
                                return -ENOMEM;
                        if (access(cand, X_OK) == 0) {
                                *ret = cand;
                                return 0;
                        }
                        free(cand);
                }
                p += n;
                if (*p == ':')
                        p++;
        }
        return -ENOENT;
}

/* What the spawn helpers report through the status pipe. */
enum { SPAWN_MSG_PID = 1, SPAWN_MSG_ERRNO = 2, SPAWN_MSG_JAIL_ERRNO = 3, SPAWN_MSG_JAIL_STEP = 5 };
typedef struct SpawnMsg {
        int kind;
        int value;
} SpawnMsg;

static void report(int fd, int kind, int value) {
        SpawnMsg m = { kind, value };
        (void) !write(fd, &m, sizeof(m)); /* atomic: < PIPE_BUF */
}

/* Writes pid to path by way of tmp, between fork and exec (no stdio). QEMU's own -pidfile would hold 1, its
 * pid in its pid namespace; this is the one outside, which the daemon signals and watches. */
static int write_pidfile(const char *tmp, const char *path, pid_t pid) {
        char buf[16], digits[12];
        int n = 0, k = 0;

        do
                digits[n++] = (char) ('0' + pid % 10);
        while ((pid /= 10) > 0);
        while (n > 0)
                buf[k++] = digits[--n];
        buf[k++] = '\n';
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
        if (fd < 0)
                return -errno;
        ssize_t w = write(fd, buf, (size_t) k);
        int e = errno;
        (void) close(fd);
        if (w != k)
                return -(w < 0 ? e : EIO);
        return rename(tmp, path) < 0 ? -errno : 0;
}

_Noreturn static void exec_qemu(const char *binary, char **argv, int null_fd, int log_fd, int status_fd) {
        struct sigaction sa = { .sa_handler = SIG_DFL };
        sigset_t all;

        /* The daemon blocks signals for sd-event and ignores SIGPIPE; both survive exec. */
        for (int sig = 1; sig < NSIG; sig++)
                (void) sigaction(sig, &sa, NULL);
        sigemptyset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);

        /* Move everything above 2 first, so the dup2()s below cannot clobber each other. */
        int n = fcntl(null_fd, F_DUPFD, 10), l = fcntl(log_fd, F_DUPFD, 10),
            w = fcntl(status_fd, F_DUPFD_CLOEXEC, 10);
        if (n < 0 || l < 0 || w < 0 || dup2(n, 0) < 0 || dup2(l, 1) < 0 || dup2(l, 2) < 0 || dup2(w, 3) < 0 ||
            fcntl(3, F_SETFD, FD_CLOEXEC) < 0) {
                report(w >= 0 ? w : status_fd, SPAWN_MSG_ERRNO, errno);
                _exit(127);
        }
        if (syscall(SYS_close_range, 4U, ~0U, 0) < 0) {
                struct rlimit rl;
                int max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
                                          rl.rlim_cur < 1024 * 1024 ? (int) rl.rlim_cur : 65536;
                for (int fd = 4; fd < max; fd++)
                        (void) close(fd);
        }

        execv(binary, argv);
        report(3, SPAWN_MSG_ERRNO, errno);
        _exit(127);
}

/* What the spawn helpers reported. */
typedef struct SpawnReport {
        pid_t qemu;
        int exec_errno, jail_errno, jail_step;
} SpawnReport;

typedef struct SpawnArgs {
        const char *binary;
        char **argv;
        int null_fd, log_fd;
        const char *pid_tmp, *pid_path;
} SpawnArgs;

/* Forks the helper that makes jail's namespaces (none when NULL), forks QEMU into them and writes its pid file;
 * returns once QEMU has exec'd or the helpers failed, with what they said. */
static int spawn_helpers(const SpawnArgs *a, VmJail *jail, SpawnReport *ret) {
        _cleanup_close_ int rfd = -1, wfd = -1;
        int p[2];

        *ret = (SpawnReport) {};
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        rfd = p[0];
        wfd = p[1];

        pid_t mid = fork();
        if (mid < 0)
                return -errno;
        if (mid == 0) {
                int step, k;

                /* Own session: QEMU survives the daemon and no terminal signal reaches it. */
                (void) setsid();
                /* The user and pid namespaces are made here, so that QEMU, forked next, is pid 1 in the
                 * latter; the mount namespace in QEMU's process. */
                k = vm_jail_unshare(jail, &step);
                if (k < 0) {
                        report(wfd, SPAWN_MSG_JAIL_STEP, step);
                        report(wfd, SPAWN_MSG_JAIL_ERRNO, -k);
                        _exit(127);
                }
                pid_t gc = fork();
                if (gc < 0) {
                        report(wfd, SPAWN_MSG_ERRNO, errno);
                        _exit(1);
                }
                if (gc == 0) {
                        k = vm_jail_enter(jail, &step);
                        if (k < 0) {
                                report(wfd, SPAWN_MSG_JAIL_STEP, step);
                                report(wfd, SPAWN_MSG_JAIL_ERRNO, -k);
                                _exit(127);
                        }
                        exec_qemu(a->binary, a->argv, a->null_fd, a->log_fd, wfd);
                }
                /* Here, not from the daemon: a daemon killed now still leaves the file for the next one. */
                k = write_pidfile(a->pid_tmp, a->pid_path, gc);
                if (k < 0) {
                        (void) kill(gc, SIGKILL);
                        report(wfd, SPAWN_MSG_ERRNO, -k);
                        _exit(1);
                }
                report(wfd, SPAWN_MSG_PID, gc);
                _exit(0);
        }
        wfd = safe_close(wfd);
        while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
                ;

        /* EOF arrives once the grandchild has exec'd (its copy is O_CLOEXEC) or died. */
        for (;;) {
                SpawnMsg m;
                ssize_t k = read(rfd, &m, sizeof(m));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k != (ssize_t) sizeof(m))
                        break;
                if (m.kind == SPAWN_MSG_PID)
                        ret->qemu = m.value;
                else if (m.kind == SPAWN_MSG_ERRNO)
                        ret->exec_errno = m.value ?: EIO;
                else if (m.kind == SPAWN_MSG_JAIL_ERRNO)
                        ret->jail_errno = m.value ?: EIO;
                else if (m.kind == SPAWN_MSG_JAIL_STEP)
                        ret->jail_step = m.value;
        }
        return 0;
}

/* Waits until QEMU got through its command line (the QMP socket exists), so a bad option or path is reported
 * with QEMU's own words rather than as a QMP timeout. Later start failures (kernel, disk) show up as a QMP
 * connection that closes: see vm_start(). */
static int wait_qmp_socket(const char *run_dir, const char *qmp_path, pid_t qemu, Error *reterr) {
        int64_t deadline = now_ms() + VM_SPAWN_START_TIMEOUT_MS;

        for (unsigned i = 0;; i++) {
                struct stat st;
                if (!pid_running(qemu)) {
                        _cleanup_free_ char *tail = NULL;
                        (void) vm_log_tail(run_dir, VM_LOG_TAIL_MAX, &tail);
                        (void) error_set(reterr, ERROR_INTERNAL, "QEMU exited at start: %s", tail && *tail ? tail : "(no output)");
                        return -ECHILD;
                }
                if (stat(qmp_path, &st) == 0 && S_ISSOCK(st.st_mode))
                        return 0;
                if (remaining_ms(deadline) == 0) {
                        (void) vm_kill(qemu, run_dir, 1000);
                        (void) error_set(reterr, ERROR_INTERNAL, "QEMU did not create %s in time", qmp_path);
                        return -ETIMEDOUT;
                }
                (void) usleep(i < 100 ? 500 : 5000);
        }
}

/* Two QEMUs on one run dir would fight over its sockets, and stale files from a previous one would make us talk
 * to nothing or read a wrong pid. */
static int run_dir_prepare(const char *run_dir, Error *reterr) {
        static const char *const stale[] = { "qmp.sock", VM_EVENTS_SOCKET, "agent.sock", "qemu.pid" };
        pid_t old;

        if (vm_read_pidfile(run_dir, &old) >= 0 && vm_pid_alive(old, run_dir)) {
                (void) error_set(reterr, ERROR_INTERNAL, "QEMU %d still runs in %s", (int) old, run_dir);
                return -EBUSY;
        }
        for (size_t i = 0; i < ELEMENTSOF(stale); i++) {
                _cleanup_free_ char *p = run_file(run_dir, stale[i]);
                if (!p)
                        return -ENOMEM;
                if (unlink(p) < 0 && errno != ENOENT)
                        return -errno;
        }
        return 0;
}

int vm_spawn(const VmConfig *c, pid_t *ret_pid, char **ret_unconfined, Error *reterr) {
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_free_ char *binary = NULL, *log_path = NULL, *qmp_path = NULL, *pid_path = NULL, *pid_tmp = NULL,
                            *unconfined = NULL;
        _cleanup_close_ int null_fd = -1, log_fd = -1;
        _cleanup_(vm_jail_freep) VmJail *jail = NULL;
        SpawnReport rep;
        int r;

        if (!c || !ret_pid)
                return -EINVAL;
        r = vm_build_argv(c, &argv);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "invalid VM configuration");
                return r;
        }
        r = find_binary(argv[0], &binary);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "cannot find %s: %s", argv[0], strerror(-r));
                return r;
        }
        r = run_dir_prepare(c->run_dir, reterr);
        if (r < 0)
                return r;

        log_path = run_file(c->run_dir, "qemu.log");
        qmp_path = run_file(c->run_dir, "qmp.sock");
        pid_path = run_file(c->run_dir, "qemu.pid");
        pid_tmp = run_file(c->run_dir, ".qemu.pid.new");
        if (!log_path || !qmp_path || !pid_path || !pid_tmp)
                return -ENOMEM;
        /* O_APPEND so vm_log_trim() can truncate it under QEMU's feet. */
        log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
        if (log_fd < 0) {
                r = -errno;
                (void) error_set(reterr, ERROR_INTERNAL, "cannot open %s: %s", log_path, strerror(errno));
                return r;
        }
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (null_fd < 0)
                return -errno;
        r = vm_jail_new(c, binary, &jail, reterr);
        if (r < 0)
                return r;
        if (!jail && !(unconfined = strdup(VM_UNCONFINED_OFF)))
                return -ENOMEM;

        SpawnArgs a = { binary, argv, null_fd, log_fd, pid_tmp, pid_path };
        r = spawn_helpers(&a, jail, &rep);
        if (r < 0)
                return r;
        if (rep.jail_errno && vm_jail_mode(jail) == VM_CONFINE_AUTO && vm_jail_refused(rep.jail_step, rep.jail_errno)) {
                /* The host refuses the namespaces (ARCHITECTURE.md, decision 12): auto runs QEMU without them,
                 * and says why. Those that were made went with the helpers, so start over. */
                r = vm_confine_explain(jail, rep.jail_step, rep.jail_errno, &unconfined);
                if (r >= 0)
                        r = spawn_helpers(&a, NULL, &rep);
                if (r < 0)
                        return r;
        }
        if (rep.jail_errno) {
                _cleanup_free_ char *why = NULL;
                (void) vm_confine_explain(jail, rep.jail_step, rep.jail_errno, &why);
                (void) error_set(reterr, ERROR_INTERNAL, "cannot confine QEMU in its own namespaces: %s%s",
                                 why ?: strerror(rep.jail_errno),
                                 vm_jail_mode(jail) == VM_CONFINE_ON ? " (confine = on in spaced.conf)" : "");
                return -rep.jail_errno;
        }
        if (rep.exec_errno || rep.qemu <= 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "cannot start %s: %s", binary, strerror(rep.exec_errno ?: EIO));
                return -(rep.exec_errno ?: EIO);
        }
        r = wait_qmp_socket(c->run_dir, qmp_path, rep.qemu, reterr);
        if (r < 0)
                return r;

        *ret_pid = rep.qemu;
        if (ret_unconfined)
                *ret_unconfined = TAKE_PTR(unconfined);
        return 0;
}

int vm_start(const VmConfig *c, int timeout_ms, pid_t *ret_pid, Qmp **ret_qmp, char **ret_unconfined,
             Error *reterr) {
        _cleanup_free_ char *qmp_path = NULL, *unconfined = NULL;
        int64_t deadline = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
        pid_t pid;
        int r;

        if (!c || !ret_pid || !ret_qmp)
                return -EINVAL;
        r = vm_spawn(c, &pid, &unconfined, reterr);
        if (r < 0)
                return r;
        qmp_path = run_file(c->run_dir, "qmp.sock");
        if (!qmp_path) {
                (void) vm_kill(pid, c->run_dir, 1000);
                return -ENOMEM;
        }

        for (;;) {
                _cleanup_(error_done) Error err = {};
                Qmp *q = NULL;
                int left = remaining_ms(deadline);

                r = qmp_open(qmp_path, left < 1000 ? left : 1000, &q, &err);
                if (r >= 0) {
                        *ret_pid = pid;
                        *ret_qmp = q;
                        if (ret_unconfined)
                                *ret_unconfined = TAKE_PTR(unconfined);
                        return 0;
                }
                if (!pid_running(pid)) {
                        _cleanup_free_ char *tail = NULL;
                        (void) vm_log_tail(c->run_dir, VM_LOG_TAIL_MAX, &tail);
                        (void) error_set(reterr, ERROR_INTERNAL, "QEMU exited at start: %s", tail && *tail ? tail : "(no output)");
                        return -ECHILD;
                }
                if (remaining_ms(deadline) == 0) {
                        (void) vm_kill(pid, c->run_dir, 1000);
                        (void) error_set(reterr, ERROR_INTERNAL, "%s", err.message ?: "QMP did not come up in time");
                        return r;
                }
                (void) usleep(2000);
        }
}

/* ---- snapshots ---- */

static int set_ignore_shared(Qmp *q, int64_t deadline, Error *reterr) {
        return qmp_execute(q, "migrate-set-capabilities",
                           "{\"capabilities\":[{\"capability\":\"x-ignore-shared\",\"state\":true}]}", -1,
                           remaining_ms(deadline), NULL, reterr);
}

static int wait_migration(Qmp *q, int64_t deadline, VmSaveProgress progress, void *userdata,
                          Error *reterr) {
        for (;;) {
                _cleanup_free_ char *reply = NULL;
                _cleanup_cjson_ cJSON *j = NULL;
                int r = qmp_execute(q, "query-migrate", NULL, -1, remaining_ms(deadline), &reply, reterr);
                if (r < 0)
                        return r;
                j = cJSON_Parse(reply);
                const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
                const char *s = cJSON_IsString(st) ? st->valuestring : "";
                if (streq(s, "completed"))
                        return 0;
                if (progress) {
                        const cJSON *ram = cJSON_GetObjectItemCaseSensitive(j, "ram");
                        const cJSON *w = cJSON_GetObjectItemCaseSensitive(ram, "transferred");
                        const cJSON *rem = cJSON_GetObjectItemCaseSensitive(ram, "remaining");
                        if (cJSON_IsNumber(w) && cJSON_IsNumber(rem) && w->valuedouble >= 0 && rem->valuedouble >= 0)
                                progress((uint64_t) w->valuedouble, (uint64_t) rem->valuedouble, userdata);
                }
                if (streq(s, "failed") || streq(s, "cancelled")) {
                        const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "error-desc");
                        (void) error_set(reterr, ERROR_INTERNAL, "migration %s: %s", s,
                                         cJSON_IsString(d) ? d->valuestring : "no reason given");
                        return -EIO;
                }
                if (remaining_ms(deadline) == 0) {
                        (void) error_set(reterr, ERROR_INTERNAL, "migration still '%s' at the timeout", s);
                        return -ETIMEDOUT;
                }
                (void) usleep(1000);
        }
}

int vm_save_state(Qmp *q, int state_fd, int timeout_ms, VmSaveProgress progress, void *userdata,
                  Error *reterr) {
        int64_t deadline = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
        int r;

        if (!q || state_fd < 0)
                return -EINVAL;
        r = qmp_execute(q, "migrate-set-parameters", "{\"max-bandwidth\":" VM_MIGRATE_MAX_BANDWIDTH "}", -1,
                        remaining_ms(deadline), NULL, reterr);
        if (r < 0)
                return r;
        /* Guest RAM stays in the memory-backend-file; only device state goes to the fd. */
        r = set_ignore_shared(q, deadline, reterr);
        if (r < 0)
                return r;
        r = qmp_execute(q, "stop", NULL, -1, remaining_ms(deadline), NULL, reterr);
        if (r < 0)
                return r;
        /* fd: rather than exec:, which -sandbox spawn=deny answers with SIGSYS. */
        r = qmp_execute(q, "getfd", "{\"fdname\":\"state\"}", state_fd, remaining_ms(deadline), NULL,
                        reterr);
        if (r < 0)
                return r;
        r = qmp_execute(q, "migrate", "{\"uri\":\"fd:state\"}", -1, remaining_ms(deadline), NULL, reterr);
        if (r < 0)
                return r;
        return wait_migration(q, deadline, progress, userdata, reterr);
}

int vm_restore_state(Qmp *q, int state_fd, int timeout_ms, Error *reterr) {
        int64_t deadline = now_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
        _cleanup_free_ char *status = NULL;
        int r;

        if (!q || state_fd < 0)
                return -EINVAL;
        /* Must match the source, or QEMU expects RAM pages in the stream. */
        r = set_ignore_shared(q, deadline, reterr);
        if (r < 0)
                return r;
        r = qmp_execute(q, "getfd", "{\"fdname\":\"state\"}", state_fd, remaining_ms(deadline), NULL,
                        reterr);
        if (r < 0)
                return r;
        r = qmp_execute(q, "migrate-incoming", "{\"uri\":\"fd:state\"}", -1, remaining_ms(deadline), NULL,
                        reterr);
        if (r < 0)
                return r;
        /* A failed incoming migration makes QEMU 7.2 exit, which shows up here as a closed connection: EOF on
         * a read, or EPIPE when it went between two polls. */
        r = qmp_wait_status_change(q, "inmigrate", remaining_ms(deadline), &status, reterr);
        if (IN_SET(r, -ECONNRESET, -EPIPE))
                (void) error_set(reterr, ERROR_INTERNAL, "QEMU exited while loading the snapshot (see qemu.log)");
        if (r < 0)
                return r;
        if (!streq(status, "paused") && !streq(status, "running")) {
                (void) error_set(reterr, ERROR_INTERNAL, "VM is '%s' after loading the snapshot", status);
                return -EIO;
        }
        return 0;
}

int vm_console_read(Qmp *q, int timeout_ms, char **ret_text, Error *reterr) {
        _cleanup_free_ char *reply = NULL;
        int r;

        if (!q || !ret_text)
                return -EINVAL;
        /* format=utf8 would pass guest bytes through QEMU's lossy conversion; base64 could be decoded by the
         * caller, but a console is for humans: take utf8 and scrub control characters here. */
        r = qmp_execute(q, "ringbuf-read",
                        "{\"device\":\"con0\",\"size\":131072,\"format\":\"utf8\"}", -1, timeout_ms,
                        &reply, reterr);
        if (r < 0)
                return r;
        _cleanup_cjson_ cJSON *j = cJSON_Parse(reply);
        if (!cJSON_IsString(j))
                return -EBADMSG;
        char *t = strdup(j->valuestring);
        if (!t)
                return -ENOMEM;
        char *o = t;
        for (const char *p = t; *p; p++) {
                if (*p == '\r')
                        continue; /* hvc0 sends CRLF */
                *o++ = (unsigned char) *p < 0x20 && *p != '\n' && *p != '\t' ? '?' : *p;
        }
        *o = 0;
        *ret_text = t;
        return 0;
}
