/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copy/cp.h"
#include "copy/dl-archive.h"
#include "macro.h"

/*
 * Sandbox -> host. The sandbox's tree is walked one directory listing at a time; every entry goes through
 * libarchive: archive_write_disk for a local destination, archive_write (pax) for a tar stream on stdout.
 * The guest is hostile, so what it says is checked twice: names must be single components (not "." or ".."),
 * and archive_write_disk refuses, with ARCHIVE_EXTRACT_SECURE_NODOTDOT, SECURE_SYMLINKS and
 * SECURE_NOABSOLUTEPATHS, anything that would land outside the destination or go through a symlink on the way.
 * A symlink from the sandbox (evil -> /etc) is written as a symlink and never followed; an existing symlink
 * where a file goes is replaced, not written through. A file whose transfer breaks off is removed.
 * What comes out is the user's, like tar's extract as a user: without -a no setuid, setgid or sticky bit and
 * the umask applied; a directory that exists already is left as it is (never chmod'ed or chown'ed, even with
 * -a). A file may not bring more than the size it had when it was listed, nor the copy more than --max-bytes.
 */

typedef struct Download {
        CpContext *c;
        struct archive *w;
        bool tar;                /* a tar stream on stdout */
        const char *name;        /* the local name being written, for messages */
        const char *rpath;       /* and the sandbox's */
        uint64_t size;           /* what the sandbox said it has */
        uint64_t got;            /* what came so far */
        bool owner_warned;
        char *partial;           /* disk: the file a failed transfer was writing, removed at the end */
} Download;

static int write_data(const void *p, size_t n, void *userdata) {
        Download *d = userdata;
        size_t off = 0;

        /* The guest's stat is all the size there is (the daemon does not bound a transfer), and the budget was
         * checked against it: a file that brings more is changing or lying, and is not copied. */
        if (n > d->size - d->got) {
                log_error("cp: %s in sandbox '%s' sent more than the %" PRIu64 " bytes it had when the copy started "
                          "(it is changing?): not copied", d->rpath, d->c->ref, d->size);
                return -EFBIG;
        }
        d->got += n;
        while (off < n) {
                la_ssize_t k = libarchive.archive_write_data(d->w, (const char *) p + off, n - off);

                if (k < 0) {
                        log_error("cp: writing %s: %s", d->name,
                                  libarchive.archive_error_string(d->w) ?: "write error");
                        return -ECANCELED;
                }
                if (k == 0) {
                        log_error("cp: writing %s: nothing was written", d->name);
                        return -ECANCELED;
                }
                off += (size_t) k;
        }
        cp_progress(d->c, n, false);
        return 0;
}

static bool name_valid(const char *n) {
        size_t l = strlen(n);

        return l > 0 && l <= 255 && !strchr(n, '/') && !streq(n, ".") && !streq(n, "..");
}

/* The mode an entry gets here: without -a, the user's like any file they make (a tar stream is an archive,
 * and whoever extracts it applies their own rules). */
static unsigned local_mode(const Download *d, const CpEntry *e) {
        if (d->tar || d->c->archive)
                return e->mode & 07777;
        return e->mode & 0777 & ~(unsigned) d->c->user_umask;
}

/* Writes one entry (and for a file its content, fetched from rpath) under the local name lname. */
static int emit(Download *d, const char *lname, const char *rpath, const CpEntry *e) {
        CpContext *c = d->c;
        struct archive_entry *a;
        struct stat st;
        int r;

        if (e->type == CP_OTHER) {
                cp_note_skipped(c, rpath);
                return 0;
        }
        /* An existing directory is the user's: libarchive would set its mode, owner and times. A symlink in
         * its place is not a directory here, and libarchive replaces it. */
        if (!d->tar && e->type == CP_DIR && lstat(lname, &st) >= 0 && S_ISDIR(st.st_mode))
                return 0;
        if (e->type == CP_FILE && c->max_bytes > 0 &&
            (c->bytes > c->max_bytes || e->size > c->max_bytes - c->bytes)) {
                log_error("cp: %s in sandbox '%s' has %" PRIu64 " bytes: the copy would go past --max-bytes "
                          "(%" PRIu64 " bytes in all, %" PRIu64 " copied)", rpath, c->ref, e->size, c->max_bytes,
                          c->bytes);
                return -EFBIG;
        }
        a = libarchive.archive_entry_new();
        if (!a)
                return -ENOMEM;
        libarchive.archive_entry_set_pathname(a, lname);
        libarchive.archive_entry_set_perm(a, local_mode(d, e));
        libarchive.archive_entry_set_mtime(a, e->mtime, 0);
        /* a tar stream carries the owners; on disk they are ours unless -a */
        libarchive.archive_entry_set_uid(a, d->tar || c->archive ? e->uid : getuid());
        libarchive.archive_entry_set_gid(a, d->tar || c->archive ? e->gid : getgid());
        if (e->type == CP_DIR)
                libarchive.archive_entry_set_filetype(a, AE_IFDIR);
        else if (e->type == CP_SYMLINK) {
                libarchive.archive_entry_set_filetype(a, AE_IFLNK);
                libarchive.archive_entry_set_symlink(a, e->target ?: "");
                libarchive.archive_entry_set_perm(a, 0777);
        } else {
                libarchive.archive_entry_set_filetype(a, AE_IFREG);
                /* a tar header needs the size first; on disk it stays unset, so all that comes is written */
                if (d->tar)
                        libarchive.archive_entry_set_size(a, (la_int64_t) e->size);
        }

        r = libarchive.archive_write_header(d->w, a);
        libarchive.archive_entry_free(a);
        if (r == ARCHIVE_WARN && !d->owner_warned) {
                log_error("cp: warning: %s: %s", lname, libarchive.archive_error_string(d->w));
                d->owner_warned = true;
        } else if (r < ARCHIVE_WARN) {
                log_error("cp: refusing to write %s from sandbox '%s': %s", lname, c->ref,
                          libarchive.archive_error_string(d->w) ?: "?");
                return -EPERM;
        }
        if (e->type != CP_FILE) {
                if (e->type == CP_SYMLINK)
                        c->files++;
                return 0;
        }

        d->name = lname;
        d->rpath = rpath;
        d->size = e->size;
        d->got = 0;
        r = cp_remote_get(c, rpath, write_data, d, NULL);
        if (r < 0) {
                if (!d->tar)
                        d->partial = strdup(lname);
                return r;
        }
        if (d->tar && d->got != e->size)
                log_error("cp: warning: %s shrank while it was copied (%" PRIu64 " bytes, then %" PRIu64
                          "): the tar stream has it padded with zeros to %" PRIu64, rpath, e->size, d->got, e->size);
        r = libarchive.archive_write_finish_entry(d->w);
        if (r < ARCHIVE_WARN) {
                log_error("cp: writing %s: %s", lname, libarchive.archive_error_string(d->w));
                return -EIO;
        }
        c->files++;
        cp_progress(c, 0, false);
        return 0;
}

/* Everything below the sandbox's directory rpath, which is lname here. */
static int walk(Download *d, const char *rpath, const char *lname) {
        CpEntry *l = NULL;
        size_t n = 0;
        int r;

        r = cp_remote_list(d->c, rpath, &l, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n && r >= 0; i++) {
                _cleanup_free_ char *child_r = NULL, *child_l = NULL;

                if (!name_valid(l[i].name)) {
                        log_error("cp: refusing an entry of %s in sandbox '%s' with the name '%s'", rpath, d->c->ref,
                                  l[i].name);
                        r = -EBADMSG;
                        break;
                }
                child_r = cp_join(rpath, l[i].name);
                if (streq(lname, "."))
                        child_l = strdup(l[i].name);
                else if (asprintf(&child_l, "%s/%s", lname, l[i].name) < 0)
                        child_l = NULL;
                if (!child_r || !child_l) {
                        r = -ENOMEM;
                        break;
                }
                r = emit(d, child_l, child_r, &l[i]);
                if (r >= 0 && l[i].type == CP_DIR)
                        r = walk(d, child_r, child_l);
        }
        cp_entries_free(l, n);
        return r;
}

static bool ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), k = strlen(suffix);

        return n >= k && streq(s + n - k, suffix);
}

static char *base_name(const char *p) {
        const char *b = strrchr(p, '/');

        return strdup(b && b[1] ? b + 1 : p);
}

/* Where docker's rules put the sandbox's src here: the directory to work in (*ret_dir, NULL: the current one)
 * and the top entry's name there. */
static int local_target(CpContext *c, const char *src_clean, bool src_dir, bool contents, const char *dst,
                        char **ret_dir, char **ret_top) {
        _cleanup_free_ char *clean = strdup(dst);
        struct stat st;
        char *slash;
        size_t n;

        if (!clean)
                return -ENOMEM;
        n = strlen(clean);
        while (n > 1 && clean[n - 1] == '/')
                clean[--n] = 0;
        if (stat(dst, &st) >= 0) {
                if (S_ISDIR(st.st_mode)) {
                        *ret_dir = TAKE_PTR(clean);
                        *ret_top = contents || streq(src_clean, "/") ? strdup(".") : base_name(src_clean);
                        return *ret_top ? 0 : -ENOMEM;
                }
                if (src_dir) {
                        log_error("cp: cannot copy a directory to a file: %s is not a directory", dst);
                        return -ENOTDIR;
                }
        } else if (errno != ENOENT) {
                log_error("cp: %s: %m", dst);
                return -errno;
        } else if (ends_with(dst, "/") && !src_dir) {
                log_error("cp: %s: No such directory to copy into", dst);
                return -ENOENT;
        }
        /* a file to replace, or a new name in an existing directory */
        slash = strrchr(clean, '/');
        *ret_top = base_name(clean);
        if (!*ret_top)
                return -ENOMEM;
        if (!slash)
                *ret_dir = NULL;
        else {
                slash[slash == clean ? 1 : 0] = 0;
                *ret_dir = TAKE_PTR(clean);
        }
        if (*ret_dir && (stat(*ret_dir, &st) < 0 || !S_ISDIR(st.st_mode))) {
                log_error("cp: %s: %s", *ret_dir, errno == ENOENT ? "No such directory" : "Not a directory");
                return -ENOENT;
        }
        (void) c;
        return 0;
}

int cp_download(CpContext *c, const char *src, const char *dst) {
        _cleanup_free_ char *clean = strdup(src), *dir = NULL, *top = NULL;
        Download d = { .c = c, .tar = streq(dst, "-") };
        bool contents, slash;
        CpEntry e = {};
        size_t n;
        int r, k;

        if (!clean)
                return -ENOMEM;
        contents = ends_with(src, "/.");
        n = strlen(clean);
        if (contents)
                clean[n -= 1] = 0;
        slash = n > 1 && clean[n - 1] == '/';
        while (n > 1 && clean[n - 1] == '/')
                clean[--n] = 0;

        r = cp_remote_stat(c, clean, c->follow, &e);
        if (r == -ENOENT)
                log_error("cp: sandbox '%s' has no %s: No such file or directory", c->ref, clean);
        if (r < 0)
                return r;
        if ((slash || contents) && e.type != CP_DIR) {
                log_error("cp: %s in sandbox '%s' is not a directory", clean, c->ref);
                cp_entry_done(&e);
                return -ENOTDIR;
        }

        if (d.tar) {
                if (isatty(STDOUT_FILENO)) {
                        log_error("cp: refusing to write a tar stream to a terminal: redirect stdout");
                        cp_entry_done(&e);
                        return -ENOTTY;
                }
                top = contents || streq(clean, "/") ? strdup(".") : base_name(clean);
                d.w = libarchive.archive_write_new();
                if (!top || !d.w || libarchive.archive_write_set_format_pax_restricted(d.w) != ARCHIVE_OK ||
                    libarchive.archive_write_open_fd(d.w, STDOUT_FILENO) != ARCHIVE_OK) {
                        log_error("cp: cannot write a tar stream: %s",
                                  d.w ? libarchive.archive_error_string(d.w) : "out of memory");
                        r = -EIO;
                        goto out;
                }
        } else {
                r = local_target(c, clean, e.type == CP_DIR, contents, dst, &dir, &top);
                if (r < 0)
                        goto out;
                /* libarchive writes relative names below the working directory, and refuses any other */
                if (dir && chdir(dir) < 0) {
                        log_error("cp: %s: %m", dir);
                        r = -errno;
                        goto out;
                }
                d.w = libarchive.archive_write_disk_new();
                if (!d.w) {
                        r = -ENOMEM;
                        goto out;
                }
                (void) libarchive.archive_write_disk_set_options(
                        d.w, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                     ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
                                     ARCHIVE_EXTRACT_SAFE_WRITES | (c->archive ? ARCHIVE_EXTRACT_OWNER : 0));
        }

        r = emit(&d, top, clean, &e);
        if (r >= 0 && e.type == CP_DIR)
                r = walk(&d, clean, top);
out:
        /* a tar stream cut short must not end like a whole one (libarchive pads and closes it otherwise) */
        if (d.w && d.tar && r < 0)
                (void) libarchive.archive_write_fail(d.w);
        if (d.w) {
                /* closing sets the directories' modes and times, deepest first, and ends a tar stream */
                k = libarchive.archive_write_close(d.w);
                if (k < ARCHIVE_WARN && r >= 0) {
                        log_error("cp: finishing %s: %s", d.tar ? "the tar stream" : dst,
                                  libarchive.archive_error_string(d.w));
                        r = -EIO;
                }
                libarchive.archive_write_free(d.w);
        }
        /* libarchive has no way to drop an entry it is writing: remove what a broken transfer left */
        if (d.partial && unlink(d.partial) < 0 && errno != ENOENT)
                log_error("cp: warning: could not remove the partial file %s: %m", d.partial);
        free(d.partial);
        cp_entry_done(&e);
        return r;
}
