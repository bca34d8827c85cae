/* SPDX-License-Identifier: Apache-2.0 */

/* spaced/core/store.c against a real SQLite file: every field of sandboxes and operations survives a round trip
 * and a daemon restart, names are unique unless NULL, pruning keeps running operations, and a database
 * from a newer daemon or a garbage file is refused rather than crashed on. The migrations (core/schema.c):
 * each runs once, a database from before them is completed and keeps its rows, a failure is reported. Port
 * forwards (core/store-forward.c): rows round-trip, are deleted by id, and ones out of shape are skipped. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf */
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "core/manager.h"
#include "core/operation.h"
#include "sandbox/sandbox.h"
#include "disk/disk.h"
#include "template/template.h"
#include "core/schema.h"
#include "core/store.h"
#include "tap.h"

#define STR_(x) #x
#define STR(x) STR_(x)

#define ID_A "0123456789abcdef0123456789abcdef"
#define ID_B "11111111111111111111111111111111"
#define ID_C "22222222222222222222222222222222"
#define ID_D "33333333333333333333333333333333"

#define FW_A "fw-00000000000000a1"
#define FW_D "fw-00000000000000d1"
#define FW_X "fw-0000000000000001"
#define FW_Y "fw-0000000000000002"
#define FW_Z "fw-0000000000000003"

#define OP_RUN "op-0000000000000001"
#define OP_FAIL "op-0000000000000002"
#define OP_NEW "op-0000000000000003"
#define OP_OLD "op-0000000000000004"

static char *env_a[] = { "A=1", "PATH=/usr/bin:/bin", "EMPTY=", "QUOTED=\"x\" \\ y\n\u00fcn\u00efcode", NULL };

static const Sandbox sandbox_a = {
        .id = ID_A,
        .name = "alpha",
        .template_name = "python",
        .template_digest = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        .state = SANDBOX_RUNNING,
        .vcpu = 3,
        .memory_mib = UINT64_C(6) << 32, /* does not fit in 32 bits */
        .disk_mib = 20480,
        .env = env_a,
        .created_at = 1700000000,
        .qemu_pid = 4242,
        .run_dir = "/run/user/1000/space/sandboxes/" ID_A,
        .data_dir = "/home/u/.local/state/space/sandboxes/" ID_A,
        .error = "it's \"broken\"; DROP TABLE sandboxes; --",
        .confined = SANDBOX_CONFINED_NO,
        .unconfined_reason = "user and pid namespaces: No space left on device; user.max_user_namespaces is 0",
};

/* Everything optional left out. */
static const Sandbox sandbox_b = {
        .id = ID_B,
        .template_name = "base",
        .state = SANDBOX_STOPPED,
        .vcpu = 1,
        .memory_mib = 256,
        .disk_mib = 1024,
        .created_at = 1700000001,
};

static const Sandbox sandbox_c = {
        .id = ID_C,
        .template_name = "base",
        .state = SANDBOX_ERROR,
        .vcpu = 1,
        .memory_mib = 256,
        .disk_mib = 1024,
        .created_at = 1700000002,
        .error = "boot timed out",
        .confined = SANDBOX_CONFINED_YES,
};

static size_t strv_len(char **v) {
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

static bool strv_equal(char **a, char **b) {
        size_t n = strv_len(a);

        if (n != strv_len(b))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!streq(a[i], b[i]))
                        return false;
        return true;
}

static size_t count_sandboxes(Manager *m) {
        size_t n = 0;
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                n++;
        return n;
}

static size_t count_operations(Manager *m) {
        size_t n = 0;
        for (Operation *o = m->operations; o; o = o->next)
                n++;
        return n;
}

static Sandbox *find_sandbox(Manager *m, const char *id) {
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (streq(s->id, id))
                        return s;
        return NULL;
}

static Operation *find_operation(Manager *m, const char *id) {
        for (Operation *o = m->operations; o; o = o->next)
                if (streq(o->id, id))
                        return o;
        return NULL;
}

static void free_sandboxes(Manager *m) {
        while (m->sandboxes) {
                Sandbox *s = m->sandboxes;
                m->sandboxes = s->next;
                s->next = NULL;
                sandbox_free(s);
        }
}

static void reload(Store *s, Manager *m) {
        free_sandboxes(m);
        operations_free(m);
        ok(store_load_sandboxes(s, m) == 0, "load sandboxes");
        ok(store_load_operations(s, m) == 0, "load operations");
}

static bool sandbox_equal(const Sandbox *a, const Sandbox *b) {
        bool eq = true;

#define CHECK(cond, field)                                      \
        do {                                                    \
                if (!(cond)) {                                  \
                        diag("%s: field %s differs", a->id, field); \
                        eq = false;                             \
                }                                               \
        } while (0)
        CHECK(streq(a->id, b->id), "id");
        CHECK(streq_ptr(a->name, b->name), "name");
        CHECK(streq_ptr(a->template_name, b->template_name), "template");
        CHECK(streq_ptr(a->template_digest, b->template_digest), "template_digest");
        CHECK(a->state == b->state, "state");
        CHECK(a->vcpu == b->vcpu, "vcpu");
        CHECK(a->memory_mib == b->memory_mib, "memory_mib");
        CHECK(a->disk_mib == b->disk_mib, "disk_mib");
        CHECK(strv_equal(a->env, b->env), "env");
        CHECK(a->created_at == b->created_at, "created_at");
        CHECK(a->qemu_pid == b->qemu_pid, "qemu_pid");
        CHECK(streq_ptr(a->run_dir, b->run_dir), "run_dir");
        CHECK(streq_ptr(a->data_dir, b->data_dir), "data_dir");
        CHECK(streq_ptr(a->error, b->error), "error");
        CHECK(a->confined == b->confined, "confined");
        CHECK(streq_ptr(a->unconfined_reason, b->unconfined_reason), "unconfined_reason");
#undef CHECK
        return eq;
}

static bool forward_record_equal(const ForwardRecord *a, const ForwardRecord *b) {
        return streq(a->id, b->id) && streq(a->sandbox_id, b->sandbox_id) && a->guest_port == b->guest_port &&
               a->host_port == b->host_port && a->created_at == b->created_at && a->any_user == b->any_user;
}

static bool operation_equal(const Operation *a, const Operation *b) {
        return streq(a->id, b->id) && streq_ptr(a->kind, b->kind) && a->state == b->state &&
               streq(a->sandbox_id, b->sandbox_id) && a->created_at == b->created_at &&
               a->finished_at == b->finished_at && a->error.code == b->error.code &&
               streq_ptr(a->error.message, b->error.message);
}

static void check_sandboxes(Manager *m, const char *when) {
        Sandbox *a = find_sandbox(m, ID_A), *b = find_sandbox(m, ID_B);

        ok(a && sandbox_equal(a, &sandbox_a), "%s: every field of the full sandbox round-trips", when);
        ok(b && sandbox_equal(b, &sandbox_b), "%s: NULL name, digest, dirs, error, env and an unknown confinement round-trip", when);
        ok(b && b->env && strv_len(b->env) == 0, "%s: a NULL env loads as an empty list", when);
        ok(a && a->manager == m, "%s: loaded sandboxes point at their manager", when);
}

static int sql_exec(const char *path, const char *sql) {
        sqlite3 *db = NULL;
        int rc;

        rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        sqlite3_close(db);
        return rc;
}

/* Result of a single-integer query, or -1. */
static long long sql_int(const char *path, const char *sql) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        long long v = -1;

        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
            sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
                v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(db);
        return v;
}

/* The tables of sandboxes and operations as spaced wrote them before the ADD COLUMNs (idle_timeout, expires_at,
 * on_expiry, last_active, processes.user), with api_keys and processes as first released. */
static const char old_store_schema[] =
        "CREATE TABLE sandboxes (id TEXT PRIMARY KEY NOT NULL, name TEXT UNIQUE, template TEXT NOT NULL,"
        " template_digest TEXT, state TEXT NOT NULL, vcpu INTEGER NOT NULL, memory_mib INTEGER NOT NULL,"
        " disk_mib INTEGER NOT NULL, env TEXT NOT NULL DEFAULT '[]', created_at INTEGER NOT NULL,"
        " qemu_pid INTEGER NOT NULL DEFAULT 0, run_dir TEXT, data_dir TEXT, error TEXT);"
        "CREATE TABLE operations (id TEXT PRIMARY KEY NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,"
        " sandbox_id TEXT, created_at INTEGER NOT NULL, finished_at INTEGER NOT NULL DEFAULT 0, error_code TEXT,"
        " error_message TEXT);"
        "CREATE TABLE api_keys (id TEXT PRIMARY KEY NOT NULL, name TEXT, hash TEXT NOT NULL,"
        " created_at INTEGER NOT NULL, last_used_at INTEGER NOT NULL DEFAULT 0);"
        "CREATE TABLE processes (sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        " pid INTEGER NOT NULL, stream INTEGER NOT NULL, session_id TEXT, argv TEXT NOT NULL DEFAULT '[]',"
        " cwd TEXT, pty INTEGER NOT NULL DEFAULT 0, state TEXT NOT NULL, exit_code INTEGER, signal INTEGER,"
        " timed_out INTEGER NOT NULL DEFAULT 0, timeout INTEGER NOT NULL DEFAULT 0, started_at INTEGER NOT NULL,"
        " exited_at INTEGER, last_event_id INTEGER NOT NULL DEFAULT 0, log_path TEXT, PRIMARY KEY (sandbox_id, pid));";

/* The tables that template.c, checkpoint.c and pool.c created themselves, after store_open. */
static const char old_module_schema[] =
        "CREATE TABLE templates (digest TEXT PRIMARY KEY NOT NULL, size_bytes INTEGER NOT NULL DEFAULT 0,"
        " image_bytes INTEGER NOT NULL DEFAULT 0, files INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL,"
        " source TEXT, source_digest TEXT, config TEXT NOT NULL DEFAULT '{}');"
        "CREATE TABLE template_tags (tag TEXT PRIMARY KEY NOT NULL, digest TEXT NOT NULL);"
        "CREATE TABLE checkpoints (id TEXT PRIMARY KEY NOT NULL, name TEXT UNIQUE, sandbox_id TEXT NOT NULL,"
        " template TEXT NOT NULL, template_digest TEXT, vcpu INTEGER NOT NULL, memory_mib INTEGER NOT NULL,"
        " disk_mib INTEGER NOT NULL, env TEXT NOT NULL DEFAULT '[]', disk TEXT NOT NULL, state_path TEXT NOT NULL,"
        " created_at INTEGER NOT NULL, pause_usec INTEGER NOT NULL DEFAULT 0, size_bytes INTEGER NOT NULL DEFAULT 0);"
        "CREATE TABLE pools (template TEXT PRIMARY KEY NOT NULL, size INTEGER NOT NULL);";

static int sql_create(const char *path, const char *sql) {
        sqlite3 *db = NULL;
        int rc;

        rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        sqlite3_close(db);
        return rc;
}

static long long count_tables(const char *path) {
        return sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('sandboxes',"
                             " 'operations', 'api_keys', 'processes', 'templates', 'template_tags', 'checkpoints',"
                             " 'pools', 'forwards', 'secrets', 'volumes')");
}

/* store_open on a database that a migration cannot fix: refused with a message holding want, nothing changed. */
static void check_refused(const char *path, const char *what, const char *want) {
        Store *s = NULL;
        Error msg = {};
        int r;

        r = store_open(path, &s, &msg);
        ok(r < 0 && !s, "%s: refused (r=%d)", what, r);
        ok(msg.message && strstr(msg.message, "migration 2") && strstr(msg.message, want), "%s: the message names the migration and says "
           "'%s': %s", what, want, msg.message ?: "(none)");
        ok(sql_int(path, "PRAGMA user_version") == 0 &&
           sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'operations'") == 0,
           "%s: the migration was rolled back", what);
        error_done(&msg);
        store_close(s);
}

static void rm_dir(const char *dir) {
        _cleanup_closedir_ DIR *d = opendir(dir);
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        (void) rmdir(dir);
}

int main(void) {
        char dir[] = "/tmp/test-store-XXXXXX";
        _cleanup_free_ char *path = NULL, *newer = NULL, *garbage = NULL, *missing = NULL, *old = NULL,
                            *old1 = NULL, *conflict = NULL, *view = NULL;
        Manager m = {};
        Store *s = NULL;
        Error msg = {};
        int r;

        plan(96);

        if (!mkdtemp(dir) || asprintf(&path, "%s/state.db", dir) < 0 || asprintf(&newer, "%s/newer.db", dir) < 0 ||
            asprintf(&garbage, "%s/garbage.db", dir) < 0 || asprintf(&missing, "%s/no/such/dir/x.db", dir) < 0 ||
            asprintf(&old, "%s/old.db", dir) < 0 || asprintf(&old1, "%s/old1.db", dir) < 0 ||
            asprintf(&conflict, "%s/conflict.db", dir) < 0 || asprintf(&view, "%s/view.db", dir) < 0) {
                perror("setup");
                return 99;
        }

        /* Open creates the schema. */
        r = store_open(path, &s, &msg);
        ok(r == 0 && s, "open creates a new database (r=%d %s)", r, msg.message ?: "");
        error_done(&msg);
        if (!s) {
                rm_dir(dir);
                return done();
        }
        m.store = s;
        ok(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN ('sandboxes','operations')") == 2,
           "schema has the sandboxes and operations tables");
        ok(sql_int(path, "PRAGMA user_version") == SCHEMA_VERSION, "schema version %d is recorded in user_version",
           SCHEMA_VERSION);
        ok(count_tables(path) == 11, "a new database has all eleven tables");

        /* Sandboxes. */
        ok(store_put_sandbox(s, &sandbox_a) == 0, "put the full sandbox");
        ok(store_put_sandbox(s, &sandbox_b) == 0, "put a sandbox without a name");
        ok(store_put_sandbox(s, &sandbox_c) == 0, "a second sandbox without a name is fine too");


        reload(s, &m);
        ok(count_sandboxes(&m) == 3, "three sandboxes stored (got %zu)", count_sandboxes(&m));
        check_sandboxes(&m, "load");
        ok(m.sandboxes && streq(m.sandboxes->id, ID_A) && m.sandboxes->next && streq(m.sandboxes->next->id, ID_B),
           "sandboxes load in creation order");

        /* Names are unique: a clash must be refused, never resolved by replacing the other sandbox's row. */
        Sandbox dup = sandbox_b;
        memcpy(dup.id, ID_D, sizeof dup.id);
        dup.name = "alpha";
        r = store_put_sandbox(s, &dup);
        ok(r == -EEXIST, "a second sandbox named \"alpha\" is refused with -EEXIST (r=%d)", r);
        reload(s, &m);
        ok(!find_sandbox(&m, ID_D), "the refused duplicate was not stored");
        ok(find_sandbox(&m, ID_A) && sandbox_equal(find_sandbox(&m, ID_A), &sandbox_a),
           "the sandbox that owns the name is untouched");
        /* Keep the later checks independent of a failure here. */
        (void) store_delete_sandbox(s, ID_D);
        (void) store_put_sandbox(s, &sandbox_a);

        /* Saving an existing sandbox again updates it in place. */
        Sandbox upd = sandbox_c;
        upd.state = SANDBOX_DELETING;
        upd.name = "gamma";
        upd.qemu_pid = 77;
        r = store_put_sandbox(s, &upd);
        ok(r == 0, "saving an existing sandbox again updates it (r=%d)", r);
        reload(s, &m);
        Sandbox *c = find_sandbox(&m, ID_C);
        ok(count_sandboxes(&m) == 3 && c && sandbox_equal(c, &upd), "the update replaced the row, no new row");

        ok(store_delete_sandbox(s, ID_C) == 0, "delete a sandbox");
        ok(store_delete_sandbox(s, ID_D) == 0, "deleting an unknown id is not an error");
        reload(s, &m);
        ok(count_sandboxes(&m) == 2 && !find_sandbox(&m, ID_C), "the deleted sandbox is gone, others stay");

        /* Operations. */
        Operation op_run = { .id = OP_RUN, .kind = "create", .state = OPERATION_RUNNING, .sandbox_id = ID_A,
                             .created_at = 1000 };
        Operation op_fail = { .id = OP_FAIL, .kind = "delete", .state = OPERATION_FAILED, .sandbox_id = ID_B,
                              .created_at = 1100, .finished_at = 1200,
                              .error = { .code = ERROR_INTERNAL, .message = "qemu exited: \"signal 9\"\n" } };
        Operation op_new = { .id = OP_NEW, .kind = "create", .state = OPERATION_SUCCEEDED, .sandbox_id = ID_A,
                             .created_at = 4000, .finished_at = 5000 };
        Operation op_old = { .id = OP_OLD, .kind = "gc", .state = OPERATION_SUCCEEDED, .created_at = 500,
                             .finished_at = 600 };

        ok(store_put_operation(s, &op_run) == 0 && store_put_operation(s, &op_fail) == 0 &&
           store_put_operation(s, &op_new) == 0 && store_put_operation(s, &op_old) == 0,
           "put four operations");
        reload(s, &m);
        ok(count_operations(&m) == 4, "four operations stored (got %zu)", count_operations(&m));
        Operation *o = find_operation(&m, OP_FAIL);
        ok(o && operation_equal(o, &op_fail), "a failed operation round-trips with error code and message");
        o = find_operation(&m, OP_RUN);
        ok(o && operation_equal(o, &op_run) && !o->error.code && !o->error.message,
           "a running operation round-trips without an error");
        o = find_operation(&m, OP_OLD);
        ok(o && operation_equal(o, &op_old) && o->sandbox_id[0] == 0, "an operation without a sandbox round-trips");
        ok(o && o->manager == &m, "loaded operations point at their manager");

        /* The running operation finishes: saving again updates it. */
        op_run.state = OPERATION_SUCCEEDED;
        op_run.finished_at = 1300;
        ok(store_put_operation(s, &op_run) == 0, "saving an operation again updates it");

        Operation op_pending = { .id = "op-0000000000000005", .kind = "create", .state = OPERATION_RUNNING,
                                 .created_at = 1 };
        ok(store_put_operation(s, &op_pending) == 0, "put an old operation that is still running");

        ok(store_prune_operations(s, 2000) == 0, "prune operations finished before t=2000");
        reload(s, &m);
        ok(count_operations(&m) == 2, "two operations left after pruning (got %zu)", count_operations(&m));
        ok(!find_operation(&m, OP_FAIL) && !find_operation(&m, OP_OLD) && !find_operation(&m, OP_RUN),
           "operations finished before the cutoff are gone");
        o = find_operation(&m, OP_NEW);
        ok(o && operation_equal(o, &op_new), "an operation finished after the cutoff is kept");
        o = find_operation(&m, op_pending.id);
        ok(o && operation_equal(o, &op_pending), "a running operation is kept however old it is");

        /* Port forwards: a row per background forward, oldest first; ID_D has no sandbox row (removed while no
         * daemon ran): the row stays for the daemon to report. */
        ForwardRecord fw_a = { .id = FW_A, .sandbox_id = ID_A, .guest_port = 8000, .host_port = 65535,
                               .created_at = 1700000100 };
        ForwardRecord fw_d = { .id = FW_D, .sandbox_id = ID_D, .guest_port = 65535, .host_port = 1,
                               .created_at = 1700000000, .any_user = true };
        ForwardRecord *rows = NULL;
        size_t n_rows = 0;

        ok(store_put_forward(s, &fw_a) == 0 && store_put_forward(s, &fw_d) == 0, "put two forwards");
        ok(store_put_forward(s, &fw_a) == -EEXIST, "a second row with the same id is refused");
#define FW_COLS "INSERT INTO forwards (id, sandbox_id, guest_port, host_port, created_at) VALUES "
        ok(sql_exec(path, FW_COLS "('fw-short', '" ID_A "', 80, 8080, 1);"
                          FW_COLS "('" FW_X "', '" ID_A "', 0, 8080, 2);"
                          FW_COLS "('" FW_Y "', '" ID_A "', 80, 65536, 3);"
                          FW_COLS "('" FW_Z "', 'nosuch', 80, 8080, 4)") == SQLITE_OK,
           "rows out of shape put there with sqlite3");
        r = store_load_forwards(s, &rows, &n_rows);
        ok(r == 0 && n_rows == 2, "load forwards: the two good rows, the rest skipped (r=%d n=%zu)", r, n_rows);
        ok(n_rows == 2 && forward_record_equal(&rows[0], &fw_d) && forward_record_equal(&rows[1], &fw_a),
           "every field round-trips, oldest first");
        free(rows);
        rows = NULL;
        ok(store_delete_forward(s, FW_D) == 0, "delete a forward");
        ok(store_delete_forward(s, FW_D) == 0, "deleting it again is not an error");
        ok(store_delete_sandbox(s, ID_A) == 0 && sql_int(path, "SELECT count(*) FROM forwards WHERE id = '" FW_A "'") == 1,
           "a sandbox's row deleted leaves its forwards, for the daemon to drop with a warning");
        ok(store_put_sandbox(s, &sandbox_a) == 0, "put the sandbox back");
        r = store_load_forwards(s, &rows, &n_rows);
        ok(r == 0 && n_rows == 1 && forward_record_equal(&rows[0], &fw_a), "one forward left (r=%d n=%zu)", r,
           n_rows);
        free(rows);
        rows = NULL;

        /* Daemon restart: close, reopen the same file, everything is still there. */
        free_sandboxes(&m);
        operations_free(&m);
        s = store_close(s);
        ok(!s, "close returns NULL");
        r = store_open(path, &s, &msg);
        ok(r == 0 && s, "reopen the same file (r=%d %s)", r, msg.message ?: "");
        error_done(&msg);
        if (s) {
                m.store = s;
                reload(s, &m);
                ok(count_sandboxes(&m) == 2 && count_operations(&m) == 2, "reopened: 2 sandboxes and 2 operations");
                check_sandboxes(&m, "reopen");
                r = store_load_forwards(s, &rows, &n_rows);
                ok(r == 0 && n_rows == 1 && forward_record_equal(&rows[0], &fw_a), "reopened: the forward is there");
                free(rows);
                rows = NULL;
                free_sandboxes(&m);
                operations_free(&m);
                s = store_close(s);
        } else
                for (int i = 0; i < 8; i++)
                        ok(false, "reopen failed");

        /* A database from a newer daemon is refused, not migrated down or clobbered. */
        r = store_open(newer, &s, NULL);
        ok(r == 0, "create a second database");
        s = store_close(s);
        ok(sql_exec(newer, "PRAGMA user_version = 99") == SQLITE_OK, "set user_version = 99 with sqlite3");
        r = store_open(newer, &s, &msg);
        ok(r == -EPROTONOSUPPORT && !s, "a newer schema is refused with -EPROTONOSUPPORT (r=%d)", r);
        ok(msg.message && strstr(msg.message, "99"), "with a message naming the version: %s", msg.message ?: "(none)");
        error_done(&msg);
        ok(sql_int(newer, "PRAGMA user_version") == 99, "the newer database is left untouched");
        s = store_close(s);

        /* Opening again runs nothing: a table dropped behind the daemon's back is not made again. */
        ok(sql_exec(newer, "PRAGMA user_version = " STR(SCHEMA_VERSION) "; DROP TABLE pools") == SQLITE_OK,
           "latest database: drop the pools table with sqlite3");
        r = store_open(newer, &s, &msg);
        ok(r == 0 && s, "latest database: opens (r=%d %s)", r, msg.message ?: "");
        error_done(&msg);
        s = store_close(s);
        ok(count_tables(newer) == 10, "latest database: no migration ran again");

        /* A database from a daemon before numbered migrations (user_version 0, no later columns) is migrated
         * and keeps its rows. */
        ok(sql_create(old, old_store_schema) == SQLITE_OK && sql_exec(old, old_module_schema) == SQLITE_OK &&
           sql_exec(old, "INSERT INTO sandboxes (id, name, template, state, vcpu, memory_mib, disk_mib, env,"
                         " created_at, qemu_pid) VALUES ('" ID_D "', 'old', 'base', 'stopped', 2, 512, 2048,"
                         " '[\"X=1\"]', 1600000000, 0);"
                         "INSERT INTO processes (sandbox_id, pid, stream, argv, state, started_at)"
                         " VALUES ('" ID_D "', 7, 1, '[\"sh\"]', 'exited', 1600000001);"
                         "INSERT INTO pools VALUES ('base', 3)") == SQLITE_OK,
           "old database: made with the old schema and a sandbox, a process and a pool");
        r = store_open(old, &s, &msg);
        ok(r == 0 && s, "old database: opens (r=%d %s)", r, msg.message ?: "");
        error_done(&msg);
        if (s) {
                Manager om = { .store = s };
                Sandbox *d;
                ProcessRecord pr = {};

                ok(sql_int(old, "PRAGMA user_version") == SCHEMA_VERSION, "old database: user_version is now %d",
                   SCHEMA_VERSION);
                ok(store_load_sandboxes(s, &om) == 0 && (d = find_sandbox(&om, ID_D)) && d->name &&
                   strcmp(d->name, "old") == 0 && d->memory_mib == 512 && d->env && d->env[0] &&
                   strcmp(d->env[0], "X=1") == 0 && d->idle_timeout == 21600 && d->expires_at == 0 &&
                   d->on_expiry == EXPIRY_REMOVE && d->last_active == 0 &&
                   d->confined == SANDBOX_CONFINED_UNKNOWN && !d->unconfined_reason,
                   "old database: the sandbox is kept, the new columns have their defaults");
                ok(store_get_process(s, ID_D, 7, &pr) == 0 && !pr.user && pr.argv && strstr(pr.argv, "sh"),
                   "old database: the process is kept, without a user");
                process_record_done(&pr);
                ok(sql_int(old, "SELECT size FROM pools WHERE template = 'base'") == 3,
                   "old database: the pool row is kept");
                d = &(Sandbox) { .id = ID_D, .template_name = "base", .state = SANDBOX_STOPPED, .vcpu = 1,
                                 .memory_mib = 1, .disk_mib = 1, .idle_timeout = 60, .on_expiry = EXPIRY_SUSPEND };
                ok(store_put_sandbox(s, d) == 0, "old database: a sandbox with the new fields can be written");
                free_sandboxes(&om);
                s = store_close(s);
        } else
                for (int i = 0; i < 5; i++)
                        ok(false, "old database did not open");

        /* The last daemons before numbered migrations stamped user_version 1 before the template, checkpoint
         * and pool tables were made: those are made now. */
        ok(sql_create(old1, old_store_schema) == SQLITE_OK && sql_exec(old1, "PRAGMA user_version = 1") == SQLITE_OK,
           "user_version 1 database: made with the store's tables only");
        r = store_open(old1, &s, &msg);
        ok(r == 0 && s, "user_version 1 database: opens (r=%d %s)", r, msg.message ?: "");
        error_done(&msg);
        s = store_close(s);
        ok(count_tables(old1) == 11 && sql_int(old1, "PRAGMA user_version") == SCHEMA_VERSION &&
           sql_int(old1, "SELECT count(*) FROM pragma_table_info('sandboxes') WHERE name = 'last_active'") == 1,
           "user_version 1 database: all tables and columns, user_version %d", SCHEMA_VERSION);

        /* A table of a known name that is not ours fails the migration, and says why. */
        ok(sql_create(conflict, "CREATE TABLE sandboxes (id TEXT PRIMARY KEY NOT NULL, what TEXT)") == SQLITE_OK,
           "conflicting database: a sandboxes table of another shape");
        check_refused(conflict, "conflicting table", "table sandboxes has no column name");
        ok(sql_create(view, "CREATE VIEW sandboxes AS SELECT 1 AS id") == SQLITE_OK,
           "conflicting database: sandboxes is a view");
        check_refused(view, "a view", "Cannot add a column to a view");

        /* A garbage file gives an error, not a crash. */
        {
                _cleanup_close_ int fd = open(garbage, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                uint8_t buf[4096];
                size_t n = 0;

                while (n < sizeof buf) {
                        ssize_t k = getrandom(buf + n, sizeof buf - n, 0);
                        if (k < 0) {
                                perror("getrandom");
                                return 99;
                        }
                        n += (size_t) k;
                }
                ok(fd >= 0 && write(fd, buf, sizeof buf) == (ssize_t) sizeof buf, "write 4 KiB of random bytes");
        }
        r = store_open(garbage, &s, &msg);
        ok(r < 0 && !s, "a garbage file is refused (r=%d)", r);
        ok(msg.message && *msg.message, "with a message: %s", msg.message ?: "(none)");
        error_done(&msg);
        s = store_close(s);

        r = store_open(missing, &s, &msg);
        ok(r < 0 && !s, "a path in a missing directory is refused (r=%d %s)", r, msg.message ?: "");
        error_done(&msg);
        s = store_close(s);

        rm_dir(dir);
        return done();
}
