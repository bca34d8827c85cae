/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Helpers the VMM driver's two files (vmm-qemu.c, qmp.c) share: deadlines. */

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
