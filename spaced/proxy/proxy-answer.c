/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/proxy-answer.h"
#include "macro.h"
#include "proxy-request.h"
#include "string-util.h"

static bool name_is(const char *name, size_t n, const char *want) {
        return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

bool proxy_hop_by_hop(const char *name, size_t n) {
        static const char *const names[] = { "connection", "keep-alive", "proxy-connection", "proxy-authenticate",
                                             "proxy-authorization", "te", "trailer", "trailers",
                                             "transfer-encoding", "upgrade", "content-length" };

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (name_is(name, n, names[i]))
                        return true;
        return false;
}

/* Whether data[0..n) can still begin "HTTP/1.x SSS": garbage is refused at its first bytes, not after the
 * server has filled the head's bound. */
static bool status_prefix_ok(const char *data, size_t n) {
        static const char want[] = "HTTP/1.";

        for (size_t i = 0; i < n && i < 13; i++) {
                char c = data[i];

                if (i < 7 ? c != want[i] : (i == 8 ? c != ' ' : (i == 12 ? c != ' ' && c != '\r' && c != '\n'
                                                                          : !isdigit((unsigned char) c))))
                        return false;
        }
        return true;
}

/* The end of the head in data[0..n) (the offset after its empty line), or 0 when it is not all there. The
 * search starts at from - 2: the first from bytes were searched before, but an empty line may straddle. */
static size_t head_end(const char *data, size_t n, size_t from) {
        for (size_t i = from > 2 ? from - 2 : 0; i + 1 < n; i++)
                if (data[i] == '\n') {
                        if (data[i + 1] == '\n')
                                return i + 2;
                        if (data[i + 1] == '\r' && i + 2 < n && data[i + 2] == '\n')
                                return i + 3;
                }
        return 0;
}

typedef struct HeadFacts {
        bool chunked, have_length, close_framed, have_upgrade;
        uint64_t length;
} HeadFacts;

/* One header line, name[0..name_len) and its value v[0..vn) (blanks around it cut), into f. */
static int header_fact(HeadFacts *f, const char *name, size_t name_len, const char *v, size_t vn) {
        if (name_is(name, name_len, "content-length")) {
                uint64_t l = 0;

                if (vn == 0 || vn > 15)
                        return -EBADMSG;
                for (size_t i = 0; i < vn; i++) {
                        if (!isdigit((unsigned char) v[i]))
                                return -EBADMSG;
                        l = l * 10 + (uint64_t) (v[i] - '0');
                }
                if (f->have_length && l != f->length)
                        return -EBADMSG; /* two lengths: which one would the client believe? */
                f->have_length = true;
                f->length = l;
        } else if (name_is(name, name_len, "transfer-encoding")) {
                /* chunked must come last; any other coding ends with the connection */
                f->chunked = vn >= 7 && strncasecmp(v + vn - 7, "chunked", 7) == 0 &&
                             (vn == 7 || v[vn - 8] == ' ' || v[vn - 8] == ',' || v[vn - 8] == '\t');
                f->close_framed = !f->chunked;
        } else if (name_is(name, name_len, "upgrade"))
                f->have_upgrade = f->have_upgrade || vn > 0;
        return 0;
}

static int keep_header(char ***headers, const char *name, size_t name_len, const char *v, size_t vn) {
        _cleanup_free_ char *n = strndup(name, name_len), *value = strndup(v, vn);
        int q;

        if (!n || !value)
                return -ENOMEM;
        q = strv_extend(headers, n);
        if (q >= 0)
                q = strv_extend(headers, value);
        return q;
}

/* The header lines of a head, from line up to end (the empty line included), into f; into headers (unless
 * NULL: an interim head) those passed on. */
static int parse_headers(const char *line, const char *end, bool switching, HeadFacts *f, char ***headers) {
        unsigned count = 0;

        while (line < end) {
                const char *eol = memchr(line, '\n', (size_t) (end - line)), *colon, *v, *ve;
                size_t name_len;
                int q;

                if (!eol)
                        return -EBADMSG;
                ve = eol > line && eol[-1] == '\r' ? eol - 1 : eol;
                if (ve == line)
                        return 0; /* the empty line */
                colon = memchr(line, ':', (size_t) (ve - line));
                if (!colon || colon == line)
                        return -EBADMSG;
                name_len = (size_t) (colon - line);
                for (size_t i = 0; i < name_len; i++)
                        if (!http_tchar(line[i]))
                                return -EBADMSG; /* a folded line too: it starts with a blank */
                for (v = colon + 1; v < ve && (*v == ' ' || *v == '\t'); v++)
                        ;
                while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                        ve--;
                for (const char *c = v; c < ve; c++)
                        if (((unsigned char) *c < 0x20 && *c != '\t') || *c == 0x7f)
                                return -EBADMSG;
                if (++count > PROXY_ANSWER_HEADERS_MAX)
                        return -EBADMSG;
                q = header_fact(f, line, name_len, v, (size_t) (ve - v));
                if (q < 0)
                        return q;
                /* a switch keeps its Upgrade: the client checks it (MHD adds Connection: Upgrade itself) */
                if (headers && (!proxy_hop_by_hop(line, name_len) || (switching && name_is(line, name_len, "upgrade")))) {
                        q = keep_header(headers, line, name_len, v, (size_t) (ve - v));
                        if (q < 0)
                                return q;
                }
                line = eol + 1;
        }
        return -EBADMSG; /* head_end() found the empty line: not reached */
}

/* One whole head data[0..len): 1 a final one (into ret), 0 an interim one, -EBADMSG, -ENOMEM. */
static int parse_one(const ProxyHeadParser *p, const char *data, size_t len, ProxyHead *ret) {
        _cleanup_strv_free_ char **headers = NULL;
        HeadFacts f = {};
        unsigned status;
        bool switching, final;
        int q;

        /* HTTP/1.x SSS[ reason] */
        if (len < 13 || !status_prefix_ok(data, len))
                return -EBADMSG;
        status = (unsigned) ((data[9] - '0') * 100 + (data[10] - '0') * 10 + (data[11] - '0'));
        if (status < 100 || status > 599)
                return -EBADMSG;
        /* the one interim answer that is final: a switch the client asked for; a 101 it did not ask for would
         * switch protocols under it */
        switching = status == 101 && p->upgrade;
        if (status == 101 && !switching)
                return -EBADMSG;
        /* an interim answer (103 Early Hints, a 100 we did not ask for) is checked like any, then dropped */
        final = status >= 200 || switching;
        q = parse_headers((const char *) memchr(data, '\n', len) + 1, data + len, switching, &f,
                          final ? &headers : NULL);
        if (q < 0)
                return q;
        if (!final)
                return 0;
        if (switching && !f.have_upgrade)
                return -EBADMSG; /* a switch to what? */
        *ret = (ProxyHead) { .status = status, .headers = TAKE_PTR(headers) };
        if (p->head_only || switching || status == 204 || status == 304) {
                ret->framing = PROXY_BODY_NONE;
                ret->length = f.have_length ? f.length : 0;
        } else if (f.chunked)
                ret->framing = PROXY_BODY_CHUNKED;
        else if (f.have_length && !f.close_framed) {
                ret->framing = PROXY_BODY_LENGTH;
                ret->length = f.length;
        } else
                ret->framing = PROXY_BODY_CLOSE;
        return 1;
}

int proxy_head_parse(ProxyHeadParser *p, const char *data, size_t n, size_t *ret_used, ProxyHead *ret) {
        size_t off = 0;

        /* a loop, not a recursion: a server may send interim heads until the byte bound */
        for (;;) {
                const char *d = data + off;
                size_t avail = n - off, len;
                int q;

                *ret_used = off;
                if (!status_prefix_ok(d, avail))
                        return -EBADMSG;
                len = head_end(d, avail, p->scanned);
                if (len == 0) {
                        if (p->taken + avail >= PROXY_ANSWER_HEAD_MAX)
                                return -E2BIG;
                        p->scanned = avail;
                        return 0;
                }
                if (p->taken + len > PROXY_ANSWER_HEAD_MAX)
                        return -E2BIG;
                q = parse_one(p, d, len, ret);
                if (q < 0)
                        return q;
                p->scanned = 0;
                off += len;
                if (q > 0) {
                        *ret_used = off;
                        return 1;
                }
                p->taken += len;
        }
}

void proxy_head_done(ProxyHead *h) {
        strv_free(h->headers);
        h->headers = NULL;
}

void proxy_body_init(ProxyBody *b, const ProxyHead *h) {
        *b = (ProxyBody) { .framing = h->framing, .chunk = PROXY_CHUNK_SIZE };
        if (h->framing == PROXY_BODY_LENGTH)
                b->remaining = h->length;
}

/* A whole line at in[0..n): its length without the line end (*ret_used: with it), 0 with *ret_used 0 when it
 * is not all there yet, -EBADMSG when it is too long. */
static ssize_t take_line(const char *in, size_t n, size_t *ret_used) {
        const char *eol = memchr(in, '\n', MIN(n, (size_t) PROXY_ANSWER_LINE_MAX + 1));
        size_t len;

        *ret_used = 0;
        if (!eol)
                return n > PROXY_ANSWER_LINE_MAX ? -EBADMSG : 0;
        len = (size_t) (eol - in);
        *ret_used = len + 1;
        return (ssize_t) (len > 0 && in[len - 1] == '\r' ? len - 1 : len);
}

/* One line of a chunked body's framing (a size, a chunk's end, a trailer): -EBADMSG, or 0. */
static int chunk_line(ProxyBody *b, const char *line, size_t l, size_t used) {
        switch (b->chunk) {
        case PROXY_CHUNK_SIZE:
                /* extensions (";name=value") are skipped */
                if (http_chunk_size(line, l, HTTP_CHUNK_LENIENT, &b->remaining) < 0)
                        return -EBADMSG;
                b->chunk = b->remaining == 0 ? PROXY_CHUNK_TRAILER : PROXY_CHUNK_DATA;
                return 0;
        case PROXY_CHUNK_DATA_END:
                if (l != 0)
                        return -EBADMSG;
                b->chunk = PROXY_CHUNK_SIZE;
                return 0;
        case PROXY_CHUNK_TRAILER:
                /* trailers are dropped; the empty line ends the body */
                b->trailers += used;
                if (b->trailers > PROXY_ANSWER_TRAILERS_MAX)
                        return -EBADMSG;
                if (l == 0)
                        b->done = true;
                return 0;
        case PROXY_CHUNK_DATA:
                break;
        }
        return -EBADMSG;
}

ssize_t proxy_body_decode(ProxyBody *b, const char *in, size_t n, size_t *ret_used, char *out, size_t max) {
        size_t produced = 0, pos = 0;

        while (produced < max && !b->done) {
                size_t avail = n - pos, k, used;
                ssize_t l;

                if (b->framing == PROXY_BODY_NONE || (b->framing == PROXY_BODY_LENGTH && b->remaining == 0)) {
                        b->done = true;
                        break;
                }
                if (b->framing != PROXY_BODY_CHUNKED || b->chunk == PROXY_CHUNK_DATA) {
                        k = MIN(max - produced, avail);
                        if (b->framing != PROXY_BODY_CLOSE)
                                k = (size_t) MIN((uint64_t) k, b->remaining);
                        if (k == 0)
                                break;
                        memcpy(out + produced, in + pos, k);
                        pos += k;
                        produced += k;
                        if (b->framing != PROXY_BODY_CLOSE)
                                b->remaining -= k;
                        if (b->framing == PROXY_BODY_CHUNKED && b->remaining == 0)
                                b->chunk = PROXY_CHUNK_DATA_END;
                        continue;
                }
                l = take_line(in + pos, avail, &used);
                if (l < 0) {
                        *ret_used = pos;
                        return l;
                }
                if (used == 0)
                        break;
                if (chunk_line(b, in + pos, (size_t) l, used) < 0) {
                        *ret_used = pos;
                        return -EBADMSG;
                }
                pos += used;
        }
        *ret_used = pos;
        return (ssize_t) produced;
}
