/* SPDX-License-Identifier: Apache-2.0 */

/*
 * EXEC user=: who a process runs as (lib/user.h). The agent resolves the name in the parent, before it forks,
 * so an unknown user is an answer to the EXEC itself (held or not); the child switches just before exec.
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* setgroups */
#endif

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "agent.h"

int user_resolve(const char *spec_text, SpaceUser *ret, SpaceCode *ret_code, char *msg, size_t msg_size) {
        _cleanup_fclose_ FILE *passwd = NULL, *group = NULL;
        SpaceUserSpec spec;
        int r, passwd_err, group_err;

        if (space_user_spec_parse(spec_text, &spec) < 0) {
                *ret_code = SPACE_CODE_INVALID_USER;
                (void) snprintf(msg, msg_size, "'%.64s' is not NAME|UID[:GROUP|GID]", spec_text);
                return -EINVAL;
        }
        passwd = fopen("/etc/passwd", "re");
        passwd_err = passwd ? 0 : errno;
        group = fopen("/etc/group", "re");
        group_err = group ? 0 : errno;

        r = space_user_resolve(&spec, passwd, group, ret);
        if (r == -ESRCH) {
                *ret_code = SPACE_CODE_UNKNOWN_USER;
                if (passwd_err)
                        (void) snprintf(msg, msg_size, "unknown user '%s': cannot read the sandbox's /etc/passwd: %s",
                                        spec.user, strerror(passwd_err));
                else
                        (void) snprintf(msg, msg_size, "unknown user '%s': the sandbox's /etc/passwd has no such user",
                                        spec.user);
        } else if (r == -ENOENT) {
                *ret_code = SPACE_CODE_UNKNOWN_GROUP;
                if (group_err)
                        (void) snprintf(msg, msg_size, "unknown group '%s': cannot read the sandbox's /etc/group: %s",
                                        spec.group, strerror(group_err));
                else
                        (void) snprintf(msg, msg_size, "unknown group '%s': the sandbox's /etc/group has no such group",
                                        spec.group);
        } else if (r < 0) {
                *ret_code = SPACE_CODE_EXEC_FAILED;
                (void) snprintf(msg, msg_size, "resolving user '%s': %s", spec_text, strerror(-r));
        }
        return r;
}

bool user_home_usable(const SpaceUser *u) {
        struct stat st;

        /* a volume mounted there is a directory, and the agent must not ask itself (agent.h) */
        return volume_path_mounted(u->home) || (stat(u->home, &st) >= 0 && S_ISDIR(st.st_mode));
}

/* In the child, after its stdio is in place: stdio pipes and the pty become the user's (so that it can
 * reopen /dev/stdin or its tty, as runc does), then groups, gid, uid. -errno; the caller reports it. */
int user_switch(const SpaceUser *u) {
        gid_t groups[SPACE_USER_GROUPS_MAX];

        for (int fd = 0; fd <= 2; fd++) {
                struct stat st;

                if (fstat(fd, &st) < 0)
                        continue;
                if (S_ISFIFO(st.st_mode))
                        (void) fchown(fd, u->uid, u->gid);
                else if (S_ISCHR(st.st_mode) && isatty(fd))
                        (void) fchown(fd, u->uid, (gid_t) -1); /* a pty slave keeps its tty group */
                /* /dev/null (stdin without -i) stays as it is */
        }

        for (size_t i = 0; i < u->n_groups; i++)
                groups[i] = u->groups[i];
        if (setgroups(u->n_groups, groups) < 0 || setgid(u->gid) < 0 || setuid(u->uid) < 0)
                return -errno;
        return 0;
}
