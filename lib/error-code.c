/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>

#include "error-code.h"
#include "macro.h"

static const struct {
        const char *name;
        unsigned status;
        ConnectCode connect;
        /* E2B envd's own code where it differs (CONNECT_OK: as connect): a process that cannot start is an
         * invalid_argument, a user it cannot find unauthenticated; stdin or a terminal that is not there a
         * failed_precondition. */
        ConnectCode envd;
} error_table[_ERROR_CODE_MAX] = {
        [ERROR_NONE] = { "none", 200, CONNECT_INTERNAL },
        [ERROR_INVALID_ARGUMENT] = { "invalid_argument", 400, CONNECT_INVALID_ARGUMENT },
        [ERROR_INVALID_PATH] = { "invalid_path", 400, CONNECT_INVALID_ARGUMENT },
        [ERROR_INVALID_REF] = { "invalid_ref", 400, CONNECT_INVALID_ARGUMENT },
        [ERROR_INVALID_SOURCE] = { "invalid_source", 400, CONNECT_INVALID_ARGUMENT },
        [ERROR_INVALID_USER] = { "invalid_user", 400, CONNECT_INVALID_ARGUMENT, CONNECT_UNAUTHENTICATED },
        [ERROR_INVALID_CWD] = { "invalid_cwd", 400, CONNECT_INVALID_ARGUMENT },
        [ERROR_UNKNOWN_USER] = { "unknown_user", 400, CONNECT_INVALID_ARGUMENT, CONNECT_UNAUTHENTICATED },
        [ERROR_UNKNOWN_GROUP] = { "unknown_group", 400, CONNECT_INVALID_ARGUMENT, CONNECT_UNAUTHENTICATED },
        [ERROR_DISK_TOO_SMALL] = { "disk_too_small", 400, CONNECT_INVALID_ARGUMENT },
        [ERROR_IS_A_DIRECTORY] = { "is_a_directory", 400, CONNECT_INVALID_ARGUMENT },
        [ERROR_NOT_A_DIRECTORY] = { "not_a_directory", 400, CONNECT_INVALID_ARGUMENT },
        [ERROR_TOO_MANY_ENTRIES] = { "too_many_entries", 400, CONNECT_INVALID_ARGUMENT },
        [ERROR_UNAUTHORIZED] = { "unauthorized", 401, CONNECT_UNAUTHENTICATED },
        [ERROR_INVALID_TOKEN] = { "invalid_token", 401, CONNECT_UNAUTHENTICATED },
        [ERROR_TOKEN_EXPIRED] = { "token_expired", 401, CONNECT_UNAUTHENTICATED },
        [ERROR_PERMISSION_DENIED] = { "permission_denied", 403, CONNECT_PERMISSION_DENIED, CONNECT_INVALID_ARGUMENT },
        [ERROR_INVALID_HOST] = { "invalid_host", 421, CONNECT_PERMISSION_DENIED },
        [ERROR_NOT_FOUND] = { "not_found", 404, CONNECT_NOT_FOUND },
        [ERROR_SANDBOX_NOT_FOUND] = { "sandbox_not_found", 404, CONNECT_NOT_FOUND },
        [ERROR_TEMPLATE_NOT_FOUND] = { "template_not_found", 404, CONNECT_NOT_FOUND },
        [ERROR_CHECKPOINT_NOT_FOUND] = { "checkpoint_not_found", 404, CONNECT_NOT_FOUND },
        [ERROR_OPERATION_NOT_FOUND] = { "operation_not_found", 404, CONNECT_NOT_FOUND },
        [ERROR_PROCESS_NOT_FOUND] = { "process_not_found", 404, CONNECT_NOT_FOUND },
        [ERROR_SESSION_NOT_FOUND] = { "session_not_found", 404, CONNECT_NOT_FOUND },
        [ERROR_KEY_NOT_FOUND] = { "key_not_found", 404, CONNECT_NOT_FOUND },
        [ERROR_COMMAND_NOT_FOUND] = { "command_not_found", 404, CONNECT_NOT_FOUND, CONNECT_INVALID_ARGUMENT },
        [ERROR_EGRESS_PROFILE_NOT_FOUND] = { "egress_profile_not_found", 404, CONNECT_NOT_FOUND },
        [ERROR_FORWARD_NOT_FOUND] = { "forward_not_found", 404, CONNECT_NOT_FOUND },
        [ERROR_SECRET_NOT_FOUND] = { "secret_not_found", 404, CONNECT_NOT_FOUND },
        [ERROR_VOLUME_NOT_FOUND] = { "volume_not_found", 404, CONNECT_NOT_FOUND },
        [ERROR_METHOD_NOT_ALLOWED] = { "method_not_allowed", 405, CONNECT_UNIMPLEMENTED },
        [ERROR_AMBIGUOUS_REFERENCE] = { "ambiguous_reference", 409, CONNECT_ALREADY_EXISTS },
        [ERROR_NAME_IN_USE] = { "name_in_use", 409, CONNECT_ALREADY_EXISTS },
        [ERROR_INVALID_STATE] = { "invalid_state", 409, CONNECT_ALREADY_EXISTS },
        [ERROR_SANDBOX_BUSY] = { "sandbox_busy", 409, CONNECT_ALREADY_EXISTS },
        [ERROR_SANDBOX_NOT_RUNNING] = { "sandbox_not_running", 409, CONNECT_ALREADY_EXISTS },
        [ERROR_SANDBOX_GONE] = { "sandbox_gone", 409, CONNECT_ALREADY_EXISTS },
        [ERROR_CHECKPOINT_BUSY] = { "checkpoint_busy", 409, CONNECT_ALREADY_EXISTS },
        [ERROR_TEMPLATE_IN_USE] = { "template_in_use", 409, CONNECT_ALREADY_EXISTS },
        [ERROR_VOLUME_IN_USE] = { "volume_in_use", 409, CONNECT_FAILED_PRECONDITION },
        [ERROR_HOST_MISMATCH] = { "host_mismatch", 409, CONNECT_ALREADY_EXISTS, CONNECT_FAILED_PRECONDITION },
        [ERROR_PROCESS_NOT_RUNNING] = { "process_not_running", 409, CONNECT_ALREADY_EXISTS },
        [ERROR_STDIN_CLOSED] = { "stdin_closed", 409, CONNECT_ALREADY_EXISTS, CONNECT_FAILED_PRECONDITION },
        [ERROR_NOT_A_TTY] = { "not_a_tty", 409, CONNECT_ALREADY_EXISTS, CONNECT_FAILED_PRECONDITION },
        [ERROR_EXISTS] = { "exists", 409, CONNECT_ALREADY_EXISTS },
        [ERROR_NOT_EMPTY] = { "not_empty", 409, CONNECT_ALREADY_EXISTS },
        [ERROR_PORT_IN_USE] = { "port_in_use", 409, CONNECT_ALREADY_EXISTS },
        [ERROR_PAYLOAD_TOO_LARGE] = { "payload_too_large", 413, CONNECT_RESOURCE_EXHAUSTED },
        [ERROR_LIMIT_EXCEEDED] = { "limit_exceeded", 413, CONNECT_RESOURCE_EXHAUSTED },
        [ERROR_INTERNAL] = { "internal", 500, CONNECT_INTERNAL },
        [ERROR_IO_ERROR] = { "io_error", 500, CONNECT_INTERNAL },
        [ERROR_CREATE_FAILED] = { "create_failed", 500, CONNECT_INTERNAL },
        [ERROR_FORK_FAILED] = { "fork_failed", 500, CONNECT_INTERNAL },
        [ERROR_OPERATION_FAILED] = { "operation_failed", 500, CONNECT_INTERNAL },
        [ERROR_IMAGE_FAILED] = { "image_failed", 500, CONNECT_INTERNAL },
        [ERROR_EXEC_FAILED] = { "exec_failed", 500, CONNECT_INTERNAL, CONNECT_INVALID_ARGUMENT },
        [ERROR_INTERRUPTED] = { "interrupted", 500, CONNECT_INTERNAL },
        [ERROR_CANCELLED] = { "cancelled", 500, CONNECT_INTERNAL },
        [ERROR_PROCESS_LOST] = { "process_lost", 500, CONNECT_INTERNAL },
        [ERROR_EVENTS_LOST] = { "events_lost", 500, CONNECT_INTERNAL, CONNECT_DATA_LOSS },
        [ERROR_NOT_SUPPORTED] = { "not_supported", 501, CONNECT_UNIMPLEMENTED },
        [ERROR_PROTOCOL_ERROR] = { "protocol_error", 502, CONNECT_UNAVAILABLE },
        [ERROR_SANDBOX_UNAVAILABLE] = { "sandbox_unavailable", 502, CONNECT_UNAVAILABLE },
        [ERROR_PORT_UNREACHABLE] = { "port_unreachable", 502, CONNECT_UNAVAILABLE },
        [ERROR_BAD_GATEWAY] = { "bad_gateway", 502, CONNECT_UNAVAILABLE },
        [ERROR_DEADLINE_EXCEEDED] = { "deadline_exceeded", 504, CONNECT_DEADLINE_EXCEEDED },
        [ERROR_CHANNEL_LOST] = { "channel_lost", 503, CONNECT_UNAVAILABLE },
        [ERROR_TOO_MANY_TRANSFERS] = { "too_many_transfers", 503, CONNECT_UNAVAILABLE },
        [ERROR_TOO_MANY_PROCESSES] = { "too_many_processes", 503, CONNECT_UNAVAILABLE },
        [ERROR_TOO_MANY_STREAMS] = { "too_many_streams", 503, CONNECT_UNAVAILABLE },
        [ERROR_RESOURCE_EXHAUSTED] = { "resource_exhausted", 429, CONNECT_RESOURCE_EXHAUSTED },
        [ERROR_INSUFFICIENT_MEMORY] = { "insufficient_memory", 507, CONNECT_RESOURCE_EXHAUSTED },
        [ERROR_NO_SPACE] = { "no_space", 507, CONNECT_RESOURCE_EXHAUSTED },
        [ERROR_QUOTA_EXCEEDED] = { "quota_exceeded", 507, CONNECT_RESOURCE_EXHAUSTED },
};

static const struct {
        const char *name;
        unsigned status;
} connect_table[_CONNECT_CODE_MAX] = {
        [CONNECT_OK] = { NULL, 200 },
        [CONNECT_CANCELED] = { "canceled", 499 },
        [CONNECT_UNKNOWN] = { "unknown", 500 },
        [CONNECT_INVALID_ARGUMENT] = { "invalid_argument", 400 },
        [CONNECT_DEADLINE_EXCEEDED] = { "deadline_exceeded", 504 },
        [CONNECT_NOT_FOUND] = { "not_found", 404 },
        [CONNECT_ALREADY_EXISTS] = { "already_exists", 409 },
        [CONNECT_PERMISSION_DENIED] = { "permission_denied", 403 },
        [CONNECT_RESOURCE_EXHAUSTED] = { "resource_exhausted", 429 },
        [CONNECT_FAILED_PRECONDITION] = { "failed_precondition", 412 },
        [CONNECT_ABORTED] = { "aborted", 409 },
        [CONNECT_OUT_OF_RANGE] = { "out_of_range", 400 },
        [CONNECT_UNIMPLEMENTED] = { "unimplemented", 501 },
        [CONNECT_INTERNAL] = { "internal", 500 },
        [CONNECT_UNAVAILABLE] = { "unavailable", 503 },
        [CONNECT_DATA_LOSS] = { "data_loss", 500 },
        [CONNECT_UNAUTHENTICATED] = { "unauthenticated", 401 },
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

ErrorCode error_code_from_name(const char *s) {
        ErrorCode c;

        return error_code_from_string(s, &c) < 0 ? ERROR_NONE : c;
}

unsigned error_code_http_status(ErrorCode c) {
        if ((unsigned) c >= _ERROR_CODE_MAX)
                return 500;
        return error_table[c].status;
}

ConnectCode error_code_connect(ErrorCode c) {
        if ((unsigned) c >= _ERROR_CODE_MAX)
                return CONNECT_INTERNAL;
        return error_table[c].connect;
}

ConnectCode error_code_envd_connect(ErrorCode c) {
        if ((unsigned) c >= _ERROR_CODE_MAX)
                return CONNECT_INTERNAL;
        return error_table[c].envd ?: error_table[c].connect;
}

const char *connect_code_to_string(ConnectCode c) {
        if ((unsigned) c >= _CONNECT_CODE_MAX)
                c = CONNECT_INTERNAL;
        return connect_table[c].name;
}

unsigned connect_code_status(ConnectCode c) {
        if ((unsigned) c >= _CONNECT_CODE_MAX)
                return 500;
        return connect_table[c].status;
}
