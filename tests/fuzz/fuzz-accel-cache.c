/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: the accelerator probe's cache file (spaced/vm/accel-cache.c), which the daemon reads at
 * every start from the user's cache directory, where any of the user's processes may have written anything.
 *
 * Input: the file's bytes (cut at a NUL, as the loader refuses one inside).
 * Invariants (abort on violation): the parser answers 0, -ESTALE or -EBADMSG and nothing else (-ENOMEM aside);
 * what it takes (0) is the expected key with a printable outcome and a time not in the future, and formats
 * back to exactly the bytes it was read from, so that nothing in the file is ignored on the way. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-util.h"
#include "vm/vmm.h"

#define KEY "accel=kvm qemu=7.2.22 kernel=6.1 microcode=0x1 cpuid=0123456789abcdef guest-kernel=sha256:aa initramfs=sha256:bb"
#define NOW 1800000000LL

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        VmAccelCache c = {};
        char *text = malloc(size + 1), *again = NULL;
        int r;

        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        r = vm_accel_cache_parse(text, KEY, NOW, &c);
        check(r == 0 || r == -ESTALE || r == -EBADMSG || r == -ENOMEM);
        if (r == 0) {
                check(strcmp(c.key, KEY) == 0);
                check(c.outcome && c.outcome[0] && c.time > 0 && c.time <= NOW + 300);
                for (const char *p = c.outcome; *p; p++)
                        check(*p >= 0x20 && *p < 0x7f);
                check(vm_accel_cache_format(&c, &again) == 0);
                check(strcmp(again, text) == 0);
        }
        free(again);
        vm_accel_cache_done(&c);
        free(text);
        return 0;
}
