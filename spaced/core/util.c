/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "core/util.h"

int random_hex(char *buf, size_t n_hex) {
        uint8_t bytes[64];
        size_t n = (n_hex + 1) / 2;

        if (n > sizeof bytes)
                return -EINVAL;
        if (getrandom(bytes, n, 0) != (ssize_t) n)
                return -errno ?: -EIO;
        for (size_t i = 0; i < n_hex; i++)
                buf[i] = "0123456789abcdef"[(bytes[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
        buf[n_hex] = 0;
        return 0;
}

int64_t now_unix(void) {
        return (int64_t) time(NULL);
}

uint64_t now_usec_monotonic(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000;
}

void format_rfc3339(int64_t t, char buf[static 32]) {
        time_t tt = (time_t) t;
        struct tm tm;

        gmtime_r(&tt, &tm);
        strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) (flag == FTW_DP ? rmdir(path) : unlink(path));
        return 0;
}

int rm_rf(const char *path) {
        if (!path || !*path || streq(path, "/"))
                return -EINVAL;
        if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

int run_command_output(char *const argv[], char **ret_output) {
        int pipefd[2];
        char buf[4096];
        size_t have = 0;
        pid_t pid;
        int status;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                close(pipefd[0]);
                close(pipefd[1]);
                return -errno;
        }
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR);
                dup2(null, 0);
                dup2(pipefd[1], 1);
                dup2(pipefd[1], 2);
                execvp(argv[0], argv);
                dprintf(2, "%s: %s", argv[0], strerror(errno));
                _exit(127);
        }
        close(pipefd[1]);
        for (;;) {
                ssize_t n;

                if (have == sizeof buf - 1) /* keep the tail: the end says what went wrong */
                        memmove(buf, buf + sizeof buf / 2, have -= sizeof buf / 2);
                n = read(pipefd[0], buf + have, sizeof buf - 1 - have);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                have += (size_t) n;
        }
        close(pipefd[0]);
        buf[have] = 0;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        while (have > 0 && (buf[have - 1] == '\n' || buf[have - 1] == ' '))
                buf[--have] = 0;
        if (ret_output && !(*ret_output = strdup(buf)))
                return -ENOMEM;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

int run_command(char *const argv[], char **reterr_output) {
        _cleanup_free_ char *out = NULL;
        int r = run_command_output(argv, reterr_output ? &out : NULL);

        if (r == -EIO && reterr_output)
                *reterr_output = strdup(out && *out ? out : "command failed");
        return r;
}

int read_first_line(const char *path, char **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        _cleanup_fclose_ FILE *f = NULL;
        char line[4096];

        if (fd < 0)
                return -errno;
        f = fdopen(fd, "re");
        if (!f)
                return -errno;
        fd = -1; /* f owns it now */
        if (!fgets(line, sizeof line, f))
                return -ENODATA;
        line[strcspn(line, "\r\n")] = 0;
        *ret = strdup(line);
        return *ret ? 0 : -ENOMEM;
}

int write_file_atomic(const char *path, const char *content) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -1;
        size_t n = strlen(content);

        if (asprintf(&tmp, "%s.tmp.%d", path, (int) getpid()) < 0)
                return -ENOMEM;
        /* A fresh file, never what was at that name (a planted symlink would send the write elsewhere); the
         * rename then replaces whatever is at path itself, a symlink included, without following it. */
        (void) unlink(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0)
                return -errno;
        if (write(fd, content, n) != (ssize_t) n || fsync(fd) < 0) {
                int r = -errno ?: -EIO;
                unlink(tmp);
                return r;
        }
        if (rename(tmp, path) < 0) {
                int r = -errno;
                unlink(tmp);
                return r;
        }
        return 0;
}

/* Crash injection for the tests (tests/integration/t12-crash-inject.sh): SPACE_TEST_CRASH_AT=NAME makes the
 * daemon SIGKILL itself when it reaches the point NAME, from whichever thread, as a real crash would. */
void crash_point(const char *name) {
        static const char *want = NULL;
        static bool read_env = false;

        if (!read_env) {
                want = secure_getenv("SPACE_TEST_CRASH_AT");
                read_env = true;
        }
        if (want && streq(want, name))
                (void) kill(getpid(), SIGKILL);
}
