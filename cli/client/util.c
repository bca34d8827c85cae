/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "macro.h"
#include "string-util.h"

const Verb *cli_verb = NULL;
static SpaceHttp *cli_http_handle = NULL;
static bool cli_http_failed = false; /* reported once; later calls fail quietly */

static void http_cleanup(void) {
        cli_http_handle = space_http_free(cli_http_handle);
}

void log_error(const char *fmt, ...) {
        _cleanup_free_ char *m = NULL, *e = NULL;
        int saved_errno = errno;
        va_list ap;
        int n;

        fflush(stdout);
        errno = saved_errno; /* for %m */
        va_start(ap, fmt);
        n = vasprintf(&m, fmt, ap);
        va_end(ap);
        /* Messages carry text from guests (file names, the daemon's errors about them): a raw ESC there would
         * reach the user's terminal, so every control character is printed escaped. */
        if (n >= 0)
                e = string_escape_control(m);
        fprintf(stderr, "spacectl: %s\n", e ?: "out of memory (a message was lost)");
        errno = saved_errno; /* callers return -errno after printing it */
}

int cli_failure_status(void) {
        return cli_verb && (cli_verb->flags & VERB_COMMAND_STATUS) ? EXIT_SPACECTL : EXIT_FAIL;
}

static int usage_status(void) {
        return cli_verb && (cli_verb->flags & VERB_COMMAND_STATUS) ? EXIT_SPACECTL : EXIT_USAGE;
}

void cli_print_usage(const Verb *v, FILE *f) {
        const char *s = v->help->synopsis;
        bool first = true;

        while (*s) {
                size_t n = strcspn(s, "\n");

                fprintf(f, "%s spacectl %.*s\n", first ? "Usage:" : "      ", (int) n, s);
                first = false;
                s += n;
                if (*s)
                        s++;
        }
}

void cli_print_help(const Verb *v, FILE *f) {
        cli_print_usage(v, f);
        fprintf(f, "\n%s.\n", v->help->summary);
        if (v->help->options[0])
                fprintf(f, "\n%s", v->help->options);
        fprintf(f, "\nSee spacectl(1) for details.\n");
}

int cli_usage_error(const char *fmt, ...) {
        va_list ap;

        fflush(stdout);
        fputs("spacectl: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        if (cli_verb) {
                cli_print_usage(cli_verb, stderr);
                fprintf(stderr, "See 'spacectl help %s'.\n", cli_verb->name);
        }
        return usage_status();
}

int cli_bad_option(int c, char *argv[]) {
        extern int optind, optopt;
        const char *arg = argv[optind - 1];

        if (c == ':')
                return cli_usage_error("option '%s' needs a value", arg);
        if (optopt && !(arg[0] == '-' && arg[1] == '-'))
                return cli_usage_error("unknown option '-%c'", optopt);
        return cli_usage_error("unknown option '%s'", arg);
}

int cli_parse_ulong(const char *option, const char *s, unsigned long min, unsigned long max, unsigned long *ret) {
        unsigned long v;
        char *end;

        errno = 0;
        v = strtoul(s, &end, 10);
        if (!*s || *end || errno || s[0] == '-' || v < min || v > max) {
                (void) cli_usage_error("%s: '%s' is not a number in %lu..%lu", option, s, min, max);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

int cli_parse_env(const char *option, const char *kv, cJSON **env) {
        _cleanup_free_ char *key = NULL;
        const char *eq = strchr(kv, '='), *value;

        if (eq == kv || !*kv) {
                (void) cli_usage_error("%s: '%s' is not KEY=VALUE", option, kv);
                return -EINVAL;
        }
        if (eq) {
                key = strndup(kv, eq - kv);
                value = eq + 1;
        } else {
                key = strdup(kv);
                value = getenv(kv);
                if (!value) {
                        (void) cli_usage_error("%s: '%s' has no '=VALUE' and is not set here", option, kv);
                        return -EINVAL;
                }
        }
        if (!key)
                return -ENOMEM;
        if (!*env) {
                *env = cJSON_CreateObject();
                if (!*env)
                        return -ENOMEM;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(*env, key);
        if (!cJSON_AddStringToObject(*env, key, value))
                return -ENOMEM;
        return 0;
}

int cli_find_dashdash(int argc, char *argv[]) {
        for (int i = 1; i < argc; i++)
                if (streq(argv[i], "--"))
                        return i;
        return argc;
}

void cli_log_foreign_socket(const char *sock, uid_t peer) {
        log_error("refusing to talk to %s: the process listening there runs as uid %u, not as you (uid %u), and "
                  "would see everything sent to spaced; someone else may have taken its path. Remove it, or point "
                  "SPACE_SOCKET or XDG_RUNTIME_DIR at a directory of your own", sock, (unsigned) peer,
                  (unsigned) geteuid());
}

void cli_log_transport_error(SpaceHttp *h, int r) {
        const char *detail = space_http_last_error(h);
        const char *sock = space_http_socket_path(h);

        if (!detail[0])
                detail = strerror(-r);
        if (r == -EINTR)
                log_error("interrupted");
        else if (r == -EPERM && sock)
                cli_log_foreign_socket(sock, space_http_peer_uid(h));
        else if (space_http_error_is_unreachable(r) && sock)
                log_error("cannot reach spaced at %s: %s; is it installed? see spaced(8)", sock, strerror(-r));
        else if (space_http_error_is_unreachable(r) || r == -EHOSTUNREACH)
                log_error("cannot reach spaced at %s: %s; check SPACE_API_URL", space_http_endpoint(h), detail);
        else
                log_error("talking to spaced at %s failed: %s", space_http_endpoint(h), detail);
}

SpaceHttp *cli_http(void) {
        int r;

        if (cli_http_handle)
                return cli_http_handle;
        if (cli_http_failed)
                return NULL;
        cli_http_failed = true;

        r = space_http_new(&cli_http_handle);
        if (r < 0)
                cli_http_handle = NULL;
        if (r == -EINVAL) {
                log_error("SPACE_API_KEY must not contain line breaks");
                return NULL;
        }
        if (r < 0) {
                log_error("cannot find the socket of spaced: %s; set SPACE_SOCKET or XDG_RUNTIME_DIR", strerror(-r));
                return NULL;
        }
        atexit(http_cleanup);

        if (cli_verb && (cli_verb->flags & VERB_DAEMON)) {
                r = cli_ensure_daemon(cli_http_handle);
                if (r < 0) {
                        http_cleanup();
                        return NULL;
                }
        }
        cli_http_failed = false;
        return cli_http_handle;
}

int cli_call(const char *method, const char *path, const cJSON *body, SpaceHttpReply *ret) {
        SpaceHttpReply reply = {};
        SpaceHttp *h;
        int r;

        h = cli_http();
        if (!h)
                return -ENOTCONN;

        r = space_http_call(h, method, path, body, &reply);
        return cli_reply_take(h, r, &reply, ret);
}

int cli_reply_take(SpaceHttp *h, int r, SpaceHttpReply *reply, SpaceHttpReply *ret) {
        if (r == -ENOMEM) {
                log_error("out of memory");
                return r;
        }
        if (r < 0) {
                cli_log_transport_error(h, r);
                return r;
        }
        if (!space_http_reply_ok(reply)) {
                log_error("%s", reply->error_message);
                space_http_reply_done(reply);
                return -EBADMSG;
        }
        *ret = *reply;
        *reply = (SpaceHttpReply) {};
        return 0;
}

int cli_parse_no_options(int argc, char *argv[]) {
        static const struct option options[] = { { "help", no_argument, NULL, 'h' }, {} };
        int c;

        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
                if (c == 'h') {
                        cli_print_help(cli_verb, stdout);
                        return 0;
                }
                return cli_bad_option(c, argv);
        }
        return -1;
}

int cli_sandbox_path(const char *ref, const char *suffix, char **ret) {
        _cleanup_free_ char *e = NULL;
        int r;

        r = space_http_escape(ref, &e);
        if (r < 0)
                return r;
        if (asprintf(ret, "/v1/sandboxes/%s%s", e, suffix ?: "") < 0)
                return -ENOMEM;
        return 0;
}

const char *json_str(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

bool json_num(const cJSON *o, const char *key, double *ret) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!cJSON_IsNumber(v))
                return false;
        *ret = v->valuedouble;
        return true;
}

/* -h and --json, and -q when ret_quiet is given: the one option loop of the verbs that take only those; their
 * arguments are left at argv[optind...]. Returns -1 when the verb goes on, else the exit status (0 after --help). */
static int json_quiet_flags(int argc, char *argv[], bool *ret_json, bool *ret_quiet) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, OPT_JSON },
                { "quiet", no_argument, NULL, 'q' },
                {}
        };
        static const struct option no_quiet[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, OPT_JSON },
                {}
        };
        int c;

        *ret_json = false;
        if (ret_quiet)
                *ret_quiet = false;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ret_quiet ? ":hq" : ":h", ret_quiet ? options : no_quiet, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        cli_print_help(cli_verb, stdout);
                        return 0;
                case OPT_JSON:
                        *ret_json = true;
                        break;
                case 'q':
                        *ret_quiet = true;
                        break;
                default:
                        return cli_bad_option(c, argv);
                }
        }
        return -1;
}

/* -h and --json, for verbs whose only option that is (info, version, inspect, egress show and test). */
int cli_json_flags(int argc, char *argv[], bool *ret_json) {
        return json_quiet_flags(argc, argv, ret_json, NULL);
}

/* -h, --json and -q of a list verb; its arguments, if it takes any, are left at argv[optind...]. */
int cli_list_flags(int argc, char *argv[], bool *ret_json, bool *ret_quiet) {
        return json_quiet_flags(argc, argv, ret_json, ret_quiet);
}

/* The options of every list verb (ls, template ls, key ls): -h, --json, -q and no arguments. Returns -1
 * when the verb goes on, else the exit status to return (0 after --help). */
int cli_list_options(int argc, char *argv[], const char *what, bool *ret_json, bool *ret_quiet) {
        int r = cli_list_flags(argc, argv, ret_json, ret_quiet);

        if (r >= 0)
                return r;
        if (optind < argc)
                return cli_usage_error("%s takes no arguments, got '%s'", what, argv[optind]);
        if (*ret_json && *ret_quiet)
                return cli_usage_error("--json and --quiet exclude each other");
        return -1;
}

/* The rest of every list verb: GET path, check that the reply's `key` is an array, print the whole reply
 * (json), the `quiet_field` of each element (quiet_field set), or the verb's table. Returns the exit status. */
int cli_list_show(const char *path, const char *key, const char *what, bool json, const char *quiet_field,
                  int (*print_table)(const cJSON *list)) {
        SpaceHttpReply reply = {};
        const cJSON *list, *e;
        int r;

        if (cli_call("GET", path, NULL, &reply) < 0)
                return EXIT_FAIL;
        list = cJSON_GetObjectItemCaseSensitive(reply.json, key);
        if (!cJSON_IsArray(list)) {
                log_error("the daemon's %s list is malformed", what);
                space_http_reply_done(&reply);
                return EXIT_FAIL;
        }
        if (json)
                r = cli_print_json(reply.json);
        else if (quiet_field) {
                r = 0;
                cJSON_ArrayForEach(e, list)
                        if (json_str(e, quiet_field))
                                printf("%s\n", json_str(e, quiet_field));
        } else
                r = print_table(list);
        space_http_reply_done(&reply);
        if (r == -ENOMEM)
                log_error("out of memory");
        return r < 0 || fflush(stdout) != 0 ? EXIT_FAIL : 0;
}

int cli_run_sub_verb(const SubVerb *table, size_t n, int argc, char *argv[]) {
        char names[256] = "";
        size_t len = 0;

        if (argc >= 2 && (streq(argv[1], "-h") || streq(argv[1], "--help"))) {
                cli_print_help(cli_verb, stdout);
                return 0;
        }
        for (size_t i = 0; argc >= 2 && i < n; i++)
                if (table[i].name && streq(argv[1], table[i].name))
                        return table[i].run(argc - 1, argv + 1);
        for (size_t i = 0; i < n; i++)
                if (!table[i].name)
                        return table[i].run(argc, argv);
        /* "create, ls or rm" */
        for (size_t i = 0; i < n && len < sizeof names; i++)
                len += (size_t) snprintf(names + len, sizeof names - len, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
                                         table[i].name);
        if (argc < 2)
                return cli_usage_error("%s needs a sub-verb: %s", cli_verb->name, names);
        return cli_usage_error("unknown %s sub-verb '%s'; use %s", cli_verb->name, argv[1], names);
}
