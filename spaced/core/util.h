/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Small helpers of the daemon's own: ids, clocks, files, child commands, crash injection for tests. */

#include <stddef.h>
#include <stdint.h>

int random_hex(char *buf, size_t n_hex);  /* n_hex chars + NUL */
int64_t now_unix(void);
uint64_t now_usec_monotonic(void);
#define USEC_PER_MSEC 1000ULL
#define USEC_PER_SEC 1000000ULL
void format_rfc3339(int64_t t, char buf[static 32]);
int rm_rf(const char *path);
int run_command(char *const argv[], char **reterr_output);   /* waits; captures stderr tail on failure */
/* The same, and *ret_output (may be NULL) gets what it printed on stdout and stderr, the tail of it when it is
 * long, trailing blanks dropped, whether it succeeded (0) or not (-EIO). */
int run_command_output(char *const argv[], char **ret_output);
int read_first_line(const char *path, char **ret);
int write_file_atomic(const char *path, const char *content);
void crash_point(const char *name);
