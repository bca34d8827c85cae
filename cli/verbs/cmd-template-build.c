/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "json-util.h"
#include "string-util.h"
#include "macro.h"
#include "build/recipe-build.h"
#include "recipe.h"

/* spacectl template build DIR: the recipe (lib/recipe.c) becomes a root filesystem tarball in a temporary
 * directory (cli/build/recipe-build.c), which the daemon imports (POST /v1/templates/import) with the recipe's
 * defaults as the template's config; stdout gets the digest, alone. */

#define TAG_MAX 128

static bool tag_part_is_valid(const char *t) {
        size_t n = strlen(t);

        /* Docker's rule for the part after ':' */
        if (n == 0 || n > TAG_MAX || !(isalnum((unsigned char) t[0]) || t[0] == '_'))
                return false;
        for (; *t; t++)
                if (!(isalnum((unsigned char) *t) || strchr("_.-", *t)))
                        return false;
        return true;
}

/* NAME:TAG, or NAME for NAME:latest */
static int parse_tag(const char *arg, char **ret) {
        _cleanup_free_ char *name = strdup(arg);
        char *colon;

        if (!name)
                return -ENOMEM;
        colon = strrchr(name, ':');
        if (colon)
                *colon = 0;
        if (!recipe_name_is_valid(name) || (colon && !tag_part_is_valid(colon + 1)))
                return -EINVAL;
        if (asprintf(ret, "%s:%s", name, colon ? colon + 1 : "latest") < 0)
                return -ENOMEM;
        return 0;
}

/* The template's defaults, as POST /v1/templates/import takes them: only what the recipe sets. */
static cJSON *recipe_config(const Recipe *r) {
        cJSON *c = cJSON_CreateObject();
        bool ok = c;

        if (ok && r->description)
                ok = cJSON_AddStringToObject(c, "description", r->description);
        if (ok && r->env)
                ok = cJSON_AddItemToObject(c, "env", json_array_from_strv(r->env));
        if (ok && r->user)
                ok = cJSON_AddStringToObject(c, "user", r->user);
        if (ok && r->workdir)
                ok = cJSON_AddStringToObject(c, "workdir", r->workdir);
        if (ok && r->entrypoint)
                ok = cJSON_AddItemToObject(c, "entrypoint", json_array_from_strv(r->entrypoint));
        if (ok && r->start)
                ok = cJSON_AddStringToObject(c, "start", r->start);
        if (ok && r->ready)
                ok = cJSON_AddStringToObject(c, "ready", r->ready);
        if (ok && r->vcpu)
                ok = cJSON_AddNumberToObject(c, "vcpu", (double) r->vcpu);
        if (ok && r->memory_mib)
                ok = cJSON_AddNumberToObject(c, "memory_mib", (double) r->memory_mib);
        if (ok && r->disk_mib)
                ok = cJSON_AddNumberToObject(c, "disk_mib", (double) r->disk_mib);
        if (!ok) {
                cJSON_Delete(c);
                return NULL;
        }
        return c;
}

/* from = TEMPLATE: the parent's config under the recipe's (env by name, the rest key by key), so that what
 * the recipe does not set is the parent's. Takes child. */
static cJSON *config_over_parent(const cJSON *parent, cJSON *child) {
        cJSON *c = parent ? cJSON_Duplicate(parent, true) : cJSON_CreateObject(), *item;
        const cJSON *env = cJSON_GetObjectItemCaseSensitive(child, "env"), *e;

        if (!c || !child) {
                cJSON_Delete(c);
                cJSON_Delete(child);
                return NULL;
        }
        if (cJSON_IsArray(env)) {
                char **merged = NULL;
                const cJSON *pe = cJSON_GetObjectItemCaseSensitive(c, "env");
                bool ok = true;

                cJSON_ArrayForEach(e, pe)
                        ok = ok && (!cJSON_IsString(e) || strv_set_kv(&merged, e->valuestring) >= 0);
                cJSON_ArrayForEach(e, env)
                        ok = ok && (!cJSON_IsString(e) || strv_set_kv(&merged, e->valuestring) >= 0);
                cJSON_DeleteItemFromObjectCaseSensitive(c, "env");
                ok = ok && cJSON_AddItemToObject(c, "env", json_array_from_strv(merged));
                strv_free(merged);
                cJSON_DeleteItemFromObjectCaseSensitive(child, "env");
                if (!ok) {
                        cJSON_Delete(c);
                        cJSON_Delete(child);
                        return NULL;
                }
        }
        while ((item = child->child)) {
                cJSON_DetachItemViaPointer(child, item);
                cJSON_DeleteItemFromObjectCaseSensitive(c, item->string);
                cJSON_AddItemToObject(c, item->string, item);
        }
        cJSON_Delete(child);
        return c;
}

/* from = TEMPLATE: the parent as the daemon has it (its digest, which the export is asked for, and its config).
 * An unknown parent is the user's to fix: the message says how. */
static int parent_lookup(const Recipe *r, char **ret_digest, cJSON **ret_config) {
        _cleanup_free_ char *esc = NULL, *path = NULL;
        SpaceHttpReply reply = {};
        const char *digest;
        int k;

        if (space_http_escape(r->parent, &esc) < 0 || asprintf(&path, "/v1/templates/%s", esc) < 0) {
                log_error("out of memory");
                return -ENOMEM;
        }
        k = space_http_call(cli_http(), "GET", path, NULL, &reply);
        if (k < 0) {
                cli_log_transport_error(cli_http(), k);
                return k;
        }
        if (reply.error == ERROR_TEMPLATE_NOT_FOUND) {
                log_error("%s: from = %s: no template '%s' to build from: see 'spacectl template ls', or build the "
                          "parent first (spacectl template build DIR of its recipe, e.g. templates/seed)",
                          r->conf, r->parent, r->parent);
                space_http_reply_done(&reply);
                return -ENOENT;
        }
        if (!space_http_reply_ok(&reply)) {
                log_error("%s: from = %s: %s", r->conf, r->parent, reply.error_message);
                space_http_reply_done(&reply);
                return -EBADMSG;
        }
        digest = json_str(reply.json, "digest");
        *ret_digest = digest ? strdup(digest) : NULL;
        *ret_config = cJSON_DetachItemFromObjectCaseSensitive(reply.json, "config");
        space_http_reply_done(&reply);
        if (!*ret_digest) {
                cJSON_Delete(*ret_config);
                log_error("the daemon described %s without a digest", r->parent);
                return -EBADMSG;
        }
        return 0;
}

typedef struct ParentFetch {
        const Recipe *recipe;
        const char *digest;
} ParentFetch;

static int write_all_fd(const void *buf, size_t n, void *userdata) {
        int fd = *(int *) userdata;

        for (size_t off = 0; off < n;) {
                ssize_t w = write(fd, (const char *) buf + off, n - off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                off += (size_t) w;
        }
        return 0;
}

/* BuildOptions.fetch_parent: GET /v1/templates/DIGEST/rootfs into path. */
static int fetch_parent(const char *path, void *userdata) {
        ParentFetch *p = userdata;
        _cleanup_free_ char *url = NULL;
        _cleanup_close_ int fd = -1;
        SpaceHttpReply reply = {};
        int k;

        if (asprintf(&url, "/v1/templates/%s/rootfs", p->digest) < 0) {
                log_error("out of memory");
                return -ENOMEM;
        }
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
                log_error("cannot create %s: %s", path, strerror(errno));
                return -errno;
        }
        k = space_http_download(cli_http(), url, NULL, write_all_fd, &fd, &reply);
        if (k >= 0 && !space_http_reply_ok(&reply)) {
                log_error("%s: from = %s: %s", p->recipe->conf, p->recipe->parent, reply.error_message);
                k = -EBADMSG;
        } else if (k < 0 && k != -EBADMSG)
                log_error("cannot fetch the tree of %s: %s", p->recipe->parent, strerror(-k));
        space_http_reply_done(&reply);
        if (k >= 0 && close(TAKE_FD(fd)) < 0)
                k = -errno;
        return k;
}

/* --output: move the tarball there (copy when it is on another filesystem). */
static int write_output(const char *tarball, const char *dest) {
        _cleanup_close_ int in = -1, out = -1;
        char buf[1 << 16];
        ssize_t n;

        if (rename(tarball, dest) == 0)
                return 0;
        if (errno != EXDEV) {
                log_error("cannot write %s: %s", dest, strerror(errno));
                return -errno;
        }
        in = open(tarball, O_RDONLY | O_CLOEXEC);
        out = open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (in < 0 || out < 0) {
                log_error("cannot write %s: %s", dest, strerror(errno));
                return -errno;
        }
        while ((n = read(in, buf, sizeof buf)) > 0)
                for (ssize_t off = 0; off < n;) {
                        ssize_t w = write(out, buf + off, (size_t) (n - off));
                        if (w < 0) {
                                if (errno == EINTR)
                                        continue;
                                log_error("cannot write %s: %s", dest, strerror(errno));
                                return -errno;
                        }
                        off += w;
                }
        if (n < 0 || close(TAKE_FD(out)) < 0) {
                log_error("cannot write %s: %s", dest, strerror(errno));
                return -errno;
        }
        return 0;
}

/* POST /v1/templates/import and follow the operation (a progress bar on a terminal); prints the digest.
 * -EINTR when the wait was interrupted: the import goes on and still needs the tarball. */
static int import_tarball(const Recipe *r, const cJSON *parent_config, const char *tarball, const char *tag,
                          bool quiet) {
        _cleanup_free_ char *label = NULL;
        SpaceHttpReply reply = {};
        cJSON *body = cJSON_CreateObject(), *result = NULL;
        cJSON *config = r->from == RECIPE_FROM_TEMPLATE ? config_over_parent(parent_config, recipe_config(r))
                                                         : recipe_config(r);
        const char *digest;
        int k;
        bool attached = body && config && cJSON_AddItemToObject(body, "config", config);

        if (attached)
                config = NULL; /* body owns it now */
        if (!attached || !cJSON_AddStringToObject(body, "source", tarball) ||
            !cJSON_AddStringToObject(body, "tag", tag) || asprintf(&label, "importing %s", tag) < 0) {
                cJSON_Delete(body);
                cJSON_Delete(config);
                log_error("out of memory");
                return -ENOMEM;
        }
        if (cli_http())
                space_http_set_cancel(cli_http(), &cli_signal_received);
        /* over TCP the tarball's bytes go, not its path */
        k = cli_template_import_post(tarball, tag, cJSON_GetObjectItemCaseSensitive(body, "config"), &reply);
        cJSON_Delete(body);
        if (k < 0)
                return cli_signal_received ? -EINTR : k;
        k = cli_operation_wait_progress(json_str(cJSON_GetObjectItemCaseSensitive(reply.json, "operation"), "id"),
                                        label, quiet, &result);
        space_http_reply_done(&reply);
        if (k < 0)
                return k;
        digest = json_str(result, "digest");
        if (!digest) {
                log_error("the import of %s finished without a digest; see 'spacectl template ls'", tag);
                cJSON_Delete(result);
                return -EBADMSG;
        }
        printf("%s\n", digest);
        cJSON_Delete(result);
        return fflush(stdout) == 0 ? 0 : -errno;
}

int template_build(int argc, char *argv[]) {
        _cleanup_recipe_ Recipe *r = NULL;
        _cleanup_free_ char *tag = NULL, *err = NULL, *parent_digest = NULL;
        const char *tag_arg = NULL, *output = NULL;
        cJSON *parent_config = NULL;
        ParentFetch fetch = {};
        BuildOptions o = {};
        BuildResult b = {};
        int k;
        const CliOption options[] = {
                CLI_STRING("tag", 't', &tag_arg),
                CLI_STRING_NOT_EMPTY("output", 'o', &output),
                CLI_FLAG("quiet", 'q', &o.quiet),
                CLI_FLAG("verbose", 'v', &o.verbose),
        };

        k = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (k >= 0)
                return k;
        if (optind >= argc)
                return cli_usage_error("template build needs the recipe directory");
        if (optind + 1 < argc)
                return cli_usage_error("template build takes one recipe directory, got '%s' too", argv[optind + 1]);

        k = recipe_load(argv[optind], &r, &err);
        if (k < 0) {
                log_error("%s", err ?: strerror(-k));
                return EXIT_FAIL;
        }
        k = parse_tag(tag_arg ?: r->name, &tag);
        if (k == -ENOMEM)
                return EXIT_FAIL;
        if (k < 0)
                return cli_usage_error("--tag: '%s' is not NAME:TAG (NAME: lower-case letters, digits, '.', '_', "
                                       "'-', namespaces joined by '/'; TAG: letters, digits, '_', '.', '-')",
                                       tag_arg);
        /* Before a build that may take minutes: is there a daemon to import into (and the parent to build on)? */
        if ((!output || r->from == RECIPE_FROM_TEMPLATE) && !cli_http())
                return EXIT_FAIL;
        if (r->from == RECIPE_FROM_TEMPLATE) {
                if (parent_lookup(r, &parent_digest, &parent_config) < 0)
                        return EXIT_FAIL;
                fetch = (ParentFetch) { .recipe = r, .digest = parent_digest };
                o.fetch_parent = fetch_parent;
                o.fetch_userdata = &fetch;
        }
        k = cli_signals_install();
        if (k < 0) {
                log_error("cannot install signal handlers: %s", strerror(-k));
                return EXIT_FAIL;
        }

        k = recipe_build(r, &o, &b);
        if (k < 0) {
                cJSON_Delete(parent_config);
                return EXIT_FAIL;
        }
        if (!o.quiet && isatty(STDERR_FILENO)) {
                struct stat st;
                if (stat(b.tarball, &st) == 0)
                        fprintf(stderr, "built %s in %.1f s: %.1f MiB\n", r->name, b.seconds,
                                (double) st.st_size / (1024.0 * 1024.0));
        }
        if (output)
                k = write_output(b.tarball, output);
        else
                k = import_tarball(r, parent_config, b.tarball, tag, o.quiet);
        cJSON_Delete(parent_config);
        if (k == -EINTR && !output) {
                /* the daemon may still be reading it */
                log_error("left %s for the import; remove it once 'spacectl op ls' shows the import ended",
                          b.workdir);
                free(b.workdir);
                b.workdir = NULL;
        }
        build_result_done(&b);
        return k < 0 ? EXIT_FAIL : 0;
}
