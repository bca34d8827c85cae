/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "egress/egress-internal.h"
#include "macro.h"
#include "proxy-request.h"

/* The requests a guest sends on one plain HTTP connection, framed as RFC 9112 6.3 says a server frames them:
 * a request's body is its Content-Length or its chunks, or nothing. A request has no body that ends with the
 * connection, so request framing needs nothing of the responses (response framing would: HEAD, 1xx, 204, 304
 * and bodies that end with the connection), and a server that reads the framing the same way sees exactly
 * the heads this sees. Anything two servers could read apart (sniff.c's strict head, chunk lines that are
 * not hex and CRLF) ends the stream here instead. Everything in p comes from the guest. */

#define CHUNK_LINE_MAX 4096U            /* a chunk-size line with its extensions */
#define TRAILER_MAX (16U * 1024U)

enum {
        HS_HEAD,
        HS_LENGTH,
        HS_CHUNK_SIZE,
        HS_CHUNK_DATA,
        HS_CHUNK_END,
        HS_TRAILER,
        HS_UPGRADE,
        HS_OPAQUE,
};

static EgressHttpStep bad(const char *why, const char **ret_why) {
        *ret_why = why;
        return EGRESS_HTTP_BAD;
}

/* A line through its CRLF at p, at most max bytes: its length without the CRLF, or 0 with *ret_step MORE or
 * BAD when there is none. A CR or LF inside it is refused. */
static size_t line(const uint8_t *p, size_t n, bool eof, size_t max, EgressHttpStep *ret_step, const char **ret_why) {
        for (size_t i = 0; i < n && i < max; i++) {
                if (p[i] == '\r') {
                        if (i + 1 == n)
                                break;
                        if (p[i + 1] != '\n') {
                                *ret_step = bad("a bare CR in a chunked body's framing", ret_why);
                                return 0;
                        }
                        *ret_step = EGRESS_HTTP_BODY;
                        return i + 2;
                }
                if (p[i] == '\n') {
                        *ret_step = bad("a bare LF in a chunked body's framing", ret_why);
                        return 0;
                }
        }
        if (n >= max)
                *ret_step = bad("a chunked body's framing line over 4 KiB", ret_why);
        else
                *ret_step = eof ? bad("a chunked body cut short", ret_why) : EGRESS_HTTP_MORE;
        return 0;
}

/* A trailer field line: name ':' value, as a header's. */
static bool trailer_field(const uint8_t *p, size_t len) {
        size_t i;

        for (i = 0; i < len && http_tchar((char) p[i]); i++)
                ;
        if (i == 0 || i == len || p[i] != ':')
                return false;
        for (; i < len; i++)
                if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f)
                        return false;
        return true;
}

static EgressHttpStep step_head(EgressHttpStream *s, const uint8_t *p, size_t n, bool eof, size_t *ret_used,
                                EgressSniff *ret_head, const char **ret_why) {
        size_t from = s->scanned > 3 ? s->scanned - 3 : 0;

        if (n == 0)
                return EGRESS_HTTP_MORE;
        /* Only the bytes that came since are searched for the head's end: a head sent a byte at a time costs
         * its length, not its square. The first look also catches what is no request at all. */
        if (s->scanned > 0 && !eof && n < EGRESS_SNIFF_MAX && !memmem(p + from, n - from, "\r\n\r\n", 4)) {
                s->scanned = n;
                return EGRESS_HTTP_MORE;
        }
        egress_sniff(p, n, eof, ret_head);
        switch (ret_head->kind) {
        case EGRESS_SNIFF_MORE:
                s->scanned = n;
                return EGRESS_HTTP_MORE;
        case EGRESS_SNIFF_BAD:
                return bad(ret_head->why, ret_why);
        case EGRESS_SNIFF_TLS:
        case EGRESS_SNIFF_OTHER:
                return bad("bytes that are no HTTP request where a request must start", ret_why);
        case EGRESS_SNIFF_HTTP:
                break;
        }
        s->scanned = 0;
        s->requests++;
        *ret_used = ret_head->head_len;
        if (ret_head->chunked)
                s->state = HS_CHUNK_SIZE;
        else if (ret_head->length > 0) {
                s->state = HS_LENGTH;
                s->left = ret_head->length;
        } else if (ret_head->upgrade && s->requests == 1)
                s->state = HS_UPGRADE; /* a body would say the server read it: no upgrade then */
        return EGRESS_HTTP_HEAD;
}

static EgressHttpStep step_chunked(EgressHttpStream *s, const uint8_t *p, size_t n, bool eof, size_t *ret_used,
                                   const char **ret_why) {
        EgressHttpStep r;
        uint64_t size;
        size_t len;

        switch (s->state) {
        case HS_CHUNK_SIZE:
                len = line(p, n, eof, CHUNK_LINE_MAX, &r, ret_why);
                if (len == 0)
                        return r;
                /* chunk-size [ ";" extensions ]: hex digits, then nothing or ';' and printable text */
                if (http_chunk_size((const char *) p, len - 2, HTTP_CHUNK_STRICT, &size) < 0)
                        return bad("a chunk size that is not hex digits", ret_why);
                s->state = size > 0 ? HS_CHUNK_DATA : HS_TRAILER;
                s->left = size;
                s->trailer = 0;
                *ret_used = len;
                return EGRESS_HTTP_BODY;
        case HS_CHUNK_DATA:
                if (n == 0)
                        return eof ? bad("a chunked body cut short", ret_why) : EGRESS_HTTP_MORE;
                *ret_used = (size_t) MIN((uint64_t) n, s->left);
                s->left -= *ret_used;
                if (s->left == 0)
                        s->state = HS_CHUNK_END;
                return EGRESS_HTTP_BODY;
        case HS_CHUNK_END:
                if (n < 2 && (n == 0 || p[0] == '\r'))
                        return eof ? bad("a chunked body cut short", ret_why) : EGRESS_HTTP_MORE;
                if (p[0] != '\r' || p[1] != '\n')
                        return bad("a chunk not followed by CRLF", ret_why);
                s->state = HS_CHUNK_SIZE;
                *ret_used = 2;
                return EGRESS_HTTP_BODY;
        default: /* HS_TRAILER */
                len = line(p, n, eof, CHUNK_LINE_MAX, &r, ret_why);
                if (len == 0)
                        return r;
                if (len == 2)
                        s->state = HS_HEAD; /* the empty line: the request is over */
                else if (!trailer_field(p, len - 2))
                        return bad("a trailer line that is no header field", ret_why);
                else if ((s->trailer += len) > TRAILER_MAX)
                        return bad("a trailer section over 16 KiB", ret_why);
                *ret_used = len;
                return EGRESS_HTTP_BODY;
        }
}

EgressHttpStep egress_http_stream_step(EgressHttpStream *s, const uint8_t *p, size_t n, bool eof, size_t *ret_used,
                                       EgressSniff *ret_head, const char **ret_why) {
        *ret_used = 0;
        *ret_why = NULL;
        *ret_head = (EgressSniff) { .kind = EGRESS_SNIFF_MORE };
        switch (s->state) {
        case HS_HEAD:
                return step_head(s, p, n, eof, ret_used, ret_head, ret_why);
        case HS_LENGTH:
                if (n == 0)
                        return EGRESS_HTTP_MORE; /* cut short: the server sees the end as it is */
                *ret_used = (size_t) MIN((uint64_t) n, s->left);
                s->left -= *ret_used;
                if (s->left == 0)
                        s->state = HS_HEAD;
                return EGRESS_HTTP_BODY;
        case HS_UPGRADE:
                return EGRESS_HTTP_WAIT;
        case HS_OPAQUE:
                if (n == 0)
                        return EGRESS_HTTP_MORE;
                *ret_used = n;
                return EGRESS_HTTP_BODY;
        default:
                return step_chunked(s, p, n, eof, ret_used, ret_why);
        }
}

void egress_http_stream_switched(EgressHttpStream *s, bool switched) {
        if (s->state == HS_UPGRADE)
                s->state = switched ? HS_OPAQUE : HS_HEAD;
}

int egress_http_status(const uint8_t *p, size_t n, unsigned *ret_status) {
        static const char prefix[] = "HTTP/1.";

        /* "HTTP/1.1 101 " or "HTTP/1.1 101\r": 13 bytes decide */
        for (size_t i = 0; i < n && i < sizeof prefix - 1; i++)
                if (p[i] != (uint8_t) prefix[i])
                        return -EBADMSG;
        if (n < 13)
                return 0;
        if (!isdigit(p[7]) || p[8] != ' ' || !isdigit(p[9]) || !isdigit(p[10]) || !isdigit(p[11]) ||
            (p[12] != ' ' && p[12] != '\r'))
                return -EBADMSG;
        *ret_status = (unsigned) (p[9] - '0') * 100 + (unsigned) (p[10] - '0') * 10 + (unsigned) (p[11] - '0');
        return 1;
}

int egress_http_first_answer(EgressHttpFirstAnswer *a, const uint8_t *p, size_t n, bool *ret_switched) {
        size_t take = MIN(n, sizeof a->bytes - a->n);
        unsigned status = 0;
        int r;

        memcpy(a->bytes + a->n, p, take);
        a->n += take;
        r = egress_http_status(a->bytes, a->n, &status);
        if (r == 0)
                return 0;
        *ret_switched = r > 0 && status == 101;
        return 1;
}
