/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "macro.h"

/* Per long-poll request, so a daemon restart or a lost reply costs at most this. */
#define OP_POLL_SEC 60
#define SHORT_ID_LEN 12

const CliHelp cmd_op_help = {
        .synopsis = "op ls [--json] [--sandbox SANDBOX]\n"
                    "op show OP [--json]\n"
                    "op wait OP [--timeout SECS]\n"
                    "op cancel OP",
        .summary = "Follow operations: the slow lifecycle changes that --async starts",
        .options =
        "Sub-verbs:\n"
        "  ls            list operations, newest first (the last 500)\n"
        "  show OP       show one operation\n"
        "  wait OP       wait until it finished: exit 0 when it succeeded, 1 (with its message) when it\n"
        "                failed, 124 when --timeout passed first\n"
        "  cancel OP     cancel a running import (template import or build) and wait until it stopped: exit 0\n"
        "                when it ended cancelled, 1 when it had finished or cannot be cancelled\n"
        "\n"
        "Options:\n"
        "      --json             print the daemon's JSON (ls: {\"operations\": [...]}, show: the operation)\n"
        "      --sandbox SANDBOX  ls: only the operations of this sandbox\n"
        "      --timeout SECS     wait: give up after SECS seconds (default: wait as long as it takes)\n"
        "  -h, --help             show this help\n",
};

static int print_table(const cJSON *list) {
        static const char *const headers[] = { "ID", "KIND", "STATE", "SANDBOX", "CREATED", "ERROR" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        time_t now = time(NULL);
        const cJSON *op;

        if (!t)
                return -ENOMEM;
        cJSON_ArrayForEach(op, list) {
                _cleanup_free_ char *age = format_age(json_str(op, "created_at"), now);
                char sandbox[SHORT_ID_LEN + 1];
                const cJSON *err = cJSON_GetObjectItemCaseSensitive(op, "error");

                if (!age)
                        return -ENOMEM;
                snprintf(sandbox, sizeof sandbox, "%s", json_str(op, "sandbox_id") ?: "-");
                const char *cells[] = { json_str(op, "id"), json_str(op, "kind"), json_str(op, "state"), sandbox,
                                        age, json_str(err, "message") ?: json_str(err, "code") };
                if (table_add(t, cells) < 0)
                        return -ENOMEM;
        }
        return table_print(t, stdout);
}

static int op_ls(int argc, char *argv[]) {
        _cleanup_free_ char *path = NULL, *esc = NULL;
        const char *sandbox = NULL;
        SpaceHttpReply reply = {};
        bool json = false;
        int r;
        const CliOption options[] = {
                CLI_FLAG("json", 0, &json),
                CLI_STRING("sandbox", 0, &sandbox),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (optind < argc)
                return cli_usage_error("op ls takes no arguments, got '%s'", argv[optind]);
        if (sandbox) {
                _cleanup_free_ char *sb_path = NULL;
                const char *id;

                /* The filter takes a full id: resolve names and prefixes first. */
                if (cli_sandbox_path(sandbox, NULL, &sb_path) < 0)
                        goto oom;
                if (!cli_http())
                        return EXIT_FAIL;
                /* A removed sandbox is unknown now: then the argument is taken as its id. */
                r = space_http_call(cli_http(), "GET", sb_path, NULL, &reply);
                id = r >= 0 && space_http_reply_ok(&reply) ? json_str(reply.json, "id") : NULL;
                r = space_http_escape(id ?: sandbox, &esc);
                space_http_reply_done(&reply);
                if (r < 0)
                        goto oom;
        }
        if (asprintf(&path, "/v1/operations%s%s", esc ? "?sandbox=" : "", esc ?: "") < 0)
                goto oom;

        return cli_list_show(path, "operations", "operation", json, NULL, print_table);
oom:
        log_error("out of memory");
        return EXIT_FAIL;
}

static int op_get(const char *id, SpaceHttpReply *ret) {
        _cleanup_free_ char *esc = NULL, *path = NULL;

        int r;

        r = space_http_escape(id, &esc);
        if (r >= 0)
                r = asprintf(&path, "/v1/operations/%s", esc);
        if (r < 0) {
                log_error("out of memory");
                return -ENOMEM;
        }
        return cli_call("GET", path, NULL, ret);
}

static int op_show(int argc, char *argv[]) {
        SpaceHttpReply reply = {};
        bool json = false;
        int r;
        const CliOption options[] = {
                CLI_FLAG("json", 0, &json),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (argc - optind != 1 || !*argv[optind])
                return cli_usage_error("op show needs exactly one OP");
        if (op_get(argv[optind], &reply) < 0)
                return EXIT_FAIL;
        if (json)
                r = cli_print_json(reply.json);
        else {
                cli_print_fields(reply.json);
                r = 0;
        }
        space_http_reply_done(&reply);
        return r < 0 || fflush(stdout) != 0 ? EXIT_FAIL : 0;
}

/* An answer without a state is no operation this spacectl understands: stop rather than poll it forever. */
static int op_wait_check_state(const cJSON *op, long *wait_sec, void *userdata) {
        if (op && !json_str(op, "state")) {
                log_error("the daemon's answer for operation %s has no state", (const char *) userdata);
                return -EBADMSG;
        }
        return 0;
}

static int op_wait(int argc, char *argv[]) {
        unsigned long timeout = 0;
        const cJSON *err;
        const char *id;
        cJSON *op;
        int r;
        const CliOption options[] = {
                CLI_ULONG("timeout", 0, "--timeout", &timeout, 0, 31536000),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (argc - optind != 1 || !*argv[optind])
                return cli_usage_error("op wait needs exactly one OP");
        id = argv[optind];

        if (!cli_http())
                return EXIT_FAIL;
        space_http_set_cancel(cli_http(), &cli_signal_received);
        if (cli_signals_install() < 0)
                return EXIT_FAIL;

        r = cli_operation_wait(&(OperationWait) { .id = id, .timeout = timeout, .poll_sec = OP_POLL_SEC,
                                                  .progress = op_wait_check_state, .userdata = (void *) id },
                               &op);
        if (r == -ETIMEDOUT) {
                log_error("operation %s is still %s after %lu s", id, json_str(op, "state"), timeout);
                cJSON_Delete(op);
                return EXIT_TIMEDOUT;
        }
        if (r < 0)
                return cli_signal_received ? 128 + cli_signal_received : EXIT_FAIL;
        if (streq_ptr(json_str(op, "state"), "failed")) {
                err = cJSON_GetObjectItemCaseSensitive(op, "error");
                log_error("operation %s failed: %s", id,
                          json_str(err, "message") ?: json_str(err, "code") ?: "no reason given");
                cJSON_Delete(op);
                return EXIT_FAIL;
        }
        cJSON_Delete(op);
        return 0;
}

static int op_cancel(int argc, char *argv[]) {
        _cleanup_free_ char *esc = NULL, *path = NULL;
        SpaceHttpReply reply = {};
        const cJSON *err;
        const char *id;
        cJSON *op = NULL;
        int r;

        r = cli_parse_no_options(argc, argv);
        if (r >= 0)
                return r;
        if (argc - optind != 1 || !*argv[optind])
                return cli_usage_error("op cancel needs exactly one OP");
        id = argv[optind];
        if (space_http_escape(id, &esc) < 0 || asprintf(&path, "/v1/operations/%s?wait=%d", esc, OP_POLL_SEC) < 0) {
                log_error("out of memory");
                return EXIT_FAIL;
        }
        if (cli_call("DELETE", path, NULL, &reply) < 0)
                return EXIT_FAIL;
        op = cJSON_Duplicate(reply.json, true);
        space_http_reply_done(&reply);
        if (op && !streq_ptr(json_str(op, "state"), "succeeded") && !streq_ptr(json_str(op, "state"), "failed")) {
                /* still stopping after a long poll: keep waiting */
                cJSON_Delete(op);
                op = NULL;
                if (!cli_http())
                        return EXIT_FAIL;
                space_http_set_cancel(cli_http(), &cli_signal_received);
                if (cli_signals_install() < 0)
                        return EXIT_FAIL;
                r = cli_operation_wait(&(OperationWait) { .id = id, .poll_sec = OP_POLL_SEC,
                                                          .progress = op_wait_check_state, .userdata = (void *) id },
                                       &op);
                if (r < 0)
                        return cli_signal_received ? 128 + cli_signal_received : EXIT_FAIL;
        }
        err = cJSON_GetObjectItemCaseSensitive(op, "error");
        if (error_code_from_name(json_str(err, "code")) == ERROR_CANCELLED) {
                printf("cancelled %s\n", id);
                cJSON_Delete(op);
                return fflush(stdout) == 0 ? 0 : EXIT_FAIL;
        }
        if (streq_ptr(json_str(op, "state"), "failed"))
                log_error("operation %s failed before the cancel took effect: %s", id,
                          json_str(err, "message") ?: json_str(err, "code") ?: "no reason given");
        else
                log_error("operation %s finished before the cancel took effect", id);
        cJSON_Delete(op);
        return EXIT_FAIL;
}

static const SubVerb op_verbs[] = {
        { "ls", op_ls },
        { "show", op_show },
        { "wait", op_wait },
        { "cancel", op_cancel },
};

int cmd_op(int argc, char *argv[]) {
        return cli_run_sub_verb(op_verbs, ELEMENTSOF(op_verbs), argc, argv);
}
