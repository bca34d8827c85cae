/* SPDX-License-Identifier: Apache-2.0 */
#include <archive.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/log.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "template/oci.h"
#include "template/template-tree.h"
#include "template/template.h"
#include "user.h"
#include "core/util.h"
#include "core/worker.h"

/* Imports (POST /v1/templates/import): a worker thread turns a rootfs tarball (plain, gzip, xz, zstd), an OCI
 * image layout directory or an OCI archive (a tar of a layout, as `skopeo copy ... oci-archive:` writes) into
 * an image of the store:
 *   reading  the source is extracted into a staging tree under $state/templates/.tmp-* (template-tree.c: no
 *            entry can write outside it; ownership and modes are only recorded);
 *   layers   an OCI image's layers are applied in order with whiteouts, every blob checked against its digest;
 *   digest   the tree's manifest is hashed: the template's name;
 *   image    mkfs.ext4 -d copies the tree into a sparse image and a debugfs script gives every path its mode,
 *            owner and times (so it works as any user, reproducibly);
 * and the directory is renamed to $state/templates/sha256-<hex>. The event loop then records it and tags it. */

#define READ_BUF (1U << 20)
#define IMAGE_EPOCH "86400"   /* E2FSPROGS_FAKE_TIME: superblock times do not depend on when we ran */

typedef struct ImportJob {
        Manager *manager;
        char op_id[OPERATION_ID_LEN + 1];
        char *state_dir;
        char *source;
        int source_fd;       /* an upload's archive, or -1: open source */
        char *tag;
        char *source_digest;
        cJSON *request_config;
        OperationProgress progress;
        bool progress_init;
        TreeBudget budget;   /* the limits of spaced.conf; its cancel is progress.cancel */
        uint64_t max_layers;
        /* results */
        Template *t;
        unsigned dropped;
        bool existed;
        int r;
        ErrorCode error_code;
        char *error;
} ImportJob;

static void job_free(ImportJob *j) {
        if (!j)
                return;
        free(j->state_dir);
        free(j->source);
        safe_close(j->source_fd);
        free(j->tag);
        free(j->source_digest);
        cJSON_Delete(j->request_config);
        template_free(j->t);
        free(j->error);
        if (j->progress_init)
                pthread_mutex_destroy(&j->progress.lock);
        free(j);
}

static void progress_phase(ImportJob *j, const char *phase, uint64_t total) {
        pthread_mutex_lock(&j->progress.lock);
        j->progress.phase = phase;
        j->progress.bytes_done = 0;
        j->progress.bytes_total = total;
        pthread_mutex_unlock(&j->progress.lock);
}

static void progress_add(ImportJob *j, uint64_t n) {
        pthread_mutex_lock(&j->progress.lock);
        j->progress.bytes_done += n;
        pthread_mutex_unlock(&j->progress.lock);
}

static void progress_layer(ImportJob *j, unsigned layer, unsigned layers) {
        pthread_mutex_lock(&j->progress.lock);
        j->progress.layer = layer;
        j->progress.layers = layers;
        pthread_mutex_unlock(&j->progress.lock);
}

static int job_fail(ImportJob *j, ErrorCode code, int r, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool job_cancelled(ImportJob *j) {
        return atomic_load_explicit(&j->progress.cancel, memory_order_relaxed);
}

static int job_fail(ImportJob *j, ErrorCode code, int r, const char *fmt, ...) {
        va_list ap;

        if (!j->error) {
                va_start(ap, fmt);
                if (vasprintf(&j->error, fmt, ap) < 0)
                        j->error = NULL;
                va_end(ap);
                j->error_code = code;
        }
        return r;
}

/* ---- reading through libarchive, hashing what is read ---- */

typedef struct Reader {
        ImportJob *job;
        int fd;
        EVP_MD_CTX *md;       /* NULL: no digest wanted */
        uint64_t n;
        uint8_t *buf;
} Reader;

static la_ssize_t reader_read(struct archive *a, void *userdata, const void **ret) {
        Reader *rd = userdata;
        ssize_t n;

        if (job_cancelled(rd->job)) {
                archive_set_error(a, ECANCELED, "cancelled");
                return -1;
        }
        do
                n = read(rd->fd, rd->buf, READ_BUF);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                archive_set_error(a, errno, "read: %s", strerror(errno));
                return -1;
        }
        if (rd->md && n > 0)
                EVP_DigestUpdate(rd->md, rd->buf, (size_t) n);
        rd->n += (uint64_t) n;
        progress_add(rd->job, (uint64_t) n);
        *ret = rd->buf;
        return n;
}

/* Extracts the archive on fd into the tree. expect_hex: the blob's sha256 (an OCI layer), checked over all
 * of fd's bytes, including any libarchive did not need. */
static int extract_fd(ImportJob *j, int fd, Tree *tree, bool whiteouts, const char *expect_hex, uint64_t expect_size,
                      const char *what) {
        struct archive *a = archive_read_new();
        Reader rd = { .job = j, .fd = fd };
        _cleanup_(error_done) Error err = {};
        int r;

        rd.buf = malloc(READ_BUF);
        if (expect_hex)
                rd.md = EVP_MD_CTX_new();
        if (!a || !rd.buf || (expect_hex && (!rd.md || EVP_DigestInit_ex(rd.md, EVP_sha256(), NULL) != 1))) {
                r = -ENOMEM;
                goto out;
        }
        archive_read_support_filter_all(a);
        archive_read_support_format_tar(a);
        if (archive_read_open(a, &rd, NULL, reader_read, NULL) != ARCHIVE_OK) {
                if (job_cancelled(j))
                        r = job_fail(j, ERROR_CANCELLED, -ECANCELED, "the import was cancelled");
                else
                        r = job_fail(j, ERROR_INVALID_SOURCE, -EBADMSG,
                                     "%s is not a tar archive (plain, gzip, xz or zstd): %s", what,
                                     archive_error_string(a) ?: "unknown format");
                goto out;
        }
        r = tree_extract(tree, a, whiteouts, &err);
        if (r < 0) {
                if (job_cancelled(j))
                        r = job_fail(j, ERROR_CANCELLED, -ECANCELED, "the import was cancelled");
                else if (err.code == ERROR_LIMIT_EXCEEDED)
                        r = job_fail(j, ERROR_LIMIT_EXCEEDED, r, "%s: %s", what, err.message ?: strerror(-r));
                else if (r == -ENOSPC || r == -EDQUOT)
                        r = job_fail(j, ERROR_NO_SPACE, r, "%s: %s", what, err.message ?: strerror(-r));
                else
                        r = job_fail(j, ERROR_INVALID_SOURCE, r, "%s: %s", what, err.message ?: strerror(-r));
                goto out;
        }
        if (expect_hex) {
                uint8_t md[32];
                char got[65];
                const void *dummy;

                while ((r = (int) reader_read(a, &rd, &dummy)) > 0)
                        ;
                if (r < 0 && job_cancelled(j)) {
                        r = job_fail(j, ERROR_CANCELLED, -ECANCELED, "the import was cancelled");
                        goto out;
                }
                if (r < 0) {
                        r = job_fail(j, ERROR_INVALID_SOURCE, -EIO, "%s: read error", what);
                        goto out;
                }
                EVP_DigestFinal_ex(rd.md, md, NULL);
                string_hex_encode(md, 32, got);
                if (!streq(got, expect_hex) || rd.n != expect_size) {
                        r = job_fail(j, ERROR_INVALID_SOURCE, -EBADMSG,
                                     "%s does not match its descriptor: sha256:%s, %llu bytes, got sha256:%s, %llu bytes",
                                     what, expect_hex, (unsigned long long) expect_size, got, (unsigned long long) rd.n);
                        goto out;
                }
        }
        r = 0;
out:
        if (a)
                archive_read_free(a);
        EVP_MD_CTX_free(rd.md);
        free(rd.buf);
        return r;
}

/* ---- OCI ---- */

static int import_oci(ImportJob *j, int layout_fd, Tree *tree) {
        _cleanup_(error_done) Error err = {};
        OciImage img = {};
        uint64_t total = 0;
        int r;

        r = oci_image_read(layout_fd, &img, &err);
        if (r < 0)
                return job_fail(j, ERROR_INVALID_SOURCE, r, "%s: %s", j->source, err.message ?: strerror(-r));
        if (j->max_layers > 0 && img.n_layers > j->max_layers) {
                r = job_fail(j, ERROR_LIMIT_EXCEEDED, -EFBIG,
                             "%s: the image has %u layers, over the import limit of %llu (import_max_layers in spaced.conf)",
                             j->source, img.n_layers, (unsigned long long) j->max_layers);
                goto out;
        }
        for (unsigned i = 0; i < img.n_layers; i++)
                total += img.layers[i].size;
        progress_phase(j, "layers", total);
        for (unsigned i = 0; i < img.n_layers; i++) {
                _cleanup_close_ int fd = -1;
                _cleanup_free_ char *what = NULL;

                progress_layer(j, i + 1, img.n_layers);
                r = oci_blob_open(layout_fd, img.layers[i].hex, img.layers[i].size, &fd, &err);
                if (r < 0) {
                        r = job_fail(j, ERROR_INVALID_SOURCE, r, "%s: layer %u: %s", j->source, i + 1,
                                     err.message ?: strerror(-r));
                        goto out;
                }
                if (asprintf(&what, "layer %u/%u (sha256:%.12s)", i + 1, img.n_layers, img.layers[i].hex) < 0) {
                        r = -ENOMEM;
                        goto out;
                }
                tree_set_layer(tree, i + 1);
                r = extract_fd(j, fd, tree, true, img.layers[i].hex, img.layers[i].size, what);
                if (r < 0)
                        goto out;
        }
        /* the image's config: defaults the request's config may override */
        for (char **e = img.env; e && *e; e++)
                if (strchr(*e, '=') && **e != '=' && strv_set_kv(&j->t->env, *e) < 0) {
                        r = -ENOMEM;
                        goto out;
                }
        if (img.user && space_user_spec_parse(img.user, NULL) < 0)
                /* exec could not run anything as it: root stays the default; config.user can say otherwise */
                log_warning("import %s: the image's User '%.64s' is not NAME|UID[:GROUP|GID]; ignoring it",
                            j->source, img.user);
        else if (img.user) {
                free(j->t->user);
                j->t->user = TAKE_PTR(img.user);
        }
        if (img.workdir && img.workdir[0] == '/') {
                free(j->t->workdir);
                j->t->workdir = TAKE_PTR(img.workdir);
        }
        if (img.entrypoint) {
                strv_free(j->t->entrypoint);
                j->t->entrypoint = TAKE_PTR(img.entrypoint);
        }
        r = 0;
out:
        oci_image_done(&img);
        return r;
}

/* ---- the image ---- */

/* Runs argv with stdout to /dev/null and stderr to err_path; returns the exit status (or -errno). While it
 * runs, watch (optional) is stat()ed every 100 ms and its allocated bytes reported as the phase's progress:
 * mkfs.ext4 -d says nothing itself, but the image it writes grows. A cancel kills it: -ECANCELED. */
static int run_logged(char *const argv[], const char *err_path, ImportJob *j, const char *watch) {
        pid_t pid = fork();
        int status;

        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (null < 0 || err < 0)
                        _exit(126);
                dup2(null, 0);
                dup2(null, 1);
                dup2(err, 2);
                execvp(argv[0], argv);
                dprintf(2, "%s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        for (;;) {
                pid_t w = waitpid(pid, &status, WNOHANG);
                struct stat st;

                if (w < 0 && errno != EINTR)
                        return -errno;
                if (w == pid)
                        break;
                if (w == 0 && job_cancelled(j)) {
                        (void) kill(pid, SIGKILL);
                        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                                ;
                        return -ECANCELED;
                }
                if (w == 0) {
                        if (watch && stat(watch, &st) >= 0) {
                                pthread_mutex_lock(&j->progress.lock);
                                uint64_t b = (uint64_t) st.st_blocks * 512;
                                j->progress.bytes_done = b < j->progress.bytes_total ? b : j->progress.bytes_total;
                                pthread_mutex_unlock(&j->progress.lock);
                        }
                        (void) usleep(watch ? 100 * 1000 : 20 * 1000);
                }
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *read_tail(const char *path, bool skip_debugfs_banner) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        char line[1024], *out = NULL;
        size_t len = 0;
        FILE *o;

        if (!f)
                return NULL;
        o = open_memstream(&out, &len);
        if (!o)
                return NULL;
        while (fgets(line, sizeof line, f)) {
                if (skip_debugfs_banner && strncmp(line, "debugfs ", 8) == 0)
                        continue;
                if (len < 2048)
                        fputs(line, o);
        }
        fclose(o);
        if (out && !*out) {
                free(out);
                return NULL;
        }
        return out;
}

static int make_image(ImportJob *j, Tree *tree, const char *tmp, const char *root) {
        _cleanup_free_ char *img = NULL, *script = NULL, *errlog = NULL, *size = NULL, *uuid = NULL, *seed = NULL,
                            *eopt = NULL, *inodes = NULL, *tail = NULL;
        uint64_t content = tree_content_bytes(tree), files = tree_files(tree), need_mib, size_mib, n_inodes;
        const char *h = j->t->digest + 7;
        FILE *f;
        int r, rc;

        need_mib = ((content + content / 4) >> 20) + 32;
        size_mib = j->t->disk_mib > need_mib ? j->t->disk_mib : need_mib;
        j->t->disk_mib = size_mib; /* a sandbox's disk is at least the image */
        n_inodes = (size_mib << 20) / 16384;
        if (n_inodes < files + files / 4 + 1024)
                n_inodes = files + files / 4 + 1024;
        progress_phase(j, "image", content);

        if (asprintf(&img, "%s/rootfs.ext4", tmp) < 0 || asprintf(&script, "%s/owners.debugfs", tmp) < 0 ||
            asprintf(&errlog, "%s/mkfs.log", tmp) < 0 || asprintf(&size, "%lluM", (unsigned long long) size_mib) < 0 ||
            asprintf(&inodes, "%llu", (unsigned long long) n_inodes) < 0 ||
            /* fixed per template: the filesystem's UUID and hash seed come from its digest */
            asprintf(&uuid, "%.8s-%.4s-4%.3s-8%.3s-%.12s", h, h + 8, h + 13, h + 17, h + 20) < 0 ||
            asprintf(&seed, "%.8s-%.4s-4%.3s-8%.3s-%.12s", h + 32, h + 40, h + 45, h + 49, h + 52) < 0 ||
            asprintf(&eopt, "root_owner=0:0,hash_seed=%s", seed) < 0)
                return -ENOMEM;
        f = fopen(script, "we");
        if (!f)
                return job_fail(j, ERROR_INTERNAL, -errno, "cannot write %s: %m", script);
        r = tree_write_debugfs_script(tree, f);
        if (fclose(f) != 0 && r >= 0)
                r = -errno;
        if (r < 0)
                return job_fail(j, r == -ENOSPC ? ERROR_NO_SPACE : ERROR_INTERNAL, r, "cannot write %s: %s", script, strerror(-r));
        {
                _cleanup_close_ int fd = open(img, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (fd < 0 || ftruncate(fd, (off_t) (size_mib << 20)) < 0)
                        return job_fail(j, ERROR_INTERNAL, -errno, "cannot create %s: %m", img);
        }
        {
                char *argv[] = { "env", "E2FSPROGS_FAKE_TIME=" IMAGE_EPOCH, "mkfs.ext4", "-q", "-F", "-b", "4096",
                                 "-N", inodes, "-d", (char *) root, "-L", "root", "-U", uuid, "-E", eopt, img, size,
                                 NULL };
                rc = run_logged(argv, errlog, j, img);
                if (rc == -ECANCELED)
                        return job_fail(j, ERROR_CANCELLED, rc, "the import was cancelled");
                if (rc != 0) {
                        tail = read_tail(errlog, false);
                        return job_fail(j, rc == 127 ? ERROR_INTERNAL : ERROR_IMAGE_FAILED, -EIO,
                                        "mkfs.ext4 failed (status %d): %s", rc, tail ?: "no message");
                }
        }
        {
                char *argv[] = { "env", "E2FSPROGS_FAKE_TIME=" IMAGE_EPOCH, "debugfs", "-w", "-f", script, img, NULL };
                rc = run_logged(argv, errlog, j, NULL);
                if (rc == -ECANCELED)
                        return job_fail(j, ERROR_CANCELLED, rc, "the import was cancelled");
                tail = read_tail(errlog, true);
                if (rc != 0 || tail)
                        return job_fail(j, ERROR_IMAGE_FAILED, -EIO, "debugfs could not set owners and modes (status %d): %s",
                                        rc, tail ?: "no message");
        }
        if (chmod(img, 0444) < 0)
                return job_fail(j, ERROR_INTERNAL, -errno, "chmod %s: %m", img);
        (void) unlink(script);
        (void) unlink(errlog);
        progress_phase(j, "image", content);
        progress_add(j, content);
        return 0;
}

static int write_config(ImportJob *j, const char *dir) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        cJSON *c = template_config_to_json(j->t);
        int r;

        if (!c)
                return -ENOMEM;
        cJSON_AddStringToObject(c, "digest", j->t->digest);
        cJSON_AddStringToObject(c, "source", j->t->source ?: "");
        cJSON_AddNumberToObject(c, "size_bytes", (double) j->t->size_bytes);
        cJSON_AddNumberToObject(c, "files", (double) j->t->files);
        text = cJSON_Print(c);
        cJSON_Delete(c);
        if (!text || asprintf(&path, "%s/config.json", dir) < 0)
                return -ENOMEM;
        {
                _cleanup_free_ char *with_nl = NULL;
                if (asprintf(&with_nl, "%s\n", text) < 0)
                        return -ENOMEM;
                r = write_file_atomic(path, with_nl);
        }
        return r;
}

/* The request's config goes over the image's: env by key, everything else field by field. */
static int apply_request_config(ImportJob *j) {
        cJSON *c;
        const cJSON *env;
        int r;

        if (!j->request_config)
                return 0;
        c = cJSON_Duplicate(j->request_config, true);
        if (!c)
                return -ENOMEM;
        env = cJSON_GetObjectItemCaseSensitive(c, "env");
        if (cJSON_IsArray(env)) {
                const cJSON *i;
                cJSON_ArrayForEach(i, env)
                        if (cJSON_IsString(i) && strv_set_kv(&j->t->env, i->valuestring) < 0) {
                                cJSON_Delete(c);
                                return -ENOMEM;
                        }
                cJSON_DeleteItemFromObjectCaseSensitive(c, "env");
        }
        r = template_config_apply(j->t, c, NULL);
        cJSON_Delete(c);
        return r;
}

/* A sandbox's disk is never smaller than the image it starts from. */
static void keep_disk_at_least_image(ImportJob *j, const char *image) {
        struct stat st;
        if (stat(image, &st) >= 0 && j->t->disk_mib < ((uint64_t) st.st_size >> 20))
                j->t->disk_mib = (uint64_t) st.st_size >> 20;
}

/* An OCI archive: what was extracted is the layout; its layers make the rootfs, in *tree2. */
static int import_oci_archive(ImportJob *j, Tree *tree, const char *root2, Tree **tree2, int *layout_fd,
                              Tree **rootfs) {
        const TreeEntry *a = tree_lookup(tree, "oci-layout"), *b = tree_lookup(tree, "index.json");
        int r;

        if (!a || !b || !S_ISREG(a->mode) || !S_ISREG(b->mode))
                return 0;
        if (mkdir(root2, 0700) < 0 || (r = tree_new(root2, tree2)) < 0)
                return job_fail(j, ERROR_INTERNAL, -errno, "cannot create %s: %m", root2);
        tree_set_budget(*tree2, &j->budget);
        *layout_fd = fcntl(tree_root_fd(tree), F_DUPFD_CLOEXEC, 3);
        if (*layout_fd < 0)
                return -errno;
        r = import_oci(j, *layout_fd, *tree2);
        if (r < 0)
                return r;
        *rootfs = *tree2;
        return 0;
}

/* The source into the staging tree: a rootfs tarball, an OCI archive, or an OCI layout directory.
 * The caller owns *tree2 and *layout_fd, also on failure. */
static int read_source(ImportJob *j, Tree *tree, const char *root2, Tree **tree2, int *layout_fd, Tree **rootfs) {
        _cleanup_close_ int src_fd = -1;
        struct stat st;
        int r;

        if (j->source_fd >= 0) {
                src_fd = TAKE_FD(j->source_fd);
                if (lseek(src_fd, 0, SEEK_SET) < 0)
                        return job_fail(j, ERROR_INTERNAL, -errno, "cannot read the uploaded archive: %m");
        } else
                src_fd = open(j->source, O_RDONLY | O_CLOEXEC);
        if (src_fd < 0 || fstat(src_fd, &st) < 0)
                return job_fail(j, ERROR_INVALID_SOURCE, -errno, "cannot open %s: %m", j->source);
        if (S_ISDIR(st.st_mode)) {
                *layout_fd = TAKE_FD(src_fd);
                return import_oci(j, *layout_fd, tree);
        }
        if (!S_ISREG(st.st_mode))
                return job_fail(j, ERROR_INVALID_SOURCE, -EINVAL,
                                "%s is neither a file (a rootfs tarball or an OCI archive) nor a directory (an OCI layout)",
                                j->source);
        progress_phase(j, "reading", (uint64_t) st.st_size);
        r = extract_fd(j, src_fd, tree, false, NULL, 0, j->source);
        if (r < 0)
                return r;
        src_fd = safe_close(src_fd);
        return import_oci_archive(j, tree, root2, tree2, layout_fd, rootfs);
}

/* The manifest the digest was computed from, beside the image: exports (template-export.c) write the tree
 * from it, since the image alone does not say which of its files are the tree (lost+found is not). */
static int write_manifest(ImportJob *j, Tree *tree, const char *dir) {
        _cleanup_free_ char *path = NULL, *tmp = NULL;
        FILE *f;
        int r;

        if (asprintf(&path, "%s/" TEMPLATE_MANIFEST, dir) < 0 || asprintf(&tmp, "%s.tmp", path) < 0)
                return -ENOMEM;
        f = fopen(tmp, "we");
        if (!f)
                return job_fail(j, error_code_from_errno(-errno), -errno, "cannot write %s: %m", tmp);
        r = tree_write_manifest(tree, f);
        if (fclose(f) != 0 && r >= 0)
                r = -errno;
        if (r >= 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlink(tmp);
                return job_fail(j, error_code_from_errno(r), r, "cannot write %s: %s", path, strerror(-r));
        }
        return 0;
}

/* The same tree is in the store already: only the defaults change (and an image of an older daemon gets the
 * manifest it lacks). */
static int reuse_existing(ImportJob *j, Tree *tree, const char *final, bool *ret_reused) {
        _cleanup_free_ char *existing = NULL;
        int r;

        *ret_reused = false;
        if (asprintf(&existing, "%s/rootfs.ext4", final) < 0)
                return -ENOMEM;
        if (access(existing, F_OK) != 0)
                return 0;
        *ret_reused = true;
        j->existed = true;
        keep_disk_at_least_image(j, existing);
        {
                _cleanup_free_ char *manifest = NULL;
                if (asprintf(&manifest, "%s/" TEMPLATE_MANIFEST, final) < 0)
                        return -ENOMEM;
                if (access(manifest, F_OK) < 0 && (r = write_manifest(j, tree, final)) < 0)
                        return r;
        }
        r = write_config(j, final);
        if (r < 0)
                r = job_fail(j, ERROR_INTERNAL, r, "cannot write %s/config.json: %s", final, strerror(-r));
        return r;
}

/* A parallel import of the same tree won the rename: take its image, with our defaults. */
static int adopt_parallel(ImportJob *j, const char *final) {
        _cleanup_free_ char *existing = NULL;

        j->existed = true;
        if (asprintf(&existing, "%s/rootfs.ext4", final) >= 0)
                keep_disk_at_least_image(j, existing);
        return write_config(j, final);
}

/* The whole import, on a worker thread (or at start for builtins). */
static int import_run(ImportJob *j) {
        _cleanup_free_ char *tmp = NULL, *root = NULL, *root2 = NULL, *final = NULL, *err = NULL;
        _cleanup_close_ int layout_fd = -1;
        Tree *tree = NULL, *tree2 = NULL, *rootfs;
        bool reused;
        int r;

        progress_phase(j, "reading", 0);
        if (asprintf(&tmp, "%s/templates/.tmp-XXXXXX", j->state_dir) < 0)
                return -ENOMEM;
        if (!mkdtemp(tmp))
                return job_fail(j, errno == ENOSPC ? ERROR_NO_SPACE : ERROR_INTERNAL, -errno, "cannot create %s: %m", tmp);
        if (asprintf(&root, "%s/root", tmp) < 0 || asprintf(&root2, "%s/rootfs", tmp) < 0) {
                r = -ENOMEM;
                goto out;
        }
        if (mkdir(root, 0700) < 0 || (r = tree_new(root, &tree)) < 0) {
                r = job_fail(j, ERROR_INTERNAL, -errno, "cannot create the staging tree %s: %m", root);
                goto out;
        }
        tree_set_budget(tree, &j->budget);
        rootfs = tree;

        r = read_source(j, tree, root2, &tree2, &layout_fd, &rootfs);
        if (r < 0)
                goto out;

        if (job_cancelled(j)) {
                r = job_fail(j, ERROR_CANCELLED, -ECANCELED, "the import was cancelled");
                goto out;
        }
        r = apply_request_config(j); /* over the image's config */
        if (r < 0) {
                r = job_fail(j, ERROR_INVALID_ARGUMENT, r, "the config cannot be applied: %s", strerror(-r));
                goto out;
        }
        progress_phase(j, "digest", 0);
        r = tree_digest(rootfs, &j->t->digest);
        if (r < 0)
                goto out;
        j->t->files = tree_files(rootfs);
        j->dropped = tree_dropped(tree) + (tree2 ? tree_dropped(tree2) : 0);
        j->t->size_bytes = tree_size_bytes(rootfs);
        if (asprintf(&final, "%s/templates/sha256-%s", j->state_dir, j->t->digest + 7) < 0) {
                r = -ENOMEM;
                goto out;
        }
        r = reuse_existing(j, rootfs, final, &reused);
        if (r < 0 || reused)
                goto out;
        r = make_image(j, rootfs, tmp, tree2 ? root2 : root);
        if (r < 0)
                goto out;
        r = write_config(j, tmp);
        if (r < 0) {
                r = job_fail(j, ERROR_INTERNAL, r, "cannot write config.json: %s", strerror(-r));
                goto out;
        }
        r = write_manifest(j, rootfs, tmp);
        if (r < 0)
                goto out;
        /* the staging trees are not part of the image */
        tree = tree_free(tree);
        tree2 = tree_free(tree2);
        (void) rm_rf(root);
        (void) rm_rf(root2);
        crash_point("import-before-rename");
        if (job_cancelled(j)) { /* the last moment a cancel can win */
                r = job_fail(j, ERROR_CANCELLED, -ECANCELED, "the import was cancelled");
                goto out;
        }
        if (rename(tmp, final) < 0) {
                if (errno == EEXIST || errno == ENOTEMPTY)
                        r = adopt_parallel(j, final);
                else
                        r = job_fail(j, ERROR_INTERNAL, -errno, "cannot move the image to %s: %m", final);
                goto out;
        }
        free(tmp);
        tmp = NULL;
        r = 0;
out:
        tree_free(tree);
        tree_free(tree2);
        if (tmp)
                (void) rm_rf(tmp);
        if (r >= 0) {
                _cleanup_free_ char *img = NULL;
                struct stat ist;
                if (asprintf(&img, "%s/rootfs.ext4", final) >= 0 && stat(img, &ist) >= 0)
                        j->t->image_bytes = (uint64_t) ist.st_blocks * 512;
        }
        progress_phase(j, r >= 0 ? "done" : j->progress.phase, 0);
        return r;
}

static void import_done(Manager *m, void *userdata);

static void *import_worker(void *userdata) {
        ImportJob *j = userdata;

        j->r = import_run(j);
        completion_post(j->manager, import_done, j);
        return NULL;
}

static cJSON *result_json(ImportJob *j, const Template *t) {
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "digest", t->digest);
        cJSON_AddItemToObject(o, "tags", json_array_from_strv(t->tags));
        cJSON_AddNumberToObject(o, "size_bytes", (double) t->size_bytes);
        cJSON_AddNumberToObject(o, "image_bytes", (double) t->image_bytes);
        cJSON_AddNumberToObject(o, "files", (double) t->files);
        cJSON_AddNumberToObject(o, "dropped", j->dropped);
        cJSON_AddBoolToObject(o, "existed", j->existed);
        return o;
}

/* On the event loop: record the image and its tag. */
static int import_record(Manager *m, ImportJob *j, Template **ret) {
        _cleanup_free_ char *image = NULL;
        Template *t;
        int r;

        /* an rm or gc on the loop may have removed the image this import found in the store */
        if (asprintf(&image, "%s/templates/sha256-%s/rootfs.ext4", j->state_dir, j->t->digest + 7) < 0)
                return -ENOMEM;
        if (access(image, F_OK) < 0)
                return job_fail(j, ERROR_INTERRUPTED, -ENOENT,
                                "the image %s was removed while this import ran; import again", j->t->digest);
        t = TAKE_PTR(j->t);

        r = template_store_add(m, t, j->tag, &t);
        if (r < 0)
                return r;
        *ret = t;
        return 0;
}

static void import_done(Manager *m, void *userdata) {
        ImportJob *j = userdata;
        Operation *op = operation_find(m, j->op_id);
        Template *t = NULL;
        int r = j->r;

        if (op)
                op->progress = NULL;
        if (r >= 0) {
                r = import_record(m, j, &t);
                if (r < 0)
                        (void) job_fail(j, ERROR_INTERNAL, r, "cannot record the template: %s", strerror(-r));
        }
        if (r >= 0) {
                cJSON *res = result_json(j, t);
                log_info("imported %s from %s as %s (%llu files%s)", t->digest, j->source, j->tag ?: "no tag",
                         (unsigned long long) t->files, j->existed ? ", the image existed" : "");
                if (op) {
                        free(op->result);
                        op->result = res ? cJSON_PrintUnformatted(res) : NULL;
                        operation_finish(op, ERROR_NONE, NULL);
                }
                cJSON_Delete(res);
                template_imported(m); /* a pool of the tag now makes sandboxes of this image */
        } else {
                log_warning("import of %s failed: %s", j->source, j->error ?: strerror(-r));
                if (op)
                        operation_finish(op, j->error_code != ERROR_NONE ? j->error_code : ERROR_INTERNAL, j->error ?: strerror(-r));
        }
        job_free(j);
}

static int job_new(Manager *m, const ImportRequest *req, ImportJob **ret, Error *reterr) {
        ImportJob *j = calloc(1, sizeof *j);
        _cleanup_(error_done) Error msg = {};
        int r;

        if (!j)
                return -ENOMEM;
        j->manager = m;
        j->source_fd = -1;
        pthread_mutex_init(&j->progress.lock, NULL);
        j->progress_init = true;
        j->progress.phase = "reading";
        j->progress.cancellable = true;
        atomic_init(&j->progress.cancel, false);
        {
                ImportLimits l = config_import_limits(&m->config);
                j->budget = (TreeBudget) { .max_bytes = l.max_bytes, .max_disk_bytes = l.max_disk_bytes,
                                           .max_entries = l.max_entries, .max_entry_bytes = l.max_entry_bytes,
                                           .max_path = l.max_path, .cancel = &j->progress.cancel };
                j->max_layers = l.max_layers;
        }
        j->state_dir = strdup(m->state_dir);
        j->source = strdup(req->source);
        if (req->has_fd) {
                j->source_fd = fcntl(req->fd, F_DUPFD_CLOEXEC, 3);
                if (j->source_fd < 0) {
                        job_free(j);
                        return -errno;
                }
        }
        j->t = calloc(1, sizeof *j->t);
        if (!j->state_dir || !j->source || !j->t || (req->tag && !(j->tag = strdup(req->tag))) ||
            (req->source_digest && !(j->source_digest = strdup(req->source_digest)))) {
                job_free(j);
                return -ENOMEM;
        }
        j->t->vcpu = 1;
        j->t->memory_mib = 256;
        j->t->disk_mib = TEMPLATE_DEFAULT_DISK_MIB;
        j->t->created_at = now_unix();
        j->t->source = strdup(req->source);
        j->t->source_digest = req->source_digest ? strdup(req->source_digest) : NULL;
        if (req->config) {
                /* checked now, so that a bad config fails the request, not the operation */
                Template probe = { .vcpu = 1, .memory_mib = 256, .disk_mib = TEMPLATE_DEFAULT_DISK_MIB };
                r = template_config_apply(&probe, req->config, &msg);
                free(probe.description);
                strv_free(probe.env);
                free(probe.workdir);
                free(probe.user);
                strv_free(probe.entrypoint);
                if (r < 0) {
                        job_free(j);
                        if (r != -ENOMEM)
                                error_move(reterr, &msg);
                        return r;
                }
                j->request_config = cJSON_Duplicate(req->config, true);
        }
        *ret = j;
        return 0;
}

static int validate_source(const char *source, Error *reterr) {
        struct stat st;

        if (!source || source[0] != '/')
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                           "source must be an absolute path (the daemon does not know your directory)") ?: -EINVAL;
        if (stat(source, &st) < 0)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "source %s: %s", source, strerror(errno)) ?: -ENOENT;
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                           "source %s is neither a file nor a directory", source) ?: -EINVAL;
        if (access(source, R_OK) < 0)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "source %s: %s", source, strerror(errno)) ?: -EACCES;
        return 0;
}

int template_import_tmpfile(Manager *m, int *ret_fd) {
        _cleanup_free_ char *dir = NULL, *path = NULL;
        int fd;

        if (asprintf(&dir, "%s/templates", m->state_dir) < 0)
                return -ENOMEM;
        fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0) {
                *ret_fd = fd;
                return 0;
        }
        if (errno != EOPNOTSUPP && errno != EISDIR)
                return -errno;
        /* no O_TMPFILE here: a named file, gone at once (a crash in between leaves a .tmp-*, removed at start) */
        if (asprintf(&path, "%s/.tmp-upload-XXXXXX", dir) < 0)
                return -ENOMEM;
        fd = mkostemp(path, O_CLOEXEC);
        if (fd < 0)
                return -errno;
        (void) unlink(path);
        *ret_fd = fd;
        return 0;
}

int template_import_start(Manager *m, const ImportRequest *req, Operation **ret_op, Error *reterr) {
        ImportJob *j;
        Operation *op;
        int r;

        r = req->has_fd ? 0 : validate_source(req->source, reterr);
        if (r < 0)
                return r;
        r = job_new(m, req, &j, reterr);
        if (r < 0)
                return r;
        op = operation_new(m, "import", NULL);
        if (!op) {
                job_free(j);
                return -ENOMEM;
        }
        memcpy(j->op_id, op->id, sizeof j->op_id);
        op->progress = &j->progress;
        r = worker_start(m, import_worker, j);
        if (r < 0) {
                op->progress = NULL;
                operation_finish(op, ERROR_INTERNAL, "cannot start a worker thread");
                job_free(j);
                return error_set(reterr, ERROR_INTERNAL, "cannot start a worker thread: %s", strerror(-r)) ?: r;
        }
        *ret_op = op;
        return 0;
}

int template_import_now(Manager *m, const ImportRequest *req, Template **ret, Error *reterr) {
        Error e = {};
        ImportJob *j;
        int r;

        r = validate_source(req->source, &e);
        if (r >= 0)
                r = job_new(m, req, &j, &e);
        if (r < 0) {
                error_move(reterr, &e);
                return r;
        }
        r = import_run(j);
        if (r >= 0)
                r = import_record(m, j, ret);
        if (r < 0 && j->error)
                (void) error_set(reterr, j->error_code != ERROR_NONE ? j->error_code : ERROR_INTERNAL, "%s", j->error);
        job_free(j);
        return r;
}
