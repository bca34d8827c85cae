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

#define SHORT_ID_LEN 12

const CliHelp cmd_checkpoint_help = {
        .synopsis = "checkpoint [--name NAME] [--async] [-q] SANDBOX\n"
                    "checkpoint ls [--json] [-q] [--sandbox SANDBOX]\n"
                    "checkpoint rm CHECKPOINT...",
        .summary = "Take, list and remove checkpoints: named snapshots of running sandboxes",
        .options =
        "Sub-verbs:\n"
        "  SANDBOX       take a checkpoint of a running sandbox; prints its id on stdout and how long the\n"
        "                sandbox was paused on stderr\n"
        "  ls            list checkpoints, newest first\n"
        "  rm CP...      remove checkpoints (by id, unique id prefix or name); prints each id removed\n"
        "\n"
        "Options:\n"
        "      --name NAME        name the checkpoint (usable wherever its id is)\n"
        "      --async            print the id of the checkpoint operation instead of waiting for it\n"
        "  -q, --quiet            take: no progress and no pause time on stderr; ls: print only the ids\n"
        "      --json             ls: print the daemon's JSON ({\"checkpoints\": [...]})\n"
        "      --sandbox SANDBOX  ls: only the checkpoints of this sandbox (also a removed one's full id)\n"
        "  -h, --help             show this help\n"
        "\n"
        "A checkpoint keeps the sandbox's memory and files; 'spacectl restore SANDBOX CP' puts a sandbox back\n"
        "to it and 'spacectl fork CP -n N' makes N new sandboxes from it. A SANDBOX named ls or rm must be\n"
        "given by id.\n",
};

static int checkpoint_take(int argc, char *argv[]) {
        _cleanup_free_ char *path = NULL, *label = NULL, *cp_path = NULL;
        const char *name = NULL, *cp_id;
        bool async = false, quiet = false;
        SpaceHttpReply reply = {};
        cJSON *body = NULL, *op = NULL;
        double pause_ms, size;
        int r;
        const CliOption options[] = {
                CLI_STRING_NOT_EMPTY("name", 'n', &name),
                CLI_FLAG("async", 0, &async),
                CLI_FLAG("quiet", 'q', &quiet),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (optind >= argc)
                return cli_usage_error("checkpoint needs a SANDBOX (or ls, rm)");
        if (argc - optind > 1)
                return cli_usage_error("checkpoint takes one SANDBOX, got '%s' too", argv[optind + 1]);
        if (!*argv[optind])
                return cli_usage_error("an empty SANDBOX names nothing");

        body = cJSON_CreateObject();
        if (!body || (name && !cJSON_AddStringToObject(body, "name", name)) ||
            cli_sandbox_path(argv[optind], "/checkpoints", &path) < 0 ||
            asprintf(&label, "checkpointing %s", argv[optind]) < 0) {
                cJSON_Delete(body);
                log_error("out of memory");
                return EXIT_FAIL;
        }
        r = cli_lifecycle(&(LifecycleRequest) { .method = "POST", .path = path, .body = body, .async = async,
                                                .progress = quiet ? NULL : label },
                          &op);
        cJSON_Delete(body);
        if (r < 0)
                return EXIT_FAIL;
        if (async)
                return 0;

        cp_id = json_str(op, "checkpoint_id");
        if (!cp_id) {
                log_error("the checkpoint was taken but the daemon did not say its id; see 'spacectl checkpoint ls'");
                cJSON_Delete(op);
                return EXIT_FAIL;
        }
        printf("%s\n", cp_id);
        if (fflush(stdout) != 0) {
                cJSON_Delete(op);
                return EXIT_FAIL;
        }
        /* The pause the sandbox saw is the figure that matters to the user. */
        if (!quiet && cli_checkpoint_path(cp_id, NULL, &cp_path) >= 0 && cli_get_quiet(cp_path, &reply) >= 0) {
                if (json_num(reply.json, "pause_ms", &pause_ms)) {
                        char sz[32] = "";

                        if (json_num(reply.json, "size_bytes", &size))
                                format_mib(size / (1024.0 * 1024.0), sz, sizeof sz);
                        fprintf(stderr, "checkpoint %s: sandbox paused for %.1f ms%s%s\n", cp_id, pause_ms,
                                sz[0] ? ", state " : "", sz);
                }
                space_http_reply_done(&reply);
        }
        cJSON_Delete(op);
        return 0;
}

/* The full id of a sandbox reference, or the reference itself when no live sandbox has it (a removed
 * sandbox's checkpoints are listed by its full id). */
static char *sandbox_full_id(const char *ref) {
        _cleanup_free_ char *path = NULL;
        SpaceHttpReply reply = {};
        char *id;

        if (cli_sandbox_path(ref, NULL, &path) < 0)
                return NULL;
        if (cli_get_quiet(path, &reply) < 0)
                return strdup(ref);
        id = strdup(json_str(reply.json, "id") ?: ref);
        space_http_reply_done(&reply);
        return id;
}

static int print_table(const cJSON *list) {
        static const char *const headers[] = { "ID", "NAME", "SANDBOX", "TEMPLATE", "CREATED", "PAUSE", "SIZE", "STATE" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        time_t now = time(NULL);
        const cJSON *cp;

        if (!t)
                return -ENOMEM;
        cJSON_ArrayForEach(cp, list) {
                _cleanup_free_ char *age = format_age(json_str(cp, "created_at"), now);
                char sandbox[SHORT_ID_LEN + 1], pause[32] = "-", size[32] = "-";
                double v;

                if (!age)
                        return -ENOMEM;
                snprintf(sandbox, sizeof sandbox, "%s", json_str(cp, "sandbox_id") ?: "-");
                if (json_num(cp, "pause_ms", &v))
                        snprintf(pause, sizeof pause, "%.1f ms", v);
                if (json_num(cp, "size_bytes", &v))
                        format_mib(v / (1024.0 * 1024.0), size, sizeof size);
                const char *cells[] = { json_str(cp, "id"), json_str(cp, "name"), sandbox, json_str(cp, "template"),
                                        age, pause, size, json_str(cp, "state") };
                if (table_add(t, cells) < 0)
                        return -ENOMEM;
        }
        return table_print(t, stdout);
}

static int checkpoint_ls(int argc, char *argv[]) {
        _cleanup_free_ char *path = NULL, *sid = NULL, *esc = NULL;
        const char *sandbox = NULL;
        bool json = false, quiet = false;
        int r;
        const CliOption options[] = {
                CLI_FLAG("json", 0, &json),
                CLI_FLAG("quiet", 'q', &quiet),
                CLI_STRING_NOT_EMPTY("sandbox", 's', &sandbox),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (optind < argc)
                return cli_usage_error("checkpoint ls takes no arguments, got '%s'", argv[optind]);

        if (sandbox) {
                sid = sandbox_full_id(sandbox);
                if (!sid || space_http_escape(sid, &esc) < 0 || asprintf(&path, "/v1/checkpoints?sandbox=%s", esc) < 0) {
                        log_error("out of memory");
                        return EXIT_FAIL;
                }
        }
        return cli_list_show(path ?: "/v1/checkpoints", "checkpoints", "checkpoint", json, quiet ? "id" : NULL,
                             print_table);
}

static int remove_one(const char *ref) {
        _cleanup_free_ char *path = NULL, *id = NULL;
        SpaceHttpReply reply = {};
        int r;

        if (cli_checkpoint_path(ref, NULL, &path) < 0)
                return -ENOMEM;
        /* Resolve first, so that what is printed is the id, whatever the user named it by. */
        r = cli_call("GET", path, NULL, &reply);
        if (r < 0)
                return r;
        id = strdup(json_str(reply.json, "id") ?: ref);
        space_http_reply_done(&reply);
        free(path);
        path = NULL;
        if (!id || cli_checkpoint_path(id, NULL, &path) < 0)
                return -ENOMEM;
        r = cli_call("DELETE", path, NULL, &reply);
        if (r < 0)
                return r;
        space_http_reply_done(&reply);
        printf("%s\n", id);
        fflush(stdout);
        return 0;
}

static int checkpoint_rm(int argc, char *argv[]) {
        bool failed = false;
        int r;
        r = cli_parse_options(argc, argv, NULL, 0, 0);
        if (r >= 0)
                return r;
        if (optind >= argc)
                return cli_usage_error("checkpoint rm needs at least one CHECKPOINT");
        for (int i = optind; i < argc; i++) {
                if (!*argv[i]) {
                        log_error("an empty CHECKPOINT names nothing");
                        failed = true;
                        continue;
                }
                if (remove_one(argv[i]) < 0) {
                        failed = true;
                        if (!cli_http())
                                break;
                }
        }
        return failed ? EXIT_FAIL : 0;
}

static const SubVerb checkpoint_verbs[] = {
        { "ls", checkpoint_ls },
        { "rm", checkpoint_rm },
        { NULL, checkpoint_take }, /* checkpoint [OPTIONS] SANDBOX */
};

int cmd_checkpoint(int argc, char *argv[]) {
        return cli_run_sub_verb(checkpoint_verbs, ELEMENTSOF(checkpoint_verbs), argc, argv);
}
