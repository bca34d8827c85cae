/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
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
