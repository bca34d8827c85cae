/* SPDX-License-Identifier: Apache-2.0 */

/*
 * EXEC streams: start a process (the child's side, up to exec, is exec-child.c), pump its stdio through the
 * channel under per-fd credit, report its exit.
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
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "exec.h"

/* How long a pty's last bytes may take to reach the master after the process exited (the kernel moves them
 * from a work queue), when something it left behind still holds the terminal open. */
#define PTY_SETTLE_MS 100U

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

/* Sets one "K=V" record in envp, replacing an earlier K. The strings are not copied. */
static int env_put(char ***envp, size_t *n_env, const char *rec) {
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

/* Appends to a NULL-terminated list; the string is not copied. */
static int list_push(char ***l, size_t *n, const char *s) {
        char **a = realloc(*l, (*n + 2) * sizeof *a);

        if (!a)
                return -ENOMEM;
        *l = a;
        a[(*n)++] = (char *) s;
        a[*n] = NULL;
        return 0;
}

static void exec_spec_done(ExecSpec *s) {
        free(s->argv);
        free(s->req_env);
        *s = (ExecSpec) {};
}

/* Parses an EXEC payload. On failure, -errno and the message for the host (NULL for ENOMEM). */
static int exec_spec_parse(const uint8_t *p, size_t n, ExecSpec *ret, const char **ret_message) {
        _cleanup_(exec_spec_done) ExecSpec s = {};
        size_t off = 0, klen;
        const char *k, *v;
        int r;

        *ret_message = NULL;
        while ((r = space_kv_next(p, n, &off, &k, &klen, &v)) > 0) {
#define KEY(x) (klen == sizeof(x) - 1 && memcmp(k, x, klen) == 0)
                if (KEY("argv")) {
                        if (list_push(&s.argv, &s.n_argv, v) < 0)
                                return -ENOMEM;
                } else if (KEY("env")) {
                        /* applied by exec_env_build(), after the defaults and the user's HOME, USER, LOGNAME */
                        if (!strchr(v, '=') || v[0] == '=') {
                                *ret_message = "env record without KEY=";
                                return -EINVAL;
                        }
                        if (list_push(&s.req_env, &s.n_req_env, v) < 0)
                                return -ENOMEM;
                } else if (KEY("user"))
                        s.user_spec = v;
                else if (KEY("cwd"))
                        s.cwd = v;
                else if (KEY("stdin"))
                        s.want_stdin = streq(v, "1");
                else if (KEY("pty"))
                        s.pty = streq(v, "1");
                else if (KEY("rows"))
                        s.rows = (unsigned) strtoul(v, NULL, 10);
                else if (KEY("cols"))
                        s.cols = (unsigned) strtoul(v, NULL, 10);
                else if (KEY("hold"))
                        s.hold = streq(v, "1");
#undef KEY
        }
        if (r < 0) {
                *ret_message = "malformed EXEC payload";
                return -EBADMSG;
        }
        if (s.n_argv == 0 || s.argv[0][0] == 0) {
                *ret_message = "no argv";
                return -EINVAL;
        }

        *ret = s;
        s = (ExecSpec) {};
        return 0;
}

/* user=: in the parent, before the fork, so that an unknown user is the answer to this EXEC, held or not.
 * Without cwd=, the process starts in the user's home, or in "/" if the home is not usable. On failure,
 * -errno, the error code and the message for the host. */
static int exec_spec_resolve_user(ExecSpec *s, SpaceCode *ret_code, char *msg, size_t msg_size) {
        int r;

        r = user_resolve(s->user_spec, &s->user, ret_code, msg, msg_size);
        if (r < 0)
                return r;
        if (!s->cwd) {
                s->cwd = user_home_usable(&s->user) ? s->user.home : "/";
                s->cwd_chosen = true;
        }
        return 0;
}

void exec_env_done(ExecEnv *e) {
        free(e->envp);
        e->envp = NULL;
}

/* The proxy's variables, the CA's, INIT's defaults, then the user's, then the request's: each overrides what
 * came before. Then PATH and HOME
 * if still unset, and TERM for a pty. */
int exec_env_build(ExecEnv *e, const ExecSpec *s) {
        const char *const *proxy = net_proxy_env(), *const *ca = ca_env();
        char **defaults = init_default_env();

        /* First of all: the way out of the sandbox (net.c) and whom to trust on it (ca.c), unless INIT or the
         * request says otherwise. */
        for (size_t i = 0; proxy && proxy[i]; i++)
                if (env_put(&e->envp, &e->n, proxy[i]) < 0)
                        return -ENOMEM;
        for (size_t i = 0; ca && ca[i]; i++)
                if (env_put(&e->envp, &e->n, ca[i]) < 0)
                        return -ENOMEM;
        for (size_t i = 0; defaults && defaults[i]; i++)
                if (env_put(&e->envp, &e->n, defaults[i]) < 0)
                        return -ENOMEM;
        if (s->user_spec) {
                (void) snprintf(e->home, sizeof e->home, "HOME=%s", s->user.home);
                if (env_put(&e->envp, &e->n, e->home) < 0)
                        return -ENOMEM;
                if (s->user.name[0]) {
                        (void) snprintf(e->user, sizeof e->user, "USER=%s", s->user.name);
                        (void) snprintf(e->logname, sizeof e->logname, "LOGNAME=%s", s->user.name);
                        if (env_put(&e->envp, &e->n, e->user) < 0 || env_put(&e->envp, &e->n, e->logname) < 0)
                                return -ENOMEM;
                }
        }
        for (size_t i = 0; i < s->n_req_env; i++)
                if (env_put(&e->envp, &e->n, s->req_env[i]) < 0)
                        return -ENOMEM;
        if (!env_has(e->envp, e->n, "PATH") && env_put(&e->envp, &e->n, "PATH=" AGENT_DEFAULT_PATH) < 0)
                return -ENOMEM;
        if (!env_has(e->envp, e->n, "HOME") && env_put(&e->envp, &e->n, "HOME=/root") < 0)
                return -ENOMEM;
        if (s->pty && !env_has(e->envp, e->n, "TERM") && env_put(&e->envp, &e->n, "TERM=xterm-256color") < 0)
                return -ENOMEM;
        return 0;
}


static void exec_fds_close(ExecFds *f) {
        f->in_r = safe_close(f->in_r);
        f->in_w = safe_close(f->in_w);
        f->out_r = safe_close(f->out_r);
        f->out_w = safe_close(f->out_w);
        f->err_r = safe_close(f->err_r);
        f->err_w = safe_close(f->err_w);
        f->master = safe_close(f->master);
        f->ep_r = safe_close(f->ep_r);
        f->ep_w = safe_close(f->ep_w);
        f->hold_r = safe_close(f->hold_r);
        f->hold_w = safe_close(f->hold_w);
}

static int exec_pty_open(ExecFds *f, unsigned rows, unsigned cols) {
        struct winsize ws = { .ws_row = rows ? rows : 24, .ws_col = cols ? cols : 80 };
        int r;

        f->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (f->master < 0 || grantpt(f->master) < 0 || unlockpt(f->master) < 0)
                return -errno;
        r = ptsname_r(f->master, f->pty_path, sizeof f->pty_path);
        if (r != 0)
                return -r;
        (void) ioctl(f->master, TIOCSWINSZ, &ws);
        return 0;
}

/* Without a pty: a pipe each for stdout and stderr, and for stdin only if the host will write to it. */
static int exec_pipes_open(ExecFds *f, bool want_stdin) {
        int pp[2];

        if (pipe2(pp, O_CLOEXEC) < 0)
                return -errno;
        f->out_r = pp[0], f->out_w = pp[1];
        if (pipe2(pp, O_CLOEXEC) < 0)
                return -errno;
        f->err_r = pp[0], f->err_w = pp[1];
        if (want_stdin) {
                if (pipe2(pp, O_CLOEXEC) < 0)
                        return -errno;
                f->in_r = pp[0], f->in_w = pp[1];
        } else {
                f->in_r = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (f->in_r < 0)
                        return -errno;
        }
        return 0;
}

static int exec_fds_open(ExecFds *f, const ExecSpec *s) {
        int pp[2];

        if (pipe2(pp, O_CLOEXEC) < 0)
                return -errno;
        f->ep_r = pp[0], f->ep_w = pp[1];
        if (s->hold) {
                if (pipe2(pp, O_CLOEXEC) < 0)
                        return -errno;
                f->hold_r = pp[0], f->hold_w = pp[1];
        }
        if (s->pty)
                return exec_pty_open(f, s->rows, s->cols);
        return exec_pipes_open(f, s->want_stdin);
}

/* After the fork: the child's ends are the child's. Kept open here, they would hold back the EOFs we wait
 * for. */
static void exec_fds_close_child_ends(ExecFds *f) {
        f->ep_w = safe_close(f->ep_w);
        f->hold_r = safe_close(f->hold_r);
        f->in_r = safe_close(f->in_r);
        f->out_w = safe_close(f->out_w);
        f->err_w = safe_close(f->err_w);
}

/* Blocks until the child has exec'd (EOF: false) or failed (true, and *ret says how). Short: it ends at the
 * child's exec or failure, and it keeps EXEC's answer honest. */
bool exec_read_failure(int fd, ExecFailure *ret) {
        ssize_t l;

        do
                l = read(fd, ret, sizeof *ret);
        while (l < 0 && errno == EINTR);
        return l == (ssize_t) sizeof *ret;
}

static void send_exec_failure(Channel *c, uint32_t id, const ExecFailure *f, const char *cwd, const char *argv0) {
        /* stage= lets the host tell a bad working directory from a missing command */
        const char *stage = f->stage == EXEC_STAGE_CHDIR ? "chdir" :
                            f->stage == EXEC_STAGE_EXEC  ? "exec" :
                            f->stage == EXEC_STAGE_USER  ? "user" :
                                                           "setup";
        SpaceBuf kv = {};
        char msg[512];

        if (f->stage == EXEC_STAGE_USER)
                (void) snprintf(msg, sizeof msg, "switching to the user: %s", strerror(f->err));
        else
                (void) snprintf(msg, sizeof msg, "%s %s: %s", stage,
                                f->stage == EXEC_STAGE_CHDIR ? (cwd ? cwd : "/") : argv0, strerror(f->err));
        (void) space_kv_addf(&kv, "errno", "%d", f->err);
        (void) space_kv_add(&kv, "message", msg);
        (void) space_kv_add(&kv, "stage", stage);
        (void) channel_send_kv(c, SPACE_F_ERROR, id, &kv);
        space_buf_done(&kv);
}

static void send_user_error(Channel *c, uint32_t id, int err, SpaceCode code, const char *message) {
        SpaceBuf kv = {};

        (void) space_kv_addf(&kv, "errno", "%d", err);
        (void) space_kv_add(&kv, "message", message);
        (void) space_kv_add(&kv, "code", space_code_to_string(code));
        (void) space_kv_add(&kv, "stage", "user");
        (void) channel_send_kv(c, SPACE_F_ERROR, id, &kv);
        space_buf_done(&kv);
}

static void send_setup_error(Channel *c, uint32_t id, int err) {
        char msg[512];

        (void) snprintf(msg, sizeof msg, "setting up the process: %s", strerror(err));
        channel_send_error(c, id, err, msg);
}

static void send_started(Channel *c, uint32_t id, pid_t pid, const ExecSpec *spec) {
        SpaceBuf kv = {};

        (void) space_kv_addf(&kv, "pid", "%d", (int) pid);
        if (spec->hold)
                (void) space_kv_add(&kv, "held", "1");
        if (spec->cwd_chosen)
                (void) space_kv_add(&kv, "cwd", spec->cwd); /* the host did not say: tell it where it runs */
        (void) channel_send_kv(c, SPACE_F_STARTED, id, &kv);
        space_buf_done(&kv);
}

/* Registers the started process, taking our ends of its fds. NULL when out of memory (nothing taken). */
static Stream *stream_add(uint32_t id, pid_t pid, const ExecSpec *spec, ExecFds *fds) {
        Stream *s;

        s = calloc(1, sizeof *s);
        if (!s)
                return NULL;
        *s = (Stream) {
                .id = id,
                .pid = pid,
                .pty = spec->pty,
                .fd_in = -1,
                .fd_out = -1,
                .fd_err = -1,
                .seq = next_seq++,
                .hold_fd = -1,
                .exec_err_fd = -1,
        };
        if (spec->hold) {
                s->hold_fd = TAKE_FD(fds->hold_w);
                s->exec_err_fd = TAKE_FD(fds->ep_r);
                s->cwd = spec->cwd ? strdup(spec->cwd) : NULL;
                s->argv0 = strdup(spec->argv[0]);
        }
        space_credit_init(&s->in_credit);
        for (size_t i = 0; i < ELEMENTSOF(s->out_credit); i++)
                space_credit_init(&s->out_credit[i]);
        if (spec->pty) {
                s->fd_out = TAKE_FD(fds->master);
                s->fd_in = fcntl(s->fd_out, F_DUPFD_CLOEXEC, 3);
                (void) set_nonblock(s->fd_out);
        } else {
                s->fd_out = TAKE_FD(fds->out_r);
                s->fd_err = TAKE_FD(fds->err_r);
                s->fd_in = TAKE_FD(fds->in_w);
                (void) set_nonblock(s->fd_out);
                (void) set_nonblock(s->fd_err);
                if (s->fd_in >= 0)
                        (void) set_nonblock(s->fd_in);
        }
        streams[n_streams++] = s;
        return s;
}

void exec_start(Channel *c, uint32_t id, const uint8_t *p, size_t n) {
        _cleanup_(exec_spec_done) ExecSpec spec = {};
        _cleanup_(exec_env_done) ExecEnv env = {};
        _cleanup_(exec_fds_close) ExecFds fds = EXEC_FDS_NULL;
        const char *message;
        ExecFailure f;
        pid_t pid;
        int r;

        if (stream_find(id)) {
                channel_send_error(c, id, EEXIST, "stream id in use");
                return;
        }
        if (n_streams >= SPACE_STREAMS_MAX && !streams_evict()) {
                channel_send_error(c, id, EAGAIN, "too many processes");
                return;
        }

        r = exec_spec_parse(p, n, &spec, &message);
        if (r < 0) {
                channel_send_error(c, id, -r, message);
                return;
        }

        if (spec.user_spec) {
                SpaceCode code = SPACE_CODE_EXEC_FAILED;
                char msg[512];

                r = exec_spec_resolve_user(&spec, &code, msg, sizeof msg);
                if (r < 0) {
                        send_user_error(c, id, -r, code, msg);
                        return;
                }
        }

        if (exec_env_build(&env, &spec) < 0) {
                channel_send_error(c, id, ENOMEM, NULL);
                return;
        }

        r = exec_fds_open(&fds, &spec);
        if (r < 0) {
                send_setup_error(c, id, -r);
                return;
        }

        pid = fork();
        if (pid < 0) {
                send_setup_error(c, id, errno);
                return;
        }
        if (pid == 0)
                exec_child(&spec, &fds, env.envp);

        exec_fds_close_child_ends(&fds);

        /* A held child has not got to its exec yet: that read happens at RELEASE. */
        if (!spec.hold && exec_read_failure(fds.ep_r, &f)) {
                send_exec_failure(c, id, &f, spec.cwd, spec.argv[0]);
                return; /* the child _exits; the reaper collects it as an orphan */
        }

        if (!stream_add(id, pid, &spec, &fds)) {
                (void) kill(pid, SIGKILL);
                channel_send_error(c, id, ENOMEM, NULL);
                return;
        }
        send_started(c, id, pid, &spec);
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
        ExecFailure f;
        bool failed;

        if (s->hold_fd < 0)
                return;
        (void) !write(s->hold_fd, "x", 1);
        s->hold_fd = safe_close(s->hold_fd);
        /* As for an EXEC without hold. */
        failed = exec_read_failure(s->exec_err_fd, &f);
        s->exec_err_fd = safe_close(s->exec_err_fd);
        if (failed)
                send_exec_failure(c, s->id, &f, s->cwd, s->argv0 ? s->argv0 : "?");
}

/* Whether the process has exited, reaped or still a zombie. */
static bool stream_exited(const Stream *s) {
        siginfo_t si = {};

        if (s->reaped)
                return true;
        if (waitid(P_PID, s->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
                return errno == ECHILD;
        return si.si_pid == s->pid;
}

void stream_signal(Stream *s, int sig) {
        if (s->pid <= 0 || sig <= 0 || sig >= 65)
                return;
        /* The process group (its own session, exec-child.c) while the process runs, so a timeout or a kill
         * takes its children too. Once it has exited, what it left behind in the group is on its own: the
         * host's SIGKILL for a stream that is still sending its last output must not reach them. */
        if (stream_exited(s))
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

        if (s->out_bounded && s->out_left[fd] < want)
                want = s->out_left[fd];
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
        if (s->out_bounded) {
                s->out_left[fd] -= (size_t) n;
                if (s->out_left[fd] == 0)
                        output_eof(c, s, fd);
        }
}

static uint64_t now_ms(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000U + (uint64_t) ts.tv_nsec / 1000000U;
}

/* Whether anyone still has the pty's slave open: the master reports POLLHUP once nobody does. */
static bool pty_slave_held(int master) {
        struct pollfd p = { .fd = master, .events = POLLIN };

        return poll(&p, 1, 0) >= 0 && !(p.revents & POLLHUP);
}

/* The process has exited: what its stdout and stderr hold now is the rest of its output. Later bytes come
 * from what it left behind, which the command's end does not wait for (E2B's envd ends a process the same
 * way): our ends close once these are forwarded, and a background child that still writes to them gets
 * EPIPE (EIO on a pty). Until then output flows under credit as before, so nothing the process wrote is
 * lost to a slow host. */
static void output_bound(Channel *c, Stream *s) {
        s->out_bounded = true;
        s->bound_at_ms = 0;
        for (uint8_t fd = 1; fd <= 2; fd++) {
                int rfd = fd == 1 ? s->fd_out : s->fd_err, n = 0;

                if (rfd < 0)
                        continue;
                if (ioctl(rfd, FIONREAD, &n) < 0 || n < 0)
                        n = 0;
                s->out_left[fd] = (size_t) n;
                if (n == 0)
                        output_eof(c, s, fd);
        }
}

/* Bounds the output of a process that just exited. A pipe holds all it wrote at once. A pty whose slave
 * nobody holds any more needs nothing: reads run to EIO, which the kernel gives only after the last bytes;
 * one that something still holds gets PTY_SETTLE_MS for the last bytes to arrive first. */
static void stream_process_exited(Channel *c, Stream *s) {
        if (!s->pty)
                output_bound(c, s);
        else if (s->fd_out >= 0 && pty_slave_held(s->fd_out))
                s->bound_at_ms = now_ms() + PTY_SETTLE_MS;
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
        uint64_t now;
        int status;
        pid_t pid;

        /* PID 1 reaps everything, including orphans re-parented to us: those match no stream still waiting
         * for its process (a pid is not reused before it is reaped), and are only collected. */
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                bool found = false;

                for (size_t i = 0; !found && i < n_streams; i++)
                        if (streams[i]->pid == pid && !streams[i]->reaped) {
                                streams[i]->reaped = true;
                                streams[i]->status = status;
                                stream_process_exited(c, streams[i]);
                                stream_maybe_finish(c, streams[i]);
                                found = true;
                        }
                if (!found)
                        (void) service_reaped(pid, status);
        }

        now = now_ms();
        for (size_t i = 0; i < n_streams; i++) {
                Stream *s = streams[i];

                if (s->bound_at_ms == 0 || now < s->bound_at_ms)
                        continue;
                s->bound_at_ms = 0;
                if (s->fd_out >= 0 && pty_slave_held(s->fd_out))
                        output_bound(c, s);
                stream_maybe_finish(c, s);
        }
}

int streams_poll_timeout(void) {
        uint64_t now = now_ms(), first = 0;

        for (size_t i = 0; i < n_streams; i++)
                if (streams[i]->bound_at_ms > 0 && streams[i]->fd_out >= 0 &&
                    (first == 0 || streams[i]->bound_at_ms < first))
                        first = streams[i]->bound_at_ms;
        if (first == 0)
                return -1;
        return first <= now ? 0 : (int) (first - now);
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
