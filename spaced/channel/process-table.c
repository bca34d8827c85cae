/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "channel/channel.h"
#include "channel/process-internal.h"
#include "channel/process.h"
#include "core/log.h"
#include "core/util.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"

/* A process's row in the processes table (core/store.h), what is found by pid, session or tag, in memory or from
 * its row, and the JSON /v1 shows of it. */

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

void process_save(Process *p) {
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

void process_prune_finished(Process *p) {
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

/* ---- lookups ---- */

Process *process_find_live(const char *sandbox_id, int pid, const char *session_id) {
        Process *best = NULL;

        for (Process *p = process_list; p; p = p->next) {
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
        Process *p = process_find_live(channel_sandbox->id(s), pid, NULL);
        return p && !p->ended ? p : NULL;
}

static bool is_live_of(Process *p, Sandbox *s) {
        return !p->ended && p->pid > 0 && streq(p->sandbox_id, channel_sandbox->id(s));
}

Process *process_find_by_tag(Sandbox *s, const char *tag) {
        for (Process *p = process_list; p; p = p->next)
                if (is_live_of(p, s) && streq_ptr(p->tag, tag))
                        return p;
        return NULL;
}

Process *process_next_live(Sandbox *s, Process *after) {
        for (Process *p = after ? after->next : process_list; p; p = p->next)
                if (is_live_of(p, s))
                        return p;
        return NULL;
}

void process_set_log_path(Process *p, const char *path) {
        free(p->log_path);
        p->log_path = path ? strdup(path) : NULL;
}

/* A process from its row: ended ones only serve their log; running ones wait for adoption. */
Process *process_from_record(Manager *m, Sandbox *s, const ProcessRecord *rec) {
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
        process_set_log_path(p, rec->log_path);
        p->last_id = rec->last_event_id;
        if (p->log_path && process_log_range(p->log_path, &first, &last) >= 0 && last > p->last_id)
                p->last_id = last;
        p->read_mark = p->last_id;
        p->ended = p->state == PROCESS_EXITED || p->state == PROCESS_LOST;
        return p;
}

static Process *get(Manager *m, Sandbox *s, int pid, const char *session_id) {
        ProcessRecord rec = {};
        Process *p = process_find_live(channel_sandbox->id(s), pid, session_id);

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
        Process *p = process_find_live(rec->sandbox_id, rec->pid, NULL);

        if (p)
                return process_to_json(p);
        /* A row that says running, with no process behind it: the channel is not up (yet). */
        return json_common(rec->pid, rec->session_id, NULL, rec->argv, rec->cwd, rec->user, rec->pty, rec->state,
                           rec->exit_code, rec->signal, rec->timed_out, rec->started_at, rec->exited_at,
                           rec->last_event_id, 0);
}

