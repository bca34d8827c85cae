/* SPDX-License-Identifier: Apache-2.0 */

/*
 * FILE streams: stat, list, mkdir, remove, move, symlink, attrs, read and write of guest paths for the host
 * (lib/proto.h has the conversation). The agent is root, so these act with root's rights on absolute paths,
 * unless the request names a user (user=, the E2B facade's envd calls): then the operation runs with that
 * user's filesystem identity (setfsuid/setfsgid and its groups), so that the kernel checks the user's
 * permissions and what is created is the user's, and the agent is root again right after. chown= (the /v1
 * routes' owner, spacectl cp's default) is different: the agent acts as root and gives what it made to the
 * user afterwards, with chown_if=writable only where that user could have made it itself.
 *
 * Reads and lists send DATA on fd 1 only while the stream has credit and the port's queue is under the
 * high-water mark, like process output; a list is walked first (bounded by SPACE_FILE_LIST_MAX entries and
 * SPACE_FILE_LIST_BYTES_MAX bytes) so that "too many entries" is an answer, not a cut-off stream. A write
 * lands in a temporary file next to its target and is renamed into place at EOF, so an aborted upload leaves
 * nothing behind.
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkostemp, setgroups */
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "agent.h"

enum {
        XFER_READ,
        XFER_WRITE,
        XFER_LIST,
};

typedef struct FileXfer {
        uint32_t id;
        int kind;
        int fd;                   /* read: the file; write: the temporary file */
        char *path;               /* write: the target */
        char *tmp_path;           /* write: the temporary file, unlinked unless renamed */
        mode_t mode;
        uid_t uid;
        gid_t gid;
        bool owner_set;
        int64_t mtime;
        bool mtime_set;
        SpaceBuf out;             /* list: encoded entries still to send from out_off */
        size_t out_off;
        SpaceCredit out_credit;   /* DATA on fd 1 */
        SpaceCredit in_credit;    /* DATA on fd 0 */
        bool as_user;             /* write: the rename at EOF is done as the request's user too */
        SpaceUser user;
        bool names;               /* write: the final entry names its owner and group */
        SpaceBuf meta;            /* write: meta_key=/meta_value= records, set as user.e2b.* on the file */
        struct FileXfer *next;
} FileXfer;

/* What a FILE request asked for. */
typedef struct FileReq {
        const char *op, *path, *to, *target;
        unsigned long mode;
        bool mode_set;
        unsigned long uid, gid;
        bool uid_set, gid_set;
        long long mtime;
        bool mtime_set;
        bool parents, recursive, follow, exclusive;
        unsigned long depth;
        const char *user;         /* NAME|UID: act as this user (NULL: root) */
        const SpaceUser *as;      /* user, resolved */
        const char *chown;        /* NAME|UID[:GROUP]: give what the request makes to this user (NULL: root) */
        bool chown_if_writable;   /* ... only where that user could have made it (chown_if=writable) */
        SpaceUser owner;          /* chown, resolved */
        bool names;               /* entries name their owner and group (owner=, group=) */
        const uint8_t *raw;       /* the request's records, for what repeats (meta_key=, meta_value=) */
        size_t raw_len;
} FileReq;

static FileXfer *xfers;
static unsigned n_xfers;

static FileXfer *xfer_find(uint32_t id) {
        for (FileXfer *x = xfers; x; x = x->next)
                if (x->id == id)
                        return x;
        return NULL;
}

static void xfer_free(FileXfer *x) {
        for (FileXfer **i = &xfers; *i; i = &(*i)->next)
                if (*i == x) {
                        *i = x->next;
                        n_xfers--;
                        break;
                }
        safe_close(x->fd);
        if (x->tmp_path)
                (void) unlink(x->tmp_path);
        free(x->tmp_path);
        free(x->path);
        space_buf_done(&x->out);
        space_buf_done(&x->meta);
        free(x);
}

static FileXfer *xfer_new(uint32_t id, int kind) {
        FileXfer *x = calloc(1, sizeof *x);

        if (!x)
                return NULL;
        x->id = id;
        x->kind = kind;
        x->fd = -1;
        space_credit_init(&x->out_credit);
        space_credit_init(&x->in_credit);
        x->next = xfers;
        xfers = x;
        n_xfers++;
        return x;
}

/* ---- requests ---- */

static int parse_ul(const char *v, unsigned long max, unsigned long *ret) {
        char *end;
        unsigned long n;

        if (!v[0] || v[0] == '-' || v[0] == '+')
                return -EINVAL;
        errno = 0;
        n = strtoul(v, &end, 10);
        if (errno || *end || n > max)
                return -EINVAL;
        *ret = n;
        return 0;
}

static int parse_req(const uint8_t *p, size_t n, FileReq *ret) {
        size_t off = 0, klen;
        const char *k, *v;
        FileReq q = { .depth = 1 };
        int r;

        while ((r = space_kv_next(p, n, &off, &k, &klen, &v)) > 0) {
#define KEY(s) (klen == sizeof(s) - 1 && memcmp(k, s, klen) == 0)
                if (KEY("op"))
                        q.op = v;
                else if (KEY("path"))
                        q.path = v;
                else if (KEY("to"))
                        q.to = v;
                else if (KEY("target"))
                        q.target = v;
                else if (KEY("mode")) {
                        if (parse_ul(v, 07777, &q.mode) < 0)
                                return -EINVAL;
                        q.mode_set = true;
                } else if (KEY("uid")) {
                        if (parse_ul(v, UINT32_MAX - 1, &q.uid) < 0)
                                return -EINVAL;
                        q.uid_set = true;
                } else if (KEY("gid")) {
                        if (parse_ul(v, UINT32_MAX - 1, &q.gid) < 0)
                                return -EINVAL;
                        q.gid_set = true;
                } else if (KEY("mtime")) {
                        char *end;
                        errno = 0;
                        q.mtime = strtoll(v, &end, 10);
                        if (errno || !v[0] || *end)
                                return -EINVAL;
                        q.mtime_set = true;
                } else if (KEY("depth")) {
                        if (parse_ul(v, SPACE_FILE_LIST_DEPTH_MAX, &q.depth) < 0 || q.depth < 1)
                                return -EINVAL;
                } else if (KEY("parents"))
                        q.parents = streq(v, "1");
                else if (KEY("recursive"))
                        q.recursive = streq(v, "1");
                else if (KEY("follow"))
                        q.follow = streq(v, "1");
                else if (KEY("exclusive"))
                        q.exclusive = streq(v, "1");
                else if (KEY("user"))
                        q.user = v;
                else if (KEY("chown"))
                        q.chown = v;
                else if (KEY("chown_if"))
                        q.chown_if_writable = streq(v, "writable");
                else if (KEY("names"))
                        q.names = streq(v, "1");
#undef KEY
        }
        if (r < 0)
                return r;
        q.raw = p;
        q.raw_len = n;
        *ret = q;
        return 0;
}

static bool path_ok(const char *p) {
        return p && p[0] == '/' && strlen(p) <= SPACE_FILE_PATH_MAX;
}

/* ---- whose rights ---- */

void identity_leave(FsIdentity *saved) {
        if (!saved->active)
                return;
        /* back to fsuid 0 brings back the capabilities (DAC override, chown) that leaving it dropped */
        (void) setfsuid(0);
        (void) setfsgid(0);
        (void) setgroups((size_t) saved->n_groups, saved->groups);
        saved->active = false;
}

/* Acts as u for the file system until identity_leave(): permission checks are u's and what is created is
 * u's, while the agent keeps its real and effective ids (only it runs: it is single-threaded). */
int identity_enter(const SpaceUser *u, FsIdentity *saved) {
        gid_t groups[SPACE_USER_GROUPS_MAX];
        int n;

        n = getgroups(SPACE_USER_GROUPS_MAX, saved->groups);
        if (n < 0)
                return -errno;
        saved->n_groups = n;
        for (size_t i = 0; i < u->n_groups; i++)
                groups[i] = u->groups[i];
        if (setgroups(u->n_groups, groups) < 0)
                return -errno;
        saved->active = true;
        (void) setfsgid(u->gid);
        (void) setfsuid(u->uid);
        /* setfsuid() says nothing of failure: an invalid id (-1) answers with the current one */
        if ((uid_t) setfsuid((uid_t) -1) != u->uid || (gid_t) setfsgid((gid_t) -1) != u->gid) {
                identity_leave(saved);
                return -EPERM;
        }
        return 0;
}

/* The name the guest's /etc/passwd (group: /etc/group) gives id, into buf (SPACE_USER_SPEC_MAX + 1): true
 * when it has one that is a plain name. Read as a plain file, like user_resolve (no NSS in a static agent). */
static bool id_name(bool group, uint32_t id, char *buf) {
        _cleanup_fclose_ FILE *f = fopen(group ? "/etc/group" : "/etc/passwd", "re");
        char line[1024];

        if (!f)
                return false;
        while (fgets(line, sizeof line, f)) {
                char *name = line, *c1 = strchr(line, ':'), *c2, *end;
                unsigned long v;

                if (!c1 || !(c2 = strchr(c1 + 1, ':')))
                        continue;
                *c1 = 0;
                errno = 0;
                v = strtoul(c2 + 1, &end, 10);
                if (errno || end == c2 + 1 || *end != ':' || v != id)
                        continue;
                if (strlen(name) > SPACE_USER_SPEC_MAX || space_user_spec_parse(name, NULL) < 0)
                        return false;
                strcpy(buf, name);
                return true;
        }
        return false;
}

/* owner= and group= records for an entry, when the guest has names for its ids. */
int names_add(SpaceBuf *b, uid_t uid, gid_t gid) {
        char name[SPACE_USER_SPEC_MAX + 1];
        int r = 0;

        if (id_name(false, uid, name))
                r = space_kv_add(b, "owner", name);
        if (r >= 0 && id_name(true, gid, name))
                r = space_kv_add(b, "group", name);
        return r;
}

static void send_ok(Channel *c, uint32_t id, const SpaceBuf *kv) {
        (void) channel_send(c, SPACE_F_OK, 0, id, kv ? kv->data : NULL, kv ? kv->len : 0);
}

static void send_err(Channel *c, uint32_t id, int err, const char *what, const char *path) {
        char msg[256];

        (void) snprintf(msg, sizeof msg, "%s %.180s: %s", what, path ? path : "", strerror(err));
        channel_send_error(c, id, err, msg);
}

/* Answers with the entry of path (lstat) or the error; names: with owner= and group= too. */
static void reply_entry(Channel *c, uint32_t id, const char *path, bool follow, bool names) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        struct stat st;

        if ((follow ? stat(path, &st) : lstat(path, &st)) < 0) {
                send_err(c, id, errno, "stat", path);
                return;
        }
        if (entry_add(&kv, NULL, path, &st) < 0 || (names && names_add(&kv, st.st_uid, st.st_gid) < 0)) {
                send_err(c, id, ENOMEM, "stat", path);
                return;
        }
        send_ok(c, id, &kv);
}

/* ---- ops without a stream ---- */

static bool in_groups(const SpaceUser *u, gid_t gid) {
        for (size_t i = 0; i < u->n_groups; i++)
                if (u->groups[i] == gid)
                        return true;
        return u->gid == gid;
}

/* Whether u could make an entry in dir, by its mode bits (as the kernel decides without ACLs). The root
 * directory counts as u's: a new top-level directory such as /work is where a user's files go (docker's
 * WORKDIR), while /etc or /usr/local/bin stay root's. */
static bool dir_writable_by(const SpaceUser *u, const char *dir) {
        struct stat st, root;

        if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
                return false;
        if (u->uid == 0 || (stat("/", &root) >= 0 && st.st_dev == root.st_dev && st.st_ino == root.st_ino))
                return true;
        if (st.st_uid == u->uid)
                return (st.st_mode & 0300) == 0300;
        if (in_groups(u, st.st_gid))
                return (st.st_mode & 0030) == 0030;
        return (st.st_mode & 0003) == 0003;
}

/* Whether chown= applies to path, a new entry: always, or with chown_if=writable when its directory is one
 * the user could have made it in (ARCHITECTURE.md, "Files and owners"). */
static bool chown_applies(const FileReq *q, const char *path) {
        _cleanup_free_ char *dir = NULL;
        const char *slash;

        if (!q->chown)
                return false;
        if (!q->chown_if_writable)
                return true;
        slash = strrchr(path, '/');
        dir = slash == path ? strdup("/") : strndup(path, (size_t) (slash - path));
        return dir && dir_writable_by(&q->owner, dir);
}

/* The owner of a new entry: uid=/gid= as given, or chown='s user where it applies; root otherwise. */
static int set_owner(const char *path, const FileReq *q) {
        if (chown_applies(q, path))
                return RET_NERRNO(lchown(path, q->owner.uid, q->owner.gid));
        if (!q->uid_set && !q->gid_set)
                return 0;
        return RET_NERRNO(lchown(path, q->uid_set ? (uid_t) q->uid : (uid_t) -1,
                                 q->gid_set ? (gid_t) q->gid : (gid_t) -1));
}

/* mkdir -p: every missing component of path, 0755; the last one with mode. Returns 1 when path was created,
 * 0 when it existed as a directory. The components it makes get q's owner (q may be NULL: root's). */
static int mkdir_p(const char *path, mode_t mode, const FileReq *q) {
        _cleanup_free_ char *p = strdup(path);
        struct stat st;

        if (!p)
                return -ENOMEM;
        for (char *s = p + 1;; s++) {
                bool last;

                if (*s != '/' && *s != 0)
                        continue;
                last = *s == 0 || s[strspn(s, "/")] == 0;
                *s = 0;
                if (mkdir(p, last ? mode : 0755) < 0) {
                        if (errno != EEXIST)
                                return -errno;
                        if (stat(p, &st) < 0)
                                return -errno;
                        if (!S_ISDIR(st.st_mode))
                                return last ? -EEXIST : -ENOTDIR;
                        if (last)
                                return 0;
                } else {
                        int r = q && !last && q->chown ? set_owner(p, q) : 0;

                        if (r < 0)
                                return r;
                        if (last)
                                return 1;
                }
                *s = '/';
        }
}

static void op_mkdir(Channel *c, uint32_t id, const FileReq *q) {
        mode_t mode = q->mode_set ? (mode_t) q->mode : 0755;
        int r;

        if (q->parents) {
                r = mkdir_p(q->path, mode, q);
                if (r == 0 && q->exclusive)
                        r = -EEXIST; /* the parents may exist, the directory itself must not */
        } else
                r = mkdir(q->path, mode) < 0 ? -errno : 1;
        /* mkdir() obeys the umask and drops setgid/sticky: set the mode that was asked for */
        if (r > 0 && chmod(q->path, mode) < 0)
                r = -errno;
        if (r > 0)
                r = set_owner(q->path, q);
        if (r < 0) {
                send_err(c, id, -r, "mkdir", q->path);
                return;
        }
        reply_entry(c, id, q->path, false, q->names);
}

/* A DIR stream of its own on the directory dirfd is open on (dirfd stays ours). */
static int opendir_at(int dirfd, DIR **ret) {
        int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
        DIR *d;

        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        *ret = d;
        return 0;
}

/* Removes everything below dirfd (not crossing into other file systems), then nothing else. */
static int rm_children(int dirfd, dev_t dev) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int r;

        r = opendir_at(dirfd, &d);
        if (r < 0)
                return r;
        while ((errno = 0, de = readdir(d))) {
                struct stat st;
                int q;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                /* never asks a volume's mount (agent.h), which the rmdir below then refuses with EBUSY */
                q = volume_statat(dirfd, de->d_name, AT_SYMLINK_NOFOLLOW, &st, NULL);
                if (q < 0) {
                        if (q != -ENOENT && r == 0)
                                r = q;
                        continue;
                }
                if (S_ISDIR(st.st_mode)) {
                        if (st.st_dev == dev) {
                                _cleanup_close_ int sub = openat(dirfd, de->d_name,
                                                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                                int k = sub < 0 ? -errno : rm_children(sub, dev);
                                if (k < 0 && r == 0)
                                        r = k;
                        }
                        if (unlinkat(dirfd, de->d_name, AT_REMOVEDIR) < 0 && r == 0)
                                r = -errno;
                } else if (unlinkat(dirfd, de->d_name, 0) < 0 && errno != ENOENT && r == 0)
                        r = -errno;
        }
        if (errno && r == 0)
                r = -errno;
        return r;
}

static void op_remove(Channel *c, uint32_t id, const FileReq *q) {
        struct stat st, root;
        int r = 0;

        if (lstat(q->path, &st) < 0) {
                send_err(c, id, errno, "remove", q->path);
                return;
        }
        if (stat("/", &root) >= 0 && st.st_dev == root.st_dev && st.st_ino == root.st_ino) {
                channel_send_error(c, id, EBUSY, "refusing to remove /");
                return;
        }
        if (S_ISDIR(st.st_mode)) {
                if (q->recursive) {
                        _cleanup_close_ int fd = open(q->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        r = fd < 0 ? -errno : rm_children(fd, st.st_dev);
                }
                if (r >= 0 && rmdir(q->path) < 0)
                        r = errno == EEXIST ? -ENOTEMPTY : -errno;
        } else if (unlink(q->path) < 0)
                r = -errno;
        if (r < 0) {
                send_err(c, id, -r, "remove", q->path);
                return;
        }
        send_ok(c, id, NULL);
}

static void op_move(Channel *c, uint32_t id, const FileReq *q) {
        if (!path_ok(q->to)) {
                channel_send_error(c, id, EINVAL, "move needs an absolute destination (to=)");
                return;
        }
        if (rename(q->path, q->to) < 0) {
                send_err(c, id, errno, "move", q->path);
                return;
        }
        reply_entry(c, id, q->to, false, q->names);
}

static void op_symlink(Channel *c, uint32_t id, const FileReq *q) {
        int r;

        if (!q->target || !q->target[0] || strlen(q->target) > SPACE_FILE_PATH_MAX) {
                channel_send_error(c, id, EINVAL, "symlink needs a target");
                return;
        }
        r = RET_NERRNO(symlink(q->target, q->path));
        if (r >= 0)
                r = set_owner(q->path, q);
        if (r < 0) {
                send_err(c, id, -r, "symlink", q->path);
                return;
        }
        reply_entry(c, id, q->path, false, q->names);
}

static void op_attrs(Channel *c, uint32_t id, const FileReq *q) {
        struct stat st;
        int r;

        if (lstat(q->path, &st) < 0) {
                send_err(c, id, errno, "attrs", q->path);
                return;
        }
        /* Owner first: chown clears setuid and setgid, so the mode must come after it. A symlink has no mode
         * of its own on Linux: that part is left out for one. */
        r = q->chown && q->chown_if_writable ? 0 : set_owner(q->path, q); /* attrs makes nothing new */
        if (r >= 0 && q->mode_set && !S_ISLNK(st.st_mode))
                r = RET_NERRNO(chmod(q->path, (mode_t) q->mode));
        if (r >= 0 && q->mtime_set) {
                struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = (time_t) q->mtime } };
                r = RET_NERRNO(utimensat(AT_FDCWD, q->path, ts, AT_SYMLINK_NOFOLLOW));
        }
        if (r < 0) {
                send_err(c, id, -r, "attrs", q->path);
                return;
        }
        reply_entry(c, id, q->path, false, q->names);
}

/* ---- list ---- */

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The distinct owners and groups of a list's entries, for its names (a few at most; past the bound they go
 * unnamed). */
#define LIST_IDS_MAX 32

typedef struct ListWalk {
        SpaceBuf *out;
        unsigned count;
        uint32_t uids[LIST_IDS_MAX], gids[LIST_IDS_MAX];
        size_t n_uids, n_gids;
        const char *root;         /* the listed directory */
        char rel[SPACE_FILE_PATH_MAX + 1];
        char full[2 * SPACE_FILE_PATH_MAX + 2]; /* root/rel, for what entry_add() reads by path */
} ListWalk;

static void id_note(uint32_t *ids, size_t *n, uint32_t id) {
        for (size_t i = 0; i < *n; i++)
                if (ids[i] == id)
                        return;
        if (*n < LIST_IDS_MAX)
                ids[(*n)++] = id;
}

/* uname=UID:NAME and gname=GID:NAME for the ids the walk saw that the guest has names for. */
static int list_names_add(SpaceBuf *kv, const ListWalk *w) {
        char name[SPACE_USER_SPEC_MAX + 1];
        int r = 0;

        for (size_t i = 0; i < w->n_uids && r >= 0; i++)
                if (id_name(false, w->uids[i], name))
                        r = space_kv_addf(kv, "uname", "%u:%s", w->uids[i], name);
        for (size_t i = 0; i < w->n_gids && r >= 0; i++)
                if (id_name(true, w->gids[i], name))
                        r = space_kv_addf(kv, "gname", "%u:%s", w->gids[i], name);
        return r;
}

/* Appends the entries below dirfd (rel names the directory below the listed one, "" at the top), sorted by
 * name, each directory's entries right after it, down to depth levels. */
static int list_dir(ListWalk *w, int dirfd, unsigned depth) {
        _cleanup_closedir_ DIR *d = NULL;
        char **names = NULL;
        size_t n = 0, cap = 0, rel_len = strlen(w->rel);
        struct dirent *de;
        int r;

        r = opendir_at(dirfd, &d);
        if (r < 0)
                return r;
        while ((errno = 0, de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (n == cap) {
                        char **l = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *l);
                        if (!l) {
                                r = -ENOMEM;
                                goto out;
                        }
                        names = l;
                }
                if (!(names[n] = strdup(de->d_name))) {
                        r = -ENOMEM;
                        goto out;
                }
                n++;
                if (w->count + n > SPACE_FILE_LIST_MAX) {
                        r = -E2BIG;
                        goto out;
                }
        }
        if (errno) {
                r = -errno;
                goto out;
        }
        if (n > 0)
                qsort(names, n, sizeof *names, cmp_names);

        for (size_t i = 0; i < n && r >= 0; i++) {
                struct stat st;
                bool in_volume;

                /* a volume's mount point is described, never entered: the agent serves it (agent.h) */
                if (volume_statat(dirfd, names[i], AT_SYMLINK_NOFOLLOW, &st, &in_volume) < 0)
                        continue; /* gone since readdir */
                if (rel_len + 1 + strlen(names[i]) > SPACE_FILE_PATH_MAX) {
                        r = -ENAMETOOLONG;
                        break;
                }
                (void) snprintf(w->rel + rel_len, sizeof w->rel - rel_len, "%s%s", rel_len ? "/" : "", names[i]);
                if (++w->count > SPACE_FILE_LIST_MAX) {
                        r = -E2BIG;
                        break;
                }
                (void) snprintf(w->full, sizeof w->full, "%s%s%s", w->root, streq(w->root, "/") ? "" : "/", w->rel);
                r = entry_add(w->out, w->rel, w->full, &st);
                id_note(w->uids, &w->n_uids, st.st_uid);
                id_note(w->gids, &w->n_gids, st.st_gid);
                if (r >= 0 && w->out->len > SPACE_FILE_LIST_BYTES_MAX)
                        r = -E2BIG;
                if (r >= 0 && S_ISDIR(st.st_mode) && depth > 1 && !in_volume) {
                        _cleanup_close_ int sub = openat(dirfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                                                          O_CLOEXEC);
                        if (sub >= 0)
                                r = list_dir(w, sub, depth - 1);
                }
                w->rel[rel_len] = 0;
        }
out:
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        return r;
}

static void op_list(Channel *c, uint32_t id, const FileReq *q) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_close_ int fd = -1;
        ListWalk *w;
        FileXfer *x;
        int r;

        fd = open(q->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                send_err(c, id, errno, "list", q->path);
                return;
        }
        x = xfer_new(id, XFER_LIST);
        w = calloc(1, sizeof *w);
        if (!x || !w) {
                free(w);
                if (x)
                        xfer_free(x);
                channel_send_error(c, id, ENOMEM, NULL);
                return;
        }
        w->out = &x->out;
        w->root = q->path;
        r = list_dir(w, fd, (unsigned) q->depth);
        if (r == -E2BIG) {
                char msg[160];

                (void) snprintf(msg, sizeof msg, "more than %u entries (or %u MiB) below %.100s: list less deep",
                                SPACE_FILE_LIST_MAX, SPACE_FILE_LIST_BYTES_MAX >> 20, q->path);
                (void) space_kv_addf(&kv, "errno", "%d", E2BIG);
                (void) space_kv_add(&kv, "message", msg);
                (void) space_kv_add(&kv, "code", space_code_to_string(SPACE_CODE_TOO_MANY_ENTRIES));
                (void) channel_send_kv(c, SPACE_F_ERROR, id, &kv);
        } else if (r < 0)
                send_err(c, id, -r, "list", q->path);
        else {
                (void) space_kv_addf(&kv, "count", "%u", w->count);
                if (q->names)
                        (void) list_names_add(&kv, w);
                send_ok(c, id, &kv);
        }
        free(w);
        if (r < 0)
                xfer_free(x);
}

/* ---- read and write ---- */

static void op_read(Channel *c, uint32_t id, const FileReq *q) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        _cleanup_close_ int fd = -1;
        struct stat st;
        FileXfer *x;

        /* O_NONBLOCK: opening a FIFO must not hang the agent; it is refused below anyway. */
        fd = open(q->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0 || fstat(fd, &st) < 0) {
                send_err(c, id, errno, "read", q->path);
                return;
        }
        if (S_ISDIR(st.st_mode)) {
                send_err(c, id, EISDIR, "read", q->path);
                return;
        }
        if (!S_ISREG(st.st_mode)) {
                channel_send_error(c, id, EINVAL, "not a regular file (a device, FIFO or socket)");
                return;
        }
        x = xfer_new(id, XFER_READ);
        if (!x || entry_add(&kv, NULL, q->path, &st) < 0) {
                if (x)
                        xfer_free(x);
                channel_send_error(c, id, ENOMEM, NULL);
                return;
        }
        x->fd = TAKE_FD(fd);
        send_ok(c, id, &kv);
}

/* The meta_key=/meta_value= pairs of a write, checked as the host checked them (envd's rules: lib/proto.h), into
 * out: -EINVAL for a key without its value, an empty or long key, or more than the budget. */
static int write_meta_collect(const FileReq *q, SpaceBuf *out) {
        size_t off = 0, klen, total = 0;
        const char *k, *v, *key = NULL;
        int r;

        while ((r = space_kv_next(q->raw, q->raw_len, &off, &k, &klen, &v)) > 0) {
                bool is_key = klen == 8 && memcmp(k, "meta_key", 8) == 0,
                     is_value = klen == 10 && memcmp(k, "meta_value", 10) == 0;

                if (key && !is_value)
                        return -EINVAL;
                if (is_key) {
                        if (!*v || strlen(v) > SPACE_FILE_META_KEY_MAX)
                                return -EINVAL;
                        key = v;
                } else if (is_value) {
                        if (!key)
                                return -EINVAL;
                        total += strlen(SPACE_FILE_META_PREFIX) + strlen(key) + strlen(v);
                        if (total > SPACE_FILE_META_BYTES_MAX)
                                return -EINVAL;
                        if (space_kv_add(out, "meta_key", key) < 0 || space_kv_add(out, "meta_value", v) < 0)
                                return -ENOMEM;
                        key = NULL;
                }
        }
        return r < 0 || key ? -EINVAL : 0;
}

/* Sets the write's metadata on its temporary file, before the rename: the file appears with it, and a file it
 * replaces takes its old metadata away with it, as envd's upload replaces the whole set. A file system without
 * user attributes keeps none (envd goes on too). */
static int write_meta_set(FileXfer *x) {
        size_t off = 0, klen;
        const char *k, *key = NULL, *v;

        while (space_kv_next(x->meta.data, x->meta.len, &off, &k, &klen, &v) > 0) {
                char name[sizeof SPACE_FILE_META_PREFIX + SPACE_FILE_META_KEY_MAX];

                if (klen == 8) {
                        key = v;
                        continue;
                }
                (void) snprintf(name, sizeof name, "%s%s", SPACE_FILE_META_PREFIX, key);
                if (fsetxattr(x->fd, name, v, strlen(v), 0) < 0) {
                        if (errno == ENOTSUP || errno == EOPNOTSUPP)
                                return 0;
                        return -errno;
                }
        }
        return 0;
}

static void op_write(Channel *c, uint32_t id, const FileReq *q) {
        _cleanup_free_ char *dir = NULL, *tmp = NULL;
        const char *base;
        struct stat st;
        FileXfer *x;
        int fd, r;

        base = strrchr(q->path, '/') + 1;
        if (!*base) {
                send_err(c, id, EISDIR, "write", q->path);
                return;
        }
        dir = strndup(q->path, (size_t) (base - q->path));
        if (!dir || asprintf(&tmp, "%s.%.200s.space-XXXXXX", dir, base) < 0) {
                channel_send_error(c, id, ENOMEM, NULL);
                return;
        }
        if (q->parents && base - q->path > 1) {
                dir[base - q->path - 1] = 0;
                r = mkdir_p(dir, 0755, q);
                if (r < 0) {
                        send_err(c, id, -r, "mkdir", dir);
                        return;
                }
        }
        x = xfer_new(id, XFER_WRITE);
        if (!x || !(x->path = strdup(q->path))) {
                if (x)
                        xfer_free(x);
                channel_send_error(c, id, ENOMEM, NULL);
                return;
        }
        /* A file that is replaced keeps its mode and owner unless the host says otherwise; one written as a
         * user becomes that user's (it could not give it away). */
        x->mode = 0644;
        x->names = q->names;
        if (q->as) {
                x->as_user = true;
                x->user = *q->as;
        }
        if (lstat(q->path, &st) >= 0) {
                if (S_ISDIR(st.st_mode)) {
                        xfer_free(x);
                        send_err(c, id, EISDIR, "write", q->path);
                        return;
                }
                if (S_ISREG(st.st_mode)) {
                        x->mode = st.st_mode & 07777;
                        x->uid = st.st_uid;
                        x->gid = st.st_gid;
                        x->owner_set = !q->as;
                }
                /* a file that is replaced keeps its owner unless chown= is unconditional */
                if (q->chown && !q->chown_if_writable) {
                        x->uid = q->owner.uid;
                        x->gid = q->owner.gid;
                        x->owner_set = true;
                }
        } else if (chown_applies(q, q->path)) {
                x->uid = q->owner.uid;
                x->gid = q->owner.gid;
                x->owner_set = true;
        }
        if (q->mode_set)
                x->mode = (mode_t) q->mode;
        if (q->uid_set || q->gid_set) {
                x->uid = q->uid_set ? (uid_t) q->uid : x->owner_set ? x->uid : 0;
                x->gid = q->gid_set ? (gid_t) q->gid : x->owner_set ? x->gid : 0;
                x->owner_set = true;
        }
        x->mtime = q->mtime;
        x->mtime_set = q->mtime_set;
        r = write_meta_collect(q, &x->meta);
        if (r < 0) {
                xfer_free(x);
                channel_send_error(c, id, -r, r == -ENOMEM ? NULL : "invalid metadata (meta_key=, meta_value=)");
                return;
        }

        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) {
                r = errno;
                xfer_free(x);
                send_err(c, id, r, "write", q->path);
                return;
        }
        x->fd = fd;
        x->tmp_path = TAKE_PTR(tmp);
        send_ok(c, id, NULL);
}

static void write_data(Channel *c, FileXfer *x, const uint8_t *p, size_t n) {
        uint8_t le[4];

        if (space_credit_take(&x->in_credit, n) < 0) {
                log_warn("file stream %u: host overran its credit, dropping %zu bytes", x->id, n);
                return;
        }
        for (size_t done = 0; done < n;) {
                ssize_t w = write(x->fd, p + done, n - done);

                if (w < 0) {
                        int err = errno;

                        if (err == EINTR)
                                continue;
                        send_err(c, x->id, err, "write", x->path);
                        xfer_free(x);
                        return;
                }
                done += (size_t) w;
        }
        space_put_le32(le, (uint32_t) n);
        space_credit_give_clamp(&x->in_credit, (uint32_t) n);
        (void) channel_send(c, SPACE_F_CREDIT, 0, x->id, le, sizeof le);
}

static void write_finish(Channel *c, FileXfer *x) {
        _cleanup_(identity_leave) FsIdentity saved = {};
        int r = 0;

        /* the rename into place needs the user's rights on the directory, as the temporary file did */
        if (x->as_user)
                r = identity_enter(&x->user, &saved);
        if (r >= 0)
                r = write_meta_set(x);
        if (r >= 0 && x->owner_set)
                r = RET_NERRNO(fchown(x->fd, x->uid, x->gid));
        if (r >= 0)
                r = RET_NERRNO(fchmod(x->fd, x->mode)); /* after fchown, which clears setuid */
        if (r >= 0 && x->mtime_set) {
                struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = (time_t) x->mtime } };
                r = RET_NERRNO(futimens(x->fd, ts));
        }
        if (r >= 0 && close(TAKE_FD(x->fd)) < 0)
                r = -errno;
        if (r >= 0 && rename(x->tmp_path, x->path) < 0)
                r = -errno;
        if (r < 0) {
                send_err(c, x->id, -r, "write", x->path);
                xfer_free(x);
                return;
        }
        x->tmp_path = (free(x->tmp_path), NULL);
        reply_entry(c, x->id, x->path, false, x->names);
        xfer_free(x);
}

/* ---- the channel's view ---- */

/* user= of a request: resolved, and the agent acts as that user until *saved is left. */
static int request_identity(Channel *c, uint32_t id, FileReq *q, SpaceUser *u, FsIdentity *saved) {
        SpaceCode code;
        char msg[256];
        int r;

        if (!q->user)
                return 0;
        r = user_resolve(q->user, u, &code, msg, sizeof msg);
        if (r < 0) {
                /* "unknown user ..." leads the message: the host tells that apart from other failures */
                channel_send_error(c, id, -r, msg);
                return r;
        }
        r = identity_enter(u, saved);
        if (r < 0) {
                send_err(c, id, -r, "acting as user", q->user);
                return r;
        }
        q->as = u;
        return 0;
}

void files_handle(Channel *c, uint32_t id, const uint8_t *p, size_t n) {
        _cleanup_(identity_leave) FsIdentity saved = {};
        SpaceUser user;
        FileReq q;

        if (xfer_find(id) || stream_find(id)) {
                channel_send_error(c, id, EEXIST, "stream id in use");
                return;
        }
        if (parse_req(p, n, &q) < 0 || !q.op) {
                channel_send_error(c, id, EINVAL, "malformed FILE request");
                return;
        }
        if (!path_ok(q.path)) {
                channel_send_error(c, id, EINVAL, "the path must be absolute and at most 4096 bytes");
                return;
        }
        if ((streq(q.op, "read") || streq(q.op, "write") || streq(q.op, "list")) && n_xfers >= SPACE_FILE_XFERS_MAX) {
                channel_send_error(c, id, EAGAIN, "too many file transfers at once");
                return;
        }
        if (q.chown && (q.uid_set || q.gid_set || q.user)) {
                channel_send_error(c, id, EINVAL, "chown= goes with neither uid=/gid= nor user=");
                return;
        }
        if (q.chown) {
                SpaceCode code;
                char msg[256];
                int r = user_resolve(q.chown, &q.owner, &code, msg, sizeof msg);

                if (r < 0) {
                        _cleanup_(space_buf_done) SpaceBuf kv = {};

                        /* the code, so that the host answers unknown_user or unknown_group, not an I/O error */
                        (void) space_kv_addf(&kv, "errno", "%d", -r);
                        (void) space_kv_add(&kv, "message", msg);
                        (void) space_kv_add(&kv, "code", space_code_to_string(code));
                        (void) channel_send_kv(c, SPACE_F_ERROR, id, &kv);
                        return;
                }
        }
        if (request_identity(c, id, &q, &user, &saved) < 0)
                return;

        if (streq(q.op, "stat"))
                reply_entry(c, id, q.path, q.follow, q.names);
        else if (streq(q.op, "mkdir"))
                op_mkdir(c, id, &q);
        else if (streq(q.op, "remove"))
                op_remove(c, id, &q);
        else if (streq(q.op, "move"))
                op_move(c, id, &q);
        else if (streq(q.op, "symlink"))
                op_symlink(c, id, &q);
        else if (streq(q.op, "attrs"))
                op_attrs(c, id, &q);
        else if (streq(q.op, "list"))
                op_list(c, id, &q);
        else if (streq(q.op, "read"))
                op_read(c, id, &q);
        else if (streq(q.op, "write"))
                op_write(c, id, &q);
        else
                channel_send_error(c, id, ENOSYS, "unknown file operation");
}

bool files_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p) {
        FileXfer *x = xfer_find(h->stream);

        if (!x)
                return false;
        switch (h->type) {
        case SPACE_F_DATA:
                if (h->fd == 0 && x->kind == XFER_WRITE && x->fd >= 0)
                        write_data(c, x, p, h->length);
                break;
        case SPACE_F_EOF:
                if (h->fd == 0 && x->kind == XFER_WRITE && x->fd >= 0)
                        write_finish(c, x);
                break;
        case SPACE_F_CREDIT:
                if (h->fd == 1 && h->length == 4)
                        space_credit_give_clamp(&x->out_credit, space_get_le32(p));
                break;
        case SPACE_F_CLOSE:
                xfer_free(x);
                break;
        default:
                break;
        }
        return true;
}

/* The longest run of whole entries from out_off that fits in max bytes and in the records a frame may have
 * (SPACE_KV_RECORDS_MAX, which the host enforces); 0 when the first entry does not fit. */
static size_t list_chunk(const FileXfer *x, size_t max) {
        const uint8_t *d = x->out.data;
        size_t pos = x->out_off, cut = 0, records = 0;

        while (pos < x->out.len) {
                size_t l = strnlen((const char *) d + pos, x->out.len - pos) + 1;

                if (pos > x->out_off && l > 4 && memcmp(d + pos, "rel=", 4) == 0)
                        cut = pos - x->out_off; /* an entry starts here: everything before it may go */
                if (pos + l - x->out_off > max || ++records > SPACE_KV_RECORDS_MAX)
                        return cut;
                pos += l;
        }
        return pos - x->out_off;
}

static size_t frame_room(const FileXfer *x) {
        return x->out_credit.available < SPACE_FRAME_PAYLOAD_MAX ? (size_t) x->out_credit.available
                                                                  : SPACE_FRAME_PAYLOAD_MAX;
}

/* Whether x has something to send now: credit, and for a list enough of it for the next entry (an entry
 * that does not fit waits for the host to return credit, which it does as its client reads). */
static bool xfer_can_send(const FileXfer *x) {
        if (x->out_credit.available == 0)
                return false;
        if (x->kind == XFER_READ)
                return true;
        return x->kind == XFER_LIST && (x->out_off >= x->out.len || list_chunk(x, frame_room(x)) > 0);
}

bool files_want_pump(const Channel *c) {
        if (channel_queued(c) >= AGENT_OUTQ_HIGH)
                return false;
        for (FileXfer *x = xfers; x; x = x->next)
                if (xfer_can_send(x))
                        return true;
        return false;
}

static void pump_read(Channel *c, FileXfer *x) {
        static uint8_t buf[SPACE_FRAME_PAYLOAD_MAX];
        ssize_t n;

        do
                n = read(x->fd, buf, frame_room(x));
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                send_err(c, x->id, errno, "read", "the file");
                xfer_free(x);
                return;
        }
        if (n == 0) {
                (void) channel_send(c, SPACE_F_EOF, 1, x->id, NULL, 0);
                xfer_free(x);
                return;
        }
        (void) space_credit_take(&x->out_credit, (size_t) n);
        (void) channel_send(c, SPACE_F_DATA, 1, x->id, buf, (size_t) n);
}

static void pump_list(Channel *c, FileXfer *x) {
        size_t n;

        if (x->out_off >= x->out.len) {
                (void) channel_send(c, SPACE_F_EOF, 1, x->id, NULL, 0);
                xfer_free(x);
                return;
        }
        n = list_chunk(x, frame_room(x));
        (void) space_credit_take(&x->out_credit, n);
        (void) channel_send(c, SPACE_F_DATA, 1, x->id, x->out.data + x->out_off, n);
        x->out_off += n;
}

void files_pump(Channel *c) {
        bool progress = true;

        /* Round robin, one frame per transfer per pass, until nothing can go or the queue is full. */
        while (progress && channel_queued(c) < AGENT_OUTQ_HIGH) {
                FileXfer *x, *next;

                progress = false;
                for (x = xfers; x && channel_queued(c) < AGENT_OUTQ_HIGH; x = next) {
                        next = x->next; /* x may be freed below */
                        if (!xfer_can_send(x))
                                continue;
                        if (x->kind == XFER_READ)
                                pump_read(c, x);
                        else
                                pump_list(c, x);
                        progress = true;
                }
        }
}

void files_forget_inherited(void) {
        for (FileXfer *x = xfers; x; x = x->next) {
                free(x->tmp_path); /* the parent's upload: not ours to remove */
                x->tmp_path = NULL;
        }
        files_drop_all();
}

bool files_idle(void) {
        return n_xfers == 0;
}

void files_drop_all(void) {
        while (xfers)
                xfer_free(xfers);
}
