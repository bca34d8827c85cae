/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "macro.h"

const CliHelp cmd_ps_help = {
        .synopsis = "ps SANDBOX [--json] [-q]",
        .summary = "List the processes of a sandbox",
        .options =
        "Options:\n"
        "      --json    print the reply of GET /v1/sandboxes/SANDBOX/processes: {\"processes\": [...]}\n"
        "  -q, --quiet   print only the PIDs, one per line, oldest first\n"
        "  -h, --help    show this help\n"
        "\n"
        "Columns: PID, USER (as given: a name or a uid, and any :GROUP), STATE (held, running, exited, lost),\n"
        "PTY, EXIT (the exit code, the signal that killed the process, or 'timeout'), STARTED, COMMAND.\n",
};

static void format_exit(const cJSON *p, char *buf, size_t size) {
        double v;

        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "timed_out")))
                snprintf(buf, size, "timeout");
        else if (json_num(p, "signal", &v) && v > 0 && v < 128) {
                const char *abbrev = sigabbrev_np((int) v);

                if (abbrev)
                        snprintf(buf, size, "SIG%s", abbrev);
                else
                        snprintf(buf, size, "signal %.0f", v);
        } else if (json_num(p, "exit_code", &v))
                snprintf(buf, size, "%.0f", v);
        else
                snprintf(buf, size, "-");
}

static int print_table(const cJSON *list) {
        static const char *const headers[] = { "PID", "USER", "STATE", "PTY", "EXIT", "STARTED", "COMMAND" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        time_t now = time(NULL);
        const cJSON *p;

        if (!t)
                return -ENOMEM;
        cJSON_ArrayForEach(p, list) {
                _cleanup_free_ char *age = NULL, *cmd = NULL;
                char pid[32] = "-", exit[32];
                double v;

                if (json_num(p, "pid", &v))
                        snprintf(pid, sizeof pid, "%.0f", v);
                format_exit(p, exit, sizeof exit);
                age = json_str(p, "started_at") ? format_age(json_str(p, "started_at"), now) : strdup("-");
                cmd = format_argv(cJSON_GetObjectItemCaseSensitive(p, "argv"));
                if (!age || !cmd)
                        return -ENOMEM;

                const char *cells[] = { pid, json_str(p, "user") ?: "root", json_str(p, "state"),
                                        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "pty")) ? "yes" : "no",
                                        exit, age, cmd };
                if (table_add(t, cells) < 0)
                        return -ENOMEM;
        }
        return table_print(t, stdout);
}

int cmd_ps(int argc, char *argv[]) {
        _cleanup_free_ char *path = NULL;
        bool json = false, quiet = false;
        int r;
        const CliOption options[] = {
                CLI_FLAG("json", 0, &json),
                CLI_FLAG("quiet", 'q', &quiet),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (argc - optind != 1)
                return cli_usage_error("ps needs exactly one SANDBOX");
        if (!*argv[optind])
                return cli_usage_error("SANDBOX must not be empty");
        if (cli_sandbox_path(argv[optind], "/processes", &path) < 0) {
                log_error("out of memory");
                return EXIT_FAIL;
        }

        return cli_list_show(path, "processes", "process", json, quiet ? "pid" : NULL, print_table);
}
