/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: template recipes (lib/recipe.c, space-template(5)). The input is written as template.conf
 * in a scratch recipe directory that also holds an executable build.sh and regular files files/motd and hosts, so that
 * build and file lines can name something real. Invariants: a refused recipe says why in a message that
 * starts with the file's name; an accepted one has a valid name, a from, paths inside the recipe directory,
 * and values within the documented limits. */

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz-util.h"
#include "macro.h"
#include "recipe.h"

static char dir[300], conf[330];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        char p[400];

        snprintf(dir, sizeof dir, "%s/recipe", fuzz_dir());
        snprintf(conf, sizeof conf, "%s/template.conf", dir);
        if (mkdir(dir, 0700) < 0)
                abort();
        snprintf(p, sizeof p, "%s/build.sh", dir);
        fuzz_write_file(p, "#!/bin/sh\n", 10);
        chmod(p, 0700);
        snprintf(p, sizeof p, "%s/files", dir);
        mkdir(p, 0700);
        snprintf(p, sizeof p, "%s/files/motd", dir);
        fuzz_write_file(p, "hello\n", 6);
        snprintf(p, sizeof p, "%s/hosts", dir); /* templates/seed names it */
        fuzz_write_file(p, "127.0.0.1 localhost\n", 20);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *error = NULL;
        Recipe *r = NULL;
        int q;

        fuzz_write_file(conf, data, size);
        q = recipe_load(dir, &r, &error);
        if (getenv("FUZZ_VERBOSE"))
                fprintf(stderr, "recipe: %d %s\n", q, error ?: "");
        if (q < 0) {
                if (r)
                        abort();
                if (q == -EINVAL && (!error || strncmp(error, dir, strlen(dir)) != 0))
                        abort();
                return 0;
        }
        if (!r || error || !recipe_name_is_valid(r->name))
                abort();
        if ((r->from == RECIPE_FROM_DEBIAN) != (r->suite != NULL))
                abort();
        if (r->from == RECIPE_FROM_SCRATCH && (!r->build || r->packages))
                abort();
        if (r->build && strncmp(r->build, r->dir, strlen(r->dir)) != 0)
                abort();
        for (size_t i = 0; i < r->n_files; i++)
                if (strncmp(r->files[i].src, r->dir, strlen(r->dir)) != 0 || r->files[i].dest[0] != '/' ||
                    r->files[i].mode > 07777)
                        abort();
        for (char **p = r->packages; p && *p; p++)
                if (!recipe_package_is_valid(*p))
                        abort();
        for (char **e = r->env; e && *e; e++)
                if (!strchr(*e, '=') || (*e)[0] == '=')
                        abort();
        if (r->workdir && r->workdir[0] != '/')
                abort();
        if (r->vcpu > 64 || (r->memory_mib && (r->memory_mib < 64 || r->memory_mib > 65536)) ||
            (r->disk_mib && (r->disk_mib < 64 || r->disk_mib > 1048576)))
                abort();
        recipe_free(r);
        return 0;
}
