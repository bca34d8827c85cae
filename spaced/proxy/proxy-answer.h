/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The answer of a server in a sandbox as the port proxy (proxy/proxy.c) reads it: its heads and its body,
 * decided from bytes alone, without I/O or logging, so that what a hostile guest sends is fuzzed
 * (tests/fuzz/fuzz-proxy-answer.c). Internal to http/. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* All heads of one answer together, interim (1xx) ones included: however many a server sends, the proxy reads
 * at most this much before the final head. One byte bound caps both the memory and the parsing, which a cap on
 * the number of interim heads alone would not. */
#define PROXY_ANSWER_HEAD_MAX (64 * 1024)
#define PROXY_ANSWER_HEADERS_MAX 128         /* header lines of one head */
#define PROXY_ANSWER_LINE_MAX 1024           /* a chunk's size line, a trailer line */
#define PROXY_ANSWER_TRAILERS_MAX (16 * 1024) /* trailers are dropped, but not read without end */

typedef enum ProxyFraming {
        PROXY_BODY_NONE,
        PROXY_BODY_LENGTH,
        PROXY_BODY_CHUNKED,
        PROXY_BODY_CLOSE,       /* until the server closes */
} ProxyFraming;

typedef struct ProxyHeadParser {
        bool upgrade;           /* the client asked to switch protocols: a 101 is final */
        bool head_only;         /* a HEAD request: no body follows whatever the head says */
        size_t taken;           /* bytes of the interim heads taken so far */
        size_t scanned;         /* of the bytes after them, how many were searched for the head's end */
} ProxyHeadParser;

typedef struct ProxyHead {
        unsigned status;
        char **headers;         /* name, value, ...: what goes back to the client, no hop-by-hop ones */
        ProxyFraming framing;
        uint64_t length;        /* PROXY_BODY_LENGTH's; with PROXY_BODY_NONE what Content-Length said, or 0 */
} ProxyHead;

/* Parses heads from data[0..n): the answer's bytes after the *ret_used of earlier calls. Interim heads are
 * checked and dropped. 1: the final head is in ret (*ret_used counts it and the interim heads before it; what
 * follows is the body); 0: more bytes are needed (*ret_used counts the interim heads, which the caller drops);
 * -EBADMSG: not an HTTP/1.x answer, or a head breaks a rule (known as soon as the status line does not start
 * as one); -E2BIG: the heads together pass PROXY_ANSWER_HEAD_MAX; -ENOMEM. */
int proxy_head_parse(ProxyHeadParser *p, const char *data, size_t n, size_t *ret_used, ProxyHead *ret);
void proxy_head_done(ProxyHead *h);
/* Whether a header line of a client's request or a server's answer concerns only one connection (never
 * passed on, either way). */
bool proxy_hop_by_hop(const char *name, size_t n);

typedef enum ProxyChunkState {
        PROXY_CHUNK_SIZE,
        PROXY_CHUNK_DATA,
        PROXY_CHUNK_DATA_END,
        PROXY_CHUNK_TRAILER,
} ProxyChunkState;

typedef struct ProxyBody {
        ProxyFraming framing;
        uint64_t remaining;     /* PROXY_BODY_LENGTH: of the body; PROXY_BODY_CHUNKED: of the chunk */
        ProxyChunkState chunk;
        size_t trailers;        /* bytes of trailer lines read */
        bool done;              /* the body is complete */
} ProxyBody;

void proxy_body_init(ProxyBody *b, const ProxyHead *h);
/* Decodes body bytes from in[0..n) into out[0..max): returns how many it produced, or -EBADMSG for a
 * malformed chunked body (a line over PROXY_ANSWER_LINE_MAX, trailers over PROXY_ANSWER_TRAILERS_MAX).
 * *ret_used: the input it took; a partial line is left. Sets b->done at the end. */
ssize_t proxy_body_decode(ProxyBody *b, const char *in, size_t n, size_t *ret_used, char *out, size_t max);
