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

const CliHelp cmd_info_help = {
        .synopsis = "info [--json]",
        .summary = "Show the daemon: version, socket, API URL, accelerator, confinement, memory, configuration",
        .options =
        "Options:\n"
        "      --json    print the reply of GET /v1/info\n"
        "  -h, --help    show this help\n",
};

/* Whether QEMU runs in namespaces of its own, and why not when it does not (a daemon from before says
 * nothing). */
static void print_confinement(const cJSON *j) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "confined");
        const char *setting = json_str(j, "confine") ?: "?";

        if (cJSON_IsTrue(c))
                printf("Confinement:  QEMU in namespaces of its own (confine = %s)\n", setting);
        else if (cJSON_IsFalse(c))
                printf("Confinement:  none, QEMU runs unconfined: %s (confine = %s)\n",
                       json_str(j, "unconfined_reason") ?: "no reason given", setting);
}

int cmd_info(int argc, char *argv[]) {
        SpaceHttpReply reply = {};
        bool json = false;
        double v, used;
        char a[32], b[32];
        int q, r = 0;

        q = cli_json_flags(argc, argv, &json);
        if (q >= 0)
                return q;
        if (optind < argc)
                return cli_usage_error("info takes no arguments, got '%s'", argv[optind]);

        if (cli_call("GET", "/v1/info", NULL, &reply) < 0)
                return EXIT_FAIL;
        if (!cJSON_IsObject(reply.json)) {
                log_error("the daemon's answer to GET /v1/info is not an object");
                space_http_reply_done(&reply);
                return EXIT_FAIL;
        }

        if (json)
                r = cli_print_json(reply.json);
        else {
                const cJSON *j = reply.json;

                printf("Version:      spaced %s (API %s)\n", json_str(j, "version") ?: "?", json_str(j, "api") ?: "?");
                if (json_str(j, "accel_reason"))
                        printf("Accelerator:  %s (%s)\n", json_str(j, "accel") ?: "?", json_str(j, "accel_reason"));
                else
                        printf("Accelerator:  %s\n", json_str(j, "accel") ?: "?");
                if (json_str(j, "accel_probe"))
                        printf("KVM probe:    %s\n", json_str(j, "accel_probe"));
                if (json_str(j, "host"))
                        printf("Host:         %s\n", json_str(j, "host"));
                print_confinement(j);
                printf("Socket:       %s\n", json_str(j, "socket") ?: "-");
                printf("API URL:      %s\n", json_str(j, "api_url") ?: "- (no TCP listener)");
                {
                        const cJSON *e2b = cJSON_GetObjectItemCaseSensitive(j, "e2b");

                        if (json_str(e2b, "tls_url"))
                                printf("TLS URL:      %s (E2B_DOMAIN %s, CA %s)\n", json_str(e2b, "tls_url"),
                                       json_str(e2b, "domain") ?: "-", json_str(e2b, "ca_file") ?: "-");
                }
                if (json_num(j, "pid", &v))
                        printf("PID:          %.0f\n", v);
                if (json_str(j, "state_dir"))
                        printf("State dir:    %s\n", json_str(j, "state_dir"));
                if (json_num(j, "memory_limit_mib", &v) && json_num(j, "memory_in_use_mib", &used)) {
                        format_mib(used, a, sizeof a);
                        format_mib(v, b, sizeof b);
                        printf("Memory:       %s in use of %s\n", a, b);
                }
                if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "config")))
                        cli_print_config(cJSON_GetObjectItemCaseSensitive(j, "config"), "Config:       ");
                printf("Connected to: %s\n", space_http_endpoint(cli_http()));
        }
        space_http_reply_done(&reply);
        return r < 0 || fflush(stdout) != 0 ? EXIT_FAIL : 0;
}
