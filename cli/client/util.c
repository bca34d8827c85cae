/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
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

int cli_usage_status(void) {
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
        return cli_usage_status();
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

int cli_delete_each(int argc, char *argv[], const char *verb, const char *what, const char *collection) {
        bool failed = false;
        int r;

        r = cli_parse_options(argc, argv, NULL, 0, 0);
        if (r >= 0)
                return r;
        if (optind >= argc)
                return cli_usage_error("%s needs at least one %s", verb, what);
        for (int i = optind; i < argc; i++) {
                _cleanup_free_ char *esc = NULL, *path = NULL;
                SpaceHttpReply reply = {};

                if (!*argv[i] || space_http_escape(argv[i], &esc) < 0 || asprintf(&path, "%s/%s", collection, esc) < 0) {
                        log_error("'%s' is not a %s", argv[i], what);
                        failed = true;
                        continue;
                }
                if (cli_call("DELETE", path, NULL, &reply) < 0) {
                        failed = true;
                        if (!cli_http())
                                break;
                        continue;
                }
                space_http_reply_done(&reply);
                printf("%s\n", argv[i]);
                fflush(stdout);
        }
        return failed ? EXIT_FAIL : 0;
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
                cJSON_ArrayForEach(e, list) {
                        double v;

                        if (json_str(e, quiet_field))
                                printf("%s\n", json_str(e, quiet_field));
                        else if (json_num(e, quiet_field, &v))
                                printf("%.0f\n", v);
                }
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
