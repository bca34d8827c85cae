/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

/*
 * Libraries that only a few verbs use are dlopen()ed when first needed, so that every other spacectl call
 * (exec, ls, --help: agents run them thousands of times) does not map, relocate and initialise them and
 * what they pull in. Each has a typed table (dl-archive.h, dl-readline.h): one pointer per symbol, declared
 * with typeof() of the library's own prototype so the compiler still checks every call.
 */

typedef struct DlSymbol {
        const char *name;
        size_t offset;          /* of the pointer in the table */
} DlSymbol;

/* Declares the table's member for symbol s: a pointer to the function (or to the variable). */
#define DL_FIELD(s) typeof(s) *s;
/* A DlSymbol for member s of table type T. */
#define DL_SYMBOL(T, s) { #s, offsetof(T, s) },

/* dlopen()s soname and fills table from syms, all or nothing: 0, or -ENOPKG after printing that the verb
 * needs package (what: what for, or NULL) and why the load failed. The library stays loaded; *state
 * remembers success and failure alike. */
int dl_open_table(int *state, const char *soname, const char *package, const char *what, const DlSymbol *syms,
                  size_t n_syms, void *table);
