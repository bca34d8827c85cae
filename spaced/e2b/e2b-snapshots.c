/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "e2b/e2b-control.h"
#include "macro.h"
#include "string-util.h"
#include "template/template.h"

/* E2B's snapshots are space's checkpoints: memory, device state and disk of a running sandbox, kept after the
 * sandbox is gone. Their id (cp-...) or name is a templateID a create forks from. */

#define SNAPSHOT_NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

/* The snapshot ref names: the checkpoint with that exact id or name. */
static Checkpoint *snapshot_find(Manager *m, const char *ref) {
        Checkpoint *c = checkpoint_find(m, ref);

        return c && (streq(c->id, ref) || streq_ptr(c->name, ref)) ? c : NULL;
}

static cJSON *snapshot_json(const Checkpoint *c) {
        cJSON *o = cJSON_CreateObject(), *names = cJSON_CreateArray();

        cJSON_AddStringToObject(o, "snapshotID", c->id);
        if (c->name)
                cJSON_AddItemToArray(names, cJSON_CreateString(c->name));
        cJSON_AddItemToObject(o, "names", names);
        return o;
}

/* The snapshot's {name, memory}: memory=false, the newer SDKs' mode "filesystem", is refused: a space
 * checkpoint always holds memory (E2B_NO_FS_SNAPSHOT). */
static int parse_name(Request *r, const char **ret) {
        static const char *const fields[] = { "name", "memory", NULL };
        cJSON *o = e2b_body_object(r, fields), *v;
        static char name[SANDBOX_NAME_MAX + 1];
        bool memory = true;
        size_t n;

        if (!o)
                return -EINVAL;
        *ret = NULL;
        if (get_bool_field(r, o, "memory", &memory) < 0) {
                cJSON_Delete(o);
                return -EINVAL;
        }
        if (!memory) {
                cJSON_Delete(o);
                return http_respond_error(r, ERROR_INVALID_ARGUMENT, "memory=false (a snapshot with mode "
                                          "'filesystem') %s; take it with memory (the default)", E2B_NO_FS_SNAPSHOT)
                               ?: -EOPNOTSUPP;
        }
        v = cJSON_GetObjectItemCaseSensitive(o, "name");
        if (v && !cJSON_IsNull(v)) {
                n = cJSON_IsString(v) ? strlen(v->valuestring) : 0;
                /* a name is used as a templateID and in DELETE /templates/NAME: no '/' or ':', and nothing an
                 * id or E2B's default could be taken for */
                if (n < 1 || n > SANDBOX_NAME_MAX || strspn(v->valuestring, SNAPSHOT_NAME_CHARS) != n ||
                    strncmp(v->valuestring, "cp-", 3) == 0 || streq(v->valuestring, "base")) {
                        cJSON_Delete(o);
                        return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                                  "name must be 1 to %d letters, digits, '.', '_' or '-', not "
                                                  "'base' and not starting with 'cp-'", SANDBOX_NAME_MAX) ?: -EINVAL;
                }
                memcpy(name, v->valuestring, n + 1);
                *ret = name;
        }
        cJSON_Delete(o);
        return 0;
}

static void snapshot_continue(Request *r, void *userdata);

/* The snapshot from the lookup on; after a wait for another request's operation it starts here again. */
static void snapshot_step(Request *r, E2bWait *w) {
        Manager *m = http_manager(r->http);
        _cleanup_(error_done) Error e = {};
        const char *name = w->snapshot_name[0] ? w->snapshot_name : NULL;
        Operation *op;
        Checkpoint *c;
        Sandbox *s;
        int q;

        if (e2b_find_sandbox(r, w->arg, &s) < 0)
                return;
        if (s->busy || s->state == SANDBOX_CREATING) {
                (void) e2b_wait_busy(r, s, snapshot_continue);
                return;
        }
        if (s->state == SANDBOX_SUSPENDED) {
                http_respond_error(r, ERROR_SANDBOX_NOT_RUNNING,
                                   "sandbox %s is paused: connect to it first, then take the snapshot", s->id);
                return;
        }
        q = checkpoint_create_start(m, s, name, &op, &c, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                return;
        }
        log_info("sandbox %s: snapshot %s for E2B", s->id, c->id);
        memcpy(w->checkpoint_id, c->id, sizeof w->checkpoint_id);
        (void) e2b_wait_op(r, op, true, snapshot_continue);
}

static void snapshot_continue(Request *r, void *userdata) {
        E2bWait *w = userdata;
        Checkpoint *c;

        if (e2b_wait_resume(r, w, snapshot_continue) <= 0)
                return;
        if (!w->own_done)
                return snapshot_step(r, w);
        c = snapshot_find(http_manager(r->http), w->checkpoint_id);
        if (!c || !c->ready) {
                http_respond_error(r, ERROR_OPERATION_FAILED, "snapshot %s is gone", w->checkpoint_id);
                return;
        }
        http_respond_json(r, 201, snapshot_json(c));
}

/* POST /sandboxes/{id}/snapshots {name?} -> 201 {snapshotID, names}, once taken (the sandbox stops meanwhile). */
void e2b_post_snapshots(Request *r, const RouteArgs *a) {
        const char *name;
        E2bWait *w;

        if (parse_name(r, &name) < 0)
                return;
        w = e2b_wait_new(r, a->arg[0]);
        if (!w)
                return;
        if (name)
                snprintf(w->snapshot_name, sizeof w->snapshot_name, "%s", name);
        snapshot_step(r, w);
}

static int checkpoint_order(const void *a, const void *b) {
        const Checkpoint *x = *(Checkpoint *const *) a, *y = *(Checkpoint *const *) b;

        return x->created_at != y->created_at ? (x->created_at < y->created_at ? -1 : 1) : strcmp(x->id, y->id);
}

/* Whether c is what ?name= asks for (none: any): its name, or its id (E2B's snapshots are named by either). */
static bool name_matches(const Checkpoint *c, const char *name) {
        return !name || !*name || streq(name, c->id) || streq_ptr(c->name, name);
}

/* GET /snapshots?sandboxID=&name=&limit=&nextToken=: pages in the order they were taken; the token is where
 * the last page ended ("SECONDS.ID"). */
void e2b_get_snapshots(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        const char *sandbox = http_query(r, "sandboxID"), *token = http_query(r, "nextToken"),
                   *name = http_query(r, "name");
        _cleanup_free_ Checkpoint **all = NULL;
        long long after_t = -1;
        char after_id[CHECKPOINT_ID_LEN + 1] = "", next[64] = "";
        size_t n = 0, count = 0, taken = 0;
        unsigned limit;
        cJSON *list;

        if (e2b_query_limit(r, &limit) < 0)
                return;
        if (sandbox && (strlen(sandbox) > SANDBOX_ID_LEN || strspn(sandbox, SNAPSHOT_NAME_CHARS) != strlen(sandbox))) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "sandboxID=%.64s is not a sandbox id", sandbox);
                return;
        }
        if (token && *token) {
                int k = 0;
                if (sscanf(token, "%lld.%19[a-z0-9-]%n", &after_t, after_id, &k) != 2 || token[k] || after_t < 0) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "nextToken=%.64s is not a token of this server: pass the x-next-token "
                                           "of the previous page", token);
                        return;
                }
        }
        for (Checkpoint *c = m->checkpoints; c; c = c->next)
                count++;
        all = calloc(count + 1, sizeof *all);
        if (!all) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return;
        }
        for (Checkpoint *c = m->checkpoints; c; c = c->next)
                if (c->ready && (!sandbox || !*sandbox || streq(sandbox, c->sandbox_id)) && name_matches(c, name) &&
                    (c->created_at > after_t || (c->created_at == after_t && strcmp(c->id, after_id) > 0)))
                        all[n++] = c;
        qsort(all, n, sizeof *all, checkpoint_order);
        list = cJSON_CreateArray();
        for (; taken < n && taken < limit; taken++)
                cJSON_AddItemToArray(list, snapshot_json(all[taken]));
        if (taken < n)
                snprintf(next, sizeof next, "%lld.%s", (long long) all[taken - 1]->created_at, all[taken - 1]->id);
        e2b_respond_json_headers(r, 200, list, next[0] ? (const char *const[]) { "x-next-token", next, NULL } : NULL);
}

/* DELETE /templates/{id}: E2B deletes a snapshot this way. Templates themselves are not removed over E2B's
 * API: that is `spacectl template rm`. */
void e2b_delete_template(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        _cleanup_(error_done) Error e = {};
        Checkpoint *c = snapshot_find(m, a->arg[0]);
        int q;

        if (!c) {
                if (template_find(m, a->arg[0]))
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "'%s' is a template, not a snapshot: E2B's API removes only snapshots "
                                           "here; remove templates with 'spacectl template rm'", a->arg[0]);
                else
                        http_respond_error(r, ERROR_NOT_FOUND, "snapshot %s not found", a->arg[0]);
                return;
        }
        q = checkpoint_remove(m, c, &e);
        if (q < 0)
                respond_operation_error(r, &e, q);
        else
                http_respond_empty(r, 204);
}
