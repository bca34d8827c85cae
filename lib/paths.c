/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "paths.h"

static int dup_or_enomem(const char *s, char **ret) {
        char *c = strdup(s);
        if (!c)
                return -ENOMEM;
        *ret = c;
        return 0;
}

static int xasprintf(char **ret, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int xasprintf(char **ret, const char *fmt, ...) {
        va_list ap;
        char *s;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static const char *env_nonempty(const char *name) {
        const char *v = secure_getenv(name);
        return v && *v ? v : NULL;
}

int space_socket_path(char **ret) {
        const char *e;
        char user_run[64];

        if ((e = env_nonempty("SPACE_SOCKET")))
                return dup_or_enomem(e, ret);
        if ((e = env_nonempty("XDG_RUNTIME_DIR")))
                return xasprintf(ret, "%s/space/api.sock", e);
        snprintf(user_run, sizeof user_run, "/run/user/%u", (unsigned) getuid());
        if (access(user_run, W_OK) == 0)
                return xasprintf(ret, "%s/space/api.sock", user_run);
        return xasprintf(ret, "/tmp/space-%u/api.sock", (unsigned) getuid());
}

int space_runtime_dir(char **ret) {
        _cleanup_free_ char *sock = NULL;
        const char *e;
        char *slash;
        int r;

        if ((e = env_nonempty("SPACE_RUNTIME_DIR")))
                return dup_or_enomem(e, ret);
        r = space_socket_path(&sock);
        if (r < 0)
                return r;
        slash = strrchr(sock, '/');
        if (!slash || slash == sock)
                return -EINVAL;
        *slash = 0;
        *ret = TAKE_PTR(sock);
        return 0;
}

static int xdg_path(const char *override, const char *xdg, const char *home_rel, const char *leaf, char **ret) {
        const char *e;

        if ((e = env_nonempty(override)))
                return dup_or_enomem(e, ret);
        if ((e = env_nonempty(xdg)))
                return xasprintf(ret, "%s/%s", e, leaf);
        if (!(e = env_nonempty("HOME")))
                return -ENOENT;
        return xasprintf(ret, "%s/%s/%s", e, home_rel, leaf);
}

int space_state_dir(char **ret) {
        return xdg_path("SPACE_STATE_DIR", "XDG_STATE_HOME", ".local/state", "space", ret);
}

int space_config_path(char **ret) {
        return xdg_path("SPACE_CONFIG", "XDG_CONFIG_HOME", ".config", "space/spaced.conf", ret);
}

int space_cache_dir(char **ret) {
        return xdg_path("SPACE_CACHE_DIR", "XDG_CACHE_HOME", ".cache", "space", ret);
}

int space_lib_dir(char **ret) {
        const char *e = env_nonempty("SPACE_LIB_DIR");
        return dup_or_enomem(e ? e : SPACE_PKGLIBDIR, ret);
}

int space_mkdir_parents(const char *path) {
        char buf[PATH_MAX];
        size_t n = strlen(path);

        if (n >= sizeof buf)
                return -ENAMETOOLONG;
        memcpy(buf, path, n + 1);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = 0;
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        return 0;
}

int space_mkdir_p(const char *path, unsigned mode) {
        int r;

        if (path[0] == 0 || strlen(path) >= PATH_MAX)
                return -EINVAL;
        r = space_mkdir_parents(path);
        if (r < 0)
                return r;
        if (mkdir(path, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int space_private_dir_check(const char *path, struct stat *ret_st) {
        _cleanup_close_ int fd = -1;
        struct stat st;

        /* O_NOFOLLOW: a symlink planted in /tmp would point us at a directory someone else can swap. */
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOTDIR && lstat(path, &st) == 0 && S_ISLNK(st.st_mode) ? -ELOOP : -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (ret_st)
                *ret_st = st;
        if (st.st_uid != geteuid())
                return -EPERM;
        if (st.st_mode & 0077)
                return -EACCES;
        return 0;
}
