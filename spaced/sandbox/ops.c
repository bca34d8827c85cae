/* SPDX-License-Identifier: Apache-2.0 */
/* What the subsystems below sandbox/ ask of the sandboxes, checkpoints and pools, which they cannot include:
 * the disks, templates and volumes in use. sandbox_register_ops() hands them these at start. */

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/tls.h"
#include "core/util.h"
#include "disk/disk.h"
#include "egress/egress.h"
#include "macro.h"
#include "sandbox/sandbox.h"
#include "string-util.h"
#include "template/template.h"
#include "volume/volume.h"

static void disks_in_use(Manager *m, DiskUsedFn fn, void *userdata) {
        for (Sandbox *s = m->sandboxes; s; s = s->next) {
                _cleanup_free_ char *top = NULL;
                if (s->data_dir && sandbox_disk_get(s->data_dir, &top) >= 0)
                        fn(top, userdata);
        }
        for (Checkpoint *c = m->checkpoints; c; c = c->next)
                fn(c->disk, userdata);
}

static char *template_user_of(Manager *m, const Template *t) {
        char *s = NULL;

        for (PoolConfig *p = m->pools; p; p = p->next)
                if (p->size > 0 && template_find(m, p->template_name) == t)
                        return asprintf(&s, "pool %s", p->template_name) < 0 ? NULL : s;
        for (Sandbox *sb = m->sandboxes; sb; sb = sb->next)
                if (streq_ptr(sb->template_digest, t->digest)) {
                        if (sb->pooled)
                                return asprintf(&s, "a warm pool sandbox (%s)", sb->id) < 0 ? NULL : s;
                        return asprintf(&s, "sandbox %s%s%s%s", sb->id, sb->name ? " (" : "", sb->name ?: "",
                                        sb->name ? ")" : "") < 0 ? NULL : s;
                }
        for (Checkpoint *c = m->checkpoints; c; c = c->next)
                if (streq_ptr(c->template_digest, t->digest))
                        return asprintf(&s, "checkpoint %s%s%s%s", c->id, c->name ? " (" : "", c->name ?: "",
                                        c->name ? ")" : "") < 0 ? NULL : s;
        return NULL;
}

static const char *pool_naming(Manager *m, const char *tag) {
        for (PoolConfig *p = m->pools; p; p = p->next) {
                _cleanup_free_ char *ptag = NULL, *prefix = NULL;
                if (p->size > 0 && template_ref_parse(p->template_name, &ptag, &prefix, NULL) >= 0 && ptag &&
                    streq(ptag, tag))
                        return p->template_name;
        }
        return NULL;
}

static bool base_in_use(Manager *m, const char *shortd) {
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (s->template_digest && strncmp(s->template_digest + 7, shortd, 12) == 0)
                        return true;
        for (Checkpoint *c = m->checkpoints; c; c = c->next)
                if (c->template_digest && strncmp(c->template_digest + 7, shortd, 12) == 0)
                        return true;
        return false;
}

/* Base snapshot directories are named by what they were made from (base_name_parse()). */
static uint64_t bases_remove(Manager *m, const char *only, unsigned *ret_count) {
        _cleanup_free_ char *dir = NULL, *kernel = NULL, *initrd = NULL, *kd = NULL, *id = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        uint64_t freed = 0;
        unsigned count = 0;

        if (asprintf(&dir, "%s/base", m->state_dir) < 0)
                return 0;
        if (pthread_mutex_trylock(&m->base_lock) != 0) {
                log_info("a base snapshot is being built: base snapshots are left for the next gc");
                return 0;
        }
        if (guest_kernel_path(m->lib_dir, &kernel, &initrd) >= 0) {
                (void) file_digest(kernel, &kd);
                (void) file_digest(initrd, &id);
        }
        d = opendir(dir);
        while (d && (de = readdir(d))) {
                const char *shortd;
                BaseName bn;
                bool stale;

                if (de->d_name[0] == '.' || base_name_parse(de->d_name, &bn) < 0)
                        continue;
                shortd = bn.template_digest;
                if (only) {
                        if (!streq(shortd, only))
                                continue;
                } else {
                        bool known = false;
                        for (Template *t = m->templates; t && !known; t = t->next)
                                known = strncmp(t->digest + 7, shortd, 12) == 0;
                        stale = !known || !bn.devices_current || (kd && strncmp(bn.kernel_digest, kd + 7, 12) != 0) ||
                                (id && strncmp(bn.initramfs_digest, id + 7, 12) != 0) ||
                                (m->tls_ca && !streq(bn.ca_fingerprint, tls_ca_fingerprint(m->tls_ca)));
                        if (!stale)
                                continue;
                }
                if (base_in_use(m, shortd))
                        continue;
                {
                        _cleanup_free_ char *p = NULL;
                        if (asprintf(&p, "%s/%s", dir, de->d_name) < 0)
                                break;
                        freed += disk_usage(p);
                        log_info("removing base snapshot %s", p);
                        (void) rm_rf(p);
                        count++;
                }
        }
        pthread_mutex_unlock(&m->base_lock);
        if (ret_count)
                *ret_count = count;
        return freed;
}

static const char *sandbox_digest(const Sandbox *s) {
        return s->template_digest;
}

static const TemplateUsersOps template_users = {
        .user = template_user_of,
        .pool_naming = pool_naming,
        .bases_remove = bases_remove,
        .sandbox_digest = sandbox_digest,
        .imported = pool_refill,
};

static Manager *sandbox_manager(Sandbox *s) {
        return s->manager;
}

static const char *sandbox_id(Sandbox *s) {
        return s->id;
}

static const char *sandbox_data_dir(Sandbox *s) {
        return s->data_dir;
}

static AgentConn *sandbox_agent(Sandbox *s) {
        return s->channel.agent;
}

static void sandbox_egress(Sandbox *s, char ***ret_profiles, char ***ret_allow, char ***ret_deny) {
        *ret_profiles = s->egress_profiles;
        *ret_allow = s->egress_allow;
        *ret_deny = s->egress_deny;
}

static char **sandbox_env(Sandbox *s) {
        return s->env;
}

static char **sandbox_bindings(Sandbox *s) {
        return s->egress_bindings;
}

static const EgressSandboxOps egress_sandbox = {
        .find = sandbox_find_by_id,
        .manager = sandbox_manager,
        .id = sandbox_id,
        .data_dir = sandbox_data_dir,
        .agent = sandbox_agent,
        .egress = sandbox_egress,
        .bindings = sandbox_bindings,
        .env = sandbox_env,
};

static const char *sandbox_run_dir(Sandbox *s) {
        return s->run_dir;
}

static const char *sandbox_state_name(Sandbox *s) {
        return sandbox_state_to_string(s->state);
}

static const char *sandbox_template_name(Sandbox *s) {
        return s->template_name;
}

static ChannelSandboxPhase sandbox_phase(Sandbox *s) {
        return s->state == SANDBOX_DELETING ? CHANNEL_SANDBOX_DELETING
             : s->state == SANDBOX_STOPPED || s->state == SANDBOX_ERROR ? CHANNEL_SANDBOX_DOWN
             : CHANNEL_SANDBOX_UP;
}

static ChannelSandbox *sandbox_channel(Sandbox *s) {
        return &s->channel;
}

static bool sandbox_busy(Sandbox *s) {
        return s->busy;
}

static bool sandbox_qemu_alive(Sandbox *s) {
        return s->qemu_pid > 0 && vm_pid_alive(s->qemu_pid, s->run_dir);
}

/* Its channel was lost and its QEMU is gone, with no lifecycle operation that meant it to go. */
static void sandbox_qemu_exited(Sandbox *s) {
        if (s->state != SANDBOX_RUNNING)
                return;
        s->state = SANDBOX_STOPPED;
        free(s->error);
        s->error = strdup("QEMU exited; its disk is kept: 'spacectl start' boots it again, 'spacectl rm' "
                                  "removes it");
        (void) sandbox_save(s);
}

/* Its channel came back while QEMU ran on, after a freeze whose thaw (an INIT answered) it did not see: the
 * workload may still be frozen, and the INIT of a clock resync thaws it (and costs a running guest nothing). A
 * lifecycle operation in flight sends its own when it is done. */
static void sandbox_reconnected(Sandbox *s) {
        if (s->state == SANDBOX_RUNNING && !s->busy)
                sandbox_clock_resync(s->manager, s);
}

static const ChannelSandboxOps channel_sandbox_ops = {
        .find = sandbox_find_by_id,
        .manager = sandbox_manager,
        .id = sandbox_id,
        .run_dir = sandbox_run_dir,
        .data_dir = sandbox_data_dir,
        .state_name = sandbox_state_name,
        .template_name = sandbox_template_name,
        .phase = sandbox_phase,
        .channel = sandbox_channel,
        .busy = sandbox_busy,
        .qemu_alive = sandbox_qemu_alive,
        .mark_failed = sandbox_mark_failed,
        .qemu_exited = sandbox_qemu_exited,
        .touch = sandbox_touch,
        .reconnected = sandbox_reconnected,
};

void sandbox_register_ops(void) {
        channel_set_sandbox_ops(&channel_sandbox_ops);
        egress_set_sandbox_ops(&egress_sandbox);
        disk_set_users(disks_in_use);
        template_set_users_ops(&template_users);
        volume_set_users(sandbox_volume_users);
        channel_set_volume_handler(sandbox_volume_request);
}
