/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "core/store-sqlite.h"
#include "core/store.h"

/* The forwards table (schema.c, migration 6): one row per background port forward. */

int store_put_forward(Store *s, const ForwardRecord *r) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(store_db(s),
                                "INSERT INTO forwards (id, sandbox_id, guest_port, host_port, created_at, any_user)"
                                " VALUES (?,?,?,?,?,?)",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite_bind_text(st, 1, r->id);
        sqlite_bind_text(st, 2, r->sandbox_id);
        sqlite3_bind_int(st, 3, r->guest_port);
        sqlite3_bind_int(st, 4, r->host_port);
        sqlite3_bind_int64(st, 5, r->created_at);
        sqlite3_bind_int(st, 6, r->any_user);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

int store_delete_forward(Store *s, const char *id) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(store_db(s), "DELETE FROM forwards WHERE id = ?", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite_bind_text(st, 1, id);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

/* Fills r from a row; 0, or -EBADMSG for a row we cannot use. */
static int row_to_record(sqlite3_stmt *st, ForwardRecord *r) {
        const char *id = (const char *) sqlite3_column_text(st, 0);
        const char *sid = (const char *) sqlite3_column_text(st, 1);
        sqlite3_int64 guest = sqlite3_column_int64(st, 2), host = sqlite3_column_int64(st, 3);

        if (!id || strlen(id) != FORWARD_ID_LEN || !sid || strlen(sid) != SANDBOX_ID_LEN || guest < 1 ||
            guest > 65535 || host < 1 || host > 65535)
                return -EBADMSG;
        *r = (ForwardRecord) { .guest_port = (uint16_t) guest, .host_port = (uint16_t) host,
                               .created_at = sqlite3_column_int64(st, 4),
                               .any_user = sqlite3_column_int(st, 5) != 0 };
        memcpy(r->id, id, FORWARD_ID_LEN + 1);
        memcpy(r->sandbox_id, sid, SANDBOX_ID_LEN + 1);
        return 0;
}

int store_load_forwards(Store *s, ForwardRecord **ret, size_t *ret_n) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        _cleanup_free_ ForwardRecord *list = NULL;
        size_t n = 0, allocated = 0;
        int rc;

        rc = sqlite3_prepare_v2(store_db(s),
                                "SELECT id, sandbox_id, guest_port, host_port, created_at, any_user FROM forwards"
                                " ORDER BY created_at, rowid",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                ForwardRecord r;

                if (row_to_record(st, &r) < 0)
                        continue; /* a row we cannot make sense of; leave it for a human */
                if (n == allocated) {
                        size_t k = allocated ? allocated * 2 : 8;
                        ForwardRecord *bigger = reallocarray(list, k, sizeof *list);

                        if (!bigger)
                                return -ENOMEM;
                        list = bigger;
                        allocated = k;
                }
                list[n++] = r;
        }
        if (rc != SQLITE_DONE)
                return sqlite_to_errno(rc);
        *ret = TAKE_PTR(list);
        *ret_n = n;
        return 0;
}
