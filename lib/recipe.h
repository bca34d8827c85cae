/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Template recipes (space-template(5)): a directory whose template.conf says what to build (from, packages,
 * build, file, run) and the defaults sandboxes get (description, env, user, workdir, entrypoint, start,
 * ready, vcpu, memory_mib, disk_mib). This only reads and checks a recipe; cli/build/recipe-build.c builds it.
 *
 * Errors come back as text for the caller to print, "PATH:LINE: KEY: what is wrong", so that a user can go
 * straight to the line; library code never prints. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum RecipeFrom {
        RECIPE_FROM_DEBIAN,     /* from = debian:SUITE, built with mmdebstrap */
        RECIPE_FROM_SCRATCH,    /* from = scratch, the tree made by the build script */
        RECIPE_FROM_TEMPLATE,   /* from = NAME[:TAG] or sha256:<hex>, a template of the daemon's: its tree and
                                 * defaults, with the recipe's packages, files and run steps on top */
} RecipeFrom;

typedef struct RecipeFile {
        char *src;              /* absolute path on the host */
        char *dest;             /* absolute path in the tree */
        mode_t mode;            /* MODE, else the source's permission bits */
} RecipeFile;

typedef struct Recipe {
        char *dir;              /* the recipe directory, absolute */
        char *conf;             /* its template.conf, as the caller named it (for messages) */

        char *name;             /* name = NAME, default: the directory's name */
        RecipeFrom from;
        char *suite;            /* from = debian:SUITE */
        char *parent;           /* from = TEMPLATE, as written */
        char *build;            /* build = SCRIPT, absolute; from = scratch only */
        char **packages;        /* packages = ... (all lines, split); not with from = scratch */
        RecipeFile *files;
        size_t n_files;
        char **run;             /* run = COMMAND, in order */

        char *description;
        char **env;             /* "K=V" */
        char *user;
        char *workdir;
        char **entrypoint;      /* entrypoint = WORD..., split on blanks */
        char *start;            /* start = SHELL-LINE: the service the agent keeps running */
        char *ready;            /* ready = SHELL-LINE: exits 0 once the service is ready for the base snapshot */
        uint64_t vcpu, memory_mib, disk_mib; /* 0: not set */
} Recipe;

/* The longest template.conf line (longer lines are an error). */
#define RECIPE_LINE_MAX 4096U

/* Reads DIR/template.conf and checks every key, the build script and the files' sources. On a bad recipe
 * returns -EINVAL with *ret_error set (malloc'd); other -errno (ENOENT: no such directory or template.conf)
 * come with a message too. */
int recipe_load(const char *dir, Recipe **ret, char **ret_error);
Recipe *recipe_free(Recipe *r);
static inline void recipe_freep(Recipe **r) {
        if (*r)
                recipe_free(*r);
}
#define _cleanup_recipe_ __attribute__((cleanup(recipe_freep)))

/* NAME of NAME:TAG: lower-case letters, digits, '.', '_', '-', components joined by '/'; at most 128 bytes. */
bool recipe_name_is_valid(const char *name);
/* A template reference as from = takes it: NAME[:TAG] (TAG: Docker's rule) or sha256:<12 to 64 hex digits>. */
bool recipe_parent_is_valid(const char *ref);
/* A Debian package: NAME[:ARCH][=VERSION], with Debian's rules for each part. */
bool recipe_package_is_valid(const char *p);
