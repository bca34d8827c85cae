/* SPDX-License-Identifier: Apache-2.0 */

/* spaced/channel/agent.c and process*.c against a hostile guest, with the real code on a socketpair and a fake
 * QEMU (a unix socket listening where agent.sock would be, and a child whose command line names the run
 * directory, so that vm_pid_alive() believes in it). No HTTP.
 *  - a STARTED that reuses the pid of a running process nobody follows must not touch the freed process;
 *  - garbage frames drop the channel; reconnects back off; repeated abuse marks the sandbox failed;
 *  - under a flood of frames the event loop still answers its timers (p99 printed). */

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "channel/agent-internal.h"
#include "channel/channel.h"
#include "channel/process.h"
#include "core/log.h"
#include "core/store.h"
#include "core/util.h"
#include "io-util.h"
#include "string-util.h"
#include "sandbox/sandbox.h"
#include "tap.h"
#include "volume/volume.h"

static Manager manager;
static char tmpdir[] = "/tmp/test-channel-XXXXXX";
static pid_t fake_qemu;

static int hold[2] = { -1, -1 };
static char *fake_arg;

/* A stand-in for QEMU: vm_pid_alive() looks for "RUN/" in its command line. One shell, no children, blocked
 * reading a pipe only we write to: it goes when we do, however we end. */
static pid_t fake_qemu_spawn(void) {
        pid_t pid = fork();

        ASSERT(pid >= 0);
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);

                (void) dup2(hold[0], STDIN_FILENO);
                (void) dup2(null, STDOUT_FILENO);   /* not holding the TAP driver's pipe open */
                (void) dup2(null, STDERR_FILENO);
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                execl("/bin/sh", "sh", "-c", "read x", fake_arg, (char *) NULL);
                _exit(127);
        }
        usleep(50000);
        return pid;
}

static Sandbox *sandbox_make(const char *id) {
        Sandbox *s = calloc(1, sizeof *s);

        s->manager = &manager;
        snprintf(s->id, sizeof s->id, "%s", id);
        s->state = SANDBOX_RUNNING;
        s->template_name = strdup("minimal");
        s->template_digest = strdup("0123456789abcdef");
        s->qemu_pid = fake_qemu = fake_qemu_spawn();
        (void) asprintf(&s->run_dir, "%s/run", tmpdir);
        (void) asprintf(&s->data_dir, "%s/data-%s", tmpdir, id);
        (void) mkdir(s->data_dir, 0700);
        s->next = manager.sandboxes;
        manager.sandboxes = s;
        (void) sandbox_save(s);
        return s;
}

static void loop_for(uint64_t usec) {
        uint64_t end = now_usec_monotonic() + usec;

        while (now_usec_monotonic() < end)
                (void) sd_event_run(manager.event, 10000);
}

static void send_frame(int fd, uint8_t type, uint8_t sfd, uint32_t stream, const void *p, size_t n) {
        _cleanup_(space_buf_done) SpaceBuf b = {};

        ASSERT(space_frame_append(&b, type, sfd, stream, p, n) >= 0);
        ASSERT(loop_write(fd, b.data, b.len) >= 0);
}

/* Reads what the host sent until a frame of type (or, with stream, of type or alt on that stream) arrives;
 * returns its stream (0: none within the time), its type in *ret_type and its payload copied into ans (at most
 * ans_size bytes, *ans_len) when they are given. */
static uint32_t expect_frame_on(int fd, SpaceFrameReader *rd, uint8_t type, uint8_t alt, uint32_t stream,
                                uint8_t *ret_type, uint8_t *ans, size_t ans_size, size_t *ans_len) {
        uint64_t end = now_usec_monotonic() + 2000000;
        uint8_t buf[65536];

        while (now_usec_monotonic() < end) {
                ssize_t n;

                (void) sd_event_run(manager.event, 0);
                n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
                if (n <= 0) {
                        usleep(1000);
                        continue;
                }
                for (size_t off = 0; off < (size_t) n;) {
                        SpaceFrameHeader h;
                        const uint8_t *payload;
                        size_t used = 0;
                        int r = space_frame_reader_feed(rd, buf + off, (size_t) n - off, &used, &h, &payload);

                        off += used;
                        if (r <= 0)
                                break;
                        if ((stream && h.stream != stream) || (h.type != type && (!stream || h.type != alt)))
                                continue;
                        if (ret_type)
                                *ret_type = h.type;
                        if (ans) {
                                *ans_len = h.length < ans_size ? h.length : ans_size;
                                memcpy(ans, payload, *ans_len);
                        }
                        return h.stream;
                }
        }
        return 0;
}

static uint32_t expect_frame(int fd, SpaceFrameReader *rd, uint8_t type) {
        return expect_frame_on(fd, rd, type, 0, 0, NULL, NULL, 0, NULL);
}

/* Sends a VOLUME request with these records on a guest stream and returns the answer's type (0: none), its
 * payload copied into ans (at most ans_size bytes; *ans_len set). */
static uint8_t volume_ask(int fd, SpaceFrameReader *rd, uint32_t stream, const char *const *records, const void *data,
                          size_t data_len, uint8_t *ans, size_t ans_size, size_t *ans_len) {
        _cleanup_(space_buf_done) SpaceBuf kv = {}, p = {};
        uint8_t type = 0;

        for (const char *const *r = records; *r; r += 2)
                ASSERT(space_kv_add(&kv, r[0], r[1]) >= 0);
        ASSERT(space_volume_payload_build(&p, &kv, data, data_len) >= 0);
        send_frame(fd, SPACE_F_VOLUME, 0, stream, p.data, p.len);
        *ans_len = 0;
        return expect_frame_on(fd, rd, SPACE_F_VOLUME, SPACE_F_ERROR, stream, &type, ans, ans_size, ans_len) ? type : 0;
}

static bool error_is(uint8_t type, const uint8_t *ans, size_t n, int want) {
        const char *v = NULL;

        return type == SPACE_F_ERROR && space_kv_get(ans, n, "errno", &v) > 0 && atoi(v) == want;
}

/* ---- a guest's VOLUME requests: answered for the volumes its sandbox mounts, and those only ---- */

static void test_volume_requests(void) {
        _cleanup_free_ SpaceFrameReader *rd = calloc(1, sizeof *rd);
        Sandbox *s = sandbox_make("0000000000000000000000000000000b");
        _cleanup_free_ char *mine = NULL, *line = NULL;
        _cleanup_(error_done) Error e = {};
        uint8_t ans[65536];
        const uint8_t *kv, *data;
        size_t n, kv_len, data_len;
        Volume *v, *other;
        const char *type = NULL;
        uint8_t t;
        int sv[2], rm;

        ASSERT(volume_create(&manager, "mounted", 1 << 20, &v, &e) >= 0);
        ASSERT(volume_create(&manager, "other", 1 << 20, &other, &e) >= 0);
        ASSERT(asprintf(&line, "%s:/data", v->rec.id) > 0 && strv_extend(&s->mounts, line) >= 0);
        ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) >= 0);
        ASSERT(agent_attach(s, sv[0]) >= 0);

        t = volume_ask(sv[1], rd, SPACE_STREAM_GUEST_BIT | 1,
                       (const char *[]) { "volume", v->rec.id, "op", "getattr", "path", "", NULL }, NULL, 0, ans,
                       sizeof ans, &n);
        ok(t == SPACE_F_VOLUME && space_volume_payload_split(ans, n, &kv, &kv_len, &data, &data_len) == 0 &&
           space_kv_get(kv, kv_len, "type", &type) > 0 && streq(type, "dir"),
           "a getattr of the root of a volume the sandbox mounts is answered: a directory");
        t = volume_ask(sv[1], rd, SPACE_STREAM_GUEST_BIT | 2,
                       (const char *[]) { "volume", other->rec.id, "op", "getattr", "path", "", NULL }, NULL, 0, ans,
                       sizeof ans, &n);
        ok(error_is(t, ans, n, EACCES), "a volume that exists but is not mounted in this sandbox: EACCES");
        t = volume_ask(sv[1], rd, SPACE_STREAM_GUEST_BIT | 3,
                       (const char *[]) { "volume", "mounted", "op", "getattr", "path", "", NULL }, NULL, 0, ans,
                       sizeof ans, &n);
        ok(error_is(t, ans, n, EACCES), "... named by its name instead of its id: EACCES");
        t = volume_ask(sv[1], rd, SPACE_STREAM_GUEST_BIT | 4,
                       (const char *[]) { "volume", v->rec.id, "op", "create", "path", "../../escape", "mode", "420",
                                          "uid", "0", "gid", "0", NULL }, NULL, 0, ans, sizeof ans, &n);
        ok(t == SPACE_F_ERROR, "a path with '..' is refused");
        ASSERT(asprintf(&mine, "%s/escape", tmpdir) > 0);
        ok(access(mine, F_OK) < 0, "... and nothing was made outside the volume");
        send_frame(sv[1], SPACE_F_VOLUME, 0, SPACE_STREAM_GUEST_BIT | 5, "\xff\xff\xff\x7f", 4);
        t = volume_ask(sv[1], rd, SPACE_STREAM_GUEST_BIT | 6,
                       (const char *[]) { "op", "getattr", "path", "", NULL }, NULL, 0, ans, sizeof ans, &n);
        ok(error_is(t, ans, n, EINVAL) && s->channel.agent, "a request without volume= is EINVAL, after a truncated one, "
           "and the channel stays");
        ASSERT(volume_remove(&manager, other, &e) == 0);
        rm = volume_remove(&manager, v, &e);
        ok(rm == -EBUSY && e.code == ERROR_VOLUME_IN_USE && e.message && strstr(e.message, s->id),
           "a volume the sandbox mounts cannot be removed: %s", e.message ?: "");
        s->channel.agent = agent_free(s->channel.agent);
        safe_close(sv[1]);
}

/* ---- a STARTED for a reused pid while the old process has no client ---- */

static void test_started_reused_pid(void) {
        Sandbox *s = sandbox_make("00000000000000000000000000000001");
        ExecSpec spec = { .argv = (char *[]) { (char *) "sleep", (char *) "100", NULL } };
        _cleanup_free_ SpaceFrameReader *rd = calloc(1, sizeof *rd);
        Process *p1, *p2;
        uint32_t st1, st2;
        int sv[2];

        ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) >= 0);
        ASSERT(agent_attach(s, sv[0]) >= 0);
        ASSERT(process_exec(s, &spec, &p1, NULL) >= 0);
        st1 = expect_frame(sv[1], rd, SPACE_F_EXEC);
        send_frame(sv[1], SPACE_F_STARTED, 0, st1, "pid=42", 7);
        loop_for(50000);
        ok(p1->state == PROCESS_RUNNING && p1->pid == 42, "the first process runs as pid 42, nobody follows it");

        ASSERT(process_exec(s, &spec, &p2, NULL) >= 0);
        st2 = expect_frame(sv[1], rd, SPACE_F_EXEC);
        /* The old one ends and is freed inside the walk over every process: ASan sees any later touch. */
        send_frame(sv[1], SPACE_F_STARTED, 0, st2, "pid=42", 7);
        loop_for(50000);
        ok(p2->state == PROCESS_RUNNING && p2->pid == 42 && process_find_by_pid(s, 42) == p2,
           "a STARTED that reuses the pid ends the old process without touching it once freed");

        send_frame(sv[1], SPACE_F_EXIT, 0, st2, "code=0", 7);
        loop_for(50000);
        s->channel.agent = agent_free(s->channel.agent);
        safe_close(sv[1]);
}


/* ---- a warm handout: INIT sent unanswered, the answer taken by the attached channel ---- */

static void test_reidentify(void) {
        ExecSpec spec = { .argv = (char *[]) { (char *) "true", NULL } };
        _cleanup_free_ SpaceFrameReader *rd = calloc(1, sizeof *rd), *rd2 = calloc(1, sizeof *rd2);
        Sandbox *s = sandbox_make("00000000000000000000000000000005");
        Sandbox *t = sandbox_make("00000000000000000000000000000006");
        char *env[] = { (char *) "N=1", NULL };
        const char refusal[] = "message=sethostname: no\0";
        uint32_t init, exec;
        Process *p;
        int sv[2];

        ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) >= 0);
        ASSERT(agent_reidentify_send(sv[0], s->id, "sb-000000000000", env, NULL, NULL) >= 0);
        ASSERT(agent_attach_reidentified(s, sv[0]) >= 0);
        init = expect_frame(sv[1], rd, SPACE_F_INIT);
        ASSERT(process_exec(s, &spec, &p, NULL) >= 0);
        exec = expect_frame(sv[1], rd, SPACE_F_EXEC);
        ok(init != 0 && exec != 0 && init != exec,
           "handout: INIT is on the channel before the first command, which goes out unanswered INIT or not "
           "(streams %u, %u)", init, exec);
        send_frame(sv[1], SPACE_F_OK, 0, init, NULL, 0);
        send_frame(sv[1], SPACE_F_STARTED, 0, exec, "pid=9", 6);
        loop_for(50000);
        ok(s->state == SANDBOX_RUNNING && s->channel.agent && !s->channel.agent->awaiting_identity && p->state == PROCESS_RUNNING,
           "handout: the guest's OK is taken by the channel; the sandbox runs its command");
        send_frame(sv[1], SPACE_F_EXIT, 0, exec, "code=0", 7);
        loop_for(50000);
        s->channel.agent = agent_free(s->channel.agent);
        safe_close(sv[1]);

        ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) >= 0);
        ASSERT(agent_reidentify_send(sv[0], t->id, "sb-000000000000", NULL, NULL, NULL) >= 0);
        ASSERT(agent_attach_reidentified(t, sv[0]) >= 0);
        init = expect_frame(sv[1], rd2, SPACE_F_INIT);
        send_frame(sv[1], SPACE_F_ERROR, 0, init, refusal, sizeof refusal - 1);
        loop_for(50000);
        ok(t->state == SANDBOX_ERROR && t->error && strstr(t->error, "refused its identity: sethostname: no"),
           "handout: a guest that refuses its identity fails the sandbox: %s", t->error ?: "(none)");
        if (t->channel.agent)
                t->channel.agent = agent_free(t->channel.agent);
        safe_close(sv[1]);
}

/* ---- the unseen warm-up after a create: ended by the user's first command if still running ---- */

static void test_warm_up(void) {
        ExecSpec spec = { .argv = (char *[]) { (char *) "true", NULL } };
        _cleanup_free_ SpaceFrameReader *rd = calloc(1, sizeof *rd);
        Sandbox *s = sandbox_make("00000000000000000000000000000007");
        uint32_t warm, sig;
        Process *p;
        int sv[2];

        ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) >= 0);
        ASSERT(agent_attach(s, sv[0]) >= 0);
        ASSERT(agent_warm_up_send(s->channel.agent, NULL, NULL, NULL) >= 0);
        warm = expect_frame(sv[1], rd, SPACE_F_EXEC);
        ASSERT(process_exec(s, &spec, &p, NULL) >= 0);
        sig = expect_frame(sv[1], rd, SPACE_F_SIGNAL);
        ok(warm != 0 && sig == warm && !s->channel.agent->warming_up && process_find_by_pid(s, 0) == NULL,
           "warm-up: a command that comes first ends it (SIGNAL on its stream %u), and it is no process of the user's",
           warm);
        send_frame(sv[1], SPACE_F_EXIT, 0, warm, "code=137", 9);

        ASSERT(agent_warm_up_send(s->channel.agent, NULL, NULL, NULL) >= 0);
        send_frame(sv[1], SPACE_F_EXIT, 0, warm, "code=0", 7);
        loop_for(50000);
        ok(!s->channel.agent->warming_up, "warm-up: its EXIT is taken by the channel, and nothing is left to end");
        s->channel.agent = agent_free(s->channel.agent);
        safe_close(sv[1]);
}

/* ---- the workload's freeze before a save: every answer a guest can give, and none ---- */

static int freeze_r = 1000;
static char freeze_msg[512];

static void freeze_cb(int r, const char *message, void *userdata) {
        freeze_r = r;
        snprintf(freeze_msg, sizeof freeze_msg, "%s", message ?: "");
        (*(unsigned *) userdata)++;
}

/* Asks for a freeze, answers it with type and payload (no answer when type is 0), and returns what the
 * callback got. */
static int freeze_answered(Sandbox *s, int guest, SpaceFrameReader *rd, uint8_t type, const void *p, size_t n,
                           unsigned *calls) {
        freeze_r = 1000;
        ASSERT(agent_freeze(s->channel.agent, 200000, freeze_cb, calls) >= 0);
        ASSERT(expect_frame(guest, rd, SPACE_F_PING) == AGENT_FREEZE_STREAM);
        if (type != 0)
                send_frame(guest, type, 0, AGENT_FREEZE_STREAM, p, n);
        loop_for(type != 0 ? 50000 : 300000);
        return freeze_r;
}

static void test_freeze(void) {
        _cleanup_free_ SpaceFrameReader *rd = calloc(1, sizeof *rd);
        Sandbox *s = sandbox_make("00000000000000000000000000000009");
        char error[400] = "errno=999999\0message=";
        unsigned calls = 0;
        size_t n;
        int sv[2], r;

        ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) >= 0);
        ASSERT(agent_attach(s, sv[0]) >= 0);
        r = freeze_answered(s, sv[1], rd, SPACE_F_PONG, "frozen", 6, &calls);
        ok(r == 1 && calls == 1, "freeze: PONG \"frozen\" is a frozen workload (%d)", r);
        r = freeze_answered(s, sv[1], rd, SPACE_F_PONG, "freeze", 6, &calls);
        ok(r == 0 && calls == 2, "freeze: the echo of an older agent is a workload that runs on (%d)", r);
        n = strlen("errno=999999") + 1 + strlen("message=");
        memset(error + n, 'x', 300);
        n += 301;
        r = freeze_answered(s, sv[1], rd, SPACE_F_ERROR, error, n, &calls);
        ok(r == -EIO && calls == 3 && strlen(freeze_msg) == 200,
           "freeze: an ERROR with an errno out of range is EIO, its message cut at 200 bytes (%d, %zu)", r,
           strlen(freeze_msg));
        r = freeze_answered(s, sv[1], rd, 0, NULL, 0, &calls);
        ok(r == -ETIMEDOUT && calls == 4, "freeze: a guest that never answers costs the timeout (%d)", r);
        send_frame(sv[1], SPACE_F_PONG, 0, AGENT_FREEZE_STREAM, "frozen", 6);
        loop_for(50000);
        ok(calls == 4 && s->channel.agent, "freeze: an answer nobody asked for is dropped");
        ASSERT(agent_freeze(s->channel.agent, 200000, freeze_cb, &calls) >= 0);
        ok(agent_freeze(s->channel.agent, 200000, freeze_cb, &calls) == -EBUSY, "freeze: one at a time");
        s->channel.agent = agent_free(s->channel.agent);
        ok(freeze_r == -ECONNRESET && calls == 5, "freeze: a channel that goes ends the wait (%d)", freeze_r);
        safe_close(sv[1]);

        ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) >= 0);
        send_frame(sv[1], SPACE_F_PONG, 0, AGENT_FREEZE_STREAM, "frozen", 6);
        r = agent_freeze_blocking(sv[0], 1000, NULL);
        ok(r == 1 && expect_frame(sv[1], rd, SPACE_F_PING) == AGENT_FREEZE_STREAM,
           "freeze on a worker's fd: PING \"freeze\" out, PONG \"frozen\" in (%d)", r);
        r = agent_freeze_blocking(sv[0], 100, NULL);
        ok(r == -ETIMEDOUT, "freeze on a worker's fd: bounded too (%d)", r);
        safe_close(sv[0]);
        safe_close(sv[1]);
}

/* The stop's PING "stop": answered as a freeze, but only PONG "synced" is a synced guest. */
static int stop_answered(Sandbox *s, int guest, SpaceFrameReader *rd, uint8_t type, const void *p, size_t n,
                         unsigned *calls) {
        freeze_r = 1000;
        ASSERT(agent_stop_sync(s->channel.agent, 200000, freeze_cb, calls) >= 0);
        ASSERT(expect_frame(guest, rd, SPACE_F_PING) == AGENT_FREEZE_STREAM);
        if (type != 0)
                send_frame(guest, type, 0, AGENT_FREEZE_STREAM, p, n);
        loop_for(type != 0 ? 50000 : 300000);
        return freeze_r;
}

static void test_stop_sync(void) {
        _cleanup_free_ SpaceFrameReader *rd = calloc(1, sizeof *rd);
        Sandbox *s = sandbox_make("0000000000000000000000000000000b");
        unsigned calls = 0;
        int sv[2], r;

        ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) >= 0);
        ASSERT(agent_attach(s, sv[0]) >= 0);
        r = stop_answered(s, sv[1], rd, SPACE_F_PONG, "synced", 6, &calls);
        ok(r == 1 && calls == 1, "stop: PONG \"synced\" is a synced guest (%d)", r);
        r = stop_answered(s, sv[1], rd, SPACE_F_PONG, "stop", 4, &calls);
        ok(r == 0 && calls == 2, "stop: the echo of an older agent synced nothing (%d)", r);
        r = stop_answered(s, sv[1], rd, SPACE_F_PONG, "frozen", 6, &calls);
        ok(r == 0 && calls == 3, "stop: a freeze's answer is not a sync's (%d)", r);
        r = stop_answered(s, sv[1], rd, SPACE_F_PONG, "syncedX", 7, &calls);
        ok(r == 0 && calls == 4, "stop: nor is a longer word that starts like it (%d)", r);
        r = stop_answered(s, sv[1], rd, SPACE_F_ERROR, "errno=5\0message=no", 18, &calls);
        ok(r == -EIO && calls == 5, "stop: an ERROR is the guest's error (%d)", r);
        r = stop_answered(s, sv[1], rd, 0, NULL, 0, &calls);
        ok(r == -ETIMEDOUT && calls == 6, "stop: a guest that never answers costs the timeout (%d)", r);
        /* and the next freeze is a freeze again, not a stop */
        r = freeze_answered(s, sv[1], rd, SPACE_F_PONG, "frozen", 6, &calls);
        ok(r == 1 && calls == 7, "stop: a freeze after it takes \"frozen\" again (%d)", r);
        s->channel.agent = agent_free(s->channel.agent);
        safe_close(sv[1]);
}

/* ---- the fake QEMU: agent.sock, accepted by hand ---- */

static int listener = -1;

static void listener_open(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        snprintf(sa.sun_path, sizeof sa.sun_path, "%s/run/agent.sock", tmpdir);
        listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ASSERT(listener >= 0);
        ASSERT(bind(listener, (struct sockaddr *) &sa, sizeof sa) >= 0);
        ASSERT(listen(listener, 16) >= 0);
}

/* Runs the loop until the daemon connects (the guest's end) or the time is up (-1). */
static int accept_within(uint64_t usec) {
        uint64_t end = now_usec_monotonic() + usec;

        while (now_usec_monotonic() < end) {
                int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);

                if (fd >= 0)
                        return fd;
                (void) sd_event_run(manager.event, 5000);
        }
        return -1;
}

/* Runs the loop until the host closes fd (true) or the time is up. */
static bool closed_within(int fd, uint64_t usec) {
        uint64_t end = now_usec_monotonic() + usec;
        uint8_t buf[4096];

        while (now_usec_monotonic() < end) {
                ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);

                if (n == 0 || (n < 0 && errno != EAGAIN))
                        return true;
                if (n < 0)
                        (void) sd_event_run(manager.event, 5000);
        }
        return false;
}

static const uint8_t garbage[12] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

static void test_garbage_backoff_failed(void) {
        Sandbox *s = sandbox_make("00000000000000000000000000000002");
        uint64_t dropped = 0, gaps[32];
        unsigned n_conn = 0, n_gaps = 0, n_warn = 0, n_suppressed_notes = 0;
        bool grows = true;
        _cleanup_free_ char *warn_path = NULL;
        char line[1024];
        FILE *f;
        int g, saved_err, wfd;

        /* the daemon's warnings, to count them */
        ASSERT(asprintf(&warn_path, "%s/warnings.log", tmpdir) >= 0);
        fflush(stderr);
        saved_err = dup(STDERR_FILENO);
        wfd = open(warn_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT(saved_err >= 0 && wfd >= 0);
        (void) dup2(wfd, STDERR_FILENO);
        close(wfd);
        log_max_level = LOG_WARNING_LEVEL;

        ASSERT(agent_connect(s) >= 0);
        g = accept_within(1000000);
        ok(g >= 0, "garbage: the daemon connects to agent.sock");
        while (g >= 0 && n_conn < 32) {
                n_conn++;
                if (dropped)
                        gaps[n_gaps++] = now_usec_monotonic() - dropped;
                ASSERT(loop_write(g, garbage, sizeof garbage) >= 0);
                if (!closed_within(g, 2000000))
                        break;
                dropped = now_usec_monotonic();
                safe_close(g);
                if (n_conn == 1)
                        ok(!s->channel.agent, "garbage: a malformed frame drops the channel");
                if (s->state == SANDBOX_ERROR)
                        break;
                g = accept_within(40000000);
        }
        fflush(stderr);
        (void) dup2(saved_err, STDERR_FILENO);
        close(saved_err);
        log_max_level = LOG_ERR_LEVEL;
        f = fopen(warn_path, "re");
        while (f && fgets(line, sizeof line, f))
                if (strstr(line, s->id) && strstr(line, "warning: ")) {
                        n_warn++;
                        n_suppressed_notes += !!strstr(line, "similar messages suppressed");
                }
        if (f)
                fclose(f);
        ok(n_warn >= 1 && n_warn <= 3 && n_suppressed_notes >= 1,
           "garbage: %u channel losses gave %u warnings (one per 10 s), %u of them counting those left out",
           n_conn, n_warn, n_suppressed_notes);
        for (unsigned i = 0; i < n_gaps; i++) {
                diag("reconnect %u after %.3f s", i + 1, (double) gaps[i] / 1e6);
                if (gaps[i] < 90000 || (i > 0 && gaps[i] < gaps[i - 1] * 3 / 2))
                        grows = false;
        }
        ok(n_gaps >= 3 && grows, "garbage: reconnects back off (%u of them, from 0.1 s, each about twice the last)",
           n_gaps);
        ok(s->state == SANDBOX_ERROR && s->error && strstr(s->error, "broke the channel protocol") && !s->channel.agent,
           "garbage: after %u connections with garbage the sandbox is failed: %s", n_conn, s->error ?: "(none)");
        g = accept_within(3000000);
        ok(g < 0, "garbage: the failed sandbox's channel is not reconnected");
        ok(waitpid(s->qemu_pid, NULL, WNOHANG) == s->qemu_pid || kill(s->qemu_pid, 0) < 0,
           "garbage: the failed sandbox's QEMU was stopped");
        safe_close(g);
        {
                /* what a restarted daemon (and spacectl inspect) would see */
                Manager m2 = { .store = manager.store };
                Sandbox *t;

                ASSERT(store_load_sandboxes(manager.store, &m2) >= 0);
                t = sandbox_find_by_id(&m2, s->id);
                ok(t && t->state == SANDBOX_ERROR && t->error && streq(t->error, s->error),
                   "garbage: the failed state and its reason are saved");
                while (m2.sandboxes) {
                        t = m2.sandboxes;
                        m2.sandboxes = t->next;
                        sandbox_free(t);
                }
        }
}

/* ---- a flood while the loop must keep its timers ---- */

static volatile bool flood_stop, flood_done;
static uint64_t flood_bytes;

static void *flood_thread(void *userdata) {
        static uint8_t junk[SPACE_FRAME_PAYLOAD_MAX];
        unsigned *n_conn = userdata;
        uint8_t sink[65536];

        while (!flood_stop) {
                struct pollfd pl = { .fd = listener, .events = POLLIN };
                uint64_t until;
                int g;

                if (poll(&pl, 1, 100) <= 0)
                        continue;
                g = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
                if (g < 0)
                        continue;
                (*n_conn)++;
                /* never blocked for good on a host that stopped reading (the test's loop ends first) */
                (void) setsockopt(g, SOL_SOCKET, SO_SNDTIMEO, &(struct timeval) { .tv_usec = 200000 },
                                  sizeof(struct timeval));
                /* frames the host must read and answer (output on streams it does not know), then garbage */
                until = now_usec_monotonic() + 4000000;
                while (!flood_stop && now_usec_monotonic() < until) {
                        _cleanup_(space_buf_done) SpaceBuf b = {};

                        (void) space_frame_append(&b, SPACE_F_DATA, 1, 5, junk, sizeof junk);
                        (void) space_frame_append(&b, SPACE_F_HELLO, 0, 0, "x=y", 4);
                        if (loop_write(g, b.data, b.len) < 0)
                                break;
                        flood_bytes += b.len;
                        while (recv(g, sink, sizeof sink, MSG_DONTWAIT) > 0)
                                ;
                }
                (void) write(g, garbage, sizeof garbage);
                safe_close(g);
        }
        flood_done = true;
        return NULL;
}

static int on_tick(sd_event_source *src, uint64_t usec, void *userdata) {
        uint64_t *lat = userdata;
        uint64_t now = now_usec_monotonic();

        lat[++lat[0]] = now > usec ? now - usec : 0;
        if (lat[0] < 100000)
                (void) sd_event_source_set_time(src, now + 10000);
        return 0;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static void test_flood_responsive(void) {
        Sandbox *s = sandbox_make("00000000000000000000000000000003");
        const char *env = getenv("SPACE_TEST_FLOOD_SEC");
        unsigned sec = env ? (unsigned) atoi(env) : 30, n_conn = 0;
        _cleanup_free_ uint64_t *lat = calloc(100001, sizeof *lat);
        sd_event_source *tick = NULL;
        pthread_t t;
        uint64_t p50, p99, max;

        ASSERT(pthread_create(&t, NULL, flood_thread, &n_conn) == 0);
        ASSERT(agent_connect(s) >= 0);
        ASSERT(sd_event_add_time(manager.event, &tick, CLOCK_MONOTONIC, now_usec_monotonic() + 10000, 0, on_tick,
                                 lat) >= 0);
        ASSERT(sd_event_source_set_enabled(tick, SD_EVENT_ON) >= 0);
        loop_for((uint64_t) sec * 1000000);
        flood_stop = true;
        while (!flood_done)   /* the host keeps reading until the guest has stopped writing */
                (void) sd_event_run(manager.event, 10000);
        pthread_join(t, NULL);
        sd_event_source_disable_unref(tick);
        qsort(lat + 1, lat[0], sizeof *lat, cmp_u64);
        p50 = lat[1 + lat[0] / 2];
        p99 = lat[1 + lat[0] * 99 / 100];
        max = lat[lat[0]];
        diag("flood for %u s: %" PRIu64 " MiB of frames the host must parse and answer, then garbage, over %u "
             "connections", sec, flood_bytes >> 20, n_conn);
        diag("flood for %u s: %u connections, sandbox %s; a 10 ms timer fired %" PRIu64 " times, lateness p50 %.1f ms, "
             "p99 %.1f ms, max %.1f ms", sec, n_conn, sandbox_state_to_string(s->state), lat[0], p50 / 1e3,
             p99 / 1e3, max / 1e3);
        ok(lat[0] > (uint64_t) sec * 50 && p99 < 250000,
           "flood: the loop keeps answering its timers (p99 lateness %.1f ms)", p99 / 1e3);
        s->channel.agent = agent_free(s->channel.agent);
}

/* ---- per-sandbox bounds ---- */

static int fmt_event(void *userdata, SpaceBuf *buf, const ProcessEvent *e) {
        buf->len = 0;
        return space_buf_append(buf, e->name, strlen(e->name));
}

/* ---- error events: a code and a message as values, and /v1's JSON of them byte for byte ---- */

typedef struct Caught {
        unsigned n;
        uint64_t id;
        ErrorCode code;
        char message[256];
        char json[512];
} Caught;

static int catch_error(void *userdata, SpaceBuf *buf, const ProcessEvent *e) {
        Caught *c = userdata;

        buf->len = 0;
        if (e->type != EVENT_ERROR)
                return space_buf_append(buf, "x", 1);
        c->n++;
        c->id = e->id;
        c->code = e->code;
        snprintf(c->message, sizeof c->message, "%s", e->message ?: "(null)");
        snprintf(c->json, sizeof c->json, "%.*s", (int) e->n, (const char *) e->data);
        return space_buf_append(buf, "e", 1);
}

/* Reads p's events from after_id to the end (or what there is now) into c; an ended p goes with the client. */
static void read_events(Process *p, uint64_t after_id, Caught *c) {
        ChannelWaiter w = {};
        ProcessClient *cl;
        char buf[4096];

        *c = (Caught) {};
        ASSERT(process_client_new(p, after_id, false, catch_error, c, &w, &cl) == 0);
        while (process_client_read(cl, buf, sizeof buf) > 0)
                ;
        process_client_close(cl);
}

static Process *exec_answered(Sandbox *s, int fd, SpaceFrameReader *rd, const char *const *recs, const char *started) {
        ExecSpec spec = { .argv = (char *[]) { (char *) "x", NULL } };
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        ChannelWaiter w = {};
        ProcessClient *cl;
        Process *p;
        uint32_t st;

        ASSERT(process_exec(s, &spec, &p, NULL) >= 0);
        ASSERT(process_client_new(p, 0, true, catch_error, &(Caught) {}, &w, &cl) == 0); /* keeps p while we look */
        st = expect_frame(fd, rd, SPACE_F_EXEC);
        if (started)
                send_frame(fd, SPACE_F_STARTED, 0, st, started, strlen(started) + 1);
        for (; *recs; recs++)
                ASSERT(space_kv_add(&kv, (*recs)[0] == 'c' ? "code" : (*recs)[0] == 'e' ? "errno" :
                                         (*recs)[0] == 's' ? "stage" : "message", strchr(*recs, '=') + 1) >= 0);
        send_frame(fd, SPACE_F_ERROR, 0, st, kv.data, kv.len);
        loop_for(50000);
        process_client_free(cl);
        return p;
}

static void test_error_events(void) {
        Sandbox *s = sandbox_make("00000000000000000000000000000008");
        _cleanup_free_ SpaceFrameReader *rd = calloc(1, sizeof *rd);
        _cleanup_free_ char *legacy = NULL;
        static const char legacy_json[] = "{\"code\":\"exec_failed\",\"message\":\"from before\"}";
        ProcessRecord rec = { .state = (char *) "exited", .argv = (char *) "[]", .exit_code = 126 };
        ProcessLog *l;
        Process *p;
        Caught c;
        int sv[2];

        ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) >= 0);
        ASSERT(agent_attach(s, sv[0]) >= 0);

        p = exec_answered(s, sv[1], rd, (const char *[]) { "errno=0", "message=no such user: bob", "stage=user",
                                                           "code=unknown_user", NULL }, NULL);
        read_events(p, 0, &c);
        ok(c.n == 1 && c.code == ERROR_UNKNOWN_USER && streq(c.message, "no such user: bob") &&
           streq(c.json, "{\"code\":\"unknown_user\",\"message\":\"no such user: bob\"}"),
           "error event: code=unknown_user is ERROR_UNKNOWN_USER as a value, and /v1's JSON as before: %s", c.json);

        p = exec_answered(s, sv[1], rd, (const char *[]) { "errno=2", "message=x", "code=denied", NULL }, NULL);
        read_events(p, 0, &c);
        ok(c.n == 1 && c.code == ERROR_COMMAND_NOT_FOUND &&
                   strstr(c.json, "\"code\":\"command_not_found\"") && strstr(c.json, ": command not found in sandbox ") &&
                   strstr(c.json, "(template minimal) (x)\"}"),
           "error event: a code EXEC may not give (denied) leaves the errno to decide: %s", c.json);

        /* from the log, once the process is gone from memory: the record holds the code */
        p = exec_answered(s, sv[1], rd, (const char *[]) { "errno=13", "message=no \"x\"", NULL }, "pid=77");
        ASSERT(p->ended && !process_maybe_free(p));
        p = process_get(&manager, s, 77);
        ASSERT(p);
        read_events(p, 0, &c);
        ok(c.n == 1 && c.id == 2 && c.code == ERROR_PERMISSION_DENIED && streq(c.message, "no \"x\"") &&
           streq(c.json, "{\"code\":\"permission_denied\",\"message\":\"no \\\"x\\\"\"}"),
           "error event: read back from the log as a code, the JSON escaped as before: %s", c.json);

        /* an older daemon's record is JSON: it goes out as it was written */
        ASSERT(asprintf(&legacy, "%s/processes/78.log", s->data_dir) >= 0);
        ASSERT(process_log_create(legacy, PROCESS_LOG_CAP, &l) >= 0);
        ASSERT(process_log_append(l, 1, EVENT_ERROR, legacy_json, sizeof legacy_json - 1) >= 0);
        process_log_free(l);
        memcpy(rec.sandbox_id, s->id, sizeof rec.sandbox_id);
        rec.pid = 78;
        rec.last_event_id = 1;
        rec.log_path = legacy;
        ASSERT(store_put_process(manager.store, &rec) >= 0);
        p = process_get(&manager, s, 78);
        ASSERT(p);
        read_events(p, 0, &c);
        ok(c.n == 1 && streq(c.json, legacy_json) && c.code == ERROR_INTERNAL,
           "error event: an older daemon's JSON record goes out byte for byte: %s", c.json);

        /* events no longer kept: this client's own error, with first_available */
        rec.pid = 79;
        rec.last_event_id = 3;
        rec.log_path = (char *) "/nonexistent/79.log";
        ASSERT(store_put_process(manager.store, &rec) >= 0);
        p = process_get(&manager, s, 79);
        ASSERT(p);
        read_events(p, 0, &c);
        ok(c.n == 1 && c.id == 3 && c.code == ERROR_EVENTS_LOST &&
           streq(c.message, "events after 0 are no longer kept; the first kept is 4") &&
           streq(c.json, "{\"code\":\"events_lost\",\"message\":\"events after 0 are no longer kept; the first "
                         "kept is 4\",\"first_available\":4}"),
           "error event: events_lost as a value and as /v1's JSON: %s", c.json);

        s->channel.agent = agent_free(s->channel.agent);
        safe_close(sv[1]);
}

static void big_file(const char *dir, const char *name, uint64_t size) {
        _cleanup_free_ char *path = NULL;
        int fd;

        ASSERT(asprintf(&path, "%s/%s", dir, name) >= 0);
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ASSERT(fd >= 0);
        ASSERT(ftruncate(fd, (off_t) size) >= 0);   /* sparse: the bound counts what the logs claim */
        close(fd);
}

static void test_bounds(void) {
        Sandbox *s = sandbox_make("00000000000000000000000000000004");
        ExecSpec spec = { .argv = (char *[]) { (char *) "sh", NULL } };
        _cleanup_free_ SpaceFrameReader *rd = calloc(1, sizeof *rd);
        _cleanup_free_ char *dir = NULL, *old = NULL;
        ProcessClient *clients[PROCESS_CLIENTS_MAX + 1];
        ChannelWaiter w = {};
        Error err = {};
        Process *p, *q;
        unsigned n = 0;
        uint32_t st;
        int sv[2], r;

        ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) >= 0);
        ASSERT(agent_attach(s, sv[0]) >= 0);
        ASSERT(process_exec(s, &spec, &p, NULL) >= 0);
        st = expect_frame(sv[1], rd, SPACE_F_EXEC);
        send_frame(sv[1], SPACE_F_STARTED, 0, st, "pid=7", 6);
        loop_for(50000);
        ASSERT(p->state == PROCESS_RUNNING);

        /* streams: as many readers as the bound, then a clear refusal */
        while (n <= PROCESS_CLIENTS_MAX && process_client_new(p, 0, true, fmt_event, NULL, &w, &clients[n]) == 0)
                n++;
        ok(n == PROCESS_CLIENTS_MAX && process_client_new(p, 0, false, fmt_event, NULL, &w, &clients[n]) == -EMFILE,
           "streams: %u readers of one sandbox's processes, then -EMFILE (too_many_streams)", n);
        while (n > 0)
                process_client_close(clients[--n]);

        /* log bytes: what the daemon writes is counted, so that an exec scans the directory only near the bound */
        ok(s->channel.process_log_bytes_known && s->channel.process_log_bytes >= 6,
           "logs: the bytes of the logs written are counted (%llu)", (unsigned long long) s->channel.process_log_bytes);

        /* an ended process's big log goes; a running one's is kept and refuses new processes. The files are made
         * here behind the daemon's back, as a restarted daemon finds them: it knows their size after its scan. */
        ASSERT(asprintf(&dir, "%s/processes", s->data_dir) >= 0);
        big_file(dir, "3.log", PROCESS_LOGS_MAX);
        big_file(dir, "3.log.1", 1024);
        ASSERT(asprintf(&old, "%s/3.log", dir) >= 0);
        s->channel.process_log_bytes_known = false;
        r = process_exec(s, &spec, &q, &err);
        ok(r >= 0 && access(old, F_OK) < 0, "logs: over the bound, the ended process's log is removed to make room");
        if (r >= 0) {
                st = expect_frame(sv[1], rd, SPACE_F_EXEC);
                send_frame(sv[1], SPACE_F_EXIT, 0, st, "code=0", 7);
        }
        big_file(dir, "7.log", PROCESS_LOGS_MAX + 1);
        s->channel.process_log_bytes_known = false;
        r = process_exec(s, &spec, &q, &err);
        ok(r < 0 && err.code == ERROR_TOO_MANY_PROCESSES && strstr(err.message, "logs of its running processes"),
           "logs: a running process's log over the bound refuses new ones: %s", err.message ?: "(none)");
        error_done(&err);
        /* and bytes the daemon wrote itself bring the scan back without being told */
        s->channel.process_log_bytes_known = true;
        s->channel.process_log_bytes = PROCESS_LOGS_MAX + 1;
        r = process_exec(s, &spec, &q, &err);
        ok(r < 0 && err.code == ERROR_TOO_MANY_PROCESSES,
           "logs: counted bytes past the bound make the next exec scan again, and refuse: %s", err.message ?: "(none)");
        error_done(&err);

        send_frame(sv[1], SPACE_F_EXIT, 0, p->stream, "code=0", 7);
        loop_for(50000);
        s->channel.agent = agent_free(s->channel.agent);
        safe_close(sv[1]);
}

int main(void) {
        Error err = {};
        _cleanup_free_ char *db = NULL, *run = NULL, *arg = NULL;

        plan(0);
        log_max_level = LOG_ERR_LEVEL;
        sandbox_register_ops();   /* what the channel reads of a sandbox */
        (void) signal(SIGPIPE, SIG_IGN);   /* as spaced does: a guest that hangs up is an EPIPE, not a death */
        ASSERT(mkdtemp(tmpdir));
        (void) asprintf(&db, "%s/state.db", tmpdir);
        (void) asprintf(&run, "%s/run", tmpdir);
        (void) asprintf(&arg, "%s/run/qemu.pid", tmpdir);
        ASSERT(mkdir(run, 0700) >= 0);
        ASSERT(sd_event_new(&manager.event) >= 0);
        ASSERT(store_open(db, &manager.store, &err) >= 0);
        manager.state_dir = tmpdir;
        ASSERT(volumes_load(&manager, &err) >= 0);

        ASSERT(pipe2(hold, O_CLOEXEC) >= 0);
        fake_arg = strdup(arg);
        test_started_reused_pid();
        test_bounds();
        test_error_events();
        test_reidentify();
        test_warm_up();
        test_freeze();
        test_stop_sync();
        test_volume_requests();
        listener_open();
        test_garbage_backoff_failed();
        test_flood_responsive();

        close(hold[1]);   /* every stand-in reads EOF and exits */
        while (waitpid(-1, NULL, 0) > 0)
                ;
        free(fake_arg);
        {
                _cleanup_free_ char *cmd = NULL;
                (void) asprintf(&cmd, "rm -rf %s", tmpdir);
                (void) system(cmd);
        }
        return done();
}
