/* SPDX-License-Identifier: Apache-2.0 */

/*
 * The workload's cgroup: every process the agent starts (EXEC's commands and sessions, the template's service)
 * lives in /sys/fs/cgroup/space-work, so that the host can have it frozen before it saves the VM for others to
 * restore (a fork, a checkpoint, a suspend, a base snapshot) and thawed only once the copy that runs has its
 * own clock and RNG seed (ARCHITECTURE.md, "Checkpoint, fork and restore"). A process that was running in the
 * snapshot then cannot run an instruction before the agent has read its INIT: without the freeze, whichever
 * task the vCPU was running at the save goes on first after the restore, and two forks read the same bytes
 * from /dev/urandom and the snapshot's time.
 *
 * cgroup v2's freezer is core since 5.2 (cgroup.freeze, cgroup.events' "frozen"), with no controller to
 * enable: the group holds processes and nothing else. A root user in the guest can move a process out; the
 * promise is for the workload as the agent started it.
 */

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "../../lib/macro.h"
#include "agent.h"

#define CGROUP_ROOT "/sys/fs/cgroup"
#define WORK_CGROUP CGROUP_ROOT "/space-work"

static int procs_fd = -1, freeze_fd = -1, events_fd = -1;
static bool frozen;

void work_setup(const char *dir) {
        char path[PATH_MAX];
        struct statfs sfs;

        if (dir) {
                /* outside a VM (a test): the group it names, made already */
                (void) snprintf(path, sizeof path, "%s/cgroup.procs", dir);
                procs_fd = open(path, O_WRONLY | O_CLOEXEC);
                (void) snprintf(path, sizeof path, "%s/cgroup.freeze", dir);
                freeze_fd = open(path, O_WRONLY | O_CLOEXEC);
                (void) snprintf(path, sizeof path, "%s/cgroup.events", dir);
                events_fd = open(path, O_RDONLY | O_CLOEXEC);
                goto check;
        }
        if (statfs(CGROUP_ROOT, &sfs) < 0 || sfs.f_type != CGROUP2_SUPER_MAGIC) {
                (void) mkdir(CGROUP_ROOT, 0755);
                if (mount("cgroup2", CGROUP_ROOT, "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
                        log_warn("mount cgroup2 on " CGROUP_ROOT ": %m; the workload cannot be frozen for snapshots");
                        return;
                }
        }
        if (mkdir(WORK_CGROUP, 0755) < 0 && errno != EEXIST) {
                log_warn("mkdir " WORK_CGROUP ": %m; the workload cannot be frozen for snapshots");
                return;
        }
        /* Opened once, by root: a child joins before it drops to its user, and nothing here needs a path
         * that the workload could have replaced. */
        procs_fd = open(WORK_CGROUP "/cgroup.procs", O_WRONLY | O_CLOEXEC);
        freeze_fd = open(WORK_CGROUP "/cgroup.freeze", O_WRONLY | O_CLOEXEC);
        events_fd = open(WORK_CGROUP "/cgroup.events", O_RDONLY | O_CLOEXEC);
check:
        if (procs_fd < 0 || freeze_fd < 0 || events_fd < 0) {
                log_warn("open " WORK_CGROUP ": %m; the workload cannot be frozen for snapshots");
                procs_fd = safe_close(procs_fd);
                freeze_fd = safe_close(freeze_fd);
                events_fd = safe_close(events_fd);
        }
}

void work_join(void) {
        /* In the child, between fork and exec: a failure leaves it outside, which only loses the freeze. */
        if (procs_fd >= 0)
                (void) !write(procs_fd, "0", 1);
}

bool work_frozen(void) {
        return frozen;
}

/* 1 when cgroup.events says "frozen 1", 0 when not yet, -errno. */
static int events_frozen(void) {
        char buf[256];
        ssize_t n = pread(events_fd, buf, sizeof buf - 1, 0);

        if (n < 0)
                return -errno;
        buf[n] = 0;
        return strstr(buf, "frozen 1") != NULL;
}

/* The freeze is begun here and seen through by the loop (channel.c): a task of the workload may be waiting on a
 * volume mount that only the loop serves, and it reaches the freezer's stop only once its answer came. */
int work_freeze_begin(void) {
        if (freeze_fd < 0)
                return -EOPNOTSUPP;
        if (pwrite(freeze_fd, "1", 1, 0) != 1)
                return -errno;
        frozen = true;
        return 0;
}

int work_freeze_check(void) {
        return events_fd < 0 ? -EOPNOTSUPP : events_frozen();
}

int work_events_fd(void) {
        return events_fd;
}

void work_thaw(void) {
        if (freeze_fd >= 0 && pwrite(freeze_fd, "0", 1, 0) != 1)
                log_warn("thaw " WORK_CGROUP ": %m");
        frozen = false;
}
