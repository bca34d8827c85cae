/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "e2b/e2b-parse.h"
#include "e2b/envd-process.h"
#include "macro.h"
#include "sandbox/sandbox.h"
#include "string-util.h"

/* Input to a process: SendInput (one message), StreamInput (a client stream of them) and CloseStdin. Input
 * goes to the guest as its stdin credit allows; a request waits for the rest (suspended, woken by the credit),
 * so that a large input neither piles up in memory nor is cut. */

/* Decoded input on its way to the process pid of a sandbox; the process is looked up again for every piece
 * (it may end meanwhile). */
typedef struct InputQueue {
        Manager *manager;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        int pid;
        uint8_t *data;
        size_t size, off;
        Process *waiting;             /* set only while waiting for stdin credit */
        ChannelWaiter waiter;
        ErrorCode error_code;         /* of a failure (ERROR_NONE: none); error_message says why */
        char error_message[160];
} InputQueue;

static void queue_unwait(InputQueue *q) {
        if (q->waiting)
                process_stdin_unwait(TAKE_PTR(q->waiting), &q->waiter);
}

static void queue_done(InputQueue *q) {
        queue_unwait(q);
        free(q->data);
        q->data = NULL;
        q->size = q->off = 0;
}

static int queue_fail(InputQueue *q, ErrorCode code, const char *message) {
        q->error_code = code;
        snprintf(q->error_message, sizeof q->error_message, "%s", message);
        free(q->data);
        q->data = NULL;
        q->size = q->off = 0;
        return -EIO;
}

/* What the queue holds goes to the process: 1 when all of it went, 0 when r is suspended until there is
 * credit again, < 0 when it cannot go (error_* set). */
static int queue_flush(InputQueue *q, Request *r) {
        Sandbox *s;
        Process *p;
        ssize_t k;

        queue_unwait(q);
        if (q->off >= q->size) {
                queue_done(q);
                return 1;
        }
        s = sandbox_find_by_id(q->manager, q->sandbox_id);
        p = s ? process_find_by_pid(s, q->pid) : NULL;
        if (!p)
                return queue_fail(q, ERROR_PROCESS_NOT_FOUND, "the process ended");
        if (p->stdin_closed)
                return queue_fail(q, ERROR_STDIN_CLOSED,
                                  "the process's stdin is closed, or it was started without stdin");
        k = process_write_stdin(p, (const char *) q->data + q->off, q->size - q->off, &q->waiter);
        if (k < 0)
                return queue_fail(q, ERROR_PROCESS_NOT_FOUND, "the process ended");
        q->off += (size_t) k;
        if (q->off < q->size) {
                q->waiting = p;
                http_suspend(r);
                return 0;
        }
        queue_done(q);
        return 1;
}

/* input {stdin | pty}: both go to the process's input (its pipe, or its terminal). */
int envd_input_decode(const cJSON *input, uint8_t **ret, size_t *ret_size) {
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(input, "stdin"),
                    *pty = cJSON_GetObjectItemCaseSensitive(input, "pty");

        if (!cJSON_IsObject(input) || (in && pty))
                return -EINVAL;
        return envd_base64_field(in ?: pty, ENVD_INPUT_MAX, ret, ret_size);
}

/* ---- SendInput */

static void send_input_detach(void *userdata, Request *r) {
        InputQueue *q = userdata;

        queue_done(q);
        free(q);
}

static int send_input_prepare(Request *r, InputQueue **ret) {
        _cleanup_(cjson_deletep) cJSON *o = NULL;
        _cleanup_free_ uint8_t *data = NULL;
        InputQueue *q;
        size_t n;
        Process *p = envd_unary_process(r, &o);
        int k;

        if (!p)
                return -ENOENT;
        k = envd_input_decode(cJSON_GetObjectItemCaseSensitive(o, "input"), &data, &n);
        if (k < 0) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                   "input must be {\"stdin\": BASE64} or {\"pty\": BASE64} of at most %d bytes",
                                   ENVD_INPUT_MAX);
                return k;
        }
        if (p->stdin_closed)
                return envd_unary_error(r, ERROR_STDIN_CLOSED, 400,
                                        "stdin of process %d is closed, or it was started without stdin", p->pid)
                               ?: -EPIPE;
        q = calloc(1, sizeof *q);
        if (!q)
                return -ENOMEM;
        q->manager = http_manager(r->http);
        memcpy(q->sandbox_id, p->sandbox_id, sizeof q->sandbox_id);
        q->pid = p->pid;
        q->data = TAKE_PTR(data);
        q->size = n;
        q->waiter = api_request_waiter(r);
        r->stream = (HttpStream) { .detach = send_input_detach, .userdata = q };
        *ret = q;
        return 0;
}

/* Writes what is left of the input while credit lasts, then answers; parked on itself until credit comes
 * back (the queue is the request's stream). */
static void send_input_flush(Request *r, void *userdata) {
        InputQueue *q = userdata;
        int k = queue_flush(q, r);

        if (k == 0) {
                http_continue(r, send_input_flush, q);
                return;
        }
        if (k < 0)
                envd_unary_error(r, q->error_code,
                                 error_code_envd_connect(q->error_code) == CONNECT_NOT_FOUND ? 404 : 400, "%s",
                                 q->error_message);
        else
                connect_respond(r, NULL);
}

void envd_process_send_input(Request *r, const RouteArgs *a) {
        InputQueue *q = NULL;

        if (send_input_prepare(r, &q) < 0) {
                if (!r->responded)
                        http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return;
        }
        send_input_flush(r, q);
}

/* ---- CloseStdin */

void envd_process_close_stdin(Request *r, const RouteArgs *a) {
        _cleanup_(cjson_deletep) cJSON *o = NULL;
        Process *p = envd_unary_process(r, &o);

        if (!p)
                return;
        /* as envd: a terminal has no stdin to close (send ^D); one without stdin is fine */
        if (p->pty) {
                envd_unary_error(r, ERROR_STDIN_CLOSED, 400,
                                 "process %d has a terminal: send Ctrl+D (0x04) instead of closing stdin", p->pid);
                return;
        }
        if (process_close_stdin(p) < 0) {
                http_respond_error(r, ERROR_INTERNAL, "cannot close stdin of process %d", p->pid);
                return;
        }
        connect_respond(r, NULL);
}

/* ---- StreamInput: the body is a sequence of envelopes, taken as they come */

typedef struct InputStream {
        InputQueue queue;
        bool started;                 /* the start message named the process */
        ConnectEnvelopeReader reader;
} InputStream;

static int stream_message(InputStream *is, const char *json, size_t n) {
        _cleanup_(cjson_deletep) cJSON *o = cJSON_ParseWithLength(json, n);
        const cJSON *start = cJSON_GetObjectItemCaseSensitive(o, "start"),
                    *data = cJSON_GetObjectItemCaseSensitive(o, "data");
        InputQueue *q = &is->queue;
        char what[96];
        Process *p;
        Sandbox *s;
        int k;

        if (!cJSON_IsObject(o))
                return queue_fail(q, ERROR_INVALID_ARGUMENT, "a message is not a JSON object");
        if (start) {
                s = sandbox_find_by_id(q->manager, q->sandbox_id);
                k = s ? envd_selector_find(s, cJSON_GetObjectItemCaseSensitive(start, "process"), &p, what,
                                           sizeof what)
                      : 0;
                if (k < 0)
                        return queue_fail(q, ERROR_INVALID_ARGUMENT, "start.process must be {\"pid\": N} or {\"tag\": \"...\"}");
                if (k == 0)
                        return queue_fail(q, ERROR_PROCESS_NOT_FOUND, "the process is not running");
                q->pid = p->pid;
                is->started = true;
                return 0;
        }
        if (data) {
                if (!is->started)
                        return queue_fail(q, ERROR_INVALID_ARGUMENT, "the first message must be start");
                k = envd_input_decode(cJSON_GetObjectItemCaseSensitive(data, "input"), &q->data, &q->size);
                if (k < 0)
                        return queue_fail(q, ERROR_INVALID_ARGUMENT,
                                          "data.input must be {\"stdin\": BASE64} or {\"pty\": BASE64}");
                q->off = 0;
                return 0;
        }
        if (cJSON_GetObjectItemCaseSensitive(o, "keepalive"))
                return 0;
        return queue_fail(q, ERROR_NOT_SUPPORTED, "a message must be start, data or keepalive");
}

/* Takes what it can of data: envelopes are parsed as they complete, input waits for credit. */
static size_t stream_write(void *userdata, Request *r, const char *data, size_t n) {
        InputStream *is = userdata;
        size_t used = 0;
        int k;

        k = queue_flush(&is->queue, r);
        if (k == 0)
                return 0;
        if (k < 0)
                goto fail;
        while (used < n) {
                const char *message;
                ErrorCode code;
                size_t took;

                k = connect_envelope_read(&is->reader, (const uint8_t *) data + used, n - used, &took, &code,
                                          &message);
                used += took;
                if (k < 0) {
                        queue_fail(&is->queue, code, message);
                        goto fail;
                }
                if (k == 0)
                        break; /* all of data went into an envelope not complete yet */
                if (stream_message(is, (const char *) is->reader.msg.data, is->reader.msg.len) < 0)
                        goto fail;
                k = queue_flush(&is->queue, r);
                if (k == 0)
                        return used; /* the rest comes again once the process took this */
                if (k < 0)
                        goto fail;
        }
        return used;

fail:
        r->upload_failed = true;
        return n;
}

static void stream_detach(void *userdata, Request *r) {
        InputStream *is = userdata;

        queue_done(&is->queue);
        connect_envelope_reader_done(&is->reader);
        free(is);
}

void envd_process_stream_input_begin(Request *r, const RouteArgs *a) {
        InputStream *is;
        Sandbox *s;

        /* answered: a suspended sandbox was woken before this, by the route's ready (e2b_envd_ready) */
        if (e2b_envd_sandbox(r, &s) <= 0)
                return;
        is = calloc(1, sizeof *is);
        if (!is) {
                r->upload_failed = true;
                return;
        }
        is->queue.manager = http_manager(r->http);
        memcpy(is->queue.sandbox_id, s->id, sizeof is->queue.sandbox_id);
        is->queue.waiter = api_request_waiter(r);
        r->upload = (HttpUpload) { .write = stream_write, .detach = stream_detach, .userdata = is };
}

void envd_process_stream_input(Request *r, const RouteArgs *a) {
        InputStream *is = r->upload.write == stream_write ? r->upload.userdata : NULL;

        if (r->responded)
                return;
        /* the last input may still wait for credit */
        if (is && is->queue.error_code == ERROR_NONE && queue_flush(&is->queue, r) == 0)
                return;
        if (!is)
                envd_stream_error(r, ERROR_SANDBOX_UNAVAILABLE, "the sandbox was not running when the stream began; try again");
        else if (is->queue.error_code != ERROR_NONE)
                envd_stream_error(r, is->queue.error_code, "%s", is->queue.error_message);
        else if (connect_envelope_reader_inside(&is->reader))
                envd_stream_error(r, ERROR_INVALID_ARGUMENT, "the body ended inside an envelope");
        else
                envd_stream_ok(r);
}
