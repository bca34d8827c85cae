/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared by spacectl's verbs: the verb table types, error and usage reporting, the connection to spaced,
 * output helpers, and the create/exec/rm cores that `run` combines. */

#include <getopt.h> /* optind: cli_parse_options() leaves it at the arguments */
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "http-client.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0.0.0"
#endif

/* Exit statuses. exec and run pass the command's own status through, so their failures use 124..127 like
 * timeout(1) and env(1) do. */
#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_TIMEDOUT 124
#define EXIT_SPACECTL 125
#define EXIT_CANNOT_EXECUTE 126
#define EXIT_COMMAND_NOT_FOUND 127

enum {
        VERB_DAEMON = 1U << 0,          /* talks to spaced: start it when nobody is listening */
        VERB_COMMAND_STATUS = 1U << 1,  /* the exit status belongs to a command: our own failures are 125 */
};

typedef struct CliHelp {
        const char *synopsis;   /* usage lines after "spacectl " (several separated by "\n") */
        const char *summary;    /* one line for `spacectl --help` */
        const char *options;    /* the rest of --help */
} CliHelp;

typedef struct Verb {
        const char *name;
        int (*run)(int argc, char *argv[]);
        unsigned flags;
        const CliHelp *help;
} Verb;

/* A verb's sub-verbs (key create, op wait, ...). */
typedef struct SubVerb {
        const char *name;       /* NULL: the verb's own action, for anything that names no sub-verb */
        int (*run)(int argc, char *argv[]);
} SubVerb;

/* Runs the sub-verb argv[1] names with argv + 1; -h/--help prints the verb's help. Anything else goes with
 * the whole argv to the table's NULL entry (checkpoint SANDBOX) or, without one, is a usage error listing the
 * sub-verbs. */
int cli_run_sub_verb(const SubVerb *table, size_t n, int argc, char *argv[]);

/* ---- verbs/options.c: the verbs' option parser ---- */

/* One option of a verb, in the table it hands to cli_parse_options(). getopt_long still reads argv, so
 * reordering, "--name=VALUE", "-nVALUE", grouped flags, unique prefixes of long names and the errors for
 * bad options stay what they were; the table says what each option does with its value. Exactly one of
 * set, value, ulong and parse is given. Entries that do the same (create's --timeout and --ttl) share one
 * getopt code, so that a prefix of both is no ambiguity. */
typedef struct CliOption {
        const char *name;               /* --NAME; NULL: -C only */
        char short_name;                /* -C; 0: --NAME only */
        bool has_arg;
        bool *set;                      /* no argument: set to true */
        const char **value;             /* the argument */
        bool not_empty;                 /* with value: an empty one is the usage error "--NAME must not be empty" */
        unsigned long *ulong;           /* the argument as a number in min..max, via cli_parse_ulong(label, ...) */
        unsigned long min, max;
        const char *label;              /* how errors name the option; NULL: "--NAME" */
        /* The argument (NULL without one). < 0, after printing why, ends the parse with the usage status, or
         * cli_failure_status() for -ENOMEM. */
        int (*parse)(const char *arg, void *userdata);
        void *userdata;
} CliOption;

#define CLI_FLAG(n, c, p) { .name = (n), .short_name = (c), .set = (p) }
#define CLI_STRING(n, c, p) { .name = (n), .short_name = (c), .has_arg = true, .value = (p) }
#define CLI_STRING_NOT_EMPTY(n, c, p) { .name = (n), .short_name = (c), .has_arg = true, .value = (p), .not_empty = true }
#define CLI_ULONG(n, c, lbl, p, lo, hi) \
        { .name = (n), .short_name = (c), .has_arg = true, .ulong = (p), .min = (lo), .max = (hi), .label = (lbl) }
#define CLI_PARSE(n, c, f, u) { .name = (n), .short_name = (c), .has_arg = true, .parse = (f), .userdata = (u) }

enum {
        CLI_OPTIONS_IN_ORDER = 1U << 0, /* options end at the first argument (getopt's "+") */
};

/* Reads the options of argv[1..argc) by the table; -h/--help, every verb's, prints the verb's help. Returns
 * -1 to go on with the arguments at argv[optind...], else the exit status: 0 after --help, the usage status
 * after a bad option or value (printed). */
int cli_parse_options(int argc, char *argv[], const CliOption *options, size_t n_options, unsigned flags);
/* A CLI_PARSE callback: cli_parse_env("--env", arg, userdata), userdata a cJSON **. */
int cli_option_env(const char *arg, void *userdata);

/* For verbs that take no option but --help: 0 after printing help, an exit status for a bad option, -1 to go
 * on with argv[optind...]. */
int cli_parse_no_options(int argc, char *argv[]);
int cli_list_options(int argc, char *argv[], const char *what, bool *ret_json, bool *ret_quiet);
int cli_json_flags(int argc, char *argv[], bool *ret_json);
/* cli_list_options' -h, --json and -q alone, for a list verb that takes arguments (port ls [SANDBOX]). */
int cli_list_flags(int argc, char *argv[], bool *ret_json, bool *ret_quiet);

/* Option values. Both print a usage error and return < 0 on bad input. */
int cli_parse_ulong(const char *option, const char *s, unsigned long min, unsigned long max, unsigned long *ret);
/* Adds "K=V" (or "K", taking V from our environment) to the JSON object *env, creating it. */
int cli_parse_env(const char *option, const char *kv, cJSON **env);
/* Splits argv at the first "--": returns its index, or argc when there is none. */
int cli_find_dashdash(int argc, char *argv[]);

/* ---- client/util.c ---- */

/* The verb being run (set by main before dispatch). */
extern const Verb *cli_verb;

void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The exit status for "spacectl or the daemon failed": 1, or 125 for exec and run. */
int cli_failure_status(void);
/* The exit status for a usage error: 2, or 125 for exec and run. */
int cli_usage_status(void);
/* Prints "spacectl: MESSAGE" and the verb's usage to stderr; returns cli_usage_status(). */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int cli_list_show(const char *path, const char *key, const char *what, bool json, const char *quiet_field,
                  int (*print_table)(const cJSON *list));
/* The rest of every "rm X..." of a resource removed by DELETE (key rm, secret rm): takes no option but -h,
 * DELETEs collection/ARG for each argument, prints each one removed; goes on past a failure unless the daemon
 * is unreachable. `what` names an argument in messages ("key id"). Returns the exit status. */
int cli_delete_each(int argc, char *argv[], const char *verb, const char *what, const char *collection);
void cli_print_help(const Verb *v, FILE *f);
void cli_print_usage(const Verb *v, FILE *f);

/* The connection to spaced, made on first use; for VERB_DAEMON verbs the daemon is started when nobody
 * listens. NULL (after printing why) when that failed. */
SpaceHttp *cli_http(void);
/* Prints a transport failure of h with what to do about it. */
void cli_log_transport_error(SpaceHttp *h, int r);
/* Prints why we do not talk to the socket sock, whose listener runs as another user (peer). */
void cli_log_foreign_socket(const char *sock, uid_t peer);
/* A request that must succeed: returns 0 with a 2xx reply, else prints the daemon's message or the
 * transport failure and returns < 0 (-EBADMSG when the daemon answered with an error). */
int cli_call(const char *method, const char *path, const cJSON *body, SpaceHttpReply *ret);
/* What a call answered: a transport error or an error reply is logged and returned (< 0), else the reply
 * moves to *ret. */
int cli_reply_take(SpaceHttp *h, int r, SpaceHttpReply *reply, SpaceHttpReply *ret);
/* "/v1/sandboxes/<escaped ref><suffix>" */
int cli_sandbox_path(const char *ref, const char *suffix, char **ret);
/* JSON accessors that tolerate missing or mistyped members. */
const char *json_str(const cJSON *o, const char *key);
bool json_num(const cJSON *o, const char *key, double *ret);

/* ---- client/operation.c: following an Operation (GET /v1/operations/ID?wait=N) ---- */

typedef struct OperationWait {
        const char *id;
        const cJSON *op;                /* its state as the daemon last gave it (optional): finished, nothing is asked */
        unsigned long timeout;          /* seconds, 0: as long as it takes */
        long poll_sec;                  /* the ?wait= of each request (at most timeout's rest); 0: plain GETs */
        bool quiet_interrupt;           /* a request cut short by a signal prints nothing: the caller says more */
        /* Before each request, with the last answer (NULL before the first): may draw, sleep and change the
         * request's wait; < 0 ends the wait with that (the callback printed why). */
        int (*progress)(const cJSON *op, long *wait_sec, void *userdata);
        /* Before anything is printed: take what progress drew off the line. */
        void (*wipe)(void *userdata);
        void *userdata;
} OperationWait;

/* The one loop that follows an operation. 0 when it finished, succeeded or failed, with *ret_op the
 * finished Operation; -ETIMEDOUT (not printed) with *ret_op its last state; else the failure, printed, and
 * *ret_op NULL. */
int cli_operation_wait(const OperationWait *w, cJSON **ret_op);
/* 0 for an operation that did not fail; else prints its error and returns -EIO. */
int cli_operation_check(const cJSON *op);
/* Waits for an Operation to finish (up to 600 s): returns 0 when it succeeded, else prints its error and
 * returns < 0. *ret_op (optional) gets the final Operation, a failed one too. */
int cli_wait_operation(const cJSON *op, cJSON **ret_op);

/* ---- client/autostart.c ---- */

/* Makes sure something listens on h's unix socket: connects; if nobody is there, asks the systemd user
 * manager to start spaced.socket, or spawns spaced detached, and waits up to 15 s for it. Prints what went
 * wrong and returns < 0 on failure. */
int cli_ensure_daemon(SpaceHttp *h);

/* ---- client/output.c ---- */

/* Prints JSON (formatted) and a newline to stdout. */
int cli_print_json(const cJSON *j);
/* Prints an object as "key: value" lines (nested objects as "key.subkey: value", null as "-"). */
void cli_print_fields(const cJSON *o);
/* Joins a JSON array of strings with spaces (for argv). */
char *format_argv(const cJSON *argv);
/* "3 minutes ago" for an RFC 3339 time, or the string itself when it does not parse. */
char *format_age(const char *rfc3339, time_t now);
/* "256 MiB", "2 GiB" */
void format_mib(double mib, char *buf, size_t size);

typedef struct Table Table;
Table *table_new(size_t n_columns, const char *const *headers);
int table_add(Table *t, const char *const *cells);
int table_print(Table *t, FILE *f);
Table *table_free(Table *t);
static inline void table_freep(Table **t) {
        if (*t)
                table_free(*t);
}
#define _cleanup_table_ __attribute__((cleanup(table_freep)))

/* ---- client/signals.c ---- */

/* SIGINT, SIGTERM and SIGHUP set cli_signal_received (the last one's number) and write its number to a
 * self-pipe, so a poll loop sees it; SIGPIPE is ignored so writes fail with EPIPE instead. */
extern volatile sig_atomic_t cli_signal_received;
int cli_signals_install(void);
/* Read end of the self-pipe (non-blocking). */
int cli_signals_fd(void);
/* Next signal number from the pipe, 0 when empty. */
int cli_signals_next(void);

/* Adds another signal (e.g. SIGWINCH) to the self-pipe. */
int cli_signals_add(int sig);

/* ---- client/terminal.c ---- */

/* Saves fd's terminal settings (once) so that terminal_restore() can put them back; registers that with
 * atexit() and for the fatal signals that bypass the self-pipe. */
int terminal_save(int fd);
/* terminal_save(), then raw mode. */
int terminal_raw(int fd);
/* Puts the saved settings back, if any (idempotent, async-signal-safe). */
void terminal_restore(void);
bool terminal_is_saved(void);
/* -ENOTTY when fd is no terminal, -ENODATA when it reports no size. */
int terminal_size(int fd, unsigned *ret_rows, unsigned *ret_cols);

#define DETACH_KEYS_MAX 8U
#define DETACH_KEYS_DEFAULT "ctrl-p,ctrl-q"
typedef struct DetachKeys {
        uint8_t keys[DETACH_KEYS_MAX];
        size_t n;               /* 0: detaching is off */
        size_t matched;         /* how many of keys the input so far ended with (held back) */
} DetachKeys;

/* Docker's syntax: "ctrl-p,ctrl-q"; "" turns detaching off. -EINVAL on a bad key. */
int detach_keys_parse(const char *s, DetachKeys *ret);
/* Copies in to out (room for n + DETACH_KEYS_MAX bytes) without the detach sequence; keys that may start it are
 * held back until the next call shows whether they do. Returns the bytes in out; *ret_detach when the whole
 * sequence was typed (the input after it is dropped). */
size_t detach_keys_feed(DetachKeys *k, const uint8_t *in, size_t n, uint8_t *out, bool *ret_detach);

/* ---- client/attach.c: the interactive stream loop of attach and exec -t ---- */

typedef struct AttachOptions {
        const char *ref;                /* the sandbox as the user named it (for messages) */
        const char *processes_path;     /* /v1/sandboxes/<ref>/processes */
        long pid;
        const char *stream_path;        /* GET this SSE stream */
        const char *last_event_id;      /* NULL: from the start */
        const char *token;              /* attach token (session streams), NULL: the usual auth */
        bool pty;                       /* the process has a pty: raw mode, resize */
        bool forward_stdin;
        bool readline;                  /* no pty and stdin a terminal: edit lines with readline */
        bool resize_on_start;           /* attach: push our window size (and make full-screen programs redraw) */
        bool detach_on_signal;          /* attach: SIGTERM/SIGHUP end the attachment; exec: they are forwarded */
        DetachKeys detach;
} AttachOptions;

/* Runs until the process exits (returns its status like exec), the user detaches (prints "detached from
 * SANDBOX PID", returns 0) or something fails (prints why, returns 125). Restores the terminal first. */
int cli_attach(const AttachOptions *o);

/* The exit status for an SSE error event or a refused request, after printing the message. */
int cli_status_for_error(const char *code, const char *message);

/* ---- the cores run combines ---- */

#define CREATE_EGRESS_MAX 64
#define CREATE_VOLUMES_MAX 16 /* SPACE_VOLUME_MOUNTS_MAX */
typedef struct CreateOptions {
        const char *template_name;
        const char *name;
        unsigned long vcpu, memory_mib, disk_mib;       /* 0: the template's */
        cJSON *env;
        bool idle_timeout_set;          /* else the daemon's default (spaced.conf idle_timeout) */
        unsigned long idle_timeout;     /* seconds, 0: never suspend when idle */
        unsigned long ttl;              /* seconds, 0: no time to live */
        const char *on_timeout;         /* "remove" | "suspend", NULL: the daemon's default (remove) */
        const char *egress[CREATE_EGRESS_MAX]; /* --egress profiles (argv's strings); none: the default ones */
        size_t n_egress;
        const char *volumes[CREATE_VOLUMES_MAX]; /* --volume NAME:/PATH (argv's strings) */
        size_t n_volumes;
} CreateOptions;

/* Creates a sandbox and waits until it runs. *ret_id gets its id as soon as the daemon assigned one, even
 * when it then failed (so `run` can remove it). Prints errors and returns < 0 on failure; -EINTR when
 * interrupted through the cancel flag. */
int cli_create(const CreateOptions *o, char **ret_id);

typedef struct ExecOptions {
        bool interactive;
        bool tty;               /* -t: a pty, through a command session */
        const char *detach_keys; /* NULL: DETACH_KEYS_DEFAULT */
        cJSON *env;
        const char *cwd;
        const char *user;       /* -u: NAME|UID[:GROUP|GID]; NULL: the template's default user */
        unsigned long timeout;  /* seconds, 0: none */
        char **argv;            /* NULL-terminated command */
} ExecOptions;

/* Runs a command in a sandbox with stdio streamed, signals forwarded; returns the exit status to use
 * (the command's, 128+N, 124..127, or 125 after printing why). Needs cli_signals_install(). */
int cli_exec(const char *ref, const ExecOptions *o);

/* Removes a sandbox; prints its id on success. Prints errors and returns < 0 on failure. */
int cli_remove(const char *ref, bool force, bool print_id);

/* The options of create and exec, for the verbs that take them (create, run / exec, run), as CliOption
 * entries that write to o. */
#define CREATE_OPTIONS(o)                                                         \
        CLI_STRING_NOT_EMPTY("name", 'n', &(o)->name),                            \
        CLI_ULONG("vcpu", 0, "--vcpu", &(o)->vcpu, 1, 1024),                      \
        CLI_ULONG("memory", 'm', "--memory", &(o)->memory_mib, 64, 65536),        \
        CLI_ULONG("disk", 0, "--disk", &(o)->disk_mib, 64, 1048576),              \
        CLI_PARSE("idle-timeout", 0, create_parse_idle_timeout, (o)),             \
        CLI_PARSE("ttl", 0, create_parse_ttl, (o)),                               \
        CLI_PARSE("on-timeout", 0, create_parse_on_timeout, (o)),                 \
        CLI_PARSE("egress", 0, create_parse_egress, (o)),                         \
        CLI_PARSE("volume", 'v', create_parse_volume, (o))
#define EXEC_OPTIONS(o)                                                           \
        CLI_FLAG("interactive", 'i', &(o)->interactive),                          \
        CLI_FLAG("tty", 't', &(o)->tty),                                          \
        CLI_PARSE("env", 'e', cli_option_env, &(o)->env),                         \
        CLI_STRING_NOT_EMPTY("workdir", 'w', &(o)->cwd),                          \
        CLI_ULONG("timeout", 0, "--timeout", &(o)->timeout, 0, 31536000),         \
        CLI_PARSE("user", 'u', exec_parse_user, (o))

/* Their CLI_PARSE callbacks; userdata is the CreateOptions or ExecOptions. --ttl's errors say "--timeout",
 * create's name for it. */
int create_parse_idle_timeout(const char *arg, void *userdata);
int create_parse_ttl(const char *arg, void *userdata);
int create_parse_on_timeout(const char *arg, void *userdata);
int create_parse_egress(const char *arg, void *userdata);
int create_parse_volume(const char *arg, void *userdata);
int exec_parse_user(const char *arg, void *userdata);
int exec_parse_detach_keys(const char *arg, void *userdata);

/* (verbs/cmd-create.c) Durations for --idle-timeout and --timeout: seconds, or with a suffix s, m, h, d. Usage error
 * and < 0 on bad input. */
int cli_parse_duration(const char *option, const char *s, unsigned long *ret);

/* ---- verbs/lifecycle.c: the operations of pause, suspend, checkpoint, restore and fork ---- */

typedef struct LifecycleRequest {
        const char *method;             /* "POST" */
        const char *path;
        const cJSON *body;              /* NULL: no body */
        bool async;                     /* print the operation's id instead of waiting */
        bool json;                      /* with async: print the operation as JSON, not its id */
        const char *progress;           /* "suspending SB": a spinner with seconds on a terminal after 1 s; NULL: none */
} LifecycleRequest;

/* Starts an operation and, unless async, waits for it (no limit but the daemon's own). On success *ret_op
 * (optional) gets the finished Operation, or NULL when async (its id was printed). Prints errors and returns
 * < 0 on failure. */
int cli_lifecycle(const LifecycleRequest *q, cJSON **ret_op);
/* The whole verb for pause, resume, suspend and wake ([--async] [-q] SANDBOX...): POST .../ACTION for each one
 * and print its id; progress (NULL: none) is the spinner's "-ing" word. Returns the exit status. */
int cli_lifecycle_verb(int argc, char *argv[], const char *action, const char *progress);
/* GET that prints nothing: 0 and the reply on 2xx, -ENOENT on 404, else < 0 (a transport failure is printed). */
int cli_get_quiet(const char *path, SpaceHttpReply *ret);
/* "/v1/checkpoints/<escaped ref><suffix>" */
int cli_checkpoint_path(const char *ref, const char *suffix, char **ret);

/* ---- client/progress.c ---- */

/* Waits for an operation that reports progress (import, build), drawing one line on stderr ("LABEL  phase
 * [####....]  45%  123.4/270.0 MiB  85.3 MB/s", layers i/n) while stderr is a terminal and quiet is not
 * set; prints nothing otherwise. On success *ret_result (optional) gets the operation's "result" object
 * (empty when it has none). Prints the error and returns < 0 when it failed or the wait did. */
int cli_operation_wait_progress(const char *op_id, const char *label, bool quiet, cJSON **ret_result);

/* ---- verbs/cmd-*.c ---- */

int cmd_create(int argc, char *argv[]);
int cmd_exec(int argc, char *argv[]);
int cmd_run(int argc, char *argv[]);
int cmd_ls(int argc, char *argv[]);
int cmd_inspect(int argc, char *argv[]);
int cmd_rm(int argc, char *argv[]);
int cmd_template(int argc, char *argv[]);
int template_build(int argc, char *argv[]);   /* `template build`, in verbs/cmd-template-build.c */
/* POST /v1/templates/import: the path over the unix socket, the file's bytes over TCP (which takes no host
 * path); tag and config (may be NULL) as the JSON form has them. Errors are logged. In cmd-template.c. */
int cli_template_import_post(const char *file, const char *tag, const cJSON *config, SpaceHttpReply *ret);
int cmd_version(int argc, char *argv[]);
int cmd_attach(int argc, char *argv[]);
int cmd_ps(int argc, char *argv[]);
int cmd_kill(int argc, char *argv[]);
int cmd_logs(int argc, char *argv[]);
int cmd_op(int argc, char *argv[]);
int cmd_info(int argc, char *argv[]);
int cmd_daemon(int argc, char *argv[]);
/* cmd-daemon.c: one line for the configuration in force (GET /v1/info's config), its warnings on stderr. */
void cli_print_config(const cJSON *config, const char *label);
int cmd_key(int argc, char *argv[]);
int cmd_secret(int argc, char *argv[]);
int cmd_volume(int argc, char *argv[]);
int cmd_e2b(int argc, char *argv[]);
extern const CliHelp cmd_e2b_help;
int cmd_mcp(int argc, char *argv[]);
extern const CliHelp cmd_mcp_help;
int cmd_pause(int argc, char *argv[]);
int cmd_resume(int argc, char *argv[]);
int cmd_suspend(int argc, char *argv[]);
int cmd_wake(int argc, char *argv[]);
int cmd_stop(int argc, char *argv[]);
int cmd_start(int argc, char *argv[]);
int cmd_checkpoint(int argc, char *argv[]);
int cmd_restore(int argc, char *argv[]);
int cmd_fork(int argc, char *argv[]);
int cmd_pool(int argc, char *argv[]);
int cmd_cp(int argc, char *argv[]);
int cmd_egress(int argc, char *argv[]);
int cmd_port(int argc, char *argv[]);
extern const CliHelp cmd_cp_help, cmd_egress_help, cmd_port_help, cmd_daemon_help;

extern const CliHelp cmd_create_help, cmd_exec_help, cmd_run_help, cmd_ls_help, cmd_inspect_help, cmd_rm_help,
        cmd_template_help, cmd_version_help, cmd_attach_help, cmd_ps_help, cmd_kill_help, cmd_logs_help,
        cmd_op_help, cmd_info_help, cmd_key_help, cmd_pause_help, cmd_resume_help, cmd_suspend_help,
        cmd_wake_help, cmd_stop_help, cmd_start_help, cmd_checkpoint_help, cmd_restore_help, cmd_fork_help,
        cmd_pool_help, cmd_secret_help, cmd_volume_help;
