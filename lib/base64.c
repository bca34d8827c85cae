/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "base64.h"
#include "proto.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void base64_encode(const uint8_t *in, size_t n, char *out) {
        size_t i = 0;

        for (; i + 3 <= n; i += 3) {
                uint32_t v = (uint32_t) in[i] << 16 | (uint32_t) in[i + 1] << 8 | in[i + 2];
                *out++ = alphabet[v >> 18];
                *out++ = alphabet[(v >> 12) & 63];
                *out++ = alphabet[(v >> 6) & 63];
                *out++ = alphabet[v & 63];
        }
        if (n - i == 1) {
                uint32_t v = (uint32_t) in[i] << 16;
                *out++ = alphabet[v >> 18];
                *out++ = alphabet[(v >> 12) & 63];
                *out++ = '=';
                *out++ = '=';
        } else if (n - i == 2) {
                uint32_t v = (uint32_t) in[i] << 16 | (uint32_t) in[i + 1] << 8;
                *out++ = alphabet[v >> 18];
                *out++ = alphabet[(v >> 12) & 63];
                *out++ = alphabet[(v >> 6) & 63];
                *out++ = '=';
        }
}

static int value_of(char c) {
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

long base64_decode(const char *in, size_t n, uint8_t *out) {
        uint32_t acc = 0;
        int bits = 0;
        long len = 0;
        size_t pad = 0;

        if (n % 4 != 0)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                int v;

                if (in[i] == '=') {
                        if (i + 2 < n) /* padding only at the very end */
                                return -EINVAL;
                        pad++;
                        continue;
                }
                if (pad)
                        return -EINVAL;
                v = value_of(in[i]);
                if (v < 0)
                        return -EINVAL;
                acc = acc << 6 | (uint32_t) v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[len++] = (uint8_t) (acc >> bits);
                }
        }
        return len;
}

int space_buf_append_base64(SpaceBuf *b, const void *p, size_t n) {
        size_t k = base64_encoded_len(n);
        uint8_t *d;

        if (n > SIZE_MAX / 2 || k > SIZE_MAX - b->len)
                return -ENOMEM;
        if (b->len + k > b->cap) {
                d = realloc(b->data, b->len + k);
                if (!d)
                        return -ENOMEM;
                b->data = d;
                b->cap = b->len + k;
        }
        base64_encode(p, n, (char *) b->data + b->len);
        b->len += k;
        return 0;
}
