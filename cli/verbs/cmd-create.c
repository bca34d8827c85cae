/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "macro.h"

const CliHelp cmd_create_help = {
        .synopsis = "create [TEMPLATE] [OPTIONS]",
        .summary = "Create a sandbox from TEMPLATE (default: minimal) and print its id",
        .options =
        "Options:\n"
        "  -n, --name NAME       name the sandbox (usable wherever an id is)\n"
        "      --vcpu N          virtual CPUs (default: the template's)\n"
        "  -m, --memory MIB      memory in MiB, 64..65536 (default: the template's)\n"
        "      --disk MIB        writable disk in MiB, 64..1048576 (default: the template's)\n"
        "  -e, --env KEY=VALUE   environment of every process in the sandbox (repeatable)\n"
        "      --idle-timeout T  suspend the sandbox after T without use (0: never; default: spaced.conf's\n"
        "                        idle_timeout, 6 h)\n"
        "      --timeout T, --ttl T\n"
        "                        time to live: remove (or, with --on-timeout suspend or stop, suspend or\n"
        "                        stop) the sandbox\n"
        "                        T after it was created (default: none)\n"
        "      --on-timeout remove|suspend|stop\n"
        "                        what --timeout does (default remove)\n"
        "      --egress PROFILE  an egress profile for the sandbox, fixed for its life (repeatable; default:\n"
        "                        the daemon's default profiles; see space-egress(5), spacectl egress ls)\n"
        "  -v, --volume NAME:/PATH\n"
        "                        mount volume NAME at PATH in the sandbox, shared with every sandbox that\n"
        "                        mounts it (repeatable; see spacectl volume)\n"
        "      --async           print the id of the create operation and return at once\n"
        "                        (follow it with 'spacectl op wait OP')\n"
        "      --json            print the sandbox (with --async: the operation) as JSON, not its id\n"
        "  -h, --help            show this help\n"
        "\n"
        "Times T are seconds, or a number with a suffix s, m, h or d (90, 15m, 2h).\n",
};

int cli_parse_duration(const char *option, const char *s, unsigned long *ret) {
        static const unsigned long max = 10UL * 365 * 86400; /* what spaced accepts */
        unsigned long v, mult = 1;
        char *end;

        errno = 0;
        v = strtoul(s, &end, 10);
        if (end != s && *end && !end[1])
                switch (*end) {
                case 's':
                        end++;
                        break;
                case 'm':
                        mult = 60, end++;
                        break;
                case 'h':
                        mult = 3600, end++;
                        break;
                case 'd':
                        mult = 86400, end++;
                        break;
                }
        if (!*s || end == s || *end || errno || s[0] == '-' || v > max / mult) {
                (void) cli_usage_error("%s: '%s' is not a time: seconds, or a number with s, m, h or d, up to 10 years",
                                       option, s);
                return -EINVAL;
        }
        *ret = v * mult;
        return 0;
}

int create_parse_idle_timeout(const char *arg, void *userdata) {
        CreateOptions *o = userdata;
        int r;

        r = cli_parse_duration("--idle-timeout", arg, &o->idle_timeout);
        o->idle_timeout_set = r >= 0;
        return r;
}

int create_parse_ttl(const char *arg, void *userdata) {
        CreateOptions *o = userdata;

        return cli_parse_duration("--timeout", arg, &o->ttl);
}

int create_parse_on_timeout(const char *arg, void *userdata) {
        CreateOptions *o = userdata;

        if (!streq(arg, "remove") && !streq(arg, "suspend") && !streq(arg, "stop")) {
                (void) cli_usage_error("--on-timeout: '%s' is none of remove, suspend and stop", arg);
                return -EINVAL;
        }
        o->on_timeout = arg;
        return 0;
}

int create_parse_egress(const char *arg, void *userdata) {
        CreateOptions *o = userdata;

        if (!*arg || o->n_egress >= CREATE_EGRESS_MAX) {
                (void) cli_usage_error("--egress: %s", *arg ? "too many profiles" : "the name is empty");
                return -EINVAL;
        }
        o->egress[o->n_egress++] = arg;
        return 0;
}

/* NAME:/PATH; the daemon checks that the volume exists and what the path may be */
int create_parse_volume(const char *arg, void *userdata) {
        CreateOptions *o = userdata;
        const char *colon = strchr(arg, ':');

        if (!colon || colon == arg || colon[1] != '/') {
                (void) cli_usage_error("--volume: '%s' is not NAME:/PATH (a volume, 'spacectl volume ls', and an "
                                       "absolute path in the sandbox)", arg);
                return -EINVAL;
        }
        if (o->n_volumes >= CREATE_VOLUMES_MAX) {
                (void) cli_usage_error("--volume: at most %d volumes", CREATE_VOLUMES_MAX);
                return -EINVAL;
        }
        o->volumes[o->n_volumes++] = arg;
        return 0;
}

static int add_volume_mounts(const CreateOptions *o, cJSON *b) {
        cJSON *list;

        if (o->n_volumes == 0)
                return 0;
        list = cJSON_AddArrayToObject(b, "volume_mounts");
        if (!list)
                return -ENOMEM;
        for (size_t i = 0; i < o->n_volumes; i++) {
                const char *colon = strchr(o->volumes[i], ':');
                _cleanup_free_ char *name = strndup(o->volumes[i], (size_t) (colon - o->volumes[i]));
                cJSON *m = cJSON_CreateObject();

                if (!name || !m || !cJSON_AddItemToArray(list, m) || !cJSON_AddStringToObject(m, "name", name) ||
                    !cJSON_AddStringToObject(m, "path", colon + 1))
                        return -ENOMEM;
        }
        return 0;
}

static cJSON *create_body(const CreateOptions *o) {
        cJSON *b = cJSON_CreateObject();

        if (!b)
                return NULL;
        if (o->template_name && !cJSON_AddStringToObject(b, "template", o->template_name))
                goto oom;
        if (o->name && !cJSON_AddStringToObject(b, "name", o->name))
                goto oom;
        if (o->vcpu && !cJSON_AddNumberToObject(b, "vcpu", (double) o->vcpu))
                goto oom;
        if (o->memory_mib && !cJSON_AddNumberToObject(b, "memory_mib", (double) o->memory_mib))
                goto oom;
        if (o->disk_mib && !cJSON_AddNumberToObject(b, "disk_mib", (double) o->disk_mib))
                goto oom;
        if (o->idle_timeout_set && !cJSON_AddNumberToObject(b, "idle_timeout", (double) o->idle_timeout))
                goto oom;
        if (o->ttl && !cJSON_AddNumberToObject(b, "timeout", (double) o->ttl))
                goto oom;
        if (o->on_timeout && !cJSON_AddStringToObject(b, "on_timeout", o->on_timeout))
                goto oom;
        if (o->n_egress > 0) {
                cJSON *list = cJSON_CreateStringArray(o->egress, (int) o->n_egress);
                if (!list || !cJSON_AddItemToObject(b, "egress_profiles", list)) {
                        cJSON_Delete(list);
                        goto oom;
                }
        }
        if (add_volume_mounts(o, b) < 0)
                goto oom;
        if (o->env) {
                cJSON *env = cJSON_Duplicate(o->env, true);
                if (!env || !cJSON_AddItemToObject(b, "env", env)) {
                        cJSON_Delete(env);
                        goto oom;
                }
        }
        return b;
oom:
        cJSON_Delete(b);
        return NULL;
}

/* --async: start the create and print its operation's id (or, with json, the operation). */
static int create_async(const CreateOptions *o, bool json) {
        SpaceHttpReply reply = {};
        const char *op_id;
        cJSON *body;
        int r;

        body = create_body(o);
        if (!body) {
                log_error("out of memory");
                return EXIT_FAIL;
        }
        r = cli_call("POST", "/v1/sandboxes", body, &reply);
        cJSON_Delete(body);
        if (r < 0)
                return EXIT_FAIL;
        op_id = json_str(cJSON_GetObjectItemCaseSensitive(reply.json, "operation"), "id");
        if (!op_id) {
                log_error("the daemon started the create but did not say its operation");
                space_http_reply_done(&reply);
                return EXIT_FAIL;
        }
        if (json)
                r = cli_print_json(cJSON_GetObjectItemCaseSensitive(reply.json, "operation"));
        else
                printf("%s\n", op_id);
        space_http_reply_done(&reply);
        return r >= 0 && fflush(stdout) == 0 ? 0 : EXIT_FAIL;
}

/* --json: the sandbox as inspect --json gives it, now that it runs. */
static int print_sandbox_json(const char *id) {
        _cleanup_free_ char *path = NULL;
        SpaceHttpReply reply = {};
        int r;

        if (cli_sandbox_path(id, NULL, &path) < 0) {
                log_error("out of memory");
                return EXIT_FAIL;
        }
        r = cli_call("GET", path, NULL, &reply);
        if (r < 0)
                return EXIT_FAIL;
        r = cli_print_json(reply.json);
        space_http_reply_done(&reply);
        return r >= 0 && fflush(stdout) == 0 ? 0 : EXIT_FAIL;
}

int cli_create(const CreateOptions *o, char **ret_id) {
        SpaceHttpReply reply = {};
        const cJSON *sandbox, *op;
        const char *id;
        cJSON *body;
        int r;

        body = create_body(o);
        if (!body) {
                log_error("out of memory");
                return -ENOMEM;
        }
        /* No ?wait here: the 202 hands out the id at once, so an interrupted `run` can still remove it. */
        r = cli_call("POST", "/v1/sandboxes", body, &reply);
        cJSON_Delete(body);
        if (r < 0)
                return r;

        sandbox = cJSON_GetObjectItemCaseSensitive(reply.json, "sandbox");
        op = cJSON_GetObjectItemCaseSensitive(reply.json, "operation");
        id = json_str(sandbox, "id");
        if (!id || !*id) {
                log_error("the daemon created a sandbox but did not say its id");
                space_http_reply_done(&reply);
                return -EBADMSG;
        }
        *ret_id = strdup(id);
        if (!*ret_id) {
                space_http_reply_done(&reply);
                return -ENOMEM;
        }

        r = cJSON_IsObject(op) ? cli_wait_operation(op, NULL) : 0;
        space_http_reply_done(&reply);
        return r;
}

int cmd_create(int argc, char *argv[]) {
        CreateOptions o = {};
        bool async = false, json = false;
        const CliOption options[] = {
                CLI_PARSE("env", 'e', cli_option_env, &o.env),
                CLI_FLAG("async", 0, &async),
                CLI_FLAG("json", 0, &json),
                CLI_PARSE("timeout", 0, create_parse_ttl, &o), /* run's --timeout is the command's */
                CREATE_OPTIONS(&o),
        };
        _cleanup_free_ char *id = NULL;
        int r;

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0) {
                cJSON_Delete(o.env);
                return r;
        }
        if (argc - optind > 1) {
                cJSON_Delete(o.env);
                return cli_usage_error("create takes at most one TEMPLATE, got '%s' too", argv[optind + 1]);
        }
        if (optind < argc)
                o.template_name = argv[optind];

        if (async) {
                r = create_async(&o, json);
                cJSON_Delete(o.env);
                return r;
        }

        r = cli_create(&o, &id);
        cJSON_Delete(o.env);
        if (r < 0)
                return cli_failure_status();
        if (json)
                return print_sandbox_json(id);
        printf("%s\n", id);
        return fflush(stdout) == 0 ? 0 : EXIT_FAIL;
}
