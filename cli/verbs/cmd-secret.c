/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "macro.h"

/* spacectl secret: the daemon's secrets (/v1/secrets). A value is read from stdin, never from the command line
 * or the environment, where ps, shell history and /proc/PID/environ would show it. */

#define SECRET_VALUE_MAX 16384

const CliHelp cmd_secret_help = {
        .synopsis = "secret set NAME [--metadata KEY=VALUE]... < VALUE\n"
                    "secret ls [--json] [-q]\n"
                    "secret rm NAME...",
        .summary = "Manage secrets: values the daemon adds to a sandbox's requests, which the sandbox never holds",
        .options =
        "Sub-verbs:\n"
        "  set NAME      create the secret, or set a new version of its value, read from stdin (one trailing\n"
        "                newline dropped); on a terminal it is asked for without echo\n"
        "  ls            list secrets (NAME, VERSION, UPDATED, LAST USED); never their values\n"
        "  rm NAME...    remove secrets and print the name of each one removed\n"
        "\n"
        "Options:\n"
        "  -m, --metadata KEY=VALUE  set: a label of your own (repeatable); given, it replaces the labels\n"
        "      --json        ls: print {\"secrets\": [...]}\n"
        "  -q, --quiet       ls: print only the names\n"
        "  -h, --help        show this help\n",
};

static int option_metadata(const char *arg, void *userdata) {
        cJSON **md = userdata;
        const char *eq = strchr(arg, '=');
        _cleanup_free_ char *key = NULL;

        if (!eq || eq == arg) {
                (void) cli_usage_error("--metadata: '%s' is not KEY=VALUE", arg);
                return -EINVAL;
        }
        key = strndup(arg, eq - arg);
        if (!key || (!*md && !(*md = cJSON_CreateObject())))
                return -ENOMEM;
        cJSON_DeleteItemFromObjectCaseSensitive(*md, key);
        return cJSON_AddStringToObject(*md, key, eq + 1) ? 0 : -ENOMEM;
}

/* What a terminal types, without echo; one line. */
static ssize_t read_from_terminal(const char *name, char *buf, size_t size) {
        struct termios old, quiet;
        ssize_t n = 0;
        bool restore;

        fprintf(stderr, "Value for secret %s: ", name);
        fflush(stderr);
        restore = tcgetattr(STDIN_FILENO, &old) == 0;
        if (restore) {
                quiet = old;
                quiet.c_lflag &= ~(tcflag_t) ECHO;
                quiet.c_lflag |= ECHONL;
                (void) tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
        }
        if (!fgets(buf, (int) size, stdin))
                n = ferror(stdin) ? -EIO : 0;
        else
                n = (ssize_t) strlen(buf);
        if (restore)
                (void) tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
        return n;
}

/* All of stdin, up to size - 1 bytes; -EFBIG when there is more. */
static ssize_t read_all(char *buf, size_t size) {
        size_t n = 0;

        for (;;) {
                ssize_t k = read(STDIN_FILENO, buf + n, size - n);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return (ssize_t) n;
                n += (size_t) k;
                if (n >= size)
                        return -EFBIG;
        }
}

static int secret_read_value(const char *name, char *buf, size_t size, size_t *ret_len) {
        ssize_t n = isatty(STDIN_FILENO) ? read_from_terminal(name, buf, size) : read_all(buf, size);

        if (n < 0 && n != -EFBIG) {
                log_error("cannot read the value from stdin: %s", strerror((int) -n));
                return (int) n;
        }
        /* what `echo VALUE |` and a terminal's Enter add is not part of it */
        if (n > 0 && buf[n - 1] == '\n')
                n--;
        if (n > 0 && buf[n - 1] == '\r')
                n--;
        if (n == -EFBIG || n > SECRET_VALUE_MAX) {
                log_error("the value on stdin is longer than %d bytes, the most a secret holds", SECRET_VALUE_MAX);
                return -EFBIG;
        }
        buf[n] = '\0';
        if (n == 0) {
                log_error("no value on stdin: pipe it in, e.g. 'spacectl secret set %s < FILE'", name);
                return -EINVAL;
        }
        if (strlen(buf) != (size_t) n) {
                log_error("the value on stdin holds a NUL byte: a secret's value is text");
                return -EINVAL;
        }
        *ret_len = (size_t) n;
        return 0;
}

static int secret_set(int argc, char *argv[]) {
        _cleanup_free_ char *esc = NULL, *path = NULL;
        char buf[SECRET_VALUE_MAX + 3];
        SpaceHttpReply reply = {};
        cJSON *md = NULL, *body = NULL;
        size_t len = 0;
        double version = 0;
        int r;
        const CliOption options[] = {
                CLI_PARSE("metadata", 'm', option_metadata, &md),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0) {
                cJSON_Delete(md);
                return r;
        }
        if (optind + 1 != argc) {
                cJSON_Delete(md);
                return cli_usage_error("secret set takes one NAME (the value comes from stdin)");
        }
        if (space_http_escape(argv[optind], &esc) < 0 || asprintf(&path, "/v1/secrets/%s", esc) < 0) {
                cJSON_Delete(md);
                log_error("out of memory");
                return EXIT_FAIL;
        }
        if (secret_read_value(argv[optind], buf, sizeof buf, &len) < 0) {
                explicit_bzero(buf, sizeof buf);
                cJSON_Delete(md);
                return EXIT_FAIL;
        }
        body = cJSON_CreateObject();
        if (!body || !cJSON_AddStringToObject(body, "value", buf) || (md && !cJSON_AddItemToObject(body, "metadata", md))) {
                explicit_bzero(buf, sizeof buf);
                cJSON_Delete(body);
                log_error("out of memory");
                return EXIT_FAIL;
        }
        explicit_bzero(buf, sizeof buf);
        r = cli_call("PUT", path, body, &reply);
        explicit_bzero(cJSON_GetObjectItem(body, "value")->valuestring, len);
        cJSON_Delete(body);
        if (r < 0)
                return EXIT_FAIL;
        (void) json_num(reply.json, "version", &version);
        fprintf(stderr, "%s secret %s (version %.0f).\n", reply.status == 201 ? "Created" : "Set",
                json_str(reply.json, "name") ?: argv[optind], version);
        space_http_reply_done(&reply);
        return 0;
}

static int print_table(const cJSON *list) {
        static const char *const headers[] = { "NAME", "VERSION", "UPDATED", "LAST USED" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        time_t now = time(NULL);
        const cJSON *s;

        if (!t)
                return -ENOMEM;
        cJSON_ArrayForEach(s, list) {
                _cleanup_free_ char *updated = format_age(json_str(s, "updated_at"), now), *version = NULL;
                _cleanup_free_ char *used = json_str(s, "last_used_at") ? format_age(json_str(s, "last_used_at"), now)
                                                                         : strdup("never");
                double v = 0;

                (void) json_num(s, "version", &v);
                if (!updated || !used || asprintf(&version, "%.0f%s", v,
                                                  cJSON_IsTrue(cJSON_GetObjectItem(s, "value_missing"))
                                                          ? " (value missing)" : "") < 0)
                        return -ENOMEM;
                const char *cells[] = { json_str(s, "name"), version, updated, used };
                if (table_add(t, cells) < 0)
                        return -ENOMEM;
        }
        return table_print(t, stdout);
}

static int secret_ls(int argc, char *argv[]) {
        bool json = false, quiet = false;
        int r;

        r = cli_list_options(argc, argv, "secret ls", &json, &quiet);
        if (r >= 0)
                return r;
        return cli_list_show("/v1/secrets", "secrets", "secret", json, quiet ? "name" : NULL, print_table);
}

static int secret_rm(int argc, char *argv[]) {
        return cli_delete_each(argc, argv, "secret rm", "secret name", "/v1/secrets");
}

static const SubVerb secret_verbs[] = {
        { "set", secret_set },
        { "ls", secret_ls },
        { "rm", secret_rm },
};

int cmd_secret(int argc, char *argv[]) {
        return cli_run_sub_verb(secret_verbs, ELEMENTSOF(secret_verbs), argc, argv);
}
