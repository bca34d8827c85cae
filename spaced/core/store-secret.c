/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "core/store-sqlite.h"
#include "core/store.h"

/* The secrets table (schema.c, migration 12): what is known of each secret. Its value is never here
 * (secret/secret.c keeps it in a file of its own). */

void secret_record_done(SecretRecord *r) {
        free(r->id);
        free(r->name);
        free(r->metadata);
        *r = (SecretRecord) {};
}

int store_put_secret(Store *s, const SecretRecord *r) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(store_db(s),
                                "INSERT OR REPLACE INTO secrets (id, name, version, metadata, created_at, updated_at,"
                                " last_used_at) VALUES (?,?,?,?,?,?,?)",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite_bind_text(st, 1, r->id);
        sqlite_bind_text(st, 2, r->name);
        sqlite3_bind_int64(st, 3, r->version);
        sqlite_bind_text(st, 4, r->metadata ?: "{}");
        sqlite3_bind_int64(st, 5, r->created_at);
        sqlite3_bind_int64(st, 6, r->updated_at);
        sqlite3_bind_int64(st, 7, r->last_used_at);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

int store_delete_secret(Store *s, const char *id) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(store_db(s), "DELETE FROM secrets WHERE id = ?", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite_bind_text(st, 1, id);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

int store_touch_secret(Store *s, const char *id, int64_t last_used_at) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(store_db(s), "UPDATE secrets SET last_used_at = ? WHERE id = ?", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite3_bind_int64(st, 1, last_used_at);
        sqlite_bind_text(st, 2, id);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

static int row_to_record(sqlite3_stmt *st, SecretRecord *r) {
        const char *id = (const char *) sqlite3_column_text(st, 0), *name = (const char *) sqlite3_column_text(st, 1);

        if (!id || strlen(id) != SECRET_ID_LEN || !name || !*name || sqlite3_column_int64(st, 2) < 1)
                return -EBADMSG;
        *r = (SecretRecord) {
                .id = strdup(id),
                .name = strdup(name),
                .version = sqlite3_column_int64(st, 2),
                .metadata = sqlite_column_strdup(st, 3),
                .created_at = sqlite3_column_int64(st, 4),
                .updated_at = sqlite3_column_int64(st, 5),
                .last_used_at = sqlite3_column_int64(st, 6),
        };
        if (!r->id || !r->name || !r->metadata) {
                secret_record_done(r);
                return -ENOMEM;
        }
        return 0;
}

int store_load_secrets(Store *s, SecretRecord **ret, size_t *ret_n) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        SecretRecord *list = NULL;
        size_t n = 0, allocated = 0;
        int rc, r = 0;

        rc = sqlite3_prepare_v2(store_db(s),
                                "SELECT id, name, version, metadata, created_at, updated_at, last_used_at FROM secrets"
                                " ORDER BY created_at, rowid",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                SecretRecord rec;

                r = row_to_record(st, &rec);
                if (r == -EBADMSG) {
                        r = 0;
                        continue;
                }
                if (r < 0)
                        break;
                if (n == allocated) {
                        size_t k = allocated ? allocated * 2 : 8;
                        SecretRecord *bigger = reallocarray(list, k, sizeof *list);

                        if (!bigger) {
                                secret_record_done(&rec);
                                r = -ENOMEM;
                                break;
                        }
                        list = bigger;
                        allocated = k;
                }
                list[n++] = rec;
        }
        if (r == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
                r = sqlite_to_errno(rc);
        if (r < 0) {
                for (size_t i = 0; i < n; i++)
                        secret_record_done(&list[i]);
                free(list);
                return r;
        }
        *ret = list;
        *ret_n = n;
        return 0;
}
