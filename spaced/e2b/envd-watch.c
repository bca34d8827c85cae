/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "core/util.h"
#include "e2b/envd-files.h"
#include "macro.h"
#include "string-util.h"

/*
 * envd's directory watching: WatchDir (a server stream of events) and CreateWatcher / GetWatcherEvents /
 * RemoveWatcher (events collected until asked for). envd uses inotify in the guest; we poll instead: every
 * WATCH_POLL_USEC the directory is listed (one FILE list of the agent, as the user) and compared with the
 * listing before, by name, type, size, mtime and mode. So events come up to a poll late, a rename is a REMOVE
 * and a CREATE, changes that undo themselves between two polls are not seen, and a write is one WRITE however
 * many writes there were. A new file that has data is CREATE then WRITE, as inotify would say.
 *
 * Bounds: a listing of at most WATCH_JSON_MAX bytes (a recursive watch of a big tree fails with
 * resource_exhausted), WATCH_EVENTS_MAX events kept for a polled watcher (the rest are dropped),
 * WATCHERS_MAX watchers in the daemon; a polled watcher nobody asks for WATCHER_IDLE_USEC is dropped; a
 * stream holds at most WATCH_OUT_MAX bytes its client has not read, and one that does not keep up with a
 * churning directory ends with resource_exhausted rather than grow.
 */

#define WATCH_POLL_USEC (200 * USEC_PER_MSEC)
#define WATCH_JSON_MAX (2U * 1024U * 1024U)
#define WATCH_EVENTS_MAX 4096U
#define WATCHERS_MAX 256U
#define WATCHER_IDLE_USEC (10 * 60 * USEC_PER_SEC)
#define WATCHER_ID_LEN 32
#define WATCH_OUT_MAX (1U * 1024U * 1024U)

enum { EV_CREATE, EV_WRITE, EV_REMOVE, EV_RENAME, EV_CHMOD };
static const char *const event_names[] = { "EVENT_TYPE_CREATE", "EVENT_TYPE_WRITE", "EVENT_TYPE_REMOVE",
                                           "EVENT_TYPE_RENAME", "EVENT_TYPE_CHMOD" };

typedef struct SnapEntry {
        char *name; /* below the watched directory */
        bool dir;
        uint64_t size;
        int64_t mtime;
        unsigned mode;
} SnapEntry;

typedef struct Snapshot {
        SnapEntry *e;
        size_t n;
} Snapshot;

typedef struct Watcher Watcher;
struct Watcher {
        Manager *manager;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        char id[WATCHER_ID_LEN + 1];
        char user[E2B_USER_MAX + 1];
        char *path;
        bool recursive;
        bool polled;                 /* CreateWatcher's: in the list, read with GetWatcherEvents */
        sd_event_source *timer;
        FileXfer *x;                 /* the listing in flight */
        SpaceBuf json;
        Snapshot snap;
        bool have_snap;
        ErrorCode error;             /* it failed: why (the stream ends, GetWatcherEvents says it) */
        char *error_message;

        /* polled */
        cJSON *events;
        uint64_t last_asked;

        /* streamed, and while a CreateWatcher waits for the first listing: the request */
        Request *r;
        bool responding;             /* the stream's response still reads out */
        bool started;
        bool ended;
        SpaceBuf out;
        size_t out_off;
        uint64_t deadline;           /* monotonic usec, 0: none */
        uint64_t keepalive_usec;
        uint64_t last_sent;

        Watcher *next;
};

static Watcher *watchers;
static unsigned n_watchers;

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

static void snapshot_done(Snapshot *s) {
        for (size_t i = 0; i < s->n; i++)
                free(s->e[i].name);
        free(s->e);
        *s = (Snapshot) {};
}

static void watcher_free(Watcher *w) {
        for (Watcher **i = &watchers; *i; i = &(*i)->next)
                if (*i == w) {
                        *i = w->next;
                        break;
                }
        n_watchers--;
        sd_event_source_disable_unref(w->timer);
        if (w->x)
                file_xfer_detach(w->x);
        space_buf_done(&w->json);
        space_buf_done(&w->out);
        snapshot_done(&w->snap);
        cJSON_Delete(w->events);
        free(w->error_message);
        free(w->path);
        free(w);
}

static void arm(Watcher *w, uint64_t usec) {
        (void) sd_event_source_set_time(w->timer, usec);
        (void) sd_event_source_set_enabled(w->timer, SD_EVENT_ONESHOT);
}

/* The listing moved on (from the channel): look at it from the event loop, not from inside the channel. */
static void on_xfer_wake(void *userdata) {
        arm(userdata, 1);
}

/* ---- the stream's output */

static void stream_wake(Watcher *w) {
        if (w->r)
                http_resume(w->r);
}

static void watcher_fail(Watcher *w, ErrorCode code, const char *message);

static void stream_message(Watcher *w, const char *json) {
        size_t n = strlen(json);

        if (w->ended)
                return;
        if (w->out.len - w->out_off + 5 + n > WATCH_OUT_MAX) {
                watcher_fail(w, ERROR_RESOURCE_EXHAUSTED, "the client did not read the watch's events as fast as "
                             "they came: over 1 MiB of them waited; watch again, and read the stream as it comes");
                return;
        }
        if (connect_envelope_append(&w->out, 0, json, n) >= 0) {
                w->last_sent = now_usec();
                stream_wake(w);
        }
}

static void stream_end(Watcher *w, ConnectCode code, const char *message) {
        if (w->ended)
                return;
        (void) connect_end_stream_append(&w->out, code, message);
        w->ended = true;
        (void) sd_event_source_set_enabled(w->timer, SD_EVENT_OFF);
        stream_wake(w);
}

static void add_event(Watcher *w, const char *name, int type) {
        if (w->polled) {
                cJSON *o;

                if ((size_t) cJSON_GetArraySize(w->events) >= WATCH_EVENTS_MAX)
                        return;
                o = cJSON_CreateObject();
                if (!o || !cJSON_AddStringToObject(o, "name", name) ||
                    !cJSON_AddStringToObject(o, "type", event_names[type]) || !cJSON_AddItemToArray(w->events, o))
                        cJSON_Delete(o);
                return;
        }
        if (w->started && !w->ended) {
                cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "filesystem");
                _cleanup_free_ char *text = NULL;

                if (e && cJSON_AddStringToObject(e, "name", name) && cJSON_AddStringToObject(e, "type", event_names[type]))
                        text = cJSON_PrintUnformatted(o);
                cJSON_Delete(o);
                if (text)
                        stream_message(w, text);
        }
}

/* ---- listings */

static int cmp_entries(const void *a, const void *b) {
        return strcmp(((const SnapEntry *) a)->name, ((const SnapEntry *) b)->name);
}

/* The listing's JSON (channel/files.c's) as a snapshot sorted by name. */
static int snapshot_parse(Watcher *w, Snapshot *ret) {
        size_t plen = strlen(w->path);
        Snapshot s = {};
        cJSON *doc, *list, *it;
        int n;

        doc = cJSON_ParseWithLength((const char *) w->json.data, w->json.len);
        list = cJSON_GetObjectItemCaseSensitive(doc, "entries");
        if (!cJSON_IsArray(list)) {
                cJSON_Delete(doc);
                return -EBADMSG;
        }
        n = cJSON_GetArraySize(list);
        s.e = calloc((size_t) n + 1, sizeof *s.e);
        if (!s.e) {
                cJSON_Delete(doc);
                return -ENOMEM;
        }
        cJSON_ArrayForEach(it, list) {
                cJSON *path = cJSON_GetObjectItemCaseSensitive(it, "path"),
                      *type = cJSON_GetObjectItemCaseSensitive(it, "type"),
                      *size = cJSON_GetObjectItemCaseSensitive(it, "size"),
                      *mtime = cJSON_GetObjectItemCaseSensitive(it, "mtime"),
                      *mode = cJSON_GetObjectItemCaseSensitive(it, "mode");
                const char *rel;

                if (!cJSON_IsString(path) || !cJSON_IsString(type) || !cJSON_IsNumber(size) ||
                    !cJSON_IsNumber(mtime) || !cJSON_IsNumber(mode) || strncmp(path->valuestring, w->path, plen) != 0)
                        continue;
                rel = path->valuestring + plen;
                if (*rel == '/')
                        rel++;
                if (!*rel)
                        continue;
                s.e[s.n] = (SnapEntry) { .name = strdup(rel), .dir = streq(type->valuestring, "dir"),
                                         .size = (uint64_t) size->valuedouble, .mtime = (int64_t) mtime->valuedouble,
                                         .mode = (unsigned) mode->valueint };
                if (!s.e[s.n].name) {
                        snapshot_done(&s);
                        cJSON_Delete(doc);
                        return -ENOMEM;
                }
                s.n++;
        }
        cJSON_Delete(doc);
        qsort(s.e, s.n, sizeof *s.e, cmp_entries);
        *ret = s;
        return 0;
}

/* Events from the difference of two snapshots, both sorted by name. */
static void diff(Watcher *w, const Snapshot *old, const Snapshot *new) {
        size_t i = 0, j = 0;

        while (i < old->n || j < new->n) {
                int c = i >= old->n ? 1 : j >= new->n ? -1 : strcmp(old->e[i].name, new->e[j].name);

                if (c < 0) {
                        add_event(w, old->e[i++].name, EV_REMOVE);
                        continue;
                }
                if (c > 0 || old->e[i].dir != new->e[j].dir) {
                        if (c == 0)
                                add_event(w, old->e[i++].name, EV_REMOVE);
                        add_event(w, new->e[j].name, EV_CREATE);
                        if (!new->e[j].dir && new->e[j].size > 0)
                                add_event(w, new->e[j].name, EV_WRITE);
                        j++;
                        continue;
                }
                /* a directory's size and mtime change with its entries, which are events of their own */
                if (!new->e[j].dir && (old->e[i].size != new->e[j].size || old->e[i].mtime != new->e[j].mtime))
                        add_event(w, new->e[j].name, EV_WRITE);
                else if (old->e[i].mode != new->e[j].mode)
                        add_event(w, new->e[j].name, EV_CHMOD);
                i++;
                j++;
        }
}

static void watcher_fail(Watcher *w, ErrorCode code, const char *message) {
        if (w->error == ERROR_NONE) {
                w->error = code;
                w->error_message = strdup(message);
        }
        (void) sd_event_source_set_enabled(w->timer, SD_EVENT_OFF);
        if (w->polled && w->have_snap)
                arm(w, w->last_asked + WATCHER_IDLE_USEC + 1); /* to be dropped once nobody asks */
        if (w->started)
                stream_end(w, error_code_connect(code), message);
        else
                stream_wake(w); /* the request that waits for the first listing answers */
}

static int poll_start(Watcher *w) {
        _cleanup_(error_done) Error err = {};
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        ChannelWaiter wt = { .wake = on_xfer_wake, .userdata = w };
        Sandbox *s = sandbox_find_by_id(w->manager, w->sandbox_id);

        if (!s || s->state != SANDBOX_RUNNING) {
                watcher_fail(w, ERROR_SANDBOX_UNAVAILABLE, "the sandbox is not running");
                return -ENOENT;
        }
        if (space_kv_add(&kv, "op", "list") < 0 || space_kv_add(&kv, "path", w->path) < 0 ||
            space_kv_add(&kv, "user", w->user) < 0 ||
            space_kv_addf(&kv, "depth", "%u", w->recursive ? SPACE_FILE_LIST_DEPTH_MAX : 1U) < 0) {
                watcher_fail(w, ERROR_INTERNAL, "out of memory");
                return -ENOMEM;
        }
        if (file_xfer_start(s, "list", w->path, &kv, &wt, &w->x, &err) < 0) {
                /* too many transfers at once is no reason to stop watching: try again next time */
                if (err.code == ERROR_TOO_MANY_TRANSFERS) {
                        arm(w, now_usec() + WATCH_POLL_USEC);
                        return 0;
                }
                watcher_fail(w, err.code ?: ERROR_INTERNAL, error_message(&err));
                return -EIO;
        }
        w->json.len = 0;
        return 0;
}

/* The listing in flight moved on: 1 when it is complete (w->json), 0 when it still comes, < 0 failed. */
static int poll_collect(Watcher *w) {
        char buf[64 * 1024];

        if (w->x->state == FILE_XFER_SENT)
                return 0;
        for (;;) {
                ssize_t n;

                if (w->x->state == FILE_XFER_FAILED) {
                        const char *m = w->x->error_message ?: "the listing failed";

                        watcher_fail(w, strncmp(m, "unknown user", 12) == 0 ? ERROR_UNAUTHORIZED : w->x->error_code ?: ERROR_IO_ERROR, m);
                        return -EIO;
                }
                n = file_xfer_read(w->x, buf, sizeof buf);
                if (n == CHANNEL_READ_END)
                        return 1;
                if (n == 0)
                        return 0;
                if (n < 0)
                        continue; /* failed: said above */
                if (w->json.len + (size_t) n > WATCH_JSON_MAX) {
                        watcher_fail(w, ERROR_LIMIT_EXCEEDED,
                                     "the watched directory has too many entries to watch (its listing is over 2 MiB)");
                        return -E2BIG;
                }
                if (space_buf_append(&w->json, buf, (size_t) n) < 0) {
                        watcher_fail(w, ERROR_INTERNAL, "out of memory");
                        return -ENOMEM;
                }
        }
}

static void poll_finish(Watcher *w) {
        Snapshot s;

        file_xfer_detach(w->x);
        w->x = NULL;
        if (snapshot_parse(w, &s) < 0) {
                watcher_fail(w, ERROR_PROTOCOL_ERROR, "cannot read the listing");
                return;
        }
        if (w->have_snap)
                diff(w, &w->snap, &s);
        snapshot_done(&w->snap);
        w->snap = s;
        if (!w->have_snap) {
                w->have_snap = true;
                stream_wake(w); /* the request waiting for the first listing answers now */
        }
}

static int on_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        Watcher *w = userdata;
        uint64_t now = now_usec();
        int k;

        if (w->polled && !w->r && now - w->last_asked > WATCHER_IDLE_USEC) {
                watcher_free(w);
                return 0;
        }
        if (!w->polled && w->started) {
                if (w->deadline && now >= w->deadline) {
                        stream_end(w, CONNECT_DEADLINE_EXCEEDED, "the watch's time is up");
                        return 0;
                }
                if (w->keepalive_usec && now - w->last_sent >= w->keepalive_usec)
                        stream_message(w, "{\"keepalive\":{}}");
        }
        if (w->error != ERROR_NONE || w->ended)
                return 0;
        if (!w->x) {
                (void) poll_start(w);
                return 0;
        }
        k = poll_collect(w);
        if (k < 0)
                return 0;
        if (k == 0) {
                /* woken again when the guest sends; a deadline or keepalive still needs the clock */
                if (w->started && (w->deadline || w->keepalive_usec))
                        arm(w, now + USEC_PER_SEC);
                return 0;
        }
        poll_finish(w);
        if (w->error == ERROR_NONE)
                arm(w, now + WATCH_POLL_USEC);
        return 0;
}

static Watcher *watcher_new(Request *r, Sandbox *s, const char *user, const char *path, bool recursive) {
        Watcher *w;

        if (n_watchers >= WATCHERS_MAX) {
                http_respond_error(r, ERROR_LIMIT_EXCEEDED, "%u directory watchers are running: stop one first",
                                   WATCHERS_MAX);
                return NULL;
        }
        w = calloc(1, sizeof *w);
        if (!w || !(w->path = strdup(path)) || random_hex(w->id, WATCHER_ID_LEN) < 0 ||
            sd_event_add_time(s->manager->event, &w->timer, CLOCK_MONOTONIC, 1, 1000, on_timer, w) < 0) {
                if (w) {
                        free(w->path);
                        free(w);
                }
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return NULL;
        }
        w->manager = s->manager;
        memcpy(w->sandbox_id, s->id, sizeof w->sandbox_id);
        snprintf(w->user, sizeof w->user, "%s", user);
        w->recursive = recursive;
        w->r = r;
        w->last_asked = now_usec();
        w->next = watchers;
        watchers = w;
        n_watchers++;
        return w;
}

/* The request message's path and recursive, and the sandbox and user: the new watcher, NULL when answered
 * or parked. */
static Watcher *watch_request(Request *r, bool streaming) {
        _cleanup_free_ char *path = NULL;
        char user[E2B_USER_MAX + 1];
        cJSON *o, *p, *rec;
        Watcher *w = NULL;
        Sandbox *s;

        o = connect_request_message(r, streaming);
        if (!o)
                return NULL;
        p = cJSON_GetObjectItemCaseSensitive(o, "path");
        rec = cJSON_GetObjectItemCaseSensitive(o, "recursive");
        if ((p && !cJSON_IsString(p)) || (rec && !cJSON_IsBool(rec) && !cJSON_IsNull(rec)))
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "path must be a string, recursive true or false");
        else if (envd_fs_target(r, &s, user, p ? p->valuestring : "", &path) > 0)
                w = watcher_new(r, s, user, path, cJSON_IsTrue(rec));
        cJSON_Delete(o);
        return w;
}

/* ---- WatchDir */

static ssize_t stream_read(void *userdata, char *buf, size_t max) {
        Watcher *w = userdata;
        size_t n = w->out.len - w->out_off;

        if (n == 0) {
                w->out.len = w->out_off = 0;
                return w->ended ? HTTP_STREAM_END : 0;
        }
        if (n > max)
                n = max;
        memcpy(buf, w->out.data + w->out_off, n);
        w->out_off += n;
        /* a client that reads a little at a time must not keep what it read */
        if (w->out_off >= 64 * 1024) {
                space_buf_consume(&w->out, w->out_off);
                w->out_off = 0;
        }
        return (ssize_t) n;
}

static void stream_detach(void *userdata, Request *r) {
        Watcher *w = userdata;

        w->r = NULL;
        if (!w->responding)
                watcher_free(w);
        else
                (void) sd_event_source_set_enabled(w->timer, SD_EVENT_OFF); /* nobody reads on */
}

static void stream_release(void *userdata) {
        Watcher *w = userdata;

        w->responding = false;
        if (!w->r)
                watcher_free(w);
}

/* The first listing is in, or the watch failed before it: answers with the stream. */
static void watch_started(Request *r, void *userdata) {
        Watcher *w = userdata;

        if (!w->have_snap && w->error == ERROR_NONE) {
                http_continue(r, watch_started, w);
                return;
        }
        if (w->error != ERROR_NONE) {
                /* a streaming call's errors are a 200 with an error at the end (the SDKs read that) */
                (void) connect_end_stream_append(&w->out, error_code_connect(w->error), w->error_message);
                w->ended = true;
        } else {
                w->started = true;
                stream_message(w, "{\"start\":{}}");
        }
        r->stream.read = stream_read;
        r->stream.release = stream_release;
        w->responding = true;
        if (http_respond_stream(r, connect_stream_headers) < 0 && !r->responded) {
                w->responding = false;
                http_respond_error(r, ERROR_INTERNAL, "cannot answer the request");
        }
}

void envd_watch_dir(Request *r, const RouteArgs *a) {
        uint64_t timeout_ms;
        Watcher *w;

        if (connect_timeout_ms(r, &timeout_ms) < 0)
                return;
        w = watch_request(r, true);
        if (!w)
                return;
        w->deadline = timeout_ms ? now_usec() + timeout_ms * USEC_PER_MSEC : 0;
        w->keepalive_usec = (uint64_t) connect_keepalive_sec(r) * USEC_PER_SEC;
        r->stream = (HttpStream) { .detach = stream_detach, .userdata = w };
        http_continue(r, watch_started, w);
}

/* ---- CreateWatcher, GetWatcherEvents, RemoveWatcher */

static void create_detach(void *userdata, Request *r) {
        Watcher *w = userdata;

        w->r = NULL;
        /* one that failed (or never answered) is of no use to anybody */
        if (w->error != ERROR_NONE || !w->have_snap)
                watcher_free(w);
}

/* The first listing is in, or the watch failed before it: answers with the watcher's id. */
static void watcher_created(Request *r, void *userdata) {
        Watcher *w = userdata;
        cJSON *o;

        if (!w->have_snap && w->error == ERROR_NONE) {
                http_continue(r, watcher_created, w);
                return;
        }
        if (w->error != ERROR_NONE) {
                http_respond_error(r, w->error, "%s", w->error_message ?: "the watch failed");
                return;
        }
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "watcherId", w->id);
        w->last_asked = now_usec();
        connect_respond(r, o);
}

void envd_create_watcher(Request *r, const RouteArgs *a) {
        Watcher *w = watch_request(r, false);

        if (!w)
                return;
        w->polled = true;
        w->events = cJSON_CreateArray();
        if (!w->events) {
                watcher_free(w);
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        }
        r->stream = (HttpStream) { .detach = create_detach, .userdata = w };
        http_continue(r, watcher_created, w);
}

/* The polled watcher the message's watcherId names, of the request's sandbox; NULL when answered. */
static Watcher *find_watcher(Request *r, cJSON **ret_msg) {
        cJSON *o = connect_request_message(r, false), *id;
        Sandbox *s;

        *ret_msg = o;
        if (!o)
                return NULL;
        if (e2b_envd_sandbox(r, &s) <= 0)
                return NULL;
        id = cJSON_GetObjectItemCaseSensitive(o, "watcherId");
        if (cJSON_IsString(id))
                for (Watcher *w = watchers; w; w = w->next)
                        if (w->polled && w->have_snap && streq(w->id, id->valuestring) && streq(w->sandbox_id, s->id))
                                return w;
        http_respond_error(r, ERROR_NOT_FOUND, "no watcher %.64s in this sandbox",
                           cJSON_IsString(id) ? id->valuestring : "(none)");
        return NULL;
}

void envd_get_watcher_events(Request *r, const RouteArgs *a) {
        cJSON *msg, *o;
        Watcher *w = find_watcher(r, &msg);

        cJSON_Delete(msg);
        if (!w)
                return;
        w->last_asked = now_usec();
        if (w->error != ERROR_NONE && cJSON_GetArraySize(w->events) == 0)
                return (void) http_respond_error(r, w->error, "%s", w->error_message ?: "the watch failed");
        o = cJSON_CreateObject();
        if (!o)
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        cJSON_AddItemToObject(o, "events", w->events);
        w->events = cJSON_CreateArray();
        connect_respond(r, o);
}

void envd_remove_watcher(Request *r, const RouteArgs *a) {
        cJSON *msg;
        Watcher *w = find_watcher(r, &msg);

        cJSON_Delete(msg);
        if (!w)
                return;
        watcher_free(w);
        connect_respond(r, NULL);
}
