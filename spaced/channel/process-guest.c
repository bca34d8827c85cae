/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "channel/agent-internal.h"
#include "channel/channel.h"
#include "channel/process-internal.h"
#include "channel/process.h"
#include "core/log.h"
#include "core/util.h"
#include "macro.h"
#include "paths.h"
#include "string-util.h"

/* A process's side of the channel: what goes to the guest (signals, stdin, resizes) and what comes back (STARTED,
 * DATA, CREDIT, ERROR, EXIT), checked as the guest's, and taking processes over again after a reconnect. */

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
        process_set_log_path(p, path);
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
                process_arm_timeout(p);
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
        for (Process *q = process_list, *next; q; q = next) {
                next = q->next;
                if (q != p && q->pid == p->pid && streq(q->sandbox_id, p->sandbox_id) && !q->ended)
                        process_fail(q, ERROR_PROCESS_LOST, "the guest reused this process id");
        }
        open_log(p);
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "pid", (double) pid);
        process_append_json(p, EVENT_STARTED, o);
        process_arm_timeout(p);
        process_save(p);
        process_prune_finished(p);
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
                process_end_with_error(p, PROCESS_LOST, ERROR_PROTOCOL_ERROR, "the agent reported an exit without a status");
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
        process_append_json(p, EVENT_EXITED, o);
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


/* Said so that nobody takes it for spacectl's or the daemon's failure: the command is not in this sandbox,
 * which was made from this template (a template without it, such as minimal without python3, is the usual
 * cause). */
static void command_not_found(Process *p, const char *guest_text) {
        Sandbox *s = channel_sandbox ? channel_sandbox->find(p->manager, p->sandbox_id) : NULL;
        const char *template = s && channel_sandbox->template_name ? channel_sandbox->template_name(s) : NULL;
        char text[768];

        snprintf(text, sizeof text, "%.200s: command not found in sandbox %.12s%s%.200s%s (%.200s)",
                 p->argv && p->argv[0] ? p->argv[0] : "the command", p->sandbox_id, template ? " (template " : "",
                 template ?: "", template ? ")" : "", guest_text);
        for (char *c = text; *c; c++)
                if ((unsigned char) *c < 0x20 || (unsigned char) *c == 0x7f)
                        *c = '?';
        process_end_with_error(p, PROCESS_EXITED, ERROR_COMMAND_NOT_FOUND, text);
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
                process_end_with_error(p, PROCESS_LOST, ERROR_PROCESS_LOST,
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
                process_end_with_error(p, PROCESS_EXITED, code, text);
        else if (space_kv_get(payload, n, "stage", &v) > 0 && streq(v, "chdir"))
                process_end_with_error(p, PROCESS_EXITED, ERROR_INVALID_CWD, text);
        else if (err == ENOENT)
                command_not_found(p, text);
        else if (err == EACCES || err == ENOEXEC)
                process_end_with_error(p, PROCESS_EXITED, ERROR_PERMISSION_DENIED, text);
        else
                process_end_with_error(p, PROCESS_EXITED, ERROR_EXEC_FAILED, text);
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
        if (process_append_event(p, h->fd == 1 ? EVENT_STDOUT : EVENT_STDERR, payload, h->length) < 0) {
                process_fail(p, ERROR_INTERNAL, "out of memory keeping the output");
                return;
        }
        process_note_output(p, h->fd, h->length);
        process_flow_update(p);
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
        process_end_with_error(p, PROCESS_LOST, code, message);
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
        process_send_credit(p, 1, SPACE_STREAM_WINDOW);
        process_send_credit(p, 2, SPACE_STREAM_WINDOW);
        p->credit_left[1] = p->credit_left[2] = 2ULL * SPACE_STREAM_WINDOW;
}

void process_adopt_all(AgentConn *a, Sandbox *s) {
        ProcessRecord *recs = NULL;
        size_t n = 0;
        Process *p, *next;

        for (p = process_list; p; p = next) {
                next = p->next;
                if (streq(p->sandbox_id, channel_sandbox->id(s)) && !p->agent && !p->ended && p->pid > 0)
                        adopt_one(a, p);
        }
        if (store_load_processes(channel_sandbox->manager(s)->store, channel_sandbox->id(s), NULL, &recs, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                ProcessRecord *rec = &recs[i];

                if ((streq(rec->state, "held") || streq(rec->state, "running")) && !process_find_live(channel_sandbox->id(s), rec->pid, NULL)) {
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

