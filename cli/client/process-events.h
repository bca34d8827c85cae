/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What exec and attach both take from a process's event stream: its output, base64 in stdout/stderr
 * events, and how it ended, from process_exited or error events. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ProcessOutcome {
        bool exited, timed_out;
        int exit_code, exit_signal;
        char *error_code, *error_message;
} ProcessOutcome;

void process_outcome_done(ProcessOutcome *o);
/* Takes process_exited and error events: 1 when it took the event, 0 for any other event, -EBADMSG (logged)
 * when the event is malformed. */
int process_outcome_event(ProcessOutcome *o, const char *event, const char *data, size_t len);
/* spacectl's exit status for a process that exited or an error event; -1 when there was neither. Says on
 * stderr why, when the status is spacectl's (a timeout, an error), not the command's. */
int process_outcome_status(const ProcessOutcome *o);

typedef struct OutputDecoder {
        uint8_t *buf;
        size_t size;
} OutputDecoder;

void output_decoder_done(OutputDecoder *d);
/* Decodes one output event's base64 into d's buffer: *ret_data stays valid until the next call. -EBADMSG
 * (logged) for data that is not base64. */
int output_decode(OutputDecoder *d, const char *data, size_t len, const uint8_t **ret_data, size_t *ret_len);

/* The event's data as a JSON object, or NULL after logging that it is malformed. */
struct cJSON *event_json(const char *event, const char *data, size_t len);
