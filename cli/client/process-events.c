/* SPDX-License-Identifier: Apache-2.0 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "macro.h"
#include "cli.h"
#include "client/process-events.h"

cJSON *event_json(const char *event, const char *data, size_t len) {
        cJSON *j = cJSON_ParseWithLength(data, len);

        if (!cJSON_IsObject(j)) {
                cJSON_Delete(j);
                log_error("spaced sent a malformed '%s' event", event);
                return NULL;
        }
        return j;
}

void process_outcome_done(ProcessOutcome *o) {
        free(o->error_code);
        free(o->error_message);
        *o = (ProcessOutcome) {};
}

int process_outcome_event(ProcessOutcome *o, const char *event, const char *data, size_t len) {
        cJSON *j;
        double v;

        if (!streq(event, "process_exited") && !streq(event, "error"))
                return 0;
        j = event_json(event, data, len);
        if (!j)
                return -EBADMSG;
        if (streq(event, "process_exited")) {
                o->exited = true;
                o->exit_code = json_num(j, "exit_code", &v) ? (int) v : 0;
                o->exit_signal = json_num(j, "signal", &v) && v > 0 && v < 128 ? (int) v : 0;
                o->timed_out = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "timed_out"));
        } else {
                free(o->error_code);
                free(o->error_message);
                o->error_code = json_str(j, "code") ? strdup(json_str(j, "code")) : NULL;
                o->error_message = json_str(j, "message") ? strdup(json_str(j, "message")) : NULL;
        }
        cJSON_Delete(j);
        return 1;
}

int process_outcome_status(const ProcessOutcome *o) {
        if (o->exited) {
                /* said once here, so that 124 from a timeout and from the command itself tell apart */
                if (o->timed_out) {
                        log_error("the command ran past --timeout and was killed (exit status %d)", EXIT_TIMEDOUT);
                        return EXIT_TIMEDOUT;
                }
                if (o->exit_signal > 0)
                        return 128 + o->exit_signal;
                return o->exit_code & 0xff;
        }
        if (o->error_code || o->error_message)
                return cli_status_for_error(o->error_code, o->error_message);
        return -1;
}

void output_decoder_done(OutputDecoder *d) {
        free(d->buf);
        *d = (OutputDecoder) {};
}

int output_decode(OutputDecoder *d, const char *data, size_t len, const uint8_t **ret_data, size_t *ret_len) {
        long n;

        if (len / 4 * 3 + 3 > d->size) {
                size_t size = len / 4 * 3 + 3;
                uint8_t *p = realloc(d->buf, size);

                if (!p)
                        return -ENOMEM;
                d->buf = p;
                d->size = size;
        }
        n = base64_decode(data, len, d->buf);
        if (n < 0) {
                log_error("spaced sent output that is not base64");
                return -EBADMSG;
        }
        *ret_data = d->buf;
        *ret_len = (size_t) n;
        return 0;
}
