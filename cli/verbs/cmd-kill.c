/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "macro.h"

const CliHelp cmd_kill_help = {
        .synopsis = "kill [-s SIGNAL] SANDBOX PID",
        .summary = "Send a signal to a process in a sandbox",
        .options =
        "Options:\n"
        "  -s, --signal SIGNAL   the signal: a name (TERM, SIGTERM, kill, ...) or a number 1..64 (default: TERM)\n"
        "  -h, --help            show this help\n",
};

/* "TERM", "SIGTERM", "sigterm", "15" */
static int parse_signal(const char *s, int *ret) {
        unsigned long n;
        char *end;

        if (*s >= '0' && *s <= '9') {
                errno = 0;
                n = strtoul(s, &end, 10);
                if (*end || errno || n < 1 || n > 64)
                        return -EINVAL;
                *ret = (int) n;
                return 0;
        }
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        for (int sig = 1; sig < NSIG; sig++) {
                const char *abbrev = sigabbrev_np(sig);

                if (abbrev && strcasecmp(abbrev, s) == 0) {
                        *ret = sig;
                        return 0;
                }
        }
        return -EINVAL;
}

static int parse_signal_option(const char *arg, void *userdata) {
        if (parse_signal(arg, userdata) < 0) {
                (void) cli_usage_error("--signal: '%s' is not a signal name (TERM, KILL, ...) or number 1..64", arg);
                return -EINVAL;
        }
        return 0;
}

int cmd_kill(int argc, char *argv[]) {
        _cleanup_free_ char *base = NULL, *path = NULL;
        SpaceHttpReply reply = {};
        unsigned long pid;
        cJSON *body;
        int r, sig = SIGTERM;
        const CliOption options[] = {
                CLI_PARSE("signal", 's', parse_signal_option, &sig),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (argc - optind != 2)
                return cli_usage_error("kill needs a SANDBOX and a PID");
        if (!*argv[optind])
                return cli_usage_error("SANDBOX must not be empty");
        if (cli_parse_ulong("PID", argv[optind + 1], 1, 4194304, &pid) < 0)
                return EXIT_USAGE;

        if (cli_sandbox_path(argv[optind], "/processes", &base) < 0 ||
            asprintf(&path, "%s/%lu/signal", base, pid) < 0)
                goto oom;
        body = cJSON_CreateObject();
        if (!body || !cJSON_AddNumberToObject(body, "signal", sig)) {
                cJSON_Delete(body);
                goto oom;
        }
        r = cli_call("POST", path, body, &reply);
        cJSON_Delete(body);
        if (r < 0)
                return EXIT_FAIL;
        space_http_reply_done(&reply);
        return 0;
oom:
        log_error("out of memory");
        return EXIT_FAIL;
}
