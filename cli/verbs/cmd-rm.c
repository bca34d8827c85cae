/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "macro.h"

/* Long-poll on the DELETE itself; cli_wait_operation() takes over if that was not enough. */
#define DELETE_WAIT_SEC 60

const CliHelp cmd_rm_help = {
        .synopsis = "rm [-f] [--async] SANDBOX...",
        .summary = "Remove sandboxes and print the id of each one removed",
        .options =
        "Options:\n"
        "  -f, --force   remove running sandboxes too (stops them first)\n"
        "      --async   print the id of each delete operation instead of waiting for it\n"
        "  -h, --help    show this help\n"
        "\n"
        "All SANDBOXes are tried; the exit status is 1 when any of them could not be removed.\n",
};

int cli_remove(const char *ref, bool force, bool print_id) {
        _cleanup_free_ char *base = NULL, *path = NULL, *id = NULL;
        SpaceHttpReply reply = {};
        cJSON *final = NULL;
        const cJSON *op;
        const char *sid;
        int r;

        r = cli_sandbox_path(ref, NULL, &base);
        if (r < 0 || asprintf(&path, "%s?%swait=%d", base, force ? "force=1&" : "", DELETE_WAIT_SEC) < 0) {
                log_error("out of memory");
                return -ENOMEM;
        }

        r = cli_call("DELETE", path, NULL, &reply);
        if (r < 0)
                return r;

        op = cJSON_GetObjectItemCaseSensitive(reply.json, "operation");
        if (cJSON_IsObject(op)) {
                r = cli_wait_operation(op, &final);
                if (r < 0) {
                        cJSON_Delete(final); /* a failed operation comes back too */
                        space_http_reply_done(&reply);
                        return r;
                }
        }
        sid = json_str(final, "sandbox_id") ?: json_str(op, "sandbox_id");
        id = strdup(sid ?: ref);
        cJSON_Delete(final);
        space_http_reply_done(&reply);
        if (!id)
                return -ENOMEM;

        if (print_id) {
                printf("%s\n", id);
                fflush(stdout);
        }
        return 0;
}

/* --async: start the delete and print its operation's id. */
static int remove_async(const char *ref, bool force) {
        _cleanup_free_ char *base = NULL, *path = NULL;
        SpaceHttpReply reply = {};
        const char *op_id;
        int r;

        r = cli_sandbox_path(ref, NULL, &base);
        if (r < 0 || asprintf(&path, "%s%s", base, force ? "?force=1" : "") < 0) {
                log_error("out of memory");
                return -ENOMEM;
        }
        r = cli_call("DELETE", path, NULL, &reply);
        if (r < 0)
                return r;
        op_id = json_str(cJSON_GetObjectItemCaseSensitive(reply.json, "operation"), "id");
        if (!op_id) {
                log_error("the daemon started removing %s but did not say its operation", ref);
                space_http_reply_done(&reply);
                return -EBADMSG;
        }
        printf("%s\n", op_id);
        fflush(stdout);
        space_http_reply_done(&reply);
        return 0;
}

int cmd_rm(int argc, char *argv[]) {
        bool force = false, failed = false, async = false;
        int r;
        const CliOption options[] = {
                CLI_FLAG("force", 'f', &force),
                CLI_FLAG("async", 0, &async),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (optind >= argc)
                return cli_usage_error("rm needs at least one SANDBOX");

        for (int i = optind; i < argc; i++) {
                if (!*argv[i]) {
                        log_error("an empty SANDBOX names nothing");
                        failed = true;
                        continue;
                }
                if ((async ? remove_async(argv[i], force) : cli_remove(argv[i], force, true)) < 0) {
                        failed = true;
                        if (!cli_http())
                                break; /* no daemon: the rest would fail the same way */
                }
        }
        return failed ? EXIT_FAIL : 0;
}
