/* SPDX-License-Identifier: Apache-2.0 */

/*
 * An entry as the host reads it (lib/proto.h, "entry"): one function that every answer describing a file uses,
 * the FILE ops (files.c) and the events of a watch, so that they all say the same of a file: its stat, its
 * user.e2b.* metadata (E2B's envd keeps a file's metadata there) and, for a symlink, where it leads.
 *
 * What it reads runs with the identity the agent has at the time: a request's user (files.c enters it), so a
 * link is resolved, and its target looked at, with that user's rights, as envd does it as the user it runs as.
 * The metadata is bounded as envd bounds what it stores (SPACE_FILE_META_*); what a guest process set beyond
 * that (more of it, longer keys, longer values, bytes that are not UTF-8) is left out, never sent.
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "../../lib/utf8.h"
#include "agent.h"

static const char *type_of(mode_t m) {
        return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

/* meta_key=/meta_value= pairs for the user.e2b.* attributes of path (following a symlink, as envd's
 * xattr.List does), within SPACE_FILE_META_BYTES_MAX in all, in the order the file system lists them. */
static int meta_add(SpaceBuf *b, const char *path) {
        static char names[64 * 1024]; /* XATTR_LIST_MAX: the most a listxattr() can return */
        static char value[SPACE_FILE_META_BYTES_MAX + 1];
        const size_t plen = strlen(SPACE_FILE_META_PREFIX);
        size_t total = 0;
        ssize_t n;
        int r = 0;

        /* the size first: most files have no attributes, and a listxattr() into a buffer makes the kernel
         * allocate one that large for every call */
        n = listxattr(path, NULL, 0);
        if (n > 0)
                n = listxattr(path, names, (size_t) n < sizeof names ? (size_t) n : sizeof names);
        if (n < 0 && errno == ERANGE) /* it grew in between */
                n = listxattr(path, names, sizeof names);
        if (n <= 0)
                return 0; /* none, or a file system without them (/proc): no metadata, as envd says */
        for (const char *name = names; name < names + n && r >= 0; name += strlen(name) + 1) {
                const char *key = name + plen;
                size_t klen;
                ssize_t vlen;

                if (strncmp(name, SPACE_FILE_META_PREFIX, plen) != 0)
                        continue; /* other attributes never leave the guest */
                klen = strlen(key);
                if (klen == 0 || klen > SPACE_FILE_META_KEY_MAX || !utf8_valid(key, klen))
                        continue;
                vlen = getxattr(path, name, value, sizeof value - 1);
                if (vlen < 0 || memchr(value, 0, (size_t) vlen) || !utf8_valid(value, (size_t) vlen))
                        continue; /* gone, too long (ERANGE), or not a string envd could send */
                if (total + plen + klen + (size_t) vlen > SPACE_FILE_META_BYTES_MAX)
                        continue; /* past the budget: left out */
                total += plen + klen + (size_t) vlen;
                value[vlen] = 0;
                r = space_kv_add(b, "meta_key", key);
                if (r >= 0)
                        r = space_kv_add(b, "meta_value", value);
        }
        return r;
}

/* resolved= (realpath, "" when it fails: dangling, a loop, no right to look), and target_type= and
 * target_mode= of what the link leads to, when that can be seen. */
static int link_add(SpaceBuf *b, const char *path) {
        _cleanup_free_ char *resolved = NULL;
        struct stat st;
        int r;

        /* into a volume mount, which the agent serves itself (agent.h): not followed, as if dangling */
        if (volume_link_leads_in(path))
                return space_kv_add(b, "resolved", "");
        resolved = realpath(path, NULL);

        r = space_kv_add(b, "resolved", resolved && strlen(resolved) <= SPACE_FILE_PATH_MAX ? resolved : "");
        if (r >= 0 && stat(path, &st) >= 0) {
                r = space_kv_add(b, "target_type", type_of(st.st_mode));
                if (r >= 0)
                        r = space_kv_addf(b, "target_mode", "%u", (unsigned) (st.st_mode & 07777));
        }
        return r;
}

int entry_add(SpaceBuf *b, const char *rel, const char *path, const struct stat *st) {
        int r = 0;

        if (rel)
                r = space_kv_add(b, "rel", rel);
        if (r >= 0)
                r = space_kv_add(b, "type", type_of(st->st_mode));
        if (r >= 0)
                r = space_kv_addf(b, "mode", "%u", (unsigned) (st->st_mode & 07777));
        if (r >= 0)
                r = space_kv_addf(b, "size", "%" PRIu64, (uint64_t) st->st_size);
        if (r >= 0)
                r = space_kv_addf(b, "mtime", "%" PRId64, (int64_t) st->st_mtim.tv_sec);
        if (r >= 0)
                r = space_kv_addf(b, "mtime_nsec", "%ld", (long) st->st_mtim.tv_nsec);
        if (r >= 0)
                r = space_kv_addf(b, "uid", "%u", (unsigned) st->st_uid);
        if (r >= 0)
                r = space_kv_addf(b, "gid", "%u", (unsigned) st->st_gid);
        if (r >= 0 && S_ISLNK(st->st_mode)) {
                char target[SPACE_FILE_PATH_MAX + 1];
                ssize_t l = readlink(path, target, sizeof target - 1);

                if (l >= 0) {
                        target[l] = 0;
                        r = space_kv_add(b, "target", target);
                }
                if (r >= 0)
                        r = link_add(b, path);
        }
        /* a volume's mount point, or a link into one: its attributes are the mount's, which the agent serves
         * itself and must not ask (agent.h) */
        if (r >= 0 && !volume_dev_mounted(st->st_dev) && !(S_ISLNK(st->st_mode) && volume_link_leads_in(path)))
                r = meta_add(b, path);
        return r;
}
