/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "core/util.h"
#include "e2b/envd-process.h"
#include "macro.h"
#include "string-util.h"

/* A process's events as envd's StartResponse/ConnectResponse stream: a ProcessClient formats each event as a
 * Connect envelope; this adds what envd sends on its own (start on Connect, keepalives, the stream's deadline)
 * between whole events only. */

typedef struct EnvdStream {
        Request *request;             /* NULL once the request ended */
        Process *process;             /* kept alive by the client */
        ProcessClient *client;
        bool pty;                     /* output goes under data.pty */
        bool from_start;
        bool start_sent;              /* start{pid} is out: the process's started event is not sent again */
        bool ended;                   /* the end-of-stream envelope is formatted */
        bool cut;                     /* ours ended it: return the end once `out` is sent */
        bool mid_event;               /* the client handed out part of an event: nothing may come between */
        SpaceBuf out;                 /* envelopes of our own, sent before the client is read again */
        size_t out_off;
        uint64_t keepalive_usec;
        uint64_t last_sent;           /* monotonic usec */
        bool keepalive_due;
        bool deadline_passed;
        sd_event_source *keepalive_source, *deadline_source;
} EnvdStream;

/* ---- envelopes */

static int append_start(SpaceBuf *buf, int pid) {
        char json[64];
        int k = snprintf(json, sizeof json, "{\"event\":{\"start\":{\"pid\":%d}}}", pid);

        return connect_envelope_append(buf, 0, json, (size_t) k);
}

static int append_keepalive(SpaceBuf *buf) {
        static const char json[] = "{\"event\":{\"keepalive\":{}}}";

        return connect_envelope_append(buf, 0, json, sizeof json - 1);
}

/* {"event":{"data":{"KIND":"BASE64"}}}, encoded straight into buf: output frames are not copied on the way. */
static int append_data(SpaceBuf *buf, const char *kind, const uint8_t *data, size_t n) {
        char prefix[48];
        static const char suffix[] = "\"}}}";
        int k = snprintf(prefix, sizeof prefix, "{\"event\":{\"data\":{\"%s\":\"", kind);
        size_t len = (size_t) k + base64_encoded_len(n) + sizeof suffix - 1;
        uint8_t h[CONNECT_ENVELOPE_HEADER] = { 0, (uint8_t) (len >> 24), (uint8_t) (len >> 16), (uint8_t) (len >> 8),
                                               (uint8_t) len };

        /* the output goes straight into the envelope as base64: no copy of it first */
        if (space_buf_append(buf, h, sizeof h) < 0 || space_buf_append(buf, prefix, (size_t) k) < 0 ||
            space_buf_append_base64(buf, data, n) < 0)
                return -ENOMEM;
        return space_buf_append(buf, suffix, sizeof suffix - 1);
}

/* What Go's os.ProcessState.String() says of a signal ("signal: killed"): glibc's description, lower case. */
static void signal_status(int sig, char *buf, size_t size) {
        const char *d = sig > 0 && sig < NSIG ? strsignal(sig) : NULL;
        size_t i;

        if (!d || strncmp(d, "Unknown signal", 14) == 0 || strncmp(d, "Real-time signal", 16) == 0) {
                snprintf(buf, size, "signal: signal %d", sig);
                return;
        }
        snprintf(buf, size, "signal: %s", d);
        for (i = strlen("signal: "); i < size && buf[i]; i++)
                buf[i] = (char) tolower((unsigned char) buf[i]);
}

/* exited {exit_code, signal, timed_out} → end{exitCode, exited, status, error?} and the end of the stream, as
 * Go's cmd.Wait() reports it to envd: error is the status whenever it is not a clean exit 0. */
static int append_exited(EnvdStream *st, SpaceBuf *buf, const char *json, size_t n) {
        _cleanup_(cjson_deletep) cJSON *o = cJSON_ParseWithLength(json, n);
        cJSON *end, *ev, *e, *code = cJSON_GetObjectItemCaseSensitive(o, "exit_code"),
              *sig = cJSON_GetObjectItemCaseSensitive(o, "signal");
        char status[96];
        int q;

        /* envd's request context ends with the deadline: the stream ends so, with no end event */
        if (st->from_start && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "timed_out")))
                return connect_end_stream_append(buf, CONNECT_DEADLINE_EXCEEDED,
                                                 "the process ran past the request's timeout (connect-timeout-ms) "
                                                 "and was killed");
        end = cJSON_CreateObject();
        if (!end)
                return -ENOMEM;
        ev = cJSON_AddObjectToObject(end, "event");
        e = cJSON_AddObjectToObject(ev, "end");
        if (cJSON_IsNumber(sig) && sig->valueint > 0) {
                signal_status(sig->valueint, status, sizeof status);
                cJSON_AddNumberToObject(e, "exitCode", -1);
                cJSON_AddBoolToObject(e, "exited", false);
        } else {
                int c = cJSON_IsNumber(code) ? code->valueint : -1;

                snprintf(status, sizeof status, "exit status %d", c);
                cJSON_AddNumberToObject(e, "exitCode", c);
                cJSON_AddBoolToObject(e, "exited", true);
        }
        cJSON_AddStringToObject(e, "status", status);
        if (!streq(status, "exit status 0"))
                cJSON_AddStringToObject(e, "error", status);
        q = connect_envelope_append_json(buf, 0, end);
        cJSON_Delete(end);
        if (q < 0)
                return q;
        return connect_end_stream_append(buf, CONNECT_OK, NULL);
}

/* error: the process could not start, or was lost; the stream ends with it, with envd's Connect code for the
 * event's code (the lib/error-code.h table). */
static int append_error(SpaceBuf *buf, const ProcessEvent *e) {
        return connect_end_stream_append(buf, error_code_envd_connect(e->code), e->message ?: error_code_to_string(e->code));
}

/* The ProcessClient's formatter. */
static int format_event(void *userdata, SpaceBuf *buf, const ProcessEvent *e) {
        EnvdStream *st = userdata;

        buf->len = 0;
        if (st->ended)
                return 0;
        switch (e->type) {
        case EVENT_STARTED:
                if (st->start_sent)
                        return 0;
                st->start_sent = true;
                return append_start(buf, st->process->pid);
        case EVENT_STDOUT:
        case EVENT_STDERR:
                return st->start_sent ? append_data(buf, st->pty ? "pty" : e->name, e->data, e->n) : 0;
        case EVENT_EXITED:
                st->ended = true;
                return append_exited(st, buf, e->data, e->n);
        case EVENT_ERROR:
                st->ended = true;
                return append_error(buf, e);
        default:
                return 0;
        }
}

/* ---- the HTTP side */

static ssize_t out_take(EnvdStream *st, char *buf, size_t max) {
        size_t k = st->out.len - st->out_off;

        if (k > max)
                k = max;
        memcpy(buf, st->out.data + st->out_off, k);
        st->out_off += k;
        st->last_sent = now_usec_monotonic();
        return (ssize_t) k;
}

static ssize_t stream_read(void *userdata, char *buf, size_t max) {
        EnvdStream *st = userdata;
        ssize_t n;

        for (;;) {
                if (st->out_off < st->out.len)
                        return out_take(st, buf, max);
                st->out.len = st->out_off = 0;
                if (st->cut)
                        return HTTP_STREAM_END;
                if (st->deadline_passed && !st->mid_event && !st->ended) {
                        st->ended = st->cut = true;
                        if (connect_end_stream_append(&st->out, CONNECT_DEADLINE_EXCEEDED,
                                                      st->from_start ? "the process ran past the request's timeout "
                                                                       "(connect-timeout-ms) and was killed"
                                                                     : "the stream reached its timeout "
                                                                       "(connect-timeout-ms)") < 0)
                                return HTTP_STREAM_ERROR;
                        continue;
                }
                n = process_client_read(st->client, buf, max);
                if (n > 0) {
                        st->mid_event = (size_t) n == max;
                        st->last_sent = now_usec_monotonic();
                        return n;
                }
                st->mid_event = false;
                if (n == CHANNEL_READ_END) {
                        if (st->ended)
                                return HTTP_STREAM_END;
                        /* the events stopped without an exit (cannot happen for a followed process) */
                        st->ended = st->cut = true;
                        if (connect_end_stream_append(&st->out, CONNECT_INTERNAL, "the process's events ended early") < 0)
                                return HTTP_STREAM_ERROR;
                        continue;
                }
                if (n < 0)
                        return HTTP_STREAM_ERROR;
                /* envd's keepalives start after start */
                if (!st->keepalive_due || !st->start_sent || st->ended)
                        return 0;
                st->keepalive_due = false;
                if (append_keepalive(&st->out) < 0)
                        return HTTP_STREAM_ERROR;
        }
}

static void stream_free(EnvdStream *st) {
        if (!st)
                return;
        sd_event_source_disable_unref(st->keepalive_source);
        sd_event_source_disable_unref(st->deadline_source);
        space_buf_done(&st->out);
        free(st);
}

static void stream_detach(void *userdata, Request *r) {
        EnvdStream *st = userdata;

        /* the process runs on: a client that goes away does not end it (envd's behaviour) */
        process_client_close(st->client);
        stream_free(st);
}

static void stream_wake(EnvdStream *st) {
        if (st->request)
                http_resume(st->request);
}

/* A keepalive after keepalive_usec without anything sent, as envd's ticker that data resets. */
static int on_keepalive(sd_event_source *s, uint64_t usec, void *userdata) {
        EnvdStream *st = userdata;
        uint64_t now = now_usec_monotonic(), next;

        if (now - st->last_sent >= st->keepalive_usec) {
                st->keepalive_due = true;
                st->last_sent = now;
                stream_wake(st);
        }
        next = st->last_sent + st->keepalive_usec;
        (void) sd_event_source_set_time(s, next);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        EnvdStream *st = userdata;

        /* Start: envd's process context has the request's deadline, so the process goes with it (its own
         * timeout, in whole seconds from its start, is for when nobody follows the stream any more) */
        if (st->from_start && !st->process->ended) {
                st->process->timed_out = true;
                (void) process_signal(st->process, SIGKILL);
        }
        st->deadline_passed = true;
        stream_wake(st);
        return 0;
}

static int stream_timers(EnvdStream *st, Manager *m, const EnvdStreamSpec *spec) {
        int q;

        if (spec->keepalive_sec > 0) {
                st->keepalive_usec = (uint64_t) spec->keepalive_sec * 1000000ULL;
                q = sd_event_add_time_relative(m->event, &st->keepalive_source, CLOCK_MONOTONIC, st->keepalive_usec,
                                               100000, on_keepalive, st);
                if (q < 0)
                        return q;
        }
        if (spec->deadline_ms > 0) {
                q = sd_event_add_time_relative(m->event, &st->deadline_source, CLOCK_MONOTONIC,
                                               spec->deadline_ms * 1000ULL, 1000, on_deadline, st);
                if (q < 0)
                        return q;
        }
        return 0;
}

int envd_stream_attach(Request *r, Process *p, const EnvdStreamSpec *spec) {
        ChannelWaiter w = api_request_waiter(r);
        EnvdStream *st = calloc(1, sizeof *st);
        int q;

        if (!st)
                return -ENOMEM;
        st->request = r;
        st->process = p;
        st->pty = p->pty;
        st->from_start = spec->from_start;
        st->last_sent = now_usec_monotonic();
        q = stream_timers(st, http_manager(r->http), spec);
        /* Connect: envd sends start first, whatever the process did before */
        if (q >= 0 && !spec->from_start) {
                q = append_start(&st->out, p->pid);
                st->start_sent = true;
        }
        if (q < 0) {
                stream_free(st);
                return q;
        }
        q = process_client_new(p, spec->from_start ? 0 : spec->after_id, true, format_event, st, &w, &st->client);
        if (q < 0) {
                stream_free(st);
                /* answered, but still a failure: a process just started for this stream is not left behind */
                if (q == -EMFILE)
                        (void) envd_stream_error(r, ERROR_RESOURCE_EXHAUSTED,
                                                 "sandbox %s has %u process streams open, the limit; close one first",
                                                 p->sandbox_id, PROCESS_CLIENTS_MAX);
                return q;
        }
        r->stream = (HttpStream) { .read = stream_read, .detach = stream_detach, .userdata = st };
        q = http_respond_stream(r, connect_stream_headers);
        if (q == -ENOMEM) {
                r->stream = (HttpStream) {};
                process_client_free(st->client);
                stream_free(st);
                return q;
        }
        process_client_start(st->client, false);
        return q;
}

/* ---- answers made of one buffer */

typedef struct BufStream {
        SpaceBuf buf;
        size_t off;
} BufStream;

static ssize_t buf_read(void *userdata, char *out, size_t max) {
        BufStream *b = userdata;
        size_t k = b->buf.len - b->off;

        if (k == 0)
                return HTTP_STREAM_END;
        if (k > max)
                k = max;
        memcpy(out, b->buf.data + b->off, k);
        b->off += k;
        return (ssize_t) k;
}

static void buf_detach(void *userdata, Request *r) {
        BufStream *b = userdata;

        space_buf_done(&b->buf);
        free(b);
}

/* Answers r with the end of a stream: after an empty message unless code says it failed. */
static int respond_end(Request *r, ConnectCode code, const char *msg) {
        BufStream *b = calloc(1, sizeof *b);
        int q;

        if (!b || (code == CONNECT_OK && connect_envelope_append(&b->buf, 0, "{}", 2) < 0) ||
            connect_end_stream_append(&b->buf, code, msg) < 0) {
                if (b)
                        space_buf_done(&b->buf);
                free(b);
                return -ENOMEM;
        }
        r->stream = (HttpStream) { .read = buf_read, .detach = buf_detach, .userdata = b };
        q = http_respond_stream(r, connect_stream_headers);
        if (q == -ENOMEM) {
                r->stream = (HttpStream) {};
                buf_detach(b, r);
        }
        return q;
}

int envd_stream_error(Request *r, ErrorCode code, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        int q;

        va_start(ap, fmt);
        q = vasprintf(&msg, fmt, ap);
        va_end(ap);
        return respond_end(r, error_code_envd_connect(code), q < 0 ? NULL : msg);
}

int envd_stream_ok(Request *r) {
        return respond_end(r, CONNECT_OK, NULL);
}

int envd_unary_error(Request *r, ErrorCode code, unsigned status, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        cJSON *o = cJSON_CreateObject();
        va_list ap;
        int q;

        va_start(ap, fmt);
        q = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (!o || q < 0) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        cJSON_AddStringToObject(o, "code", connect_code_to_string(error_code_envd_connect(code)));
        cJSON_AddStringToObject(o, "message", msg);
        return http_respond_json(r, status, o);
}
