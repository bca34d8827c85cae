/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* SQLite state: the desired and observed state of sandboxes, and operations. One file, WAL mode; written
 * from the event loop thread only. */

#include "core/error.h"
#include "core/manager.h"

int store_open(const char *path, Store **ret, Error *reterr);
Store *store_close(Store *s);
/* For the store-*.c files that keep their own tables. */
struct sqlite3;
struct sqlite3 *store_db(Store *s);
/* A sandbox's row as plain values (sandbox/ makes its Sandbox from it and back): lists are JSON arrays of strings
 * as text, metadata a JSON object as text ("{}" or NULL: none), state and on_expiry their names. What a load
 * hands fn lives only for that call. */
typedef struct SandboxRecord {
        const char *id;
        const char *name;
        const char *template_name;
        const char *template_digest;
        const char *state;
        unsigned vcpu;
        uint64_t memory_mib;
        uint64_t disk_mib;
        const char *env;
        int64_t created_at;
        int64_t qemu_pid;
        const char *run_dir;
        const char *data_dir;
        const char *error;
        int64_t idle_timeout;
        int64_t expires_at;
        const char *on_expiry;          /* "suspend", "stop" or "remove" */
        int64_t last_active;
        const char *metadata;
        const char *access_token;
        bool auto_resume;
        int64_t ttl;
        const char *egress_profiles;
        const char *egress_allow;
        const char *egress_deny;
        const char *egress_bindings;
        const char *mounts;             /* JSON array of "VOLUME-ID:PATH" */
        const char *traffic_token;
        int confined;                   /* -1: not recorded, 0: no, 1: yes */
        const char *unconfined_reason;
        const char *host;               /* a suspended sandbox's: the host its state was saved under */
} SandboxRecord;
typedef int (*store_sandbox_fn)(void *userdata, const SandboxRecord *r);
int store_put_sandbox_record(Store *s, const SandboxRecord *r);
int store_delete_sandbox(Store *s, const char *id);
/* Calls fn for every row, oldest first; stops at fn's first error. */
int store_load_sandbox_records(Store *s, store_sandbox_fn fn, void *userdata);
int store_put_operation(Store *s, const Operation *op);
int store_load_operations(Store *s, Manager *m);
/* Drops finished operations older than max_age seconds. */
int store_prune_operations(Store *s, int64_t older_than);

/* API keys (auth.c): id, name (may be NULL), hash (auth.c's form), times in unix seconds. */
typedef int (*store_key_fn)(void *userdata, const char *id, const char *name, const char *hash, int64_t created_at,
                            int64_t last_used_at);
int store_put_key(Store *s, const char *id, const char *name, const char *hash, int64_t created_at);
/* Calls fn for every key, newest first; stops at fn's first error. */
int store_load_keys(Store *s, store_key_fn fn, void *userdata);
int store_delete_key(Store *s, const char *id);  /* -ENOENT when there is none */
int store_touch_key(Store *s, const char *id, int64_t last_used_at);
int store_set_key_hash(Store *s, const char *id, const char *hash);

/* Secrets (store-secret.c, secret/secret.h): what is known of each, never its value. metadata is a JSON object
 * of strings; times in unix seconds, last_used_at 0 for never. */
typedef struct SecretRecord {
        char *id;
        char *name;
        int64_t version;
        char *metadata;
        int64_t created_at;
        int64_t updated_at;
        int64_t last_used_at;
} SecretRecord;
void secret_record_done(SecretRecord *r);
int store_put_secret(Store *s, const SecretRecord *r);      /* insert or replace, by id */
int store_delete_secret(Store *s, const char *id);          /* 0 also when there is none */
int store_touch_secret(Store *s, const char *id, int64_t last_used_at);
/* Every row, oldest first; rows that make no sense are left out (for a human to look at). */
int store_load_secrets(Store *s, SecretRecord **ret, size_t *ret_n);

/* Volumes (store-volume.c, volume/volume.h): quota in bytes; token: the volume content API's bearer (hex). */
typedef struct VolumeRecord {
        char *id;
        char *name;
        uint64_t quota;
        char *token;
        int64_t created_at;
} VolumeRecord;
void volume_record_done(VolumeRecord *r);
int store_put_volume(Store *s, const VolumeRecord *r);      /* insert or replace, by id */
int store_delete_volume(Store *s, const char *id);          /* 0 also when there is none */
/* Every row, oldest first; rows that make no sense are left out. */
int store_load_volumes(Store *s, VolumeRecord **ret, size_t *ret_n);

/* Processes (store-process.c). argv is a JSON array; exit_code -1 and signal 0 mean none; exited_at 0 none. */
typedef struct ProcessRecord {
        char sandbox_id[SANDBOX_ID_LEN + 1];
        int pid;
        uint32_t stream;
        char *session_id;
        char *argv;
        char *cwd;
        char *user;             /* NULL: root (also rows from before the column) */
        bool pty;
        char *state;
        int exit_code;
        int signal;
        bool timed_out;
        uint64_t timeout;
        int64_t started_at;
        int64_t exited_at;
        uint64_t last_event_id;
        char *log_path;
} ProcessRecord;
void process_record_done(ProcessRecord *r);
int store_put_process(Store *s, const ProcessRecord *r);
int store_get_process(Store *s, const char *sandbox_id, int pid, ProcessRecord *ret);        /* -ENOENT */
int store_get_session(Store *s, const char *sandbox_id, const char *session_id, ProcessRecord *ret); /* -ENOENT */
/* All of a sandbox's processes, oldest first; state_filter NULL for all. */
int store_load_processes(Store *s, const char *sandbox_id, const char *state_filter, ProcessRecord **ret,
                         size_t *ret_n);
/* Keeps the newest `keep` finished processes of a sandbox; returns the log paths of the rows it dropped. */
int store_prune_processes(Store *s, const char *sandbox_id, unsigned keep, char ***ret_log_paths);

/* Background port forwards (store-forward.c, sandbox/forward.h): what a restarted daemon listens on again. */
typedef struct ForwardRecord {
        char id[FORWARD_ID_LEN + 1];
        char sandbox_id[SANDBOX_ID_LEN + 1];
        uint16_t guest_port;
        uint16_t host_port;
        int64_t created_at;
        bool any_user;        /* every local user may connect, not only the daemon's own */
} ForwardRecord;
int store_put_forward(Store *s, const ForwardRecord *r);
int store_delete_forward(Store *s, const char *id);  /* 0 also when there is none */
/* Every row, oldest first, in one array (free()); rows that are not a forward (an id, a sandbox id or a port
 * out of shape) are skipped. */
int store_load_forwards(Store *s, ForwardRecord **ret, size_t *ret_n);
