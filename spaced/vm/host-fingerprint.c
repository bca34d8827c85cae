/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <linux/kvm.h>
#include <openssl/evp.h>

#include "macro.h"
#include "string-util.h"
#include "core/util.h"
#include "vm/vmm.h"

/* What a snapshot's restore depends on besides its own files (ARCHITECTURE.md, "Snapshots and their host").
 * The text is fields "key=value" separated by one space, values without spaces, in this order:
 *   accel      tcg or kvm: a snapshot of one cannot be restored under the other
 *   qemu       the QEMU build (`--version`'s first line, e.g. 7.2.11_(Debian_...)): microvm has no versioned machine types, so a new
 *              QEMU may lay out the device state differently
 * and under KVM, where the guest runs on the host's CPU:
 *   kernel     the host kernel's release (KVM's CPUID and MSR handling)
 *   microcode  the CPU's microcode revision (an update can take instructions away)
 *   cpuid      the first 16 hex digits of the sha256 of what KVM_GET_SUPPORTED_CPUID offers */

#define QEMU_VERSION_MAX 128

/* The first line of `QEMU --version` without its "QEMU emulator version ", blanks made '_':
 * "7.2.11_(Debian_1:7.2+dfsg-7+deb12u12)". */
static int qemu_version(const char *qemu_binary, char buf[static QEMU_VERSION_MAX]) {
        char *argv[] = { (char *) (qemu_binary ?: "qemu-system-x86_64"), (char *) "--version", NULL };
        _cleanup_free_ char *out = NULL;

        if (run_command_output(argv, &out) < 0 || !out)
                return -ENOEXEC;
        out[strcspn(out, "\n")] = 0;
        (void) snprintf(buf, QEMU_VERSION_MAX, "%s", out);
        if (strncmp(buf, "QEMU emulator version ", 22) == 0)
                memmove(buf, buf + 22, strlen(buf + 22) + 1);
        if (!buf[0])
                return -ENOEXEC;
        for (char *c = buf; *c; c++)
                if (*c == ' ' || *c == '\t' || (unsigned char) *c < 0x20 || (unsigned char) *c >= 0x7f)
                        *c = '_';
        return 0;
}

static void microcode(char buf[static 32]) {
        _cleanup_fclose_ FILE *f = fopen("/proc/cpuinfo", "re");
        char line[256];

        strcpy(buf, "unknown");
        while (f && fgets(line, sizeof line, f)) {
                char *v;

                if (strncmp(line, "microcode", 9) != 0 || !(v = strchr(line, ':')))
                        continue;
                v += 1 + strspn(v + 1, " \t");
                v[strcspn(v, " \t\n")] = 0;
                if (*v && strlen(v) < 32)
                        strcpy(buf, v);
                return;
        }
}

/* What KVM offers a guest's CPUID, hashed; "unknown" when /dev/kvm does not answer. */
static void kvm_cpuid(char buf[static 17]) {
        enum { MAX_ENTRIES = 256 };
        _cleanup_free_ struct kvm_cpuid2 *c = calloc(1, sizeof *c + MAX_ENTRIES * sizeof(struct kvm_cpuid_entry2));
        _cleanup_close_ int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
        unsigned char md[32];
        char hex[65];

        strcpy(buf, "unknown");
        if (!c || fd < 0)
                return;
        c->nent = MAX_ENTRIES;
        if (ioctl(fd, KVM_GET_SUPPORTED_CPUID, c) < 0 || c->nent > MAX_ENTRIES)
                return;
        /* What depends on the CPU the call ran on, not on the host: the APIC ids (leaf 1's EBX[31:24], the
         * x2APIC id in leaves 0xb and 0x1f, AMD's 0x8000001e) */
        for (unsigned i = 0; i < c->nent; i++) {
                struct kvm_cpuid_entry2 *e = &c->entries[i];

                if (e->function == 1)
                        e->ebx &= 0x00ffffffU;
                else if (e->function == 0xb || e->function == 0x1f)
                        e->edx = 0;
                else if (e->function == 0x8000001eU)
                        e->eax = e->ebx = e->ecx = 0;
        }
        if (!EVP_Digest(c->entries, c->nent * sizeof c->entries[0], md, NULL, EVP_sha256(), NULL))
                return;
        string_hex_encode(md, 8, hex);
        memcpy(buf, hex, 16);
        buf[16] = 0;
}

int vm_host_fingerprint(VmAccel accel, const char *qemu_binary, char **ret) {
        char qemu[QEMU_VERSION_MAX], mc[32], cpuid[17];
        struct utsname u;
        int r;

        if (qemu_version(qemu_binary, qemu) < 0)
                strcpy(qemu, "unknown");
        if (accel == VM_ACCEL_TCG)
                r = asprintf(ret, "accel=tcg qemu=%s", qemu);
        else {
                if (uname(&u) < 0)
                        strcpy(u.release, "unknown");
                for (char *c = u.release; *c; c++)
                        if (*c == ' ')
                                *c = '_';
                microcode(mc);
                kvm_cpuid(cpuid);
                r = asprintf(ret, "accel=kvm qemu=%s kernel=%s microcode=%s cpuid=%s", qemu, u.release, mc, cpuid);
        }
        return r < 0 ? -ENOMEM : 0;
}

/* The value of key in a fingerprint, into buf: false when it has none. */
static bool field(const char *fp, const char *key, char *buf, size_t size) {
        size_t kl = strlen(key);

        for (const char *p = fp; p && *p; p = strchr(p, ' ') ? strchr(p, ' ') + 1 : NULL)
                if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
                        size_t n = strcspn(p + kl + 1, " ");

                        (void) snprintf(buf, size, "%.*s", (int) n, p + kl + 1);
                        return true;
                }
        return false;
}

bool vm_fingerprint_explain(const char *was, const char *now, char *buf, size_t size) {
        static const char *const keys[] = { "accel", "qemu", "kernel", "microcode", "cpuid" };
        size_t used = 0;

        buf[0] = 0;
        if (streq_ptr(was, now))
                return false;
        if (!was || !*was) {
                (void) snprintf(buf, size, "it records no host (it was made by an older spaced)");
                return true;
        }
        for (size_t i = 0; i < ELEMENTSOF(keys) && used + 1 < size; i++) {
                char a[QEMU_VERSION_MAX] = "none", b[QEMU_VERSION_MAX] = "none";
                bool ha = field(was, keys[i], a, sizeof a), hb = field(now ?: "", keys[i], b, sizeof b);
                int n;

                if ((!ha && !hb) || streq(a, b))
                        continue;
                n = snprintf(buf + used, size - used, "%s%s %s here, %s when it was made", used ? "; " : "", keys[i],
                             b, a);
                if (n < 0)
                        break;
                used += (size_t) n < size - used ? (size_t) n : size - used - 1;
        }
        if (!buf[0])
                (void) snprintf(buf, size, "its host is recorded as '%.80s'", was);
        return true;
}
