/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <locale.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io-util.h"
#include "macro.h"
#include "string-util.h"
#include "template/template-tree.h"
#include "template/template.h"

/* A template's tree as a tar (GET /v1/templates/{ref}/rootfs, for builds on top of it): the image is never
 * mounted. debugfs (rdump, as the daemon's user) copies the files out of rootfs.ext4 into a private directory,
 * and the tar is written from the manifest kept at import (template-tree.c's canonical one, whose sha256 is
 * the template's digest): every path, type, owner, mode and time comes from the manifest, and every file and
 * symlink is checked against the manifest's size and sha256 before and while it is written. So the tar holds
 * the tree the digest names, and importing it again gives the same digest. */

#define MANIFEST_MAX (512ULL << 20)
#define MANIFEST_HEADER "space-rootfs-manifest v1\n"
#define COPY_BUF (1U << 20)

typedef struct ManifestEntry {
        char path[PATH_MAX];  /* relative, "." for the root */
        char type;            /* d, f, l */
        mode_t perm;
        uid_t uid;
        gid_t gid;
        int64_t mtime;
        uint64_t size;
        char sha256[65];
} ManifestEntry;

int template_export_check(const Template *t, Error *reterr) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/" TEMPLATE_MANIFEST, t->dir) < 0)
                return -ENOMEM;
        if (access(path, R_OK) == 0)
                return 0;
        if (errno != ENOENT)
                return error_set(reterr, ERROR_INTERNAL, "cannot read %s: %m", path) ?: -errno;
        return error_set(reterr, ERROR_INVALID_STATE,
                         "template %s was imported before the daemon kept the manifest an export needs: build or "
                         "import it again (spacectl template build, or POST /v1/templates/import), then retry",
                         t->name) ?: -ENOENT;
}

/* The manifest, whole and checked against the digest it must hash to. */
static int manifest_load(const char *dir, const char *digest, char **ret, size_t *ret_len, Error *reterr) {
        _cleanup_free_ char *path = NULL, *buf = NULL;
        _cleanup_close_ int fd = -1;
        uint8_t md[32];
        char hex[65];
        struct stat st;
        size_t n = 0;

        if (asprintf(&path, "%s/" TEMPLATE_MANIFEST, dir) < 0)
                return -ENOMEM;
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                return error_set(reterr, ERROR_INTERNAL, "cannot read %s: %m", path) ?: -errno;
        if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size > MANIFEST_MAX)
                return error_set(reterr, ERROR_INTERNAL, "%s is not a manifest of at most %llu bytes", path,
                                 MANIFEST_MAX) ?: -EFBIG;
        buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        while (n < (size_t) st.st_size) {
                ssize_t k = read(fd, buf + n, (size_t) st.st_size - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return error_set(reterr, ERROR_INTERNAL, "cannot read %s: %s", path,
                                         k < 0 ? strerror(errno) : "it shrank") ?: -EIO;
                n += (size_t) k;
        }
        buf[n] = 0;
        EVP_Digest(buf, n, md, NULL, EVP_sha256(), NULL);
        string_hex_encode(md, 32, hex);
        if (strncmp(digest, "sha256:", 7) != 0 || !streq(digest + 7, hex) ||
            strncmp(buf, MANIFEST_HEADER, strlen(MANIFEST_HEADER)) != 0)
                return error_set(reterr, ERROR_INTERNAL, "%s does not hash to the template's digest %s", path,
                                 digest) ?: -EBADMSG;
        *ret = TAKE_PTR(buf);
        *ret_len = n;
        return 0;
}

static int unhex(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* "/a%20b" -> "a b" ("." for "/"); no NUL, no '.' or '..' component, no empty one. */
static int unescape_path(const char *in, size_t len, char out[static PATH_MAX]) {
        size_t n = 0;

        if (len == 0 || in[0] != '/')
                return -EBADMSG;
        if (len == 1) {
                strcpy(out, ".");
                return 0;
        }
        for (size_t i = 1; i < len; i++) {
                char c = in[i];

                if (c == '%') {
                        int hi = i + 2 < len ? unhex(in[i + 1]) : -1, lo = i + 2 < len ? unhex(in[i + 2]) : -1;
                        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                                return -EBADMSG;
                        c = (char) (hi * 16 + lo);
                        i += 2;
                }
                if (n + 1 >= PATH_MAX)
                        return -ENAMETOOLONG;
                out[n++] = c;
        }
        out[n] = 0;
        for (const char *p = out; *p;) {
                size_t k = strcspn(p, "/");
                if (k == 0 || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.'))
                        return -EBADMSG;
                p += k;
                if (*p)
                        p++;
                if (!*p && p[-1] == '/')
                        return -EBADMSG;
        }
        return 0;
}

/* PATH \t TYPE \t MODE \t UID \t GID \t MTIME \t SIZE \t SHA256 */
static int parse_entry(const char *line, size_t len, ManifestEntry *e) {
        const char *tab = memchr(line, '\t', len);
        _cleanup_free_ char *rest = NULL;
        unsigned mode, uid, gid;
        long long mtime;
        unsigned long long size;
        int n = 0;

        if (!tab || unescape_path(line, (size_t) (tab - line), e->path) < 0)
                return -EBADMSG;
        rest = strndup(tab + 1, len - (size_t) (tab - line) - 1);
        if (!rest)
                return -ENOMEM;
        if (sscanf(rest, "%c\t%o\t%u\t%u\t%lld\t%llu\t%64s%n", &e->type, &mode, &uid, &gid, &mtime, &size, e->sha256,
                   &n) != 7 || rest[n] != 0 || mode > 07777 || !strchr("dfl", e->type))
                return -EBADMSG;
        if (e->type != 'd' && (strlen(e->sha256) != 64 || strspn(e->sha256, "0123456789abcdef") != 64))
                return -EBADMSG;
        e->perm = (mode_t) mode;
        e->uid = (uid_t) uid;
        e->gid = (gid_t) gid;
        e->mtime = mtime;
        e->size = size;
        return 0;
}

/* Never through a symlink, never above the dump. */
static int open_beneath(int dirfd, const char *path, int flags) {
        struct open_how how = { .flags = (uint64_t) (flags | O_NOFOLLOW | O_CLOEXEC),
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);

        return fd < 0 ? -errno : (int) fd;
}

static int dump_image(const char *image, const char *dest, Error *reterr) {
        _cleanup_free_ char *cmd = NULL;
        int status;
        pid_t pid;

        /* debugfs's quoting: inside "...", a doubled quote is one quote */
        if (strchr(dest, '"') || asprintf(&cmd, "rdump / \"%s\"", dest) < 0)
                return -EINVAL;
        pid = fork();
        if (pid < 0)
                return error_set(reterr, ERROR_INTERNAL, "cannot fork: %m") ?: -errno;
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
                        _exit(126);
                execlp("debugfs", "debugfs", "-R", cmd, image, (char *) NULL);
                _exit(127);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return error_set(reterr, ERROR_INTERNAL, "debugfs could not read %s (status %d)", image,
                                 WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) ?: -EIO;
        return 0;
}

/* As a user other than root the dump is ours, with the image's modes: what they keep us from is allowed. */
static int make_readable(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void) ftw;
        if (type == FTW_D || type == FTW_DNR)
                (void) chmod(path, (st->st_mode & 07777) | 0700);
        else if (type == FTW_F)
                (void) chmod(path, (st->st_mode & 07777) | 0400);
        return 0;
}

static int fail_entry(Error *reterr, const ManifestEntry *m, const char *why) {
        return error_set(reterr, ERROR_INTERNAL, "the image does not hold the manifest's /%s: %s",
                         streq(m->path, ".") ? "" : m->path, why) ?: -EBADMSG;
}

static int write_file_data(struct archive *a, int fd, const ManifestEntry *m, Error *reterr) {
        _cleanup_free_ uint8_t *buf = malloc(COPY_BUF);
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        uint64_t left = m->size;
        uint8_t sum[32];
        char hex[65];
        int r = 0;

        if (!buf || !md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
                EVP_MD_CTX_free(md);
                return -ENOMEM;
        }
        while (left > 0 && r == 0) {
                ssize_t n = read(fd, buf, left < COPY_BUF ? (size_t) left : COPY_BUF);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        r = fail_entry(reterr, m, n < 0 ? strerror(errno) : "it is shorter");
                else if (archive_write_data(a, buf, (size_t) n) != n)
                        r = error_set(reterr, ERROR_IO_ERROR, "cannot write the tar: %s",
                                      archive_error_string(a) ?: "write error") ?: -EIO;
                else {
                        EVP_DigestUpdate(md, buf, (size_t) n);
                        left -= (uint64_t) n;
                }
        }
        EVP_DigestFinal_ex(md, sum, NULL);
        EVP_MD_CTX_free(md);
        string_hex_encode(sum, 32, hex);
        if (r == 0 && !streq(hex, m->sha256))
                r = fail_entry(reterr, m, "its content is not the manifest's");
        return r;
}

/* The entry's header and, for a file, its content; what is read must be what the manifest says. */
static int write_entry(struct archive *a, int root_fd, const ManifestEntry *m, Error *reterr) {
        _cleanup_close_ int fd = -1;
        struct archive_entry *ae = archive_entry_new();
        char target[PATH_MAX + 1];
        struct stat st;
        int r = 0;

        if (!ae)
                return -ENOMEM;
        archive_entry_set_pathname(ae, m->path);
        archive_entry_set_uid(ae, m->uid);
        archive_entry_set_gid(ae, m->gid);
        archive_entry_set_mtime(ae, m->mtime, 0);
        archive_entry_set_perm(ae, m->perm);
        if (m->type == 'd') {
                fd = open_beneath(root_fd, m->path, O_PATH | O_DIRECTORY);
                if (fd < 0)
                        r = fail_entry(reterr, m, "no such directory");
                archive_entry_set_filetype(ae, AE_IFDIR);
        } else if (m->type == 'l') {
                _cleanup_free_ char *parent = strdup(m->path);
                char *slash = parent ? strrchr(parent, '/') : NULL;
                ssize_t n;
                uint8_t sum[32];
                char hex[65];

                if (!parent)
                        r = -ENOMEM;
                else {
                        if (slash)
                                *slash = 0;
                        fd = open_beneath(root_fd, slash ? parent : ".", O_PATH | O_DIRECTORY);
                        n = fd < 0 ? -1 : readlinkat(fd, slash ? slash + 1 : m->path, target, PATH_MAX);
                        if (n >= 0) {
                                EVP_Digest(target, (size_t) n, sum, NULL, EVP_sha256(), NULL);
                                string_hex_encode(sum, 32, hex);
                                target[n] = 0;
                        }
                        if (n < 0 || (uint64_t) n != m->size || !streq(hex, m->sha256))
                                r = fail_entry(reterr, m, "not the manifest's symlink");
                }
                archive_entry_set_filetype(ae, AE_IFLNK);
                archive_entry_set_symlink(ae, target);
        } else {
                fd = open_beneath(root_fd, m->path, O_RDONLY);
                if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t) st.st_size != m->size)
                        r = fail_entry(reterr, m, "not a regular file of the manifest's size");
                archive_entry_set_filetype(ae, AE_IFREG);
                archive_entry_set_size(ae, (la_int64_t) m->size);
        }
        /* ARCHIVE_WARN: a name that is not UTF-8, written as bytes (hdrcharset=BINARY), as the import reads it */
        if (r == 0 && archive_write_header(a, ae) < ARCHIVE_WARN)
                r = error_set(reterr, ERROR_IO_ERROR, "cannot write the tar: %s",
                              archive_error_string(a) ?: "write error") ?: -EIO;
        if (r == 0 && m->type == 'f')
                r = write_file_data(a, fd, m, reterr);
        archive_entry_free(ae);
        return r;
}

static int write_tar(const char *manifest, size_t len, int root_fd, int out_fd, Error *reterr) {
        struct archive *a = archive_write_new();
        ManifestEntry *m = malloc(sizeof *m);
        const char *p = manifest + strlen(MANIFEST_HEADER), *end = manifest + len;
        int r = 0;

        if (!a || !m || archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
            archive_write_open_fd(a, out_fd) != ARCHIVE_OK) {
                r = -ENOMEM;
                goto out;
        }
        while (p < end && r == 0) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));

                if (!nl) {
                        r = error_set(reterr, ERROR_INTERNAL, "the manifest's last line is cut") ?: -EBADMSG;
                        break;
                }
                r = parse_entry(p, (size_t) (nl - p), m);
                if (r == -EBADMSG)
                        r = error_set(reterr, ERROR_INTERNAL, "the manifest has a malformed line: %.80s", p) ?: r;
                if (r == 0)
                        r = write_entry(a, root_fd, m, reterr);
                p = nl + 1;
        }
        if (r == 0 && archive_write_close(a) != ARCHIVE_OK)
                r = error_set(reterr, ERROR_IO_ERROR, "cannot write the tar: %s",
                              archive_error_string(a) ?: "write error") ?: -EIO;
out:
        if (a)
                archive_write_free(a);
        free(m);
        return r;
}

int template_export(const char *dir, const char *digest, const char *tmp_parent, int out_fd, Error *reterr) {
        _cleanup_free_ char *manifest = NULL, *tmp = NULL, *image = NULL;
        _cleanup_close_ int root_fd = -1;
        locale_t utf8, old_locale = (locale_t) 0;
        size_t len = 0;
        int r;

        r = manifest_load(dir, digest, &manifest, &len, reterr);
        if (r < 0)
                return r;
        if (asprintf(&tmp, "%s/.tmp-export-XXXXXX", tmp_parent) < 0 || asprintf(&image, "%s/rootfs.ext4", dir) < 0)
                return -ENOMEM;
        if (!mkdtemp(tmp))
                return error_set(reterr, error_code_from_errno(-errno), "cannot create %s: %m", tmp) ?: -errno;
        /* pax names are UTF-8: this thread converts from UTF-8, the names' usual encoding, whatever the
         * daemon's locale */
        utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t) 0);
        if (utf8)
                old_locale = uselocale(utf8);
        r = dump_image(image, tmp, reterr);
        if (r >= 0 && geteuid() != 0)
                (void) nftw(tmp, make_readable, 16, FTW_PHYS);
        if (r >= 0) {
                root_fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r = root_fd < 0 ? (error_set(reterr, ERROR_INTERNAL, "cannot open %s: %m", tmp) ?: -errno)
                                : write_tar(manifest, len, root_fd, out_fd, reterr);
        }
        if (utf8) {
                uselocale(old_locale);
                freelocale(utf8);
        }
        (void) rm_rf_at(AT_FDCWD, tmp);
        return r;
}
