/* SPDX-License-Identifier: Apache-2.0 */

/* A sandbox's QEMU watched for the states it stops the VM in by itself (vm/vm-events-watch.c): the guest's
 * kernel panicked, KVM could not emulate an instruction, the guest reset or powered off. Each fails the
 * sandbox with the reason (sandbox_mark_failed(): QEMU killed, the disk kept until rm), which inspect and ls
 * show. Without this a VM stopped in internal-error would look running for ever. */

#include <errno.h>
#include <string.h>

#include "core/log.h"
#include "macro.h"
#include "sandbox/sandbox.h"

static void on_vm_run_state(VmEvents *w, VmRunFailure f, const char *reason, void *userdata) {
        Sandbox *s = userdata;

        if (s->vm_events == w)
                s->vm_events = NULL;
        vm_events_free(w);
        if (f == VM_RUN_OK) {
                /* QEMU exited (the channel's end says what that means for the sandbox) or broke QMP */
                if (reason)
                        log_warning("sandbox %s: %s", s->id, reason);
                return;
        }
        if (s->busy || (s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED)) {
                /* A lifecycle operation holds the VM now: QEMU keeps it stopped in that state, and the watch
                 * that operation's end begins finds it again with its first query-status. */
                log_info("sandbox %s: its VM stopped by itself (%s) while it was %s%s", s->id, reason,
                         sandbox_state_to_string(s->state), s->busy ? " and busy; looked at again after that" : "");
                return;
        }
        sandbox_mark_failed(s, reason);
}

void sandbox_watch_vm(Sandbox *s) {
        VmEvents *w = NULL;
        int r;

        s->vm_events = vm_events_free(s->vm_events);
        if (!s->run_dir || s->qemu_pid <= 0)
                return;
        r = vm_events_watch(s->manager->event, s->run_dir, on_vm_run_state, s, &w);
        if (IN_SET(r, -ENOENT, -ECONNREFUSED)) {
                /* a QEMU started by a daemon from before the events monitor, or one already gone */
                log_debug("sandbox %s: no events monitor to watch (%s)", s->id, strerror(-r));
                return;
        }
        if (r < 0) {
                log_warning_errno(r, "sandbox %s: cannot watch its VM's run state", s->id);
                return;
        }
        s->vm_events = w;
}

void sandbox_unwatch_vm(Sandbox *s) {
        s->vm_events = vm_events_free(s->vm_events);
}
