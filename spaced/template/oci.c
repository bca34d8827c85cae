/* SPDX-License-Identifier: Apache-2.0 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "string-util.h"
#include "template/oci.h"

#define OCI_JSON_MAX (4U << 20)
#define OCI_LAYERS_MAX 512
#define OCI_INDEX_DEPTH_MAX 2

void oci_image_done(OciImage *img) {
        for (unsigned i = 0; i < img->n_layers; i++)
                free(img->layers[i].media_type);
        free(img->layers);
        strv_free(img->env);
        free(img->user);
        free(img->workdir);
        strv_free(img->entrypoint);
        free(img->manifest_digest);
        memset(img, 0, sizeof *img);
}

/* Opens dir/.../name below layout_fd one component at a time, never following a symlink: a layout (or an
 * archive of one) could otherwise point a blob at any file we can read. */
static int open_below(int layout_fd, const char *path, int *ret_fd) {
        _cleanup_free_ char *copy = strdup(path);
        _cleanup_close_ int fd = -1;
        char *p, *slash;

        if (!copy)
                return -ENOMEM;
        fd = openat(layout_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        for (p = copy; (slash = strchr(p, '/')); p = slash + 1) {
                int nfd;
                *slash = 0;
                nfd = openat(fd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (nfd < 0)
                        return errno == ELOOP ? -ENOTDIR : -errno;
                safe_close(fd);
                fd = nfd;
        }
        {
                int ffd = openat(fd, p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                struct stat st;
                if (ffd < 0)
                        return errno == ELOOP ? -EMLINK : -errno;
                if (fstat(ffd, &st) < 0 || !S_ISREG(st.st_mode)) {
                        close(ffd);
                        return -EBADF;
                }
                *ret_fd = ffd;
        }
        return 0;
}

/* "sha256:<hex>" of a descriptor, checked: the hex is a file name below blobs/sha256/. */
static int descriptor_digest(const cJSON *desc, const char **ret_hex, uint64_t *ret_size, Error *reterr, const char *what) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(desc, "digest");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(desc, "size");

        if (!cJSON_IsString(d) || strncmp(d->valuestring, "sha256:", 7) != 0 || !string_is_hex(d->valuestring + 7, 64)) {
                (void) error_set(reterr, ERROR_INVALID_SOURCE, "the %s descriptor has no valid sha256 digest (only sha256 is supported)", what);
                return -EBADMSG;
        }
        if (!cJSON_IsNumber(s) || s->valuedouble < 0 || s->valuedouble > 1e15 ||
            s->valuedouble != (double) (uint64_t) s->valuedouble) {
                (void) error_set(reterr, ERROR_INVALID_SOURCE, "the %s descriptor %s has no valid size", what, d->valuestring);
                return -EBADMSG;
        }
        *ret_hex = d->valuestring + 7;
        *ret_size = (uint64_t) s->valuedouble;
        return 0;
}

int oci_blob_open(int layout_fd, const char *hex, uint64_t size, int *ret_fd, Error *reterr) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -1;
        struct stat st;
        int r;

        if (!string_is_hex(hex, 64))
                return -EINVAL;
        if (asprintf(&path, "blobs/sha256/%s", hex) < 0)
                return -ENOMEM;
        r = open_below(layout_fd, path, &fd);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INVALID_SOURCE, "blob sha256:%s: %s", hex,
                                 r == -ENOENT ? "missing from blobs/sha256/" :
                                 r == -EMLINK || r == -ENOTDIR ? "reached through a symlink (refused)" :
                                 r == -EBADF ? "not a regular file" : strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0)
                return -errno;
        if ((uint64_t) st.st_size != size) {
                (void) error_set(reterr, ERROR_INVALID_SOURCE, "blob sha256:%s has %llu bytes, its descriptor says %llu", hex,
                                 (unsigned long long) st.st_size, (unsigned long long) size);
                return -EBADMSG;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int read_all(int fd, size_t max, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = malloc(max + 1);
        size_t n = 0;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t k = read(fd, buf + n, max + 1 - n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n > max)
                        return -EFBIG;
        }
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        *ret_len = n;
        return 0;
}

static cJSON *blob_json(int layout_fd, const cJSON *desc, const char *what, Error *reterr) {
        _cleanup_free_ char *data = NULL;
        _cleanup_close_ int fd = -1;
        const char *hex;
        uint64_t size;
        size_t len;
        uint8_t md[32];
        char got[65];
        cJSON *o;

        if (descriptor_digest(desc, &hex, &size, reterr, what) < 0)
                return NULL;
        if (size > OCI_JSON_MAX) {
                (void) error_set(reterr, ERROR_INVALID_SOURCE, "the %s sha256:%s is %llu bytes: more than the %u MiB allowed", what, hex,
                                 (unsigned long long) size, OCI_JSON_MAX >> 20);
                return NULL;
        }
        if (oci_blob_open(layout_fd, hex, size, &fd, reterr) < 0)
                return NULL;
        if (read_all(fd, OCI_JSON_MAX, &data, &len) < 0 || len != size) {
                (void) error_set(reterr, ERROR_INVALID_SOURCE, "cannot read the %s sha256:%s", what, hex);
                return NULL;
        }
        EVP_Digest(data, len, md, NULL, EVP_sha256(), NULL);
        string_hex_encode(md, 32, got);
        if (!streq(got, hex)) {
                (void) error_set(reterr, ERROR_INVALID_SOURCE, "the %s blob does not match its digest: expected sha256:%s, got sha256:%s", what,
                                 hex, got);
                return NULL;
        }
        o = cJSON_ParseWithLength(data, len);
        if (!cJSON_IsObject(o)) {
                cJSON_Delete(o);
                (void) error_set(reterr, ERROR_INVALID_SOURCE, "the %s sha256:%s is not a JSON object", what, hex);
                return NULL;
        }
        return o;
}

static const char *media_type(const cJSON *o) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "mediaType");
        return cJSON_IsString(m) ? m->valuestring : "";
}

static bool is_index_type(const char *t) {
        return streq(t, "application/vnd.oci.image.index.v1+json") ||
               streq(t, "application/vnd.docker.distribution.manifest.list.v2+json");
}

/* Picks the descriptor for linux/amd64 among an index's manifests, or the only one. Attestation manifests
 * (platform unknown/unknown, as BuildKit writes) do not count. */
static const cJSON *pick_manifest(const cJSON *index, Error *reterr) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(index, "manifests"), *d, *only = NULL, *amd64 = NULL;
        _cleanup_free_ char *seen = NULL;
        unsigned n = 0;

        if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0) {
                (void) error_set(reterr, ERROR_INVALID_SOURCE, "the index lists no manifests");
                return NULL;
        }
        cJSON_ArrayForEach(d, list) {
                const cJSON *p = cJSON_GetObjectItemCaseSensitive(d, "platform");
                const char *os = cJSON_IsObject(p) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p, "os")) ?
                                         cJSON_GetObjectItemCaseSensitive(p, "os")->valuestring : NULL;
                const char *arch = cJSON_IsObject(p) &&
                                                   cJSON_IsString(cJSON_GetObjectItemCaseSensitive(p, "architecture")) ?
                                           cJSON_GetObjectItemCaseSensitive(p, "architecture")->valuestring : NULL;
                if (os && streq(os, "unknown"))
                        continue;
                n++;
                only = d;
                if (os && arch && streq(os, "linux") && streq(arch, "amd64") && !amd64)
                        amd64 = d;
                if (os || arch) {
                        char *s = NULL;
                        (void) asprintf(&s, "%s%s%s/%s", seen ?: "", seen ? ", " : "", os ?: "?", arch ?: "?");
                        free(seen);
                        seen = s;
                }
        }
        if (amd64)
                return amd64;
        if (n == 1)
                return only;
        (void) error_set(reterr, ERROR_INVALID_SOURCE, "the image has %u manifests and none for linux/amd64 (platforms: %s)", n, seen ?: "none");
        return NULL;
}

static int strv_from_array(const cJSON *a, char ***l) {
        const cJSON *i;
        cJSON_ArrayForEach(i, a)
                if (cJSON_IsString(i) && strv_extend(l, i->valuestring) < 0)
                        return -ENOMEM;
        return 0;
}

/* The layout's marker and its index.json, parsed; fills reterr itself, as nothing is open yet to clean up. */
static int read_index(int layout_fd, cJSON **ret_index, Error *reterr) {
        _cleanup_free_ char *data = NULL;
        _cleanup_close_ int fd = -1;
        cJSON *index;
        size_t len;
        int r;

        r = open_below(layout_fd, "oci-layout", &fd);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INVALID_SOURCE, "not an OCI image layout: oci-layout %s",
                                 r == -ENOENT ? "is missing" : "is not a regular file");
                return -EMEDIUMTYPE;
        }
        fd = safe_close(fd);
        r = open_below(layout_fd, "index.json", &fd);
        if (r >= 0)
                r = read_all(fd, OCI_JSON_MAX, &data, &len);
        if (r < 0) {
                (void) error_set(reterr, ERROR_INVALID_SOURCE, "the OCI layout's index.json cannot be read: %s", strerror(-r));
                return -EBADMSG;
        }
        index = cJSON_ParseWithLength(data, len);
        if (!cJSON_IsObject(index)) {
                (void) error_set(reterr, ERROR_INVALID_SOURCE, "the OCI layout's index.json is not a JSON object");
                cJSON_Delete(index);
                return -EBADMSG;
        }
        *ret_index = index;
        return 0;
}

/* index -> (nested index ->) manifest. *index and *manifest stay the caller's, also on failure; the
 * descriptor points into *index. */
static int resolve_manifest(int layout_fd, cJSON **index, cJSON **manifest, const cJSON **ret_desc, Error *err) {
        const cJSON *desc;

        for (unsigned depth = 0;; depth++) {
                desc = pick_manifest(*index, err);
                if (!desc)
                        return -EBADMSG;
                *manifest = blob_json(layout_fd, desc, "manifest", err);
                if (!*manifest)
                        return -EBADMSG;
                if (!is_index_type(media_type(desc)) && !is_index_type(media_type(*manifest)) &&
                    !cJSON_GetObjectItemCaseSensitive(*manifest, "manifests"))
                        break;
                if (depth + 1 >= OCI_INDEX_DEPTH_MAX) {
                        (void) error_set(err, ERROR_INVALID_SOURCE, "indexes nest too deep");
                        return -EBADMSG;
                }
                cJSON_Delete(*index);
                *index = *manifest;
                *manifest = NULL;
        }
        *ret_desc = desc;
        return 0;
}

/* The manifest's layers into img; -EBADMSG with err filled, or -ENOMEM. */
static int read_layers(const cJSON *manifest, OciImage *img, Error *err) {
        const cJSON *layers = cJSON_GetObjectItemCaseSensitive(manifest, "layers"), *l;
        int r;

        if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) > OCI_LAYERS_MAX) {
                (void) error_set(err, ERROR_INVALID_SOURCE, "%s",
                                 cJSON_IsArray(layers) ? "the manifest has more than 512 layers" :
                                 "the manifest has no layers list");
                return -EBADMSG;
        }
        img->layers = calloc((size_t) cJSON_GetArraySize(layers) + 1, sizeof *img->layers);
        if (!img->layers)
                return -ENOMEM;
        cJSON_ArrayForEach(l, layers) {
                OciLayer *ol = &img->layers[img->n_layers];
                const char *hex;
                const char *mt = media_type(l);

                r = descriptor_digest(l, &hex, &ol->size, err, "layer");
                if (r < 0)
                        return r;
                if (strstr(mt, "nondistributable") || strstr(mt, "foreign")) {
                        (void) error_set(err, ERROR_INVALID_SOURCE, "layer sha256:%s is %s: foreign layers are not in the layout", hex, mt);
                        return -EBADMSG;
                }
                memcpy(ol->hex, hex, 65);
                ol->media_type = strdup(mt);
                img->n_layers++;
        }
        return 0;
}

/* The runtime defaults from the image config's "config" object, if it has one. */
static int read_runtime_config(const cJSON *config, OciImage *img) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(config, "config"), *v;

        if (!cJSON_IsObject(c))
                return 0;
        if (cJSON_IsArray(v = cJSON_GetObjectItemCaseSensitive(c, "Env")) && strv_from_array(v, &img->env) < 0)
                return -ENOMEM;
        if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(c, "User")) && *v->valuestring &&
            !(img->user = strdup(v->valuestring)))
                return -ENOMEM;
        if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(c, "WorkingDir")) && *v->valuestring &&
            !(img->workdir = strdup(v->valuestring)))
                return -ENOMEM;
        if (cJSON_IsArray(v = cJSON_GetObjectItemCaseSensitive(c, "Entrypoint")) &&
            strv_from_array(v, &img->entrypoint) < 0)
                return -ENOMEM;
        if (cJSON_IsArray(v = cJSON_GetObjectItemCaseSensitive(c, "Cmd")) &&
            strv_from_array(v, &img->entrypoint) < 0)
                return -ENOMEM;
        return 0;
}

int oci_image_read(int layout_fd, OciImage *ret, Error *reterr) {
        _cleanup_(error_done) Error err = {};
        cJSON *index = NULL, *manifest = NULL, *config = NULL;
        const cJSON *desc, *c;
        OciImage img = {};
        int r;

        r = read_index(layout_fd, &index, reterr);
        if (r < 0)
                return r;
        r = resolve_manifest(layout_fd, &index, &manifest, &desc, &err);
        if (r < 0)
                goto fail;
        img.manifest_digest = strdup(cJSON_GetObjectItemCaseSensitive(desc, "digest")->valuestring);
        c = cJSON_GetObjectItemCaseSensitive(manifest, "config");
        config = cJSON_IsObject(c) ? blob_json(layout_fd, c, "image config", &err) : NULL;
        if (!config) {
                if (!err.message)
                        (void) error_set(&err, ERROR_INVALID_SOURCE, "the manifest has no config descriptor");
                r = -EBADMSG;
                goto fail;
        }
        r = read_layers(manifest, &img, &err);
        if (r == -ENOMEM)
                goto out;
        if (r < 0)
                goto fail;
        r = read_runtime_config(config, &img);
        if (r < 0)
                goto out;
        *ret = img;
        memset(&img, 0, sizeof img);
        r = 0;
        goto out;
fail:
        (void) error_set(reterr, ERROR_INVALID_SOURCE, "OCI image: %s", err.message ?: "not valid");
out:
        oci_image_done(&img);
        cJSON_Delete(index);
        cJSON_Delete(manifest);
        cJSON_Delete(config);
        return r;
}
