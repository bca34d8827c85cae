/* SPDX-License-Identifier: Apache-2.0 */

/*
 * EXEC, the child's side: between fork and exec, in this order: a clean signal state and fd limit, a session of
 * its own (with a pty as controlling terminal) and stdio, the user, the wait for RELEASE, the working
 * directory, exec. Whatever fails goes to the agent as an ExecFailure on the CLOEXEC pipe, and the child exits
 * 127; the host tells a missing command (127) from the other failures (126) by the errno in it.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "exec.h"

extern char **environ;

static _Noreturn void child_fail(int errpipe, ExecStage stage, int err) {
        ExecFailure f = { .stage = stage, .err = err };

        (void) !write(errpipe, &f, sizeof f);
        _exit(127);
}

/* Undoes what the agent set for itself: its signal mask and SIGPIPE, and a fd limit above 1024. Returns the
 * child's fd limit. */
static int child_reset_process(void) {
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
        return (int) rl.rlim_cur;
}

/* A session of its own, so that a signal to the process group reaches the whole job; with a pty, the slave is
 * its controlling terminal and all of its stdio. */
static int child_setup_stdio(const ExecSpec *spec, const ExecFds *fds) {
        int fd_in = fds->in_r, fd_out = fds->out_w, fd_err = fds->err_w;

        if (setsid() < 0)
                return -errno;

        if (spec->pty) {
                int t = open(fds->pty_path, O_RDWR);
                if (t < 0)
                        return -errno;
                (void) ioctl(t, TIOCSCTTY, 0);
                fd_in = fd_out = fd_err = t;
        }

        if (dup2(fd_in, 0) < 0 || dup2(fd_out, 1) < 0 || dup2(fd_err, 2) < 0)
                return -errno;
        umask(022);
        return 0;
}

/* EXEC hold=1: waits for RELEASE's byte; exits if the agent closes the pipe instead. */
static void child_wait_release(int hold, int errpipe, int fd_max) {
        char b;
        ssize_t l;

        /* We may wait long: drop the agent's other fds (CLOEXEC only helps at exec), or we would keep other
         * processes' stdin pipes open and their EOF from arriving. */
        for (int fd = 3; fd < fd_max; fd++)
                if (fd != hold && fd != errpipe)
                        (void) close(fd);
        do
                l = read(hold, &b, 1);
        while (l < 0 && errno == EINTR);
        if (l != 1)
                _exit(127); /* the agent forgot us */
        (void) close(hold);
}

/* cwd_fallback: cwd is the user's home, which we chose: "/" if it cannot be entered. */
static int child_chdir(const char *cwd, bool cwd_fallback) {
        if (chdir(cwd && cwd[0] ? cwd : "/") < 0 && (!cwd_fallback || chdir("/") < 0))
                return -errno;
        return 0;
}

_Noreturn void exec_child(const ExecSpec *spec, const ExecFds *fds, char **envp) {
        int fd_max, r;

        /* First: everything this child becomes, and all it starts, is the workload the host freezes. */
        work_join();
        if (fds->hold_w >= 0)
                (void) close(fds->hold_w); /* RELEASE's end, the agent's */

        fd_max = child_reset_process();

        r = child_setup_stdio(spec, fds);
        if (r < 0)
                child_fail(fds->ep_w, EXEC_STAGE_SETUP, -r);

        if (spec->user_spec) {
                r = user_switch(&spec->user);
                if (r < 0)
                        child_fail(fds->ep_w, EXEC_STAGE_USER, -r);
        }

        if (fds->hold_r >= 0)
                child_wait_release(fds->hold_r, fds->ep_w, fd_max);

        r = child_chdir(spec->cwd, spec->cwd_chosen);
        if (r < 0)
                child_fail(fds->ep_w, EXEC_STAGE_CHDIR, -r);

        environ = envp;
        execvp(spec->argv[0], spec->argv);
        child_fail(fds->ep_w, EXEC_STAGE_EXEC, errno);
}
