/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "disk/disk.h"
#include "core/log.h"
#include "json-util.h"
#include "macro.h"
#include "paths.h"
#include "string-util.h"
#include "core/digest.h"
#include "core/store.h"
#include "template/template.h"
#include "user.h"
#include "core/util.h"

/* The template store (ARCHITECTURE.md, decision 5). Every template is an immutable image in $state/templates/sha256-<hex>/
 * (rootfs.ext4 mode 0444, config.json), named by the digest of its root filesystem tree (template-tree.c);
 * SQLite keeps a row per image (size, source, config) and a row per tag ("name:tag" -> digest). Imports
 * work in $state/templates/.tmp-* and rename into place, so an interrupted one leaves only a .tmp-* directory
 * (or an image directory without a row), which the next start removes. Sandboxes, checkpoints and pools
 * record digests; such an image cannot lose its last tag nor be removed. The builtin templates in
 * $lib_dir/templates/NAME/{template.conf,rootfs.tar} are imported at start when their rootfs.tar changed. */

#define SWAP_PTR(a, b)                  \
        do {                            \
                __typeof__(a) _t_ = (a); \
                (a) = (b);              \
                (b) = _t_;              \
        } while (0)

#define BUILTIN_SYNC_MAX (64ULL << 20) /* builtins up to this size are imported before the daemon serves */

Template *template_free(Template *t) {
        if (!t)
                return NULL;
        free(t->name);
        free(t->dir);
        free(t->rootfs);
        free(t->digest);
        free(t->description);
        strv_free(t->env);
        free(t->workdir);
        free(t->user);
        strv_free(t->entrypoint);
        free(t->start);
        free(t->ready);
        strv_free(t->tags);
        free(t->source);
        free(t->source_digest);
        free(t);
        return NULL;
}

void templates_free(Manager *m) {
        while (m->templates) {
                Template *t = m->templates;
                m->templates = t->next;
                template_free(t);
        }
}

/* ---- references ---- */

static bool name_component_valid(const char *s, size_t n) {
        if (n == 0 || !isalnum((unsigned char) s[0]) || !isalnum((unsigned char) s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
                        continue;
                if (c != '.' && c != '_' && c != '-')
                        return false;
                /* separators: one '.', one or two '_', any number of '-' (Docker's grammar) */
                if (c == '.' && !isalnum((unsigned char) s[i + 1]))
                        return false;
                if (c == '_' && s[i + 1] == '_' && !isalnum((unsigned char) s[i + 2]))
                        return false;
                if (c == '_' && s[i + 1] != '_' && !isalnum((unsigned char) s[i + 1]))
                        return false;
                if (c == '-' && s[i + 1] != '-' && !isalnum((unsigned char) s[i + 1]))
                        return false;
        }
        return true;
}

static const char ref_help[] = "use NAME[:TAG] (lowercase letters, digits and . _ -, with / between parts, e.g. "
                               "team/python:3.12) or sha256:<12 to 64 hex digits>";

int template_ref_parse(const char *ref, char **ret_tag, char **ret_digest_prefix, Error *reterr) {
        const char *colon, *tag = "latest";
        size_t n = strlen(ref), name_len;

        *ret_tag = NULL;
        *ret_digest_prefix = NULL;
        if (n == 0) {
                (void) error_set(reterr, ERROR_INVALID_REF, "the template reference is empty; %s", ref_help);
                return -EINVAL;
        }
        if (n > TEMPLATE_TAG_MAX) {
                (void) error_set(reterr, ERROR_INVALID_REF, "template reference '%.64s...' is longer than %d characters", ref,
                                 TEMPLATE_TAG_MAX);
                return -EINVAL;
        }
        if (strncmp(ref, "sha256:", 7) == 0) {
                const char *hex = ref + 7;
                size_t k = strlen(hex);
                if (k < TEMPLATE_DIGEST_PREFIX_MIN || k > 64 || !string_is_hex(hex, k)) {
                        (void) error_set(reterr, ERROR_INVALID_REF,
                                         "'%s' is not a valid digest reference: sha256: takes %d to 64 lowercase hex "
                                         "digits",
                                         ref, TEMPLATE_DIGEST_PREFIX_MIN);
                        return -EINVAL;
                }
                *ret_digest_prefix = strdup(hex);
                return *ret_digest_prefix ? 0 : -ENOMEM;
        }
        colon = strrchr(ref, ':');
        name_len = colon ? (size_t) (colon - ref) : n;
        if (colon) {
                tag = colon + 1;
                size_t k = strlen(tag);
                if (k == 0 || k > 128 || !(isalnum((unsigned char) tag[0]) || tag[0] == '_') ||
                    strspn(tag, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != k) {
                        (void) error_set(reterr, ERROR_INVALID_REF,
                                         "'%s' has an invalid tag '%s': a tag is 1 to 128 letters, digits, '_', '.' "
                                         "or '-', not starting with '.' or '-'; %s",
                                         ref, tag, ref_help);
                        return -EINVAL;
                }
        }
        for (const char *p = ref; p < ref + name_len;) {
                const char *slash = memchr(p, '/', (size_t) (ref + name_len - p));
                size_t k = slash ? (size_t) (slash - p) : (size_t) (ref + name_len - p);
                if (!name_component_valid(p, k)) {
                        bool upper = false;
                        for (size_t i = 0; i < name_len; i++)
                                upper = upper || isupper((unsigned char) ref[i]);
                        (void) error_set(reterr, ERROR_INVALID_REF, "'%s' is not a valid template reference%s; %s", ref,
                                         upper ? " (names are lowercase)" : "", ref_help);
                        return -EINVAL;
                }
                p += k + (slash ? 1 : 0);
                if (slash && p == ref + name_len) {
                        (void) error_set(reterr, ERROR_INVALID_REF, "'%s' is not a valid template reference; %s", ref, ref_help);
                        return -EINVAL;
                }
        }
        if (asprintf(ret_tag, "%.*s:%s", (int) name_len, ref, tag) < 0)
                return -ENOMEM;
        return 0;
}

int template_tag_parse(const char *ref, char **ret_tag, Error *reterr) {
        _cleanup_free_ char *prefix = NULL;
        int r = template_ref_parse(ref, ret_tag, &prefix, reterr);
        if (r < 0)
                return r;
        if (prefix) {
                (void) error_set(reterr, ERROR_INVALID_REF, "'%s' is a digest; a tag is NAME[:TAG], e.g. team/python:3.12", ref);
                return -EINVAL;
        }
        return 0;
}

static bool has_tag(const Template *t, const char *tag) {
        for (char **i = t->tags; i && *i; i++)
                if (streq(*i, tag))
                        return true;
        return false;
}

Template *template_find_digest(Manager *m, const char *digest) {
        if (!digest)
                return NULL;
        for (Template *t = m->templates; t; t = t->next)
                if (streq(t->digest, digest))
                        return t;
        return NULL;
}

int template_resolve(Manager *m, const char *ref, Template **ret, Error *reterr) {
        _cleanup_free_ char *tag = NULL, *prefix = NULL;
        _cleanup_(error_done) Error msg = {};
        Template *found = NULL;
        unsigned n = 0;
        int r;

        r = template_ref_parse(ref, &tag, &prefix, &msg);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return error_set(reterr, ERROR_INVALID_REF, "%s", msg.message ?: "invalid template reference") ?: r;
        for (Template *t = m->templates; t; t = t->next) {
                if (tag ? has_tag(t, tag) : strncmp(t->digest + 7, prefix, strlen(prefix)) == 0) {
                        found = t;
                        n++;
                }
        }
        if (n == 0)
                return error_set(reterr, ERROR_TEMPLATE_NOT_FOUND,
                                           "template '%s' does not exist; 'spacectl template ls' lists them",
                                           ref) ?: -ENOENT;
        if (n > 1)
                return error_set(reterr, ERROR_AMBIGUOUS_REFERENCE,
                                           "'%s' matches %u templates; give more digits of the digest", ref, n) ?: -ENOTUNIQ;
        *ret = found;
        return 0;
}

Template *template_find(Manager *m, const char *ref) {
        Error e = {};
        Template *t = NULL;

        (void) template_resolve(m, ref, &t, &e);
        error_done(&e);
        return t;
}

static const TemplateUsersOps *users_ops;

const char *template_workdir(Manager *m, const Sandbox *s) {
        Template *t = users_ops ? template_find_digest(m, users_ops->sandbox_digest(s)) : NULL;
        return t ? t->workdir : NULL;
}

const char *template_default_user(Manager *m, const Sandbox *s) {
        Template *t = users_ops ? template_find_digest(m, users_ops->sandbox_digest(s)) : NULL;
        /* checked when the config was applied; a config recorded before that check is not trusted */
        return t && t->user && space_user_spec_parse(t->user, NULL) >= 0 ? t->user : NULL;
}

/* ---- config ---- */

/* A JSON array of strings as a list; kv: each must be K=V with a non-empty K (env). */
static int strv_from_json(const cJSON *a, bool kv, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        int r;

        r = json_array_to_strv(a, &l);
        if (r < 0)
                return r;
        for (char **i = l; kv && *i; i++)
                if (!strchr(*i, '=') || (*i)[0] == '=')
                        return -EINVAL;
        strv_free(*ret);
        *ret = TAKE_PTR(l);
        return 0;
}

static int set_str(char **field, const cJSON *v) {
        char *s = strdup(v->valuestring);
        if (!s)
                return -ENOMEM;
        free(*field);
        *field = s;
        return 0;
}

int template_config_apply(Template *t, const cJSON *config, Error *reterr) {
        const cJSON *v;

        if (!config || cJSON_IsNull(config))
                return 0;
        if (!cJSON_IsObject(config)) {
                (void) error_set(reterr, ERROR_INVALID_ARGUMENT, "config must be an object");
                return -EINVAL;
        }
        cJSON_ArrayForEach(v, config) {
                const char *k = v->string;
                double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
                int r = 0;

                if (streq(k, "description") && cJSON_IsString(v))
                        r = set_str(&t->description, v);
                else if (streq(k, "user") && cJSON_IsString(v) && space_user_spec_parse(v->valuestring, NULL) >= 0)
                        r = set_str(&t->user, v);
                else if (streq(k, "workdir") && cJSON_IsString(v) && v->valuestring[0] == '/' &&
                         strlen(v->valuestring) < 4096)
                        r = set_str(&t->workdir, v);
                else if (streq(k, "env") && cJSON_IsArray(v))
                        r = strv_from_json(v, true, &t->env);
                else if (streq(k, "entrypoint") && cJSON_IsNull(v)) {
                        t->entrypoint = (strv_free(t->entrypoint), NULL);
                } else if (streq(k, "entrypoint") && cJSON_IsArray(v) && cJSON_GetArraySize(v) > 0)
                        r = strv_from_json(v, false, &t->entrypoint);
                else if ((streq(k, "start") || streq(k, "ready")) && cJSON_IsString(v) && v->valuestring[0] &&
                         strlen(v->valuestring) <= TEMPLATE_COMMAND_MAX)
                        r = set_str(streq(k, "start") ? &t->start : &t->ready, v);
                else if ((streq(k, "start") || streq(k, "ready")) && cJSON_IsNull(v)) {
                        char **f = streq(k, "start") ? &t->start : &t->ready;
                        free(*f);
                        *f = NULL;
                }
                else if (streq(k, "vcpu") && d >= 1 && d <= 64 && d == (unsigned) d)
                        t->vcpu = (unsigned) d;
                else if (streq(k, "memory_mib") && d >= 64 && d <= 65536 && d == (uint64_t) d)
                        t->memory_mib = (uint64_t) d;
                else if (streq(k, "disk_mib") && d >= 64 && d <= 1048576 && d == (uint64_t) d)
                        t->disk_mib = (uint64_t) d;
                else {
                        static const char *const known[] = { "description", "env", "user", "workdir", "entrypoint",
                                                              "start", "ready", "vcpu", "memory_mib", "disk_mib" };
                        bool is_known = false;
                        for (size_t i = 0; i < ELEMENTSOF(known); i++)
                                is_known = is_known || streq(known[i], k);
                        if (!is_known)
                                (void) error_set(reterr, ERROR_INVALID_ARGUMENT,
                                                 "config has an unknown field '%s'; known: description, env, user, "
                                                 "workdir, entrypoint, start, ready, vcpu, memory_mib, disk_mib",
                                                 k);
                        else
                                (void) error_set(reterr, ERROR_INVALID_ARGUMENT,
                                                 "config.%s is not valid: %s", k,
                                                 streq(k, "env") ? "a list of \"K=V\" strings" :
                                                 streq(k, "entrypoint") ? "a non-empty list of strings" :
                                                 streq(k, "workdir") ? "an absolute path" :
                                                 streq(k, "start") || streq(k, "ready") ?
                                                         "a non-empty shell command line of at most 4096 bytes" :
                                                 streq(k, "vcpu") ? "a whole number from 1 to 64" :
                                                 streq(k, "memory_mib") ? "a whole number from 64 to 65536" :
                                                 streq(k, "disk_mib") ? "a whole number from 64 to 1048576" :
                                                 streq(k, "user") ? "NAME or UID, optionally :GROUP or :GID "
                                                                    "(at most 64 of A-Z a-z 0-9 . _ -)" :
                                                 "a non-empty string");
                        return -EINVAL;
                }
                if (r == -EINVAL) {
                        (void) error_set(reterr, ERROR_INVALID_ARGUMENT, "config.%s is not valid: %s", k,
                                         streq(k, "env") ? "a list of \"K=V\" strings" : "a list of strings");
                        return r;
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

cJSON *template_config_to_json(const Template *t) {
        cJSON *o = cJSON_CreateObject();

        if (!o)
                return NULL;
        cJSON_AddStringToObject(o, "description", t->description ?: "");
        cJSON_AddItemToObject(o, "env", json_array_from_strv(t->env));
        if (t->user)
                cJSON_AddStringToObject(o, "user", t->user);
        if (t->workdir)
                cJSON_AddStringToObject(o, "workdir", t->workdir);
        if (t->entrypoint)
                cJSON_AddItemToObject(o, "entrypoint", json_array_from_strv(t->entrypoint));
        else
                cJSON_AddNullToObject(o, "entrypoint");
        if (t->start)
                cJSON_AddStringToObject(o, "start", t->start);
        if (t->ready)
                cJSON_AddStringToObject(o, "ready", t->ready);
        cJSON_AddNumberToObject(o, "vcpu", t->vcpu);
        cJSON_AddNumberToObject(o, "memory_mib", (double) t->memory_mib);
        cJSON_AddNumberToObject(o, "disk_mib", (double) t->disk_mib);
        return o;
}

/* ---- the store ---- */

static int templates_dir(Manager *m, char **ret) {
        return asprintf(ret, "%s/templates", m->state_dir) < 0 ? -ENOMEM : 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void template_update_name(Template *t) {
        size_t n = 0;
        char *name;

        for (char **i = t->tags; i && *i; i++)
                n++;
        if (n > 1)
                qsort(t->tags, n, sizeof(char *), cmp_str);
        if (n > 0)
                name = strdup(t->tags[0]);
        else if (asprintf(&name, "sha256:%.12s", t->digest + 7) < 0)
                name = NULL;
        if (name) {
                free(t->name);
                t->name = name;
        }
}

static int db_exec(Manager *m, const char *sql, const char *a, const char *b) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(store_db(m->store), sql, -1, &st, NULL);

        if (rc == SQLITE_OK) {
                if (a)
                        sqlite3_bind_text(st, 1, a, -1, SQLITE_TRANSIENT);
                if (b)
                        sqlite3_bind_text(st, 2, b, -1, SQLITE_TRANSIENT);
                rc = sqlite3_step(st);
        }
        sqlite3_finalize(st);
        return rc == SQLITE_DONE || rc == SQLITE_OK ? 0 : -EIO;
}

static int template_save(Manager *m, const Template *t) {
        _cleanup_free_ char *config = NULL;
        cJSON *c = template_config_to_json(t);
        sqlite3_stmt *st = NULL;
        int rc;

        config = c ? cJSON_PrintUnformatted(c) : NULL;
        cJSON_Delete(c);
        if (!config)
                return -ENOMEM;
        rc = sqlite3_prepare_v2(store_db(m->store),
                                "INSERT OR REPLACE INTO templates (digest, size_bytes, image_bytes, files, created_at,"
                                " source, source_digest, config) VALUES (?,?,?,?,?,?,?,?)",
                                -1, &st, NULL);
        if (rc == SQLITE_OK) {
                sqlite3_bind_text(st, 1, t->digest, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 2, (sqlite3_int64) t->size_bytes);
                sqlite3_bind_int64(st, 3, (sqlite3_int64) t->image_bytes);
                sqlite3_bind_int64(st, 4, (sqlite3_int64) t->files);
                sqlite3_bind_int64(st, 5, t->created_at);
                sqlite3_bind_text(st, 6, t->source, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 7, t->source_digest, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 8, config, -1, SQLITE_STATIC);
                rc = sqlite3_step(st);
        }
        sqlite3_finalize(st);
        return rc == SQLITE_DONE ? 0 : -EIO;
}

static int template_paths(Manager *m, Template *t) {
        free(t->dir);
        free(t->rootfs);
        t->rootfs = NULL;
        if (asprintf(&t->dir, "%s/templates/sha256-%s", m->state_dir, t->digest + 7) < 0) {
                t->dir = NULL;
                return -ENOMEM;
        }
        if (asprintf(&t->rootfs, "%s/rootfs.ext4", t->dir) < 0) {
                t->rootfs = NULL;
                return -ENOMEM;
        }
        return 0;
}

static void template_unlink(Manager *m, Template *t) {
        for (Template **i = &m->templates; *i; i = &(*i)->next)
                if (*i == t) {
                        *i = t->next;
                        return;
                }
}

static int tag_remove_from(Template *t, const char *tag) {
        size_t k = 0;
        bool found = false;

        for (char **i = t->tags; i && *i; i++) {
                if (!found && streq(*i, tag)) {
                        free(*i);
                        found = true;
                        continue;
                }
                t->tags[k++] = *i;
        }
        if (t->tags)
                t->tags[k] = NULL;
        if (found)
                template_update_name(t);
        return found;
}

int template_tag_set(Manager *m, Template *t, const char *tag, Error *reterr) {
        if (has_tag(t, tag))
                return 0;
        if (db_exec(m, "INSERT OR REPLACE INTO template_tags (tag, digest) VALUES (?, ?)", tag, t->digest) < 0)
                return error_set(reterr, ERROR_INTERNAL, "cannot record tag %s", tag) ?: -EIO;
        for (Template *o = m->templates; o; o = o->next)
                if (o != t)
                        (void) tag_remove_from(o, tag); /* the old image stays, untagged; gc removes it */
        if (strv_extend(&t->tags, tag) < 0)
                return -ENOMEM;
        template_update_name(t);
        return 0;
}

static uint64_t bases_remove(Manager *m, const char *short_digest, unsigned *ret_count);

int template_store_add(Manager *m, Template *t, const char *tag, Template **ret) {
        Template *old = template_find_digest(m, t->digest);
        Error e = {};
        int r;

        if (old) {
                /* The same tree again: the image stays; the newer import's defaults and source win. */
                SWAP_PTR(old->description, t->description);
                SWAP_PTR(old->env, t->env);
                SWAP_PTR(old->workdir, t->workdir);
                SWAP_PTR(old->user, t->user);
                SWAP_PTR(old->entrypoint, t->entrypoint);
                /* its base snapshot runs the old service: it goes, and the next create makes one that runs this */
                if (!streq_ptr(old->start, t->start) || !streq_ptr(old->ready, t->ready)) {
                        char shortd[13];
                        snprintf(shortd, sizeof shortd, "%.12s", old->digest + 7);
                        (void) bases_remove(m, shortd, NULL);
                }
                SWAP_PTR(old->start, t->start);
                SWAP_PTR(old->ready, t->ready);
                SWAP_PTR(old->source, t->source);
                SWAP_PTR(old->source_digest, t->source_digest);
                old->vcpu = t->vcpu;
                old->memory_mib = t->memory_mib;
                old->disk_mib = t->disk_mib;
                template_free(t);
                t = old;
        } else {
                r = template_paths(m, t);
                if (r < 0) {
                        template_free(t);
                        return r;
                }
                template_update_name(t);
                t->next = m->templates;
                m->templates = t;
        }
        r = template_save(m, t);
        if (r < 0)
                log_warning_errno(r, "cannot record template %s", t->digest);
        if (tag) {
                r = template_tag_set(m, t, tag, &e);
                error_done(&e);
                if (r < 0)
                        return r;
        }
        if (ret)
                *ret = t;
        return 0;
}

/* ---- users, removal, gc ---- */

void template_set_users_ops(const TemplateUsersOps *ops) {
        users_ops = ops;
}

void template_imported(Manager *m) {
        if (users_ops)
                users_ops->imported(m);
}

char *template_user(Manager *m, const Template *t) {
        return users_ops ? users_ops->user(m, t) : NULL;
}

/* Removes the base snapshots (base.c) whose directory names start with the 12-hex short digest, or all
 * stale ones when short_digest is NULL. Skipped while a base snapshot is being built. (Declared above
 * template_store_add().) */

static uint64_t image_remove(Manager *m, Template *t) {
        uint64_t freed = disk_usage(t->dir);
        char shortd[13];

        log_info("removing template image %s", t->digest);
        (void) db_exec(m, "DELETE FROM template_tags WHERE digest = ?", t->digest, NULL);
        (void) db_exec(m, "DELETE FROM templates WHERE digest = ?", t->digest, NULL);
        (void) rm_rf(t->dir);
        snprintf(shortd, sizeof shortd, "%.12s", t->digest + 7);
        freed += bases_remove(m, shortd, NULL);
        template_unlink(m, t);
        template_free(t);
        return freed;
}

static const char *pool_naming(Manager *m, const char *tag) {
        return users_ops ? users_ops->pool_naming(m, tag) : NULL;
}

int template_remove(Manager *m, const char *ref, char **ret_untagged, bool *ret_removed_image, uint64_t *ret_size,
                    uint64_t *ret_freed, Error *reterr) {
        _cleanup_free_ char *tag = NULL, *prefix = NULL, *user = NULL;
        Template *t;
        size_t ntags = 0;
        int r;

        *ret_removed_image = false;
        *ret_freed = *ret_size = 0;
        *ret_untagged = NULL;
        r = template_resolve(m, ref, &t, reterr);
        if (r < 0)
                return r;
        (void) template_ref_parse(ref, &tag, &prefix, NULL);
        for (char **i = t->tags; i && *i; i++)
                ntags++;
        if (tag) {
                const char *pool = pool_naming(m, tag);
                if (pool)
                        return error_set(reterr, ERROR_TEMPLATE_IN_USE,
                                                   "template %s is in use by pool %s; 'spacectl pool set %s 0' "
                                                   "removes the pool",
                                                   tag, pool, pool) ?: -EBUSY;
                if (ntags > 1) {
                        if (db_exec(m, "DELETE FROM template_tags WHERE tag = ?", tag, NULL) < 0)
                                return error_set(reterr, ERROR_INTERNAL, "cannot remove tag %s", tag) ?: -EIO;
                        (void) tag_remove_from(t, tag);
                        *ret_untagged = TAKE_PTR(tag);
                        return 0;
                }
        }
        user = template_user(m, t);
        if (user)
                return error_set(reterr, ERROR_TEMPLATE_IN_USE,
                                           "template %s (%s) is in use by %s; remove that first", ref, t->digest,
                                           user) ?: -EBUSY;
        if (tag)
                *ret_untagged = TAKE_PTR(tag);
        *ret_size = t->size_bytes;
        *ret_freed = image_remove(m, t);
        *ret_removed_image = true;
        return 0;
}

/* Base snapshots belong to sandbox/ (sandbox/base.c), which removes them for the store. */
static uint64_t bases_remove(Manager *m, const char *only, unsigned *ret_count) {
        if (users_ops)
                return users_ops->bases_remove(m, only, ret_count);
        if (ret_count)
                *ret_count = 0;
        return 0;
}

int templates_gc(Manager *m, uint64_t *ret_freed, unsigned *ret_images, unsigned *ret_bases) {
        uint64_t freed = 0;
        unsigned images = 0, bases = 0;

        for (Template *t = m->templates, *next; t; t = next) {
                _cleanup_free_ char *user = NULL;

                next = t->next;
                if (t->tags && t->tags[0])
                        continue;
                user = template_user(m, t);
                if (user)
                        continue;
                freed += image_remove(m, t);
                images++;
        }
        freed += bases_remove(m, NULL, &bases);
        *ret_freed = freed;
        *ret_images = images;
        *ret_bases = bases;
        return 0;
}

/* ---- loading ---- */

static void cleanup_store_dir(Manager *m, const char *root) {
        _cleanup_closedir_ DIR *d = opendir(root);
        struct dirent *de;

        while (d && (de = readdir(d))) {
                _cleanup_free_ char *p = NULL, *digest = NULL;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (asprintf(&p, "%s/%s", root, de->d_name) < 0)
                        return;
                if (strncmp(de->d_name, ".tmp-", 5) == 0) {
                        log_info("removing %s, left by an interrupted import", p);
                        (void) rm_rf(p);
                        continue;
                }
                if (strncmp(de->d_name, "sha256-", 7) != 0)
                        continue;
                if (asprintf(&digest, "sha256:%s", de->d_name + 7) < 0)
                        return;
                if (!template_find_digest(m, digest)) {
                        log_info("removing %s: no template records it (an import was interrupted)", p);
                        (void) rm_rf(p);
                }
        }
}

static char *col(sqlite3_stmt *st, int i) {
        const unsigned char *v = sqlite3_column_text(st, i);
        return v ? strdup((const char *) v) : NULL;
}

static int load_rows(Manager *m) {
        sqlite3 *db = store_db(m->store);
        sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(db,
                                "SELECT digest, size_bytes, image_bytes, files, created_at, source, source_digest,"
                                " config FROM templates",
                                -1, &st, NULL);
        if (rc != SQLITE_OK)
                return -EIO;
        while (sqlite3_step(st) == SQLITE_ROW) {
                _cleanup_free_ char *config_text = NULL;
                _cleanup_(error_done) Error msg = {};
                Template *t = calloc(1, sizeof *t);
                cJSON *config;
                struct stat sb;

                if (!t)
                        break;
                t->vcpu = 1;
                t->memory_mib = 256;
                t->disk_mib = TEMPLATE_DEFAULT_DISK_MIB;
                t->digest = col(st, 0);
                t->size_bytes = (uint64_t) sqlite3_column_int64(st, 1);
                t->image_bytes = (uint64_t) sqlite3_column_int64(st, 2);
                t->files = (uint64_t) sqlite3_column_int64(st, 3);
                t->created_at = sqlite3_column_int64(st, 4);
                t->source = col(st, 5);
                t->source_digest = col(st, 6);
                config_text = col(st, 7);
                if (!t->digest || strlen(t->digest) != 71 || strncmp(t->digest, "sha256:", 7) != 0 ||
                    template_paths(m, t) < 0) {
                        template_free(t);
                        continue;
                }
                config = config_text ? cJSON_Parse(config_text) : NULL;
                if (template_config_apply(t, config, &msg) < 0)
                        log_warning("template %s: its recorded config is not valid (%s); using defaults", t->digest,
                                    msg.message ?: "?");
                cJSON_Delete(config);
                if (stat(t->rootfs, &sb) < 0) {
                        log_warning("template %s: %s is missing; forgetting the template", t->digest, t->rootfs);
                        (void) db_exec(m, "DELETE FROM template_tags WHERE digest = ?", t->digest, NULL);
                        (void) db_exec(m, "DELETE FROM templates WHERE digest = ?", t->digest, NULL);
                        template_free(t);
                        continue;
                }
                template_update_name(t);
                t->next = m->templates;
                m->templates = t;
        }
        sqlite3_finalize(st);

        rc = sqlite3_prepare_v2(db, "SELECT tag, digest FROM template_tags", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return -EIO;
        while (sqlite3_step(st) == SQLITE_ROW) {
                const char *tag = (const char *) sqlite3_column_text(st, 0);
                const char *digest = (const char *) sqlite3_column_text(st, 1);
                Template *t = template_find_digest(m, digest);

                if (!tag)
                        continue;
                if (!t) {
                        log_warning("tag %s points at %s, which is gone; removing the tag", tag, digest ?: "?");
                        continue;
                }
                if (strv_extend(&t->tags, tag) >= 0)
                        template_update_name(t);
        }
        sqlite3_finalize(st);
        (void) db_exec(m, "DELETE FROM template_tags WHERE digest NOT IN (SELECT digest FROM templates)", NULL, NULL);
        return 0;
}

/* template.conf: "key = value" lines (name, description, vcpu, memory_mib, disk_mib, env (repeated), workdir,
 * user) as a config object. */
static int builtin_conf(const char *path, const char *dirname, char **ret_name, cJSON **ret_config,
                        Error *reterr) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        cJSON *c = cJSON_CreateObject(), *env = cJSON_CreateArray();
        _cleanup_free_ char *name = NULL;
        char line[4096];
        unsigned n = 0;

        if (!f || !c || !env) {
                int r = f ? -ENOMEM : -errno;
                cJSON_Delete(c);
                cJSON_Delete(env);
                (void) error_set(reterr, ERROR_INTERNAL, "%s: %s", path, strerror(-r));
                return r;
        }
        while (fgets(line, sizeof line, f)) {
                char *k = string_strip(line), *v, *eq;

                n++;
                if (!*k || *k == '#')
                        continue;
                eq = strchr(k, '=');
                if (!eq) {
                        (void) error_set(reterr, ERROR_INVALID_ARGUMENT, "%s line %u: expected key = value", path, n);
                        cJSON_Delete(c);
                        cJSON_Delete(env);
                        return -EINVAL;
                }
                *eq = 0;
                k = string_strip(k);
                v = string_strip(eq + 1);
                if (streq(k, "name")) {
                        free(name);
                        name = strdup(v);
                } else if (streq(k, "env"))
                        cJSON_AddItemToArray(env, cJSON_CreateString(v));
                else if (streq(k, "vcpu") || streq(k, "memory_mib") || streq(k, "disk_mib")) {
                        char *end;
                        double d = strtod(v, &end);
                        if (end == v || *end) {
                                (void) error_set(reterr, ERROR_INVALID_ARGUMENT, "%s line %u: %s must be a number", path, n, k);
                                cJSON_Delete(c);
                                cJSON_Delete(env);
                                return -EINVAL;
                        }
                        cJSON_AddNumberToObject(c, k, d);
                } else if (streq(k, "description") || streq(k, "workdir") || streq(k, "user"))
                        cJSON_AddStringToObject(c, k, v);
                /* other keys are for recipes (template build): not defaults */
        }
        cJSON_AddItemToObject(c, "env", env);
        *ret_name = name ? TAKE_PTR(name) : strdup(dirname);
        *ret_config = c;
        return *ret_name ? 0 : -ENOMEM;
}

static bool source_imported(Manager *m, const char *source_digest) {
        for (Template *t = m->templates; t; t = t->next)
                if (streq_ptr(t->source_digest, source_digest))
                        return true;
        return false;
}

static void builtins_load(Manager *m) {
        _cleanup_free_ char *root = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;

        if (asprintf(&root, "%s/templates", m->lib_dir) < 0)
                return;
        d = opendir(root);
        if (!d) {
                log_warning("no builtin templates in %s: %s", root, strerror(errno));
                return;
        }
        while ((de = readdir(d))) {
                _cleanup_free_ char *conf = NULL, *tar = NULL, *digest = NULL, *name = NULL, *tag = NULL;
                _cleanup_(error_done) Error msg = {};
                cJSON *config = NULL;
                struct stat st;
                int r;

                if (de->d_name[0] == '.')
                        continue;
                if (asprintf(&conf, "%s/%s/template.conf", root, de->d_name) < 0 ||
                    asprintf(&tar, "%s/%s/rootfs.tar", root, de->d_name) < 0)
                        return;
                if (stat(tar, &st) < 0) {
                        log_warning("builtin template %s: %s: %s (run make), skipping it", de->d_name, tar,
                                    strerror(errno));
                        continue;
                }
                r = file_digest(tar, &digest);
                if (r < 0) {
                        log_warning_errno(r, "builtin template %s: cannot hash %s", de->d_name, tar);
                        continue;
                }
                if (source_imported(m, digest))
                        continue;
                r = builtin_conf(conf, de->d_name, &name, &config, &msg);
                if (r >= 0 && template_tag_parse(name, &tag, &msg) < 0)
                        r = -EINVAL;
                if (r < 0) {
                        log_warning("builtin template %s: %s, skipping it", de->d_name, msg.message ?: strerror(-r));
                        cJSON_Delete(config);
                        continue;
                }
                ImportRequest req = { .source = tar, .tag = tag, .config = config, .source_digest = digest };
                if ((uint64_t) st.st_size <= BUILTIN_SYNC_MAX) {
                        _cleanup_(error_done) Error err = {};
                        Template *t;
                        uint64_t t0 = now_usec_monotonic();

                        r = template_import_now(m, &req, &t, &err);
                        if (r < 0)
                                log_error("builtin template %s: import of %s failed: %s", name, tar,
                                          err.message ?: strerror(-r));
                        else
                                log_info("builtin template %s imported from %s in %.1f s: %s", tag, tar,
                                         (double) (now_usec_monotonic() - t0) / 1e6, t->digest);
                } else {
                        Error e = {};
                        Operation *op;

                        r = template_import_start(m, &req, &op, &e);
                        if (r < 0)
                                log_error("builtin template %s: cannot start its import: %s", name,
                                          e.message ?: strerror(-r));
                        else
                                log_info("builtin template %s: importing %s in the background (%s)", tag, tar, op->id);
                        error_done(&e);
                }
                cJSON_Delete(config);
        }
}

int templates_load(Manager *m) {
        _cleanup_free_ char *root = NULL;
        int r;

        r = templates_dir(m, &root);
        if (r < 0)
                return r;
        r = space_mkdir_p(root, 0700);
        if (r < 0)
                return r;
        r = load_rows(m);
        if (r < 0)
                return r;
        cleanup_store_dir(m, root);
        builtins_load(m);
        return 0;
}
