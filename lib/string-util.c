/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "string-util.h"

int strv_extend(char ***l, const char *v) {
        size_t n = 0;
        char **nl;

        while (*l && (*l)[n])
                n++;
        nl = realloc(*l, (n + 2) * sizeof(char *));
        if (!nl)
                return -ENOMEM;
        *l = nl;
        nl[n] = strdup(v);
        nl[n + 1] = NULL;
        return nl[n] ? 0 : -ENOMEM;
}

size_t strv_length(char *const *l) {
        size_t n = 0;

        while (l && l[n])
                n++;
        return n;
}

int strv_set_kv(char ***l, const char *kv) {
        size_t klen = strcspn(kv, "=");

        for (char **i = *l; i && *i; i++)
                if (strncmp(*i, kv, klen + 1) == 0) {
                        char *s = strdup(kv);

                        if (!s)
                                return -ENOMEM;
                        free(*i);
                        *i = s;
                        return 0;
                }
        return strv_extend(l, kv);
}

char *string_strip(char *s) {
        char *e;

        while (isspace((unsigned char) *s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char) e[-1]))
                *--e = 0;
        return s;
}

bool string_is_hex(const char *s, size_t n) {
        if (!s)
                return false;
        /* the end of the string is no digit: this stops at it without reading past */
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return s[n] == 0;
}

bool memeq_const_time(const void *a, const void *b, size_t n) {
        /* volatile: the compiler may not turn the loop into one that stops at the first difference */
        const volatile uint8_t *x = a, *y = b;
        uint8_t d = 0;

        for (size_t i = 0; i < n; i++)
                d |= x[i] ^ y[i];
        return d == 0;
}

/* How many bytes at p are one control character: 0 for none, 1, or 2 for a C1 control in UTF-8. */
static size_t control_at(const unsigned char *p) {
        if (*p < 0x20 || *p == 0x7f)
                return 1;
        /* p[1] is there: p[0] is not the end of the string */
        if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
                return 2;
        return 0;
}

void string_hex_encode(const void *b, size_t n, char *ret) {
        static const char hex[] = "0123456789abcdef";
        const unsigned char *p = b;

        for (size_t i = 0; i < n; i++) {
                ret[2 * i] = hex[p[i] >> 4];
                ret[2 * i + 1] = hex[p[i] & 15];
        }
        ret[2 * n] = 0;
}

char *string_escape_control(const char *s) {
        static const char hex[] = "0123456789abcdef";
        const unsigned char *p;
        size_t n = 0, k;
        char *r, *q;

        for (p = (const unsigned char *) s; *p; p += k ?: 1) {
                k = control_at(p);
                n += k ? 4 * k : 1;
        }
        r = malloc(n + 1);
        if (!r)
                return NULL;
        q = r;
        for (p = (const unsigned char *) s; *p; p += k ?: 1) {
                k = control_at(p);
                if (k == 0)
                        *q++ = (char) *p;
                for (size_t i = 0; i < k; i++) {
                        *q++ = '\\';
                        *q++ = 'x';
                        *q++ = hex[p[i] >> 4];
                        *q++ = hex[p[i] & 15];
                }
        }
        *q = 0;
        return r;
}
