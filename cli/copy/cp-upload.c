/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "copy/cp.h"
#include "copy/dl-archive.h"
#include "macro.h"

/*
 * Host -> sandbox. The source is walked by archive_read_disk (or read from a tar stream on stdin with
 * archive_read); every entry becomes one request: mkdir, a streamed PUT whose body curl pulls from
 * archive_read_data(), or symlink. Directories get their mode and mtime last, deepest first, because adding
 * to a directory changes its mtime.
 */

#define READ_BLOCK (64U * 1024U)

typedef struct DirFix {
        char *path;
        unsigned mode;
        int64_t mtime;
        int64_t uid, gid;
} DirFix;

typedef struct Upload {
        CpContext *c;
        struct archive *a;
        const char *what;        /* the local name being read, for messages */
        bool tar;                /* from a tar stream: parents may be missing */
        DirFix *dirs;
        size_t n_dirs, cap_dirs;
} Upload;

static void upload_done(Upload *u) {
        for (size_t i = 0; i < u->n_dirs; i++)
                free(u->dirs[i].path);
        free(u->dirs);
        if (u->a)
                libarchive.archive_read_free(u->a);
}

static ssize_t read_data(void *buf, size_t max, void *userdata) {
        Upload *u = userdata;
        la_ssize_t n = libarchive.archive_read_data(u->a, buf, max);

        if (n < 0) {
                log_error("cp: reading %s: %s", u->what, libarchive.archive_error_string(u->a) ?: "read error");
                return -ECANCELED;
        }
        cp_progress(u->c, (uint64_t) n, false);
        return n;
}

static int note_dir(Upload *u, const char *path, unsigned mode, int64_t mtime, int64_t uid, int64_t gid) {
        if (u->n_dirs == u->cap_dirs) {
                size_t cap = u->cap_dirs ? u->cap_dirs * 2 : 64;
                DirFix *d = realloc(u->dirs, cap * sizeof *d);

                if (!d)
                        return -ENOMEM;
                u->dirs = d;
                u->cap_dirs = cap;
        }
        u->dirs[u->n_dirs] = (DirFix) { .path = strdup(path), .mode = mode, .mtime = mtime, .uid = uid, .gid = gid };
        if (!u->dirs[u->n_dirs].path)
                return -ENOMEM;
        u->n_dirs++;
        return 0;
}

static int fix_dirs(Upload *u) {
        for (size_t i = u->n_dirs; i > 0; i--) {
                DirFix *d = &u->dirs[i - 1];
                int r = cp_remote_attrs(u->c, d->path, (int) d->mode, d->mtime, d->uid, d->gid);

                if (r < 0)
                        return r;
        }
        return 0;
}

/* The parent directory of path in the sandbox, made if missing (tar streams need not list it). */
static int ensure_parent(Upload *u, const char *path) {
        _cleanup_free_ char *parent = strdup(path);
        char *slash;
        int r;

        if (!parent)
                return -ENOMEM;
        slash = strrchr(parent, '/');
        if (!slash || slash == parent)
                return 0;
        *slash = 0;
        r = cp_remote_mkdir(u->c, parent, 0755, true, -1, -1);
        return r == -EEXIST ? 0 : r;
}

/* One entry to path in the sandbox. */
static int put_entry(Upload *u, struct archive_entry *e, const char *path) {
        CpContext *c = u->c;
        unsigned mode = libarchive.archive_entry_perm(e) & 07777;
        int64_t mtime = libarchive.archive_entry_mtime(e);
        /* without -a the daemon decides (or --chown): the sandbox's user where it could write, root elsewhere */
        int64_t uid = c->archive ? libarchive.archive_entry_uid(e) : -1;
        int64_t gid = c->archive ? libarchive.archive_entry_gid(e) : -1;
        const char *name = libarchive.archive_entry_pathname(e);
        CpEntry st = {};
        int r;

        if (libarchive.archive_entry_hardlink(e)) {
                log_error("cp: warning: skipping %s: a hard link (to %s) in the tar stream; copy the file itself", name,
                          libarchive.archive_entry_hardlink(e));
                return 0;
        }
        switch (libarchive.archive_entry_filetype(e)) {
        case AE_IFDIR:
                r = cp_remote_mkdir(c, path, mode, u->tar, uid, gid);
                if (r == -EEXIST) {
                        r = cp_remote_stat(c, path, true, &st);
                        if (r == 0 && st.type != CP_DIR) {
                                log_error("cp: cannot copy directory %s over %s in sandbox '%s': it is not a directory",
                                          name, path, c->ref);
                                r = -ENOTDIR;
                        }
                        cp_entry_done(&st);
                }
                if (r < 0)
                        return r;
                return note_dir(u, path, mode, mtime, uid, gid);

        case AE_IFREG:
                u->what = name;
                r = cp_remote_put(c, path, mode, mtime, uid, gid, u->tar, read_data, u);
                if (r < 0)
                        return r;
                c->files++;
                cp_progress(c, 0, false);
                return 0;

        case AE_IFLNK:
                if (u->tar && (r = ensure_parent(u, path)) < 0)
                        return r;
                r = cp_remote_symlink(c, path, libarchive.archive_entry_symlink(e) ?: "", uid, gid);
                if (r == -EEXIST) {
                        /* replace what is there, unless it is a directory with contents */
                        r = cp_remote_remove(c, path, false);
                        if (r >= 0 || r == -ENOENT)
                                r = cp_remote_symlink(c, path, libarchive.archive_entry_symlink(e) ?: "", uid, gid);
                }
                if (r < 0)
                        return r;
                c->files++;
                return cp_remote_attrs(c, path, -1, mtime, -1, -1);

        default:
                cp_note_skipped(c, name);
                return 0;
        }
}

/* ---- a local path ---- */

static bool ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), k = strlen(suffix);

        return n >= k && streq(s + n - k, suffix);
}

/* Where docker's rules put a local source in the sandbox: *ret_target. */
static int upload_target(CpContext *c, const char *clean, bool src_dir, bool contents, const char *dst,
                         char **ret_target) {
        _cleanup_free_ char *parent = NULL;
        const char *base;
        CpEntry de = {}, pe = {};
        int r;

        r = cp_remote_stat(c, dst, true, &de);
        if (r < 0 && r != -ENOENT)
                return r;
        if (r == 0) {
                bool dir = de.type == CP_DIR;

                cp_entry_done(&de);
                if (dir) {
                        base = strrchr(clean, '/');
                        base = base && base[1] ? base + 1 : clean;
                        *ret_target = contents || streq(clean, "/") ? strdup(dst) : cp_join(dst, base);
                        return *ret_target ? 0 : -ENOMEM;
                }
                if (src_dir) {
                        log_error("cp: cannot copy a directory to a file: %s in sandbox '%s' is not a directory", dst,
                                  c->ref);
                        return -ENOTDIR;
                }
                *ret_target = strdup(dst);
                return *ret_target ? 0 : -ENOMEM;
        }
        if (ends_with(dst, "/") && !src_dir) {
                log_error("cp: sandbox '%s' has no directory %s to copy into: No such file or directory", c->ref, dst);
                return -ENOENT;
        }
        /* a new name: its directory must exist */
        parent = strdup(dst);
        if (!parent)
                return -ENOMEM;
        while (strlen(parent) > 1 && ends_with(parent, "/"))
                parent[strlen(parent) - 1] = 0;
        *strrchr(parent, '/') = 0;
        if (!parent[0])
                strcpy(parent, "/");
        r = cp_remote_stat(c, parent, true, &pe);
        if (r == -ENOENT)
                log_error("cp: sandbox '%s' has no %s: No such file or directory", c->ref, parent);
        else if (r == 0 && pe.type != CP_DIR) {
                log_error("cp: %s in sandbox '%s' is not a directory", parent, c->ref);
                r = -ENOTDIR;
        }
        cp_entry_done(&pe);
        if (r < 0)
                return r;
        *ret_target = strdup(dst);
        return *ret_target ? 0 : -ENOMEM;
}

static int upload_path(CpContext *c, const char *src, const char *dst) {
        _cleanup_free_ char *clean = strdup(src), *target = NULL;
        _cleanup_(upload_done) Upload u = { .c = c };
        bool contents, slash;
        struct stat st;
        size_t n;
        int r;

        if (!clean)
                return -ENOMEM;
        /* SRC/. copies what is in SRC; SRC/ insists that SRC is a directory */
        contents = streq(src, ".") || ends_with(src, "/.");
        n = strlen(clean);
        if (contents)
                clean[n -= 1] = 0;
        slash = n > 1 && clean[n - 1] == '/';
        while (n > 1 && clean[n - 1] == '/')
                clean[--n] = 0;
        if (!clean[0])
                strcpy(clean, ".");

        if ((c->follow ? stat(clean, &st) : lstat(clean, &st)) < 0) {
                log_error("cp: %s: %m", src);
                return -errno;
        }
        if ((slash || contents) && !S_ISDIR(st.st_mode)) {
                log_error("cp: %s: Not a directory", src);
                return -ENOTDIR;
        }
        r = upload_target(c, clean, S_ISDIR(st.st_mode), contents, dst, &target);
        if (r < 0)
                return r;

        u.a = libarchive.archive_read_disk_new();
        if (!u.a)
                return -ENOMEM;
        (void) libarchive.archive_read_disk_set_behavior(u.a, ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL |
                                                           ARCHIVE_READDISK_NO_FFLAGS);
        /* -L follows a symlink named as SRC, never one inside the tree (docker's rule) */
        if (c->follow)
                (void) libarchive.archive_read_disk_set_symlink_hybrid(u.a);
        else
                (void) libarchive.archive_read_disk_set_symlink_physical(u.a);
        if (libarchive.archive_read_disk_open(u.a, clean) != ARCHIVE_OK) {
                log_error("cp: %s: %s", src, libarchive.archive_error_string(u.a));
                return -EIO;
        }
        for (;;) {
                struct archive_entry *e = libarchive.archive_entry_new();
                _cleanup_free_ char *path = NULL;
                const char *name, *rel;

                if (!e)
                        return -ENOMEM;
                r = libarchive.archive_read_next_header2(u.a, e);
                if (r == ARCHIVE_EOF) {
                        libarchive.archive_entry_free(e);
                        break;
                }
                if (r < ARCHIVE_WARN) {
                        log_error("cp: reading %s: %s", src, libarchive.archive_error_string(u.a));
                        libarchive.archive_entry_free(e);
                        return -EIO;
                }
                if (r == ARCHIVE_WARN)
                        log_error("cp: warning: %s", libarchive.archive_error_string(u.a));
                name = libarchive.archive_entry_pathname(e);
                rel = name && strncmp(name, clean, strlen(clean)) == 0 ? name + strlen(clean) : NULL;
                if (!rel) {
                        log_error("cp: unexpected name %s while walking %s", name ?: "?", src);
                        libarchive.archive_entry_free(e);
                        return -EIO;
                }
                if (libarchive.archive_read_disk_can_descend(u.a))
                        (void) libarchive.archive_read_disk_descend(u.a);
                path = cp_join(target, rel);
                r = path ? put_entry(&u, e, path) : -ENOMEM;
                libarchive.archive_entry_free(e);
                if (r < 0)
                        return r;
        }
        return fix_dirs(&u);
}

/* ---- a tar stream on stdin ---- */

/* The name of a tar entry below the destination: leading "./" and "/" dropped; NULL when it has a ".."
 * component (never extracted). "" is the destination itself. */
static const char *tar_name(const char *name) {
        for (;;) {
                if (name[0] == '/')
                        name++;
                else if (name[0] == '.' && name[1] == '/')
                        name += 2;
                else
                        break;
        }
        if (streq(name, "."))
                return "";
        for (const char *p = name; *p;) {
                size_t l = strcspn(p, "/");

                if (l == 2 && p[0] == '.' && p[1] == '.')
                        return NULL;
                p += l;
                while (*p == '/')
                        p++;
        }
        return name;
}

static int upload_tar(CpContext *c, const char *dst) {
        _cleanup_(upload_done) Upload u = { .c = c, .tar = true };
        CpEntry de = {};
        int r;

        r = cp_remote_stat(c, dst, true, &de);
        if (r == -ENOENT)
                log_error("cp: sandbox '%s' has no %s: No such file or directory", c->ref, dst);
        else if (r == 0 && de.type != CP_DIR) {
                log_error("cp: a tar stream is extracted into a directory: %s in sandbox '%s' is not one", dst, c->ref);
                r = -ENOTDIR;
        }
        cp_entry_done(&de);
        if (r < 0)
                return r;

        u.a = libarchive.archive_read_new();
        if (!u.a)
                return -ENOMEM;
        (void) libarchive.archive_read_support_format_all(u.a);
        (void) libarchive.archive_read_support_filter_all(u.a);
        if (libarchive.archive_read_open_fd(u.a, STDIN_FILENO, READ_BLOCK) != ARCHIVE_OK) {
                log_error("cp: reading a tar stream from stdin: %s", libarchive.archive_error_string(u.a));
                return -EIO;
        }
        for (;;) {
                struct archive_entry *e;
                _cleanup_free_ char *path = NULL;
                const char *name;

                r = libarchive.archive_read_next_header(u.a, &e);
                if (r == ARCHIVE_EOF)
                        break;
                if (r < ARCHIVE_WARN) {
                        log_error("cp: reading the tar stream on stdin: %s", libarchive.archive_error_string(u.a));
                        return -EIO;
                }
                name = tar_name(libarchive.archive_entry_pathname(e) ?: "");
                if (!name) {
                        log_error("cp: warning: skipping %s: a name with '..' in the tar stream",
                                  libarchive.archive_entry_pathname(e));
                        continue;
                }
                path = cp_join(dst, name);
                if (!path)
                        return -ENOMEM;
                if (!name[0] && libarchive.archive_entry_filetype(e) != AE_IFDIR)
                        continue; /* "." that is not a directory: nothing sensible to do with it */
                r = put_entry(&u, e, path);
                if (r < 0)
                        return r;
        }
        return fix_dirs(&u);
}

int cp_upload(CpContext *c, const char *src, const char *dst) {
        return streq(src, "-") ? upload_tar(c, dst) : upload_path(c, src, dst);
}
