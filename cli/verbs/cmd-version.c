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

const CliHelp cmd_version_help = {
        .synopsis = "version [--json]",
        .summary = "Show the version of spacectl and, when it is reachable, of spaced",
        .options =
        "Options:\n"
        "      --json    print {\"client\": {\"version\"}, \"server\": GET /v1/version or null}\n"
        "  -h, --help    show this help\n"
        "\n"
        "Does not start spaced. The exit status is 0 even when spaced is not reachable.\n",
};

int cmd_version(int argc, char *argv[]) {
        SpaceHttpReply reply = {};
        bool json = false, have_server = false;
        SpaceHttp *h;
        int q, r = -ENOTCONN;

        q = cli_json_flags(argc, argv, &json);
        if (q >= 0)
                return q;
        if (optind < argc)
                return cli_usage_error("version takes no arguments, got '%s'", argv[optind]);

        /* Not VERB_DAEMON: asking for versions must not start anything. */
        h = cli_http();
        if (h) {
                r = space_http_call(h, "GET", "/v1/version", NULL, &reply);
                have_server = r >= 0 && space_http_reply_ok(&reply) && cJSON_IsObject(reply.json);
        }

        if (json) {
                cJSON *o = cJSON_CreateObject(), *client;

                if (!o || !(client = cJSON_AddObjectToObject(o, "client")) ||
                    !cJSON_AddStringToObject(client, "version", PACKAGE_VERSION)) {
                        cJSON_Delete(o);
                        space_http_reply_done(&reply);
                        log_error("out of memory");
                        return EXIT_FAIL;
                }
                if (have_server)
                        cJSON_AddItemToObject(o, "server", cJSON_Duplicate(reply.json, true));
                else
                        cJSON_AddNullToObject(o, "server");
                r = cli_print_json(o);
                cJSON_Delete(o);
        } else {
                printf("Client: spacectl %s\n", PACKAGE_VERSION);
                if (have_server) {
                        const char *v = json_str(reply.json, "version"), *api = json_str(reply.json, "api"),
                                   *accel = json_str(reply.json, "accel"), *sock = json_str(reply.json, "socket");

                        printf("Server: spaced %s (API %s, accel %s%s%s)\n", v ?: "?", api ?: "?", accel ?: "?",
                               sock ? ", socket " : "", sock ?: "");
                } else if (!h)
                        printf("Server: unknown\n");
                else if (r < 0)
                        printf("Server: not reachable at %s (%s)\n", space_http_endpoint(h),
                               space_http_error_is_unreachable(r) ? strerror(-r) : space_http_last_error(h));
                else
                        printf("Server: error (%s)\n", reply.error_message ?: "unexpected answer");
                r = 0;
        }
        space_http_reply_done(&reply);
        return r < 0 || fflush(stdout) != 0 ? EXIT_FAIL : 0;
}
