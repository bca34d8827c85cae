/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "manager.h"

/* Writable disk layers (decision 5) on filesystems without reflinks: qcow2 overlays in $state/layers. A
 * sandbox's data_dir/disk.qcow2 is a symlink to its top layer; a checkpoint freezes the top layer and the
 * sandbox goes on in a new one on top of it, so checkpoint, restore and fork never copy disk data. QEMU is
 * always given the real path, because qcow2 records its backing file by the name it was opened with. A layer
 * lives as long as a sandbox or checkpoint reaches it through its backing chain (layers_gc). */

#define LAYER_CHAIN_MAX 256

static int layers_dir(const char *state_dir, char **ret) {
        return asprintf(ret, "%s/layers", state_dir) < 0 ? -ENOMEM : 0;
}

int layer_new(const char *state_dir, const char *backing, const char *backing_format, uint64_t size_mib,
              char **ret_path, char **reterr_message) {
        _cleanup_free_ char *dir = NULL, *path = NULL, *size = NULL;
        char name[17];
        int r;

        r = layers_dir(state_dir, &dir);
        if (r >= 0)
                r = space_mkdir_p(dir, 0700);
        if (r >= 0)
                r = random_hex(name, 16);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/%s.qcow2", dir, name) < 0 || asprintf(&size, "%lluM", (unsigned long long) size_mib) < 0)
                return -ENOMEM;
        {
                char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-F", (char *) backing_format, "-b",
                                 (char *) backing, path, size, NULL };
                r = run_command(argv, reterr_message);
                if (r < 0)
                        return r;
        }
        *ret_path = TAKE_PTR(path);
        return 0;
}

int sandbox_disk_set(const char *data_dir, const char *layer) {
        _cleanup_free_ char *link = NULL, *tmp = NULL;

        if (asprintf(&link, "%s/disk.qcow2", data_dir) < 0 || asprintf(&tmp, "%s/.disk.qcow2.new", data_dir) < 0)
                return -ENOMEM;
        (void) unlink(tmp);
        if (symlink(layer, tmp) < 0)
                return -errno;
        if (rename(tmp, link) < 0) {
                int r = -errno;
                (void) unlink(tmp);
                return r;
        }
        return 0;
}

int sandbox_disk_get(const char *data_dir, char **ret) {
        _cleanup_free_ char *link = NULL;
        char *real;

        if (asprintf(&link, "%s/disk.qcow2", data_dir) < 0)
                return -ENOMEM;
        real = realpath(link, NULL);
        if (!real)
                return -errno;
        *ret = real;
        return 0;
}

/* Reads the backing file name from a qcow2 header (big-endian: offset 8 u64, size at 16 u32). Our own files,
 * but still bounded: a torn or foreign file must not make us read far. */
int qcow2_backing_file(const char *path, char **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        uint8_t h[20];
        uint64_t off;
        uint32_t len;
        char *name;

        if (fd < 0)
                return -errno;
        if (pread(fd, h, sizeof h, 0) != (ssize_t) sizeof h)
                return -EIO;
        if (memcmp(h, "QFI\xfb", 4) != 0)
                return -EMEDIUMTYPE;
        memcpy(&off, h + 8, 8);
        memcpy(&len, h + 16, 4);
        off = be64toh(off);
        len = be32toh(len);
        if (off == 0 || len == 0) {
                *ret = NULL;
                return 0;
        }
        if (len >= PATH_MAX || off > 65536)
                return -EBADMSG;
        name = calloc(1, len + 1);
        if (!name)
                return -ENOMEM;
        if (pread(fd, name, len, (off_t) off) != (ssize_t) len) {
                free(name);
                return -EIO;
        }
        *ret = name;
        return 0;
}

static void mark_chain(const char *layers, const char *top, char ***live) {
        _cleanup_free_ char *cur = top ? strdup(top) : NULL;

        for (unsigned depth = 0; cur && depth < LAYER_CHAIN_MAX; depth++) {
                char *next = NULL;
                size_t n = strlen(layers);

                if (strncmp(cur, layers, n) != 0 || cur[n] != '/')
                        break; /* reached the base snapshot's disk: not ours to collect */
                (void) strv_extend(live, cur);
                if (qcow2_backing_file(cur, &next) < 0)
                        break;
                free(cur);
                cur = next;
        }
}

int layers_gc(Manager *m) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_strv_free_ char **live = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        unsigned removed = 0;

        if (layers_dir(m->state_dir, &dir) < 0)
                return -ENOMEM;
        d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        for (Sandbox *s = m->sandboxes; s; s = s->next) {
                _cleanup_free_ char *top = NULL;
                if (s->data_dir && sandbox_disk_get(s->data_dir, &top) >= 0)
                        mark_chain(dir, top, &live);
        }
        for (Checkpoint *c = m->checkpoints; c; c = c->next)
                mark_chain(dir, c->disk, &live);

        while ((de = readdir(d))) {
                _cleanup_free_ char *path = NULL;
                struct stat st;
                bool keep = false;

                if (de->d_name[0] == '.')
                        continue;
                if (asprintf(&path, "%s/%s", dir, de->d_name) < 0)
                        return -ENOMEM;
                for (char **l = live; l && *l && !keep; l++)
                        keep = streq(*l, path);
                /* a create or checkpoint may have made it a moment ago and not linked it yet */
                if (!keep && lstat(path, &st) >= 0 && st.st_mtime > time(NULL) - 60)
                        keep = true;
                if (!keep && unlink(path) >= 0)
                        removed++;
        }
        if (removed)
                log_debug("removed %u disk layer(s) nothing uses", removed);
        return (int) removed;
}
