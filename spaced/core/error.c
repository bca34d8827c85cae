/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "macro.h"

int error_setv(Error *e, ErrorCode code, const char *fmt, va_list ap) {
        char *msg = NULL;
        int r = 0;

        if (!e)
                return 0;
        /* Formatted before the old message is freed: an argument may be that message (fork_child_done hands
         * operation_finish its op's own). */
        if (fmt && vasprintf(&msg, fmt, ap) < 0) {
                msg = NULL;
                r = -ENOMEM;
        }
        free(e->message);
        e->message = msg;
        e->code = code;
        return r;
}

int error_set(Error *e, ErrorCode code, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = error_setv(e, code, fmt, ap);
        va_end(ap);
        return r;
}

const char *error_message(const Error *e) {
        return e->message ?: error_code_to_string(e->code);
}

void error_done(Error *e) {
        if (!e)
                return;
        free(e->message);
        e->message = NULL;
        e->code = ERROR_NONE;
}

void error_move(Error *dst, Error *src) {
        if (!dst) {
                error_done(src);
                return;
        }
        error_done(dst);
        *dst = *src;
        src->message = NULL;
        src->code = ERROR_NONE;
}
