/* SPDX-License-Identifier: Apache-2.0 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "string-util.h"
#include "utf8.h"
#include "core/log.h"
#include "core/util.h"
#include "secret/secret.h"

/* Secrets: the rows in the store and the value files under $state/secrets (secret.h). The order of writes is
 * what keeps a crash harmless: a value's file is complete (fsynced, renamed into place) before its row names
 * it, and a row goes before its file; so at start a file with no row is a leftover to remove, never a value
 * a user was told is set. */

#define SECRET_DIR "secrets"

_Static_assert(SECRET_VALUE_MAX == 16384, "secret_value_problem() says 16384");

bool secret_name_valid(const char *name) {
        size_t n = name ? strlen(name) : 0;

        if (n == 0 || n > SECRET_NAME_MAX || !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') ||
                                              (name[0] >= '0' && name[0] <= '9')))
                return false;
        if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
                return false;
        /* "sec-" and 16 hex digits is an id's shape */
        return !(n == SECRET_ID_LEN && strncmp(name, "sec-", 4) == 0 && string_is_hex(name + 4, 16));
}

const char *secret_value_problem(const char *value, size_t len) {
        if (len == 0)
                return "a secret's value cannot be empty";
        if (len > SECRET_VALUE_MAX)
                return "a secret's value is at most 16384 bytes";
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) value[i];
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        return "a secret's value goes into HTTP headers: it cannot hold a line break, NUL or other "
                               "control character but tab (a trailing newline is dropped by 'spacectl secret set')";
        }
        if (!utf8_valid(value, len))
                return "a secret's value must be UTF-8 text";
        return NULL;
}

int secret_metadata_check(const cJSON *metadata, char **ret_json, Error *reterr) {
        _cleanup_free_ char *text = NULL;
        int n = 0;

        if (metadata && !cJSON_IsNull(metadata)) {
                const cJSON *e;

                if (!cJSON_IsObject(metadata))
                        return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                         "metadata must be an object of strings, such as {\"owner\": \"ci\"}") ?: -EINVAL;
                cJSON_ArrayForEach(e, metadata) {
                        if (++n > SECRET_METADATA_KEYS_MAX)
                                return error_set(reterr, ERROR_INVALID_ARGUMENT, "metadata has more than %d keys",
                                                 SECRET_METADATA_KEYS_MAX) ?: -EINVAL;
                        if (!e->string || !*e->string || strlen(e->string) > SECRET_METADATA_KEY_MAX ||
                            !utf8_valid(e->string, strlen(e->string)))
                                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                                 "metadata keys are 1 to %d bytes of UTF-8 text",
                                                 SECRET_METADATA_KEY_MAX) ?: -EINVAL;
                        if (!cJSON_IsString(e) || strlen(e->valuestring) > SECRET_METADATA_VALUE_MAX ||
                            !utf8_valid(e->valuestring, strlen(e->valuestring)))
                                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                                 "metadata '%.64s' must be a string of at most %d bytes of UTF-8 text",
                                                 e->string, SECRET_METADATA_VALUE_MAX) ?: -EINVAL;
                }
                text = cJSON_PrintUnformatted(metadata);
        } else
                text = strdup("{}");
        if (!text)
                return -ENOMEM;
        if (ret_json)
                *ret_json = TAKE_PTR(text);
        return 0;
}

cJSON *secret_metadata_json(const Secret *s) {
        cJSON *md = cJSON_Parse(s->rec.metadata);

        if (cJSON_IsObject(md))
                return md;
        cJSON_Delete(md);
        return cJSON_CreateObject();
}

Secret *secret_find(Manager *m, const char *ref) {
        if (!ref)
                return NULL;
        for (Secret *s = m->secrets; s; s = s->next)
                if (streq(s->rec.id, ref))
                        return s;
        for (Secret *s = m->secrets; s; s = s->next)
                if (streq(s->rec.name, ref))
                        return s;
        return NULL;
}

size_t secrets_count(Manager *m) {
        size_t n = 0;

        for (Secret *s = m->secrets; s; s = s->next)
                n++;
        return n;
}

static char *value_path(Manager *m, const char *id) {
        char *p;

        return asprintf(&p, "%s/" SECRET_DIR "/%s", m->state_dir, id) < 0 ? NULL : p;
}

static void sync_dir(Manager *m) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int fd = -1;

        if (asprintf(&dir, "%s/" SECRET_DIR, m->state_dir) < 0)
                return;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0)
                (void) fsync(fd);
}

/* The value into its file, whole or not at all (write_file_atomic: a fresh 0600 file fsynced, then renamed). */
static int value_write(Manager *m, const char *id, const char *value, size_t len) {
        _cleanup_free_ char *path = value_path(m, id), *copy = NULL;
        int r;

        if (!path)
                return -ENOMEM;
        copy = strndup(value, len); /* the value has no NUL (secret_value_problem) */
        if (!copy)
                return -ENOMEM;
        r = write_file_atomic(path, copy);
        explicit_bzero(copy, len);
        if (r < 0)
                return r;
        sync_dir(m);
        return 0;
}

static void secret_free(Secret *s) {
        if (!s)
                return;
        secret_record_done(&s->rec);
        free(s);
}

static int secret_new(Manager *m, const char *name, const char *metadata_json, Secret **ret) {
        Secret *s = calloc(1, sizeof *s);
        char hex[17];
        int r;

        if (!s)
                return -ENOMEM;
        /* ids are never used twice, not even after a remove: a binding or a log line names one secret */
        do {
                r = random_hex(hex, 16);
                if (r < 0) {
                        free(s);
                        return r;
                }
                free(s->rec.id);
                if (asprintf(&s->rec.id, "sec-%s", hex) < 0) {
                        s->rec.id = NULL;
                        secret_free(s);
                        return -ENOMEM;
                }
        } while (secret_find(m, s->rec.id));
        s->rec.name = strdup(name);
        s->rec.metadata = strdup(metadata_json ?: "{}");
        if (!s->rec.name || !s->rec.metadata) {
                secret_free(s);
                return -ENOMEM;
        }
        s->rec.created_at = s->rec.updated_at = now_unix();
        s->rec.version = 0;
        *ret = s;
        return 0;
}

static int secret_create(Manager *m, const char *name, const char *value, size_t len, const char *metadata_json,
                         Secret **ret, Error *reterr) {
        Secret *s = NULL;
        int r;

        if (!secret_name_valid(name))
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                 "'%.*s' is not a secret name: 1 to %d letters, digits, '.', '_' and '-', starting "
                                 "with a letter or digit", 64, name, SECRET_NAME_MAX) ?: -EINVAL;
        if (secrets_count(m) >= SECRETS_MAX)
                return error_set(reterr, ERROR_LIMIT_EXCEEDED, "there are already %d secrets: remove some first",
                                 SECRETS_MAX) ?: -E2BIG;
        r = secret_new(m, name, metadata_json, &s);
        if (r < 0)
                return error_set(reterr, ERROR_INTERNAL, "cannot make a secret: %s", strerror(-r)) ?: r;
        s->rec.version = 1;
        r = value_write(m, s->rec.id, value, len);
        if (r >= 0) {
                r = store_put_secret(m->store, &s->rec);
                if (r < 0) {
                        _cleanup_free_ char *path = value_path(m, s->rec.id);
                        if (path)
                                (void) unlink(path);
                }
        }
        if (r < 0) {
                secret_free(s);
                return error_set(reterr, error_code_from_errno(r), "cannot store the secret: %s", strerror(-r)) ?: r;
        }
        /* at the end: the list is oldest first, as the store loads it and E2B's pages go */
        Secret **tail = &m->secrets;
        while (*tail)
                tail = &(*tail)->next;
        *tail = s;
        *ret = s;
        return 0;
}

/* A new version of s: the value's file is replaced first (a crash after it leaves the new value under the old
 * version number, which the next set counts past), then the row. */
static int secret_new_version(Manager *m, Secret *s, const char *value, size_t len, const char *metadata_json,
                              Error *reterr) {
        SecretRecord next = s->rec;
        _cleanup_free_ char *metadata = NULL;
        int r;

        if (metadata_json) {
                metadata = strdup(metadata_json);
                if (!metadata)
                        return -ENOMEM;
                next.metadata = metadata;
        }
        next.version++;
        next.updated_at = now_unix();
        r = value_write(m, s->rec.id, value, len);
        if (r >= 0)
                r = store_put_secret(m->store, &next);
        if (r < 0)
                return error_set(reterr, error_code_from_errno(r), "cannot store the secret: %s", strerror(-r)) ?: r;
        if (metadata) {
                free(s->rec.metadata);
                s->rec.metadata = TAKE_PTR(metadata);
        }
        s->rec.version = next.version;
        s->rec.updated_at = next.updated_at;
        s->value_missing = false;
        return 0;
}

int secret_set(Manager *m, const char *ref, const char *value, size_t len, const char *metadata_json,
               SecretSetMode mode, Secret **ret, bool *ret_created, Error *reterr) {
        const char *problem = secret_value_problem(value, len);
        Secret *s = secret_find(m, ref);
        int r;

        if (problem)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s", problem) ?: -EINVAL;
        if (s && mode == SECRET_CREATE)
                return error_set(reterr, ERROR_NAME_IN_USE,
                                 "there is already a secret named '%s': set a new version of it, or remove it first",
                                 s->rec.name) ?: -EEXIST;
        if (!s && mode == SECRET_UPDATE)
                return error_set(reterr, ERROR_SECRET_NOT_FOUND, "no secret '%.*s'; 'spacectl secret ls' lists them",
                                 64, ref) ?: -ENOENT;
        if (s)
                r = secret_new_version(m, s, value, len, metadata_json, reterr);
        else
                r = secret_create(m, ref, value, len, metadata_json, &s, reterr);
        if (r == -ENOMEM || (r < 0 && reterr && IN_SET(reterr->code, ERROR_INTERNAL, ERROR_NO_SPACE)))
                log_error("cannot set secret %.64s: %s", ref, reterr && reterr->message ? reterr->message : strerror(-r));
        if (r < 0)
                return r;
        log_info("secret %s %s (version %lld)", s->rec.name, s->rec.version == 1 ? "created" : "set",
                 (long long) s->rec.version);
        if (ret_created)
                *ret_created = s->rec.version == 1;
        if (ret)
                *ret = s;
        return 0;
}

int secret_remove(Manager *m, Secret *s, Error *reterr) {
        _cleanup_free_ char *path = value_path(m, s->rec.id);
        int r;

        if (!path)
                return -ENOMEM;
        r = store_delete_secret(m->store, s->rec.id);
        if (r < 0) {
                log_error_errno(r, "cannot remove secret %s from the store", s->rec.name);
                return error_set(reterr, error_code_from_errno(r), "cannot remove the secret: %s", strerror(-r)) ?: r;
        }
        log_info("secret %s removed", s->rec.name);
        if (unlink(path) < 0 && errno != ENOENT)
                log_warning_errno(-errno, "secret %s: cannot remove its value file %s", s->rec.name, path);
        else
                sync_dir(m);
        for (Secret **p = &m->secrets; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        break;
                }
        secret_free(s);
        return 0;
}

void secret_value_free(char *value, size_t len) {
        if (!value)
                return;
        explicit_bzero(value, len);
        free(value);
}

int secret_value_read(Manager *m, Secret *s, char **ret, size_t *ret_len) {
        _cleanup_free_ char *path = value_path(m, s->rec.id);
        _cleanup_close_ int fd = -1;
        char *buf;
        ssize_t n;
        int64_t now;

        if (!path)
                return -ENOMEM;
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        buf = malloc(SECRET_VALUE_MAX + 1);
        if (!buf)
                return -ENOMEM;
        n = read(fd, buf, SECRET_VALUE_MAX + 1);
        if (n <= 0 || n > SECRET_VALUE_MAX || secret_value_problem(buf, (size_t) n)) {
                int r = n < 0 ? -errno : -EBADMSG;
                secret_value_free(buf, SECRET_VALUE_MAX + 1);
                return r;
        }
        buf[n] = '\0';
        now = now_unix();
        if (s->rec.last_used_at != now) {
                s->rec.last_used_at = now;
                (void) store_touch_secret(m->store, s->rec.id, now);
        }
        *ret = buf;
        *ret_len = (size_t) n;
        return 0;
}

/* Files in the directory that no row names: a create that crashed before its row, or a write's leftover. */
static void remove_leftovers(Manager *m, const char *dir) {
        _cleanup_closedir_ DIR *d = opendir(dir);
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d))) {
                Secret *s = NULL;

                if (de->d_name[0] == '.')
                        continue;
                for (s = m->secrets; s && !streq(s->rec.id, de->d_name); s = s->next)
                        ;
                if (s)
                        continue;
                if (unlinkat(dirfd(d), de->d_name, 0) == 0)
                        log_info("removed %s/%s: a secret's value that no secret names (a set interrupted)", dir,
                                 de->d_name);
        }
}

int secrets_load(Manager *m, Error *reterr) {
        _cleanup_free_ char *dir = NULL;
        SecretRecord *recs = NULL;
        size_t n = 0;
        int r;

        if (asprintf(&dir, "%s/" SECRET_DIR, m->state_dir) < 0)
                return -ENOMEM;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return error_set(reterr, ERROR_INTERNAL, "cannot make %s: %m", dir) ?: -errno;
        /* Made by us or not, no one else reads it */
        if (chmod(dir, 0700) < 0)
                return error_set(reterr, ERROR_INTERNAL, "cannot restrict %s to its owner: %m", dir) ?: -errno;
        r = store_load_secrets(m->store, &recs, &n);
        if (r < 0)
                return error_set(reterr, ERROR_INTERNAL, "cannot read the secrets from the store: %s", strerror(-r)) ?: r;
        for (size_t i = n; i > 0; i--) {
                Secret *s = calloc(1, sizeof *s);
                struct stat st;

                if (!s) {
                        for (size_t j = 0; j < i; j++)
                                secret_record_done(&recs[j]);
                        free(recs);
                        return -ENOMEM;
                }
                s->rec = recs[i - 1];
                _cleanup_free_ char *path = value_path(m, s->rec.id);
                if (path && (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))) {
                        s->value_missing = true;
                        log_warning("secret %s has no value file (%s): set it again with 'spacectl secret set %s'",
                                    s->rec.name, path, s->rec.name);
                }
                s->next = m->secrets;
                m->secrets = s;
        }
        free(recs);
        remove_leftovers(m, dir);
        return 0;
}

void secrets_free(Manager *m) {
        while (m->secrets) {
                Secret *s = m->secrets;
                m->secrets = s->next;
                secret_free(s);
        }
}
