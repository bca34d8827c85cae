/* SPDX-License-Identifier: Apache-2.0 */

/* The run-state watcher (spaced/vm/vm-events*.c) against QEMU 7.2's own lines: the parser and the classification
 * one line at a time, then the watcher in an sd-event loop against a fake QEMU on a unix socket, through a
 * daemon's pause (no failure), a KVM internal error (which TCG cannot make, so this is where it is tested), a
 * pvpanic GUEST_PANICKED, a panic=-1 reset held by -no-shutdown, and hostile monitors (an overlong line, bad
 * JSON, a NUL, a refused query-status, EOF). */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "vm/vmm.h"
#include "tap.h"

#define TS "\"timestamp\": {\"seconds\": 1765100000, \"microseconds\": 123456}, "

/* QEMU 7.2's lines, as `-qmp` sends them. */
static const char greeting[] =
        "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 22, \"minor\": 2, \"major\": 7}, \"package\": "
        "\"Debian 1:7.2+dfsg-7+deb12u18\"}, \"capabilities\": [\"oob\"]}}";
static const char caps_ok[] = "{\"return\": {}, \"id\": \"caps\"}";
static const char stop[] = "{" TS "\"event\": \"STOP\"}";
static const char resume[] = "{" TS "\"event\": \"RESUME\"}";
static const char unknown[] = "{" TS "\"event\": \"RTC_CHANGE\", \"data\": {\"offset\": 0, \"qom-path\": \"/machine/unattached/device[4]\"}}";
static const char panicked[] = "{" TS "\"event\": \"GUEST_PANICKED\", \"data\": {\"action\": \"pause\"}}";
static const char shutdown_reset[] = "{" TS "\"event\": \"SHUTDOWN\", \"data\": {\"guest\": true, \"reason\": \"guest-reset\"}}";
static const char shutdown_quit[] = "{" TS "\"event\": \"SHUTDOWN\", \"data\": {\"guest\": false, \"reason\": \"host-qmp-quit\"}}";

static char *status_line(const char *status) {
        char *s;
        ASSERT(asprintf(&s, "{\"return\": {\"status\": \"%s\", \"singlestep\": false, \"running\": %s}, \"id\": "
                            "\"status\"}", status, streq(status, "running") ? "true" : "false") > 0);
        return s;
}

static void test_parse(void) {
        VmQmpMsg m = {};
        _cleanup_free_ char *st = status_line("internal-error");

        ok(vm_qmp_msg_parse(greeting, &m) == 0 && m.kind == VM_QMP_GREETING, "the greeting");
        ok(vm_qmp_msg_parse(caps_ok, &m) == 0 && m.kind == VM_QMP_RETURN && streq(m.id, "caps") && !m.text,
           "qmp_capabilities' answer");
        ok(vm_qmp_msg_parse(stop, &m) == 0 && m.kind == VM_QMP_STOP, "STOP");
        ok(vm_qmp_msg_parse(resume, &m) == 0 && m.kind == VM_QMP_OTHER, "RESUME is nothing to act on");
        ok(vm_qmp_msg_parse(unknown, &m) == 0 && m.kind == VM_QMP_OTHER, "an unknown event is nothing to act on");
        ok(vm_qmp_msg_parse(panicked, &m) == 0 && m.kind == VM_QMP_GUEST_PANICKED, "GUEST_PANICKED");
        ok(vm_qmp_msg_parse(shutdown_reset, &m) == 0 && m.kind == VM_QMP_SHUTDOWN && m.guest &&
                   streq_ptr(m.text, "guest-reset"),
           "SHUTDOWN from the guest, its reason");
        vm_qmp_msg_done(&m);
        ok(vm_qmp_msg_parse(shutdown_quit, &m) == 0 && m.kind == VM_QMP_SHUTDOWN && !m.guest,
           "SHUTDOWN from the host is not the guest's");
        vm_qmp_msg_done(&m);
        ok(vm_qmp_msg_parse(st, &m) == 0 && m.kind == VM_QMP_RETURN && streq(m.id, "status") &&
                   streq_ptr(m.text, "internal-error"),
           "query-status' answer: internal-error");
        vm_qmp_msg_done(&m);
        ok(vm_qmp_msg_parse("{\"return\": \"[    1.2] Kernel panic\\r\\n\", \"id\": \"console\"}", &m) == 0 &&
                   m.kind == VM_QMP_RETURN && streq_ptr(m.text, "[    1.2] Kernel panic\r\n"),
           "ringbuf-read's answer is its text");
        vm_qmp_msg_done(&m);
        ok(vm_qmp_msg_parse("{\"error\": {\"class\": \"GenericError\", \"desc\": \"no\"}, \"id\": \"status\"}", &m) == 0 &&
                   m.kind == VM_QMP_ERROR && streq(m.id, "status"),
           "an error answer");

        /* hostile lines: refused, m untouched */
        m = (VmQmpMsg) { .kind = VM_QMP_STOP };
        ok(vm_qmp_msg_parse("{\"event\": \"STOP\"", &m) == -EBADMSG && m.kind == VM_QMP_STOP, "cut-off JSON");
        ok(vm_qmp_msg_parse("[\"event\", \"STOP\"]", &m) == -EBADMSG, "not an object");
        ok(vm_qmp_msg_parse("{\"event\": 7}", &m) == -EBADMSG, "an event that is not a string");
        ok(vm_qmp_msg_parse("{\"event\": \"SHUTDOWN\", \"data\": {\"guest\": \"yes\"}}", &m) == -EBADMSG,
           "SHUTDOWN's guest not a boolean");
        ok(vm_qmp_msg_parse("{\"event\": \"SHUTDOWN\", \"data\": [1]}", &m) == -EBADMSG, "data not an object");
        ok(vm_qmp_msg_parse("{\"return\": {\"status\": 3}, \"id\": \"status\"}", &m) == -EBADMSG,
           "a status that is not a string");
        ok(vm_qmp_msg_parse("{\"return\": {}, \"id\": \"caps-and-a-much-longer-id-than-ours\"}", &m) == 0 &&
                   m.id[0] == 0,
           "an id longer than ours is not ours");
        ok(vm_qmp_msg_parse("{}", &m) == 0 && m.kind == VM_QMP_OTHER, "an empty object is nothing");
}

static void test_classify(void) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL, *f = NULL;
        const char *console = "[  1.0] sysrq: Trigger a crash\r\n[  1.0] Kernel panic - not syncing: sysrq "
                              "triggered crash\r\n[  1.0] CPU: 0 PID: 1\r\n";

        ok(vm_run_status_failure("running") == VM_RUN_OK && vm_run_status_failure("paused") == VM_RUN_OK &&
                   vm_run_status_failure("postmigrate") == VM_RUN_OK &&
                   vm_run_status_failure("finish-migrate") == VM_RUN_OK && vm_run_status_failure(NULL) == VM_RUN_OK,
           "the daemon's own stops fail nothing");
        ok(vm_run_status_failure("internal-error") == VM_RUN_INTERNAL_ERROR &&
                   vm_run_status_failure("guest-panicked") == VM_RUN_GUEST_PANICKED &&
                   vm_run_status_failure("shutdown") == VM_RUN_GUEST_SHUTDOWN,
           "QEMU's own stops fail the VM");
        ASSERT(vm_run_failure_reason(VM_RUN_INTERNAL_ERROR, NULL, console, &a) == 0);
        ASSERT(vm_run_failure_reason(VM_RUN_GUEST_PANICKED, NULL, console, &b) == 0);
        ASSERT(vm_run_failure_reason(VM_RUN_GUEST_SHUTDOWN, "guest-reset", console, &c) == 0);
        ASSERT(vm_run_failure_reason(VM_RUN_GUEST_SHUTDOWN, "guest-reset", "reboot: Restarting system\n", &d) == 0);
        ok(streq(a, "QEMU stopped the VM with an internal error (KVM could not emulate an instruction); "
                            "see qemu.log"),
           "internal error: %s", a);
        ok(streq(b, "the guest's kernel panicked: Kernel panic - not syncing: sysrq triggered crash"),
           "panic, its line without CR: %s", b);
        ok(streq(b, c),
           "a reset whose console shows a panic is that panic");
        ok(strstr(d, "rebooted") != NULL,
           "a reset without a panic: %s", d);
        ok(vm_run_failure_reason(VM_RUN_GUEST_PANICKED, NULL, NULL, &e) == 0 &&
                   streq(e, "the guest's kernel panicked"),
           "a panic with no console");
        {
                char hostile[600];
                memset(hostile, 'A', sizeof(hostile) - 1);
                hostile[sizeof(hostile) - 1] = 0;
                memcpy(hostile + 10, "Kernel panic \x1b[31m\xff", 19);
                ok(vm_run_failure_reason(VM_RUN_GUEST_PANICKED, NULL, hostile, &f) == 0 &&
                           strlen(f) <= strlen("the guest's kernel panicked: ") + 200 && !strchr(f, '\x1b') &&
                           !strchr(f, '\xff'),
                   "the guest's line is bounded and scrubbed");
        }
}

/* ---- the watcher against a fake QEMU ---- */

typedef struct Result {
        bool called;
        VmRunFailure f;
        char *reason;
} Result;

static void on_result(VmEvents *w, VmRunFailure f, const char *reason, void *userdata) {
        Result *res = userdata;

        ASSERT(!res->called); /* at most once */
        res->called = true;
        res->f = f;
        res->reason = reason ? strdup(reason) : NULL;
        vm_events_free(w);
}

typedef struct Fake {
        char dir[64];
        int listen_fd, fd;
        sd_event *e;
        Result res;
        char in[VM_EVENTS_LINE_MAX * 2];
        size_t in_len;
} Fake;

static void fake_start(Fake *k) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        VmEvents *w = NULL;

        *k = (Fake) { .listen_fd = -1, .fd = -1 };
        strcpy(k->dir, "/tmp/test-vm-events.XXXXXX");
        ASSERT(mkdtemp(k->dir));
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" VM_EVENTS_SOCKET, k->dir);
        k->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT(k->listen_fd >= 0 && bind(k->listen_fd, (struct sockaddr *) &sa, sizeof(sa)) == 0 &&
               listen(k->listen_fd, 1) == 0);
        ASSERT(sd_event_new(&k->e) >= 0);
        ASSERT(vm_events_watch(k->e, k->dir, on_result, &k->res, &w) == 0 && w);
        k->fd = accept4(k->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        ASSERT(k->fd >= 0);
}

static void fake_stop(Fake *k) {
        char p[128];

        safe_close(k->fd);
        safe_close(k->listen_fd);
        snprintf(p, sizeof(p), "%s/" VM_EVENTS_SOCKET, k->dir);
        (void) unlink(p);
        (void) rmdir(k->dir);
        sd_event_unref(k->e);
        free(k->res.reason);
}

/* Runs the loop until the watcher said something back or reported. */
static void pump(Fake *k) {
        for (int i = 0; i < 50 && !k->res.called; i++) {
                struct pollfd p = { .fd = k->fd, .events = POLLIN };
                if (poll(&p, 1, 0) > 0)
                        return;
                (void) sd_event_run(k->e, 20 * 1000);
        }
}

/* Sends s while the loop runs, so that the watcher may read it; stops early once the watcher is gone (it
 * closed its end: a line over its bound). */
static void send_text(Fake *k, const char *s) {
        size_t n = strlen(s), off = 0;

        while (off < n && !k->res.called) {
                ssize_t r = send(k->fd, s + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (r > 0)
                        off += (size_t) r;
                else if (r < 0 && errno != EAGAIN)
                        return;
                else
                        (void) sd_event_run(k->e, 20 * 1000);
        }
}

static void send_line(Fake *k, const char *line) {
        send_text(k, line);
        send_text(k, "\n");
}

/* The next command the watcher sent, as a line ("" when none came). */
static char *next_cmd(Fake *k) {
        static char line[1024];

        pump(k);
        for (;;) {
                char *nl = memchr(k->in, '\n', k->in_len);
                if (nl) {
                        size_t n = MIN((size_t) (nl - k->in), sizeof(line) - 1);
                        memcpy(line, k->in, n);
                        line[n] = 0;
                        memmove(k->in, nl + 1, k->in_len - (size_t) (nl - k->in) - 1);
                        k->in_len -= (size_t) (nl - k->in) + 1;
                        return line;
                }
                struct pollfd p = { .fd = k->fd, .events = POLLIN };
                if (poll(&p, 1, 200) <= 0)
                        return (line[0] = 0, line);
                ssize_t r = read(k->fd, k->in + k->in_len, sizeof(k->in) - k->in_len);
                if (r <= 0)
                        return (line[0] = 0, line);
                k->in_len += (size_t) r;
        }
}

static bool is_cmd(const char *line, const char *cmd, const char *id) {
        char want_cmd[64], want_id[64];
        snprintf(want_cmd, sizeof(want_cmd), "\"execute\":\"%s\"", cmd);
        snprintf(want_id, sizeof(want_id), "\"id\":\"%s\"", id);
        return strstr(line, want_cmd) && strstr(line, want_id);
}

/* greeting, capabilities, the first query-status answered with status. */
static bool handshake(Fake *k, const char *status) {
        _cleanup_free_ char *st = status_line(status);
        bool good;

        send_line(k, greeting);
        good = is_cmd(next_cmd(k), "qmp_capabilities", "caps");
        send_line(k, caps_ok);
        good = good && is_cmd(next_cmd(k), "query-status", "status");
        send_line(k, st);
        pump(k);
        return good;
}

/* The console drained: chunk, then the empty answer that says the ring is empty. */
static bool console(Fake *k, const char *chunk_json) {
        bool good = is_cmd(next_cmd(k), "ringbuf-read", "console");
        char *l;

        ASSERT(asprintf(&l, "{\"return\": %s, \"id\": \"console\"}", chunk_json) > 0);
        send_line(k, l);
        free(l);
        good = good && is_cmd(next_cmd(k), "ringbuf-read", "console");
        send_line(k, "{\"return\": \"\", \"id\": \"console\"}");
        pump(k);
        return good;
}

/* An empty console: one read, answered empty. */
static bool console_empty(Fake *k) {
        bool good = is_cmd(next_cmd(k), "ringbuf-read", "console");

        send_line(k, "{\"return\": \"\", \"id\": \"console\"}");
        pump(k);
        return good;
}

static void test_watch_internal_error(void) {
        _cleanup_free_ char *paused = status_line("paused"), *ierr = status_line("internal-error");
        Fake k;

        fake_start(&k);
        ok(handshake(&k, "running") && !k.res.called, "watch: greeting, capabilities, a first query-status");
        /* the daemon's pause: STOP, asked about, paused: nothing */
        send_line(&k, stop);
        ok(is_cmd(next_cmd(&k), "query-status", "status"), "watch: a STOP is asked about");
        send_line(&k, paused);
        send_line(&k, resume);
        send_line(&k, unknown);
        pump(&k);
        ok(!k.res.called, "watch: a pause (the daemon's STOP), RESUME and unknown events fail nothing");
        /* KVM's emulation failure: STOP, internal-error */
        send_line(&k, stop);
        ok(is_cmd(next_cmd(&k), "query-status", "status"), "watch: the next STOP is asked about too");
        send_line(&k, ierr);
        ok(console(&k, "\"[ 3.1] some guest text\\r\\n\"") && k.res.called && k.res.f == VM_RUN_INTERNAL_ERROR &&
                   streq_ptr(k.res.reason, "QEMU stopped the VM with an internal error (KVM could not emulate an "
                                           "instruction); see qemu.log"),
           "watch: internal-error fails it, after reading the console: %s", k.res.reason ?: "(none)");
        fake_stop(&k);
}

static void test_watch_panics(void) {
        _cleanup_free_ char *sd = status_line("shutdown"), *gp = status_line("guest-panicked");
        Fake k;

        fake_start(&k);
        handshake(&k, "running");
        send_line(&k, panicked);
        ok(console(&k, "\"[ 2.0] Kernel panic - not syncing: Fatal exception\\r\\n\"") && k.res.called &&
                   k.res.f == VM_RUN_GUEST_PANICKED &&
                   streq_ptr(k.res.reason, "the guest's kernel panicked: Kernel panic - not syncing: Fatal exception"),
           "watch: GUEST_PANICKED (pvpanic): %s", k.res.reason ?: "(none)");
        fake_stop(&k);

        /* panic=-1 under -no-reboot and -no-shutdown: SHUTDOWN guest-reset, STOP, status shutdown */
        fake_start(&k);
        handshake(&k, "running");
        send_line(&k, shutdown_reset);
        send_line(&k, stop);
        ok(is_cmd(next_cmd(&k), "query-status", "status"), "watch: a reset's STOP is asked about");
        send_line(&k, sd);
        ok(console(&k, "\"Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100\\r\\n\"") &&
                   k.res.called && k.res.f == VM_RUN_GUEST_SHUTDOWN &&
                   streq_ptr(k.res.reason, "the guest's kernel panicked: Kernel panic - not syncing: Attempted to "
                                           "kill init! exitcode=0x00000100"),
           "watch: a reset with a panic on the console: %s", k.res.reason ?: "(none)");
        fake_stop(&k);

        /* a daemon restarted after the guest panicked: the first query-status finds it */
        fake_start(&k);
        send_line(&k, greeting);
        (void) next_cmd(&k);
        send_line(&k, caps_ok);
        (void) next_cmd(&k);
        send_line(&k, gp);
        ok(console_empty(&k) && k.res.called && k.res.f == VM_RUN_GUEST_PANICKED &&
                   streq_ptr(k.res.reason, "the guest's kernel panicked"),
           "watch: a VM that failed before the watch is found by the first query-status");
        fake_stop(&k);
}

static void test_watch_hostile(void) {
        Fake k;

        fake_start(&k);
        handshake(&k, "running");
        {
                static char big[VM_EVENTS_LINE_MAX + 100];
                memset(big, 'x', sizeof(big) - 1);
                big[sizeof(big) - 1] = 0;
                send_text(&k, big);
        }
        pump(&k);
        ok(k.res.called && k.res.f == VM_RUN_OK && k.res.reason && strstr(k.res.reason, "64 KiB"),
           "hostile: a line over 64 KiB ends the watch, not the VM: %s", k.res.reason ?: "(none)");
        fake_stop(&k);

        fake_start(&k);
        handshake(&k, "running");
        send_line(&k, "{\"event\": \"STOP\", oops}");
        pump(&k);
        ok(k.res.called && k.res.f == VM_RUN_OK && k.res.reason && strstr(k.res.reason, "not QMP"),
           "hostile: bad JSON ends the watch: %s", k.res.reason ?: "(none)");
        fake_stop(&k);

        fake_start(&k);
        handshake(&k, "running");
        ASSERT(send(k.fd, "{\"event\": \"STOP\"}\0{\"x\":1}\n", 27, MSG_NOSIGNAL) == 27);
        pump(&k);
        ok(k.res.called && k.res.f == VM_RUN_OK && k.res.reason, "hostile: a NUL in a line ends the watch");
        fake_stop(&k);

        fake_start(&k);
        send_line(&k, greeting);
        (void) next_cmd(&k);
        send_line(&k, caps_ok);
        (void) next_cmd(&k);
        send_line(&k, "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"no\"}, \"id\": \"status\"}");
        pump(&k);
        ok(k.res.called && k.res.f == VM_RUN_OK && k.res.reason, "hostile: a refused query-status ends the watch");
        fake_stop(&k);

        fake_start(&k);
        handshake(&k, "running");
        k.fd = safe_close(k.fd);
        for (int i = 0; i < 50 && !k.res.called; i++)
                (void) sd_event_run(k.e, 20 * 1000);
        ok(k.res.called && k.res.f == VM_RUN_OK && !k.res.reason, "EOF (QEMU exited) ends the watch quietly");
        fake_stop(&k);

        {
                VmEvents *w = NULL;
                sd_event *e = NULL;
                ASSERT(sd_event_new(&e) >= 0);
                ok(vm_events_watch(e, "/nonexistent-run-dir", on_result, NULL, &w) == -ENOENT && !w,
                   "no events.sock (an older daemon's VM): -ENOENT");
                sd_event_unref(e);
        }
}

int main(void) {
        plan(42);
        test_parse();
        test_classify();
        test_watch_internal_error();
        test_watch_panics();
        test_watch_hostile();
        return done();
}
