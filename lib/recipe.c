/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "string-util.h"
#include "recipe.h"
#include "user.h"

/* The same limits as `spacectl create`'s options, so a recipe never sets a default create would refuse. */
#define VCPU_MAX 64
#define MEMORY_MIB_MIN 64
#define MEMORY_MIB_MAX 65536
#define DISK_MIB_MIN 64
#define DISK_MIB_MAX 1048576
#define NAME_MAX_LEN 128
#define USER_MAX_LEN 32

typedef struct Parser {
        Recipe *r;
        unsigned line;
        char *error;
        /* Where single-valued keys were first given (0: not yet), and lines the checks after parsing name. */
        unsigned seen[16];
        unsigned from_line, build_line, packages_line;
} Parser;

static const char *const single_keys[] = {
        "name", "from", "build", "description", "user", "workdir", "entrypoint", "start", "ready", "vcpu", "memory_mib", "disk_mib",
};

__attribute__((format(printf, 4, 5))) static int parser_fail(Parser *p, unsigned line, const char *key,
                                                              const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -ENOMEM;
        free(p->error);
        p->error = NULL;
        if (line > 0)
                n = asprintf(&p->error, "%s:%u: %s%s%s", p->r->conf, line, key ?: "", key ? ": " : "", msg);
        else
                n = asprintf(&p->error, "%s: %s%s%s", p->r->conf, key ?: "", key ? ": " : "", msg);
        return n < 0 ? -ENOMEM : -EINVAL;
}

/* Splits s in place on blanks (and commas when with_commas) into words; returns how many. */
static size_t split_words(char *s, bool with_commas, char **words, size_t max) {
        const char *seps = with_commas ? " \t," : " \t";
        char *save = NULL;
        size_t n = 0;

        for (char *w = strtok_r(s, seps, &save); w; w = strtok_r(NULL, seps, &save)) {
                if (n < max)
                        words[n] = w;
                n++;
        }
        return n;
}

static bool chars_ok(const char *s, const char *extra, bool allow_upper) {
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;
                if (!(islower(c) || isdigit(c) || (allow_upper && isupper(c)) || strchr(extra, c)))
                        return false;
        }
        return true;
}

bool recipe_name_is_valid(const char *name) {
        const char *c = name;

        if (!name || !*name || strlen(name) > NAME_MAX_LEN)
                return false;
        /* components of [a-z0-9][a-z0-9._-]* joined by single slashes */
        for (;;) {
                size_t n = strcspn(c, "/");
                if (n == 0 || !(islower((unsigned char) *c) || isdigit((unsigned char) *c)))
                        return false;
                for (size_t i = 0; i < n; i++) {
                        unsigned char ch = (unsigned char) c[i];
                        if (!(islower(ch) || isdigit(ch) || ch == '.' || ch == '_' || ch == '-'))
                                return false;
                }
                if (!c[n])
                        return true;
                c += n + 1;
        }
}

bool recipe_package_is_valid(const char *p) {
        _cleanup_free_ char *copy = strdup(p ?: "");
        char *version, *arch;

        if (!copy || !*copy)
                return false;
        version = strchr(copy, '=');
        if (version) {
                *version++ = 0;
                /* Debian policy 5.6.12: [epoch:]upstream[-revision], starting with a digit */
                if (!isdigit((unsigned char) *version) || !chars_ok(version, ".+~:-", true))
                        return false;
        }
        arch = strchr(copy, ':');
        if (arch) {
                *arch++ = 0;
                if (!*arch || !chars_ok(arch, "-", false))
                        return false;
        }
        /* Debian policy 5.6.1: at least two characters, [a-z0-9][a-z0-9+.-]+ */
        return strlen(copy) >= 2 && (islower((unsigned char) copy[0]) || isdigit((unsigned char) copy[0])) &&
               chars_ok(copy, "+.-", false);
}

static bool env_is_valid(const char *kv) {
        const char *eq = strchr(kv, '=');

        if (!eq || eq == kv || !(isalpha((unsigned char) kv[0]) || kv[0] == '_'))
                return false;
        for (const char *c = kv; c < eq; c++)
                if (!(isalnum((unsigned char) *c) || *c == '_'))
                        return false;
        return true;
}

static bool user_name_is_valid(const char *u) {
        if (!*u || strlen(u) > USER_MAX_LEN)
                return false;
        if (strspn(u, "0123456789") == strlen(u))
                return true;
        /* Debian's adduser NAME_REGEX, loosely: a letter or '_' first, then letters, digits, '_', '-' */
        return (islower((unsigned char) u[0]) || u[0] == '_') && chars_ok(u, "_-", false);
}

/* USER[:GROUP], as exec -u takes it (lib/user.h), each part a name or a number */
static bool user_is_valid(const char *u) {
        char buf[2 * USER_MAX_LEN + 2];
        char *colon;

        if (strlen(u) >= sizeof buf)
                return false;
        strcpy(buf, u);
        colon = strchr(buf, ':');
        if (colon)
                *colon++ = 0;
        return user_name_is_valid(buf) && (!colon || user_name_is_valid(colon)) &&
               space_user_spec_parse(u, NULL) >= 0;
}

/* No ".." component: the path stays inside the recipe directory (whose copy is what a build sees). */
static bool path_stays_inside(const char *p) {
        for (const char *c = p; (c = strstr(c, "..")); c += 2)
                if ((c == p || c[-1] == '/') && (c[2] == 0 || c[2] == '/'))
                        return false;
        return true;
}

static bool path_is_absolute(const char *p) {
        return p[0] == '/' && !strchr(p, '\n');
}

static int parse_number(Parser *p, const char *key, const char *v, uint64_t min, uint64_t max, uint64_t *ret) {
        unsigned long long x;
        char *end;

        errno = 0;
        x = strtoull(v, &end, 10);
        if (!isdigit((unsigned char) *v) || errno || *end || x < min || x > max)
                return parser_fail(p, p->line, key, "'%s' is not a number from %llu to %llu", v,
                                   (unsigned long long) min, (unsigned long long) max);
        *ret = x;
        return 0;
}

static int set_string(Parser *p, char **field, const char *v) {
        char *s = strdup(v);

        if (!s)
                return -ENOMEM;
        free(*field);
        *field = s;
        return 0;
}

/* "SRC DEST [MODE]": SRC relative to the recipe, a regular file; DEST absolute in the tree. */
static int parse_file(Parser *p, const char *key, char *v) {
        Recipe *r = p->r;
        _cleanup_free_ char *src = NULL, *dest = NULL;
        char *w[4];
        struct stat st;
        size_t n = split_words(v, false, w, ELEMENTSOF(w));
        mode_t mode;
        RecipeFile *nf;

        if (n < 2 || n > 3)
                return parser_fail(p, p->line, key, "expected 'SRC DEST [MODE]' (no blanks in paths), got %zu word%s",
                                   n, n == 1 ? "" : "s");
        if (w[0][0] == '/' || !path_stays_inside(w[0]))
                return parser_fail(p, p->line, key, "the source '%s' must be a path inside the recipe directory",
                                   w[0]);
        if (!path_is_absolute(w[1]) || w[1][strlen(w[1]) - 1] == '/')
                return parser_fail(p, p->line, key, "the destination '%s' must be an absolute file path in the tree",
                                   w[1]);
        if (asprintf(&src, "%s/%s", r->dir, w[0]) < 0 || !(dest = strdup(w[1])))
                return -ENOMEM;
        if (stat(src, &st) < 0)
                return parser_fail(p, p->line, key, "%s: %s", w[0], strerror(errno));
        if (!S_ISREG(st.st_mode))
                return parser_fail(p, p->line, key, "%s is not a regular file", w[0]);
        if (access(src, R_OK) < 0)
                return parser_fail(p, p->line, key, "%s: %s", w[0], strerror(errno));
        mode = st.st_mode & 07777;
        if (n == 3) {
                char *end;
                unsigned long m;

                errno = 0;
                m = strtoul(w[2], &end, 8);
                if (errno || *end || !isdigit((unsigned char) w[2][0]) || strspn(w[2], "01234567") != strlen(w[2]) ||
                    m > 07777)
                        return parser_fail(p, p->line, key, "the mode '%s' is not an octal mode such as 0644", w[2]);
                mode = (mode_t) m;
        }
        nf = realloc(r->files, (r->n_files + 1) * sizeof *nf);
        if (!nf)
                return -ENOMEM;
        r->files = nf;
        r->files[r->n_files++] = (RecipeFile) { .src = TAKE_PTR(src), .dest = TAKE_PTR(dest), .mode = mode };
        return 0;
}

/* Docker's rule for the part after ':' */
static bool tag_part_is_valid(const char *t) {
        size_t n = strlen(t);

        if (n == 0 || n > NAME_MAX_LEN || !(isalnum((unsigned char) t[0]) || t[0] == '_'))
                return false;
        for (; *t; t++)
                if (!(isalnum((unsigned char) *t) || strchr("_.-", *t)))
                        return false;
        return true;
}

static bool digest_ref_is_valid(const char *ref) {
        const char *hex = ref + 7;
        size_t n = strlen(hex);

        return strncmp(ref, "sha256:", 7) == 0 && n >= 12 && n <= 64 && strspn(hex, "0123456789abcdef") == n;
}

bool recipe_parent_is_valid(const char *ref) {
        _cleanup_free_ char *name = NULL;
        const char *colon;

        if (!ref)
                return false;
        if (strncmp(ref, "sha256:", 7) == 0)
                return digest_ref_is_valid(ref);
        colon = strrchr(ref, ':');
        name = colon ? strndup(ref, (size_t) (colon - ref)) : strdup(ref);
        return name && recipe_name_is_valid(name) && (!colon || tag_part_is_valid(colon + 1));
}

static int parse_from(Parser *p, const char *key, const char *v) {
        Recipe *r = p->r;
        const char *suite;

        p->from_line = p->line;
        if (streq(v, "scratch")) {
                r->from = RECIPE_FROM_SCRATCH;
                return 0;
        }
        if (streq(v, "debian"))
                return parser_fail(p, p->line, key, "say which Debian suite, e.g. from = debian:bookworm");
        if (strncmp(v, "debian:", 7) != 0) {
                /* a template the daemon has; whether it exists is the build's to find out */
                if (strncmp(v, "sha256:", 7) == 0 && !digest_ref_is_valid(v))
                        return parser_fail(p, p->line, key,
                                           "'%s' is not a template digest (sha256: and 12 to 64 lower-case hex "
                                           "digits)", v);
                if (!recipe_parent_is_valid(v))
                        return parser_fail(p, p->line, key,
                                           "'%s' is not supported: use debian:SUITE (e.g. debian:bookworm), scratch, "
                                           "or a template as NAME[:TAG] or sha256:DIGEST (e.g. seed)", v);
                r->from = RECIPE_FROM_TEMPLATE;
                return set_string(p, &r->parent, v);
        }
        suite = v + 7;
        if (!*suite || !(islower((unsigned char) *suite) || isdigit((unsigned char) *suite)) ||
            !chars_ok(suite, ".-", false) || strlen(suite) > 64)
                return parser_fail(p, p->line, key, "'%s' is not a Debian suite name such as bookworm", suite);
        r->from = RECIPE_FROM_DEBIAN;
        return set_string(p, &r->suite, suite);
}

static int parse_line(Parser *p, char *k, char *v) {
        Recipe *r = p->r;

        for (size_t i = 0; i < ELEMENTSOF(single_keys); i++)
                if (streq(k, single_keys[i])) {
                        if (p->seen[i])
                                return parser_fail(p, p->line, k, "given twice (first on line %u)", p->seen[i]);
                        p->seen[i] = p->line;
                }
        if (!*v)
                return parser_fail(p, p->line, k, "has no value");

        if (streq(k, "name")) {
                if (!recipe_name_is_valid(v))
                        return parser_fail(p, p->line, k,
                                           "'%s' is not a valid template name (lower-case letters, digits, '.', '_', "
                                           "'-', namespaces joined by '/')", v);
                return set_string(p, &r->name, v);
        }
        if (streq(k, "from"))
                return parse_from(p, k, v);
        if (streq(k, "build")) {
                p->build_line = p->line;
                if (v[0] == '/' || !path_stays_inside(v))
                        return parser_fail(p, p->line, k, "the script '%s' must be a path inside the recipe directory",
                                           v);
                free(r->build);
                r->build = NULL;
                return asprintf(&r->build, "%s/%s", r->dir, v) < 0 ? -ENOMEM : 0;
        }
        if (streq(k, "packages")) {
                char *w[256];
                size_t n = split_words(v, true, w, ELEMENTSOF(w));

                if (!p->packages_line)
                        p->packages_line = p->line;
                if (n > ELEMENTSOF(w))
                        return parser_fail(p, p->line, k, "more than %zu packages on one line", ELEMENTSOF(w));
                for (size_t i = 0; i < n; i++) {
                        if (!recipe_package_is_valid(w[i]))
                                return parser_fail(p, p->line, k,
                                                   "'%s' is not a Debian package name (NAME[:ARCH][=VERSION], "
                                                   "lower-case letters, digits, '+', '-', '.')", w[i]);
                        if (strv_extend(&r->packages, w[i]) < 0)
                                return -ENOMEM;
                }
                return 0;
        }
        if (streq(k, "file"))
                return parse_file(p, k, v);
        if (streq(k, "run"))
                return strv_extend(&r->run, v);
        if (streq(k, "description"))
                return set_string(p, &r->description, v);
        if (streq(k, "env")) {
                if (!env_is_valid(v))
                        return parser_fail(p, p->line, k, "'%s' is not NAME=VALUE", v);
                return strv_extend(&r->env, v);
        }
        if (streq(k, "user")) {
                if (!user_is_valid(v))
                        return parser_fail(p, p->line, k, "'%s' is not a user name or uid (optionally :GROUP)", v);
                return set_string(p, &r->user, v);
        }
        if (streq(k, "workdir")) {
                if (!path_is_absolute(v))
                        return parser_fail(p, p->line, k, "'%s' is not an absolute path", v);
                return set_string(p, &r->workdir, v);
        }
        if (streq(k, "entrypoint")) {
                char *w[64];
                size_t n = split_words(v, false, w, ELEMENTSOF(w));

                if (n > ELEMENTSOF(w))
                        return parser_fail(p, p->line, k, "more than %zu words", ELEMENTSOF(w));
                for (size_t i = 0; i < n; i++)
                        if (strv_extend(&r->entrypoint, w[i]) < 0)
                                return -ENOMEM;
                return 0;
        }
        if (streq(k, "start"))
                return set_string(p, &r->start, v);
        if (streq(k, "ready"))
                return set_string(p, &r->ready, v);
        if (streq(k, "vcpu"))
                return parse_number(p, k, v, 1, VCPU_MAX, &r->vcpu);
        if (streq(k, "memory_mib"))
                return parse_number(p, k, v, MEMORY_MIB_MIN, MEMORY_MIB_MAX, &r->memory_mib);
        if (streq(k, "disk_mib"))
                return parse_number(p, k, v, DISK_MIB_MIN, DISK_MIB_MAX, &r->disk_mib);

        return parser_fail(p, p->line, NULL,
                           "unknown key '%s' (see space-template(5): name, from, packages, build, file, run, "
                           "description, env, user, workdir, entrypoint, start, ready, vcpu, memory_mib, disk_mib)", k);
}

/* What only the whole file can tell: from and build agree, the build script is there. */
static int check_recipe(Parser *p) {
        Recipe *r = p->r;
        struct stat st;

        if (!p->from_line)
                return parser_fail(p, 0, NULL,
                                   "no 'from': say from = debian:SUITE (e.g. debian:bookworm), from = TEMPLATE "
                                   "(e.g. seed) or from = scratch with build = SCRIPT");
        if (r->from == RECIPE_FROM_SCRATCH) {
                if (p->packages_line)
                        return parser_fail(p, p->packages_line, "packages",
                                           "only with from = debian:SUITE or from = TEMPLATE (a scratch tree has "
                                           "no package manager)");
                if (!r->build)
                        return parser_fail(p, p->from_line, "from",
                                           "from = scratch needs build = SCRIPT, run as 'SCRIPT ROOTDIR' to fill "
                                           "the tree");
        } else if (r->build)
                return parser_fail(p, p->build_line, "build",
                                   "only with from = scratch (with from = debian:SUITE or TEMPLATE use packages, "
                                   "file and run)");

        if (r->build) {
                const char *shown = r->build + strlen(r->dir) + 1; /* as the recipe wrote it */

                if (stat(r->build, &st) < 0)
                        return parser_fail(p, p->build_line, "build", "%s: %s", shown, strerror(errno));
                if (!S_ISREG(st.st_mode))
                        return parser_fail(p, p->build_line, "build", "%s is not a regular file", shown);
                if (access(r->build, X_OK) < 0)
                        return parser_fail(p, p->build_line, "build", "%s is not executable (chmod +x it)", shown);
        }
        if (!r->name) {
                const char *base = strrchr(r->dir, '/');

                base = base && base[1] ? base + 1 : r->dir;
                if (!recipe_name_is_valid(base))
                        return parser_fail(p, 0, NULL,
                                           "the directory name '%s' is not a valid template name: add name = NAME",
                                           base);
                return set_string(p, &r->name, base);
        }
        return 0;
}

Recipe *recipe_free(Recipe *r) {
        if (!r)
                return NULL;
        free(r->dir);
        free(r->conf);
        free(r->name);
        free(r->suite);
        free(r->parent);
        free(r->build);
        strv_free(r->packages);
        for (size_t i = 0; i < r->n_files; i++) {
                free(r->files[i].src);
                free(r->files[i].dest);
        }
        free(r->files);
        strv_free(r->run);
        free(r->description);
        strv_free(r->env);
        free(r->user);
        free(r->workdir);
        free(r->start);
        free(r->ready);
        strv_free(r->entrypoint);
        free(r);
        return NULL;
}

int recipe_load(const char *dir, Recipe **ret, char **ret_error) {
        _cleanup_recipe_ Recipe *r = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *shown = NULL, *buf = NULL;
        Parser p = {};
        size_t len;
        int r_;

        *ret_error = NULL;
        r = calloc(1, sizeof *r);
        buf = malloc(RECIPE_LINE_MAX + 2);
        shown = strdup(dir);
        if (!r || !buf || !shown)
                return -ENOMEM;
        /* "templates/seed/" and "templates/seed" name the same file in messages */
        len = strlen(shown);
        while (len > 1 && shown[len - 1] == '/')
                shown[--len] = 0;
        if (asprintf(&r->conf, "%s/template.conf", shown) < 0)
                return -ENOMEM;

        r->dir = realpath(dir, NULL);
        if (!r->dir) {
                r_ = -errno;
                if (asprintf(ret_error, "%s: %s", shown, strerror(errno)) < 0)
                        *ret_error = NULL;
                return r_;
        }
        f = fopen(r->conf, "re");
        if (!f) {
                r_ = -errno;
                if (asprintf(ret_error, "%s: %s%s", r->conf, strerror(errno),
                             r_ == -ENOENT ? " (a recipe is a directory with a template.conf)" : "") < 0)
                        *ret_error = NULL;
                return r_;
        }

        p.r = r;
        while (fgets(buf, RECIPE_LINE_MAX + 2, f)) {
                char *k, *v, *eq;

                p.line++;
                len = strlen(buf);
                if (len == RECIPE_LINE_MAX + 1 && buf[len - 1] != '\n') {
                        r_ = parser_fail(&p, p.line, NULL, "longer than %u bytes", RECIPE_LINE_MAX);
                        goto fail;
                }
                k = string_strip(buf);
                if (!*k || *k == '#')
                        continue;
                eq = strchr(k, '=');
                if (!eq) {
                        r_ = parser_fail(&p, p.line, NULL, "expected 'KEY = VALUE', got '%.60s'", k);
                        goto fail;
                }
                *eq = 0;
                k = string_strip(k);
                v = string_strip(eq + 1);
                if (!*k) {
                        r_ = parser_fail(&p, p.line, NULL, "no key before '='");
                        goto fail;
                }
                r_ = parse_line(&p, k, v);
                if (r_ < 0)
                        goto fail;
        }
        if (ferror(f)) {
                r_ = parser_fail(&p, 0, NULL, "read error: %s", strerror(errno));
                goto fail;
        }
        r_ = check_recipe(&p);
        if (r_ < 0)
                goto fail;
        *ret = TAKE_PTR(r);
        return 0;
fail:
        *ret_error = p.error; /* NULL after -ENOMEM */
        return r_;
}
