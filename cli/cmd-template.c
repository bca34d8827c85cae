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

#define SHORT_DIGEST_LEN 12

const CliHelp cmd_template_help = {
        .synopsis = "template ls [--json] [-q]\n"
                    "template build DIR [--tag NAME:TAG] [-o FILE] [-q] [-v]",
        .summary = "Work with templates",
        .options =
        "Sub-verbs:\n"
        "  ls            list the templates sandboxes can be created from\n"
        "  build DIR     build the recipe in DIR (see space-template(5)), import it, print its digest\n"
        "\n"
        "Options of ls:\n"
        "      --json    print the reply of GET /v1/templates: {\"templates\": [...]}\n"
        "  -q, --quiet   print only template names, one per line\n"
        "  -h, --help    show this help\n"
        "\n"
        "Options of build:\n"
        "  -t, --tag NAME:TAG    tag the template (default: the recipe's name, NAME:latest)\n"
        "  -o, --output FILE     write the root filesystem tarball to FILE instead of importing it\n"
        "  -q, --quiet           no progress, only errors on stderr\n"
        "  -v, --verbose         the build tools' output on stderr even when it is no terminal\n",
};

static void format_bytes(double b, char *buf, size_t size) {
        static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
        size_t u = 0;

        while (b >= 1024 && u + 1 < ELEMENTSOF(units)) {
                b /= 1024;
                u++;
        }
        snprintf(buf, size, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
}

static int print_table(const cJSON *list) {
        static const char *const headers[] = { "NAME", "DIGEST", "VCPU", "MEMORY", "DISK", "SIZE", "DESCRIPTION" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        const cJSON *tp;

        if (!t)
                return -ENOMEM;
        cJSON_ArrayForEach(tp, list) {
                char digest[SHORT_DIGEST_LEN + 1] = "-", vcpu[32] = "-", mem[32] = "-", disk[32] = "-",
                     size[32] = "-";
                const char *d = json_str(tp, "digest");
                double v;

                if (d) {
                        if (strncmp(d, "sha256:", 7) == 0)
                                d += 7;
                        snprintf(digest, sizeof digest, "%s", d);
                }
                if (json_num(tp, "vcpu", &v))
                        snprintf(vcpu, sizeof vcpu, "%.0f", v);
                if (json_num(tp, "memory_mib", &v))
                        format_mib(v, mem, sizeof mem);
                if (json_num(tp, "disk_mib", &v))
                        format_mib(v, disk, sizeof disk);
                if (json_num(tp, "size_bytes", &v))
                        format_bytes(v, size, sizeof size);

                const char *cells[] = { json_str(tp, "name"), digest, vcpu, mem, disk, size,
                                        json_str(tp, "description") };
                if (table_add(t, cells) < 0)
                        return -ENOMEM;
        }
        return table_print(t, stdout);
}

static int template_ls(int argc, char *argv[]) {
        bool json = false, quiet = false;
        int r;

        r = cli_list_options(argc, argv, "template ls", &json, &quiet);
        if (r >= 0)
                return r;

        return cli_list_show("/v1/templates", "templates", "template", json, quiet ? "name" : NULL, print_table);
}

static const struct {
        const char *name;
        int (*run)(int argc, char *argv[]);
} template_verbs[] = {
        { "ls", template_ls },
        { "build", cmd_template_build },
};

int cmd_template(int argc, char *argv[]) {
        if (argc < 2)
                return cli_usage_error("template needs a sub-verb");
        if (streq(argv[1], "-h") || streq(argv[1], "--help")) {
                cli_print_help(cli_verb, stdout);
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(template_verbs); i++)
                if (streq(argv[1], template_verbs[i].name))
                        return template_verbs[i].run(argc - 1, argv + 1);
        return cli_usage_error("unknown template sub-verb '%s'", argv[1]);
}
