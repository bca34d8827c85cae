/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Helpers the VMM driver's files share: deadlines, and QEMU's namespace (jail.c) for vmm-qemu.c. */

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

static inline int64_t now_ms(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int remaining_ms(int64_t deadline) {
        int64_t left = deadline - now_ms();

        if (left <= 0)
                return 0;
        return left > INT32_MAX ? INT32_MAX : (int) left;
}

#include "vm/vmm.h"

/* What QEMU's namespace will hold, prepared in the daemon (it allocates and opens the sources); NULL in
 * *ret when c->confine is off. */
typedef struct VmJail VmJail;
int vm_jail_new(const VmConfig *c, const char *binary, VmJail **ret, Error *reterr);
VmJail *vm_jail_free(VmJail *j);
static inline void vm_jail_freep(VmJail **j) {
        *j = vm_jail_free(*j);
}
VmConfine vm_jail_mode(const VmJail *j);
/* In the helper that forks QEMU, between fork and exec: makes the user, pid, network, IPC and UTS namespaces
 * (QEMU, forked next, is pid 1 in the pid namespace). */
enum {
        JAIL_STEP_USERNS = -1,
        JAIL_STEP_MAPS = -2,
        JAIL_STEP_ROOT = -3,
        JAIL_STEP_PIVOT = -4,
        JAIL_STEP_CAPS = -5,
        JAIL_STEP_NETNS = -6,
        JAIL_STEP_MNTNS = -7,
};
int vm_jail_unshare(VmJail *j, int *ret_step);
/* In QEMU's process before exec: its own mount namespace, pivoted into, and no capabilities left. */
int vm_jail_enter(VmJail *j, int *ret_step);
/* What *ret_step names, for the error message. */
const char *vm_jail_step_name(const VmJail *j, int step, char *buf, size_t size);
/* Whether err at step is the host refusing namespaces (a sysctl, a limit, seccomp, AppArmor, no kernel
 * support) rather than something of ours failing: confine = auto then runs QEMU without them. */
bool vm_jail_refused(int step, int err);
/* "STEP: ERROR", and when the host's settings tell why, "; WHY, and what changes it". */
int vm_confine_explain(const VmJail *j, int step, int err, char **ret);
