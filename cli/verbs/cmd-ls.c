/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "macro.h"

#define SHORT_ID_LEN 12

const CliHelp cmd_ls_help = {
        .synopsis = "ls [--json] [-q]",
        .summary = "List sandboxes",
        .options =
        "Options:\n"
        "      --json    print the reply of GET /v1/sandboxes: {\"sandboxes\": [...]}\n"
        "  -q, --quiet   print only full ids, one per line\n"
        "  -h, --help    show this help\n",
};

static int print_table(const cJSON *list) {
        static const char *const headers[] = { "ID", "NAME", "TEMPLATE", "STATE", "VCPU", "MEMORY", "CREATED" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        time_t now = time(NULL);
        const cJSON *sb;

        if (!t)
                return -ENOMEM;
        cJSON_ArrayForEach(sb, list) {
                char id[SHORT_ID_LEN + 1], vcpu[32] = "-", mem[32] = "-";
                _cleanup_free_ char *age = NULL;
                const char *name = json_str(sb, "name");
                double v;

                snprintf(id, sizeof id, "%s", json_str(sb, "id") ?: "-");
                if (json_num(sb, "vcpu", &v))
                        snprintf(vcpu, sizeof vcpu, "%.0f", v);
                if (json_num(sb, "memory_mib", &v))
                        format_mib(v, mem, sizeof mem);
                age = format_age(json_str(sb, "created_at"), now);
                if (!age)
                        return -ENOMEM;

                const char *cells[] = { id, name && *name ? name : "-", json_str(sb, "template"),
                                        json_str(sb, "state"), vcpu, mem, age };
                if (table_add(t, cells) < 0)
                        return -ENOMEM;
        }
        return table_print(t, stdout);
}

int cmd_ls(int argc, char *argv[]) {
        bool json = false, quiet = false;
        int r;

        r = cli_list_options(argc, argv, "ls", &json, &quiet);
        if (r >= 0)
                return r;

        return cli_list_show("/v1/sandboxes", "sandboxes", "sandbox", json, quiet ? "id" : NULL, print_table);
}
