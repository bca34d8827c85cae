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

const CliHelp cmd_key_help = {
        .synopsis = "key create [--name NAME]\n"
                    "key ls [--json] [-q]\n"
                    "key rm ID...",
        .summary = "Manage the API keys that TCP clients (SPACE_API_KEY, E2B SDKs) authenticate with",
        .options =
        "Sub-verbs:\n"
        "  create        mint a key and print it alone on stdout; it is shown this once only\n"
        "  ls            list keys (ID, NAME, CREATED, LAST USED); never the keys themselves\n"
        "  rm ID...      revoke keys and print the id of each one revoked\n"
        "\n"
        "Options:\n"
        "  -n, --name NAME   create: a name to tell the key by\n"
        "      --json        ls: print {\"keys\": [...]}\n"
        "  -q, --quiet       ls: print only the ids\n"
        "  -h, --help        show this help\n",
};

static int key_create(int argc, char *argv[]) {
        SpaceHttpReply reply = {};
        const char *name = NULL, *key;
        cJSON *body;
        int r;
        const CliOption options[] = {
                CLI_STRING("name", 'n', &name),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (optind < argc)
                return cli_usage_error("key create takes no arguments, got '%s'", argv[optind]);

        body = cJSON_CreateObject();
        if (!body || (name && !cJSON_AddStringToObject(body, "name", name))) {
                cJSON_Delete(body);
                log_error("out of memory");
                return EXIT_FAIL;
        }
        r = cli_call("POST", "/v1/keys", body, &reply);
        cJSON_Delete(body);
        if (r < 0)
                return EXIT_FAIL;
        key = json_str(reply.json, "key");
        if (!key) {
                log_error("the daemon created a key but did not return it");
                space_http_reply_done(&reply);
                return EXIT_FAIL;
        }
        printf("%s\n", key);
        r = fflush(stdout);
        fprintf(stderr, "Created API key %s%s%s%s. It is shown this once and cannot be shown again; "
                "revoke it with 'spacectl key rm %s'.\n", json_str(reply.json, "id") ?: "?",
                name ? " (" : "", name ?: "", name ? ")" : "", json_str(reply.json, "id") ?: "ID");
        space_http_reply_done(&reply);
        return r != 0 ? EXIT_FAIL : 0;
}

static int print_table(const cJSON *list) {
        static const char *const headers[] = { "ID", "NAME", "CREATED", "LAST USED" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        time_t now = time(NULL);
        const cJSON *k;

        if (!t)
                return -ENOMEM;
        cJSON_ArrayForEach(k, list) {
                _cleanup_free_ char *created = format_age(json_str(k, "created_at"), now);
                _cleanup_free_ char *used = json_str(k, "last_used_at") ? format_age(json_str(k, "last_used_at"), now)
                                                                         : strdup("never");
                const char *name = json_str(k, "name");

                if (!created || !used)
                        return -ENOMEM;
                const char *cells[] = { json_str(k, "id"), name && *name ? name : "-", created, used };
                if (table_add(t, cells) < 0)
                        return -ENOMEM;
        }
        return table_print(t, stdout);
}

static int key_ls(int argc, char *argv[]) {
        bool json = false, quiet = false;
        int r;

        r = cli_list_options(argc, argv, "key ls", &json, &quiet);
        if (r >= 0)
                return r;

        return cli_list_show("/v1/keys", "keys", "key", json, quiet ? "id" : NULL, print_table);
}

static int key_rm(int argc, char *argv[]) {
        return cli_delete_each(argc, argv, "key rm", "key id", "/v1/keys");
}

static const SubVerb key_verbs[] = {
        { "create", key_create },
        { "ls", key_ls },
        { "rm", key_rm },
};

int cmd_key(int argc, char *argv[]) {
        return cli_run_sub_verb(key_verbs, ELEMENTSOF(key_verbs), argc, argv);
}
