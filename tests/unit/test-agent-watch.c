/* SPDX-License-Identifier: Apache-2.0 */

/* The guest agent's directory watches (FILE op=watch, guest/agent/watch.c) outside a VM: the real
 * guest/space-agent serves a socketpair (SPACE_AGENT_PORT=fd:3) and watches a temporary directory with
 * inotify, and this test plays the host. What it checks: OK comes only once the watch is armed (a file made
 * right after it is seen), envd's event types for a write, a rename, a chmod and a remove, an upload's
 * temporary file shown as a write of its target, a recursive watch following new directories, the entry
 * with entry=1; and what a hostile guest tries first, each ending the watch with a clear code: a tree wider
 * than the directories one watch arms, one deeper than a path can name, a storm of files the host takes no
 * credit for, and more watches than the agent keeps. The agent answers on after each. */

#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "../../lib/proto.h"
#include "tap.h"

#ifndef AGENT_BINARY
#define AGENT_BINARY "guest/space-agent"
#endif

static int chan = -1;
static SpaceFrameReader reader;
static uint8_t payload[SPACE_FRAME_PAYLOAD_MAX + 1];
static char dir[] = "/tmp/test-agent-watch-XXXXXX";

typedef struct Frame {
        SpaceFrameHeader h;
        uint8_t *p; /* payload, NUL-terminated */
} Frame;

static void send_frame(uint8_t type, uint8_t fd, uint32_t stream, const void *p, size_t n) {
        SpaceBuf b = {};

        if (space_frame_append(&b, type, fd, stream, p, n) < 0 || write(chan, b.data, b.len) != (ssize_t) b.len)
                abort();
        space_buf_done(&b);
}

/* The next frame from the agent, within ms. */
static bool read_frame(Frame *f, int ms) {
        static uint8_t buf[65536];
        static size_t have, off;

        for (;;) {
                const uint8_t *p;
                size_t used;
                int r;

                if (off < have) {
                        r = space_frame_reader_feed(&reader, buf + off, have - off, &used, &f->h, &p);
                        off += used;
                        if (r < 0)
                                return false;
                        if (r > 0) {
                                memcpy(payload, p, f->h.length);
                                payload[f->h.length] = 0;
                                f->p = payload;
                                return true;
                        }
                        continue;
                }
                struct pollfd pfd = { .fd = chan, .events = POLLIN };
                if (poll(&pfd, 1, ms) <= 0)
                        return false;
                ssize_t n = read(chan, buf, sizeof buf);
                if (n <= 0)
                        return false;
                have = (size_t) n;
                off = 0;
        }
}

static const char *kv(const Frame *f, const char *key) {
        const char *v = NULL;

        if (!f->p)
                return "";
        return space_kv_get(f->p, f->h.length, key, &v) > 0 ? v : "";
}

static void credit(uint32_t stream, uint32_t n) {
        uint8_t le[4];

        space_put_le32(le, n);
        send_frame(SPACE_F_CREDIT, 1, stream, le, 4);
}

/* FILE op=watch of dir/rel; extra: "key=value" records or NULL. Returns the answer's type (OK, ERROR). */
static int watch(uint32_t stream, const char *rel, const char *const *extra, Frame *ret) {
        char path[256];
        SpaceBuf b = {};
        Frame f;

        snprintf(path, sizeof path, "%s/%s", dir, rel);
        (void) space_kv_add(&b, "op", "watch");
        (void) space_kv_add(&b, "path", path);
        for (; extra && *extra; extra++)
                (void) space_buf_append(&b, *extra, strlen(*extra) + 1);
        send_frame(SPACE_F_FILE, 0, stream, b.data, b.len);
        space_buf_done(&b);
        while (read_frame(&f, 30000))
                if (f.h.stream == stream && (f.h.type == SPACE_F_OK || f.h.type == SPACE_F_ERROR)) {
                        if (ret)
                                *ret = f;
                        return f.h.type;
                }
        return -1;
}

/* Events of stream as "type name" lines, appended to out, until want is among them (or 10 s passed); the
 * credit goes back as they come. Returns the ERROR frame's code when the watch ended instead, else "". */
static const char *events_until(uint32_t stream, const char *want, char *out, size_t size) {
        static char code[64];
        Frame f;

        code[0] = 0;
        while (!strstr(out, want) && read_frame(&f, 10000)) {
                size_t off = 0, klen;
                const char *k, *v;

                if (f.h.stream != stream)
                        continue;
                if (f.h.type == SPACE_F_ERROR) {
                        snprintf(code, sizeof code, "%s", kv(&f, "code"));
                        break;
                }
                if (f.h.type != SPACE_F_DATA)
                        continue;
                while (space_kv_next(f.p, f.h.length, &off, &k, &klen, &v) > 0) {
                        size_t l = strlen(out);

                        if (klen == 2 && memcmp(k, "ev", 2) == 0)
                                snprintf(out + l, size - l, "%s%s", l ? "\n" : "", v);
                        else if (klen == 4 && memcmp(k, "name", 4) == 0)
                                snprintf(out + l, size - l, " %s", v);
                        else if (klen == 4 && memcmp(k, "type", 4) == 0)
                                snprintf(out + l, size - l, " [%s]", v);
                }
                credit(stream, f.h.length);
        }
        return code;
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...) {
        char cmd[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(cmd, sizeof cmd, fmt, ap);
        va_end(ap);
        if (system(cmd) != 0)
                abort();
}

static void test_events(void) {
        char seen[4096] = "";
        Frame f = {};

        sh("mkdir -p %s/w", dir);
        ok(watch(10, "nope", NULL, &f) == SPACE_F_ERROR && streq(kv(&f, "errno"), "2"),
           "a directory that is not there: ERROR errno=2");
        ok(watch(11, "w", NULL, NULL) == SPACE_F_OK, "watch: OK");
        /* right after OK, with no pause: inotify was armed before it */
        sh("echo one > %s/w/a", dir);
        events_until(11, "write a", seen, sizeof seen);
        ok(streq(seen, "create a\nwrite a"), "a file made right after OK: create and write (%s)", seen);
        seen[0] = 0;
        sh("mv %s/w/a %s/w/b && chmod 600 %s/w/b && rm %s/w/b", dir, dir, dir, dir);
        events_until(11, "remove b", seen, sizeof seen);
        ok(streq(seen, "rename a\ncreate b\nchmod b\nremove b"), "rename, chmod, remove as envd's (%s)", seen);
        seen[0] = 0;
        /* what the agent's own upload does (files.c, op_write): a temporary file renamed onto its target */
        sh("echo up > %s/w/.c.space-Ab3dE9 && mv %s/w/.c.space-Ab3dE9 %s/w/c", dir, dir, dir);
        events_until(11, "write c", seen, sizeof seen);
        ok(streq(seen, "create c\nwrite c"), "an upload is a create and a write of its target (%s)", seen);
        send_frame(SPACE_F_CLOSE, 0, 11, NULL, 0);

        seen[0] = 0;
        sh("mkdir -p %s/r/old", dir);
        ok(watch(12, "r", (const char *const[]) { "recursive=1", NULL }, NULL) == SPACE_F_OK, "recursive: OK");
        sh("mkdir -p %s/r/x/y && echo f > %s/r/x/y/f && echo g > %s/r/old/g", dir, dir, dir);
        events_until(12, "old/g", seen, sizeof seen);
        events_until(12, "x/y/f", seen, sizeof seen);
        ok(strstr(seen, "create x") && strstr(seen, "create x/y") && strstr(seen, "create x/y/f") &&
           strstr(seen, "create old/g"), "new directories are followed, old ones watched (%s)", seen);
        seen[0] = 0;
        sh("mv %s/r/x %s/r/z && echo h > %s/r/z/y/h", dir, dir, dir);
        events_until(12, "z/y/h", seen, sizeof seen);
        ok(strstr(seen, "rename x") && strstr(seen, "create z") && strstr(seen, "z/y/h") && !strstr(seen, "x/y/h"),
           "a directory moved is named by its new name (%s)", seen);
        send_frame(SPACE_F_CLOSE, 0, 12, NULL, 0);

        seen[0] = 0;
        sh("mkdir -p %s/e", dir);
        ok(watch(13, "e", (const char *const[]) { "entry=1", NULL }, NULL) == SPACE_F_OK, "entry=1: OK");
        sh("echo 1234 > %s/e/f && rm %s/e/f", dir, dir);
        events_until(13, "remove f", seen, sizeof seen);
        ok(strncmp(seen, "create f", 8) == 0 && strstr(seen, "\nremove f") && !strstr(seen, "remove f ["),
           "the entry goes with create and write when it is still there, never with remove (%s)", seen);
        seen[0] = 0;
        sh("echo 1234 > %s/e/g", dir);
        events_until(13, "write g", seen, sizeof seen);
        ok(strstr(seen, "create g [file]") && strstr(seen, "write g [file]"), "  ... with its type (%s)", seen);
        send_frame(SPACE_F_CLOSE, 0, 13, NULL, 0);
}

static void test_hostile(void) {
        char seen[8192] = "";
        const char *code;
        Frame f = {};

        /* wider than one watch arms: refused at once, and ended when it grows so */
        sh("mkdir -p %s/wide && cd %s/wide && seq 1 %u | xargs mkdir", dir, dir, SPACE_WATCH_DIRS_MAX + 5);
        ok(watch(20, "wide", (const char *const[]) { "recursive=1", NULL }, &f) == SPACE_F_ERROR &&
           streq(kv(&f, "code"), "too_many_watches") && strstr(kv(&f, "message"), "too many directories"),
           "a tree wider than %u directories: code=too_many_watches", SPACE_WATCH_DIRS_MAX);
        ok(watch(21, "wide", NULL, NULL) == SPACE_F_OK, "  ... the same directory, not recursive: one watch, OK");
        send_frame(SPACE_F_CLOSE, 0, 21, NULL, 0);
        sh("mkdir -p %s/grow", dir);
        ok(watch(22, "grow", (const char *const[]) { "recursive=1", NULL }, NULL) == SPACE_F_OK, "growing: OK");
        sh("cd %s/grow && seq 1 %u | xargs mkdir", dir, SPACE_WATCH_DIRS_MAX + 5);
        code = events_until(22, "never", seen, sizeof seen);
        ok(streq(code, "too_many_watches"), "  ... then ends with code=too_many_watches (%s)", code);

        /* deeper than a path can name: the agent says so rather than leave it unwatched */
        {
                char path[256];
                int fd;

                sh("mkdir -p %s/deep", dir);
                snprintf(path, sizeof path, "%s/deep", dir);
                fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                for (unsigned i = 0; fd >= 0 && i < 2100; i++) { /* 3 bytes a level: past 4096 of path */
                        int next;

                        if (mkdirat(fd, "dd", 0755) < 0 ||
                            (next = openat(fd, "dd", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                                abort();
                        close(fd);
                        fd = next;
                }
                close(fd);
        }
        ok(watch(23, "deep", (const char *const[]) { "recursive=1", NULL }, &f) == SPACE_F_ERROR &&
           streq(kv(&f, "code"), "too_many_watches") && strstr(kv(&f, "message"), "too deep"),
           "a tree deeper than 4096 bytes of path: code=too_many_watches, too deep (%s)", kv(&f, "message"));

        /* a storm of files while the host takes no credit: the agent holds 1 MiB, then ends the watch */
        sh("mkdir -p %s/storm", dir);
        ok(watch(24, "storm", NULL, NULL) == SPACE_F_OK, "storm: OK");
        sh("cd %s/storm && seq 1 100000 | xargs touch", dir);
        code = "";
        for (bool done = false; !done && read_frame(&f, 10000);)
                if (f.h.stream == 24 && f.h.type == SPACE_F_ERROR) {
                        code = kv(&f, "code");
                        done = true;
                }
        ok(streq(code, "overflow"), "100000 files and no credit: code=overflow");

        /* more watches than the agent keeps */
        {
                unsigned okays = 0;

                for (unsigned i = 0; i < SPACE_WATCHES_MAX; i++)
                        okays += watch(100 + i, "w", NULL, NULL) == SPACE_F_OK;
                ok(okays == SPACE_WATCHES_MAX && watch(200, "w", NULL, &f) == SPACE_F_ERROR &&
                   streq(kv(&f, "code"), "too_many_watches"),
                   "%u watches, then code=too_many_watches", SPACE_WATCHES_MAX);
                for (unsigned i = 0; i < SPACE_WATCHES_MAX; i++)
                        send_frame(SPACE_F_CLOSE, 0, 100 + i, NULL, 0);
                ok(watch(201, "w", NULL, NULL) == SPACE_F_OK, "  ... and one again once they were closed");
                send_frame(SPACE_F_CLOSE, 0, 201, NULL, 0);
        }

        send_frame(SPACE_F_PING, 0, 300, "alive", 5);
        while (read_frame(&f, 10000) && !(f.h.type == SPACE_F_PONG && f.h.stream == 300))
                ;
        ok(f.h.type == SPACE_F_PONG && f.h.stream == 300, "the agent answers on");
}

int main(void) {
        pid_t pid;
        int sv[2];
        Frame f;

        if (access(AGENT_BINARY, X_OK) < 0) {
                printf("1..0 # SKIP no %s\n", AGENT_BINARY);
                return 0;
        }
        if (!mkdtemp(dir) || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                abort();
        pid = fork();
        if (pid == 0) {
                dup2(sv[1], 3);
                setenv("SPACE_AGENT_PORT", "fd:3", 1);
                execl(AGENT_BINARY, "space-agent", NULL);
                _exit(127);
        }
        close(sv[1]);
        chan = sv[0];

        ok(read_frame(&f, 5000) && f.h.type == SPACE_F_HELLO && atoi(kv(&f, "version")) == SPACE_PROTO_VERSION,
           "HELLO version=%d", SPACE_PROTO_VERSION);
        test_events();
        test_hostile();

        kill(pid, SIGTERM);
        (void) waitpid(pid, NULL, 0);
        sh("rm -rf %s", dir);
        return done();
}
