/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/kvm.h>

#include "macro.h"
#include "vm/vmm.h"

/* Whether KVM can run our guests, asked the way QEMU will: the device opens read-write, speaks KVM's API, and
 * creates a VM (which fails while another hypervisor holds the CPU's virtualization). Each failure says what to
 * do about it, for the one warning (accel = auto) or the refusal to start (accel = kvm). */

const char *vm_kvm_device(void) {
        const char *d = getenv("SPACE_KVM_DEVICE");

        return d && d[0] == '/' ? d : "/dev/kvm";
}

int vm_kvm_check(char **ret_reason) {
        const char *dev = vm_kvm_device();
        _cleanup_close_ int fd = -1, vm = -1;
        int api, r;

        fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                if (r == -EACCES || r == -EPERM)
                        return asprintf(ret_reason, "cannot open %s: %s: add the user to the kvm group (sudo usermod "
                                        "-aG kvm $USER) and log in again", dev, strerror(-r)) < 0 ? -ENOMEM : r;
                if (r == -ENOENT)
                        return asprintf(ret_reason, "there is no %s: this host has no KVM (no kvm_intel or kvm_amd "
                                        "module, or a VM without nested virtualization)", dev) < 0 ? -ENOMEM : r;
                return asprintf(ret_reason, "cannot open %s: %s", dev, strerror(-r)) < 0 ? -ENOMEM : r;
        }
        api = ioctl(fd, KVM_GET_API_VERSION, 0);
        if (api < 0) {
                r = -errno;
                return asprintf(ret_reason, "%s is not KVM (KVM_GET_API_VERSION: %s)", dev, strerror(-r)) < 0 ?
                               -ENOMEM : r;
        }
        if (api != KVM_API_VERSION)
                return asprintf(ret_reason, "%s speaks KVM API %d, not %d", dev, api, KVM_API_VERSION) < 0 ?
                               -ENOMEM : -EPROTO;
        vm = ioctl(fd, KVM_CREATE_VM, 0);
        if (vm < 0) {
                r = -errno;
                return asprintf(ret_reason, "KVM cannot create a VM: %s (another hypervisor, such as VirtualBox or "
                                "VMware, may hold the CPU's virtualization)", strerror(-r)) < 0 ? -ENOMEM : r;
        }
        /* kvm-pvm makes VMs, but ones that cannot run the stock guest kernel (vmm-notes: it stalls in early boot) */
        if (access("/sys/module/kvm_pvm", F_OK) == 0)
                return asprintf(ret_reason, "%s is kvm-pvm, which cannot run the stock guest kernel", dev) < 0 ?
                               -ENOMEM : -EOPNOTSUPP;
        return 0;
}

VmAccel vm_accel_detect(char **ret_reason) {
        char *reason = NULL;

        if (vm_kvm_check(&reason) >= 0) {
                free(reason);
                if (ret_reason)
                        *ret_reason = strdup("KVM is usable");
                return VM_ACCEL_KVM;
        }
        if (ret_reason)
                *ret_reason = reason;
        else
                free(reason);
        return VM_ACCEL_TCG;
}
