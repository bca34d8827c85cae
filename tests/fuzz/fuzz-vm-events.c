/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: what a hostile QEMU sends on the run-state monitor (spaced/vm/vm-events.c and
 * vm-events-watch.c). QEMU is as untrusted as the guest: a guest that took it over writes these bytes.
 *
 * Input: the bytes QEMU sends, as one stream.
 * 1. Each line (to a newline, at most VM_EVENTS_LINE_MAX) goes to vm_qmp_msg_parse(). Invariants: 0 or
 *    -EBADMSG; a parsed message has a known kind, a NUL-terminated id, text only for an answer or a SHUTDOWN;
 *    the reason made of it (the text as status, shutdown reason and console, for every failure) is printable
 *    ASCII and bounded, whatever the guest wrote.
 * 2. The whole stream goes to a watcher in an sd-event loop over a unix socket, then EOF. Invariants: the
 *    watcher reports exactly once (a failure, a broken monitor, or EOF), with a printable reason when it has
 *    one; it never holds more than its line bound (ASan sees an overrun). */

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "fuzz-util.h"
#include "vm/vmm.h"

/* The longest reason: the fixed words and a panic line of at most 200 bytes. */
#define REASON_MAX 400U

static bool printable(const char *s) {
        for (; *s; s++)
                if ((unsigned char) *s < 0x20 || (unsigned char) *s > 0x7e)
                        return false;
        return true;
}

static void check_reasons(const char *text) {
        static const VmRunFailure all[] = { VM_RUN_INTERNAL_ERROR, VM_RUN_GUEST_PANICKED, VM_RUN_GUEST_SHUTDOWN };

        (void) vm_run_status_failure(text);
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
                char *r = NULL;
                check(vm_run_failure_reason(all[i], text, text, &r) == 0 && r);
                check(printable(r) && strlen(r) <= REASON_MAX);
                free(r);
        }
}

static void parse_lines(const uint8_t *data, size_t size) {
        char *line = malloc(VM_EVENTS_LINE_MAX + 1);
        size_t pos = 0, n;

        check(line);
        while (pos < size) {
                const uint8_t *nl = memchr(data + pos, '\n', size - pos);
                VmQmpMsg m = {};
                int r;

                n = (nl ? (size_t) (nl - data) : size) - pos;
                if (n > VM_EVENTS_LINE_MAX)
                        n = VM_EVENTS_LINE_MAX;
                memcpy(line, data + pos, n);
                line[n] = 0;
                pos += n + 1;
                r = vm_qmp_msg_parse(line, &m);
                check(r == 0 || r == -EBADMSG);
                if (r < 0)
                        continue;
                check(m.kind >= VM_QMP_OTHER && m.kind <= VM_QMP_SHUTDOWN);
                check(memchr(m.id, 0, sizeof(m.id)));
                check(!m.text || m.kind == VM_QMP_RETURN || m.kind == VM_QMP_SHUTDOWN);
                check_reasons(m.text);
                vm_qmp_msg_done(&m);
        }
        /* the whole stream as the guest's console too (to its first NUL) */
        n = size < VM_EVENTS_LINE_MAX ? size : VM_EVENTS_LINE_MAX;
        memcpy(line, data, n);
        line[n] = 0;
        check_reasons(line);
        free(line);
}

typedef struct Report {
        unsigned calls;
} Report;

static void on_report(VmEvents *w, VmRunFailure f, const char *reason, void *userdata) {
        Report *rep = userdata;

        rep->calls++;
        check(f >= VM_RUN_OK && f <= VM_RUN_GUEST_SHUTDOWN);
        check(f == VM_RUN_OK || reason);
        check(!reason || (printable(reason) && strlen(reason) <= REASON_MAX));
        vm_events_free(w);
}

static int listen_fd = -1;
static const char *dir;

static void watch_stream(const uint8_t *data, size_t size) {
        sd_event *e = NULL;
        VmEvents *w = NULL;
        Report rep = {};
        int fd;

        check(sd_event_new(&e) >= 0);
        check(vm_events_watch(e, dir, on_report, &rep, &w) == 0);
        fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        check(fd >= 0);
        /* the commands the watcher sends are read by nobody: they are small, and a full buffer ends the watch */
        for (size_t off = 0; off < size;) {
                ssize_t k = send(fd, data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k <= 0) {
                        /* the watcher stopped reading (it reported): drive it, or stop */
                        if (rep.calls > 0)
                                break;
                        (void) sd_event_run(e, 10 * 1000);
                        continue;
                }
                off += (size_t) k;
        }
        (void) shutdown(fd, SHUT_WR);
        for (int i = 0; i < 1000 && rep.calls == 0; i++)
                (void) sd_event_run(e, 10 * 1000);
        check(rep.calls == 1);
        close(fd);
        sd_event_unref(e);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        (void) argc;
        (void) argv;
        dir = fuzz_dir();
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" VM_EVENTS_SOCKET, dir);
        (void) unlink(sa.sun_path);
        listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        check(listen_fd >= 0 && bind(listen_fd, (struct sockaddr *) &sa, sizeof(sa)) == 0 &&
              listen(listen_fd, 4) == 0);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        parse_lines(data, size);
        watch_stream(data, size);
        return 0;
}
