/* SPDX-License-Identifier: Apache-2.0 */

/*
 * The template's service (space-template(5), `start =`): one command the agent keeps running for the guest's
 * whole life, such as the code interpreter's server. The host names it in an INIT (service=, service_user=,
 * service_cwd=) when it builds a template's base snapshot, so the service is running in the snapshot and in
 * every sandbox restored from it; later INITs that name the same command change nothing. When it exits it is
 * started again, after a delay that doubles from SERVICE_BACKOFF_MIN_MS up to SERVICE_BACKOFF_MAX_MS and starts
 * over once it has run for SERVICE_STABLE_MS. Its output goes to SERVICE_LOG, cut when it grows past
 * SERVICE_LOG_MAX, so a chatty server cannot fill the guest's disk.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "exec.h"

#define SERVICE_LOG "/var/log/space-service.log"
#define SERVICE_LOG_MAX (8U << 20)
#define SERVICE_BACKOFF_MIN_MS 500U
#define SERVICE_BACKOFF_MAX_MS 30000U
#define SERVICE_STABLE_MS 60000U
#define SERVICE_CMD_MAX 4096U

typedef struct Service {
        char *cmd, *user, *cwd;    /* cmd NULL: none configured */
        pid_t pid;                 /* > 0 while it runs */
        uint64_t started_ms;
        uint64_t restart_at_ms;    /* 0: no restart pending */
        unsigned backoff_ms;
        unsigned starts;
} Service;

static Service service;

static uint64_t mono_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000U + (uint64_t) ts.tv_nsec / 1000000U;
}

static int open_log(void) {
        struct stat st;
        int fd;

        (void) mkdir("/var/log", 0755);
        fd = open(SERVICE_LOG, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0640);
        if (fd < 0)
                return open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (fstat(fd, &st) == 0 && (uint64_t) st.st_size > SERVICE_LOG_MAX)
                (void) ftruncate(fd, 0);
        return fd;
}

/* Forks the service's child (exec-child.c, as an EXEC's: its own session, the user, the directory) with stdin
 * from /dev/null and stdout and stderr into the log. -errno, and the reason logged, when it cannot start. */
static int service_spawn(void) {
        _cleanup_(exec_env_done) ExecEnv env = {};
        ExecFds fds = EXEC_FDS_NULL;
        char *argv[] = { (char *) "/bin/sh", (char *) "-c", service.cmd, NULL };
        ExecSpec spec = {
                .argv = argv,
                .n_argv = 3,
                .cwd = service.cwd,
                .user_spec = service.user,
        };
        int ep[2], r = 0;
        ExecFailure f;
        pid_t pid;

        if (spec.user_spec) {
                SpaceCode code;
                char msg[512];

                r = user_resolve(spec.user_spec, &spec.user, &code, msg, sizeof msg);
                if (r < 0) {
                        log_err("service: %s", msg);
                        return r;
                }
                if (!spec.cwd) {
                        spec.cwd = user_home_usable(&spec.user) ? spec.user.home : "/";
                        spec.cwd_chosen = true;
                }
        }
        if (exec_env_build(&env, &spec) < 0)
                return -ENOMEM;
        if (pipe2(ep, O_CLOEXEC) < 0)
                return -errno;
        fds.ep_r = ep[0];
        fds.ep_w = ep[1];
        fds.in_r = open("/dev/null", O_RDONLY | O_CLOEXEC);
        fds.out_w = open_log();
        fds.err_w = fds.out_w;
        if (fds.in_r < 0 || fds.out_w < 0)
                r = -errno;
        else if ((pid = fork()) < 0)
                r = -errno;
        else if (pid == 0)
                exec_child(&spec, &fds, env.envp);
        else {
                (void) close(fds.ep_w);
                fds.ep_w = -1;
                if (exec_read_failure(fds.ep_r, &f)) {
                        log_err("service: cannot start '%s': %s", service.cmd, strerror(f.err));
                        r = -f.err; /* the child exits 127: reaped as an orphan */
                } else {
                        service.pid = pid;
                        service.started_ms = mono_ms();
                        service.starts++;
                        log_info("service started (pid %d): %s", (int) pid, service.cmd);
                }
        }
        safe_close(fds.ep_r);
        safe_close(fds.ep_w);
        safe_close(fds.in_r);
        safe_close(fds.out_w);
        return r;
}

static void service_schedule(void) {
        service.backoff_ms = service.backoff_ms == 0 ? SERVICE_BACKOFF_MIN_MS :
                             MIN(service.backoff_ms * 2, SERVICE_BACKOFF_MAX_MS);
        service.restart_at_ms = mono_ms() + service.backoff_ms;
}

int service_configure(const char *cmd, const char *user, const char *cwd) {
        if (!cmd || !*cmd)
                return 0;
        if (strlen(cmd) > SERVICE_CMD_MAX || (cwd && cwd[0] != '/') || (user && space_user_spec_parse(user, NULL) < 0))
                return -EINVAL;
        /* Once per guest: a restored sandbox's INIT names the service its snapshot already runs. */
        if (service.cmd)
                return streq(service.cmd, cmd) ? 0 : -EBUSY;
        service.cmd = strdup(cmd);
        service.user = user ? strdup(user) : NULL;
        service.cwd = cwd ? strdup(cwd) : NULL;
        if (!service.cmd || (user && !service.user) || (cwd && !service.cwd))
                return -ENOMEM;
        if (service_spawn() < 0)
                service_schedule();
        return 0;
}

bool service_reaped(pid_t pid, int status) {
        if (service.pid <= 0 || pid != service.pid)
                return false;
        if (WIFSIGNALED(status))
                log_warn("service exited on signal %d; starting it again", WTERMSIG(status));
        else
                log_warn("service exited with status %d; starting it again", WEXITSTATUS(status));
        service.pid = 0;
        if (mono_ms() - service.started_ms >= SERVICE_STABLE_MS)
                service.backoff_ms = 0;
        service_schedule();
        return true;
}

int service_poll_timeout(void) {
        uint64_t now;

        if (service.restart_at_ms == 0 || work_frozen())
                return -1; /* frozen: the INIT that thaws wakes the loop */
        now = mono_ms();
        return now >= service.restart_at_ms ? 0 : (int) MIN(service.restart_at_ms - now, (uint64_t) INT32_MAX);
}

void service_tick(void) {
        /* a child started now would stop before its exec, and the agent with it: after the thaw */
        if (service.restart_at_ms == 0 || mono_ms() < service.restart_at_ms || work_frozen())
                return;
        service.restart_at_ms = 0;
        if (service_spawn() < 0)
                service_schedule();
}
