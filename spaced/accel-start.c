/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel-start.h"
#include "channel/channel.h"
#include "core/digest.h"
#include "core/log.h"
#include "core/util.h"
#include "macro.h"
#include "paths.h"
#include "sandbox/sandbox.h"
#include "vm/vmm.h"

/* The start's accelerator decision (ARCHITECTURE.md, "The accelerator"): the device checks, then the probe VM
 * or its cached outcome, then one line in the log. Program code: it logs where it decides. */

static int wait_hello(const char *agent_socket, int timeout_ms, Error *reterr) {
        return agent_wait_hello(agent_socket, timeout_ms, /* ret_fd= */ NULL, reterr);
}

/* What the probe's outcome depends on, as the cache's key: the host under KVM and the guest's kernel and
 * initramfs, by digest (from make's sidecars: no hashing at a daemon's start). */
static int probe_key(Manager *m, const char *kernel, const char *initrd, char **ret, char **reterr_why) {
        _cleanup_free_ char *kd = NULL, *id = NULL, *fp = NULL;
        int r;

        r = file_digest(kernel, &kd);
        if (r >= 0)
                r = file_digest(initrd, &id);
        if (r < 0)
                return asprintf(reterr_why, "not run: the guest kernel or initramfs in %s: %s (build them with make, "
                                "or set SPACE_LIB_DIR)", m->lib_dir, strerror(-r)) < 0 ? -ENOMEM : r;
        r = vm_host_fingerprint(VM_ACCEL_KVM, m->config.qemu_binary, &fp);
        if (r >= 0)
                r = vm_accel_cache_key(fp, kd, id, ret);
        if (r < 0)
                return asprintf(reterr_why, "not run: %s", strerror(-r)) < 0 ? -ENOMEM : r;
        return 0;
}

/* The cached outcome for key in path: 0 (hello) or -EHOSTDOWN (none), *ret_text what the probe saw and when;
 * -ENOENT when nothing usable is cached. */
static int probe_from_cache(const char *path, const char *key, char **ret_text) {
        _cleanup_(vm_accel_cache_done) VmAccelCache e = {};
        char when[32];
        int r;

        r = vm_accel_cache_load(path, key, now_unix(), &e);
        if (r == -EBADMSG)
                log_info("%s is not an accelerator probe's cache of ours: ignored, probing again", path);
        if (r < 0)
                return -ENOENT;
        format_rfc3339(e.time, when);
        if (asprintf(ret_text, "%s (cached from %s in %s)", e.outcome, when, path) < 0)
                return -ENOMEM;
        return e.ok ? 0 : -EHOSTDOWN;
}

/* The probe VM's outcome, which is then cached in path (NULL: not kept). */
static int probe_run(Manager *m, const char *kernel, const char *initrd, const char *key, const char *path,
                     char **ret_text) {
        _cleanup_free_ char *run_dir = NULL, *outcome = NULL;
        int64_t start = now_unix();
        int r;

        if (asprintf(&run_dir, "%s/accel-probe", m->runtime_dir) < 0)
                return -ENOMEM;
        VmAccelProbe p = {
                .qemu_binary = m->config.qemu_binary,
                .run_dir = run_dir,
                .kernel = kernel,
                .initrd = initrd,
                /* as sandboxes' QEMU will run: unconfined when the host refuses the namespaces under auto */
                .confine = m->confined ? m->config.confine : VM_CONFINE_OFF,
                .timeout_ms = VM_ACCEL_PROBE_TIMEOUT_MS,
                .wait_hello = wait_hello,
        };
        r = vm_accel_probe(&p, &outcome);
        if (!outcome)
                return r < 0 ? r : -ENOMEM;
        if (path) {
                VmAccelCache e = { .key = (char *) key, .time = start, .ok = r >= 0, .outcome = outcome };
                int k = vm_accel_cache_save(path, &e);

                if (k < 0)
                        log_warning_errno(k, "cannot keep the accelerator probe's outcome in %s, so the next start "
                                          "probes again", path);
        }
        *ret_text = TAKE_PTR(outcome);
        return r;
}

/* What the probe found, from the cache when it holds this host's and this guest's, else from a probe VM. 0 when
 * the agent said hello under KVM, else -errno; *ret_text says what happened either way. */
static int probe_kvm(Manager *m, char **ret_text) {
        _cleanup_free_ char *kernel = NULL, *initrd = NULL, *key = NULL, *cache_dir = NULL, *path = NULL;
        int r;

        r = guest_kernel_path(m->lib_dir, &kernel, &initrd);
        if (r < 0)
                return r;
        r = probe_key(m, kernel, initrd, &key, ret_text);
        if (r < 0)
                return r;
        if (space_cache_dir(&cache_dir) >= 0 && vm_accel_cache_path(cache_dir, key, &path) >= 0) {
                r = probe_from_cache(path, key, ret_text);
                if (r != -ENOENT)
                        return r;
        }
        return probe_run(m, kernel, initrd, key, path, ret_text);
}

/* accel = auto or kvm: whether KVM runs sandboxes here; *ret_reason says why (not), and what to do. */
static bool kvm_usable(Manager *m, char **ret_reason) {
        _cleanup_free_ char *check = NULL, *probe = NULL;
        int r;

        r = vm_kvm_check(&check);
        /* The device itself refuses: QEMU would too, so there is nothing to boot. kvm-pvm alone does not stop
         * the probe: the probe is what finds that it cannot run our guest. */
        if (r < 0 && r != -EOPNOTSUPP) {
                m->accel_probe = strdup("not run: the KVM device check failed");
                *ret_reason = TAKE_PTR(check);
                return false;
        }
        if (probe_kvm(m, &probe) >= 0) {
                log_info("KVM runs the guest (probe: %s)", probe);
                m->accel_probe = TAKE_PTR(probe);
                *ret_reason = strdup("KVM is usable");
                return true;
        }
        if (asprintf(ret_reason, "the probe VM under KVM failed: %s%s%s", probe ?: "out of memory", check ? "; " : "",
                     check ?: "") < 0)
                *ret_reason = NULL;
        m->accel_probe = TAKE_PTR(probe);
        return false;
}

int accel_decide(Manager *m, AccelSetting setting) {
        _cleanup_free_ char *reason = NULL;

        if (setting == ACCEL_TCG) {
                m->accel = VM_ACCEL_TCG;
                m->accel_reason = strdup("accel = tcg");
                m->accel_probe = strdup("not run (accel = tcg)");
                return 0;
        }
        if (kvm_usable(m, &reason)) {
                m->accel = VM_ACCEL_KVM;
                m->accel_reason = strdup(setting == ACCEL_KVM ? "accel = kvm, and KVM is usable" : "KVM is usable");
                return 0;
        }
        if (setting == ACCEL_KVM) {
                log_error("accel = kvm, but KVM cannot run sandboxes here: %s; set accel = auto (or tcg) in "
                          "spaced.conf to use TCG, software emulation", reason ?: "out of memory");
                return -ENODEV;
        }
        m->accel = VM_ACCEL_TCG;
        log_warning("using TCG (software emulation): %s", reason ?: "KVM is not usable");
        m->accel_reason = TAKE_PTR(reason);
        return 0;
}
