/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* API keys for the TCP listener (ARCHITECTURE.md, decision 11). A key is "e2b_" + 40 lowercase hex (E2B SDKs accept the
 * shape); its first 8 hex are the key's id, kept in clear to find the row. The whole key is stored only as a
 * salted HMAC-SHA256 (auth.c says why not a slow hash) and shown once, when minted. */

#include <stdbool.h>
#include <stdint.h>

#include "core/store.h"

#define API_KEY_PREFIX "e2b_"
#define API_KEY_HEX 40
#define API_KEY_LEN (sizeof(API_KEY_PREFIX) - 1 + API_KEY_HEX)
#define API_KEY_ID_LEN 8
#define API_KEY_NAME_MAX 64
/* last_used_at is written to the database at most this often per key */
#define API_KEY_TOUCH_SEC 60

typedef struct Auth Auth;

typedef struct ApiKey {
        char id[API_KEY_ID_LEN + 1];
        char *name;
        char *hash;
        int64_t created_at;
        int64_t last_used_at;  /* 0 = never */
        struct ApiKey *next;
} ApiKey;

/* Loads the keys from the store. */
int auth_new(Store *store, Auth **ret);
Auth *auth_free(Auth *a);
/* Mints a key; ret_key gets the key itself (API_KEY_LEN + 1 bytes), which is not kept anywhere. */
int auth_mint(Auth *a, const char *name, char *ret_key, ApiKey **ret);
/* 0 and the key's entry when key is a valid, known key; -EACCES otherwise. Records last_used_at. */
int auth_verify(Auth *a, const char *key, int64_t now, ApiKey **ret);
/* -ENOENT when there is no such key. */
int auth_delete(Auth *a, const char *id);
/* Newest first. */
ApiKey *auth_keys(Auth *a);

bool api_key_syntax_valid(const char *key);
/* Whether s holds anything shaped like a key (the prefix and API_KEY_HEX hex digits, in any case), anywhere:
 * "Bearer KEY", a bare KEY, another scheme's. For what must never leave the host with a key in it. */
bool api_key_shape_in(const char *s);
bool api_key_id_valid(const char *id);
