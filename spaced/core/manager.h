/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The daemon's root object and the names of its model's types. Everything the Manager holds is owned by the
 * event loop thread; worker threads get copies of what they need (core/worker.h) and hand results back
 * through Manager.completions. Each type is defined in its subsystem's header (ARCHITECTURE.md). */

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "core/config.h"
#include "core/host.h"

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;
typedef struct Operation Operation;
typedef struct AgentConn AgentConn;
typedef struct Process Process;
typedef struct Http Http;
typedef struct Store Store;
typedef struct Completion Completion;
typedef struct Checkpoint Checkpoint;
typedef struct FileXfer FileXfer;
typedef struct TlsCa TlsCa;
typedef struct Template Template;
typedef struct PoolConfig PoolConfig;
typedef struct EgressSettings EgressSettings;
typedef struct Secret Secret;
typedef struct Volume Volume;
typedef struct Operation Operation;

#define SANDBOX_ID_LEN 32
#define SANDBOX_TOKEN_LEN 32   /* the E2B envd access token, hex */
#define CHECKPOINT_ID_LEN 19 /* "cp-" + 16 hex */
#define OPERATION_ID_LEN 19 /* "op-" + 16 hex */
#define FORWARD_ID_LEN 19   /* "fw-" + 16 hex */
#define SECRET_ID_LEN 20    /* "sec-" + 16 hex */
#define VOLUME_ID_LEN 20    /* "vol-" + 16 hex */
#define SANDBOX_NAME_MAX 63
#define SANDBOX_ENV_MAX 256

struct Manager {
        sd_event *event;
        Store *store;
        Http *http;
        Config config;
        char *config_path;          /* the spaced.conf read (it may not exist: then the defaults) */
        int64_t config_loaded_at;   /* when it was read, at start or by the last reload (unix time) */
        char **config_restart_needed; /* settings the file changed that take a restart (spaced/reload.c) */
        /* Re-reads the configuration (spaced/reload.c, set by main.c; POST /v1/daemon/reload calls it): 0, or
         * < 0 with reterr naming what was wrong, the configuration in use unchanged. */
        int (*reload)(Manager *m, Error *reterr);
        EgressSettings *egress;     /* egress's own keys of the configuration (egress/egress.h) */
        TlsCa *tls_ca;              /* the local CA (core/tls.h), loaded at start */
        char *state_dir;
        char *runtime_dir;
        char *lib_dir;
        char *socket_path;
        VmAccel accel;
        /* Whether the QEMUs started now run in namespaces of their own (ARCHITECTURE.md, decision 12): the probe
         * at start, then what the last QEMU started found; and why not. */
        bool confined;
        char *unconfined_reason;
        unsigned tsc_khz;
        char *host_fingerprint;     /* vm_host_fingerprint() at start: what snapshots made now record */
        char *accel_reason;         /* why accel is what it is (the setting, or what vm_kvm_check() found) */
        char *accel_probe;          /* what the probe VM under KVM found, and whether from the cache, or why it
                                     * did not run (spaced/accel-start.c) */
        unsigned host_cpus;
        DiskBackend disk_backend;   /* of $state, for new base snapshots */
        uint64_t memory_limit_mib;
        Template *templates;
        Sandbox *sandboxes;
        Operation *operations;
        Checkpoint *checkpoints;
        Secret *secrets;            /* secret/secret.h */
        Volume *volumes;            /* volume/volume.h */
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
