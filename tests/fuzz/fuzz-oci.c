/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: OCI image layouts (spaced/template/oci.c): index.json, the manifest (or a nested index)
 * and the image config, every blob checked against its descriptor's digest and size.
 *
 * Input: up to four parts split at "\n--BLOB--\n": index.json, then blobs. Each blob after the first part is
 * stored under blobs/sha256/<its sha256>, and in every part the placeholders @D1@ .. @D3@ and @S1@ .. @S3@
 * become that blob's "sha256:<hex>" digest and its size, so that mutations reach the parsers behind the
 * digest checks instead of stopping at them. Blob 3 refers to nothing; blob 2 may refer to blob 3 (a nested
 * index), blob 1 to blobs 2 and 3. Invariants: an accepted image has at most 512 layers with hex digests,
 * a refused one says why. */

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include "fuzz-util.h"
#include "macro.h"
#include "proto.h"
#include "string-util.h"
#include "template/oci.h"

#define PARTS 4

static char dir[300];
static int dir_fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        char p[400];

        snprintf(dir, sizeof dir, "%s/layout", fuzz_dir());
        if (mkdir(dir, 0700) < 0)
                abort();
        snprintf(p, sizeof p, "%s/oci-layout", dir);
        fuzz_write_file(p, "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
        snprintf(p, sizeof p, "%s/blobs", dir);
        mkdir(p, 0700);
        snprintf(p, sizeof p, "%s/blobs/sha256", dir);
        mkdir(p, 0700);
        dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0)
                abort();
        return 0;
}

/* p with @Dn@ and @Sn@ replaced for the blobs n that are already stored (n > from). */
static void substitute(const uint8_t *p, size_t n, char digests[PARTS][80], char sizes[PARTS][24], unsigned from,
                       SpaceBuf *out) {
        out->len = 0;
        for (size_t i = 0; i < n;) {
                if (n - i >= 4 && p[i] == '@' && (p[i + 1] == 'D' || p[i + 1] == 'S') && p[i + 2] >= '1' &&
                    p[i + 2] <= '3' && p[i + 3] == '@' && (unsigned) (p[i + 2] - '0') > from) {
                        unsigned k = (unsigned) (p[i + 2] - '0');
                        const char *v = p[i + 1] == 'D' ? digests[k] : sizes[k];
                        (void) space_buf_append(out, v, strlen(v));
                        i += 4;
                } else
                        (void) space_buf_append(out, p + i++, 1);
        }
}

static void clear_blobs(void) {
        char cmd[400];

        snprintf(cmd, sizeof cmd, "%s/blobs/sha256", dir);
        int fd = open(cmd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;

        if (!d)
                abort();
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        (void) unlinkat(fd, de->d_name, 0);
        closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *parts[PARTS];
        size_t lens[PARTS], n;
        char digests[PARTS][80] = {}, sizes[PARTS][24] = {}, path[500];
        _cleanup_(space_buf_done) SpaceBuf buf = {};
        _cleanup_(error_done) Error err = {};
        OciImage img = {};
        int r;

        n = fuzz_split(data, size, "\n--BLOB--\n", parts, lens, PARTS);
        clear_blobs();
        /* blobs last to first, so each can name the ones after it */
        for (unsigned k = (unsigned) n - 1; k >= 1; k--) {
                uint8_t md[32];
                char hex[65];

                substitute(parts[k], lens[k], digests, sizes, k, &buf);
                EVP_Digest(buf.data ?: (uint8_t *) "", buf.len, md, NULL, EVP_sha256(), NULL);
                for (unsigned i = 0; i < 32; i++)
                        snprintf(hex + 2 * i, 3, "%02x", md[i]);
                snprintf(digests[k], sizeof digests[k], "sha256:%s", hex);
                snprintf(sizes[k], sizeof sizes[k], "%zu", buf.len);
                snprintf(path, sizeof path, "%s/blobs/sha256/%s", dir, hex);
                fuzz_write_file(path, buf.data, buf.len);
        }
        substitute(parts[0], lens[0], digests, sizes, 0, &buf);
        snprintf(path, sizeof path, "%s/index.json", dir);
        fuzz_write_file(path, buf.data, buf.len);

        r = oci_image_read(dir_fd, &img, &err);
        if (getenv("FUZZ_VERBOSE"))
                fprintf(stderr, "oci: %d %s (%u layers)\n", r, err.message ?: "", img.n_layers);
        if (r < 0) {
                if (r != -ENOMEM && !err.message)
                        abort();
                return 0;
        }
        if (err.message || img.n_layers > 512 || !img.manifest_digest)
                abort();
        for (unsigned i = 0; i < img.n_layers; i++) {
                int fd = -1;
                _cleanup_(error_done) Error e2 = {};

                if (!string_is_hex(img.layers[i].hex, 64) || !img.layers[i].media_type)
                        abort();
                if (oci_blob_open(dir_fd, img.layers[i].hex, img.layers[i].size, &fd, &e2) == 0)
                        close(fd);
        }
        oci_image_done(&img);
        return 0;
}
