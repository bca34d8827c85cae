/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the files of the store that speak SQLite share (store.c, store-process.c, schema.c); nothing outside
 * core/ includes this. */

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static inline void sqlite_finalizep(sqlite3_stmt **st) {
        if (*st)
                sqlite3_finalize(*st);
}
#define _cleanup_finalize_ _cleanup_(sqlite_finalizep)

/* NULL binds SQL NULL. */
static inline int sqlite_bind_text(sqlite3_stmt *st, int i, const char *v) {
        return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
}

/* A copy of a text column, NULL for SQL NULL (or out of memory). */
static inline char *sqlite_column_strdup(sqlite3_stmt *st, int i) {
        const unsigned char *t = sqlite3_column_text(st, i);
        return t ? strdup((const char *) t) : NULL;
}

/* The statements every exec or create runs, prepared once for the store's life: parsing was most of their
 * cost (perf: a sixth of the daemon's CPU per exec). */
typedef enum StoreStmt {
        STORE_STMT_PUT_SANDBOX,
        STORE_STMT_PUT_PROCESS,
        STORE_STMT_PRUNE_SELECT,
        STORE_STMT_PRUNE_DELETE,
        _STORE_STMT_MAX,
} StoreStmt;

typedef struct Store Store;

/* The kept statement `which` (prepared from sql the first time), reset and with no bindings. The store owns
 * it: release it with _cleanup_reset_, never finalize it. */
int store_stmt(Store *s, StoreStmt which, const char *sql, sqlite3_stmt **ret);

static inline void sqlite_resetp(sqlite3_stmt **st) {
        if (*st)
                sqlite3_reset(*st);
}
#define _cleanup_reset_ _cleanup_(sqlite_resetp)

/* 0 for OK, DONE and ROW; -errno for the rest (store.c). */
int sqlite_to_errno(int rc);
