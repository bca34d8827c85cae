/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/log.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "paths.h"
#include "channel/agent-internal.h"
#include "channel/process.h"
#include "core/util.h"
#include "channel/channel.h"

/* Processes: events in, credit out, clients reading at their own pace. See process.h. */

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

static Process *processes;           /* every process in memory */
static uint64_t ring_total;          /* bytes in all rings */
static sd_event_source *sweep_source;

static const char *const state_names[_PROCESS_STATE_MAX] = {
        [PROCESS_STARTING] = "starting", [PROCESS_HELD] = "held",  [PROCESS_RUNNING] = "running",
        [PROCESS_EXITED] = "exited",     [PROCESS_LOST] = "lost",
};

const char *process_state_to_string(ProcessState s) {
        return s < _PROCESS_STATE_MAX ? state_names[s] : "unknown";
}

static int process_state_from_string(const char *s, ProcessState *ret) {
        for (int i = 0; i < _PROCESS_STATE_MAX; i++)
                if (streq_ptr(s, state_names[i])) {
                        *ret = (ProcessState) i;
                        return 0;
                }
        return -EINVAL;
}

static char **strv_copy(char **l) {
        size_t n = 0;
        char **c;

        while (l && l[n])
                n++;
        c = calloc(n + 1, sizeof *c);
        for (size_t i = 0; c && i < n; i++)
                if (!(c[i] = strdup(l[i]))) {
                        strv_free(c);
                        return NULL;
                }
        return c;
}

/* Through its channel while it has one (every event of a running process counts its log bytes here); by id
 * otherwise, since a process may outlive its sandbox. */
static Sandbox *process_sandbox(Process *p) {
        return p->agent ? p->agent->sandbox : channel_sandbox->find(p->manager, p->sandbox_id);
}

static void flow_update(Process *p);
static void client_free(ProcessClient *c);

/* ---- the table ---- */

static void process_save(Process *p) {
        _cleanup_free_ char *argv = NULL;
        ProcessRecord rec;
        int r;

        if (p->pid <= 0 || !process_sandbox(p))
                return;
        argv = strv_to_json_text(p->argv);
        rec = (ProcessRecord) {
                .pid = p->pid,
                .stream = p->stream,
                .session_id = p->session_id[0] ? p->session_id : NULL,
                .argv = argv,
                .cwd = p->cwd,
                .user = p->user,
                .pty = p->pty,
                .state = (char *) process_state_to_string(p->state),
                .exit_code = p->exit_code,
                .signal = p->signal,
                .timed_out = p->timed_out,
                .timeout = p->timeout_sec,
                .started_at = p->started_at,
                .exited_at = p->exited_at,
                .last_event_id = p->last_id,
                .log_path = p->log_path,
        };
        memcpy(rec.sandbox_id, p->sandbox_id, sizeof rec.sandbox_id);
        r = store_put_process(p->manager->store, &rec);
        if (r < 0)
                log_warning_errno(r, "sandbox %s: cannot record process %d", p->sandbox_id, p->pid);
        else
                p->saved = true;
}

/* Keeps the newest PROCESS_KEEP_FINISHED finished processes of the sandbox. That query sorts all of them, so it
 * runs every PRUNE_EVERY starts rather than on each: up to PRUNE_EVERY - 1 more may be listed for a while. */
#define PRUNE_EVERY 16U

static void prune_finished(Process *p) {
        _cleanup_strv_free_ char **paths = NULL;
        Sandbox *s = process_sandbox(p);

        if (s && channel_sandbox->channel(s)->processes_unpruned++ % PRUNE_EVERY != 0)
                return;
        if (store_prune_processes(p->manager->store, p->sandbox_id, PROCESS_KEEP_FINISHED, &paths) < 0)
                return;
        for (char **i = paths; i && *i; i++)
                if (**i)
                        process_log_remove(*i);
}

/* ---- events ---- */

static void ring_account(Process *p, size_t before) {
        ring_total = ring_total - before + p->ring.bytes;
        if (ring_total > PROCESS_RING_BUDGET) {
                /* Rings are a cache of the log: under pressure, keep only the newest events of this one. */
                before = p->ring.bytes;
                event_ring_trim(&p->ring, SPACE_STREAM_WINDOW);
                ring_total = ring_total - before + p->ring.bytes;
        }
}

static void ring_free(Process *p) {
        ring_total -= p->ring.bytes;
        event_ring_done(&p->ring);
}

static void wake_clients(Process *p) {
        /* the successor first: a waiter may let its client go */
        for (ProcessClient *c = p->clients, *next; c; c = next) {
                next = c->next;
                channel_waiter_wake(&c->waiter);
        }
}

/* What one record may add to a log file: the data, its header, and a new file's header when it rotates. */
#define LOG_RECORD_OVERHEAD 64U

static void count_log_bytes(Process *p, uint64_t n) {
        Sandbox *s = process_sandbox(p);

        if (s)
                channel_sandbox->channel(s)->process_log_bytes += n;
}

static int append_event(Process *p, uint8_t type, const void *data, size_t n) {
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
        wake_clients(p);
        return 0;
}

static void append_json(Process *p, uint8_t type, cJSON *o) {
        _cleanup_free_ char *s = cJSON_PrintUnformatted(o);

        cJSON_Delete(o);
        if (s)
                (void) append_event(p, type, s, strlen(s));
}

/* The process is over: the final event is in, the guest forgets the stream. */
static void process_end(Process *p) {
        if (p->ended)
                return;
        p->ended = true;
        p->exited_at = now_unix();
        p->timeout_source = sd_event_source_disable_unref(p->timeout_source);
        if (p->agent) {
                (void) agent_send(p->agent, SPACE_F_CLOSE, 0, p->stream, NULL, 0);
                agent_unregister_process(p->agent, p);
        }
        process_save(p);
        p->log = process_log_free(p->log);
        p->n_blocks = 0;
        channel_waiter_wake(&p->upload);
        channel_waiter_wake(&p->creator);
        wake_clients(p);
}

/* The record of an error event is its code's name, a NUL and the message (process-log.h): what ended the process
 * is kept as a code, and /v1's JSON is made from it as a client reads it (error_event_json()). */
static void end_with_error(Process *p, ProcessState state, ErrorCode code, const char *message) {
        _cleanup_(space_buf_done) SpaceBuf rec = {};
        const char *name = error_code_to_string(code);

        if (p->ended)
                return;
        if (space_buf_append(&rec, name, strlen(name) + 1) >= 0 &&
            space_buf_append(&rec, message, strnlen(message, EVENT_PAYLOAD_MAX - strlen(name) - 1)) >= 0)
                (void) append_event(p, EVENT_ERROR, rec.data, rec.len);
        free(p->error_message);
        p->error_code = code;
        p->error_message = strdup(message);
        p->state = state;
        process_end(p);
}

/* ---- lifetime ---- */

static int on_sweep(sd_event_source *s, uint64_t usec, void *userdata);

static void sweep_arm(Manager *m) {
        if (!sweep_source) {
                if (sd_event_add_time_relative(m->event, &sweep_source, CLOCK_MONOTONIC, 2 * 1000000ULL, 100000,
                                               on_sweep, m) < 0)
                        return;
                (void) sd_event_source_set_enabled(sweep_source, SD_EVENT_ON);
        }
}

static Process *process_new(Manager *m, Sandbox *s) {
        Process *p = calloc(1, sizeof *p);

        if (!p)
                return NULL;
        p->manager = m;
        memcpy(p->sandbox_id, channel_sandbox->id(s), sizeof p->sandbox_id);
        p->exit_code = -1;
        p->ring.cap = PROCESS_RING_CAP;
        p->credit_left[1] = p->credit_left[2] = SPACE_STREAM_WINDOW;
        space_credit_init(&p->stdin_credit);
        p->next = processes;
        processes = p;
        sweep_arm(m);
        return p;
}

static bool tokens_alive(Process *p) {
        int64_t now = now_unix();

        for (size_t i = 0; i < SESSION_TOKENS_MAX; i++)
                if (p->tokens[i].token[0] && p->tokens[i].expires_at > now)
                        return true;
        return false;
}

static void process_free(Process *p) {
        for (Process **i = &processes; *i; i = &(*i)->next)
                if (*i == p) {
                        *i = p->next;
                        break;
                }
        while (p->clients)
                client_free(p->clients);
        if (p->agent)
                agent_unregister_process(p->agent, p);
        sd_event_source_disable_unref(p->timeout_source);
        ring_free(p);
        process_log_free(p->log);
        strv_free(p->argv);
        strv_free(p->request_env);
        free(p->tag);
        free(p->cwd);
        free(p->user);
        free(p->log_path);
        free(p->error_message);
        explicit_bzero(p->tokens, sizeof p->tokens);
        free(p);
}

/* A process is freed once it ended and nothing refers to it (clients, a waiting creator, an upload, a
 * session token someone may still attach with). */
Process *process_maybe_free(Process *p) {
        if (!p->ended || p->clients || p->creator.wake || p->upload.wake)
                return p;
        ring_free(p); /* only the log is read from now on */
        if (p->pid > 0 && p->log_path && tokens_alive(p) && process_sandbox(p))
                return p;
        process_free(p);
        return NULL;
}

/* Every 2 s: processes whose sandbox went away end; idle ones are freed. */
static int on_sweep(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        Process *p, *next;

        for (p = processes; p; p = next) {
                Sandbox *sb = process_sandbox(p);

                next = p->next;
                if (!p->ended && (!sb || (channel_sandbox->phase(sb) == CHANNEL_SANDBOX_DELETING && !p->agent)))
                        end_with_error(p, PROCESS_LOST, ERROR_SANDBOX_GONE, "the sandbox was removed while the process ran");
                else if (!p->ended && !p->agent && sb && channel_sandbox->phase(sb) == CHANNEL_SANDBOX_DOWN)
                        end_with_error(p, PROCESS_LOST, ERROR_CHANNEL_LOST, "the sandbox stopped while the process ran");
                else if (!p->ended && p->adopting && p->agent && now_usec_monotonic() - p->adopt_sent > 2000000ULL) {
                        /* no answer yet (the first frames after a reconnect can be lost): ask again */
                        p->adopt_sent = now_usec_monotonic();
                        (void) agent_send(p->agent, SPACE_F_ADOPT, 0, p->stream, NULL, 0);
                }
                (void) process_maybe_free(p);
        }
        if (!processes) {
                sweep_source = sd_event_source_disable_unref(sweep_source);
                return 0;
        }
        (void) sd_event_source_set_time_relative(s, 2 * 1000000ULL);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        (void) m;
        return 0;
}

/* ---- flow control ---- */

static void send_credit(Process *p, uint8_t fd, uint64_t n) {
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

static void flow_update(Process *p) {
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
                        send_credit(p, fd, give[fd]);
}

static void note_output(Process *p, uint8_t fd, uint32_t n) {
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
        flow_update(c->process);
        if (n > 0)
                return (ssize_t) n;
        return c->finished ? CHANNEL_READ_END : 0;
}

static void client_free(ProcessClient *c) {
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

static void process_release(Process *p);

int process_client_new(Process *p, uint64_t after_id, bool follow, ProcessEventFormat format, void *format_userdata,
                       const ChannelWaiter *waiter, ProcessClient **ret) {
        ProcessClient *c;
        unsigned n = 0;

        for (Process *q = processes; q; q = q->next)
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
        flow_update(p);
}

void process_client_free(ProcessClient *c) {
        client_free(c);
}

void process_client_close(ProcessClient *c) {
        Process *p = c->process;

        client_free(c);
        /* The slowest client may be gone: credit may flow again. */
        flow_update(p);
        process_maybe_free(p);
}

void process_creator_done(Process *p) {
        p->creator = (ChannelWaiter) {};
}

void process_creator_gone(Process *p) {
        if (!p->creator.wake)
                return;
        p->creator = (ChannelWaiter) {};
        if (!p->ended) {
                (void) process_signal(p, SIGKILL);
                if (p->state == PROCESS_STARTING)
                        end_with_error(p, PROCESS_LOST, ERROR_CANCELLED, "the session's creator went away");
        }
        process_maybe_free(p);
}

/* ---- starting ---- */

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Process *p = userdata;

        p->timed_out = true;
        (void) process_signal(p, SIGKILL);
        return 0;
}

static void arm_timeout(Process *p) {
        int64_t left;

        p->timeout_source = sd_event_source_disable_unref(p->timeout_source);
        if (p->timeout_sec == 0 || p->state != PROCESS_RUNNING)
                return;
        left = p->started_at + (int64_t) p->timeout_sec - now_unix();
        (void) sd_event_add_time_relative(p->manager->event, &p->timeout_source, CLOCK_MONOTONIC,
                                          left > 0 ? (uint64_t) left * 1000000ULL : 1, 1000, on_timeout, p);
}

static void process_release(Process *p) {
        if (p->state != PROCESS_HELD || !p->agent)
                return;
        if (agent_send(p->agent, SPACE_F_RELEASE, 0, p->stream, NULL, 0) < 0)
                return;
        p->state = PROCESS_RUNNING;
        p->started_at = now_unix();
        arm_timeout(p);
        process_save(p);
}

static int build_exec(const ExecSpec *spec, bool hold, SpaceBuf *kv, Error *reterr) {
        for (char **a = spec->argv; *a; a++)
                if (space_kv_add(kv, "argv", *a) < 0)
                        return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                         "argv contains a value that cannot be passed") ?: -EINVAL;
        for (char **e = spec->env; e && *e; e++)
                if (space_kv_add(kv, "env", *e) < 0)
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "bad env entry") ?: -EINVAL;
        if (spec->cwd && space_kv_add(kv, "cwd", spec->cwd) < 0)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "bad cwd") ?: -EINVAL;
        if (spec->user && space_kv_add(kv, "user", spec->user) < 0)
                return -ENOMEM;
        if (space_kv_add(kv, "stdin", spec->want_stdin ? "1" : "0") < 0 ||
            (hold && space_kv_add(kv, "hold", "1") < 0))
                return -ENOMEM;
        if (spec->pty && (space_kv_add(kv, "pty", "1") < 0 || space_kv_addf(kv, "rows", "%u", spec->rows ?: 24) < 0 ||
                          space_kv_addf(kv, "cols", "%u", spec->cols ?: 80) < 0))
                return -ENOMEM;
        if (kv->len > SPACE_FRAME_PAYLOAD_MAX)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "argv, env and cwd together are too long") ?: -E2BIG;
        return 0;
}

static Process *find_live(const char *sandbox_id, int pid, const char *session_id);

/* Keeps the sandbox's process logs under PROCESS_LOGS_MAX: the oldest of ended processes are removed (their
 * events are then reported lost to a reader); what running ones hold cannot go, so then no new process.
 * The directory holds up to PROCESS_KEEP_FINISHED logs, so it is scanned only when the bytes counted since
 * the last scan (never fewer than are there: removals and rotations are not taken off) may have passed the
 * limit: an agent's thousandth exec costs no thousand stat() calls. */
static int logs_make_room(Sandbox *s, Error *reterr) {
        _cleanup_free_ char *dir = NULL;
        struct { char name[32]; uint64_t size; int64_t mtime; } *files = NULL;
        size_t n = 0, cap = 0;
        uint64_t total = 0, running = 0;
        bool complete = true;
        struct dirent *de;
        DIR *d;
        int r = 0;
        ChannelSandbox *cs = channel_sandbox->channel(s);
        const char *data_dir = channel_sandbox->data_dir(s);

        if (cs->process_log_bytes_known && cs->process_log_bytes <= PROCESS_LOGS_MAX)
                return 0;
        if (!data_dir || asprintf(&dir, "%s/processes", data_dir) < 0)
                return 0;
        d = opendir(dir);
        if (!d) {
                cs->process_log_bytes = 0;
                cs->process_log_bytes_known = errno == ENOENT;
                return 0;
        }
        while ((de = readdir(d))) {
                struct stat st;
                int pid;
                Process *live;

                if (strlen(de->d_name) >= sizeof files->name || sscanf(de->d_name, "%d.log", &pid) != 1 || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode))
                        continue;
                total += (uint64_t) st.st_size;
                live = find_live(channel_sandbox->id(s), pid, NULL);
                if (live && !live->ended) {
                        running += (uint64_t) st.st_size;
                        continue;
                }
                if (n == cap) {
                        void *m = realloc(files, (cap = cap ? cap * 2 : 64) * sizeof *files);
                        if (!m) {
                                complete = false;
                                break;
                        }
                        files = m;
                }
                strcpy(files[n].name, de->d_name);   /* length checked above */
                files[n].size = (uint64_t) st.st_size;
                files[n].mtime = st.st_mtim.tv_sec;
                n++;
        }
        while (total > PROCESS_LOGS_MAX && n > 0) {
                size_t oldest = 0;

                for (size_t i = 1; i < n; i++)
                        if (files[i].mtime < files[oldest].mtime)
                                oldest = i;
                if (unlinkat(dirfd(d), files[oldest].name, 0) >= 0)
                        total -= files[oldest].size;
                files[oldest] = files[--n];
        }
        if (total > PROCESS_LOGS_MAX)
                r = error_set(reterr, ERROR_TOO_MANY_PROCESSES,
                              "sandbox %s: the logs of its running processes take %llu MiB, over the limit of %llu MiB "
                              "per sandbox; end some of them first", channel_sandbox->id(s),
                              (unsigned long long) (running >> 20), (unsigned long long) (PROCESS_LOGS_MAX >> 20)) ?: -ENOSPC;
        cs->process_log_bytes = total;
        cs->process_log_bytes_known = complete;
        closedir(d);
        free(files);
        return r;
}

/* Creates the process and sends EXEC. */
static int start(Sandbox *s, const ExecSpec *spec, bool hold, Process **ret, Error *reterr) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        Process *p;
        int q;

        if (!(*channel_sandbox->agent(s)))
                return error_set(reterr, ERROR_SANDBOX_NOT_RUNNING,
                                 "sandbox %s is not connected to its agent (state %s)", channel_sandbox->id(s),
                                 channel_sandbox->state_name(s)) ?: -ENOTCONN;
        q = build_exec(spec, hold, &kv, reterr);
        if (q < 0)
                return q;
        q = logs_make_room(s, reterr);
        if (q < 0)
                return q;

        p = process_new(channel_sandbox->manager(s), s);
        if (!p)
                return -ENOMEM;
        p->argv = strv_copy(spec->argv);
        /* with a user and no cwd the agent picks the user's home, and says so in STARTED */
        p->cwd = spec->cwd || !spec->user ? strdup(spec->cwd ?: "/") : NULL;
        p->user = spec->user ? strdup(spec->user) : NULL;
        p->pty = spec->pty;
        p->want_stdin = spec->want_stdin || spec->pty;
        p->stdin_closed = !p->want_stdin;
        p->timeout_sec = spec->timeout_sec;
        p->started_at = now_unix();
        p->state = PROCESS_STARTING;
        if (!p->argv || (!p->cwd && (spec->cwd || !spec->user)) || (!p->user && spec->user)) {
                p->ended = true;
                process_maybe_free(p);
                return -ENOMEM;
        }
        q = agent_register_process((*channel_sandbox->agent(s)), p);
        if (q < 0) {
                p->ended = true;
                process_maybe_free(p);
                return error_set(reterr, ERROR_TOO_MANY_PROCESSES,
                                 "sandbox %s has too many processes with open streams (limit %u)", channel_sandbox->id(s),
                                 SPACE_STREAMS_MAX) ?: -EMFILE;
        }
        q = agent_send(p->agent, SPACE_F_EXEC, 0, p->stream, kv.data, kv.len);
        if (q < 0) {
                p->ended = true;
                process_maybe_free(p);
                return error_set(reterr, ERROR_INTERNAL, "cannot send to the agent: %s", strerror(-q)) ?: q;
        }
        *ret = p;
        return 0;
}

int process_exec(Sandbox *s, const ExecSpec *spec, Process **ret, Error *reterr) {
        return start(s, spec, false, ret, reterr);
}

int process_session_create(Sandbox *s, const ExecSpec *spec, const ChannelWaiter *creator, Process **ret,
                           Error *reterr) {
        Process *p;
        int q;

        q = start(s, spec, true, &p, reterr);
        if (q < 0)
                return q;
        if (random_hex(p->session_id + 4, 16) < 0) {
                process_fail(p, ERROR_INTERNAL, "no randomness");
                return -EIO;
        }
        memcpy(p->session_id, "ses-", 4);
        p->creator = *creator;
        *ret = p;
        return 0;
}

static bool token_slot_free(const SessionToken *t, int64_t now) {
        return !t->token[0] || t->expires_at <= now - 86400; /* keep expired ones a day: "expired", not "invalid" */
}

int process_session_token(Process *p, const SessionToken **ret) {
        int64_t now = now_unix();
        SessionToken *slot = NULL;

        for (size_t i = 0; i < SESSION_TOKENS_MAX && !slot; i++)
                if (token_slot_free(&p->tokens[i], now))
                        slot = &p->tokens[i];
        if (!slot) {
                slot = &p->tokens[0];
                for (size_t i = 1; i < SESSION_TOKENS_MAX; i++)
                        if (p->tokens[i].expires_at < slot->expires_at)
                                slot = &p->tokens[i];
        }
        if (random_hex(slot->token, SESSION_TOKEN_LEN) < 0)
                return -EIO;
        slot->expires_at = now + SESSION_TOKEN_TTL_SEC;
        *ret = slot;
        return 0;
}

int process_check_token(Process *p, const char *token) {
        int64_t now = now_unix();
        int r = -EACCES;

        if (!token || strlen(token) != SESSION_TOKEN_LEN)
                return -EACCES;
        /* Compare with every slot, always: the time taken does not depend on which one matches. */
        for (size_t i = 0; i < SESSION_TOKENS_MAX; i++) {
                bool match = p->tokens[i].token[0] && memeq_const_time(p->tokens[i].token, token, SESSION_TOKEN_LEN);

                if (match)
                        r = p->tokens[i].expires_at > now ? 0 : (r == 0 ? 0 : -EKEYEXPIRED);
        }
        return r;
}

/* ---- lookups ---- */

static Process *find_live(const char *sandbox_id, int pid, const char *session_id) {
        Process *best = NULL;

        for (Process *p = processes; p; p = p->next) {
                if (!streq(p->sandbox_id, sandbox_id) || p->pid <= 0)
                        continue;
                if (session_id ? !streq(p->session_id, session_id) : p->pid != pid)
                        continue;
                if (!best || (best->ended && !p->ended))
                        best = p;
        }
        return best;
}

Process *process_find_by_pid(Sandbox *s, int pid) {
        Process *p = find_live(channel_sandbox->id(s), pid, NULL);
        return p && !p->ended ? p : NULL;
}

static bool is_live_of(Process *p, Sandbox *s) {
        return !p->ended && p->pid > 0 && streq(p->sandbox_id, channel_sandbox->id(s));
}

Process *process_find_by_tag(Sandbox *s, const char *tag) {
        for (Process *p = processes; p; p = p->next)
                if (is_live_of(p, s) && streq_ptr(p->tag, tag))
                        return p;
        return NULL;
}

Process *process_next_live(Sandbox *s, Process *after) {
        for (Process *p = after ? after->next : processes; p; p = p->next)
                if (is_live_of(p, s))
                        return p;
        return NULL;
}

static void set_log_path(Process *p, const char *path) {
        free(p->log_path);
        p->log_path = path ? strdup(path) : NULL;
}

/* A process from its row: ended ones only serve their log; running ones wait for adoption. */
static Process *process_from_record(Manager *m, Sandbox *s, const ProcessRecord *rec) {
        Process *p = process_new(m, s);
        uint64_t first = 0, last = 0;

        if (!p)
                return NULL;
        p->pid = rec->pid;
        p->stream = rec->stream;
        if (rec->session_id && strlen(rec->session_id) == SESSION_ID_LEN)
                memcpy(p->session_id, rec->session_id, SESSION_ID_LEN + 1);
        p->argv = strv_from_json_text(rec->argv);
        p->cwd = rec->cwd ? strdup(rec->cwd) : NULL;
        p->user = rec->user ? strdup(rec->user) : NULL;
        p->pty = rec->pty;
        p->want_stdin = true;
        if (process_state_from_string(rec->state, &p->state) < 0 || p->state == PROCESS_STARTING)
                p->state = PROCESS_LOST;
        p->exit_code = rec->exit_code;
        p->signal = rec->signal;
        p->timed_out = rec->timed_out;
        p->timeout_sec = rec->timeout;
        p->started_at = rec->started_at;
        p->exited_at = rec->exited_at;
        p->saved = true;
        set_log_path(p, rec->log_path);
        p->last_id = rec->last_event_id;
        if (p->log_path && process_log_range(p->log_path, &first, &last) >= 0 && last > p->last_id)
                p->last_id = last;
        p->read_mark = p->last_id;
        p->ended = p->state == PROCESS_EXITED || p->state == PROCESS_LOST;
        return p;
}

static Process *get(Manager *m, Sandbox *s, int pid, const char *session_id) {
        ProcessRecord rec = {};
        Process *p = find_live(channel_sandbox->id(s), pid, session_id);

        if (p)
                return p;
        if ((session_id ? store_get_session(m->store, channel_sandbox->id(s), session_id, &rec)
                        : store_get_process(m->store, channel_sandbox->id(s), pid, &rec)) < 0)
                return NULL;
        if (!streq(rec.state, "exited") && !streq(rec.state, "lost")) {
                /* a running one not adopted (yet): it is known once the channel is up */
                process_record_done(&rec);
                return NULL;
        }
        p = process_from_record(m, s, &rec);
        process_record_done(&rec);
        return p;
}

Process *process_get(Manager *m, Sandbox *s, int pid) {
        return get(m, s, pid, NULL);
}

Process *process_get_session(Manager *m, Sandbox *s, const char *session_id) {
        return get(m, s, 0, session_id);
}

/* ---- JSON ---- */

static cJSON *json_common(int pid, const char *session_id, char **argv, const char *argv_json, const char *cwd,
                          const char *user, bool pty, const char *state, int exit_code, int sig, bool timed_out,
                          int64_t started_at, int64_t exited_at, uint64_t last_id, unsigned attached) {
        cJSON *o = cJSON_CreateObject(), *a;
        char ts[32];

        cJSON_AddNumberToObject(o, "pid", pid);
        if (session_id && *session_id)
                cJSON_AddStringToObject(o, "session_id", session_id);
        else
                cJSON_AddNullToObject(o, "session_id");
        if (argv_json) {
                a = cJSON_Parse(argv_json);
                cJSON_AddItemToObject(o, "argv", cJSON_IsArray(a) ? a : (cJSON_Delete(a), cJSON_CreateArray()));
        } else
                cJSON_AddItemToObject(o, "argv", json_array_from_strv(argv));
        cJSON_AddStringToObject(o, "cwd", cwd ?: "/");
        cJSON_AddStringToObject(o, "user", user ?: "root");
        cJSON_AddBoolToObject(o, "pty", pty);
        cJSON_AddStringToObject(o, "state", state);
        if (exit_code >= 0)
                cJSON_AddNumberToObject(o, "exit_code", exit_code);
        else
                cJSON_AddNullToObject(o, "exit_code");
        if (sig > 0)
                cJSON_AddNumberToObject(o, "signal", sig);
        else
                cJSON_AddNullToObject(o, "signal");
        cJSON_AddBoolToObject(o, "timed_out", timed_out);
        format_rfc3339(started_at, ts);
        cJSON_AddStringToObject(o, "started_at", ts);
        if (exited_at > 0) {
                format_rfc3339(exited_at, ts);
                cJSON_AddStringToObject(o, "exited_at", ts);
        } else
                cJSON_AddNullToObject(o, "exited_at");
        cJSON_AddNumberToObject(o, "last_event_id", (double) last_id);
        cJSON_AddNumberToObject(o, "attached", attached);
        return o;
}

cJSON *process_to_json(Process *p) {
        return json_common(p->pid, p->session_id, p->argv, NULL, p->cwd, p->user, p->pty,
                           process_state_to_string(p->state), p->exit_code, p->signal, p->timed_out, p->started_at,
                           p->state == PROCESS_EXITED || p->state == PROCESS_LOST ? p->exited_at : 0, p->last_id,
                           p->n_following);
}

cJSON *process_record_to_json(const ProcessRecord *rec) {
        Process *p = find_live(rec->sandbox_id, rec->pid, NULL);

        if (p)
                return process_to_json(p);
        /* A row that says running, with no process behind it: the channel is not up (yet). */
        return json_common(rec->pid, rec->session_id, NULL, rec->argv, rec->cwd, rec->user, rec->pty, rec->state,
                           rec->exit_code, rec->signal, rec->timed_out, rec->started_at, rec->exited_at,
                           rec->last_event_id, 0);
}

/* ---- requests to the guest ---- */

int process_signal(Process *p, int sig) {
        uint8_t le[4];

        if (p->ended || !p->agent || p->state == PROCESS_STARTING)
                return -ESRCH;
        space_put_le32(le, (uint32_t) sig);
        return agent_send(p->agent, SPACE_F_SIGNAL, 0, p->stream, le, 4);
}

int process_close_stdin(Process *p) {
        if (p->stdin_closed)
                return 0;
        if (p->ended || !p->agent)
                return -ESRCH;
        p->stdin_closed = true;
        return agent_send(p->agent, SPACE_F_EOF, 0, p->stream, NULL, 0);
}

int process_resize(Process *p, unsigned rows, unsigned cols) {
        uint8_t b[4];

        if (!p->pty)
                return -ENOTTY;
        if (p->ended || !p->agent)
                return -ESRCH;
        space_put_le16(b, (uint16_t) rows);
        space_put_le16(b + 2, (uint16_t) cols);
        return agent_send(p->agent, SPACE_F_RESIZE, 0, p->stream, b, 4);
}

ssize_t process_write_stdin(Process *p, const char *data, size_t n, const ChannelWaiter *waiter) {
        size_t sent = 0;

        while (sent < n && p->stdin_credit.available > 0 && !p->ended && p->agent) {
                size_t chunk = n - sent;

                if (chunk > SPACE_FRAME_PAYLOAD_MAX)
                        chunk = SPACE_FRAME_PAYLOAD_MAX;
                if (chunk > p->stdin_credit.available)
                        chunk = (size_t) p->stdin_credit.available;
                if (agent_send(p->agent, SPACE_F_DATA, 0, p->stream, data + sent, chunk) < 0)
                        break;
                (void) space_credit_take(&p->stdin_credit, chunk);
                sent += chunk;
        }
        if (p->ended)
                return -EPIPE;
        if (sent < n)
                p->upload = *waiter;
        return (ssize_t) sent;
}

void process_stdin_unwait(Process *p, const ChannelWaiter *waiter) {
        if (p->upload.wake == waiter->wake && p->upload.userdata == waiter->userdata)
                p->upload = (ChannelWaiter) {};
        process_maybe_free(p);
}

/* ---- from the channel ---- */

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

static void open_log(Process *p) {
        Sandbox *s = process_sandbox(p);
        _cleanup_free_ char *dir = NULL, *path = NULL;
        int r;

        if (!s || !channel_sandbox->data_dir(s) || asprintf(&dir, "%s/processes", channel_sandbox->data_dir(s)) < 0 ||
            asprintf(&path, "%s/%d.log", dir, p->pid) < 0)
                return;
        /* Most sandboxes have the directory after their first command: one mkdir, not one per path level. */
        r = mkdir(dir, 0700) < 0 && errno != EEXIST ? -errno : 0;
        if (r == -ENOENT)
                r = space_mkdir_p(dir, 0700);
        if (r >= 0)
                r = process_log_create(path, PROCESS_LOG_CAP, &p->log);
        if (r >= 0)
                channel_sandbox->channel(s)->process_log_bytes += LOG_RECORD_OVERHEAD;
        if (r < 0) {
                log_warning_errno(r, "sandbox %s: cannot create the log %s", p->sandbox_id, path);
                return;
        }
        set_log_path(p, path);
}

static bool cwd_reported_valid(const char *v) {
        size_t n = strnlen(v, PATH_MAX);

        if (v[0] != '/' || n >= PATH_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) v[i] < 0x20 || v[i] == 0x7f)
                        return false;
        return true;
}

static void on_started(Process *p, const uint8_t *payload, size_t n) {
        const char *v;
        long pid, held = 0;
        cJSON *o;

        if (space_kv_get(payload, n, "pid", &v) <= 0 || parse_int(v, 1, INT_MAX, &pid) < 0) {
                process_fail(p, ERROR_PROTOCOL_ERROR, "the agent sent a bad start message");
                return;
        }
        if (space_kv_get(payload, n, "held", &v) > 0)
                (void) parse_int(v, 0, 1, &held);
        /* where the agent put a process we gave no cwd (a user's home): shown to users, so checked */
        if (!p->cwd && space_kv_get(payload, n, "cwd", &v) > 0 && cwd_reported_valid(v))
                p->cwd = strdup(v);

        if (p->adopting) {
                p->adopting = false;
                if (pid != p->pid) {
                        process_fail(p, ERROR_PROCESS_LOST, "the agent has another process on this stream");
                        return;
                }
                p->state = held ? PROCESS_HELD : PROCESS_RUNNING;
                arm_timeout(p);
                process_save(p);
                return;
        }
        if (p->state != PROCESS_STARTING) {
                process_fail(p, ERROR_PROTOCOL_ERROR, "the agent started a process twice");
                return;
        }
        p->pid = (int) pid;
        p->state = held ? PROCESS_HELD : PROCESS_RUNNING;
        p->started_at = now_unix();
        /* a pid the guest reused: the new process takes the row and the log name. process_fail() may free q
         * (nobody follows it), so its successor is taken first. */
        for (Process *q = processes, *next; q; q = next) {
                next = q->next;
                if (q != p && q->pid == p->pid && streq(q->sandbox_id, p->sandbox_id) && !q->ended)
                        process_fail(q, ERROR_PROCESS_LOST, "the guest reused this process id");
        }
        open_log(p);
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "pid", (double) pid);
        append_json(p, EVENT_STARTED, o);
        arm_timeout(p);
        process_save(p);
        prune_finished(p);
        channel_waiter_wake(&p->creator);
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
                end_with_error(p, PROCESS_LOST, ERROR_PROTOCOL_ERROR, "the agent reported an exit without a status");
                return;
        }
        p->adopting = false;
        p->exit_code = sig > 0 ? 128 + (int) sig : (int) code;
        p->signal = (int) sig;
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "exit_code", p->exit_code);
        if (sig > 0)
                cJSON_AddNumberToObject(o, "signal", (double) sig);
        else
                cJSON_AddNullToObject(o, "signal");
        cJSON_AddBoolToObject(o, "timed_out", p->timed_out);
        append_json(p, EVENT_EXITED, o);
        p->state = PROCESS_EXITED;
        process_end(p);
}

/* The codes an agent may give a failed EXEC (stage=user): the guest does not get to make up error codes, so
 * any other one, or none, leaves the stage and errno to decide. */
static int guest_exec_code(const uint8_t *payload, size_t n, ErrorCode *ret) {
        SpaceCode sc;

        if (space_kv_get_code(payload, n, &sc) <= 0)
                return -EINVAL;
        switch (sc) {
        case SPACE_CODE_UNKNOWN_USER:
                *ret = ERROR_UNKNOWN_USER;
                return 0;
        case SPACE_CODE_UNKNOWN_GROUP:
                *ret = ERROR_UNKNOWN_GROUP;
                return 0;
        case SPACE_CODE_INVALID_USER:
                *ret = ERROR_INVALID_USER;
                return 0;
        default:
                return -EINVAL;
        }
}

static void on_error_frame(Process *p, const uint8_t *payload, size_t n) {
        const char *v, *msg = NULL;
        ErrorCode code;
        long err = 0;
        char text[512];

        if (space_kv_get(payload, n, "errno", &v) > 0)
                (void) parse_int(v, 0, 4095, &err);
        if (p->adopting) {
                p->adopting = false;
                end_with_error(p, PROCESS_LOST, ERROR_PROCESS_LOST,
                               "the sandbox's agent no longer knows this process (the sandbox was restored or "
                               "rebooted)");
                return;
        }
        (void) space_kv_get(payload, n, "message", &msg);
        /* The guest's message is shown to the user, so keep it short and printable. */
        snprintf(text, sizeof text, "%s", msg ? msg : strerror((int) err));
        for (char *c = text; *c; c++)
                if ((unsigned char) *c < 0x20 || (unsigned char) *c == 0x7f)
                        *c = '?';
        /* A held child that cannot exec exits like a shell would. */
        if (p->pid > 0)
                p->exit_code = err == ENOENT ? 127 : 126;
        if (guest_exec_code(payload, n, &code) >= 0)
                end_with_error(p, PROCESS_EXITED, code, text);
        else if (space_kv_get(payload, n, "stage", &v) > 0 && streq(v, "chdir"))
                end_with_error(p, PROCESS_EXITED, ERROR_INVALID_CWD, text);
        else if (err == ENOENT)
                end_with_error(p, PROCESS_EXITED, ERROR_COMMAND_NOT_FOUND, text);
        else if (err == EACCES || err == ENOEXEC)
                end_with_error(p, PROCESS_EXITED, ERROR_PERMISSION_DENIED, text);
        else
                end_with_error(p, PROCESS_EXITED, ERROR_EXEC_FAILED, text);
}

static void on_data(Process *p, const SpaceFrameHeader *h, const uint8_t *payload) {
        if (h->fd != 1 && h->fd != 2)
                return;
        if (h->length > p->credit_left[h->fd]) {
                process_fail(p, ERROR_PROTOCOL_ERROR, "the agent overran its flow-control window");
                return;
        }
        p->credit_left[h->fd] -= h->length;
        if (h->length == 0 || p->state == PROCESS_STARTING)
                return;
        if (append_event(p, h->fd == 1 ? EVENT_STDOUT : EVENT_STDERR, payload, h->length) < 0) {
                process_fail(p, ERROR_INTERNAL, "out of memory keeping the output");
                return;
        }
        note_output(p, h->fd, h->length);
        flow_update(p);
}

void process_on_frame(Process *p, const SpaceFrameHeader *h, const uint8_t *payload) {
        if (p->ended)
                return;
        switch (h->type) {
        case SPACE_F_STARTED:
                on_started(p, payload, h->length);
                break;
        case SPACE_F_DATA:
                on_data(p, h, payload);
                break;
        case SPACE_F_CREDIT:
                if (h->fd != 0 || h->length != 4) {
                        process_fail(p, ERROR_PROTOCOL_ERROR, "the agent sent a malformed credit");
                        return;
                }
                /* clamped: after an adoption the guest may return credit from before it */
                space_credit_give_clamp(&p->stdin_credit, space_get_le32(payload));
                channel_waiter_wake(&p->upload);
                break;
        case SPACE_F_ERROR:
                on_error_frame(p, payload, h->length);
                break;
        case SPACE_F_EXIT:
                on_exit_frame(p, payload, h->length);
                break;
        default:
                break;
        }
}

void process_fail(Process *p, ErrorCode code, const char *message) {
        if (!p->ended && p->agent && code != ERROR_SANDBOX_GONE && code != ERROR_CHANNEL_LOST)
                (void) process_signal(p, SIGKILL);
        end_with_error(p, PROCESS_LOST, code, message);
        process_maybe_free(p);
}

void process_orphan(Process *p) {
        p->agent = NULL;
        p->adopting = false;
        p->timeout_source = sd_event_source_disable_unref(p->timeout_source);
        if (p->state == PROCESS_STARTING)
                /* EXEC went out and no answer came: we cannot know its stream's fate */
                process_fail(p, ERROR_CHANNEL_LOST, "lost the channel to the sandbox's agent while starting the process");
        else
                channel_waiter_wake(&p->upload);
}

static void adopt_one(AgentConn *a, Process *p) {
        if (agent_register_stream(a, p, p->stream) < 0) {
                process_fail(p, ERROR_PROCESS_LOST, "cannot take the process over again");
                return;
        }
        p->adopting = true;
        /* We cannot know what credit the stream has left: allow what may still be in flight on top of a fresh
         * window (the guest clamps what we grant at the window). */
        p->credit_left[1] = p->credit_left[2] = 2ULL * SPACE_STREAM_WINDOW;
        p->n_blocks = 0;
        space_credit_init(&p->stdin_credit);
        p->adopt_sent = now_usec_monotonic();
        if (agent_send(a, SPACE_F_ADOPT, 0, p->stream, NULL, 0) < 0) {
                process_fail(p, ERROR_CHANNEL_LOST, "cannot reach the agent");
                return;
        }
        send_credit(p, 1, SPACE_STREAM_WINDOW);
        send_credit(p, 2, SPACE_STREAM_WINDOW);
        p->credit_left[1] = p->credit_left[2] = 2ULL * SPACE_STREAM_WINDOW;
}

void process_adopt_all(AgentConn *a, Sandbox *s) {
        ProcessRecord *recs = NULL;
        size_t n = 0;
        Process *p, *next;

        for (p = processes; p; p = next) {
                next = p->next;
                if (streq(p->sandbox_id, channel_sandbox->id(s)) && !p->agent && !p->ended && p->pid > 0)
                        adopt_one(a, p);
        }
        if (store_load_processes(channel_sandbox->manager(s)->store, channel_sandbox->id(s), NULL, &recs, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                ProcessRecord *rec = &recs[i];

                if ((streq(rec->state, "held") || streq(rec->state, "running")) && !find_live(channel_sandbox->id(s), rec->pid, NULL)) {
                        p = process_from_record(channel_sandbox->manager(s), s, rec);
                        if (p && p->log_path && process_log_open(p->log_path, PROCESS_LOG_CAP, &p->log) >= 0)
                                p->last_id = p->log->last_id;
                        if (p && !p->ended) {
                                struct stat st;

                                /* Who read what before the restart is not known: count everything the log
                                 * holds as unread, so nothing is rotated away before a client comes. */
                                p->read_mark = p->last_id;
                                p->unread_bytes = 0;
                                if (p->log_path && stat(p->log_path, &st) >= 0)
                                        p->unread_bytes += (uint64_t) st.st_size;
                                if (p->log_path) {
                                        _cleanup_free_ char *old = NULL;
                                        if (asprintf(&old, "%s.1", p->log_path) >= 0 && stat(old, &st) >= 0)
                                                p->unread_bytes += (uint64_t) st.st_size;
                                }
                                log_info("sandbox %s: taking process %d over again", channel_sandbox->id(s), p->pid);
                                p->inherited = true;
                                adopt_one(a, p);
                        }
                } else if (streq(rec->state, "starting")) {
                        rec->state = (free(rec->state), strdup("lost"));
                        (void) store_put_process(channel_sandbox->manager(s)->store, rec);
                }
                process_record_done(rec);
        }
        free(recs);
}
