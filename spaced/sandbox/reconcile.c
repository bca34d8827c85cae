/* SPDX-License-Identifier: Apache-2.0 */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/store.h"
#include "core/util.h"
#include "channel/channel.h"
#include "sandbox/sandbox.h"

/* Reconcile at start-up (ARCHITECTURE.md, "What survives a daemon crash"): the database says what the old
 * daemon meant, run directories and live QEMUs say what is; interrupted work is finished or rolled back. */

/* The QEMU that really runs in a sandbox's run dir, whatever the database says: a daemon killed between
 * spawning a VM (create, wake, restore) and recording its pid leaves one only the pid file knows. */
static void reconcile_pid(Sandbox *s) {
        pid_t pid = 0;

        if (!s->run_dir || vm_read_pidfile(s->run_dir, &pid) < 0 || pid <= 0 || !vm_pid_alive(pid, s->run_dir))
                return;
        if (pid == s->qemu_pid)
                return;
        if (s->qemu_pid > 0 && vm_pid_alive(s->qemu_pid, s->run_dir))
                return; /* ours is alive; vm_start refuses a second QEMU on one run dir anyway */
        log_info("sandbox %s: QEMU pid %d from the run directory replaces the recorded %d", s->id, (int) pid,
                 (int) s->qemu_pid);
        s->qemu_pid = pid;
}

int manager_reconcile(Manager *m) {
        Sandbox *s = m->sandboxes, *next;

        for (; s; s = next) {
                next = s->next;
                reconcile_pid(s);
                switch (s->state) {
                case SANDBOX_CREATING:
                case SANDBOX_DELETING:
                case SANDBOX_POOLED: /* its channel fd died with the old daemon: make a fresh one */
                        /* An interrupted create holds nothing a user made; an interrupted delete was wanted. */
                        log_info("sandbox %s: finishing an interrupted %s", s->id,
                                 s->state == SANDBOX_CREATING ? "create (rolling back)" : "removal");
                        if (s->qemu_pid > 0 && !vm_pid_alive(s->qemu_pid, s->run_dir))
                                s->qemu_pid = 0;
                        sandbox_cleanup_vm_files(s->qemu_pid, s->run_dir, s->data_dir);
                        (void) store_delete_sandbox(m->store, s->id);
                        sandbox_unlink(m, s);
                        sandbox_free(s);
                        break;
                case SANDBOX_RUNNING:
                        if (s->last_active == 0)
                                s->last_active = now_unix();
                        if (s->qemu_pid > 0 && vm_pid_alive(s->qemu_pid, s->run_dir)) {
                                int r;

                                vm_cont_if_stopped(s->run_dir);
                                r = agent_connect(s);
                                if (r < 0)
                                        log_warning_errno(r, "sandbox %s: cannot reconnect to its agent", s->id);
                                else {
                                        log_info("sandbox %s adopted (pid %d)", s->id, (int) s->qemu_pid);
                                        /* A daemon killed inside a checkpoint or a suspend left it stopped
                                         * for a while, its workload frozen: the clock, and the thaw. */
                                        sandbox_clock_resync(m, s);
                                }
                        } else {
                                log_warning("sandbox %s: QEMU (pid %d) is gone; marking it stopped", s->id,
                                            (int) s->qemu_pid);
                                s->state = SANDBOX_STOPPED;
                                free(s->error);
                                s->error = strdup("QEMU exited while spaced was not running; its disk is kept: "
                                                  "'spacectl start' boots it again, 'spacectl rm' removes it");
                                (void) sandbox_save(s);
                        }
                        break;
                case SANDBOX_PAUSED:
                case SANDBOX_SUSPENDING:
                case SANDBOX_SUSPENDED:
                case SANDBOX_WAKING:
                case SANDBOX_STOPPING:
                case SANDBOX_STARTING:
                        (void) sandbox_reconcile_lifecycle(s);
                        break;
                default:
                        /* stopped: nothing may run for it (an interrupted restore may have started one) */
                        if (s->qemu_pid > 0 && vm_pid_alive(s->qemu_pid, s->run_dir)) {
                                (void) vm_kill(s->qemu_pid, s->run_dir, 10000);
                                s->qemu_pid = 0;
                                (void) sandbox_save(s);
                        }
                        break;
                }
        }
        for (s = m->sandboxes; s; s = s->next)
                /* after a restart too: a VM that failed while no daemon ran is found by the first query-status */
                if ((s->state == SANDBOX_RUNNING || s->state == SANDBOX_PAUSED) && s->qemu_pid > 0 &&
                    vm_pid_alive(s->qemu_pid, s->run_dir))
                        sandbox_watch_vm(s);
        for (s = m->sandboxes; s; s = s->next) {
                int r = sandbox_ensure_tokens(s);
                if (r < 0)
                        log_warning_errno(r, "sandbox %s: cannot give it its E2B tokens", s->id);
        }
        for (Operation *op = m->operations; op; op = op->next)
                /* (an operation with live progress was started by this daemon: a builtin's import) */
                if ((op->state == OPERATION_RUNNING || op->state == OPERATION_PENDING) && !op->progress) {
                        op->state = OPERATION_FAILED;
                        op->finished_at = now_unix();
                        (void) error_set(&op->error, ERROR_INTERRUPTED,
                                                   "spaced stopped during this operation; it was rolled back");
                        (void) operation_save(op);
                }
        return 0;
}
