/* SPDX-License-Identifier: Apache-2.0 */
/* The recipe parser (lib/recipe.c): every key, and that every mistake names the file, the line and the key. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "recipe.h"
#include "tap.h"

static char base[] = "/tmp/test-recipe.XXXXXX";
static unsigned n_dirs;

static void write_file(const char *path, const char *content, mode_t mode) {
        FILE *f = fopen(path, "we");

        if (!f) {
                perror(path);
                exit(1);
        }
        fputs(content, f);
        fclose(f);
        chmod(path, mode);
}

/* A fresh recipe directory with this template.conf (and a build script and a file to copy). */
static char *recipe(const char *conf) {
        char *dir, *p;

        if (asprintf(&dir, "%s/r%u", base, n_dirs++) < 0 || mkdir(dir, 0755) < 0)
                exit(1);
        if (asprintf(&p, "%s/template.conf", dir) < 0)
                exit(1);
        write_file(p, conf, 0644);
        free(p);
        if (asprintf(&p, "%s/make-tree.sh", dir) < 0)
                exit(1);
        write_file(p, "#!/bin/sh\n", 0755);
        free(p);
        if (asprintf(&p, "%s/not-executable.sh", dir) < 0)
                exit(1);
        write_file(p, "#!/bin/sh\n", 0644);
        free(p);
        if (asprintf(&p, "%s/motd", dir) < 0)
                exit(1);
        write_file(p, "hello\n", 0640);
        free(p);
        return dir;
}

/* Loading conf fails, and the message contains want (the "FILE:LINE: key" part and the explanation). */
static void bad(const char *conf, const char *want) {
        _cleanup_free_ char *dir = recipe(conf), *err = NULL;
        Recipe *r = NULL;
        int k = recipe_load(dir, &r, &err);

        if (!ok(k == -EINVAL && err && strstr(err, want), "refused with \"%s\"", want))
                diag("got %d, \"%s\" for:\n%s", k, err ?: "(no message)", conf);
        recipe_free(r);
}

static Recipe *good(const char *what, const char *conf) {
        _cleanup_free_ char *dir = recipe(conf), *err = NULL;
        Recipe *r = NULL;
        int k = recipe_load(dir, &r, &err);

        if (!ok(k == 0 && r, "accepted: %s", what))
                diag("got %d, \"%s\"", k, err ?: "");
        return r;
}

int main(void) {
        Recipe *r;
        char *err = NULL;
        int k;

        if (!mkdtemp(base))
                return 1;

        /* a complete Debian recipe */
        r = good("a Debian recipe with every key", "# comment\n"
                 "\n"
                 "  name = team/py  \n"
                 "description = Python and friends\n"
                 "from = debian:bookworm\n"
                 "packages = python3 ca-certificates\n"
                 "packages = libc6:amd64,git=1:2.39.2-1.1\n"
                 "file = motd /etc/motd\n"
                 "file = motd /usr/local/bin/motd 0755\n"
                 "run = useradd --uid 1000 user\n"
                 "run = echo 'a = b' > /etc/x\n"
                 "env = PATH=/usr/bin:/bin\n"
                 "env = EMPTY=\n"
                 "user = user\n"
                 "workdir = /home/user\n"
                 "entrypoint = /usr/bin/python3 -u\n"
                 "vcpu = 2\n"
                 "memory_mib = 1024\n"
                 "disk_mib = 4096\n");
        if (r) {
                ok(streq(r->name, "team/py"), "name");
                ok(r->from == RECIPE_FROM_DEBIAN && streq(r->suite, "bookworm"), "from debian:bookworm");
                ok(r->packages && streq(r->packages[0], "python3") && streq(r->packages[2], "libc6:amd64") &&
                           streq(r->packages[3], "git=1:2.39.2-1.1") && !r->packages[4],
                   "packages from two lines, blanks and commas");
                ok(r->n_files == 2 && (r->files[0].mode & 07777) == 0640 && r->files[1].mode == 0755 &&
                           streq(r->files[1].dest, "/usr/local/bin/motd") && r->files[0].src[0] == '/',
                   "files: mode from the source or given, source made absolute");
                ok(r->run && streq(r->run[1], "echo 'a = b' > /etc/x") && !r->run[2], "run keeps the whole line");
                ok(r->env && streq(r->env[1], "EMPTY=") && streq(r->user, "user") &&
                           streq(r->workdir, "/home/user"),
                   "env, user, workdir");
                ok(r->entrypoint && streq(r->entrypoint[1], "-u") && !r->entrypoint[2], "entrypoint split on blanks");
                ok(r->vcpu == 2 && r->memory_mib == 1024 && r->disk_mib == 4096, "shape");
                recipe_free(r);
        }

        /* scratch; the name defaults to the directory's */
        r = good("a scratch recipe", "from = scratch\nbuild = make-tree.sh\nrun = true\n");
        if (r) {
                ok(r->from == RECIPE_FROM_SCRATCH && r->build && strstr(r->build, "/make-tree.sh") &&
                           r->build[0] == '/',
                   "scratch with an absolute build path");
                ok(r->name && r->name[0] == 'r', "default name is the directory's (%s)", r->name);
                recipe_free(r);
        }

        /* from = TEMPLATE: a tag or a digest; packages, files and run on top; no build script */
        r = good("a recipe from a template", "from = seed\npackages = jq\nfile = motd /etc/motd\nrun = true\n");
        if (r) {
                ok(r->from == RECIPE_FROM_TEMPLATE && streq(r->parent, "seed") && !r->suite, "from = seed");
                ok(r->packages && streq(r->packages[0], "jq") && r->n_files == 1 && r->run, "with packages, file, run");
                ok(!r->user && !r->workdir && !r->env && !r->vcpu, "nothing set that the parent would give");
                recipe_free(r);
        }
        {
                static const char *const refs[] = { "seed:latest", "team/py:3.11", "ubuntu:noble",
                                                    "sha256:0123456789ab",
                                                    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" };
                for (size_t i = 0; i < ELEMENTSOF(refs); i++) {
                        _cleanup_free_ char *conf = NULL;
                        if (asprintf(&conf, "from = %s\n", refs[i]) < 0)
                                return 1;
                        r = good(refs[i], conf);
                        if (r)
                                ok(r->from == RECIPE_FROM_TEMPLATE && streq(r->parent, refs[i]), "parent %s", refs[i]);
                        recipe_free(r);
                }
        }
        bad("from = sha256:0123\n", "template.conf:1: from: 'sha256:0123' is not a template digest");
        bad("from = sha256:0123456789AB\n", "from: 'sha256:0123456789AB' is not a template digest");
        bad("from = seed:\n", "from: 'seed:' is not supported");
        bad("from = seed:-x\n", "from: 'seed:-x' is not supported");
        bad("from = team//py\n", "from: 'team//py' is not supported");
        bad("from = /seed\n", "from: '/seed' is not supported");
        bad("from = seed\nbuild = make-tree.sh\n", "template.conf:2: build: only with from = scratch");
        bad("from = seed\nfrom = seed\n", "template.conf:2: from: given twice");
        ok(recipe_parent_is_valid("seed") && recipe_parent_is_valid("a/b:c_d.e-f") &&
                   !recipe_parent_is_valid("sha256:") && !recipe_parent_is_valid("sha256:xyzxyzxyzxyz") &&
                   !recipe_parent_is_valid("") && !recipe_parent_is_valid(NULL) && !recipe_parent_is_valid("a b"),
           "template references");

        /* file, line and key in every message */
        bad("from = debian:bookworm\npacakges = bash\n", "template.conf:2: unknown key 'pacakges'");
        bad("from = debian:bookworm\njust words\n", "template.conf:2: expected 'KEY = VALUE'");
        bad("from = debian:bookworm\n= x\n", "template.conf:2: no key before '='");
        bad("from = debian:bookworm\nname = a\nname = b\n", "template.conf:3: name: given twice (first on line 2)");
        bad("from = debian:bookworm\ndescription =\n", "template.conf:2: description: has no value");
        bad("name = x\n", "template.conf: no 'from'");
        bad("from = Ubuntu\n", "template.conf:1: from: 'Ubuntu' is not supported: use debian:SUITE");
        bad("from = debian\n", "template.conf:1: from: say which Debian suite");
        bad("from = debian:Bookworm\n", "template.conf:1: from: 'Bookworm' is not a Debian suite name");
        bad("from = scratch\n", "template.conf:1: from: from = scratch needs build = SCRIPT");
        bad("from = scratch\nbuild = nope.sh\n", "template.conf:2: build: nope.sh: No such file or directory");
        bad("from = scratch\nbuild = not-executable.sh\n", "template.conf:2: build: not-executable.sh is not executable");
        bad("from = scratch\nbuild = /bin/true\n", "template.conf:2: build: the script '/bin/true' must be a path inside");
        bad("from = scratch\nbuild = ../x.sh\n", "template.conf:2: build: the script '../x.sh' must be a path inside");
        bad("from = debian:bookworm\nfile = a/../../motd /etc/motd\n", "file: the source 'a/../../motd' must be a path inside");
        bad("from = debian:bookworm\nbuild = make-tree.sh\n", "template.conf:2: build: only with from = scratch");
        bad("from = scratch\nbuild = make-tree.sh\npackages = bash\n",
            "template.conf:3: packages: only with from = debian:SUITE");
        bad("from = debian:bookworm\npackages = bash Bad_Name\n",
            "template.conf:2: packages: 'Bad_Name' is not a Debian package name");
        bad("from = debian:bookworm\npackages = a\n", "'a' is not a Debian package name");
        bad("from = debian:bookworm\npackages = bash=abc\n", "'bash=abc' is not a Debian package name");
        bad("from = debian:bookworm\nfile = motd\n", "template.conf:2: file: expected 'SRC DEST [MODE]'");
        bad("from = debian:bookworm\nfile = motd etc/motd\n", "file: the destination 'etc/motd' must be an absolute");
        bad("from = debian:bookworm\nfile = /etc/passwd /etc/passwd\n", "file: the source '/etc/passwd' must be a path inside");
        bad("from = debian:bookworm\nfile = missing /etc/x\n", "template.conf:2: file: missing: No such file");
        bad("from = debian:bookworm\nfile = motd /etc/motd 0999\n", "file: the mode '0999' is not an octal mode");
        bad("from = debian:bookworm\nfile = motd /etc/motd 0644 x\n", "file: expected 'SRC DEST [MODE]'");
        bad("from = debian:bookworm\nenv = NOVALUE\n", "template.conf:2: env: 'NOVALUE' is not NAME=VALUE");
        bad("from = debian:bookworm\nenv = 1X=y\n", "env: '1X=y' is not NAME=VALUE");
        bad("from = debian:bookworm\nuser = Bad User\n", "template.conf:2: user: 'Bad User' is not a user name");
        bad("from = debian:bookworm\nuser = user:Staff\n", "user: 'user:Staff' is not a user name or uid (optionally :GROUP)");
        bad("from = debian:bookworm\nuser = user:\n", "user: 'user:' is not a user name");
        {
                Recipe *g = good("user USER:GROUP", "from = debian:bookworm\nuser = user:1000\n");
                if (g)
                        ok(streq(g->user, "user:1000"), "user with a :GID is kept as written");
                recipe_free(g);
        }
        bad("from = debian:bookworm\nworkdir = home\n", "template.conf:2: workdir: 'home' is not an absolute path");
        bad("from = debian:bookworm\nvcpu = 0\n", "template.conf:2: vcpu: '0' is not a number from 1 to 64");
        bad("from = debian:bookworm\nmemory_mib = 12x\n", "memory_mib: '12x' is not a number from 64 to 65536");
        bad("from = debian:bookworm\ndisk_mib = -5\n", "disk_mib: '-5' is not a number");
        bad("from = debian:bookworm\nname = Seed\n", "template.conf:2: name: 'Seed' is not a valid template name");
        bad("from = debian:bookworm\nname = a//b\n", "name: 'a//b' is not a valid template name");

        {
                char line[RECIPE_LINE_MAX + 64];
                memset(line, 'x', sizeof line);
                memcpy(line, "from = debian:bookworm\nrun = ", 29);
                line[sizeof line - 2] = '\n';
                line[sizeof line - 1] = 0;
                bad(line, "template.conf:2: longer than 4096 bytes");
        }

        /* no directory, no template.conf */
        k = recipe_load("/nonexistent/recipe", &r, &err);
        ok(k == -ENOENT && err && strstr(err, "/nonexistent/recipe: No such file"), "a missing directory: %s", err);
        free(err);
        {
                _cleanup_free_ char *dir = NULL, *conf = NULL;
                if (asprintf(&dir, "%s/empty", base) < 0 || mkdir(dir, 0755) < 0)
                        return 1;
                k = recipe_load(dir, &r, &err);
                ok(k == -ENOENT && err && strstr(err, "empty/template.conf: No such file") &&
                           strstr(err, "a recipe is a directory with a template.conf"),
                   "a directory without template.conf: %s", err);
                free(err);
        }

        ok(recipe_name_is_valid("seed") && recipe_name_is_valid("team/python") && recipe_name_is_valid("a.b_c-d") &&
                   !recipe_name_is_valid("") && !recipe_name_is_valid("/a") && !recipe_name_is_valid("a/") &&
                   !recipe_name_is_valid("-a") && !recipe_name_is_valid("a:b"),
           "template names");

        {
                char cmd[64];
                snprintf(cmd, sizeof cmd, "rm -rf %s", base);
                (void) !system(cmd);
        }
        return done();
}
