/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "macro.h"

/* `egress test` answers like test(1) and grep(1): 0 allowed, 1 denied; its own failures are 3, so that a
 * script never reads "cannot tell" as "denied". */
#define EXIT_EGRESS_ERROR 3

const CliHelp cmd_egress_help = {
        .synopsis = "egress ls [--json] [-q]\n"
                    "egress show PROFILE [--json]\n"
                    "egress test SANDBOX HOST[:PORT] [--json]\n"
                    "egress log [-f] [-n N] [--json] SANDBOX",
        .summary = "List egress profiles, show one, and say whether a sandbox's policy allows a destination",
        .options =
        "Sub-verbs:\n"
        "  ls            list the egress profiles the daemon loaded (NAME, DEFAULT, RULES)\n"
        "  show PROFILE  print one profile's rules\n"
        "  test SANDBOX HOST[:PORT]\n"
        "                say whether SANDBOX's policy allows HOST on PORT (default 443), and why; exit 0 when\n"
        "                allowed, 1 when denied, 3 when it cannot tell. As the gateway: a name no rule allows\n"
        "                is denied unresolved, an allowed one is resolved and every address is decided\n"
        "                (denied if any is, or if it does not resolve); an IP literal in any form\n"
        "                (2130706433, 0x7f.1, [::ffff:127.0.0.1]) is decided as the address it means\n"
        "  log SANDBOX   print the gateway's decisions for SANDBOX: time, event (allow, deny, end, dns),\n"
        "                how the connection came (proxy, transparent, dns), host, address:port, reason,\n"
        "                and bytes up/down when an allowed connection ends\n"
        "\n"
        "Options:\n"
        "      --json        print the daemon's answer as JSON\n"
        "  -q, --quiet       ls: print only the names\n"
        "  -f, --follow      log: keep printing new entries until interrupted\n"
        "  -n, --lines N     log: print only the last N entries first (default: all that are kept)\n"
        "  -h, --help        show this help\n"
        "\n"
        "Profiles are defined in spaced.conf or SPACE_EGRESS_PROFILES and chosen at create (--egress);\n"
        "see space-egress(5).\n",
};

static int print_table(const cJSON *list) {
        static const char *const headers[] = { "NAME", "DEFAULT", "RULES" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        const cJSON *p, *rule;

        if (!t)
                return -ENOMEM;
        cJSON_ArrayForEach(p, list) {
                _cleanup_free_ char *rules = NULL;
                size_t len = 0;

                cJSON_ArrayForEach(rule, cJSON_GetObjectItemCaseSensitive(p, "rules"))
                        if (cJSON_IsString(rule))
                                len += strlen(rule->valuestring) + 2;
                rules = calloc(1, len + 2);
                if (!rules)
                        return -ENOMEM;
                cJSON_ArrayForEach(rule, cJSON_GetObjectItemCaseSensitive(p, "rules"))
                        if (cJSON_IsString(rule)) {
                                if (*rules)
                                        strcat(rules, "; ");
                                strcat(rules, rule->valuestring);
                        }
                const char *cells[] = { json_str(p, "name") ?: "?",
                                        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "default")) ? "yes" : "-",
                                        *rules ? rules : "-" };
                if (table_add(t, cells) < 0)
                        return -ENOMEM;
        }
        return table_print(t, stdout);
}

static int egress_ls(int argc, char *argv[]) {
        bool json = false, quiet = false;
        int r;

        r = cli_list_options(argc, argv, "egress ls", &json, &quiet);
        if (r >= 0)
                return r;
        return cli_list_show("/v1/egress/profiles", "profiles", "egress profile", json, quiet ? "name" : NULL,
                             print_table);
}

static int egress_show(int argc, char *argv[]) {
        _cleanup_free_ char *esc = NULL, *path = NULL;
        SpaceHttpReply reply = {};
        const cJSON *rule;
        bool json = false;
        int r;

        r = cli_json_flags(argc, argv, &json);
        if (r >= 0)
                return r;
        if (argc - optind != 1)
                return cli_usage_error("egress show takes one PROFILE");
        if (space_http_escape(argv[optind], &esc) < 0 || asprintf(&path, "/v1/egress/profiles/%s", esc) < 0) {
                log_error("out of memory");
                return EXIT_FAIL;
        }
        if (cli_call("GET", path, NULL, &reply) < 0)
                return EXIT_FAIL;
        if (json)
                r = cli_print_json(reply.json);
        else {
                printf("name: %s\ndefault: %s\nrules:\n", json_str(reply.json, "name") ?: "?",
                       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply.json, "default")) ? "yes" : "no");
                cJSON_ArrayForEach(rule, cJSON_GetObjectItemCaseSensitive(reply.json, "rules"))
                        if (cJSON_IsString(rule))
                                printf("  %s\n", rule->valuestring);
                r = 0;
        }
        space_http_reply_done(&reply);
        return r < 0 || fflush(stdout) != 0 ? EXIT_FAIL : 0;
}

/* HOST[:PORT]: [v6]:PORT, a bare IPv6 address (two colons or more: no port), NAME:PORT or a literal:PORT. */
static int parse_destination(const char *s, char **ret_host, unsigned long *ret_port) {
        const char *colon = NULL;
        size_t n;

        *ret_port = 443;
        if (s[0] == '[') {
                const char *close = strchr(s, ']');
                if (!close || (close[1] && close[1] != ':'))
                        return -EINVAL;
                n = (size_t) (close - s + 1);
                colon = close[1] ? close + 1 : NULL;
        } else {
                colon = strchr(s, ':');
                if (colon && strchr(colon + 1, ':'))
                        colon = NULL;
                n = colon ? (size_t) (colon - s) : strlen(s);
        }
        if (n == 0)
                return -EINVAL;
        if (colon && cli_parse_ulong("PORT", colon + 1, 1, 65535, ret_port) < 0)
                return -ERANGE;
        *ret_host = strndup(s, n);
        return *ret_host ? 0 : -ENOMEM;
}

static int egress_test(int argc, char *argv[]) {
        _cleanup_free_ char *path = NULL, *host = NULL;
        SpaceHttpReply reply = {};
        unsigned long port;
        const cJSON *addrs, *a;
        bool json = false, allowed;
        cJSON *body;
        int r;

        r = cli_json_flags(argc, argv, &json);
        if (r >= 0)
                return r;
        if (argc - optind != 2)
                return cli_usage_error("egress test takes SANDBOX and HOST[:PORT]");
        r = parse_destination(argv[optind + 1], &host, &port);
        if (r == -ERANGE)
                return EXIT_USAGE;
        if (r < 0)
                return cli_usage_error("'%s' is not HOST[:PORT] (IPv6 with a port: [ADDRESS]:PORT)", argv[optind + 1]);
        if (cli_sandbox_path(argv[optind], "/egress/test", &path) < 0) {
                log_error("out of memory");
                return EXIT_EGRESS_ERROR;
        }
        body = cJSON_CreateObject();
        if (!body || !cJSON_AddStringToObject(body, "host", host) || !cJSON_AddNumberToObject(body, "port", (double) port)) {
                cJSON_Delete(body);
                log_error("out of memory");
                return EXIT_EGRESS_ERROR;
        }
        r = cli_call("POST", path, body, &reply);
        cJSON_Delete(body);
        if (r < 0)
                return EXIT_EGRESS_ERROR;
        allowed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply.json, "allowed"));
        if (json)
                r = cli_print_json(reply.json);
        else {
                printf("%s: %s\n", allowed ? "allowed" : "denied", json_str(reply.json, "reason") ?: "?");
                addrs = cJSON_GetObjectItemCaseSensitive(reply.json, "addresses");
                if (cJSON_GetArraySize(addrs) > 1)
                        cJSON_ArrayForEach(a, addrs)
                                printf("  %s %s: %s\n", json_str(a, "address") ?: "?",
                                       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "allowed")) ? "allowed" : "denied",
                                       json_str(a, "reason") ?: "?");
                r = 0;
        }
        space_http_reply_done(&reply);
        if (r < 0 || fflush(stdout) != 0)
                return EXIT_EGRESS_ERROR;
        return allowed ? 0 : 1;
}

static void print_entry(const cJSON *e, bool json) {
        const cJSON *port = cJSON_GetObjectItemCaseSensitive(e, "port");
        const char *event = json_str(e, "event") ?: "?", *addr = json_str(e, "address");
        _cleanup_free_ char *text = NULL;

        if (json) {
                text = cJSON_PrintUnformatted(e);
                if (text)
                        printf("%s\n", text);
                return;
        }
        printf("%s %-5s %-11s %s ", json_str(e, "time") ?: "?", event, json_str(e, "via") ?: "-",
               json_str(e, "host") ?: "-");
        if (!addr)
                printf("-");
        else
                printf(strchr(addr, ':') ? "[%s]" : "%s", addr);
        if (cJSON_IsNumber(port) && port->valuedouble > 0)
                printf(":%.0f", port->valuedouble);
        printf(" %s", json_str(e, "reason") ?: "-");
        if (streq(event, "end"))
                printf(" up=%.0f down=%.0f ms=%.0f",
                       cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "bytes_up")),
                       cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "bytes_down")),
                       cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "duration_ms")));
        if (json_str(e, "rule"))
                printf(" (%s)", json_str(e, "rule"));
        if (json_str(e, "message"))
                printf(": %s", json_str(e, "message"));
        printf("\n");
}

/* Prints the entries after *after, at most the last `tail` of them (0: all), and moves *after on. */
static int log_fetch(const char *base, unsigned long long *after, unsigned long tail, bool json) {
        _cleanup_free_ char *path = NULL;
        SpaceHttpReply reply = {};
        const cJSON *list, *e;
        int n, i = 0;

        for (;;) {
                free(path);
                if (asprintf(&path, "%s?after=%llu&limit=1000", base, *after) < 0)
                        return -ENOMEM;
                if (cli_call("GET", path, NULL, &reply) < 0)
                        return -EIO;
                list = cJSON_GetObjectItemCaseSensitive(reply.json, "entries");
                n = cJSON_GetArraySize(list);
                i = 0;
                cJSON_ArrayForEach(e, list) {
                        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(e, "seq");

                        if (cJSON_IsNumber(seq) && (unsigned long long) seq->valuedouble > *after)
                                *after = (unsigned long long) seq->valuedouble;
                        /* a first read prints only the tail, but may take several pages to reach it */
                        if (tail == 0 || n - i <= (int) tail)
                                print_entry(e, json);
                        i++;
                }
                space_http_reply_done(&reply);
                if (fflush(stdout) != 0)
                        return -EIO;
                if (n < 1000)
                        return 0;
        }
}

static int egress_log(int argc, char *argv[]) {
        _cleanup_free_ char *base = NULL;
        unsigned long long after = 0;
        unsigned long tail = 0;
        bool json = false, follow = false;
        int r;
        const CliOption options[] = {
                CLI_FLAG("json", 0, &json),
                CLI_FLAG("follow", 'f', &follow),
                CLI_ULONG("lines", 'n', "--lines", &tail, 1, 1000000),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (argc - optind != 1)
                return cli_usage_error("egress log takes one SANDBOX");
        if (cli_sandbox_path(argv[optind], "/egress/log", &base) < 0) {
                log_error("out of memory");
                return EXIT_FAIL;
        }
        if (log_fetch(base, &after, tail, json) < 0)
                return EXIT_FAIL;
        while (follow) {
                /* until interrupted: SIGINT ends us as it ends tail -f */
                (void) usleep(250 * 1000);
                if (log_fetch(base, &after, 0, json) < 0)
                        return EXIT_FAIL;
        }
        return 0;
}

static const SubVerb egress_verbs[] = {
        { "log", egress_log },
        { "ls", egress_ls },
        { "show", egress_show },
        { "test", egress_test },
};

int cmd_egress(int argc, char *argv[]) {
        return cli_run_sub_verb(egress_verbs, ELEMENTSOF(egress_verbs), argc, argv);
}
