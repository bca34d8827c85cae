/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "core/log.h"
#include "json-util.h"
#include "macro.h"
#include "migstream.h"
#include "string-util.h"
#include "paths.h"
#include "core/util.h"
#include "core/worker.h"
#include "sandbox/sandbox.h"
#include "template/template.h"
#include "channel/channel.h"
#include "core/store.h"

/* Checkpoints, restore and fork (ARCHITECTURE.md, decision 6). A checkpoint stops the sandbox, freezes its disk
 * (disk/disk.c: a qcow2 layer the VM leaves for a new one on top, or a read-only btrfs snapshot), writes memory
 * and device state, and lets it run again: the pause is mostly the state write. Then, the guest running, the state
 * file is split: its RAM to a memory file of its own (<id>.mem), the rest (device state) stays. Restore and fork
 * are creates whose source is the checkpoint instead of the template's base snapshot, and like them map that
 * memory file copy-on-write (ARCHITECTURE.md, decision 4) rather than load every page. */

#define CHECKPOINT_TIMEOUT_MS (600 * 1000)
#define RESTORE_TIMEOUT_MS (120 * 1000)

Checkpoint *checkpoint_free(Checkpoint *c) {
        if (!c)
                return NULL;
        free(c->name);
        free(c->template_name);
        free(c->template_digest);
        strv_free(c->env);
        strv_free(c->egress_profiles);
        strv_free(c->egress_allow);
        strv_free(c->egress_deny);
        strv_free(c->egress_bindings);
        strv_free(c->mounts);
        free(c->disk);
        free(c->state_path);
        free(c->mem_path);
        free(c->host);
        free(c);
        return NULL;
}

void checkpoints_free(Manager *m) {
        while (m->checkpoints) {
                Checkpoint *c = m->checkpoints;
                m->checkpoints = c->next;
                checkpoint_free(c);
        }
}

Checkpoint *checkpoint_find(Manager *m, const char *ref) {
        Checkpoint *found = NULL;
        size_t n = strlen(ref);

        if (n == 0)
                return NULL;
        for (Checkpoint *c = m->checkpoints; c; c = c->next)
                if (streq(c->id, ref) || (c->name && streq(c->name, ref)))
                        return c;
        for (Checkpoint *c = m->checkpoints; c; c = c->next)
                if (strncmp(c->id, ref, n) == 0) {
                        if (found)
                                return NULL; /* ambiguous */
                        found = c;
                }
        return found;
}

static int checkpoint_save(Manager *m, const Checkpoint *c) {
        sqlite3 *db = store_db(m->store);
        sqlite3_stmt *st = NULL;
        char *env_json = strv_to_json_text(c->env);
        _cleanup_free_ char *profiles = strv_to_json_text(c->egress_profiles), *allow = strv_to_json_text(c->egress_allow),
                            *deny = strv_to_json_text(c->egress_deny), *bindings = strv_to_json_text(c->egress_bindings),
                            *mounts = strv_to_json_text(c->mounts);
        int rc;

        if (!env_json || !profiles || !allow || !deny || !bindings || !mounts) {
                free(env_json);
                return -ENOMEM;
        }
        rc = sqlite3_prepare_v2(db,
                                "INSERT OR REPLACE INTO checkpoints (id, name, sandbox_id, template, template_digest,"
                                " vcpu, memory_mib, disk_mib, env, disk, state_path, created_at, pause_usec,"
                                " size_bytes, egress_profiles, egress_allow, egress_deny, mem_path, host, egress_bindings,"
                                " mounts) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                                -1, &st, NULL);
        if (rc == SQLITE_OK) {
                sqlite3_bind_text(st, 1, c->id, -1, SQLITE_STATIC);
                if (c->name)
                        sqlite3_bind_text(st, 2, c->name, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 3, c->sandbox_id, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 4, c->template_name, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 5, c->template_digest, -1, SQLITE_STATIC);
                sqlite3_bind_int(st, 6, (int) c->vcpu);
                sqlite3_bind_int64(st, 7, (sqlite3_int64) c->memory_mib);
                sqlite3_bind_int64(st, 8, (sqlite3_int64) c->disk_mib);
                sqlite3_bind_text(st, 9, env_json, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 10, c->disk, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 11, c->state_path, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 12, c->created_at);
                sqlite3_bind_int64(st, 13, (sqlite3_int64) c->pause_usec);
                sqlite3_bind_int64(st, 14, (sqlite3_int64) c->size_bytes);
                sqlite3_bind_text(st, 15, profiles, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 16, allow, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 17, deny, -1, SQLITE_STATIC);
                if (c->mem_path)
                        sqlite3_bind_text(st, 18, c->mem_path, -1, SQLITE_STATIC);
                if (c->host)
                        sqlite3_bind_text(st, 19, c->host, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 20, bindings, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 21, mounts, -1, SQLITE_STATIC);
                rc = sqlite3_step(st);
        }
        sqlite3_finalize(st);
        free(env_json);
        return rc == SQLITE_DONE ? 0 : -EIO;
}

static int checkpoint_delete_row(Manager *m, const char *id) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(store_db(m->store), "DELETE FROM checkpoints WHERE id = ?", -1, &st, NULL);

        if (rc == SQLITE_OK) {
                sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
                rc = sqlite3_step(st);
        }
        sqlite3_finalize(st);
        return rc == SQLITE_DONE ? 0 : -EIO;
}

static char *col(sqlite3_stmt *st, int i) {
        const unsigned char *t = sqlite3_column_text(st, i);
        return t ? strdup((const char *) t) : NULL;
}

int checkpoints_load(Manager *m) {
        sqlite3 *db = store_db(m->store);
        sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(db,
                                "SELECT id, name, sandbox_id, template, template_digest, vcpu, memory_mib, disk_mib,"
                                " env, disk, state_path, created_at, pause_usec, size_bytes, egress_profiles,"
                                " egress_allow, egress_deny, mem_path, host, egress_bindings, mounts FROM checkpoints"
                                " ORDER BY created_at DESC",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return -EIO;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                const char *id = (const char *) sqlite3_column_text(st, 0);
                const char *sid = (const char *) sqlite3_column_text(st, 2);
                Checkpoint *c;

                if (!id || strlen(id) != CHECKPOINT_ID_LEN || !sid || strlen(sid) != SANDBOX_ID_LEN)
                        continue;
                c = calloc(1, sizeof *c);
                if (!c)
                        break;
                memcpy(c->id, id, sizeof c->id);
                memcpy(c->sandbox_id, sid, sizeof c->sandbox_id);
                c->name = col(st, 1);
                c->template_name = col(st, 3);
                c->template_digest = col(st, 4);
                c->vcpu = (unsigned) sqlite3_column_int(st, 5);
                c->memory_mib = (uint64_t) sqlite3_column_int64(st, 6);
                c->disk_mib = (uint64_t) sqlite3_column_int64(st, 7);
                c->env = strv_from_json_text((const char *) sqlite3_column_text(st, 8));
                c->disk = col(st, 9);
                c->state_path = col(st, 10);
                c->created_at = sqlite3_column_int64(st, 11);
                c->pause_usec = (uint64_t) sqlite3_column_int64(st, 12);
                c->size_bytes = (uint64_t) sqlite3_column_int64(st, 13);
                c->egress_profiles = strv_from_json_text((const char *) sqlite3_column_text(st, 14));
                c->egress_allow = strv_from_json_text((const char *) sqlite3_column_text(st, 15));
                c->egress_deny = strv_from_json_text((const char *) sqlite3_column_text(st, 16));
                c->mem_path = col(st, 17);
                c->host = col(st, 18);
                c->egress_bindings = strv_from_json_text((const char *) sqlite3_column_text(st, 19) ?: "[]");
                c->mounts = strv_from_json_text((const char *) sqlite3_column_text(st, 20) ?: "[]");
                c->ready = true;
                if (!c->template_name || !c->disk || !c->state_path || !c->egress_profiles || !c->egress_allow ||
                    !c->egress_deny || !c->egress_bindings || !c->mounts) {
                        checkpoint_free(c);
                        continue;
                }
                c->next = m->checkpoints;
                m->checkpoints = c;
        }
        sqlite3_finalize(st);

        /* State and memory files of checkpoints a crash interrupted before they were recorded, and the halves of
         * a split it interrupted. */
        {
                _cleanup_free_ char *dir = NULL;
                _cleanup_closedir_ DIR *d = NULL;
                struct dirent *de;

                if (asprintf(&dir, "%s/checkpoints", m->state_dir) >= 0 && (d = opendir(dir)))
                        while ((de = readdir(d))) {
                                _cleanup_free_ char *path = NULL;
                                bool known = false;

                                if (de->d_name[0] == '.' || asprintf(&path, "%s/%s", dir, de->d_name) < 0)
                                        continue;
                                for (Checkpoint *c = m->checkpoints; c && !known; c = c->next)
                                        known = streq(c->state_path, path) || streq_ptr(c->mem_path, path);
                                if (!known)
                                        (void) unlink(path);
                        }
        }
        return 0;
}

/* ---- take a checkpoint ---- */

typedef struct CheckpointJob {
        Manager *manager;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        char checkpoint_id[CHECKPOINT_ID_LEN + 1];
        char op_id[OPERATION_ID_LEN + 1];
        char *run_dir;
        char *data_dir;
        char *state_dir;
        char *state_path;
        char *mem_path;       /* where the RAM goes when the state file is split */
        uint64_t disk_mib;
        uint64_t memory_mib;
        /* a fork waiting for this checkpoint */
        unsigned fork_count;
        char fork_op[OPERATION_ID_LEN + 1];
        char *fork_name;        /* the forks' name prefix, NULL: none (fork_start) */
        bool was_paused;        /* the sandbox stood still already: it stays so after the save */
        bool resynced;          /* the worker had the guest thawed and its clock set right after cont */
        /* results */
        int r;
        Error error;
        char *frozen_layer;
        bool has_mem;         /* the split made mem_path */
        uint64_t pause_usec;
        uint64_t disk_usec;   /* of the pause: stop and the disk's snapshot */
        uint64_t freeze_usec; /* the workload's freeze before the stop (quiesce.c) */
        uint64_t size_bytes;
        OperationProgress progress; /* the operation's, while it runs */
} CheckpointJob;

static void checkpoint_job_free(CheckpointJob *j) {
        pthread_mutex_destroy(&j->progress.lock);
        free(j->run_dir);
        free(j->data_dir);
        free(j->state_dir);
        free(j->state_path);
        free(j->mem_path);
        error_done(&j->error);
        free(j->frozen_layer);
        free(j->fork_name);
        free(j);
}

static void checkpoint_done(Manager *m, void *userdata);
static void fork_create_children(Manager *m, Checkpoint *c, Operation *fork_op, unsigned count, const char *prefix,
                                 char ***ret_ids);

/* The state file's RAM pages to a memory file of their own, and the state file without them (lib/migstream.h):
 * forks and restores then map the memory file copy-on-write, as creates map the base snapshot's, and share its
 * clean pages instead of each loading every page. Runs after cont: the guest does not wait for it. Any failure
 * leaves the whole stream and no memory file, and the checkpoint works as checkpoints did before. */
static int checkpoint_split(CheckpointJob *j) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int in = -1, out = -1, mem = -1;
        uint64_t t0 = now_usec_monotonic();
        MigStreamStats st = {};
        struct statfs sfs;
        const char *what;
        int r;

        if (asprintf(&tmp, "%s.split", j->state_path) < 0)
                return -ENOMEM;
        what = "opening the files";
        in = open(j->state_path, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                goto fail_errno;
        mem = open(j->mem_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (mem < 0)
                goto fail_errno;
        out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (out < 0)
                goto fail_errno;
        what = "sizing the memory file";
        if (ftruncate(mem, (off_t) (j->memory_mib << 20)) < 0)
                goto fail_errno;
        what = "splitting the stream";
        r = migstream_split(in, out, mem, VM_MEM_BACKEND_ID, &st);
        if (r < 0)
                goto fail;
        /* As base.c does for base.mem: on tmpfs, a hole read through a private mapping allocates a page, and on a
         * full one QEMU dies of SIGBUS; elsewhere the holes stay and cost nothing. */
        what = "allocating the memory file";
        if (fstatfs(mem, &sfs) >= 0 && sfs.f_type == TMPFS_MAGIC &&
            fallocate(mem, 0, 0, (off_t) (j->memory_mib << 20)) < 0)
                goto fail_errno;
        /* A fork's checkpoint is gone once its forks exist, and they do not outlive the host: only a checkpoint
         * that stays is worth the wait for the disk (most of a split's time). */
        what = "writing the files";
        if (j->fork_count == 0 && (fsync(mem) < 0 || fsync(out) < 0))
                goto fail_errno;
        /* A crash may leave the rename unwritten while the row names the memory file: the whole stream and
         * the memory file restore the same guest (QEMU loads the pages over the mapping). */
        what = "replacing the state file";
        if (rename(tmp, j->state_path) < 0)
                goto fail_errno;
        log_info("checkpoint %s: RAM split off in %.1f ms: %llu pages to %s (%llu zero), device state %llu KiB",
                 j->checkpoint_id, (double) (now_usec_monotonic() - t0) / 1000.0,
                 (unsigned long long) st.data_pages, j->mem_path, (unsigned long long) st.zero_pages,
                 (unsigned long long) (st.bytes_out >> 10));
        return 0;

fail_errno:
        r = -errno;
fail:
        (void) unlink(tmp);
        (void) unlink(j->mem_path);
        log_warning("checkpoint %s: its RAM stays in the state file, forks load it from there (%s: %s)",
                    j->checkpoint_id, what,
                    r == -EBADMSG ? "a migration stream this daemon does not know" : strerror(-r));
        return r;
}

static uint64_t file_bytes(const char *path, bool allocated) {
        struct stat st;

        if (!path || stat(path, &st) < 0)
                return 0;
        return allocated ? (uint64_t) st.st_blocks * 512 : (uint64_t) st.st_size;
}

typedef struct CheckpointResumed {
        char sandbox_id[SANDBOX_ID_LEN + 1];
} CheckpointResumed;

/* The guest runs again: its clock, and the thaw of its workload with it, come now rather than after the split,
 * which takes a while and which the guest need not wait for. */
static void checkpoint_resumed(Manager *m, void *userdata) {
        CheckpointResumed *c = userdata;
        Sandbox *s = sandbox_find_by_id(m, c->sandbox_id);

        if (s && s->state == SANDBOX_RUNNING)
                sandbox_clock_resync(m, s);
        free(c);
}

static void checkpoint_post_resumed(CheckpointJob *j) {
        CheckpointResumed *c = calloc(1, sizeof *c);

        if (!c)
                return; /* checkpoint_done does it then */
        memcpy(c->sandbox_id, j->sandbox_id, sizeof c->sandbox_id);
        j->resynced = true;
        completion_post_foreign(j->manager, checkpoint_resumed, c);
}

static void *checkpoint_worker(void *userdata) {
        CheckpointJob *j = userdata;
        _cleanup_free_ char *qmp_path = NULL;
        _cleanup_close_ int fd = -1;
        DiskCheckpoint d = {};
        uint64_t t_stop = 0;
        Qmp *q = NULL;
        bool stopped = false;
        int r;

        if (asprintf(&qmp_path, "%s/qmp.sock", j->run_dir) < 0) {
                r = -ENOMEM;
                goto out;
        }
        r = disk_checkpoint_prepare(j->state_dir, j->data_dir, j->disk_mib, &d, &j->error);
        if (r < 0)
                goto out;
        fd = open(j->state_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) {
                r = -errno;
                (void) error_set(&j->error, error_code_from_errno(-errno), "cannot create %s: %m", j->state_path);
                goto out;
        }
        crash_point("checkpoint-prepared");
        r = qmp_open(qmp_path, 5000, &q, &j->error);
        if (r < 0)
                goto out;
        t_stop = now_usec_monotonic();
        /* stop drains and flushes the VM's I/O: the disk is consistent with the memory saved below */
        r = vm_stop(q, 5000, &j->error);
        if (r < 0)
                goto out;
        stopped = true;
        crash_point("checkpoint-stopped");
        r = disk_checkpoint_take(q, j->state_dir, j->data_dir, &d, &j->error);
        if (r < 0)
                goto out;
        j->disk_usec = now_usec_monotonic() - t_stop;
        r = vm_save_state(q, fd, CHECKPOINT_TIMEOUT_MS, operation_progress_save, &j->progress, &j->error);
        crash_point("checkpoint-saved");
out:
        if (stopped) {
                if (!j->was_paused && vm_cont(q, 5000, NULL) >= 0)
                        checkpoint_post_resumed(j);
                j->pause_usec = now_usec_monotonic() - t_stop;
        }
        qmp_close(q);
        if (r >= 0)
                j->has_mem = checkpoint_split(j) >= 0;
        /* Synced after cont: nothing reads the file before this job ends, so the guest need not wait for
         * the disk. A split synced its files itself; a fork's checkpoint is not kept (above). */
        if (r >= 0 && !j->has_mem && j->fork_count == 0 && fsync(fd) < 0) {
                r = -errno;
                (void) error_set(&j->error, error_code_from_errno(-errno), "writing %s: %m", j->state_path);
        }
        if (r >= 0) {
                /* what it takes on disk: the memory file's holes are free */
                j->size_bytes = file_bytes(j->state_path, false) + (j->has_mem ? file_bytes(j->mem_path, true) : 0);
                j->frozen_layer = TAKE_PTR(d.frozen);
        } else {
                (void) unlink(j->state_path);
                if (j->has_mem)
                        (void) unlink(j->mem_path);
                j->has_mem = false;
        }
        disk_checkpoint_done(&d, r >= 0);
        j->r = r;
        completion_post(j->manager, checkpoint_done, j);
        return NULL;
}

static void checkpoint_done(Manager *m, void *userdata) {
        CheckpointJob *j = userdata;
        crash_point("checkpoint-before-done");
        Sandbox *s = sandbox_find_by_id(m, j->sandbox_id);
        Operation *op = operation_find(m, j->op_id);
        Checkpoint *c = NULL;

        if (op)
                op->progress = NULL;
        for (Checkpoint *i = m->checkpoints; i; i = i->next)
                if (streq(i->id, j->checkpoint_id))
                        c = i;
        if (s) {
                s->busy = false;
                /* it stood still for the save, and its workload was frozen: unless done after cont already */
                if (s->state == SANDBOX_RUNNING && !j->resynced)
                        sandbox_clock_resync(m, s);
                /* a failure while it was busy is found again by a new watch's first query-status */
                if (s->state == SANDBOX_RUNNING || s->state == SANDBOX_PAUSED)
                        sandbox_watch_vm(s);
        }
        if (j->r >= 0 && c) {
                c->disk = TAKE_PTR(j->frozen_layer);
                if (j->has_mem)
                        c->mem_path = TAKE_PTR(j->mem_path);
                c->pause_usec = j->pause_usec;
                c->size_bytes = j->size_bytes;
                c->ready = true;
                if (checkpoint_save(m, c) < 0)
                        log_warning("cannot record checkpoint %s", c->id);
                log_info("sandbox %s: checkpoint %s taken, paused %.1f ms (stop and disk %.1f ms; workload frozen "
                         "%.1f ms before), %llu bytes", j->sandbox_id, c->id, (double) c->pause_usec / 1000.0,
                         (double) j->disk_usec / 1000.0, (double) j->freeze_usec / 1000.0,
                         (unsigned long long) c->size_bytes);
        } else if (c) {
                for (Checkpoint **i = &m->checkpoints; *i; i = &(*i)->next)
                        if (*i == c) {
                                *i = c->next;
                                break;
                        }
                checkpoint_free(c);
                c = NULL;
        }
        /* a fork's operation ends when its children are made, not with the checkpoint */
        if (op && j->fork_count == 0)
                operation_finish(op, j->r < 0 ? (j->r == -ENOSPC ? ERROR_NO_SPACE : ERROR_OPERATION_FAILED) : ERROR_NONE,
                                 j->error.message ?: (j->r < 0 ? strerror(-j->r) : NULL));

        if (j->fork_count > 0) {
                Operation *fork_op = operation_find(m, j->fork_op);
                if (!c) {
                        if (fork_op)
                                operation_finish(fork_op, ERROR_FORK_FAILED, j->error.message ?: "the checkpoint failed");
                } else if (fork_op) {
                        /* the children were announced when the fork began: create them now */
                        fork_create_children(m, c, fork_op, j->fork_count, j->fork_name, NULL);
                }
        }
        checkpoint_job_free(j);
}

static int checkpoint_prepare(Manager *m, Sandbox *s, const char *name, Checkpoint **ret_cp, CheckpointJob **ret_job,
                              Error *reterr) {
        _cleanup_free_ char *dir = NULL;
        CheckpointJob *j;
        Checkpoint *c;
        int r;

        if (s->busy)
                return error_set(reterr, ERROR_SANDBOX_BUSY, "sandbox %s is %s; try again when that is done",
                                           s->id, sandbox_state_to_string(s->state)) ?: -EBUSY;
        if (s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED)
                return error_set(reterr, ERROR_INVALID_STATE, "cannot checkpoint sandbox %s: it is %s", s->id,
                                           sandbox_state_to_string(s->state)) ?: -EINVAL;
        if (name && checkpoint_find(m, name) && streq_ptr(checkpoint_find(m, name)->name, name))
                return error_set(reterr, ERROR_NAME_IN_USE, "a checkpoint named '%s' exists already", name) ?: -EEXIST;

        c = calloc(1, sizeof *c);
        j = calloc(1, sizeof *j);
        if (!c || !j) {
                free(c);
                free(j);
                return -ENOMEM;
        }
        pthread_mutex_init(&j->progress.lock, NULL);
        memcpy(c->id, "cp-", 3);
        r = random_hex(c->id + 3, 16);
        memcpy(c->sandbox_id, s->id, sizeof c->sandbox_id);
        c->name = name ? strdup(name) : NULL;
        c->template_name = strdup(s->template_name);
        c->template_digest = s->template_digest ? strdup(s->template_digest) : NULL;
        c->vcpu = s->vcpu;
        c->memory_mib = s->memory_mib;
        c->disk_mib = s->disk_mib;
        c->created_at = now_unix();
        c->host = m->host_fingerprint ? strdup(m->host_fingerprint) : NULL;
        c->env = calloc(1, sizeof(char *));
        for (char **e = s->env; e && *e; e++)
                (void) strv_extend(&c->env, *e);
        /* sandboxes made from it keep its egress (ARCHITECTURE.md, decision 10: fixed for life) */
        c->egress_profiles = sandbox_strv_copy(s->egress_profiles);
        c->egress_allow = sandbox_strv_copy(s->egress_allow);
        c->egress_deny = sandbox_strv_copy(s->egress_deny);
        c->egress_bindings = sandbox_strv_copy(s->egress_bindings);
        c->mounts = sandbox_strv_copy(s->mounts);
        if (!c->egress_profiles || !c->egress_allow || !c->egress_deny || !c->egress_bindings || !c->mounts)
                r = -ENOMEM;
        if (asprintf(&dir, "%s/checkpoints", m->state_dir) < 0 ||
            asprintf(&c->state_path, "%s/%s.state", dir, c->id) < 0 || asprintf(&j->mem_path, "%s/%s.mem", dir, c->id) < 0)
                r = -ENOMEM;
        if (r >= 0)
                r = space_mkdir_p(dir, 0700);
        j->manager = m;
        memcpy(j->sandbox_id, s->id, sizeof j->sandbox_id);
        memcpy(j->checkpoint_id, c->id, sizeof j->checkpoint_id);
        j->run_dir = strdup(s->run_dir);
        j->data_dir = strdup(s->data_dir);
        j->state_dir = strdup(m->state_dir);
        j->state_path = c->state_path ? strdup(c->state_path) : NULL;
        j->disk_mib = s->disk_mib;
        j->memory_mib = s->memory_mib;
        j->was_paused = s->state == SANDBOX_PAUSED;
        if (r < 0 || !c->template_name || !c->env || (name && !c->name) || !j->run_dir || !j->data_dir ||
            !j->state_dir || !j->state_path) {
                checkpoint_free(c);
                checkpoint_job_free(j);
                return r < 0 ? r : -ENOMEM;
        }
        *ret_cp = c;
        *ret_job = j;
        return 0;
}

static void checkpoint_quiesced(Manager *m, void *userdata, uint64_t freeze_usec) {
        CheckpointJob *j = userdata;
        int r;

        j->freeze_usec = freeze_usec;
        r = worker_start(m, checkpoint_worker, j);
        if (r < 0) {
                j->r = r;
                (void) error_set(&j->error, ERROR_INTERNAL, "cannot start a worker thread");
                m->workers_running++;
                checkpoint_done(m, j);
        }
}

static void checkpoint_launch(Manager *m, Sandbox *s, Checkpoint *c, CheckpointJob *j, Operation *op) {
        memcpy(j->op_id, op->id, sizeof j->op_id);
        op->progress = &j->progress;
        c->next = m->checkpoints;
        m->checkpoints = c;
        s->busy = true;
        /* the worker starts once the workload stands still (or could not be frozen); a paused sandbox's
         * was frozen with the pause */
        if (j->was_paused)
                checkpoint_quiesced(m, j, 0);
        else
                sandbox_quiesce(m, s, checkpoint_quiesced, j);
}

int checkpoint_create_start(Manager *m, Sandbox *s, const char *name, Operation **ret_op, Checkpoint **ret_cp,
                            Error *reterr) {
        CheckpointJob *j;
        Checkpoint *c;
        Operation *op;
        int r;

        r = checkpoint_prepare(m, s, name, &c, &j, reterr);
        if (r < 0)
                return r;
        op = operation_new(m, "checkpoint", s->id);
        if (!op) {
                checkpoint_free(c);
                checkpoint_job_free(j);
                return -ENOMEM;
        }
        memcpy(op->checkpoint_id, c->id, sizeof op->checkpoint_id);
        *ret_cp = c;
        *ret_op = op;
        checkpoint_launch(m, s, c, j, op);
        return 0;
}

int checkpoint_remove(Manager *m, Checkpoint *c, Error *reterr) {
        if (!c->ready)
                return error_set(reterr, ERROR_CHECKPOINT_BUSY, "checkpoint %s is still being taken", c->id) ?: -EBUSY;
        (void) checkpoint_delete_row(m, c->id);
        (void) unlink(c->state_path);
        if (c->mem_path)
                (void) unlink(c->mem_path);
        disk_forget(c->disk);
        for (Checkpoint **i = &m->checkpoints; *i; i = &(*i)->next)
                if (*i == c) {
                        *i = c->next;
                        break;
                }
        checkpoint_free(c);
        (void) layers_gc(m);
        return 0;
}

int checkpoint_mem_check(const char *mem_path, uint64_t memory_mib, Error *reterr) {
        struct stat st;

        if (stat(mem_path, &st) < 0) {
                int r = -errno;
                return error_set(reterr, ERROR_IO_ERROR, "its memory file %s: %s", mem_path, strerror(-r)) ?: r;
        }
        if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size != memory_mib << 20)
                return error_set(reterr, ERROR_IO_ERROR, "its memory file %s is damaged: %llu bytes, not the %llu MiB "
                                 "of its RAM", mem_path, (unsigned long long) st.st_size,
                                 (unsigned long long) memory_mib) ?: -EIO;
        return 0;
}

int checkpoint_check_host(Manager *m, const Checkpoint *c, Error *reterr) {
        char why[512];

        /* a checkpoint of an older daemon names no host: taken as this one's, as before fingerprints */
        if (!c->host || !c->host[0] || !vm_fingerprint_explain(c->host, m->host_fingerprint, why, sizeof why))
                return 0;
        return error_set(reterr, ERROR_HOST_MISMATCH,
                         "checkpoint %s was made under another host (%s): its memory cannot be restored here; restore "
                         "or fork it where it was made, or take a new checkpoint here", c->id, why) ?: -EXDEV;
}

int checkpoint_check_files(Manager *m, const Checkpoint *c, Error *reterr) {
        _cleanup_(error_done) Error e = {};
        int r;

        r = checkpoint_check_host(m, c, reterr);
        if (r < 0)
                return r;

        if (access(c->state_path, R_OK) < 0) {
                r = -errno;
                return error_set(reterr, ERROR_IO_ERROR, "checkpoint %s cannot be used: its state file %s: %s", c->id,
                                 c->state_path, strerror(-r)) ?: r;
        }
        if (c->mem_path && (r = checkpoint_mem_check(c->mem_path, c->memory_mib, &e)) < 0)
                return error_set(reterr, ERROR_IO_ERROR, "checkpoint %s cannot be used: %s", c->id,
                                 e.message ?: strerror(-r)) ?: r;
        return 0;
}

/* ---- fork ---- */

void fork_child_done(Manager *m, const char *fork_op_id, bool ok, const char *message) {
        Operation *op = operation_find(m, fork_op_id);

        if (!op || op->pending == 0)
                return;
        op->pending--;
        if (!ok) {
                op->failed++;
                if (!op->error.code)
                        (void) error_set(&op->error, ERROR_FORK_FAILED, "%s", message ?: "a fork failed");
        }
        if (op->pending == 0) {
                Checkpoint *c = op->drop_checkpoint ? checkpoint_find(m, op->checkpoint_id) : NULL;

                /* The children restored from it and hold its disk layers through their backing chains: the
                 * unnamed checkpoint a fork of a running sandbox took is of no more use to anyone. */
                if (c && streq(c->id, op->checkpoint_id)) {
                        Error e = {};
                        if (checkpoint_remove(m, c, &e) < 0)
                                log_warning("fork %s: cannot remove its checkpoint %s: %s", op->id, op->checkpoint_id,
                                            e.message ?: "?");
                        error_done(&e);
                }
                if (op->failed)
                        operation_finish(op, ERROR_FORK_FAILED, op->error.message);
                else
                        operation_finish(op, ERROR_NONE, NULL);
        }
}

/* The name of fork i of count with prefix, into buf; NULL without a prefix. */
static const char *fork_name(const char *prefix, unsigned i, unsigned count, char buf[static SANDBOX_NAME_MAX + 1]) {
        if (!prefix)
                return NULL;
        if (count == 1)
                snprintf(buf, SANDBOX_NAME_MAX + 1, "%s", prefix);
        else
                snprintf(buf, SANDBOX_NAME_MAX + 1, "%s-%u", prefix, i + 1);
        return buf;
}

static void fork_create_children(Manager *m, Checkpoint *c, Operation *fork_op, unsigned count, const char *prefix,
                                 char ***ret_ids) {
        for (unsigned i = 0; i < count; i++) {
                char name[SANDBOX_NAME_MAX + 1];
                Operation *child_op;
                Sandbox *child;
                Error e = {};

                SandboxSpec spec = {
                        .template_ref = c->template_name,
                        .name = fork_name(prefix, i, count, name),
                        .vcpu = c->vcpu,
                        .memory_mib = c->memory_mib,
                        .disk_mib = c->disk_mib,
                        .env = c->env,
                        .source = c,
                        .parent_op = fork_op->id,
                };

                if (sandbox_create(m, &spec, &child_op, &child, &e) < 0) {
                        fork_child_done(m, fork_op->id, false, e.message ?: "create failed");
                        error_done(&e);
                        continue;
                }
                if (ret_ids)
                        (void) strv_extend(ret_ids, child->id);
        }
}

/* Every name the forks will take is free and fits, checked before the fork starts so that it fails whole. */
static int fork_check_names(Manager *m, const char *prefix, unsigned count, Error *reterr) {
        char name[SANDBOX_NAME_MAX + 1];

        if (!prefix)
                return 0;
        if (strlen(prefix) + (count > 1 ? 1 + 2 : 0) > SANDBOX_NAME_MAX)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "name prefix '%.80s' is too long for %u forks: at "
                                 "most %d characters with the '-N' suffix", prefix, count, SANDBOX_NAME_MAX) ?: -EINVAL;
        for (unsigned i = 0; i < count; i++) {
                int r = sandbox_check_name(m, fork_name(prefix, i, count, name), reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

int fork_start(Manager *m, Sandbox *from_sandbox, Checkpoint *from_checkpoint, unsigned count,
               const char *name_prefix, Operation **ret_op, char ***ret_sandbox_ids, Error *reterr) {
        _cleanup_strv_free_ char **ids = NULL;
        Operation *op;
        int r;

        if (count < 1 || count > 64)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "count %u is out of range: 1 to 64", count) ?: -EINVAL;
        r = fork_check_names(m, name_prefix, count, reterr);
        if (r < 0)
                return r;
        if (from_checkpoint && !from_checkpoint->ready)
                return error_set(reterr, ERROR_CHECKPOINT_BUSY, "checkpoint %s is still being taken",
                                           from_checkpoint->id) ?: -EBUSY;
        if (from_checkpoint) {
                r = checkpoint_check_files(m, from_checkpoint, reterr);
                if (r < 0)
                        return r;
        }
        {
                uint64_t need = (uint64_t) count * (from_checkpoint ? from_checkpoint->memory_mib : from_sandbox->memory_mib);
                uint64_t in_use = manager_memory_in_use(m);
                if (in_use + need > m->memory_limit_mib)
                        return error_set(reterr, ERROR_INSUFFICIENT_MEMORY,
                                                   "not enough memory for %u forks: they need %llu MiB, %llu MiB of "
                                                   "the %llu MiB limit are in use",
                                                   count, (unsigned long long) need, (unsigned long long) in_use,
                                                   (unsigned long long) m->memory_limit_mib) ?: -ENOSPC;
        }

        if (from_checkpoint) {
                op = operation_new(m, "fork", from_checkpoint->sandbox_id);
                if (!op)
                        return -ENOMEM;
                op->pending = count;
                fork_create_children(m, from_checkpoint, op, count, name_prefix, &ids);
        } else {
                CheckpointJob *j;
                Checkpoint *c;

                r = checkpoint_prepare(m, from_sandbox, NULL, &c, &j, reterr);
                if (r < 0)
                        return r;
                op = operation_new(m, "fork", from_sandbox->id);
                if (!op) {
                        checkpoint_free(c);
                        checkpoint_job_free(j);
                        return -ENOMEM;
                }
                op->pending = count;
                memcpy(op->checkpoint_id, c->id, sizeof op->checkpoint_id);
                op->drop_checkpoint = true;
                j->fork_count = count;
                memcpy(j->fork_op, op->id, sizeof j->fork_op);
                if (name_prefix && !(j->fork_name = strdup(name_prefix)))
                        log_warning("fork %s: out of memory: the forks go without names", op->id);
                /* the checkpoint's own operation is the fork's */
                checkpoint_launch(m, from_sandbox, c, j, op);
                /* ids are known only once the checkpoint is done; the operation lists them then */
        }
        *ret_op = op;
        *ret_sandbox_ids = TAKE_PTR(ids);
        return 0;
}

/* ---- restore a sandbox to a checkpoint ---- */

typedef struct RestoreJob {
        Manager *manager;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        char op_id[OPERATION_ID_LEN + 1];
        pid_t old_pid;
        char *run_dir;
        char *data_dir;
        char *state_path;
        char *mem_path;       /* the checkpoint's RAM file, or NULL: the RAM is in state_path */
        char *frozen_disk;
        uint64_t disk_mib;
        uint64_t memory_mib;
        BaseRequest base;
        char **init_env;
        char **init_mounts;  /* the checkpoint's volumes, which its guest memory has mounted */
        int r;
        Error error;
        pid_t new_pid;
        char *unconfined;     /* vm_start()'s, why the new QEMU runs unconfined (NULL: it does not) */
        int agent_fd;
} RestoreJob;

static void restore_job_free(RestoreJob *j) {
        free(j->run_dir);
        free(j->data_dir);
        free(j->state_path);
        free(j->mem_path);
        free(j->frozen_disk);
        base_request_done(&j->base);
        strv_free(j->init_env);
        strv_free(j->init_mounts);
        free(j->unconfined);
        error_done(&j->error);
        safe_close(j->agent_fd);
        free(j);
}

static void restore_done(Manager *m, void *userdata) {
        RestoreJob *j = userdata;
        Sandbox *s = sandbox_find_by_id(m, j->sandbox_id);
        Operation *op = operation_find(m, j->op_id);

        if (s) {
                s->busy = false;
                if (j->r >= 0) {
                        s->qemu_pid = j->new_pid;
                        s->state = SANDBOX_RUNNING;
                        sandbox_set_confined(s, TAKE_PTR(j->unconfined));
                        free(s->error);
                        s->error = NULL;
                        if (agent_attach(s, TAKE_FD(j->agent_fd)) < 0)
                                log_warning("sandbox %s: cannot watch the agent after restore", s->id);
                        sandbox_watch_vm(s);
                } else {
                        s->qemu_pid = 0;
                        s->state = SANDBOX_STOPPED;
                        free(s->error);
                        s->error = strdup(j->error.message ?: "restore failed");
                }
                (void) sandbox_save(s);
        }
        (void) layers_gc(m);
        if (op)
                operation_finish(op, j->r < 0 ? ERROR_OPERATION_FAILED : ERROR_NONE, j->error.message ?: (j->r < 0 ? strerror(-j->r) : NULL));
        restore_job_free(j);
}

static void *restore_worker(void *userdata) {
        RestoreJob *j = userdata;
        _cleanup_free_ char *layer = NULL, *old_disk = NULL, *qemu_disk = NULL, *qemu_dir = NULL, *agent_path = NULL,
                            *hostname = NULL;
        _cleanup_close_ int fd = -1;
        BaseSnapshot b = {};
        Qmp *q = NULL;
        int r;

        if (j->old_pid > 0)
                (void) vm_kill(j->old_pid, j->run_dir, 10000);
        (void) rm_rf(j->run_dir);
        if (asprintf(&agent_path, "%s/agent.sock", j->run_dir) < 0 || asprintf(&hostname, "sb-%.12s", j->sandbox_id) < 0) {
                r = -ENOMEM;
                goto out;
        }
        r = base_snapshot_ensure(j->manager, &j->base, &b, &j->error);
        if (r < 0)
                goto out;
        r = space_mkdir_p(j->run_dir, 0700);
        if (r < 0)
                goto out;
        (void) sandbox_disk_get(j->data_dir, &old_disk);
        r = disk_clone(j->base.state_dir, j->frozen_disk, j->disk_mib, &layer, &j->error);
        if (r < 0)
                goto out;
        r = sandbox_disk_set(j->data_dir, layer);
        if (r < 0) {
                disk_forget(layer);
                goto out;
        }
        /* the old QEMU is gone: nothing writes the disk the sandbox had */
        if (old_disk && !streq(old_disk, layer))
                disk_forget(old_disk);
        fd = open(j->state_path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                (void) error_set(&j->error, error_code_from_errno(-errno), "cannot open %s: %m", j->state_path);
                goto out;
        }
        r = disk_qemu_path(j->data_dir, layer, &qemu_disk, &qemu_dir);
        if (r < 0) {
                (void) error_set(&j->error, error_code_from_errno(r), "cannot hand the disk to QEMU: %s", strerror(-r));
                goto out;
        }
        if (j->mem_path) {
                r = checkpoint_mem_check(j->mem_path, j->memory_mib, &j->error);
                if (r < 0)
                        goto out;
        }
        VmConfig c = base_restore_config(&b, &j->base, j->run_dir, qemu_disk, qemu_dir);
        if (j->mem_path)
                c.mem_path = j->mem_path;
        r = vm_start(&c, 10000, &j->new_pid, &q, &j->unconfined, &j->error);
        if (r >= 0)
                r = vm_restore_state(q, fd, RESTORE_TIMEOUT_MS, &j->error);
        /* the identity waits in the channel before the guest runs: its clock and seed come first */
        if (r >= 0)
                r = agent_handshake_send(agent_path, j->sandbox_id, hostname, j->init_env, j->init_mounts, 0, true,
                                         RESTORE_TIMEOUT_MS, &j->agent_fd, &j->error);
        if (r >= 0)
                r = vm_cont(q, 10000, &j->error);
        if (r >= 0)
                r = agent_handshake_finish(j->agent_fd, strv_length(j->init_mounts), RESTORE_TIMEOUT_MS, &j->error);
        if (r < 0 && j->new_pid > 0) {
                (void) vm_kill(j->new_pid, j->run_dir, 5000);
                j->new_pid = 0;
        }
out:
        qmp_close(q);
        base_snapshot_done(&b);
        j->r = r;
        completion_post(j->manager, restore_done, j);
        return NULL;
}

int sandbox_restore_start(Manager *m, Sandbox *s, Checkpoint *c, Operation **ret_op, Error *reterr) {
        Template *t;
        RestoreJob *j;
        Operation *op;
        int r;

        if (s->busy)
                return error_set(reterr, ERROR_SANDBOX_BUSY, "sandbox %s is %s; try again when that is done",
                                           s->id, sandbox_state_to_string(s->state)) ?: -EBUSY;
        if (!c->ready)
                return error_set(reterr, ERROR_CHECKPOINT_BUSY, "checkpoint %s is still being taken", c->id) ?: -EBUSY;
        if (s->state == SANDBOX_SUSPENDED || s->state == SANDBOX_CREATING || s->state == SANDBOX_DELETING)
                return error_set(reterr, ERROR_INVALID_STATE, "cannot restore sandbox %s: it is %s", s->id,
                                           sandbox_state_to_string(s->state)) ?: -EINVAL;
        t = template_find_digest(m, c->template_digest);
        if (!t)
                return error_set(reterr, ERROR_TEMPLATE_NOT_FOUND,
                                           "checkpoint %s was taken from template %s, which is no longer installed",
                                           c->id, c->template_name) ?: -ENOENT;
        /* before the sandbox's VM is stopped for it */
        r = checkpoint_check_files(m, c, reterr);
        if (r < 0)
                return r;
        j = calloc(1, sizeof *j);
        if (!j)
                return -ENOMEM;
        j->agent_fd = -1;
        j->manager = m;
        memcpy(j->sandbox_id, s->id, sizeof j->sandbox_id);
        j->old_pid = s->qemu_pid;
        j->run_dir = strdup(s->run_dir);
        j->data_dir = strdup(s->data_dir);
        j->state_path = strdup(c->state_path);
        j->frozen_disk = strdup(c->disk);
        j->mem_path = c->mem_path ? strdup(c->mem_path) : NULL;
        j->disk_mib = c->disk_mib;
        j->memory_mib = c->memory_mib;
        j->init_env = calloc(1, sizeof(char *));
        for (char **e = t->env; e && *e; e++)
                (void) strv_extend(&j->init_env, *e);
        for (char **e = c->env; e && *e; e++)
                (void) strv_extend(&j->init_env, *e);
        j->init_mounts = sandbox_strv_copy(c->mounts);
        r = base_request_init(m, t, c->vcpu, c->memory_mib, &j->base);
        if (r < 0 || !j->run_dir || !j->data_dir || !j->state_path || !j->frozen_disk || !j->init_env ||
            !j->init_mounts ||
            (c->mem_path && !j->mem_path)) {
                restore_job_free(j);
                return -ENOMEM;
        }
        op = operation_new(m, "restore", s->id);
        if (!op) {
                restore_job_free(j);
                return -ENOMEM;
        }
        memcpy(j->op_id, op->id, sizeof j->op_id);
        s->busy = true;
        s->channel.agent = agent_free(s->channel.agent);
        sandbox_unwatch_vm(s);   /* its QEMU is replaced: the new one is watched at the end */
        /* journaled as stopped: a daemon that dies mid-restore leaves a sandbox to restore again or remove */
        s->state = SANDBOX_STOPPED;
        free(s->error);
        s->error = strdup("interrupted while being restored from a checkpoint; restore it again or remove it");
        (void) sandbox_save(s);
        s->vcpu = c->vcpu;
        s->memory_mib = c->memory_mib;
        s->disk_mib = c->disk_mib;
        /* the guest memory it gets back has the checkpoint's volumes mounted */
        strv_free(s->mounts);
        s->mounts = sandbox_strv_copy(c->mounts);
        (void) sandbox_save(s);
        r = worker_start(m, restore_worker, j);
        if (r < 0) {
                s->busy = false;
                operation_finish(op, ERROR_INTERNAL, "cannot start a worker thread");
                restore_job_free(j);
                return error_set(reterr, ERROR_INTERNAL, "cannot start a worker thread") ?: r;
        }
        *ret_op = op;
        return 0;
}
