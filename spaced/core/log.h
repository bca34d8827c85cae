/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Program-side logging: one line to stderr (the journal when run as a service, else a file that is kept
 * bounded). Only spaced/ logs. */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern int log_max_level;
/* A log file on stderr is renamed to NAME.1 past this many bytes and started afresh (core/log.c); so it and
 * its one predecessor hold at most twice this. */
#define LOG_FILE_MAX (16ULL * 1024 * 1024)
extern uint64_t log_file_max;

void log_emit(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define LOG_ERR_LEVEL 3
#define LOG_WARNING_LEVEL 4
#define LOG_INFO_LEVEL 6
#define LOG_DEBUG_LEVEL 7

#define log_error(...) log_emit(LOG_ERR_LEVEL, __VA_ARGS__)
#define log_warning(...) log_emit(LOG_WARNING_LEVEL, __VA_ARGS__)
#define log_info(...) log_emit(LOG_INFO_LEVEL, __VA_ARGS__)
#define log_debug(...) log_emit(LOG_DEBUG_LEVEL, __VA_ARGS__)

/* Logs with strerror(-r) appended and returns r (negative), systemd style: return log_error_errno(r, ...). */
#define log_full_errno(level, r, fmt, ...)                                                      \
        ({                                                                                      \
                int _e_ = (r) < 0 ? -(r) : (r);                                                  \
                log_emit(level, fmt ": %s", ##__VA_ARGS__, strerror(_e_));                      \
                -_e_;                                                                           \
        })
#define log_error_errno(r, fmt, ...) log_full_errno(LOG_ERR_LEVEL, r, fmt, ##__VA_ARGS__)
#define log_warning_errno(r, fmt, ...) log_full_errno(LOG_WARNING_LEVEL, r, fmt, ##__VA_ARGS__)
