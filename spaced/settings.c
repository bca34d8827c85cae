/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"
#include "macro.h"

void config_done(Config *c) {
        free(c->qemu_binary);
        free(c->state_dir);
        c->qemu_binary = c->state_dir = NULL;
}

int accel_setting_from_string(const char *s, AccelSetting *ret) {
        if (streq(s, "auto"))
                *ret = ACCEL_AUTO;
        else if (streq(s, "kvm"))
                *ret = ACCEL_KVM;
        else if (streq(s, "tcg"))
                *ret = ACCEL_TCG;
        else
                return -EINVAL;
        return 0;
}

uint64_t host_memory_mib(void) {
        _cleanup_fclose_ FILE *f = fopen("/proc/meminfo", "re");
        char line[256];
        uint64_t kib;

        if (!f)
                return 0;
        while (fgets(line, sizeof line, f))
                if (sscanf(line, "MemTotal: %" SCNu64 " kB", &kib) == 1)
                        return kib / 1024;
        return 0;
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

int config_load(Config *c, const char *path, char **reterr_message) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[1024];
        unsigned n = 0;

        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? 0 : -errno;

        while (fgets(line, sizeof line, f)) {
                char *key, *value, *eq;

                n++;
                key = strip(line);
                if (*key == 0 || *key == '#')
                        continue;
                eq = strchr(key, '=');
                if (!eq)
                        goto bad;
                *eq = 0;
                value = strip(eq + 1);
                key = strip(key);

                if (streq(key, "accel")) {
                        if (accel_setting_from_string(value, &c->accel) < 0)
                                goto bad;
                } else if (streq(key, "memory_limit_mib")) {
                        char *end;
                        unsigned long long v;

                        errno = 0;
                        v = strtoull(value, &end, 10);
                        if (errno || *end || end == value)
                                goto bad;
                        c->memory_limit_mib = v;
                } else if (streq(key, "state_dir")) {
                        if (value[0] != '/')
                                goto bad;
                        free(c->state_dir);
                        c->state_dir = strdup(value);
                        if (!c->state_dir)
                                return -ENOMEM;
                } else if (streq(key, "qemu")) {
                        free(c->qemu_binary);
                        c->qemu_binary = strdup(value);
                        if (!c->qemu_binary)
                                return -ENOMEM;
                } else
                        goto bad;
        }
        return 0;
bad:
        if (reterr_message && asprintf(reterr_message,
                                       "%s:%u: expected one of 'accel = auto|kvm|tcg', 'memory_limit_mib = N', "
                                       "'state_dir = /ABSOLUTE/PATH', 'qemu = PATH'", path, n) < 0)
                *reterr_message = NULL;
        return -EINVAL;
}
