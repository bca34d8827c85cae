/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "macro.h"
#include "paths.h"

#define START_TIMEOUT_MS 15000
#define SYSTEMD_WAIT_MS 2000
#define PROBE_INTERVAL_MS 50

/* 0 when a process of ours accepts connections at path, -EPERM when another user's does (ret_uid, may be
 * NULL, says whose), else -errno of connect(). */
static int probe(const char *path, uid_t *ret_uid) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -1;

        if (strlen(path) >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return errno == ENOTDIR ? -ENOENT : -errno;
        return space_socket_peer_check(fd, ret_uid);
}

static int wait_listening(const char *path, int timeout_ms) {
        int r = -ENOENT;

        for (int waited = 0; waited < timeout_ms; waited += PROBE_INTERVAL_MS) {
                r = probe(path, NULL);
                if (!space_http_error_is_unreachable(r))
                        return r;
                (void) nanosleep(&(struct timespec) { 0, PROBE_INTERVAL_MS * 1000000L }, NULL);
        }
        return r;
}

static bool systemd_user_manager_running(void) {
        const char *rt = getenv("XDG_RUNTIME_DIR");
        _cleanup_free_ char *p = NULL;

        /* A socket unit only listens on the default path; an explicit SPACE_SOCKET means a private daemon. */
        if (getenv("SPACE_SOCKET") && *getenv("SPACE_SOCKET"))
                return false;
        if (!rt || !*rt || asprintf(&p, "%s/systemd/private", rt) < 0)
                return false;
        return access(p, F_OK) == 0;
}

/* Runs argv quietly and returns its exit status (or -errno). */
static int run_quiet(char *const argv[]) {
        int status;
        pid_t pid;

        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null >= 0) {
                        dup2(null, STDIN_FILENO);
                        dup2(null, STDOUT_FILENO);
                        dup2(null, STDERR_FILENO);
                }
                execvp(argv[0], argv);
                _exit(127);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static bool is_executable_file(const char *p) {
        struct stat st;
        return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

/* $SPACED, else spaced next to our own binary, else the first one in $PATH. */
static int find_spaced(char **ret) {
        const char *e = getenv("SPACED");
        char self[PATH_MAX];
        ssize_t n;

        if (e && *e) {
                if (!is_executable_file(e)) {
                        log_error("SPACED=%s is not an executable file", e);
                        return -ENOEXEC;
                }
                *ret = strdup(e);
                return *ret ? 0 : -ENOMEM;
        }

        n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) {
                char *slash;
                _cleanup_free_ char *p = NULL;

                self[n] = 0;
                slash = strrchr(self, '/');
                if (slash) {
                        *slash = 0;
                        if (asprintf(&p, "%s/spaced", self) < 0)
                                return -ENOMEM;
                        if (is_executable_file(p)) {
                                *ret = TAKE_PTR(p);
                                return 0;
                        }
                }
        }

        e = getenv("PATH");
        if (!e || !*e)
                e = "/usr/local/bin:/usr/bin:/bin";
        while (*e) {
                size_t len = strcspn(e, ":");
                _cleanup_free_ char *p = NULL;

                if (asprintf(&p, "%.*s/spaced", (int) len ?: 1, len ? e : ".") < 0)
                        return -ENOMEM;
                if (is_executable_file(p)) {
                        *ret = TAKE_PTR(p);
                        return 0;
                }
                e += len;
                if (*e)
                        e++;
        }
        return -ENOENT;
}

/* Starts spaced fully detached (double fork, own session, stdio to /dev/null and the log). Returns once
 * the exec happened, or the exec's -errno. */
static int spawn_spaced(const char *binary, const char *log_path) {
        int pipefd[2], err = 0, status;
        pid_t pid;
        ssize_t n;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;

        pid = fork();
        if (pid < 0) {
                err = -errno;
                close(pipefd[0]);
                close(pipefd[1]);
                return err;
        }
        if (pid == 0) {
                sigset_t all;
                int fd;

                close(pipefd[0]);
                if (setsid() < 0)
                        _exit(1);
                pid = fork();
                if (pid != 0)
                        _exit(pid < 0 ? 1 : 0);

                /* The grandchild: nothing of ours may leak into the daemon. */
                sigemptyset(&all);
                (void) sigprocmask(SIG_SETMASK, &all, NULL);
                for (int sig = 1; sig < NSIG; sig++)
                        (void) signal(sig, SIG_DFL);
                (void) chdir("/");
                umask(0077);
                fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (fd >= 0)
                        dup2(fd, STDIN_FILENO);
                fd = log_path ? open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600) : -1;
                if (fd < 0)
                        fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (fd >= 0) {
                        dup2(fd, STDOUT_FILENO);
                        dup2(fd, STDERR_FILENO);
                }
                /* Everything else (curl's, the signal pipe) closes on exec; the error pipe must too. */
                (void) close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
                execl(binary, "spaced", (char *) NULL);
                err = errno;
                (void) !write(pipefd[1], &err, sizeof err);
                _exit(127);
        }

        close(pipefd[1]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        do
                n = read(pipefd[0], &err, sizeof err);
        while (n < 0 && errno == EINTR);
        close(pipefd[0]);
        if (n == (ssize_t) sizeof err)
                return -err;
        return 0;
}

int cli_ensure_daemon(SpaceHttp *h) {
        const char *sock = space_http_socket_path(h);
        _cleanup_free_ char *binary = NULL, *state = NULL, *log_path = NULL;
        uid_t peer = 0;
        int r;

        if (!sock)
                return 0; /* TCP: a remote daemon is not ours to start */

        r = probe(sock, &peer);
        if (r == 0)
                return 0;
        if (r == -EPERM) {
                cli_log_foreign_socket(sock, peer);
                return r;
        }
        if (!space_http_error_is_unreachable(r)) {
                log_error("cannot connect to spaced at %s: %s", sock, strerror(-r));
                return r;
        }
        /* Shell completion asks for ids and names; a Tab press must not start a daemon. */
        if (getenv("SPACE_NO_AUTOSTART") && *getenv("SPACE_NO_AUTOSTART")) {
                log_error("cannot reach spaced at %s: %s; SPACE_NO_AUTOSTART is set", sock, strerror(-r));
                return r;
        }

        if (systemd_user_manager_running() &&
            run_quiet((char *const[]) { (char *) "systemctl", (char *) "--user", (char *) "--quiet",
                                        (char *) "start", (char *) "spaced.socket", NULL }) == 0) {
                r = wait_listening(sock, SYSTEMD_WAIT_MS);
                if (r == 0)
                        return 0;
                /* The unit exists but listens elsewhere or failed: start one ourselves. */
        }

        r = find_spaced(&binary);
        if (r == -ENOENT) {
                log_error("cannot reach spaced at %s: %s, and no spaced binary was found next to spacectl "
                          "or in PATH; is it installed? see spaced(8)", sock, strerror(ENOENT));
                return r;
        }
        if (r < 0)
                return r;

        if (space_state_dir(&state) >= 0 && space_mkdir_p(state, 0700) >= 0)
                if (asprintf(&log_path, "%s/spaced.log", state) < 0)
                        log_path = NULL;

        r = spawn_spaced(binary, log_path);
        if (r < 0) {
                log_error("cannot start %s: %s; see spaced(8)", binary, strerror(-r));
                return r;
        }

        /* Concurrent spacectl calls may all have spawned one; the daemon's lock makes the extra ones exit,
         * so waiting for the socket is all there is to do. */
        r = wait_listening(sock, START_TIMEOUT_MS);
        if (r == 0)
                return 0;
        if (space_http_error_is_unreachable(r))
                log_error("started %s, but nothing listens on %s after %d s; see %s", binary, sock,
                          START_TIMEOUT_MS / 1000, log_path ?: "its log");
        else
                log_error("cannot connect to spaced at %s: %s", sock, strerror(-r));
        return r;
}
