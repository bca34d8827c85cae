/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "macro.h"

/* spacectl volume: the daemon's volumes (/v1/volumes), named storage that outlives sandboxes. */

const CliHelp cmd_volume_help = {
        .synopsis = "volume create NAME [--quota SIZE]\n"
                    "volume ls [--json] [-q]\n"
                    "volume rm NAME...",
        .summary = "Manage volumes: named storage kept by the daemon, which outlives sandboxes",
        .options =
        "Sub-verbs:\n"
        "  create NAME   make an empty volume (NAME: letters, digits, '.', '_', '-')\n"
        "  ls            list volumes (NAME, ID, USED, QUOTA, CREATED)\n"
        "  rm NAME...    remove volumes and all their files, printing the name of each one removed\n"
        "\n"
        "Options:\n"
        "      --quota SIZE  create: the most its files may hold, bytes with an optional K, M, G or T\n"
        "                    (default: volume_quota in spaced.conf, else 1G)\n"
        "      --json        ls: print {\"volumes\": [...]}\n"
        "  -q, --quiet       ls: print only the names\n"
        "  -h, --help        show this help\n"
        "\n"
        "Mount one into a sandbox with 'spacectl create --volume NAME:/PATH'; one that a sandbox mounts\n"
        "cannot be removed until the sandbox is.\n",
};

/* A size: digits and an optional K, M, G or T (powers of 1024). */
static int option_size(const char *arg, void *userdata) {
        unsigned long long *ret = userdata, v;
        unsigned shift = 0;
        char *end;

        errno = 0;
        v = strtoull(arg, &end, 10);
        if (!errno && end != arg && isdigit((unsigned char) *arg) && *end) {
                const char *units = "KMGT", *u = strchr(units, toupper((unsigned char) *end));
                shift = u && !end[1] ? 10 * (unsigned) (u - units + 1) : 64;
        }
        if (errno || end == arg || !isdigit((unsigned char) *arg) || shift >= 64 || v == 0 || v > (~0ULL >> shift)) {
                (void) cli_usage_error("--quota: '%s' is not a size (such as 512M or 10G)", arg);
                return -EINVAL;
        }
        *ret = v << shift;
        return 0;
}

static int volume_create(int argc, char *argv[]) {
        SpaceHttpReply reply = {};
        unsigned long long quota = 0;
        cJSON *body;
        int r;
        const CliOption options[] = {
                CLI_PARSE("quota", 0, option_size, &quota),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (optind + 1 != argc)
                return cli_usage_error("volume create takes one NAME");
        body = cJSON_CreateObject();
        if (!body || !cJSON_AddStringToObject(body, "name", argv[optind]) ||
            (quota && !cJSON_AddNumberToObject(body, "quota", (double) quota))) {
                cJSON_Delete(body);
                log_error("out of memory");
                return EXIT_FAIL;
        }
        r = cli_call("POST", "/v1/volumes", body, &reply);
        cJSON_Delete(body);
        if (r < 0)
                return EXIT_FAIL;
        printf("%s\n", json_str(reply.json, "id") ?: "");
        fprintf(stderr, "Created volume %s.\n", json_str(reply.json, "name") ?: argv[optind]);
        space_http_reply_done(&reply);
        return 0;
}

static char *format_bytes(double n) {
        static const char *const units[] = { "B", "K", "M", "G", "T", "P" };
        size_t u = 0;
        char *s;

        while (n >= 1024 && u + 1 < ELEMENTSOF(units)) {
                n /= 1024;
                u++;
        }
        return asprintf(&s, u ? "%.1f%s" : "%.0f%s", n, units[u]) < 0 ? NULL : s;
}

static int print_table(const cJSON *list) {
        static const char *const headers[] = { "NAME", "ID", "USED", "QUOTA", "CREATED" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        time_t now = time(NULL);
        const cJSON *v;

        if (!t)
                return -ENOMEM;
        cJSON_ArrayForEach(v, list) {
                double usage = -1, quota = 0;
                bool known = json_num(v, "usage", &usage);
                _cleanup_free_ char *created = format_age(json_str(v, "created_at"), now);
                _cleanup_free_ char *used = known ? format_bytes(usage) : strdup("?");
                _cleanup_free_ char *q = (json_num(v, "quota", &quota), format_bytes(quota));

                if (!created || !used || !q)
                        return -ENOMEM;
                const char *cells[] = { json_str(v, "name"), json_str(v, "id"), used, q, created };
                if (table_add(t, cells) < 0)
                        return -ENOMEM;
        }
        return table_print(t, stdout);
}

static int volume_ls(int argc, char *argv[]) {
        bool json = false, quiet = false;
        int r;

        r = cli_list_options(argc, argv, "volume ls", &json, &quiet);
        if (r >= 0)
                return r;
        return cli_list_show("/v1/volumes", "volumes", "volume", json, quiet ? "name" : NULL, print_table);
}

static int volume_rm(int argc, char *argv[]) {
        return cli_delete_each(argc, argv, "volume rm", "volume name", "/v1/volumes");
}

static const SubVerb volume_verbs[] = {
        { "create", volume_create },
        { "ls", volume_ls },
        { "rm", volume_rm },
};

int cmd_volume(int argc, char *argv[]) {
        return cli_run_sub_verb(volume_verbs, ELEMENTSOF(volume_verbs), argc, argv);
}
