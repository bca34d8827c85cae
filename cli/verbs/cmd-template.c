/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "macro.h"

#define SHORT_DIGEST_LEN 12

const CliHelp cmd_template_help = {
        .synopsis = "template ls [--json] [-q]\n"
                    "template import FILE|DIR --tag NAME[:TAG] [--env K=V]... [--workdir DIR] [--user USER] [--quiet]\n"
                    "template build DIR [--tag NAME:TAG] [-o FILE] [-q] [-v]\n"
                    "template inspect REF\n"
                    "template tag REF NAME[:TAG]\n"
                    "template rm REF...\n"
                    "template gc",
        .summary = "Work with templates: build, import, list, tag, remove",
        .options =
        "Sub-verbs:\n"
        "  ls            list templates, one line per tag (untagged images show as <none>)\n"
        "  import        import a root filesystem tarball (plain, gzip, xz, zstd), an OCI image layout\n"
        "                directory or an OCI archive; prints the template's digest\n"
        "  build DIR     build the recipe in DIR (see space-template(5)), import it, print its digest\n"
        "  inspect       print a template as JSON\n"
        "  tag           point NAME[:TAG] at the image REF names\n"
        "  rm            remove tags; an image goes with its last tag, or by digest, unless in use\n"
        "  gc            remove untagged unused images and stale base snapshots; say how much was freed\n"
        "\n"
        "REF is NAME[:TAG] (TAG defaults to latest; names are lowercase, with / between parts, e.g.\n"
        "team/python:3.12) or sha256:<hex> (the full digest or at least 12 digits of it).\n"
        "\n"
        "Options of ls:\n"
        "      --json             print the reply of GET /v1/templates: {\"templates\": [...]}\n"
        "  -q, --quiet            print only tags (digests for untagged images), one per line\n"
        "Options of import:\n"
        "  -t, --tag NAME[:TAG]   tag the template (default tag: latest)\n"
        "  -e, --env K=V          a default environment variable (repeatable; over the image's)\n"
        "  -w, --workdir DIR      the default working directory of commands\n"
        "  -u, --user USER        the default user\n"
        "      --description TEXT a description\n"
        "      --vcpu N, --memory MIB, --disk MIB   the default sandbox shape\n"
        "  -q, --quiet            no progress bar (there is none when stderr is not a terminal)\n"
        "Options of build:\n"
        "  -t, --tag NAME[:TAG]   tag the template (default: the recipe's name, NAME:latest)\n"
        "  -o, --output FILE      write the root filesystem tarball to FILE instead of importing it\n"
        "  -q, --quiet            no progress, only errors on stderr\n"
        "  -v, --verbose          the build tools' output on stderr even when it is no terminal\n"
        "  -h, --help             show this help\n",
};

static void format_bytes(double b, char *buf, size_t size) {
        static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
        size_t u = 0;

        while (b >= 1024 && u + 1 < ELEMENTSOF(units)) {
                b /= 1024;
                u++;
        }
        snprintf(buf, size, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
}

static int print_table(const cJSON *list) {
        static const char *const headers[] = { "TAG", "DIGEST", "SIZE", "CREATED", "IN USE", "DESCRIPTION" };
        _cleanup_table_ Table *t = table_new(ELEMENTSOF(headers), headers);
        time_t now = time(NULL);
        const cJSON *tp;

        if (!t)
                return -ENOMEM;
        cJSON_ArrayForEach(tp, list) {
                char digest[SHORT_DIGEST_LEN + 1] = "-", size[32] = "-";
                const char *d = json_str(tp, "digest");
                const cJSON *tags = cJSON_GetObjectItemCaseSensitive(tp, "tags"), *tag;
                _cleanup_free_ char *age = json_str(tp, "created_at") ? format_age(json_str(tp, "created_at"), now) : NULL;
                const cJSON *in_use = cJSON_GetObjectItemCaseSensitive(tp, "in_use");
                double v;
                int n = 0;

                if (d) {
                        if (strncmp(d, "sha256:", 7) == 0)
                                d += 7;
                        snprintf(digest, sizeof digest, "%s", d);
                }
                if (json_num(tp, "size_bytes", &v))
                        format_bytes(v, size, sizeof size);
                cJSON_ArrayForEach(tag, tags) {
                        if (!cJSON_IsString(tag))
                                continue;
                        const char *cells[] = { tag->valuestring, digest, size, age ?: "-",
                                                cJSON_IsTrue(in_use) ? "yes" : "no", json_str(tp, "description") };
                        if (table_add(t, cells) < 0)
                                return -ENOMEM;
                        n++;
                }
                if (n == 0) {
                        const char *cells[] = { "<none>", digest, size, age ?: "-",
                                                cJSON_IsTrue(in_use) ? "yes" : "no", json_str(tp, "description") };
                        if (table_add(t, cells) < 0)
                                return -ENOMEM;
                }
        }
        return table_print(t, stdout);
}

static int print_quiet(const cJSON *list) {
        const cJSON *tp;

        cJSON_ArrayForEach(tp, list) {
                const cJSON *tags = cJSON_GetObjectItemCaseSensitive(tp, "tags"), *tag;
                int n = 0;

                cJSON_ArrayForEach(tag, tags)
                        if (cJSON_IsString(tag)) {
                                printf("%s\n", tag->valuestring);
                                n++;
                        }
                if (n == 0 && json_str(tp, "digest"))
                        printf("%s\n", json_str(tp, "digest"));
        }
        return 0;
}

static int template_ls(int argc, char *argv[]) {
        bool json = false, quiet = false;
        int r;

        r = cli_list_options(argc, argv, "template ls", &json, &quiet);
        if (r >= 0)
                return r;

        return cli_list_show("/v1/templates", "templates", "template", json, NULL, quiet ? print_quiet : print_table);
}

static int template_path(const char *ref, const char *suffix, char **ret) {
        _cleanup_free_ char *esc = NULL;

        if (space_http_escape(ref, &esc) < 0 || asprintf(ret, "/v1/templates/%s%s", esc, suffix) < 0) {
                log_error("out of memory");
                return -ENOMEM;
        }
        return 0;
}

static ssize_t read_fd(void *buf, size_t max, void *userdata) {
        ssize_t n;

        do
                n = read(*(int *) userdata, buf, max);
        while (n < 0 && errno == EINTR);
        return n < 0 ? -errno : n;
}

/* Over TCP the daemon takes no host path: the file's bytes go as the body, tag and config in the query. */
static int import_upload(const char *file, const char *tag, const cJSON *config, SpaceHttpReply *ret) {
        _cleanup_free_ char *etag = NULL, *cfg = NULL, *ecfg = NULL, *path = NULL;
        _cleanup_close_ int fd = -1;
        SpaceHttpReply reply = {};
        struct stat st;
        int r;

        fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                log_error("%s: %m", file);
                return -errno;
        }
        if (!S_ISREG(st.st_mode)) {
                log_error("%s is not a file: over TCP (SPACE_API_URL) an import uploads a file; pack an OCI layout "
                          "directory as an OCI archive (tar) first", file);
                return -EINVAL;
        }
        cfg = config ? cJSON_PrintUnformatted(config) : strdup("{}");
        if (!cfg || space_http_escape(tag ?: "", &etag) < 0 || space_http_escape(cfg, &ecfg) < 0 ||
            asprintf(&path, "/v1/templates/import?tag=%s&config=%s", etag, ecfg) < 0) {
                log_error("out of memory");
                return -ENOMEM;
        }
        if (!cli_http())
                return -ENOTCONN;
        r = space_http_upload(cli_http(), "POST", path, (int64_t) st.st_size, read_fd, &fd, &reply);
        return cli_reply_take(cli_http(), r, &reply, ret);
}

int cli_template_import_post(const char *file, const char *tag, const cJSON *config, SpaceHttpReply *ret) {
        cJSON *body;
        int r;

        if (!cli_http())
                return -ENOTCONN;
        if (!space_http_socket_path(cli_http()))
                return import_upload(file, tag, config, ret);
        body = cJSON_CreateObject();
        if (!body || !cJSON_AddStringToObject(body, "source", file) || (tag && !cJSON_AddStringToObject(body, "tag", tag)) ||
            (config && !cJSON_AddItemToObject(body, "config", cJSON_Duplicate(config, true)))) {
                cJSON_Delete(body);
                log_error("out of memory");
                return -ENOMEM;
        }
        r = cli_call("POST", "/v1/templates/import", body, ret);
        cJSON_Delete(body);
        return r;
}

/* What the options of template import gather. */
typedef struct ImportArgs {
        cJSON *config;          /* the image's defaults: workdir, user, description, shape */
        cJSON *env;             /* its default environment: "K=V" strings */
        const char *tag;
        bool quiet;
} ImportArgs;

static int import_parse_env(const char *arg, void *userdata) {
        ImportArgs *a = userdata;

        if (!strchr(arg, '=') || arg[0] == '=') {
                (void) cli_usage_error("--env takes K=V, got '%s'", arg);
                return -EINVAL;
        }
        cJSON_AddItemToArray(a->env, cJSON_CreateString(arg));
        return 0;
}

static int import_parse_workdir(const char *arg, void *userdata) {
        ImportArgs *a = userdata;

        if (arg[0] != '/') {
                (void) cli_usage_error("--workdir takes an absolute path, got '%s'", arg);
                return -EINVAL;
        }
        cJSON_AddStringToObject(a->config, "workdir", arg);
        return 0;
}

static int import_parse_user(const char *arg, void *userdata) {
        cJSON_AddStringToObject(((ImportArgs *) userdata)->config, "user", arg);
        return 0;
}

static int import_parse_description(const char *arg, void *userdata) {
        cJSON_AddStringToObject(((ImportArgs *) userdata)->config, "description", arg);
        return 0;
}

/* A number of the sandbox shape, into config's key. */
static int import_parse_shape(ImportArgs *a, const char *option, const char *key, const char *arg, unsigned long min,
                              unsigned long max) {
        unsigned long n;

        if (cli_parse_ulong(option, arg, min, max, &n) < 0)
                return -EINVAL;
        cJSON_AddNumberToObject(a->config, key, (double) n);
        return 0;
}

static int import_parse_vcpu(const char *arg, void *userdata) {
        return import_parse_shape(userdata, "--vcpu", "vcpu", arg, 1, 64);
}

static int import_parse_memory(const char *arg, void *userdata) {
        return import_parse_shape(userdata, "--memory", "memory_mib", arg, 64, 65536);
}

static int import_parse_disk(const char *arg, void *userdata) {
        return import_parse_shape(userdata, "--disk", "disk_mib", arg, 64, 1048576);
}

/* The options and the one FILE or DIR. Returns -1 to go on with the source at argv[optind], else the exit
 * status. */
static int import_args_parse(int argc, char *argv[], ImportArgs *a) {
        const CliOption options[] = {
                CLI_STRING("tag", 't', &a->tag),
                CLI_PARSE("env", 'e', import_parse_env, a),
                CLI_PARSE("workdir", 'w', import_parse_workdir, a),
                CLI_PARSE("user", 'u', import_parse_user, a),
                CLI_PARSE("description", 0, import_parse_description, a),
                CLI_PARSE("vcpu", 0, import_parse_vcpu, a),
                CLI_PARSE("memory", 'm', import_parse_memory, a),
                CLI_PARSE("disk", 0, import_parse_disk, a),
                CLI_FLAG("quiet", 'q', &a->quiet),
        };
        int r;

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (argc - optind != 1)
                return cli_usage_error(argc - optind < 1 ? "template import needs FILE or DIR"
                                                         : "template import takes one FILE or DIR");
        if (!a->tag)
                return cli_usage_error("template import needs --tag NAME[:TAG]");
        return -1;
}

/* Follows the import the daemon answered with to its end and prints the template's digest. Returns the exit
 * status. */
static int import_follow(const SpaceHttpReply *reply, const char *tag, bool quiet) {
        _cleanup_free_ char *label = NULL;
        cJSON *result = NULL;
        const char *op_id;
        double dropped = 0;
        int r = EXIT_FAIL;

        op_id = json_str(cJSON_GetObjectItemCaseSensitive(reply->json, "operation"), "id");
        if (asprintf(&label, "importing %s", tag) < 0) {
                log_error("out of memory");
                return EXIT_FAIL;
        }
        if (cli_operation_wait_progress(op_id, label, quiet, &result) < 0)
                goto out;
        if (!json_str(result, "digest")) {
                log_error("the import finished without a digest");
                goto out;
        }
        if (json_num(result, "dropped", &dropped) && dropped > 0)
                fprintf(stderr, "spacectl: %.0f device nodes, fifos or sockets were left out of the image\n", dropped);
        printf("%s\n", json_str(result, "digest"));
        r = fflush(stdout) == 0 ? 0 : EXIT_FAIL;
out:
        cJSON_Delete(result);
        return r;
}

static int template_import(int argc, char *argv[]) {
        ImportArgs a = { .config = cJSON_CreateObject(), .env = cJSON_CreateArray() };
        cJSON *body = cJSON_CreateObject();
        _cleanup_free_ char *source = NULL;
        SpaceHttpReply reply = {};
        int r = EXIT_FAIL;

        if (!body || !a.config || !a.env) {
                log_error("out of memory");
                goto out;
        }
        r = import_args_parse(argc, argv, &a);
        if (r >= 0)
                goto out;
        r = EXIT_FAIL;
        /* the daemon resolves nothing relative to our directory */
        source = realpath(argv[optind], NULL);
        if (!source) {
                log_error("%s: %m", argv[optind]);
                goto out;
        }
        if (cJSON_GetArraySize(a.env) > 0) {
                cJSON_AddItemToObject(a.config, "env", a.env);
                a.env = NULL;
        }
        cJSON_AddStringToObject(body, "source", source);
        cJSON_AddStringToObject(body, "tag", a.tag);
        cJSON_AddItemToObject(body, "config", a.config);
        a.config = NULL;

        (void) cli_signals_install();
        if (cli_http())
                space_http_set_cancel(cli_http(), &cli_signal_received);
        if (cli_template_import_post(source, a.tag, cJSON_GetObjectItemCaseSensitive(body, "config"), &reply) < 0)
                goto out;
        r = import_follow(&reply, a.tag, a.quiet);
out:
        space_http_reply_done(&reply);
        cJSON_Delete(body);
        cJSON_Delete(a.config);
        cJSON_Delete(a.env);
        return r;
}

static int template_inspect(int argc, char *argv[]) {
        _cleanup_free_ char *path = NULL;
        SpaceHttpReply reply = {};
        int r;

        r = cli_parse_no_options(argc, argv);
        if (r >= 0)
                return r;
        if (argc - optind != 1)
                return cli_usage_error("template inspect needs exactly one REF");
        if (template_path(argv[optind], "", &path) < 0 || cli_call("GET", path, NULL, &reply) < 0)
                return EXIT_FAIL;
        r = cli_print_json(reply.json);
        space_http_reply_done(&reply);
        return r < 0 ? EXIT_FAIL : 0;
}

static int template_tag(int argc, char *argv[]) {
        _cleanup_free_ char *path = NULL;
        SpaceHttpReply reply = {};
        cJSON *body;
        int r;

        r = cli_parse_no_options(argc, argv);
        if (r >= 0)
                return r;
        if (argc - optind != 2)
                return cli_usage_error("template tag needs REF and NAME[:TAG]");
        body = cJSON_CreateObject();
        if (!body || !cJSON_AddStringToObject(body, "tag", argv[optind + 1]) ||
            template_path(argv[optind], "/tag", &path) < 0) {
                cJSON_Delete(body);
                return EXIT_FAIL;
        }
        r = cli_call("POST", path, body, &reply);
        cJSON_Delete(body);
        if (r < 0)
                return EXIT_FAIL;
        printf("%s\n", json_str(reply.json, "digest") ?: "");
        space_http_reply_done(&reply);
        return 0;
}

static int template_rm(int argc, char *argv[]) {
        int r, status = 0;

        r = cli_parse_no_options(argc, argv);
        if (r >= 0)
                return r;
        if (argc - optind < 1)
                return cli_usage_error("template rm needs at least one REF");
        for (int i = optind; i < argc; i++) {
                _cleanup_free_ char *path = NULL;
                SpaceHttpReply reply = {};
                double freed = 0, bytes = 0;

                if (template_path(argv[i], "", &path) < 0 || cli_call("DELETE", path, NULL, &reply) < 0) {
                        status = EXIT_FAIL;
                        continue;
                }
                if (json_str(reply.json, "untagged"))
                        printf("untagged %s\n", json_str(reply.json, "untagged"));
                if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply.json, "removed"))) {
                        char size[32], disk[32];

                        /* SIZE as template ls shows it, and what the disk got back (image file, base snapshots) */
                        (void) json_num(reply.json, "freed_bytes", &freed);
                        (void) json_num(reply.json, "size_bytes", &bytes);
                        format_bytes(bytes, size, sizeof size);
                        format_bytes(freed, disk, sizeof disk);
                        printf("removed %s (SIZE %s; %s freed on disk with its image file and base snapshots)\n",
                               argv[i], size, disk);
                }
                space_http_reply_done(&reply);
        }
        return fflush(stdout) == 0 ? status : EXIT_FAIL;
}

static int template_gc(int argc, char *argv[]) {
        SpaceHttpReply reply = {};
        double freed = 0, images = 0, bases = 0;
        char size[32];
        int r;

        r = cli_parse_no_options(argc, argv);
        if (r >= 0)
                return r;
        if (argc - optind != 0)
                return cli_usage_error("template gc takes no arguments");
        if (cli_call("POST", "/v1/templates/gc", NULL, &reply) < 0)
                return EXIT_FAIL;
        (void) json_num(reply.json, "freed_bytes", &freed);
        (void) json_num(reply.json, "images_removed", &images);
        (void) json_num(reply.json, "base_snapshots_removed", &bases);
        format_bytes(freed, size, sizeof size);
        printf("removed %.0f images and %.0f base snapshots, %s freed\n", images, bases, size);
        space_http_reply_done(&reply);
        return fflush(stdout) == 0 ? 0 : EXIT_FAIL;
}

static const SubVerb template_verbs[] = {
        { "ls", template_ls },
        { "import", template_import },
        { "build", template_build },
        { "inspect", template_inspect },
        { "tag", template_tag },
        { "rm", template_rm },
        { "gc", template_gc },
};

int cmd_template(int argc, char *argv[]) {
        return cli_run_sub_verb(template_verbs, ELEMENTSOF(template_verbs), argc, argv);
}
