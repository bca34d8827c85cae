/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* One error model for the whole daemon (ARCHITECTURE.md, "Errors"): every failure a user can see has a stable
 * code from this enum; the code decides the HTTP status, through one table (core/error.c). A function that
 * can fail for a reason worth telling fills an Error (code and message) and returns -errno; callers pass the
 * Error up or answer with it. The strings are API: never rename one. */

#include <errno.h>
#include <stdarg.h>

typedef enum ErrorCode {
        ERROR_NONE,                  /* no error */
        /* the request was wrong: 400 */
        ERROR_INVALID_ARGUMENT,
        ERROR_INVALID_PATH,
        ERROR_INVALID_REF,
        ERROR_INVALID_SOURCE,
        ERROR_INVALID_USER,
        ERROR_INVALID_CWD,
        ERROR_UNKNOWN_USER,
        ERROR_UNKNOWN_GROUP,
        ERROR_DISK_TOO_SMALL,
        ERROR_IS_A_DIRECTORY,
        ERROR_NOT_A_DIRECTORY,
        ERROR_TOO_MANY_ENTRIES,
        /* who asked: 401, 403, 421 */
        ERROR_UNAUTHORIZED,
        ERROR_INVALID_TOKEN,
        ERROR_TOKEN_EXPIRED,
        ERROR_PERMISSION_DENIED,
        ERROR_INVALID_HOST,  /* a TCP request named a Host that is not this listener (DNS rebinding) */
        /* what was named does not exist: 404 */
        ERROR_NOT_FOUND,
        ERROR_SANDBOX_NOT_FOUND,
        ERROR_TEMPLATE_NOT_FOUND,
        ERROR_CHECKPOINT_NOT_FOUND,
        ERROR_OPERATION_NOT_FOUND,
        ERROR_PROCESS_NOT_FOUND,
        ERROR_SESSION_NOT_FOUND,
        ERROR_KEY_NOT_FOUND,
        ERROR_COMMAND_NOT_FOUND,
        ERROR_EGRESS_PROFILE_NOT_FOUND,  /* a create or a lookup named an egress profile the daemon does not have */
        ERROR_FORWARD_NOT_FOUND,     /* no port forward with that host port or id */
        ERROR_METHOD_NOT_ALLOWED,    /* 405 */
        /* the state does not allow it: 409 */
        ERROR_AMBIGUOUS_REFERENCE,
        ERROR_NAME_IN_USE,
        ERROR_INVALID_STATE,
        ERROR_SANDBOX_BUSY,
        ERROR_SANDBOX_NOT_RUNNING,
        ERROR_SANDBOX_GONE,
        ERROR_CHECKPOINT_BUSY,
        ERROR_TEMPLATE_IN_USE,
        ERROR_PROCESS_NOT_RUNNING,
        ERROR_STDIN_CLOSED,
        ERROR_NOT_A_TTY,
        ERROR_EXISTS,
        ERROR_NOT_EMPTY,
        ERROR_PORT_IN_USE,           /* a forward's host port is taken on 127.0.0.1 */
        ERROR_PAYLOAD_TOO_LARGE,     /* 413 */
        ERROR_LIMIT_EXCEEDED,        /* 413: over a configured limit (an import's size, entries, ...) */
        /* it failed on our side: 500 */
        ERROR_INTERNAL,
        ERROR_IO_ERROR,
        ERROR_CREATE_FAILED,
        ERROR_FORK_FAILED,
        ERROR_OPERATION_FAILED,
        ERROR_IMAGE_FAILED,
        ERROR_EXEC_FAILED,
        ERROR_INTERRUPTED,
        ERROR_CANCELLED,
        ERROR_PROCESS_LOST,
        ERROR_EVENTS_LOST,
        ERROR_NOT_SUPPORTED,         /* 501 */
        ERROR_PROTOCOL_ERROR,        /* 502: the guest broke the protocol */
        ERROR_SANDBOX_UNAVAILABLE,   /* 502: an E2B envd request for a sandbox that is gone or not running */
        ERROR_PORT_UNREACHABLE,      /* 502: nothing accepts connections on that port in the sandbox */
        ERROR_BAD_GATEWAY,           /* 502: the server in the sandbox answered with no valid HTTP response */
        ERROR_DEADLINE_EXCEEDED,     /* 504: the caller's deadline passed (E2B's connect-timeout-ms) */
        /* try again later: 503 */
        ERROR_CHANNEL_LOST,
        ERROR_TOO_MANY_TRANSFERS,
        ERROR_TOO_MANY_PROCESSES,
        ERROR_TOO_MANY_STREAMS,      /* event streams (attach, logs) open on one sandbox */
        /* a client or a guest over its share (a buffer, a rate): 429 */
        ERROR_RESOURCE_EXHAUSTED,
        /* out of room: 507 */
        ERROR_INSUFFICIENT_MEMORY,
        ERROR_NO_SPACE,
        _ERROR_CODE_MAX,
} ErrorCode;

typedef struct Error {
        ErrorCode code;
        char *message;       /* what happened and what to do; NULL: the code says it all */
} Error;

const char *error_code_to_string(ErrorCode c);
/* -EINVAL for a string that is no code: what comes from outside (the guest, an old row) is checked here. */
int error_code_from_string(const char *s, ErrorCode *ret);
unsigned error_code_http_status(ErrorCode c);

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
