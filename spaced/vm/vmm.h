/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The VMM driver (ARCHITECTURE.md, decisions 1, 4, 7, 12): QEMU -M microvm, one process per sandbox, driven over QMP.
 * Everything here is blocking and meant to be called from an operation's worker thread, never from the event
 * loop. Functions return 0 or -errno; when reterr is non-NULL a failure also fills it with
 * ERROR_INTERNAL and a human-readable reason (QMP's "desc", QEMU's stderr tail, ...).
 *
 * A VM's runtime files live in one directory (VmConfig.run_dir):
 *   qmp.sock    QMP monitor (QEMU is the server)
 *   events.sock a second QMP monitor, for the daemon's event loop to watch the VM's run state (vm-events*.c)
 *   agent.sock  virtio-serial port "agent" (QEMU is the server, so the daemon can reconnect at any time)
 *   qemu.pid    QEMU's pid, written by vm_spawn()'s helper (QEMU's -pidfile would hold 1, its pid in its own pid
 *               namespace when confined)
 *   qemu.log    QEMU's stderr (truncated at start, O_APPEND so vm_log_trim() can cut it while QEMU runs)
 * The guest console (hvc0) goes to a 128 KiB ring buffer inside QEMU, not to a file, so a guest writing to it
 * without end costs nothing on the host; read it with vm_console_read().
 *
 * The command line always adds -no-reboot: a guest that reboots or panics ends QEMU rather than cold-booting;
 * with hold_at_shutdown (a sandbox's VM) -no-shutdown too, so that QEMU stops it instead and its console can still
 * be read (vm_events_watch()). It always has a pvpanic device.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "core/error.h"
#include "core/host.h"   /* VmAccel, VmConfine */

/* TCG's translation cache, whose written pages stay resident: a floor on each VM's private memory. 32 MiB
 * holds what a sandbox runs after a restore; an idle sandbox fills 16 MiB of it. With 12 each VM keeps about
 * 4.5 MiB less, but the cache flushes between a warm pool's warm-up and the first command, which then takes
 * ~150 ms more (measured: tcg_cache_mib in spaced.conf trades the two). KVM has no such cache. */
#define VM_TCG_CACHE_MIB_DEFAULT 32U

/* The memory backend's id, which is also the name of the guest RAM's block in a migration stream
 * (lib/migstream.h splits a checkpoint's stream by it). */
#define VM_MEM_BACKEND_ID "mem"

typedef struct VmConfig {
        const char *qemu_binary;  /* NULL: "qemu-system-x86_64" from PATH */
        const char *run_dir;      /* must exist, mode 0700 */
        const char *kernel;       /* PVH vmlinux */
        const char *initrd;
        const char *disk;         /* root disk image (qcow2 overlay or raw), attached as virtio-blk "vda"; NULL:
                                   * none, and the agent stays in the initramfs (the accelerator's probe) */
        const char *disk_format;  /* "qcow2" or "raw" */
        const char *disk_dir;     /* the sandbox's own directory the disk is in, bound writable when confined,
                                   * so a layer linked there later reaches QEMU; NULL: the disk alone is bound */
        const char *mem_path;     /* memory-backend-file path (the base snapshot's or a checkpoint's RAM file) */
        bool mem_share;           /* share=on while building a base snapshot, share=off for sandboxes */
        unsigned vcpus;
        uint64_t memory_mib;
        VmAccel accel;
        unsigned tsc_khz;         /* for TCG: tsc_early_khz= on the kernel command line */
        unsigned tcg_cache_mib;   /* for TCG: the translation cache's size; 0 = VM_TCG_CACHE_MIB_DEFAULT */
        const char *kernel_args;  /* extra kernel command line, may be NULL */
        bool incoming;            /* start with -incoming defer; vm_restore_state() then feeds the state */
        bool hold_at_shutdown;    /* -no-shutdown: a guest that resets or powers off leaves QEMU stopped in state
                                   * "shutdown", its console readable, for vm_events_watch() to report (a
                                   * sandbox's VM); false: QEMU exits then (a base snapshot's build) */
        VmConfine confine;
} VmConfig;

/* Why a QEMU started with confine = off runs unconfined. */
#define VM_UNCONFINED_OFF "confine = off in spaced.conf"

/* Whether QEMU can be confined here: forks a child that makes the namespaces vm_spawn() makes, with nothing in
 * them. 0 if so; else -errno and in *ret_reason why not (the sysctl or policy that refuses them, when one
 * does, and what changes it). */
int vm_confine_probe(char **ret_reason);

/* accel.c. Whether KVM can run our guests: the device (vm_kvm_device(): /dev/kvm, or $SPACE_KVM_DEVICE, a
 * test's double) opens read-write, speaks KVM's API and creates a VM, and is not kvm-pvm. 0, or -errno and in
 * *ret_reason what failed and what to do about it (the kvm group, another hypervisor). */
const char *vm_kvm_device(void);
int vm_kvm_check(char **ret_reason);
/* KVM when vm_kvm_check() passes, else TCG; *ret_reason (may be NULL) says why. The device checks alone, for
 * tools (tests/tools/vm-smoke): the daemon's accel = auto also runs the probe VM below (spaced/accel-start.c). */
VmAccel vm_accel_detect(char **ret_reason);
unsigned vm_host_tsc_khz(void);

/* accel-probe.c. The accelerator's probe: QEMU with -accel kvm and a sandbox's machine and CPU, confined as a
 * sandbox's QEMU is, boots the guest kernel and initramfs (no root disk: the agent says hello from the
 * initramfs) until the agent's first word on its channel, and is killed by its pid then or at timeout_ms.
 * KVM boots this guest to the hello in well under a second; TCG, emulating every instruction, takes about
 * 3.5 s on the development machine. VM_ACCEL_PROBE_TIMEOUT_MS is past both: a loaded host keeps a margin of
 * several times KVM's boot, and a KVM that is slower than emulation is not worth using. What it costs is paid
 * once per cache key (accel-cache.c), and only on hosts where KVM hangs (kvm-pvm spins in the kernel). */
#define VM_ACCEL_PROBE_TIMEOUT_MS 5000
/* How the probe hears the agent's first word on its channel: channel/'s agent_wait_hello(), which vm/, below
 * channel/, cannot name. 0 on the hello; -ETIMEDOUT when timeout_ms passed without it. */
typedef int (*VmHelloWait)(const char *agent_socket, int timeout_ms, Error *reterr);
typedef struct VmAccelProbe {
        const char *qemu_binary;  /* NULL: "qemu-system-x86_64" from PATH */
        const char *run_dir;      /* made (0700) if missing, removed after */
        const char *kernel;
        const char *initrd;
        VmConfine confine;
        int timeout_ms;           /* for the hello, from the moment QEMU has opened KVM */
        VmHelloWait wait_hello;
} VmAccelProbe;
/* The probe VM's command line, as vm_accel_probe() starts it. */
int vm_accel_probe_argv(const VmAccelProbe *p, char ***ret_argv);
/* Runs the probe: 0 when the agent said hello, else -errno (-ETIMEDOUT: no hello in time). Either way
 * *ret_outcome says what happened, for the log and /v1/info ("the agent said hello in 310 ms", "no agent hello
 * within 5 s", "QEMU exited before the agent said hello: <its last words>"). */
int vm_accel_probe(const VmAccelProbe *p, char **ret_outcome);

/* accel-cache.c. The probe's outcome kept per user ($SPACE_CACHE_DIR, else $XDG_CACHE_HOME/space, else
 * ~/.cache/space: lib/paths.h's space_cache_dir()), one file per key, so that a daemon's start pays for the
 * probe only when something it depends on changed. */
typedef struct VmAccelCache {
        char *key;        /* vm_accel_cache_key(): what the outcome depends on */
        int64_t time;     /* when the probe ran, unix seconds */
        bool ok;          /* the agent said hello */
        char *outcome;    /* vm_accel_probe()'s words */
} VmAccelCache;
void vm_accel_cache_done(VmAccelCache *c);
/* The host's fingerprint under KVM (vm_host_fingerprint(VM_ACCEL_KVM, ...): QEMU's build, the host kernel,
 * microcode and CPUID), and the digests of the guest kernel and initramfs. */
int vm_accel_cache_key(const char *fingerprint, const char *kernel_digest, const char *initrd_digest, char **ret);
/* cache_dir/accel-probe-<the first 16 hex digits of the key's sha256>. */
int vm_accel_cache_path(const char *cache_dir, const char *key, char **ret);
int vm_accel_cache_format(const VmAccelCache *c, char **ret);
/* Reads a cache file's text: 0 and *ret when it is well formed, holds key and is still good (a failure is
 * trusted for a day, a success until the key changes); -ESTALE when it is well formed but is not (another key,
 * an old failure); -EBADMSG for anything else (garbage is ignored, never trusted). now: unix seconds. */
int vm_accel_cache_parse(const char *text, const char *key, int64_t now, VmAccelCache *ret);
/* The same from path: also -EBADMSG when it is not a regular file of our own or is too large; -ENOENT. */
int vm_accel_cache_load(const char *path, const char *key, int64_t now, VmAccelCache *ret);
/* Writes c to path atomically (a new file renamed over it), making its directory (0700) when missing. */
int vm_accel_cache_save(const char *path, const VmAccelCache *c);

/* host-fingerprint.c: what a snapshot made here depends on besides its files (accel, the QEMU build, and under
 * KVM the host kernel, microcode and the CPUID KVM offers), as one line of key=value fields. Runs QEMU
 * --version once: call it at start. */
int vm_host_fingerprint(VmAccel accel, const char *qemu_binary, char **ret);
/* Whether a snapshot made under fingerprint was (NULL or "": by a spaced from before fingerprints) may not be
 * restored under now; then buf says which fields differ, in words ("qemu X here, Y when it was made"). */
bool vm_fingerprint_explain(const char *was, const char *now, char *buf, size_t size);

/* Builds argv (NULL-terminated, malloc'd strv) for QEMU. Same config => same command line; restore needs the
 * exact command line of the saved VM apart from -incoming and share=. */
int vm_build_argv(const VmConfig *c, char ***ret_argv);

/* Starts QEMU detached from the daemon (own session via double fork, stdin /dev/null, stderr to
 * run_dir/qemu.log) so it outlives spaced; confined as c->confine says, every path on its command line bound
 * at the same path inside. Returns QEMU's pid as the daemon sees it (the fork's, also in run_dir/qemu.pid), and
 * in *ret_unconfined (optional) NULL when QEMU runs in its namespaces, else why not: confine = off, or under
 * auto what the host refused. */
int vm_spawn(const VmConfig *c, pid_t *ret_pid, char **ret_unconfined, Error *reterr);

/* QMP client: connect (retrying until timeout_ms while the socket appears), read the greeting, send
 * qmp_capabilities. */
typedef struct Qmp Qmp;
int qmp_open(const char *path, int timeout_ms, Qmp **ret, Error *reterr);
Qmp *qmp_close(Qmp *q);
/* Sends {"execute": cmd, "arguments": args_json (may be NULL)} and waits for the matching return/error,
 * skipping events. *ret_return_json (optional) gets the "return" value as JSON text. An error reply gives
 * -EIO and its desc in reterr. An fd >= 0 is passed with SCM_RIGHTS along with the command
 * (for getfd). */
int qmp_execute(Qmp *q, const char *cmd, const char *args_json, int pass_fd, int timeout_ms,
                char **ret_return_json, Error *reterr);
/* vmm-verbs.c: what the other subsystems ask of a VM over its monitor. */
int vm_cont(Qmp *q, int timeout_ms, Error *reterr);    /* runs its CPUs again */
int vm_stop(Qmp *q, int timeout_ms, Error *reterr);    /* stops them; QEMU drains and flushes its I/O first */
/* The same on a short connection to the monitor in run_dir, for callers that hold no Qmp (vm_qmp_simple()). */
int vm_cont_at(const char *run_dir, Error *reterr);
int vm_stop_at(const char *run_dir, Error *reterr);
/* Tells the guest its disk is now bytes large (virtio-blk's config-change interrupt). */
int vm_disk_resize(Qmp *q, uint64_t bytes, int timeout_ms, Error *reterr);
/* Puts the disk on overlay (a qcow2 file that exists, backed by the current top), which QEMU writes from now. */
int vm_disk_snapshot(Qmp *q, const char *overlay, int timeout_ms, Error *reterr);
/* Polls query-status until "status" is no longer `while_status`; returns the new status in *ret_status. */
int qmp_wait_status_change(Qmp *q, const char *while_status, int timeout_ms, char **ret_status,
                           Error *reterr);

/* Snapshot save with x-ignore-shared (RAM stays in the memory-backend-file): stop, migrate to state_fd via
 * getfd + "fd:", wait for completion. The VM is left stopped (status "postmigrate"; "cont" resumes it, disks
 * included, for checkpoint-and-continue). state_fd, here and for restore, is a file or pipe positioned where the
 * state goes / starts; QEMU gets its own copy of it. */
/* Called from vm_save_state() as the migration goes: bytes written so far, RAM bytes still to go. */
typedef void (*VmSaveProgress)(uint64_t written, uint64_t remaining, void *userdata);
int vm_save_state(Qmp *q, int state_fd, int timeout_ms, VmSaveProgress progress, void *userdata,
                  Error *reterr);
/* Restore into a QEMU started with incoming: sets x-ignore-shared, getfd + migrate-incoming fd:NAME, waits for
 * the migration to finish; leaves the VM paused (caller sends "cont"). */
int vm_restore_state(Qmp *q, int state_fd, int timeout_ms, Error *reterr);

/* vm_spawn() + qmp_open() while watching the process: a QEMU that exits before QMP answers is reported with
 * the tail of qemu.log at once, not after the timeout. On failure QEMU is killed. */
int vm_start(const VmConfig *c, int timeout_ms, pid_t *ret_pid, Qmp **ret_qmp, char **ret_unconfined,
             Error *reterr);
/* Last <= max bytes of run_dir/qemu.log, non-printable bytes replaced, trailing newlines dropped. */
int vm_log_tail(const char *run_dir, size_t max, char **ret);
/* Truncates run_dir/qemu.log to empty when it is larger than max_bytes (call now and then for long-lived VMs). */
int vm_log_trim(const char *run_dir, uint64_t max_bytes);
/* Drains the guest console ring buffer (what the guest wrote to hvc0 since the last read), control
 * characters scrubbed. */
int vm_console_read(Qmp *q, int timeout_ms, char **ret_text, Error *reterr);

/* Process helpers. */
/* The pid QEMU wrote to run_dir/qemu.pid (for adopting VMs after a daemon restart; check it with
 * vm_pid_alive() before trusting it). */
int vm_read_pidfile(const char *run_dir, pid_t *ret_pid);
bool vm_pid_alive(pid_t pid, const char *run_dir);   /* pid is alive and is our QEMU (cmdline names run_dir) */
int vm_kill(pid_t pid, const char *run_dir, int timeout_ms); /* SIGTERM, then SIGKILL; waits for it to go */

/* One QMP command on a short connection to the sandbox's monitor in run_dir. */
int vm_qmp_simple(const char *run_dir, const char *cmd, Error *reterr);
/* Resumes the VM in run_dir when its CPUs are stopped (a restore leaves them so). */
void vm_cont_if_stopped(const char *run_dir);

/* ---- the VM's run state (vm-events.c, vm-events-watch.c) ----
 * QEMU stops a VM on its own when KVM cannot emulate an instruction (status internal-error), when pvpanic says
 * the guest's kernel panicked (guest-panicked), and, with hold_at_shutdown, when the guest resets or powers off
 * (shutdown; a panic under panic=-1 and -no-reboot is a reset). The daemon learns of it on the second monitor,
 * VM_EVENTS_SOCKET in the run dir. Unlike the rest of vm/, the watcher runs in the event loop and never blocks;
 * QEMU is as untrusted as the guest, so what it sends is bounded (VM_EVENTS_LINE_MAX) and parsed with care. */
#define VM_EVENTS_SOCKET "events.sock"
#define VM_EVENTS_LINE_MAX (64U * 1024U)

typedef enum VmRunFailure {
        VM_RUN_OK,                /* running, or stopped by the daemon (pause, checkpoint, save) */
        VM_RUN_INTERNAL_ERROR,    /* internal-error: KVM could not emulate an instruction */
        VM_RUN_GUEST_PANICKED,    /* guest-panicked: pvpanic said so */
        VM_RUN_GUEST_SHUTDOWN,    /* shutdown: the guest reset or powered off (hold_at_shutdown kept QEMU) */
} VmRunFailure;
/* What a query-status "status" says of the VM: only the states QEMU enters by itself fail it. */
VmRunFailure vm_run_status_failure(const char *status);

/* One line from a QMP monitor, as the watcher needs it. */
typedef enum VmQmpKind {
        VM_QMP_OTHER,             /* well-formed, and nothing to act on: an unknown event, RESUME, ... */
        VM_QMP_GREETING,
        VM_QMP_RETURN,            /* a command's answer */
        VM_QMP_ERROR,             /* a command's error */
        VM_QMP_STOP,              /* the VM's CPUs stopped, by the daemon or by QEMU: query-status says which */
        VM_QMP_GUEST_PANICKED,
        VM_QMP_SHUTDOWN,
} VmQmpKind;
typedef struct VmQmpMsg {
        VmQmpKind kind;
        char id[32];              /* RETURN, ERROR: the id the command was sent with ("" when none or not ours) */
        char *text;               /* RETURN: a query-status answer's status or a string answer (ringbuf-read);
                                   * SHUTDOWN: its reason ("guest-reset", ...); NULL otherwise */
        bool guest;               /* SHUTDOWN: the guest asked for it (not a QMP quit or a signal) */
} VmQmpMsg;
/* Parses one line (without its newline). -EBADMSG when it is not a JSON object of QMP's shape; ret untouched
 * then. */
int vm_qmp_msg_parse(const char *line, VmQmpMsg *ret);
void vm_qmp_msg_done(VmQmpMsg *m);
/* The sandbox's error for failure f: console (may be NULL) is what the guest's console held, whose last
 * "Kernel panic" line is quoted (scrubbed, bounded); a reset or power-off whose console shows a panic is a
 * panic. shutdown_reason: the SHUTDOWN event's reason, NULL if none came. */
int vm_run_failure_reason(VmRunFailure f, const char *shutdown_reason, const char *console, char **ret);

/* The watcher of one VM's run state. fn runs at most once a watcher: with a failure and its reason (the VM is
 * stopped, QEMU still holds it), or with VM_RUN_OK when the watch ended: reason NULL when QEMU closed the
 * monitor (it exited), else why it was given up (QEMU broke the protocol). The watcher does nothing after it:
 * fn may free it. */
typedef struct VmEvents VmEvents;
typedef void (*VmEventsFn)(VmEvents *w, VmRunFailure f, const char *reason, void *userdata);
/* Connects to run_dir's VM_EVENTS_SOCKET without blocking and watches it on e: the greeting, capabilities,
 * then one query-status (what happened before it was watched: a restart of the daemon), then events.
 * -ENOENT or -ECONNREFUSED: no monitor there (a VM started by an older daemon, or gone). */
int vm_events_watch(sd_event *e, const char *run_dir, VmEventsFn fn, void *userdata, VmEvents **ret);
VmEvents *vm_events_free(VmEvents *w);
