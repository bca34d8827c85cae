/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>

#include "cli.h"
#include "macro.h"

const CliHelp cmd_restore_help = {
        .synopsis = "restore [--async] SANDBOX CHECKPOINT",
        .summary = "Put a sandbox back to a checkpoint: its memory, processes and files as they were then",
        .options =
        "Options:\n"
        "      --async   print the id of the restore operation instead of waiting for it\n"
        "  -h, --help    show this help\n"
        "\n"
        "SANDBOX keeps its id and name; what ran in it is replaced by the checkpoint's state, and it gets a\n"
        "fresh identity (clock, random seed). CHECKPOINT is an id, a unique id prefix or a name; it may come\n"
        "from another sandbox of the same template. Prints the sandbox's id when done.\n",
};

int cmd_restore(int argc, char *argv[]) {
        _cleanup_free_ char *path = NULL;
        bool async = false;
        cJSON *body, *op = NULL;
        int r;
        const CliOption options[] = {
                CLI_FLAG("async", 0, &async),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (argc - optind != 2)
                return cli_usage_error("restore needs a SANDBOX and a CHECKPOINT");
        if (!*argv[optind] || !*argv[optind + 1])
                return cli_usage_error("an empty SANDBOX or CHECKPOINT names nothing");

        body = cJSON_CreateObject();
        if (!body || !cJSON_AddStringToObject(body, "checkpoint", argv[optind + 1]) ||
            cli_sandbox_path(argv[optind], "/restore", &path) < 0) {
                cJSON_Delete(body);
                log_error("out of memory");
                return EXIT_FAIL;
        }
        r = cli_lifecycle(&(LifecycleRequest) { .method = "POST", .path = path, .body = body, .async = async },
                          &op);
        cJSON_Delete(body);
        if (r < 0)
                return EXIT_FAIL;
        if (!async) {
                printf("%s\n", json_str(op, "sandbox_id") ?: argv[optind]);
                cJSON_Delete(op);
        }
        return fflush(stdout) == 0 ? 0 : EXIT_FAIL;
}
