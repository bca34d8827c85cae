/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * A process in a sandbox (API.md, "Processes and command sessions"): its channel stream on one side, its
 * events (process-log.h) in the middle, and any number of SSE clients on the other, each with its own cursor.
 *
 * Flow control: output credit goes back to the guest once the bytes are in the log and every following
 * client has taken them, so a stalled client pauses only its own process. With no following client the
 * process runs on until PROCESS_UNREAD_MAX bytes nobody read are kept; then credit is held (nothing is
 * dropped). Memory per process is bounded by the ring cap, per client by one formatted event.
 */

#include "http/http.h"
#include "core/manager.h"
#include "channel/process-log.h"
#include "core/store.h"

#define PROCESS_RING_CAP (4U * 1024U * 1024U)
#define PROCESS_RING_BUDGET (256ULL * 1024 * 1024)   /* all rings together */
#define PROCESS_LOG_CAP PLOG_CAP_DEFAULT
/* Rotation keeps at least half the cap: that much unread output can wait without any of it being lost. */
#define PROCESS_UNREAD_MAX (PROCESS_LOG_CAP / 2 - 2 * SPACE_STREAM_WINDOW)
#define PROCESS_KEEP_FINISHED 1000U                   /* finished processes listed per sandbox */
#define SESSION_ID_LEN 20                             /* "ses-" + 16 hex */
#define SESSION_TOKEN_LEN 64
#define SESSION_TOKENS_MAX 8
#define SESSION_TOKEN_TTL_SEC 3600
#define CREDIT_BLOCKS_MAX 32

typedef enum ProcessState {
        PROCESS_STARTING,    /* EXEC sent, no pid yet */
        PROCESS_HELD,
        PROCESS_RUNNING,
        PROCESS_EXITED,
        PROCESS_LOST,
        _PROCESS_STATE_MAX,
} ProcessState;

typedef struct SessionToken {
        char token[SESSION_TOKEN_LEN + 1];
        int64_t expires_at;
} SessionToken;

/* Output received but not yet credited back: up to last_id, so many bytes per fd. */
typedef struct CreditBlock {
        uint64_t last_id;
        uint32_t bytes[3];
} CreditBlock;

typedef struct ProcessClient ProcessClient;

struct Process {
        Manager *manager;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        AgentConn *agent;            /* while the stream is registered on a live channel */
        uint32_t stream;
        int pid;
        ProcessState state;
        bool adopting;               /* ADOPT sent after a reconnect, answer pending */
        uint64_t adopt_sent;         /* monotonic usec, to ask again */
        bool inherited;              /* started by an earlier daemon: does not block a plain rm (as before) */
        bool ended;                  /* the last event is appended */
        bool saved;                  /* has a row */
        char session_id[SESSION_ID_LEN + 1];
        SessionToken tokens[SESSION_TOKENS_MAX];
        char **argv;
        char *cwd;                   /* NULL until the agent says where it runs: no cwd given (see on_started) */
        char *user;                  /* as asked (lib/user.h); NULL: root */
        bool pty;
        bool want_stdin, stdin_closed;
        uint64_t timeout_sec;
        int exit_code;               /* -1: none */
        int signal;                  /* 0: none */
        bool timed_out;
        int64_t started_at, exited_at;
        ErrorCode error_code;        /* the error that ended it, for a waiting session creator */
        char *error_message;

        uint64_t last_id;
        EventRing ring;
        ProcessLog *log;
        char *log_path;
        bool log_failed;

        ProcessClient *clients;
        unsigned n_following;
        Request *creator;            /* POST /sessions waiting for STARTED */

        uint64_t credit_left[3];     /* what the guest may still send on fd 1, 2 */
        CreditBlock blocks[CREDIT_BLOCKS_MAX];
        unsigned n_blocks;
        uint64_t read_mark;          /* highest event id any client has taken */
        uint64_t unread_bytes;       /* output after read_mark */

        SpaceCredit stdin_credit;    /* what we may still send on fd 0 */
        Request *upload;             /* a stdin upload waiting for credit */

        sd_event_source *timeout_source;
        Process *agent_next;         /* AgentConn's list */
        Process *next;               /* every process in memory */
};

typedef struct ExecSpec {
        char **argv;
        char **env;
        const char *cwd;
        const char *user;            /* NAME|UID[:GROUP|GID], checked; NULL: root */
        bool want_stdin;
        bool pty;
        unsigned rows, cols;
        uint64_t timeout_sec;
} ExecSpec;

const char *process_state_to_string(ProcessState s);

/* POST /processes: starts the process and answers r with its SSE stream. */
int process_exec(Request *r, Sandbox *s, const ExecSpec *spec);
/* POST /sessions: forks the process held; r is suspended until the pid is known, then the handler runs again
 * and calls process_session_reply(). */
int process_session_create(Request *r, Sandbox *s, const ExecSpec *spec);
/* Answers r if it waits for a session it created: true then (answered, or still waiting). */
bool process_session_reply(Request *r);
/* A fresh attach token (kept with the process; the oldest goes when there are too many). */
int process_session_token(Process *p, const SessionToken **ret);
/* 0 when token is one of p's and valid; -EKEYEXPIRED, -EACCES otherwise. Constant time per token. */
int process_check_token(Process *p, const char *token);

/* Live or from the processes table (then a process that ended, for its logs). NULL if there is none. */
Process *process_get(Manager *m, Sandbox *s, int pid);
Process *process_get_session(Manager *m, Sandbox *s, const char *session_id);
/* Live only (stdin, signals): a process whose guest side still runs. */
Process *process_find_by_pid(Sandbox *s, int pid);

/* Answers r with an SSE stream of p's events after after_id. follow: live events until the end, and the
 * client counts for flow control; release: start a held process. */
int process_attach(Process *p, Request *r, uint64_t after_id, bool follow, bool release);

cJSON *process_to_json(Process *p);
cJSON *process_record_to_json(const ProcessRecord *rec);

int process_signal(Process *p, int sig);
int process_close_stdin(Process *p);
int process_resize(Process *p, unsigned rows, unsigned cols);
/* POST stdin: r's body goes to the stdin of the process pid of s as credit allows (r->upload). */
int process_upload_begin(Request *r, Sandbox *s, int pid);

/* From the channel (agent.c). */
void process_on_frame(Process *p, const SpaceFrameHeader *h, const uint8_t *payload);
/* The channel is up (again): take over the sandbox's processes that still run (in memory or in the table). */
void process_adopt_all(AgentConn *a, Sandbox *s);
/* The channel went away but the sandbox may come back (reconnect, wake): wait for adoption. */
void process_orphan(Process *p);
/* The process can no longer be reached: it ends with an error event (state lost). */
void process_fail(Process *p, ErrorCode code, const char *message);
Process *process_maybe_free(Process *p);
