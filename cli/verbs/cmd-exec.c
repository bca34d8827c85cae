/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base64.h"
#include "cli.h"
#include "io-util.h"
#include "json-util.h"
#include "client/process-events.h"
#include "macro.h"
#include "user.h"

/* One stdin POST at a time, each at most this big: the daemon answers once the guest took it, which is
 * what keeps a fast producer from outrunning a slow process. */
#define STDIN_CHUNK (64U * 1024U)
#define PENDING_SIGNALS_MAX 16U
/* The third Ctrl-C kills instead of interrupting, for commands that ignore SIGINT. */
#define SIGINT_KILL_AFTER 3U

const CliHelp cmd_exec_help = {
        .synopsis = "exec [OPTIONS] SANDBOX -- COMMAND [ARG...]",
        .summary = "Run a command in a running sandbox, with its output streamed and its exit status passed on",
        .options =
        "Options:\n"
        "  -i, --interactive     forward stdin to the command (otherwise it reads nothing)\n"
        "  -t, --tty             give the command a terminal (a pty); with -i the local terminal is put in\n"
        "                        raw mode and its window size followed\n"
        "      --detach-keys K   with -it, the keys that detach and leave the command running\n"
        "                        (default: ctrl-p,ctrl-q; \"\" turns detaching off)\n"
        "  -e, --env KEY=VALUE   set an environment variable for the command (repeatable)\n"
        "  -w, --workdir DIR     working directory of the command\n"
        "  -u, --user USER[:GROUP]\n"
        "                        run as USER (a name in the sandbox's /etc/passwd, or a uid) and GROUP (a\n"
        "                        name or a gid); default: the template's user, else root\n"
        "      --timeout SECS    kill the command after SECS seconds (exit status 124)\n"
        "  -h, --help            show this help\n"
        "\n"
        "SANDBOX is an id, a unique prefix of one, or a name. Exit status: the command's; 128+N when signal N\n"
        "killed it; 124 timeout; 125 spacectl or spaced failed (also for usage errors); 126 not executable;\n"
        "127 command not found. Ctrl-C is forwarded to the command (the third one sends SIGKILL). After a\n"
        "detach the exit status is 0; 'spacectl attach SANDBOX PID' goes back to the command.\n",
};

typedef struct ExecState {
        const ExecOptions *o;
        SpaceStream *stream;
        char *processes_path;   /* /v1/sandboxes/<ref>/processes */
        long pid;               /* -1 until process_started */
        ProcessOutcome outcome;
        bool stdout_broken, output_failed;
        int pending_signals[PENDING_SIGNALS_MAX];
        size_t n_pending_signals;
        unsigned n_sigint;
        OutputDecoder decoder;
        int fatal;              /* < 0: spacectl failed, already logged */
} ExecState;

int exec_parse_detach_keys(const char *arg, void *userdata) {
        ExecOptions *o = userdata;
        DetachKeys k;

        if (detach_keys_parse(arg, &k) < 0) {
                (void) cli_usage_error("--detach-keys: '%s' is not like 'ctrl-p,ctrl-q' (at most %u keys)", arg,
                                       DETACH_KEYS_MAX);
                return -EINVAL;
        }
        o->detach_keys = arg;
        return 0;
}

int exec_parse_user(const char *arg, void *userdata) {
        ExecOptions *o = userdata;

        if (space_user_spec_parse(arg, NULL) < 0) {
                (void) cli_usage_error("--user: '%s' is not USER[:GROUP]: a name or a number each, at most "
                                       "%d characters of A-Z a-z 0-9 . _ -",
                                       arg, SPACE_USER_SPEC_MAX);
                return -EINVAL;
        }
        o->user = arg;
        return 0;
}

static void post_done_ignore(SpaceStream *s, int r, const SpaceHttpReply *reply, void *userdata) {
        /* A signal for a process that just exited is refused; nothing to do about it. */
}

static int send_signal(ExecState *st, SpaceStream *s, int sig) {
        _cleanup_free_ char *path = NULL, *body = NULL;

        if (st->pid < 0) {
                if (st->n_pending_signals < PENDING_SIGNALS_MAX)
                        st->pending_signals[st->n_pending_signals++] = sig;
                return 0;
        }
        if (asprintf(&path, "%s/%ld/signal", st->processes_path, st->pid) < 0 ||
            asprintf(&body, "{\"signal\":%d}", sig) < 0)
                return -ENOMEM;
        return space_stream_post(s, path, "application/json", body, strlen(body), post_done_ignore, st);
}

static int stdin_readable(SpaceStream *s, int fd, void *userdata);

static int post_close_stdin(ExecState *st, SpaceStream *s) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/%ld/close-stdin", st->processes_path, st->pid) < 0)
                return -ENOMEM;
        return space_stream_post(s, path, NULL, NULL, 0, post_done_ignore, st);
}

static void stdin_chunk_done(SpaceStream *s, int r, const SpaceHttpReply *reply, void *userdata) {
        ExecState *st = userdata;

        if (r >= 0 && space_http_reply_ok(reply)) {
                if (space_stream_watch_fd(s, STDIN_FILENO, stdin_readable, st) >= 0)
                        return;
        } else if (r >= 0 && reply->error == ERROR_STDIN_CLOSED)
                ; /* the process closed its stdin or exited: the rest of our input is not wanted */
        else if (r < 0)
                log_error("forwarding stdin failed: %s; closing the command's stdin", strerror(-r));
        else
                log_error("forwarding stdin failed: %s; closing the command's stdin", reply->error_message);

        /* Whatever went wrong, let the command see EOF rather than wait for input forever. */
        (void) post_close_stdin(st, s);
}

static int stdin_readable(SpaceStream *s, int fd, void *userdata) {
        static uint8_t buf[STDIN_CHUNK];
        _cleanup_free_ char *path = NULL;
        ExecState *st = userdata;
        ssize_t n;
        int r;

        n = read(fd, buf, sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;

        (void) space_stream_unwatch_fd(s, fd);
        if (n > 0) {
                if (asprintf(&path, "%s/%ld/stdin", st->processes_path, st->pid) < 0)
                        return -ENOMEM;
                r = space_stream_post(s, path, "application/octet-stream", buf, (size_t) n, stdin_chunk_done, st);
                if (r < 0)
                        return r;
                return 0;
        }

        /* EOF (or a read error, which ends our input just the same). */
        return post_close_stdin(st, s);
}

static int signal_readable(SpaceStream *s, int fd, void *userdata) {
        ExecState *st = userdata;
        int sig, r;

        while ((sig = cli_signals_next()) > 0) {
                if (sig == SIGINT && ++st->n_sigint >= SIGINT_KILL_AFTER)
                        sig = SIGKILL;
                r = send_signal(st, s, sig);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int output_event(ExecState *st, SpaceStream *s, int fd, const char *data, size_t len) {
        const uint8_t *buf;
        size_t n;
        int r;

        r = output_decode(&st->decoder, data, len, &buf, &n);
        if (r < 0)
                return st->fatal = r;
        if (fd == STDOUT_FILENO && st->stdout_broken)
                return 0;

        r = loop_write(fd, buf, n);
        if (r >= 0 || fd != STDOUT_FILENO)
                return 0; /* nowhere left to report a stderr failure */

        /* Our stdout is gone (`spacectl exec ... | head`): give the command the SIGPIPE it would get
         * locally, and drop the rest of its output. */
        st->stdout_broken = true;
        if (r != -EPIPE) {
                log_error("writing the command's output failed: %s", strerror(-r));
                st->output_failed = true;
        }
        return send_signal(st, s, SIGPIPE);
}

static int on_event(const char *event, const char *data, size_t len, const char *id, void *userdata) {
        ExecState *st = userdata;
        SpaceStream *s = st->stream;
        cJSON *j;
        double v;
        int r = 0;

        if (streq(event, "stdout"))
                return output_event(st, s, STDOUT_FILENO, data, len);
        if (streq(event, "stderr"))
                return output_event(st, s, STDERR_FILENO, data, len);

        if (streq(event, "process_started")) {
                j = event_json(event, data, len);
                if (!j)
                        return st->fatal = -EBADMSG;
                if (!json_num(j, "pid", &v) || v < 0 || v > 1e15) {
                        cJSON_Delete(j);
                        log_error("spaced sent a process_started event without a pid");
                        return st->fatal = -EBADMSG;
                }
                cJSON_Delete(j);
                st->pid = (long) v;

                if (st->o->interactive) {
                        r = space_stream_watch_fd(s, STDIN_FILENO, stdin_readable, st);
                        if (r < 0)
                                return r;
                }
                for (size_t i = 0; i < st->n_pending_signals; i++) {
                        r = send_signal(st, s, st->pending_signals[i]);
                        if (r < 0)
                                return r;
                }
                st->n_pending_signals = 0;
                return 0;
        }

        r = process_outcome_event(&st->outcome, event, data, len);
        if (r != 0)
                return r < 0 ? (st->fatal = r) : 0;

        /* Events of later API versions. */
        return 0;
}

static cJSON *exec_body(const ExecOptions *o) {
        cJSON *b = cJSON_CreateObject(), *argv;

        if (!b)
                return NULL;
        argv = json_array_from_strv(o->argv);
        if (!argv || !cJSON_AddItemToObject(b, "argv", argv)) {
                cJSON_Delete(argv);
                goto oom;
        }
        if (o->env) {
                cJSON *env = cJSON_Duplicate(o->env, true);
                if (!env || !cJSON_AddItemToObject(b, "env", env)) {
                        cJSON_Delete(env);
                        goto oom;
                }
        }
        if (o->cwd && !cJSON_AddStringToObject(b, "cwd", o->cwd))
                goto oom;
        if (o->user && !cJSON_AddStringToObject(b, "user", o->user))
                goto oom;
        if (!cJSON_AddBoolToObject(b, "stdin", o->interactive))
                goto oom;
        if (!cJSON_AddNumberToObject(b, "timeout", (double) o->timeout))
                goto oom;
        return b;
oom:
        cJSON_Delete(b);
        return NULL;
}

/* exec -t: a command session with a pty, then the interactive loop on its stream. */
static int exec_tty(const char *ref, const ExecOptions *o) {
        _cleanup_free_ char *processes_path = NULL, *sessions_path = NULL, *stream_url = NULL, *token = NULL;
        AttachOptions ao = {
                .ref = ref,
                .pty = true,
                .forward_stdin = o->interactive,
        };
        SpaceHttpReply reply = {};
        unsigned rows = 24, cols = 80;
        cJSON *body;
        double pid;
        int r;

        if (detach_keys_parse(o->detach_keys ?: DETACH_KEYS_DEFAULT, &ao.detach) < 0)
                return cli_usage_error("bad --detach-keys");
        if (terminal_size(STDOUT_FILENO, &rows, &cols) < 0)
                (void) terminal_size(STDIN_FILENO, &rows, &cols);

        r = cli_sandbox_path(ref, "/processes", &processes_path);
        if (r >= 0)
                r = cli_sandbox_path(ref, "/sessions", &sessions_path);
        body = r >= 0 ? exec_body(o) : NULL;
        if (!body || !cJSON_AddBoolToObject(body, "pty", true) ||
            !cJSON_AddNumberToObject(body, "rows", rows) || !cJSON_AddNumberToObject(body, "cols", cols)) {
                cJSON_Delete(body);
                log_error("out of memory");
                return EXIT_SPACECTL;
        }
        r = cli_call("POST", sessions_path, body, &reply);
        cJSON_Delete(body);
        if (r < 0)
                return EXIT_SPACECTL;

        if (!json_num(reply.json, "pid", &pid) || pid < 0 || pid > 1e15 || !json_str(reply.json, "stream_url") ||
            !json_str(reply.json, "attach_token")) {
                log_error("spaced answered the session request without pid, stream_url or attach_token");
                space_http_reply_done(&reply);
                return EXIT_SPACECTL;
        }
        stream_url = strdup(json_str(reply.json, "stream_url"));
        token = strdup(json_str(reply.json, "attach_token"));
        space_http_reply_done(&reply);
        if (!stream_url || !token) {
                log_error("out of memory");
                return EXIT_SPACECTL;
        }

        ao.processes_path = processes_path;
        ao.pid = (long) pid;
        ao.stream_path = stream_url;
        ao.token = token;
        return cli_attach(&ao);
}

int cli_exec(const char *ref, const ExecOptions *o) {
        ExecState st = { .o = o, .pid = -1 };
        SpaceHttpReply reply = {};
        SpaceHttp *h;
        cJSON *body = NULL;
        int r, status;

        if (o->tty)
                return exec_tty(ref, o);

        h = cli_http();
        if (!h)
                return EXIT_SPACECTL;
        /* Ctrl-C is the command's from here on, not a reason to abort our requests. */
        space_http_set_cancel(h, NULL);

        r = cli_sandbox_path(ref, "/processes", &st.processes_path);
        if (r < 0)
                goto oom;
        body = exec_body(o);
        if (!body)
                goto oom;
        r = space_stream_new(h, st.processes_path, body, on_event, &st, &st.stream);
        cJSON_Delete(body);
        if (r < 0)
                goto oom;
        if (cli_signals_fd() >= 0) {
                r = space_stream_watch_fd(st.stream, cli_signals_fd(), signal_readable, &st);
                if (r < 0)
                        goto oom;
        }

        r = space_stream_run(st.stream, &reply);
        if (r < 0) {
                if (st.fatal < 0)
                        ; /* logged where it happened */
                else if (r == -ENOMEM)
                        log_error("out of memory");
                else
                        cli_log_transport_error(h, r);
                status = EXIT_SPACECTL;
        } else if (!space_http_reply_ok(&reply))
                status = cli_status_for_error(reply.error_code, reply.error_message);
        else if ((status = process_outcome_status(&st.outcome)) >= 0) {
                if (st.outcome.exited && st.output_failed)
                        status = EXIT_SPACECTL;
        } else {
                log_error("the connection to spaced ended before the command exited; "
                          "is spaced still running? see spaced(8)");
                status = EXIT_SPACECTL;
        }

        space_http_reply_done(&reply);
        space_stream_free(st.stream);
        free(st.processes_path);
        output_decoder_done(&st.decoder);
        process_outcome_done(&st.outcome);
        return status;
oom:
        log_error("out of memory");
        space_stream_free(st.stream);
        free(st.processes_path);
        return EXIT_SPACECTL;
}

int cmd_exec(int argc, char *argv[]) {
        ExecOptions o = {};
        const CliOption options[] = {
                EXEC_OPTIONS(&o),
                CLI_PARSE("detach-keys", 0, exec_parse_detach_keys, &o),
        };
        int dd, end, r, status;
        const char *ref;

        /* With "--", options may go anywhere before it; without, they end at SANDBOX (the command's own
         * options follow it). */
        dd = cli_find_dashdash(argc, argv);
        end = dd < argc ? dd : argc;

        r = cli_parse_options(end, argv, options, ELEMENTSOF(options), dd < argc ? 0 : CLI_OPTIONS_IN_ORDER);
        if (r >= 0) {
                cJSON_Delete(o.env);
                return r;
        }

        if (optind >= end) {
                cJSON_Delete(o.env);
                return cli_usage_error("exec needs a SANDBOX and a COMMAND");
        }
        ref = argv[optind];
        if (dd < argc) {
                if (optind + 1 < end) {
                        cJSON_Delete(o.env);
                        return cli_usage_error("unexpected '%s' before '--'", argv[optind + 1]);
                }
                o.argv = argv + dd + 1;
        } else
                o.argv = argv + optind + 1;
        if (!o.argv[0]) {
                cJSON_Delete(o.env);
                return cli_usage_error("exec needs a COMMAND after the SANDBOX");
        }
        if (!*ref) {
                cJSON_Delete(o.env);
                return cli_usage_error("SANDBOX must not be empty");
        }

        r = cli_signals_install();
        if (r < 0) {
                log_error("cannot set up signal handling: %s", strerror(-r));
                cJSON_Delete(o.env);
                return EXIT_SPACECTL;
        }

        status = cli_exec(ref, &o);
        cJSON_Delete(o.env);
        return status;
}
