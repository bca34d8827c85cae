/* SPDX-License-Identifier: Apache-2.0 */
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
#include "core/log.h"
#include "core/util.h"
#include "volume/volume-internal.h"

/* Volumes: the rows in the store and their directories under $state/volume-data (volume.h). A volume's directory
 * is made before its row and removed after it, so that at start a directory no row names is a leftover, never
 * a volume a user was told exists. */

#define VOLUME_DIR "volume-data" /* not "volumes": the disk store's sandbox disks are there */

Volume *volume_find(Manager *m, const char *ref) {
        if (!ref)
                return NULL;
        for (Volume *v = m->volumes; v; v = v->next)
                if (streq(v->rec.id, ref))
                        return v;
        for (Volume *v = m->volumes; v; v = v->next)
                if (streq(v->rec.name, ref))
                        return v;
        return NULL;
}

Volume *volume_find_by_token(Manager *m, const char *id, const char *token) {
        Volume *v;

        if (!id || !token || strlen(token) != VOLUME_TOKEN_LEN)
                return NULL;
        for (v = m->volumes; v && !streq(v->rec.id, id); v = v->next)
                ;
        if (!v || strlen(v->rec.token) != VOLUME_TOKEN_LEN || !memeq_const_time(v->rec.token, token, VOLUME_TOKEN_LEN))
                return NULL;
        return v;
}

size_t volumes_count(Manager *m) {
        size_t n = 0;

        for (Volume *v = m->volumes; v; v = v->next)
                n++;
        return n;
}

uint64_t volume_quota_default(Manager *m) {
        return m->config.volume_quota ?: VOLUME_QUOTA_DEFAULT;
}

uint64_t volume_entries_max(Manager *m) {
        return m->config.volume_entries_max ?: VOLUME_ENTRIES_MAX_DEFAULT;
}

static char *volume_dir(Manager *m, const char *id) {
        char *p;

        return asprintf(&p, "%s/" VOLUME_DIR "%s%s", m->state_dir, id ? "/" : "", id ?: "") < 0 ? NULL : p;
}

static void volume_free(Volume *v) {
        if (!v)
                return;
        volume_uploads_orphan(v);
        if (v->root_fd >= 0)
                close(v->root_fd);
        volume_record_done(&v->rec);
        free(v);
}
static void volume_freep(Volume **v) {
        volume_free(*v);
}

static bool under(const char *path, const char *dir) {
        size_t n = strlen(dir);

        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int volume_root(Manager *m, Volume *v, int *ret_fd, Error *reterr) {
        if (v->root_fd < 0) {
                _cleanup_free_ char *dir = volume_dir(m, v->rec.id);

                if (!dir)
                        return -ENOMEM;
                v->root_fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (v->root_fd < 0) {
                        int r = -errno;
                        log_error_errno(r, "volume %s: cannot open its directory %s", v->rec.name, dir);
                        return error_set(reterr, ERROR_IO_ERROR, "volume '%s': its directory is gone (%s)",
                                         v->rec.name, strerror(-r)) ?: r;
                }
        }
        *ret_fd = v->root_fd;
        return 0;
}

int volume_usage(Manager *m, Volume *v, uint64_t *ret, Error *reterr) {
        if (!v->usage_known) {
                _cleanup_close_ int fd = -1;
                uint64_t sum = 0, entries = 0;
                unsigned stale = 0;
                int root, r;

                r = volume_root(m, v, &root, reterr);
                if (r < 0)
                        return r;
                fd = openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0 || (r = volume_walk_usage(fd, 0, &sum, &entries, &stale)) < 0) {
                        r = fd < 0 ? -errno : r;
                        log_error_errno(r, "volume %s: cannot count its usage", v->rec.name);
                        return error_set(reterr, ERROR_IO_ERROR, "volume '%s': cannot count its usage: %s",
                                         v->rec.name, strerror(-r)) ?: r;
                }
                if (stale > 0)
                        log_info("volume %s: removed %u unfinished write(s) left by an earlier run", v->rec.name,
                                 stale);
                v->usage = sum;
                v->entries = entries;
                v->usage_known = true;
        }
        *ret = v->usage;
        return 0;
}

static int volume_new(Manager *m, const char *name, uint64_t quota, Volume **ret) {
        _cleanup_(volume_freep) Volume *v = calloc(1, sizeof *v);
        char hex[17], token[VOLUME_TOKEN_LEN + 1];
        int r;

        if (!v)
                return -ENOMEM;
        v->root_fd = -1;
        /* ids are never used twice, not even after a remove */
        do {
                r = random_hex(hex, 16);
                if (r < 0)
                        return r;
                free(v->rec.id);
                if (asprintf(&v->rec.id, "vol-%s", hex) < 0) {
                        v->rec.id = NULL;
                        return -ENOMEM;
                }
        } while (volume_find(m, v->rec.id));
        r = random_hex(token, VOLUME_TOKEN_LEN);
        if (r < 0)
                return r;
        v->rec.token = strdup(token);
        v->rec.name = strdup(name);
        if (!v->rec.name || !v->rec.token)
                return -ENOMEM;
        v->rec.quota = quota;
        v->rec.created_at = now_unix();
        v->usage_known = true; /* empty */
        *ret = TAKE_PTR(v);
        return 0;
}

int volume_create(Manager *m, const char *name, uint64_t quota, Volume **ret, Error *reterr) {
        _cleanup_(volume_freep) Volume *v = NULL;
        _cleanup_free_ char *dir = NULL;
        int r;

        if (!volume_name_valid(name))
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                 "'%.64s' is not a volume name: 1 to %d letters, digits, '.', '_' and '-', starting "
                                 "with a letter or digit", name ?: "", VOLUME_NAME_MAX) ?: -EINVAL;
        if (quota > VOLUME_QUOTA_MAX)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "a volume's quota is at most 1P (%llu bytes)",
                                 (unsigned long long) VOLUME_QUOTA_MAX) ?: -EINVAL;
        if (volume_find(m, name))
                return error_set(reterr, ERROR_NAME_IN_USE, "there is already a volume named '%s'", name) ?: -EEXIST;
        if (volumes_count(m) >= VOLUMES_MAX)
                return error_set(reterr, ERROR_LIMIT_EXCEEDED, "there are already %d volumes: remove some first",
                                 VOLUMES_MAX) ?: -E2BIG;
        r = volume_new(m, name, quota ?: volume_quota_default(m), &v);
        if (r < 0)
                return error_set(reterr, ERROR_INTERNAL, "cannot make a volume: %s", strerror(-r)) ?: r;
        dir = volume_dir(m, v->rec.id);
        if (!dir)
                return -ENOMEM;
        if (mkdir(dir, 0700) < 0) {
                r = -errno;
                log_error_errno(r, "cannot make volume directory %s", dir);
                return error_set(reterr, error_code_from_errno(r), "cannot make the volume's directory: %s",
                                 strerror(-r)) ?: r;
        }
        /* its root is every user's to write in, in every sandbox that mounts it, as E2B's are (a sandbox's
         * default user writes there): VOLUME_ROOT_MODE until someone changes it */
        r = volume_root_mode_init(dir);
        if (r < 0) {
                (void) rmdir(dir);
                return error_set(reterr, ERROR_INTERNAL, "cannot set the volume's root mode: %s", strerror(-r)) ?: r;
        }
        r = store_put_volume(m->store, &v->rec);
        if (r < 0) {
                (void) rmdir(dir);
                log_error_errno(r, "cannot store volume %s", name);
                return error_set(reterr, error_code_from_errno(r), "cannot store the volume: %s", strerror(-r)) ?: r;
        }
        log_info("volume %s created (%s, quota %llu bytes)", v->rec.name, v->rec.id, (unsigned long long) v->rec.quota);
        /* at the end: oldest first, as the store loads them */
        Volume **tail = &m->volumes;
        while (*tail)
                tail = &(*tail)->next;
        *tail = v;
        *ret = TAKE_PTR(v);
        return 0;
}

int volume_root_mode_init(const char *dir) {
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        return volume_meta_set(fd, -1, -1, VOLUME_ROOT_MODE);
}

/* Its files: with the row gone, a failure here leaves a leftover that the next start removes. */
static void volume_remove_files(Manager *m, Volume *v) {
        _cleanup_free_ char *dir = volume_dir(m, NULL);
        _cleanup_close_ int fd = -1;
        int r;

        fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (fd < 0)
                return;
        r = volume_remove_tree_at(fd, v->rec.id, 0, NULL, NULL);
        if (r < 0)
                log_warning_errno(r, "volume %s: cannot remove all of %s/%s; the next start tries again", v->rec.name,
                                  dir, v->rec.id);
}

static VolumeUsersFn volume_users;

void volume_set_users(VolumeUsersFn fn) {
        volume_users = fn;
}

/* ERROR_VOLUME_IN_USE naming (some of) the sandboxes that mount v, or 0 when none does. */
static int refuse_in_use(Manager *m, Volume *v, Error *reterr) {
        _cleanup_strv_free_ char **ids = NULL;
        char list[256] = "";
        size_t n = 0, len = 0;
        int r;

        if (!volume_users)
                return 0;
        r = volume_users(m, v->rec.id, &ids);
        if (r < 0)
                return error_set(reterr, ERROR_INTERNAL, "cannot tell which sandboxes mount volume %s: %s",
                                 v->rec.name, strerror(-r)) ?: r;
        for (char **i = ids; i && *i; i++, n++)
                if (n < 4 && len + strlen(*i) + 3 < sizeof list)
                        len += (size_t) snprintf(list + len, sizeof list - len, "%s%s", n ? ", " : "", *i);
        if (n == 0)
                return 0;
        return error_set(reterr, ERROR_VOLUME_IN_USE,
                         "volume '%s' is mounted in %zu sandbox%s (%s%s): remove %s first", v->rec.name, n,
                         n == 1 ? "" : "es", list, n > 4 ? ", ..." : "", n == 1 ? "it" : "them") ?: -EBUSY;
}

int volume_remove(Manager *m, Volume *v, Error *reterr) {
        int r;

        r = refuse_in_use(m, v, reterr);
        if (r < 0)
                return r;
        r = store_delete_volume(m->store, v->rec.id);
        if (r < 0) {
                log_error_errno(r, "cannot remove volume %s from the store", v->rec.name);
                return error_set(reterr, error_code_from_errno(r), "cannot remove the volume: %s", strerror(-r)) ?: r;
        }
        for (Volume **p = &m->volumes; *p; p = &(*p)->next)
                if (*p == v) {
                        *p = v->next;
                        break;
                }
        if (v->root_fd >= 0)
                v->root_fd = safe_close(v->root_fd);
        volume_remove_files(m, v);
        log_info("volume %s removed (%s)", v->rec.name, v->rec.id);
        volume_free(v);
        return 0;
}

int volume_mount_check(Manager *m, const char *ref, const char *path, Volume **ret, char **ret_path,
                       Error *reterr) {
        _cleanup_free_ char *norm = NULL;
        Volume *v = volume_find(m, ref);
        char *abs;

        if (!v)
                return error_set(reterr, ERROR_VOLUME_NOT_FOUND,
                                 "no volume '%.64s' to mount; 'spacectl volume ls' lists them", ref ?: "") ?: -ENOENT;
        if (!path || path[0] != '/')
                return error_set(reterr, ERROR_INVALID_PATH, "the mount path of volume '%s' must be absolute",
                                 v->rec.name) ?: -EINVAL;
        if (volume_path_normalize(path, &norm, reterr) < 0)
                return -EINVAL;
        if (!*norm || under(norm, "proc") || under(norm, "sys") || under(norm, "dev"))
                return error_set(reterr, ERROR_INVALID_PATH,
                                 "volume '%s' cannot be mounted at %.256s: not over /, /proc, /sys or /dev",
                                 v->rec.name, path) ?: -EINVAL;
        if (asprintf(&abs, "/%s", norm) < 0)
                return -ENOMEM;
        *ret = v;
        *ret_path = abs;
        return 0;
}

/* Directories under $state/volume-data that no row names: a create that crashed before its row, a remove after. */
static void remove_leftovers(Manager *m, int dirfd) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd = dup(dirfd);

        if (fd < 0 || !(d = fdopendir(fd))) {
                safe_close(fd);
                return;
        }
        while ((de = readdir(d))) {
                Volume *v;

                if (de->d_name[0] == '.')
                        continue;
                for (v = m->volumes; v && !streq(v->rec.id, de->d_name); v = v->next)
                        ;
                if (!v && volume_remove_tree_at(dirfd, de->d_name, 0, NULL, NULL) == 0)
                        log_info("removed volume-data/%s: a volume that no row names (a create or remove interrupted)",
                                 de->d_name);
        }
}

int volumes_load(Manager *m, Error *reterr) {
        _cleanup_free_ char *dir = volume_dir(m, NULL);
        _cleanup_close_ int fd = -1;
        VolumeRecord *recs = NULL;
        size_t n = 0;
        int r;

        if (!dir)
                return -ENOMEM;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return error_set(reterr, ERROR_INTERNAL, "cannot make %s: %m", dir) ?: -errno;
        if (chmod(dir, 0700) < 0)
                return error_set(reterr, ERROR_INTERNAL, "cannot restrict %s to its owner: %m", dir) ?: -errno;
        r = store_load_volumes(m->store, &recs, &n);
        if (r < 0)
                return error_set(reterr, ERROR_INTERNAL, "cannot read the volumes from the store: %s", strerror(-r))
                        ?: r;
        for (size_t i = n; i > 0; i--) {
                Volume *v = calloc(1, sizeof *v);

                if (!v) {
                        for (size_t j = 0; j < i; j++)
                                volume_record_done(&recs[j]);
                        free(recs);
                        return -ENOMEM;
                }
                v->rec = recs[i - 1];
                v->root_fd = -1;
                v->next = m->volumes;
                m->volumes = v;
        }
        free(recs);
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0)
                remove_leftovers(m, fd);
        for (Volume *v = m->volumes; v; v = v->next)
                if (faccessat(fd, v->rec.id, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                        log_warning("volume %s has no directory (%s/%s): its files are lost; remove it with "
                                    "'spacectl volume rm %s'", v->rec.name, dir, v->rec.id, v->rec.name);
        return 0;
}

void volumes_free(Manager *m) {
        while (m->volumes) {
                Volume *v = m->volumes;
                m->volumes = v->next;
                volume_free(v);
        }
}
