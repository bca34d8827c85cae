/* SPDX-License-Identifier: Apache-2.0 */

/* Unit tests for the small helpers of lib/: loop_write (io-util.c), the string lists as JSON arrays
 * (json-util.c), string_is_hex, memeq_const_time and string_escape_control (string-util.c). */

#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/io-util.h"
#include "../../lib/json-util.h"
#include "../../lib/macro.h"
#include "../../lib/string-util.h"
#include "../../lib/trust-bundle.h"
#include "tap.h"

#define PAYLOAD_SIZE (1024 * 1024)

typedef struct Drain {
        int fd;
        size_t skip;            /* bytes written before the payload */
        uint8_t *got;           /* the payload as read */
        size_t n;
        int error;
} Drain;

static uint8_t pattern(size_t i) {
        return (uint8_t) (i * 131 + i / 4099);
}

/* Reads slowly at first, so the writer finds the pipe full more than once, then to the end. */
static void *drain(void *userdata) {
        Drain *d = userdata;
        uint8_t buf[4096];
        unsigned reads = 0;

        for (;;) {
                ssize_t k;

                if (reads++ < 64)
                        (void) nanosleep(&(struct timespec) { .tv_nsec = 1000 * 1000 }, NULL);
                k = read(d->fd, buf, sizeof buf);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno == EAGAIN) {
                        (void) nanosleep(&(struct timespec) { .tv_nsec = 100 * 1000 }, NULL);
                        continue;
                }
                if (k < 0) {
                        d->error = errno;
                        return NULL;
                }
                if (k == 0)
                        return NULL;
                for (ssize_t i = 0; i < k; i++) {
                        if (d->skip > 0) {
                                d->skip--;
                                continue;
                        }
                        if (d->n < PAYLOAD_SIZE)
                                d->got[d->n] = buf[i];
                        d->n++;
                }
        }
}

static void test_loop_write(void) {
        _cleanup_free_ uint8_t *payload = malloc(PAYLOAD_SIZE), *got = calloc(1, PAYLOAD_SIZE);
        int p[2], r;
        size_t prefill = 0;
        pthread_t t;
        Drain d = {};

        if (!payload || !got || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
                ok(false, "loop_write: setting up the pipe: %s", strerror(errno));
                return;
        }
        for (size_t i = 0; i < PAYLOAD_SIZE; i++)
                payload[i] = pattern(i);
        (void) fcntl(p[1], F_SETPIPE_SZ, 4096); /* small, so it fills often */

        /* Fill the pipe first: the fd really is non-blocking and full when loop_write starts. */
        for (;;) {
                ssize_t k = write(p[1], "x", 1);
                if (k < 0)
                        break;
                prefill++;
        }
        ok(errno == EAGAIN && prefill > 0, "loop_write: the non-blocking pipe is full after %zu bytes", prefill);

        d = (Drain) { .fd = p[0], .skip = prefill, .got = got };
        if (pthread_create(&t, NULL, drain, &d) != 0) {
                ok(false, "loop_write: starting the reader");
                return;
        }
        r = loop_write(p[1], payload, PAYLOAD_SIZE);
        ok(r == 0, "loop_write: 1 MiB through a full non-blocking pipe returns 0 (got %d)", r);
        (void) close(p[1]);
        (void) pthread_join(t, NULL);
        (void) close(p[0]);
        ok(d.error == 0 && d.n == PAYLOAD_SIZE && memcmp(got, payload, PAYLOAD_SIZE) == 0,
           "loop_write: the reader got every byte in order (%zu of %d, read error %d)", d.n, PAYLOAD_SIZE, d.error);

        ok(loop_write(STDOUT_FILENO, "", 0) == 0, "loop_write: nothing to write is 0");

        /* the reader gone: EPIPE (SIGPIPE is ignored, as spacectl does) */
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0) {
                ok(false, "loop_write: second pipe: %s", strerror(errno));
                return;
        }
        (void) close(p[0]);
        r = loop_write(p[1], payload, 100);
        ok(r == -EPIPE, "loop_write: a pipe without reader gives -EPIPE (got %d)", r);
        (void) close(p[1]);

        r = loop_write(-1, payload, 1);
        ok(r == -EBADF, "loop_write: a bad fd gives -EBADF (got %d)", r);
}

static bool strv_equal(char *const *a, char *const *b) {
        for (; *a && *b; a++, b++)
                if (!streq(*a, *b))
                        return false;
        return !*a && !*b;
}

static void test_json_strv(void) {
        char *l[] = { "a", "with space", "", "ünïcode=1", NULL };
        char *const empty[] = { NULL };
        _cleanup_strv_free_ char **back = NULL, **none = NULL;
        char **untouched = (char **) empty;
        _cleanup_free_ char *s = NULL;
        cJSON *a, *j;

        a = json_array_from_strv(l);
        s = a ? cJSON_PrintUnformatted(a) : NULL;
        ok(s && streq(s, "[\"a\",\"with space\",\"\",\"ünïcode=1\"]"), "json_array_from_strv: %s", s ?: "NULL");
        ok(json_array_to_strv(a, &back) == 0 && back && strv_equal(back, l),
           "json_array_to_strv: the round trip gives the list back");
        cJSON_Delete(a);

        a = json_array_from_strv(NULL);
        ok(cJSON_IsArray(a) && cJSON_GetArraySize(a) == 0, "json_array_from_strv: NULL gives []");
        ok(json_array_to_strv(a, &none) == 0 && none && !none[0], "json_array_to_strv: [] gives an empty list");
        cJSON_Delete(a);
        a = json_array_from_strv(empty);
        ok(cJSON_IsArray(a) && cJSON_GetArraySize(a) == 0, "json_array_from_strv: an empty list gives []");
        cJSON_Delete(a);

        static const char *const bad[] = { "{\"a\":\"b\"}", "\"a\"", "null", "[1]", "[\"a\",null]", "[\"a\",[\"b\"]]",
                                           "[\"a\",true]" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r;

                j = cJSON_Parse(bad[i]);
                r = json_array_to_strv(j, &untouched);
                ok(r == -EINVAL && untouched == (char **) empty, "json_array_to_strv: %s is -EINVAL (got %d)",
                   bad[i], r);
                cJSON_Delete(j);
        }
        ok(json_array_to_strv(NULL, &untouched) == -EINVAL, "json_array_to_strv: NULL is -EINVAL");
}

static void test_hex(void) {
        {
                static const unsigned char b[] = { 0x00, 0x0f, 0xa5, 0xff };
                char h[9];

                string_hex_encode(b, sizeof b, h);
                ok(strcmp(h, "000fa5ff") == 0, "string_hex_encode: high nibble first, lowercase (%s)", h);
                string_hex_encode(b, 0, h);
                ok(h[0] == 0, "string_hex_encode: no bytes is the empty string");
        }
        ok(string_is_hex("0123456789abcdef", 16), "string_is_hex: all 16 digits");
        ok(string_is_hex("", 0), "string_is_hex: the empty string is 0 digits");
        ok(!string_is_hex("0123456789abcdef", 15), "string_is_hex: one digit more than n is false");
        ok(!string_is_hex("abc", 4), "string_is_hex: one digit less than n is false");
        ok(!string_is_hex("ABCDEF", 6), "string_is_hex: upper case is false");
        ok(!string_is_hex("abcg", 4), "string_is_hex: g is false");
        ok(!string_is_hex("ab c", 4), "string_is_hex: a space is false");
        ok(!string_is_hex("-abc", 4), "string_is_hex: a sign is false");
        ok(!string_is_hex(NULL, 0), "string_is_hex: NULL is false");
}

static void test_memeq(void) {
        uint8_t a[64], b[64];

        for (size_t i = 0; i < sizeof a; i++)
                a[i] = b[i] = (uint8_t) i;
        ok(memeq_const_time(a, b, sizeof a), "memeq_const_time: equal");
        ok(memeq_const_time(a, b, 0), "memeq_const_time: 0 bytes are equal");
        b[0] ^= 1;
        ok(!memeq_const_time(a, b, sizeof a), "memeq_const_time: the first byte differs");
        b[0] ^= 1;
        b[63] ^= 0x80;
        ok(!memeq_const_time(a, b, sizeof a), "memeq_const_time: the last byte differs");
        ok(memeq_const_time(a, b, 63), "memeq_const_time: only n bytes are compared");
}

static void test_escape_control(void) {
        static const struct {
                const char *what, *in, *out;
        } cases[] = {
                { "the empty string", "", "" },
                { "plain ASCII stays", "plain name.txt", "plain name.txt" },
                { "UTF-8 stays", "naïve ü – file", "naïve ü – file" },
                { "ESC (a colour)", "\033[31mred", "\\x1b[31mred" },
                { "ESC and BEL (a title)", "\033]0;title\007", "\\x1b]0;title\\x07" },
                { "tab, newline, carriage return", "a\tb\nc\rd", "a\\x09b\\x0ac\\x0dd" },
                { "0x01, 0x1f and DEL", "\001\037\177", "\\x01\\x1f\\x7f" },
                { "CSI as a C1 control in UTF-8, both bytes", "x\xc2\x9b" "2J", "x\\xc2\\x9b2J" },
                { "U+00A0 is no control", "\xc2\xa0nbsp", "\xc2\xa0nbsp" },
                { "a cut sequence at the end is no control", "trail\xc2", "trail\xc2" },
                { "a backslash stays", "\\x1b", "\\x1b" },
        };

        /* the descriptions name the case: the strings themselves would put raw bytes into the TAP output */
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *e = string_escape_control(cases[i].in);

                ok(e && streq(e, cases[i].out), "string_escape_control: %s", cases[i].what);
        }
}

#define PEM(b64) "-----BEGIN CERTIFICATE-----\n" b64 "\n-----END CERTIFICATE-----\n"

/* The guest's trust bundle edit (lib/trust-bundle.c): the old CA out, the new one in once, the rest kept. */
static void test_trust_bundle(void) {
        _cleanup_free_ char *out = NULL;
        size_t n;
        int r;

        ok(trust_pem_valid(PEM("QUJD")), "a certificate is a PEM to trust");
        ok(!trust_pem_valid(PEM("QUJD") PEM("REVG")), "two are not");
        ok(!trust_pem_valid(PEM("QUJD") "-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----\n") &&
                   !trust_pem_valid("-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----\n"),
           "nor one with a key, nor a key");
        ok(!trust_pem_valid("") && !trust_pem_valid(NULL) && !trust_pem_valid("-----BEGIN CERTIFICATE-----\nQUJD"),
           "nor nothing, nor a cut-off one");

        r = trust_bundle_edit("", 0, NULL, PEM("bmV3"), &out, &n);
        ok(r == 1 && streq(out, PEM("bmV3")) && n == strlen(out), "no bundle: ours alone");
        out = mfree(out);
        r = trust_bundle_edit(PEM("c3lz") "# x", strlen(PEM("c3lz") "# x"), NULL, PEM("bmV3"), &out, &n);
        ok(r == 1 && streq(out, PEM("c3lz") "# x\n" PEM("bmV3")), "ours at the end, on a line of its own");
        out = mfree(out);
        r = trust_bundle_edit(PEM("c3lz") PEM("bmV3"), strlen(PEM("c3lz") PEM("bmV3")), PEM("bmV3"), PEM("bmV3"), &out, &n);
        ok(r == 0 && !out, "ours in place already: unchanged");
        r = trust_bundle_edit(PEM("b2xk") PEM("c3lz") PEM("b2xk"), strlen(PEM("b2xk") PEM("c3lz") PEM("b2xk")), PEM("b2xk"),
                              PEM("bmV3"), &out, &n);
        ok(r == 1 && streq(out, PEM("c3lz") PEM("bmV3")), "every copy of the old one out, the new one in");
        out = mfree(out);
        r = trust_bundle_edit(PEM("c3lz"), strlen(PEM("c3lz")), PEM("b2xk"), PEM("bmV3"), &out, &n);
        ok(r == 1 && streq(out, PEM("c3lz") PEM("bmV3")), "an old one that is not there changes nothing else");
}

int main(void) {
        (void) signal(SIGPIPE, SIG_IGN);
        plan(0);
        test_loop_write();
        test_json_strv();
        test_hex();
        test_memeq();
        test_escape_control();
        test_trust_bundle();
        return done();
}
