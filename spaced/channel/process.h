/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * A process in a sandbox (API.md, "Processes and command sessions"): its channel stream on one side, its
 * events (process-log.h) in the middle, and any number of clients (ProcessClient: an SSE stream, for http) on
 * the other, each with its own cursor. Nothing here answers a request: http turns results into responses.
 *
 * Flow control: output credit goes back to the guest once the bytes are in the log and every following
 * client has taken them, so a stalled client pauses only its own process. With no following client the
 * process runs on until PROCESS_UNREAD_MAX bytes nobody read are kept; then credit is held (nothing is
 * dropped). Memory per process is bounded by the ring cap, per client by one formatted event.
 */

#include <cjson/cJSON.h>

#include "channel/channel.h"
#include "core/manager.h"
#include "channel/process-log.h"
#include "core/store.h"

#define PROCESS_RING_CAP (4U * 1024U * 1024U)
#define PROCESS_RING_BUDGET (256ULL * 1024 * 1024)   /* all rings together */
#define PROCESS_LOG_CAP PLOG_CAP_DEFAULT
/* Rotation keeps at least half the cap: that much unread output can wait without any of it being lost. */
#define PROCESS_UNREAD_MAX (PROCESS_LOG_CAP / 2 - 2 * SPACE_STREAM_WINDOW)
#define PROCESS_KEEP_FINISHED 1000U                   /* finished processes listed per sandbox */
/* Per sandbox, whatever its guest does: event streams open at once (attach, logs; ERROR_TOO_MANY_STREAMS) and
 * bytes of process logs on disk (the oldest logs of ended processes go first; a new process is refused while
 * those of running ones alone hold more). Running and held processes are bounded by SPACE_STREAMS_MAX. */
#define PROCESS_CLIENTS_MAX 128U
#define PROCESS_LOGS_MAX (2ULL * 1024 * 1024 * 1024)
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
        /* What the E2B facade keeps of its start request (in memory only: gone after a daemon restart): the
         * tag envd finds processes by, and the env as the client gave it, which its List shows. */
        char *tag;
        char **request_env;
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
        ChannelWaiter creator;       /* POST /sessions waiting for STARTED */

        uint64_t credit_left[3];     /* what the guest may still send on fd 1, 2 */
        CreditBlock blocks[CREDIT_BLOCKS_MAX];
        unsigned n_blocks;
        uint64_t read_mark;          /* highest event id any client has taken */
        uint64_t unread_bytes;       /* output after read_mark */

        SpaceCredit stdin_credit;    /* what we may still send on fd 0 */
        ChannelWaiter upload;        /* a stdin upload waiting for credit */

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

/* Starts a process (POST /processes). On failure reterr says why, unless it is out of memory. */
int process_exec(Sandbox *s, const ExecSpec *spec, Process **ret, Error *reterr);
/* Forks a process held, with a session id (POST /sessions); creator is woken once it has a pid or failed
 * (state no longer PROCESS_STARTING, or ended: then pid <= 0 and error_* say why). */
int process_session_create(Sandbox *s, const ExecSpec *spec, const ChannelWaiter *creator, Process **ret,
                           Error *reterr);
/* The creator has its answer and waits no more. */
void process_creator_done(Process *p);
/* The creator went away before it learned the session: nobody can attach, so the process ends. */
void process_creator_gone(Process *p);
/* A fresh attach token (kept with the process; the oldest goes when there are too many). */
int process_session_token(Process *p, const SessionToken **ret);
/* 0 when token is one of p's and valid; -EKEYEXPIRED, -EACCES otherwise. Constant time per token. */
int process_check_token(Process *p, const char *token);

/* Live or from the processes table (then a process that ended, for its logs). NULL if there is none. */
Process *process_get(Manager *m, Sandbox *s, int pid);
Process *process_get_session(Manager *m, Sandbox *s, const char *session_id);
/* Live only (stdin, signals): a process whose guest side still runs. */
Process *process_find_by_pid(Sandbox *s, int pid);
/* Live only, by the E2B tag (the first one found). */
Process *process_find_by_tag(Sandbox *s, const char *tag);
/* The processes of s that run (or are held) in the guest, one after the other: start with NULL. */
Process *process_next_live(Sandbox *s, Process *after);

/* One event as a client hands it out. Output (event_type_is_data(type)) is its bytes in data; every other event
 * is there as one line of JSON, the text /v1 sends. An error event (the process could not start or was lost, or
 * this client's events_lost) also carries what it says as values, for a client with codes of its own (envd's
 * Connect codes from the lib/error-code.h table): no consumer parses the JSON back. */
typedef struct ProcessEvent {
        uint64_t id;
        EventType type;
        const char *name;            /* event_type_to_string(type): the SSE event name */
        const void *data;
        size_t n;
        ErrorCode code;              /* EVENT_ERROR; ERROR_NONE otherwise */
        const char *message;         /* EVENT_ERROR: NUL-terminated; NULL otherwise */
} ProcessEvent;

/* A client formats each event it hands out with this (http: SSE framing; the E2B facade: Connect envelopes),
 * replacing what buf holds; userdata is the client's. An empty buf hands out nothing for that event. */
typedef int (*ProcessEventFormat)(void *userdata, SpaceBuf *buf, const ProcessEvent *e);
/* A reader of p's events after after_id; waiter is woken when there may be more. follow: live events until
 * the end, and the client counts for flow control. -EMFILE: the sandbox has PROCESS_CLIENTS_MAX already. */
int process_client_new(Process *p, uint64_t after_id, bool follow, ProcessEventFormat format, void *format_userdata,
                       const ChannelWaiter *waiter, ProcessClient **ret);
/* The client's reader is set up: release starts a held process; credit may flow. */
void process_client_start(ProcessClient *c, bool release);
/* Up to max bytes of formatted events: how many, 0 (nothing now: the waiter is woken when there is) or
 * CHANNEL_READ_END. */
ssize_t process_client_read(ProcessClient *c, char *buf, size_t max);
/* Forgets a client that was never read from. */
void process_client_free(ProcessClient *c);
/* The client's reader went away: credit may flow again; the process is freed if nothing else needs it. */
void process_client_close(ProcessClient *c);

cJSON *process_to_json(Process *p);
cJSON *process_record_to_json(const ProcessRecord *rec);

int process_signal(Process *p, int sig);
int process_close_stdin(Process *p);
int process_resize(Process *p, unsigned rows, unsigned cols);
/* Sends what stdin credit allows of data: how many bytes went (fewer than n: waiter is woken when credit comes
 * back, until process_stdin_unwait()), or -EPIPE when the process ended (the rest is to be dropped). */
ssize_t process_write_stdin(Process *p, const char *data, size_t n, const ChannelWaiter *waiter);
/* waiter no longer waits for stdin credit; the process is freed if nothing else needs it. */
void process_stdin_unwait(Process *p, const ChannelWaiter *waiter);

/* From the channel (agent.c). */
void process_on_frame(Process *p, const SpaceFrameHeader *h, const uint8_t *payload);
/* The channel is up (again): take over the sandbox's processes that still run (in memory or in the table). */
void process_adopt_all(AgentConn *a, Sandbox *s);
/* The channel went away but the sandbox may come back (reconnect, wake): wait for adoption. */
void process_orphan(Process *p);
/* The process can no longer be reached: it ends with an error event (state lost). */
void process_fail(Process *p, ErrorCode code, const char *message);
Process *process_maybe_free(Process *p);
