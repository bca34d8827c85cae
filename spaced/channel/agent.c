/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "channel/agent-internal.h"
#include "channel/files.h"
#include "channel/tunnel.h"
#include "core/log.h"
#include "io-util.h"
#include "macro.h"
#include "string-util.h"
#include "trust-bundle.h"
#include "channel/process.h"
#include "core/util.h"

/* The host end of a sandbox's channel, in the event loop. Everything read here comes from the guest and is
 * checked: the frame reader bounds sizes, streams must be ones we opened, credit must have been given. */

#define AGENT_OUT_MAX (8U * 1024U * 1024U)

/* A guest that breaks the framing loses its channel. Reconnects back off so that a guest which does it again at
 * once costs a connect now and then, not a busy loop; a channel that stays up a while starts over from the
 * shortest wait. So many protocol errors within the window and the sandbox is marked failed for good. */
#define AGENT_BACKOFF_MIN_USEC (100ULL * 1000)
#define AGENT_BACKOFF_MAX_USEC (30ULL * 1000000)
#define AGENT_BACKOFF_RESET_USEC (60ULL * 1000000)
#define AGENT_ABUSE_MAX 8U
#define AGENT_ABUSE_WINDOW_USEC (600ULL * 1000000)
#define AGENT_WARN_INTERVAL_USEC (10ULL * 1000000)   /* one warning per sandbox per interval */

/* What outlives one connection of a sandbox's channel: the backoff, the recent protocol errors and the warning
 * rate limit. Owned by the sandbox (sandbox_free frees it). */
struct AgentHealth {
        Sandbox *sandbox;
        sd_event_source *timer;      /* the next reconnect */
        uint64_t delay;              /* before the next reconnect */
        uint64_t connected_at;       /* monotonic, of the current connection */
        uint64_t faults[AGENT_ABUSE_MAX];   /* when the last protocol errors happened, a ring */
        unsigned n_faults;
        uint64_t warned_at;
        unsigned suppressed;
        bool frozen;                 /* the agent froze the workload, and no INIT has been answered since */
};


static int unix_connect(const char *path, bool nonblock, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -1;

        if (strlen(path) >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* ---- blocking helpers for workers ---- */

static int send_frame_blocking(int fd, uint8_t type, uint32_t stream, const void *payload, size_t n) {
        _cleanup_(space_buf_done) SpaceBuf b = {};
        int r = space_frame_append(&b, type, 0, stream, payload, n);
        return r < 0 ? r : loop_write(fd, b.data, b.len);
}

/* Reads frames until one of `type` on `stream` arrives (stream 0 matches any for HELLO). */
static int wait_frame(int fd, SpaceFrameReader *rd, uint8_t type, uint32_t stream, uint64_t deadline_us,
                      SpaceFrameHeader *ret_h, const uint8_t **ret_payload, uint8_t *pending, size_t *pending_len) {
        for (;;) {
                while (*pending_len > 0) {
                        size_t used = 0;
                        SpaceFrameHeader h;
                        const uint8_t *payload;
                        int r = space_frame_reader_feed(rd, pending, *pending_len, &used, &h, &payload);

                        memmove(pending, pending + used, *pending_len - used);
                        *pending_len -= used;
                        if (r < 0)
                                return r;
                        if (r == 0)
                                break;
                        if (h.type == type && (stream == 0 || h.stream == stream)) {
                                *ret_h = h;
                                *ret_payload = payload;
                                return 0;
                        }
                        if (h.type == SPACE_F_ERROR && h.stream == stream) {
                                *ret_h = h;
                                *ret_payload = payload;
                                return -EPROTO;
                        }
                }
                uint64_t now = now_usec_monotonic();
                if (now >= deadline_us)
                        return -ETIMEDOUT;
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                int k = poll(&pfd, 1, (int) ((deadline_us - now) / 1000) + 1);
                if (k < 0 && errno != EINTR)
                        return -errno;
                if (k <= 0)
                        continue;
                ssize_t n = read(fd, pending, 65536);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -ECONNRESET;
                *pending_len = (size_t) n;
        }
}

static int connect_retry(const char *path, uint64_t deadline_us, int *ret_fd) {
        for (;;) {
                int r = unix_connect(path, false, ret_fd);
                if (r >= 0)
                        return 0;
                if (now_usec_monotonic() >= deadline_us)
                        return r;
                usleep(2000);
        }
}

int agent_wait_hello(const char *socket_path, int timeout_ms, int *ret_fd, Error *reterr) {
        uint64_t deadline = now_usec_monotonic() + (uint64_t) timeout_ms * 1000;
        _cleanup_free_ SpaceFrameReader *rd = calloc(1, sizeof *rd);
        _cleanup_free_ uint8_t *pending = malloc(65536);
        _cleanup_close_ int fd = -1;
        size_t pending_len = 0;
        SpaceFrameHeader h;
        const uint8_t *payload;
        int r;

        if (!rd || !pending)
                return -ENOMEM;
        r = connect_retry(socket_path, deadline, &fd);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "cannot connect to the agent socket %s: %s", socket_path,
                                 strerror(-r));
                return r;
        }
        r = wait_frame(fd, rd, SPACE_F_HELLO, 0, deadline, &h, &payload, pending, &pending_len);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "the guest agent did not say hello within %d s: %s",
                                 timeout_ms / 1000, strerror(-r));
                return r;
        }
        if (ret_fd)
                *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Streams below AGENT_FIRST_STREAM are the daemon's own and never a process's: 1 and 2 the handshake's PING and
 * INIT, 3 a handout's INIT, 4 agent_run_blocking()'s command, 5 the warm-up after a create, 6 a base snapshot's
 * INIT (its CA and service), 7 the workload's freeze (AGENT_FREEZE_STREAM). */
#define AGENT_FIRST_STREAM 16U
#define REIDENTIFY_STREAM 3
#define RUN_BLOCKING_STREAM 4
#define SERVICE_STREAM 6

/* Set before any worker restores a VM, read-only after. */
static char *guest_ca;

int agent_set_guest_ca(const char *pem) {
        char *copy;

        if (!trust_pem_valid(pem))
                return -EINVAL;
        copy = strdup(pem);
        if (!copy)
                return -ENOMEM;
        free(guest_ca);
        guest_ca = copy;
        return 0;
}

/* mounts: "VOLUME-ID:PATH" each (lib/proto.h, INIT mount_volume/mount_path) */
static int mount_records(char **mounts, SpaceBuf *kv) {
        int r = 0;

        for (char **mt = mounts; r >= 0 && mt && *mt; mt++) {
                size_t n = channel_mount_id_len(*mt);
                _cleanup_free_ char *id = n ? strndup(*mt, n) : NULL;

                if (!id)
                        return n ? -ENOMEM : -EINVAL;
                r = space_kv_add(kv, "mount_volume", id);
                if (r >= 0)
                        r = space_kv_add(kv, "mount_path", channel_mount_path(*mt));
        }
        return r;
}

static int identity_frame(const char *sandbox_id, const char *hostname, char **env, char **mounts,
                          uint64_t disk_bytes, bool with_ca, SpaceBuf *kv) {
        uint8_t seed[32];
        char seed_hex[65];
        struct timespec ts;
        int r;

        /* A fresh identity for every restored VM (ARCHITECTURE.md, decision 4): clock, RNG seed, hostname, sandbox id. */
        if (getrandom(seed, sizeof seed, 0) != sizeof seed)
                return -EIO;
        string_hex_encode(seed, sizeof seed, seed_hex);
        clock_gettime(CLOCK_REALTIME, &ts);
        r = space_kv_add(kv, "hostname", hostname);
        if (r >= 0)
                r = space_kv_add(kv, "sandbox_id", sandbox_id);
        if (r >= 0)
                r = space_kv_addf(kv, "time_ns", "%llu",
                                  (unsigned long long) ts.tv_sec * 1000000000ULL + (unsigned long long) ts.tv_nsec);
        if (r >= 0)
                r = space_kv_add(kv, "seed", seed_hex);
        for (char **e = env; r >= 0 && e && *e; e++)
                r = space_kv_add(kv, "env", *e);
        if (r >= 0 && disk_bytes > 0)
                r = space_kv_addf(kv, "disk_bytes", "%llu", (unsigned long long) disk_bytes);
        /* the same PEM the guest has costs it a comparison; another one it puts in place */
        if (r >= 0 && with_ca && guest_ca)
                r = space_kv_add(kv, "ca", guest_ca);
        if (r >= 0)
                r = mount_records(mounts, kv);
        if (r < 0)
                return r;
        return kv->len > SPACE_FRAME_PAYLOAD_MAX ? -E2BIG : 0;
}

static void refused_identity(const uint8_t *payload, size_t n, int r, Error *reterr) {
        const char *msg = NULL;

        if (r == -EPROTO) {
                /* the guest's own words, bounded: it is not trusted */
                if (space_kv_get(payload, n, "message", &msg) <= 0)
                        msg = "no reason given";
                (void) error_set(reterr, ERROR_INTERNAL, "the guest agent refused its identity: %.200s", msg);
        } else
                (void) error_set(reterr, ERROR_INTERNAL, "the guest agent refused its identity: %s", strerror(-r));
}

int agent_handshake_send(const char *socket_path, const char *sandbox_id, const char *hostname, char **env,
                         char **mounts, uint64_t disk_bytes, bool with_ca, int timeout_ms, int *ret_fd,
                         Error *reterr) {
        uint64_t deadline = now_usec_monotonic() + (uint64_t) timeout_ms * 1000;
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_close_ int fd = -1;
        int r;

        r = connect_retry(socket_path, deadline, &fd);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "cannot connect to the agent socket %s: %s", socket_path,
                                 strerror(-r));
                return r;
        }
        /* INIT right behind the PING: the agent answers them in order, so the guest that has just woken takes
         * both in one round trip. */
        r = identity_frame(sandbox_id, hostname, env, mounts, disk_bytes, with_ca, &kv);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "cannot make the sandbox's identity: %s", strerror(-r));
                return r;
        }
        r = send_frame_blocking(fd, SPACE_F_PING, 1, "hs", 2);
        if (r >= 0)
                r = send_frame_blocking(fd, SPACE_F_INIT, 2, kv.data, kv.len);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "cannot send the sandbox its identity: %s", strerror(-r));
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* An agent that took mount records says how many mounts it has in place (mounts=N); an older one says nothing,
 * and its guest would run without its volumes. */
static int check_mounted(const uint8_t *payload, size_t n, unsigned mounts, Error *reterr) {
        const char *v = NULL;
        char *end;
        unsigned long have;

        if (mounts == 0)
                return 0;
        if (space_kv_get(payload, n, "mounts", &v) <= 0)
                return error_set(reterr, ERROR_NOT_SUPPORTED,
                                 "the guest's agent is older than volume mounts (channel protocol 7): rebuild the "
                                 "template's image with this version of space, or create the sandbox without "
                                 "volumes") ?: -EOPNOTSUPP;
        errno = 0;
        have = strtoul(v, &end, 10);
        if (errno || end == v || *end || have < mounts)
                return error_set(reterr, ERROR_INTERNAL, "the guest agent mounted %.20s of the %u volumes asked", v,
                                 mounts) ?: -EIO;
        return 0;
}

int agent_handshake_finish(int fd, unsigned mounts, int timeout_ms, Error *reterr) {
        uint64_t deadline = now_usec_monotonic() + (uint64_t) timeout_ms * 1000;
        _cleanup_free_ SpaceFrameReader *rd = calloc(1, sizeof *rd);
        _cleanup_free_ uint8_t *pending = malloc(65536);
        size_t pending_len = 0;
        SpaceFrameHeader h = {};
        const uint8_t *payload = NULL;
        int r;

        if (!rd || !pending)
                return -ENOMEM;
        r = wait_frame(fd, rd, SPACE_F_PONG, 1, deadline, &h, &payload, pending, &pending_len);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "the guest agent did not answer after the restore: %s",
                                 strerror(-r));
                return r;
        }
        r = wait_frame(fd, rd, SPACE_F_OK, 2, deadline, &h, &payload, pending, &pending_len);
        if (r < 0) {
                refused_identity(payload, h.length, r, reterr);
                return r;
        }
        return check_mounted(payload, h.length, mounts, reterr);
}


#define WARM_UP_STREAM 5

static int exec_frame(char **argv, char **env, const char *cwd, const char *user, SpaceBuf *kv) {
        int r = 0;

        for (char **a = argv; r >= 0 && *a; a++)
                r = space_kv_add(kv, "argv", *a);
        for (char **e = env; r >= 0 && e && *e; e++)
                r = space_kv_add(kv, "env", *e);
        if (r >= 0 && cwd)
                r = space_kv_add(kv, "cwd", cwd);
        if (r >= 0 && user)
                r = space_kv_add(kv, "user", user);
        if (r >= 0)
                r = space_kv_add(kv, "stdin", "0");
        if (r >= 0 && kv->len > SPACE_FRAME_PAYLOAD_MAX)
                r = -E2BIG;
        return r;
}

int agent_warm_up_send(AgentConn *a, char **env, const char *cwd, const char *user) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        char *argv[] = { (char *) "true", NULL };
        int r;

        r = exec_frame(argv, env, cwd, user, &kv);
        if (r >= 0)
                r = agent_send(a, SPACE_F_EXEC, 0, WARM_UP_STREAM, kv.data, kv.len);
        if (r >= 0)
                a->warming_up = true;
        return r;
}

/* The user's command came before the warm-up ended: the translations made so far stay, and the rest is the
 * user's command's to make, which then has the guest's one CPU to itself instead of sharing it. */
static void warm_up_cancel(AgentConn *a) {
        uint8_t le[4];

        if (!a->warming_up)
                return;
        a->warming_up = false;
        space_put_le32(le, (uint32_t) SIGKILL);
        (void) agent_send(a, SPACE_F_SIGNAL, 0, WARM_UP_STREAM, le, sizeof le);
}

int agent_run_blocking(int fd, char **argv, char **env, const char *cwd, const char *user, int timeout_ms) {
        uint64_t deadline = now_usec_monotonic() + (uint64_t) timeout_ms * 1000;
        _cleanup_free_ SpaceFrameReader *rd = calloc(1, sizeof *rd);
        _cleanup_free_ uint8_t *pending = malloc(65536);
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        size_t pending_len = 0;
        SpaceFrameHeader h;
        const uint8_t *payload;
        int r = 0;

        if (!rd || !pending)
                return -ENOMEM;
        r = exec_frame(argv, env, cwd, user, &kv);
        if (r >= 0)
                r = send_frame_blocking(fd, SPACE_F_EXEC, RUN_BLOCKING_STREAM, kv.data, kv.len);
        if (r >= 0)
                r = wait_frame(fd, rd, SPACE_F_EXIT, RUN_BLOCKING_STREAM, deadline, &h, &payload, pending,
                               &pending_len);
        if (r >= 0) {
                const char *v;
                long x;

                /* the exit status, or 128 + the signal, as a shell says it */
                if (space_kv_get(payload, h.length, "code", &v) > 0 && (x = strtol(v, NULL, 10)) >= 0 && x < 256)
                        r = (int) x;
                else if (space_kv_get(payload, h.length, "signal", &v) > 0 && (x = strtol(v, NULL, 10)) > 0 && x < 128)
                        r = 128 + (int) x;
                else
                        r = 255;
        }
        (void) send_frame_blocking(fd, SPACE_F_CLOSE, RUN_BLOCKING_STREAM, NULL, 0);
        return r;
}

int agent_base_init_blocking(int fd, const char *ca_pem, const char *cmd, const char *user, const char *cwd,
                             char **env, int timeout_ms, Error *reterr) {
        uint64_t deadline = now_usec_monotonic() + (uint64_t) timeout_ms * 1000;
        _cleanup_free_ SpaceFrameReader *rd = calloc(1, sizeof *rd);
        _cleanup_free_ uint8_t *pending = malloc(65536);
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        size_t pending_len = 0;
        SpaceFrameHeader h = {};
        const uint8_t *payload = NULL;
        int r = 0;

        if (!rd || !pending)
                return -ENOMEM;
        /* An INIT with only the defaults, the CA and the service: the base snapshot's guest has no identity yet */
        for (char **e = env; r >= 0 && e && *e; e++)
                r = space_kv_add(&kv, "env", *e);
        if (r >= 0 && ca_pem)
                r = space_kv_add(&kv, "ca", ca_pem);
        if (r >= 0 && cmd)
                r = space_kv_add(&kv, "service", cmd);
        if (r >= 0 && cmd && user)
                r = space_kv_add(&kv, "service_user", user);
        if (r >= 0 && cmd && cwd)
                r = space_kv_add(&kv, "service_cwd", cwd);
        if (r >= 0 && kv.len > SPACE_FRAME_PAYLOAD_MAX)
                r = -E2BIG;
        if (r >= 0)
                r = send_frame_blocking(fd, SPACE_F_INIT, SERVICE_STREAM, kv.data, kv.len);
        if (r >= 0)
                r = wait_frame(fd, rd, SPACE_F_OK, SERVICE_STREAM, deadline, &h, &payload, pending, &pending_len);
        if (r == -EPROTO) {
                const char *msg = NULL;
                if (space_kv_get(payload, h.length, "message", &msg) <= 0)
                        msg = "no reason given";
                (void) error_set(reterr, ERROR_INTERNAL, "the guest agent refused the base's INIT (%s): %.200s",
                                 cmd ? "the template's service" : "the CA", msg);
        } else if (r < 0)
                (void) error_set(reterr, ERROR_INTERNAL, "cannot send the base's guest its INIT: %s", strerror(-r));
        return r;
}

int agent_freeze_blocking(int fd, int timeout_ms, Error *reterr) {
        uint64_t deadline = now_usec_monotonic() + (uint64_t) timeout_ms * 1000;
        _cleanup_free_ SpaceFrameReader *rd = calloc(1, sizeof *rd);
        _cleanup_free_ uint8_t *pending = malloc(65536);
        size_t pending_len = 0;
        SpaceFrameHeader h = {};
        const uint8_t *payload = NULL;
        char msg[256] = "";
        int r;

        if (!rd || !pending)
                return -ENOMEM;
        r = send_frame_blocking(fd, SPACE_F_PING, AGENT_FREEZE_STREAM, SPACE_PING_FREEZE, strlen(SPACE_PING_FREEZE));
        if (r >= 0)
                r = wait_frame(fd, rd, SPACE_F_PONG, AGENT_FREEZE_STREAM, deadline, &h, &payload, pending, &pending_len);
        if (r >= 0 || r == -EPROTO)
                r = agent_freeze_answer(&h, payload, msg, sizeof msg);
        else
                (void) snprintf(msg, sizeof msg, "%s", strerror(-r));
        if (r < 0)
                (void) error_set(reterr, ERROR_INTERNAL, "the guest agent did not freeze the workload: %s", msg);
        return r;
}

int agent_reidentify_send(int fd, const char *sandbox_id, const char *hostname, char **env, char **mounts,
                          Error *reterr) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        int r;

        r = identity_frame(sandbox_id, hostname, env, mounts, 0, true, &kv);
        if (r >= 0)
                r = send_frame_blocking(fd, SPACE_F_INIT, REIDENTIFY_STREAM, kv.data, kv.len);
        if (r < 0)
                (void) error_set(reterr, ERROR_INTERNAL, "cannot send the warm sandbox its identity: %s", strerror(-r));
        return r;
}

/* ---- event loop side ---- */

int agent_reidentify(AgentConn *a, const char *sandbox_id, const char *hostname, char **env, char **mounts) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        int r;

        r = identity_frame(sandbox_id, hostname, env, mounts, 0, true, &kv);
        if (r >= 0)
                r = agent_send(a, SPACE_F_INIT, 0, REIDENTIFY_STREAM, kv.data, kv.len);
        if (r >= 0)
                a->awaiting_identity = true; /* a refusal fails the sandbox, as a handout's does */
        return r;
}

static void agent_disconnected(AgentConn *a, const char *why, bool protocol_error);

const ChannelSandboxOps *channel_sandbox;

void channel_set_sandbox_ops(const ChannelSandboxOps *ops) {
        channel_sandbox = ops;
}

static AgentHealth *health_get(Sandbox *s) {
        ChannelSandbox *c = channel_sandbox->channel(s);

        if (!c->agent_health) {
                c->agent_health = calloc(1, sizeof *c->agent_health);
                if (c->agent_health) {
                        c->agent_health->sandbox = s;
                        c->agent_health->delay = AGENT_BACKOFF_MIN_USEC;
                }
        }
        return c->agent_health;
}

AgentHealth *agent_health_free(AgentHealth *h) {
        if (!h)
                return NULL;
        sd_event_source_disable_unref(h->timer);
        free(h);
        return NULL;
}

/* A guest can make these as often as it likes: at most one per interval reaches the log, with a count of the
 * ones left out. */
static void health_warn(AgentHealth *h, const char *id, const char *msg) {
        uint64_t now = now_usec_monotonic();

        if (h && h->warned_at != 0 && now - h->warned_at < AGENT_WARN_INTERVAL_USEC) {
                h->suppressed++;
                return;
        }
        if (h && h->suppressed > 0)
                log_warning("sandbox %s: %s (%u similar messages suppressed)", id, msg, h->suppressed);
        else
                log_warning("sandbox %s: %s", id, msg);
        if (h) {
                h->warned_at = now;
                h->suppressed = 0;
        }
}

/* Records a protocol error; true when there were too many within the window. */
static bool health_fault(AgentHealth *h) {
        uint64_t now = now_usec_monotonic();
        uint64_t oldest;

        h->faults[h->n_faults++ % AGENT_ABUSE_MAX] = now;
        if (h->n_faults < AGENT_ABUSE_MAX)
                return false;
        oldest = h->faults[h->n_faults % AGENT_ABUSE_MAX];   /* the slot written AGENT_ABUSE_MAX - 1 faults ago */
        return now - oldest <= AGENT_ABUSE_WINDOW_USEC;
}

static int on_reconnect(sd_event_source *src, uint64_t usec, void *userdata);

static void schedule_reconnect(AgentHealth *h) {
        uint64_t now = now_usec_monotonic();

        if (h->connected_at != 0 && now - h->connected_at >= AGENT_BACKOFF_RESET_USEC)
                h->delay = AGENT_BACKOFF_MIN_USEC;
        h->connected_at = 0;
        h->timer = sd_event_source_disable_unref(h->timer);
        if (sd_event_add_time_relative(channel_sandbox->manager(h->sandbox)->event, &h->timer, CLOCK_MONOTONIC, h->delay, 1000,
                                       on_reconnect, h) < 0)
                log_warning("sandbox %s: cannot arm the reconnect timer; its channel stays down",
                            channel_sandbox->id(h->sandbox));
        h->delay = h->delay * 2 > AGENT_BACKOFF_MAX_USEC ? AGENT_BACKOFF_MAX_USEC : h->delay * 2;
}

static int on_reconnect(sd_event_source *src, uint64_t usec, void *userdata) {
        AgentHealth *h = userdata;
        Sandbox *s = h->sandbox;
        int r;

        h->timer = sd_event_source_disable_unref(h->timer);
        /* something else connected it meanwhile (a wake), or it is failed or going */
        if (channel_sandbox->channel(s)->agent || channel_sandbox->phase(s) != CHANNEL_SANDBOX_UP)
                return 0;
        if (!channel_sandbox->qemu_alive(s))
                return 0;
        r = agent_connect(s);
        if (r < 0) {
                _cleanup_free_ char *msg = NULL;

                if (asprintf(&msg, "cannot reconnect to its agent: %s; trying again in %.1f s", strerror(-r),
                             (double) h->delay / 1e6) >= 0)
                        health_warn(h, channel_sandbox->id(s), msg);
                schedule_reconnect(h);
        } else if (h->frozen && channel_sandbox->reconnected)
                /* its thaw may have gone with the old channel */
                channel_sandbox->reconnected(s);
        return 0;
}

void agent_health_set_frozen(AgentConn *a, bool frozen) {
        AgentHealth *h = health_get(a->sandbox);

        if (h)
                h->frozen = frozen;
}

uint64_t agent_health_next_delay(Sandbox *s) {
        AgentHealth *h = channel_sandbox->channel(s)->agent_health;
        return h ? h->delay : AGENT_BACKOFF_MIN_USEC;
}

static int agent_flush(AgentConn *a) {
        while (a->out.len > 0) {
                ssize_t n = write(a->fd, a->out.data, a->out.len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        return -errno;
                }
                space_buf_consume(&a->out, (size_t) n);
        }
        if (a->tunnels_throttled && a->out.len < AGENT_TUNNEL_QUEUE_MAX)
                tunnels_kick(a);
        return sd_event_source_set_io_events(a->io, EPOLLIN | (a->out.len > 0 ? EPOLLOUT : 0));
}

int agent_send(AgentConn *a, uint8_t type, uint8_t fd, uint32_t stream, const void *payload, size_t n) {
        int r;

        if (!a || a->fd < 0)
                return -ENOTCONN;
        if (a->out.len + n > AGENT_OUT_MAX)
                return -ENOBUFS; /* the guest stopped reading; credit keeps data below this */
        r = space_frame_append(&a->out, type, fd, stream, payload, n);
        if (r < 0)
                return r;
        return agent_flush(a);
}

void channel_refuse_guest_stream(AgentConn *a, uint32_t stream, SpaceCode code, const char *message) {
        SpaceBuf kv = {};

        if (space_kv_add(&kv, "code", space_code_to_string(code)) >= 0 && space_kv_add(&kv, "message", message) >= 0)
                (void) agent_send(a, SPACE_F_ERROR, 0, stream, kv.data, kv.len);
        space_buf_done(&kv);
}

uint32_t agent_new_stream(AgentConn *a) {
        uint32_t s = a->next_stream++;

        if (a->next_stream >= SPACE_STREAM_GUEST_BIT)
                a->next_stream = AGENT_FIRST_STREAM;
        return s;
}

static Process *find_stream(AgentConn *a, uint32_t stream) {
        for (Process *p = a->processes; p; p = p->agent_next)
                if (p->stream == stream)
                        return p;
        return NULL;
}

static FileXfer *find_file(AgentConn *a, uint32_t stream) {
        for (FileXfer *x = a->files; x; x = x->agent_next)
                if (x->stream == stream)
                        return x;
        return NULL;
}

static bool stream_in_use(AgentConn *a, uint32_t stream) {
        return find_stream(a, stream) || find_file(a, stream) || tunnel_find(a, stream);
}

uint32_t agent_new_free_stream(AgentConn *a) {
        uint32_t s;

        do
                s = agent_new_stream(a);
        while (stream_in_use(a, s));
        return s;
}

size_t agent_queued(AgentConn *a) {
        return a ? a->out.len : 0;
}

Sandbox *agent_sandbox(AgentConn *a) {
        return a ? a->sandbox : NULL;
}

static ChannelGuestOps guest_ops;

static ChannelVolumeFn volume_handler;

void channel_set_volume_handler(ChannelVolumeFn fn) {
        volume_handler = fn;
}

void channel_set_guest_ops(const ChannelGuestOps *ops) {
        guest_ops = ops ? *ops : (ChannelGuestOps) {};
}

int agent_register_file(AgentConn *a, FileXfer *x) {
        if (a->n_files >= SPACE_FILE_XFERS_MAX)
                return -EMFILE;
        do
                x->stream = agent_new_stream(a);
        while (stream_in_use(a, x->stream));
        x->agent = a;
        x->agent_next = a->files;
        a->files = x;
        a->n_files++;
        return 0;
}

void agent_unregister_file(AgentConn *a, FileXfer *x) {
        for (FileXfer **i = &a->files; *i; i = &(*i)->agent_next)
                if (*i == x) {
                        *i = x->agent_next;
                        a->n_files--;
                        break;
                }
        x->agent_next = NULL;
        if (x->agent == a)
                x->agent = NULL;
}

static void link_process(AgentConn *a, Process *p) {
        p->agent = a;
        p->agent_next = a->processes;
        a->processes = p;
        a->n_processes++;
}

int agent_register_process(AgentConn *a, Process *p) {
        if (a->n_processes >= SPACE_STREAMS_MAX)
                return -EMFILE;
        warm_up_cancel(a);
        do
                p->stream = agent_new_stream(a);
        while (stream_in_use(a, p->stream));
        link_process(a, p);
        return 0;
}

int agent_register_stream(AgentConn *a, Process *p, uint32_t stream) {
        if (a->n_processes >= SPACE_STREAMS_MAX)
                return -EMFILE;
        if (stream == 0 || (stream & SPACE_STREAM_GUEST_BIT) || stream_in_use(a, stream))
                return -EEXIST;
        p->stream = stream;
        link_process(a, p);
        return 0;
}

void agent_unregister_process(AgentConn *a, Process *p) {
        for (Process **i = &a->processes; *i; i = &(*i)->agent_next)
                if (*i == p) {
                        *i = p->agent_next;
                        p->agent_next = NULL;
                        a->n_processes--;
                        break;
                }
        if (p->agent == a)
                p->agent = NULL;
}

unsigned agent_process_count(AgentConn *a) {
        unsigned n = 0;

        if (!a)
                return 0;
        /* Not those an earlier daemon started: rm without -f never waited for those (see API.md). */
        for (Process *p = a->processes; p; p = p->agent_next)
                if (!p->ended && !p->inherited)
                        n++;
        return n;
}

static void dispatch(AgentConn *a, const SpaceFrameHeader *h, const uint8_t *payload) {
        Process *p;
        Tunnel *t;

        if (h->stream == 0)
                return; /* HELLO after a guest reboot */
        t = tunnel_find(a, h->stream);
        if (t) {
                tunnel_on_frame(t, h, payload);
                return;
        }
        if (h->stream & SPACE_STREAM_GUEST_BIT) {
                /* Streams the guest opens: an outbound connection or a DNS question, for the egress gateway. */
                if (h->type == SPACE_F_CONNECT) {
                        if (guest_ops.connect)
                                guest_ops.connect(a, h->stream, payload, h->length);
                        else
                                channel_refuse_guest_stream(a, h->stream, SPACE_CODE_DENIED,
                                                            "this daemon has no egress gateway");
                } else if (h->type == SPACE_F_RESOLVE) {
                        if (guest_ops.resolve)
                                guest_ops.resolve(a, h->stream, payload, h->length);
                        else
                                channel_refuse_guest_stream(a, h->stream, SPACE_CODE_DENIED,
                                                            "this daemon has no egress gateway");
                } else if (h->type == SPACE_F_VOLUME && volume_handler)
                        volume_handler(a, h->stream, payload, h->length);
                return; /* anything else on a stream we do not know (any more): dropped */
        }
        if (h->stream == AGENT_FREEZE_STREAM) {
                agent_freeze_on_frame(a, h, payload);
                return;
        }
        if (a->awaiting_identity && h->stream == REIDENTIFY_STREAM &&
            (h->type == SPACE_F_OK || h->type == SPACE_F_ERROR)) {
                _cleanup_(error_done) Error e = {};

                a->awaiting_identity = false;
                if (h->type == SPACE_F_OK) {
                        agent_health_set_frozen(a, false); /* an INIT taken thaws */
                        return;
                }
                refused_identity(payload, h->length, -EPROTO, &e);
                log_error("sandbox %s: %s", channel_sandbox->id(a->sandbox), e.message);
                channel_sandbox->mark_failed(a->sandbox, e.message);
                return;
        }
        if (h->stream == WARM_UP_STREAM && (h->type == SPACE_F_EXIT || h->type == SPACE_F_ERROR))
                a->warming_up = false;
        p = find_stream(a, h->stream);
        if (!p) {
                FileXfer *x = find_file(a, h->stream);

                if (x) {
                        file_xfer_on_frame(x, h, payload);
                        return;
                }
                /* A stream we have no record of: let its process run on, unthrottled. */
                if (h->type == SPACE_F_DATA && (h->fd == 1 || h->fd == 2)) {
                        uint8_t le[4];
                        space_put_le32(le, h->length);
                        (void) agent_send(a, SPACE_F_CREDIT, h->fd, h->stream, le, 4);
                } else if (h->type == SPACE_F_EXIT)
                        (void) agent_send(a, SPACE_F_CLOSE, 0, h->stream, NULL, 0);
                return;
        }
        process_on_frame(p, h, payload);
}

static int on_agent_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        AgentConn *a = userdata;
        uint8_t buf[65536];

        if (revents & EPOLLOUT) {
                int r = agent_flush(a);
                if (r < 0) {
                        agent_disconnected(a, strerror(-r), false);
                        return 0;
                }
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                ssize_t n = read(a->fd, buf, sizeof buf);
                size_t off = 0;

                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return 0;
                if (n <= 0) {
                        agent_disconnected(a, n == 0 ? "the channel closed" : strerror(errno), false);
                        return 0;
                }
                while (off < (size_t) n) {
                        SpaceFrameHeader h;
                        const uint8_t *payload;
                        size_t used = 0;
                        int r = space_frame_reader_feed(a->reader, buf + off, (size_t) n - off, &used, &h, &payload);

                        off += used;
                        if (r < 0) {
                                agent_disconnected(a, "malformed frame from the guest", true);
                                return 0;
                        }
                        if (r == 0)
                                break;
                        dispatch(a, &h, payload);
                        if (a->fd < 0)
                                return 0;
                }
        }
        return 0;
}

static int agent_setup(Sandbox *s, int fd) {
        AgentConn *a = calloc(1, sizeof *a);
        uint32_t start;
        int r;

        if (!a)
                return -ENOMEM;
        a->sandbox = s;
        a->fd = fd;
        a->reader = calloc(1, sizeof *a->reader);
        /* Streams of a previous daemon may still be open in the agent: start somewhere else. */
        if (getrandom(&start, sizeof start, 0) != sizeof start)
                start = (uint32_t) now_usec_monotonic();
        a->next_stream = AGENT_FIRST_STREAM + (start & 0x3fffffff);
        if (!a->reader) {
                free(a);
                return -ENOMEM;
        }
        (void) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        r = sd_event_add_io(channel_sandbox->manager(s)->event, &a->io, fd, EPOLLIN, on_agent_io, a);
        if (r < 0) {
                free(a->reader);
                free(a);
                return r;
        }
        channel_sandbox->channel(s)->agent = a;
        AgentHealth *h = health_get(s);
        if (h)
                h->connected_at = now_usec_monotonic();
        /* Processes that ran before a restart, a reconnect or a suspend: take them over again. */
        process_adopt_all(a, s);
        return 0;
}

int agent_attach(Sandbox *s, int fd) {
        int r = agent_setup(s, fd);
        if (r < 0)
                safe_close(fd);
        return r;
}

int agent_attach_reidentified(Sandbox *s, int fd) {
        int r = agent_attach(s, fd);

        AgentConn *a = channel_sandbox->channel(s)->agent;
        if (r >= 0 && a)
                a->awaiting_identity = true;
        return r;
}

int agent_connect(Sandbox *s) {
        _cleanup_free_ char *path = NULL;
        int fd, r;

        if (asprintf(&path, "%s/agent.sock", channel_sandbox->run_dir(s)) < 0)
                return -ENOMEM;
        r = unix_connect(path, true, &fd);
        if (r < 0)
                return r;
        return agent_attach(s, fd);
}

/* Detaches every process; with code they end with that error, without they wait to be adopted again. */
static void release_all(AgentConn *a, ErrorCode code, const char *message) {
        Process *list = a->processes;

        /* File operations never outlive their channel: the guest drops them when the host goes. */
        while (a->files) {
                FileXfer *x = a->files;

                a->files = x->agent_next;
                a->n_files--;
                file_xfer_lost(x, message ?: "lost the channel to the sandbox's agent");
        }

        tunnels_lost(a, message ?: "lost the channel to the sandbox's agent");

        a->processes = NULL;
        a->n_processes = 0;
        while (list) {
                Process *p = list;
                list = p->agent_next;
                p->agent_next = NULL;
                p->agent = NULL;
                if (code != ERROR_NONE)
                        process_fail(p, code, message);
                else
                        process_orphan(p);
        }
}

AgentConn *agent_free(AgentConn *a) {
        if (!a)
                return NULL;
        if (a->sandbox && channel_sandbox->channel(a->sandbox)->agent == a)
                channel_sandbox->channel(a->sandbox)->agent = NULL;
        agent_freeze_cancel(a);
        /* The sandbox is removed, suspended or restored: its processes wait for a channel to come back (and
         * end with sandbox_gone if the sandbox does not, see process.c's sweep). */
        release_all(a, ERROR_NONE, NULL);
        sd_event_source_disable_unref(a->io);
        sd_event_source_disable_unref(a->reconnect);
        safe_close(a->fd);
        space_buf_done(&a->out);
        free(a->reader);
        free(a);
        return NULL;
}

static void agent_disconnected(AgentConn *a, const char *why, bool protocol_error) {
        Sandbox *s = a->sandbox;
        AgentHealth *h = health_get(s);
        bool alive = channel_sandbox->qemu_alive(s), busy = channel_sandbox->busy(s);
        _cleanup_free_ char *msg = NULL, *reason = NULL;

        if (protocol_error && h && !busy && health_fault(h)) {
                /* Abuse: the channel is not taken back, the sandbox is failed and says why. */
                if (asprintf(&reason, "the guest broke the channel protocol %u times within %llu s (last: %s); its "
                             "channel was closed for good; remove the sandbox with 'spacectl rm'",
                             AGENT_ABUSE_MAX, (unsigned long long) (AGENT_ABUSE_WINDOW_USEC / 1000000), why) < 0)
                        reason = NULL;
                if (h->suppressed > 0)
                        log_warning("sandbox %s: %u similar messages suppressed", channel_sandbox->id(s), h->suppressed);
                h->suppressed = 0;
                release_all(a, ERROR_CHANNEL_LOST, reason ?: why);
                agent_free(a);
                h->timer = sd_event_source_disable_unref(h->timer);
                channel_sandbox->mark_failed(s, reason ?: why);
                return;
        }
        (void) asprintf(&msg, "lost the channel to the sandbox's agent (%s)%s", why,
                        alive ? "" : "; QEMU is no longer running");
        health_warn(h, channel_sandbox->id(s), msg ?: why);
        /* With QEMU alive the processes still run: reconnect and adopt them. During a lifecycle operation
         * (suspend, restore) QEMU goes away on purpose: they wait for the channel that comes after it. */
        release_all(a, alive || busy ? ERROR_NONE : ERROR_CHANNEL_LOST, msg ?: why);
        agent_free(a);
        if (!alive && !busy)
                channel_sandbox->qemu_exited(s);
        else if (alive && h)
                /* QEMU is the chardev server: it takes us back, after a wait that grows while it goes wrong */
                schedule_reconnect(h);
        else if (alive)
                (void) agent_connect(s);
}
