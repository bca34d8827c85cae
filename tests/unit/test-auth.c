/* SPDX-License-Identifier: Apache-2.0 */

/* Who may talk over TCP (spaced/http/auth.c, spaced/http/http.c): a key check takes as long whether or not the
 * key's id exists (else the time of a 401 tells which ids do), and a request is served only when its Host
 * header names the listener (else a web page could rebind its own name to 127.0.0.1 and talk to us). */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf */
#endif

#include <crypt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "core/store.h"
#include "http/auth.h"
#include "http/http.h"
#include "tap.h"

#define ROUNDS 9

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

/* The median time of ROUNDS checks of key, which must all fail. */
static uint64_t median_refusal_ns(Auth *a, const char *key, bool *all_refused) {
        uint64_t t[ROUNDS];

        for (unsigned i = 0; i < ROUNDS; i++) {
                uint64_t start = now_ns();
                if (auth_verify(a, key, 0, NULL) != -EACCES)
                        *all_refused = false;
                t[i] = now_ns() - start;
        }
        qsort(t, ROUNDS, sizeof t[0], cmp_u64);
        return t[ROUNDS / 2];
}

static void test_key_timing(const char *dir) {
        _cleanup_free_ char *path = NULL;
        char key[API_KEY_LEN + 1], wrong_secret[API_KEY_LEN + 1], unknown_id[API_KEY_LEN + 1];
        Store *s = NULL;
        Error e = {};
        Auth *a = NULL;
        bool refused = true;
        uint64_t t_wrong, t_unknown;
        size_t id_at = strlen(API_KEY_PREFIX);

        if (asprintf(&path, "%s/state.db", dir) < 0 || store_open(path, &s, &e) < 0 || auth_new(s, &a) < 0 ||
            auth_mint(a, "t", key, NULL) < 0) {
                ok(false, "set up a store with one key (%s)", e.message ?: "");
                error_done(&e);
                return;
        }
        ok(auth_verify(a, key, 0, NULL) == 0, "the minted key is accepted");

        /* Same id, wrong secret: the HMAC runs and fails. Another id: found nowhere. */
        memcpy(wrong_secret, key, sizeof key);
        wrong_secret[API_KEY_LEN - 1] = key[API_KEY_LEN - 1] == '0' ? '1' : '0';
        memcpy(unknown_id, key, sizeof key);
        unknown_id[id_at] = key[id_at] == '0' ? '1' : '0';

        t_wrong = median_refusal_ns(a, wrong_secret, &refused);
        t_unknown = median_refusal_ns(a, unknown_id, &refused);
        ok(refused, "a wrong secret and an unknown id are refused");
        diag("median refusal: known id with a wrong secret %.3f ms, unknown id %.3f ms", t_wrong / 1e6,
             t_unknown / 1e6);
        /* Without the dummy hash an unknown id answers without computing a hash at all. */
        ok(t_unknown * 4 >= t_wrong, "an unknown key id takes about as long as a known one (%.3f vs %.3f ms)",
           t_unknown / 1e6, t_wrong / 1e6);

        auth_free(a);
        store_close(s);
        unlink(path);
}

static int first_hash(void *userdata, const char *id, const char *name, const char *hash, int64_t created_at,
                      int64_t last_used_at) {
        char **ret = userdata;

        if (!*ret)
                *ret = strdup(hash);
        return 0;
}

/* A key minted by a daemon from before (a crypt(3) "$5$" row) still opens, and is kept as an HMAC from its first
 * use on, so that later checks of it (and of anything claiming its id) cost one keyed hash. */
static void test_legacy_key(const char *dir) {
        _cleanup_free_ char *path = NULL, *hash = NULL, *after = NULL;
        static const char key[] = API_KEY_PREFIX "0123abcd0123456789abcdef0123456789abcdef";
        struct crypt_data cd = {};
        char salt[CRYPT_GENSALT_OUTPUT_SIZE];
        Store *s = NULL;
        Auth *a = NULL;
        Error e = {};

        if (asprintf(&path, "%s/legacy.db", dir) < 0 || store_open(path, &s, &e) < 0 ||
            !crypt_gensalt_rn("$5$", 0, NULL, 0, salt, sizeof salt) || !crypt_rn(key, salt, &cd, sizeof cd) ||
            store_put_key(s, "0123abcd", "old", cd.output, 1) < 0 || auth_new(s, &a) < 0) {
                ok(false, "set up a store with a crypt(3) key (%s)", e.message ?: "");
                error_done(&e);
                return;
        }
        ok(store_load_keys(s, first_hash, &hash) == 0 && hash && strncmp(hash, "$5$", 3) == 0,
           "the old row holds a crypt(3) hash");
        ok(auth_verify(a, API_KEY_PREFIX "0123abcd0123456789abcdef0123456789abcdee", 0, NULL) == -EACCES,
           "a wrong secret for the old key is refused");
        ok(auth_verify(a, key, 0, NULL) == 0, "the old key is accepted");
        (void) store_load_keys(s, first_hash, &after);
        ok(after && strncmp(after, "$hmac-sha256$", 13) == 0, "its row was rewritten as an HMAC (%.16s...)",
           after ?: "(none)");
        auth_free(a);
        a = NULL;
        ok(auth_new(s, &a) == 0 && auth_verify(a, key, 0, NULL) == 0, "and it still opens after a restart");
        auth_free(a);
        store_close(s);
        unlink(path);
}

static void test_hosts(void) {
        static const struct {
                const char *host, *listen;
                unsigned port;
                bool allowed;
        } cases[] = {
                { "127.0.0.1:7070", "127.0.0.1", 7070, true },
                { "localhost:7070", "127.0.0.1", 7070, true },
                { "LocalHost:7070", "127.0.0.1", 7070, true },
                { "[::1]:7070", "127.0.0.1", 7070, true },
                { "127.0.0.5:7070", "127.0.0.5", 7070, true },   /* the listen address itself */
                { "[::1]:7070", "::1", 7070, true },
                { "localhost", "127.0.0.1", 80, true },          /* port 80 may go unnamed */
                { "localhost", "127.0.0.1", 7070, false },       /* any other must be named */
                { "localhost:7071", "127.0.0.1", 7070, false },  /* another port */
                { "localhost:7070x", "127.0.0.1", 7070, false },
                { "localhost:", "127.0.0.1", 7070, false },
                { "localhost:+7070", "127.0.0.1", 7070, false },
                { "localhost: 7070", "127.0.0.1", 7070, false },
                { "127.0.0.5:7070", "127.0.0.1", 7070, false },  /* another loopback address */
                { "evil.example:7070", "127.0.0.1", 7070, false },
                { "localhost.evil.example:7070", "127.0.0.1", 7070, false },
                { "127.0.0.1.nip.io:7070", "127.0.0.1", 7070, false },
                { "[::1]x:7070", "::1", 7070, false },
                { "[::1", "::1", 7070, false },
                { "", "127.0.0.1", 7070, false },
                { NULL, "127.0.0.1", 7070, false },              /* no Host at all (HTTP/1.0) */
        };

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                ok(http_host_allowed(cases[i].host, cases[i].listen, cases[i].port) == cases[i].allowed,
                   "Host '%s' on %s:%u: %s", cases[i].host ?: "(none)", cases[i].listen, cases[i].port,
                   cases[i].allowed ? "served" : "refused");
}

/* E2B's PORT-ID.DOMAIN names: only the configured domain, a whole 32-hex id, the listener's port. */
static void test_host_sandbox(void) {
        static const char id[] = "0123456789abcdef0123456789abcdef";
        static const struct {
                const char *host, *domain;
                unsigned listen_port;
                int want;
                unsigned port;
        } cases[] = {
                { "49983-0123456789abcdef0123456789abcdef.sbx.test:7070", "sbx.test", 7070, 1, 49983 },
                { "8080-0123456789abcdef0123456789abcdef.SBX.test:7070", "sbx.test", 7070, 1, 8080 },
                { "49983-0123456789abcdef0123456789abcdef.sbx.test:7070", "sbx.test:7070", 7070, 1, 49983 },
                { "49983-0123456789abcdef0123456789abcdef.sbx.test", "sbx.test", 80, 1, 49983 },
                { "49983-0123456789abcdef0123456789abcdef.sbx.test", "sbx.test", 7070, 0, 0 },
                { "49983-0123456789abcdef0123456789abcdef.sbx.test:7071", "sbx.test", 7070, 0, 0 },
                { "49983-0123456789abcdef0123456789abcdef.evil.test:7070", "sbx.test", 7070, 0, 0 },
                { "49983-0123456789abcdef0123456789abcdef.sbx.test.evil:7070", "sbx.test", 7070, 0, 0 },
                { "49983-0123456789abcdef0123456789abcde.sbx.test:7070", "sbx.test", 7070, 0, 0 },
                { "49983-0123456789abcdef0123456789abcdeg.sbx.test:7070", "sbx.test", 7070, 0, 0 },
                { "49983-0123456789abcdef0123456789abcdef0.sbx.test:7070", "sbx.test", 7070, 0, 0 },
                { "0-0123456789abcdef0123456789abcdef.sbx.test:7070", "sbx.test", 7070, 0, 0 },
                { "65536-0123456789abcdef0123456789abcdef.sbx.test:7070", "sbx.test", 7070, 0, 0 },
                { "-1-0123456789abcdef0123456789abcdef.sbx.test:7070", "sbx.test", 7070, 0, 0 },
                { "49983-0123456789abcdef0123456789abcdef.sbx.test:7070", NULL, 7070, 0, 0 },
                { "localhost:7070", "sbx.test", 7070, 0, 0 },
                { NULL, "sbx.test", 7070, 0, 0 },
        };

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                char got[SANDBOX_ID_LEN + 1] = "";
                unsigned port = 0;
                int r = http_host_sandbox(cases[i].host, cases[i].domain, cases[i].listen_port, &port, got);

                ok(r == cases[i].want && (r == 0 || (port == cases[i].port && strcmp(got, id) == 0)),
                   "Host '%s' with e2b_domain %s on port %u: %s", cases[i].host ?: "(none)",
                   cases[i].domain ?: "(none)", cases[i].listen_port, cases[i].want ? "a sandbox" : "not one");
        }
}

/* api.DOMAIN: E2B's control plane by name (the SDKs given E2B_DOMAIN alone). */
static void test_host_api(void) {
        static const struct {
                const char *host, *domain;
                unsigned listen_port;
                bool want;
        } cases[] = {
                { "api.space.localhost:7443", "space.localhost:7443", 7443, true },
                { "API.Space.Localhost:7443", "space.localhost:7443", 7443, true },
                { "api.space.localhost:7443", "space.localhost", 7443, true },
                { "api.space.localhost", "space.localhost", 80, true },
                { "api.space.localhost", "space.localhost:7443", 7443, false },
                { "api.space.localhost:7070", "space.localhost:7443", 7443, false },
                { "api.space.localhost:7443x", "space.localhost:7443", 7443, false },
                { "api.space.localhost:+7443", "space.localhost:7443", 7443, false },
                { "api.evil.localhost:7443", "space.localhost:7443", 7443, false },
                { "api.space.localhost.evil:7443", "space.localhost:7443", 7443, false },
                { "x.api.space.localhost:7443", "space.localhost:7443", 7443, false },
                { "space.localhost:7443", "space.localhost:7443", 7443, false },
                { "api.space.localhost:7443", NULL, 7443, false },
                { NULL, "space.localhost:7443", 7443, false },
        };

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                ok(http_host_api(cases[i].host, cases[i].domain, cases[i].listen_port) == cases[i].want,
                   "Host '%s' with e2b_domain %s on port %u: %s", cases[i].host ?: "(none)",
                   cases[i].domain ?: "(none)", cases[i].listen_port, cases[i].want ? "the control plane" : "not it");
}

/* What the port proxy drops from an Authorization header on its way into a guest. */
static void test_key_shape(void) {
        static const char key[] = "e2b_0123456789abcdef0123456789abcdef01234567";
        static const struct {
                const char *value;
                bool want;
        } cases[] = {
                { "Bearer e2b_0123456789abcdef0123456789abcdef01234567", true },
                { "bearer   E2B_0123456789ABCDEF0123456789ABCDEF01234567", true },
                { "e2b_0123456789abcdef0123456789abcdef01234567", true },
                { "Token x, e2b_e2b_0123456789abcdef0123456789abcdef01234567", true },
                { "Bearer e2b_0123456789abcdef0123456789abcdef0123456", false }, /* 39 hex */
                { "Bearer e2b_", false },
                { "Basic dXNlcjpwYXNz", false },
                { "Bearer some-app-token", false },
                { "", false },
        };

        ok(api_key_syntax_valid(key) && api_key_shape_in(key), "a key is shaped like one");
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                ok(api_key_shape_in(cases[i].value) == cases[i].want, "Authorization '%s': %s", cases[i].value,
                   cases[i].want ? "holds a key's shape" : "holds none");
        ok(!api_key_shape_in(NULL), "NULL holds none");
}

int main(void) {
        char dir[] = "/tmp/test-auth-XXXXXX";

        plan(0);
        if (!mkdtemp(dir)) {
                perror("mkdtemp");
                return 99;
        }
        test_key_timing(dir);
        test_legacy_key(dir);
        test_hosts();
        test_host_sandbox();
        test_host_api();
        test_key_shape();
        (void) rmdir(dir);
        return done();
}
