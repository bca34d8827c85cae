/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* space-agent: the guest's PID 1. Boots the guest (boot.c), then serves the channel (channel.c) and runs the
 * processes the host asks for (exec.c, init.c). One thread, one poll loop (main.c). */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../lib/proto.h"
#include "../../lib/user.h"

/* Output to the port stops taking process output above this and stops reading the port above the hard
 * mark, so the queue stays bounded whether or not the host is reading. */
#define AGENT_OUTQ_HIGH (512U * 1024U)
#define AGENT_OUTQ_HARD (4U * 1024U * 1024U)
#define AGENT_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* log.c */
void log_open(void);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_err(...) log_msg(3, __VA_ARGS__)
#define log_warn(...) log_msg(4, __VA_ARGS__)
#define log_info(...) log_msg(6, __VA_ARGS__)

/* boot.c */
typedef struct BootConfig {
        char root[256];    /* space.root= ("" when absent) */
        char rootfstype[32];
} BootConfig;

void boot_early(void);                       /* /proc, /sys, /dev, fds 0-2, rlimits */
void boot_load_modules(const char *dir);
void boot_read_cmdline(BootConfig *ret);
int boot_switch_root(const BootConfig *c);
void boot_late_mounts(void);                 /* /tmp, /run, /dev/pts, /dev/shm, hostname */
int boot_open_port(const char *name, int timeout_ms); /* returns the fd or -errno */

/* disk.c: waits for the root disk to reach BYTES, then grows the mounted ext4 to it; MSG says why not. */
int disk_grow_root(uint64_t bytes, char *msg, size_t msg_size);

/* A process the host started with EXEC. */
typedef struct Stream {
        uint32_t id;
        pid_t pid;                 /* > 0 until reaped */
        int status;                /* wait status, valid when reaped */
        bool reaped;
        bool exit_sent;
        bool pty;
        int fd_in, fd_out, fd_err; /* our ends, -1 when closed; with a pty fd_out is the master, fd_in a dup */
        SpaceBuf in_buf;           /* stdin bytes not yet written to the process */
        bool in_eof;               /* host sent EOF on fd 0: close once in_buf drained */
        uint32_t in_credit_pending;/* stdin bytes written but not yet credited back */
        SpaceCredit in_credit;     /* what the host may still send on fd 0 */
        SpaceCredit out_credit[3]; /* what we may still send on fd 1 and 2 */
        uint64_t seq;              /* creation order, for evicting old finished streams */
        /* EXEC hold=1: the child waits before chdir and exec until RELEASE writes a byte to hold_fd; its exec
         * failure, if any, is then read from exec_err_fd. */
        int hold_fd, exec_err_fd;
        char *cwd, *argv0;         /* for the failure message */
        /* The command ends when its process exits, not when the last holder of its stdout/stderr closes them
         * (a background child may keep them open for ever): after the reap we forward what was written up to
         * then, out_left[fd] bytes, and close our ends. A pty's bytes may still be on their way to the master
         * at the reap, so its count is taken bound_at_ms (monotonic) later; 0 once taken or not needed. */
        bool out_bounded;
        size_t out_left[3];
        uint64_t bound_at_ms;
} Stream;

/* channel.c: the port and its output queue */
typedef struct Channel {
        int fd;
        int epoll_fd;              /* the port, edge-triggered: see channel_setup() */
        bool host_connected;
        SpaceFrameReader *reader;
        SpaceBuf out;
        size_t out_off;            /* bytes of out already written */
        size_t head_left;          /* bytes of a partially written frame still to go */
} Channel;

int channel_setup(Channel *c, int port_fd);
size_t channel_queued(const Channel *c);
/* Queues a frame; control frames always go in (they are bounded by what the host asks). */
int channel_send(Channel *c, uint8_t type, uint8_t fd, uint32_t stream, const void *payload, size_t n);
int channel_send_kv(Channel *c, uint8_t type, uint32_t stream, const SpaceBuf *kv);
void channel_send_error(Channel *c, uint32_t stream, int err, const char *message);
void channel_send_hello(Channel *c);
/* Reads and dispatches what the port has, writes what is queued. Call after any wakeup. */
void channel_io(Channel *c);
/* PING "freeze" and "stop" under way (channel.c): the fd to poll while one is (the group's events, a stop's sync
 * child), or -1, and the ms until it gives up, or -1; channel_freeze_tick answers it once the workload stands
 * still or time is up (and a stop's sync is done). */
int channel_freeze_fd(short *ret_events);
int channel_freeze_timeout(void);
void channel_freeze_tick(Channel *c);

/* exec.c: streams */
void streams_init(void);
Stream *stream_find(uint32_t id);
void exec_start(Channel *c, uint32_t id, const uint8_t *p, size_t n);
void stream_input(Channel *c, Stream *s, const uint8_t *p, size_t n);
void stream_input_eof(Channel *c, Stream *s);
void stream_credit(Stream *s, uint8_t fd, uint32_t n);
void stream_signal(Stream *s, int sig);
void stream_resize(Stream *s, unsigned rows, unsigned cols);
void stream_release(Channel *c, Stream *s);
/* ADOPT from a restarted host: STARTED again, EXIT again, or ERROR(ESRCH) for a stream we do not know. */
void stream_adopt(Channel *c, uint32_t id);
void stream_close(Stream *s);
/* Reaps every child (orphans too), ends the streams whose process exited, and those whose pty settled. */
void streams_reap(Channel *c);
/* The poll timeout the streams need: ms until a pty settles, or -1. */
int streams_poll_timeout(void);
/* poll plumbing: add the fds we want to wait on, then handle what came back. */
struct pollfd;
size_t streams_poll_fill(const Channel *c, struct pollfd *fds, size_t max, Stream **owners);
void streams_poll_handle(Channel *c, const struct pollfd *fds, size_t n, Stream **owners);
size_t streams_count(void);

/* entry.c: appends the entry records of path, whose lstat (or stat) is st, to b (lib/proto.h, "entry"): rel= first when
 * rel is given (a list's), then its stat, a symlink's target, resolved target and what it leads to, and its
 * user.e2b.* metadata, bounded. Reads as the identity the agent has now (a request's user). guest/agent/entry.c;
 * the one encoding of an entry, for FILE answers and watch events alike. */
struct stat;
int entry_add(SpaceBuf *b, const char *rel, const char *path, const struct stat *st);

/* files.c: FILE streams (stat, list, mkdir, remove, move, symlink, attrs, read, write) */

void files_handle(Channel *c, uint32_t id, const uint8_t *p, size_t n);
/* A frame on a stream: true when the stream is a file transfer's (and the frame was handled). */
bool files_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p);
/* Sends what reads and lists may send now; files_want_pump() says whether there is any (poll without
 * waiting then). */
void files_pump(Channel *c);
bool files_want_pump(const Channel *c);
/* The host went away or came back: unfinished transfers are dropped (uploads leave no file). */
void files_drop_all(void);
/* files.c, for files-child.c: the transfers a forked child inherited forgotten (their files left as they are),
 * and whether none is left. */
void files_forget_inherited(void);
bool files_idle(void);
/* files-child.c: FILE requests that reach into a volume mount (lexically or through symlinks), each run in a
 * forked child that talks frames with the loop over a socketpair, so that the loop goes on serving the mount
 * (see there). files_child_frame: a host frame on such a stream (true when it was one, passed on). */
bool files_child_wanted(const uint8_t *p, size_t n);
void files_child_start(Channel *c, uint32_t id, const uint8_t *p, size_t n);
bool files_child_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p);
size_t files_child_poll_fill(const Channel *c, struct pollfd *fds, size_t max); /* at most SPACE_FILE_XFERS_MAX */
void files_child_poll_handle(Channel *c, const struct pollfd *fds, size_t n);
void files_child_drop_all(void);               /* the host went away or came back: the children are killed */
/* files.c, shared with watch.c: acting as a user for the file system (setfsuid/setfsgid and its groups) until
 * identity_leave(), and names_add()'s owner= and group= when the guest names the ids. */
typedef struct FsIdentity {
        bool active;
        int n_groups;
        gid_t groups[SPACE_USER_GROUPS_MAX];
} FsIdentity;
int identity_enter(const SpaceUser *u, FsIdentity *saved);
void identity_leave(FsIdentity *saved);
int names_add(SpaceBuf *b, uid_t uid, gid_t gid);

/* watch.c: FILE op=watch (lib/proto.h), inotify in the guest. watch_is_request: whether a FILE payload asks
 * for one (op=watch), which watch_handle then serves. */
bool watch_is_request(const uint8_t *p, size_t n);
void watch_handle(Channel *c, uint32_t id, const uint8_t *p, size_t n);
bool watch_owns(uint32_t id);
/* A frame on a watch's stream (CREDIT, CLOSE): true when it was one (and handled). */
bool watch_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p);
/* poll plumbing: one inotify fd per watch, at most SPACE_WATCHES_MAX; watch_want_pump as files_want_pump. */
size_t watch_poll_fill(struct pollfd *fds, size_t max);
void watch_poll_handle(Channel *c, const struct pollfd *fds, size_t n);
bool watch_want_pump(const Channel *c);
void watch_pump(Channel *c);
/* The host went away or came back: every watch ends. */
void watch_drop_all(void);

/* service.c: the template's service, started once per guest from an INIT's service= and kept running.
 * service_configure: -EINVAL for a bad command, user or directory, -EBUSY when another command already runs.
 * service_reaped: whether pid was the service's (it is then started again after a delay). */
int service_configure(const char *cmd, const char *user, const char *cwd);
bool service_reaped(pid_t pid, int status);
int service_poll_timeout(void);            /* ms until a restart is due, or -1 */
void service_tick(void);                   /* starts it again when that is due */

/* user.c: EXEC user= (lib/user.h). user_resolve reads the guest's /etc/passwd and /etc/group: 0, or -errno with
 * *ret_code (SPACE_CODE_UNKNOWN_USER, _UNKNOWN_GROUP, _INVALID_USER, _EXEC_FAILED) and a message naming the user
 * or group. user_switch runs in the child. */
int user_resolve(const char *spec, SpaceUser *ret, SpaceCode *ret_code, char *msg, size_t msg_size);
bool user_home_usable(const SpaceUser *u);
int user_switch(const SpaceUser *u);

/* net*.c, tunnel.c: egress and inbound ports through the channel (tunnels, lib/proto.h; ARCHITECTURE.md,
 * decision 10). net_capture_setup runs in the initramfs, before the root switch; net_init opens the proxy,
 * transparent and DNS listeners; net_resolv_conf points the new root's /etc/resolv.conf at the stub. */
void net_capture_setup(void);
void net_init(void);
void net_resolv_conf(void);
/* HTTP_PROXY=... records for the processes we start (NULL-terminated), NULL when there is no proxy. */
const char *const *net_proxy_env(void);
/* PORT from the host: connect to a guest port, then a tunnel. */
void net_port(Channel *c, uint32_t id, const uint8_t *p, size_t n);
/* A frame on a tunnel's or a DNS question's stream: true when it was one of ours (and handled). */
bool net_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p);
/* The host went away or came back: its tunnels are reset, questions in flight fail. */
void net_drop_all(Channel *c);
/* poll plumbing, as for streams: net_poll_fill adds at most AGENT_NET_POLL_MAX fds. */
#define AGENT_NET_POLL_MAX (8 + SPACE_TUNNELS_MAX)
size_t net_poll_fill(const Channel *c, struct pollfd *fds, size_t max);
void net_poll_handle(Channel *c, const struct pollfd *fds, size_t n);
int net_poll_timeout(void);

/* freeze.c: the workload's cgroup, which the host has frozen around a snapshot others restore from, and INIT
 * thaws once the identity is in place. work_setup at boot mounts cgroup2 if need be and makes the group;
 * work_join puts the calling process in it (the EXEC and service child, before its exec); work_freeze_begin asks
 * every process in it to stop (-EOPNOTSUPP without the group), and work_freeze_check says whether all have (1),
 * not yet (0; work_events_fd wakes poll with POLLPRI when that changes): the loop goes on meanwhile, for a task
 * may be waiting on a volume mount that only the loop serves (channel.c gives it AGENT_FREEZE_TIMEOUT_MS, then
 * thaws). While it is frozen the agent keeps EXEC and RELEASE (channel.c), since their child would stop before
 * its exec, and does not restart the service. */
void work_setup(const char *dir);          /* dir: a test's group outside a VM, else NULL */
void work_join(void);
int work_freeze_begin(void);
int work_freeze_check(void);
int work_events_fd(void);
void work_thaw(void);
bool work_frozen(void);
#define AGENT_FREEZE_TIMEOUT_MS 2000

/* ca.c: the daemon's CA that INIT's ca= names, in the guest's trust (see there). ca_install writes it unless it
 * is in place already (msg says why not); ca_env is the SSL_CERT_FILE=... records for the processes we start
 * once it is, beneath INIT's env and the request's (NULL-terminated), NULL before. */
#define AGENT_CA_FILE "/etc/space/ca.pem"
#define AGENT_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define AGENT_CA_LOCAL_DIR "/usr/local/share/ca-certificates"
#define AGENT_CA_LOCAL_NAME "space-local-ca.crt"
int ca_install(const char *pem, char *msg, size_t msg_size);
const char *const *ca_env(void);

/* volume*.c: volumes mounted in the guest as FUSE file systems that the agent serves by asking the host
 * (lib/proto.h, "Volume mounts"; guest/agent/volume.h inside). volume_mount: INIT's mount_volume/mount_path
 * (0 when it is mounted there already; -errno with msg "mount PATH: ..."). volume_frame: an answer on a VOLUME
 * stream (true when it was one). volume_host_gone/back: the host went away (no answer comes to what was sent)
 * or came back (what has no answer is sent again on new streams, after HELLO). The loop itself must never enter
 * a mount: it would wait for its own answer. volume_path_mounted: whether an absolute path is at or below one,
 * lexically (FILE requests there run in a child: files-child.c). */
int volume_mount(const char *id, const char *path, char *msg, size_t msg_size);
bool volume_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p);
void volume_host_gone(void);
void volume_host_back(Channel *c);
bool volume_path_mounted(const char *path);
/* In a forked child (files-child.c): the table of mounts forgotten, none unmounted, so that it enters them. */
void volume_forget_inherited(void);
/* What the agent's own walks use beside a mount (files.c, watch.c): fstatat() that never asks a volume mount
 * (AT_STATX_DONT_SYNC: a mount point is described from the kernel's cache) and says whether what it found is in
 * one (then no walk goes into it, no xattr is read); whether a device is a mount's; and whether a symlink's text
 * leads into one (lexically: then no realpath, no xattr of its target). */
struct stat;
int volume_statat(int dirfd, const char *name, int flags, struct stat *ret, bool *ret_in_mount);
bool volume_dev_mounted(dev_t dev);
bool volume_link_leads_in(const char *link);
size_t volume_poll_fill(struct pollfd *fds, size_t max);   /* at most SPACE_VOLUME_MOUNTS_MAX */
void volume_poll_handle(Channel *c, const struct pollfd *fds, size_t n);

/* init.c: INIT and the default environment for EXEC */
void init_handle(Channel *c, uint32_t id, const uint8_t *p, size_t n);
/* Default environment records ("K=V"), NULL-terminated. */
char **init_default_env(void);
