/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "egress/egress-internal.h"
#include "macro.h"

/* Reads the name a connection means from its first bytes: the server_name of a TLS ClientHello (RFC 8446
 * 4.1.2, RFC 6066 3) or the Host of an HTTP/1 request. Everything here comes from the guest: every length is
 * checked against what is there, and nothing is copied beyond EGRESS_HOST_MAX. */

#define HTTP_HEAD_MAX (16U * 1024U)
#define TLS_RECORD_MAX (16U * 1024U)
#define HTTP_LINE_MAX (8U * 1024U)

static void set(EgressSniff *s, EgressSniffKind kind, const char *why) {
        s->kind = kind;
        s->why = why;
        /* a refusal carries no name, even one read before what made it refuse (a second SNI) */
        if (kind == EGRESS_SNIFF_BAD || kind == EGRESS_SNIFF_MORE) {
                s->has_name = s->has_literal = false;
                s->name[0] = 0;
        }
}

typedef struct Cursor {
        const uint8_t *p;
        size_t n;
} Cursor;

static bool take(Cursor *c, size_t n, Cursor *ret) {
        if (c->n < n)
                return false;
        if (ret)
                *ret = (Cursor) { c->p, n };
        c->p += n;
        c->n -= n;
        return true;
}

static bool take_u8(Cursor *c, unsigned *ret) {
        if (c->n < 1)
                return false;
        *ret = c->p[0];
        return take(c, 1, NULL);
}

static bool take_u16(Cursor *c, unsigned *ret) {
        if (c->n < 2)
                return false;
        *ret = (unsigned) c->p[0] << 8 | c->p[1];
        return take(c, 2, NULL);
}

static bool take_vec(Cursor *c, unsigned len_bytes, Cursor *ret) {
        unsigned len;

        if (len_bytes == 1 ? !take_u8(c, &len) : !take_u16(c, &len))
                return false;
        return take(c, len, ret);
}

static void sniff_server_name(Cursor ext, EgressSniff *s) {
        Cursor list, name;
        unsigned type;

        if (!take_vec(&ext, 2, &list) || ext.n != 0)
                return set(s, EGRESS_SNIFF_BAD, "a malformed server_name extension");
        /* One host_name entry: RFC 6066 allows no more than one of a type. */
        if (!take_u8(&list, &type) || type != 0 || !take_vec(&list, 2, &name) || list.n != 0)
                return set(s, EGRESS_SNIFF_BAD, "a server_name extension without exactly one host name");
        if (name.n == 0 || name.n > EGRESS_HOST_MAX || memchr(name.p, 0, name.n))
                return set(s, EGRESS_SNIFF_BAD, "an SNI that is no host name");
        {
                char raw[EGRESS_HOST_MAX + 1];

                memcpy(raw, name.p, name.n);
                raw[name.n] = 0;
                if (egress_host_is_numeric(raw) || strchr(raw, ':') || egress_host_normalize(raw, s->name) < 0)
                        return set(s, EGRESS_SNIFF_BAD, "an SNI that is no host name");
        }
        s->has_name = true;
        set(s, EGRESS_SNIFF_TLS, NULL);
}

static void sniff_tls(const uint8_t *p, size_t n, EgressSniff *s) {
        Cursor rec = { p, n }, body = {}, hello, exts = {};
        unsigned type, len_hi, len_lo, v;
        size_t rec_len, hs_len;
        bool seen_sni = false;

        if (n < 5)
                return set(s, EGRESS_SNIFF_MORE, NULL);
        rec_len = (size_t) p[3] << 8 | p[4];
        if (rec_len < 4 || rec_len > TLS_RECORD_MAX)
                return set(s, EGRESS_SNIFF_BAD, "a TLS record of a bad length");
        if (n < 5 + rec_len)
                return set(s, EGRESS_SNIFF_MORE, NULL);
        (void) take(&rec, 5, NULL);
        (void) take(&rec, rec_len, &body);
        if (!take_u8(&body, &type) || type != 1)
                return set(s, EGRESS_SNIFF_BAD, "a TLS handshake that does not start with a ClientHello");
        if (!take_u8(&body, &len_hi) || !take_u16(&body, &len_lo))
                return set(s, EGRESS_SNIFF_BAD, "a truncated ClientHello");
        hs_len = (size_t) len_hi << 16 | len_lo;
        /* A ClientHello split across records would hide its extensions from a one-record reader: refuse it. */
        if (hs_len != body.n)
                return set(s, EGRESS_SNIFF_BAD, "a ClientHello that does not fill exactly one TLS record");
        hello = body;
        if (!take_u16(&hello, &v) || !take(&hello, 32, NULL) || !take_vec(&hello, 1, NULL) ||
            !take_vec(&hello, 2, NULL) || !take_vec(&hello, 1, NULL))
                return set(s, EGRESS_SNIFF_BAD, "a truncated ClientHello");
        if (hello.n == 0) {
                set(s, EGRESS_SNIFF_TLS, NULL); /* no extensions at all: no SNI */
                return;
        }
        if (!take_vec(&hello, 2, &exts) || hello.n != 0)
                return set(s, EGRESS_SNIFF_BAD, "a ClientHello with malformed extensions");
        set(s, EGRESS_SNIFF_TLS, NULL);
        while (exts.n > 0) {
                Cursor data;
                unsigned etype;

                if (!take_u16(&exts, &etype) || !take_vec(&exts, 2, &data))
                        return set(s, EGRESS_SNIFF_BAD, "a ClientHello with malformed extensions");
                if (etype != 0)
                        continue;
                if (seen_sni)
                        return set(s, EGRESS_SNIFF_BAD, "a ClientHello with two server_name extensions");
                seen_sni = true;
                sniff_server_name(data, s);
                if (s->kind == EGRESS_SNIFF_BAD)
                        return;
        }
}

/* The Host value: a name, or an IP literal, with an optional port. */
static void sniff_host_value(const char *v, size_t n, EgressSniff *s) {
        char buf[EGRESS_HOST_MAX + 8];
        char *colon;

        if (n == 0 || n >= sizeof buf)
                return set(s, EGRESS_SNIFF_BAD, "an HTTP Host that is no host");
        memcpy(buf, v, n);
        buf[n] = 0;
        if (buf[0] == '[') {
                char *end = strchr(buf, ']');

                if (!end || (end[1] != 0 && end[1] != ':'))
                        return set(s, EGRESS_SNIFF_BAD, "an HTTP Host that is no host");
                *end = 0;
                if (egress_addr_parse_literal(buf + 1, &s->literal) < 0 || s->literal.family != AF_INET6)
                        return set(s, EGRESS_SNIFF_BAD, "an HTTP Host that is no host");
                s->has_literal = true;
                return set(s, EGRESS_SNIFF_HTTP, NULL);
        }
        colon = strchr(buf, ':');
        if (colon) {
                if (colon[1] == 0 || strspn(colon + 1, "0123456789") != strlen(colon + 1))
                        return set(s, EGRESS_SNIFF_BAD, "an HTTP Host with a bad port");
                *colon = 0;
        }
        if (egress_host_is_numeric(buf)) {
                if (egress_addr_parse_literal(buf, &s->literal) < 0)
                        return set(s, EGRESS_SNIFF_BAD, "an HTTP Host that is no host");
                s->has_literal = true;
                return set(s, EGRESS_SNIFF_HTTP, NULL);
        }
        if (egress_host_normalize(buf, s->name) < 0)
                return set(s, EGRESS_SNIFF_BAD, "an HTTP Host that is no host name");
        s->has_name = true;
        set(s, EGRESS_SNIFF_HTTP, NULL);
}

static void sniff_http(const uint8_t *p, size_t n, bool eof, EgressSniff *s) {
        const char *head = (const char *) p, *end, *line, *host = NULL;
        size_t host_len = 0, head_len;

        end = memmem(p, MIN(n, HTTP_HEAD_MAX), "\r\n\r\n", 4);
        if (!end) {
                if (n >= HTTP_HEAD_MAX)
                        return set(s, EGRESS_SNIFF_BAD, "an HTTP request head over 16 KiB");
                return set(s, eof ? EGRESS_SNIFF_BAD : EGRESS_SNIFF_MORE, "an HTTP request head cut short");
        }
        head_len = (size_t) (end - head) + 2;
        if (memchr(p, 0, head_len))
                return set(s, EGRESS_SNIFF_BAD, "an HTTP request head with a NUL byte");

        /* The request line: an absolute-form target would name a host of its own; clients send origin form
         * to servers (the proxy rewrote it), so anything but origin form, '*' or CONNECT's is refused. */
        line = memchr(head, ' ', head_len);
        if (!line || (line[1] != '/' && line[1] != '*'))
                return set(s, EGRESS_SNIFF_BAD, "an HTTP request line without an origin-form target");

        for (line = memmem(head, head_len, "\r\n", 2) + 2; line < head + head_len;) {
                const char *eol = memmem(line, (size_t) (head + head_len - line), "\r\n", 2);
                size_t len = (size_t) (eol - line);

                if (len == 0)
                        break;
                if (len > 5 && strncasecmp(line, "host:", 5) == 0) {
                        const char *v = line + 5, *ve = line + len;

                        if (host)
                                return set(s, EGRESS_SNIFF_BAD, "an HTTP request with two Host headers");
                        while (v < ve && (*v == ' ' || *v == '\t'))
                                v++;
                        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                                ve--;
                        host = v;
                        host_len = (size_t) (ve - v);
                } else if (line[0] == ' ' || line[0] == '\t')
                        return set(s, EGRESS_SNIFF_BAD, "an HTTP header folded over lines");
                line = eol + 2;
        }
        if (!host)
                return set(s, EGRESS_SNIFF_HTTP, NULL); /* HTTP/1.0 without Host: no name */
        sniff_host_value(host, host_len, s);
}

void egress_sniff(const uint8_t *p, size_t n, bool eof, EgressSniff *ret) {
        size_t i;

        *ret = (EgressSniff) { .kind = EGRESS_SNIFF_MORE };
        if (n == 0) {
                if (eof)
                        set(ret, EGRESS_SNIFF_OTHER, NULL);
                return;
        }
        /* TLS: a handshake record (22) of version 3.x. */
        if (p[0] == 22) {
                if (n >= 2 && p[1] != 3)
                        return set(ret, EGRESS_SNIFF_OTHER, NULL);
                sniff_tls(p, n, ret);
                if (ret->kind == EGRESS_SNIFF_MORE && eof)
                        set(ret, EGRESS_SNIFF_BAD, "a ClientHello cut short");
                return;
        }
        /* HTTP: a method token (upper-case letters) and a space. */
        for (i = 0; i < n && i < 17; i++) {
                if (p[i] == ' ')
                        break;
                if (!isupper(p[i]))
                        return set(ret, EGRESS_SNIFF_OTHER, NULL);
        }
        if (i == 0 || i == 17)
                return set(ret, EGRESS_SNIFF_OTHER, NULL);
        if (i == n)
                return set(ret, eof ? EGRESS_SNIFF_OTHER : EGRESS_SNIFF_MORE, NULL);
        /* Many line protocols start with an upper-case word and a space too (SMTP's EHLO, Redis, IRC): it is
         * HTTP only when the first line ends in the version. */
        {
                const uint8_t *nl = memchr(p, '\n', MIN(n, (size_t) HTTP_LINE_MAX));
                size_t len;

                if (!nl) {
                        if (n >= HTTP_LINE_MAX)
                                return set(ret, EGRESS_SNIFF_BAD, "a first line over 8 KiB");
                        return set(ret, eof ? EGRESS_SNIFF_OTHER : EGRESS_SNIFF_MORE, NULL);
                }
                bool cr;

                len = (size_t) (nl - p);
                cr = len > 0 && p[len - 1] == '\r';
                if (cr)
                        len--;
                if (len < 9 || memcmp(p + len - 9, " HTTP/1.", 8) != 0 || !isdigit(p[len - 1]))
                        return set(ret, EGRESS_SNIFF_OTHER, NULL);
                /* lenient servers take bare LF lines, which this reader would not see the end of */
                if (!cr)
                        return set(ret, EGRESS_SNIFF_BAD, "an HTTP request line ending in a bare LF");
        }
        sniff_http(p, n, eof, ret);
}
