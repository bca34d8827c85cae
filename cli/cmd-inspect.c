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

const CliHelp cmd_inspect_help = {
        .synopsis = "inspect SANDBOX [--json]",
        .summary = "Show everything about one sandbox",
        .options =
        "Options:\n"
        "      --json    print the sandbox object of GET /v1/sandboxes/SANDBOX\n"
        "  -h, --help    show this help\n"
        "\n"
        "Text output is one 'key: value' line per field; nested objects as 'key.subkey: value'.\n",
};

static void print_value(const char *prefix, const cJSON *v) {
        const cJSON *c;

        if (cJSON_IsObject(v)) {
                cJSON_ArrayForEach(c, v) {
                        _cleanup_free_ char *key = NULL;

                        if (asprintf(&key, "%s.%s", prefix, c->string) < 0)
                                return;
                        print_value(key, c);
                }
                return;
        }

        printf("%s: ", prefix);
        if (cJSON_IsString(v))
                fputs(v->valuestring, stdout);
        else if (cJSON_IsNull(v))
                fputs("-", stdout);
        else if (cJSON_IsTrue(v))
                fputs("true", stdout);
        else if (cJSON_IsFalse(v))
                fputs("false", stdout);
        else if (cJSON_IsNumber(v) && v->valuedouble == (double) (long long) v->valuedouble)
                printf("%lld", (long long) v->valuedouble);
        else {
                _cleanup_free_ char *s = cJSON_PrintUnformatted(v);
                fputs(s ?: "?", stdout);
        }
        fputc('\n', stdout);
}

int cmd_inspect(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, OPT_JSON },
                {}
        };
        _cleanup_free_ char *path = NULL;
        SpaceHttpReply reply = {};
        const cJSON *c;
        bool json = false;
        int opt, r;

        opterr = 0;
        while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
                switch (opt) {
                case 'h':
                        cli_print_help(cli_verb, stdout);
                        return 0;
                case OPT_JSON:
                        json = true;
                        break;
                default:
                        return cli_bad_option(opt, argv);
                }
        }
        if (argc - optind != 1)
                return cli_usage_error("inspect needs exactly one SANDBOX");
        if (!*argv[optind])
                return cli_usage_error("SANDBOX must not be empty");

        if (cli_sandbox_path(argv[optind], NULL, &path) < 0) {
                log_error("out of memory");
                return EXIT_FAIL;
        }
        r = cli_call("GET", path, NULL, &reply);
        if (r < 0)
                return EXIT_FAIL;
        if (!cJSON_IsObject(reply.json)) {
                log_error("the daemon's answer for %s is not a sandbox", argv[optind]);
                space_http_reply_done(&reply);
                return EXIT_FAIL;
        }

        if (json)
                r = cli_print_json(reply.json);
        else
                cJSON_ArrayForEach(c, reply.json)
                        print_value(c->string, c);
        space_http_reply_done(&reply);
        return r < 0 || fflush(stdout) != 0 ? EXIT_FAIL : 0;
}
