/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "macro.h"
#include "string-util.h"

int cli_print_json(const cJSON *j) {
        _cleanup_free_ char *s = cJSON_Print(j);

        if (!s)
                return -ENOMEM;
        if (puts(s) == EOF)
                return -EIO;
        return 0;
}

static void print_value(const char *prefix, const cJSON *v) {
        const cJSON *c;

        if (cJSON_IsObject(v)) {
                cJSON_ArrayForEach(c, v) {
                        _cleanup_free_ char *key = NULL;

                        if (asprintf(&key, "%s.%s", prefix, c->string) < 0)
                                return;
                        print_value(key, c);
                }
                return;
        }

        printf("%s: ", prefix);
        if (cJSON_IsString(v)) {
                /* values may be a guest's (an error, a path): no raw control sequence reaches the terminal */
                _cleanup_free_ char *e = string_escape_control(v->valuestring);

                fputs(e ?: "?", stdout);
        } else if (cJSON_IsNull(v))
                fputs("-", stdout);
        else if (cJSON_IsTrue(v))
                fputs("true", stdout);
        else if (cJSON_IsFalse(v))
                fputs("false", stdout);
        else if (cJSON_IsNumber(v) && v->valuedouble == (double) (long long) v->valuedouble)
                printf("%lld", (long long) v->valuedouble);
        else {
                _cleanup_free_ char *s = cJSON_PrintUnformatted(v);
                fputs(s ?: "?", stdout);
        }
        fputc('\n', stdout);
}

void cli_print_fields(const cJSON *o) {
        const cJSON *c;

        cJSON_ArrayForEach(c, o)
                print_value(c->string, c);
}

char *format_argv(const cJSON *argv) {
        size_t len = 0;
        const cJSON *a;
        char *s, *p;

        cJSON_ArrayForEach(a, argv)
                if (cJSON_IsString(a))
                        len += strlen(a->valuestring) + 1;
        s = malloc(len + 1);
        if (!s)
                return NULL;
        p = s;
        cJSON_ArrayForEach(a, argv)
                if (cJSON_IsString(a)) {
                        if (p != s)
                                *p++ = ' ';
                        p = stpcpy(p, a->valuestring);
                }
        *p = 0;
        return s;
}

char *format_age(const char *rfc3339, time_t now) {
        struct tm tm = {};
        const char *rest;
        long d;
        time_t t;
        char *s;

        if (!rfc3339)
                return strdup("-");
        rest = strptime(rfc3339, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!rest)
                return strdup(rfc3339);
        t = timegm(&tm);
        /* Skip fractions, then apply a numeric offset ("Z" needs nothing). */
        if (*rest == '.')
                for (rest++; *rest >= '0' && *rest <= '9'; rest++)
                        ;
        if ((rest[0] == '+' || rest[0] == '-') && strlen(rest) >= 6) {
                int hh = atoi(rest + 1), mm = atoi(rest + 4);
                long off = hh * 3600L + mm * 60L;
                t -= rest[0] == '+' ? off : -off;
        }

        d = (long) difftime(now, t);
        if (d < 0)
                d = 0;
        if (d < 60)
                return d < 1 ? strdup("just now") : asprintf(&s, "%ld second%s ago", d, d == 1 ? "" : "s") < 0 ? NULL : s;
        if (d < 3600)
                return asprintf(&s, "%ld minute%s ago", d / 60, d / 60 == 1 ? "" : "s") < 0 ? NULL : s;
        if (d < 86400)
                return asprintf(&s, "%ld hour%s ago", d / 3600, d / 3600 == 1 ? "" : "s") < 0 ? NULL : s;
        return asprintf(&s, "%ld day%s ago", d / 86400, d / 86400 == 1 ? "" : "s") < 0 ? NULL : s;
}

void format_mib(double mib, char *buf, size_t size) {
        long long v = (long long) mib;

        if (v >= 1024 && v % 1024 == 0)
                snprintf(buf, size, "%lld GiB", v / 1024);
        else
                snprintf(buf, size, "%lld MiB", v);
}

struct Table {
        size_t n_columns, n_rows;
        char **cells;           /* n_rows * n_columns, row 0 the headers */
};

Table *table_new(size_t n_columns, const char *const *headers) {
        Table *t = calloc(1, sizeof *t);

        if (!t)
                return NULL;
        t->n_columns = n_columns;
        if (table_add(t, headers) < 0)
                return table_free(t);
        return t;
}

int table_add(Table *t, const char *const *cells) {
        char **c = reallocarray(t->cells, (t->n_rows + 1) * t->n_columns, sizeof(char *));

        if (!c)
                return -ENOMEM;
        t->cells = c;
        for (size_t i = 0; i < t->n_columns; i++) {
                /* escaped: a cell may be a guest's text, and a tab or newline would break the columns anyway */
                c[t->n_rows * t->n_columns + i] = string_escape_control(cells[i] ?: "-");
                if (!c[t->n_rows * t->n_columns + i]) {
                        for (size_t j = 0; j < i; j++)
                                free(c[t->n_rows * t->n_columns + j]);
                        return -ENOMEM;
                }
        }
        t->n_rows++;
        return 0;
}

int table_print(Table *t, FILE *f) {
        _cleanup_free_ size_t *width = calloc(t->n_columns, sizeof(size_t));

        if (!width)
                return -ENOMEM;
        for (size_t r = 0; r < t->n_rows; r++)
                for (size_t c = 0; c < t->n_columns; c++) {
                        size_t n = strlen(t->cells[r * t->n_columns + c]);
                        if (n > width[c])
                                width[c] = n;
                }
        for (size_t r = 0; r < t->n_rows; r++) {
                for (size_t c = 0; c < t->n_columns; c++) {
                        const char *cell = t->cells[r * t->n_columns + c];

                        if (c + 1 == t->n_columns)
                                fprintf(f, "%s\n", cell);
                        else
                                fprintf(f, "%-*s   ", (int) width[c], cell);
                }
        }
        return ferror(f) ? -EIO : 0;
}

Table *table_free(Table *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n_rows * t->n_columns; i++)
                free(t->cells[i]);
        free(t->cells);
        free(t);
        return NULL;
}
