/* SPDX-License-Identifier: Apache-2.0 */

/*
 * INIT's mount_volume=ID, mount_path=PATH (lib/proto.h, "Volume mounts"): /dev/fuse opened, PATH made with its
 * parents (root's, 0755) and the volume mounted there. The agent serves the mount itself, so it must never
 * touch a path inside one of its mounts: it would wait for its own answer for ever. PATH is therefore walked
 * one component at a time, never through a symlink (the workload may have planted one pointing into a mount),
 * each directory checked, by a stat that does not ask the file system (AT_STATX_DONT_SYNC), not to be on one of
 * our mounts; and the mount goes on the directory that was checked (/proc/self/fd/N), not on a path looked up
 * again.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "volume.h"

#define MOUNT_OPTIONS "rootmode=40000,user_id=0,group_id=0,default_permissions,allow_other,max_read=32768"
_Static_assert(SPACE_VOLUME_IO_MAX == 32768, "max_read in MOUNT_OPTIONS");

static bool id_ok(const char *id) {
        size_t l = strlen(id);

        if (l == 0 || l > VOLUME_ID_MAX)
                return false;
        for (const char *p = id; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      *p == '-' || *p == '_' || *p == '.'))
                        return false;
        return true;
}

/* path as "/a/b": absolute, '/' repeated or trailing dropped; no "." or "..", not "/" itself. */
static int path_normalize(const char *path, char **ret) {
        _cleanup_free_ char *out = NULL;
        size_t o = 0, l = strlen(path);

        if (path[0] != '/' || l >= SPACE_FILE_PATH_MAX)
                return -EINVAL;
        out = malloc(l + 1);
        if (!out)
                return -ENOMEM;
        for (const char *p = path; *p;) {
                size_t c;

                while (*p == '/')
                        p++;
                c = strcspn(p, "/");
                if (c == 0)
                        break;
                if ((c == 1 && p[0] == '.') || (c == 2 && p[0] == '.' && p[1] == '.') || c > SPACE_FILE_NAME_MAX)
                        return -EINVAL;
                out[o++] = '/';
                memcpy(out + o, p, c);
                o += c;
                p += c;
        }
        if (o == 0)
                return -EINVAL;
        out[o] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}

/* Whether fd is a directory on one of our mounts (asked of the kernel's cache only: no FUSE request). */
static bool on_our_mount(int fd) {
        struct statx stx;

        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &stx) < 0)
                return true; /* cannot tell: not safe to go on */
        for (size_t i = 0; i < SPACE_VOLUME_MOUNTS_MAX; i++)
                if (volume_mounts[i] && volume_mounts[i]->dev == makedev(stx.stx_dev_major, stx.stx_dev_minor))
                        return true;
        return false;
}

/* mkdir -p of a normalized path, as described above: the directory's O_PATH fd, and its parent's. */
static int open_dir_p(const char *path, int *ret_parent, const char **ret_why) {
        _cleanup_close_ int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), parent = -1;
        char name[SPACE_FILE_NAME_MAX + 1];

        if (fd < 0)
                return -errno;
        for (const char *p = path + 1; *p;) {
                size_t c = strcspn(p, "/");
                int nfd;

                memcpy(name, p, c);
                name[c] = '\0';
                p += c + (p[c] == '/');
                if (on_our_mount(fd)) {
                        *ret_why = "it is inside a volume mount";
                        return -EBUSY;
                }
                nfd = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (nfd < 0 && errno == ENOENT) {
                        if (mkdirat(fd, name, 0755) < 0 && errno != EEXIST) {
                                *ret_why = "mkdir";
                                return -errno;
                        }
                        nfd = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                }
                if (nfd < 0) {
                        *ret_why = errno == ENOTDIR ? "a symlink or a file on the way" : "open";
                        return -errno;
                }
                safe_close(parent);
                parent = fd;
                fd = nfd;
        }
        if (on_our_mount(fd)) {
                *ret_why = "it is inside a volume mount";
                return -EBUSY;
        }
        *ret_parent = TAKE_FD(parent);
        return TAKE_FD(fd);
}

static int mount_at(VolumeMount *m, int dir_fd, int parent_fd, const char **ret_why) {
        char target[64], options[sizeof MOUNT_OPTIONS + 32];
        struct statx stx;

        (void) snprintf(target, sizeof target, "/proc/self/fd/%d", dir_fd);
        (void) snprintf(options, sizeof options, "fd=%d," MOUNT_OPTIONS, m->fd);
        if (mount("space-volume", target, "fuse.space", MS_NOSUID | MS_NODEV, options) < 0) {
                *ret_why = "mount";
                return -errno;
        }
        /* The mount's root, by its name in the parent we hold (a mount point cannot be renamed): the kernel
         * made it, and DONT_SYNC keeps this stat from asking us (we are not reading /dev/fuse yet). */
        if (statx(parent_fd, strrchr(m->path, '/') + 1, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE, &stx) < 0) {
                *ret_why = "stat of the mount";
                (void) umount2(m->path, MNT_DETACH | UMOUNT_NOFOLLOW);
                return -errno;
        }
        m->dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
        return 0;
}

static VolumeMount *mount_new(const char *id, char *path) {
        VolumeMount *m = calloc(1, sizeof *m);

        if (!m)
                return NULL;
        snprintf(m->id, sizeof m->id, "%s", id);
        m->path = path;
        m->fd = -1;
        if (volume_nodes_init(&m->nodes) < 0) {
                volume_nodes_done(&m->nodes);
                free(m);
                return NULL;
        }
        return m;
}

static void mount_discard(VolumeMount *m) {
        volume_nodes_done(&m->nodes);
        safe_close(m->fd);
        free(m->path);
        free(m);
}

int volume_mount(const char *id, const char *path, char *msg, size_t msg_size) {
        _cleanup_free_ char *norm = NULL;
        _cleanup_close_ int dir_fd = -1, parent_fd = -1;
        const char *why = NULL;
        VolumeMount *m;
        size_t slot = SPACE_VOLUME_MOUNTS_MAX;
        int r;

        r = id_ok(id) ? path_normalize(path, &norm) : -EINVAL;
        if (r < 0) {
                (void) snprintf(msg, msg_size, "mount %s: %s", path,
                                id_ok(id) ? "not an absolute path without \".\" and \"..\"" : "not a volume id");
                return r;
        }
        for (size_t i = 0; i < SPACE_VOLUME_MOUNTS_MAX; i++) {
                VolumeMount *o = volume_mounts[i];

                if (!o) {
                        slot = slot < i ? slot : i;
                        continue;
                }
                if (streq(o->path, norm)) {
                        if (streq(o->id, id))
                                return 0; /* a restore's or a fork's INIT names what the guest has */
                        (void) snprintf(msg, msg_size, "mount %s: volume %s is mounted there", norm, o->id);
                        return -EBUSY;
                }
        }
        if (slot == SPACE_VOLUME_MOUNTS_MAX) {
                (void) snprintf(msg, msg_size, "mount %s: %u volumes are mounted already", norm, SPACE_VOLUME_MOUNTS_MAX);
                return -EMFILE;
        }
        m = mount_new(id, norm);
        if (!m) {
                (void) snprintf(msg, msg_size, "mount %s: out of memory", norm);
                return -ENOMEM;
        }
        TAKE_PTR(norm);
        m->fd = open("/dev/fuse", O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (m->fd < 0) {
                r = -errno;
                why = "open /dev/fuse";
        } else
                r = dir_fd = open_dir_p(m->path, &parent_fd, &why);
        if (r >= 0)
                r = mount_at(m, dir_fd, parent_fd, &why);
        if (r < 0) {
                (void) snprintf(msg, msg_size, "mount %s: %s: %s", m->path, why, strerror(-r));
                mount_discard(m);
                return r;
        }
        volume_mounts[slot] = m;
        log_info("volume %s mounted at %s", m->id, m->path);
        return 0;
}

bool volume_path_mounted(const char *path) {
        char norm[SPACE_FILE_PATH_MAX + 2];
        size_t o = 0;

        /* lexically: "//", "." and ".." as the kernel would take them, symlinks not (see agent.h) */
        for (const char *p = path; *p;) {
                size_t c;

                while (*p == '/')
                        p++;
                c = strcspn(p, "/");
                if (c == 0 || (c == 1 && p[0] == '.')) {
                        p += c;
                        continue;
                }
                if (c == 2 && p[0] == '.' && p[1] == '.') {
                        while (o > 0 && norm[--o] != '/')
                                ;
                        p += c;
                        continue;
                }
                if (o + 1 + c >= sizeof norm)
                        return false; /* longer than any path the agent will open */
                norm[o++] = '/';
                memcpy(norm + o, p, c);
                o += c;
                p += c;
        }
        norm[o] = '\0';
        for (size_t i = 0; i < SPACE_VOLUME_MOUNTS_MAX; i++) {
                const char *mp = volume_mounts[i] ? volume_mounts[i]->path : NULL;
                size_t l = mp ? strlen(mp) : 0;

                if (mp && strncmp(norm, mp, l) == 0 && (norm[l] == '\0' || norm[l] == '/'))
                        return true;
        }
        return false;
}

int volume_statat(int dirfd, const char *name, int flags, struct stat *ret, bool *ret_in_mount) {
        struct statx stx;
        dev_t dev;

        if (statx(dirfd, name, flags | AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &stx) < 0)
                return -errno;
        dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
        *ret = (struct stat) {
                .st_dev = dev, .st_ino = stx.stx_ino, .st_mode = stx.stx_mode, .st_nlink = stx.stx_nlink,
                .st_uid = stx.stx_uid, .st_gid = stx.stx_gid, .st_rdev = makedev(stx.stx_rdev_major, stx.stx_rdev_minor),
                .st_size = (off_t) stx.stx_size, .st_blksize = (blksize_t) stx.stx_blksize,
                .st_blocks = (blkcnt_t) stx.stx_blocks,
                .st_atim = { stx.stx_atime.tv_sec, stx.stx_atime.tv_nsec },
                .st_mtim = { stx.stx_mtime.tv_sec, stx.stx_mtime.tv_nsec },
                .st_ctim = { stx.stx_ctime.tv_sec, stx.stx_ctime.tv_nsec },
        };
        if (ret_in_mount)
                *ret_in_mount = volume_dev_mounted(dev);
        return 0;
}

bool volume_dev_mounted(dev_t dev) {
        for (size_t i = 0; i < SPACE_VOLUME_MOUNTS_MAX; i++)
                if (volume_mounts[i] && volume_mounts[i]->dev == dev)
                        return true;
        return false;
}

bool volume_link_leads_in(const char *link) {
        char target[SPACE_FILE_PATH_MAX + 1], joined[2 * SPACE_FILE_PATH_MAX + 2];
        const char *slash = strrchr(link, '/');
        ssize_t n = readlink(link, target, sizeof target - 1);

        if (n <= 0)
                return false;
        target[n] = '\0';
        if (target[0] == '/' || !slash)
                return volume_path_mounted(target);
        (void) snprintf(joined, sizeof joined, "%.*s/%s", (int) (slash - link), link, target);
        return volume_path_mounted(joined);
}

void volume_forget_inherited(void) {
        for (size_t i = 0; i < SPACE_VOLUME_MOUNTS_MAX; i++)
                volume_mounts[i] = NULL; /* the parent's: its memory stays with the child's copy, unused */
        volume_requests_forget(); /* else a host_back() of the child's channel would send them again */
}
