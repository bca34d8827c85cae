/* SPDX-License-Identifier: Apache-2.0 */
#include "utf8.h"

size_t utf8_char_len(const uint8_t *p, size_t n) {
        size_t len;
        uint32_t c;

        if (n == 0)
                return 0;
        if (p[0] > 0 && p[0] < 0x80)
                return 1;
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                len = 2, c = p[0] & 0x1f;
        else if ((p[0] & 0xf0) == 0xe0)
                len = 3, c = p[0] & 0x0f;
        else if (p[0] >= 0xf0 && p[0] <= 0xf4)
                len = 4, c = p[0] & 0x07;
        else
                return 0;
        if (n < len)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                c = c << 6 | (p[i] & 0x3f);
        }
        if (len == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff)))
                return 0;
        if (len == 4 && (c < 0x10000 || c > 0x10ffff))
                return 0;
        return len;
}

bool utf8_valid(const void *p, size_t n) {
        const uint8_t *s = p;

        for (size_t i = 0, k; i < n; i += k) {
                k = utf8_char_len(s + i, n - i);
                if (k == 0)
                        return false;
        }
        return true;
}

size_t utf8_incomplete_tail(const uint8_t *p, size_t n) {
        for (size_t k = 1; k <= 3 && k <= n; k++) {
                uint8_t b = p[n - k];
                size_t need;

                if ((b & 0xc0) == 0x80)
                        continue;
                if (b < 0xc2 || b > 0xf4)
                        return 0; /* no lead byte: nothing to wait for */
                need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
                return need > k ? k : 0;
        }
        return 0;
}
