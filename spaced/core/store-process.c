/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "core/store-sqlite.h"
#include "core/store.h"

/* The processes table: one row per guest pid of a sandbox (a reused pid replaces the older row). */

#define PROCESS_COLUMNS                                                                                        \
        "sandbox_id, pid, stream, session_id, argv, cwd, pty, state, exit_code, signal, timed_out, timeout,"  \
        " started_at, exited_at, last_event_id, log_path, user"

void process_record_done(ProcessRecord *r) {
        if (!r)
                return;
        free(r->session_id);
        free(r->argv);
        free(r->cwd);
        free(r->user);
        free(r->state);
        free(r->log_path);
        *r = (ProcessRecord) {};
}

int store_put_process(Store *s, const ProcessRecord *r) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int rc;

        rc = store_stmt(s, STORE_STMT_PUT_PROCESS,
                        "INSERT OR REPLACE INTO processes (" PROCESS_COLUMNS ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        &st);
        if (rc < 0)
                return rc;
        sqlite_bind_text(st, 1, r->sandbox_id);
        sqlite3_bind_int(st, 2, r->pid);
        sqlite3_bind_int64(st, 3, r->stream);
        sqlite_bind_text(st, 4, r->session_id);
        sqlite_bind_text(st, 5, r->argv ?: "[]");
        sqlite_bind_text(st, 6, r->cwd);
        sqlite3_bind_int(st, 7, r->pty);
        sqlite_bind_text(st, 8, r->state);
        if (r->exit_code >= 0)
                sqlite3_bind_int(st, 9, r->exit_code);
        else
                sqlite3_bind_null(st, 9);
        if (r->signal > 0)
                sqlite3_bind_int(st, 10, r->signal);
        else
                sqlite3_bind_null(st, 10);
        sqlite3_bind_int(st, 11, r->timed_out);
        sqlite3_bind_int64(st, 12, (sqlite3_int64) r->timeout);
        sqlite3_bind_int64(st, 13, r->started_at);
        if (r->exited_at > 0)
                sqlite3_bind_int64(st, 14, r->exited_at);
        else
                sqlite3_bind_null(st, 14);
        sqlite3_bind_int64(st, 15, (sqlite3_int64) r->last_event_id);
        sqlite_bind_text(st, 16, r->log_path);
        sqlite_bind_text(st, 17, r->user);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

/* Fills r from a row; 0, or -EBADMSG for a row we cannot use. */
static int row_to_record(sqlite3_stmt *st, ProcessRecord *r) {
        const char *id = (const char *) sqlite3_column_text(st, 0);

        *r = (ProcessRecord) {};
        if (!id || strlen(id) != SANDBOX_ID_LEN || sqlite3_column_int(st, 1) <= 0 || !sqlite3_column_text(st, 7))
                return -EBADMSG;
        memcpy(r->sandbox_id, id, SANDBOX_ID_LEN + 1);
        r->pid = sqlite3_column_int(st, 1);
        r->stream = (uint32_t) sqlite3_column_int64(st, 2);
        r->session_id = sqlite_column_strdup(st, 3);
        r->argv = sqlite_column_strdup(st, 4);
        r->cwd = sqlite_column_strdup(st, 5);
        r->pty = sqlite3_column_int(st, 6) != 0;
        r->state = sqlite_column_strdup(st, 7);
        r->exit_code = sqlite3_column_type(st, 8) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 8);
        r->signal = sqlite3_column_type(st, 9) == SQLITE_NULL ? 0 : sqlite3_column_int(st, 9);
        r->timed_out = sqlite3_column_int(st, 10) != 0;
        r->timeout = (uint64_t) sqlite3_column_int64(st, 11);
        r->started_at = sqlite3_column_int64(st, 12);
        r->exited_at = sqlite3_column_type(st, 13) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 13);
        r->last_event_id = (uint64_t) sqlite3_column_int64(st, 14);
        r->log_path = sqlite_column_strdup(st, 15);
        r->user = sqlite_column_strdup(st, 16);
        if (!r->state || !r->argv) {
                process_record_done(r);
                return -ENOMEM;
        }
        return 0;
}

static int get_one(Store *s, const char *sql, const char *sandbox_id, const char *text, int num,
                   ProcessRecord *ret) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite_bind_text(st, 1, sandbox_id);
        if (text)
                sqlite_bind_text(st, 2, text);
        else
                sqlite3_bind_int(st, 2, num);
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return sqlite_to_errno(rc);
        return row_to_record(st, ret) < 0 ? -ENOENT : 0;
}

int store_get_process(Store *s, const char *sandbox_id, int pid, ProcessRecord *ret) {
        return get_one(s, "SELECT " PROCESS_COLUMNS " FROM processes WHERE sandbox_id = ? AND pid = ?", sandbox_id,
                       NULL, pid, ret);
}

int store_get_session(Store *s, const char *sandbox_id, const char *session_id, ProcessRecord *ret) {
        return get_one(s, "SELECT " PROCESS_COLUMNS " FROM processes WHERE sandbox_id = ? AND session_id = ?",
                       sandbox_id, session_id, 0, ret);
}

int store_load_processes(Store *s, const char *sandbox_id, const char *state_filter, ProcessRecord **ret,
                         size_t *ret_n) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        ProcessRecord *list = NULL;
        size_t n = 0;
        int rc;

        rc = sqlite3_prepare_v2(store_db(s),
                                state_filter ? "SELECT " PROCESS_COLUMNS " FROM processes WHERE sandbox_id = ?"
                                               " AND state = ? ORDER BY started_at, rowid"
                                             : "SELECT " PROCESS_COLUMNS " FROM processes WHERE sandbox_id = ?"
                                               " ORDER BY started_at, rowid",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite_bind_text(st, 1, sandbox_id);
        if (state_filter)
                sqlite_bind_text(st, 2, state_filter);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                ProcessRecord *l = realloc(list, (n + 1) * sizeof *l);

                if (!l)
                        goto nomem;
                list = l;
                if (row_to_record(st, &list[n]) < 0)
                        continue;
                n++;
        }
        if (rc != SQLITE_DONE) {
                for (size_t i = 0; i < n; i++)
                        process_record_done(&list[i]);
                free(list);
                return sqlite_to_errno(rc);
        }
        *ret = list;
        *ret_n = n;
        return 0;
nomem:
        for (size_t i = 0; i < n; i++)
                process_record_done(&list[i]);
        free(list);
        return -ENOMEM;
}

int store_prune_processes(Store *s, const char *sandbox_id, unsigned keep, char ***ret_log_paths) {
        _cleanup_reset_ sqlite3_stmt *sel = NULL, *del = NULL;
        _cleanup_free_ int *pids = NULL;
        char **paths = NULL;
        size_t n = 0;
        int rc;

        rc = store_stmt(s, STORE_STMT_PRUNE_SELECT,
                        "SELECT pid, log_path FROM processes WHERE sandbox_id = ?1 AND state IN ('exited','lost')"
                        " ORDER BY exited_at DESC, rowid DESC LIMIT -1 OFFSET ?2",
                        &sel);
        if (rc >= 0)
                rc = store_stmt(s, STORE_STMT_PRUNE_DELETE, "DELETE FROM processes WHERE sandbox_id = ? AND pid = ?", &del);
        if (rc < 0)
                return rc;
        sqlite_bind_text(sel, 1, sandbox_id);
        sqlite3_bind_int(sel, 2, (int) keep);
        /* collect first, delete after: no deleting under a running SELECT */
        while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
                const char *lp = (const char *) sqlite3_column_text(sel, 1);
                char **l = realloc(paths, (n + 2) * sizeof *l);
                int *pl = realloc(pids, (n + 1) * sizeof *pl);

                if (l)
                        paths = l;
                if (pl)
                        pids = pl;
                if (!l || !pl)
                        break;
                pids[n] = sqlite3_column_int(sel, 0);
                paths[n] = strdup(lp ?: "");
                if (!paths[n])
                        break;
                paths[++n] = NULL;
        }
        sqlite3_reset(sel);
        for (size_t i = 0; i < n; i++) {
                sqlite3_reset(del);
                sqlite_bind_text(del, 1, sandbox_id);
                sqlite3_bind_int(del, 2, pids[i]);
                (void) sqlite3_step(del);
        }
        *ret_log_paths = paths;
        return 0;
}
