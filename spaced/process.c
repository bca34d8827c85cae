/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "log.h"
#include "macro.h"
#include "process.h"

/* Credit goes back to the guest once the client has taken the SSE text below this mark, so a stalled client
 * stops its own process after one window and nothing else. */
#define SSE_LOW_WATER (64U * 1024U)

static void process_return_credit(Process *p);

static int sse_append_event(Process *p, const char *event, const char *data, size_t n) {
        char head[96];
        int k;

        k = snprintf(head, sizeof head, "id: %" PRIu64 "\nevent: %s\ndata: ", ++p->next_event_id, event);
        if (space_buf_append(&p->sse, head, (size_t) k) < 0 || space_buf_append(&p->sse, data, n) < 0 ||
            space_buf_append(&p->sse, "\n\n", 2) < 0)
                return -ENOMEM;
        if (p->stream_request)
                http_resume(p->stream_request);
        return 0;
}

static int sse_append_json(Process *p, const char *event, cJSON *o) {
        _cleanup_free_ char *s = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!s)
                return -ENOMEM;
        return sse_append_event(p, event, s, strlen(s));
}

static int sse_append_data(Process *p, int fd, const uint8_t *data, size_t n) {
        _cleanup_free_ char *b = malloc(base64_encoded_len(n) + 1);

        if (!b)
                return -ENOMEM;
        base64_encode(data, n, b);
        return sse_append_event(p, fd == 1 ? "stdout" : "stderr", b, base64_encoded_len(n));
}

static void process_end_with_error(Process *p, const char *code, const char *message) {
        cJSON *o = cJSON_CreateObject();

        if (p->ended)
                return;
        cJSON_AddStringToObject(o, "code", code);
        cJSON_AddStringToObject(o, "message", message);
        (void) sse_append_json(p, "error", o);
        p->ended = true;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
        Process *p = cls;
        size_t n;

        if (p->sse.len == 0) {
                if (p->ended)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (p->stream_request)
                        http_suspend(p->stream_request);
                return 0;
        }
        n = p->sse.len < max ? p->sse.len : max;
        memcpy(buf, p->sse.data, n);
        space_buf_consume(&p->sse, n);
        if (p->sse.len < SSE_LOW_WATER)
                process_return_credit(p);
        return (ssize_t) n;
}

static void process_return_credit(Process *p) {
        AgentConn *a = p->sandbox ? p->sandbox->agent : NULL;

        for (int fd = 1; fd <= 2; fd++) {
                uint8_t le[4];
                uint64_t n = p->unreturned[fd];

                if (n == 0)
                        continue;
                p->unreturned[fd] = 0;
                if (p->ended || !a)
                        continue;
                space_put_le32(le, (uint32_t) n);
                if (agent_send(a, SPACE_F_CREDIT, (uint8_t) fd, p->stream, le, 4) >= 0)
                        (void) space_credit_give(&p->guest_credit[fd], (uint32_t) n);
        }
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Process *p = userdata;

        p->timed_out = true;
        (void) process_signal(p, SIGKILL);
        return 0;
}

int process_start(Request *r, Sandbox *s, const ExecSpec *spec) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        Process *p;
        int q;

        if (!s->agent)
                return http_respond_error(r, MHD_HTTP_CONFLICT, "sandbox_not_running",
                                          "sandbox %s is not connected to its agent (state %s); "
                                          "remove it with 'spacectl rm -f %s'",
                                          s->id, sandbox_state_to_string(s->state), s->id);

        for (char **a = spec->argv; *a; a++)
                if ((q = space_kv_add(&kv, "argv", *a)) < 0)
                        return http_respond_error(r, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                                                  "argv contains a value that cannot be passed");
        for (char **e = spec->env; e && *e; e++)
                if (space_kv_add(&kv, "env", *e) < 0)
                        return http_respond_error(r, MHD_HTTP_BAD_REQUEST, "invalid_argument", "bad env entry");
        if (spec->cwd && space_kv_add(&kv, "cwd", spec->cwd) < 0)
                return http_respond_error(r, MHD_HTTP_BAD_REQUEST, "invalid_argument", "bad cwd");
        if (space_kv_add(&kv, "stdin", spec->want_stdin ? "1" : "0") < 0)
                return -ENOMEM;
        if (kv.len > SPACE_FRAME_PAYLOAD_MAX)
                return http_respond_error(r, MHD_HTTP_BAD_REQUEST, "invalid_argument",
                                          "argv, env and cwd together exceed %u bytes", SPACE_FRAME_PAYLOAD_MAX);

        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->sandbox = s;
        p->want_stdin = spec->want_stdin;
        p->stdin_closed = !spec->want_stdin;
        space_credit_init(&p->guest_credit[1]);
        space_credit_init(&p->guest_credit[2]);
        space_credit_init(&p->stdin_credit);
        q = agent_register_process(s->agent, p);
        if (q < 0) {
                free(p);
                return http_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "too_many_processes",
                                          "sandbox %s has too many processes with open streams (limit %u)",
                                          s->id, SPACE_STREAMS_MAX);
        }
        q = agent_send(s->agent, SPACE_F_EXEC, 0, p->stream, kv.data, kv.len);
        if (q < 0) {
                agent_unregister_process(s->agent, p);
                free(p);
                return http_respond_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal",
                                          "cannot send to the agent: %s", strerror(-q));
        }
        if (spec->timeout_sec > 0)
                (void) sd_event_add_time_relative(s->manager->event, &p->timeout_source, CLOCK_MONOTONIC,
                                                  spec->timeout_sec * 1000000ULL, 1000, on_timeout, p);

        p->response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, sse_read, p, NULL);
        if (!p->response) {
                process_fail(p, "internal", "out of memory");
                return -ENOMEM;
        }
        MHD_add_response_header(p->response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(p->response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        p->stream_request = r;
        r->stream = p;
        q = MHD_queue_response(r->connection, MHD_HTTP_OK, p->response);
        MHD_destroy_response(p->response);
        p->response = NULL;
        r->responded = true;
        return q == MHD_YES ? 0 : -EIO;
}

int process_signal(Process *p, int sig) {
        uint8_t le[4];

        if (p->ended || !p->sandbox || !p->sandbox->agent)
                return -ESRCH;
        space_put_le32(le, (uint32_t) sig);
        return agent_send(p->sandbox->agent, SPACE_F_SIGNAL, 0, p->stream, le, 4);
}

int process_close_stdin(Process *p) {
        if (p->stdin_closed)
                return 0;
        p->stdin_closed = true;
        if (p->ended || !p->sandbox || !p->sandbox->agent)
                return -ESRCH;
        return agent_send(p->sandbox->agent, SPACE_F_EOF, 0, p->stream, NULL, 0);
}

size_t process_upload(Process *p, Request *r, const char *data, size_t n) {
        size_t sent = 0;

        while (sent < n && p->stdin_credit.available > 0 && !p->ended && p->sandbox && p->sandbox->agent) {
                size_t chunk = n - sent;

                if (chunk > SPACE_FRAME_PAYLOAD_MAX)
                        chunk = SPACE_FRAME_PAYLOAD_MAX;
                if (chunk > p->stdin_credit.available)
                        chunk = (size_t) p->stdin_credit.available;
                if (agent_send(p->sandbox->agent, SPACE_F_DATA, 0, p->stream, data + sent, chunk) < 0)
                        break;
                (void) space_credit_take(&p->stdin_credit, chunk);
                sent += chunk;
        }
        if (p->ended) {
                /* The process is gone: swallow the rest, the response says what happened. */
                r->upload_failed = true;
                return n;
        }
        if (sent < n) {
                p->upload = r;
                r->upload = p;
                http_suspend(r);
        }
        return sent;
}

void process_detach_stream(Process *p, Request *r) {
        if (p->stream_request != r)
                return;
        p->stream_request = NULL;
        r->stream = NULL;
        /* Nobody reads any more: drop what is queued and let the process run on unthrottled. */
        space_buf_done(&p->sse);
        process_return_credit(p);
        process_maybe_free(p);
}

void process_detach_upload(Process *p, Request *r) {
        if (p->upload == r)
                p->upload = NULL;
        r->upload = NULL;
        process_maybe_free(p);
}

static int parse_int(const char *s, long min, long max, long *ret) {
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < min || v > max)
                return -EBADMSG;
        *ret = v;
        return 0;
}

static void on_exit_frame(Process *p, const uint8_t *payload, size_t n) {
        const char *v;
        long code = -1, sig = 0;
        cJSON *o;

        if (space_kv_get(payload, n, "signal", &v) > 0 && parse_int(v, 1, 128, &sig) < 0)
                sig = 0;
        if (space_kv_get(payload, n, "code", &v) > 0 && parse_int(v, 0, 255, &code) < 0)
                code = -1;
        if (code < 0 && sig == 0) {
                process_end_with_error(p, "protocol_error", "the agent reported an exit without a status");
                return;
        }
        o = cJSON_CreateObject();
        if (sig > 0) {
                cJSON_AddNumberToObject(o, "exit_code", 128 + sig);
                cJSON_AddNumberToObject(o, "signal", sig);
        } else {
                cJSON_AddNumberToObject(o, "exit_code", code);
                cJSON_AddNullToObject(o, "signal");
        }
        cJSON_AddBoolToObject(o, "timed_out", p->timed_out);
        (void) sse_append_json(p, "process_exited", o);
        p->ended = true;
}

static void on_error_frame(Process *p, const uint8_t *payload, size_t n) {
        const char *v, *msg = NULL;
        long err = 0;
        char text[512];

        if (space_kv_get(payload, n, "errno", &v) > 0)
                (void) parse_int(v, 0, 4095, &err);
        (void) space_kv_get(payload, n, "message", &msg);
        /* The guest's message is shown to the user, so keep it short and printable. */
        snprintf(text, sizeof text, "%s", msg ? msg : strerror((int) err));
        for (char *c = text; *c; c++)
                if ((unsigned char) *c < 0x20 || (unsigned char) *c == 0x7f)
                        *c = '?';
        if (space_kv_get(payload, n, "stage", &v) > 0 && streq(v, "chdir"))
                process_end_with_error(p, "invalid_cwd", text);
        else if (err == ENOENT)
                process_end_with_error(p, "command_not_found", text);
        else if (err == EACCES || err == ENOEXEC)
                process_end_with_error(p, "permission_denied", text);
        else
                process_end_with_error(p, "exec_failed", text);
}

void process_on_frame(Process *p, const SpaceFrameHeader *h, const uint8_t *payload) {
        const char *v;
        long pid;

        if (p->ended && h->type != SPACE_F_DATA)
                return;

        switch (h->type) {
        case SPACE_F_STARTED: {
                cJSON *o;

                if (p->started || space_kv_get(payload, h->length, "pid", &v) <= 0 ||
                    parse_int(v, 1, INT_MAX, &pid) < 0) {
                        process_fail(p, "protocol_error", "the agent sent a bad start message");
                        return;
                }
                p->started = true;
                p->pid = (int) pid;
                o = cJSON_CreateObject();
                cJSON_AddNumberToObject(o, "pid", (double) pid);
                (void) sse_append_json(p, "process_started", o);
                break;
        }
        case SPACE_F_DATA:
                if (h->fd != 1 && h->fd != 2)
                        return;
                if (space_credit_take(&p->guest_credit[h->fd], h->length) < 0) {
                        process_fail(p, "protocol_error", "the agent overran its flow-control window");
                        return;
                }
                if (p->ended)
                        return;
                p->unreturned[h->fd] += h->length;
                if (!p->stream_request) {
                        process_return_credit(p); /* nobody listens: discard, don't throttle */
                        return;
                }
                (void) sse_append_data(p, h->fd, payload, h->length);
                break;
        case SPACE_F_CREDIT:
                if (h->fd != 0 || h->length != 4 ||
                    space_credit_give(&p->stdin_credit, space_get_le32(payload)) < 0) {
                        process_fail(p, "protocol_error", "the agent returned credit it was never given");
                        return;
                }
                if (p->upload)
                        http_resume(p->upload);
                break;
        case SPACE_F_EOF:
                break;
        case SPACE_F_ERROR:
                on_error_frame(p, payload, h->length);
                break;
        case SPACE_F_EXIT:
                on_exit_frame(p, payload, h->length);
                break;
        default:
                return;
        }
        if (p->ended) {
                if (p->sandbox && p->sandbox->agent)
                        (void) agent_send(p->sandbox->agent, SPACE_F_CLOSE, 0, p->stream, NULL, 0);
                if (p->upload)
                        http_resume(p->upload);
                if (p->stream_request)
                        http_resume(p->stream_request);
                process_maybe_free(p);
        }
}

void process_fail(Process *p, const char *code, const char *message) {
        if (!p->ended && p->sandbox && p->sandbox->agent && strcmp(code, "sandbox_gone") != 0) {
                (void) process_signal(p, SIGKILL);
                (void) agent_send(p->sandbox->agent, SPACE_F_CLOSE, 0, p->stream, NULL, 0);
        }
        process_end_with_error(p, code, message);
        if (p->upload)
                http_resume(p->upload);
        if (p->stream_request)
                http_resume(p->stream_request);
        process_maybe_free(p);
}

/* A process is freed once it ended and no request refers to it. */
Process *process_maybe_free(Process *p) {
        if (!p->ended || p->stream_request || p->upload)
                return p;
        if (p->sandbox && p->sandbox->agent)
                agent_unregister_process(p->sandbox->agent, p);
        sd_event_source_disable_unref(p->timeout_source);
        space_buf_done(&p->sse);
        free(p);
        return NULL;
}
