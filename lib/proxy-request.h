/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The request head a program sends to the guest agent's HTTP proxy (ARCHITECTURE.md, decision 10):
 *   CONNECT host:port HTTP/1.x              a tunnel (HTTPS and anything else)
 *   METHOD http://host[:port]/path HTTP/1.x plain HTTP, forwarded in origin form
 * Pure functions over the bytes of the head, for unit tests and fuzzing. Strict on purpose: what is parsed
 * here names the destination the host's policy decides on, so anything ambiguous is refused (-EINVAL) rather
 * than guessed at: userinfo, zone ids, folded header lines, control characters, bare CR.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* RFC 9110 5.6.2's tchar, what a method and a field name are made of (ASCII only): for every HTTP parser here. */
bool http_tchar(char ch);

/* A chunk's size line in HTTP/1.1's chunked coding (RFC 9112 7.1), without its CRLF: at most
 * HTTP_CHUNK_DIGITS_MAX hex digits (no sane chunk needs more, and the size cannot overflow), then the chunk
 * extensions, which nobody here uses. The two parsers that read chunks from a guest differ only in what they
 * take after the digits: */
#define HTTP_CHUNK_DIGITS_MAX 15
typedef enum HttpChunkSyntax {
        /* a reader (the port proxy, of a server's answer): ';', a space or a tab, then anything, skipped */
        HTTP_CHUNK_LENIENT,
        /* a relay that must frame as the next hop will (the egress gateway, of a guest's request): nothing,
         * or ';' and printable text (tabs too), so that no two servers could read the line apart */
        HTTP_CHUNK_STRICT,
} HttpChunkSyntax;
/* The size of the chunk whose size line is line[0..len): 0 with *ret, -EBADMSG when it is not one. */
int http_chunk_size(const char *line, size_t len, HttpChunkSyntax syntax, uint64_t *ret);

#define PROXY_HEAD_MAX (16U * 1024U) /* bytes of a request head, through its empty line */
#define PROXY_HOST_MAX 253U          /* a host name's text; an IPv6 literal is shorter */

typedef struct ProxyRequest {
        bool connect;                /* CONNECT: a tunnel; else a plain HTTP request to forward */
        char method[32];
        char host[PROXY_HOST_MAX + 1]; /* lowercase name, IPv4 literal, or IPv6 literal without brackets */
        bool host_ipv6;
        uint16_t port;               /* CONNECT's; else the URI's, 80 when it has none */
        size_t path_off, path_len;   /* the URI's path and query in the head (no fragment); path_len is 0 for
                                      * none, which is "/" */
        size_t version_off;          /* "HTTP/1.x" in the head */
        size_t headers_off;          /* the first header line (or the empty line) */
        size_t head_len;             /* bytes of the head, through the empty line */
} ProxyRequest;

/* The length of the head at the start of buf[0..n): through the first empty line (CRLF CRLF, or LF LF, or a
 * mix). 0 when it is not all there yet. */
size_t proxy_head_length(const char *buf, size_t n);

/* Parses a whole head (head[0..n), n as proxy_head_length() said, at most PROXY_HEAD_MAX). Returns 0;
 * -EINVAL for a malformed head or a target this proxy cannot serve (origin form, a bad host or port);
 * -EPROTONOSUPPORT for an absolute URI of another scheme than http (https:// goes through CONNECT);
 * -E2BIG over PROXY_HEAD_MAX. */
int proxy_request_parse(const char *head, size_t n, ProxyRequest *ret);

/* The head to send the origin for a plain request: the request line in origin form, every header but the
 * hop-by-hop ones (Proxy-*, Connection, Keep-Alive) and Host, then Host: the URI's authority (the host the
 * policy decided on, not one the client could make differ) and "Connection: close", as the rest of the
 * connection is bridged as bytes and must not carry a second request to another host. Appends to out. */
int proxy_request_rewrite(const char *head, const ProxyRequest *r, SpaceBuf *out);
