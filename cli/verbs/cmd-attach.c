/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "macro.h"

const CliHelp cmd_attach_help = {
        .synopsis = "attach [OPTIONS] SANDBOX [PID]",
        .summary = "Attach to a running process: its output, its stdin, its terminal",
        .options =
        "Options:\n"
        "      --detach-keys K   the keys that detach (default: ctrl-p,ctrl-q; \"\" turns detaching off)\n"
        "      --no-stdin        only watch: do not forward stdin\n"
        "  -h, --help            show this help\n"
        "\n"
        "PID defaults to the most recently started running process with a pty, else the most recent running\n"
        "one (see 'spacectl ps'). Output starts with what the process writes from now on; 'spacectl logs'\n"
        "shows what came before. With a pty the terminal is put in raw mode and its size followed; without,\n"
        "stdin lines are edited with readline and Ctrl-D closes the process's stdin.\n"
        "Exit status: the process's when it exits (as for exec); 0 after a detach (\"detached from SANDBOX\n"
        "PID\" on stderr); 128+N when signal N (SIGTERM, SIGHUP) ended the attachment; 125 on failures.\n",
};

/* The most recently started running process, preferring those with a pty; -ESRCH when none runs. */
static int pick_process(const cJSON *list, long *ret) {
        const cJSON *best = NULL, *p;
        bool best_pty = false;

        cJSON_ArrayForEach(p, list) {
                bool pty = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "pty"));
                const char *started = json_str(p, "started_at") ?: "", *bstarted;
                double pid, bpid;
                int c;

                if (!streq_ptr(json_str(p, "state"), "running") || !json_num(p, "pid", &pid))
                        continue;
                if (best) {
                        if (best_pty && !pty)
                                continue;
                        if (pty == best_pty) {
                                bstarted = json_str(best, "started_at") ?: "";
                                c = strcmp(started, bstarted);
                                (void) json_num(best, "pid", &bpid);
                                if (c < 0 || (c == 0 && pid < bpid))
                                        continue;
                        }
                }
                best = p;
                best_pty = pty;
        }
        if (!best)
                return -ESRCH;
        double v = 0;
        (void) json_num(best, "pid", &v);
        *ret = (long) v;
        return 0;
}

static int exit_status_of(const cJSON *p) {
        double v;

        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "timed_out"))) {
                log_error("the process ran past its --timeout and was killed (exit status %d)", EXIT_TIMEDOUT);
                return EXIT_TIMEDOUT;
        }
        if (json_num(p, "signal", &v) && v > 0 && v < 128)
                return 128 + (int) v;
        return json_num(p, "exit_code", &v) ? (int) v & 0xff : 0;
}

int cmd_attach(int argc, char *argv[]) {
        _cleanup_free_ char *processes_path = NULL, *proc_path = NULL, *stream_path = NULL, *last_id = NULL;
        const char *keys = DETACH_KEYS_DEFAULT, *ref, *state;
        AttachOptions ao = { .forward_stdin = true, .detach_on_signal = true, .resize_on_start = true };
        SpaceHttpReply reply = {};
        unsigned long pid_arg = 0;
        bool have_pid = false, no_stdin = false;
        const CliOption options[] = {
                CLI_STRING("detach-keys", 0, &keys),
                CLI_FLAG("no-stdin", 0, &no_stdin),
        };
        double v;
        long pid;
        int r;

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        ao.forward_stdin = !no_stdin;
        if (detach_keys_parse(keys, &ao.detach) < 0)
                return cli_usage_error("--detach-keys: '%s' is not like 'ctrl-p,ctrl-q' (at most %u keys)", keys,
                                       DETACH_KEYS_MAX);
        if (optind >= argc)
                return cli_usage_error("attach needs a SANDBOX");
        if (argc - optind > 2)
                return cli_usage_error("attach takes a SANDBOX and at most one PID, got '%s' too", argv[optind + 2]);
        ref = argv[optind];
        if (!*ref)
                return cli_usage_error("SANDBOX must not be empty");
        if (optind + 1 < argc) {
                if (cli_parse_ulong("PID", argv[optind + 1], 1, 4194304, &pid_arg) < 0)
                        return EXIT_SPACECTL;
                have_pid = true;
        }

        r = cli_signals_install();
        if (r < 0) {
                log_error("cannot set up signal handling: %s", strerror(-r));
                return EXIT_SPACECTL;
        }
        if (cli_sandbox_path(ref, "/processes", &processes_path) < 0)
                goto oom;

        if (have_pid)
                pid = (long) pid_arg;
        else {
                const cJSON *list;

                if (cli_call("GET", processes_path, NULL, &reply) < 0)
                        return EXIT_SPACECTL;
                list = cJSON_GetObjectItemCaseSensitive(reply.json, "processes");
                r = cJSON_IsArray(list) ? pick_process(list, &pid) : -EBADMSG;
                space_http_reply_done(&reply);
                if (r == -EBADMSG) {
                        log_error("the daemon's process list is malformed");
                        return EXIT_SPACECTL;
                }
                if (r < 0) {
                        log_error("no process is running in %s; start one with 'spacectl exec -it %s -- COMMAND'",
                                  ref, ref);
                        return EXIT_SPACECTL;
                }
        }

        /* Where the stream is now: attach from there, so old output is not replayed. */
        if (asprintf(&proc_path, "%s/%ld", processes_path, pid) < 0 ||
            asprintf(&stream_path, "%s/stream", proc_path) < 0)
                goto oom;
        if (cli_call("GET", proc_path, NULL, &reply) < 0)
                return EXIT_SPACECTL;
        state = json_str(reply.json, "state");
        if (streq_ptr(state, "exited")) {
                int status = exit_status_of(reply.json);

                log_error("process %ld in %s has already exited (status %d); see 'spacectl logs %s %ld'", pid, ref,
                          status, ref, pid);
                space_http_reply_done(&reply);
                return status;
        }
        if (streq_ptr(state, "lost")) {
                log_error("process %ld in %s was lost (spaced restarted and the sandbox no longer knows it)", pid, ref);
                space_http_reply_done(&reply);
                return EXIT_SPACECTL;
        }
        ao.pty = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply.json, "pty"));
        if (json_num(reply.json, "last_event_id", &v) && v > 0 && asprintf(&last_id, "%.0f", v) < 0) {
                space_http_reply_done(&reply);
                goto oom;
        }
        space_http_reply_done(&reply);

        ao.ref = ref;
        ao.processes_path = processes_path;
        ao.pid = pid;
        ao.stream_path = stream_path;
        ao.last_event_id = last_id;
        ao.readline = !ao.pty && isatty(STDIN_FILENO);
        return cli_attach(&ao);
oom:
        log_error("out of memory");
        return EXIT_SPACECTL;
}
