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

const CliHelp cmd_daemon_help = {
        .synopsis = "daemon reload [--json]",
        .summary = "Make the running daemon re-read its configuration file",
        .options =
        "Sub-verbs:\n"
        "  reload        re-read spaced.conf (and SPACE_EGRESS_PROFILES) without losing sandboxes, as SIGHUP\n"
        "                does; a bad file is refused, naming the line, and the configuration in use stays\n"
        "                (exit 1). Running sandboxes follow their egress profiles' new definitions from\n"
        "                their next connection; state_dir, listen, accel, confine and qemu take a restart\n"
        "\n"
        "Options:\n"
        "      --json    print the configuration now in force as JSON\n"
        "  -h, --help    show this help\n",
};

/* Prints the configuration in force (config in GET /v1/info), for reload and info. */
void cli_print_config(const cJSON *c, const char *label) {
        double profiles = 0, base = 0;
        const cJSON *restart = cJSON_GetObjectItemCaseSensitive(c, "restart_needed"), *k;

        (void) json_num(c, "egress_profiles", &profiles);
        (void) json_num(c, "egress_base_rules", &base);
        printf("%s%s%s (read %s): %.0f egress profile(s), %.0f base rule(s)\n", label, json_str(c, "file") ?: "?",
               cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(c, "exists")) ? " (absent: the defaults)" : "",
               json_str(c, "loaded_at") ?: "?", profiles, base);
        cJSON_ArrayForEach(k, restart)
                if (cJSON_IsString(k))
                        log_error("warning: '%s' changed in the file but keeps its value until spaced restarts",
                                  k->valuestring);
}

static int daemon_reload_verb(int argc, char *argv[]) {
        SpaceHttpReply reply = {};
        bool json = false;
        int r;

        r = cli_json_flags(argc, argv, &json);
        if (r >= 0)
                return r;
        if (optind < argc)
                return cli_usage_error("daemon reload takes no arguments, got '%s'", argv[optind]);
        if (cli_call("POST", "/v1/daemon/reload", NULL, &reply) < 0)
                return EXIT_FAIL;
        if (json)
                r = cli_print_json(reply.json);
        else {
                cli_print_config(reply.json, "reloaded ");
                r = 0;
        }
        space_http_reply_done(&reply);
        return r < 0 || fflush(stdout) != 0 ? EXIT_FAIL : 0;
}

static const SubVerb daemon_verbs[] = {
        { "reload", daemon_reload_verb },
};

int cmd_daemon(int argc, char *argv[]) {
        return cli_run_sub_verb(daemon_verbs, ELEMENTSOF(daemon_verbs), argc, argv);
}
