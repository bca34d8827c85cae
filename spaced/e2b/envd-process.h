/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the files of envd's process.Process service share: the Connect event stream of a process (Start and
 * Connect), the answers of streaming calls, and how a request names a process. */

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "channel/process.h"
#include "e2b/e2b-internal.h"

#define ENVD_TAG_MAX 256

static inline void cjson_deletep(cJSON **o) {
        cJSON_Delete(*o);
}
/* Decoded input of one SendInput or StreamInput message: within the body limit, so at most this much. */
#define ENVD_INPUT_MAX (HTTP_BODY_MAX / 4 * 3)

typedef struct EnvdStreamSpec {
        bool from_start;      /* Start: the process's own started event opens the stream; it ends with
                               * deadline_exceeded when the process is killed for its timeout */
        uint64_t after_id;    /* Connect: events after this one (live output only) */
        unsigned keepalive_sec; /* 0: no keepalive events */
        uint64_t deadline_ms; /* the stream ends then with deadline_exceeded (Start: the process is killed, Connect:
                               * it runs on); 0: never */
} EnvdStreamSpec;

/* Answers r with p's events as a stream of Connect envelopes: start{pid}, data{stdout|stderr|pty}, keepalive,
 * end{exitCode, exited, status, error?}, then the end-of-stream envelope. */
int envd_stream_attach(Request *r, Process *p, const EnvdStreamSpec *spec);

/* A streaming call's failure: HTTP 200, then only the end-of-stream envelope with the error (with a non-200
 * status the JS SDK ignores the body and guesses the code from the status). It and envd_unary_error() name the
 * code as envd does (error_code_envd_connect(): invalid_argument for a process that cannot be started,
 * unauthenticated for an unknown user, failed_precondition for stdin or a terminal that is not there). */
int envd_stream_error(Request *r, ErrorCode code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A client-streaming call's success: HTTP 200, the empty response message, then the end of the stream. */
int envd_stream_ok(Request *r);
/* A unary call's failure with the status envd gives it (not always the one Connect gives the code). */
int envd_unary_error(Request *r, ErrorCode code, unsigned status, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* The process a ProcessSelector {pid} or {tag} names, among the sandbox's running ones. Returns 1 with *ret,
 * 0 when there is none (*ret_what says which, for the message), -EINVAL when the selector is malformed. */
int envd_selector_find(Sandbox *s, const cJSON *selector, Process **ret, char *ret_what, size_t what_size);

/* A protobuf JSON bytes field: standard or URL-safe base64, padded or not, at most max decoded bytes, into a
 * new buffer. -EINVAL when it is not base64, -E2BIG when it is longer. */
int envd_base64_field(const cJSON *v, size_t max, uint8_t **ret, size_t *ret_size);

/* A unary call's message and the running process its "process" selector names; answers (not_found,
 * invalid_argument, the sandbox's errors) and returns NULL when there is none. */
Process *envd_unary_process(Request *r, cJSON **ret_message);

/* envd-process-input.c */
void envd_process_send_input(Request *r, const RouteArgs *a);
void envd_process_close_stdin(Request *r, const RouteArgs *a);
void envd_process_stream_input_begin(Request *r, const RouteArgs *a);
void envd_process_stream_input(Request *r, const RouteArgs *a);
