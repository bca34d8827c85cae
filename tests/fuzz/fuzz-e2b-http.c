/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: what the E2B facade reads from URLs and headers (spaced/http/http.c, spaced/e2b/e2b.c,
 * e2b-sandbox-info.c, envd-files.c; e2b/e2b-parse.h).
 *
 * Input: one string (cut at a NUL, as a header or a decoded query value is), given to each parser: the Host
 * of a request (http_host_sandbox for two domains and listen ports, http_host_allowed), Authorization: Basic,
 * connect-timeout-ms and Keepalive-Ping-Interval, the list's ?metadata= filter, a multipart part's filename
 * (and ?path=), ?signature_expiration= and the path, user and expiry a /files signature covers.
 * Invariants (abort on violation): an accepted Host is PORT-ID.DOMAIN[:PORT] with ID 32 lowercase hex digits
 * at its place, and a Host made of an accepted port and id gives them back; a Basic user is at most
 * E2B_USER_MAX bytes without ':', and the header made of it gives it back; a timeout has at most 10 digits, a
 * keepalive at most an hour; metadata pairs are at most METADATA_FILTER_MAX, each part non-empty (keys), no
 * longer than its encoding and free of NUL, and the filter made of them (escaped twice) gives them back; a
 * part's path is absolute, bounded, not a directory, and a refusal says why; a signature is "v1_" and 43
 * base64 characters, the same for the same input; a ?startedAfter= time is at least 0 and its seconds come
 * back from the same digits; a symlink's target (the guest's link text, hostile) comes out absolute, clean (no
 * "//", no "." or ".." component) and no longer than the link's directory and the text together. */

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz-util.h"
#include "base64.h"
#include "macro.h"
#include "proto.h"
#include "string-util.h"
#include "http/http.h"
#include "e2b/e2b-parse.h"

static bool is_id(const char *id) {
        if (strlen(id) != SANDBOX_ID_LEN)
                return false;
        for (const char *p = id; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

/* ---- Host */

static void host_round_trip(unsigned port, const char *id, const char *domain, unsigned listen_port) {
        char host[256], back[SANDBOX_ID_LEN + 1] = "";
        unsigned p = 0;

        if (listen_port == 80)
                snprintf(host, sizeof host, "%u-%s.%s", port, id, domain);
        else
                snprintf(host, sizeof host, "%u-%s.%s:%u", port, id, domain, listen_port);
        check(http_host_sandbox(host, domain, listen_port, &p, back) == 1);
        check(p == port && streq(back, id));
}

static void host(const char *s, const uint8_t *data, size_t size) {
        static const struct {
                const char *domain;
                unsigned listen_port;
        } cases[] = { { "localhost", 80 }, { "e2b.example.com:443", 3000 }, { "E2B.local", 49983 } };
        char id[SANDBOX_ID_LEN + 1];

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char got[SANDBOX_ID_LEN + 1] = "";
                unsigned port = 0;
                int k = http_host_sandbox(s, cases[i].domain, cases[i].listen_port, &port, got);
                const char *dash;

                if (k == 0)
                        continue;
                check(k == 1 && port >= 1 && port <= 65535 && is_id(got));
                dash = strchr(s, '-');
                check(dash && strncmp(dash + 1, got, SANDBOX_ID_LEN) == 0 && dash[1 + SANDBOX_ID_LEN] == '.');
                check(strtoul(s, NULL, 10) == port);
                host_round_trip(port, got, "localhost", 80);
                host_round_trip(port, got, "e2b.example.com", cases[i].listen_port);
        }
        (void) http_host_allowed(s, "127.0.0.1", 8080);
        (void) http_host_allowed(s, "::1", 80);
        (void) http_host_allowed(s, NULL, 3000);

        /* a Host made of the input's bytes as an id is taken */
        for (size_t i = 0; i < SANDBOX_ID_LEN; i++)
                id[i] = "0123456789abcdef"[(i < size ? data[i] : 0) & 15];
        id[SANDBOX_ID_LEN] = 0;
        host_round_trip(size > 0 ? 1 + data[0] * 257u % 65535 : 49983, id, "localhost", 80);
}

/* ---- headers */

static void basic_auth(const char *s) {
        char user[E2B_USER_MAX + 1], back[E2B_USER_MAX + 1], header[16 + 4 * E2B_USER_MAX];
        char pair[E2B_USER_MAX + 2];
        size_t n;

        memset(user, 'x', sizeof user);
        if (e2b_user_from_basic_auth(s, user) < 0)
                return;
        n = strnlen(user, sizeof user);
        check(n <= E2B_USER_MAX && !strchr(user, ':'));
        check(strncasecmp(s, "Basic", 5) == 0);
        /* what the SDKs send for this user */
        snprintf(pair, sizeof pair, "%s:", user);
        memcpy(header, "Basic ", 6);
        base64_encode((const uint8_t *) pair, n + 1, header + 6);
        header[6 + base64_encoded_len(n + 1)] = 0;
        check(e2b_user_from_basic_auth(header, back) == 0 && streq(back, user));
}

static void timeouts(const char *s) {
        uint64_t ms = 1;
        unsigned ka;

        if (connect_timeout_parse(s, &ms) == 0)
                /* the Connect spec: at most 10 digits */
                check(ms <= 9999999999ULL);
        else
                check(ms == 0);
        ka = connect_keepalive_parse(s);
        check(ka <= 3600);
}

/* ---- ?metadata= */

/* Escapes every byte but letters and digits (%XX). */
static char *escape(const char *s) {
        char *out = malloc(strlen(s) * 3 + 1), *o = out;

        check(out);
        for (; *s; s++)
                if (isalnum((unsigned char) *s))
                        *o++ = *s;
                else
                        o += sprintf(o, "%%%02X", (unsigned char) *s);
        *o = 0;
        return out;
}

static void metadata_filter(const char *s) {
        char *key[METADATA_FILTER_MAX] = {}, *value[METADATA_FILTER_MAX] = {};
        char *key2[METADATA_FILTER_MAX] = {}, *value2[METADATA_FILTER_MAX] = {};
        unsigned n = 0, n2 = 0;
        SpaceBuf again = {};
        int k;

        k = e2b_metadata_filter_parse(s, key, value, &n);
        check(k == 0 || k == -EINVAL || k == -ENOMEM);
        check(n <= METADATA_FILTER_MAX);
        for (unsigned i = 0; i < n; i++) {
                check(key[i] && value[i] && key[i][0]);
                check(strlen(key[i]) + strlen(value[i]) < strlen(s));
        }
        if (k == 0) {
                /* as an SDK sends them: each part escaped, the pairs joined, the whole escaped again */
                for (unsigned i = 0; i < n; i++) {
                        _cleanup_free_ char *ek = escape(key[i]), *ev = escape(value[i]), *eek = escape(ek),
                                            *eev = escape(ev);
                        check(space_buf_append(&again, i ? "&" : "", i ? 1 : 0) == 0 &&
                              space_buf_append(&again, eek, strlen(eek)) == 0 &&
                              space_buf_append(&again, "=", 1) == 0 &&
                              space_buf_append(&again, eev, strlen(eev) + 1) == 0);
                        again.len--; /* the NUL stays after the text */
                }
                if (n > 0) {
                        check(e2b_metadata_filter_parse((const char *) again.data, key2, value2, &n2) == 0);
                        check(n2 == n);
                        for (unsigned i = 0; i < n; i++)
                                check(streq(key2[i], key[i]) && streq(value2[i], value[i]));
                }
        }
        for (unsigned i = 0; i < METADATA_FILTER_MAX; i++) {
                free(key[i]), free(value[i]);
                free(key2[i]), free(value2[i]);
        }
        space_buf_done(&again);
}

/* ---- /files */

static void part_path(const char *name, const char *given, const char *user) {
        _cleanup_free_ char *p = NULL;
        char err[256] = "";
        size_t n;
        int k = envd_part_path(name, given, user, &p, err, sizeof err);

        if (k < 0) {
                check((k == -EINVAL || k == -ENOMEM) && err[0] && !p);
                return;
        }
        check(k == 0 && p);
        n = strlen(p);
        check(n > 0 && n <= SPACE_FILE_PATH_MAX && p[n - 1] != '/');
        if (given)
                check(streq(p, given));
        else {
                check(p[0] == '/');
                for (const char *c = p; *c; c++)
                        check((unsigned char) *c >= 0x20 && *c != 0x7f);
                if (name[0] == '/')
                        check(streq(p, name));
        }
}

static void signature(const char *s) {
        char a[SIGNATURE_MAX], b[SIGNATURE_MAX];
        long long e;

        if (envd_signature_expiration_parse(s, &e) == 0)
                check(strlen(s) <= 20);
        check(envd_signature_of(s, "read", "user", "0123456789abcdef0123456789abcdef", NULL, a) == 0);
        check(envd_signature_of(s, "read", "user", "0123456789abcdef0123456789abcdef", NULL, b) == 0);
        check(streq(a, b) && strlen(a) == 46 && strncmp(a, "v1_", 3) == 0);
        for (const char *c = a + 3; *c; c++)
                check(isalnum((unsigned char) *c) || *c == '+' || *c == '/');
        check(envd_signature_of("/home/user/a.txt", "write", s, "t", s, b) == 0);
        check(strlen(b) == 46 && strncmp(b, "v1_", 3) == 0);
}

/* The guest's /proc/meminfo (metrics): a value is found only on a line of its own key, and fits. */
static void meminfo(const char *s) {
        static const char *const keys[] = { "MemTotal", "MemAvailable", "Cached", "" };

        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                uint64_t v = 0;
                int r = e2b_meminfo_field(s, keys[i], &v);

                check(r == 0 || r == -ENOENT || r == -EBADMSG);
                check(r != 0 || (v % 1024 == 0 && strstr(s, keys[i])));
        }
}

/* A list's ?startedAfter=: accepted only as a time at or after 1970. */
static void rfc3339(const char *s) {
        int64_t t = -1;
        int r = e2b_rfc3339_parse(s, &t);

        check(r == 0 || r == -EINVAL);
        check(r != 0 || (t >= 0 && strlen(s) >= 20));
}

static bool path_clean(const char *p) {
        if (p[0] != '/')
                return false;
        if (streq(p, "/"))
                return true;
        return !strstr(p, "//") && !strstr(p, "/./") && !strstr(p, "/../") && p[strlen(p) - 1] != '/' &&
                !(strlen(p) >= 2 && streq(p + strlen(p) - 2, "/.")) && !(strlen(p) >= 3 && streq(p + strlen(p) - 3, "/.."));
}

/* envd's symlinkTarget from the guest's link text, for a link in a few directories. */
static void symlink_target(const char *s) {
        static const char *const links[] = { "/home/user/link", "/l", "/a/b/../c/./link" };

        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                _cleanup_free_ char *t = NULL;
                int r = envd_symlink_target(links[i], s, &t);

                check(r == 0 || (r == -EINVAL && !*s));
                if (r == 0)
                        check(path_clean(t) && strlen(t) <= strlen(links[i]) + strlen(s) + 1);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *s = strndup((const char *) data, size);

        check(s);
        host(s, data, size);
        basic_auth(s);
        timeouts(s);
        metadata_filter(s);
        part_path(s, NULL, "user");
        part_path(s, NULL, "root");
        part_path("x", s, "user");
        signature(s);
        meminfo(s);
        rfc3339(s);
        symlink_target(s);
        return 0;
}
