/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

/* The verbs' option parser: each verb hands a table of its options to cli_parse_options(), which builds
 * getopt_long's arguments from it, so that how argv is read (and what a bad option says) is glibc's, the
 * same for every verb, and runs each option's action. */

#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "macro.h"

/* More than the most options a verb has (template import: 9, and --help). */
#define CLI_OPTIONS_MAX 24U
#define CLI_OPTION_CODE_HELP 'h'
#define CLI_OPTION_CODE_LONG 0x100 /* + the index of a long-only option */

/* Reports getopt's '?' or ':' for argv[optind - 1]; returns cli_usage_error()'s status. */
static int bad_option(int c, char *argv[]) {
        const char *arg = argv[optind - 1];

        if (c == ':')
                return cli_usage_error("option '%s' needs a value", arg);
        if (optopt && !(arg[0] == '-' && arg[1] == '-'))
                return cli_usage_error("unknown option '-%c'", optopt);
        return cli_usage_error("unknown option '%s'", arg);
}

static bool same_action(const CliOption *a, const CliOption *b) {
        return a->has_arg == b->has_arg && a->set == b->set && a->value == b->value && a->not_empty == b->not_empty &&
               a->ulong == b->ulong && a->min == b->min && a->max == b->max && a->parse == b->parse &&
               a->userdata == b->userdata && streq_ptr(a->label, b->label);
}

/* getopt's code for options[i]: its short name, else that of the first entry that does the same (getopt
 * takes a prefix of two long names with one code as the first of them), else one of its own. */
static int option_code(const CliOption *options, size_t i) {
        if (options[i].short_name)
                return (unsigned char) options[i].short_name;
        for (size_t j = 0; j < i; j++)
                if (same_action(&options[j], &options[i]))
                        return options[j].short_name ? (unsigned char) options[j].short_name
                                                     : CLI_OPTION_CODE_LONG + (int) j;
        return CLI_OPTION_CODE_LONG + (int) i;
}

static const CliOption *find_option(const CliOption *options, size_t n, int code) {
        for (size_t i = 0; i < n; i++)
                if (option_code(options, i) == code)
                        return &options[i];
        return NULL;
}

/* Does what o says with arg: 0, or < 0 after printing why. */
static int option_apply(const CliOption *o, const char *arg) {
        _cleanup_free_ char *label = NULL;

        if (o->set) {
                *o->set = true;
                return 0;
        }
        if (o->value) {
                if (o->not_empty && !*arg) {
                        (void) cli_usage_error("--%s must not be empty", o->name);
                        return -EINVAL;
                }
                *o->value = arg;
                return 0;
        }
        if (o->ulong) {
                if (!o->label && asprintf(&label, "--%s", o->name) < 0) {
                        log_error("out of memory");
                        return -ENOMEM;
                }
                return cli_parse_ulong(o->label ?: label, arg, o->min, o->max, o->ulong);
        }
        return o->parse(arg, o->userdata);
}

int cli_parse_options(int argc, char *argv[], const CliOption *options, size_t n_options, unsigned flags) {
        struct option longopts[CLI_OPTIONS_MAX + 2] = { { "help", no_argument, NULL, CLI_OPTION_CODE_HELP } };
        char optstring[3 + 1 + 2 * CLI_OPTIONS_MAX + 1] = "", *p = optstring;
        size_t n_long = 1;
        int c, r;

        assert(n_options <= CLI_OPTIONS_MAX);
        if (flags & CLI_OPTIONS_IN_ORDER)
                *p++ = '+';
        *p++ = ':'; /* a missing value is ':', not '?' */
        *p++ = 'h';
        for (size_t i = 0; i < n_options; i++) {
                if (options[i].name)
                        longopts[n_long++] = (struct option) { options[i].name,
                                                               options[i].has_arg ? required_argument : no_argument,
                                                               NULL, option_code(options, i) };
                if (options[i].short_name) {
                        *p++ = options[i].short_name;
                        if (options[i].has_arg)
                                *p++ = ':';
                }
        }
        *p = '\0';

        opterr = 0;
        optind = 0; /* a fresh start, whatever read argv before */
        while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) >= 0) {
                const CliOption *o;

                if (c == CLI_OPTION_CODE_HELP) {
                        cli_print_help(cli_verb, stdout);
                        return 0;
                }
                o = c == '?' || c == ':' ? NULL : find_option(options, n_options, c);
                if (!o)
                        return bad_option(c, argv);
                r = option_apply(o, optarg);
                if (r < 0)
                        return r == -ENOMEM ? cli_failure_status() : cli_usage_status();
        }
        return -1;
}

int cli_option_env(const char *arg, void *userdata) {
        return cli_parse_env("--env", arg, userdata);
}

int cli_parse_no_options(int argc, char *argv[]) {
        return cli_parse_options(argc, argv, NULL, 0, 0);
}

/* -h and --json, and -q when ret_quiet is given: the options of the verbs that take only those; their
 * arguments are left at argv[optind...]. Returns -1 when the verb goes on, else the exit status (0 after --help). */
static int json_quiet_flags(int argc, char *argv[], bool *ret_json, bool *ret_quiet) {
        const CliOption options[] = {
                CLI_FLAG("json", 0, ret_json),
                CLI_FLAG("quiet", 'q', ret_quiet),
        };

        *ret_json = false;
        if (ret_quiet)
                *ret_quiet = false;
        return cli_parse_options(argc, argv, options, ret_quiet ? 2 : 1, 0);
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
