/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The codes of the error model (ARCHITECTURE.md, "Errors"), shared by spaced and spacectl: every failure a user
 * can see has a stable code from this enum, and one table (error-code.c) gives each its name on each wire:
 *   - the native API's {"code": "name"} (error_code_to_string()),
 *   - the HTTP status, which E2B's control plane and envd REST send as their numeric "code" too,
 *   - the Connect code of E2B's envd Connect routes (error_code_connect(); its status: connect_code_status()),
 *   - E2B envd's own Connect code for a process that failed, where it differs (error_code_envd_connect()).
 * The names are API: never rename one. */

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
        ERROR_SECRET_NOT_FOUND,      /* no secret with that name or id */
        ERROR_VOLUME_NOT_FOUND,      /* no volume with that name or id */
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
        ERROR_VOLUME_IN_USE,         /* a volume that sandboxes mount cannot be removed */
        ERROR_HOST_MISMATCH,         /* a checkpoint or suspended state made under another QEMU, accelerator or CPU */
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
        ERROR_QUOTA_EXCEEDED,        /* a write would take a volume past its quota */
        _ERROR_CODE_MAX,
} ErrorCode;

/* Connect RPC's codes (the names E2B's envd Connect protocol sends), each with the HTTP status a unary answer
 * gets. */
typedef enum ConnectCode {
        CONNECT_OK,                  /* no error: no code on the wire */
        CONNECT_CANCELED,
        CONNECT_UNKNOWN,
        CONNECT_INVALID_ARGUMENT,
        CONNECT_DEADLINE_EXCEEDED,
        CONNECT_NOT_FOUND,
        CONNECT_ALREADY_EXISTS,
        CONNECT_PERMISSION_DENIED,
        CONNECT_RESOURCE_EXHAUSTED,
        CONNECT_FAILED_PRECONDITION,
        CONNECT_ABORTED,
        CONNECT_OUT_OF_RANGE,
        CONNECT_UNIMPLEMENTED,
        CONNECT_INTERNAL,
        CONNECT_UNAVAILABLE,
        CONNECT_DATA_LOSS,
        CONNECT_UNAUTHENTICATED,
        _CONNECT_CODE_MAX,
} ConnectCode;

const char *error_code_to_string(ErrorCode c);
/* -EINVAL for a string that is no code: what comes from outside (the guest, an old row, a server's answer) is
 * checked here. */
int error_code_from_string(const char *s, ErrorCode *ret);
/* The same for a client that tells only some codes apart: ERROR_NONE for NULL or a name that is none of ours
 * (a newer daemon's). */
ErrorCode error_code_from_name(const char *s);
unsigned error_code_http_status(ErrorCode c);
ConnectCode error_code_connect(ErrorCode c);
ConnectCode error_code_envd_connect(ErrorCode c);

const char *connect_code_to_string(ConnectCode c);   /* NULL for CONNECT_OK */
unsigned connect_code_status(ConnectCode c);
