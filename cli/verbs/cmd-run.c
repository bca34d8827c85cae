/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "macro.h"

const CliHelp cmd_run_help = {
        .synopsis = "run [TEMPLATE] [OPTIONS] -- COMMAND [ARG...]\n"
                    "run [OPTIONS] TEMPLATE COMMAND [ARG...]",
        .summary = "Run a command in a new sandbox that is removed afterwards",
        .options =
        "Options (those of create and exec):\n"
        "  -n, --name NAME       name the sandbox\n"
        "      --vcpu N          virtual CPUs\n"
        "  -m, --memory MIB      memory in MiB, 64..65536\n"
        "      --disk MIB        writable disk in MiB, 64..1048576\n"
        "      --egress PROFILE  an egress profile for the sandbox (repeatable; space-egress(5))\n"
        "  -v, --volume NAME:/PATH\n"
        "                        mount volume NAME at PATH (repeatable)\n"
        "  -i, --interactive     forward stdin to the command\n"
        "  -t, --tty             give the command a terminal (a pty)\n"
        "  -e, --env KEY=VALUE   set an environment variable for the command (repeatable)\n"
        "  -w, --workdir DIR     working directory of the command\n"
        "  -u, --user USER[:GROUP]\n"
        "                        run the command as USER (default: the template's user, else root)\n"
        "      --timeout SECS    kill the command after SECS seconds (exit status 124)\n"
        "  -h, --help            show this help\n"
        "\n"
        "The sandbox is removed when the command ends, also after a failure or Ctrl-C. Exit status as for\n"
        "exec: the command's, 128+N, or 124..127 (125: spacectl or spaced failed, also for usage errors).\n",
};

int cmd_run(int argc, char *argv[]) {
        CreateOptions co = {};
        /* The sandbox goes away with the command: nothing to detach from. */
        ExecOptions eo = { .detach_keys = "" };
        const CliOption options[] = {
                CREATE_OPTIONS(&co),
                EXEC_OPTIONS(&eo),
        };
        _cleanup_free_ char *id = NULL;
        int dd, end, r, status;
        SpaceHttp *h;

        dd = cli_find_dashdash(argc, argv);
        end = dd < argc ? dd : argc;

        r = cli_parse_options(end, argv, options, ELEMENTSOF(options), dd < argc ? 0 : CLI_OPTIONS_IN_ORDER);
        if (r >= 0) {
                cJSON_Delete(eo.env);
                return r;
        }

        if (dd < argc) {
                if (end - optind > 1) {
                        cJSON_Delete(eo.env);
                        return cli_usage_error("run takes at most one TEMPLATE before '--', got '%s' too",
                                               argv[optind + 1]);
                }
                if (optind < end)
                        co.template_name = argv[optind];
                eo.argv = argv + dd + 1;
        } else {
                if (optind >= end) {
                        cJSON_Delete(eo.env);
                        return cli_usage_error("run needs a COMMAND");
                }
                co.template_name = argv[optind];
                eo.argv = argv + optind + 1;
        }
        if (!eo.argv[0]) {
                cJSON_Delete(eo.env);
                return cli_usage_error("run needs a COMMAND (after '--', or after TEMPLATE)");
        }

        /* From here on Ctrl-C must not kill us before the sandbox is removed. */
        r = cli_signals_install();
        if (r < 0) {
                log_error("cannot set up signal handling: %s", strerror(-r));
                cJSON_Delete(eo.env);
                return EXIT_SPACECTL;
        }

        h = cli_http();
        if (!h) {
                cJSON_Delete(eo.env);
                return EXIT_SPACECTL;
        }

        space_http_set_cancel(h, &cli_signal_received);
        r = cli_create(&co, &id);
        space_http_set_cancel(h, NULL);

        if (cli_signal_received)
                status = 128 + cli_signal_received;
        else if (r < 0)
                status = EXIT_SPACECTL;
        else {
                /* Signals that came during create were handled above; start exec with an empty pipe. */
                while (cli_signals_next() > 0)
                        ;
                status = cli_exec(id, &eo);
        }

        if (id && cli_remove(id, true, false) < 0)
                log_error("could not remove sandbox %s; remove it with 'spacectl rm -f %s'", id, id);

        cJSON_Delete(eo.env);
        return status;
}
