/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The daemon's in-memory model. Everything here is owned by the event loop thread; worker threads get
 * copies of what they need (see worker.h) and hand results back through Manager.completions. */

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "settings.h"
#include "proto.h"
#include "paths.h"
#include "string-util.h"
#include "vmm.h"

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;
typedef struct Operation Operation;
typedef struct AgentConn AgentConn;
typedef struct Process Process;
typedef struct Http Http;
typedef struct Store Store;
typedef struct Waiter Waiter;
typedef struct Completion Completion;
typedef struct Checkpoint Checkpoint;
typedef struct FileXfer FileXfer;

#define SANDBOX_ID_LEN 32
#define CHECKPOINT_ID_LEN 19 /* "cp-" + 16 hex */
#define OPERATION_ID_LEN 19 /* "op-" + 16 hex */
#define SANDBOX_NAME_MAX 63
#define SANDBOX_ENV_MAX 256

enum {
        EXPIRY_REMOVE,
        EXPIRY_SUSPEND,
};

#define IDLE_TIMEOUT_DEFAULT (6 * 3600)

typedef enum SandboxState {
        SANDBOX_CREATING,
        SANDBOX_RUNNING,
        SANDBOX_DELETING,
        SANDBOX_STOPPED,
        SANDBOX_ERROR,
        SANDBOX_PAUSED,      /* QEMU stopped, RAM resident */
        SANDBOX_SUSPENDING,  /* journaled: memory being written to the store */
        SANDBOX_SUSPENDED,   /* no QEMU; memory and device state in data_dir/suspend.state */
        SANDBOX_WAKING,      /* journaled: QEMU restoring from suspend.state */
        SANDBOX_POOLED,      /* restored and paused in a warm pool, not handed out yet: hidden from users */
        _SANDBOX_STATE_MAX,
} SandboxState;

typedef enum OperationState {
        OPERATION_PENDING,
        OPERATION_RUNNING,
        OPERATION_SUCCEEDED,
        OPERATION_FAILED,
        _OPERATION_STATE_MAX,
} OperationState;

typedef enum DiskBackend {
        DISK_BACKEND_QCOW2,  /* qcow2 overlays */
        DISK_BACKEND_BTRFS,  /* raw files in btrfs subvolumes, reflinks and snapshots */
} DiskBackend;

/* One image of the template store (template.c): immutable, named by the digest of its root filesystem tree
 * (template-tree.c), with the tags that point at it and the defaults of its config.json. */
typedef struct Template {
        char *name;          /* for messages: its first tag, else "sha256:<12 hex>" */
        char *dir;           /* $state/templates/sha256-<hex> */
        char *rootfs;        /* dir/rootfs.ext4 */
        char *digest;        /* "sha256:<hex>" of the root filesystem tree's manifest */
        char *description;
        unsigned vcpu;
        uint64_t memory_mib;
        uint64_t disk_mib;
        char **env;          /* K=V */
        char *workdir;
        uint64_t size_bytes; /* content: file and symlink bytes */
        char *user;
        char **entrypoint;   /* a default command (OCI Entrypoint + Cmd); NULL: none */
        char **tags;         /* "name:tag", sorted */
        int64_t created_at;
        char *source;        /* what it was imported from */
        char *source_digest; /* builtins: the sha256 of their rootfs.tar */
        uint64_t files;
        uint64_t image_bytes; /* rootfs.ext4's allocated bytes */
        struct Template *next;
} Template;

/* What a running operation has done so far (imports); shared with its worker thread under lock. */
typedef struct OperationProgress {
        pthread_mutex_t lock;
        const char *phase;   /* a static string */
        uint64_t bytes_done;
        uint64_t bytes_total;
        unsigned layer;
        unsigned layers;
} OperationProgress;
/* A VmSaveProgress for an OperationProgress: phase "writing memory", bytes written of (written + RAM to go). */
void operation_progress_save(uint64_t written, uint64_t remaining, void *userdata);

struct Sandbox {
        Manager *manager;
        char id[SANDBOX_ID_LEN + 1];
        char *name;
        char *template_name;
        char *template_digest;
        SandboxState state;
        unsigned vcpu;
        uint64_t memory_mib;
        uint64_t disk_mib;
        char **env;
        int64_t created_at;  /* unix seconds */
        pid_t qemu_pid;
        char *run_dir;       /* runtime: sockets, pid file, logs */
        char *data_dir;      /* state: disk */
        char *error;
        int64_t idle_timeout; /* seconds without use before it is suspended; 0: never */
        int64_t expires_at;   /* unix time it is removed or suspended at; 0: never */
        int on_expiry;        /* EXPIRY_REMOVE or EXPIRY_SUSPEND */
        int64_t last_active;  /* unix time of the last exec, attach or API call on it */
        bool busy;           /* a lifecycle operation is in flight */
        bool pooled;         /* made for a warm pool (POOLED once ready) */
        bool has_pool_fd;
        int pool_fd;         /* pooled: the handshaken agent channel, watched only after handout */
        AgentConn *agent;
        Sandbox *next;
};

typedef struct OperationError {
        char *code;
        char *message;
} OperationError;

struct Operation {
        Manager *manager;
        char id[OPERATION_ID_LEN + 1];
        char *kind;
        OperationState state;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        int64_t created_at;
        int64_t finished_at;
        OperationError error;
        Waiter *waiters;     /* HTTP requests long-polling this operation */
        unsigned pending;    /* a fork: children still being created */
        unsigned failed;
        char **children;     /* a fork: the sandboxes it made */
        char checkpoint_id[CHECKPOINT_ID_LEN + 1]; /* a checkpoint: the one it takes */
        bool drop_checkpoint; /* a fork of a sandbox: checkpoint_id, its own, goes once the children are made */
        OperationProgress *progress; /* while running, when the work reports progress (the worker's) */
        char *result;        /* JSON of what a finished operation made (an import: digest, tags, ...) */
        Operation *next;
};


/* A named snapshot of a running sandbox: a frozen disk layer plus memory and device state. */
struct Checkpoint {
        char id[CHECKPOINT_ID_LEN + 1];
        char *name;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        char *template_name;
        char *template_digest;
        unsigned vcpu;
        uint64_t memory_mib;
        uint64_t disk_mib;
        char **env;
        char *disk;          /* the frozen layer */
        char *state_path;    /* memory and device state */
        int64_t created_at;
        uint64_t pause_usec; /* how long the sandbox was stopped to take it */
        uint64_t size_bytes;
        bool ready;
        Checkpoint *next;
};

struct Manager {
        sd_event *event;
        Store *store;
        Http *http;
        Config config;
        char *state_dir;
        char *runtime_dir;
        char *lib_dir;
        char *socket_path;
        VmAccel accel;
        unsigned tsc_khz;
        unsigned host_cpus;
        DiskBackend disk_backend;   /* of $state, for new base snapshots */
        uint64_t memory_limit_mib;
        Template *templates;
        Sandbox *sandboxes;
        Operation *operations;
        Checkpoint *checkpoints;
        struct PoolConfig *pools;
        sd_event_source *pool_refill_timer;   /* pool_refill_later() */

        /* Worker threads post Completions here and poke the eventfd. */
        pthread_mutex_t completions_lock;
        Completion *completions;
        int completion_fd;
        sd_event_source *completion_source;
        pthread_mutex_t base_lock;  /* one base snapshot build at a time */
        unsigned workers_running;
};

const char *sandbox_state_to_string(SandboxState s);
int sandbox_state_from_string(const char *s, SandboxState *ret);
const char *operation_state_to_string(OperationState s);
int operation_state_from_string(const char *s, OperationState *ret);

/* util.c */
int random_hex(char *buf, size_t n_hex);  /* n_hex chars + NUL */
int64_t now_unix(void);
uint64_t now_usec_monotonic(void);
void format_rfc3339(int64_t t, char buf[static 32]);
int rm_rf(const char *path);
int run_command(char *const argv[], char **reterr_output);   /* waits; captures stderr tail on failure */
int read_first_line(const char *path, char **ret);
int write_file_atomic(const char *path, const char *content);
void crash_point(const char *name);

/* template.c */
int templates_load(Manager *m);
/* A reference (NAME[:TAG], sha256:<hex>) resolved silently: NULL when invalid, unknown or ambiguous. */
Template *template_find(Manager *m, const char *ref);
/* By full digest "sha256:<hex>": what sandboxes, checkpoints and pools record. */
Template *template_find_digest(Manager *m, const char *digest);
/* Resolves a reference with the error a user sees: invalid_ref, template_not_found, ambiguous_reference. */
int template_resolve(Manager *m, const char *ref, Template **ret, OperationError *reterr);
/* The default working directory of commands in s (its template's workdir), NULL for none. */
const char *template_workdir(Manager *m, const Sandbox *s);
/* The default user of commands in s (its template's user, lib/user.h), NULL for none (root). */
const char *template_default_user(Manager *m, const Sandbox *s);
void templates_free(Manager *m);

/* sandbox.c */
Sandbox *sandbox_find_by_id(Manager *m, const char *id);
/* Resolves an id, a unique id prefix or a name. -ENOENT or -ENOTUNIQ. */
int sandbox_resolve(Manager *m, const char *ref, Sandbox **ret);
Sandbox *sandbox_free(Sandbox *s);
void sandbox_unlink(Manager *m, Sandbox *s);
int sandbox_save(Sandbox *s);
uint64_t manager_memory_in_use(Manager *m);
int sandbox_create_start(Manager *m, const char *template_name, const char *name, unsigned vcpu,
                         uint64_t memory_mib, uint64_t disk_mib, char **env, Operation **ret_op,
                         Sandbox **ret_sandbox, OperationError *reterr);
int sandbox_create_from(Manager *m, const char *template_name, const char *name, unsigned vcpu,
                        uint64_t memory_mib, uint64_t disk_mib, char **env, const Checkpoint *source,
                        const char *parent_op, Operation **ret_op, Sandbox **ret_sandbox, OperationError *reterr);
int sandbox_create_full(Manager *m, const char *template_name, const char *name, unsigned vcpu,
                        uint64_t memory_mib, uint64_t disk_mib, char **env, const Checkpoint *source,
                        const char *parent_op, bool pooled, Operation **ret_op, Sandbox **ret_sandbox,
                        OperationError *reterr);
int sandbox_delete_start(Manager *m, Sandbox *s, bool force, Operation **ret_op, OperationError *reterr);
int manager_reconcile(Manager *m);
void sandbox_cleanup_vm_files(pid_t pid, const char *run_dir, const char *data_dir);
bool sandbox_state_holds_memory(SandboxState s);

/* layers.c, layers-btrfs.c: the disk store (decision 5); btrfs volumes when $state is on btrfs, qcow2
 * overlays otherwise. */
DiskBackend disk_backend_detect(const char *state_dir);
const char *disk_backend_to_string(DiskBackend b);
const char *disk_format(const char *disk);      /* QEMU's format= for a disk of the store: "qcow2" or "raw" */
/* The disk a template's base snapshot boots on, in DIR. */
int disk_base_new(DiskBackend b, const char *rootfs, const char *dir, char **ret_path, char **reterr_message);
/* A new writable disk with SOURCE's content (a base snapshot's or a checkpoint's disk), SIZE_MIB large. */
int disk_clone(const char *state_dir, const char *source, uint64_t size_mib, char **ret_path,
               char **reterr_message);
/* A disk nobody uses any more: deleted now when it cannot be shared, else left to layers_gc. */
void disk_forget(const char *disk);
/* A checkpoint's disk: prepare before stopping the VM, take while it is stopped, done in any case. */
typedef struct DiskCheckpoint {
        char *top;           /* the sandbox's disk */
        char *next_top;      /* qcow2: the layer the sandbox goes on in */
        char *frozen;        /* the checkpoint's disk, once taken */
} DiskCheckpoint;
int disk_checkpoint_prepare(const char *state_dir, const char *data_dir, uint64_t size_mib, DiskCheckpoint *ret,
                            char **reterr_message);
int disk_checkpoint_take(Qmp *q, const char *state_dir, const char *data_dir, DiskCheckpoint *c,
                         char **reterr_message);
void disk_checkpoint_done(DiskCheckpoint *c, bool keep);
int sandbox_disk_set(const char *data_dir, const char *disk);
int sandbox_disk_get(const char *data_dir, char **ret);
int qcow2_backing_file(const char *path, char **ret);
int layers_gc(Manager *m);

/* checkpoint.c */
Checkpoint *checkpoint_find(Manager *m, const char *ref);   /* id, unique id prefix or name */
Checkpoint *checkpoint_free(Checkpoint *c);
int checkpoint_create_start(Manager *m, Sandbox *s, const char *name, Operation **ret_op, Checkpoint **ret_cp,
                            OperationError *reterr);
int checkpoint_remove(Manager *m, Checkpoint *c, OperationError *reterr);
int sandbox_restore_start(Manager *m, Sandbox *s, Checkpoint *c, Operation **ret_op, OperationError *reterr);
/* Forks count sandboxes from a checkpoint, or from a running sandbox through a checkpoint taken first. */
int fork_start(Manager *m, Sandbox *from_sandbox, Checkpoint *from_checkpoint, unsigned count,
               Operation **ret_op, char ***ret_sandbox_ids, OperationError *reterr);
int checkpoints_load(Manager *m);
void fork_child_done(Manager *m, const char *fork_op_id, bool ok, const char *message);
void checkpoints_free(Manager *m);

/* pool.c: warm pools (decision 4) */
typedef struct PoolConfig {
        char *template_name;
        unsigned size;
        struct PoolConfig *next;
} PoolConfig;
int pools_load(Manager *m);
int pool_set(Manager *m, const char *template_name, unsigned size, char **reterr_message);
void pool_refill(Manager *m);
/* Refills once the machine has been free of handouts and creates for a moment: the new member's restore
 * would otherwise take the CPU from the first commands of the sandbox just handed out. */
void pool_refill_later(Manager *m);
unsigned pool_count(Manager *m, const char *template_name, bool ready_only);
/* Hands out a ready pooled sandbox for a create with the template's default shape: returns 1 with the
 * sandbox and its create operation, 0 when the pool has none. */
int pool_take(Manager *m, const Template *t, const char *name, char **env, Operation **ret_op, Sandbox **ret,
              OperationError *reterr);

/* lifecycle.c: pause, resume, suspend, wake. */
typedef enum LifecycleKind {
        LIFECYCLE_PAUSE,
        LIFECYCLE_RESUME,
        LIFECYCLE_SUSPEND,
        LIFECYCLE_WAKE,
} LifecycleKind;
int sandbox_lifecycle_start(Manager *m, Sandbox *s, LifecycleKind kind, Operation **ret_op, OperationError *reterr);
int sandbox_reconcile_lifecycle(Sandbox *s);
void lifecycle_tick(Manager *m);
void vm_cont_if_stopped(const char *run_dir);
/* One QMP command on a short connection to the sandbox's monitor. */
int vm_qmp_simple(const char *run_dir, const char *cmd, char **reterr);

/* operation.c */
Operation *operation_new(Manager *m, const char *kind, const char *sandbox_id);
Operation *operation_find(Manager *m, const char *id);
void operation_finish(Operation *op, const char *error_code, const char *error_message);
int operation_save(Operation *op);
void operations_free(Manager *m);
void operation_error_done(OperationError *e);
int operation_error_set(OperationError *e, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* worker.c: threads for blocking lifecycle work. */
struct Completion {
        void (*done)(Manager *m, void *userdata);
        void *userdata;
        Completion *next;
};
int worker_start(Manager *m, void *(*fn)(void *), void *arg);
void completion_post(Manager *m, void (*done)(Manager *m, void *userdata), void *userdata);
int completions_setup(Manager *m);

/* base.c: the template's base snapshot (decision 4). Blocking; call from a worker. */
typedef struct BaseSnapshot {
        char *dir;
        char *mem_path;
        char *state_path;
        char *disk_path;     /* what sandboxes' disks are cloned from (disk_clone) */
        char *kernel;
        char *initrd;
} BaseSnapshot;
typedef struct BaseRequest {
        char *lib_dir;
        char *state_dir;
        char *runtime_dir;
        char *qemu_binary;
        char *template_name;
        char *rootfs;
        char *template_digest;
        unsigned vcpu;
        uint64_t memory_mib;
        VmAccel accel;
        unsigned tsc_khz;
        unsigned tcg_cache_mib;
        DiskBackend disk_backend;
} BaseRequest;
void base_request_done(BaseRequest *r);
int base_request_init(Manager *m, const Template *t, unsigned vcpu, uint64_t memory_mib, BaseRequest *ret);
void base_snapshot_done(BaseSnapshot *b);
int base_snapshot_ensure(Manager *m, const BaseRequest *req, BaseSnapshot *ret, char **reterr_message);
/* At start: kills the QEMU of a base snapshot build that a dead daemon left, and removes its run dir. */
void base_cleanup_stale(const char *runtime_dir);
/* The command line of a VM restored from a snapshot of this base (a sandbox, a wake, a checkpoint). */
VmConfig base_restore_config(const BaseSnapshot *b, const BaseRequest *req, const char *run_dir, const char *disk);
/* The guest files and their digests. */
int guest_kernel_path(const char *lib_dir, char **ret_kernel, char **ret_initrd);
int file_digest(const char *path, char **ret);   /* "sha256:<hex>", from PATH.sha256 when fresh */

/* agent.c: the host side of the channel. */
/* Blocking handshake used by workers right after a restore: connects, pings, sends INIT (with disk_bytes
 * when not 0: the guest grows its root filesystem to that). Returns the connected fd. */
int agent_handshake(const char *socket_path, const char *sandbox_id, const char *hostname, char **env,
                    uint64_t disk_bytes, int timeout_ms, int *ret_fd, char **reterr_message);
/* INIT again on a handshaken fd that the event loop does not watch yet (a warm-pool handout). */
int agent_reidentify(int fd, const char *sandbox_id, const char *hostname, char **env, int timeout_ms,
                     char **reterr_message);
/* Runs argv to its end on a handshaken fd the event loop does not watch (output is dropped; it must be
 * small); env, cwd and user as an exec's (each may be NULL). */
int agent_run_blocking(int fd, char **argv, char **env, const char *cwd, const char *user, int timeout_ms);
/* Waits for the first HELLO after a cold boot. */
int agent_wait_hello(const char *socket_path, int timeout_ms, char **reterr_message);
int agent_attach(Sandbox *s, int fd);        /* takes over fd in the event loop */
int agent_connect(Sandbox *s);               /* after a daemon restart: reconnect */
AgentConn *agent_free(AgentConn *a);         /* its processes wait to be adopted by the next channel */
int agent_send(AgentConn *a, uint8_t type, uint8_t fd, uint32_t stream, const void *payload, size_t n);
uint32_t agent_new_stream(AgentConn *a);
int agent_register_process(AgentConn *a, Process *p);
int agent_register_stream(AgentConn *a, Process *p, uint32_t stream);   /* a known stream, after a restart */
void agent_unregister_process(AgentConn *a, Process *p);
int agent_register_file(AgentConn *a, FileXfer *x);      /* a new stream for a file operation (files.c) */
void agent_unregister_file(AgentConn *a, FileXfer *x);
unsigned agent_process_count(AgentConn *a);
