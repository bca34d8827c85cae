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
#include "macro.h"

const CliHelp cmd_logs_help = {
        .synopsis = "logs [-f] SANDBOX PID",
        .summary = "Print the output of a process, also after it exited or spaced restarted",
        .options =
        "Options:\n"
        "  -f, --follow   keep printing new output until the process exits\n"
        "  -h, --help     show this help\n"
        "\n"
        "The process's stdout goes to stdout and its stderr to stderr, byte for byte (with a pty there is only\n"
        "stdout). The log keeps the newest output up to spaced's cap (64 MiB by default); when older output\n"
        "was dropped a warning says so on stderr. Exit status 0, also when the process failed; 1 when the\n"
        "log could not be read.\n",
};

typedef struct Logs {
        uint8_t *decoded;
        size_t decoded_size;
        bool stdout_broken;
} Logs;

static int on_event(const char *event, const char *data, size_t len, const char *id, void *userdata) {
        Logs *l = userdata;
        int fd;
        long n;

        if (streq(event, "stdout") || streq(event, "stderr")) {
                fd = streq(event, "stdout") ? STDOUT_FILENO : STDERR_FILENO;
                if (len / 4 * 3 + 3 > l->decoded_size) {
                        uint8_t *p = realloc(l->decoded, len / 4 * 3 + 3);

                        if (!p)
                                return -ENOMEM;
                        l->decoded = p;
                        l->decoded_size = len / 4 * 3 + 3;
                }
                n = base64_decode(data, len, l->decoded);
                if (n < 0) {
                        log_error("spaced sent output that is not base64");
                        return -EBADMSG;
                }
                if (loop_write(fd, l->decoded, (size_t) n) < 0 && fd == STDOUT_FILENO) {
                        /* `spacectl logs ... | head`: stop quietly. */
                        l->stdout_broken = true;
                        return -EPIPE;
                }
                return 0;
        }
        if (streq(event, "error")) {
                cJSON *j = cJSON_ParseWithLength(data, len);
                const char *code = json_str(j, "code"), *msg = json_str(j, "message");

                if (error_code_from_name(code) == ERROR_EVENTS_LOST)
                        log_error("warning: %s", msg ?: "older output is no longer kept");
                else
                        log_error("%s", msg ?: code ?: "the process failed");
                cJSON_Delete(j);
        }
        return 0;
}

static int signal_readable(SpaceStream *s, int fd, void *userdata) {
        int sig = cli_signals_next();

        return sig > 0 ? -EINTR : 0;
}

int cmd_logs(int argc, char *argv[]) {
        _cleanup_free_ char *base = NULL, *path = NULL;
        _cleanup_space_stream_ SpaceStream *s = NULL;
        SpaceHttpReply reply = {};
        Logs l = {};
        bool follow = false;
        unsigned long pid;
        SpaceHttp *h;
        int r, status;
        const CliOption options[] = {
                CLI_FLAG("follow", 'f', &follow),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (argc - optind != 2)
                return cli_usage_error("logs needs a SANDBOX and a PID");
        if (!*argv[optind])
                return cli_usage_error("SANDBOX must not be empty");
        if (cli_parse_ulong("PID", argv[optind + 1], 1, 4194304, &pid) < 0)
                return EXIT_USAGE;

        r = cli_signals_install();
        if (r < 0) {
                log_error("cannot set up signal handling: %s", strerror(-r));
                return EXIT_FAIL;
        }
        h = cli_http();
        if (!h)
                return EXIT_FAIL;
        if (cli_sandbox_path(argv[optind], "/processes", &base) < 0 ||
            asprintf(&path, "%s/%lu/logs%s", base, pid, follow ? "?follow=1" : "") < 0 ||
            space_stream_new_get(h, path, NULL, NULL, on_event, &l, &s) < 0 ||
            space_stream_watch_fd(s, cli_signals_fd(), signal_readable, NULL) < 0) {
                log_error("out of memory");
                return EXIT_FAIL;
        }

        r = space_stream_run(s, &reply);
        if (r == -EPIPE && l.stdout_broken)
                status = 0;
        else if (r == -EINTR)
                status = 128 + (cli_signal_received ?: SIGINT);
        else if (r == -EBADMSG || r == -ENOMEM) {
                if (r == -ENOMEM)
                        log_error("out of memory");
                status = EXIT_FAIL;
        } else if (r < 0) {
                cli_log_transport_error(h, r);
                status = EXIT_FAIL;
        } else if (!space_http_reply_ok(&reply)) {
                log_error("%s", reply.error_message);
                status = EXIT_FAIL;
        } else
                status = 0;
        space_http_reply_done(&reply);
        free(l.decoded);
        return status;
}
