/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "macro.h"
#include "string-util.h"
#include "paths.h"
#include "core/tls.h"
#include "core/util.h"
#include "sandbox/sandbox.h"
#include "channel/channel.h"
#include "template/template.h"
#include "user.h"

/* A template's base snapshot (ARCHITECTURE.md, decision 4): boot once, wait for the agent, save the device state with guest
 * RAM left in a memory-backend-file. Sandboxes restore from it with share=off. Its directory name holds every
 * input, so a changed kernel, initramfs (agent), template or VM shape gets a new one; `ready` is written
 * last, so a half-built one is never used. */

#define BASE_BOOT_TIMEOUT_MS (180 * 1000)
/* The devices of the command line the base was saved with, beyond those every base had (vm_build_argv()): a
 * base is named by its inputs, so one saved with another device set is another base, built anew when needed,
 * never one a restore fails on. Bases named without it had no pvpanic: their guests never bound it. */
#define BASE_DEVICES_SUFFIX "-pvpanic"
/* How long a template's service may take to be ready, and how often its ready command is run meanwhile. Under
 * KVM the code interpreter's kernels are warm in seconds; under TCG they took 180 s to more than 600 s on two
 * cores, depending on what else ran, and a base that gives up is a template no one can use there. */
#define BASE_SERVICE_READY_TIMEOUT_KVM_S 300
#define BASE_SERVICE_READY_TIMEOUT_TCG_S 1800
#define BASE_SERVICE_READY_INTERVAL_MS 250

void base_request_done(BaseRequest *r) {
        free(r->lib_dir);
        free(r->state_dir);
        free(r->runtime_dir);
        free(r->qemu_binary);
        free(r->template_name);
        free(r->rootfs);
        free(r->template_digest);
        free(r->host_fingerprint);
        strv_free(r->warm_env);
        free(r->warm_cwd);
        free(r->warm_user);
        free(r->service);
        free(r->service_ready);
        free(r->ca_pem);
        free(r->ca_fingerprint);
        memset(r, 0, sizeof *r);
}

int base_request_init(Manager *m, const Template *t, unsigned vcpu, uint64_t memory_mib, BaseRequest *ret) {
        *ret = (BaseRequest) {
                .lib_dir = strdup(m->lib_dir),
                .state_dir = strdup(m->state_dir),
                .runtime_dir = strdup(m->runtime_dir),
                .qemu_binary = m->config.qemu_binary ? strdup(m->config.qemu_binary) : NULL,
                .template_name = strdup(t->name),
                .rootfs = strdup(t->rootfs),
                .template_digest = strdup(t->digest),
                .vcpu = vcpu,
                .memory_mib = memory_mib,
                .accel = m->accel,
                .tsc_khz = m->tsc_khz,
                .tcg_cache_mib = m->config.tcg_cache_mib,
                .confine = m->config.confine,
                .disk_backend = m->disk_backend,
                .host_fingerprint = strdup(m->host_fingerprint ?: ""),
                .warm_cwd = t->workdir ? strdup(t->workdir) : NULL,
                /* as template_default_user(): a user recorded before the check is not trusted */
                .warm_user = t->user && space_user_spec_parse(t->user, NULL) >= 0 ? strdup(t->user) : NULL,
                .service = t->start ? strdup(t->start) : NULL,
                .service_ready = t->ready ? strdup(t->ready) : NULL,
                .ca_pem = m->tls_ca ? strdup(tls_ca_pem(m->tls_ca)) : NULL,
                .ca_fingerprint = m->tls_ca ? strdup(tls_ca_fingerprint(m->tls_ca)) : NULL,
        };
        if (!ret->lib_dir || !ret->state_dir || !ret->runtime_dir || !ret->template_name || !ret->rootfs ||
            !ret->template_digest || !ret->host_fingerprint || (m->config.qemu_binary && !ret->qemu_binary) ||
            (t->workdir && !ret->warm_cwd) || (t->start && !ret->service) || (t->ready && !ret->service_ready) ||
            (m->tls_ca && (!ret->ca_pem || !ret->ca_fingerprint))) {
                base_request_done(ret);
                return -ENOMEM;
        }
        for (char **e = t->env; e && *e; e++)
                if (strv_extend(&ret->warm_env, *e) < 0) {
                        base_request_done(ret);
                        return -ENOMEM;
                }
        return 0;
}

void base_snapshot_done(BaseSnapshot *b) {
        free(b->dir);
        free(b->mem_path);
        free(b->state_path);
        free(b->disk_path);
        free(b->kernel);
        free(b->initrd);
        memset(b, 0, sizeof *b);
}

int guest_kernel_path(const char *lib_dir, char **ret_kernel, char **ret_initrd) {
        if (asprintf(ret_kernel, "%s/vmlinux", lib_dir) < 0)
                return -ENOMEM;
        if (asprintf(ret_initrd, "%s/initramfs.cpio", lib_dir) < 0) {
                free(*ret_kernel);
                return -ENOMEM;
        }
        return 0;
}

static int short_digest(const char *digest, char out[13]) {
        const char *hex = strchr(digest, ':');
        hex = hex ? hex + 1 : digest;
        if (strlen(hex) < 12)
                return -EINVAL;
        memcpy(out, hex, 12);
        out[12] = 0;
        return 0;
}

void base_warm_up(int agent_fd, char **env, const char *cwd, const char *user) {
        /* A shell, and a program exec'd through PATH rather than a builtin: the agent's fork, execvp's PATH
         * search, an ELF load and an exit. A template without them goes unwarmed, which only costs time. */
        char *shell[] = { "sh", "-c", "true", NULL }, *direct[] = { "true", NULL };
        int r;

        r = agent_run_blocking(agent_fd, shell, env, cwd, user, 30000);
        if (r >= 0)
                r = agent_run_blocking(agent_fd, direct, env, cwd, user, 30000);
        if (r < 0)
                log_debug("the warm-up commands failed: %s", strerror(-r));
}

/* The directory and file names of the base snapshot for req, into *b; ks, is and ts get the short digests of
 * the kernel, the initramfs and the template, which also name the build's run dir. */
static int base_snapshot_paths(const BaseRequest *req, BaseSnapshot *b, char ks[13], char is[13], char ts[13],
                               char **ret_ready, Error *reterr) {
        _cleanup_free_ char *kernel = NULL, *initrd = NULL, *kd = NULL, *id = NULL, *dir = NULL, *ready = NULL,
                            *ca = NULL;
        int r;

        r = guest_kernel_path(req->lib_dir, &kernel, &initrd);
        if (r < 0)
                return r;
        r = file_digest(kernel, &kd);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "guest kernel %s: %s (build it with 'make', or set SPACE_LIB_DIR)",
                                 kernel, strerror(-r));
                return r;
        }
        r = file_digest(initrd, &id);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "guest initramfs %s: %s", initrd, strerror(-r));
                return r;
        }
        if (short_digest(kd, ks) < 0 || short_digest(id, is) < 0 || short_digest(req->template_digest, ts) < 0)
                return -EINVAL;
        /* Named by the template's digest (not a tag, which moves): base_name_parse() reads this name back. A
         * btrfs store's base has a raw disk, which a qcow2 store's sandboxes could not use, and vice versa. Its
         * guest trusts the CA named, which the gateway's certificates must be signed by. */
        if (req->ca_fingerprint && asprintf(&ca, "-ca%s", req->ca_fingerprint) < 0)
                return -ENOMEM;
        if (asprintf(&dir, "%s/base/%s-k%s-i%s-m%llu-c%u-%s%s%s" BASE_DEVICES_SUFFIX, req->state_dir, ts, ks, is,
                     (unsigned long long) req->memory_mib, req->vcpu, req->accel == VM_ACCEL_KVM ? "kvm" : "tcg",
                     req->disk_backend == DISK_BACKEND_BTRFS ? "-btrfs" : "", ca ?: "") < 0)
                return -ENOMEM;
        if (asprintf(&ready, "%s/ready", dir) < 0 || asprintf(&b->mem_path, "%s/base.mem", dir) < 0 ||
            asprintf(&b->state_path, "%s/base.state", dir) < 0 ||
            asprintf(&b->disk_path, "%s/base.%s", dir, req->disk_backend == DISK_BACKEND_BTRFS ? "raw" : "qcow2") < 0)
                return -ENOMEM;
        b->kernel = TAKE_PTR(kernel);
        b->initrd = TAKE_PTR(initrd);
        b->dir = TAKE_PTR(dir);
        *ret_ready = TAKE_PTR(ready);
        return 0;
}

/* The generic message for a failed build step, unless a more precise one was already set. */
static int base_fail_msg(const BaseSnapshot *b, int r, Error *reterr) {
        if (reterr && !reterr->message)
                (void) error_set(reterr, error_code_from_errno(r), "building the base snapshot in %s: %s", b->dir, strerror(-r));
        return r;
}

/* The cold boot: QEMU with guest RAM in the shared memory file, up to the agent's hello. */
static int base_boot(const BaseRequest *req, const BaseSnapshot *b, const char *run_dir, pid_t *pid, Qmp **q,
                     int *ret_agent_fd, Error *reterr) {
        _cleanup_free_ char *agent_sock = NULL;
        int r;

        VmConfig c = {
                .qemu_binary = req->qemu_binary,
                .run_dir = run_dir,
                .kernel = b->kernel,
                .initrd = b->initrd,
                .disk = b->disk_path,
                .disk_format = disk_format(b->disk_path),
                .mem_path = b->mem_path,
                .mem_share = true,
                .vcpus = req->vcpu,
                .memory_mib = req->memory_mib,
                .accel = req->accel,
                .tsc_khz = req->tsc_khz,
                .tcg_cache_mib = req->tcg_cache_mib,
                .confine = req->confine,
        };
        r = vm_start(&c, 10000, pid, q, NULL, reterr);
        if (r < 0)
                return r;
        if (asprintf(&agent_sock, "%s/agent.sock", run_dir) < 0)
                return -ENOMEM;
        crash_point("base-booting");
        r = agent_wait_hello(agent_sock, BASE_BOOT_TIMEOUT_MS, ret_agent_fd, reterr);
        if (r < 0) {
                /* what the guest printed is the best clue to why it never said hello */
                _cleanup_free_ char *console = NULL, *msg = reterr ? TAKE_PTR(reterr->message) : NULL;
                (void) vm_console_read(*q, 2000, &console, NULL);
                (void) error_set(reterr, ERROR_INTERNAL, "%s; guest console: %s", msg ?: "no hello",
                                 console && *console ? console : "(empty)");
                return r;
        }
        return 0;
}

static void base_warm_and_sync(const BaseRequest *req, int agent_fd) {
        /* Every sandbox's first command reads the same files: the shell and the PATH directories, and
         * /etc/passwd and /etc/group for its user. Run once here, as a sandbox's would be, they are in
         * the page cache the snapshot saves, so that no restored guest reads them from its disk again
         * (under TCG each guest I/O also runs, and translates, the guest's whole block path: 20-60 ms
         * of a first exec). Clean pages only: disk and memory still match. */
        char *sync_argv[] = { "sync", NULL };

        base_warm_up(agent_fd, req->warm_env, req->warm_cwd, req->warm_user);
        /* Those reads updated atimes (relatime: the image's files have atime == mtime): written back
         * here, once, not by every restored guest's flusher and journal right after its restore. */
        if (agent_run_blocking(agent_fd, sync_argv, req->warm_env, NULL, NULL, 30000) < 0)
                log_debug("template %s: sync before the base snapshot failed", req->template_name);
}

/* Every sandbox of the template restores this guest: its workload (the service, what the warm-up left) stands
 * still in the snapshot, and runs again only once a sandbox's INIT has given it its clock and seed. A freeze
 * that fails leaves a base that works, whose sandboxes may run their service a moment with the base's random
 * state and clock: said, not fatal. */
void base_freeze(const BaseRequest *req, int agent_fd) {
        _cleanup_(error_done) Error e = {};
        int r;

        r = agent_freeze_blocking(agent_fd, (int) (AGENT_FREEZE_TIMEOUT_USEC / 1000), &e);
        if (r <= 0)
                log_warning("template %s: a guest is saved with its workload running: %s",
                            req->template_name, r == 0 ? "the agent cannot freeze it" : e.message ?: strerror(-r));
}

/* The base's one INIT: the daemon's CA, which every sandbox restored from it then trusts without a write of
 * its own, and the template's service (space-template(5), start and ready), started by the agent, which keeps
 * it running, then waited for until its ready command exits 0, so that the snapshot holds it ready (a code
 * interpreter with its kernels warm) and every sandbox restored from it has it at once. */
static int base_start_service(const BaseRequest *req, int agent_fd, Error *reterr) {
        char *ready_argv[] = { (char *) "sh", (char *) "-c", req->service_ready, NULL };
        int limit_s = req->accel == VM_ACCEL_KVM ? BASE_SERVICE_READY_TIMEOUT_KVM_S : BASE_SERVICE_READY_TIMEOUT_TCG_S;
        uint64_t deadline = now_usec_monotonic() + (uint64_t) limit_s * USEC_PER_SEC;
        int r, status = -1, last_exit = -1;

        if (!req->service && !req->ca_pem)
                return 0;
        r = agent_base_init_blocking(agent_fd, req->ca_pem, req->service, req->warm_user, req->warm_cwd,
                                     req->warm_env, 30000, reterr);
        if (r < 0 || !req->service_ready)
                return r;
        for (;;) {
                uint64_t now = now_usec_monotonic();

                if (now >= deadline)
                        break;
                status = agent_run_blocking(agent_fd, ready_argv, req->warm_env, req->warm_cwd, req->warm_user,
                                            (int) MIN((deadline - now) / 1000, 60000U) + 1);
                if (status == 0)
                        return 0;
                if (status > 0)
                        last_exit = status;
                else if (status != -ETIMEDOUT && status != -EPROTO)
                        return error_set(reterr, ERROR_INTERNAL, "template %s: its ready command (%s) could not be run: %s",
                                         req->template_name, req->service_ready, strerror(-status)) ?: status;
                (void) usleep(BASE_SERVICE_READY_INTERVAL_MS * 1000);
        }
        /* A run cut off by the deadline says nothing of the service: the last exit status it gave does. */
        if (last_exit > 0)
                return error_set(reterr, ERROR_INTERNAL,
                                 "template %s: its ready command (%s) still exits %d after %d s; the service's output "
                                 "is in /var/log/space-service.log in a sandbox's guest",
                                 req->template_name, req->service_ready, last_exit, limit_s)
                               ?: -ETIMEDOUT;
        return error_set(reterr, ERROR_INTERNAL,
                         "template %s: its ready command (%s) never finished within %d s: the guest is too slow or "
                         "the command hangs",
                         req->template_name, req->service_ready, limit_s)
                       ?: -ETIMEDOUT;
}

static int base_save(const BaseSnapshot *b, Qmp *q, Error *reterr) {
        _cleanup_close_ int fd = open(b->state_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        int r;

        if (fd < 0)
                return base_fail_msg(b, -errno, reterr);
        r = vm_save_state(q, fd, 120000, NULL, NULL, reterr);
        if (r < 0)
                return r;
        if (fsync(fd) < 0)
                return base_fail_msg(b, -errno, reterr);
        return 0;
}

static int base_allocate_mem(const BaseRequest *req, const BaseSnapshot *b, Error *reterr) {
        /* Allocate the holes (zero pages the guest never wrote): sandboxes map this file privately,
         * and on tmpfs reading a hole through such a mapping allocates a page, which on a full
         * filesystem kills QEMU with SIGBUS in the middle of, say, a suspend. */
        _cleanup_close_ int mfd = open(b->mem_path, O_RDWR | O_CLOEXEC);
        /* and on disk before `ready` says it is: a crash must not leave a ready base with lost pages */
        if (mfd < 0 || fallocate(mfd, 0, 0, (off_t) (req->memory_mib << 20)) < 0 || fsync(mfd) < 0) {
                int r = -errno;
                (void) error_set(reterr, error_code_from_errno(r),
                                 "cannot allocate the base memory file %s (%llu MiB): %s", b->mem_path,
                                 (unsigned long long) req->memory_mib, strerror(-r));
                return r;
        }
        return 0;
}

/* Builds the base snapshot in b->dir, under m->base_lock, which the caller holds. On failure nothing of
 * it is left but QEMU's log. */
static int base_build(const BaseRequest *req, const BaseSnapshot *b, const char *ready, const char *ts,
                      const char *is, Error *reterr) {
        _cleanup_free_ char *run_dir = NULL;
        _cleanup_close_ int agent_fd = -1;
        Qmp *q = NULL;
        pid_t pid = 0;
        int r;

        (void) rm_rf(b->dir);
        r = space_mkdir_p(b->dir, 0700);
        if (r < 0)
                goto fail_msg;
        if (asprintf(&run_dir, "%s/base-%s%s", req->runtime_dir, ts, is) < 0) {
                r = -ENOMEM;
                goto fail;
        }
        (void) rm_rf(run_dir);
        r = space_mkdir_p(run_dir, 0700);
        if (r < 0)
                goto fail_msg;
        {
                _cleanup_free_ char *disk = NULL;
                r = disk_base_new(req->disk_backend, req->rootfs, b->dir, &disk, reterr);
                if (r < 0)
                        goto fail;
                if (!streq(disk, b->disk_path)) {
                        r = -EINVAL;
                        goto fail_msg;
                }
        }

        r = base_boot(req, b, run_dir, &pid, &q, &agent_fd, reterr);
        if (r < 0)
                goto fail;
        r = base_start_service(req, agent_fd, reterr);
        if (r < 0)
                goto fail;
        base_warm_and_sync(req, agent_fd);
        base_freeze(req, agent_fd);
        agent_fd = safe_close(agent_fd);
        r = base_save(b, q, reterr);
        if (r < 0)
                goto fail;
        q = qmp_close(q);
        (void) vm_kill(pid, run_dir, 10000);
        pid = 0;
        r = base_allocate_mem(req, b, reterr);
        if (r < 0)
                goto fail;
        (void) rm_rf(run_dir);
        {
                _cleanup_close_ int sfd = open(b->state_path, O_RDONLY | O_CLOEXEC);
                if (sfd < 0 || fsync(sfd) < 0) {
                        r = -errno;
                        goto fail_msg;
                }
        }
        /* `ready` holds the host it was made under (vm_host_fingerprint()) */
        {
                _cleanup_free_ char *content = NULL;
                if (asprintf(&content, "%s\n", req->host_fingerprint) < 0) {
                        r = -ENOMEM;
                        goto fail;
                }
                r = write_file_atomic(ready, content);
        }
        if (r < 0)
                goto fail_msg;
        return 0;

fail_msg:
        (void) base_fail_msg(b, r, reterr);
fail:
        q = qmp_close(q);
        if (pid > 0)
                (void) vm_kill(pid, run_dir, 5000);
        if (run_dir) {
                /* keep QEMU's log next to the failure for whoever debugs it */
                _cleanup_free_ char *log_src = NULL, *log_dst = NULL;
                if (asprintf(&log_src, "%s/qemu.log", run_dir) >= 0 &&
                    asprintf(&log_dst, "%s/base-build-failed.log", req->state_dir) >= 0)
                        (void) rename(log_src, log_dst);
                (void) rm_rf(run_dir);
        }
        (void) rm_rf(b->dir);
        return r;
}

/* Whether the base whose `ready` file is ready was made under another host than req's (ARCHITECTURE.md,
 * "Snapshots and their host"), and then why in buf. A `ready` of older daemons ("1") names no host: it is taken as this one's, as
 * it was before fingerprints. */
static bool base_made_elsewhere(const BaseRequest *req, const char *ready, char *buf, size_t size) {
        _cleanup_close_ int fd = open(ready, O_RDONLY | O_CLOEXEC);
        char was[1024];
        ssize_t n;

        n = fd < 0 ? -1 : read(fd, was, sizeof was - 1);
        if (n < 0)
                return false;
        was[n] = 0;
        was[strcspn(was, "\n")] = 0;
        if (streq(was, "1") || !req->host_fingerprint[0])
                return false;
        return vm_fingerprint_explain(was, req->host_fingerprint, buf, size);
}

/* Moves a base out of the way of its rebuild, into <dir>.set-aside (one, the latest), rather than removing it:
 * sandboxes that run from it keep their open files, and what was made from it under the other host (suspended
 * sandboxes, checkpoints) is refused for the same reason the base was, its files still there to look at. */
static void base_set_aside(const BaseSnapshot *b) {
        _cleanup_free_ char *aside = NULL;

        if (asprintf(&aside, "%s.set-aside", b->dir) < 0)
                return;
        (void) rm_rf(aside);
        if (rename(b->dir, aside) < 0)
                log_warning("cannot set the base snapshot %s aside: %m", b->dir);
}

void base_snapshot_discard(Manager *m, const BaseSnapshot *b) {
        _cleanup_free_ char *ready = NULL;
        struct stat st;

        if (!b->dir || asprintf(&ready, "%s/ready", b->dir) < 0)
                return;
        pthread_mutex_lock(&m->base_lock);
        if (stat(ready, &st) == 0 && st.st_ino == b->ready_ino)
                base_set_aside(b);
        pthread_mutex_unlock(&m->base_lock);
}

int base_snapshot_ensure(Manager *m, const BaseRequest *req, BaseSnapshot *ret, Error *reterr) {
        _cleanup_free_ char *ready = NULL;
        struct stat st;
        BaseSnapshot b = {};
        char ks[13], is[13], ts[13];
        int r;

        r = base_snapshot_paths(req, &b, ks, is, ts, &ready, reterr);
        if (r < 0)
                return r;

        pthread_mutex_lock(&m->base_lock);
        if (stat(ready, &st) == 0) {
                char why[512];

                if (!base_made_elsewhere(req, ready, why, sizeof why)) {
                        pthread_mutex_unlock(&m->base_lock);
                        b.ready_ino = st.st_ino;
                        *ret = b;
                        return 0;
                }
                log_warning("the base snapshot %s was made on another host (%s): setting it aside and building it "
                            "again", b.dir, why);
                base_set_aside(&b);
        }

        log_info("building the base snapshot of template %s (%llu MiB, %u vCPU): one cold boot", req->template_name,
                 (unsigned long long) req->memory_mib, req->vcpu);
        uint64_t t0 = now_usec_monotonic();
        r = base_build(req, &b, ready, ts, is, reterr);
        if (r >= 0 && stat(ready, &st) == 0)
                b.ready_ino = st.st_ino;
        pthread_mutex_unlock(&m->base_lock);
        if (r < 0) {
                base_snapshot_done(&b);
                return r;
        }
        log_info("base snapshot of %s ready in %.1f s: %s", req->template_name,
                 (double) (now_usec_monotonic() - t0) / 1e6, b.dir);
        *ret = b;
        return 0;
}

VmConfig base_restore_config(const BaseSnapshot *b, const BaseRequest *req, const char *run_dir, const char *disk,
                             const char *disk_dir) {
        /* Everything but the run dir and the disk must equal the saved VM's command line. */
        return (VmConfig) {
                .qemu_binary = req->qemu_binary,
                .run_dir = run_dir,
                .kernel = b->kernel,
                .initrd = b->initrd,
                .disk = disk,
                .disk_format = disk_format(disk),
                .disk_dir = disk_dir,
                .mem_path = b->mem_path,
                .mem_share = false,
                .vcpus = req->vcpu,
                .memory_mib = req->memory_mib,
                .accel = req->accel,
                .tsc_khz = req->tsc_khz,
                .tcg_cache_mib = req->tcg_cache_mib,
                .incoming = true,
                .hold_at_shutdown = true,   /* run state, not device state: bases made without it restore */
                .confine = req->confine,
        };
}

/* A stopped sandbox boots again from its own disk (ARCHITECTURE.md, "Stop and start"): the command line of a
 * restore of this base (so that its RAM and devices are what a later suspend, checkpoint or wake expects),
 * booted instead of restored, up to the agent's hello; then the base's INIT (the CA, the template's service,
 * waited for until ready), as the base's own build has it. Its RAM maps the base's file privately, as a
 * restore's does: a cold boot reads nothing of it that it did not write first. */
int base_cold_boot(const BaseSnapshot *b, const BaseRequest *req, const char *run_dir, const char *disk,
                   const char *disk_dir, pid_t *ret_pid, char **ret_unconfined, int *ret_agent_fd, Error *reterr) {
        _cleanup_free_ char *agent_sock = NULL;
        _cleanup_close_ int fd = -1;
        VmConfig c = base_restore_config(b, req, run_dir, disk, disk_dir);
        Qmp *q = NULL;
        int r;

        if (asprintf(&agent_sock, "%s/agent.sock", run_dir) < 0)
                return -ENOMEM;
        c.incoming = false;
        r = vm_start(&c, 10000, ret_pid, &q, ret_unconfined, reterr);
        if (r < 0)
                return r;
        crash_point("start-booting");
        r = agent_wait_hello(agent_sock, BASE_BOOT_TIMEOUT_MS, &fd, reterr);
        if (r < 0) {
                _cleanup_free_ char *console = NULL, *msg = reterr ? TAKE_PTR(reterr->message) : NULL;
                (void) vm_console_read(q, 2000, &console, NULL);
                (void) error_set(reterr, ERROR_INTERNAL, "%s; guest console: %s", msg ?: "no hello",
                                 console && *console ? console : "(empty)");
        }
        qmp_close(q);
        if (r >= 0)
                r = base_start_service(req, fd, reterr);
        if (r < 0)
                return r;
        *ret_agent_fd = TAKE_FD(fd);
        return 0;
}

void base_cleanup_stale(const char *runtime_dir) {
        _cleanup_closedir_ DIR *d = opendir(runtime_dir);
        struct dirent *de;

        /* A base snapshot being built when the daemon died: its QEMU outlives us (ARCHITECTURE.md, decision 7) and nothing else
         * knows of it. The lock on the runtime dir says no other daemon is building one now. */
        while (d && (de = readdir(d))) {
                _cleanup_free_ char *dir = NULL;
                pid_t pid;

                if (strncmp(de->d_name, "base-", 5) != 0 || asprintf(&dir, "%s/%s", runtime_dir, de->d_name) < 0)
                        continue;
                if (vm_read_pidfile(dir, &pid) >= 0 && pid > 0 && vm_pid_alive(pid, dir)) {
                        log_info("killing QEMU %d, the base snapshot build a previous spaced left", (int) pid);
                        (void) vm_kill(pid, dir, 5000);
                }
                (void) rm_rf(dir);
        }
}

/* Copies the 12 characters at s into d and says whether they are lowercase hex digits. */
static bool short_digest_at(const char *s, char d[static 13]) {
        memcpy(d, s, 12);
        d[12] = 0;
        return string_is_hex(d, 12);
}

/* The CA fingerprint of the "-ca<16 hex>" field in s, the name past its digests (the other fields' letters are
 * never "ca"), into fp; "" when there is none. */
static void base_name_ca(const char *s, char fp[static 17]) {
        fp[0] = 0;
        for (const char *c = strstr(s, "-ca"); c; c = strstr(c + 3, "-ca"))
                if (strlen(c + 3) >= 16 && (c[19] == 0 || c[19] == '-')) {
                        memcpy(fp, c + 3, 16);
                        fp[16] = 0;
                        if (string_is_hex(fp, 16))
                                return;
                        fp[0] = 0;
                }
}

int base_name_parse(const char *name, BaseName *ret) {
        size_t n = strlen(name);

        /* The first "-k" with 12 hex digits before it and "<12 hex>-i<12 hex>" after it: an older name's
         * template part may hold "-k" too. */
        for (const char *k = strstr(name, "-k"); k; k = strstr(k + 2, "-k")) {
                size_t at = (size_t) (k - name);
                BaseName b;

                if (at < 12 || n < at + 2 + 12 + 2 + 12 || strncmp(k + 14, "-i", 2) != 0)
                        continue;
                if (!short_digest_at(k - 12, b.template_digest) || !short_digest_at(k + 2, b.kernel_digest) ||
                    !short_digest_at(k + 16, b.initramfs_digest))
                        continue;
                b.devices_current = n >= strlen(BASE_DEVICES_SUFFIX) &&
                                    streq(name + n - strlen(BASE_DEVICES_SUFFIX), BASE_DEVICES_SUFFIX);
                base_name_ca(k + 28, b.ca_fingerprint);
                *ret = b;
                return 0;
        }
        return -EINVAL;
}
