/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

/* The local terminal for attach and exec -t: raw mode with the original settings kept in one place and put
 * back on every way out (explicitly, from atexit(), and from fatal signals), the window size, and the
 * detach key sequence. */

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "macro.h"

static struct termios saved_termios;
static volatile sig_atomic_t saved_fd = -1;     /* >= 0 while saved_termios must be put back */

void terminal_restore(void) {
        int fd = saved_fd;

        /* tcsetattr() is async-signal-safe, so this also runs from signal handlers. */
        if (fd < 0)
                return;
        (void) tcsetattr(fd, TCSADRAIN, &saved_termios);
        saved_fd = -1;
}

static void on_fatal_signal(int sig) {
        terminal_restore();
        /* SA_RESETHAND put the default action back: die of the same signal. */
        (void) raise(sig);
}

int terminal_save(int fd) {
        static bool installed = false;

        if (saved_fd >= 0)
                return 0;
        if (tcgetattr(fd, &saved_termios) < 0)
                return -errno;
        saved_fd = fd;

        if (!installed) {
                struct sigaction sa = { .sa_handler = on_fatal_signal, .sa_flags = SA_RESETHAND };
                /* SIGINT, SIGTERM and SIGHUP go through signals.c's self-pipe and the normal return path;
                 * these are the ones that would end us without it. */
                static const int fatal[] = { SIGQUIT, SIGABRT, SIGALRM, SIGUSR1, SIGUSR2 };

                sigemptyset(&sa.sa_mask);
                for (size_t i = 0; i < ELEMENTSOF(fatal); i++)
                        (void) sigaction(fatal[i], &sa, NULL);
                if (atexit(terminal_restore) != 0)
                        return -ENOMEM;
                installed = true;
        }
        return 0;
}

int terminal_raw(int fd) {
        struct termios t;
        int r;

        r = terminal_save(fd);
        if (r < 0)
                return r;
        t = saved_termios;
        cfmakeraw(&t);
        /* Keep output processing off too: the remote pty already turned "\n" into "\r\n". */
        t.c_cc[VMIN] = 1;
        t.c_cc[VTIME] = 0;
        if (tcsetattr(fd, TCSADRAIN, &t) < 0) {
                r = -errno;
                saved_fd = -1;
                return r;
        }
        return 0;
}

bool terminal_is_saved(void) {
        return saved_fd >= 0;
}

int terminal_size(int fd, unsigned *ret_rows, unsigned *ret_cols) {
        struct winsize ws = {};

        if (ioctl(fd, TIOCGWINSZ, &ws) < 0)
                return -errno;
        if (ws.ws_row == 0 || ws.ws_col == 0)
                return -ENODATA;
        *ret_rows = ws.ws_row;
        *ret_cols = ws.ws_col;
        return 0;
}

/* One key in docker's --detach-keys syntax: a single character, or "ctrl-X" with X one of a-z @ [ \ ] ^ _ */
static int parse_key(const char *s, size_t n, uint8_t *ret) {
        if (n == 1) {
                *ret = (uint8_t) s[0];
                return 0;
        }
        if (n == 6 && strncasecmp(s, "ctrl-", 5) == 0) {
                char c = s[5];

                if (c >= 'a' && c <= 'z')
                        *ret = (uint8_t) (c - 'a' + 1);
                else if (c >= 'A' && c <= 'Z')
                        *ret = (uint8_t) (c - 'A' + 1);
                else if (c == '@')
                        *ret = 0;
                else if (c >= '[' && c <= '_')
                        *ret = (uint8_t) (c - '[' + 27);
                else
                        return -EINVAL;
                return 0;
        }
        return -EINVAL;
}

int detach_keys_parse(const char *s, DetachKeys *ret) {
        DetachKeys k = {};

        if (!*s) {
                *ret = k; /* "": detaching is off */
                return 0;
        }
        for (;;) {
                size_t n = strcspn(s, ",");

                if (k.n >= ELEMENTSOF(k.keys) || parse_key(s, n, &k.keys[k.n]) < 0)
                        return -EINVAL;
                k.n++;
                s += n;
                if (!*s)
                        break;
                s++;
        }
        *ret = k;
        return 0;
}

size_t detach_keys_feed(DetachKeys *k, const uint8_t *in, size_t n, uint8_t *out, bool *ret_detach) {
        size_t o = 0;

        *ret_detach = false;
        if (k->n == 0) {
                memcpy(out, in, n);
                return n;
        }
        for (size_t i = 0; i < n; i++) {
                uint8_t b = in[i];

                if (b == k->keys[k->matched]) {
                        if (++k->matched == k->n) {
                                k->matched = 0;
                                *ret_detach = true;
                                return o; /* what came after the sequence is not ours to send */
                        }
                        continue;
                }
                /* Not the sequence after all: the held keys go to the process, and b starts over. */
                memcpy(out + o, k->keys, k->matched);
                o += k->matched;
                k->matched = 0;
                if (b == k->keys[0])
                        k->matched = 1;
                else
                        out[o++] = b;
        }
        return o;
}
