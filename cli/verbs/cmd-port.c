/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "macro.h"

const CliHelp cmd_port_help = {
        .synopsis = "port [-d] [--any-user] [--json] SANDBOX GUEST_PORT [HOST_PORT]\n"
                    "port ls [--json] [-q] [SANDBOX]\n"
                    "port rm SANDBOX HOST_PORT|ID...",
        .summary = "Forward a port on 127.0.0.1 to a port inside a sandbox",
        .options =
        "Sub-verbs:\n"
        "  (none)        forward 127.0.0.1:HOST_PORT (a free port when left out) to GUEST_PORT in SANDBOX and\n"
        "                print the address; in the foreground until interrupted, which removes the forward\n"
        "  ls            list forwards (of SANDBOX, or of all sandboxes)\n"
        "  rm SANDBOX HOST_PORT|ID...\n"
        "                remove forwards; their open connections end\n"
        "\n"
        "Options:\n"
        "  -d, --detach      leave the forward in the daemon and return; 'port rm' removes it\n"
        "      --any-user    let every local user connect (127.0.0.1 is all of theirs), not only you and root\n"
        "      --json        print the forward (ls: {\"forwards\": [...]}) as JSON\n"
        "  -q, --quiet       ls: print only the ids\n"
        "  -h, --help        show this help\n"
        "\n"
        "The daemon owns the listener; only your own connections (and root's) are served, others are closed\n"
        "unanswered. Each connection wakes a suspended or paused sandbox and is carried to\n"
        "127.0.0.1:GUEST_PORT in the guest. A forward goes away with its sandbox; a detached one outlives a\n"
        "restart of the daemon, on the same port. Over the API, HTTP servers are also reached without a forward\n"
        "at /v1/sandboxes/SANDBOX/ports/GUEST_PORT/PATH.\n",
};

typedef struct Foreground {
        const char *ref;
        bool json;
        bool started;
        char *id;               /* the forward's, to remove it when interrupted */
        char *end_reason;       /* it went away first */
} Foreground;

static void print_forward(const cJSON *f, const char *ref, bool json, bool detached) {
        double host = 0, guest = 0;

        if (json) {
                (void) cli_print_json(f);
                fflush(stdout);
                return;
        }
        (void) json_num(f, "host_port", &host);
        (void) json_num(f, "guest_port", &guest);
        printf("%s\n", json_str(f, "address") ?: "?");
        fflush(stdout);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "any_user")))
                fprintf(stderr, "Every local user can connect to %s, not only you.\n", json_str(f, "address") ?: "?");
        if (detached)
                fprintf(stderr, "Forwarding %s to port %.0f of %s (%s); remove it with 'spacectl port rm %s %.0f'.\n",
                        json_str(f, "address") ?: "?", guest, ref, json_str(f, "id") ?: "?", ref, host);
        else
                fprintf(stderr, "Forwarding %s to port %.0f of %s; interrupt (Ctrl-C) to stop.\n",
                        json_str(f, "address") ?: "?", guest, ref);
}

static int on_event(const char *event, const char *data, size_t len, const char *id, void *userdata) {
        Foreground *fg = userdata;
        cJSON *j = cJSON_ParseWithLength(data, len);

        if (event && streq(event, "forward") && !fg->started) {
                fg->started = true;
                fg->id = json_str(j, "id") ? strdup(json_str(j, "id")) : NULL;
                print_forward(j, fg->ref, fg->json, false);
        } else if (event && streq(event, "end")) {
                free(fg->end_reason);
                fg->end_reason = strdup(json_str(j, "reason") ?: "removed");
        }
        cJSON_Delete(j);
        return 0;
}

static int signal_readable(SpaceStream *s, int fd, void *userdata) {
        return cli_signals_next() > 0 ? -EINTR : 0;
}

static int remove_forward(const char *ref, const char *which, bool quiet_missing) {
        _cleanup_free_ char *esc = NULL, *suffix = NULL, *path = NULL;
        SpaceHttpReply reply = {};
        SpaceHttp *h = cli_http();
        int r;

        if (!h)
                return -EIO;
        if (space_http_escape(which, &esc) < 0 || asprintf(&suffix, "/ports/%s", esc) < 0 ||
            cli_sandbox_path(ref, suffix, &path) < 0) {
                log_error("out of memory");
                return -ENOMEM;
        }
        r = space_http_call(h, "DELETE", path, NULL, &reply);
        if (r < 0) {
                cli_log_transport_error(h, r);
        } else if (!space_http_reply_ok(&reply)) {
                if (!(quiet_missing && reply.status == 404))
                        log_error("%s", reply.error_message ?: "the daemon refused");
                r = -EBADMSG;
        }
        space_http_reply_done(&reply);
        return r;
}

static int port_foreground(const char *ref, cJSON *body, bool json) {
        _cleanup_free_ char *path = NULL;
        _cleanup_space_stream_ SpaceStream *s = NULL;
        SpaceHttpReply reply = {};
        Foreground fg = { .ref = ref, .json = json };
        SpaceHttp *h;
        int r, status;

        r = cli_signals_install();
        if (r < 0) {
                log_error("cannot set up signal handling: %s", strerror(-r));
                return EXIT_FAIL;
        }
        h = cli_http();
        if (!h)
                return EXIT_FAIL;
        if (!cJSON_AddTrueToObject(body, "hold") || cli_sandbox_path(ref, "/ports", &path) < 0 ||
            space_stream_new(h, path, body, on_event, &fg, &s) < 0 ||
            space_stream_watch_fd(s, cli_signals_fd(), signal_readable, NULL) < 0) {
                log_error("out of memory");
                return EXIT_FAIL;
        }
        r = space_stream_run(s, &reply);
        s = space_stream_free(s);
        if (r == -EINTR) {
                /* the daemon also drops it when it sees the connection gone; this is sooner */
                if (fg.id)
                        (void) remove_forward(ref, fg.id, true);
                status = 0;
        } else if (r < 0) {
                cli_log_transport_error(h, r);
                status = EXIT_FAIL;
        } else if (!space_http_reply_ok(&reply)) {
                log_error("%s", reply.error_message ?: "the daemon refused the forward");
                status = EXIT_FAIL;
        } else {
                log_error("the forward ended: %s", fg.end_reason ?: "the daemon closed its stream");
                status = EXIT_FAIL;
        }
        space_http_reply_done(&reply);
        free(fg.id);
        free(fg.end_reason);
        return status;
}

static int port_forward(int argc, char *argv[]) {
        _cleanup_free_ char *path = NULL;
        SpaceHttpReply reply = {};
        unsigned long guest, host = 0;
        bool detach = false, json = false, any_user = false;
        const char *ref;
        cJSON *body;
        int r;
        const CliOption options[] = {
                CLI_FLAG("detach", 'd', &detach),
                CLI_FLAG("json", 0, &json),
                CLI_FLAG("any-user", 0, &any_user),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (argc - optind < 2 || argc - optind > 3)
                return cli_usage_error("port needs a SANDBOX, a GUEST_PORT and optionally a HOST_PORT");
        ref = argv[optind];
        if (!*ref)
                return cli_usage_error("SANDBOX must not be empty");
        if (cli_parse_ulong("GUEST_PORT", argv[optind + 1], 1, 65535, &guest) < 0 ||
            (argc - optind == 3 && cli_parse_ulong("HOST_PORT", argv[optind + 2], 1, 65535, &host) < 0))
                return EXIT_USAGE;

        body = cJSON_CreateObject();
        if (!body || !cJSON_AddNumberToObject(body, "guest_port", (double) guest) ||
            (host > 0 && !cJSON_AddNumberToObject(body, "host_port", (double) host)) ||
            (any_user && !cJSON_AddTrueToObject(body, "any_user"))) {
                cJSON_Delete(body);
                log_error("out of memory");
                return EXIT_FAIL;
        }
        if (!detach) {
                r = port_foreground(ref, body, json);
                cJSON_Delete(body);
                return r;
        }
        r = cli_sandbox_path(ref, "/ports", &path);
        if (r >= 0)
                r = cli_call("POST", path, body, &reply);
        else
                log_error("out of memory");
        cJSON_Delete(body);
        if (r < 0)
                return EXIT_FAIL;
        print_forward(reply.json, ref, json, true);
        space_http_reply_done(&reply);
        return 0;
}

static int print_table(const cJSON *list) {
        static const char *const headers[] = { "ID", "SANDBOX", "ADDRESS", "GUEST PORT", "MODE", "CONNECTIONS" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        const cJSON *f;

        if (!t)
                return -ENOMEM;
        cJSON_ArrayForEach(f, list) {
                char sandbox[64], guest[16], conns[48], mode[32];
                double g = 0, n = 0, active = 0;

                /* the name the user gave it, else an id prefix as ls shows */
                if (json_str(f, "sandbox_name"))
                        snprintf(sandbox, sizeof sandbox, "%s", json_str(f, "sandbox_name"));
                else
                        snprintf(sandbox, sizeof sandbox, "%.12s", json_str(f, "sandbox_id") ?: "?");
                (void) json_num(f, "guest_port", &g);
                (void) json_num(f, "connections", &n);
                (void) json_num(f, "active", &active);
                snprintf(guest, sizeof guest, "%.0f", g);
                snprintf(conns, sizeof conns, "%.0f (%.0f open)", n, active);
                snprintf(mode, sizeof mode, "%s%s",
                         cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "held")) ? "foreground" : "detached",
                         cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(f, "any_user")) ? ", any user" : "");
                const char *cells[] = { json_str(f, "id") ?: "?", sandbox, json_str(f, "address") ?: "?", guest,
                                        mode, conns };
                if (table_add(t, cells) < 0)
                        return -ENOMEM;
        }
        return table_print(t, stdout);
}

static int port_ls(int argc, char *argv[]) {
        _cleanup_free_ char *path = NULL;
        bool json, quiet;
        int r;

        r = cli_list_flags(argc, argv, &json, &quiet);
        if (r >= 0)
                return r;
        if (argc - optind > 1)
                return cli_usage_error("port ls takes at most one SANDBOX");
        if (json && quiet)
                return cli_usage_error("--json and --quiet exclude each other");
        if (argc - optind == 1 ? cli_sandbox_path(argv[optind], "/ports", &path) < 0
                               : !(path = strdup("/v1/ports"))) {
                log_error("out of memory");
                return EXIT_FAIL;
        }
        return cli_list_show(path, "forwards", "port forward", json, quiet ? "id" : NULL, print_table);
}

static int port_rm(int argc, char *argv[]) {
        bool failed = false;
        int r;

        r = cli_parse_no_options(argc, argv);
        if (r >= 0)
                return r;
        if (argc - optind < 2)
                return cli_usage_error("port rm needs a SANDBOX and at least one HOST_PORT or forward id");
        for (int i = optind + 1; i < argc; i++) {
                if (!*argv[i]) {
                        log_error("an empty HOST_PORT or id names no forward");
                        failed = true;
                        continue;
                }
                if (remove_forward(argv[optind], argv[i], false) < 0)
                        failed = true;
                else
                        printf("%s\n", argv[i]);
        }
        return failed || fflush(stdout) != 0 ? EXIT_FAIL : 0;
}

int cmd_port(int argc, char *argv[]) {
        static const SubVerb table[] = {
                { "ls", port_ls },
                { "rm", port_rm },
                { NULL, port_forward },
        };

        return cli_run_sub_verb(table, ELEMENTSOF(table), argc, argv);
}
