/* SPDX-License-Identifier: Apache-2.0 */

/* spaced/core/log.c keeps a log file on stderr bounded: past log_file_max it becomes NAME.1 and a new NAME is
 * opened on fds 1 and 2; a pipe on stderr is left alone. */

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "tap.h"

static off_t size_of(const char *path) {
        struct stat st;
        return stat(path, &st) < 0 ? -1 : st.st_size;
}

int main(void) {
        char dir[] = "/tmp/test-log-XXXXXX", path[256], old[256], cmd[300];
        int saved_out = dup(STDOUT_FILENO), fd;
        off_t a, b;

        if (!mkdtemp(dir))
                return 1;
        snprintf(path, sizeof path, "%s/spaced.log", dir);
        snprintf(old, sizeof old, "%s/spaced.log.1", dir);
        unsetenv("JOURNAL_STREAM");
        log_file_max = 4096;
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        (void) dup2(fd, STDERR_FILENO);
        close(fd);

        /* 100 lines of about 100 bytes: several rotations of a 4 KiB cap */
        for (int i = 0; i < 100; i++)
                log_info("line %03d %s", i, "................................................................");
        fflush(stderr);
        a = size_of(path);
        b = size_of(old);
        (void) dup2(saved_out, STDERR_FILENO);   /* TAP output and diagnostics go to the test's stdout again */

        plan(4);
        ok(b > 4096 && b < 4096 + 256, "the log was rotated into .1 once past the cap (%lld bytes)", (long long) b);
        ok(a > 0 && a <= 4096, "the current log holds less than the cap (%lld bytes)", (long long) a);
        {
                char buf[8192] = "";
                FILE *f = fopen(path, "r");
                size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;

                if (f)
                        fclose(f);
                buf[n] = 0;
                ok(strstr(buf, "line 099"), "the newest line is in the current file");
        }
        snprintf(cmd, sizeof cmd, "ls %s | wc -l | grep -qx 2", dir);
        ok(system(cmd) == 0, "only NAME and NAME.1 exist");
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        (void) system(cmd);
        return done();
}
