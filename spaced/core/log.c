/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

int log_max_level = LOG_INFO_LEVEL;

void log_emit(int level, const char *fmt, ...) {
        static const char *const prefix[] = { "", "", "", "error: ", "warning: ", "", "", "debug: " };
        va_list ap;

        if (level > log_max_level)
                return;
        static int journal = -1;

        if (journal < 0)
                journal = getenv("JOURNAL_STREAM") != NULL;
        /* <N> lets journald pick the priority when we run under systemd; a log file gets a timestamp. */
        if (journal)
                fprintf(stderr, "<%d>%s", level, prefix[level & 7]);
        else {
                struct timespec ts;
                struct tm tm;
                char when[32];

                clock_gettime(CLOCK_REALTIME, &ts);
                gmtime_r(&ts.tv_sec, &tm);
                strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
                fprintf(stderr, "%s.%03ldZ spaced[%d]: %s", when, ts.tv_nsec / 1000000, (int) getpid(),
                        prefix[level & 7]);
        }
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}
