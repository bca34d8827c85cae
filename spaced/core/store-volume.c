/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "core/store-sqlite.h"
#include "core/store.h"

/* The volumes table (schema.c, migration 14): what is known of each volume. Its files are under
 * $state/volume-data/<id> (volume/volume.c). */

void volume_record_done(VolumeRecord *r) {
        free(r->id);
        free(r->name);
        free(r->token);
        *r = (VolumeRecord) {};
}

int store_put_volume(Store *s, const VolumeRecord *r) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(store_db(s),
                                "INSERT OR REPLACE INTO volumes (id, name, quota, token, created_at)"
                                " VALUES (?,?,?,?,?)",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite_bind_text(st, 1, r->id);
        sqlite_bind_text(st, 2, r->name);
        sqlite3_bind_int64(st, 3, (sqlite3_int64) r->quota);
        sqlite_bind_text(st, 4, r->token);
        sqlite3_bind_int64(st, 5, r->created_at);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

int store_delete_volume(Store *s, const char *id) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(store_db(s), "DELETE FROM volumes WHERE id = ?", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite_bind_text(st, 1, id);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

static int row_to_record(sqlite3_stmt *st, VolumeRecord *r) {
        const char *id = (const char *) sqlite3_column_text(st, 0), *name = (const char *) sqlite3_column_text(st, 1),
                   *token = (const char *) sqlite3_column_text(st, 3);

        if (!id || strlen(id) != VOLUME_ID_LEN || strncmp(id, "vol-", 4) != 0 || strchr(id, '/') || !name || !*name ||
            sqlite3_column_int64(st, 2) < 1 || !token || strlen(token) < 32)
                return -EBADMSG;
        *r = (VolumeRecord) {
                .id = strdup(id),
                .name = strdup(name),
                .quota = (uint64_t) sqlite3_column_int64(st, 2),
                .token = strdup(token),
                .created_at = sqlite3_column_int64(st, 4),
        };
        if (!r->id || !r->name || !r->token) {
                volume_record_done(r);
                return -ENOMEM;
        }
        return 0;
}

int store_load_volumes(Store *s, VolumeRecord **ret, size_t *ret_n) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        VolumeRecord *list = NULL;
        size_t n = 0, allocated = 0;
        int rc, r = 0;

        rc = sqlite3_prepare_v2(store_db(s),
                                "SELECT id, name, quota, token, created_at FROM volumes ORDER BY created_at, rowid", -1,
                                &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                VolumeRecord rec;

                r = row_to_record(st, &rec);
                if (r == -EBADMSG) {
                        r = 0;
                        continue;
                }
                if (r < 0)
                        break;
                if (n == allocated) {
                        size_t k = allocated ? allocated * 2 : 8;
                        VolumeRecord *bigger = reallocarray(list, k, sizeof *list);

                        if (!bigger) {
                                volume_record_done(&rec);
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
                        volume_record_done(&list[i]);
                free(list);
                return r;
        }
        *ret = list;
        *ret_n = n;
        return 0;
}
