/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "core/schema.h"
#include "core/store-sqlite.h"

/* Every table of the state database, and how a database gets there. PRAGMA user_version records the last
 * migration that committed; each one runs once, in its own transaction together with the new user_version,
 * so a failed or interrupted migration leaves the database as it was.
 *
 * Daemons from before numbered migrations wrote user_version 1 on every start, after ADD COLUMNs whose errors
 * they ignored and before the template, checkpoint and pool code created their tables. So 0 and 1 both mean
 * "before", and the first numbered migration is 2: it creates what is missing and adds the columns those
 * daemons added later, which makes a fresh database in one step as well. New migrations go at the end. */

/* The tables as of migration 2. IF NOT EXISTS because migration 2 also completes older databases. */
static const char tables_v2[] =
        "CREATE TABLE IF NOT EXISTS sandboxes ("
        "  id TEXT PRIMARY KEY NOT NULL,"
        "  name TEXT UNIQUE,"
        "  template TEXT NOT NULL,"
        "  template_digest TEXT,"
        "  state TEXT NOT NULL,"
        "  vcpu INTEGER NOT NULL,"
        "  memory_mib INTEGER NOT NULL,"
        "  disk_mib INTEGER NOT NULL,"
        "  env TEXT NOT NULL DEFAULT '[]',"
        "  created_at INTEGER NOT NULL,"
        "  qemu_pid INTEGER NOT NULL DEFAULT 0,"
        "  run_dir TEXT,"
        "  data_dir TEXT,"
        "  error TEXT,"
        "  idle_timeout INTEGER NOT NULL DEFAULT 21600,"
        "  expires_at INTEGER NOT NULL DEFAULT 0,"
        "  on_expiry TEXT NOT NULL DEFAULT 'remove',"
        "  last_active INTEGER NOT NULL DEFAULT 0);"
        "CREATE TABLE IF NOT EXISTS operations ("
        "  id TEXT PRIMARY KEY NOT NULL,"
        "  kind TEXT NOT NULL,"
        "  state TEXT NOT NULL,"
        "  sandbox_id TEXT,"
        "  created_at INTEGER NOT NULL,"
        "  finished_at INTEGER NOT NULL DEFAULT 0,"
        "  error_code TEXT,"
        "  error_message TEXT);"
        /* API keys (http/auth.c): only a salted hash of each key */
        "CREATE TABLE IF NOT EXISTS api_keys ("
        "  id TEXT PRIMARY KEY NOT NULL,"
        "  name TEXT,"
        "  hash TEXT NOT NULL,"
        "  created_at INTEGER NOT NULL,"
        "  last_used_at INTEGER NOT NULL DEFAULT 0);"
        /* processes (core/store-process.c): what ps and logs show, also after a restart */
        "CREATE TABLE IF NOT EXISTS processes ("
        "  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
        "  pid INTEGER NOT NULL,"
        "  stream INTEGER NOT NULL,"
        "  session_id TEXT,"
        "  argv TEXT NOT NULL DEFAULT '[]',"
        "  cwd TEXT,"
        "  pty INTEGER NOT NULL DEFAULT 0,"
        "  state TEXT NOT NULL,"
        "  exit_code INTEGER,"
        "  signal INTEGER,"
        "  timed_out INTEGER NOT NULL DEFAULT 0,"
        "  timeout INTEGER NOT NULL DEFAULT 0,"
        "  started_at INTEGER NOT NULL,"
        "  exited_at INTEGER,"
        "  last_event_id INTEGER NOT NULL DEFAULT 0,"
        "  log_path TEXT,"
        "  user TEXT,"
        "  PRIMARY KEY (sandbox_id, pid));"
        /* template store (template/template.c): a row per image and a row per tag */
        "CREATE TABLE IF NOT EXISTS templates ("
        "  digest TEXT PRIMARY KEY NOT NULL,"
        "  size_bytes INTEGER NOT NULL DEFAULT 0,"
        "  image_bytes INTEGER NOT NULL DEFAULT 0,"
        "  files INTEGER NOT NULL DEFAULT 0,"
        "  created_at INTEGER NOT NULL,"
        "  source TEXT,"
        "  source_digest TEXT,"
        "  config TEXT NOT NULL DEFAULT '{}');"
        "CREATE TABLE IF NOT EXISTS template_tags ("
        "  tag TEXT PRIMARY KEY NOT NULL,"
        "  digest TEXT NOT NULL);"
        /* sandbox/checkpoint.c */
        "CREATE TABLE IF NOT EXISTS checkpoints ("
        "  id TEXT PRIMARY KEY NOT NULL,"
        "  name TEXT UNIQUE,"
        "  sandbox_id TEXT NOT NULL,"
        "  template TEXT NOT NULL,"
        "  template_digest TEXT,"
        "  vcpu INTEGER NOT NULL,"
        "  memory_mib INTEGER NOT NULL,"
        "  disk_mib INTEGER NOT NULL,"
        "  env TEXT NOT NULL DEFAULT '[]',"
        "  disk TEXT NOT NULL,"
        "  state_path TEXT NOT NULL,"
        "  created_at INTEGER NOT NULL,"
        "  pause_usec INTEGER NOT NULL DEFAULT 0,"
        "  size_bytes INTEGER NOT NULL DEFAULT 0);"
        /* warm pools (sandbox/pool.c): the configured size per template */
        "CREATE TABLE IF NOT EXISTS pools ("
        "  template TEXT PRIMARY KEY NOT NULL,"
        "  size INTEGER NOT NULL);";

/* Columns that daemons before numbered migrations added with ADD COLUMN, in the order they were added. */
static const struct {
        const char *table, *column, *definition;
} late_columns[] = {
        { "sandboxes", "idle_timeout", "INTEGER NOT NULL DEFAULT 21600" },
        { "sandboxes", "expires_at", "INTEGER NOT NULL DEFAULT 0" },
        { "sandboxes", "on_expiry", "TEXT NOT NULL DEFAULT 'remove'" },
        { "sandboxes", "last_active", "INTEGER NOT NULL DEFAULT 0" },
        { "processes", "user", "TEXT" },
};

/* The first failure is the one worth telling: later ones are often its consequences. */
static void set_error(Error *reterr, const char *what, sqlite3 *db) {
        if (reterr && !reterr->message)
                (void) error_set(reterr, ERROR_INTERNAL, "%s: %s", what, sqlite3_errmsg(db));
}

static int exec(sqlite3 *db, const char *sql, Error *reterr) {
        int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);

        if (rc != SQLITE_OK) {
                set_error(reterr, sql, db);
                return sqlite_to_errno(rc) ?: -EIO;
        }
        return 0;
}

static int has_column(sqlite3 *db, const char *table, const char *column, bool *ret, Error *reterr) {
        _cleanup_free_ char *sql = NULL;
        sqlite3_stmt *st = NULL;
        bool found = false;
        int rc;

        if (asprintf(&sql, "PRAGMA table_info(\"%s\")", table) < 0)
                return -ENOMEM;
        rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
        if (rc != SQLITE_OK) {
                set_error(reterr, sql, db);
                return sqlite_to_errno(rc) ?: -EIO;
        }
        while (!found && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                const char *name = (const char *) sqlite3_column_text(st, 1);
                found = name && strcmp(name, column) == 0;
        }
        if (!found && rc != SQLITE_DONE) {
                set_error(reterr, sql, db);
                sqlite3_finalize(st);
                return sqlite_to_errno(rc) ?: -EIO;
        }
        sqlite3_finalize(st);
        *ret = found;
        return 0;
}

/* Every column of every table in tables_v2 must be there now: a table of the same name made by something
 * else would otherwise fail later, in the middle of serving. The reference is tables_v2 made in memory. */
static int check_columns(sqlite3 *db, Error *reterr) {
        sqlite3 *ref = NULL;
        sqlite3_stmt *st = NULL;
        int rc, r = 0;

        rc = sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(ref, tables_v2, NULL, NULL, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_prepare_v2(ref,
                                        "SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c"
                                        " WHERE m.type = 'table' ORDER BY m.name, c.cid",
                                        -1, &st, NULL);
        if (rc != SQLITE_OK) {
                set_error(reterr, "the reference schema", ref);
                r = sqlite_to_errno(rc) ?: -EIO;
                goto finish;
        }
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                const char *table = (const char *) sqlite3_column_text(st, 0);
                const char *column = (const char *) sqlite3_column_text(st, 1);
                bool found;

                r = has_column(db, table, column, &found, reterr);
                if (r < 0)
                        goto finish;
                if (!found) {
                        (void) error_set(reterr, ERROR_INTERNAL,
                                         "table %s has no column %s, and no migration adds it (a table of "
                                         "the same name made by something else?)",
                                         table, column);
                        r = -EUCLEAN;
                        goto finish;
                }
        }
        if (rc != SQLITE_DONE) {
                set_error(reterr, "the reference schema", ref);
                r = sqlite_to_errno(rc) ?: -EIO;
        }
finish:
        sqlite3_finalize(st);
        sqlite3_close(ref);
        return r;
}

static int migrate_v2(sqlite3 *db, Error *reterr) {
        int r;

        r = exec(db, tables_v2, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(late_columns); i++) {
                _cleanup_free_ char *sql = NULL;
                bool found;

                r = has_column(db, late_columns[i].table, late_columns[i].column, &found, reterr);
                if (r < 0)
                        return r;
                if (found)
                        continue;
                if (asprintf(&sql, "ALTER TABLE %s ADD COLUMN %s %s", late_columns[i].table, late_columns[i].column,
                             late_columns[i].definition) < 0)
                        return -ENOMEM;
                r = exec(db, sql, reterr);
                if (r < 0)
                        return r;
        }
        return check_columns(db, reterr);
}

/* Sandboxes get the user's metadata labels, and what the E2B facade needs: an envd access token, and whether
 * use wakes a sandbox that its time to live suspended. */
static int migrate_v3(sqlite3 *db, Error *reterr) {
        return exec(db,
                    "ALTER TABLE sandboxes ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';"
                    "ALTER TABLE sandboxes ADD COLUMN access_token TEXT;"
                    "ALTER TABLE sandboxes ADD COLUMN auto_resume INTEGER NOT NULL DEFAULT 0;",
                    reterr);
}

/* The time to live a sandbox was given, so that a resume can give it again. */
static int migrate_v4(sqlite3 *db, Error *reterr) {
        return exec(db, "ALTER TABLE sandboxes ADD COLUMN ttl INTEGER NOT NULL DEFAULT 0;", reterr);
}

/* Egress (space-egress(5)): the profiles a sandbox was created with and its own allow and deny lists, fixed
 * for its life; checkpoints keep them so that forks and restores carry them on. '[]' for older rows: only
 * the base policy, which is what they had. */
static int migrate_v5(sqlite3 *db, Error *reterr) {
        return exec(db,
                    "ALTER TABLE sandboxes ADD COLUMN egress_profiles TEXT NOT NULL DEFAULT '[]';"
                    "ALTER TABLE sandboxes ADD COLUMN egress_allow TEXT NOT NULL DEFAULT '[]';"
                    "ALTER TABLE sandboxes ADD COLUMN egress_deny TEXT NOT NULL DEFAULT '[]';"
                    "ALTER TABLE checkpoints ADD COLUMN egress_profiles TEXT NOT NULL DEFAULT '[]';"
                    "ALTER TABLE checkpoints ADD COLUMN egress_allow TEXT NOT NULL DEFAULT '[]';"
                    "ALTER TABLE checkpoints ADD COLUMN egress_deny TEXT NOT NULL DEFAULT '[]';",
                    reterr);
}

/* Background port forwards (sandbox/forward.c: `spacectl port -d`, POST .../ports without hold), so that a
 * restarted daemon listens on their ports again, with their ids. A row is written when such a forward is
 * added and deleted when it is removed (port rm, its sandbox removed). Held forwards have no row: their holder
 * is a client whose connection ends with the daemon. No foreign key on sandbox_id: the rows of a sandbox
 * removed while no daemon ran (an interrupted rm, finished at start) are for forwards_restore to drop and
 * report, not to vanish without a word. */
static int migrate_v6(sqlite3 *db, Error *reterr) {
        return exec(db,
                    "CREATE TABLE forwards ("
                    "  id TEXT PRIMARY KEY NOT NULL,"
                    "  sandbox_id TEXT NOT NULL,"
                    "  guest_port INTEGER NOT NULL,"
                    "  host_port INTEGER NOT NULL,"
                    "  created_at INTEGER NOT NULL);",
                    reterr);
}

/* A checkpoint's RAM in a file of its own (sandbox/checkpoint.c), which its forks and restores map instead of
 * loading every page from the state file: the path, or NULL for a checkpoint whose state file holds its RAM
 * (older ones, and those whose stream could not be split). */
static int migrate_v7(sqlite3 *db, Error *reterr) {
        return exec(db, "ALTER TABLE checkpoints ADD COLUMN mem_path TEXT;", reterr);
}

/* Forwards open to every local user (sandbox/forward.c): 0, the default, lets only the daemon's own user (and
 * root) connect. */
static int migrate_v8(sqlite3 *db, Error *reterr) {
        return exec(db, "ALTER TABLE forwards ADD COLUMN any_user INTEGER NOT NULL DEFAULT 0;", reterr);
}

/* A token of its own for a sandbox's ports (E2B's trafficAccessToken, proxy/proxy.c), so that a link to a web app
 * in a sandbox does not carry the token that runs commands in it. NULL in an older daemon's rows until the next
 * start gives them one (sandbox_ensure_tokens). */
static int migrate_v9(sqlite3 *db, Error *reterr) {
        return exec(db, "ALTER TABLE sandboxes ADD COLUMN traffic_token TEXT;", reterr);
}

/* Whether a sandbox's QEMU, as last started, runs in namespaces of its own (ARCHITECTURE.md, decision 12), and
 * why not: what confine = auto found the host refuse, or confine = off. NULL for older rows: not recorded. */
static int migrate_v10(sqlite3 *db, Error *reterr) {
        return exec(db,
                    "ALTER TABLE sandboxes ADD COLUMN confined INTEGER;"
                    "ALTER TABLE sandboxes ADD COLUMN unconfined_reason TEXT;",
                    reterr);
}

/* The host a snapshot was made under (vm_host_fingerprint()): a checkpoint's, and a suspended sandbox's for
 * its saved state, so that a restore or wake under another QEMU, accelerator or CPU is refused before anything
 * is stopped (ARCHITECTURE.md, "Snapshots and their host"). NULL for older rows: not recorded. */
static int migrate_v11(sqlite3 *db, Error *reterr) {
        return exec(db,
                    "ALTER TABLE sandboxes ADD COLUMN host TEXT;"
                    "ALTER TABLE checkpoints ADD COLUMN host TEXT;",
                    reterr);
}

/* Secrets (secret/secret.h): a row per secret, never its value, which is a file of its own under
 * $state/secrets (0600, named by the id) so that no dump, backup or query of the database carries it. */
static int migrate_v12(sqlite3 *db, Error *reterr) {
        return exec(db,
                    "CREATE TABLE secrets ("
                    "  id TEXT PRIMARY KEY NOT NULL,"
                    "  name TEXT UNIQUE NOT NULL,"
                    "  version INTEGER NOT NULL,"
                    "  metadata TEXT NOT NULL DEFAULT '{}',"
                    "  created_at INTEGER NOT NULL,"
                    "  updated_at INTEGER NOT NULL,"
                    "  last_used_at INTEGER NOT NULL DEFAULT 0);",
                    reterr);
}

/* A sandbox's own secret bindings (E2B's network.rules as egress_binding_parse_own() lines), kept with its
 * allow and deny lists and by its checkpoints for their forks. '[]' for older rows: none, as they had. */
static int migrate_v13(sqlite3 *db, Error *reterr) {
        return exec(db,
                    "ALTER TABLE sandboxes ADD COLUMN egress_bindings TEXT NOT NULL DEFAULT '[]';"
                    "ALTER TABLE checkpoints ADD COLUMN egress_bindings TEXT NOT NULL DEFAULT '[]';",
                    reterr);
}

/* Volumes (volume/volume.h): a row per volume, its files in $state/volume-data/<id>/. token: the bearer its content
 * API takes (E2B's VolumeAndToken), for that volume alone. */
static int migrate_v14(sqlite3 *db, Error *reterr) {
        return exec(db,
                    "CREATE TABLE volumes ("
                    "  id TEXT PRIMARY KEY NOT NULL,"
                    "  name TEXT UNIQUE NOT NULL,"
                    "  quota INTEGER NOT NULL,"
                    "  token TEXT NOT NULL,"
                    "  created_at INTEGER NOT NULL);",
                    reterr);
}

/* Volumes mounted into sandboxes (volume/volume.h): a sandbox's and a checkpoint's mounts, "VOLUME-ID:PATH" lines
 * as JSON, kept by forks and restores with the guest memory that has them mounted. */
static int migrate_v15(sqlite3 *db, Error *reterr) {
        return exec(db,
                    "ALTER TABLE sandboxes ADD COLUMN mounts TEXT NOT NULL DEFAULT '[]';"
                    "ALTER TABLE checkpoints ADD COLUMN mounts TEXT NOT NULL DEFAULT '[]';",
                    reterr);
}

typedef struct Migration {
        int version; /* the user_version it leaves behind */
        const char *name;
        int (*run)(sqlite3 *db, Error *reterr);
} Migration;

static const Migration migrations[] = {
        { 2, "the whole schema, completing databases from before numbered migrations", migrate_v2 },
        { 3, "sandbox metadata, E2B access tokens and auto resume", migrate_v3 },
        { 4, "the time to live a sandbox was given", migrate_v4 },
        { 5, "egress profiles and lists of sandboxes and checkpoints", migrate_v5 },
        { 6, "background port forwards", migrate_v6 },
        { 7, "checkpoint memory files", migrate_v7 },
        { 8, "port forwards open to every local user", migrate_v8 },
        { 9, "traffic tokens for sandbox ports", migrate_v9 },
        { 10, "whether a sandbox's QEMU is confined", migrate_v10 },
        { 11, "the host a checkpoint or a suspended sandbox was made under", migrate_v11 },
        { 12, "secrets", migrate_v12 },
        { 13, "sandboxes' own secret bindings", migrate_v13 },
        { 14, "volumes", migrate_v14 },
        { 15, "volumes mounted into sandboxes", migrate_v15 },
};

static int read_version(sqlite3 *db, int *ret, Error *reterr) {
        sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
        if (rc == SQLITE_OK) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW) {
                        *ret = sqlite3_column_int(st, 0);
                        rc = SQLITE_OK;
                }
        }
        if (rc != SQLITE_OK)
                set_error(reterr, "PRAGMA user_version", db);
        sqlite3_finalize(st);
        return rc == SQLITE_OK ? 0 : sqlite_to_errno(rc) ?: -EIO;
}

static int refuse_newer(int version, Error *reterr) {
        (void) error_set(reterr, ERROR_INTERNAL,
                         "written by a newer spaced (schema %d, this one knows up to %d); start that spaced "
                         "again, or move the database aside",
                         version, SCHEMA_VERSION);
        return -EPROTONOSUPPORT;
}

/* Runs m in a transaction if the database still needs it: another daemon on the same file may have run it
 * while this one waited for the lock. */
static int run_one(sqlite3 *db, const Migration *m, Error *reterr) {
        _cleanup_free_ char *set = NULL;
        _cleanup_(error_done) Error msg = {};
        int version, r;

        r = exec(db, "BEGIN IMMEDIATE", &msg);
        if (r < 0)
                goto fail;
        r = read_version(db, &version, &msg);
        if (r >= 0 && version > SCHEMA_VERSION)
                r = refuse_newer(version, &msg);
        if (r >= 0 && version < m->version) {
                r = m->run(db, &msg);
                if (r >= 0) {
                        if (asprintf(&set, "PRAGMA user_version = %d", m->version) < 0)
                                r = -ENOMEM;
                        else
                                r = exec(db, set, &msg);
                }
        }
        if (r >= 0)
                r = exec(db, "COMMIT", &msg);
        if (r >= 0)
                return 0;
        (void) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
fail:
        if (r == -EPROTONOSUPPORT)
                error_move(reterr, &msg);
        else
                (void) error_set(reterr, ERROR_INTERNAL, "migration %d (%s) failed: %s", m->version, m->name,
                                 msg.message ?: strerror(-r));
        return r;
}

int schema_migrate(sqlite3 *db, Error *reterr) {
        int version, r;

        r = read_version(db, &version, reterr);
        if (r < 0)
                return r;
        if (version > SCHEMA_VERSION)
                return refuse_newer(version, reterr);
        for (size_t i = 0; i < ELEMENTSOF(migrations); i++) {
                if (migrations[i].version <= version)
                        continue;
                r = run_one(db, &migrations[i], reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}
