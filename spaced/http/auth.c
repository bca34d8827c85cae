/* SPDX-License-Identifier: Apache-2.0 */
#include <crypt.h>
#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>

#include "http/auth.h"
#include "macro.h"
#include "string-util.h"
#include "core/util.h"

struct Auth {
        Store *store;
        ApiKey *keys;  /* newest first */
        /* A hash of no key, made like every real one: a key whose id is unknown is checked against it, so that
         * the time an answer takes does not tell which key ids exist. */
        char *dummy_hash;
};

/* Keys are 160 random bits: no one guesses one, so a slow hash would only slow the daemon (each well-formed
 * key that came over TCP ran 5000 rounds of SHA-256-crypt on the event loop). A key is kept as
 * "$hmac-sha256$SALT$MAC", MAC = HMAC-SHA256(SALT, key) with a random salt per key: one keyed hash per check,
 * and a copy of the database still holds no key. Rows from before ("$5$", crypt(3)) are checked with crypt and
 * rewritten the new way on their first use. */
#define HASH_PREFIX "$hmac-sha256$"
#define HASH_SALT_HEX 32
#define HASH_MAC_HEX 64
#define HASH_LEN (sizeof(HASH_PREFIX) - 1 + HASH_SALT_HEX + 1 + HASH_MAC_HEX)

static ApiKey *api_key_free(ApiKey *k) {
        if (!k)
                return NULL;
        free(k->name);
        free(k->hash);
        free(k);
        return NULL;
}

bool api_key_syntax_valid(const char *key) {
        return key && strlen(key) == API_KEY_LEN && strncmp(key, API_KEY_PREFIX, strlen(API_KEY_PREFIX)) == 0 &&
               string_is_hex(key + strlen(API_KEY_PREFIX), API_KEY_HEX);
}

bool api_key_id_valid(const char *id) {
        return id && strlen(id) == API_KEY_ID_LEN && string_is_hex(id, API_KEY_ID_LEN);
}

/* Compares without leaking where the first difference is. */
static bool secret_equal(const char *a, const char *b) {
        size_t n = strlen(a);

        return n == strlen(b) && memeq_const_time(a, b, n);
}

static ApiKey *find(Auth *a, const char *id) {
        for (ApiKey *k = a->keys; k; k = k->next)
                if (streq(k->id, id))
                        return k;
        return NULL;
}

static int load_one(void *userdata, const char *id, const char *name, const char *hash, int64_t created_at,
                    int64_t last_used_at) {
        Auth *a = userdata;
        ApiKey *k, **tail;

        if (!api_key_id_valid(id) || !hash)
                return 0; /* a row we cannot use: never matches */
        k = calloc(1, sizeof *k);
        if (!k)
                return -ENOMEM;
        memcpy(k->id, id, sizeof k->id);
        k->name = name ? strdup(name) : NULL;
        k->hash = strdup(hash);
        k->created_at = created_at;
        k->last_used_at = last_used_at;
        if (!k->hash || (name && !k->name)) {
                api_key_free(k);
                return -ENOMEM;
        }
        /* rows come newest first; keep that order */
        for (tail = &a->keys; *tail; tail = &(*tail)->next)
                ;
        *tail = k;
        return 0;
}

/* "$hmac-sha256$SALT$MAC" of key with salt (HASH_SALT_HEX hex) into ret (HASH_LEN + 1). */
static int hmac_hash(const char *key, const char *salt, char ret[static HASH_LEN + 1]) {
        unsigned char mac[EVP_MAX_MD_SIZE];
        unsigned n = 0;

        if (!HMAC(EVP_sha256(), salt, HASH_SALT_HEX, (const unsigned char *) key, strlen(key), mac, &n) ||
            n * 2 != HASH_MAC_HEX)
                return -EIO;
        memcpy(ret, HASH_PREFIX, strlen(HASH_PREFIX));
        memcpy(ret + strlen(HASH_PREFIX), salt, HASH_SALT_HEX);
        ret[strlen(HASH_PREFIX) + HASH_SALT_HEX] = '$';
        string_hex_encode(mac, n, ret + strlen(HASH_PREFIX) + HASH_SALT_HEX + 1);
        explicit_bzero(mac, sizeof mac);
        return 0;
}

static char *hash_key(const char *key) {
        char salt[HASH_SALT_HEX + 1], h[HASH_LEN + 1];

        if (random_hex(salt, HASH_SALT_HEX) < 0 || hmac_hash(key, salt, h) < 0)
                return NULL;
        return strdup(h);
}

/* Whether key is the one hash was made of: one HMAC for our own hashes, crypt(3) for a row from before. */
static bool hash_matches(const char *hash, const char *key) {
        char h[HASH_LEN + 1];

        if (strlen(hash) == HASH_LEN && strncmp(hash, HASH_PREFIX, strlen(HASH_PREFIX)) == 0) {
                if (hmac_hash(key, hash + strlen(HASH_PREFIX), h) < 0)
                        return false;
                return secret_equal(h, hash);
        }
        if (strncmp(hash, "$5$", 3) == 0) {
                _cleanup_free_ struct crypt_data *cd = calloc(1, sizeof *cd);
                const char *c;

                if (!cd)
                        return false;
                c = crypt_rn(key, hash, cd, sizeof *cd);
                return c && c[0] != '*' && secret_equal(c, hash);
        }
        return false;
}

int auth_new(Store *store, Auth **ret) {
        _cleanup_free_ Auth *a = calloc(1, sizeof *a);
        int r;

        if (!a)
                return -ENOMEM;
        a->store = store;
        a->dummy_hash = hash_key(API_KEY_PREFIX "dummy");
        if (!a->dummy_hash) {
                auth_free(TAKE_PTR(a));
                return -ENOMEM;
        }
        r = store_load_keys(store, load_one, a);
        if (r < 0) {
                auth_free(TAKE_PTR(a));
                return r;
        }
        *ret = TAKE_PTR(a);
        return 0;
}

Auth *auth_free(Auth *a) {
        if (!a)
                return NULL;
        while (a->keys) {
                ApiKey *k = a->keys;
                a->keys = k->next;
                api_key_free(k);
        }
        free(a->dummy_hash);
        free(a);
        return NULL;
}

ApiKey *auth_keys(Auth *a) {
        return a->keys;
}


int auth_mint(Auth *a, const char *name, char *ret_key, ApiKey **ret) {
        char key[API_KEY_LEN + 1];
        ApiKey *k;
        int r;

        memcpy(key, API_KEY_PREFIX, strlen(API_KEY_PREFIX));
        for (unsigned attempt = 0;; attempt++) {
                r = random_hex(key + strlen(API_KEY_PREFIX), API_KEY_HEX);
                if (r < 0)
                        return r;
                char id[API_KEY_ID_LEN + 1];
                memcpy(id, key + strlen(API_KEY_PREFIX), API_KEY_ID_LEN);
                id[API_KEY_ID_LEN] = 0;
                if (!find(a, id))
                        break;
                if (attempt > 16)
                        return -EEXIST;
        }

        k = calloc(1, sizeof *k);
        if (!k)
                return -ENOMEM;
        memcpy(k->id, key + strlen(API_KEY_PREFIX), API_KEY_ID_LEN);
        k->name = name ? strdup(name) : NULL;
        k->hash = hash_key(key);
        k->created_at = now_unix();
        if (!k->hash || (name && !k->name)) {
                api_key_free(k);
                explicit_bzero(key, sizeof key);
                return -ENOMEM;
        }
        r = store_put_key(a->store, k->id, k->name, k->hash, k->created_at);
        if (r < 0) {
                api_key_free(k);
                explicit_bzero(key, sizeof key);
                return r;
        }
        k->next = a->keys;
        a->keys = k;
        memcpy(ret_key, key, sizeof key);
        explicit_bzero(key, sizeof key);
        if (ret)
                *ret = k;
        return 0;
}

int auth_verify(Auth *a, const char *key, int64_t now, ApiKey **ret) {
        char id[API_KEY_ID_LEN + 1];
        bool match;
        ApiKey *k;

        if (!api_key_syntax_valid(key))
                return -EACCES;
        memcpy(id, key + strlen(API_KEY_PREFIX), API_KEY_ID_LEN);
        id[API_KEY_ID_LEN] = 0;
        k = find(a, id);
        /* an unknown id costs the same HMAC as a known one with a wrong secret; it fails all the same */
        match = hash_matches(k ? k->hash : a->dummy_hash, key);
        if (!k || !match)
                return -EACCES;
        if (strncmp(k->hash, HASH_PREFIX, strlen(HASH_PREFIX)) != 0) {
                _cleanup_free_ char *h = hash_key(key);

                /* a crypt(3) row: from now on one HMAC; kept as it was if that cannot be written */
                if (h && store_set_key_hash(a->store, k->id, h) >= 0) {
                        free(k->hash);
                        k->hash = TAKE_PTR(h);
                }
        }
        if (now - k->last_used_at >= API_KEY_TOUCH_SEC) {
                k->last_used_at = now;
                (void) store_touch_key(a->store, k->id, now); /* best effort: it is only a hint */
        }
        if (ret)
                *ret = k;
        return 0;
}

int auth_delete(Auth *a, const char *id) {
        ApiKey **p;
        int r;

        for (p = &a->keys; *p; p = &(*p)->next)
                if (streq((*p)->id, id))
                        break;
        if (!*p)
                return -ENOENT;
        r = store_delete_key(a->store, id);
        if (r < 0 && r != -ENOENT)
                return r;
        ApiKey *k = *p;
        *p = k->next;
        api_key_free(k);
        return 0;
}

bool api_key_shape_in(const char *s) {
        size_t prefix = strlen(API_KEY_PREFIX);

        for (const char *c = s; c && (c = strcasestr(c, API_KEY_PREFIX)); c++) {
                size_t hex = 0;

                while (hex < API_KEY_HEX && isxdigit((unsigned char) c[prefix + hex]))
                        hex++;
                if (hex == API_KEY_HEX)
                        return true;
        }
        return false;
}
