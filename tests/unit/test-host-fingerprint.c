/* SPDX-License-Identifier: Apache-2.0 */
/* vm_host_fingerprint() and vm_fingerprint_explain() (vm/host-fingerprint.c): what a snapshot records of its host,
 * and the words a refusal gives. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/macro.h"
#include "vm/vmm.h"
#include "tap.h"

int main(void) {
        _cleanup_free_ char *tcg = NULL, *kvm = NULL, *missing = NULL;
        char why[512];

        plan(15);

        int rt = vm_host_fingerprint(VM_ACCEL_TCG, NULL, &tcg), rk = vm_host_fingerprint(VM_ACCEL_KVM, NULL, &kvm);

        ok(rt == 0 && strncmp(tcg, "accel=tcg qemu=", 15) == 0 && tcg[15] >= '0' && tcg[15] <= '9' && !strstr(tcg, "kernel="),
           "TCG: the accelerator and the QEMU build, nothing of the CPU: %s", tcg ?: "(none)");
        ok(rk == 0 && strncmp(kvm, "accel=kvm qemu=", 15) == 0 && strstr(kvm, " kernel=") &&
                   strstr(kvm, " microcode=") && strstr(kvm, " cpuid="),
           "KVM: also the host kernel, microcode and CPUID: %s", kvm ?: "(none)");
        ok(!strchr(strchr(tcg, '=') + 1, '\n') && !strstr(tcg, "  "), "one line, fields split by single spaces");
        {
                /* the same from every CPU: a fingerprint that moved with the scheduler would refuse every
                 * checkpoint after a restart (the APIC ids in CPUID differ by CPU) */
                bool same = true;

                for (int cpu = 0; cpu < 4; cpu++) {
                        _cleanup_free_ char *again = NULL;
                        cpu_set_t set;

                        CPU_ZERO(&set);
                        CPU_SET(cpu, &set);
                        if (sched_setaffinity(0, sizeof set, &set) < 0)
                                continue; /* no such CPU here */
                        same = same && vm_host_fingerprint(VM_ACCEL_KVM, NULL, &again) == 0 && streq(again, kvm);
                }
                ok(same, "the KVM fingerprint is the same taken on each CPU");
        }
        ok(vm_host_fingerprint(VM_ACCEL_TCG, "/nonexistent/qemu", &missing) == 0 &&
                   streq(missing, "accel=tcg qemu=unknown"),
           "a QEMU that does not run: qemu=unknown, not a failure");

        ok(!vm_fingerprint_explain(tcg, tcg, why, sizeof why) && why[0] == 0, "the same host: nothing to explain");
        ok(vm_fingerprint_explain("accel=kvm qemu=A kernel=k microcode=0x1 cpuid=c", "accel=tcg qemu=A", why, sizeof why) &&
                   strstr(why, "accel tcg here, kvm when it was made") && strstr(why, "kernel none here, k when"),
           "another accelerator is named first: %s", why);
        ok(vm_fingerprint_explain("accel=tcg qemu=7.2.0", "accel=tcg qemu=8.0.0", why, sizeof why) &&
                   streq(why, "qemu 8.0.0 here, 7.2.0 when it was made"),
           "another QEMU: %s", why);
        ok(vm_fingerprint_explain("accel=kvm qemu=A kernel=k microcode=0x1 cpuid=aa",
                                  "accel=kvm qemu=A kernel=k microcode=0x2 cpuid=bb", why, sizeof why) &&
                   strstr(why, "microcode 0x2 here, 0x1") && strstr(why, "; cpuid bb here, aa"),
           "microcode and CPUID, both named: %s", why);
        ok(vm_fingerprint_explain(NULL, tcg, why, sizeof why) && strstr(why, "older spaced"),
           "no record: says so (callers take it as this host's)");
        ok(vm_fingerprint_explain("garbage", tcg, why, sizeof why) && strstr(why, "accel tcg here, none when"),
           "a record with no fields it knows: each field is 'none' there: %s", why);
        ok(vm_fingerprint_explain("x=1", "x=2", why, sizeof why) && strstr(why, "'x=1'"),
           "records that differ only in fields it does not know: quoted: %s", why);
        ok(vm_fingerprint_explain("accel=tcg qemu=A", "accel=tcg qemu=A extra=1", why, sizeof why),
           "a field only one side has is a difference");
        {
                char tiny[16];
                ok(vm_fingerprint_explain("accel=kvm qemu=AAAAAAAAAAAAAAAA", "accel=tcg qemu=BBBBBBBBBBBBBBBB", tiny,
                                          sizeof tiny) && strlen(tiny) < sizeof tiny,
                   "a short buffer is cut, never overrun");
        }
        {
                char big[600];
                memset(big, 'x', sizeof big - 1);
                big[sizeof big - 1] = 0;
                memcpy(big, "qemu=", 5);
                ok(vm_fingerprint_explain(big, "accel=tcg qemu=A", why, sizeof why) && strlen(why) < sizeof why,
                   "an overlong recorded value is cut to the buffer");
        }
        return done();
}
