/* SPDX-License-Identifier: Apache-2.0 */

/* The error model (spaced/core/error.c): every code has a unique, stable name that reads back to it and one
 * HTTP status, and the statuses that clients depend on are the ones below. A code added without a row in the
 * table, or a row with no name, fails here (checkpoint_busy once came back as 500 that way). */

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
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
