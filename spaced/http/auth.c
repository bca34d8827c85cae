/* SPDX-License-Identifier: Apache-2.0 */
#include <crypt.h>
#include <ctype.h>
#include <errno.h>
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

static ApiKey *api_key_free(ApiKey *k) {
        if (!k)
                return NULL;
        free(k->name);
        free(k->hash);
        if (k->verified)
                explicit_bzero(k->verified, strlen(k->verified));
        free(k->verified);
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

static char *hash_key(const char *key) {
        _cleanup_free_ struct crypt_data *cd = calloc(1, sizeof *cd);
        char salt[CRYPT_GENSALT_OUTPUT_SIZE];
        const char *h;

        if (!cd || !crypt_gensalt_rn("$5$", 0, NULL, 0, salt, sizeof salt))
                return NULL;
        h = crypt_rn(key, salt, cd, sizeof *cd);
        if (!h || h[0] == '*')
                return NULL;
        return strdup(h);
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
        ApiKey *k;

        if (!api_key_syntax_valid(key))
                return -EACCES;
        memcpy(id, key + strlen(API_KEY_PREFIX), API_KEY_ID_LEN);
        id[API_KEY_ID_LEN] = 0;
        k = find(a, id);
        /* An unknown id costs the same crypt as a known one with a wrong secret; it fails all the same. */
        if (!k || !k->verified || !secret_equal(k->verified, key)) {
                _cleanup_free_ struct crypt_data *cd = calloc(1, sizeof *cd);
                const char *want = k ? k->hash : a->dummy_hash;
                const char *h;

                if (!cd)
                        return -ENOMEM;
                h = crypt_rn(key, want, cd, sizeof *cd);
                if (!k || !h || h[0] == '*' || !secret_equal(h, want))
                        return -EACCES;
                free(k->verified);
                k->verified = strdup(key); /* NULL is fine: the next check runs crypt again */
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
