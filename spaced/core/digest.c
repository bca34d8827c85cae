/* SPDX-License-Identifier: Apache-2.0 */
/* The digest of a file, as templates and base snapshots name what they were made from. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/digest.h"
#include "core/util.h"
#include "macro.h"
#include "string-util.h"

int file_digest(const char *path, char **ret) {
        _cleanup_free_ char *sidecar = NULL, *line = NULL, *out = NULL;
        struct stat st, sst;
        int r;

        if (stat(path, &st) < 0)
                return -errno;
        /* `make` writes PATH.sha256 beside each guest file; trust it only if it is newer than the file. */
        if (asprintf(&sidecar, "%s.sha256", path) < 0)
                return -ENOMEM;
        if (stat(sidecar, &sst) == 0 && sst.st_mtime >= st.st_mtime && read_first_line(sidecar, &line) >= 0) {
                line[strcspn(line, " \t")] = 0;
                if (string_is_hex(line, 64))
                        return asprintf(ret, "sha256:%s", line) < 0 ? -ENOMEM : 0;
        }
        /* Otherwise hash it now (once per file change) and leave the sidecar if we can. */
        {
                int pipefd[2];
                char buf[128] = {};
                pid_t pid;
                ssize_t n;

                if (pipe2(pipefd, O_CLOEXEC) < 0)
                        return -errno;
                pid = fork();
                if (pid < 0)
                        return -errno;
                if (pid == 0) {
                        dup2(pipefd[1], 1);
                        execlp("sha256sum", "sha256sum", "--", path, (char *) NULL);
                        _exit(127);
                }
                close(pipefd[1]);
                n = read(pipefd[0], buf, sizeof buf - 1);
                close(pipefd[0]);
                r = 0;
                while (waitpid(pid, &r, 0) < 0 && errno == EINTR)
                        ;
                if (n < 64)
                        return -EIO;
                buf[64] = 0;
                if (!string_is_hex(buf, 64))
                        return -EIO;
                {
                        _cleanup_free_ char *content = NULL;
                        if (asprintf(&content, "%s\n", buf) >= 0)
                                (void) write_file_atomic(sidecar, content);
                }
                return asprintf(ret, "sha256:%s", buf) < 0 ? -ENOMEM : 0;
        }
}
