/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* One error model for the whole daemon (ARCHITECTURE.md, "Errors"): every failure a user can see has a stable
 * code (lib/error-code.h, whose table names it on each wire). A function that can fail for a reason worth
 * telling fills an Error (code and message) and returns -errno; callers pass the Error up or answer with it. */

#include <errno.h>
#include <stdarg.h>

#include "error-code.h"

typedef struct Error {
        ErrorCode code;
        char *message;       /* what happened and what to do; NULL: the code says it all */
} Error;

/* Sets e (a NULL e is fine: nothing to fill) to code and a formatted message, replacing what it held. Returns 0,
 * or -ENOMEM when the message could not be made (the code is set all the same), so that callers write
 * `return error_set(reterr, ERROR_X, "...") ?: -EINVAL;`. */
int error_set(Error *e, ErrorCode code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int error_setv(Error *e, ErrorCode code, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
/* The code for a failure of our own that ended in errno r: ERROR_NO_SPACE for a full disk, else ERROR_INTERNAL. */
static inline ErrorCode error_code_from_errno(int r) {
        return r == -ENOSPC || r == -EDQUOT ? ERROR_NO_SPACE : ERROR_INTERNAL;
}
/* The message, or the code's name when there is none. */
const char *error_message(const Error *e);
void error_done(Error *e);
/* Moves src into dst (dst is done first; a NULL dst just drops src); src is left empty. */
void error_move(Error *dst, Error *src);
