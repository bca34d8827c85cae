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
 * RemoveWatcher (events collected until asked for). Like envd, the guest watches with inotify (the agent's
 * FILE op=watch, guest/agent/watch.c): the request is answered (WatchDir's start event, CreateWatcher's id)
 * only once the agent said the watch is armed, so a change made right after is seen. Events come as the
 * agent's records, checked by channel/files-watch.c, and are turned into envd's FilesystemEvent here; with
 * includeEntry the agent adds the entry (create, write and chmod, as envd).
 *
 * Bounds: WATCH_EVENTS_MAX events kept for a polled watcher (one nobody reads past that ends with
 * resource_exhausted), WATCHERS_MAX watchers in the daemon; a polled watcher nobody asks for
 * WATCHER_IDLE_USEC is dropped; a stream holds at most WATCH_OUT_MAX bytes its client has not read, and one
 * that does not keep up ends with resource_exhausted rather than grow. The agent has bounds of its own
 * (lib/proto.h: directories per watch, events waiting for credit), and says which it hit.
 */

#define WATCH_EVENTS_MAX 4096U
#define WATCHERS_MAX 256U
#define WATCHER_IDLE_USEC (10 * 60 * USEC_PER_SEC)
#define WATCHER_ID_LEN 32
#define WATCH_OUT_MAX (1U * 1024U * 1024U)

static const char *const event_names[_FILE_WATCH_MAX] = {
        [FILE_WATCH_CREATE] = "EVENT_TYPE_CREATE", [FILE_WATCH_WRITE] = "EVENT_TYPE_WRITE",
        [FILE_WATCH_REMOVE] = "EVENT_TYPE_REMOVE", [FILE_WATCH_RENAME] = "EVENT_TYPE_RENAME",
        [FILE_WATCH_CHMOD] = "EVENT_TYPE_CHMOD",
};

typedef struct Watcher Watcher;
struct Watcher {
        Manager *manager;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        char id[WATCHER_ID_LEN + 1];
        char user[E2B_USER_MAX + 1];
        char *path;
        bool recursive, entry, network;
        bool polled;                 /* CreateWatcher's: in the list, read with GetWatcherEvents */
        sd_event_source *timer;
        FileXfer *x;                 /* the agent's watch */
        bool armed;                  /* the agent said so: the request may answer */
        ErrorCode error;             /* it failed: why (the stream ends, GetWatcherEvents says it) */
        char *error_message;

        /* polled */
        cJSON *events;
        uint64_t last_asked;

        /* streamed, and while a CreateWatcher waits for the watch to be armed: the request */
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

static void watch_close(Watcher *w) {
        if (w->x)
                file_xfer_detach(w->x); /* CLOSE: the agent drops its inotify watch */
        w->x = NULL;
}

static void watcher_free(Watcher *w) {
        for (Watcher **i = &watchers; *i; i = &(*i)->next)
                if (*i == w) {
                        *i = w->next;
                        break;
                }
        n_watchers--;
        sd_event_source_disable_unref(w->timer);
        watch_close(w);
        space_buf_done(&w->out);
        cJSON_Delete(w->events);
        free(w->error_message);
        free(w->path);
        free(w);
}

static void arm(Watcher *w, uint64_t usec) {
        (void) sd_event_source_set_time(w->timer, usec);
        (void) sd_event_source_set_enabled(w->timer, SD_EVENT_ONESHOT);
}

/* The watch moved on (from the channel): look at it from the event loop, not from inside the channel. */
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

static void watcher_fail(Watcher *w, ErrorCode code, const char *message) {
        /* message may be the agent's watch's, which watch_close() frees */
        _cleanup_free_ char *copy = strdup(message);

        message = copy ?: "the watch failed";
        if (w->error == ERROR_NONE) {
                w->error = code;
                w->error_message = strdup(message);
        }
        watch_close(w);
        (void) sd_event_source_set_enabled(w->timer, SD_EVENT_OFF);
        if (w->polled && w->armed)
                arm(w, w->last_asked + WATCHER_IDLE_USEC + 1); /* to be dropped once nobody asks */
        if (w->started)
                stream_end(w, error_code_connect(code), message);
        else
                stream_wake(w); /* the request that waits for the watch to be armed answers */
}

/* envd's FilesystemEvent of an agent's event: name below the watched directory, the entry when it came. */
static cJSON *event_json(Watcher *w, const FileWatchEvent *ev) {
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddStringToObject(o, "name", ev->name) ||
            !cJSON_AddStringToObject(o, "type", event_names[ev->type])) {
                cJSON_Delete(o);
                return NULL;
        }
        if (ev->has_entry) {
                _cleanup_free_ char *path = NULL;
                cJSON *e;

                if (streq(ev->name, "."))
                        path = strdup(w->path);
                else if (asprintf(&path, "%s%s%s", w->path, streq(w->path, "/") ? "" : "/", ev->name) < 0)
                        path = NULL;
                e = path ? envd_entry_info(path, &ev->entry, ev->owner, ev->group) : NULL;
                if (!e || !cJSON_AddItemToObject(o, "entry", e)) {
                        cJSON_Delete(e);
                        cJSON_Delete(o);
                        return NULL;
                }
        }
        return o;
}

static void add_event(Watcher *w, const FileWatchEvent *ev) {
        cJSON *o = event_json(w, ev);

        if (!o) {
                watcher_fail(w, ERROR_INTERNAL, "out of memory");
                return;
        }
        if (w->polled) {
                if ((size_t) cJSON_GetArraySize(w->events) >= WATCH_EVENTS_MAX) {
                        cJSON_Delete(o);
                        watcher_fail(w, ERROR_RESOURCE_EXHAUSTED, "over 4096 events waited to be read: watch "
                                     "again, and ask for the events more often");
                        return;
                }
                cJSON_AddItemToArray(w->events, o);
                return;
        }
        if (w->started && !w->ended) {
                cJSON *m = cJSON_CreateObject();
                _cleanup_free_ char *text = NULL;

                if (m && cJSON_AddItemToObject(m, "filesystem", o))
                        text = cJSON_PrintUnformatted(m);
                else
                        cJSON_Delete(o);
                cJSON_Delete(m);
                if (text)
                        stream_message(w, text);
                else
                        watcher_fail(w, ERROR_INTERNAL, "out of memory");
                return;
        }
        cJSON_Delete(o);
}

/* ---- the agent's watch */

static int watch_start(Watcher *w) {
        _cleanup_(error_done) Error err = {};
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        ChannelWaiter wt = { .wake = on_xfer_wake, .userdata = w };
        Sandbox *s = sandbox_find_by_id(w->manager, w->sandbox_id);

        if (!s || s->state != SANDBOX_RUNNING) {
                watcher_fail(w, ERROR_SANDBOX_UNAVAILABLE, "the sandbox is not running");
                return -ENOENT;
        }
        if (space_kv_add(&kv, "op", "watch") < 0 || space_kv_add(&kv, "path", w->path) < 0 ||
            space_kv_add(&kv, "user", w->user) < 0 || space_kv_add(&kv, "recursive", w->recursive ? "1" : "0") < 0 ||
            space_kv_add(&kv, "entry", w->entry ? "1" : "0") < 0 ||
            space_kv_add(&kv, "network", w->network ? "1" : "0") < 0) {
                watcher_fail(w, ERROR_INTERNAL, "out of memory");
                return -ENOMEM;
        }
        if (file_xfer_start(s, "watch", w->path, &kv, &wt, &w->x, &err) < 0) {
                watcher_fail(w, err.code ?: ERROR_INTERNAL, error_message(&err));
                return -EIO;
        }
        return 0;
}

/* The agent's watch ended (its ERROR, or the channel went): the watcher fails with why. */
static void watch_failed(Watcher *w) {
        const char *m = w->x->error_message ?: "the watch failed";

        watcher_fail(w, strncmp(m, "unknown user", 12) == 0 ? ERROR_UNAUTHORIZED : w->x->error_code ?: ERROR_IO_ERROR,
                     m);
}

/* What the agent sent since: the answer to the arming, events, or the end. */
static void watch_collect(Watcher *w) {
        FileWatchEvent ev;
        int k;

        if (!w->x || w->x->state == FILE_XFER_SENT)
                return;
        if (!w->armed && w->x->state != FILE_XFER_OPEN) {
                watch_failed(w); /* refused: the request answers with why */
                return;
        }
        if (!w->armed) {
                w->armed = true;
                w->last_asked = now_usec();
                stream_wake(w); /* the request waiting for the watch answers now */
        }
        /* a stream's events wait (in the transfer, under credit) until its start is out */
        if (!w->polled && !w->started)
                return;
        while (w->x && (k = file_xfer_next_event(w->x, &ev)) != 0) {
                if (k > 0)
                        add_event(w, &ev);
                else
                        watch_failed(w);
        }
}

static int on_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        Watcher *w = userdata;
        uint64_t now = now_usec();

        if (w->polled && !w->r && now - w->last_asked > WATCHER_IDLE_USEC) {
                watcher_free(w);
                return 0;
        }
        if (w->error != ERROR_NONE || w->ended)
                return 0;
        if (!w->x && !w->armed) {
                (void) watch_start(w);
                return 0;
        }
        watch_collect(w);
        if (w->error != ERROR_NONE || w->ended)
                return 0;
        if (!w->polled && w->started) {
                if (w->deadline && now >= w->deadline) {
                        stream_end(w, CONNECT_DEADLINE_EXCEEDED, "the watch's time is up");
                        return 0;
                }
                if (w->keepalive_usec && now - w->last_sent >= w->keepalive_usec)
                        stream_message(w, "{\"keepalive\":{}}");
        }
        /* woken again when the guest sends; a deadline, a keepalive and the idle check still need the clock */
        arm(w, now + USEC_PER_SEC);
        return 0;
}

static Watcher *watcher_new(Request *r, Sandbox *s, const char *user, const char *path, cJSON *msg) {
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
        w->recursive = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(msg, "recursive"));
        w->entry = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(msg, "includeEntry"));
        w->network = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(msg, "allowNetworkMounts"));
        w->r = r;
        w->last_asked = now_usec();
        w->next = watchers;
        watchers = w;
        n_watchers++;
        return w; /* its timer, due at once, starts the agent's watch from the event loop */
}

/* The request message's path and recursive, and the sandbox and user: the new watcher, NULL when answered
 * or parked. */
static Watcher *watch_request(Request *r, bool streaming) {
        _cleanup_free_ char *path = NULL;
        char user[E2B_USER_MAX + 1];
        cJSON *o, *p, *rec, *inc, *net;
        Watcher *w = NULL;
        Sandbox *s;

        o = connect_request_message(r, streaming);
        if (!o)
                return NULL;
        p = cJSON_GetObjectItemCaseSensitive(o, "path");
        rec = cJSON_GetObjectItemCaseSensitive(o, "recursive");
        inc = cJSON_GetObjectItemCaseSensitive(o, "includeEntry");
        net = cJSON_GetObjectItemCaseSensitive(o, "allowNetworkMounts");
        if ((p && !cJSON_IsString(p)) || (rec && !cJSON_IsBool(rec) && !cJSON_IsNull(rec)) ||
            (inc && !cJSON_IsBool(inc) && !cJSON_IsNull(inc)) || (net && !cJSON_IsBool(net) && !cJSON_IsNull(net)))
                http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                   "path must be a string; recursive, includeEntry and allowNetworkMounts true or false");
        else if (envd_fs_target(r, &s, user, p ? p->valuestring : "", &path) > 0)
                w = watcher_new(r, s, user, path, o);
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

/* The agent armed the watch, or it failed before: answers with the stream. */
static void watch_started(Request *r, void *userdata) {
        Watcher *w = userdata;

        if (!w->armed && w->error == ERROR_NONE) {
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
                arm(w, 1); /* the events that came meanwhile */
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
        if (w->error != ERROR_NONE || !w->armed)
                watcher_free(w);
}

/* The agent armed the watch, or it failed before: answers with the watcher's id. */
static void watcher_created(Request *r, void *userdata) {
        Watcher *w = userdata;
        cJSON *o;

        if (!w->armed && w->error == ERROR_NONE) {
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
                        if (w->polled && w->armed && streq(w->id, id->valuestring) && streq(w->sandbox_id, s->id))
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
        if (w->error == ERROR_NONE)
                watch_collect(w); /* what the channel brought since the timer last looked */
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
