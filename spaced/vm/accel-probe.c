/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "vm/vmm.h"
#include "vm/vmm-internal.h"

/* The accelerator's probe (ARCHITECTURE.md, "The accelerator"): KVM asked the way a sandbox uses it. The device
 * checks of accel.c see whether KVM makes a VM, not whether it runs our guest: kvm-pvm makes VMs and then spins
 * in the kernel on a stock guest kernel (reference/vmm-notes.md §1.1). So a QEMU with the machine, -accel and
 * -cpu a sandbox gets, confined as a sandbox's is, boots the guest kernel and initramfs until the agent says
 * hello on its channel, and is killed then or at the timeout, whichever comes first.
 *
 * No root disk: without space.root= the agent stays in the initramfs and says hello from there, which is all
 * the probe asks, so it needs no template, no image and nothing written but its RAM file (mapped privately,
 * share=off, so only the pages the guest touches cost anything, and those are anonymous). */

#define PROBE_MEMORY_MIB 256
#define PROBE_MEM_FILE "probe.mem"

static int probe_config(const VmAccelProbe *p, char **ret_mem_path, VmConfig *ret) {
        if (!p || !p->run_dir || !p->kernel || p->timeout_ms <= 0)
                return -EINVAL;
        if (asprintf(ret_mem_path, "%s/" PROBE_MEM_FILE, p->run_dir) < 0)
                return -ENOMEM;
        *ret = (VmConfig) {
                .qemu_binary = p->qemu_binary,
                .run_dir = p->run_dir,
                .kernel = p->kernel,
                .initrd = p->initrd,
                .mem_path = *ret_mem_path,
                .vcpus = 1,
                .memory_mib = PROBE_MEMORY_MIB,
                .accel = VM_ACCEL_KVM,
                .confine = p->confine,
        };
        return 0;
}

int vm_accel_probe_argv(const VmAccelProbe *p, char ***ret_argv) {
        _cleanup_free_ char *mem = NULL;
        VmConfig c;
        int r;

        r = probe_config(p, &mem, &c);
        return r < 0 ? r : vm_build_argv(&c, ret_argv);
}

/* What the probe leaves in its run dir, and the dir itself: nothing of it is worth keeping but the outcome. */
static void probe_cleanup(const char *run_dir) {
        static const char *const files[] = { PROBE_MEM_FILE, "agent.sock", "qmp.sock", VM_EVENTS_SOCKET, "qemu.pid",
                                             "qemu.log" };

        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_free_ char *f = NULL;

                if (asprintf(&f, "%s/%s", run_dir, files[i]) >= 0)
                        (void) unlink(f);
        }
        (void) rmdir(run_dir);
}

/* QEMU's run: spawned confined (vm_spawn() returns once it has parsed its command line and opened KVM), then
 * the agent's hello waited for with the probe's timeout, then QEMU killed by its pid. */
static int probe_run(const VmAccelProbe *p, const VmConfig *c, char **ret_outcome) {
        _cleanup_(error_done) Error err = {};
        _cleanup_free_ char *agent_sock = NULL, *tail = NULL;
        int64_t start = now_ms();
        pid_t pid;
        int r, k;

        r = vm_spawn(c, &pid, NULL, &err);
        if (r < 0)
                return asprintf(ret_outcome, "%s", err.message ?: strerror(-r)) < 0 ? -ENOMEM : r;
        if (asprintf(&agent_sock, "%s/agent.sock", c->run_dir) < 0)
                r = -ENOMEM;
        else
                r = p->wait_hello(agent_sock, p->timeout_ms, &err);
        if (r >= 0)
                k = asprintf(ret_outcome, "the agent said hello in %lld ms", (long long) (now_ms() - start));
        else if (!vm_pid_alive(pid, c->run_dir)) {
                (void) vm_log_tail(c->run_dir, 512, &tail);
                k = asprintf(ret_outcome, "QEMU exited before the agent said hello: %s",
                             tail && *tail ? tail : "(no output)");
        } else if (r == -ETIMEDOUT)
                k = asprintf(ret_outcome, "no agent hello within %d s", p->timeout_ms / 1000);
        else
                k = asprintf(ret_outcome, "the agent's channel failed before its hello: %s",
                             err.message ?: strerror(-r));
        /* Nothing to save in it, and a guest spinning in the kernel may not heed SIGTERM: at once SIGKILL. */
        (void) vm_kill(pid, c->run_dir, 0);
        if (k < 0)
                return -ENOMEM;
        return r;
}

int vm_accel_probe(const VmAccelProbe *p, char **ret_outcome) {
        _cleanup_free_ char *mem = NULL;
        _cleanup_close_ int fd = -1;
        VmConfig c;
        pid_t old;
        int r;

        if (!p || !p->wait_hello || !ret_outcome)
                return -EINVAL;
        r = probe_config(p, &mem, &c);
        if (r < 0)
                return r;
        if (mkdir(p->run_dir, 0700) < 0 && errno != EEXIST) {
                r = -errno;
                return asprintf(ret_outcome, "cannot make the probe's run dir %s: %s", p->run_dir,
                                strerror(-r)) < 0 ? -ENOMEM : r;
        }
        /* A probe's QEMU that a daemon killed mid-probe left behind (it runs in a session of its own) would spin
         * on a hanging KVM until killed: its successor's probe kills it. */
        if (vm_read_pidfile(p->run_dir, &old) >= 0)
                (void) vm_kill(old, p->run_dir, 0);
        /* The jail binds the memory file, so it must exist; QEMU sizes it. */
        fd = open(mem, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0) {
                r = -errno;
                probe_cleanup(p->run_dir);
                return asprintf(ret_outcome, "cannot make %s: %s", mem, strerror(-r)) < 0 ? -ENOMEM : r;
        }
        fd = safe_close(fd);
        r = probe_run(p, &c, ret_outcome);
        probe_cleanup(p->run_dir);
        return r;
}
