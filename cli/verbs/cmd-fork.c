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

const CliHelp cmd_fork_help = {
        .synopsis = "fork [-n N] [--name NAME] [--async] [--json] [-q] SANDBOX|CHECKPOINT",
        .summary = "Make N new sandboxes that go on from a sandbox or a checkpoint, and print their ids",
        .options =
        "Options:\n"
        "  -n, --count N   how many sandboxes, 1..64 (default 1)\n"
        "      --name NAME name the fork NAME; with -n N > 1, NAME-1 ... NAME-N\n"
        "      --async     print the id of the fork operation instead of waiting for it\n"
        "      --json      print {\"sandboxes\": [...]}, the new ones as inspect --json gives them (with\n"
        "                  --async: the operation) as JSON, not their ids\n"
        "  -q, --quiet     no progress on the terminal\n"
        "  -h, --help      show this help\n"
        "\n"
        "Forking a running sandbox takes a checkpoint of it (a short pause), restores it N times and removes\n"
        "it. Every fork has the same memory and files as its source and then goes its own way, with its own\n"
        "id, hostname, clock and random seed. The new ids are printed one per line once all N run.\n"
        "\n"
        "Which one is meant: an argument starting with 'cp-' is a checkpoint (id or id prefix). Anything else\n"
        "is looked up as a checkpoint name and as a sandbox (id, id prefix or name); if it names both, the fork\n"
        "is refused: give the id.\n",
};

/* 1: a checkpoint, 0: a sandbox, < 0: neither or both (printed). */
static int classify(const char *ref) {
        _cleanup_free_ char *cp_path = NULL, *sb_path = NULL;
        SpaceHttpReply reply = {};
        bool is_cp, is_sb;
        int r;

        if (strncmp(ref, "cp-", 3) == 0)
                return 1;
        if (cli_checkpoint_path(ref, NULL, &cp_path) < 0 || cli_sandbox_path(ref, NULL, &sb_path) < 0)
                return -ENOMEM;
        r = cli_get_quiet(cp_path, &reply);
        if (r < 0 && r != -ENOENT)
                return r;
        /* only a name counts: "c" or "cp" would be id prefixes of checkpoints */
        is_cp = r >= 0 && streq_ptr(json_str(reply.json, "name"), ref);
        if (r >= 0)
                space_http_reply_done(&reply);
        if (!is_cp)
                return 0; /* the sandbox lookup (and its error) is the fork request's */
        r = cli_get_quiet(sb_path, &reply);
        if (r < 0 && r != -ENOENT && r != -EBADMSG)
                return r;
        is_sb = r >= 0;
        if (r >= 0)
                space_http_reply_done(&reply);
        if (is_sb) {
                log_error("'%s' names both a checkpoint and a sandbox; give the checkpoint's id (cp-...) or the "
                          "sandbox's id", ref);
                return -EEXIST;
        }
        return 1;
}

/* --json: the new sandboxes as GET /v1/sandboxes gives them, so a script reads them as it reads ls --json. */
static int print_forks_json(const cJSON *ids) {
        cJSON *doc = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(doc, "sandboxes");
        const cJSON *id;
        int r = 0;

        if (!list) {
                log_error("out of memory");
                cJSON_Delete(doc);
                return -ENOMEM;
        }
        cJSON_ArrayForEach(id, ids) {
                _cleanup_free_ char *path = NULL;
                SpaceHttpReply reply = {};

                if (!cJSON_IsString(id))
                        continue;
                if (cli_sandbox_path(id->valuestring, NULL, &path) < 0) {
                        log_error("out of memory");
                        r = -ENOMEM;
                        break;
                }
                r = cli_call("GET", path, NULL, &reply);
                if (r < 0)
                        break;
                /* the list takes the reply's tree over */
                cJSON_AddItemToArray(list, TAKE_PTR(reply.json));
                space_http_reply_done(&reply);
        }
        if (r >= 0)
                r = cli_print_json(doc);
        cJSON_Delete(doc);
        return r >= 0 && fflush(stdout) == 0 ? 0 : -EIO;
}

int cmd_fork(int argc, char *argv[]) {
        _cleanup_free_ char *path = NULL, *label = NULL;
        bool async = false, json = false, quiet = false;
        const char *name = NULL;
        unsigned long count = 1;
        const cJSON *ids, *id;
        cJSON *body, *op = NULL;
        const char *ref;
        int r, kind;
        const CliOption options[] = {
                CLI_ULONG("count", 'n', "-n", &count, 1, 64),
                CLI_STRING_NOT_EMPTY("name", 0, &name),
                CLI_FLAG("async", 0, &async),
                CLI_FLAG("json", 0, &json),
                CLI_FLAG("quiet", 'q', &quiet),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (argc - optind != 1)
                return cli_usage_error("fork needs one SANDBOX or CHECKPOINT");
        ref = argv[optind];
        if (!*ref)
                return cli_usage_error("an empty SANDBOX or CHECKPOINT names nothing");

        kind = classify(ref);
        if (kind < 0)
                return EXIT_FAIL;
        r = kind ? cli_checkpoint_path(ref, "/fork", &path) : cli_sandbox_path(ref, "/fork", &path);
        body = cJSON_CreateObject();
        if (r < 0 || !body || !cJSON_AddNumberToObject(body, "count", (double) count) ||
            (name && !cJSON_AddStringToObject(body, "name", name)) ||
            asprintf(&label, "forking %s into %lu", ref, count) < 0) {
                cJSON_Delete(body);
                log_error("out of memory");
                return EXIT_FAIL;
        }
        r = cli_lifecycle(&(LifecycleRequest) { .method = "POST", .path = path, .body = body, .async = async,
                                                .json = json, .progress = quiet ? NULL : label },
                          &op);
        cJSON_Delete(body);
        if (r < 0)
                return EXIT_FAIL;
        if (async)
                return 0;

        ids = cJSON_GetObjectItemCaseSensitive(op, "sandbox_ids");
        if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) == 0) {
                log_error("the fork finished but the daemon did not say the new sandboxes' ids; see 'spacectl ls'");
                cJSON_Delete(op);
                return EXIT_FAIL;
        }
        if (json) {
                r = print_forks_json(ids);
                cJSON_Delete(op);
                return r < 0 ? EXIT_FAIL : 0;
        }
        cJSON_ArrayForEach(id, ids)
                if (cJSON_IsString(id))
                        printf("%s\n", id->valuestring);
        cJSON_Delete(op);
        return fflush(stdout) == 0 ? 0 : EXIT_FAIL;
}
