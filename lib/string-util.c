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
