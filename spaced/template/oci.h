/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* OCI image layouts (image-spec layout.md): index.json -> manifest (linux/amd64, or the only one) -> config
 * and layers, every blob checked against its descriptor's size and sha256. Nothing here logs. */

#include <stdint.h>

#include "core/error.h"

typedef struct OciLayer {
        char hex[65];        /* sha256 of the blob */
        uint64_t size;
        char *media_type;
} OciLayer;

typedef struct OciImage {
        OciLayer *layers;
        unsigned n_layers;
        char **env;          /* config.Env */
        char *user;          /* config.User */
        char *workdir;       /* config.WorkingDir */
        char **entrypoint;   /* config.Entrypoint + config.Cmd */
        char *manifest_digest;
} OciImage;

void oci_image_done(OciImage *img);
/* layout_fd: the layout's directory. Reads and verifies index.json, the manifest and the config. */
int oci_image_read(int layout_fd, OciImage *ret, Error *reterr);
/* Opens a blob by its hex digest (never following symlinks) and checks its size. */
int oci_blob_open(int layout_fd, const char *hex, uint64_t size, int *ret_fd, Error *reterr);
