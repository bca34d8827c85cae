/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel/files.h"
#include "core/log.h"
#include "macro.h"
#include "utf8.h"
#include "core/util.h"
#include "channel/channel.h"

/* File transfers on the channel: see files.h. */

#define CREDIT_BATCH (64U * 1024U)

static Sandbox *xfer_sandbox(FileXfer *x) {
        return channel_sandbox ? channel_sandbox->find(x->manager, x->sandbox_id) : NULL;   /* unset: none known */
}

/* A transfer in progress is use of the sandbox: it must not be suspended for being idle meanwhile. */
static void touch(FileXfer *x) {
        Sandbox *s = xfer_sandbox(x);

        if (s)
                channel_sandbox->touch(s);
}

static void wake_request(FileXfer *x) {
        channel_waiter_wake(&x->waiter);
}

/* Forgets the stream on our side; close: tell the guest to forget it too (it has not finished). */
static void xfer_unregister(FileXfer *x, bool close) {
        if (!x->agent)
                return;
        if (close)
                (void) agent_send(x->agent, SPACE_F_CLOSE, 0, x->stream, NULL, 0);
        agent_unregister_file(x->agent, x);
}

static void xfer_free(FileXfer *x) {
        xfer_unregister(x, x->state == FILE_XFER_SENT || x->state == FILE_XFER_OPEN);
        space_buf_done(&x->reply);
        space_buf_done(&x->out);
        free(x->path);
        free(x->error_message);
        free(x);
}

static void xfer_maybe_free(FileXfer *x) {
        if (!x->waiter.wake && !x->reader_open)
                xfer_free(x);
}

/* Ends the transfer with an error (the first one wins); the guest forgets the stream after an ERROR, we
 * make it forget it after anything else. */
static void xfer_fail(FileXfer *x, ErrorCode code, const char *message, bool tell_guest) {
        /* Finished already (a read or list has all its data): nothing can fail any more. */
        if (x->state == FILE_XFER_FAILED || x->state == FILE_XFER_DONE || x->eof)
                return;
        free(x->error_message);
        x->error_code = code;
        x->error_message = strdup(message);
        x->state = FILE_XFER_FAILED;
        xfer_unregister(x, tell_guest);
        wake_request(x);
}

static void protocol_error(FileXfer *x, const char *what) {
        _cleanup_free_ char *msg = NULL;

        log_warning("sandbox %s: file %s of %s: %s", x->sandbox_id, x->op, x->path, what);
        (void) asprintf(&msg, "the sandbox's agent broke the protocol (%s)", what);
        xfer_fail(x, ERROR_PROTOCOL_ERROR, msg ?: what, true);
}

void file_xfer_detach(FileXfer *x) {
        x->waiter = (ChannelWaiter) {};
        xfer_maybe_free(x);
}

int file_xfer_start(Sandbox *s, const char *op, const char *path, const SpaceBuf *kv, const ChannelWaiter *waiter,
                    FileXfer **ret, Error *reterr) {
        FileXfer *x;
        int q;

        if (!channel_sandbox->channel(s)->agent)
                return error_set(reterr, ERROR_SANDBOX_NOT_RUNNING,
                                 "sandbox %s is not connected to its agent (state %s)", channel_sandbox->id(s),
                                 channel_sandbox->state_name(s)) ?: -ENOTCONN;
        if (kv->len > SPACE_FRAME_PAYLOAD_MAX)
                return error_set(reterr, ERROR_INVALID_PATH, "the paths of this request are too long") ?: -E2BIG;
        x = calloc(1, sizeof *x);
        if (!x || !(x->path = strdup(path))) {
                free(x);
                return -ENOMEM;
        }
        x->manager = channel_sandbox->manager(s);
        memcpy(x->sandbox_id, channel_sandbox->id(s), sizeof x->sandbox_id);
        snprintf(x->op, sizeof x->op, "%s", op);
        x->credit_left = SPACE_STREAM_WINDOW;
        space_credit_init(&x->send_credit);
        q = agent_register_file(channel_sandbox->channel(s)->agent, x);
        if (q < 0) {
                xfer_free(x);
                return error_set(reterr, ERROR_TOO_MANY_TRANSFERS,
                                 "sandbox %s has %u file transfers running; try again when one ended", channel_sandbox->id(s),
                                 SPACE_FILE_XFERS_MAX) ?: q;
        }
        q = agent_send(x->agent, SPACE_F_FILE, 0, x->stream, kv->data, kv->len);
        if (q < 0) {
                agent_unregister_file(x->agent, x);
                xfer_free(x);
                return error_set(reterr, ERROR_SANDBOX_BUSY, "cannot send to the sandbox's agent: %s",
                                 strerror(-q)) ?: q;
        }
        x->waiter = *waiter;
        touch(x);
        *ret = x;
        return 0;
}

void file_xfer_lost(FileXfer *x, const char *message) {
        x->agent = NULL; /* agent.c unlinked it */
        x->agent_next = NULL;
        xfer_fail(x, ERROR_CHANNEL_LOST, message, false);
}

/* ---- what the guest sends ---- */

static int parse_i64(const char *s, int64_t *ret) {
        char *end;
        long long v;

        if (!s[0] || s[0] == ' ' || s[0] == '+')
                return -EBADMSG;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno || *end)
                return -EBADMSG;
        *ret = v;
        return 0;
}

/* A path below the listed directory: 1..SPACE_FILE_NAME_MAX byte names joined by single '/', none of them
 * "." or "..". */
bool file_rel_valid(const char *rel) {
        size_t n = strlen(rel);

        if (n == 0 || n > SPACE_FILE_PATH_MAX)
                return false;
        for (const char *c = rel;;) {
                size_t l = strcspn(c, "/");

                if (l == 0 || l > SPACE_FILE_NAME_MAX || (l == 1 && c[0] == '.') ||
                    (l == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                c += l;
                if (!*c)
                        return true;
                c++;
        }
}

static int parse_type(const char *v, bool link_ok, FileEntryType *ret) {
        if (streq(v, "file"))
                *ret = FILE_ENTRY_FILE;
        else if (streq(v, "dir"))
                *ret = FILE_ENTRY_DIR;
        else if (link_ok && streq(v, "symlink"))
                *ret = FILE_ENTRY_SYMLINK;
        else if (streq(v, "other"))
                *ret = FILE_ENTRY_OTHER;
        else
                return -EBADMSG;
        return 0;
}

/* One metadata pair (meta_key= then meta_value=) within envd's bounds, counted into *total. */
static int check_meta(const char *key, const char *value, size_t *total) {
        size_t kl = strlen(key), vl = strlen(value);

        if (kl == 0 || kl > SPACE_FILE_META_KEY_MAX || !utf8_valid(key, kl) || !utf8_valid(value, vl))
                return -EBADMSG;
        *total += strlen(SPACE_FILE_META_PREFIX) + kl + vl;
        return *total > SPACE_FILE_META_BYTES_MAX ? -EBADMSG : 0;
}

/* The records of a symlink's resolution and of metadata: 1 when k was one of them, 0 when not. */
static int parse_entry_extra(const char *k, size_t klen, const char *v, FileEntry *e, const char **meta_key,
                             size_t *meta_total) {
        uint64_t u;

#define KEY(s) (klen == sizeof(s) - 1 && memcmp(k, s, klen) == 0)
        if (*meta_key) {
                /* a key's value comes right after it */
                if (!KEY("meta_value") || check_meta(*meta_key, v, meta_total) < 0)
                        return -EBADMSG;
                *meta_key = NULL;
                e->n_meta++;
        } else if (KEY("meta_key"))
                *meta_key = v;
        else if (KEY("meta_value"))
                return -EBADMSG;
        else if (KEY("resolved")) {
                if (strlen(v) > SPACE_FILE_PATH_MAX || (v[0] && v[0] != '/'))
                        return -EBADMSG;
                e->resolved = v;
        } else if (KEY("target_type")) {
                if (parse_type(v, false, &e->target_type) < 0) /* stat() followed every link */
                        return -EBADMSG;
                e->has_target_type = true;
        } else if (KEY("target_mode")) {
                if (space_kv_parse_u64(v, 07777, &u) < 0)
                        return -EBADMSG;
                e->target_mode = (unsigned) u;
        } else
                return 0;
#undef KEY
        return 1;
}

int file_entry_parse(const uint8_t *p, size_t n, size_t *offset, bool list, FileEntry *ret) {
        FileEntry e = {};
        bool have_type = false, have_mode = false, have_size = false, have_mtime = false, have_uid = false,
             have_gid = false;
        size_t off = *offset, klen, meta_total = 0;
        const char *k, *v, *meta_key = NULL;
        uint64_t u;
        int r;

        for (bool first = true;; first = false) {
                size_t at = off;

                r = space_kv_next(p, n, &off, &k, &klen, &v);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
#define KEY(s) (klen == sizeof(s) - 1 && memcmp(k, s, klen) == 0)
                if (KEY("ev") && !first && !meta_key) {
                        off = at; /* a watch's next event (files-watch.c) */
                        break;
                }
                if (KEY("rel") && !meta_key) {
                        if (!list)
                                continue;
                        if (!first) {
                                off = at; /* the next entry's */
                                break;
                        }
                        if (!file_rel_valid(v))
                                return -EBADMSG;
                        e.rel = v;
                } else if (list && first)
                        return -EBADMSG; /* a list entry starts with its name */
                else if ((r = parse_entry_extra(k, klen, v, &e, &meta_key, &meta_total)) != 0) {
                        if (r < 0)
                                return r;
                } else if (KEY("type")) {
                        if (parse_type(v, true, &e.type) < 0)
                                return -EBADMSG;
                        have_type = true;
                } else if (KEY("mode")) {
                        if (space_kv_parse_u64(v, 07777, &u) < 0)
                                return -EBADMSG;
                        e.mode = (unsigned) u;
                        have_mode = true;
                } else if (KEY("size")) {
                        if (space_kv_parse_u64(v, INT64_MAX, &e.size) < 0)
                                return -EBADMSG;
                        have_size = true;
                } else if (KEY("mtime")) {
                        if (parse_i64(v, &e.mtime) < 0)
                                return -EBADMSG;
                        have_mtime = true;
                } else if (KEY("mtime_nsec")) {
                        if (space_kv_parse_u64(v, 999999999, &u) < 0)
                                return -EBADMSG;
                        e.mtime_nsec = (uint32_t) u;
                } else if (KEY("uid")) {
                        if (space_kv_parse_u64(v, UINT32_MAX, &u) < 0)
                                return -EBADMSG;
                        e.uid = (uint32_t) u;
                        have_uid = true;
                } else if (KEY("gid")) {
                        if (space_kv_parse_u64(v, UINT32_MAX, &u) < 0)
                                return -EBADMSG;
                        e.gid = (uint32_t) u;
                        have_gid = true;
                } else if (KEY("target")) {
                        if (strlen(v) > SPACE_FILE_PATH_MAX)
                                return -EBADMSG;
                        e.target = v;
                }
#undef KEY
        }
        if (meta_key || !have_type || !have_mode || !have_size || !have_mtime || !have_uid || !have_gid ||
            (list && !e.rel))
                return -EBADMSG;
        if (e.type != FILE_ENTRY_SYMLINK) {
                e.target = e.resolved = NULL;
                e.has_target_type = false;
        }
        e.records = p + *offset;
        e.records_len = off - *offset;
        *offset = off;
        *ret = e;
        return 0;
}

int file_entry_meta_next(const FileEntry *e, size_t *offset, const char **ret_key, const char **ret_value) {
        const char *k, *v, *key = NULL;
        size_t klen;

        /* file_entry_parse() checked the pairs: a meta_value= follows each meta_key= */
        while (space_kv_next(e->records, e->records_len, offset, &k, &klen, &v) > 0) {
                if (klen == 8 && memcmp(k, "meta_key", 8) == 0)
                        key = v;
                else if (key && klen == 10 && memcmp(k, "meta_value", 10) == 0) {
                        *ret_key = key;
                        *ret_value = v;
                        return 1;
                }
        }
        return 0;
}

cJSON *file_entry_meta_json(const FileEntry *e) {
        cJSON *o = cJSON_CreateObject();
        const char *k, *v;
        size_t off = 0;

        /* a key a hostile guest repeats: its first value, as an upload's first header wins (n is bounded by
         * SPACE_FILE_META_BYTES_MAX, so the lookups stay cheap) */
        while (o && file_entry_meta_next(e, &off, &k, &v) > 0)
                if (!cJSON_GetObjectItemCaseSensitive(o, k) && !cJSON_AddStringToObject(o, k, v)) {
                        cJSON_Delete(o);
                        return NULL;
                }
        return o;
}

int file_xfer_reply_entry(FileXfer *x, FileEntry *ret) {
        size_t off = 0;

        return file_entry_parse(x->reply.data, x->reply.len, &off, false, ret);
}

/* Bytes that are not UTF-8 become U+FFFD: JSON strings must be UTF-8, names on a disk need not be. */
static char *utf8_sanitize(const char *s) {
        size_t n = strlen(s), o = 0;
        const unsigned char *u = (const unsigned char *) s;
        char *d = malloc(n * 3 + 1);

        if (!d)
                return NULL;
        for (size_t i = 0; i < n;) {
                size_t len = u[i] < 0x80 ? 1 : (u[i] & 0xe0) == 0xc0 ? 2 : (u[i] & 0xf0) == 0xe0 ? 3
                                                : (u[i] & 0xf8) == 0xf0 ? 4 : 0;
                bool ok = len > 0 && i + len <= n;
                uint32_t cp = len == 1 ? u[i] : len == 2 ? u[i] & 0x1f : len == 3 ? u[i] & 0x0f : u[i] & 0x07;

                for (size_t k = 1; ok && k < len; k++) {
                        ok = (u[i + k] & 0xc0) == 0x80;
                        cp = cp << 6 | (u[i + k] & 0x3f);
                }
                /* overlong forms, surrogates and values past U+10FFFF are not UTF-8 either */
                if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
                           (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff))
                        ok = false;
                if (ok) {
                        memcpy(d + o, s + i, len);
                        o += len;
                        i += len;
                } else {
                        memcpy(d + o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                }
        }
        d[o] = 0;
        return d;
}

static void add_string(cJSON *o, const char *key, const char *value) {
        _cleanup_free_ char *clean = utf8_sanitize(value);

        cJSON_AddStringToObject(o, key, clean ?: "");
}

cJSON *file_entry_to_json(const char *path, const FileEntry *e) {
        static const char *const types[] = { "file", "dir", "symlink", "other" };
        const char *name = strrchr(path, '/');
        cJSON *o = cJSON_CreateObject();

        name = name && name[1] ? name + 1 : path;
        add_string(o, "path", path);
        add_string(o, "name", name);
        cJSON_AddStringToObject(o, "type", types[e->type]);
        cJSON_AddNumberToObject(o, "mode", e->mode);
        cJSON_AddNumberToObject(o, "size", (double) e->size);
        cJSON_AddNumberToObject(o, "mtime", (double) e->mtime);
        cJSON_AddNumberToObject(o, "mtime_nsec", e->mtime_nsec);
        cJSON_AddNumberToObject(o, "uid", e->uid);
        cJSON_AddNumberToObject(o, "gid", e->gid);
        if (e->target)
                add_string(o, "target", e->target);
        if (e->resolved)
                add_string(o, "resolved", e->resolved);
        if (e->has_target_type) {
                cJSON_AddStringToObject(o, "target_type", types[e->target_type]);
                cJSON_AddNumberToObject(o, "target_mode", e->target_mode);
        }
        if (e->n_meta > 0 && !cJSON_AddItemToObject(o, "metadata", file_entry_meta_json(e))) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

static ErrorCode code_for_errno(long err) {
        switch (err) {
        case ENOENT:
                return ERROR_NOT_FOUND;
        case EEXIST:
                return ERROR_EXISTS;
        case ENOTEMPTY:
                return ERROR_NOT_EMPTY;
        case EISDIR:
                return ERROR_IS_A_DIRECTORY;
        case ENOTDIR:
                return ERROR_NOT_A_DIRECTORY;
        case EACCES:
        case EPERM:
        case EROFS:
                return ERROR_PERMISSION_DENIED;
        case ENOSPC:
        case EDQUOT:
                return ERROR_NO_SPACE;
        case EINVAL:
        case ENAMETOOLONG:
        case ELOOP:
                return ERROR_INVALID_PATH;
        case EAGAIN:
                return ERROR_TOO_MANY_TRANSFERS;
        case ENOSYS:
                return ERROR_NOT_SUPPORTED;
        default:
                return ERROR_IO_ERROR;
        }
}

static void on_error(FileXfer *x, const uint8_t *payload, size_t n) {
        const char *v = NULL, *msg = NULL;
        ErrorCode code;
        SpaceCode sc;
        char text[320];
        uint64_t err = 0;

        if (space_kv_get(payload, n, "errno", &v) > 0)
                (void) space_kv_parse_u64(v, 4095, &err);
        (void) space_kv_get(payload, n, "message", &msg);
        code = code_for_errno((long) err);
        /* A FILE may say only that a list is too long or that chown= named no such user or group; any other
         * code is the guest's to make up: the errno decides. */
        if (space_kv_get_code(payload, n, &sc) > 0)
                switch (sc) {
                case SPACE_CODE_TOO_MANY_ENTRIES:
                        code = ERROR_TOO_MANY_ENTRIES;
                        break;
                case SPACE_CODE_UNKNOWN_USER:
                        code = ERROR_UNKNOWN_USER;
                        break;
                case SPACE_CODE_UNKNOWN_GROUP:
                        code = ERROR_UNKNOWN_GROUP;
                        break;
                case SPACE_CODE_TOO_MANY_WATCHES: /* a watch's */
                        code = ERROR_LIMIT_EXCEEDED;
                        break;
                case SPACE_CODE_OVERFLOW:
                        code = ERROR_RESOURCE_EXHAUSTED;
                        break;
                case SPACE_CODE_INVALID:
                        code = streq(x->op, "watch") ? ERROR_INVALID_ARGUMENT : code;
                        break;
                default:
                        break;
                }
        /* The guest's message is shown to the user: printable and short. */
        snprintf(text, sizeof text, "%s", msg && *msg ? msg : strerror(err ? (int) err : EIO));
        /* an agent older than version 6 knows no watch: say so, not "unknown file operation" */
        if (streq(x->op, "watch") && err == ENOSYS)
                snprintf(text, sizeof text, "the sandbox's agent is too old to watch directories (it predates "
                         "protocol version 6): make the sandbox again from a current template");
        for (char *c = text; *c; c++)
                if ((unsigned char) *c < 0x20 || (unsigned char) *c == 0x7f)
                        *c = '?';
        xfer_fail(x, code, text, false); /* the guest forgot the stream with its ERROR */
}

static int send_credit(FileXfer *x, uint64_t n) {
        uint8_t le[4];

        while (n > 0 && x->agent) {
                uint32_t k = n > SPACE_STREAM_WINDOW ? SPACE_STREAM_WINDOW : (uint32_t) n;

                space_put_le32(le, k);
                if (agent_send(x->agent, SPACE_F_CREDIT, 1, x->stream, le, 4) < 0)
                        return -EIO;
                x->credit_left += k;
                n -= k;
        }
        return 0;
}

int file_xfer_return_credit(FileXfer *x) {
        int r = 0;

        if (x->state == FILE_XFER_OPEN && !x->eof && x->uncredited > 0)
                r = send_credit(x, x->uncredited);
        x->uncredited = 0;
        return r;
}

/* List entries in one DATA frame, turned into JSON objects after the previous ones. */
static int list_take(FileXfer *x, const uint8_t *p, size_t n) {
        size_t off = 0;

        while (off < n) {
                _cleanup_free_ char *path = NULL, *text = NULL;
                FileEntry e;
                cJSON *o;
                int r;

                r = file_entry_parse(p, n, &off, true, &e);
                if (r < 0)
                        return r;
                if (++x->entries > SPACE_FILE_LIST_MAX)
                        return -E2BIG;
                if (asprintf(&path, "%s%s%s", x->path, streq(x->path, "/") ? "" : "/", e.rel) < 0)
                        return -ENOMEM;
                if (strlen(path) > SPACE_FILE_PATH_MAX)
                        return -EBADMSG;
                o = file_entry_to_json(path, &e);
                text = cJSON_PrintUnformatted(o);
                cJSON_Delete(o);
                if (!text)
                        return -ENOMEM;
                if ((x->entries > 1 && space_buf_append(&x->out, ",", 1) < 0) ||
                    space_buf_append(&x->out, text, strlen(text)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static void on_data(FileXfer *x, const SpaceFrameHeader *h, const uint8_t *payload) {
        bool list = streq(x->op, "list"), watch = streq(x->op, "watch");
        int r;

        if (h->fd != 1 || x->state != FILE_XFER_OPEN || x->eof || (!list && !watch && !streq(x->op, "read"))) {
                protocol_error(x, "data where none was due");
                return;
        }
        if (h->length > x->credit_left) {
                protocol_error(x, "it overran its flow-control window");
                return;
        }
        x->credit_left -= h->length;
        if (list) {
                r = list_take(x, payload, h->length);
                if (r == -E2BIG) {
                        protocol_error(x, "more entries than the limit");
                        return;
                }
                if (r < 0) {
                        protocol_error(x, r == -ENOMEM ? "out of memory" : "a malformed entry");
                        return;
                }
                x->uncredited += h->length; /* returned once the client took the JSON */
        } else if (watch) {
                /* checked whole here, so that file_xfer_next_event() reads only what is valid */
                if (!file_watch_events_valid(payload, h->length)) {
                        protocol_error(x, "a malformed watch event");
                        return;
                }
                /* kept frame by frame (le32 length, payload): a frame's records are within the cap, a
                 * window of them need not be */
                uint8_t le[4];

                space_put_le32(le, h->length);
                if (space_buf_append(&x->out, le, 4) < 0 || space_buf_append(&x->out, payload, h->length) < 0) {
                        xfer_fail(x, ERROR_INTERNAL, "out of memory", true);
                        return;
                }
                x->uncredited += h->length; /* returned once the events were taken */
        } else if (space_buf_append(&x->out, payload, h->length) < 0) {
                xfer_fail(x, ERROR_INTERNAL, "out of memory", true);
                return;
        }
        touch(x);
        wake_request(x);
}

static void on_ok(FileXfer *x, const uint8_t *payload, size_t n) {
        bool streams = streq(x->op, "read") || streq(x->op, "list") || streq(x->op, "write") || streq(x->op, "watch");
        FileXferState next;

        if (x->state == FILE_XFER_SENT)
                next = streams ? FILE_XFER_OPEN : FILE_XFER_DONE;
        else if (x->state == FILE_XFER_OPEN && streq(x->op, "write") && x->eof_sent)
                next = FILE_XFER_DONE;
        else {
                protocol_error(x, "an answer where none was due");
                return;
        }
        x->reply.len = 0;
        if (space_buf_append(&x->reply, payload, n) < 0) {
                xfer_fail(x, ERROR_INTERNAL, "out of memory", true);
                return;
        }
        /* Every answer but remove's, list's and an opened write's describes the entry: check it before it
         * counts. */
        if (!streq(x->op, "remove") && !streq(x->op, "list") && !streq(x->op, "watch") &&
            !(streq(x->op, "write") && next == FILE_XFER_OPEN)) {
                FileEntry e;

                if (file_xfer_reply_entry(x, &e) < 0) {
                        protocol_error(x, "a malformed entry");
                        return;
                }
        }
        /* a list's entries follow in DATA: open the JSON they go into before any arrives */
        if (streq(x->op, "list") && space_buf_append(&x->out, "{\"entries\":[", 12) < 0) {
                xfer_fail(x, ERROR_INTERNAL, "out of memory", true);
                return;
        }
        x->state = next;
        if (x->state == FILE_XFER_DONE)
                xfer_unregister(x, false);
        wake_request(x);
}

void file_xfer_on_frame(FileXfer *x, const SpaceFrameHeader *h, const uint8_t *payload) {
        if (x->state == FILE_XFER_DONE || x->state == FILE_XFER_FAILED)
                return;
        switch (h->type) {
        case SPACE_F_OK:
                on_ok(x, payload, h->length);
                break;
        case SPACE_F_ERROR:
                on_error(x, payload, h->length);
                break;
        case SPACE_F_DATA:
                on_data(x, h, payload);
                break;
        case SPACE_F_EOF:
                if (h->fd != 1 || x->state != FILE_XFER_OPEN || x->eof ||
                    (!streq(x->op, "read") && !streq(x->op, "list"))) {
                        protocol_error(x, "an end where none was due");
                        break;
                }
                x->eof = true;
                if (streq(x->op, "list") && space_buf_append(&x->out, "]}\n", 3) < 0) {
                        xfer_fail(x, ERROR_INTERNAL, "out of memory", true);
                        break;
                }
                xfer_unregister(x, false); /* the guest is done with the stream */
                wake_request(x);
                break;
        case SPACE_F_CREDIT:
                if (h->fd != 0 || h->length != 4 || !streq(x->op, "write")) {
                        protocol_error(x, "a malformed credit");
                        break;
                }
                space_credit_give_clamp(&x->send_credit, space_get_le32(payload));
                wake_request(x);
                break;
        default:
                break;
        }
}

/* ---- the reader's and writer's side ---- */

size_t file_xfer_upload(FileXfer *x, const char *data, size_t n) {
        size_t sent = 0;

        if (x->state != FILE_XFER_OPEN || x->eof_sent || !x->agent)
                return n; /* it failed: the rest is dropped, the response says why */
        while (sent < n && x->send_credit.available > 0) {
                size_t chunk = n - sent;
                int q;

                if (chunk > SPACE_FRAME_PAYLOAD_MAX)
                        chunk = SPACE_FRAME_PAYLOAD_MAX;
                if (chunk > x->send_credit.available)
                        chunk = (size_t) x->send_credit.available;
                q = agent_send(x->agent, SPACE_F_DATA, 0, x->stream, data + sent, chunk);
                if (q < 0) {
                        xfer_fail(x, ERROR_IO_ERROR, "cannot send to the sandbox's agent", true);
                        return n;
                }
                (void) space_credit_take(&x->send_credit, chunk);
                sent += chunk;
                x->sent += chunk;
        }
        touch(x);
        return sent;
}

int file_xfer_finish_upload(FileXfer *x) {
        int q;

        if (x->eof_sent)
                return 0;
        if (!x->agent)
                return -ENOTCONN;
        q = agent_send(x->agent, SPACE_F_EOF, 0, x->stream, NULL, 0);
        if (q < 0)
                return q;
        x->eof_sent = true;
        return 0;
}

ssize_t file_xfer_read(FileXfer *x, char *buf, size_t max) {
        bool list = streq(x->op, "list");
        size_t n = x->out.len - x->out_off;

        if (n > 0) {
                if (n > max)
                        n = max;
                memcpy(buf, x->out.data + x->out_off, n);
                x->out_off += n;
                if (!list)
                        x->uncredited += n;
                /* What was read goes, so the buffer holds at most the window (plus a list's JSON of it). */
                if (x->out_off == x->out.len)
                        x->out.len = x->out_off = 0;
                else if (x->out_off >= SPACE_FRAME_PAYLOAD_MAX) {
                        space_buf_consume(&x->out, x->out_off);
                        x->out_off = 0;
                }
                /* a list returns credit once its JSON is out; a read as its bytes go, in batches */
                if (!x->eof && x->state == FILE_XFER_OPEN &&
                    (x->out.len == 0 || (!list && x->uncredited >= CREDIT_BATCH))) {
                        (void) send_credit(x, x->uncredited);
                        x->uncredited = 0;
                }
                touch(x);
                return (ssize_t) n;
        }
        if (x->state == FILE_XFER_FAILED) {
                /* a cut-short body: the client sees the transfer fail instead of a truncated file */
                log_warning("sandbox %s: %s of %s ended early: %s", x->sandbox_id, x->op, x->path,
                            x->error_message ?: "?");
                return CHANNEL_READ_ERROR;
        }
        return x->eof ? CHANNEL_READ_END : 0;
}

void file_xfer_open_reader(FileXfer *x) {
        x->reader_open = true;
}

void file_xfer_close_reader(FileXfer *x) {
        x->reader_open = false;
        xfer_maybe_free(x);
}
