/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "macro.h"

static const struct {
        const char *name;
        unsigned status;
} error_table[_ERROR_CODE_MAX] = {
        [ERROR_NONE] = { "none", 200 },
        [ERROR_INVALID_ARGUMENT] = { "invalid_argument", 400 },
        [ERROR_INVALID_PATH] = { "invalid_path", 400 },
        [ERROR_INVALID_REF] = { "invalid_ref", 400 },
        [ERROR_INVALID_SOURCE] = { "invalid_source", 400 },
        [ERROR_INVALID_USER] = { "invalid_user", 400 },
        [ERROR_INVALID_CWD] = { "invalid_cwd", 400 },
        [ERROR_UNKNOWN_USER] = { "unknown_user", 400 },
        [ERROR_UNKNOWN_GROUP] = { "unknown_group", 400 },
        [ERROR_DISK_TOO_SMALL] = { "disk_too_small", 400 },
        [ERROR_IS_A_DIRECTORY] = { "is_a_directory", 400 },
        [ERROR_NOT_A_DIRECTORY] = { "not_a_directory", 400 },
        [ERROR_TOO_MANY_ENTRIES] = { "too_many_entries", 400 },
        [ERROR_UNAUTHORIZED] = { "unauthorized", 401 },
        [ERROR_INVALID_TOKEN] = { "invalid_token", 401 },
        [ERROR_TOKEN_EXPIRED] = { "token_expired", 401 },
        [ERROR_PERMISSION_DENIED] = { "permission_denied", 403 },
        [ERROR_INVALID_HOST] = { "invalid_host", 421 },
        [ERROR_NOT_FOUND] = { "not_found", 404 },
        [ERROR_SANDBOX_NOT_FOUND] = { "sandbox_not_found", 404 },
        [ERROR_TEMPLATE_NOT_FOUND] = { "template_not_found", 404 },
        [ERROR_CHECKPOINT_NOT_FOUND] = { "checkpoint_not_found", 404 },
        [ERROR_OPERATION_NOT_FOUND] = { "operation_not_found", 404 },
        [ERROR_PROCESS_NOT_FOUND] = { "process_not_found", 404 },
        [ERROR_SESSION_NOT_FOUND] = { "session_not_found", 404 },
        [ERROR_KEY_NOT_FOUND] = { "key_not_found", 404 },
        [ERROR_COMMAND_NOT_FOUND] = { "command_not_found", 404 },
        [ERROR_EGRESS_PROFILE_NOT_FOUND] = { "egress_profile_not_found", 404 },
        [ERROR_FORWARD_NOT_FOUND] = { "forward_not_found", 404 },
        [ERROR_METHOD_NOT_ALLOWED] = { "method_not_allowed", 405 },
        [ERROR_AMBIGUOUS_REFERENCE] = { "ambiguous_reference", 409 },
        [ERROR_NAME_IN_USE] = { "name_in_use", 409 },
        [ERROR_INVALID_STATE] = { "invalid_state", 409 },
        [ERROR_SANDBOX_BUSY] = { "sandbox_busy", 409 },
        [ERROR_SANDBOX_NOT_RUNNING] = { "sandbox_not_running", 409 },
        [ERROR_SANDBOX_GONE] = { "sandbox_gone", 409 },
        [ERROR_CHECKPOINT_BUSY] = { "checkpoint_busy", 409 },
        [ERROR_TEMPLATE_IN_USE] = { "template_in_use", 409 },
        [ERROR_PROCESS_NOT_RUNNING] = { "process_not_running", 409 },
        [ERROR_STDIN_CLOSED] = { "stdin_closed", 409 },
        [ERROR_NOT_A_TTY] = { "not_a_tty", 409 },
        [ERROR_EXISTS] = { "exists", 409 },
        [ERROR_NOT_EMPTY] = { "not_empty", 409 },
        [ERROR_PORT_IN_USE] = { "port_in_use", 409 },
        [ERROR_PAYLOAD_TOO_LARGE] = { "payload_too_large", 413 },
        [ERROR_LIMIT_EXCEEDED] = { "limit_exceeded", 413 },
        [ERROR_INTERNAL] = { "internal", 500 },
        [ERROR_IO_ERROR] = { "io_error", 500 },
        [ERROR_CREATE_FAILED] = { "create_failed", 500 },
        [ERROR_FORK_FAILED] = { "fork_failed", 500 },
        [ERROR_OPERATION_FAILED] = { "operation_failed", 500 },
        [ERROR_IMAGE_FAILED] = { "image_failed", 500 },
        [ERROR_EXEC_FAILED] = { "exec_failed", 500 },
        [ERROR_INTERRUPTED] = { "interrupted", 500 },
        [ERROR_CANCELLED] = { "cancelled", 500 },
        [ERROR_PROCESS_LOST] = { "process_lost", 500 },
        [ERROR_EVENTS_LOST] = { "events_lost", 500 },
        [ERROR_NOT_SUPPORTED] = { "not_supported", 501 },
        [ERROR_PROTOCOL_ERROR] = { "protocol_error", 502 },
        [ERROR_SANDBOX_UNAVAILABLE] = { "sandbox_unavailable", 502 },
        [ERROR_PORT_UNREACHABLE] = { "port_unreachable", 502 },
        [ERROR_BAD_GATEWAY] = { "bad_gateway", 502 },
        [ERROR_DEADLINE_EXCEEDED] = { "deadline_exceeded", 504 },
        [ERROR_CHANNEL_LOST] = { "channel_lost", 503 },
        [ERROR_TOO_MANY_TRANSFERS] = { "too_many_transfers", 503 },
        [ERROR_TOO_MANY_PROCESSES] = { "too_many_processes", 503 },
        [ERROR_TOO_MANY_STREAMS] = { "too_many_streams", 503 },
        [ERROR_RESOURCE_EXHAUSTED] = { "resource_exhausted", 429 },
        [ERROR_INSUFFICIENT_MEMORY] = { "insufficient_memory", 507 },
        [ERROR_NO_SPACE] = { "no_space", 507 },
};

const char *error_code_to_string(ErrorCode c) {
        if ((unsigned) c >= _ERROR_CODE_MAX)
                c = ERROR_INTERNAL;
        return error_table[c].name;
}

int error_code_from_string(const char *s, ErrorCode *ret) {
        if (!s)
                return -EINVAL;
        for (unsigned i = 0; i < _ERROR_CODE_MAX; i++)
                if (streq(error_table[i].name, s)) {
                        *ret = (ErrorCode) i;
                        return 0;
                }
        return -EINVAL;
}

unsigned error_code_http_status(ErrorCode c) {
        if ((unsigned) c >= _ERROR_CODE_MAX)
                return 500;
        return error_table[c].status;
}

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
