/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Secrets (ARCHITECTURE.md, "Secrets"; DESIGN decision 16): named values a sandbox never holds. This door keeps
 * them: a row in the store per secret (name, version, metadata, times) and its value in a file of its own,
 * $state/secrets/<id>, 0600 in a 0700 directory, never in the database, a log, an answer or an error. Values
 * are write-only to every client: set, replaced by a new version, removed; only the daemon reads them, for the
 * destinations a binding names. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/manager.h"
#include "core/store.h"

#define SECRET_NAME_MAX 64 /* what a URL's {secret} takes (http/router.c) */
/* A value goes into a request header: tokens and keys are a few hundred bytes, a JWT a few KiB. */
#define SECRET_VALUE_MAX 16384
#define SECRET_METADATA_KEYS_MAX 64
#define SECRET_METADATA_KEY_MAX 128
#define SECRET_METADATA_VALUE_MAX 1024
#define SECRETS_MAX 4096

struct Secret {
        Secret *next;
        SecretRecord rec;      /* id, name, version, metadata (a JSON object of strings), times */
        bool value_missing;    /* its file was gone at start: it must be set again */
};

/* 1 to SECRET_NAME_MAX letters, digits, '.', '_' and '-', starting with a letter or digit, and not the shape of
 * an id ("sec-" and 16 hex digits), so that a reference names one secret. */
bool secret_name_valid(const char *name);
/* NULL when value can be a secret's value, else what is wrong with it (a constant string that never quotes it):
 * it goes into HTTP headers, so no control characters but tab, valid UTF-8, 1 to SECRET_VALUE_MAX bytes. */
const char *secret_value_problem(const char *value, size_t len);
/* metadata: NULL (none) or a JSON object of up to SECRET_METADATA_KEYS_MAX string values; 0 or -EINVAL with
 * reterr (ERROR_INVALID_ARGUMENT) naming the key at fault. ret_json: its compact text ("{}" for NULL). */
struct cJSON;
int secret_metadata_check(const struct cJSON *metadata, char **ret_json, Error *reterr);

/* s's metadata as a JSON object (a new one; {} when its text is not one). */
struct cJSON *secret_metadata_json(const Secret *s);

/* By id, then by exact name; NULL when there is none. */
Secret *secret_find(Manager *m, const char *ref);
size_t secrets_count(Manager *m);

typedef enum SecretSetMode {
        SECRET_CREATE,         /* a new secret, version 1; ERROR_NAME_IN_USE when the name is taken */
        SECRET_UPDATE,         /* a new version of one that exists; ERROR_SECRET_NOT_FOUND when none */
        SECRET_UPSERT,         /* either */
} SecretSetMode;

/* Sets ref's value (checked with secret_value_problem()); metadata_json: a checked object (see
 * secret_metadata_check()), or NULL to keep what it had ({} for a new one). *ret_created tells a create from
 * a new version. The value reaches its file (fsynced) before the row says so. Logs what it did (the name and
 * version, never the value). */
int secret_set(Manager *m, const char *ref, const char *value, size_t len, const char *metadata_json,
               SecretSetMode mode, Secret **ret, bool *ret_created, Error *reterr);
/* Removes s: its row, then its file. */
int secret_remove(Manager *m, Secret *s, Error *reterr);

/* The current value, for the daemon alone (the gateway, on the way to a bound destination); the caller wipes
 * and frees it (secret_value_free()). Records the use (last_used_at). -ENOENT when it has no value. */
int secret_value_read(Manager *m, Secret *s, char **ret, size_t *ret_len);
void secret_value_free(char *value, size_t len);

/* At start: the rows, the directory, and files no row names (a crash between the two) removed. */
int secrets_load(Manager *m, Error *reterr);
void secrets_free(Manager *m);
