/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "macro.h"
#include "manager.h"

/* Templates installed under $lib_dir/templates/NAME/: template.conf and rootfs.ext4. The content-addressed
 * store with tags comes later (issue 4); the digest is already the rootfs's sha256. */

static void template_free(Template *t) {
        if (!t)
                return;
        free(t->name);
        free(t->dir);
        free(t->rootfs);
        free(t->digest);
        free(t->description);
        strv_free(t->env);
        free(t->workdir);
        free(t);
}

void templates_free(Manager *m) {
        while (m->templates) {
                Template *t = m->templates;
                m->templates = t->next;
                template_free(t);
        }
}

Template *template_find(Manager *m, const char *name) {
        for (Template *t = m->templates; t; t = t->next)
                if (streq(t->name, name))
                        return t;
        return NULL;
}

static char *strip(char *s) {
        char *e;
        while (isspace((unsigned char) *s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char) e[-1]))
                *--e = 0;
        return s;
}

static int parse_u64(const char *v, uint64_t *ret) {
        char *end;
        unsigned long long x;

        errno = 0;
        x = strtoull(v, &end, 10);
        if (errno || end == v || *end)
                return -EINVAL;
        *ret = x;
        return 0;
}

static int template_load_one(const char *dir, const char *dirname, Template **ret) {
        _cleanup_free_ char *conf = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        Template *t;
        char line[4096];
        struct stat st;
        unsigned n = 0;
        int r;

        t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        t->vcpu = 1;
        t->memory_mib = 256;
        t->disk_mib = 1024;
        if (asprintf(&t->dir, "%s", dir) < 0 || asprintf(&t->rootfs, "%s/rootfs.ext4", dir) < 0 ||
            asprintf(&conf, "%s/template.conf", dir) < 0) {
                template_free(t);
                return -ENOMEM;
        }
        f = fopen(conf, "re");
        if (!f) {
                r = -errno;
                template_free(t);
                return r;
        }
        while (fgets(line, sizeof line, f)) {
                char *k = strip(line), *v, *eq;
                uint64_t x;

                n++;
                if (!*k || *k == '#')
                        continue;
                eq = strchr(k, '=');
                if (!eq)
                        goto bad;
                *eq = 0;
                k = strip(k);
                v = strip(eq + 1);
                if (streq(k, "name")) {
                        free(t->name);
                        t->name = strdup(v);
                } else if (streq(k, "description")) {
                        free(t->description);
                        t->description = strdup(v);
                } else if (streq(k, "vcpu")) {
                        if (parse_u64(v, &x) < 0 || x < 1 || x > 64)
                                goto bad;
                        t->vcpu = (unsigned) x;
                } else if (streq(k, "memory_mib")) {
                        if (parse_u64(v, &t->memory_mib) < 0)
                                goto bad;
                } else if (streq(k, "disk_mib")) {
                        if (parse_u64(v, &t->disk_mib) < 0)
                                goto bad;
                } else if (streq(k, "env")) {
                        if (!strchr(v, '=') || strv_extend(&t->env, v) < 0)
                                goto bad;
                } else if (streq(k, "workdir")) {
                        free(t->workdir);
                        t->workdir = strdup(v);
                }
                /* other keys (user, ...) belong to later issues: ignored */
        }
        if (!t->name)
                t->name = strdup(dirname);
        if (!t->name) {
                template_free(t);
                return -ENOMEM;
        }
        if (stat(t->rootfs, &st) < 0) {
                r = -errno;
                log_warning("template %s: %s: %s, skipping it", t->name, t->rootfs, strerror(errno));
                template_free(t);
                return r;
        }
        t->size_bytes = (uint64_t) st.st_size;
        r = file_digest(t->rootfs, &t->digest);
        if (r < 0) {
                log_warning_errno(r, "template %s: cannot compute the digest of %s, skipping it", t->name, t->rootfs);
                template_free(t);
                return r;
        }
        *ret = t;
        return 0;
bad:
        log_warning("template %s: %s line %u is not valid, skipping the template", dirname, conf, n);
        template_free(t);
        return -EINVAL;
}

int templates_load(Manager *m) {
        _cleanup_free_ char *root = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;

        if (asprintf(&root, "%s/templates", m->lib_dir) < 0)
                return -ENOMEM;
        d = opendir(root);
        if (!d) {
                log_warning("no templates in %s: %s", root, strerror(errno));
                return 0;
        }
        while ((de = readdir(d))) {
                _cleanup_free_ char *dir = NULL;
                Template *t;

                if (de->d_name[0] == '.')
                        continue;
                if (asprintf(&dir, "%s/%s", root, de->d_name) < 0)
                        return -ENOMEM;
                if (template_load_one(dir, de->d_name, &t) < 0)
                        continue;
                if (template_find(m, t->name)) {
                        log_warning("template %s defined twice, keeping the first", t->name);
                        template_free(t);
                        continue;
                }
                t->next = m->templates;
                m->templates = t;
        }
        return 0;
}
