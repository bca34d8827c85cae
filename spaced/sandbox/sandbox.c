/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "macro.h"
#include "string-util.h"
#include "paths.h"
#include "core/util.h"
#include "core/worker.h"
#include "sandbox/forward.h"
#include "sandbox/sandbox.h"
#include "template/template.h"
#include "channel/channel.h"
#include "core/store.h"
#include "egress/egress.h"
#include "secret/secret.h"

#define RESTORE_TIMEOUT_MS (60 * 1000)

static const char *const sandbox_states[_SANDBOX_STATE_MAX] = {
        [SANDBOX_CREATING] = "creating",
        [SANDBOX_RUNNING] = "running",
        [SANDBOX_DELETING] = "deleting",
        [SANDBOX_STOPPED] = "stopped",
        [SANDBOX_ERROR] = "error",
        [SANDBOX_PAUSED] = "paused",
        [SANDBOX_SUSPENDING] = "suspending",
        [SANDBOX_SUSPENDED] = "suspended",
        [SANDBOX_WAKING] = "waking",
        [SANDBOX_POOLED] = "pooled",
        [SANDBOX_STOPPING] = "stopping",
        [SANDBOX_STARTING] = "starting",
};

bool sandbox_state_holds_memory(SandboxState s) {
        return s == SANDBOX_CREATING || s == SANDBOX_RUNNING || s == SANDBOX_DELETING || s == SANDBOX_PAUSED ||
               s == SANDBOX_SUSPENDING || s == SANDBOX_WAKING || s == SANDBOX_POOLED || s == SANDBOX_STOPPING ||
               s == SANDBOX_STARTING;
}

const char *sandbox_state_to_string(SandboxState s) {
        return s < _SANDBOX_STATE_MAX ? sandbox_states[s] : "unknown";
}

int sandbox_state_from_string(const char *s, SandboxState *ret) {
        for (int i = 0; i < _SANDBOX_STATE_MAX; i++)
                if (streq(s, sandbox_states[i])) {
                        *ret = (SandboxState) i;
                        return 0;
                }
        return -EINVAL;
}

Sandbox *sandbox_free(Sandbox *s) {
        if (!s)
                return NULL;
        forwards_free(s);   /* before the channel: their tunnels end on it */
        agent_free(s->channel.agent);
        vm_events_free(s->vm_events);
        agent_health_free(s->channel.agent_health);
        if (s->has_pool_fd)
                safe_close(s->pool_fd);
        free(s->name);
        free(s->template_name);
        free(s->template_digest);
        strv_free(s->env);
        free(s->run_dir);
        free(s->data_dir);
        free(s->error);
        free(s->metadata);
        free(s->access_token);
        free(s->traffic_token);
        egress_gateway_forget(s->id);
        strv_free(s->egress_profiles);
        strv_free(s->egress_allow);
        strv_free(s->egress_deny);
        strv_free(s->egress_bindings);
        strv_free(s->mounts);
        free(s->unconfined_reason);
        free(s->host);
        free(s);
        return NULL;
}

void sandbox_mark_failed(Sandbox *s, const char *reason) {
        log_error("sandbox %s: marked failed: %s", s->id, reason);
        /* Nothing may run for a failed sandbox (as reconcile has it at start): its guest stops using the CPU
         * now. SIGKILL and no wait, this is the event loop; QEMU is not our child (vm_spawn forks twice). The
         * disk stays until rm. */
        if (s->qemu_pid > 0 && vm_pid_alive(s->qemu_pid, s->run_dir) && kill(s->qemu_pid, SIGKILL) < 0 &&
            errno != ESRCH)
                log_warning_errno(-errno, "sandbox %s: cannot stop QEMU (pid %d)", s->id, (int) s->qemu_pid);
        s->state = SANDBOX_ERROR;
        free(s->error);
        s->error = strdup(reason);
        (void) sandbox_save(s);
}

void sandbox_set_timeout(Sandbox *s, int64_t ttl) {
        s->expires_at = now_unix() + ttl;
        s->ttl = ttl;
        (void) sandbox_save(s);
}

int sandbox_check_bindings(Manager *m, char *const *bindings, Error *reterr) {
        size_t n = 0;
        int r;

        for (char *const *l = bindings; l && *l; l++, n++) {
                _cleanup_(egress_binding_done) EgressBinding b = {};

                if (n >= EGRESS_OWN_BINDINGS_MAX)
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "more than %u secret bindings (request "
                                         "transforms) for one sandbox", EGRESS_OWN_BINDINGS_MAX) ?: -E2BIG;
                r = egress_binding_parse_own(*l, &b, reterr);
                if (r < 0)
                        return r;
                /* as for a profile's binding: it may still be removed later, and then goes out without it */
                for (char **name = b.secrets; name && *name; name++)
                        if (!secret_find(m, *name))
                                return error_set(reterr, ERROR_SECRET_NOT_FOUND, "the secret '%s' does not exist: a "
                                                 "header for %s names it; create it first (E2B's Secret.create, "
                                                 "'spacectl secret set %s')", *name, b.dests.rules[0].host, *name)
                                               ?: -ENOENT;
        }
        return 0;
}

int sandbox_set_egress_lists(Sandbox *s, char *const *allow, char *const *deny, char *const *bindings,
                             Error *reterr) {
        _cleanup_strv_free_ char **a = NULL, **d = NULL, **b = NULL;
        int r;

        r = egress_list_check(allow, EGRESS_ALLOW, "egress_allow", reterr);
        if (r >= 0)
                r = egress_list_check(deny, EGRESS_DENY, "egress_deny", reterr);
        if (r >= 0)
                r = sandbox_check_bindings(s->manager, bindings, reterr);
        if (r < 0)
                return r;
        a = sandbox_strv_copy(allow);
        d = sandbox_strv_copy(deny);
        b = sandbox_strv_copy(bindings);
        if (!a || !d || !b)
                return -ENOMEM;
        strv_free(s->egress_allow);
        strv_free(s->egress_deny);
        strv_free(s->egress_bindings);
        s->egress_allow = TAKE_PTR(a);
        s->egress_deny = TAKE_PTR(d);
        s->egress_bindings = TAKE_PTR(b);
        /* the gateway builds its policy again at the sandbox's next question; what is open keeps its own */
        egress_gateway_policy_changed(s->id);
        r = sandbox_save(s);
        if (r < 0)
                log_warning("sandbox %s: cannot record its new egress lists: %s", s->id, strerror(-r));
        return 0;
}

void sandbox_stop_timeout(Sandbox *s) {
        s->expires_at = 0;
        (void) sandbox_save(s);
}

void sandbox_restart_timeout(Sandbox *s) {
        if (s->expires_at != 0 || s->ttl <= 0)
                return;
        s->expires_at = now_unix() + s->ttl;
        (void) sandbox_save(s);
}

void sandbox_touch(Sandbox *s) {
        s->last_active = now_unix();
}

static int token_new(char **ret) {
        char *t = malloc(SANDBOX_TOKEN_LEN + 1);
        int r;

        if (!t)
                return -ENOMEM;
        r = random_hex(t, SANDBOX_TOKEN_LEN);
        if (r < 0) {
                free(t);
                return r;
        }
        *ret = t;
        return 0;
}

int sandbox_ensure_tokens(Sandbox *s) {
        int r = 0;

        if (s->access_token && s->traffic_token)
                return 0;
        if (!s->access_token)
                r = token_new(&s->access_token);
        if (r >= 0 && !s->traffic_token)
                r = token_new(&s->traffic_token);
        if (r >= 0)
                r = sandbox_save(s);
        return r;
}

void sandbox_unlink(Manager *m, Sandbox *s) {
        for (Sandbox **i = &m->sandboxes; *i; i = &(*i)->next)
                if (*i == s) {
                        *i = s->next;
                        return;
                }
}

Sandbox *sandbox_find_by_id(Manager *m, const char *id) {
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (streq(s->id, id))
                        return s;
        return NULL;
}

int sandbox_resolve(Manager *m, const char *ref, Sandbox **ret) {
        Sandbox *found = NULL;
        size_t n = strlen(ref);

        if (n == 0)
                return -ENOENT;
        /* pool members are not the user's until handed out */
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (!s->pooled && (streq(s->id, ref) || (s->name && streq(s->name, ref)))) {
                        *ret = s;
                        return 0;
                }
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (!s->pooled && strncmp(s->id, ref, n) == 0) {
                        if (found)
                                return -ENOTUNIQ;
                        found = s;
                }
        if (!found)
                return -ENOENT;
        *ret = found;
        return 0;
}

int sandbox_save(Sandbox *s) {
        int r = store_put_sandbox(s->manager->store, s);
        if (r < 0)
                log_warning_errno(r, "Failed to save sandbox %s", s->id);
        return r;
}

void sandbox_set_confined(Sandbox *s, char *unconfined) {
        Manager *m = s->manager;

        free(s->unconfined_reason);
        s->unconfined_reason = unconfined;
        s->confined = unconfined ? SANDBOX_CONFINED_NO : SANDBOX_CONFINED_YES;
        if (!unconfined) {
                if (!m->confined)
                        log_info("sandbox %s: QEMU runs in its own namespaces again", s->id);
                m->confined = true;
                free(m->unconfined_reason);
                m->unconfined_reason = NULL;
                return;
        }
        /* The warning at start said it for every QEMU after it; this is the host changing since. */
        if (m->confined)
                log_warning("sandbox %s: QEMU runs unconfined: %s", s->id, unconfined);
        m->confined = false;
        if (!streq_ptr(unconfined, m->unconfined_reason)) {
                char *copy = strdup(unconfined);
                if (copy) {
                        free(m->unconfined_reason);
                        m->unconfined_reason = copy;
                }
        }
}

uint64_t manager_memory_in_use(Manager *m) {
        uint64_t sum = 0;
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (sandbox_state_holds_memory(s->state))
                        sum += s->memory_mib;
        return sum;
}

/* ---- create ---- */

typedef struct CreateJob {
        Manager *manager;
        char id[SANDBOX_ID_LEN + 1];
        char op_id[OPERATION_ID_LEN + 1];
        BaseRequest base;
        char *run_dir;
        char *data_dir;
        uint64_t disk_mib;
        uint64_t grow_bytes;  /* from the base: the size the guest's disk and filesystem grow to, or 0 */
        char **init_env;
        char **init_mounts;  /* the sandbox's volumes (sandbox/mounts.c) */
        char *source_state;   /* restore from a checkpoint instead of the base snapshot */
        char *source_mem;     /* its RAM file, mapped instead of the base's; NULL: the RAM is in source_state */
        char *source_disk;
        uint64_t memory_mib;
        char parent_op[OPERATION_ID_LEN + 1];  /* the fork this create is part of */
        bool pooled;          /* for a warm pool: leave it paused after the handshake */
        char *warm_cwd;       /* pooled: the template's workdir and user, for the warm-up command */
        char *warm_user;
        /* results */
        int r;
        Error error;
        pid_t pid;
        char *unconfined;     /* vm_start()'s: why its QEMU runs unconfined, NULL when it does not */
        int agent_fd;
        /* where the time went, for the log: the disk, QEMU to its QMP, the restore, the agent's handshake */
        uint64_t t_start, t_disk, t_spawn, t_restore, t_agent;
} CreateJob;

static void create_job_free(CreateJob *j) {
        base_request_done(&j->base);
        free(j->run_dir);
        free(j->data_dir);
        strv_free(j->init_env);
        strv_free(j->init_mounts);
        free(j->source_state);
        free(j->source_mem);
        free(j->source_disk);
        free(j->warm_cwd);
        free(j->warm_user);
        free(j->unconfined);
        error_done(&j->error);
        safe_close(j->agent_fd);
        free(j);
}

static void create_done(Manager *m, void *userdata);

/* One try at the create, from b; *ret_restore_failed says whether it was the restore of b itself that failed
 * (QEMU's start, the state's load, cont or the agent's answer), which a base from another host makes happen. */
static int create_attempt(CreateJob *j, const BaseSnapshot *b, bool *ret_restore_failed) {
        _cleanup_free_ char *disk = NULL, *qemu_disk = NULL, *qemu_dir = NULL, *agent_path = NULL, *hostname = NULL;
        Qmp *q = NULL;
        int r;

        *ret_restore_failed = false;
        j->t_start = now_usec_monotonic();
        if (asprintf(&agent_path, "%s/agent.sock", j->run_dir) < 0 || asprintf(&hostname, "sb-%.12s", j->id) < 0) {
                r = -ENOMEM;
                goto finish;
        }
        r = space_mkdir_p(j->run_dir, 0700);
        if (r >= 0)
                r = space_mkdir_p(j->data_dir, 0700);
        if (r < 0) {
                (void) error_set(&j->error, error_code_from_errno(r), "cannot create the sandbox's directories: %s", strerror(-r));
                goto finish;
        }
        /* The writable disk: a copy-on-write clone of the disk the restored memory was saved with (the base
         * snapshot's, or a checkpoint's), so disk and memory match exactly (ARCHITECTURE.md, decision 5). */
        r = disk_clone(j->base.state_dir, j->source_disk ?: b->disk_path, j->disk_mib, &disk, &j->error);
        if (r < 0)
                goto finish;
        r = sandbox_disk_set(j->data_dir, disk);
        if (r < 0) {
                (void) error_set(&j->error, error_code_from_errno(r), "cannot link the sandbox's disk: %s", strerror(-r));
                disk_forget(disk);
                goto finish;
        }
        crash_point("create-layer");
        j->t_disk = now_usec_monotonic();
        r = disk_qemu_path(j->data_dir, disk, &qemu_disk, &qemu_dir);
        if (r < 0) {
                (void) error_set(&j->error, error_code_from_errno(r), "cannot hand the disk to QEMU: %s", strerror(-r));
                goto finish;
        }
        if (j->source_mem) {
                r = checkpoint_mem_check(j->source_mem, j->memory_mib, &j->error);
                if (r < 0)
                        goto finish;
        }
        VmConfig c = base_restore_config(b, &j->base, j->run_dir, qemu_disk, qemu_dir);
        /* the checkpoint's RAM, mapped privately as the base's is; the state file then holds only devices */
        if (j->source_mem)
                c.mem_path = j->source_mem;
        *ret_restore_failed = true;
        r = vm_start(&c, 10000, &j->pid, &q, &j->unconfined, &j->error);
        if (r < 0)
                goto finish;
        crash_point("create-spawned");
        j->t_spawn = now_usec_monotonic();
        {
                const char *state = j->source_state ?: b->state_path;
                _cleanup_close_ int fd = open(state, O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        r = -errno;
                        (void) error_set(&j->error, error_code_from_errno(-errno), "cannot open %s: %m", state);
                        goto finish;
                }
                r = vm_restore_state(q, fd, RESTORE_TIMEOUT_MS, &j->error);
                if (r < 0)
                        goto finish;
        }
        if (j->grow_bytes > 0) {
                /* The restored kernel knows the base image's size: a resize (to the size the disk has) raises
                 * virtio-blk's config-change interrupt, which it sees as soon as it runs; INIT's disk_bytes
                 * then has the agent grow the filesystem. */
                r = vm_disk_resize(q, j->grow_bytes, 10000, &j->error);
                if (r < 0)
                        goto finish;
        }
        /* the identity waits in the channel before the guest runs: its clock and seed come first. A base is
         * named by the CA its guest trusts already; a checkpoint's guest may have been saved with another. */
        r = agent_handshake_send(agent_path, j->id, hostname, j->init_env, j->init_mounts, j->grow_bytes,
                                 j->source_state != NULL, RESTORE_TIMEOUT_MS, &j->agent_fd, &j->error);
        if (r >= 0)
                r = vm_cont(q, 10000, &j->error);
        if (r < 0)
                goto finish;
        crash_point("create-restored");
        j->t_restore = now_usec_monotonic();
        r = agent_handshake_finish(j->agent_fd, strv_length(j->init_mounts), RESTORE_TIMEOUT_MS, &j->error);
        j->t_agent = now_usec_monotonic();
        if (r >= 0)
                *ret_restore_failed = false;
        if (r >= 0 && j->pooled) {
                /* Under TCG a VM's first fork and exec pay for translating that code (its QEMU's translation
                 * cache starts empty at the restore); a warm sandbox pays here, in the pool, instead of in
                 * the user's first command. So the warm-up is run as one: searched in PATH, with the
                 * template's env, workdir and user (first exec after a handout: 61-68 ms with "/bin/sh" as
                 * root, 29-44 with "sh -c true" like this, 15-18 with a direct exec after it, as the ones
                 * after: 13-18). */
                base_warm_up(j->agent_fd, j->init_env, j->warm_cwd, j->warm_user);
                /* the handout's INIT, sent before its cont, thaws it */
                base_freeze(&j->base, j->agent_fd);
                r = vm_stop(q, 10000, &j->error);
        }
finish:
        qmp_close(q);
        return r;
}

static void *create_worker(void *userdata) {
        CreateJob *j = userdata;
        BaseSnapshot b = {};
        bool restore_failed = false;
        int r;

        r = base_snapshot_ensure(j->manager, &j->base, &b, &j->error);
        if (r >= 0)
                r = create_attempt(j, &b, &restore_failed);
        /* A base that does not restore is set aside and built again, once (ARCHITECTURE.md, "Snapshots and
         * their host"): what it was made under changed in a way its fingerprint does not show. A checkpoint's
         * restore is not retried: it is the user's, and the error says what failed. */
        if (r < 0 && restore_failed && !j->source_state && r != -ECANCELED) {
                log_warning("sandbox %s: the base snapshot %s did not restore (%s): setting it aside and building it "
                            "again", j->id, b.dir, j->error.message ?: strerror(-r));
                sandbox_cleanup_vm_files(j->pid, j->run_dir, j->data_dir);
                j->pid = 0;
                free(j->unconfined);
                j->unconfined = NULL;
                j->agent_fd = safe_close(j->agent_fd);
                error_done(&j->error);
                base_snapshot_discard(j->manager, &b);
                base_snapshot_done(&b);
                r = base_snapshot_ensure(j->manager, &j->base, &b, &j->error);
                if (r >= 0)
                        r = create_attempt(j, &b, &restore_failed);
        }
        base_snapshot_done(&b);
        j->r = r;
        completion_post(j->manager, create_done, j);
        return NULL;
}

void sandbox_cleanup_vm_files(pid_t pid, const char *run_dir, const char *data_dir) {
        if (pid > 0)
                (void) vm_kill(pid, run_dir, 5000);
        if (run_dir)
                (void) rm_rf(run_dir);
        if (data_dir) {
                _cleanup_free_ char *disk = NULL;
                if (sandbox_disk_get(data_dir, &disk) >= 0)
                        disk_forget(disk);
                (void) rm_rf(data_dir);
        }
}

static void create_done(Manager *m, void *userdata) {
        CreateJob *j = userdata;
        crash_point("create-before-done");
        Sandbox *s = sandbox_find_by_id(m, j->id);
        Operation *op = operation_find(m, j->op_id);

        if (j->r >= 0 && s && s->state == SANDBOX_CREATING && j->pooled) {
                s->qemu_pid = j->pid;
                s->state = SANDBOX_POOLED;
                s->pool_fd = TAKE_FD(j->agent_fd);
                s->has_pool_fd = true;
        } else if (j->r >= 0 && s && s->state == SANDBOX_CREATING) {
                s->qemu_pid = j->pid;
                s->state = SANDBOX_RUNNING;
                if (agent_attach(s, TAKE_FD(j->agent_fd)) < 0) {
                        j->r = -EIO;
                        (void) error_set(&j->error, ERROR_INTERNAL, "cannot watch the agent channel");
                } else {
                        sandbox_watch_vm(s);
                        if (j->base.accel == VM_ACCEL_TCG)
                                /* The first command in a new QEMU pays for translating the fork and exec paths
                                 * (~100 ms here, raw QEMU too): one runs now, while the user's is still on its
                                 * way. The agent reads its channel in order and the translation is shared, so a
                                 * command that comes meanwhile only waits for what is left of it. */
                                (void) agent_warm_up_send(s->channel.agent, j->init_env, j->base.warm_cwd,
                                                          j->base.warm_user);
                }
        }
        if (j->r < 0 || !s || (s->state != SANDBOX_RUNNING && s->state != SANDBOX_POOLED)) {
                const char *msg = j->error.message ? j->error.message : strerror(-j->r);

                if (j->r < 0)
                        log_error("sandbox %s: create failed: %s", j->id, msg);
                /* Nothing of a failed create remains: no QEMU, no files, no row. */
                sandbox_cleanup_vm_files(j->pid, j->run_dir, j->data_dir);
                if (s) {
                        (void) store_delete_sandbox(m->store, s->id);
                        sandbox_unlink(m, s);
                        sandbox_free(s);
                }
                if (op)
                        operation_finish(op, ERROR_CREATE_FAILED, msg);
                if (j->parent_op[0])
                        fork_child_done(m, j->parent_op, false, msg);
        } else {
                sandbox_set_confined(s, TAKE_PTR(j->unconfined));
                (void) sandbox_save(s);
                log_info("sandbox %s running (pid %d) in %.1f ms: disk %.1f, QEMU up %.1f, restore %.1f, agent %.1f",
                         s->id, (int) s->qemu_pid, (double) (now_usec_monotonic() - j->t_start) / 1000.0,
                         (double) (j->t_disk - j->t_start) / 1000.0, (double) (j->t_spawn - j->t_disk) / 1000.0,
                         (double) (j->t_restore - j->t_spawn) / 1000.0, (double) (j->t_agent - j->t_restore) / 1000.0);
                if (op)
                        operation_finish(op, ERROR_NONE, NULL);
                if (j->parent_op[0])
                        fork_child_done(m, j->parent_op, true, NULL);
        }
        create_job_free(j);
        pool_refill_later(m);
}

static bool name_valid(const char *n) {
        size_t len = strlen(n);

        if (len == 0 || len > SANDBOX_NAME_MAX)
                return false;
        for (const char *c = n; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      *c == '-' || *c == '_' || *c == '.'))
                        return false;
        return true;
}

int sandbox_check_name(Manager *m, const char *name, Error *reterr) {
        Sandbox *other;

        if (!name_valid(name))
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                 "name '%s' is not valid: use 1 to %d letters, digits, '-', '_' or '.'", name,
                                 SANDBOX_NAME_MAX) ?: -EINVAL;
        if (sandbox_resolve(m, name, &other) >= 0 && other->name && streq(other->name, name))
                return error_set(reterr, ERROR_NAME_IN_USE, "a sandbox named '%s' exists already (%s)", name,
                                 other->id) ?: -EEXIST;
        return 0;
}

static char **env_merge(char **base, char **extra);

void sandbox_clock_resync(Manager *m, Sandbox *s) {
        _cleanup_strv_free_ char **env = NULL;
        Template *t = template_find_digest(m, s->template_digest);
        char hostname[16];
        int r;

        if (!s->channel.agent)
                return;
        if (!t) {
                log_warning("sandbox %s: its template is gone, so its clock is not set after it stood still", s->id);
                return;
        }
        /* the INIT replaces the guest's default env: the same one it was made with */
        env = env_merge(t->env, s->env);
        (void) snprintf(hostname, sizeof hostname, "sb-%.12s", s->id);
        r = env ? agent_reidentify(s->channel.agent, s->id, hostname, env, s->mounts) : -ENOMEM;
        if (r < 0)
                log_warning_errno(r, "sandbox %s: cannot send the guest the time after it stood still", s->id);
}

static char **env_merge(char **base, char **extra) {
        size_t n = 0, k = 0;
        char **out;

        for (char **e = base; e && *e; e++)
                n++;
        for (char **e = extra; e && *e; e++)
                n++;
        out = calloc(n + 1, sizeof(char *));
        if (!out)
                return NULL;
        for (char **e = base; e && *e; e++)
                if (!(out[k++] = strdup(*e)))
                        goto fail;
        for (char **e = extra; e && *e; e++)
                if (!(out[k++] = strdup(*e)))
                        goto fail;
        return out;
fail:
        strv_free(out);
        return NULL;
}

/* A spec with its template found and its defaults filled in. */
typedef struct CreatePlan {
        Template *template;
        unsigned vcpu;
        uint64_t memory_mib;
        uint64_t disk_mib;
        uint64_t default_disk_mib;
        uint64_t image_bytes;
} CreatePlan;

static int create_plan(Manager *m, const SandboxSpec *spec, CreatePlan *ret, Error *reterr) {
        const Checkpoint *source = spec->source;
        Template *t;
        struct stat image;
        uint64_t min_disk;
        int r;

        if (source) {
                r = checkpoint_check_host(m, source, reterr);
                if (r < 0)
                        return r;
                /* a fork or restore continues the image the checkpoint was taken from, whatever tags say now */
                t = template_find_digest(m, source->template_digest);
                if (!t)
                        return error_set(reterr, ERROR_TEMPLATE_NOT_FOUND,
                                                   "checkpoint %s was taken from template %s (%s), which is no "
                                                   "longer in the store",
                                                   source->id, source->template_name,
                                                   source->template_digest ?: "?") ?: -ENOENT;
        } else {
                r = template_resolve(m, spec->template_ref, &t, reterr);
                if (r < 0)
                        return r;
        }
        if (spec->name) {
                r = sandbox_check_name(m, spec->name, reterr);
                if (r < 0)
                        return r;
        }
        /* Template images are small (their content and some slack); a sandbox's disk grows from that to
         * disk_mib at create, and may not be smaller than the image. */
        if (stat(t->rootfs, &image) < 0) {
                r = -errno;
                return error_set(reterr, ERROR_TEMPLATE_NOT_FOUND, "template '%s': cannot read its image %s: %s",
                                           t->name, t->rootfs, strerror(-r)) ?: r;
        }
        min_disk = ((uint64_t) image.st_size + (1 << 20) - 1) >> 20;
        *ret = (CreatePlan) {
                .template = t,
                .vcpu = spec->vcpu ?: t->vcpu,
                .memory_mib = spec->memory_mib ?: t->memory_mib,
                .default_disk_mib = t->disk_mib > min_disk ? t->disk_mib : min_disk,
                .image_bytes = (uint64_t) image.st_size,
        };
        ret->disk_mib = spec->disk_mib ?: ret->default_disk_mib;
        if (ret->vcpu > m->host_cpus)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "vcpu %u is out of range: 1 to %u (host cores)",
                                           ret->vcpu, m->host_cpus) ?: -EINVAL;
        /* A checkpoint's disk is as large as its sandbox's was, whatever its template's image is now. */
        if (!source && ret->disk_mib < min_disk)
                return error_set(reterr, ERROR_DISK_TOO_SMALL,
                                           "a disk of %llu MiB is too small for template '%s', whose image is %llu "
                                           "MiB: ask for at least %llu MiB (--disk, disk_mib)",
                                           (unsigned long long) ret->disk_mib, t->name, (unsigned long long) min_disk,
                                           (unsigned long long) min_disk) ?: -EINVAL;
        return 0;
}

/* Only the template's default shape is what its warm pool holds. */
static bool create_poolable(const SandboxSpec *spec, const CreatePlan *p) {
        return !spec->source && !spec->pooled && strv_isempty(spec->volume_mounts) && p->vcpu == p->template->vcpu &&
               p->memory_mib == p->template->memory_mib && p->disk_mib == p->default_disk_mib;
}

static int create_reserve_memory(Manager *m, const SandboxSpec *spec, uint64_t memory_mib, Error *reterr) {
        uint64_t in_use = manager_memory_in_use(m);
        int r = 0;

        /* warm pool members give way to a user's create, never to another member */
        if (!spec->pooled)
                r = pool_evict_for(m, memory_mib, &in_use);
        else if (in_use + memory_mib > m->memory_limit_mib)
                r = -ENOSPC;
        if (r < 0)
                return error_set(reterr, ERROR_INSUFFICIENT_MEMORY,
                                           "not enough memory for another sandbox: it needs %llu MiB, %llu MiB of "
                                           "the %llu MiB limit are in use; remove a sandbox or raise "
                                           "memory_limit_mib in spaced.conf",
                                           (unsigned long long) memory_mib, (unsigned long long) in_use,
                                           (unsigned long long) m->memory_limit_mib) ?: r;
        return 0;
}

static int create_sandbox_new(Manager *m, const SandboxSpec *spec, const CreatePlan *p, Sandbox **ret) {
        Sandbox *s;
        int r;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->manager = m;
        r = random_hex(s->id, SANDBOX_ID_LEN);
        if (r < 0) {
                sandbox_free(s);
                return r;
        }
        s->state = SANDBOX_CREATING;
        s->pooled = spec->pooled;
        s->vcpu = p->vcpu;
        s->memory_mib = p->memory_mib;
        s->disk_mib = p->disk_mib;
        s->created_at = now_unix();
        s->last_active = s->created_at;
        s->idle_timeout = m->config.idle_timeout;
        s->env = env_merge(NULL, spec->env);
        s->mounts = calloc(1, sizeof(char *));
        /* the name the user asked for (or the checkpoint's), not the digest it resolved to */
        s->template_name = strdup(spec->source ? spec->source->template_name : spec->template_ref);
        s->template_digest = strdup(p->template->digest);
        if (spec->name)
                s->name = strdup(spec->name);
        if (asprintf(&s->run_dir, "%s/sandboxes/%s", m->runtime_dir, s->id) < 0 ||
            asprintf(&s->data_dir, "%s/sandboxes/%s", m->state_dir, s->id) < 0 || !s->env || !s->mounts ||
            !s->template_name ||
            !s->template_digest || (spec->name && !s->name)) {
                sandbox_free(s);
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}

static int create_job_new(Manager *m, const SandboxSpec *spec, const CreatePlan *p, const Sandbox *s,
                          CreateJob **ret) {
        CreateJob *j;
        int r;

        j = calloc(1, sizeof *j);
        if (!j)
                return -ENOMEM;
        j->agent_fd = -1;
        j->pooled = spec->pooled;
        j->manager = m;
        memcpy(j->id, s->id, sizeof j->id);
        j->disk_mib = p->disk_mib;
        /* Only a create from the base grows: a checkpoint's guest already knows its disk's size. */
        if (!spec->source && (p->disk_mib << 20) > p->image_bytes)
                j->grow_bytes = p->disk_mib << 20;
        j->run_dir = strdup(s->run_dir);
        j->data_dir = strdup(s->data_dir);
        j->init_env = env_merge(p->template->env, spec->env);
        j->init_mounts = sandbox_strv_copy(s->mounts);
        if (spec->pooled) {
                const char *cwd = template_workdir(m, s), *user = template_default_user(m, s);
                if ((cwd && !(j->warm_cwd = strdup(cwd))) || (user && !(j->warm_user = strdup(user))))
                        goto oom;
        }
        if (spec->source) {
                j->source_state = strdup(spec->source->state_path);
                j->source_disk = strdup(spec->source->disk);
                j->source_mem = spec->source->mem_path ? strdup(spec->source->mem_path) : NULL;
                j->memory_mib = spec->source->memory_mib;
                if (!j->source_state || !j->source_disk || (spec->source->mem_path && !j->source_mem))
                        goto oom;
        }
        if (spec->parent_op)
                snprintf(j->parent_op, sizeof j->parent_op, "%s", spec->parent_op);
        r = base_request_init(m, p->template, p->vcpu, p->memory_mib, &j->base);
        if (r < 0 || !j->run_dir || !j->data_dir || !j->init_env || !j->init_mounts)
                goto oom;
        *ret = j;
        return 0;
oom:
        create_job_free(j);
        return -ENOMEM;
}

/* Journals sandbox and operation, so that a daemon that dies from here on finds and rolls back the create,
 * then hands the job to a worker. Takes s and j, also on failure. */
static int create_journal_and_start(Manager *m, const SandboxSpec *spec, Sandbox *s, CreateJob *j,
                                    Operation **ret_op, Error *reterr) {
        Operation *op;
        int r;

        r = store_put_sandbox(m->store, s);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INTERNAL, "cannot record the sandbox: %s", strerror(-r));
                goto fail;
        }
        op = operation_new(m, "create", s->id);
        if (!op) {
                (void) store_delete_sandbox(m->store, s->id);
                r = -ENOMEM;
                goto fail;
        }
        op->from_pool = FROM_POOL_NO;
        crash_point("create-journaled");
        memcpy(j->op_id, op->id, sizeof j->op_id);
        if (spec->parent_op) {
                Operation *parent = operation_find(m, spec->parent_op);
                if (parent)
                        (void) strv_extend(&parent->children, s->id);
        }
        s->next = NULL;
        Sandbox **tail = &m->sandboxes;
        while (*tail)
                tail = &(*tail)->next;
        *tail = s;

        r = worker_start(m, create_worker, j);
        if (r < 0) {
                operation_finish(op, ERROR_INTERNAL, "cannot start a worker thread");
                (void) store_delete_sandbox(m->store, s->id);
                sandbox_unlink(m, s);
                sandbox_free(s);
                create_job_free(j);
                return error_set(reterr, ERROR_INTERNAL, "cannot start a worker thread: %s", strerror(-r)) ?: r;
        }
        *ret_op = op;
        return 0;
fail:
        sandbox_free(s);
        create_job_free(j);
        return r;
}

char **sandbox_strv_copy(char *const *l) {
        char **c = calloc(1, sizeof(char *));

        for (; c && l && *l; l++)
                if (strv_extend(&c, *l) < 0) {
                        strv_free(c);
                        return NULL;
                }
        return c;
}

/* The egress a create gives: a fork's or restore's is its checkpoint's; else the profiles asked for (each
 * must exist) or the default ones, and the sandbox's own lists, checked. */
typedef struct EgressChoice {
        char **profiles, **allow, **deny, **bindings;
} EgressChoice;

static void egress_choice_done(EgressChoice *c) {
        strv_free(c->profiles);
        strv_free(c->allow);
        strv_free(c->deny);
        strv_free(c->bindings);
        *c = (EgressChoice) {};
}

static int egress_choice(Manager *m, const SandboxSpec *spec, EgressChoice *ret, Error *reterr) {
        int r;

        *ret = (EgressChoice) {};
        if (spec->source) {
                ret->profiles = sandbox_strv_copy(spec->source->egress_profiles);
                ret->allow = sandbox_strv_copy(spec->source->egress_allow);
                ret->deny = sandbox_strv_copy(spec->source->egress_deny);
                ret->bindings = sandbox_strv_copy(spec->source->egress_bindings);
        } else {
                r = egress_list_check(spec->egress_allow, EGRESS_ALLOW, "egress_allow", reterr);
                if (r >= 0)
                        r = egress_list_check(spec->egress_deny, EGRESS_DENY, "egress_deny", reterr);
                if (r >= 0)
                        r = sandbox_check_bindings(m, spec->egress_bindings, reterr);
                if (r >= 0)
                        r = egress_profiles_select(&m->egress->policy, spec->egress_profiles, &ret->profiles, reterr);
                if (r < 0)
                        return r;
                ret->allow = sandbox_strv_copy(spec->egress_allow);
                ret->deny = sandbox_strv_copy(spec->egress_deny);
                ret->bindings = sandbox_strv_copy(spec->egress_bindings);
        }
        if (!ret->profiles || !ret->allow || !ret->deny || !ret->bindings) {
                egress_choice_done(ret);
                return -ENOMEM;
        }
        return 0;
}

/* The placeholders of the secrets its profiles bind (space-egress(5), "Secrets"): SPACE_SECRET_NAME=space-secret-
 * NAME-<16 hex>, random for each sandbox, in its environment; the gateway puts the value in their place on the
 * way to the destinations a binding names. Each secret must exist now (it may still be removed later: then
 * the placeholder goes out as it is). A placeholder the caller gave in that shape is kept; forks and restores
 * keep their source's. *ret: spec's env with them, NULL when none are needed. */
static int secret_env(Manager *m, const SandboxSpec *spec, char *const *profiles, char ***ret, Error *reterr) {
        _cleanup_strv_free_ char **names = NULL, **env = NULL;
        int r;

        *ret = NULL;
        if (spec->source)
                return 0;
        r = egress_profiles_secrets(&m->egress->policy, profiles, &names);
        if (r < 0 || !names)
                return r;
        env = sandbox_strv_copy(spec->env);
        if (!env)
                return -ENOMEM;
        for (char **n = names; *n; n++) {
                _cleanup_free_ char *var = NULL, *kv = NULL;
                char hex[17];
                const char *have = NULL;
                size_t vl;

                if (!secret_find(m, *n))
                        return error_set(reterr, ERROR_SECRET_NOT_FOUND,
                                         "an egress profile of this sandbox binds the secret '%s', which does not "
                                         "exist: set it first with 'spacectl secret set %s'", *n, *n) ?: -ENOENT;
                if (egress_placeholder_variable(*n, &var) < 0)
                        return -ENOMEM;
                vl = strlen(var);
                for (char **e = env; *e && !have; e++)
                        if (strncmp(*e, var, vl) == 0 && (*e)[vl] == '=')
                                have = *e + vl + 1;
                if (have && egress_placeholder_valid(*n, have))
                        continue;
                r = random_hex(hex, 16);
                if (r < 0)
                        return r;
                if (asprintf(&kv, "%s=space-secret-%s-%s", var, *n, hex) < 0 || strv_set_kv(&env, kv) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(env);
        return 0;
}

/* What every new sandbox gets whichever way it was made (a create, or a pool handout whose member nobody has
 * seen): the user's labels, its time to live and idle policy, a fresh envd access token and traffic token,
 * and its egress. Takes egress's lists. */
static int create_identity(Sandbox *s, const SandboxSpec *spec, EgressChoice *egress) {
        char *metadata = NULL, *token = malloc(SANDBOX_TOKEN_LEN + 1), *traffic = malloc(SANDBOX_TOKEN_LEN + 1);
        int r;

        strv_free(s->egress_profiles);
        strv_free(s->egress_allow);
        strv_free(s->egress_deny);
        strv_free(s->egress_bindings);
        s->egress_profiles = TAKE_PTR(egress->profiles);
        s->egress_allow = TAKE_PTR(egress->allow);
        s->egress_deny = TAKE_PTR(egress->deny);
        s->egress_bindings = TAKE_PTR(egress->bindings);
        /* a pool member's policy was its pool's until now */
        egress_gateway_policy_changed(s->id);

        if (!token || !traffic || (spec->metadata && !(metadata = strdup(spec->metadata)))) {
                free(token);
                free(traffic);
                return -ENOMEM;
        }
        r = random_hex(token, SANDBOX_TOKEN_LEN);
        if (r >= 0)
                r = random_hex(traffic, SANDBOX_TOKEN_LEN);
        if (r < 0) {
                free(token);
                free(traffic);
                free(metadata);
                return r;
        }
        free(s->metadata);
        s->metadata = metadata;
        free(s->access_token);
        s->access_token = token;
        free(s->traffic_token);
        s->traffic_token = traffic;
        s->ttl = spec->ttl;
        s->expires_at = spec->ttl > 0 || spec->ttl_grace > 0 ? now_unix() + spec->ttl + spec->ttl_grace : 0;
        s->on_expiry = spec->on_expiry;
        s->auto_resume = spec->auto_resume;
        if (spec->idle_timeout_set)
                s->idle_timeout = spec->idle_timeout;
        return 0;
}

int sandbox_create(Manager *m, const SandboxSpec *spec_in, Operation **ret_op, Sandbox **ret_sandbox,
                   Error *reterr) {
        _cleanup_(egress_choice_done) EgressChoice egress = {};
        _cleanup_strv_free_ char **env = NULL;
        SandboxSpec spec_env = *spec_in;
        const SandboxSpec *spec = &spec_env;
        _cleanup_strv_free_ char **mounts = NULL;
        CreatePlan p = {};
        Sandbox *s;
        CreateJob *j;
        int r;

        r = sandbox_mounts_choose(m, spec, &mounts, reterr);
        if (r < 0)
                return r;
        r = create_plan(m, spec, &p, reterr);
        if (r < 0)
                return r;
        r = egress_choice(m, spec, &egress, reterr);
        if (r < 0)
                return r;
        r = secret_env(m, spec, egress.profiles, &env, reterr);
        if (r < 0)
                return r;
        if (env)
                spec_env.env = env;
        if (create_poolable(spec, &p)) {
                r = pool_take(m, p.template, spec->name, spec->env, ret_op, ret_sandbox, reterr);
                if (r < 0)
                        return r;
                if (r > 0) {
                        r = create_identity(*ret_sandbox, spec, &egress);
                        if (r >= 0)
                                r = sandbox_save(*ret_sandbox);
                        if (r < 0)
                                log_warning_errno(r, "sandbox %s: cannot record its metadata and token",
                                                  (*ret_sandbox)->id);
                        return 0;
                }
        }
        r = create_reserve_memory(m, spec, p.memory_mib, reterr);
        if (r < 0)
                return r;
        r = create_sandbox_new(m, spec, &p, &s);
        if (r < 0)
                return r;
        r = create_identity(s, spec, &egress);
        if (r < 0) {
                sandbox_free(s);
                return r;
        }
        strv_free(s->mounts);
        s->mounts = TAKE_PTR(mounts);
        r = create_job_new(m, spec, &p, s, &j);
        if (r < 0) {
                sandbox_free(s);
                return r;
        }
        r = create_journal_and_start(m, spec, s, j, ret_op, reterr);
        if (r < 0)
                return r;
        *ret_sandbox = s;
        return 0;
}

/* ---- delete ---- */

typedef struct DeleteJob {
        Manager *manager;
        char id[SANDBOX_ID_LEN + 1];
        char op_id[OPERATION_ID_LEN + 1];
        pid_t pid;
        char *run_dir;
        char *data_dir;
} DeleteJob;

static void delete_done(Manager *m, void *userdata) {
        DeleteJob *j = userdata;
        Sandbox *s = sandbox_find_by_id(m, j->id);
        Operation *op = operation_find(m, j->op_id);

        if (s) {
                (void) store_delete_sandbox(m->store, s->id);
                sandbox_unlink(m, s);
                sandbox_free(s);
                log_info("sandbox %s removed", j->id);
        }
        (void) layers_gc(m);
        if (op)
                operation_finish(op, ERROR_NONE, NULL);
        free(j->run_dir);
        free(j->data_dir);
        free(j);
}

static void *delete_worker(void *userdata) {
        DeleteJob *j = userdata;
        crash_point("delete-journaled");
        sandbox_cleanup_vm_files(j->pid, j->run_dir, j->data_dir);
        completion_post(j->manager, delete_done, j);
        return NULL;
}

int sandbox_delete_start(Manager *m, Sandbox *s, bool force, Operation **ret_op, Error *reterr) {
        DeleteJob *j;
        Operation *op;
        int r;

        if (s->state == SANDBOX_CREATING)
                return error_set(reterr, ERROR_SANDBOX_BUSY,
                                           "sandbox %s is still being created; wait for it, then remove it", s->id) ?: -EBUSY;
        if (s->state == SANDBOX_DELETING)
                return error_set(reterr, ERROR_SANDBOX_BUSY, "sandbox %s is being removed already", s->id) ?: -EBUSY;
        if (s->busy)
                return error_set(reterr, ERROR_SANDBOX_BUSY,
                                           "sandbox %s is %s; wait for that to finish, then remove it", s->id,
                                           sandbox_state_to_string(s->state)) ?: -EBUSY;
        if (!force && s->channel.agent && agent_process_count(s->channel.agent) > 0)
                return error_set(reterr, ERROR_SANDBOX_BUSY,
                                           "sandbox %s has %u running process(es); use 'spacectl rm -f' to remove "
                                           "it anyway", s->id, agent_process_count(s->channel.agent)) ?: -EBUSY;

        j = calloc(1, sizeof *j);
        if (!j)
                return -ENOMEM;
        j->manager = m;
        memcpy(j->id, s->id, sizeof j->id);
        j->pid = s->qemu_pid;
        j->run_dir = s->run_dir ? strdup(s->run_dir) : NULL;
        j->data_dir = s->data_dir ? strdup(s->data_dir) : NULL;
        op = operation_new(m, "delete", s->id);
        if (!op) {
                free(j->run_dir);
                free(j->data_dir);
                free(j);
                return -ENOMEM;
        }
        memcpy(j->op_id, op->id, sizeof j->op_id);
        s->state = SANDBOX_DELETING;
        s->channel.agent = agent_free(s->channel.agent);
        /* the gateway's buffered audit lines go out now, not into a directory the worker is removing */
        egress_gateway_forget(s->id);
        (void) sandbox_save(s);
        r = worker_start(m, delete_worker, j);
        if (r < 0) {
                /* do it inline then: removal must not depend on threads */
                sandbox_cleanup_vm_files(j->pid, j->run_dir, j->data_dir);
                m->workers_running++;
                delete_done(m, j);
        }
        *ret_op = op;
        return 0;
}
