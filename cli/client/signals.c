/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

volatile sig_atomic_t cli_signal_received = 0;
static int signal_pipe[2] = { -1, -1 };

static void on_signal(int sig) {
        int saved = errno;
        unsigned char b = (unsigned char) sig;

        cli_signal_received = sig;
        (void) !write(signal_pipe[1], &b, 1);
        errno = saved;
}

int cli_signals_install(void) {
        struct sigaction sa = { .sa_handler = on_signal };
        static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };

        if (signal_pipe[0] >= 0)
                return 0;
        if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;

        /* No SA_RESTART: blocking waits should notice. curl retries EINTR itself. */
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
                if (sigaction(sigs[i], &sa, NULL) < 0)
                        return -errno;
        (void) signal(SIGPIPE, SIG_IGN);
        return 0;
}

int cli_signals_add(int sig) {
        struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };

        if (signal_pipe[0] < 0)
                return -EBADF;
        sigemptyset(&sa.sa_mask);
        return sigaction(sig, &sa, NULL) < 0 ? -errno : 0;
}

int cli_signals_fd(void) {
        return signal_pipe[0];
}

int cli_signals_next(void) {
        unsigned char b;
        ssize_t n;

        if (signal_pipe[0] < 0)
                return 0;
        do
                n = read(signal_pipe[0], &b, 1);
        while (n < 0 && errno == EINTR);
        return n == 1 ? b : 0;
}
