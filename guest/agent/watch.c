/* SPDX-License-Identifier: Apache-2.0 */

/*
 * FILE op=watch (lib/proto.h): a directory watched with inotify for the host (envd's WatchDir and
 * CreateWatcher). The watch is armed (every directory below it too, when recursive) before OK goes out, so
 * that the host can tell its client the watch runs and nothing the client does after that is missed. Events
 * are mapped as envd's watcher (fsnotify) maps them: IN_CREATE and IN_MOVED_TO are create, IN_MODIFY write,
 * IN_DELETE remove, IN_MOVED_FROM rename (of the old name; the new one is a create), IN_ATTRIB chmod, and the
 * watched directory's own IN_DELETE_SELF and IN_MOVE_SELF are remove and rename of ".".
 *
 * Each watch has an inotify instance of its own (two watches of one directory must not share its watch
 * descriptor). Bounds: SPACE_WATCH_DIRS_MAX directories per watch and SPACE_WATCH_DIRS_AGENT_MAX in all,
 * SPACE_WATCHES_MAX watches, SPACE_WATCH_BACKLOG_MAX bytes of events waiting for the host's credit; beyond
 * any of them, and on IN_Q_OVERFLOW, the watch ends with an ERROR that says which.
 *
 * Arming and an event's entry (entry=1) run with the request's user's filesystem identity (user=), as the
 * other FILE ops do: a directory that user cannot read is not watched.
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "agent.h"

#define WATCH_MASK                                                                                             \
        (IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_ATTRIB | IN_DELETE_SELF |        \
         IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

typedef struct WatchedDir {
        int wd;
        char *rel;                /* below the root, "" for the root itself */
} WatchedDir;

typedef struct Watch {
        uint32_t id;
        int fd;                   /* its inotify instance */
        char *root;
        bool recursive, entry;
        bool as_user;
        SpaceUser user;
        WatchedDir *dirs;
        size_t n_dirs, cap_dirs;
        SpaceBuf out;             /* encoded events from out_off on wait for credit */
        size_t out_off;
        SpaceCredit credit;       /* DATA on fd 1 */
        uint32_t upload_cookie;   /* the rename of an upload's temporary file that is under way */
        struct Watch *next;
} Watch;

static Watch *watches;
static unsigned n_watches;
static size_t n_dirs_all;

static Watch *watch_find(uint32_t id) {
        for (Watch *w = watches; w; w = w->next)
                if (w->id == id)
                        return w;
        return NULL;
}

bool watch_owns(uint32_t id) {
        return watch_find(id) != NULL;
}

static void watch_free(Watch *w) {
        for (Watch **i = &watches; *i; i = &(*i)->next)
                if (*i == w) {
                        *i = w->next;
                        n_watches--;
                        break;
                }
        for (size_t i = 0; i < w->n_dirs; i++)
                free(w->dirs[i].rel);
        n_dirs_all -= w->n_dirs;
        free(w->dirs);
        safe_close(w->fd); /* drops every inotify watch of the instance */
        space_buf_done(&w->out);
        free(w->root);
        free(w);
}

/* Ends the watch with ERROR(code): what waited for credit is dropped with it. */
static void watch_fail(Channel *c, Watch *w, int err, SpaceCode code, const char *message) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};

        (void) space_kv_addf(&kv, "errno", "%d", err);
        (void) space_kv_add(&kv, "message", message);
        (void) space_kv_add(&kv, "code", space_code_to_string(code));
        (void) channel_send_kv(c, SPACE_F_ERROR, w->id, &kv);
        watch_free(w);
}

static WatchedDir *dir_by_wd(Watch *w, int wd) {
        for (size_t i = 0; i < w->n_dirs; i++)
                if (w->dirs[i].wd == wd)
                        return &w->dirs[i];
        return NULL;
}

static void dir_forget(Watch *w, int wd) {
        WatchedDir *d = dir_by_wd(w, wd);

        if (!d)
                return;
        free(d->rel);
        *d = w->dirs[--w->n_dirs];
        n_dirs_all--;
}

/* A directory moved away: its watches (and those below it) would go on naming it by its old name. */
static void dirs_drop_below(Watch *w, const char *rel) {
        size_t l = strlen(rel);

        for (size_t i = 0; i < w->n_dirs;) {
                const char *r = w->dirs[i].rel;

                if (strncmp(r, rel, l) != 0 || (r[l] && r[l] != '/')) {
                        i++;
                        continue;
                }
                (void) inotify_rm_watch(w->fd, w->dirs[i].wd); /* its IN_IGNORED then finds no directory */
                free(w->dirs[i].rel);
                w->dirs[i] = w->dirs[--w->n_dirs];
                n_dirs_all--;
        }
}

/* rel joined with name below it ("" is the root). */
static char *rel_join(const char *rel, const char *name) {
        char *p;

        if (!*rel)
                return strdup(name);
        return asprintf(&p, "%s/%s", rel, name) < 0 ? NULL : p;
}

/* ---- events ---- */

/* Appends ev=TYPE name=REL and, when asked and lstat still finds it, its entry (create, write, chmod only,
 * as envd). 0, -ENOBUFS when the backlog is over its bound, -ENOMEM. */
static int event_add(Watch *w, const char *type, const char *rel, bool with_entry) {
        size_t mark = w->out.len;
        int r;

        if (w->out.len - w->out_off > SPACE_WATCH_BACKLOG_MAX)
                return -ENOBUFS;
        r = space_kv_add(&w->out, "ev", type);
        if (r >= 0)
                r = space_kv_add(&w->out, "name", *rel ? rel : ".");
        if (r >= 0 && with_entry && w->entry) {
                _cleanup_free_ char *path = NULL;
                struct stat st;

                if (asprintf(&path, "%s%s%s", w->root, *rel && !streq(w->root, "/") ? "/" : "", rel) < 0)
                        r = -ENOMEM;
                else if (volume_statat(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, &st, NULL) >= 0) {
                        r = entry_add(&w->out, NULL, path, &st);
                        if (r >= 0)
                                r = names_add(&w->out, st.st_uid, st.st_gid);
                }
        }
        if (r < 0)
                w->out.len = mark;
        return r;
}

static int dir_add(Channel *c, Watch *w, const char *rel, bool report);

/* A volume's mount point is never watched nor read: the agent serves it, and would wait for itself (agent.h). */
static bool dir_in_volume(DIR *d, const char *name) {
        struct stat st;
        bool in_volume = false;

        return volume_statat(dirfd(d), name, AT_SYMLINK_NOFOLLOW, &st, &in_volume) < 0 || in_volume;
}

/* A recursive watch's new directory: watched, and what it holds already reported as created (it may have
 * filled between its IN_CREATE and our inotify_add_watch). Its subdirectories are gathered first and the
 * directory closed before they are walked, so that a deep tree does not hold a descriptor per level. */
static int scan_dir(Channel *c, Watch *w, const char *rel, bool report) {
        _cleanup_free_ char *path = NULL;
        char **subs = NULL;
        size_t n = 0;
        struct dirent *de;
        DIR *d;
        int r = 0;

        if (asprintf(&path, "%s%s%s", w->root, *rel && !streq(w->root, "/") ? "/" : "", rel) < 0)
                return -ENOMEM;
        d = opendir(path);
        if (!d) /* gone already, or not the user's to read: nothing to watch; out of descriptors: say so */
                return errno == EMFILE || errno == ENFILE || errno == ENAMETOOLONG ? -errno : 0;
        while (r >= 0 && (de = readdir(d))) {
                char *sub, **more;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                sub = rel_join(rel, de->d_name);
                if (!sub) {
                        r = -ENOMEM;
                        break;
                }
                if (report)
                        r = event_add(w, "create", sub, true);
                if (r < 0 || de->d_type != DT_DIR || dir_in_volume(d, de->d_name)) {
                        free(sub);
                        continue;
                }
                if (w->n_dirs + n >= SPACE_WATCH_DIRS_MAX || n_dirs_all + n >= SPACE_WATCH_DIRS_AGENT_MAX) {
                        free(sub);
                        r = -EMLINK;
                        break;
                }
                more = realloc(subs, (n + 1) * sizeof *subs);
                if (!more) {
                        free(sub);
                        r = -ENOMEM;
                        break;
                }
                subs = more;
                subs[n++] = sub;
        }
        closedir(d);
        for (size_t i = 0; i < n; i++) {
                if (r >= 0)
                        r = dir_add(c, w, subs[i], report);
                free(subs[i]);
        }
        free(subs);
        return r;
}

/* Arms inotify on the directory rel (and below it, when recursive). -EMLINK past a bound. */
static int dir_add(Channel *c, Watch *w, const char *rel, bool report) {
        _cleanup_free_ char *path = NULL;
        WatchedDir *d;
        int wd;

        if (w->n_dirs >= SPACE_WATCH_DIRS_MAX || n_dirs_all >= SPACE_WATCH_DIRS_AGENT_MAX)
                return -EMLINK;
        if (asprintf(&path, "%s%s%s", w->root, *rel && !streq(w->root, "/") ? "/" : "", rel) < 0)
                return -ENOMEM;
        wd = inotify_add_watch(w->fd, path, WATCH_MASK);
        if (wd < 0) {
                /* the root must be watchable; one below it that vanished or is not the user's is skipped, one
                 * too deep to name ends the watch rather than go unwatched */
                if (errno == ENOSPC)
                        return -EMLINK; /* the kernel's max_user_watches */
                if (!*rel || errno == ENAMETOOLONG)
                        return -errno;
                return 0;
        }
        if (!dir_by_wd(w, wd)) {
                if (w->n_dirs == w->cap_dirs) {
                        size_t cap = w->cap_dirs ? w->cap_dirs * 2 : 16;
                        WatchedDir *n = realloc(w->dirs, cap * sizeof *n);

                        if (!n)
                                return -ENOMEM;
                        w->dirs = n;
                        w->cap_dirs = cap;
                }
                d = &w->dirs[w->n_dirs];
                d->rel = strdup(rel);
                if (!d->rel)
                        return -ENOMEM;
                d->wd = wd;
                w->n_dirs++;
                n_dirs_all++;
        }
        return w->recursive ? scan_dir(c, w, rel, report) : 0;
}

/* The codes of a failed dir_add or event_add, and their words. */
static void fail_for(Channel *c, Watch *w, int r) {
        char msg[200];

        if (r == -EMLINK) {
                (void) snprintf(msg, sizeof msg,
                                "too many directories to watch (at most %u in one watch, %u in the sandbox)",
                                SPACE_WATCH_DIRS_MAX, SPACE_WATCH_DIRS_AGENT_MAX);
                watch_fail(c, w, EMLINK, SPACE_CODE_TOO_MANY_WATCHES, msg);
        } else if (r == -ENOBUFS) {
                (void) snprintf(msg, sizeof msg, "events came faster than they were read (%u KiB of them waited)",
                                SPACE_WATCH_BACKLOG_MAX / 1024);
                watch_fail(c, w, ENOBUFS, SPACE_CODE_OVERFLOW, msg);
        } else if (r == -ENAMETOOLONG)
                watch_fail(c, w, ENAMETOOLONG, SPACE_CODE_TOO_MANY_WATCHES,
                           "a directory below is too deep to watch (its path is over 4096 bytes)");
        else {
                (void) snprintf(msg, sizeof msg, "watch %.150s: %s", w->root, strerror(-r));
                channel_send_error(c, w->id, -r, msg); /* the errno says what it was */
                watch_free(w);
        }
}

static const char *event_type(uint32_t mask) {
        if (mask & (IN_CREATE | IN_MOVED_TO))
                return "create";
        if (mask & IN_MODIFY)
                return "write";
        if (mask & (IN_DELETE | IN_DELETE_SELF))
                return "remove";
        if (mask & (IN_MOVED_FROM | IN_MOVE_SELF))
                return "rename";
        if (mask & IN_ATTRIB)
                return "chmod";
        return NULL;
}

/* The agent's own uploads (files.c, op_write) go to ".NAME.space-XXXXXX" beside NAME, renamed onto it at the
 * end; envd writes the file in place. So that a watch sees what envd's would, the temporary file's events
 * are not reported: its creation is NAME's (when NAME is new), its rename onto NAME a write of NAME. Whether
 * name is one: *ret_target is NAME then (empty when it was cut short in the temporary name). */
static bool upload_temp(const char *name, char target[static NAME_MAX + 1]) {
        static const char suffix[] = ".space-";
        size_t l = strlen(name), tl;

        if (l < 1 + 1 + sizeof suffix - 1 + 6 || name[0] != '.' ||
            memcmp(name + l - 6 - (sizeof suffix - 1), suffix, sizeof suffix - 1) != 0)
                return false;
        tl = l - 1 - 6 - (sizeof suffix - 1);
        memcpy(target, name + 1, tl);
        target[tl] = 0;
        if (tl >= 200) /* op_write keeps 200 bytes of the name */
                target[0] = 0;
        return true;
}

static int upload_event(Watch *w, const WatchedDir *d, const struct inotify_event *e, const char *target) {
        _cleanup_free_ char *rel = NULL, *path = NULL;
        struct stat st;

        if (e->mask & IN_MOVED_FROM) {
                w->upload_cookie = e->cookie;
                return 0;
        }
        if (!(e->mask & IN_CREATE) || !*target)
                return 0;
        rel = rel_join(d->rel, target);
        if (!rel || asprintf(&path, "%s%s%s", w->root, streq(w->root, "/") ? "" : "/", rel) < 0)
                return -ENOMEM;
        if (volume_statat(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, &st, NULL) == -ENOENT)
                return event_add(w, "create", rel, false);
        return 0;
}

/* One inotify event: 0, or < 0 when the watch must end (it is not freed here). */
static int handle_event(Channel *c, Watch *w, const struct inotify_event *e) {
        _cleanup_free_ char *rel = NULL;
        WatchedDir *d;
        const char *type;
        bool self = !(e->len > 0 && e->name[0]);
        int r;

        if (e->mask & IN_Q_OVERFLOW)
                return -EOVERFLOW;
        d = dir_by_wd(w, e->wd);
        if (!d)
                return 0;
        if (e->mask & IN_IGNORED) {
                dir_forget(w, e->wd);
                return 0;
        }
        /* a directory below the root reports its own end in its parent's events already */
        if (self && *d->rel)
                return 0;
        if (!self) {
                char target[NAME_MAX + 1];

                if (upload_temp(e->name, target))
                        return upload_event(w, d, e, target);
        }
        type = event_type(e->mask);
        if (!type)
                return 0;
        if ((e->mask & IN_MOVED_TO) && e->cookie && e->cookie == w->upload_cookie) {
                type = "write"; /* an upload's temporary file renamed onto its target */
                w->upload_cookie = 0;
        }
        rel = self ? strdup(d->rel) : rel_join(d->rel, e->name);
        if (!rel)
                return -ENOMEM;
        r = event_add(w, type, rel, e->mask & (IN_CREATE | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB));
        if (r < 0)
                return r;
        if (w->recursive && !self && (e->mask & IN_ISDIR) && (e->mask & IN_MOVED_FROM))
                dirs_drop_below(w, rel);
        if (w->recursive && !self && (e->mask & IN_ISDIR) && (e->mask & (IN_CREATE | IN_MOVED_TO)))
                return dir_add(c, w, rel, true);
        return 0;
}

static void watch_read(Channel *c, Watch *w) {
        _cleanup_(identity_leave) FsIdentity saved = {};
        static uint8_t buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t n;

        if (w->as_user && identity_enter(&w->user, &saved) < 0) {
                watch_fail(c, w, EPERM, SPACE_CODE_INVALID, "cannot act as the watch's user");
                return;
        }
        for (;;) {
                n = read(w->fd, buf, sizeof buf);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return;
                for (ssize_t off = 0; off < n;) {
                        const struct inotify_event *e = (const void *) (buf + off);
                        int r = handle_event(c, w, e);

                        if (r == -EOVERFLOW) {
                                watch_fail(c, w, EOVERFLOW, SPACE_CODE_OVERFLOW,
                                           "the kernel's event queue overflowed: events were lost");
                                return;
                        }
                        if (r < 0) {
                                fail_for(c, w, r);
                                return;
                        }
                        off += (ssize_t) sizeof *e + e->len;
                }
        }
}

/* ---- the request ---- */

bool watch_is_request(const uint8_t *p, size_t n) {
        const char *op;

        return space_kv_get(p, n, "op", &op) > 0 && streq(op, "watch");
}

/* NFS, CIFS/SMB and FUSE, where inotify sees only what this guest does (envd refuses them unless asked). */
static bool network_fs(const char *path) {
        struct statfs s;

        if (statfs(path, &s) < 0)
                return false;
        switch ((unsigned long) s.f_type) {
        case 0x6969UL:     /* NFS */
        case 0xFF534D42UL: /* CIFS */
        case 0xFE534D42UL: /* SMB2 */
        case 0x517BUL:     /* SMB */
        case 0x65735546UL: /* FUSE */
                return true;
        default:
                return false;
        }
}

static bool flag(const uint8_t *p, size_t n, const char *key) {
        const char *v;

        return space_kv_get(p, n, key, &v) > 0 && streq(v, "1");
}

/* The watch armed as its user: OK, or ERROR and nothing kept. */
static void watch_arm(Channel *c, Watch *w) {
        _cleanup_(identity_leave) FsIdentity saved = {};
        struct stat st;
        int r;

        errno = 0;
        if (w->as_user && (r = identity_enter(&w->user, &saved)) < 0) {
                watch_fail(c, w, -r, SPACE_CODE_INVALID, "cannot act as the request's user");
                return;
        }
        if (stat(w->root, &st) < 0 || !S_ISDIR(st.st_mode)) {
                int err = errno;
                char msg[256];

                if (err == 0 || (stat(w->root, &st) == 0 && !S_ISDIR(st.st_mode)))
                        err = ENOTDIR;

                (void) snprintf(msg, sizeof msg, "watch %.180s: %s", w->root, strerror(err));
                channel_send_error(c, w->id, err, msg);
                watch_free(w);
                return;
        }
        r = dir_add(c, w, "", false);
        if (r < 0) {
                fail_for(c, w, r);
                return;
        }
        (void) channel_send(c, SPACE_F_OK, 0, w->id, NULL, 0);
}

void watch_handle(Channel *c, uint32_t id, const uint8_t *p, size_t n) {
        const char *path = NULL, *user = NULL;
        Watch *w;

        if (watch_find(id) || stream_find(id)) {
                channel_send_error(c, id, EEXIST, "stream id in use");
                return;
        }
        (void) space_kv_get(p, n, "path", &path);
        (void) space_kv_get(p, n, "user", &user);
        if (!path || path[0] != '/' || strlen(path) > SPACE_FILE_PATH_MAX) {
                channel_send_error(c, id, EINVAL, "the path must be absolute and at most 4096 bytes");
                return;
        }
        if (n_watches >= SPACE_WATCHES_MAX) {
                _cleanup_(space_buf_done) SpaceBuf kv = {};
                char msg[128];

                (void) snprintf(msg, sizeof msg, "%u directory watches are running in the sandbox: stop one first",
                                SPACE_WATCHES_MAX);
                (void) space_kv_addf(&kv, "errno", "%d", EMLINK);
                (void) space_kv_add(&kv, "message", msg);
                (void) space_kv_add(&kv, "code", space_code_to_string(SPACE_CODE_TOO_MANY_WATCHES));
                (void) channel_send_kv(c, SPACE_F_ERROR, id, &kv);
                return;
        }
        w = calloc(1, sizeof *w);
        if (!w || !(w->root = strdup(path))) {
                free(w);
                channel_send_error(c, id, ENOMEM, "out of memory");
                return;
        }
        w->id = id;
        w->recursive = flag(p, n, "recursive");
        w->entry = flag(p, n, "entry");
        space_credit_init(&w->credit);
        w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        w->next = watches;
        watches = w;
        n_watches++;
        if (w->fd < 0) {
                watch_fail(c, w, errno, SPACE_CODE_TOO_MANY_WATCHES, "cannot make an inotify instance");
                return;
        }
        if (user) {
                SpaceCode code;
                char msg[256];
                int r = user_resolve(user, &w->user, &code, msg, sizeof msg);

                if (r < 0) {
                        channel_send_error(c, id, -r, msg); /* "unknown user ..." leads, as files.c's */
                        watch_free(w);
                        return;
                }
                w->as_user = true;
        }
        if (!flag(p, n, "network") && network_fs(path)) {
                watch_fail(c, w, EINVAL, SPACE_CODE_INVALID,
                           "the directory is on a network file system, where changes made elsewhere are not seen");
                return;
        }
        watch_arm(c, w);
}

/* ---- the channel's view ---- */

bool watch_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p) {
        Watch *w = watch_find(h->stream);

        if (!w)
                return false;
        if (h->type == SPACE_F_CREDIT && h->fd == 1 && h->length == 4)
                space_credit_give_clamp(&w->credit, space_get_le32(p));
        else if (h->type == SPACE_F_CLOSE)
                watch_free(w);
        return true;
}

size_t watch_poll_fill(struct pollfd *fds, size_t max) {
        size_t n = 0;

        for (Watch *w = watches; w && n < max; w = w->next)
                fds[n++] = (struct pollfd) { .fd = w->fd, .events = POLLIN };
        return n;
}

void watch_poll_handle(Channel *c, const struct pollfd *fds, size_t n) {
        for (size_t i = 0; i < n; i++) {
                Watch *w;

                if (!fds[i].revents)
                        continue;
                /* found by fd: a watch before it may have ended meanwhile */
                for (w = watches; w && w->fd != fds[i].fd; w = w->next)
                        ;
                if (w)
                        watch_read(c, w);
        }
}

/* The longest run of whole events from out_off within max bytes and SPACE_KV_RECORDS_MAX records. */
static size_t event_chunk(const Watch *w, size_t max) {
        const uint8_t *d = w->out.data;
        size_t pos = w->out_off, cut = 0, records = 0;

        while (pos < w->out.len) {
                size_t l = strnlen((const char *) d + pos, w->out.len - pos) + 1;

                if (pos > w->out_off && l > 3 && memcmp(d + pos, "ev=", 3) == 0)
                        cut = pos - w->out_off;
                if (pos + l - w->out_off > max || ++records > SPACE_KV_RECORDS_MAX)
                        return cut;
                pos += l;
        }
        return pos - w->out_off;
}

static size_t room(const Watch *w) {
        return w->credit.available < SPACE_FRAME_PAYLOAD_MAX ? (size_t) w->credit.available : SPACE_FRAME_PAYLOAD_MAX;
}

static bool can_send(const Watch *w) {
        return w->out_off < w->out.len && event_chunk(w, room(w)) > 0;
}

bool watch_want_pump(const Channel *c) {
        if (channel_queued(c) >= AGENT_OUTQ_HIGH)
                return false;
        for (Watch *w = watches; w; w = w->next)
                if (can_send(w))
                        return true;
        return false;
}

void watch_pump(Channel *c) {
        for (Watch *w = watches; w && channel_queued(c) < AGENT_OUTQ_HIGH; w = w->next)
                while (can_send(w) && channel_queued(c) < AGENT_OUTQ_HIGH) {
                        size_t k = event_chunk(w, room(w));

                        (void) space_credit_take(&w->credit, k);
                        (void) channel_send(c, SPACE_F_DATA, 1, w->id, w->out.data + w->out_off, k);
                        w->out_off += k;
                        if (w->out_off == w->out.len)
                                w->out.len = w->out_off = 0;
                        else if (w->out_off >= SPACE_FRAME_PAYLOAD_MAX) {
                                space_buf_consume(&w->out, w->out_off);
                                w->out_off = 0;
                        }
                }
}

void watch_drop_all(void) {
        while (watches)
                watch_free(watches);
}
