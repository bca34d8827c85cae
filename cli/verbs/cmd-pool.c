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

const CliHelp cmd_pool_help = {
        .synopsis = "pool set TEMPLATE N | pool ls [--json]",
        .summary = "Keep N warm sandboxes of a template so that create is one resume away",
        .options =
        "Sub-verbs:\n"
        "  set TEMPLATE N   keep N restored-and-paused sandboxes of TEMPLATE (0 removes the pool)\n"
        "  ls [--json]      list the pools: size, ready members, members being made\n"
        "\n"
        "A create of the template's default shape (no --vcpu, --memory or --disk) takes a warm sandbox.\n"
        "The pool refills in the background and only uses memory below the daemon's limit.\n",
};

static int pool_set(int argc, char *argv[]) {
        _cleanup_free_ char *esc = NULL, *path = NULL;
        SpaceHttpReply reply = {};
        cJSON *body;
        char *end;
        long n;
        int r;

        if (argc != 3)
                return cli_usage_error("pool set needs TEMPLATE and N");
        errno = 0;
        n = strtol(argv[2], &end, 10);
        if (errno || end == argv[2] || *end || n < 0 || n > 64)
                return cli_usage_error("pool size '%s' is not a whole number from 0 to 64", argv[2]);
        if (space_http_escape(argv[1], &esc) < 0 || asprintf(&path, "/v1/pools/%s", esc) < 0) {
                log_error("out of memory");
                return EXIT_FAIL;
        }
        body = cJSON_CreateObject();
        cJSON_AddNumberToObject(body, "size", (double) n);
        r = cli_call("PUT", path, body, &reply);
        cJSON_Delete(body);
        if (r < 0)
                return EXIT_FAIL;
        space_http_reply_done(&reply);
        return 0;
}

static int pool_ls(int argc, char *argv[]) {
        static const char *const headers[] = { "TEMPLATE", "SIZE", "READY", "FILLING" };
        SpaceHttpReply reply = {};
        const cJSON *list, *p;
        Table *t;
        int r = 0;

        if (argc > 2 || (argc == 2 && !streq(argv[1], "--json")))
                return cli_usage_error("pool ls takes only --json");
        if (cli_call("GET", "/v1/pools", NULL, &reply) < 0)
                return EXIT_FAIL;
        if (argc == 2) {
                r = cli_print_json(reply.json);
                space_http_reply_done(&reply);
                return r < 0 ? EXIT_FAIL : 0;
        }
        list = cJSON_GetObjectItemCaseSensitive(reply.json, "pools");
        t = table_new(ELEMENTSOF(headers), headers);
        cJSON_ArrayForEach(p, list) {
                char size[16] = "-", ready[16] = "-", filling[16] = "-";
                double v;

                if (json_num(p, "size", &v))
                        snprintf(size, sizeof size, "%.0f", v);
                if (json_num(p, "ready", &v))
                        snprintf(ready, sizeof ready, "%.0f", v);
                if (json_num(p, "filling", &v))
                        snprintf(filling, sizeof filling, "%.0f", v);
                const char *cells[] = { json_str(p, "template") ?: "?", size, ready, filling };
                if (t)
                        (void) table_add(t, cells);
        }
        if (t)
                r = table_print(t, stdout);
        table_free(t);
        space_http_reply_done(&reply);
        return r < 0 ? EXIT_FAIL : 0;
}

static const SubVerb pool_verbs[] = {
        { "set", pool_set },
        { "ls", pool_ls },
};

int cmd_pool(int argc, char *argv[]) {
        return cli_run_sub_verb(pool_verbs, ELEMENTSOF(pool_verbs), argc, argv);
}
