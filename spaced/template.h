/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The template store (decision 5): images under $state/templates/sha256-<hex>/ (rootfs.ext4, config.json),
 * their rows and tags in SQLite, references, removal and gc (template.c), and imports (template-import.c). */

#include <cjson/cJSON.h>

#include "manager.h"

#define TEMPLATE_TAG_MAX 255          /* "name:tag" */
#define TEMPLATE_DIGEST_PREFIX_MIN 12 /* hex digits of a sha256:<prefix> reference */
#define TEMPLATE_DEFAULT_DISK_MIB 1024

/* A reference: NAME[:TAG] (lowercase, '/'-separated components; TAG defaults to latest) gives
 * *ret_tag = "name:tag"; sha256:<hex> (12 to 64 hex digits) gives *ret_digest_prefix = "<hex>". -EINVAL with a
 * message saying what is wrong. */
int template_ref_parse(const char *ref, char **ret_tag, char **ret_digest_prefix, char **reterr_message);
/* Only the NAME[:TAG] form (what import and tag accept). */
int template_tag_parse(const char *ref, char **ret_tag, char **reterr_message);

/* A template's defaults as JSON (config.json) and back. */
cJSON *template_config_to_json(const Template *t);
/* Validates and applies the fields of a config object onto t; -EINVAL with a message naming the field. */
int template_config_apply(Template *t, const cJSON *config, char **reterr_message);
Template *template_free(Template *t);

/* Adds (or updates) a finished image and points tag (NULL: none) at it. Takes t. */
int template_store_add(Manager *m, Template *t, const char *tag, Template **ret);
int template_tag_set(Manager *m, Template *t, const char *tag, OperationError *reterr);
/* What uses t: "sandbox ID", "checkpoint ID", "pool REF"; NULL when nothing does. */
char *template_user(Manager *m, const Template *t);
/* rm REF: a tag goes (and the image with its last one, unless something uses it); a digest removes the
 * image and its tags. *ret_removed_image tells whether the image went. */
int template_remove(Manager *m, const char *ref, char **ret_untagged, bool *ret_removed_image,
                    uint64_t *ret_freed, OperationError *reterr);
/* Removes untagged unused images and base snapshots of images that are gone or of old guest files. */
int templates_gc(Manager *m, uint64_t *ret_freed, unsigned *ret_images, unsigned *ret_bases);
/* Bytes a path takes on disk (allocated blocks), recursively. */
uint64_t disk_usage(const char *path);

/* template-import.c */
typedef struct ImportRequest {
        const char *source;      /* absolute path: a rootfs tarball, an OCI layout directory or its tar */
        const char *tag;         /* "name:tag" or NULL */
        const cJSON *config;     /* overrides, or NULL */
        const char *source_digest; /* builtins: recorded to notice a changed rootfs.tar */
} ImportRequest;
int template_import_start(Manager *m, const ImportRequest *req, Operation **ret_op, OperationError *reterr);
/* The same, on the calling thread (builtins at start). */
int template_import_now(Manager *m, const ImportRequest *req, Template **ret, char **reterr_message);
