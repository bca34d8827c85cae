/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

int log_max_level = LOG_INFO_LEVEL;
uint64_t log_file_max = LOG_FILE_MAX;

/* When stderr is a regular file (spacectl's autostart points it at $state/spaced.log) it is capped: past
 * log_file_max bytes it becomes NAME.1 (replacing the one before) and a new NAME is opened on fds 1 and 2. The
 * journal, a pipe or a terminal are left alone: bounding those is up to whoever reads them. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int file_state = -1;          /* -1 not looked at yet, 0 not a file we rotate, 1 rotating */
static char file_path[PATH_MAX];
static uint64_t file_bytes;

static void file_probe(void) {
        struct stat st, named;
        ssize_t n;

        file_state = 0;
        if (fstat(STDERR_FILENO, &st) < 0 || !S_ISREG(st.st_mode))
                return;
        n = readlink("/proc/self/fd/2", file_path, sizeof file_path - 1);
        if (n <= 0 || file_path[0] != '/')
                return;
        file_path[n] = 0;
        /* the name must still be this file (not "... (deleted)", not replaced) */
        if (stat(file_path, &named) < 0 || named.st_dev != st.st_dev || named.st_ino != st.st_ino)
                return;
        file_bytes = (uint64_t) st.st_size;
        file_state = 1;
}

static void file_rotate(void) {
        char old[PATH_MAX + 2];
        struct stat out, err;
        bool same_out;
        int fd;

        if (snprintf(old, sizeof old, "%s.1", file_path) >= (int) sizeof old)
                return;
        same_out = fstat(STDOUT_FILENO, &out) >= 0 && fstat(STDERR_FILENO, &err) >= 0 && out.st_dev == err.st_dev &&
                   out.st_ino == err.st_ino;
        if (rename(file_path, old) < 0) {
                file_state = 0; /* cannot: stop trying rather than fail on every line */
                return;
        }
        fd = open(file_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0) {
                file_state = 0;
                return;
        }
        fflush(stderr);
        fflush(stdout);
        (void) dup2(fd, STDERR_FILENO);
        if (same_out)
                (void) dup2(fd, STDOUT_FILENO);
        close(fd);
        file_bytes = 0;
}

void log_emit(int level, const char *fmt, ...) {
        static const char *const prefix[] = { "", "", "", "error: ", "warning: ", "", "", "debug: " };
        va_list ap;

        int n = 0, k;

        if (level > log_max_level)
                return;
        static int journal = -1;

        pthread_mutex_lock(&log_lock);
        if (journal < 0)
                journal = getenv("JOURNAL_STREAM") != NULL;
        if (file_state < 0)
                file_state = journal ? 0 : (file_probe(), file_state);
        /* <N> lets journald pick the priority when we run under systemd; a log file gets a timestamp. */
        if (journal)
                n = fprintf(stderr, "<%d>%s", level, prefix[level & 7]);
        else {
                struct timespec ts;
                struct tm tm;
                char when[32];

                clock_gettime(CLOCK_REALTIME, &ts);
                gmtime_r(&ts.tv_sec, &tm);
                strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
                n = fprintf(stderr, "%s.%03ldZ spaced[%d]: %s", when, ts.tv_nsec / 1000000, (int) getpid(),
                        prefix[level & 7]);
        }
        va_start(ap, fmt);
        k = vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        if (file_state > 0) {
                file_bytes += (uint64_t) (n > 0 ? n : 0) + (uint64_t) (k > 0 ? k : 0) + 1;
                if (file_bytes > log_file_max)
                        file_rotate();
        }
        pthread_mutex_unlock(&log_lock);
}
