/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The template store (ARCHITECTURE.md, decision 5): images under $state/templates/sha256-<hex>/ (rootfs.ext4,
 * config.json, manifest), their rows and tags in SQLite, references, removal and gc (template.c), imports
 * (template-import.c) and exports of a tree as a tar (template-export.c). */

#include <cjson/cJSON.h>

#include "core/manager.h"
#include "core/operation.h"

/* One image of the template store (template.c): immutable, named by the digest of its root filesystem tree
 * (template-tree.c), with the tags that point at it and the defaults of its config.json. */
/* The longest start and ready command lines (template config). */
#define TEMPLATE_COMMAND_MAX 4096

typedef struct Template {
        char *name;          /* for messages: its first tag, else "sha256:<12 hex>" */
        char *dir;           /* $state/templates/sha256-<hex> */
        char *rootfs;        /* dir/rootfs.ext4 */
        char *digest;        /* "sha256:<hex>" of the root filesystem tree's manifest */
        char *description;
        unsigned vcpu;
        uint64_t memory_mib;
        uint64_t disk_mib;
        char **env;          /* K=V */
        char *workdir;
        uint64_t size_bytes; /* content: file and symlink bytes */
        char *user;
        char **entrypoint;   /* a default command (OCI Entrypoint + Cmd); NULL: none */
        char *start;         /* the service its sandboxes run (space-template(5) start =); NULL: none */
        char *ready;         /* the command that says the service is ready for the base snapshot; NULL: none */
        char **tags;         /* "name:tag", sorted */
        int64_t created_at;
        char *source;        /* what it was imported from */
        char *source_digest; /* builtins: the sha256 of their rootfs.tar */
        uint64_t files;
        uint64_t image_bytes; /* rootfs.ext4's allocated bytes */
        struct Template *next;
} Template;


/* template.c */
int templates_load(Manager *m);
/* A reference (NAME[:TAG], sha256:<hex>) resolved silently: NULL when invalid, unknown or ambiguous. */
Template *template_find(Manager *m, const char *ref);
/* By full digest "sha256:<hex>": what sandboxes, checkpoints and pools record. */
Template *template_find_digest(Manager *m, const char *digest);
/* Resolves a reference with the error a user sees: invalid_ref, template_not_found, ambiguous_reference. */
int template_resolve(Manager *m, const char *ref, Template **ret, Error *reterr);
/* The default working directory of commands in s (its template's workdir), NULL for none. */
const char *template_workdir(Manager *m, const Sandbox *s);
/* The default user of commands in s (its template's user, lib/user.h), NULL for none (root). */
const char *template_default_user(Manager *m, const Sandbox *s);
void templates_free(Manager *m);
/* What the store asks of the sandboxes, checkpoints and pools above it, which keep templates in use;
 * sandbox/ sets it at start (sandbox_register_ops()). Unset: nothing uses a template. */
typedef struct TemplateUsersOps {
        char *(*user)(Manager *m, const Template *t);              /* as template_user() */
        const char *(*pool_naming)(Manager *m, const char *tag);   /* the reference of a pool of tag, or NULL */
        /* Removes the base snapshots of the image of that short digest (12 hex), or with NULL the stale ones (of
         * no template, kernel or initramfs any more), but none a sandbox or checkpoint uses: bytes freed. */
        uint64_t (*bases_remove)(Manager *m, const char *short_digest, unsigned *ret_count);
        const char *(*sandbox_digest)(const Sandbox *s);           /* the digest of s's template */
        void (*imported)(Manager *m);                              /* an import ended well: pools may refill */
} TemplateUsersOps;
void template_set_users_ops(const TemplateUsersOps *ops);
void template_imported(Manager *m);   /* tells the users an import ended well */


#define TEMPLATE_TAG_MAX 255          /* "name:tag" */
#define TEMPLATE_DIGEST_PREFIX_MIN 12 /* hex digits of a sha256:<prefix> reference */
#define TEMPLATE_DEFAULT_DISK_MIB 1024
/* The canonical manifest of the tree (template-tree.c), kept beside the image: its sha256 is the digest. */
#define TEMPLATE_MANIFEST "manifest"

/* A reference: NAME[:TAG] (lowercase, '/'-separated components; TAG defaults to latest) gives
 * *ret_tag = "name:tag"; sha256:<hex> (12 to 64 hex digits) gives *ret_digest_prefix = "<hex>". -EINVAL with a
 * message saying what is wrong. */
int template_ref_parse(const char *ref, char **ret_tag, char **ret_digest_prefix, Error *reterr);
/* Only the NAME[:TAG] form (what import and tag accept). */
int template_tag_parse(const char *ref, char **ret_tag, Error *reterr);

/* A template's defaults as JSON (config.json) and back. */
cJSON *template_config_to_json(const Template *t);
/* Validates and applies the fields of a config object onto t; -EINVAL with a message naming the field. */
int template_config_apply(Template *t, const cJSON *config, Error *reterr);
Template *template_free(Template *t);

/* Adds (or updates) a finished image and points tag (NULL: none) at it. Takes t. */
int template_store_add(Manager *m, Template *t, const char *tag, Template **ret);
int template_tag_set(Manager *m, Template *t, const char *tag, Error *reterr);
/* What uses t: "sandbox ID", "checkpoint ID", "pool REF"; NULL when nothing does. */
char *template_user(Manager *m, const Template *t);
/* rm REF: a tag goes (and the image with its last one, unless something uses it); a digest removes the
 * image and its tags. *ret_removed_image tells whether the image went; then *ret_size is its size as `template
 * ls` shows it (its files' bytes) and *ret_freed what left the disk (the image file, its base snapshots). */
int template_remove(Manager *m, const char *ref, char **ret_untagged, bool *ret_removed_image, uint64_t *ret_size,
                    uint64_t *ret_freed, Error *reterr);
/* Removes untagged unused images and base snapshots of images that are gone or of old guest files. */
int templates_gc(Manager *m, uint64_t *ret_freed, unsigned *ret_images, unsigned *ret_bases);

/* template-import.c */
typedef struct ImportRequest {
        const char *source;      /* absolute path: a rootfs tarball, an OCI layout directory or its tar; with
                                  * has_fd only a label for messages */
        bool has_fd;             /* the archive is fd (an upload, template_import_tmpfile), not a host path */
        int fd;
        const char *tag;         /* "name:tag" or NULL */
        const cJSON *config;     /* overrides, or NULL */
        const char *source_digest; /* builtins: recorded to notice a changed rootfs.tar */
} ImportRequest;
/* An unnamed file in $state/templates for an uploaded archive (O_TMPFILE: nothing to clean up after a crash). */
int template_import_tmpfile(Manager *m, int *ret_fd);
int template_import_start(Manager *m, const ImportRequest *req, Operation **ret_op, Error *reterr);
/* The same, on the calling thread (builtins at start). */
int template_import_now(Manager *m, const ImportRequest *req, Template **ret, Error *reterr);

/* template-export.c */
/* 0 when t can be exported; -ENOENT with ERROR_INVALID_STATE for an image imported before manifests were kept. */
int template_export_check(const Template *t, Error *reterr);
/* Writes the tree of the image in dir (digest: its template's) to out_fd as a tar, every entry checked against
 * the manifest. Blocking (debugfs reads the image into a .tmp-export-* of tmp_parent): call it on a worker. */
int template_export(const char *dir, const char *digest, const char *tmp_parent, int out_fd, Error *reterr);
