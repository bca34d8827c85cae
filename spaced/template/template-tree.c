/* SPDX-License-Identifier: Apache-2.0 */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io-util.h"
#include "macro.h"
#include "string-util.h"
#include "template/template-tree.h"

/* The digest of a template is the sha256 of its root filesystem tree's canonical manifest, so that the same
 * tree gives the same name whatever it came in (tar, tar.gz, tar.xz, tar.zst, OCI layers) and however mkfs
 * lays it out. The manifest is text:
 *
 *   space-rootfs-manifest v1\n
 *   then one line per path, sorted by the bytes of the path:
 *   PATH \t TYPE \t MODE \t UID \t GID \t MTIME \t SIZE \t SHA256 \n
 *
 * PATH is absolute ("/" is the root), with the bytes below 0x21, 0x7f and '%' written as %XX; TYPE is d
 * (directory), f (regular file) or l (symlink); MODE the permission bits in octal, setuid, setgid and sticky
 * included (4 digits); UID and GID decimal; MTIME whole seconds since the epoch; SIZE the file's length or
 * the symlink target's (0 for directories); SHA256 the hex digest of the content or of the symlink target
 * ("-" for directories). Hard links appear as the regular files they are (each path with the same content),
 * device nodes, fifos and sockets never appear (imports drop them), and neither do xattrs, atime or ctime.
 * Directories an archive implies without an entry of their own are 0755 root:root with mtime 0. */

#define TREE_MIN_CAPACITY 1024
#define COPY_BUF (1U << 20)

struct Tree {
        int root_fd;
        TreeEntry *slots;
        size_t capacity;     /* a power of 2 */
        size_t used;         /* slots with a key, tombstones included */
        unsigned layer;
        unsigned dropped;
        tree_progress_fn progress;
        void *progress_userdata;
        TreeBudget *budget;  /* NULL: no limits */
};

static uint64_t hash_path(const char *s) {
        uint64_t h = 1469598103934665603ULL;
        for (; *s; s++)
                h = (h ^ (uint8_t) *s) * 1099511628211ULL;
        return h;
}

int tree_new(const char *root, Tree **ret) {
        Tree *t = calloc(1, sizeof *t);

        if (!t)
                return -ENOMEM;
        t->capacity = TREE_MIN_CAPACITY;
        t->slots = calloc(t->capacity, sizeof *t->slots);
        t->root_fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (!t->slots || t->root_fd < 0) {
                int r = t->slots ? -errno : -ENOMEM;
                tree_free(t);
                return r;
        }
        *ret = t;
        return 0;
}

Tree *tree_free(Tree *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->capacity; i++)
                free(t->slots[i].path);
        free(t->slots);
        safe_close(t->root_fd);
        free(t);
        return NULL;
}

void tree_set_layer(Tree *t, unsigned layer) {
        t->layer = layer;
}

void tree_set_progress(Tree *t, tree_progress_fn fn, void *userdata) {
        t->progress = fn;
        t->progress_userdata = userdata;
}

void tree_set_budget(Tree *t, TreeBudget *budget) {
        t->budget = budget;
}

int tree_root_fd(Tree *t) {
        return t->root_fd;
}

unsigned tree_dropped(Tree *t) {
        return t->dropped;
}

static TreeEntry *slot_for(Tree *t, const char *path) {
        size_t mask = t->capacity - 1;

        for (size_t i = hash_path(path) & mask;; i = (i + 1) & mask)
                if (!t->slots[i].path || streq(t->slots[i].path, path))
                        return &t->slots[i];
}

static int grow(Tree *t) {
        TreeEntry *old = t->slots;
        size_t n = t->capacity;

        t->slots = calloc(n * 2, sizeof *t->slots);
        if (!t->slots) {
                t->slots = old;
                return -ENOMEM;
        }
        t->capacity = n * 2;
        for (size_t i = 0; i < n; i++)
                if (old[i].path)
                        *slot_for(t, old[i].path) = old[i];
        free(old);
        return 0;
}

const TreeEntry *tree_lookup(Tree *t, const char *path) {
        TreeEntry *e = slot_for(t, path);
        return e->path && e->live ? e : NULL;
}

/* The entry for path, live and with its other fields as they were (zero for a new one). */
static int tree_put(Tree *t, const char *path, TreeEntry **ret) {
        TreeEntry *e;

        if ((t->used + 1) * 4 > t->capacity * 3 && grow(t) < 0)
                return -ENOMEM;
        e = slot_for(t, path);
        if (!e->path) {
                e->path = strdup(path);
                if (!e->path)
                        return -ENOMEM;
                t->used++;
        }
        e->live = true;
        e->layer = t->layer;
        *ret = e;
        return 0;
}

static bool is_below(const char *path, const char *dir) {
        size_t n = strlen(dir);
        if (n == 0)
                return *path != 0;
        return strncmp(path, dir, n) == 0 && path[n] == '/';
}

static void kill_subtree(Tree *t, const char *path) {
        for (size_t i = 0; i < t->capacity; i++) {
                TreeEntry *e = &t->slots[i];
                if (e->path && e->live && (streq(e->path, path) || is_below(e->path, path)))
                        e->live = false;
        }
}

int rm_rf_at(int parent_fd, const char *name) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int fd;

        if (unlinkat(parent_fd, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -errno;
        fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        while ((de = readdir(d))) {
                int r;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                r = rm_rf_at(dirfd(d), de->d_name);
                if (r < 0)
                        return r;
        }
        if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

/* ---- paths ---- */

/* An entry's name for a message: at most 200 bytes of it, control characters as \xNN, so that a hostile name
 * cannot write to the terminal of whoever reads the error. */
static char *shown_name(const char *entry) {
        size_t n = strlen(entry), max = n > 200 ? 200 : n;
        char *out = malloc(max * 4 + 4), *o = out;

        if (!out)
                return NULL;
        for (size_t i = 0; i < max; i++) {
                unsigned char c = (unsigned char) entry[i];
                if (c < 0x20 || c == 0x7f || c == '\\')
                        o += sprintf(o, "\\x%02x", c);
                else
                        *o++ = (char) c;
        }
        strcpy(o, n > max ? "..." : "");
        return out;
}

static int fail(Error *reterr, int r, const char *entry, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(Error *reterr, int r, const char *entry, const char *fmt, ...) {
        _cleanup_free_ char *why = NULL, *name = shown_name(entry);
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&why, fmt, ap) < 0)
                why = NULL;
        va_end(ap);
        /* a full disk is ours to report; anything else the archive asked for and cannot have */
        if (reterr && !reterr->message)
                (void) error_set(reterr, r == -ENOSPC || r == -EDQUOT ? ERROR_NO_SPACE : ERROR_INVALID_SOURCE,
                                 "entry '%s': %s", name ?: "?", why ?: "refused");
        return r;
}

static bool cancelled(Tree *t) {
        return t->budget && t->budget->cancel && atomic_load_explicit(t->budget->cancel, memory_order_relaxed);
}

static int fail_cancelled(Error *reterr) {
        if (reterr && !reterr->message)
                (void) error_set(reterr, ERROR_CANCELLED, "the import was cancelled");
        return -ECANCELED;
}

static void format_size(uint64_t n, char *buf, size_t size) {
        static const char *const units[] = { "bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
        double v = (double) n;
        unsigned u = 0;

        while (v >= 1024 && u + 1 < ELEMENTSOF(units)) {
                v /= 1024;
                u++;
        }
        if (u == 0)
                snprintf(buf, size, "%llu bytes", (unsigned long long) n);
        else
                snprintf(buf, size, "%.1f %s", v, units[u]);
}

/* Over a limit of the budget: the message names the limit and the setting that raises it. */
static int fail_limit(Error *reterr, const char *entry, const char *what, uint64_t have, uint64_t limit,
                      const char *key, bool sizes) {
        _cleanup_free_ char *name = shown_name(entry);
        char h[32], l[32];

        if (sizes) {
                format_size(have, h, sizeof h);
                format_size(limit, l, sizeof l);
        } else {
                snprintf(h, sizeof h, "%llu", (unsigned long long) have);
                snprintf(l, sizeof l, "%llu", (unsigned long long) limit);
        }
        if (reterr && !reterr->message)
                (void) error_set(reterr, ERROR_LIMIT_EXCEEDED,
                                 "entry '%s': %s (%s) is over the import limit of %s (%s in spaced.conf)",
                                 name ?: "?", what, h, l, key);
        return -EFBIG;
}

/* "./a//b/" -> "a/b"; refuses what could leave the root or what the image cannot hold. */
static int path_normalize(const char *in, char **ret, const char **ret_why) {
        _cleanup_free_ char *out = NULL;
        size_t n = 0, len = strlen(in);
        const char *p = in;

        if (*in == '/') {
                *ret_why = "absolute paths are refused";
                return -EPERM;
        }
        if (len >= PATH_MAX) {
                *ret_why = "the path is too long";
                return -ENAMETOOLONG;
        }
        out = malloc(len + 1);
        if (!out)
                return -ENOMEM;
        while (*p) {
                size_t k = strcspn(p, "/");
                if (k == 2 && p[0] == '.' && p[1] == '.') {
                        *ret_why = "'..' components are refused";
                        return -EPERM;
                }
                if (k > NAME_MAX) {
                        *ret_why = "a name is longer than 255 bytes";
                        return -ENAMETOOLONG;
                }
                /* Every path goes into a debugfs script (tree_write_debugfs_script), one command a line, whose
                 * quoting knows no escapes: a line break would end the command there and the rest would run
                 * as one of its own. Other control characters have no business in a file name either. */
                for (size_t i = 0; i < k; i++)
                        if ((unsigned char) p[i] < 0x20 || p[i] == 0x7f) {
                                *ret_why = p[i] == '\n' || p[i] == '\r'
                                                   ? "names with line breaks are refused (no debugfs command can carry them)"
                                                   : "names with control characters are refused (no debugfs command can carry them)";
                                return -EINVAL;
                        }
                if (k > 0 && !(k == 1 && p[0] == '.')) {
                        if (n > 0)
                                out[n++] = '/';
                        memcpy(out + n, p, k);
                        n += k;
                }
                p += k;
                while (*p == '/')
                        p++;
        }
        out[n] = 0;
        *ret = TAKE_PTR(out);
        return 0;
}

/* Opens the directory that holds path's last component, one component at a time without following
 * symlinks, so that nothing can lead outside the root. create: make missing directories (recorded as
 * implied ones). Returns the fd and points *ret_base into path. */
static int open_parent(Tree *t, const char *path, bool create, int *ret_fd, const char **ret_base, Error *reterr,
                       const char *entry) {
        _cleanup_free_ char *copy = strdup(path);
        _cleanup_close_ int fd = -1;
        char *slash, *p;

        if (!copy)
                return -ENOMEM;
        fd = openat(t->root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        slash = strrchr(copy, '/');
        *ret_base = slash ? path + (slash - copy) + 1 : path;
        if (!slash) {
                *ret_fd = TAKE_FD(fd);
                return 0;
        }
        *slash = 0;
        p = copy;
        for (;;) {
                char *next = strchr(p, '/');
                int nfd;

                if (next)
                        *next = 0;
                nfd = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (nfd < 0 && errno == ENOENT && create) {
                        TreeEntry *e;
                        int r;

                        if (mkdirat(fd, p, 0755) < 0 && errno != EEXIST)
                                return fail(reterr, -errno, entry, "cannot create its directory: %m");
                        /* the implied directory: copy up to the end of this component */
                        {
                                _cleanup_free_ char *implied = strndup(copy, (size_t) (p - copy) + strlen(p));
                                if (!implied)
                                        return -ENOMEM;
                                if (!tree_lookup(t, implied)) {
                                        r = tree_put(t, implied, &e);
                                        if (r < 0)
                                                return r;
                                        e->mode = S_IFDIR | 0755;
                                        e->uid = e->gid = 0;
                                        e->mtime = 0;
                                        e->size = 0;
                                }
                        }
                        nfd = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                }
                if (nfd < 0) {
                        if (errno == ENOTDIR || errno == ELOOP)
                                return fail(reterr, -ENOTDIR, entry,
                                            "it goes through '%s', which is not a directory (a symlink or a file); "
                                            "entries through symlinks are refused", p);
                        if (errno == ENOENT)
                                return -ENOENT;
                        return fail(reterr, -errno, entry, "cannot open its directory: %m");
                }
                safe_close(fd);
                fd = nfd;
                if (!next)
                        break;
                *next = '/';
                p = next + 1;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Removes whatever is at base in parent_fd, on disk and in the table. keep_dir: an existing directory
 * stays (a directory entry over a directory only changes its metadata). */
static int remove_existing(Tree *t, int parent_fd, const char *base, const char *path, bool keep_dir) {
        struct stat st;
        int r;

        if (fstatat(parent_fd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISDIR(st.st_mode)) {
                if (keep_dir)
                        return 0;
                r = rm_rf_at(parent_fd, base);
                if (r < 0)
                        return r;
                kill_subtree(t, path);
                return 0;
        }
        if (unlinkat(parent_fd, base, 0) < 0 && errno != ENOENT)
                return -errno;
        kill_subtree(t, path);
        return 0;
}

static int cmp_depth_desc(const void *a, const void *b) {
        const TreeEntry *x = *(TreeEntry *const *) a, *y = *(TreeEntry *const *) b;
        size_t lx = strlen(x->path), ly = strlen(y->path);
        return lx < ly ? 1 : lx > ly ? -1 : strcmp(x->path, y->path);
}

/* OCI whiteouts hide what lower layers put there: path itself (include_self) and everything below it
 * written by a layer before the current one. Deepest first, so that a directory still holding this layer's
 * files stays (and then counts as this layer's). */
static int remove_lower(Tree *t, const char *path, bool include_self, Error *reterr, const char *entry) {
        _cleanup_free_ TreeEntry **victims = NULL;
        size_t n = 0;

        for (size_t i = 0; i < t->capacity; i++) {
                TreeEntry *e = &t->slots[i];
                if (e->path && e->live && e->layer < t->layer &&
                    ((include_self && streq(e->path, path)) || is_below(e->path, path)))
                        n++;
        }
        if (n == 0)
                return 0;
        victims = calloc(n, sizeof *victims);
        if (!victims)
                return -ENOMEM;
        n = 0;
        for (size_t i = 0; i < t->capacity; i++) {
                TreeEntry *e = &t->slots[i];
                if (e->path && e->live && e->layer < t->layer &&
                    ((include_self && streq(e->path, path)) || is_below(e->path, path)))
                        victims[n++] = e;
        }
        qsort(victims, n, sizeof *victims, cmp_depth_desc);
        for (size_t i = 0; i < n; i++) {
                TreeEntry *e = victims[i];
                _cleanup_close_ int pfd = -1;
                const char *base;
                int r;

                if (!*e->path)
                        continue; /* the root stays */
                r = open_parent(t, e->path, false, &pfd, &base, reterr, entry);
                if (r == -ENOENT) {
                        e->live = false;
                        continue;
                }
                if (r < 0)
                        return r;
                if (S_ISDIR(e->mode)) {
                        if (unlinkat(pfd, base, AT_REMOVEDIR) < 0) {
                                if (errno == ENOTEMPTY || errno == EEXIST) {
                                        e->layer = t->layer;
                                        continue;
                                }
                                if (errno != ENOENT)
                                        return fail(reterr, -errno, entry, "cannot apply the whiteout: %m");
                        }
                } else if (unlinkat(pfd, base, 0) < 0 && errno != ENOENT)
                        return fail(reterr, -errno, entry, "cannot apply the whiteout: %m");
                e->live = false;
        }
        return 0;
}

/* What libarchive decompressed so far may not run ahead of what the entries declared (plus their headers):
 * counted, not trusted from the headers alone. */
static int check_decompressed(Tree *t, struct archive *a, const char *entry, Error *reterr) {
        TreeBudget *b = t->budget;
        la_int64_t n;

        if (!b || b->max_bytes == 0)
                return 0;
        n = archive_filter_bytes(a, 0);
        /* headers, pax records and padding: a block per entry is plenty, and 64 MiB of slack for the rest */
        if (n > 0 && (uint64_t) n > b->max_bytes + b->entries * 1024 + (64ULL << 20))
                return fail_limit(reterr, entry, "the archive's decompressed size", (uint64_t) n, b->max_bytes,
                                  "import_max_bytes", true);
        return 0;
}

static bool all_zero(const void *p, size_t n) {
        const uint8_t *c = p;
        return n == 0 || (c[0] == 0 && memcmp(c, c + 1, n - 1) == 0);
}

static int write_data(Tree *t, struct archive *a, int fd, int64_t declared, TreeEntry *e, const char *entry,
                      Error *reterr) {
        static const uint8_t zeros[65536];
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        TreeBudget *b = t->budget;
        int64_t off = 0;
        int r = 0;

        if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
                EVP_MD_CTX_free(ctx);
                return -ENOMEM;
        }
        for (;;) {
                const void *buf;
                size_t size;
                la_int64_t offset;
                int ar = archive_read_data_block(a, &buf, &size, &offset);

                if (ar == ARCHIVE_EOF)
                        break;
                if (ar < ARCHIVE_WARN) {
                        r = fail(reterr, -EIO, entry, "cannot read its data: %s", archive_error_string(a) ?: "?");
                        goto out;
                }
                if (offset < off) {
                        r = fail(reterr, -EINVAL, entry, "its data blocks go backwards");
                        goto out;
                }
                if (cancelled(t)) {
                        r = fail_cancelled(reterr);
                        goto out;
                }
                if (b && b->max_entry_bytes > 0 && (uint64_t) offset + size > b->max_entry_bytes) {
                        r = fail_limit(reterr, entry, "its size", (uint64_t) offset + size, b->max_entry_bytes,
                                       "import_max_entry_bytes", true);
                        goto out;
                }
                r = check_decompressed(t, a, entry, reterr);
                if (r < 0)
                        goto out;
                while (off < offset) { /* a hole of a sparse file: zeros in the digest, a hole on disk */
                        size_t k = (size_t) (offset - off) < sizeof zeros ? (size_t) (offset - off) : sizeof zeros;
                        EVP_DigestUpdate(ctx, zeros, k);
                        off += (int64_t) k;
                        if ((off & ((1 << 26) - 1)) == 0 && cancelled(t)) {
                                r = fail_cancelled(reterr);
                                goto out;
                        }
                }
                if (all_zero(buf, size)) {
                        /* left as a hole: a compressed run of zeros costs no disk (mkfs -d keeps holes) */
                        EVP_DigestUpdate(ctx, buf, size);
                        off += (int64_t) size;
                        if (t->progress)
                                t->progress(t->progress_userdata);
                        continue;
                }
                if (b) {
                        b->disk_bytes += size;
                        if (b->max_disk_bytes > 0 && b->disk_bytes > b->max_disk_bytes) {
                                r = fail_limit(reterr, entry, "the data written so far", b->disk_bytes,
                                               b->max_disk_bytes, "import_max_disk_bytes", true);
                                goto out;
                        }
                }
                r = loop_pwrite(fd, buf, size, (uint64_t) offset);
                if (r < 0) {
                        r = fail(reterr, r, entry, "cannot write it: %s", strerror(-r));
                        goto out;
                }
                EVP_DigestUpdate(ctx, buf, size);
                off += (int64_t) size;
                if (t->progress)
                        t->progress(t->progress_userdata);
        }
        if (declared > off) {
                while (off < declared) {
                        size_t k = (size_t) (declared - off) < sizeof zeros ? (size_t) (declared - off) : sizeof zeros;
                        EVP_DigestUpdate(ctx, zeros, k);
                        off += (int64_t) k;
                        if ((off & ((1 << 26) - 1)) == 0 && cancelled(t)) {
                                r = fail_cancelled(reterr);
                                goto out;
                        }
                }
        }
        /* the length, whatever holes (a sparse entry's, or skipped zeros) end it */
        if (ftruncate(fd, off) < 0) {
                r = fail(reterr, -errno, entry, "cannot write it: %m");
                goto out;
        }
        e->size = (uint64_t) off;
        EVP_DigestFinal_ex(ctx, e->sha256, NULL);
out:
        EVP_MD_CTX_free(ctx);
        return r;
}

static void sha256_of(const void *p, size_t n, uint8_t out[32]) {
        EVP_Digest(p, n, out, NULL, EVP_sha256(), NULL);
}

static void entry_meta(TreeEntry *e, struct archive_entry *ae, mode_t type) {
        e->mode = type | (archive_entry_perm(ae) & 07777);
        e->uid = (uid_t) archive_entry_uid(ae);
        e->gid = (gid_t) archive_entry_gid(ae);
        e->mtime = archive_entry_mtime_is_set(ae) ? (int64_t) archive_entry_mtime(ae) : 0;
}

/* All from the header, before any of the entry's data is read. */
static int check_budget(Tree *t, struct archive *a, struct archive_entry *ae, const char *raw, Error *reterr) {
        TreeBudget *b = t->budget;
        uint64_t size = archive_entry_filetype(ae) == AE_IFREG && !archive_entry_hardlink(ae) &&
                                        archive_entry_size_is_set(ae) && archive_entry_size(ae) > 0
                                ? (uint64_t) archive_entry_size(ae) : 0;

        b->entries++;
        if (b->max_entries > 0 && b->entries > b->max_entries)
                return fail_limit(reterr, raw, "the number of entries", b->entries, b->max_entries,
                                  "import_max_entries", false);
        if (b->max_path > 0 && strlen(raw) > b->max_path)
                return fail_limit(reterr, raw, "its path's length in bytes", strlen(raw), b->max_path,
                                  "import_max_path", false);
        if (b->max_entry_bytes > 0 && size > b->max_entry_bytes)
                return fail_limit(reterr, raw, "its size", size, b->max_entry_bytes, "import_max_entry_bytes",
                                  true);
        b->bytes += size;
        if (b->max_bytes > 0 && b->bytes > b->max_bytes)
                return fail_limit(reterr, raw, "the sum of the entries' sizes", b->bytes, b->max_bytes,
                                  "import_max_bytes", true);
        return check_decompressed(t, a, raw, reterr);
}

static bool is_whiteout(const char *path) {
        const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;

        return strncmp(name, ".wh.", 4) == 0;
}

/* An OCI whiteout: it removes from the lower layers, it is no content of its own. */
static int extract_whiteout(Tree *t, const char *path, const char *raw, Error *reterr) {
        const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
        _cleanup_free_ char *dir = slash ? strndup(path, (size_t) (slash - path)) : strdup("");
        _cleanup_free_ char *target = NULL;

        if (!dir)
                return -ENOMEM;
        if (streq(name, ".wh..wh..opq"))
                return remove_lower(t, dir, false, reterr, raw);
        if (strncmp(name, ".wh..wh.", 8) == 0)
                return 0; /* other aufs metadata (.wh..wh..plnk): not content */
        if (asprintf(&target, "%s%s%s", dir, *dir ? "/" : "", name + 4) < 0)
                return -ENOMEM;
        return remove_lower(t, target, true, reterr, raw);
}

static int extract_hardlink(Tree *t, int pfd, const char *base, const char *path, const char *hl, const char *raw,
                            Error *reterr) {
        _cleanup_free_ char *target = NULL;
        _cleanup_close_ int tfd = -1;
        const TreeEntry *te;
        const char *tbase, *why = NULL;
        TreeEntry copy, *e;
        int r;

        r = path_normalize(hl, &target, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return fail(reterr, r, raw, "its hard link target '%.200s' is refused: %s", hl, why);
        te = tree_lookup(t, target);
        if (!te || !S_ISREG(te->mode))
                return fail(reterr, -EPERM, raw,
                            "its hard link target '%.200s' is not a regular file extracted before it", hl);
        if (streq(target, path))
                return 0;
        copy = *te;
        r = open_parent(t, target, false, &tfd, &tbase, reterr, raw);
        if (r < 0)
                return r == -ENOENT ? fail(reterr, r, raw, "its hard link target is gone") : r;
        r = remove_existing(t, pfd, base, path, false);
        if (r < 0)
                return fail(reterr, r, raw, "cannot replace what was there: %s", strerror(-r));
        if (linkat(tfd, tbase, pfd, base, 0) < 0)
                return fail(reterr, -errno, raw, "cannot make the hard link: %m");
        r = tree_put(t, path, &e);
        if (r < 0)
                return r;
        memcpy(e->sha256, copy.sha256, sizeof e->sha256);
        e->mode = copy.mode;
        e->uid = copy.uid;
        e->gid = copy.gid;
        e->mtime = copy.mtime;
        e->size = copy.size;
        return 0;
}

static int extract_dir(Tree *t, struct archive_entry *ae, int pfd, const char *base, const char *path,
                       const char *raw, Error *reterr) {
        TreeEntry *e;
        int r;

        r = remove_existing(t, pfd, base, path, true);
        if (r < 0)
                return fail(reterr, r, raw, "cannot replace what was there: %s", strerror(-r));
        if (mkdirat(pfd, base, 0755) < 0 && errno != EEXIST)
                return fail(reterr, -errno, raw, "cannot create it: %m");
        r = tree_put(t, path, &e);
        if (r < 0)
                return r;
        entry_meta(e, ae, S_IFDIR);
        e->size = 0;
        return 0;
}

static int extract_symlink(Tree *t, struct archive_entry *ae, int pfd, const char *base, const char *path,
                           const char *raw, Error *reterr) {
        const char *target = archive_entry_symlink(ae);
        TreeEntry *e;
        int r;

        if (!target || !*target)
                return fail(reterr, -EINVAL, raw, "a symlink without a target");
        if (strlen(target) >= PATH_MAX)
                return fail(reterr, -ENAMETOOLONG, raw, "its symlink target is too long");
        r = remove_existing(t, pfd, base, path, false);
        if (r < 0)
                return fail(reterr, r, raw, "cannot replace what was there: %s", strerror(-r));
        /* Created, never followed: it may point anywhere, it is only a name inside the image. */
        if (symlinkat(target, pfd, base) < 0)
                return fail(reterr, -errno, raw, "cannot create the symlink: %m");
        r = tree_put(t, path, &e);
        if (r < 0)
                return r;
        entry_meta(e, ae, S_IFLNK);
        e->mode = S_IFLNK | 0777;
        e->size = strlen(target);
        sha256_of(target, e->size, e->sha256);
        return 0;
}

static int extract_regular(Tree *t, struct archive *a, struct archive_entry *ae, int pfd, const char *base,
                           const char *path, const char *raw, Error *reterr) {
        _cleanup_close_ int fd = -1;
        TreeEntry *e;
        int r;

        r = remove_existing(t, pfd, base, path, false);
        if (r < 0)
                return fail(reterr, r, raw, "cannot replace what was there: %s", strerror(-r));
        fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return fail(reterr, -errno, raw, "cannot create it: %m");
        r = tree_put(t, path, &e);
        if (r < 0)
                return r;
        entry_meta(e, ae, S_IFREG);
        r = write_data(t, a, fd, archive_entry_size_is_set(ae) ? archive_entry_size(ae) : 0, e, raw, reterr);
        if (r < 0) {
                e->live = false;
                return r;
        }
        return 0;
}

static int extract_one(Tree *t, struct archive *a, struct archive_entry *ae, bool whiteouts, Error *reterr) {
        const char *raw = archive_entry_pathname(ae) ?: "", *why = NULL, *base, *hl = archive_entry_hardlink(ae);
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int pfd = -1;
        mode_t type = archive_entry_filetype(ae);
        TreeEntry *e;
        int r;

        if (t->budget) {
                r = check_budget(t, a, ae, raw, reterr);
                if (r < 0)
                        return r;
        }

        r = path_normalize(raw, &path, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return fail(reterr, r, raw, "%s", why);

        if (!*path) {
                if (hl || type != AE_IFDIR)
                        return fail(reterr, -EINVAL, raw, "the root can only be a directory");
                r = tree_put(t, "", &e);
                if (r < 0)
                        return r;
                entry_meta(e, ae, S_IFDIR);
                return 0;
        }

        if (whiteouts && is_whiteout(path))
                return extract_whiteout(t, path, raw, reterr);

        if (!hl && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
                /* device nodes, fifos, sockets: neutralised. What lower layers had there goes too. */
                t->dropped++;
                r = open_parent(t, path, false, &pfd, &base, reterr, raw);
                if (r == -ENOENT)
                        return 0;
                if (r < 0)
                        return r;
                return remove_existing(t, pfd, base, path, false);
        }

        r = open_parent(t, path, true, &pfd, &base, reterr, raw);
        if (r == -ENOENT)
                return fail(reterr, r, raw, "its directory vanished");
        if (r < 0)
                return r;

        if (hl)
                return extract_hardlink(t, pfd, base, path, hl, raw, reterr);

        switch (type) {
        case AE_IFDIR:
                return extract_dir(t, ae, pfd, base, path, raw, reterr);
        case AE_IFLNK:
                return extract_symlink(t, ae, pfd, base, path, raw, reterr);
        default: /* AE_IFREG */
                return extract_regular(t, a, ae, pfd, base, path, raw, reterr);
        }
}

int tree_extract(Tree *t, struct archive *a, bool whiteouts, Error *reterr) {
        struct archive_entry *ae;
        unsigned n = 0;
        int r;

        for (;;) {
                int ar;

                if (cancelled(t))
                        return fail_cancelled(reterr);
                ar = archive_read_next_header(a, &ae);
                if (ar == ARCHIVE_EOF)
                        break;
                if (ar < ARCHIVE_WARN) {
                        if (reterr && !reterr->message)
                                (void) error_set(reterr, ERROR_INVALID_SOURCE, "%s after %u entries",
                                                 archive_error_string(a) ?: "the archive cannot be read", n);
                        return -EBADMSG;
                }
                r = extract_one(t, a, ae, whiteouts, reterr);
                if (r < 0)
                        return r;
                n++;
                if (t->progress)
                        t->progress(t->progress_userdata);
        }
        return 0;
}

/* ---- the manifest ---- */

static int cmp_path(const void *a, const void *b) {
        return strcmp((*(TreeEntry *const *) a)->path, (*(TreeEntry *const *) b)->path);
}

/* Live entries sorted by path, the root first (added as an implied directory when no entry named it). */
static int sorted_entries(Tree *t, TreeEntry ***ret, size_t *ret_n) {
        TreeEntry **v, *root;
        size_t n = 0;
        int r;

        if (!tree_lookup(t, "")) {
                r = tree_put(t, "", &root);
                if (r < 0)
                        return r;
                root->mode = S_IFDIR | 0755;
                root->uid = root->gid = 0;
                root->mtime = 0;
        }
        for (size_t i = 0; i < t->capacity; i++)
                if (t->slots[i].path && t->slots[i].live)
                        n++;
        v = calloc(n ?: 1, sizeof *v);
        if (!v)
                return -ENOMEM;
        n = 0;
        for (size_t i = 0; i < t->capacity; i++)
                if (t->slots[i].path && t->slots[i].live)
                        v[n++] = &t->slots[i];
        qsort(v, n, sizeof *v, cmp_path);
        *ret = v;
        *ret_n = n;
        return 0;
}

static void put_escaped(FILE *f, const char *path) {
        fputc('/', f);
        for (const unsigned char *p = (const unsigned char *) path; *p; p++)
                if (*p <= 0x20 || *p == 0x7f || *p == '%')
                        fprintf(f, "%%%02X", *p);
                else
                        fputc(*p, f);
}

int tree_write_manifest(Tree *t, FILE *f) {
        _cleanup_free_ TreeEntry **v = NULL;
        size_t n;
        int r;

        r = sorted_entries(t, &v, &n);
        if (r < 0)
                return r;
        fputs("space-rootfs-manifest v1\n", f);
        for (size_t i = 0; i < n; i++) {
                const TreeEntry *e = v[i];
                char hex[65] = "-";

                if (!S_ISDIR(e->mode))
                        string_hex_encode(e->sha256, 32, hex);
                if (*e->path)
                        put_escaped(f, e->path);
                else
                        fputc('/', f);
                fprintf(f, "\t%c\t%04o\t%u\t%u\t%lld\t%llu\t%s\n",
                        S_ISDIR(e->mode) ? 'd' : S_ISLNK(e->mode) ? 'l' : 'f', (unsigned) (e->mode & 07777),
                        (unsigned) e->uid, (unsigned) e->gid, (long long) e->mtime,
                        (unsigned long long) (S_ISDIR(e->mode) ? 0 : e->size), hex);
        }
        return ferror(f) ? -EIO : 0;
}

int tree_digest(Tree *t, char **ret_digest) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        uint8_t md[32];
        char hex[65];
        FILE *f;
        int r;

        f = open_memstream(&buf, &len);
        if (!f)
                return -ENOMEM;
        r = tree_write_manifest(t, f);
        if (fclose(f) != 0 && r >= 0)
                r = -ENOMEM;
        if (r < 0)
                return r;
        sha256_of(buf, len, md);
        string_hex_encode(md, 32, hex);
        return asprintf(ret_digest, "sha256:%s", hex) < 0 ? -ENOMEM : 0;
}

static void put_quoted(FILE *f, const char *path) {
        /* debugfs (libss) quoting: inside "...", a doubled quote is one quote; no other escapes. */
        fputs("\"/", f);
        for (const char *p = path; *p; p++) {
                if (*p == '"')
                        fputc('"', f);
                fputc(*p, f);
        }
        fputc('"', f);
}

int tree_write_debugfs_script(Tree *t, FILE *f) {
        _cleanup_free_ TreeEntry **v = NULL;
        size_t n;
        int r;

        r = sorted_entries(t, &v, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                const TreeEntry *e = v[i];
                long long when = e->mtime < 0 ? 0 : e->mtime > 0x3ffffffffLL ? 0x3ffffffffLL : e->mtime;
                static const char *const fields[] = { "mtime", "atime", "ctime" };

                fputs("sif ", f);
                put_quoted(f, e->path);
                fprintf(f, " mode 0%o\n", (unsigned) e->mode);
                fputs("sif ", f);
                put_quoted(f, e->path);
                fprintf(f, " uid %u\n", (unsigned) e->uid);
                fputs("sif ", f);
                put_quoted(f, e->path);
                fprintf(f, " gid %u\n", (unsigned) e->gid);
                for (unsigned k = 0; k < ELEMENTSOF(fields); k++) {
                        fputs("sif ", f);
                        put_quoted(f, e->path);
                        fprintf(f, " %s @%lld\n", fields[k], when);
                }
        }
        return ferror(f) ? -EIO : 0;
}

uint64_t tree_files(Tree *t) {
        uint64_t n = 0;
        for (size_t i = 0; i < t->capacity; i++)
                if (t->slots[i].path && t->slots[i].live)
                        n++;
        return n;
}

uint64_t tree_content_bytes(Tree *t) {
        uint64_t b = 0;
        for (size_t i = 0; i < t->capacity; i++) {
                const TreeEntry *e = &t->slots[i];
                if (!e->path || !e->live)
                        continue;
                b += 4096;
                if (S_ISREG(e->mode))
                        b += (e->size + 4095) & ~4095ULL;
        }
        return b;
}

uint64_t tree_size_bytes(Tree *t) {
        uint64_t b = 0;
        for (size_t i = 0; i < t->capacity; i++) {
                const TreeEntry *e = &t->slots[i];
                if (e->path && e->live && !S_ISDIR(e->mode))
                        b += e->size;
        }
        return b;
}
