/* SPDX-License-Identifier: Apache-2.0 */

/* vm_build_argv(): a restore must use the saved VM's command line apart from share= and -incoming. */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../../lib/macro.h"
#include "vm/vmm.h"
#include "tap.h"

static size_t strv_len(char **v) {
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

static bool strv_has(char **v, const char *s) {
        for (size_t i = 0; v && v[i]; i++)
                if (streq(v[i], s))
                        return true;
        return false;
}

static bool strv_contains_substr(char **v, const char *s) {
        for (size_t i = 0; v && v[i]; i++)
                if (strstr(v[i], s))
                        return true;
        return false;
}

/* The element after `opt`, or NULL. */
static const char *strv_after(char **v, const char *opt) {
        for (size_t i = 0; v && v[i]; i++)
                if (streq(v[i], opt))
                        return v[i + 1];
        return NULL;
}

static bool strv_equal(char **a, char **b) {
        size_t n = strv_len(a);
        if (n != strv_len(b))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!streq(a[i], b[i]))
                        return false;
        return true;
}

/* Restore argv equals base argv once "-incoming defer" is dropped and share=off is read as share=on. */
static bool same_but_share_and_incoming(char **base, char **restore) {
        size_t nb = strv_len(base), nr = strv_len(restore), j = 0;

        if (nr != nb + 2)
                return false;
        for (size_t i = 0; i < nr; i++) {
                if (streq(restore[i], "-incoming") && restore[i + 1] && streq(restore[i + 1], "defer")) {
                        i++;
                        continue;
                }
                if (j >= nb)
                        return false;
                if (!streq(base[j], restore[i])) {
                        const char *on = strstr(base[j], "share=on"), *off = strstr(restore[i], "share=off");
                        if (!on || !off || on - base[j] != off - restore[i] ||
                            strncmp(base[j], restore[i], (size_t) (on - base[j])) != 0 ||
                            !streq(on + strlen("share=on"), off + strlen("share=off")))
                                return false;
                }
                j++;
        }
        return j == nb;
}

int main(void) {
        _cleanup_strv_free_ char **base = NULL, **base2 = NULL, **restore = NULL, **kvm = NULL, **comma = NULL,
                                 **noinitrd = NULL;
        char **bad = NULL;
        VmConfig c = {
                .run_dir = "/run/user/1000/space/sb-1",
                .kernel = "/usr/lib/space/vmlinux",
                .initrd = "/usr/lib/space/initramfs.cpio",
                .disk = "/var/lib/space/disks/sb-1.qcow2",
                .disk_format = "qcow2",
                .mem_path = "/var/lib/space/base/minimal.mem",
                .mem_share = true,
                .vcpus = 2,
                .memory_mib = 256,
                .accel = VM_ACCEL_TCG,
                .tsc_khz = 2100000,
                .kernel_args = "space.mode=agent",
        };

        plan(28);

        ok(vm_build_argv(&c, &base) == 0, "base argv builds");
        ok(vm_build_argv(&c, &base2) == 0 && strv_equal(base, base2), "same config gives the same argv");
        ok(streq(base[0], "qemu-system-x86_64"), "default binary");
        ok(base[strv_len(base)] == NULL, "NULL-terminated");

        VmConfig r = c;
        r.mem_share = false;
        r.incoming = true;
        ok(vm_build_argv(&r, &restore) == 0, "restore argv builds");
        ok(same_but_share_and_incoming(base, restore), "restore argv = base argv except share= and -incoming");
        ok(strv_contains_substr(base, "share=on") && !strv_contains_substr(base, "share=off"), "base is share=on");
        ok(strv_contains_substr(restore, "share=off") && !strv_contains_substr(restore, "share=on"),
           "restore is share=off");
        ok(!strv_has(base, "-incoming") && streq_ptr(strv_after(restore, "-incoming"), "defer"),
           "only restore has -incoming defer");

        const char *append = strv_after(base, "-append");
        ok(append && strstr(append, "tsc_early_khz=2100000 tsc=reliable") && strstr(append, "console=hvc0") &&
                   strstr(append, "space.root=/dev/vda") && strstr(append, " space.mode=agent"),
           "kernel command line under TCG: %s", append ?: "(none)");
        ok(streq_ptr(strv_after(base, "-accel"), "tcg,tb-size=32") && streq_ptr(strv_after(base, "-cpu"), "max"),
           "TCG accel and cpu, the default translation cache");
        {
                _cleanup_strv_free_ char **small = NULL;
                VmConfig t = r;
                t.tcg_cache_mib = 12;
                ok(vm_build_argv(&t, &small) == 0 && streq_ptr(strv_after(small, "-accel"), "tcg,tb-size=12"),
                   "tcg_cache_mib sets the translation cache");
        }
        ok(streq_ptr(strv_after(base, "-m"), "256M") &&
                   strv_contains_substr(base, "memory-backend-file,id=mem,size=256M,mem-path="
                                              "/var/lib/space/base/minimal.mem,share=on"),
           "-m matches the memory backend size");
        ok(strv_has(base, "microvm,x-option-roms=off,rtc=on,pit=on,pic=on,ioapic2=on,memory-backend=mem"),
           "microvm machine uses the backend, its legacy devices named");
        ok(strv_has(base, "socket,path=/run/user/1000/space/sb-1/agent.sock,server=on,wait=off,id=agent0") &&
                   strv_has(base, "virtserialport,chardev=agent0,name=agent"),
           "agent port on a server socket in the run dir");
        ok(strv_has(base, "socket,id=qmp0,path=/run/user/1000/space/sb-1/qmp.sock,server=on,wait=off") &&
                   !strv_has(base, "-pidfile"),
           "QMP socket in the run dir, no -pidfile (1 in QEMU's pid namespace: vm_spawn writes qemu.pid)");
        ok(strv_has(base, "socket,id=qmp1,path=/run/user/1000/space/sb-1/events.sock,server=on,wait=off") &&
                   strv_has(base, "chardev=qmp1,mode=control") && strv_has(restore, "chardev=qmp1,mode=control"),
           "a second QMP monitor for the run state's events, base and restore alike");
        {
                _cleanup_strv_free_ char **held = NULL;
                VmConfig h = r;
                h.hold_at_shutdown = true;
                ok(!strv_has(base, "-no-shutdown") && !strv_has(restore, "-no-shutdown") &&
                           vm_build_argv(&h, &held) == 0 && strv_has(held, "-no-shutdown") &&
                           strv_len(held) == strv_len(restore) + 1,
                   "hold_at_shutdown adds -no-shutdown and nothing else");
        }
        ok(strv_has(base, "file=/var/lib/space/disks/sb-1.qcow2,if=none,id=d0,format=qcow2,cache=none,aio=threads,"
                          "discard=unmap"),
           "root disk drive");
        ok(streq_ptr(strv_after(base, "-sandbox"), "on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
                                                   "resourcecontrol=deny"),
           "seccomp sandbox with spawn=deny");
        ok(!strv_contains_substr(base, "chardev file") && strv_contains_substr(base, "ringbuf,id=con0"),
           "console is a bounded ring buffer");

        VmConfig k = c;
        k.accel = VM_ACCEL_KVM;
        ok(vm_build_argv(&k, &kvm) == 0 && streq_ptr(strv_after(kvm, "-accel"), "kvm") &&
                   streq_ptr(strv_after(kvm, "-cpu"), "host,vmx=off,svm=off,pmu=off") &&
                   !strstr(strv_after(kvm, "-append"), "tsc_"),
           "KVM: -accel kvm -cpu host without VMX, SVM and the PMU, no tsc arguments");
        ok(streq_ptr(strv_after(kvm, "-M"), strv_after(base, "-M")),
           "KVM and TCG name the same machine and devices (rtc, pit, pic, ioapic2)");

        VmConfig cm = c;
        cm.run_dir = "/tmp/a,b";
        cm.disk = "/tmp/a,b/disk.qcow2";
        ok(vm_build_argv(&cm, &comma) == 0 &&
                   strv_has(comma, "socket,path=/tmp/a,,b/agent.sock,server=on,wait=off,id=agent0") &&
                   strv_contains_substr(comma, "file=/tmp/a,,b/disk.qcow2,if=none"),
           "commas in paths are escaped for QEMU's option parser (and only there)");

        VmConfig ni = c;
        ni.initrd = NULL;
        ni.kernel_args = NULL;
        ok(vm_build_argv(&ni, &noinitrd) == 0 && !strv_has(noinitrd, "-initrd") &&
                   !strstr(strv_after(noinitrd, "-append"), "  ") &&
                   strv_after(noinitrd, "-append")[strlen(strv_after(noinitrd, "-append")) - 1] != ' ',
           "no initrd, no extra kernel args");

        VmConfig rel = c;
        rel.disk = "disk.qcow2";
        ok(vm_build_argv(&rel, &bad) == -EINVAL && !bad, "relative paths are refused");
        VmConfig fmt = c;
        fmt.disk_format = "vmdk";
        ok(vm_build_argv(&fmt, &bad) == -EINVAL, "unknown disk format is refused");
        VmConfig zero = c;
        zero.vcpus = 0;
        ok(vm_build_argv(&zero, &bad) == -EINVAL, "zero vCPUs is refused");

        return done();
}
