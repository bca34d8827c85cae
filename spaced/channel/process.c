/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include "string-util.h"

/* A process's life (see process.h): made and started (EXEC, held or not), its session's tokens, its end, and
 * when it is freed. Its events and clients are process-events.c's, its frames process-guest.c's, its row and
 * the lookups process-table.c's. */

Process *process_list;
static sd_event_source *sweep_source;

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
Sandbox *process_sandbox(Process *p) {
        return p->agent ? p->agent->sandbox : channel_sandbox->find(p->manager, p->sandbox_id);
}

/* The process is over: the final event is in, the guest forgets the stream. */
void process_end(Process *p) {
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
        process_wake_clients(p);
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

Process *process_new(Manager *m, Sandbox *s) {
        Process *p = calloc(1, sizeof *p);

        if (!p)
                return NULL;
        p->manager = m;
        memcpy(p->sandbox_id, channel_sandbox->id(s), sizeof p->sandbox_id);
        p->exit_code = -1;
        p->ring.cap = PROCESS_RING_CAP;
        p->credit_left[1] = p->credit_left[2] = SPACE_STREAM_WINDOW;
        space_credit_init(&p->stdin_credit);
        p->next = process_list;
        process_list = p;
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
        for (Process **i = &process_list; *i; i = &(*i)->next)
                if (*i == p) {
                        *i = p->next;
                        break;
                }
        while (p->clients)
                process_client_free(p->clients);
        if (p->agent)
                agent_unregister_process(p->agent, p);
        sd_event_source_disable_unref(p->timeout_source);
        process_ring_free(p);
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
        process_ring_free(p); /* only the log is read from now on */
        if (p->pid > 0 && p->log_path && tokens_alive(p) && process_sandbox(p))
                return p;
        process_free(p);
        return NULL;
}

/* Every 2 s: processes whose sandbox went away end; idle ones are freed. */
static int on_sweep(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        Process *p, *next;

        for (p = process_list; p; p = next) {
                Sandbox *sb = process_sandbox(p);

                next = p->next;
                if (!p->ended && (!sb || (channel_sandbox->phase(sb) == CHANNEL_SANDBOX_DELETING && !p->agent)))
                        process_end_with_error(p, PROCESS_LOST, ERROR_SANDBOX_GONE, "the sandbox was removed while the process ran");
                else if (!p->ended && !p->agent && sb && channel_sandbox->phase(sb) == CHANNEL_SANDBOX_DOWN)
                        process_end_with_error(p, PROCESS_LOST, ERROR_CHANNEL_LOST, "the sandbox stopped while the process ran");
                else if (!p->ended && p->adopting && p->agent && now_usec_monotonic() - p->adopt_sent > 2000000ULL) {
                        /* no answer yet (the first frames after a reconnect can be lost): ask again */
                        p->adopt_sent = now_usec_monotonic();
                        (void) agent_send(p->agent, SPACE_F_ADOPT, 0, p->stream, NULL, 0);
                }
                (void) process_maybe_free(p);
        }
        if (!process_list) {
                sweep_source = sd_event_source_disable_unref(sweep_source);
                return 0;
        }
        (void) sd_event_source_set_time_relative(s, 2 * 1000000ULL);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        (void) m;
        return 0;
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
                        process_end_with_error(p, PROCESS_LOST, ERROR_CANCELLED, "the session's creator went away");
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

void process_arm_timeout(Process *p) {
        int64_t left;

        p->timeout_source = sd_event_source_disable_unref(p->timeout_source);
        if (p->timeout_sec == 0 || p->state != PROCESS_RUNNING)
                return;
        left = p->started_at + (int64_t) p->timeout_sec - now_unix();
        (void) sd_event_add_time_relative(p->manager->event, &p->timeout_source, CLOCK_MONOTONIC,
                                          left > 0 ? (uint64_t) left * 1000000ULL : 1, 1000, on_timeout, p);
}

void process_release(Process *p) {
        if (p->state != PROCESS_HELD || !p->agent)
                return;
        if (agent_send(p->agent, SPACE_F_RELEASE, 0, p->stream, NULL, 0) < 0)
                return;
        p->state = PROCESS_RUNNING;
        p->started_at = now_unix();
        process_arm_timeout(p);
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
                live = process_find_live(channel_sandbox->id(s), pid, NULL);
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

        if (!channel_sandbox->channel(s)->agent)
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
        q = agent_register_process(channel_sandbox->channel(s)->agent, p);
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

