/* SPDX-License-Identifier: Apache-2.0 */

/*
 * vm-smoke: drives the VMM driver end to end, without the daemon, and prints timings as JSON.
 *
 *   1. base: boot a VM with its RAM in DIR/base.mem (share=on) and a qcow2 overlay DIR/base.qcow2 over the
 *      template rootfs, wait for the agent's HELLO, save the device state to DIR/base.state, kill it.
 *   2. restore N sandboxes from it, one after the other: own run dir, own qcow2 overlay over base.qcow2 (the disk
 *      the saved memory expects), share=off on base.mem, -incoming defer, restore, cont, agent PING -> PONG.
 *      All N stay up until the end, so the RSS figures are for N VMs side by side.
 *   --first-exec: the base warms up as the daemon's does (`sh -c true`, `true`, `sync` before the save), and
 *      each restore runs `true` right after its first PONG: restore + the VM's own first command, which under
 *      TCG pays for translating the fork and exec paths in a QEMU whose translation cache the restore left empty.
 *
 * This is the raw-QEMU baseline the benchmarks compare the daemon with. Every QEMU started is killed by pid.
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "../../lib/proto.h"
#include "vm/vmm.h"

#define MAX_VMS 256

typedef struct Vm {
        pid_t pid;
        char run_dir[PATH_MAX];
} Vm;

static Vm vms[MAX_VMS + 1];
static size_t n_vms;

static void kill_all(void) {
        for (size_t i = 0; i < n_vms; i++)
                if (vms[i].pid > 0) {
                        (void) vm_kill(vms[i].pid, vms[i].run_dir, 3000);
                        vms[i].pid = 0;
                }
}

static void on_signal(int sig) {
        /* Not async-signal-safe in theory; good enough to not leak QEMUs from a test tool on ^C. */
        kill_all();
        _exit(128 + sig);
}

static double now_ms(void) {
        struct timespec ts;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

static int mkdir_0700(const char *path) {
        return mkdir(path, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

static int run_cmd(char *const argv[]) {
        pid_t pid = fork();
        int status;

        if (pid < 0)
                return -errno;
        if (pid == 0) {
                execvp(argv[0], argv);
                _exit(127);
        }
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static int qcow2_overlay(const char *backing, const char *backing_fmt, const char *path) {
        (void) unlink(path);
        char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-b", (char *) backing, "-F",
                         (char *) backing_fmt, (char *) path, NULL };
        return run_cmd(argv);
}

static int agent_connect(const char *run_dir, int timeout_ms, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        double deadline = now_ms() + timeout_ms;

        if ((size_t) snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/agent.sock", run_dir) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        for (;;) {
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        return -errno;
                if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0) {
                        *ret_fd = fd;
                        return 0;
                }
                int r = -errno;
                close(fd);
                if ((r != -ENOENT && r != -ECONNREFUSED) || now_ms() > deadline)
                        return r;
                (void) usleep(1000);
        }
}

static int send_ping(int fd, uint32_t stream) {
        SpaceBuf b = {};
        uint8_t payload[8];
        int r;

        memcpy(payload, "smoke-00", 8);
        r = space_frame_append(&b, SPACE_F_PING, 0, stream, payload, sizeof(payload));
        if (r >= 0 && send(fd, b.data, b.len, MSG_NOSIGNAL) != (ssize_t) b.len)
                r = -EIO;
        space_buf_done(&b);
        return r;
}

/* Reads frames until one of type `want` (and, for PONG, on `stream`) arrives. PINGs every ping_every_ms when
 * > 0, so an agent that sent its HELLO before we connected still answers. */
static int agent_wait(int fd, SpaceFrameReader *rd, uint8_t want, uint32_t stream, int timeout_ms,
                      int ping_every_ms) {
        double deadline = now_ms() + timeout_ms, next_ping = ping_every_ms > 0 ? now_ms() + ping_every_ms : 0;
        uint8_t buf[4096];

        for (;;) {
                double left = deadline - now_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                int wait = (int) left + 1;
                if (next_ping > 0 && next_ping - now_ms() < wait)
                        wait = next_ping - now_ms() > 0 ? (int) (next_ping - now_ms()) + 1 : 0;

                struct pollfd p = { .fd = fd, .events = POLLIN };
                int r = poll(&p, 1, wait);
                if (r < 0 && errno != EINTR)
                        return -errno;
                if (next_ping > 0 && now_ms() >= next_ping) {
                        if (send_ping(fd, stream) < 0)
                                return -EIO;
                        next_ping = now_ms() + ping_every_ms;
                }
                if (r <= 0)
                        continue;

                ssize_t n = read(fd, buf, sizeof(buf));
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -ECONNRESET;
                size_t off = 0;
                while (off < (size_t) n) {
                        SpaceFrameHeader h;
                        const uint8_t *payload;
                        size_t used;
                        r = space_frame_reader_feed(rd, buf + off, (size_t) n - off, &used, &h, &payload);
                        if (r < 0)
                                return r;
                        off += used;
                        if (r == 0)
                                continue;
                        if (h.type == want && ((want != SPACE_F_PONG && want != SPACE_F_EXIT) || h.stream == stream))
                                return 0;
                        if (want == SPACE_F_HELLO && h.type == SPACE_F_PONG)
                                return 0; /* it is up and talking */
                }
        }
}

/* Runs argv in the guest and waits for its EXIT (the commands here print nothing, so no credit is needed). */
static int agent_run(int fd, SpaceFrameReader *rd, uint32_t stream, char **argv) {
        SpaceBuf kv = {}, b = {};
        int r = 0;

        for (char **a = argv; *a && r >= 0; a++)
                r = space_kv_add(&kv, "argv", *a);
        if (r >= 0)
                r = space_kv_add(&kv, "stdin", "0");
        if (r >= 0)
                r = space_frame_append(&b, SPACE_F_EXEC, 0, stream, kv.data, kv.len);
        if (r >= 0 && send(fd, b.data, b.len, MSG_NOSIGNAL) != (ssize_t) b.len)
                r = -EIO;
        space_buf_done(&kv);
        space_buf_done(&b);
        return r < 0 ? r : agent_wait(fd, rd, SPACE_F_EXIT, stream, 30000, 0);
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* Nearest-rank percentile. */
static double pct(double *v, size_t n, unsigned p) {
        if (n == 0)
                return 0;
        qsort(v, n, sizeof(double), cmp_double);
        size_t k = (p * n + 99) / 100;
        return v[k == 0 ? 0 : k - 1];
}

static void print_stat(const char *name, double *v, size_t n, bool last) {
        double mn = n ? v[0] : 0, mx = n ? v[0] : 0;
        for (size_t i = 0; i < n; i++) {
                mn = v[i] < mn ? v[i] : mn;
                mx = v[i] > mx ? v[i] : mx;
        }
        double p50 = pct(v, n, 50), p90 = pct(v, n, 90);
        printf("    \"%s\": {\"p50\": %.1f, \"p90\": %.1f, \"min\": %.1f, \"max\": %.1f}%s\n", name, p50, p90, mn, mx,
               last ? "" : ",");
}

static long rss_kib(pid_t pid) {
        char path[64], line[256];
        long kib = -1;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
                        break;
        return kib;
}

static void die(const char *what, int r, const char *msg) {
        fprintf(stderr, "vm-smoke: %s: %s%s%s\n", what, strerror(r < 0 ? -r : r), msg ? ": " : "", msg ?: "");
        kill_all();
        exit(1);
}

static void usage(void) {
        fprintf(stderr,
                "usage: vm-smoke [--kernel VMLINUX] --initrd CPIO [--rootfs EXT4] [--dir DIR] [-n N]\n"
                "                [--memory MIB] [--vcpus N] [--accel auto|tcg|kvm] [--kernel-args ARGS]\n"
                "                [--pings N]  (round trips per sandbox after the first PONG, default 20)\n"
                "                [--keep]   (leave the last sandbox running and print its pid)\n"
                "                [--first-exec]  (warm the base like spaced; time restore + first `true`)\n");
        exit(2);
}

int main(int argc, char **argv) {
        const char *kernel = "/tmp/space-guest/kernel/vmlinux", *initrd = NULL,
                   *rootfs = "/tmp/space-guest/minimal/rootfs.ext4", *dir = "/tmp/vmm-test", *accel_s = "auto",
                   *kargs = NULL;
        unsigned n = 5, vcpus = 1, pings = 20;
        uint64_t mem_mib = 256;
        bool keep = false, first_exec = false;
        static const struct option opts[] = {
                { "kernel", required_argument, NULL, 'k' }, { "initrd", required_argument, NULL, 'i' },
                { "rootfs", required_argument, NULL, 'r' }, { "dir", required_argument, NULL, 'd' },
                { "memory", required_argument, NULL, 'm' }, { "vcpus", required_argument, NULL, 'c' },
                { "accel", required_argument, NULL, 'a' },  { "kernel-args", required_argument, NULL, 'A' },
                { "keep", no_argument, NULL, 'K' },         { "help", no_argument, NULL, 'h' },
                { "pings", required_argument, NULL, 'p' }, { "first-exec", no_argument, NULL, 'F' },
                {},
        };
        int o, r;

        while ((o = getopt_long(argc, argv, "n:h", opts, NULL)) >= 0)
                switch (o) {
                case 'k': kernel = optarg; break;
                case 'i': initrd = optarg; break;
                case 'r': rootfs = optarg; break;
                case 'd': dir = optarg; break;
                case 'm': mem_mib = strtoull(optarg, NULL, 10); break;
                case 'c': vcpus = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'a': accel_s = optarg; break;
                case 'A': kargs = optarg; break;
                case 'K': keep = true; break;
                case 'F': first_exec = true; break;
                case 'n': n = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'p': pings = (unsigned) strtoul(optarg, NULL, 10); break;
                default: usage();
                }
        if (!initrd || n < 1 || n > MAX_VMS || pings < 1 || pings > 100000 || dir[0] != '/')
                usage();

        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        signal(SIGPIPE, SIG_IGN);

        _cleanup_free_ char *accel_reason = NULL;
        VmAccel accel;
        if (streq(accel_s, "tcg"))
                accel = VM_ACCEL_TCG;
        else if (streq(accel_s, "kvm"))
                accel = VM_ACCEL_KVM;
        else
                accel = vm_accel_detect(&accel_reason);
        unsigned tsc_khz = accel == VM_ACCEL_TCG ? vm_host_tsc_khz() : 0;

        char base_run[PATH_MAX], base_mem[PATH_MAX], base_disk[PATH_MAX], base_state[PATH_MAX];
        (void) mkdir(dir, 0755);
        snprintf(base_run, sizeof(base_run), "%s/base-run", dir);
        snprintf(base_mem, sizeof(base_mem), "%s/base.mem", dir);
        snprintf(base_disk, sizeof(base_disk), "%s/base.qcow2", dir);
        snprintf(base_state, sizeof(base_state), "%s/base.state", dir);
        if (mkdir_0700(base_run) < 0)
                die("mkdir base run dir", errno, base_run);
        (void) unlink(base_mem);
        (void) unlink(base_state);

        /* ---- 1. base snapshot ---- */
        r = qcow2_overlay(rootfs, "raw", base_disk);
        if (r < 0)
                die("qemu-img create (base overlay)", r, rootfs);

        VmConfig base = {
                .run_dir = base_run,
                .kernel = kernel,
                .initrd = initrd,
                .disk = base_disk,
                .disk_format = "qcow2",
                .mem_path = base_mem,
                .mem_share = true,
                .vcpus = vcpus,
                .memory_mib = mem_mib,
                .accel = accel,
                .tsc_khz = tsc_khz,
                .kernel_args = kargs,
        };
        _cleanup_(error_done) Error err = {};
        Qmp *q = NULL;
        pid_t pid;
        double t0 = now_ms();
        r = vm_start(&base, 30000, &pid, &q, NULL, &err);
        if (r < 0)
                die("starting the base VM", r, err.message);
        vms[n_vms++] = (Vm) { .pid = pid };
        snprintf(vms[n_vms - 1].run_dir, sizeof(vms[0].run_dir), "%s", base_run);
        double t_qmp = now_ms();

        _cleanup_close_ int afd = -1;
        static SpaceFrameReader rd;
        r = agent_connect(base_run, 10000, &afd);
        if (r < 0)
                die("connecting to the base agent socket", r, NULL);
        r = agent_wait(afd, &rd, SPACE_F_HELLO, 1, 120000, 1000);
        if (r < 0) {
                _cleanup_free_ char *console = NULL;
                (void) vm_console_read(q, 2000, &console, NULL);
                fprintf(stderr, "--- guest console ---\n%s\n---\n", console ?: "(unavailable)");
                die("waiting for the agent's HELLO", r, NULL);
        }
        double t_hello = now_ms();
        if (first_exec) {
                char *shell[] = { "sh", "-c", "true", NULL }, *direct[] = { "true", NULL }, *sync_argv[] = { "sync", NULL };

                r = agent_run(afd, &rd, 2, shell);
                if (r >= 0)
                        r = agent_run(afd, &rd, 3, direct);
                if (r >= 0)
                        r = agent_run(afd, &rd, 4, sync_argv);
                if (r < 0)
                        die("warming up the base VM", r, NULL);
        }

        _cleanup_close_ int sfd = open(base_state, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (sfd < 0)
                die("creating the state file", errno, base_state);
        double t_save0 = now_ms();
        r = vm_save_state(q, sfd, 60000, NULL, NULL, &err);
        if (r < 0)
                die("saving the base state", r, err.message);
        double t_saved = now_ms();
        if (fsync(sfd) < 0)
                die("fsync state", errno, NULL);
        struct stat st;
        (void) fstat(sfd, &st);
        sfd = safe_close(sfd);
        afd = safe_close(afd);
        q = qmp_close(q);
        r = vm_kill(pid, base_run, 5000);
        if (r < 0)
                die("killing the base VM", r, NULL);
        vms[0].pid = 0;

        /* ---- 2. restores ---- */
        double *spawn_qmp = calloc(n, sizeof(double)), *spawn_restored = calloc(n, sizeof(double)),
               *spawn_pong = calloc(n, sizeof(double)), *clone = calloc(n, sizeof(double)),
               *rtt = calloc((size_t) n * pings, sizeof(double)), *rss = calloc(n, sizeof(double)),
               *spawn_exit = calloc(n, sizeof(double));
        if (!spawn_qmp || !spawn_restored || !spawn_pong || !clone || !rtt || !rss || !spawn_exit)
                die("calloc", ENOMEM, NULL);

        for (unsigned i = 0; i < n; i++) {
                char run[PATH_MAX], disk[PATH_MAX];
                snprintf(run, sizeof(run), "%s/sb-%u", dir, i);
                snprintf(disk, sizeof(disk), "%s/sb-%u/disk.qcow2", dir, i);
                if (mkdir_0700(run) < 0)
                        die("mkdir", errno, run);

                double c0 = now_ms();
                r = qcow2_overlay(base_disk, "qcow2", disk);
                if (r < 0)
                        die("qemu-img create (sandbox overlay)", r, disk);
                clone[i] = now_ms() - c0;

                VmConfig c = base;
                c.run_dir = run;
                c.disk = disk;
                c.mem_share = false;
                c.incoming = true;

                _cleanup_close_ int state = open(base_state, O_RDONLY | O_CLOEXEC);
                if (state < 0)
                        die("opening the state file", errno, base_state);

                double s0 = now_ms();
                r = vm_start(&c, 30000, &pid, &q, NULL, &err);
                if (r < 0)
                        die("starting a sandbox", r, err.message);
                vms[n_vms] = (Vm) { .pid = pid };
                snprintf(vms[n_vms].run_dir, sizeof(vms[0].run_dir), "%s", run);
                n_vms++;
                spawn_qmp[i] = now_ms() - s0;

                r = vm_restore_state(q, state, 30000, &err);
                if (r < 0) {
                        _cleanup_free_ char *tail = NULL;
                        (void) vm_log_tail(run, 2048, &tail);
                        fprintf(stderr, "--- qemu.log ---\n%s\n---\n", tail ?: "");
                        die("restoring a sandbox", r, err.message);
                }
                spawn_restored[i] = now_ms() - s0;

                _cleanup_close_ int a = -1;
                r = agent_connect(run, 5000, &a);
                if (r < 0)
                        die("connecting to a sandbox agent socket", r, NULL);
                r = qmp_execute(q, "cont", NULL, -1, 5000, NULL, &err);
                if (r < 0)
                        die("cont", r, err.message);
                static SpaceFrameReader srd;
                memset(&srd, 0, sizeof(srd));
                r = send_ping(a, 7);
                if (r >= 0)
                        r = agent_wait(a, &srd, SPACE_F_PONG, 7, 10000, 0);
                if (r < 0)
                        die("pinging a restored agent", r, NULL);
                spawn_pong[i] = now_ms() - s0;
                if (first_exec) {
                        char *direct[] = { "true", NULL };

                        r = agent_run(a, &srd, 5, direct);
                        if (r < 0)
                                die("the first exec in a restored VM", r, NULL);
                        spawn_exit[i] = now_ms() - s0;
                }

                /* More round trips: the steady-state channel latency. */
                for (unsigned k = 0; k < pings; k++) {
                        double p0 = now_ms();
                        r = send_ping(a, 8 + k);
                        if (r >= 0)
                                r = agent_wait(a, &srd, SPACE_F_PONG, 8 + k, 10000, 0);
                        if (r < 0) {
                                fprintf(stderr, "vm-smoke: sandbox %u, ping %u of %u:\n", i, k + 1, pings);
                                die("ping", r, NULL);
                        }
                        rtt[i * pings + k] = (now_ms() - p0) * 1000.0;
                }

                q = qmp_close(q);
        }

        /* Let the guests settle, then measure what N sandboxes side by side cost. */
        (void) usleep(500 * 1000);
        for (unsigned i = 0; i < n; i++)
                rss[i] = (double) rss_kib(vms[1 + i].pid) / 1024.0;

        printf("{\n  \"accel\": \"%s\",\n", accel == VM_ACCEL_KVM ? "kvm" : "tcg");
        if (accel_reason)
                printf("  \"accel_reason\": \"%s\",\n", accel_reason);
        printf("  \"memory_mib\": %llu,\n  \"vcpus\": %u,\n  \"tsc_khz\": %u,\n", (unsigned long long) mem_mib, vcpus,
               tsc_khz);
        printf("  \"base\": {\"spawn_to_qmp_ms\": %.1f, \"spawn_to_agent_ms\": %.1f, \"save_ms\": %.1f, "
               "\"state_bytes\": %lld},\n",
               t_qmp - t0, t_hello - t0, t_saved - t_save0, (long long) st.st_size);
        printf("  \"restore\": {\n    \"n\": %u,\n", n);
        print_stat("overlay_create_ms", clone, n, false);
        print_stat("spawn_to_qmp_ms", spawn_qmp, n, false);
        print_stat("spawn_to_restored_ms", spawn_restored, n, false);
        print_stat("spawn_to_first_pong_ms", spawn_pong, n, false);
        if (first_exec)
                print_stat("spawn_to_first_exec_exit_ms", spawn_exit, n, false);
        print_stat("ping_rtt_us", rtt, (size_t) n * pings, false);
        print_stat("rss_mib", rss, n, true);
        printf("  }\n}\n");
        fflush(stdout);

        if (keep) {
                fprintf(stderr, "vm-smoke: kept pid %d (run dir %s)\n", (int) vms[n_vms - 1].pid,
                        vms[n_vms - 1].run_dir);
                vms[--n_vms].pid = 0;
        }
        kill_all();
        free(spawn_qmp);
        free(spawn_restored);
        free(spawn_pong);
        free(spawn_exit);
        free(clone);
        free(rtt);
        free(rss);
        return 0;
}
