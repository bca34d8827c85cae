/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cli.h"
#include "client/dl-util.h"

int dl_open_table(int *state, const char *soname, const char *package, const char *what, const DlSymbol *syms,
                  size_t n_syms, void *table) {
        const char *verb = cli_verb ? cli_verb->name : "spacectl";
        void *dl;

        if (*state != 0)
                return *state > 0 ? 0 : *state;

        /* RTLD_LAZY: the library's own calls into its dependencies are bound when made, not all up front.
         * Never closed: the process is short-lived. */
        dl = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
        if (!dl) {
                log_error("%s needs %s%s: install it (%s)", verb, package, what ?: "", dlerror());
                return (*state = -ENOPKG);
        }
        for (size_t i = 0; i < n_syms; i++) {
                void *p;

                (void) dlerror();
                p = dlsym(dl, syms[i].name);
                if (!p) {
                        /* an older or odd build: refuse it whole rather than crash on a NULL later */
                        log_error("%s needs %s%s: %s has no %s; install the right version", verb, package,
                                  what ?: "", soname, syms[i].name);
                        (void) dlclose(dl);
                        return (*state = -ENOPKG);
                }
                memcpy((uint8_t *) table + syms[i].offset, &p, sizeof p);
        }
        return (*state = 1);
}
