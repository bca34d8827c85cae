/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "egress/egress-internal.h"
#include "macro.h"
#include "proxy-request.h"

/* Reads the name a connection means from its first bytes: the server_name of a TLS ClientHello (RFC 8446
 * 4.1.2, RFC 6066 3) or the Host of an HTTP/1 request. Everything here comes from the guest: every length is
 * checked against what is there, and nothing is copied beyond EGRESS_HOST_MAX. */

#define HTTP_HEAD_MAX (16U * 1024U)
#define TLS_RECORD_MAX (16U * 1024U)
#define HTTP_LINE_MAX (8U * 1024U)

static void set(EgressSniff *s, EgressSniffKind kind, const char *why) {
        s->kind = kind;
        s->why = why;
        /* Only a ClientHello or a request names a host: a refusal carries no name, even one read before what
         * made it refuse (a second SNI), and neither do bytes taken for another protocol (a ClientHello after
         * an empty line, which no TLS server would read as one). */
        if (kind != EGRESS_SNIFF_TLS && kind != EGRESS_SNIFF_HTTP) {
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

/* Whether a comma-separated header value lists token (in any case). */
static bool lists_token(const char *v, size_t n, const char *token) {
        size_t tl = strlen(token);

        for (size_t i = 0; i + tl <= n; i++)
                if (strncasecmp(v + i, token, tl) == 0 && (i == 0 || strchr(" \t,", v[i - 1])) &&
                    (i + tl == n || strchr(" \t,", v[i + tl])))
                        return true;
        return false;
}

/* The last coding of a Transfer-Encoding value is chunked (RFC 9112 6.1: any other leaves a request's length
 * unknown, so a server must refuse it). */
static bool ends_chunked(const char *v, size_t n) {
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                n--;
        return n >= 7 && strncasecmp(v + n - 7, "chunked", 7) == 0 &&
               (n == 7 || strchr(" \t,", v[n - 8]));
}

typedef struct HeadFields {
        const char *host;
        size_t host_len;
        bool has_te, chunked, has_length, upgrade_header, connection_upgrade;
        uint64_t length;
} HeadFields;

/* One field line "name: value" (no CR or LF in it); NULL or why it is refused. */
static const char *head_field(const char *line, size_t len, HeadFields *f) {
        const char *colon = memchr(line, ':', len), *v, *ve;

        if (line[0] == ' ' || line[0] == '\t')
                return "an HTTP header folded over lines";
        if (!colon || colon == line)
                return "an HTTP header line without a name";
        for (const char *c = line; c < colon; c++)
                if (!http_tchar(*c))
                        return "an HTTP header name that is no token"; /* "Host :" too: servers differ on it */
        v = colon + 1;
        ve = line + len;
        while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;

#define NAME_IS(s) ((size_t) (colon - line) == strlen(s) && strncasecmp(line, s, strlen(s)) == 0)
        if (NAME_IS("host")) {
                if (f->host)
                        return "an HTTP request with two Host headers";
                f->host = v;
                f->host_len = (size_t) (ve - v);
        } else if (NAME_IS("content-length")) {
                uint64_t x = 0;

                /* digits only, once: "10, 10", "+10" or two of them are how requests are smuggled */
                if (f->has_length || v == ve || (size_t) (ve - v) > 15)
                        return "an HTTP request with a Content-Length that is not one number";
                for (const char *c = v; c < ve; c++) {
                        if (!isdigit((unsigned char) *c))
                                return "an HTTP request with a Content-Length that is not one number";
                        x = x * 10 + (uint64_t) (*c - '0');
                }
                f->has_length = true;
                f->length = x;
        } else if (NAME_IS("transfer-encoding")) {
                if (f->has_te)
                        return "an HTTP request with two Transfer-Encoding headers";
                f->has_te = true;
                f->chunked = ends_chunked(v, (size_t) (ve - v));
                if (!f->chunked)
                        return "an HTTP request whose Transfer-Encoding does not end in chunked";
        } else if (NAME_IS("upgrade"))
                f->upgrade_header = f->upgrade_header || lists_token(v, (size_t) (ve - v), "websocket");
        else if (NAME_IS("connection"))
                f->connection_upgrade = f->connection_upgrade || lists_token(v, (size_t) (ve - v), "upgrade");
#undef NAME_IS
        return NULL;
}

static void sniff_http(const uint8_t *p, size_t n, bool eof, EgressSniff *s) {
        const char *head = (const char *) p, *end, *line, *why;
        size_t head_len, scan = MIN(n, (size_t) HTTP_HEAD_MAX);
        HeadFields f = {};

        /* Every CR with its LF, every LF after its CR, no control bytes: lenient servers end lines and heads
         * where this reader would not, and would read a Host it never saw. */
        for (size_t i = 0; i < scan; i++) {
                uint8_t c = p[i];

                if (c == '\n' && (i == 0 || p[i - 1] != '\r'))
                        return set(s, EGRESS_SNIFF_BAD, "an HTTP request head with a bare LF");
                if (c == '\r' && i + 1 < scan && p[i + 1] != '\n')
                        return set(s, EGRESS_SNIFF_BAD, "an HTTP request head with a bare CR");
                if ((c < 0x20 && c != '\t' && c != '\r' && c != '\n') || c == 0x7f)
                        return set(s, EGRESS_SNIFF_BAD, "an HTTP request head with a control byte");
                if (c == '\n' && i >= 3 && p[i - 2] == '\n')
                        break; /* the head ends here: what follows is a body */
        }
        end = memmem(p, scan, "\r\n\r\n", 4);
        if (!end) {
                if (n >= HTTP_HEAD_MAX)
                        return set(s, EGRESS_SNIFF_BAD, "an HTTP request head over 16 KiB");
                return set(s, eof ? EGRESS_SNIFF_BAD : EGRESS_SNIFF_MORE, "an HTTP request head cut short");
        }
        head_len = (size_t) (end - head) + 2;

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
                why = head_field(line, len, &f);
                if (why)
                        return set(s, EGRESS_SNIFF_BAD, why);
                line = eol + 2;
        }
        if (f.has_te && f.has_length)
                return set(s, EGRESS_SNIFF_BAD, "an HTTP request with both Content-Length and Transfer-Encoding");
        s->http10 = memcmp(memmem(head, head_len, "\r\n", 2) - 3, "1.0", 3) == 0;
        if (f.has_te && s->http10)
                return set(s, EGRESS_SNIFF_BAD, "an HTTP/1.0 request with a Transfer-Encoding");
        s->head_len = head_len + 2;
        s->chunked = f.chunked;
        s->length = f.has_length ? f.length : 0;
        s->upgrade = f.upgrade_header && f.connection_upgrade;
        if (!f.host)
                return set(s, EGRESS_SNIFF_HTTP, NULL); /* HTTP/1.0 without Host: no name */
        sniff_host_value(f.host, f.host_len, s);
}

void egress_sniff(const uint8_t *p, size_t n, bool eof, EgressSniff *ret) {
        size_t i;

        *ret = (EgressSniff) { .kind = EGRESS_SNIFF_MORE };
        if (n == 0) {
                if (eof)
                        set(ret, EGRESS_SNIFF_OTHER, NULL);
                return;
        }
        /* A server skips empty lines before a request (RFC 9112 2.2) and would read the Host of one that follows,
         * which this reader would take for another protocol. Binary protocols start with CR or LF too (a length
         * byte), so only a request after them is refused. */
        if (p[0] == '\r' || p[0] == '\n') {
                for (i = 0; i < n && (p[i] == '\r' || p[i] == '\n'); i++)
                        ;
                egress_sniff(p + i, n - i, eof, ret);
                if (ret->kind == EGRESS_SNIFF_HTTP || (ret->kind == EGRESS_SNIFF_BAD && p[i] != 22))
                        set(ret, EGRESS_SNIFF_BAD, "an HTTP request after an empty line");
                else if (ret->kind != EGRESS_SNIFF_MORE)
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
