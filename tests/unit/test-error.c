/* SPDX-License-Identifier: Apache-2.0 */

/* The error model (lib/error-code.c, spaced/core/error.c): every code has a unique, stable name that reads back
 * to it, one HTTP status and a Connect code (and envd's where it differs), and the names and statuses that
 * clients depend on are the ones below. A code added without a row in the table, or a row with no name, fails
 * here (checkpoint_busy once came back as 500 that way). */

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "egress/egress.h"
#include "macro.h"
#include "proto.h"
#include "tap.h"

static bool snake_case(const char *s) {
        if (!s || !*s || !islower((unsigned char) s[0]))
                return false;
        for (; *s; s++)
                if (!islower((unsigned char) *s) && *s != '_')
                        return false;
        return true;
}

int main(void) {
        static const struct {
                const char *name;
                unsigned status;
        } expected[] = {
                { "invalid_argument", 400 },     { "invalid_ref", 400 },          { "disk_too_small", 400 },
                { "invalid_source", 400 },       { "unauthorized", 401 },         { "invalid_token", 401 },
                { "permission_denied", 403 },    { "sandbox_not_found", 404 },    { "template_not_found", 404 },
                { "checkpoint_not_found", 404 }, { "operation_not_found", 404 },  { "process_not_found", 404 },
                { "method_not_allowed", 405 },   { "ambiguous_reference", 409 },  { "name_in_use", 409 },
                { "sandbox_busy", 409 },         { "sandbox_not_running", 409 },  { "checkpoint_busy", 409 },
                { "template_in_use", 409 },      { "invalid_state", 409 },        { "payload_too_large", 413 },
                { "limit_exceeded", 413 },
                { "internal", 500 },             { "protocol_error", 502 },       { "channel_lost", 503 },
                { "too_many_transfers", 503 },   { "insufficient_memory", 507 },  { "no_space", 507 },
                { "too_many_processes", 503 },   { "too_many_streams", 503 },     { "resource_exhausted", 429 },
                { "invalid_host", 421 },         { "egress_profile_not_found", 404 },
        };
        /* what E2B's SDKs see on the Connect routes, in general and from envd's process calls */
        static const struct {
                const char *name;
                const char *connect;
                unsigned connect_status;
                const char *envd;
        } connect[] = {
                { "invalid_argument", "invalid_argument", 400, "invalid_argument" },
                { "unauthorized", "unauthenticated", 401, "unauthenticated" },
                { "permission_denied", "permission_denied", 403, "invalid_argument" },
                { "invalid_host", "permission_denied", 403, "permission_denied" },
                { "sandbox_not_found", "not_found", 404, "not_found" },
                { "process_not_found", "not_found", 404, "not_found" },
                { "command_not_found", "not_found", 404, "invalid_argument" },
                { "method_not_allowed", "unimplemented", 501, "unimplemented" },
                { "sandbox_not_running", "already_exists", 409, "already_exists" },
                { "not_a_tty", "already_exists", 409, "failed_precondition" },
                { "stdin_closed", "already_exists", 409, "failed_precondition" },
                { "payload_too_large", "resource_exhausted", 429, "resource_exhausted" },
                { "resource_exhausted", "resource_exhausted", 429, "resource_exhausted" },
                { "no_space", "resource_exhausted", 429, "resource_exhausted" },
                { "internal", "internal", 500, "internal" },
                { "exec_failed", "internal", 500, "invalid_argument" },
                { "invalid_cwd", "invalid_argument", 400, "invalid_argument" },
                { "unknown_user", "invalid_argument", 400, "unauthenticated" },
                { "events_lost", "internal", 500, "data_loss" },
                { "not_supported", "unimplemented", 501, "unimplemented" },
                { "sandbox_unavailable", "unavailable", 503, "unavailable" },
                { "channel_lost", "unavailable", 503, "unavailable" },
                { "deadline_exceeded", "deadline_exceeded", 504, "deadline_exceeded" },
        };
        Error e = {};
        ErrorCode c;

        plan(0);
        for (unsigned i = 1; i < _ERROR_CODE_MAX; i++) {
                const char *name = error_code_to_string((ErrorCode) i);
                unsigned status = error_code_http_status((ErrorCode) i);
                bool unique = true;

                for (unsigned j = 1; j < i; j++)
                        if (strcmp(error_code_to_string((ErrorCode) j), name) == 0)
                                unique = false;
                ok(snake_case(name) && unique, "code %u has a unique snake_case name (%s)", i, name ?: "(none)");
                ok(error_code_from_string(name, &c) == 0 && c == (ErrorCode) i, "%s reads back to itself", name);
                ok(status >= 400 && status <= 599, "%s has an error status (%u)", name, status);
                ok(error_code_connect((ErrorCode) i) != CONNECT_OK &&
                   error_code_envd_connect((ErrorCode) i) != CONNECT_OK,
                   "%s has a Connect code (%s) and an envd one (%s)", name,
                   connect_code_to_string(error_code_connect((ErrorCode) i)) ?: "(none)",
                   connect_code_to_string(error_code_envd_connect((ErrorCode) i)) ?: "(none)");
        }
        for (unsigned i = 1; i < _CONNECT_CODE_MAX; i++) {
                const char *name = connect_code_to_string((ConnectCode) i);
                unsigned status = connect_code_status((ConnectCode) i);
                bool unique = true;

                for (unsigned j = 1; j < i; j++)
                        if (strcmp(connect_code_to_string((ConnectCode) j), name) == 0)
                                unique = false;
                ok(snake_case(name) && unique, "Connect code %u has a unique snake_case name (%s)", i,
                   name ?: "(none)");
                ok(status >= 400 && status <= 599, "Connect's %s has an error status (%u)", name, status);
        }
        ok(!connect_code_to_string(CONNECT_OK), "CONNECT_OK has no name: no error goes on the wire");
        for (size_t i = 0; i < sizeof connect / sizeof connect[0]; i++) {
                int r = error_code_from_string(connect[i].name, &c);
                ConnectCode k = r == 0 ? error_code_connect(c) : CONNECT_OK;
                ConnectCode v = r == 0 ? error_code_envd_connect(c) : CONNECT_OK;

                ok(r == 0 && streq_ptr(connect_code_to_string(k), connect[i].connect) &&
                   connect_code_status(k) == connect[i].connect_status &&
                   streq_ptr(connect_code_to_string(v), connect[i].envd),
                   "%s is Connect's %s (%u), envd's %s", connect[i].name, connect[i].connect,
                   connect[i].connect_status, connect[i].envd);
        }
        for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
                int r = error_code_from_string(expected[i].name, &c);
                ok(r == 0 && error_code_http_status(c) == expected[i].status, "%s answers %u", expected[i].name,
                   expected[i].status);
        }
        ok(error_code_from_string("no_such_code", &c) == -EINVAL, "an unknown name is refused");
        ok(error_code_from_string(NULL, &c) == -EINVAL, "NULL is refused");
        ok(error_code_http_status(_ERROR_CODE_MAX) == 500, "an out-of-range code answers 500");
        ok(strcmp(error_code_to_string((ErrorCode) 9999), "internal") == 0, "an out-of-range code reads as internal");
        ok(error_code_connect(_ERROR_CODE_MAX) == CONNECT_INTERNAL &&
           error_code_envd_connect(_ERROR_CODE_MAX) == CONNECT_INTERNAL, "an out-of-range code is Connect's internal");
        ok(strcmp(connect_code_to_string(_CONNECT_CODE_MAX), "internal") == 0 &&
           connect_code_status(_CONNECT_CODE_MAX) == 500, "an out-of-range Connect code reads as internal, 500");

        /* the channel's codes (lib/proto.h) and the egress reasons: unique names that read back, the old ones
         * unchanged (the agent and the audit log's readers know them) */
        for (unsigned i = 0; i < _SPACE_CODE_MAX; i++) {
                const char *name = space_code_to_string((SpaceCode) i);
                SpaceCode k;
                bool unique = true;

                for (unsigned j = 0; j < i; j++)
                        if (strcmp(space_code_to_string((SpaceCode) j), name) == 0)
                                unique = false;
                ok(snake_case(name) && unique && space_code_from_string(name, &k) == 0 && k == (SpaceCode) i,
                   "channel code %u has a unique name that reads back (%s)", i, name ?: "(none)");
        }
        ok(space_code_from_string("no_such_code", &(SpaceCode) { 0 }) == -EINVAL &&
           space_code_from_string(NULL, &(SpaceCode) { 0 }) == -EINVAL && !space_code_to_string(_SPACE_CODE_MAX),
           "an unknown channel code is refused");
        ok(strcmp(space_code_to_string(SPACE_CODE_UNKNOWN_USER), "unknown_user") == 0 &&
           strcmp(space_code_to_string(SPACE_CODE_TOO_MANY_ENTRIES), "too_many_entries") == 0 &&
           strcmp(space_code_to_string(SPACE_CODE_NXDOMAIN), "nxdomain") == 0, "channel codes keep their names");
        for (unsigned i = 0; i < _EGRESS_REASON_MAX; i++) {
                const char *name = egress_reason_to_string((EgressReason) i);
                bool unique = true;

                for (unsigned j = 0; j < i; j++)
                        if (strcmp(egress_reason_to_string((EgressReason) j), name) == 0)
                                unique = false;
                ok(snake_case(name) && unique && space_code_to_string(egress_reason_code((EgressReason) i)),
                   "egress reason %u has a unique name (%s) and tells the guest %s", i, name,
                   space_code_to_string(egress_reason_code((EgressReason) i)) ?: "(nothing)");
        }
        ok(strcmp(egress_reason_to_string(EGRESS_REASON_PROTECTED), "protected_address") == 0 &&
           strcmp(egress_reason_to_string(EGRESS_REASON_SELF), "daemon_api") == 0 &&
           strcmp(egress_reason_to_string(EGRESS_REASON_RATE_LIMITED), "rate_limited") == 0 &&
           egress_reason_code(EGRESS_REASON_INVALID) == SPACE_CODE_INVALID &&
           egress_reason_code(EGRESS_REASON_BUSY) == SPACE_CODE_BUSY, "egress reasons keep their names and codes");

        ok(error_set(&e, ERROR_CHECKPOINT_BUSY, "checkpoint %s is being taken", "cp-1") == 0 &&
           e.code == ERROR_CHECKPOINT_BUSY && strcmp(error_message(&e), "checkpoint cp-1 is being taken") == 0,
           "error_set fills code and message");
        ok(error_set(&e, ERROR_INTERNAL, "second") == 0 && e.code == ERROR_INTERNAL &&
           strcmp(e.message, "second") == 0, "error_set replaces what the error held");
        ok(error_set(NULL, ERROR_INTERNAL, "x") == 0, "error_set takes a NULL error");
        error_done(&e);
        ok(e.code == ERROR_NONE && !e.message, "error_done empties it");
        e.code = ERROR_NO_SPACE;
        ok(strcmp(error_message(&e), "no_space") == 0, "without a message, the code is the message");
        return done();
}
