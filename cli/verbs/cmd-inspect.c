/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "macro.h"

const CliHelp cmd_inspect_help = {
        .synopsis = "inspect SANDBOX [--json]",
        .summary = "Show everything about one sandbox",
        .options =
        "Options:\n"
        "      --json    print the sandbox object of GET /v1/sandboxes/SANDBOX\n"
        "  -h, --help    show this help\n"
        "\n"
        "Text output is one 'key: value' line per field; nested objects as 'key.subkey: value'.\n",
};

int cmd_inspect(int argc, char *argv[]) {
        _cleanup_free_ char *path = NULL;
        SpaceHttpReply reply = {};
        bool json = false;
        int r;

        r = cli_json_flags(argc, argv, &json);
        if (r >= 0)
                return r;
        if (argc - optind != 1)
                return cli_usage_error("inspect needs exactly one SANDBOX");
        if (!*argv[optind])
                return cli_usage_error("SANDBOX must not be empty");

        if (cli_sandbox_path(argv[optind], NULL, &path) < 0) {
                log_error("out of memory");
                return EXIT_FAIL;
        }
        r = cli_call("GET", path, NULL, &reply);
        if (r < 0)
                return EXIT_FAIL;
        if (!cJSON_IsObject(reply.json)) {
                log_error("the daemon's answer for %s is not a sandbox", argv[optind]);
                space_http_reply_done(&reply);
                return EXIT_FAIL;
        }

        if (json)
                r = cli_print_json(reply.json);
        else
                cli_print_fields(reply.json);
        space_http_reply_done(&reply);
        return r < 0 || fflush(stdout) != 0 ? EXIT_FAIL : 0;
}
