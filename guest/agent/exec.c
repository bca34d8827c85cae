/* SPDX-License-Identifier: Apache-2.0 */

/*
 * EXEC streams: start a process, pump its stdio through the channel under per-fd credit, report its exit.
 *
 * Backpressure: a pipe is only polled while its fd has credit and the port's queue is under the high-water
 * mark, so a process that writes faster than the host reads blocks in write(), and nothing here grows
 * without bound. Stdin is buffered up to the window the host may use, and credited back as it is written.
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2, ptsname_r */
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "agent.h"

extern char **environ;

static Stream **streams;
static size_t n_streams;
static uint64_t next_seq;

void streams_init(void) {
        streams = calloc(SPACE_STREAMS_MAX, sizeof *streams);
        if (!streams)
                abort();
}

size_t streams_count(void) {
        return n_streams;
}

Stream *stream_find(uint32_t id) {
        for (size_t i = 0; i < n_streams; i++)
                if (streams[i]->id == id)
                        return streams[i];
        return NULL;
}

static void stream_free(Stream *s) {
        safe_close(s->fd_in);
        safe_close(s->fd_out);
        safe_close(s->fd_err);
        safe_close(s->hold_fd);
        safe_close(s->exec_err_fd);
        free(s->cwd);
        free(s->argv0);
        space_buf_done(&s->in_buf);
        free(s);
}

void stream_close(Stream *s) {
        /* Forget it. A process still running keeps running; we reap it as an orphan. */
        for (size_t i = 0; i < n_streams; i++)
                if (streams[i] == s) {
                        streams[i] = streams[--n_streams];
                        break;
                }
        stream_free(s);
}

/* Makes room by forgetting the oldest stream that has finished (the host may never send CLOSE, e.g. after a
 * daemon restart). */
static bool streams_evict(void) {
        Stream *old = NULL;

        for (size_t i = 0; i < n_streams; i++)
                if (streams[i]->exit_sent && (!old || streams[i]->seq < old->seq))
                        old = streams[i];
        if (!old)
                return false;
        stream_close(old);
        return true;
}

static int set_nonblock(int fd) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return -errno;
        return 0;
}

/* Builds the environment: INIT's defaults, overridden by EXEC's env records, plus PATH/HOME if unset. */
static int build_env(char ***envp, size_t *n_env, const char *rec) {
        const char *eq = strchr(rec, '=');
        size_t kl;
        char **l;

        if (!eq || eq == rec)
                return -EINVAL;
        kl = (size_t) (eq - rec) + 1;
        for (size_t i = 0; i < *n_env; i++)
                if (strncmp((*envp)[i], rec, kl) == 0) {
                        (*envp)[i] = (char *) rec;
                        return 0;
                }
        l = realloc(*envp, (*n_env + 2) * sizeof *l);
        if (!l)
                return -ENOMEM;
        l[(*n_env)++] = (char *) rec;
        l[*n_env] = NULL;
        *envp = l;
        return 0;
}

static bool env_has(char **envp, size_t n, const char *key) {
        size_t kl = strlen(key);
        for (size_t i = 0; i < n; i++)
                if (strncmp(envp[i], key, kl) == 0 && envp[i][kl] == '=')
                        return true;
        return false;
}

/* What the child reports through the CLOEXEC pipe when it fails before exec. */
struct exec_failure {
        int stage; /* 0 chdir, 1 exec, 2 setup, 3 user */
        int err;
};

/* user: NULL to stay root. cwd_fallback: cwd is the user's home, which we chose: "/" if it cannot be entered. */
static _Noreturn void child(int fd_in, int fd_out, int fd_err, const char *pty_path, int errpipe, int hold,
                            const SpaceUser *user, const char *cwd, bool cwd_fallback, char **argv, char **envp) {
        struct exec_failure f = { .stage = 2 };
        struct rlimit rl = { 1024, 1024 };
        sigset_t all;

        sigemptyset(&all);
        (void) sigprocmask(SIG_SETMASK, &all, NULL);
        (void) signal(SIGPIPE, SIG_DFL);
        (void) getrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur > 1024) {
                rl.rlim_cur = 1024;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }

        if (setsid() < 0)
                goto fail;

        if (pty_path) {
                int t = open(pty_path, O_RDWR);
                if (t < 0)
                        goto fail;
                (void) ioctl(t, TIOCSCTTY, 0);
                fd_in = fd_out = fd_err = t;
        }

        if (dup2(fd_in, 0) < 0 || dup2(fd_out, 1) < 0 || dup2(fd_err, 2) < 0)
                goto fail;
        umask(022);

        if (user) {
                int r = user_switch(user);
                if (r < 0) {
                        f.stage = 3;
                        errno = -r;
                        goto fail;
                }
        }

        if (hold >= 0) {
                char b;
                ssize_t l;

                /* We may wait long: drop the agent's other fds (CLOEXEC only helps at exec), or we would
                 * keep other processes' stdin pipes open and their EOF from arriving. */
                for (int fd = 3; fd < (int) rl.rlim_cur; fd++)
                        if (fd != hold && fd != errpipe)
                                (void) close(fd);
                do
                        l = read(hold, &b, 1);
                while (l < 0 && errno == EINTR);
                if (l != 1)
                        _exit(127); /* the agent forgot us */
                (void) close(hold);
        }

        f.stage = 0;
        if (chdir(cwd && cwd[0] ? cwd : "/") < 0 && (!cwd_fallback || chdir("/") < 0))
                goto fail;

        f.stage = 1;
        environ = envp;
        execvp(argv[0], argv);
fail:
        f.err = errno;
        (void) !write(errpipe, &f, sizeof f);
        _exit(127);
}

static void send_exec_failure(Channel *c, uint32_t id, const struct exec_failure *f, const char *cwd,
                              const char *argv0) {
        /* stage= lets the host tell a bad working directory from a missing command */
        const char *stage = f->stage == 0 ? "chdir" : f->stage == 1 ? "exec" : f->stage == 3 ? "user" : "setup";
        SpaceBuf kv = {};
        char msg[512];

        if (f->stage == 3)
                (void) snprintf(msg, sizeof msg, "switching to the user: %s", strerror(f->err));
        else
                (void) snprintf(msg, sizeof msg, "%s %s: %s", stage, f->stage == 0 ? (cwd ? cwd : "/") : argv0,
                                strerror(f->err));
        (void) space_kv_addf(&kv, "errno", "%d", f->err);
        (void) space_kv_add(&kv, "message", msg);
        (void) space_kv_add(&kv, "stage", stage);
        (void) channel_send_kv(c, SPACE_F_ERROR, id, &kv);
        space_buf_done(&kv);
}

static void send_user_error(Channel *c, uint32_t id, int err, const char *code, const char *message) {
        SpaceBuf kv = {};

        (void) space_kv_addf(&kv, "errno", "%d", err);
        (void) space_kv_add(&kv, "message", message);
        (void) space_kv_add(&kv, "code", code);
        (void) space_kv_add(&kv, "stage", "user");
        (void) channel_send_kv(c, SPACE_F_ERROR, id, &kv);
        space_buf_done(&kv);
}

void exec_start(Channel *c, uint32_t id, const uint8_t *p, size_t n) {
        _cleanup_free_ char **argv = NULL, **envp = NULL, **req_env = NULL;
        _cleanup_close_ int in_r = -1, in_w = -1, out_r = -1, out_w = -1, err_r = -1, err_w = -1, ep_r = -1,
                            ep_w = -1, master = -1, hold_r = -1, hold_w = -1;
        size_t n_argv = 0, n_env = 0, n_req_env = 0, off = 0, klen;
        const char *cwd = NULL, *user_spec = NULL, *k, *v;
        char pty_path[128] = "", msg[512];
        bool want_stdin = false, pty = false, hold = false, cwd_chosen = false;
        /* for the environment of a process run as a user: they live until the fork */
        char home_env[SPACE_USER_HOME_MAX + 8], user_env[SPACE_USER_SPEC_MAX + 8],
                logname_env[SPACE_USER_SPEC_MAX + 16];
        SpaceUser user;
        unsigned rows = 0, cols = 0;
        struct exec_failure f;
        char **defaults;
        Stream *s;
        pid_t pid;
        ssize_t l;
        int r;

        if (stream_find(id)) {
                channel_send_error(c, id, EEXIST, "stream id in use");
                return;
        }
        if (n_streams >= SPACE_STREAMS_MAX && !streams_evict()) {
                channel_send_error(c, id, EAGAIN, "too many processes");
                return;
        }

        while ((r = space_kv_next(p, n, &off, &k, &klen, &v)) > 0) {
#define KEY(s) (klen == sizeof(s) - 1 && memcmp(k, s, klen) == 0)
                if (KEY("argv")) {
                        char **a = realloc(argv, (n_argv + 2) * sizeof *a);
                        if (!a)
                                goto nomem;
                        argv = a;
                        argv[n_argv++] = (char *) v;
                        argv[n_argv] = NULL;
                } else if (KEY("env")) {
                        /* applied below, after the defaults and the user's HOME, USER, LOGNAME */
                        char **a;

                        if (!strchr(v, '=') || v[0] == '=') {
                                channel_send_error(c, id, EINVAL, "env record without KEY=");
                                return;
                        }
                        a = realloc(req_env, (n_req_env + 2) * sizeof *a);
                        if (!a)
                                goto nomem;
                        req_env = a;
                        req_env[n_req_env++] = (char *) v;
                        req_env[n_req_env] = NULL;
                } else if (KEY("user"))
                        user_spec = v;
                else if (KEY("cwd"))
                        cwd = v;
                else if (KEY("stdin"))
                        want_stdin = streq(v, "1");
                else if (KEY("pty"))
                        pty = streq(v, "1");
                else if (KEY("rows"))
                        rows = (unsigned) strtoul(v, NULL, 10);
                else if (KEY("cols"))
                        cols = (unsigned) strtoul(v, NULL, 10);
                else if (KEY("hold"))
                        hold = streq(v, "1");
#undef KEY
        }
        if (r < 0) {
                channel_send_error(c, id, EBADMSG, "malformed EXEC payload");
                return;
        }
        if (n_argv == 0 || argv[0][0] == 0) {
                channel_send_error(c, id, EINVAL, "no argv");
                return;
        }

        /* Before the fork, so that an unknown user is the answer to this EXEC, held or not. */
        if (user_spec) {
                const char *code = NULL;

                r = user_resolve(user_spec, &user, &code, msg, sizeof msg);
                if (r < 0) {
                        send_user_error(c, id, -r, code, msg);
                        return;
                }
                if (!cwd) {
                        cwd = user_home_usable(&user) ? user.home : "/";
                        cwd_chosen = true;
                }
        }

        /* INIT's defaults, then the user's, then the request's: each overrides what came before. */
        defaults = init_default_env();
        for (size_t i = 0; defaults && defaults[i]; i++)
                if (build_env(&envp, &n_env, defaults[i]) < 0)
                        goto nomem;
        if (user_spec) {
                (void) snprintf(home_env, sizeof home_env, "HOME=%s", user.home);
                if (build_env(&envp, &n_env, home_env) < 0)
                        goto nomem;
                if (user.name[0]) {
                        (void) snprintf(user_env, sizeof user_env, "USER=%s", user.name);
                        (void) snprintf(logname_env, sizeof logname_env, "LOGNAME=%s", user.name);
                        if (build_env(&envp, &n_env, user_env) < 0 || build_env(&envp, &n_env, logname_env) < 0)
                                goto nomem;
                }
        }
        for (size_t i = 0; i < n_req_env; i++)
                if (build_env(&envp, &n_env, req_env[i]) < 0)
                        goto nomem;
        if (!env_has(envp, n_env, "PATH") && build_env(&envp, &n_env, "PATH=" AGENT_DEFAULT_PATH) < 0)
                goto nomem;
        if (!env_has(envp, n_env, "HOME") && build_env(&envp, &n_env, "HOME=/root") < 0)
                goto nomem;
        if (pty && !env_has(envp, n_env, "TERM") && build_env(&envp, &n_env, "TERM=xterm-256color") < 0)
                goto nomem;

        {
                int pp[2];

                if (pipe2(pp, O_CLOEXEC) < 0)
                        goto fail;
                ep_r = pp[0], ep_w = pp[1];
                if (hold) {
                        if (pipe2(pp, O_CLOEXEC) < 0)
                                goto fail;
                        hold_r = pp[0], hold_w = pp[1];
                }

                if (pty) {
                        struct winsize ws = { .ws_row = rows ? rows : 24, .ws_col = cols ? cols : 80 };

                        master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
                        if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 ||
                            ptsname_r(master, pty_path, sizeof pty_path) != 0)
                                goto fail;
                        (void) ioctl(master, TIOCSWINSZ, &ws);
                } else {
                        if (pipe2(pp, O_CLOEXEC) < 0)
                                goto fail;
                        out_r = pp[0], out_w = pp[1];
                        if (pipe2(pp, O_CLOEXEC) < 0)
                                goto fail;
                        err_r = pp[0], err_w = pp[1];
                        if (want_stdin) {
                                if (pipe2(pp, O_CLOEXEC) < 0)
                                        goto fail;
                                in_r = pp[0], in_w = pp[1];
                        } else {
                                in_r = open("/dev/null", O_RDONLY | O_CLOEXEC);
                                if (in_r < 0)
                                        goto fail;
                        }
                }
        }

        pid = fork();
        if (pid < 0)
                goto fail;
        if (pid == 0) {
                hold_w = safe_close(hold_w);
                child(in_r, out_w, err_w, pty ? pty_path : NULL, ep_w, hold_r, user_spec ? &user : NULL, cwd,
                      cwd_chosen, argv, envp);
        }

        ep_w = safe_close(ep_w);
        hold_r = safe_close(hold_r);
        in_r = safe_close(in_r);
        out_w = safe_close(out_w);
        err_w = safe_close(err_w);

        /* Blocks until the child has exec'd (EOF) or failed: short, and it keeps EXEC's answer honest. A held
         * child has not got there yet: that read happens at RELEASE. */
        if (!hold) {
                do
                        l = read(ep_r, &f, sizeof f);
                while (l < 0 && errno == EINTR);
                if (l == (ssize_t) sizeof f) {
                        send_exec_failure(c, id, &f, cwd, argv[0]);
                        return; /* the child _exits; the reaper collects it as an orphan */
                }
        }

        s = calloc(1, sizeof *s);
        if (!s) {
                (void) kill(pid, SIGKILL);
                goto nomem;
        }
        *s = (Stream) {
                .id = id,
                .pid = pid,
                .pty = pty,
                .fd_in = -1,
                .fd_out = -1,
                .fd_err = -1,
                .seq = next_seq++,
                .hold_fd = -1,
                .exec_err_fd = -1,
        };
        if (hold) {
                s->hold_fd = TAKE_FD(hold_w);
                s->exec_err_fd = TAKE_FD(ep_r);
                s->cwd = cwd ? strdup(cwd) : NULL;
                s->argv0 = strdup(argv[0]);
        }
        space_credit_init(&s->in_credit);
        for (size_t i = 0; i < ELEMENTSOF(s->out_credit); i++)
                space_credit_init(&s->out_credit[i]);
        if (pty) {
                s->fd_out = TAKE_FD(master);
                s->fd_in = fcntl(s->fd_out, F_DUPFD_CLOEXEC, 3);
                (void) set_nonblock(s->fd_out);
        } else {
                s->fd_out = TAKE_FD(out_r);
                s->fd_err = TAKE_FD(err_r);
                s->fd_in = TAKE_FD(in_w);
                (void) set_nonblock(s->fd_out);
                (void) set_nonblock(s->fd_err);
                if (s->fd_in >= 0)
                        (void) set_nonblock(s->fd_in);
        }
        streams[n_streams++] = s;

        {
                SpaceBuf kv = {};
                (void) space_kv_addf(&kv, "pid", "%d", (int) pid);
                if (hold)
                        (void) space_kv_add(&kv, "held", "1");
                if (cwd_chosen)
                        (void) space_kv_add(&kv, "cwd", cwd); /* the host did not say: tell it where it runs */
                (void) channel_send_kv(c, SPACE_F_STARTED, id, &kv);
                space_buf_done(&kv);
        }
        return;

fail:
        r = errno;
        (void) snprintf(msg, sizeof msg, "setting up the process: %s", strerror(r));
        channel_send_error(c, id, r, msg);
        return;
nomem:
        channel_send_error(c, id, ENOMEM, NULL);
}

static void credit_flush(Channel *c, Stream *s) {
        uint8_t le[4];

        if (s->in_credit_pending == 0)
                return;
        space_put_le32(le, s->in_credit_pending);
        (void) space_credit_give(&s->in_credit, s->in_credit_pending);
        (void) channel_send(c, SPACE_F_CREDIT, 0, s->id, le, sizeof le);
        s->in_credit_pending = 0;
}

static void input_closed(Channel *c, Stream *s) {
        s->in_credit_pending += (uint32_t) s->in_buf.len;
        space_buf_done(&s->in_buf);
        s->fd_in = safe_close(s->fd_in);
}

/* Writes what we can of in_buf, credits it back, closes stdin after the host's EOF. */
static void input_write(Channel *c, Stream *s) {
        while (s->in_buf.len > 0) {
                ssize_t w = write(s->fd_in, s->in_buf.data, s->in_buf.len);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                input_closed(c, s); /* EPIPE: the process closed its stdin */
                        break;
                }
                space_buf_consume(&s->in_buf, (size_t) w);
                s->in_credit_pending += (uint32_t) w;
        }

        if (s->in_buf.len == 0 && s->in_eof && s->fd_in >= 0) {
                if (s->pty)
                        (void) !write(s->fd_in, "\x04", 1); /* a terminal has no EOF: send ^D */
                s->fd_in = safe_close(s->fd_in);
        }
        credit_flush(c, s);
}

void stream_input(Channel *c, Stream *s, const uint8_t *p, size_t n) {
        if (space_credit_take(&s->in_credit, n) < 0) {
                log_warn("stream %u: host overran its stdin credit, dropping %zu bytes", s->id, n);
                return;
        }
        if (s->fd_in < 0 || s->in_eof) {
                s->in_credit_pending += (uint32_t) n;
                credit_flush(c, s);
                return;
        }
        if (space_buf_append(&s->in_buf, p, n) < 0) {
                s->in_credit_pending += (uint32_t) n;
                credit_flush(c, s);
                return;
        }
        input_write(c, s);
}

void stream_input_eof(Channel *c, Stream *s) {
        s->in_eof = true;
        input_write(c, s);
}

void stream_credit(Stream *s, uint8_t fd, uint32_t n) {
        if (fd < 1 || fd > 2)
                return;
        /* Clamp, do not refuse: a restarted host re-grants a whole window (proto.h). */
        space_credit_give_clamp(&s->out_credit[fd], n);
}

void stream_release(Channel *c, Stream *s) {
        struct exec_failure f;
        ssize_t l;

        if (s->hold_fd < 0)
                return;
        (void) !write(s->hold_fd, "x", 1);
        s->hold_fd = safe_close(s->hold_fd);
        /* As for an EXEC without hold: short, it ends at the child's exec or failure. */
        do
                l = read(s->exec_err_fd, &f, sizeof f);
        while (l < 0 && errno == EINTR);
        s->exec_err_fd = safe_close(s->exec_err_fd);
        if (l == (ssize_t) sizeof f)
                send_exec_failure(c, s->id, &f, s->cwd, s->argv0 ? s->argv0 : "?");
}

void stream_signal(Stream *s, int sig) {
        if (s->reaped || s->pid <= 0 || sig <= 0 || sig >= 65)
                return;
        if (kill(-s->pid, sig) < 0)
                (void) kill(s->pid, sig);
}

void stream_resize(Stream *s, unsigned rows, unsigned cols) {
        struct winsize ws = { .ws_row = rows, .ws_col = cols };

        if (s->pty && s->fd_out >= 0)
                (void) ioctl(s->fd_out, TIOCSWINSZ, &ws);
}

static void output_eof(Channel *c, Stream *s, uint8_t fd) {
        if (fd == 1) {
                s->fd_out = safe_close(s->fd_out);
                (void) channel_send(c, SPACE_F_EOF, 1, s->id, NULL, 0);
                if (s->pty) {
                        /* One terminal carries both: stderr ends with it. */
                        s->fd_in = safe_close(s->fd_in);
                        (void) channel_send(c, SPACE_F_EOF, 2, s->id, NULL, 0);
                }
        } else {
                s->fd_err = safe_close(s->fd_err);
                (void) channel_send(c, SPACE_F_EOF, 2, s->id, NULL, 0);
        }
}

static void output_read(Channel *c, Stream *s, uint8_t fd) {
        static uint8_t buf[SPACE_FRAME_PAYLOAD_MAX];
        SpaceCredit *cr = &s->out_credit[fd];
        int rfd = fd == 1 ? s->fd_out : s->fd_err;
        size_t want = cr->available < sizeof buf ? cr->available : sizeof buf;
        ssize_t n;

        if (rfd < 0 || want == 0)
                return;
        n = read(rfd, buf, want);
        if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                        return;
                /* EIO: the pty's last slave closed */
                output_eof(c, s, fd);
                return;
        }
        if (n == 0) {
                output_eof(c, s, fd);
                return;
        }
        (void) space_credit_take(cr, (size_t) n);
        (void) channel_send(c, SPACE_F_DATA, fd, s->id, buf, (size_t) n);
}

static void send_exit(Channel *c, Stream *s) {
        SpaceBuf kv = {};

        if (WIFSIGNALED(s->status))
                (void) space_kv_addf(&kv, "signal", "%d", WTERMSIG(s->status));
        else
                (void) space_kv_addf(&kv, "code", "%d", WEXITSTATUS(s->status));
        (void) channel_send_kv(c, SPACE_F_EXIT, s->id, &kv);
        space_buf_done(&kv);
}

void stream_adopt(Channel *c, uint32_t id) {
        Stream *s = stream_find(id);
        SpaceBuf kv = {};

        if (!s) {
                channel_send_error(c, id, ESRCH, "no such stream");
                return;
        }
        if (s->exit_sent) {
                send_exit(c, s);
                return;
        }
        /* The new host starts with a full stdin window, as at EXEC. */
        space_credit_init(&s->in_credit);
        (void) space_kv_addf(&kv, "pid", "%d", (int) s->pid);
        (void) space_kv_add(&kv, "held", s->hold_fd >= 0 ? "1" : "0");
        (void) channel_send_kv(c, SPACE_F_STARTED, id, &kv);
        space_buf_done(&kv);
}

static void stream_maybe_finish(Channel *c, Stream *s) {
        if (s->exit_sent || !s->reaped || s->fd_out >= 0 || s->fd_err >= 0)
                return;
        send_exit(c, s);
        s->exit_sent = true;
        /* The process is gone: nothing reads stdin any more. */
        input_closed(c, s);
        credit_flush(c, s);
}

void streams_reap(Channel *c) {
        int status;
        pid_t pid;

        /* PID 1 reaps everything, including orphans re-parented to us. */
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
                for (size_t i = 0; i < n_streams; i++)
                        if (streams[i]->pid == pid && !streams[i]->reaped) {
                                streams[i]->reaped = true;
                                streams[i]->status = status;
                                stream_maybe_finish(c, streams[i]);
                                break;
                        }
}

size_t streams_poll_fill(const Channel *c, struct pollfd *fds, size_t max, Stream **owners) {
        bool room = channel_queued(c) < AGENT_OUTQ_HIGH;
        size_t n = 0;

        for (size_t i = 0; i < n_streams && n + 3 <= max; i++) {
                Stream *s = streams[i];

                if (room && s->fd_out >= 0 && s->out_credit[1].available > 0) {
                        owners[n] = s;
                        fds[n++] = (struct pollfd) { .fd = s->fd_out, .events = POLLIN };
                }
                if (room && s->fd_err >= 0 && s->out_credit[2].available > 0) {
                        owners[n] = s;
                        fds[n++] = (struct pollfd) { .fd = s->fd_err, .events = POLLIN };
                }
                if (s->fd_in >= 0 && s->in_buf.len > 0) {
                        owners[n] = s;
                        fds[n++] = (struct pollfd) { .fd = s->fd_in, .events = POLLOUT };
                }
        }
        return n;
}

void streams_poll_handle(Channel *c, const struct pollfd *fds, size_t n, Stream **owners) {
        for (size_t i = 0; i < n; i++) {
                Stream *s = owners[i];

                if (fds[i].revents == 0)
                        continue;
                if (fds[i].fd == s->fd_out)
                        output_read(c, s, 1);
                else if (fds[i].fd == s->fd_err)
                        output_read(c, s, 2);
                else if (fds[i].fd == s->fd_in)
                        input_write(c, s);
                stream_maybe_finish(c, s);
        }
}
