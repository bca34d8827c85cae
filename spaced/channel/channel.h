/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The channel subsystem: the host side of the virtio-serial link to a sandbox's agent (lib/proto.h framing),
 * and what runs over it: processes (channel/process.h) and file transfers (channel/files.h). */

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "core/manager.h"
#include "proto.h"

typedef struct AgentHealth AgentHealth;

/* What the channel keeps of each sandbox; the sandbox holds it (Sandbox.channel) and the channel reaches it
 * through ChannelSandboxOps.channel. The channel sets agent, and agent_free() clears it. */
typedef struct ChannelSandbox {
        AgentConn *agent;                   /* its attached channel (agent.c); NULL while there is none */
        AgentHealth *agent_health;          /* backoff and protocol errors of its channel, across reconnects */
        /* At least what its process logs hold (channel/process*.c): the sum a scan of the directory found, plus
         * everything written since. An exec scans again only once this passes the limit. */
        uint64_t process_log_bytes;
        bool process_log_bytes_known;
        unsigned processes_unpruned;        /* processes started since the last prune of its finished ones */
} ChannelSandbox;

/* Where a sandbox is, as the channel needs to know: up (its channel is wanted), going (being deleted), or down
 * (stopped or failed). */
typedef enum ChannelSandboxPhase {
        CHANNEL_SANDBOX_UP,
        CHANNEL_SANDBOX_DELETING,
        CHANNEL_SANDBOX_DOWN,
} ChannelSandboxPhase;

/* What the channel reads of a sandbox and tells it, which sits above it: sandbox/ sets these at start
 * (sandbox_register_ops()). The channel keeps a Sandbox only as a handle. */
typedef struct ChannelSandboxOps {
        Sandbox *(*find)(Manager *m, const char *id);        /* NULL: gone */
        Manager *(*manager)(Sandbox *s);
        const char *(*id)(Sandbox *s);
        const char *(*run_dir)(Sandbox *s);
        const char *(*data_dir)(Sandbox *s);
        const char *(*state_name)(Sandbox *s);                /* for messages */
        const char *(*template_name)(Sandbox *s);             /* for messages: what it was made from */
        ChannelSandboxPhase (*phase)(Sandbox *s);
        ChannelSandbox *(*channel)(Sandbox *s);
        bool (*busy)(Sandbox *s);                             /* a lifecycle operation is in flight */
        bool (*qemu_alive)(Sandbox *s);
        void (*mark_failed)(Sandbox *s, const char *reason);  /* as sandbox_mark_failed() */
        void (*qemu_exited)(Sandbox *s);                      /* its channel went with its QEMU */
        void (*touch)(Sandbox *s);                            /* it is being used now (last_active) */
        void (*reconnected)(Sandbox *s);                      /* its channel is back, its workload maybe frozen */
} ChannelSandboxOps;
void channel_set_sandbox_ops(const ChannelSandboxOps *ops);
/* The channel's files read a sandbox through these. */
extern const ChannelSandboxOps *channel_sandbox;

/* Someone (an HTTP request) waiting on a channel object for something that comes later: a process's start, its
 * output, stdin credit, a file transfer's answer or data. The object calls wake each time that may have
 * happened and knows nothing of who waits (ARCHITECTURE.md, "Layers"). Unlike core/waiter.h's one-shot
 * Waiter it stays until withdrawn: wake may come many times, and when nothing waits right then. */
typedef struct ChannelWaiter {
        void (*wake)(void *userdata);    /* NULL: nobody waits */
        void *userdata;
} ChannelWaiter;

static inline void channel_waiter_wake(const ChannelWaiter *w) {
        if (w->wake)
                w->wake(w->userdata);
}

/* What a channel object's read function returns besides a byte count; 0 means nothing now (its waiter is
 * woken when there is more). */
#define CHANNEL_READ_END ((ssize_t) -1)     /* all was read */
#define CHANNEL_READ_ERROR ((ssize_t) -2)   /* cut short: what was read is incomplete */

/* agent.c: the host side of the channel. */
/* The blocking handshake of workers restoring a VM, in two halves: _send connects, pings and sends INIT (with
 * disk_bytes when not 0: the guest grows its root filesystem to that; with the daemon's CA when with_ca, for a
 * guest saved elsewhere than in a base named by it) while the restored VM still stands, before cont, so that
 * its identity (clock, RNG seed) is the first thing its agent reads when it runs (ARCHITECTURE.md, decision 4);
 * _finish waits, after cont, for the answers on the fd _send returned. */
/* A volume mount as sandboxes keep it and identity INITs carry it: "VOLUME-ID:PATH" (an id has no ':'). The
 * length of its id (0 when it has no ':') and its path. */
static inline size_t channel_mount_id_len(const char *mount) {
        const char *colon = strchr(mount, ':');
        return colon ? (size_t) (colon - mount) : 0;
}
static inline const char *channel_mount_path(const char *mount) {
        const char *colon = strchr(mount, ':');
        return colon ? colon + 1 : "";
}
/* mounts: the volumes its guest is to have mounted ("VOLUME-ID:PATH" each; lib/proto.h, INIT mount_volume),
 * those it has already kept; _finish is told how many, and fails (ERROR_NOT_SUPPORTED) for an agent that
 * predates mounts. */
int agent_handshake_send(const char *socket_path, const char *sandbox_id, const char *hostname, char **env,
                         char **mounts, uint64_t disk_bytes, bool with_ca, int timeout_ms, int *ret_fd,
                         Error *reterr);
int agent_handshake_finish(int fd, unsigned mounts, int timeout_ms, Error *reterr);
/* INIT again on a handshaken fd that the event loop does not watch yet (a warm-pool handout), without waiting
 * for the answer: agent_attach_reidentified() takes the fd and the answer. The agent reads its channel in order,
 * so every command sent after it runs with the new identity; a guest that refuses it fails the sandbox. */
int agent_reidentify_send(int fd, const char *sandbox_id, const char *hostname, char **env, char **mounts,
                          Error *reterr);
int agent_attach_reidentified(Sandbox *s, int fd);
/* INIT again on an attached channel (the clock, a fresh RNG seed, the same id, hostname and env), answered in
 * the event loop like a handout's: for a guest whose vCPUs stood still while it lived on. */
int agent_reidentify(AgentConn *a, const char *sandbox_id, const char *hostname, char **env, char **mounts);
/* Runs `true` (through PATH, with env, cwd and user as an exec's) on the attached channel and forgets it: no
 * process row, no log; its frames are taken as those of a stream nobody follows. Under TCG a new QEMU's first
 * command pays for translating the guest's fork and exec paths: this one pays it while the user is not waiting. */
int agent_warm_up_send(AgentConn *a, char **env, const char *cwd, const char *user);
/* Runs argv to its end on a handshaken fd the event loop does not watch (output is dropped; it must be
 * small); env, cwd and user as an exec's (each may be NULL). Returns its exit status (128 + the signal that
 * killed it), or -errno. */
int agent_run_blocking(int fd, char **argv, char **env, const char *cwd, const char *user, int timeout_ms);
/* The one INIT of a template's base snapshot's guest on fd (as above), which has no identity yet: env, the CA
 * to trust (ca_pem; NULL: none) and the template's service, cmd (a shell line; NULL: none), which the agent
 * starts as user in cwd with env and keeps running (lib/proto.h, INIT ca= and service=). */
int agent_base_init_blocking(int fd, const char *ca_pem, const char *cmd, const char *user, const char *cwd,
                             char **env, int timeout_ms, Error *reterr);
/* The daemon's CA certificate (PEM) that identity INITs carry (lib/proto.h, ca=; all but a create's from its
 * base, which has it), so that a copy of an older snapshot trusts today's CA: set once at start, before a
 * sandbox is restored; -EINVAL for anything but one certificate (a key never goes to a guest). */
int agent_set_guest_ca(const char *pem);
/* The workload's freeze (lib/proto.h, PING "freeze"), before a save that others restore from; the next INIT
 * thaws it. agent_freeze asks on the attached channel and calls done once, in the event loop: r is 1 when the
 * workload stands still, 0 when the agent froze nothing (an older one), -ETIMEDOUT after timeout_usec,
 * -ECONNRESET when the channel went, or the guest's -errno with its message. -EBUSY when a freeze is already
 * waiting. agent_freeze_blocking does the same on a handshaken fd the event loop does not watch; reterr gets
 * the reason of a negative answer. */
typedef void (*AgentFreezeDone)(int r, const char *message, void *userdata);
int agent_freeze(AgentConn *a, uint64_t timeout_usec, AgentFreezeDone done, void *userdata);
int agent_freeze_blocking(int fd, int timeout_ms, Error *reterr);
/* The last word before a stop (lib/proto.h, PING "stop"): the workload is frozen and the guest's filesystems
 * synced, so that its disk holds what it wrote when QEMU is shut down. done as agent_freeze()'s: r 1 when
 * synced, 0 when the agent synced nothing (an older one), -ETIMEDOUT, -ECONNRESET. */
int agent_stop_sync(AgentConn *a, uint64_t timeout_usec, AgentFreezeDone done, void *userdata);
#define AGENT_STOP_SYNC_TIMEOUT_USEC (30ULL * 1000000) /* a sync of a guest's dirty pages, under TCG too */
#define AGENT_FREEZE_TIMEOUT_USEC (5ULL * 1000000) /* the agent gives up after 2 s: this is for the trip */
/* Waits for the first HELLO after a cold boot; ret_fd (may be NULL) gets the channel, for agent_run_blocking(). */
int agent_wait_hello(const char *socket_path, int timeout_ms, int *ret_fd, Error *reterr);
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
uint32_t agent_new_free_stream(AgentConn *a);   /* a host stream id no open stream uses */
size_t agent_queued(AgentConn *a);              /* bytes waiting to go to the guest */
Sandbox *agent_sandbox(AgentConn *a);
/* Streams the guest opens (lib/proto.h, "Tunnels"): CONNECT and RESOLVE go to whoever serves them (the egress
 * gateway, set at start), so that the channel does not depend on egress. Without one they are refused. */
typedef struct ChannelGuestOps {
        void (*connect)(AgentConn *a, uint32_t stream, const uint8_t *kv, size_t n);
        void (*resolve)(AgentConn *a, uint32_t stream, const uint8_t *kv, size_t n);
} ChannelGuestOps;
void channel_set_guest_ops(const ChannelGuestOps *ops);
/* Who answers the guest's VOLUME requests (lib/proto.h, "Volume mounts"): the sandboxes, which know what each
 * guest has mounted (sandbox/mounts.c). It answers each at once, VOLUME or ERROR on the same stream. Without
 * one the requests are dropped (no guest has a mount then). */
typedef void (*ChannelVolumeFn)(AgentConn *a, uint32_t stream, const uint8_t *payload, size_t n);
void channel_set_volume_handler(ChannelVolumeFn fn);
/* ERROR(code, message) on a guest stream: a CONNECT or RESOLVE refused. */
void channel_refuse_guest_stream(AgentConn *a, uint32_t stream, SpaceCode code, const char *message);
/* A sandbox's channel health across reconnects (backoff, protocol errors); freed with the sandbox. */
AgentHealth *agent_health_free(AgentHealth *h);
uint64_t agent_health_next_delay(Sandbox *s);   /* usec before the next reconnect would be tried */

