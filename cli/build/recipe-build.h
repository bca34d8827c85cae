/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Builds a recipe (lib/recipe.h) into a root filesystem tarball, for `spacectl template build`. */

#include <stdbool.h>

#include "recipe.h"

typedef struct BuildOptions {
        bool quiet;     /* nothing on stderr but errors */
        bool verbose;   /* the build tools' own output on stderr even when it is no terminal */
        /* from = TEMPLATE: writes the parent's tree as a tar to path (the daemon's export of it), or prints why
         * not and returns < 0 */
        int (*fetch_parent)(const char *path, void *userdata);
        void *fetch_userdata;
} BuildOptions;

typedef struct BuildResult {
        char *workdir;  /* a fresh directory holding the tarball; remove with build_result_done() */
        char *tarball;  /* WORKDIR/rootfs.tar */
        double seconds;
} BuildResult;

/* The tools' output goes to stderr on a terminal (unless quiet) or with verbose, else to a log that is shown
 * (its errors, or its tail) only when the build fails. Prints what went wrong and returns < 0 on failure;
 * -EINTR after SIGINT, SIGTERM or SIGHUP (cli_signals_install() must have run). */
int recipe_build(const Recipe *r, const BuildOptions *o, BuildResult *ret);
void build_result_done(BuildResult *b);

/* SOURCE_DATE_EPOCH when it is set, else a fixed default: every timestamp in the tree is clamped to it, so the
 * same recipe and the same packages give the same tree, hence the same digest. */
unsigned long long build_epoch(void);
