/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Helpers shared by the libFuzzer targets in tests/fuzz/ (see tests/fuzz/README.md): a private scratch
 * directory (on tmpfs when there is one), whole-file writes, and splitting one input into parts. */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant of a target: when it breaks, the input is a finding, like a crash. */
#define check(x)                                                                                            \
        do {                                                                                                \
                if (!(x)) {                                                                                 \
                        fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #x);         \
                        abort();                                                                            \
                }                                                                                           \
        } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv);

static char fuzz_dir_buf[256];

static void fuzz_rm_dir(void) {
        char cmd[300];

        if (fuzz_dir_buf[0] && snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_buf) < (int) sizeof cmd)
                (void) !system(cmd);
}

/* A directory of our own, made once per process and removed at exit. */
static inline const char *fuzz_dir(void) {
        if (!fuzz_dir_buf[0]) {
                const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ?: "/tmp");
                snprintf(fuzz_dir_buf, sizeof fuzz_dir_buf, "%s/space-fuzz.XXXXXX", base);
                if (!mkdtemp(fuzz_dir_buf)) {
                        perror("mkdtemp");
                        abort();
                }
                atexit(fuzz_rm_dir);
        }
        return fuzz_dir_buf;
}

static inline void fuzz_write_file(const char *path, const void *p, size_t n) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        const uint8_t *b = p;

        if (fd < 0) {
                perror(path);
                abort();
        }
        while (n > 0) {
                ssize_t k = write(fd, b, n);
                if (k <= 0) {
                        perror(path);
                        abort();
                }
                b += k;
                n -= (size_t) k;
        }
        close(fd);
}

/* Splits data at each occurrence of sep into at most max parts; returns how many. Parts point into data. */
static inline size_t fuzz_split(const uint8_t *data, size_t size, const char *sep, const uint8_t **parts,
                                size_t *lens, size_t max) {
        size_t n = 0, sl = strlen(sep);
        const uint8_t *p = data, *end = data + size;

        while (n + 1 < max) {
                const uint8_t *q = (size_t) (end - p) >= sl ? memmem(p, (size_t) (end - p), sep, sl) : NULL;
                if (!q)
                        break;
                parts[n] = p;
                lens[n++] = (size_t) (q - p);
                p = q + sl;
        }
        parts[n] = p;
        lens[n++] = (size_t) (end - p);
        return n;
}
