/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "macro.h"
#include "paths.h"
#include "string-util.h"
#include "core/util.h"
#include "vm/vmm.h"

/* The accelerator probe's cache (ARCHITECTURE.md, "The accelerator"). The probe boots a VM, which takes up to
 * VM_ACCEL_PROBE_TIMEOUT_MS on a host where KVM hangs; its answer depends only on the host (its fingerprint
 * under KVM: QEMU's build, the host kernel, microcode and CPUID) and on the guest kernel and initramfs, so it
 * is kept per user, not per state dir (a test suite starts dozens of daemons, each with a state dir of its
 * own), in one file per key. The file is what the user's own processes wrote, yet it is read as untrusted
 * text: anything but the exact shape below is ignored and the probe runs again.
 *
 *   space-accel-probe 1
 *   key <fingerprint> guest-kernel=<digest> initramfs=<digest>
 *   time <unix seconds of the probe>
 *   result ok|fail
 *   outcome <what the probe saw, printable ASCII>
 */

#define ACCEL_CACHE_MAGIC "space-accel-probe 1"
#define ACCEL_CACHE_MAX 4096
#define ACCEL_CACHE_OUTCOME_MAX 1024
/* A failure is kept for a day, not forever: a host too busy to boot the probe in time would otherwise stay on
 * TCG until something in its key changed. A success stands until then. */
#define ACCEL_CACHE_FAILURE_TTL_S (24 * 3600)
/* A probe time this far ahead of the clock is not one we wrote. */
#define ACCEL_CACHE_FUTURE_SLACK_S 300

void vm_accel_cache_done(VmAccelCache *c) {
        free(c->key);
        free(c->outcome);
        *c = (VmAccelCache) {};
}

static bool printable(const char *s, size_t max) {
        size_t n = 0;

        for (; s[n]; n++)
                if ((unsigned char) s[n] < 0x20 || (unsigned char) s[n] > 0x7e || n >= max)
                        return false;
        return n > 0;
}

int vm_accel_cache_key(const char *fingerprint, const char *kernel_digest, const char *initrd_digest, char **ret) {
        _cleanup_free_ char *key = NULL;

        if (!fingerprint || !kernel_digest || !initrd_digest || !ret)
                return -EINVAL;
        if (asprintf(&key, "%s guest-kernel=%s initramfs=%s", fingerprint, kernel_digest, initrd_digest) < 0)
                return -ENOMEM;
        if (!printable(key, ACCEL_CACHE_MAX / 2))
                return -EINVAL;
        *ret = TAKE_PTR(key);
        return 0;
}

int vm_accel_cache_path(const char *cache_dir, const char *key, char **ret) {
        unsigned char md[32];
        char hex[65];

        if (!cache_dir || !key || !ret)
                return -EINVAL;
        /* Named by the key's hash: daemons of two builds (two guest kernels, two QEMUs) keep one file each
         * rather than overwriting each other's at every start. */
        if (!EVP_Digest(key, strlen(key), md, NULL, EVP_sha256(), NULL))
                return -EIO;
        string_hex_encode(md, 8, hex);
        return asprintf(ret, "%s/accel-probe-%.16s", cache_dir, hex) < 0 ? -ENOMEM : 0;
}

int vm_accel_cache_format(const VmAccelCache *c, char **ret) {
        if (!c || !c->key || !c->outcome || !ret || !printable(c->key, ACCEL_CACHE_MAX / 2) ||
            !printable(c->outcome, ACCEL_CACHE_OUTCOME_MAX) || c->time <= 0)
                return -EINVAL;
        return asprintf(ret, ACCEL_CACHE_MAGIC "\nkey %s\ntime %" PRId64 "\nresult %s\noutcome %s\n", c->key, c->time,
                        c->ok ? "ok" : "fail", c->outcome) < 0 ? -ENOMEM : 0;
}

/* The next line of *p if it is "name VALUE\n": its value, NUL-terminated in place; NULL otherwise. */
static char *take_line(char **p, const char *name) {
        size_t kl = strlen(name);
        char *line = *p, *nl;

        if (strncmp(line, name, kl) != 0 || line[kl] != ' ' || !(nl = strchr(line, '\n')))
                return NULL;
        *nl = 0;
        *p = nl + 1;
        return line + kl + 1;
}

static int parse_time(const char *s, int64_t *ret) {
        int64_t t = 0;
        size_t n = strlen(s);

        if (n == 0 || n > 18 || s[0] == '0')
                return -EBADMSG;
        for (const char *c = s; *c; c++) {
                if (*c < '0' || *c > '9')
                        return -EBADMSG;
                t = t * 10 + (*c - '0');
        }
        *ret = t;
        return 0;
}

int vm_accel_cache_parse(const char *text, const char *key, int64_t now, VmAccelCache *ret) {
        _cleanup_free_ char *buf = NULL;
        char *p, *k, *t, *res, *out;
        int64_t when;

        if (!text || !key || !ret)
                return -EINVAL;
        if (strlen(text) > ACCEL_CACHE_MAX || strncmp(text, ACCEL_CACHE_MAGIC "\n", strlen(ACCEL_CACHE_MAGIC "\n")) != 0)
                return -EBADMSG;
        buf = strdup(text + strlen(ACCEL_CACHE_MAGIC "\n"));
        if (!buf)
                return -ENOMEM;
        p = buf;
        if (!(k = take_line(&p, "key")) || !(t = take_line(&p, "time")) || !(res = take_line(&p, "result")) ||
            !(out = take_line(&p, "outcome")) || *p)
                return -EBADMSG;
        if (!printable(k, ACCEL_CACHE_MAX / 2) || !printable(out, ACCEL_CACHE_OUTCOME_MAX) ||
            parse_time(t, &when) < 0 || when > now + ACCEL_CACHE_FUTURE_SLACK_S ||
            !(streq(res, "ok") || streq(res, "fail")))
                return -EBADMSG;
        /* Well formed, but about another host or guest, or a failure too old to trust. */
        if (!streq(k, key) || (streq(res, "fail") && now - when > ACCEL_CACHE_FAILURE_TTL_S))
                return -ESTALE;
        *ret = (VmAccelCache) { .key = strdup(k), .time = when, .ok = streq(res, "ok"), .outcome = strdup(out) };
        if (!ret->key || !ret->outcome) {
                vm_accel_cache_done(ret);
                return -ENOMEM;
        }
        return 0;
}

int vm_accel_cache_load(const char *path, const char *key, int64_t now, VmAccelCache *ret) {
        _cleanup_close_ int fd = -1;
        char buf[ACCEL_CACHE_MAX + 1];
        struct stat st;
        ssize_t n;

        if (!path || !key || !ret)
                return -EINVAL;
        /* Not through a symlink, not a FIFO that would block the start, and only a file of our own. */
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_size > ACCEL_CACHE_MAX)
                return -EBADMSG;
        n = read(fd, buf, sizeof buf - 1);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        if (strlen(buf) != (size_t) n)
                return -EBADMSG; /* a NUL inside */
        return vm_accel_cache_parse(buf, key, now, ret);
}

int vm_accel_cache_save(const char *path, const VmAccelCache *c) {
        _cleanup_free_ char *text = NULL, *dir = NULL;
        char *slash;
        int r;

        if (!path || !c)
                return -EINVAL;
        r = vm_accel_cache_format(c, &text);
        if (r < 0)
                return r;
        dir = strdup(path);
        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = 0;
                r = space_mkdir_p(dir, 0700);
                if (r < 0)
                        return r;
        }
        /* A new file renamed over the old: a daemon starting meanwhile reads the old or the new, never half. */
        return write_file_atomic(path, text);
}
