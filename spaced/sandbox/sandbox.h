/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The sandbox subsystem: the state machine of a sandbox and its lifecycle (create, delete, pause, resume,
 * suspend, wake), checkpoints, restore and fork, warm pools, and the template's base snapshot. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/manager.h"
#include "core/digest.h"
#include "core/operation.h"
#include "channel/channel.h"
#include "disk/disk.h"
#include "vm/vmm.h"

enum {
        EXPIRY_REMOVE,
        EXPIRY_SUSPEND,
        EXPIRY_STOP,     /* stopped at its time to live: processes dropped, disk kept (E2B's mode 'filesystem') */
};

#define IDLE_TIMEOUT_DEFAULT (6 * 3600)

/* Whether a sandbox's QEMU runs in namespaces of its own (ARCHITECTURE.md, decision 12). */
typedef enum SandboxConfined {
        SANDBOX_CONFINED_UNKNOWN,   /* not started yet, or by a daemon that did not record it */
        SANDBOX_CONFINED_YES,
        SANDBOX_CONFINED_NO,        /* unconfined_reason says why */
} SandboxConfined;

typedef enum SandboxState {
        SANDBOX_CREATING,
        SANDBOX_RUNNING,
        SANDBOX_DELETING,
        SANDBOX_STOPPED,     /* no QEMU, the disk kept: stopped by the user (error NULL) or its QEMU died (error
                              * says how); 'start' boots it again from its disk */
        SANDBOX_ERROR,
        SANDBOX_PAUSED,      /* QEMU stopped, RAM resident */
        SANDBOX_SUSPENDING,  /* journaled: memory being written to the store */
        SANDBOX_SUSPENDED,   /* no QEMU; memory and device state in data_dir/suspend.state */
        SANDBOX_WAKING,      /* journaled: QEMU restoring from suspend.state */
        SANDBOX_POOLED,      /* restored and paused in a warm pool, not handed out yet: hidden from users */
        SANDBOX_STOPPING,    /* journaled: guest synced, QEMU being shut down (a stop) */
        SANDBOX_STARTING,    /* journaled: QEMU cold-booting the sandbox's own disk (a start) */
        _SANDBOX_STATE_MAX,
} SandboxState;

/* Only sandbox/ writes a Sandbox: tests/unit/check-sandbox-writers.sh compiles every other file of spaced with
 * SPACE_CHECK_SANDBOX_WRITERS, under which every field is const and a write to one does not compile. */
#ifdef SPACE_CHECK_SANDBOX_WRITERS
#define SANDBOX_RO const
#else
#define SANDBOX_RO
#endif

struct Sandbox {
        SANDBOX_RO struct {  /* all the fields (kept at one indent) */
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
        char *metadata;       /* the user's labels: a JSON object of strings, as text; NULL: none */
        char *access_token;   /* 32 hex: the E2B envd token (routes envd requests; ARCHITECTURE.md decision 11) */
        char *traffic_token;  /* 32 hex: E2B's traffic token, opens the sandbox's ports only (proxy/proxy.c) */
        bool auto_resume;     /* suspended by its time to live: used again (E2B envd, connect) wakes it */
        int64_t ttl;          /* the time to live last given, in seconds (0: none): counted again on a resume */
        /* Egress (space-egress(5)): the profiles chosen at create (or the defaults then), fixed for life, and
         * the sandbox's own allow and deny targets (sandbox_set_egress_lists() replaces them). Never NULL once
         * made or loaded. */
        char **egress_profiles;
        char **egress_allow;
        char **egress_deny;
        /* its own secret bindings (E2B's network.rules; egress_binding_parse_own() lines), replaced with its
         * lists; never NULL once made or loaded */
        char **egress_bindings;
        /* the volumes mounted in it (ARCHITECTURE.md, "Volumes"): "VOLUME-ID:PATH" each, fixed at create (a fork's
         * and a restore's are its checkpoint's, which its guest memory has mounted); never NULL once made or
         * loaded */
        char **mounts;
        /* Its QEMU as last started (create, wake, restore): in its namespaces or not, and why not. */
        SandboxConfined confined;
        char *unconfined_reason;
        char *host;          /* suspended: the host fingerprint its state was saved under (NULL: not recorded) */
        bool busy;           /* a lifecycle operation is in flight */
        bool pooled;         /* made for a warm pool (POOLED once ready) */
        bool has_pool_fd;
        int pool_fd;         /* pooled: the handshaken agent channel, watched only after handout */
        ChannelSandbox channel;             /* what the channel keeps of it (channel/channel.h), its AgentConn too */
        VmEvents *vm_events;                /* its QEMU's run state, watched (run-state.c); NULL: not watched */
        struct Forward *forwards;           /* its port forwards (sandbox/forward.h): they go with it */
        Sandbox *next;
        };
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
        char *state_path;    /* device state, and the RAM too when mem_path is NULL */
        char *mem_path;      /* the RAM as a file that its forks and restores map copy-on-write, as creates map
                              * the base snapshot's; NULL: a checkpoint from before, or whose split failed */
        int64_t created_at;
        uint64_t pause_usec; /* how long the sandbox was stopped to take it */
        uint64_t size_bytes;
        char **egress_profiles;   /* its sandbox's, for the sandboxes made from it */
        char **egress_allow;
        char **egress_deny;
        char **egress_bindings;
        char **mounts;       /* its sandbox's: the guest memory it holds has them mounted */
        char *host;          /* the host fingerprint it was made under (NULL: not recorded) */
        bool ready;
        Checkpoint *next;
};

const char *sandbox_state_to_string(SandboxState s);
int sandbox_state_from_string(const char *s, SandboxState *ret);

/* sandbox.c */
Sandbox *sandbox_find_by_id(Manager *m, const char *id);
/* Resolves an id, a unique id prefix or a name. -ENOENT or -ENOTUNIQ. */
int sandbox_resolve(Manager *m, const char *ref, Sandbox **ret);
Sandbox *sandbox_free(Sandbox *s);
void sandbox_unlink(Manager *m, Sandbox *s);
int sandbox_save(Sandbox *s);
/* Records how s's QEMU was just started: unconfined is vm_start()'s reason (taken; NULL: confined). The
 * daemon's view (GET /v1/info) follows what the last start found, with a warning when it changes for the worse. */
void sandbox_set_confined(Sandbox *s, char *unconfined);
/* The sandbox cannot be used any more (its guest abused the channel): QEMU is killed, state error with reason,
 * saved; the disk stays until rm. */
void sandbox_mark_failed(Sandbox *s, const char *reason);
/* After the sandbox's vCPUs stood still while it lived on (a resume, a checkpoint taken in place, a suspend
 * that gave up), the guest's clock is behind by that long: it gets the time again (and a fresh RNG seed). */
void sandbox_clock_resync(Manager *m, Sandbox *s);
/* quiesce.c: freezes s's workload before a save that others restore from (a fork, a checkpoint, a suspend, a
 * pause that a checkpoint may follow); the next INIT (sandbox_clock_resync(), a restore's or a wake's
 * handshake) thaws it. Only for a guest whose vCPUs run (a paused one cannot answer: it was frozen when it was
 * paused). then(m, job, how long the freeze took) runs once in the event loop, at once when s has no channel,
 * and after a failed freeze too (logged: the save goes on). */
typedef void (*SandboxQuiesced)(Manager *m, void *job, uint64_t freeze_usec);
void sandbox_quiesce(Manager *m, Sandbox *s, SandboxQuiesced then, void *job);
uint64_t manager_memory_in_use(Manager *m);
/* What a create makes: a sandbox from its template's base snapshot or, with source, from a checkpoint (a
 * restore or one child of a fork). vcpu, memory_mib, disk_mib 0: the template's default. */
typedef struct SandboxSpec {
        const char *template_ref;  /* NAME[:TAG] or digest; with source, the name recorded: the image is the
                                    * one the checkpoint was taken from */
        const char *name;          /* NULL: none */
        unsigned vcpu;
        uint64_t memory_mib;
        uint64_t disk_mib;
        char **env;                /* the user's, on top of the template's */
        const Checkpoint *source;
        const char *parent_op;     /* a fork's operation, told when this child is made or fails */
        bool pooled;               /* a warm pool member: hidden, left paused, never served from a pool */
        const char *metadata;      /* JSON object text of string labels; NULL: none */
        /* Its time to live: removed or suspended (on_expiry) ttl + ttl_grace seconds after the create (both 0:
         * never); ttl is kept, to be given again (sandbox_restart_timeout). ttl_grace bounds the create itself
         * when the time to live is to count from when it runs (sandbox_set_timeout then). */
        int64_t ttl;
        int64_t ttl_grace;
        int on_expiry;             /* EXPIRY_REMOVE (the default) or EXPIRY_SUSPEND */
        bool idle_timeout_set;     /* false: idle_timeout of spaced.conf */
        int64_t idle_timeout;      /* seconds without use before it is suspended; 0: never */
        bool auto_resume;          /* suspended by its time to live, it is woken by use (E2B envd, connect) */
        /* Egress profiles by name (NULL: the default ones; empty: none but the base policy) and the sandbox's
         * own allow and deny targets. With source, the checkpoint's are used instead: forks and restores keep
         * their parent's egress. */
        char **egress_profiles;
        char **egress_allow;
        char **egress_deny;
        char **egress_bindings;    /* its own secret bindings: each secret must exist (ERROR_SECRET_NOT_FOUND) */
        /* Volumes to mount: "NAME-OR-ID:PATH" each (sandbox/mounts.c checks them: ERROR_VOLUME_NOT_FOUND,
         * ERROR_INVALID_PATH, ERROR_INVALID_ARGUMENT for a path mounted twice). With source, on top of the
         * checkpoint's, which its guest has mounted already. */
        char **volume_mounts;
} SandboxSpec;
/* Journals the sandbox and its create operation and starts the worker; a create of the template's default
 * shape is served from its warm pool when that has a member. */
int sandbox_create(Manager *m, const SandboxSpec *spec, Operation **ret_op, Sandbox **ret_sandbox, Error *reterr);
/* Whether name may name a new sandbox: its shape (ERROR_INVALID_ARGUMENT) and that no sandbox has it
 * (ERROR_NAME_IN_USE). */
int sandbox_check_name(Manager *m, const char *name, Error *reterr);
int sandbox_delete_start(Manager *m, Sandbox *s, bool force, Operation **ret_op, Error *reterr);
/* What other subsystems change on a sandbox, each saved (but sandbox_touch). Its time to live, again: it ends
 * ttl seconds from now (0: now), and is kept to be given again. */
void sandbox_set_timeout(Sandbox *s, int64_t ttl);
/* Its own egress allow and deny lists, replaced while it runs (E2B's network update; its profiles stay fixed for
 * life): checked first (ERROR_INVALID_ARGUMENT names the entry, and nothing changes), then saved, and the
 * gateway decides its next connection by them. */
int sandbox_set_egress_lists(Sandbox *s, char *const *allow, char *const *deny, char *const *bindings,
                             Error *reterr);
/* Whether bindings may be a sandbox's own: each parses (ERROR_INVALID_ARGUMENT) and names secrets that exist
 * (ERROR_SECRET_NOT_FOUND naming the first that does not). */
int sandbox_check_bindings(Manager *m, char *const *bindings, Error *reterr);
/* Its time to live stops (a paused sandbox does not time out); the ttl is kept. */
void sandbox_stop_timeout(Sandbox *s);
/* A stopped time to live runs again, the whole ttl from now; nothing when it runs or there is none. */
void sandbox_restart_timeout(Sandbox *s);
/* It is being used now: its idle time counts from now. Not saved (that would be a write for every use): the
 * next save takes it. */
void sandbox_touch(Sandbox *s);
/* Every sandbox has its envd and traffic tokens from its create; a row of an older daemon that lacks them gets
 * them from reconcile, once, at start (so that no lookup makes one). Saves. */
int sandbox_ensure_tokens(Sandbox *s);
void sandbox_cleanup_vm_files(pid_t pid, const char *run_dir, const char *data_dir);
bool sandbox_state_holds_memory(SandboxState s);

/* A copy of a string list, empty (not NULL) for NULL; NULL when out of memory. */
char **sandbox_strv_copy(char *const *l);

/* mounts.c: volumes mounted in sandboxes (ARCHITECTURE.md, "Volumes"). sandbox_mounts_choose: what a create
 * mounts, "VOLUME-ID:PATH" each: its source's, then spec->volume_mounts checked (SandboxSpec). sandbox_volume_users:
 * who mounts volume_id (volume_set_users()). sandbox_volume_request: a guest's VOLUME request, answered for the
 * volumes its sandbox mounts only (channel_set_volume_handler()). */
int sandbox_mounts_choose(Manager *m, const SandboxSpec *spec, char ***ret, Error *reterr);
int sandbox_volume_users(Manager *m, const char *volume_id, char ***ret_ids);
void sandbox_volume_request(AgentConn *a, uint32_t stream, const uint8_t *payload, size_t n);

/* records.c: a Sandbox as its row of the store (core/store.h keeps plain SandboxRecords). */
int store_put_sandbox(Store *s, const Sandbox *sb);
/* Creates Sandbox objects for every row and links them into m->sandboxes. */
int store_load_sandboxes(Store *s, Manager *m);

/* ops.c: hands the subsystems below what they ask of sandboxes (disks and templates in use, ...); call once at
 * start, before anything runs. */
void sandbox_register_ops(void);

/* run-state.c: watches s's QEMU for the states it stops the VM in by itself (a guest panic, a KVM internal
 * error, a guest reset or power-off), which fail the sandbox with their reason. Called wherever its QEMU was just
 * started or adopted (create, handout, wake, restore, resume, a checkpoint's end, reconcile); again replaces the
 * watch. A QEMU without the events monitor (an older daemon's) is left unwatched, quietly. */
void sandbox_watch_vm(Sandbox *s);
void sandbox_unwatch_vm(Sandbox *s);

/* reconcile.c: at start, brings sandboxes and operations in line with what runs (ARCHITECTURE.md, "What
 * survives a daemon crash"). */
int manager_reconcile(Manager *m);

/* checkpoint.c */
Checkpoint *checkpoint_find(Manager *m, const char *ref);   /* id, unique id prefix or name */
Checkpoint *checkpoint_free(Checkpoint *c);
int checkpoint_create_start(Manager *m, Sandbox *s, const char *name, Operation **ret_op, Checkpoint **ret_cp,
                            Error *reterr);
int checkpoint_remove(Manager *m, Checkpoint *c, Error *reterr);
/* The files a restore or fork from c needs are there and of the sizes it needs: a clear error before any VM is
 * touched. Stats only. */
int checkpoint_check_files(Manager *m, const Checkpoint *c, Error *reterr);
/* host_mismatch when c was made under another host (vm_fingerprint_explain()); checkpoint_check_files does it
 * too. */
int checkpoint_check_host(Manager *m, const Checkpoint *c, Error *reterr);
/* The same for a memory file alone, from a worker: it is there, a regular file of memory_mib MiB. */
int checkpoint_mem_check(const char *mem_path, uint64_t memory_mib, Error *reterr);
int sandbox_restore_start(Manager *m, Sandbox *s, Checkpoint *c, Operation **ret_op, Error *reterr);
/* Forks count sandboxes from a checkpoint, or from a running sandbox through a checkpoint taken first. */
/* Forks count sandboxes from a sandbox (checkpointed first) or a checkpoint. name_prefix (NULL: none) names
 * them: the name itself for one fork, PREFIX-1 ... PREFIX-N for more, all checked free before anything starts. */
int fork_start(Manager *m, Sandbox *from_sandbox, Checkpoint *from_checkpoint, unsigned count,
               const char *name_prefix, Operation **ret_op, char ***ret_sandbox_ids, Error *reterr);
int checkpoints_load(Manager *m);
void fork_child_done(Manager *m, const char *fork_op_id, bool ok, const char *message);
void checkpoints_free(Manager *m);

/* pool.c: warm pools (ARCHITECTURE.md, decision 4) */
typedef struct PoolConfig {
        char *template_name;
        unsigned size;
        struct PoolConfig *next;
} PoolConfig;
int pools_load(Manager *m);
int pool_set(Manager *m, const char *template_name, unsigned size, Error *reterr);
void pool_refill(Manager *m);
/* Refills once the machine has been free of handouts and creates for a moment: the new member's restore
 * would otherwise take the CPU from the first commands of the sandbox just handed out. */
void pool_refill_later(Manager *m);
unsigned pool_count(Manager *m, const char *template_name, bool ready_only);
/* Hands out a ready pooled sandbox for a create with the template's default shape: returns 1 with the
 * sandbox and its create operation, 0 when the pool has none. */
int pool_take(Manager *m, const Template *t, const char *name, char **env, Operation **ret_op, Sandbox **ret,
              Error *reterr);
/* Makes room for a user's create of need_mib by removing as few ready members as that takes (none when even
 * all of them would not do). Returns 0 when it fits, -ENOSPC with what stays in use otherwise. */
int pool_evict_for(Manager *m, uint64_t need_mib, uint64_t *ret_in_use);

/* lifecycle.c: pause, resume, suspend, wake, stop and start. */
typedef enum LifecycleKind {
        LIFECYCLE_PAUSE,
        LIFECYCLE_RESUME,
        LIFECYCLE_SUSPEND,
        LIFECYCLE_WAKE,
        LIFECYCLE_STOP,   /* a running sandbox: its guest synced, QEMU shut down, its disk kept (stopped) */
        LIFECYCLE_START,  /* a stopped sandbox (or a suspended one, whose memory it drops): cold-booted from its
                           * own disk, with the same id, env, egress and ports; its processes are gone */
} LifecycleKind;
int sandbox_lifecycle_start(Manager *m, Sandbox *s, LifecycleKind kind, Operation **ret_op, Error *reterr);
int sandbox_reconcile_lifecycle(Sandbox *s);
void lifecycle_tick(Manager *m);

/* base.c: the template's base snapshot (ARCHITECTURE.md, decision 4). Blocking; call from a worker. */
typedef struct BaseSnapshot {
        char *dir;
        char *mem_path;
        char *state_path;
        char *disk_path;     /* what sandboxes' disks are cloned from (disk_clone) */
        char *kernel;
        char *initrd;
        ino_t ready_ino;     /* its `ready` as ensure found it: a discard leaves a newer build alone */
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
        VmConfine confine;
        DiskBackend disk_backend;
        char *host_fingerprint;    /* the Manager's: a base made under another is rebuilt */
        /* the template's env, workdir and user, for the command run in the base before its save */
        char **warm_env;
        char *warm_cwd;
        char *warm_user;
        /* the template's service (start) and the command that says it is ready, run before the save */
        char *service;
        char *service_ready;
        /* the daemon's CA (core/tls.h), put in the guest's trust before the save, and its fingerprint, which
         * names the base: a new CA gets a new base (NULL: none, in tests) */
        char *ca_pem;
        char *ca_fingerprint;
} BaseRequest;
void base_request_done(BaseRequest *r);
int base_request_init(Manager *m, const Template *t, unsigned vcpu, uint64_t memory_mib, BaseRequest *ret);
void base_snapshot_done(BaseSnapshot *b);
int base_snapshot_ensure(Manager *m, const BaseRequest *req, BaseSnapshot *ret, Error *reterr);
/* b did not restore: set it aside, so that the next ensure builds it again (unless another build replaced it
 * meanwhile). */
void base_snapshot_discard(Manager *m, const BaseSnapshot *b);
/* Runs a first command on a fresh guest (env, cwd and user as its sandbox's execs), so that the next ones do
 * not pay for what only a first one reads and, under TCG, translates; errors are only logged. */
void base_warm_up(int agent_fd, char **env, const char *cwd, const char *user);
/* Freezes the workload of the guest on agent_fd before a save that sandboxes restore (quiesce.c's reasons). */
void base_freeze(const BaseRequest *req, int agent_fd);
/* A base snapshot's directory is named
 * <template12>-k<kernel12>-i<initramfs12>-m<MiB>-c<vcpu>-<accel>[-btrfs]-ca<CA16>-pvpanic (the short digests of
 * what it was made from, the fingerprint of the CA its guest trusts, and its device set; older daemons put the
 * template's name first, and had no pvpanic or no CA). */
typedef struct BaseName {
        char template_digest[13];
        char kernel_digest[13];
        char initramfs_digest[13];
        char ca_fingerprint[17]; /* "" in a name without: a base made before guests trusted a CA is stale */
        bool devices_current;    /* saved with today's device set: a base without is stale */
} BaseName;
/* -EINVAL when name is not a base snapshot's directory name. */
int base_name_parse(const char *name, BaseName *ret);
/* At start: kills the QEMU of a base snapshot build that a dead daemon left, and removes its run dir. */
void base_cleanup_stale(const char *runtime_dir);
/* The command line of a VM restored from a snapshot of this base (a sandbox, a wake, a checkpoint). */
/* disk and disk_dir as disk_qemu_path() gives them. */
VmConfig base_restore_config(const BaseSnapshot *b, const BaseRequest *req, const char *run_dir, const char *disk,
                             const char *disk_dir);
/* A sandbox's cold boot from its own disk, with b's command line (a start): its QEMU up, the agent's hello and
 * the base's INIT (CA, service ready) on *ret_agent_fd; QEMU is left running on failure (*ret_pid says which). */
int base_cold_boot(const BaseSnapshot *b, const BaseRequest *req, const char *run_dir, const char *disk,
                   const char *disk_dir, pid_t *ret_pid, char **ret_unconfined, int *ret_agent_fd, Error *reterr);
/* The guest files and their digests. */
int guest_kernel_path(const char *lib_dir, char **ret_kernel, char **ret_initrd);

