/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "core/schema.h"
#include "core/store-sqlite.h"
#include "core/operation.h"
#include "core/store.h"

struct Store {
        sqlite3 *db;
        sqlite3_stmt *stmts[_STORE_STMT_MAX];
};

int store_stmt(Store *s, StoreStmt which, const char *sql, sqlite3_stmt **ret) {
        int rc;

        if (!s->stmts[which]) {
                rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->stmts[which], NULL);
                if (rc != SQLITE_OK)
                        return sqlite_to_errno(rc);
        }
        sqlite3_reset(s->stmts[which]);
        sqlite3_clear_bindings(s->stmts[which]);
        *ret = s->stmts[which];
        return 0;
}

int sqlite_to_errno(int rc) {
        switch (rc) {
        case SQLITE_OK:
        case SQLITE_DONE:
        case SQLITE_ROW:
                return 0;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_CONSTRAINT:
                return -EEXIST;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_READONLY:
        case SQLITE_PERM:
        case SQLITE_AUTH:
                return -EACCES;
        default:
                return -EIO;
        }
}

/* chmod 0600 of the database and of its WAL files (SQLite gives those the database's mode, but they may be
 * older than this check), whichever exist. */
static int store_make_private(const char *path) {
        static const char *const suffixes[] = { "", "-wal", "-shm" };

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                _cleanup_free_ char *p = NULL;
                _cleanup_close_ int fd = -EBADF;
                struct stat st;

                if (asprintf(&p, "%s%s", path, suffixes[i]) < 0)
                        return -ENOMEM;
                fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
                if (fd < 0) {
                        if (errno == ENOENT)
                                continue;
                        return -errno;
                }
                if (fstat(fd, &st) < 0)
                        return -errno;
                if ((st.st_mode & 0077) && fchmod(fd, st.st_mode & 0700) < 0)
                        return -errno;
        }
        return 0;
}

int store_open(const char *path, Store **ret, Error *reterr) {
        _cleanup_free_ Store *s = calloc(1, sizeof *s);
        _cleanup_(error_done) Error msg = {};
        char *err = NULL;
        int rc, r;

        if (!s)
                return -ENOMEM;
        /* a database an older daemon made under a looser umask: it holds tokens in clear */
        r = store_make_private(path);
        if (r < 0)
                return error_set(reterr, ERROR_INTERNAL, "%s: cannot make it private to its user (chmod 0600): %s",
                                 path, strerror(-r)) ?: r;
        rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             NULL);
        if (rc != SQLITE_OK)
                goto fail;
        sqlite3_busy_timeout(s->db, 5000);
        rc = sqlite3_exec(s->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
                          NULL, NULL, &err);
        if (rc != SQLITE_OK)
                goto fail;
        r = schema_migrate(s->db, &msg);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "%s: %s", path, msg.message ?: strerror(-r));
                sqlite3_close(s->db);
                return r;
        }
        *ret = TAKE_PTR(s);
        return 0;
fail:
        (void) error_set(reterr, ERROR_INTERNAL, "%s: %s", path, err ? err : sqlite3_errmsg(s->db));
        sqlite3_free(err);
        sqlite3_close(s->db);
        return sqlite_to_errno(rc) ?: -EIO;
}

sqlite3 *store_db(Store *s) {
        return s->db;
}

Store *store_close(Store *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < _STORE_STMT_MAX; i++)
                sqlite3_finalize(s->stmts[i]);
        sqlite3_close(s->db);
        free(s);
        return NULL;
}

int store_put_sandbox_record(Store *s, const SandboxRecord *sb) {
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int rc;

        rc = store_stmt(s, STORE_STMT_PUT_SANDBOX,
                       /* an upsert on id only: REPLACE would also evict a row holding the same name */
                       "INSERT INTO sandboxes (id, name, template, template_digest, state, vcpu,"
                       " memory_mib, disk_mib, env, created_at, qemu_pid, run_dir, data_dir, error,"
                       " idle_timeout, expires_at, on_expiry, last_active, metadata, access_token, auto_resume, ttl,"
                       " egress_profiles, egress_allow, egress_deny, traffic_token, confined, unconfined_reason, host,"
                       " egress_bindings, mounts)"
                       " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
                       " ON CONFLICT(id) DO UPDATE SET name=excluded.name, template=excluded.template,"
                       " template_digest=excluded.template_digest, state=excluded.state, vcpu=excluded.vcpu,"
                       " memory_mib=excluded.memory_mib, disk_mib=excluded.disk_mib, env=excluded.env,"
                       " created_at=excluded.created_at, qemu_pid=excluded.qemu_pid, run_dir=excluded.run_dir,"
                       " data_dir=excluded.data_dir, error=excluded.error,"
                       " idle_timeout=excluded.idle_timeout, expires_at=excluded.expires_at,"
                       " on_expiry=excluded.on_expiry, last_active=excluded.last_active,"
                       " metadata=excluded.metadata, access_token=excluded.access_token,"
                       " auto_resume=excluded.auto_resume, ttl=excluded.ttl,"
                       " egress_profiles=excluded.egress_profiles, egress_allow=excluded.egress_allow,"
                       " egress_deny=excluded.egress_deny, traffic_token=excluded.traffic_token,"
                       " confined=excluded.confined, unconfined_reason=excluded.unconfined_reason,"
                       " host=excluded.host, egress_bindings=excluded.egress_bindings, mounts=excluded.mounts",
                       &st);
        if (rc < 0)
                return rc;
        sqlite_bind_text(st, 1, sb->id);
        sqlite_bind_text(st, 2, sb->name);
        sqlite_bind_text(st, 3, sb->template_name);
        sqlite_bind_text(st, 4, sb->template_digest);
        sqlite_bind_text(st, 5, sb->state);
        sqlite3_bind_int(st, 6, (int) sb->vcpu);
        sqlite3_bind_int64(st, 7, (sqlite3_int64) sb->memory_mib);
        sqlite3_bind_int64(st, 8, (sqlite3_int64) sb->disk_mib);
        sqlite_bind_text(st, 9, sb->env);
        sqlite3_bind_int64(st, 10, sb->created_at);
        sqlite3_bind_int64(st, 11, sb->qemu_pid);
        sqlite_bind_text(st, 12, sb->run_dir);
        sqlite_bind_text(st, 13, sb->data_dir);
        sqlite_bind_text(st, 14, sb->error);
        sqlite3_bind_int64(st, 15, sb->idle_timeout);
        sqlite3_bind_int64(st, 16, sb->expires_at);
        sqlite_bind_text(st, 17, sb->on_expiry);
        sqlite3_bind_int64(st, 18, sb->last_active);
        sqlite_bind_text(st, 19, sb->metadata ?: "{}");
        sqlite_bind_text(st, 20, sb->access_token);
        sqlite3_bind_int(st, 21, sb->auto_resume);
        sqlite3_bind_int64(st, 22, sb->ttl);
        sqlite_bind_text(st, 23, sb->egress_profiles);
        sqlite_bind_text(st, 24, sb->egress_allow);
        sqlite_bind_text(st, 25, sb->egress_deny);
        sqlite_bind_text(st, 26, sb->traffic_token);
        if (sb->confined < 0)
                sqlite3_bind_null(st, 27);
        else
                sqlite3_bind_int(st, 27, sb->confined > 0);
        sqlite_bind_text(st, 28, sb->unconfined_reason);
        sqlite_bind_text(st, 29, sb->host);
        sqlite_bind_text(st, 30, sb->egress_bindings ?: "[]");
        sqlite_bind_text(st, 31, sb->mounts ?: "[]");
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

int store_delete_sandbox(Store *s, const char *id) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(s->db, "DELETE FROM sandboxes WHERE id = ?", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite_bind_text(st, 1, id);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

int store_load_sandbox_records(Store *s, store_sandbox_fn fn, void *userdata) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(s->db,
                                "SELECT id, name, template, template_digest, state, vcpu, memory_mib, disk_mib, env,"
                                " created_at, qemu_pid, run_dir, data_dir, error, idle_timeout, expires_at, on_expiry,"
                                " last_active, metadata, access_token, auto_resume, ttl, egress_profiles, egress_allow,"
                                " egress_deny, traffic_token, confined, unconfined_reason, host, egress_bindings, mounts FROM sandboxes"
                                " ORDER BY created_at",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
#define TEXT(i) ((const char *) sqlite3_column_text(st, (i)))
                SandboxRecord r = {
                        .id = TEXT(0),
                        .name = TEXT(1),
                        .template_name = TEXT(2),
                        .template_digest = TEXT(3),
                        .state = TEXT(4),
                        .vcpu = (unsigned) sqlite3_column_int(st, 5),
                        .memory_mib = (uint64_t) sqlite3_column_int64(st, 6),
                        .disk_mib = (uint64_t) sqlite3_column_int64(st, 7),
                        .env = TEXT(8),
                        .created_at = sqlite3_column_int64(st, 9),
                        .qemu_pid = sqlite3_column_int64(st, 10),
                        .run_dir = TEXT(11),
                        .data_dir = TEXT(12),
                        .error = TEXT(13),
                        .idle_timeout = sqlite3_column_int64(st, 14),
                        .expires_at = sqlite3_column_int64(st, 15),
                        .on_expiry = TEXT(16),
                        .last_active = sqlite3_column_int64(st, 17),
                        .metadata = TEXT(18),
                        .access_token = TEXT(19),
                        .auto_resume = sqlite3_column_int(st, 20) != 0,
                        .ttl = sqlite3_column_int64(st, 21),
                        .egress_profiles = TEXT(22),
                        .egress_allow = TEXT(23),
                        .egress_deny = TEXT(24),
                        .traffic_token = TEXT(25),
                        .confined = sqlite3_column_type(st, 26) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 26) != 0,
                        .unconfined_reason = TEXT(27),
                        .host = TEXT(28),
                        .egress_bindings = TEXT(29),
                        .mounts = TEXT(30),
                };
#undef TEXT
                int r2 = fn(userdata, &r);
                if (r2 < 0)
                        return r2;
        }
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

int store_put_operation(Store *s, const Operation *op) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(s->db,
                                "INSERT OR REPLACE INTO operations (id, kind, state, sandbox_id, created_at,"
                                " finished_at, error_code, error_message) VALUES (?,?,?,?,?,?,?,?)",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite_bind_text(st, 1, op->id);
        sqlite_bind_text(st, 2, op->kind);
        sqlite_bind_text(st, 3, operation_state_to_string(op->state));
        sqlite_bind_text(st, 4, op->sandbox_id[0] ? op->sandbox_id : NULL);
        sqlite3_bind_int64(st, 5, op->created_at);
        sqlite3_bind_int64(st, 6, op->finished_at);
        sqlite_bind_text(st, 7, op->error.code != ERROR_NONE ? error_code_to_string(op->error.code) : NULL);
        sqlite_bind_text(st, 8, op->error.message);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

int store_load_operations(Store *s, Manager *m) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(s->db,
                                "SELECT id, kind, state, sandbox_id, created_at, finished_at, error_code,"
                                " error_message FROM operations ORDER BY created_at",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                const char *id = (const char *) sqlite3_column_text(st, 0);
                const char *state = (const char *) sqlite3_column_text(st, 2);
                const char *sid = (const char *) sqlite3_column_text(st, 3);
                Operation *op;

                if (!id || strlen(id) != OPERATION_ID_LEN || !state)
                        continue;
                op = calloc(1, sizeof *op);
                if (!op)
                        return -ENOMEM;
                op->manager = m;
                memcpy(op->id, id, OPERATION_ID_LEN + 1);
                op->kind = sqlite_column_strdup(st, 1);
                if (operation_state_from_string(state, &op->state) < 0)
                        op->state = OPERATION_FAILED;
                if (sid && strlen(sid) == SANDBOX_ID_LEN)
                        memcpy(op->sandbox_id, sid, SANDBOX_ID_LEN + 1);
                op->created_at = sqlite3_column_int64(st, 4);
                op->finished_at = sqlite3_column_int64(st, 5);
                /* A code this daemon does not know (a row from a newer one) reads as internal. */
                if (sqlite3_column_type(st, 6) != SQLITE_NULL &&
                    error_code_from_string((const char *) sqlite3_column_text(st, 6), &op->error.code) < 0)
                        op->error.code = ERROR_INTERNAL;
                op->error.message = sqlite_column_strdup(st, 7);
                op->next = m->operations;
                m->operations = op;
        }
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

int store_prune_operations(Store *s, int64_t older_than) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(s->db,
                                "DELETE FROM operations WHERE finished_at > 0 AND finished_at < ?", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite3_bind_int64(st, 1, older_than);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

int store_put_key(Store *s, const char *id, const char *name, const char *hash, int64_t created_at) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(s->db, "INSERT INTO api_keys (id, name, hash, created_at) VALUES (?,?,?,?)", -1,
                                &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite_bind_text(st, 1, id);
        sqlite_bind_text(st, 2, name);
        sqlite_bind_text(st, 3, hash);
        sqlite3_bind_int64(st, 4, created_at);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

int store_load_keys(Store *s, store_key_fn fn, void *userdata) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(s->db,
                                "SELECT id, name, hash, created_at, last_used_at FROM api_keys"
                                " ORDER BY created_at DESC, rowid DESC",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                int r = fn(userdata, (const char *) sqlite3_column_text(st, 0),
                           (const char *) sqlite3_column_text(st, 1), (const char *) sqlite3_column_text(st, 2),
                           sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4));
                if (r < 0)
                        return r;
        }
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

int store_delete_key(Store *s, const char *id) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(s->db, "DELETE FROM api_keys WHERE id = ?", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite_bind_text(st, 1, id);
        rc = sqlite3_step(st);
        if (rc != SQLITE_DONE)
                return sqlite_to_errno(rc);
        return sqlite3_changes(s->db) > 0 ? 0 : -ENOENT;
}

int store_set_key_hash(Store *s, const char *id, const char *hash) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(s->db, "UPDATE api_keys SET hash = ? WHERE id = ?", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite_bind_text(st, 1, hash);
        sqlite_bind_text(st, 2, id);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}

int store_touch_key(Store *s, const char *id, int64_t last_used_at) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(s->db, "UPDATE api_keys SET last_used_at = ? WHERE id = ?", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return sqlite_to_errno(rc);
        sqlite3_bind_int64(st, 1, last_used_at);
        sqlite_bind_text(st, 2, id);
        rc = sqlite3_step(st);
        return rc == SQLITE_DONE ? 0 : sqlite_to_errno(rc);
}
