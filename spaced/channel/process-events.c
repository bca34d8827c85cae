/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel/channel.h"
#include "channel/process-internal.h"
#include "channel/process.h"
#include "core/log.h"
#include "core/util.h"
#include "macro.h"
#include "string-util.h"

/* A process's events and who reads them (see process.h): each event gets the next id and goes to the ring and the
 * log, then to every client from its own cursor; output credit goes back to the guest as the following clients
 * take it. */

struct ProcessClient {
        Process *process;
        ChannelWaiter waiter;
        ProcessEventFormat format;
        void *format_userdata;
        uint64_t cursor;             /* last event id handed to the client */
        bool follow;
        bool finished;               /* the last thing is in pending: end after it */
        SpaceBuf pending;            /* the event being sent, formatted */
        size_t pending_off;
        LogReader reader;            /* for events no longer in the ring */
        ProcessClient *next;
};

static uint64_t ring_total;          /* bytes in all rings */

static void ring_account(Process *p, size_t before) {
        ring_total = ring_total - before + p->ring.bytes;
        if (ring_total > PROCESS_RING_BUDGET) {
                /* Rings are a cache of the log: under pressure, keep only the newest events of this one. */
                before = p->ring.bytes;
                event_ring_trim(&p->ring, SPACE_STREAM_WINDOW);
                ring_total = ring_total - before + p->ring.bytes;
        }
}

void process_ring_free(Process *p) {
        ring_total -= p->ring.bytes;
        event_ring_done(&p->ring);
}

void process_wake_clients(Process *p) {
        /* the successor first: a waiter may let its client go */
        for (ProcessClient *c = p->clients, *next; c; c = next) {
                next = c->next;
                channel_waiter_wake(&c->waiter);
        }
}

static void count_log_bytes(Process *p, uint64_t n) {
        Sandbox *s = process_sandbox(p);

        if (s)
                channel_sandbox->channel(s)->process_log_bytes += n;
}

int process_append_event(Process *p, uint8_t type, const void *data, size_t n) {
        uint64_t id = p->last_id + 1;
        size_t before = p->ring.bytes;
        int r;

        if (p->log && !p->log_failed) {
                r = process_log_append(p->log, id, type, data, n);
                if (r >= 0)
                        count_log_bytes(p, n + LOG_RECORD_OVERHEAD);
                else {
                        log_warning_errno(r, "sandbox %s: process %d: cannot write its log %s; keeping output in "
                                          "memory only", p->sandbox_id, p->pid, p->log_path);
                        p->log_failed = true;
                }
        }
        r = event_ring_push(&p->ring, id, type, data, n);
        ring_account(p, before);
        if (r < 0 && (!p->log || p->log_failed))
                return r;
        p->last_id = id;
        if (event_type_is_data(type))
                p->unread_bytes += n;
        process_wake_clients(p);
        return 0;
}

void process_append_json(Process *p, uint8_t type, cJSON *o) {
        _cleanup_free_ char *s = cJSON_PrintUnformatted(o);

        cJSON_Delete(o);
        if (s)
                (void) process_append_event(p, type, s, strlen(s));
}

/* The record of an error event is its code's name, a NUL and the message (process-log.h): what ended the process
 * is kept as a code, and /v1's JSON is made from it as a client reads it (error_event_json()). */
void process_end_with_error(Process *p, ProcessState state, ErrorCode code, const char *message) {
        _cleanup_(space_buf_done) SpaceBuf rec = {};
        const char *name = error_code_to_string(code);

        if (p->ended)
                return;
        if (space_buf_append(&rec, name, strlen(name) + 1) >= 0 &&
            space_buf_append(&rec, message, strnlen(message, EVENT_PAYLOAD_MAX - strlen(name) - 1)) >= 0)
                (void) process_append_event(p, EVENT_ERROR, rec.data, rec.len);
        free(p->error_message);
        p->error_code = code;
        p->error_message = strdup(message);
        p->state = state;
        process_end(p);
}

/* ---- flow control ---- */

void process_send_credit(Process *p, uint8_t fd, uint64_t n) {
        uint8_t le[4];

        while (n > 0) {
                uint32_t k = n > SPACE_STREAM_WINDOW ? SPACE_STREAM_WINDOW : (uint32_t) n;

                space_put_le32(le, k);
                if (agent_send(p->agent, SPACE_F_CREDIT, fd, p->stream, le, 4) < 0)
                        return;
                p->credit_left[fd] += k;
                n -= k;
        }
}

void process_flow_update(Process *p) {
        uint64_t upto = UINT64_MAX, give[3] = {};
        unsigned n = 0;

        if (!p->agent || p->ended || p->n_blocks == 0)
                return;
        if (p->n_following > 0) {
                for (ProcessClient *c = p->clients; c; c = c->next)
                        if (c->follow && c->cursor < upto)
                                upto = c->cursor;
        } else if (p->log_failed || p->unread_bytes >= PROCESS_UNREAD_MAX)
                return; /* nobody reads and the log holds all it can without losing any: hold */

        while (n < p->n_blocks && p->blocks[n].last_id <= upto) {
                give[1] += p->blocks[n].bytes[1];
                give[2] += p->blocks[n].bytes[2];
                n++;
        }
        if (n == 0)
                return;
        memmove(p->blocks, p->blocks + n, (p->n_blocks - n) * sizeof *p->blocks);
        p->n_blocks -= n;
        for (uint8_t fd = 1; fd <= 2; fd++)
                if (give[fd] > 0)
                        process_send_credit(p, fd, give[fd]);
}

void process_note_output(Process *p, uint8_t fd, uint32_t n) {
        CreditBlock *t = p->n_blocks > 0 ? &p->blocks[p->n_blocks - 1] : NULL;

        /* Merge into the last block while it is small (or there is no room): a block is returned whole. */
        if (!t || (t->bytes[1] + t->bytes[2] >= SPACE_FRAME_PAYLOAD_MAX && p->n_blocks < CREDIT_BLOCKS_MAX)) {
                t = &p->blocks[p->n_blocks++];
                *t = (CreditBlock) {};
        }
        t->last_id = p->last_id;
        t->bytes[fd] += n;
}

/* ---- clients ---- */

/* An error event as /v1 sends it: {"code": NAME, "message": TEXT}, and first_available when it is not 0. The
 * bytes are those the daemon stored before error records held a code: the same cJSON calls in the same order. */
static char *error_event_json(ErrorCode code, const char *message, uint64_t first_available) {
        cJSON *o = cJSON_CreateObject();
        char *s = NULL;

        if (o && cJSON_AddStringToObject(o, "code", error_code_to_string(code)) &&
            cJSON_AddStringToObject(o, "message", message) &&
            (first_available == 0 || cJSON_AddNumberToObject(o, "first_available", (double) first_available)))
                s = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        return s;
}

static int client_hand(ProcessClient *c, const ProcessEvent *e) {
        c->pending_off = 0;
        return c->format(c->format_userdata, &c->pending, e);
}

/* Hands one event of the ring or the log to the client. An error record (process-log.h) becomes its code and
 * message, and /v1's JSON of them. One that an older daemon wrote is that JSON already: it goes out as it is,
 * to /v1's readers (who read the logs of ended processes; envd follows live ones only), as ERROR_INTERNAL. */
static int client_format(ProcessClient *c, uint64_t id, uint8_t type, const uint8_t *data, size_t n) {
        ProcessEvent e = { .id = id, .type = type, .name = event_type_to_string(type), .data = data, .n = n };
        _cleanup_free_ char *name = NULL, *message = NULL, *json = NULL;
        const uint8_t *nul;

        if (type != EVENT_ERROR)
                return client_hand(c, &e);
        e.code = ERROR_INTERNAL;
        e.message = error_code_to_string(ERROR_INTERNAL);
        nul = n > 0 && data[0] != '{' ? memchr(data, 0, n) : NULL;
        if (nul) {
                name = strndup((const char *) data, (size_t) (nul - data));
                message = strndup((const char *) nul + 1, n - (size_t) (nul - data) - 1);
                if (!name || !message)
                        return -ENOMEM;
                (void) error_code_from_string(name, &e.code);
                json = error_event_json(e.code, message, 0);
                if (!json)
                        return -ENOMEM;
                e.message = message;
                e.data = json;
                e.n = strlen(json);
        }
        return client_hand(c, &e);
}

static void client_took(ProcessClient *c, uint64_t id, uint8_t type, size_t n) {
        Process *p = c->process;

        c->cursor = id;
        if (id > p->read_mark) {
                if (event_type_is_data(type))
                        p->unread_bytes = p->unread_bytes > n ? p->unread_bytes - n : 0;
                p->read_mark = id;
        }
}

/* first is never 0 (first_kept()), so the JSON always has first_available. */
static void client_lost_events(ProcessClient *c, uint64_t first) {
        _cleanup_free_ char *json = NULL;
        char msg[160];

        snprintf(msg, sizeof msg, "events after %" PRIu64 " are no longer kept; the first kept is %" PRIu64,
                 c->cursor, first);
        json = error_event_json(ERROR_EVENTS_LOST, msg, first);
        /* id: the last one we know, so a client that stores it does not ask again for what is gone */
        if (json)
                (void) client_hand(c, &(ProcessEvent) {
                        .id = c->process->last_id, .type = EVENT_ERROR, .name = event_type_to_string(EVENT_ERROR),
                        .data = json, .n = strlen(json), .code = ERROR_EVENTS_LOST, .message = msg,
                });
        c->finished = true;
}

static uint64_t first_kept(Process *p) {
        uint64_t first = 0, last = 0;

        if (p->log_path)
                (void) process_log_range(p->log_path, &first, &last);
        if (p->ring.count > 0 && (first == 0 || p->ring.first_id < first))
                first = p->ring.first_id;
        return first ?: p->last_id + 1;
}

/* Puts the next event into pending. 1: there is one; 0: nothing now (or finished set). */
static int client_next(ProcessClient *c) {
        Process *p = c->process;
        uint64_t want = c->cursor + 1, id = 0;
        const Event *e;
        const uint8_t *data;
        uint8_t type;
        size_t len;
        int r;

        if (want > p->last_id) {
                if (!c->follow || p->ended)
                        c->finished = true;
                return 0;
        }
        e = event_ring_get(&p->ring, want);
        if (e) {
                c->reader.fd = safe_close(c->reader.fd);
                if (client_format(c, e->id, e->type, e->data, e->len) < 0)
                        return 0;
                client_took(c, e->id, e->type, e->len);
                return 1;
        }
        r = 0;
        if (p->log_path) {
                if (c->reader.fd < 0 || c->reader.next_id != want)
                        r = log_reader_seek(&c->reader, p->log_path, want, NULL);
                if (r >= 0)
                        r = log_reader_next(&c->reader, p->log_path, &id, &type, &data, &len);
        }
        if (r <= 0 || id != want) {
                client_lost_events(c, first_kept(p));
                return 1;
        }
        if (client_format(c, id, type, data, len) < 0)
                return 0;
        client_took(c, id, type, len);
        return 1;
}

ssize_t process_client_read(ProcessClient *c, char *buf, size_t max) {
        size_t n = 0;

        while (n < max) {
                if (c->pending_off < c->pending.len) {
                        size_t k = c->pending.len - c->pending_off;

                        if (k > max - n)
                                k = max - n;
                        memcpy(buf + n, c->pending.data + c->pending_off, k);
                        c->pending_off += k;
                        n += k;
                        continue;
                }
                c->pending.len = c->pending_off = 0;
                if (c->finished || client_next(c) <= 0)
                        break;
        }
        if (c->pending.cap > 2 * (SPACE_FRAME_PAYLOAD_MAX * 2) && c->pending_off == c->pending.len)
                space_buf_done(&c->pending);
        process_flow_update(c->process);
        if (n > 0)
                return (ssize_t) n;
        return c->finished ? CHANNEL_READ_END : 0;
}

void process_client_free(ProcessClient *c) {
        Process *p = c->process;

        for (ProcessClient **i = &p->clients; *i; i = &(*i)->next)
                if (*i == c) {
                        *i = c->next;
                        break;
                }
        if (c->follow)
                p->n_following--;
        log_reader_done(&c->reader);
        space_buf_done(&c->pending);
        free(c);
}

int process_client_new(Process *p, uint64_t after_id, bool follow, ProcessEventFormat format, void *format_userdata,
                       const ChannelWaiter *waiter, ProcessClient **ret) {
        ProcessClient *c;
        unsigned n = 0;

        for (Process *q = process_list; q; q = q->next)
                if (streq(q->sandbox_id, p->sandbox_id))
                        for (c = q->clients; c; c = c->next)
                                n++;
        if (n >= PROCESS_CLIENTS_MAX)
                return -EMFILE;
        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->process = p;
        c->waiter = *waiter;
        c->format = format;
        c->format_userdata = format_userdata;
        c->reader = LOG_READER_INIT;
        c->follow = follow && !p->ended;
        c->cursor = after_id > p->last_id && !p->ended ? p->last_id : after_id;
        c->next = p->clients;
        p->clients = c;
        if (c->follow)
                p->n_following++;
        *ret = c;
        return 0;
}

void process_client_start(ProcessClient *c, bool release) {
        Process *p = c->process;

        if (release && p->state == PROCESS_HELD)
                process_release(p);
        process_flow_update(p);
}

void process_client_close(ProcessClient *c) {
        Process *p = c->process;

        process_client_free(c);
        /* The slowest client may be gone: credit may flow again. */
        process_flow_update(p);
        process_maybe_free(p);
}

