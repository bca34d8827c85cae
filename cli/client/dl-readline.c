/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "client/dl-readline.h"
#include "macro.h"

DlReadline libreadline;

#define DL_READLINE_SYMBOL(s) DL_SYMBOL(DlReadline, s)
static const DlSymbol readline_symbols[] = { DL_READLINE_FOREACH(DL_READLINE_SYMBOL) };

int dl_readline_open(void) {
        static int state = 0;

        return dl_open_table(&state, DL_READLINE_SONAME, DL_READLINE_PACKAGE, " for line editing", readline_symbols,
                             ELEMENTSOF(readline_symbols), &libreadline);
}
