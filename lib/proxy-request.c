/* SPDX-License-Identifier: Apache-2.0 */

/* Request heads for the guest's HTTP proxy (lib/proxy-request.h). */

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "macro.h"
#include "proxy-request.h"

bool http_tchar(char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

int http_chunk_size(const char *line, size_t len, HttpChunkSyntax syntax, uint64_t *ret) {
        uint64_t size = 0;
        size_t i;
        int v;

        for (i = 0; i < len && (v = unhexchar(line[i])) >= 0; i++) {
                if (i >= HTTP_CHUNK_DIGITS_MAX)
                        return -EBADMSG;
                size = size << 4 | (uint64_t) v;
        }
        if (i == 0)
                return -EBADMSG;
        if (syntax == HTTP_CHUNK_LENIENT) {
                if (i < len && line[i] != ';' && line[i] != ' ' && line[i] != '\t')
                        return -EBADMSG;
        } else {
                if (i < len && line[i] != ';')
                        return -EBADMSG;
                for (; i < len; i++)
                        if (((unsigned char) line[i] < 0x20 && line[i] != '\t') || line[i] == 0x7f)
                                return -EBADMSG;
        }
        *ret = size;
        return 0;
}

size_t proxy_head_length(const char *buf, size_t n) {
        /* An empty line: a LF right after the previous line's LF, with an optional CR between. */
        for (size_t i = 0; i < n; i++) {
                if (buf[i] != '\n')
                        continue;
                if (i + 1 < n && buf[i + 1] == '\n')
                        return i + 2;
                if (i + 2 < n && buf[i + 1] == '\r' && buf[i + 2] == '\n')
                        return i + 3;
        }
        return 0;
}

/* The end of the line starting at off (the index of its LF), with *ret_next the start of the next line.
 * -EINVAL if the line has a CR anywhere but before its LF, a NUL, or no LF. */
static int line_end(const char *h, size_t n, size_t off, size_t *ret_end, size_t *ret_next) {
        for (size_t i = off; i < n; i++) {
                if (h[i] == '\n') {
                        *ret_end = i > off && h[i - 1] == '\r' ? i - 1 : i;
                        *ret_next = i + 1;
                        return 0;
                }
                if (h[i] == 0 || (h[i] == '\r' && (i + 1 >= n || h[i + 1] != '\n')))
                        return -EINVAL;
        }
        return -EINVAL;
}

static int parse_port(const char *s, size_t l, uint16_t *ret) {
        unsigned v = 0;

        if (l == 0 || l > 5)
                return -EINVAL;
        for (size_t i = 0; i < l; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned) (s[i] - '0');
        }
        if (v == 0 || v > 65535)
                return -EINVAL;
        *ret = (uint16_t) v;
        return 0;
}

/* host[:port] or [v6][:port] in s[0..l). A missing port is 0. */
static int parse_authority(const char *s, size_t l, ProxyRequest *r) {
        const char *host, *colon;
        size_t hl;

        r->host_ipv6 = false;
        r->port = 0;
        if (l == 0)
                return -EINVAL;
        if (s[0] == '[') {
                const char *close = memchr(s, ']', l);
                char buf[INET6_ADDRSTRLEN];
                unsigned char a[16];

                if (!close)
                        return -EINVAL;
                host = s + 1;
                hl = (size_t) (close - host);
                if (hl == 0 || hl >= sizeof buf)
                        return -EINVAL;
                memcpy(buf, host, hl);
                buf[hl] = 0;
                if (inet_pton(AF_INET6, buf, a) != 1) /* also refuses a zone id ("%25eth0") */
                        return -EINVAL;
                r->host_ipv6 = true;
                colon = close + 1;
                if (colon < s + l && *colon != ':')
                        return -EINVAL;
        } else {
                host = s;
                colon = memchr(s, ':', l);
                hl = colon ? (size_t) (colon - s) : l;
                if (hl == 0 || hl > PROXY_HOST_MAX)
                        return -EINVAL;
                for (size_t i = 0; i < hl; i++) {
                        char ch = host[i];
                        bool dot = ch == '.';

                        if (!dot && !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                                      (ch >= '0' && ch <= '9') || ch == '-' || ch == '_'))
                                return -EINVAL;
                        /* no empty label, except the root's after a trailing dot */
                        if (dot && (i == 0 || host[i - 1] == '.'))
                                return -EINVAL;
                }
        }

        for (size_t i = 0; i < hl; i++)
                r->host[i] = (char) (host[i] >= 'A' && host[i] <= 'Z' ? host[i] - 'A' + 'a' : host[i]);
        r->host[hl] = 0;

        if (colon && colon < s + l)
                return parse_port(colon + 1, (size_t) (s + l - colon - 1), &r->port);
        return 0;
}

static int parse_target(const char *h, size_t off, size_t l, ProxyRequest *r) {
        static const char scheme[] = "http://";
        size_t sl = sizeof scheme - 1, a_end;
        int q;

        if (r->connect) {
                q = parse_authority(h + off, l, r);
                if (q < 0)
                        return q;
                return r->port == 0 ? -EINVAL : 0; /* CONNECT names its port */
        }

        if (l < sl || strncasecmp(h + off, scheme, sl) != 0) {
                const char *sep = memchr(h + off, ':', l);
                /* another scheme (https://, ftp://) vs. no absolute URI at all (origin form, "*") */
                return sep && sep > h + off && (size_t) (sep - h - off) + 2 < l && sep[1] == '/' && sep[2] == '/' ?
                               -EPROTONOSUPPORT :
                               -EINVAL;
        }
        off += sl;
        l -= sl;
        for (a_end = 0; a_end < l && !strchr("/?#", h[off + a_end]); a_end++)
                if (h[off + a_end] == '@')
                        return -EINVAL; /* userinfo: "http://allowed.example@other.example/" */
        q = parse_authority(h + off, a_end, r);
        if (q < 0)
                return q;
        if (r->port == 0)
                r->port = 80;

        /* path and query, without a fragment (never sent to an origin) */
        r->path_off = off + a_end;
        r->path_len = 0;
        while (a_end + r->path_len < l && h[r->path_off + r->path_len] != '#')
                r->path_len++;
        return 0;
}

static int parse_request_line(const char *h, size_t end, ProxyRequest *r) {
        const char *sp1, *sp2;
        size_t ml, tl;

        sp1 = memchr(h, ' ', end);
        if (!sp1)
                return -EINVAL;
        ml = (size_t) (sp1 - h);
        if (ml == 0 || ml >= sizeof r->method)
                return -EINVAL;
        for (size_t i = 0; i < ml; i++)
                if (!http_tchar(h[i]))
                        return -EINVAL;
        memcpy(r->method, h, ml);
        r->method[ml] = 0;
        r->connect = strcmp(r->method, "CONNECT") == 0; /* methods are case-sensitive */

        sp2 = memchr(sp1 + 1, ' ', end - ml - 1);
        if (!sp2)
                return -EINVAL;
        tl = (size_t) (sp2 - sp1 - 1);
        if (tl == 0)
                return -EINVAL;
        for (size_t i = 0; i < tl; i++)
                if (sp1[1 + i] <= 0x20 || sp1[1 + i] >= 0x7f)
                        return -EINVAL;

        r->version_off = (size_t) (sp2 + 1 - h);
        if (end - r->version_off != 8 || memcmp(h + r->version_off, "HTTP/1.", 7) != 0 ||
            (h[r->version_off + 7] != '0' && h[r->version_off + 7] != '1'))
                return -EINVAL;

        return parse_target(h, (size_t) (sp1 + 1 - h), tl, r);
}

static int parse_header_line(const char *h, size_t off, size_t end) {
        const char *colon = memchr(h + off, ':', end - off);

        if (!colon || colon == h + off)
                return -EINVAL; /* no name; a line starting with SP or HT (obs-fold) ends up here too */
        for (const char *c = h + off; c < colon; c++)
                if (!http_tchar(*c))
                        return -EINVAL;
        for (const char *c = colon + 1; c < h + end; c++)
                if ((unsigned char) *c < 0x20 ? *c != '\t' : *c == 0x7f)
                        return -EINVAL;
        return 0;
}

int proxy_request_parse(const char *head, size_t n, ProxyRequest *ret) {
        ProxyRequest r = {};
        size_t off = 0, end, next;
        int q;

        if (!head)
                return -EINVAL;
        if (n > PROXY_HEAD_MAX)
                return -E2BIG;

        q = line_end(head, n, 0, &end, &next);
        if (q < 0)
                return q;
        q = parse_request_line(head, end, &r);
        if (q < 0)
                return q;
        r.headers_off = off = next;

        for (;;) {
                q = line_end(head, n, off, &end, &next);
                if (q < 0)
                        return q;
                if (end == off)
                        break;
                q = parse_header_line(head, off, end);
                if (q < 0)
                        return q;
                off = next;
        }
        if (next != n)
                return -EINVAL; /* n must end at the empty line */
        r.head_len = next;
        *ret = r;
        return 0;
}

static bool header_is(const char *h, size_t off, size_t end, const char *name) {
        size_t l = strlen(name);

        return end - off > l && h[off + l] == ':' && strncasecmp(h + off, name, l) == 0;
}

/* Whether a Connection header's value lists "upgrade" (a WebSocket handshake keeps its connection). */
static bool lists_upgrade(const char *v, size_t l) {
        for (size_t i = 0; i + 7 <= l; i++)
                if (strncasecmp(v + i, "upgrade", 7) == 0 && (i == 0 || strchr(" \t,", v[i - 1])) &&
                    (i + 7 == l || strchr(" \t,", v[i + 7])))
                        return true;
        return false;
}

int proxy_request_rewrite(const char *head, const ProxyRequest *r, SpaceBuf *out) {
        size_t off = r->headers_off, end, next;
        bool upgrade = false;
        char host[PROXY_HOST_MAX + 32];
        int q, l;

        if (r->connect)
                return -EINVAL;
        q = space_buf_append(out, r->method, strlen(r->method));
        if (q >= 0)
                q = space_buf_append(out, " ", 1);
        if (q >= 0 && (r->path_len == 0 || head[r->path_off] != '/'))
                q = space_buf_append(out, "/", 1); /* "http://h?q" is "/?q" */
        if (q >= 0)
                q = space_buf_append(out, head + r->path_off, r->path_len);
        if (q >= 0)
                q = space_buf_append(out, " ", 1);
        if (q >= 0)
                q = space_buf_append(out, head + r->version_off, 8);
        if (q >= 0)
                q = space_buf_append(out, "\r\n", 2);

        while (q >= 0 && line_end(head, r->head_len, off, &end, &next) == 0 && end > off) {
                if (header_is(head, off, end, "connection")) {
                        upgrade = upgrade || lists_upgrade(head + off + 11, end - off - 11);
                } else if (!header_is(head, off, end, "host") && !header_is(head, off, end, "keep-alive") &&
                           !(end - off > 6 && strncasecmp(head + off, "proxy-", 6) == 0)) {
                        q = space_buf_append(out, head + off, end - off);
                        if (q >= 0)
                                q = space_buf_append(out, "\r\n", 2);
                }
                off = next;
        }
        if (q < 0)
                return q;

        l = snprintf(host, sizeof host, r->host_ipv6 ? "Host: [%s]" : "Host: %s", r->host);
        if (r->port != 80)
                l += snprintf(host + l, sizeof host - (size_t) l, ":%u", r->port);
        q = space_buf_append(out, host, (size_t) l);
        if (q >= 0)
                q = space_buf_append(out, "\r\n", 2);
        if (q >= 0 && upgrade)
                q = space_buf_append(out, "Connection: Upgrade\r\n\r\n", 23);
        else if (q >= 0)
                q = space_buf_append(out, "Connection: close\r\n\r\n", 21);
        return q;
}
