/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Standard base64 with padding, for SSE data lines. */
static inline size_t base64_encoded_len(size_t n) {
        return (n + 2) / 3 * 4;
}
/* out must hold base64_encoded_len(n) bytes; no NUL is written. */
void base64_encode(const uint8_t *in, size_t n, char *out);
/* Appends the base64 of p[0..n) to b, growing it once (SSE and Connect events carry output this way, without
 * a copy of it first). */
typedef struct SpaceBuf SpaceBuf;
int space_buf_append_base64(SpaceBuf *b, const void *p, size_t n);
/* Decodes into out (at least n * 3 / 4 bytes); returns the decoded length or -EINVAL on bad input. */
long base64_decode(const char *in, size_t n, uint8_t *out);
