/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "copy/dl-archive.h"
#include "macro.h"

DlArchive libarchive;

#define DL_ARCHIVE_SYMBOL(s) DL_SYMBOL(DlArchive, s)
static const DlSymbol archive_symbols[] = { DL_ARCHIVE_FOREACH(DL_ARCHIVE_SYMBOL) };

int dl_archive_open(void) {
        static int state = 0;

        return dl_open_table(&state, DL_ARCHIVE_SONAME, DL_ARCHIVE_PACKAGE, NULL, archive_symbols,
                             ELEMENTSOF(archive_symbols), &libarchive);
}
