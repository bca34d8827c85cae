/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "macro.h"
#include "string-util.h"
#include "core/util.h"
#include "core/worker.h"
#include "sandbox/sandbox.h"
#include "template/template.h"
#include "channel/channel.h"
#include "core/store.h"

/* Warm pools (ARCHITECTURE.md, decision 4): N sandboxes per template, restored, handshaken and paused, so a create of the
 * template's default shape is a QMP cont away, with an INIT for the new identity sent ahead of it (its answer is
 * not waited for: the guest takes it before any command that comes after). Pool members are ordinary
 * sandboxes that users cannot see until handed out; the pool refills in the background and never takes
 * memory a user's create needs (it only fills up to the memory limit, and members are not persisted: a
 * restarted daemon removes them and makes new ones). */

static PoolConfig *pool_config_find(Manager *m, const char *template_name) {
        for (PoolConfig *p = m->pools; p; p = p->next)
                if (streq(p->template_name, template_name))
                        return p;
        return NULL;
}

int pools_load(Manager *m) {
        sqlite3 *db = store_db(m->store);
        sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(db, "SELECT template, size FROM pools", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return -EIO;
        while (sqlite3_step(st) == SQLITE_ROW) {
                const char *name = (const char *) sqlite3_column_text(st, 0);
                PoolConfig *p;

                if (!name)
                        continue;
                p = calloc(1, sizeof *p);
                if (!p || !(p->template_name = strdup(name))) {
                        free(p);
                        break;
                }
                p->size = (unsigned) sqlite3_column_int(st, 1);
                p->next = m->pools;
                m->pools = p;
        }
        sqlite3_finalize(st);
        return 0;
}

unsigned pool_count(Manager *m, const char *template_name, bool ready_only) {
        unsigned n = 0;

        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (s->pooled && streq(s->template_name, template_name) &&
                    (s->state == SANDBOX_POOLED || (!ready_only && s->state == SANDBOX_CREATING)))
                        n++;
        return n;
}

int pool_set(Manager *m, const char *template_name, unsigned size, Error *reterr) {
        PoolConfig *p = pool_config_find(m, template_name);
        sqlite3_stmt *st = NULL;
        int rc;

        if (!template_find(m, template_name)) {
                (void) error_set(reterr, ERROR_TEMPLATE_NOT_FOUND, "template '%s' does not exist", template_name);
                return -ENOENT;
        }
        rc = sqlite3_prepare_v2(store_db(m->store),
                                size ? "INSERT OR REPLACE INTO pools (template, size) VALUES (?, ?)"
                                     : "DELETE FROM pools WHERE template = ?",
                                -1, &st, NULL);
        if (rc == SQLITE_OK) {
                sqlite3_bind_text(st, 1, template_name, -1, SQLITE_STATIC);
                if (size)
                        sqlite3_bind_int(st, 2, (int) size);
                rc = sqlite3_step(st);
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE)
                return -EIO;
        if (!p) {
                p = calloc(1, sizeof *p);
                if (!p || !(p->template_name = strdup(template_name))) {
                        free(p);
                        return -ENOMEM;
                }
                p->next = m->pools;
                m->pools = p;
        }
        p->size = size;

        /* Shrinking: ready members beyond the new size go away now. */
        for (Sandbox *s = m->sandboxes, *next; s; s = next) {
                Error e = {};
                Operation *op;

                next = s->next;
                if (pool_count(m, template_name, false) <= size)
                        break;
                if (s->pooled && s->state == SANDBOX_POOLED && streq(s->template_name, template_name))
                        (void) sandbox_delete_start(m, s, true, &op, &e);
                error_done(&e);
        }
        pool_refill(m);
        return 0;
}

void pool_refill(Manager *m) {
        /* Members that were still being made when their pool went or shrank: not wanted any more. */
        for (Sandbox *s = m->sandboxes, *next; s; s = next) {
                PoolConfig *p;

                next = s->next;
                if (!s->pooled || s->state != SANDBOX_POOLED)
                        continue;
                p = pool_config_find(m, s->template_name);
                if (!p || pool_count(m, s->template_name, false) > p->size) {
                        Error e = {};
                        Operation *op;

                        (void) sandbox_delete_start(m, s, true, &op, &e);
                        error_done(&e);
                }
        }
        for (PoolConfig *p = m->pools; p; p = p->next) {
                Template *t = template_find(m, p->template_name);

                if (!t)
                        continue;
                /* the pool's tag moved to another image: its warm sandboxes of the old one go */
                for (Sandbox *s = m->sandboxes, *next; s; s = next) {
                        Error e = {};
                        Operation *op;

                        next = s->next;
                        if (s->pooled && s->state == SANDBOX_POOLED && streq(s->template_name, p->template_name) &&
                            !streq_ptr(s->template_digest, t->digest))
                                (void) sandbox_delete_start(m, s, true, &op, &e);
                        error_done(&e);
                }
                while (pool_count(m, p->template_name, false) < p->size) {
                        Error e = {};
                        Operation *op;
                        Sandbox *s;

                        /* the pool fills only memory nobody else asked for */
                        if (manager_memory_in_use(m) + t->memory_mib > m->memory_limit_mib)
                                break;
                        /* disk 0: the template's default, which never is below its image's size */
                        SandboxSpec spec = {
                                .template_ref = p->template_name,
                                .vcpu = t->vcpu,
                                .memory_mib = t->memory_mib,
                                .pooled = true,
                        };

                        if (sandbox_create(m, &spec, &op, &s, &e) < 0) {
                                log_warning("pool %s: cannot add a sandbox: %s", t->name, e.message ?: "?");
                                error_done(&e);
                                break;
                        }
                }
        }
}

#define POOL_REFILL_DELAY_USEC (1500 * 1000ULL)

static int on_refill_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        (void) s;
        (void) usec;
        pool_refill(m);
        return 0;
}

void pool_refill_later(Manager *m) {
        uint64_t now;

        if (!m->pools)
                return;
        if (!m->pool_refill_timer) {
                if (sd_event_add_time_relative(m->event, &m->pool_refill_timer, CLOCK_MONOTONIC, POOL_REFILL_DELAY_USEC,
                                               100 * 1000, on_refill_timer, m) < 0) {
                        pool_refill(m);
                        return;
                }
                return;
        }
        /* each handout pushes the refill back: a burst of creates is served first */
        if (sd_event_now(m->event, CLOCK_MONOTONIC, &now) < 0 ||
            sd_event_source_set_time(m->pool_refill_timer, now + POOL_REFILL_DELAY_USEC) < 0 ||
            sd_event_source_set_enabled(m->pool_refill_timer, SD_EVENT_ONESHOT) < 0)
                pool_refill(m);
}

typedef struct HandoutJob {
        Manager *manager;
        char id[SANDBOX_ID_LEN + 1];
        char op_id[OPERATION_ID_LEN + 1];
        char *run_dir;
        char **env;
        int fd;
        int r;
        uint64_t started_usec, cont_usec;   /* the handout, and its INIT sent plus QMP cont */
        Error error;
} HandoutJob;

static void handout_done(Manager *m, void *userdata) {
        HandoutJob *j = userdata;
        Sandbox *s = sandbox_find_by_id(m, j->id);
        Operation *op = operation_find(m, j->op_id);

        if (s && j->r >= 0) {
                log_info("sandbox %s handed out from the warm pool of %s in %.1f ms (cont %.1f)", s->id,
                         s->template_name, (double) (now_usec_monotonic() - j->started_usec) / 1000.0,
                         (double) j->cont_usec / 1000.0);
                s->state = SANDBOX_RUNNING;
                s->created_at = now_unix();
                s->last_active = s->created_at;
                if (agent_attach_reidentified(s, TAKE_FD(j->fd)) < 0)
                        log_warning("sandbox %s: cannot watch the agent after handout", s->id);
                sandbox_watch_vm(s);
                (void) sandbox_save(s);
                if (op)
                        operation_finish(op, ERROR_NONE, NULL);
        } else {
                if (s) {
                        Error e = {};
                        Operation *del;

                        log_error("sandbox %s: warm handout failed: %s", j->id, j->error.message ?: strerror(-j->r));
                        s->state = SANDBOX_RUNNING; /* so that delete takes it */
                        (void) sandbox_delete_start(m, s, true, &del, &e);
                        error_done(&e);
                }
                if (op)
                        operation_finish(op, ERROR_CREATE_FAILED, j->error.message ?: "the warm sandbox did not answer");
        }
        safe_close(j->fd);
        free(j->run_dir);
        strv_free(j->env);
        error_done(&j->error);
        free(j);
        pool_refill_later(m);
}

static void *handout_worker(void *userdata) {
        HandoutJob *j = userdata;
        uint64_t t0 = now_usec_monotonic();
        char hostname[32];

        snprintf(hostname, sizeof hostname, "sb-%.12s", j->id);
        /* INIT first, then cont: the frame waits in the channel for the guest, whose first act on waking is to
         * take its identity. Its answer is not waited for (agent_attach_reidentified): it comes before the answer
         * to anything the user sends after it. */
        j->r = agent_reidentify_send(j->fd, j->id, hostname, j->env, NULL, &j->error);
        if (j->r >= 0)
                j->r = vm_cont_at(j->run_dir, &j->error);
        j->cont_usec = now_usec_monotonic() - t0;
        completion_post(j->manager, handout_done, j);
        return NULL;
}

int pool_take(Manager *m, const Template *t, const char *name, char **env, Operation **ret_op, Sandbox **ret,
              Error *reterr) {
        Sandbox *s = NULL;
        HandoutJob *j;
        Operation *op;
        int r;

        for (Sandbox *i = m->sandboxes; i && !s; i = i->next)
                if (i->pooled && i->state == SANDBOX_POOLED && i->has_pool_fd && streq_ptr(i->template_digest, t->digest))
                        s = i;
        if (!s)
                return 0;

        j = calloc(1, sizeof *j);
        if (!j)
                return -ENOMEM;
        j->manager = m;
        j->fd = -1;
        j->started_usec = now_usec_monotonic();
        memcpy(j->id, s->id, sizeof j->id);
        j->run_dir = strdup(s->run_dir);
        j->env = calloc(1, sizeof(char *));
        for (char **e = t->env; e && *e; e++)
                (void) strv_extend(&j->env, *e);
        for (char **e = env; e && *e; e++)
                (void) strv_extend(&j->env, *e);
        if (!j->run_dir || !j->env) {
                free(j->run_dir);
                strv_free(j->env);
                free(j);
                return -ENOMEM;
        }
        /* From here on it is the user's sandbox. */
        strv_free(s->env);
        s->env = calloc(1, sizeof(char *));
        for (char **e = env; e && *e; e++)
                (void) strv_extend(&s->env, *e);
        if (name)
                s->name = strdup(name);
        s->pooled = false;
        s->state = SANDBOX_CREATING;
        j->fd = s->pool_fd;
        s->has_pool_fd = false;
        s->pool_fd = -1;
        (void) sandbox_save(s);
        op = operation_new(m, "create", s->id);
        if (!op) {
                safe_close(j->fd);
                free(j->run_dir);
                strv_free(j->env);
                free(j);
                return -ENOMEM;
        }
        op->from_pool = FROM_POOL_YES;
        memcpy(j->op_id, op->id, sizeof j->op_id);
        r = worker_start(m, handout_worker, j);
        if (r < 0) {
                j->r = r;
                (void) error_set(&j->error, ERROR_INTERNAL, "cannot start a worker thread");
                m->workers_running++;
                handout_done(m, j);
                return error_set(reterr, ERROR_INTERNAL, "cannot start a worker thread") ?: r;
        }
        *ret_op = op;
        *ret = s;
        return 1;
}

int pool_evict_for(Manager *m, uint64_t need_mib, uint64_t *ret_in_use) {
        uint64_t in_use = manager_memory_in_use(m), warm = 0;

        /* Members still being made give way too, though they cannot be stopped mid-restore. */
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (s->pooled && s->state == SANDBOX_CREATING)
                        in_use -= s->memory_mib;
                else if (s->pooled && s->state == SANDBOX_POOLED)
                        warm += s->memory_mib;
        if (in_use + need_mib > m->memory_limit_mib && in_use - warm + need_mib <= m->memory_limit_mib)
                for (Sandbox *s = m->sandboxes, *next; s && in_use + need_mib > m->memory_limit_mib; s = next) {
                        uint64_t mib = s->memory_mib;
                        Error e = {};
                        Operation *op;

                        next = s->next;
                        if (!s->pooled || s->state != SANDBOX_POOLED)
                                continue;
                        /* A member being deleted still holds its memory, so a recount would not see it go:
                         * it is counted out here, once it is on its way out. */
                        if (sandbox_delete_start(m, s, true, &op, &e) >= 0)
                                in_use -= mib;
                        error_done(&e);
                }
        if (ret_in_use)
                *ret_in_use = in_use;
        return in_use + need_mib > m->memory_limit_mib ? -ENOSPC : 0;
}
