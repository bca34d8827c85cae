/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Cleanup helpers in the style of systemd's src/basic/macro.h and alloc-util.h. */

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

static inline void freep(void *p) {
        free(*(void **) p);
}
static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                (void) close(*fd);
                errno = saved;
        }
}
static inline void fclosep(FILE **f) {
        if (*f)
                (void) fclose(*f);
}
static inline void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
}
static inline void strv_free(char **l) {
        if (!l)
                return;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
}
static inline void strv_freep(char ***l) {
        strv_free(*l);
}

/* free() that gives back NULL, to assign: p = mfree(p). */
static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_closedir_ _cleanup_(closedirp)
#define _cleanup_strv_free_ _cleanup_(strv_freep)

/* Hands ownership out of a _cleanup_ variable. */
#define TAKE_PTR(p)                                \
        ({                                         \
                __typeof__(p) _p_ = (p);           \
                (p) = NULL;                        \
                _p_;                               \
        })
#define TAKE_FD(fd)                                \
        ({                                         \
                int _fd_ = (fd);                   \
                (fd) = -1;                         \
                _fd_;                              \
        })

/* libc -1/errno -> -errno */
#define RET_NERRNO(expr)                           \
        ({                                         \
                __typeof__(expr) _r_ = (expr);     \
                _r_ < 0 ? -errno : _r_;            \
        })

static inline int safe_close(int fd) {
        if (fd >= 0)
                (void) close(fd);
        return -1;
}

static inline bool streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}
#define streq(a, b) (strcmp((a), (b)) == 0)

/* The object that holds member p of type type at field member. */
#define container_of(p, type, member) ((type *) ((char *) (p) - offsetof(type, member)))

/* x equals one of the values that follow (integers). */
#define IN_SET(x, ...)                                                                  \
        ({                                                                              \
                bool _found_ = false;                                                   \
                const __typeof__(x) _v_ = (x);                                          \
                const __typeof__(x) _set_[] = { __VA_ARGS__ };                          \
                for (size_t _i_ = 0; _i_ < sizeof _set_ / sizeof _set_[0]; _i_++)       \
                        if (_set_[_i_] == _v_) {                                        \
                                _found_ = true;                                         \
                                break;                                                  \
                        }                                                               \
                _found_;                                                                \
        })

/* The value of a hex digit, -1 for anything else: chunk sizes, seeds. */
static inline int unhexchar(char ch) {
        if (ch >= '0' && ch <= '9')
                return ch - '0';
        if (ch >= 'a' && ch <= 'f')
                return ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'F')
                return ch - 'A' + 10;
        return -1;
}
