/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What exec.c (the agent's side of EXEC) and exec-child.c (the forked child's side) share. */

#include <stdbool.h>
#include <stddef.h>

#include "agent.h"

/* An EXEC request, parsed. Strings point into the EXEC payload, which outlives the fork. */
typedef struct ExecSpec {
        char **argv;               /* NULL-terminated, at least one non-empty element */
        char **req_env;            /* the request's "K=V" records, NULL-terminated or NULL */
        size_t n_argv, n_req_env;
        const char *cwd;           /* NULL: the host did not say */
        const char *user_spec;     /* NULL: stay root */
        bool want_stdin, pty, hold;
        unsigned rows, cols;
        /* Filled in the parent, before the fork. */
        SpaceUser user;            /* valid when user_spec */
        bool cwd_chosen;           /* cwd is the user's home (or "/"), which we chose, not the host */
} ExecSpec;

/* The fds between the agent and the child; -1 where unused. Named from the pipe's side: _r read, _w write. */
typedef struct ExecFds {
        int in_r, in_w, out_r, out_w, err_r, err_w;
        int master;                /* with a pty: the master, in place of the three pipes */
        int ep_r, ep_w;            /* CLOEXEC pipe: the child writes an ExecFailure if it fails before exec */
        int hold_r, hold_w;        /* EXEC hold=1: the child waits for a byte on hold_r */
        char pty_path[128];        /* the slave's path, "" without a pty */
} ExecFds;

/* Where the child failed, as the parent reads it from ep_r. */
typedef enum ExecStage {
        EXEC_STAGE_CHDIR = 0,
        EXEC_STAGE_EXEC = 1,
        EXEC_STAGE_SETUP = 2,
        EXEC_STAGE_USER = 3,
} ExecStage;

typedef struct ExecFailure {
        int stage;                 /* ExecStage */
        int err;
} ExecFailure;

#define EXEC_FDS_NULL                                                                                          \
        (ExecFds) {                                                                                            \
                .in_r = -1, .in_w = -1, .out_r = -1, .out_w = -1, .err_r = -1, .err_w = -1, .master = -1,      \
                .ep_r = -1, .ep_w = -1, .hold_r = -1, .hold_w = -1,                                            \
        }

/* The environment of the process. envp points into the struct and into the EXEC payload: both live until the
 * fork. */
typedef struct ExecEnv {
        char **envp;
        size_t n;
        char home[SPACE_USER_HOME_MAX + 8], user[SPACE_USER_SPEC_MAX + 8], logname[SPACE_USER_SPEC_MAX + 16];
} ExecEnv;

/* exec.c: the process's environment (INIT's defaults, the user's HOME, USER and LOGNAME, the request's), and
 * the failure a child reported before its exec, if any. */
int exec_env_build(ExecEnv *e, const ExecSpec *s);
void exec_env_done(ExecEnv *e);
bool exec_read_failure(int fd, ExecFailure *ret);

/* exec-child.c: runs in the forked child; execs, or reports an ExecFailure on fds->ep_w and exits 127. */
_Noreturn void exec_child(const ExecSpec *spec, const ExecFds *fds, char **envp);
