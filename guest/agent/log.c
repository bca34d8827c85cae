/* SPDX-License-Identifier: Apache-2.0 */

/* Logging for PID 1: /dev/kmsg (so the console and dmesg show it) when it opens, else stderr. */

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "agent.h"

static int log_fd = -1;

void log_open(void) {
        if (log_fd >= 0)
                return;
        if (getpid() == 1)
                log_fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC | O_NOCTTY);
}

void log_msg(int level, const char *fmt, ...) {
        char buf[512];
        va_list ap;
        int n, m;

        n = snprintf(buf, sizeof buf, "<%d>space-agent: ", level);
        va_start(ap, fmt);
        m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
        va_end(ap);
        if (m < 0)
                return;
        n += m < (int) (sizeof buf - n - 1) ? m : (int) (sizeof buf - n - 2);
        buf[n++] = '\n';

        if (log_fd >= 0)
                (void) !write(log_fd, buf, n);
        else
                (void) !write(STDERR_FILENO, buf + 3, n - 3);
}
