/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A tiny TAP producer for unit tests: plan(n) (or plan(0) for "count as you go"), ok(cond, fmt, ...) and
 * done(), which prints the trailing plan if needed and returns the exit status for main(). */

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned tap_planned, tap_run, tap_failed;

/* A precondition of the test itself (a socketpair, a temporary directory), not a check: abort when it fails. */
#define ASSERT(x)                                                                               \
        do {                                                                                    \
                if (!(x)) {                                                                     \
                        fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #x);         \
                        abort();                                                                \
                }                                                                               \
        } while (0)

static inline void plan(unsigned n) {
        tap_planned = n;
        if (n > 0)
                printf("1..%u\n", n);
}

__attribute__((format(printf, 2, 3))) static inline bool ok(bool cond, const char *fmt, ...) {
        va_list ap;

        tap_run++;
        if (!cond)
                tap_failed++;
        printf("%sok %u - ", cond ? "" : "not ", tap_run);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
        return cond;
}

__attribute__((format(printf, 1, 2))) static inline void diag(const char *fmt, ...) {
        va_list ap;

        fputs("# ", stdout);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
}

static inline int done(void) {
        if (tap_planned == 0)
                printf("1..%u\n", tap_run);
        else if (tap_run != tap_planned) {
                diag("planned %u tests but ran %u", tap_planned, tap_run);
                return 1;
        }
        return tap_failed > 0 ? 1 : 0;
}
