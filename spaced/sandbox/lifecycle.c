/* SPDX-License-Identifier: Apache-2.0 */
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
#include "core/util.h"
#include "core/worker.h"
#include "sandbox/sandbox.h"
#include "template/template.h"
#include "channel/channel.h"

/* Pause, resume, suspend and wake (ARCHITECTURE.md, decision 6), stop and start ("Stop and start"). Each is an
 * operation run on a worker; the states SUSPENDING, WAKING, STOPPING and STARTING are journaled before the work
 * starts so a daemon killed in the middle knows, on start, which way to finish (sandbox_reconcile_lifecycle). */

#define SUSPEND_TIMEOUT_MS (600 * 1000)
#define WAKE_TIMEOUT_MS (120 * 1000)
/* QEMU's own exit after SIGTERM flushes its block layer; past this it is killed */
#define STOP_KILL_TIMEOUT_MS (20 * 1000)

typedef struct LifecycleJob {
        Manager *manager;
        LifecycleKind kind;
        char id[SANDBOX_ID_LEN + 1];
        char op_id[OPERATION_ID_LEN + 1];
        char *run_dir;
        char *data_dir;
        pid_t pid;
        BaseRequest base;     /* wake, start: how to rebuild the QEMU command line */
        char **init_env;
        char **init_mounts;  /* the sandbox's volumes: its guest mounts them again after a start */
        /* results */
        int r;
        Error error;
        pid_t new_pid;
        char *unconfined;     /* wake, start: vm_start()'s, why the new QEMU runs unconfined (NULL: it does not) */
        int agent_fd;
        OperationProgress progress; /* suspend: the operation's, while it runs */
        uint64_t boot_usec;   /* start: how long the cold boot took, to the identity's answer */
} LifecycleJob;

static const char *const kind_names[] = {
        [LIFECYCLE_PAUSE] = "pause",
        [LIFECYCLE_RESUME] = "resume",
        [LIFECYCLE_SUSPEND] = "suspend",
        [LIFECYCLE_WAKE] = "wake",
        [LIFECYCLE_STOP] = "stop",
        [LIFECYCLE_START] = "start",
};

static void job_free(LifecycleJob *j) {
        pthread_mutex_destroy(&j->progress.lock);
        free(j->run_dir);
        free(j->data_dir);
        base_request_done(&j->base);
        strv_free(j->init_env);
        strv_free(j->init_mounts);
        free(j->unconfined);
        error_done(&j->error);
        safe_close(j->agent_fd);
        free(j);
}

static int suspend_paths(const char *data_dir, char **ret_state, char **ret_done) {
        if (asprintf(ret_state, "%s/suspend.state", data_dir) < 0)
                return -ENOMEM;
        if (asprintf(ret_done, "%s/suspend.done", data_dir) < 0) {
                free(*ret_state);
                return -ENOMEM;
        }
        return 0;
}

static int do_suspend(LifecycleJob *j) {
        _cleanup_free_ char *path = NULL, *state = NULL, *done = NULL;
        _cleanup_close_ int fd = -1;
        Qmp *q = NULL;
        int r;

        if (asprintf(&path, "%s/qmp.sock", j->run_dir) < 0 || suspend_paths(j->data_dir, &state, &done) < 0)
                return -ENOMEM;
        (void) unlink(done);
        fd = open(state, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) {
                (void) error_set(&j->error, error_code_from_errno(-errno), "cannot create %s: %m", state);
                return -errno;
        }
        crash_point("suspend-journaled");
        r = qmp_open(path, 5000, &q, &j->error);
        if (r < 0)
                return r;
        /* The sandbox's RAM is a private mapping, so x-ignore-shared does not skip it: the whole state goes
         * to the file. */
        r = vm_save_state(q, fd, SUSPEND_TIMEOUT_MS, operation_progress_save, &j->progress, &j->error);
        if (r >= 0 && fsync(fd) < 0) {
                r = -errno;
                (void) error_set(&j->error, error_code_from_errno(-errno), "writing %s: %m", state);
        }
        if (r < 0) {
                /* Disk full or the like: the sandbox keeps running as it was. */
                (void) vm_cont(q, 5000, NULL);
                qmp_close(q);
                (void) unlink(state);
                return r;
        }
        crash_point("suspend-saved");
        qmp_close(q);
        r = write_file_atomic(done, "1\n");
        if (r < 0) {
                (void) vm_cont_at(j->run_dir, NULL);
                (void) unlink(state);
                (void) error_set(&j->error, error_code_from_errno(r), "cannot record the suspend: %s", strerror(-r));
                return r;
        }
        crash_point("suspend-marked");
        (void) vm_kill(j->pid, j->run_dir, 10000);
        return 0;
}

static int do_wake(LifecycleJob *j) {
        _cleanup_free_ char *state = NULL, *done = NULL, *disk = NULL, *qemu_disk = NULL, *qemu_dir = NULL,
                            *agent_path = NULL, *hostname = NULL;
        _cleanup_close_ int fd = -1;
        BaseSnapshot b = {};
        Qmp *q = NULL;
        int r;

        r = sandbox_disk_get(j->data_dir, &disk);
        if (r < 0) {
                (void) error_set(&j->error, error_code_from_errno(r), "the sandbox's disk is missing: %s", strerror(-r));
                return r;
        }
        if (suspend_paths(j->data_dir, &state, &done) < 0 || asprintf(&agent_path, "%s/agent.sock", j->run_dir) < 0 || asprintf(&hostname, "sb-%.12s", j->id) < 0)
                return -ENOMEM;
        r = base_snapshot_ensure(j->manager, &j->base, &b, &j->error);
        if (r < 0)
                return r;
        r = space_mkdir_p(j->run_dir, 0700);
        crash_point("wake-journaled");
        if (r < 0)
                goto out;
        fd = open(state, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                (void) error_set(&j->error, error_code_from_errno(-errno), "the suspended state %s is missing: %m", state);
                goto out;
        }
        r = disk_qemu_path(j->data_dir, disk, &qemu_disk, &qemu_dir);
        if (r < 0) {
                (void) error_set(&j->error, error_code_from_errno(r), "cannot hand the disk to QEMU: %s", strerror(-r));
                goto out;
        }
        VmConfig c = base_restore_config(&b, &j->base, j->run_dir, qemu_disk, qemu_dir);
        r = vm_start(&c, 10000, &j->new_pid, &q, &j->unconfined, &j->error);
        if (r < 0)
                goto out;
        r = vm_restore_state(q, fd, WAKE_TIMEOUT_MS, &j->error);
        crash_point("wake-restored");
        /* Same identity as before, but the clock has to jump to now: sent before the guest runs, so that it
         * comes first. */
        if (r >= 0)
                r = agent_handshake_send(agent_path, j->id, hostname, j->init_env, j->init_mounts, 0, true,
                                         WAKE_TIMEOUT_MS,
                                         &j->agent_fd, &j->error);
        if (r >= 0)
                r = vm_cont(q, 10000, &j->error);
        if (r >= 0)
                r = agent_handshake_finish(j->agent_fd, strv_length(j->init_mounts), WAKE_TIMEOUT_MS, &j->error);
        if (r < 0 && j->new_pid > 0) {
                (void) vm_kill(j->new_pid, j->run_dir, 5000);
                j->new_pid = 0;
        }
out:
        qmp_close(q);
        base_snapshot_done(&b);
        return r;
}

static void remove_suspend_files(const char *data_dir);

/* The guest was synced (or could not be): QEMU goes, with SIGTERM, so that it flushes its block layer, and is
 * killed if it does not go. Its disk stays. */
static int do_stop(LifecycleJob *j) {
        int r;

        crash_point("stop-synced");
        r = vm_kill(j->pid, j->run_dir, STOP_KILL_TIMEOUT_MS);
        if (r < 0)
                (void) error_set(&j->error, ERROR_INTERNAL, "cannot shut QEMU (pid %d) down: %s", (int) j->pid,
                                 strerror(-r));
        return r;
}

/* A cold boot of the sandbox's own disk, not a restore of its template's base: the base's memory no longer
 * matches a disk the sandbox wrote to. The memory of a suspended one is dropped first. Its identity (INIT) as
 * a restore's, on a new connection. */
static int do_start(LifecycleJob *j) {
        _cleanup_free_ char *disk = NULL, *qemu_disk = NULL, *qemu_dir = NULL, *agent_path = NULL,
                            *hostname = NULL;
        _cleanup_close_ int hello_fd = -1;
        uint64_t t0 = now_usec_monotonic();
        BaseSnapshot b = {};
        int r;

        remove_suspend_files(j->data_dir);
        r = sandbox_disk_get(j->data_dir, &disk);
        if (r < 0) {
                (void) error_set(&j->error, error_code_from_errno(r), "the sandbox's disk is missing: %s",
                                 strerror(-r));
                return r;
        }
        if (asprintf(&agent_path, "%s/agent.sock", j->run_dir) < 0 || asprintf(&hostname, "sb-%.12s", j->id) < 0)
                return -ENOMEM;
        r = base_snapshot_ensure(j->manager, &j->base, &b, &j->error);
        if (r < 0)
                return r;
        (void) rm_rf(j->run_dir);
        r = space_mkdir_p(j->run_dir, 0700);
        crash_point("start-journaled");
        if (r >= 0)
                r = disk_qemu_path(j->data_dir, disk, &qemu_disk, &qemu_dir);
        if (r < 0) {
                (void) error_set(&j->error, error_code_from_errno(r), "cannot hand the disk to QEMU: %s", strerror(-r));
                goto out;
        }
        r = base_cold_boot(&b, &j->base, j->run_dir, qemu_disk, qemu_dir, &j->new_pid, &j->unconfined, &hello_fd,
                           &j->error);
        hello_fd = safe_close(hello_fd);
        if (r >= 0)
                r = agent_handshake_send(agent_path, j->id, hostname, j->init_env, j->init_mounts, 0, true,
                                         WAKE_TIMEOUT_MS,
                                         &j->agent_fd, &j->error);
        if (r >= 0)
                r = agent_handshake_finish(j->agent_fd, strv_length(j->init_mounts), WAKE_TIMEOUT_MS, &j->error);
        if (r < 0 && j->new_pid > 0) {
                (void) vm_kill(j->new_pid, j->run_dir, 5000);
                j->new_pid = 0;
        }
        j->boot_usec = now_usec_monotonic() - t0;
out:
        base_snapshot_done(&b);
        return r;
}

static void lifecycle_done(Manager *m, void *userdata);

static void *lifecycle_worker(void *userdata) {
        LifecycleJob *j = userdata;

        switch (j->kind) {
        case LIFECYCLE_PAUSE:
                j->r = vm_stop_at(j->run_dir, &j->error);
                break;
        case LIFECYCLE_RESUME:
                j->r = vm_cont_at(j->run_dir, &j->error);
                break;
        case LIFECYCLE_SUSPEND:
                j->r = do_suspend(j);
                break;
        case LIFECYCLE_WAKE:
                j->r = do_wake(j);
                break;
        case LIFECYCLE_STOP:
                j->r = do_stop(j);
                break;
        case LIFECYCLE_START:
                j->r = do_start(j);
                break;
        }
        completion_post(j->manager, lifecycle_done, j);
        return NULL;
}

static void remove_suspend_files(const char *data_dir) {
        _cleanup_free_ char *state = NULL, *done = NULL;

        if (suspend_paths(data_dir, &state, &done) < 0)
                return;
        (void) unlink(state);
        (void) unlink(done);
}

static void stop_done(Manager *m, Sandbox *s, LifecycleJob *j) {
        if (j->r < 0 && s->qemu_pid > 0 && vm_pid_alive(s->qemu_pid, s->run_dir)) {
                s->state = SANDBOX_RUNNING; /* QEMU would not go: it runs on, thawed */
                sandbox_clock_resync(m, s);
                sandbox_watch_vm(s);
                return;
        }
        /* stopped by its user: no error, which is what tells it from one whose QEMU died */
        s->state = SANDBOX_STOPPED;
        free(s->error);
        s->error = NULL;
        free(s->host);
        s->host = NULL;
        s->qemu_pid = 0;
        s->channel.agent = agent_free(s->channel.agent);
        sandbox_unwatch_vm(s);
        (void) rm_rf(s->run_dir);
        if (j->r < 0) {
                /* QEMU is gone all the same: the stop is done */
                j->r = 0;
                error_done(&j->error);
        }
}

static void start_done(Manager *m, Sandbox *s, LifecycleJob *j) {
        if (j->r < 0) {
                /* a suspended one's memory was dropped before the boot: it is stopped now either way */
                s->state = SANDBOX_STOPPED;
                return;
        }
        log_info("sandbox %s: booted from its disk in %.1f ms", s->id, (double) j->boot_usec / 1000.0);
        s->state = SANDBOX_RUNNING;
        free(s->error);
        s->error = NULL;
        free(s->host);
        s->host = NULL;
        s->qemu_pid = j->new_pid;
        s->last_active = now_unix();
        sandbox_set_confined(s, TAKE_PTR(j->unconfined));
        if (agent_attach(s, TAKE_FD(j->agent_fd)) < 0)
                log_warning("sandbox %s: cannot watch the agent after start", s->id);
        sandbox_watch_vm(s);
        /* under TCG a new QEMU's first command pays for translating fork and exec: paid now (as a create's) */
        if (j->base.accel == VM_ACCEL_TCG && s->channel.agent)
                (void) agent_warm_up_send(s->channel.agent, j->init_env, j->base.warm_cwd, j->base.warm_user);
}

static void lifecycle_done(Manager *m, void *userdata) {
        LifecycleJob *j = userdata;
        crash_point(j->kind == LIFECYCLE_SUSPEND ? "suspend-before-done" : j->kind == LIFECYCLE_WAKE ? "wake-before-done" :
                    j->kind == LIFECYCLE_STOP ? "stop-before-done" : j->kind == LIFECYCLE_START ? "start-before-done" :
                    "lifecycle-before-done");
        Sandbox *s = sandbox_find_by_id(m, j->id);
        Operation *op = operation_find(m, j->op_id);
        const char *msg = j->error.message ?: (j->r < 0 ? strerror(-j->r) : NULL);

        if (op)
                op->progress = NULL;

        if (!s) {
                if (op)
                        operation_finish(op, ERROR_SANDBOX_GONE, "the sandbox was removed meanwhile");
                job_free(j);
                return;
        }
        s->busy = false;
        switch (j->kind) {
        case LIFECYCLE_PAUSE:
                if (j->r >= 0)
                        s->state = SANDBOX_PAUSED;
                else
                        sandbox_clock_resync(m, s); /* the INIT that thaws what the pause froze */
                /* a failure while it was busy is found again by a new watch's first query-status */
                sandbox_watch_vm(s);
                break;
        case LIFECYCLE_RESUME:
                if (j->r >= 0) {
                        s->state = SANDBOX_RUNNING;
                        sandbox_clock_resync(m, s);
                }
                /* a failure while it was busy is found again by a new watch's first query-status */
                sandbox_watch_vm(s);
                break;
        case LIFECYCLE_SUSPEND:
                if (j->r >= 0) {
                        s->state = SANDBOX_SUSPENDED;
                        free(s->host);
                        s->host = m->host_fingerprint ? strdup(m->host_fingerprint) : NULL;
                        s->qemu_pid = 0;
                        s->channel.agent = agent_free(s->channel.agent);
                        sandbox_unwatch_vm(s);
                        (void) rm_rf(s->run_dir);
                } else if (s->qemu_pid > 0 && vm_pid_alive(s->qemu_pid, s->run_dir)) {
                        s->state = SANDBOX_RUNNING; /* do_suspend let it go on */
                        sandbox_clock_resync(m, s);
                        sandbox_watch_vm(s);
                } else {
                        s->state = SANDBOX_STOPPED;
                        free(s->error);
                        s->error = strdup("QEMU exited while the sandbox was being suspended; its disk is kept, "
                                          "its memory is lost; 'spacectl start' boots it again from its disk, "
                                          "'spacectl rm' removes it");
                }
                break;
        case LIFECYCLE_WAKE:
                if (j->r >= 0) {
                        s->state = SANDBOX_RUNNING;
                        free(s->host); /* no saved state any more */
                        s->host = NULL;
                        s->qemu_pid = j->new_pid;
                        sandbox_set_confined(s, TAKE_PTR(j->unconfined));
                        if (agent_attach(s, TAKE_FD(j->agent_fd)) < 0)
                                log_warning("sandbox %s: cannot watch the agent after wake", s->id);
                        sandbox_watch_vm(s);
                        remove_suspend_files(s->data_dir);
                } else
                        s->state = SANDBOX_SUSPENDED; /* the state file is still there: try again */
                break;
        case LIFECYCLE_STOP:
                stop_done(m, s, j);
                break;
        case LIFECYCLE_START:
                start_done(m, s, j);
                break;
        }
        (void) sandbox_save(s);
        if (j->r < 0)
                log_error("sandbox %s: %s failed: %s", s->id, kind_names[j->kind], msg);
        else
                log_info("sandbox %s: %s done", s->id, kind_names[j->kind]);
        if (op)
                operation_finish(op, j->r < 0 ? (j->r == -ENOSPC ? ERROR_NO_SPACE : ERROR_OPERATION_FAILED) : ERROR_NONE, msg);
        job_free(j);
}

static void lifecycle_quiesced(Manager *m, void *userdata, uint64_t freeze_usec) {
        LifecycleJob *j = userdata;
        int r;

        if (freeze_usec > 0)
                log_debug("sandbox %s: workload frozen %.1f ms before the %s", j->id, (double) freeze_usec / 1000.0,
                          kind_names[j->kind]);
        r = worker_start(m, lifecycle_worker, j);
        if (r < 0) {
                j->r = r;
                (void) error_set(&j->error, ERROR_INTERNAL, "cannot start a worker thread");
                m->workers_running++;
                lifecycle_done(m, j);
        }
}

/* Whether s may take kind now: not busy, in the state kind starts from, and room for the memory of what boots
 * or wakes. */
static int lifecycle_check(Manager *m, Sandbox *s, LifecycleKind kind, Error *reterr) {
        static const SandboxState required[] = {
                [LIFECYCLE_PAUSE] = SANDBOX_RUNNING,
                [LIFECYCLE_RESUME] = SANDBOX_PAUSED,
                [LIFECYCLE_SUSPEND] = SANDBOX_RUNNING,
                [LIFECYCLE_WAKE] = SANDBOX_SUSPENDED,
                [LIFECYCLE_STOP] = SANDBOX_RUNNING,
                [LIFECYCLE_START] = SANDBOX_STOPPED,
        };

        if (s->busy)
                return error_set(reterr, ERROR_SANDBOX_BUSY, "sandbox %s is %s; try again when that is done",
                                           s->id, sandbox_state_to_string(s->state)) ?: -EBUSY;
        if (kind == LIFECYCLE_STOP && s->state == SANDBOX_STOPPED)
                return error_set(reterr, ERROR_INVALID_STATE, "sandbox %s is stopped already; 'spacectl start %s' "
                                 "boots it again", s->id, s->id) ?: -EINVAL;
        if (kind == LIFECYCLE_STOP && s->state == SANDBOX_PAUSED)
                return error_set(reterr, ERROR_INVALID_STATE, "cannot stop sandbox %s: it is paused, and a stop syncs "
                                 "its guest's filesystems first; resume it, then stop it", s->id) ?: -EINVAL;
        if (kind == LIFECYCLE_START && (s->state == SANDBOX_RUNNING || s->state == SANDBOX_PAUSED))
                return error_set(reterr, ERROR_INVALID_STATE, "sandbox %s is %s already: only a stopped sandbox is "
                                 "started", s->id, sandbox_state_to_string(s->state)) ?: -EINVAL;
        /* suspend also takes a paused sandbox; start a suspended one, whose memory it drops */
        if (s->state != required[kind] && !(kind == LIFECYCLE_SUSPEND && s->state == SANDBOX_PAUSED) &&
            !(kind == LIFECYCLE_START && s->state == SANDBOX_SUSPENDED))
                return error_set(reterr, ERROR_INVALID_STATE, "cannot %s sandbox %s: it is %s", kind_names[kind],
                                           s->id, sandbox_state_to_string(s->state)) ?: -EINVAL;
        if (kind == LIFECYCLE_WAKE || kind == LIFECYCLE_START) {
                uint64_t in_use = manager_memory_in_use(m);
                if (in_use + s->memory_mib > m->memory_limit_mib)
                        return error_set(reterr, ERROR_INSUFFICIENT_MEMORY,
                                                   "not enough memory to %s sandbox %s: it needs %llu MiB, %llu MiB "
                                                   "of the %llu MiB limit are in use", kind_names[kind],
                                                   s->id, (unsigned long long) s->memory_mib,
                                                   (unsigned long long) in_use,
                                                   (unsigned long long) m->memory_limit_mib) ?: -ENOSPC;
        }
        return 0;
}

/* What a wake or a start needs to build its QEMU: the template (it must still be installed), the base's request
 * and the env of the INIT, as at create. */
static int job_prepare_boot(Manager *m, Sandbox *s, LifecycleJob *j, Error *reterr) {
        Template *t = template_find_digest(m, s->template_digest);
        char why[512];
        int r;

        /* before anything: a suspended state of an older daemon names no host, taken as this one's */
        if (j->kind == LIFECYCLE_WAKE && s->host && s->host[0] &&
            vm_fingerprint_explain(s->host, m->host_fingerprint, why, sizeof why))
                return error_set(reterr, ERROR_HOST_MISMATCH,
                                 "sandbox %s was suspended under another host (%s): its memory cannot be "
                                 "restored here; wake it where it was suspended, or remove it "
                                 "('spacectl rm %s') and create it again", s->id, why, s->id) ?: -EXDEV;
        if (!t)
                return error_set(reterr, ERROR_TEMPLATE_NOT_FOUND,
                                 "sandbox %s was made from template %s (%s), which is no longer installed; it cannot "
                                 "be %s", s->id, s->template_name, s->template_digest ?: "?",
                                 j->kind == LIFECYCLE_WAKE ? "woken" : "started") ?: -ENOENT;
        r = base_request_init(m, t, s->vcpu, s->memory_mib, &j->base);
        if (r < 0)
                return r;
        j->init_env = calloc(1, sizeof(char *));
        j->init_mounts = sandbox_strv_copy(s->mounts);
        if (!j->init_env || !j->init_mounts)
                return -ENOMEM;
        /* the template's env and the sandbox's, as at create */
        for (char **e = t->env; e && *e; e++)
                (void) strv_extend(&j->init_env, *e);
        for (char **e = s->env; e && *e; e++)
                (void) strv_extend(&j->init_env, *e);
        return 0;
}

/* The stop's last word to the guest is answered: QEMU goes, on a worker. */
static void lifecycle_synced(int r, const char *message, void *userdata) {
        LifecycleJob *j = userdata;

        if (r > 0)
                log_debug("sandbox %s: its filesystems are synced for the stop", j->id);
        else
                log_warning("sandbox %s: its filesystems were not synced before the stop (%s): what it wrote in its "
                            "last seconds may be lost", j->id, r == 0 ? "its agent is older" : message ?: strerror(-r));
        lifecycle_quiesced(j->manager, j, 0);
}

static int lifecycle_job_new(Manager *m, Sandbox *s, LifecycleKind kind, LifecycleJob **ret) {
        LifecycleJob *j = calloc(1, sizeof *j);

        if (!j)
                return -ENOMEM;
        pthread_mutex_init(&j->progress.lock, NULL);
        j->agent_fd = -1;
        j->manager = m;
        j->kind = kind;
        j->pid = s->qemu_pid;
        memcpy(j->id, s->id, sizeof j->id);
        j->run_dir = strdup(s->run_dir);
        j->data_dir = strdup(s->data_dir);
        if (!j->run_dir || !j->data_dir) {
                job_free(j);
                return -ENOMEM;
        }
        *ret = j;
        return 0;
}

int sandbox_lifecycle_start(Manager *m, Sandbox *s, LifecycleKind kind, Operation **ret_op, Error *reterr) {
        SandboxState was = s->state;
        LifecycleJob *j;
        Operation *op;
        bool freeze;
        int r;

        r = lifecycle_check(m, s, kind, reterr);
        if (r < 0)
                return r;
        r = lifecycle_job_new(m, s, kind, &j);
        if (r < 0)
                return r;
        if (kind == LIFECYCLE_WAKE || kind == LIFECYCLE_START) {
                r = job_prepare_boot(m, s, j, reterr);
                if (r < 0) {
                        job_free(j);
                        return r;
                }
        }
        op = operation_new(m, kind_names[kind], s->id);
        if (!op) {
                job_free(j);
                return -ENOMEM;
        }
        memcpy(j->op_id, op->id, sizeof j->op_id);
        if (kind == LIFECYCLE_SUSPEND)
                op->progress = &j->progress;
        /* A suspend's save is what a wake restores; a pause is what a checkpoint of a paused sandbox saves:
         * either way the workload stands still first, and the wake's or resume's INIT thaws it. */
        freeze = (kind == LIFECYCLE_SUSPEND || kind == LIFECYCLE_PAUSE) && s->state == SANDBOX_RUNNING;
        s->busy = true;
        if (kind == LIFECYCLE_SUSPEND)
                s->state = SANDBOX_SUSPENDING;
        else if (kind == LIFECYCLE_WAKE)
                s->state = SANDBOX_WAKING;
        else if (kind == LIFECYCLE_STOP)
                s->state = SANDBOX_STOPPING;
        else if (kind == LIFECYCLE_START)
                s->state = SANDBOX_STARTING;
        (void) sandbox_save(s); /* the journal entry reconcile reads after a crash */
        *ret_op = op;
        if (freeze) {
                sandbox_quiesce(m, s, lifecycle_quiesced, j);
                return 0;
        }
        /* a stop's guest freezes its workload and syncs its filesystems first; without a channel it cannot */
        if (kind == LIFECYCLE_STOP && s->channel.agent &&
            agent_stop_sync(s->channel.agent, AGENT_STOP_SYNC_TIMEOUT_USEC, lifecycle_synced, j) >= 0)
                return 0;
        r = worker_start(m, lifecycle_worker, j);
        if (r < 0) {
                s->busy = false;
                s->state = was;
                (void) sandbox_save(s);
                operation_finish(op, ERROR_INTERNAL, "cannot start a worker thread");
                job_free(j);
                *ret_op = NULL;
                return error_set(reterr, ERROR_INTERNAL, "cannot start a worker thread") ?: r;
        }
        return 0;
}

/* After a daemon restart: finish or roll back what a killed daemon left half done. */
int sandbox_reconcile_lifecycle(Sandbox *s) {
        _cleanup_free_ char *state = NULL, *done = NULL;
        bool alive = s->qemu_pid > 0 && vm_pid_alive(s->qemu_pid, s->run_dir);
        bool complete;

        if (suspend_paths(s->data_dir, &state, &done) < 0)
                return -ENOMEM;
        complete = access(done, F_OK) == 0;

        switch (s->state) {
        case SANDBOX_SUSPENDING:
                if (complete) {
                        /* the state is safely on disk: finish the suspend */
                        if (alive)
                                (void) vm_kill(s->qemu_pid, s->run_dir, 10000);
                        s->qemu_pid = 0;
                        s->state = SANDBOX_SUSPENDED;
                        (void) rm_rf(s->run_dir);
                } else if (alive) {
                        /* roll back: the VM is only stopped */
                        (void) unlink(state);
                        (void) vm_cont_at(s->run_dir, NULL);
                        s->state = SANDBOX_RUNNING;
                        if (agent_connect(s) >= 0)
                                sandbox_clock_resync(s->manager, s); /* and the thaw of what the suspend froze */
                } else {
                        s->state = SANDBOX_STOPPED;
                        free(s->error);
                        s->error = strdup("QEMU exited while the sandbox was being suspended; its disk is kept, "
                                          "its memory is lost; 'spacectl start' boots it again from its disk, "
                                          "'spacectl rm' removes it");
                }
                break;
        case SANDBOX_WAKING:
                /* the suspend file is still there until a wake completes: go back to suspended */
                if (alive)
                        (void) vm_kill(s->qemu_pid, s->run_dir, 10000);
                s->qemu_pid = 0;
                (void) rm_rf(s->run_dir);
                s->state = complete ? SANDBOX_SUSPENDED : SANDBOX_STOPPED;
                break;
        case SANDBOX_PAUSED:
                if (alive)
                        (void) agent_connect(s);
                else {
                        s->state = SANDBOX_STOPPED;
                        free(s->error);
                        s->error = strdup("QEMU exited while spaced was not running; its disk is kept: 'spacectl "
                                          "start' boots it again, 'spacectl rm' removes it");
                }
                break;
        case SANDBOX_STOPPING:
                /* Rolled back while QEMU lives (the operation says so): it runs on, thawed by the resync's INIT.
                 * Gone, the stop is done: its disk is what the sync (or the lack of one) left. */
                if (alive && agent_connect(s) >= 0) {
                        s->state = SANDBOX_RUNNING;
                        sandbox_clock_resync(s->manager, s);
                } else {
                        if (alive)
                                (void) vm_kill(s->qemu_pid, s->run_dir, 10000);
                        s->qemu_pid = 0;
                        (void) rm_rf(s->run_dir);
                        s->state = SANDBOX_STOPPED;
                }
                break;
        case SANDBOX_STARTING:
                /* a half-booted guest holds nothing its disk does not: stopped again, to be started again */
                if (alive)
                        (void) vm_kill(s->qemu_pid, s->run_dir, 10000);
                s->qemu_pid = 0;
                (void) rm_rf(s->run_dir);
                s->state = SANDBOX_STOPPED;
                break;
        case SANDBOX_SUSPENDED:
                if (!complete) {
                        s->state = SANDBOX_STOPPED;
                        free(s->error);
                        s->error = strdup("the suspended state is missing; 'spacectl start' boots the sandbox "
                                          "again from its disk, 'spacectl rm' removes it");
                }
                break;
        default:
                break;
        }
        return sandbox_save(s);
}

/* Once a second: sandboxes past their time to live are removed or suspended, idle ones are suspended. */
void lifecycle_tick(Manager *m) {
        int64_t now = now_unix();
        Sandbox *s, *next;

        for (s = m->sandboxes; s; s = next) {
                Error e = {};
                Operation *op;
                int r = 0;

                next = s->next;
                if (s->busy)
                        continue;
                if (s->expires_at > 0 && now >= s->expires_at) {
                        bool suspend = s->on_expiry == EXPIRY_SUSPEND, stop = s->on_expiry == EXPIRY_STOP;

                        if (stop && s->state == SANDBOX_RUNNING) {
                                log_info("sandbox %s reached its time to live: stopping it", s->id);
                                r = sandbox_lifecycle_start(m, s, LIFECYCLE_STOP, &op, &e);
                                s->expires_at = 0;
                        } else if (stop)
                                s->expires_at = 0; /* paused, suspended or stopped: it stays so */
                        else if (suspend && (s->state == SANDBOX_RUNNING || s->state == SANDBOX_PAUSED)) {
                                log_info("sandbox %s reached its time to live: suspending it", s->id);
                                r = sandbox_lifecycle_start(m, s, LIFECYCLE_SUSPEND, &op, &e);
                                s->expires_at = 0;
                        } else if (!suspend && s->state != SANDBOX_CREATING && s->state != SANDBOX_DELETING) {
                                log_info("sandbox %s reached its time to live: removing it", s->id);
                                r = sandbox_delete_start(m, s, true, &op, &e);
                        } else if (suspend)
                                s->expires_at = 0;
                } else if (s->state == SANDBOX_RUNNING && s->idle_timeout > 0 && s->last_active > 0 &&
                           now - s->last_active >= s->idle_timeout) {
                        log_info("sandbox %s idle for %lld s: suspending it", s->id, (long long) (now - s->last_active));
                        r = sandbox_lifecycle_start(m, s, LIFECYCLE_SUSPEND, &op, &e);
                        s->last_active = now; /* a failed suspend is not retried every second */
                }
                if (r < 0)
                        log_warning("sandbox %s: %s", s->id, e.message ?: strerror(-r));
                error_done(&e);
        }
}
