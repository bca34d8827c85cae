/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: the gateway adding secrets to a plain HTTP request (spaced/egress/binding.c,
 * egress_head_rewrite()) on heads as the guest sends them, framed as the gateway frames them
 * (egress_http_stream_step(): only what it calls a head is rewritten); and the egress_secret lines the daemon
 * reads (egress_binding_parse()) and a sandbox's own bindings (egress_binding_parse_own(), E2B's network.rules).
 *
 * Input: the guest's bytes. Its first byte picks which bindings apply (a header one, a placeholder one, a
 * sandbox's own header naming two secrets with text around them, any of them or none). Invariants (abort on violation): the rewritten head is still one head to the same framing, ending where
 * it ends, with the same request line and Host; it carries the header binding's header exactly once, whatever
 * the guest sent; no placeholder is left in a header value but those of Host and the framing headers; its size is within the bound or the rewrite says
 * -E2BIG; no reference to a secret is left in the own header, and a value holding what looks like a reference
 * is not read again. The same bytes as an egress_secret line or an own binding parse or fail cleanly, and
 * what parses names each secret once, by a reference its value holds. */

#include <errno.h>
#include <string.h>
#include <strings.h>

#include "fuzz-util.h"
#include "egress/egress-internal.h"

#define PLACEHOLDER "space-secret-k-0123456789abcdef"

static size_t count_header(const uint8_t *p, size_t n, const char *name) {
        size_t count = 0, k = strlen(name);

        for (size_t i = 0; i + 2 < n; i++)
                if (p[i] == '\r' && p[i + 1] == '\n' && n - i - 2 > k && strncasecmp((const char *) p + i + 2, name, k) == 0 &&
                    p[i + 2 + k] == ':')
                        count++;
        return count;
}

/* A placeholder is left only in the request line and in the headers that frame the request or name its host. */
static void check_placeholders_left(const uint8_t *p, size_t n, size_t first_line) {
        static const char *const framing[] = { "host:", "content-length:", "transfer-encoding:", "connection:",
                                               "upgrade:", "te:", "trailer:", "expect:", NULL };
        const uint8_t *line = p + first_line + 2, *end = p + n;

        while (line < end) {
                const uint8_t *eol = memmem(line, (size_t) (end - line), "\r\n", 2);
                bool framing_line = false;

                check(eol);
                for (const char *const *f = framing; *f && !framing_line; f++)
                        framing_line = (size_t) (eol - line) >= strlen(*f) && strncasecmp((const char *) line, *f, strlen(*f)) == 0;
                const uint8_t *colon = memchr(line, ':', (size_t) (eol - line));
                /* names go as they are: only values are looked at */
                if (!framing_line && colon)
                        check(!memmem(colon, (size_t) (eol - colon), PLACEHOLDER, strlen(PLACEHOLDER)));
                line = eol + 2;
        }
}

static void rewrite(const uint8_t *head, size_t n, unsigned which) {
        EgressInjection inj[3];
        size_t k = 0, first_line;
        SpaceBuf out = {};
        unsigned done = 0;
        EgressSniff a, b;
        int r;

        static const EgressValue value = { .ref = "{value}", .value = "VALUE", .value_len = 5 },
                                 ph = { .ref = PLACEHOLDER, .value = "V", .value_len = 1 };

        if (which & 1)
                inj[k++] = (EgressInjection) { .header = "Authorization", .template = "Bearer {value}", .values = &value,
                                               .n_values = 1 };
        if (which & 2)
                inj[k++] = (EgressInjection) { .values = &ph, .n_values = 1 };
        /* a value that looks like a reference stays as it is */
        static const EgressValue two[] = {
                { .ref = "${e2b.secrets.a}", .value = "${e2b.secrets.b}", .value_len = 16 },
                { .ref = "${e2b.secrets.b}", .value = "B", .value_len = 1 },
        };
        if (which & 4)
                inj[k++] = (EgressInjection) { .header = "X-Own", .template = "k=${e2b.secrets.a};${e2b.secrets.b}!",
                                               .values = two, .n_values = 2 };
        r = egress_head_rewrite(head, n, inj, k, 4096, &out, &done);
        if (r == -E2BIG) {
                space_buf_done(&out);
                return;
        }
        check(r == 0);
        check(out.len >= 4 && memcmp(out.data + out.len - 4, "\r\n\r\n", 4) == 0);
        first_line = (size_t) ((const uint8_t *) memmem(head, n, "\r\n", 2) - head);
        check(out.len > first_line && memcmp(out.data, head, first_line + 2) == 0);
        egress_sniff(head, n, true, &a);
        egress_sniff(out.data, out.len, true, &b);
        check(a.kind == EGRESS_SNIFF_HTTP);
        check(b.kind == EGRESS_SNIFF_HTTP && b.head_len == out.len);
        check(a.has_name == b.has_name && (!a.has_name || strcmp(a.name, b.name) == 0));
        check(a.chunked == b.chunked && a.length == b.length);
        if (which & 4) {
                static const char want[] = "\r\nX-Own: k=${e2b.secrets.b};B!\r\n";
                check(count_header(out.data, out.len, "X-Own") == 1);
                check(memmem(out.data, out.len, want, strlen(want)));
        }
        if (which & 1)
                check(count_header(out.data, out.len, "Authorization") == 1);
        else
                check(count_header(out.data, out.len, "Authorization") == count_header(head, n, "Authorization"));
        if (which & 2)
                check_placeholders_left(out.data, out.len, first_line);
        space_buf_done(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        EgressHttpStream st = {};
        const char *why = NULL;
        size_t used = 0;
        EgressSniff h;

        if (size < 1)
                return 0;
        if (egress_http_stream_step(&st, data + 1, size - 1, true, &used, &h, &why) == EGRESS_HTTP_HEAD)
                rewrite(data + 1, used, data[0] & 7);

        /* the same bytes as a config line */
        char *line = strndup((const char *) data + 1, size - 1);
        EgressConfig c = {};
        Error e = {};
        if (line && !memchr(data + 1, 0, size - 1)) {
                if (egress_binding_parse(&c, line, &e) == 0) {
                        check(c.n_profiles == 1 && c.profiles[0].n_bindings == 1);
                        const EgressBinding *b = &c.profiles[0].bindings[0];
                        check(b->secrets && b->secrets[0] && !b->secrets[1] && b->dests.n > 0);
                        check(!b->header || (b->template && strstr(b->template, "{value}")));
                }
        }
        error_done(&e);
        egress_config_done(&c);
        EgressBinding own = {};
        if (line && !memchr(data + 1, 0, size - 1) && egress_binding_parse_own(line, &own, &e) == 0) {
                size_t n = 0;

                check(own.header && own.template && own.dests.n > 0);
                for (; own.secrets && own.secrets[n]; n++) {
                        check(own.refs && own.refs[n] && strstr(own.template, own.refs[n]));
                        for (size_t i = 0; i < n; i++)
                                check(strcmp(own.secrets[i], own.secrets[n]) != 0);
                }
                check(!own.refs || !own.refs[n]);
        }
        egress_binding_done(&own);
        error_done(&e);
        free(line);
        return 0;
}
