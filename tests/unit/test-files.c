/* SPDX-License-Identifier: Apache-2.0 */

/* spaced/channel/files.c against a hostile guest: frames that do not fit the operation or its state, data
 * beyond the credit given, entries with unknown types, numbers out of range, names with '/', "." or "..", and
 * bytes that are not UTF-8 must fail the transfer (protocol_error) or be cleaned, never be trusted. Then random
 * frames, for ASan to watch. No channel and no HTTP: the transfer is made by hand, with nobody waiting on it. */

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/macro.h"
#include "channel/files.h"
#include "core/log.h"
#include "tap.h"

static Manager manager;

static FileXfer *xfer(const char *op, const char *path) {
        FileXfer *x = calloc(1, sizeof *x);

        x->manager = &manager;
        snprintf(x->op, sizeof x->op, "%s", op);
        x->path = strdup(path);
        x->stream = 7;
        x->credit_left = SPACE_STREAM_WINDOW;
        space_credit_init(&x->send_credit);
        return x;
}

static void drop(FileXfer *x) {
        file_xfer_detach(x);
}

static void frame(FileXfer *x, uint8_t type, uint8_t fd, const void *p, size_t n) {
        SpaceFrameHeader h = { .length = (uint32_t) n, .stream = x->stream, .type = type, .fd = fd };

        file_xfer_on_frame(x, &h, p);
}

/* kv records from "k=v" strings */
static void kv(SpaceBuf *b, const char *const *recs) {
        for (; *recs; recs++)
                space_buf_append(b, *recs, strlen(*recs) + 1);
}

static void send_kv(FileXfer *x, uint8_t type, uint8_t fd, const char *const *recs) {
        _cleanup_(space_buf_done) SpaceBuf b = {};

        kv(&b, recs);
        frame(x, type, fd, b.data, b.len);
}

#define ENTRY "type=file", "mode=420", "size=5", "mtime=86400", "uid=0", "gid=0"

static bool failed_with(FileXfer *x, const char *code) {
        return x->state == FILE_XFER_FAILED && streq(error_code_to_string(x->error_code), code);
}

static void test_stat(void) {
        FileXfer *x;
        FileEntry e;
        cJSON *o;

        x = xfer("stat", "/etc/passwd");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, NULL });
        ok(x->state == FILE_XFER_DONE && file_xfer_reply_entry(x, &e) == 0 && e.mode == 0644 && e.size == 5,
           "stat: a good entry is taken");
        o = file_entry_to_json(x->path, &e);
        ok(streq(cJSON_GetObjectItem(o, "name")->valuestring, "passwd") &&
           streq(cJSON_GetObjectItem(o, "type")->valuestring, "file") && !cJSON_GetObjectItem(o, "target"),
           "  ... as JSON: name from our path, no target for a file");
        cJSON_Delete(o);
        send_kv(x, SPACE_F_ERROR, 0, (const char *[]) { "errno=2", NULL });
        ok(x->state == FILE_XFER_DONE, "  ... frames after the answer are ignored");
        drop(x);

        x = xfer("stat", "/n");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, "mtime_nsec=123456789", NULL });
        ok(x->state == FILE_XFER_DONE && file_xfer_reply_entry(x, &e) == 0 && e.mtime == 86400 &&
           e.mtime_nsec == 123456789, "stat: mtime_nsec is taken");
        o = file_entry_to_json(x->path, &e);
        ok(cJSON_GetObjectItem(o, "mtime_nsec") && cJSON_GetObjectItem(o, "mtime_nsec")->valuedouble == 123456789,
           "  ... and shown as JSON");
        cJSON_Delete(o);
        drop(x);

        static const char *const bad[][10] = {
                { "type=file", "size=5", "mtime=1", "uid=0", "gid=0", NULL },           /* no mode */
                { "type=fifo", "mode=420", "size=5", "mtime=1", "uid=0", "gid=0", NULL },
                { "type=file", "mode=8192", "size=5", "mtime=1", "uid=0", "gid=0", NULL },
                { "type=file", "mode=420", "size=-5", "mtime=1", "uid=0", "gid=0", NULL },
                { "type=file", "mode=420", "size=5", "mtime=1x", "uid=0", "gid=0", NULL },
                { "type=file", "mode=420", "size=5", "mtime=1", "mtime_nsec=1000000000", "uid=0", "gid=0", NULL },
                { "type=file", "mode=420", "size=5", "mtime=1", "uid=4294967296", "gid=0", NULL },
                { "type=file", "mode= 420", "size=5", "mtime=1", "uid=0", "gid=0", NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                x = xfer("stat", "/x");
                send_kv(x, SPACE_F_OK, 0, bad[i]);
                ok(failed_with(x, "protocol_error"), "stat: a malformed entry (#%zu) fails the transfer", i);
                drop(x);
        }
        x = xfer("stat", "/x");
        frame(x, SPACE_F_OK, 0, "type=file", 9); /* not NUL-terminated */
        ok(failed_with(x, "protocol_error"), "stat: an unterminated record fails the transfer");
        drop(x);

        x = xfer("stat", "/l");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { "type=symlink", "mode=511", "size=3", "mtime=1", "uid=0",
                                                     "gid=0", "target=/\xff\xfe" "etc", NULL });
        ok(x->state == FILE_XFER_DONE && file_xfer_reply_entry(x, &e) == 0, "stat: a symlink");
        o = file_entry_to_json(x->path, &e);
        ok(streq(cJSON_GetObjectItem(o, "target")->valuestring, "/\xef\xbf\xbd\xef\xbf\xbd" "etc"),
           "  ... bytes that are not UTF-8 become U+FFFD");
        cJSON_Delete(o);
        drop(x);
}

static void test_errors(void) {
        static const struct {
                const char *errno_rec;
                const char *code;
        } cases[] = {
                { "errno=2", "not_found" },       { "errno=17", "exists" },       { "errno=39", "not_empty" },
                { "errno=21", "is_a_directory" }, { "errno=20", "not_a_directory" }, { "errno=13", "permission_denied" },
                { "errno=28", "no_space" },       { "errno=122", "no_space" },    { "errno=22", "invalid_path" },
                { "errno=5", "io_error" },        { "errno=99999", "io_error" },  { "errno=-1", "io_error" },
        };
        FileXfer *x;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                x = xfer("stat", "/x");
                send_kv(x, SPACE_F_ERROR, 0, (const char *[]) { cases[i].errno_rec, "message=m", NULL });
                ok(failed_with(x, cases[i].code), "ERROR %s is %s", cases[i].errno_rec, cases[i].code);
                drop(x);
        }
        x = xfer("list", "/x");
        send_kv(x, SPACE_F_ERROR, 0, (const char *[]) { "errno=7", "message=too many", "code=too_many_entries", NULL });
        ok(failed_with(x, "too_many_entries"), "ERROR with code=too_many_entries");
        drop(x);
        /* chown= naming a user or group the guest does not have */
        x = xfer("mkdir", "/x");
        send_kv(x, SPACE_F_ERROR, 0, (const char *[]) { "errno=3", "message=unknown user 'u'", "code=unknown_user", NULL });
        ok(failed_with(x, "unknown_user"), "ERROR with code=unknown_user");
        drop(x);
        x = xfer("mkdir", "/x");
        send_kv(x, SPACE_F_ERROR, 0, (const char *[]) { "errno=2", "message=unknown group", "code=unknown_group", NULL });
        ok(failed_with(x, "unknown_group"), "ERROR with code=unknown_group");
        drop(x);
        /* codes a FILE may not give, or that are none, leave the errno to decide */
        static const char *const not_ours[] = { "code=invalid_user", "code=denied", "code=no_such_code", "code=",
                                                "code=too_many_entries_and_more", "code=TOO_MANY_ENTRIES" };
        for (size_t i = 0; i < ELEMENTSOF(not_ours); i++) {
                x = xfer("list", "/x");
                send_kv(x, SPACE_F_ERROR, 0, (const char *[]) { "errno=2", "message=m", not_ours[i], NULL });
                ok(failed_with(x, "not_found"), "ERROR errno=2 with %s is not_found", not_ours[i]);
                drop(x);
        }
        x = xfer("stat", "/x");
        send_kv(x, SPACE_F_ERROR, 0, (const char *[]) { "errno=2", "message=a\nb\x1b[31mc", NULL });
        ok(failed_with(x, "not_found") && streq(x->error_message, "a?b?[31mc"),
           "the guest's message is shown without control characters");
        drop(x);
}

static void test_read(void) {
        static uint8_t big[SPACE_FRAME_PAYLOAD_MAX];
        FileXfer *x;

        x = xfer("read", "/f");
        frame(x, SPACE_F_DATA, 1, "abc", 3);
        ok(failed_with(x, "protocol_error"), "read: data before the answer fails the transfer");
        drop(x);

        x = xfer("read", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, NULL });
        ok(x->state == FILE_XFER_OPEN, "read: the answer opens the stream");
        frame(x, SPACE_F_DATA, 2, "abc", 3);
        ok(failed_with(x, "protocol_error"), "  ... data on fd 2 fails it");
        drop(x);

        x = xfer("read", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, NULL });
        for (unsigned i = 0; i < SPACE_STREAM_WINDOW / sizeof big; i++)
                frame(x, SPACE_F_DATA, 1, big, sizeof big);
        ok(x->state == FILE_XFER_OPEN && x->out.len == SPACE_STREAM_WINDOW, "read: a whole window is taken");
        frame(x, SPACE_F_DATA, 1, "x", 1);
        ok(failed_with(x, "protocol_error") && x->out.len == SPACE_STREAM_WINDOW,
           "  ... one byte more fails the transfer and is not kept");
        drop(x);

        x = xfer("read", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, NULL });
        frame(x, SPACE_F_DATA, 1, "hello", 5);
        frame(x, SPACE_F_EOF, 1, NULL, 0);
        ok(x->eof && x->out.len == 5 && x->state == FILE_XFER_OPEN, "read: data then the end");
        frame(x, SPACE_F_DATA, 1, "more", 4);
        ok(x->out.len == 5 && !failed_with(x, "protocol_error"), "  ... nothing is taken after the end");
        drop(x);
}

static void test_list(void) {
        FileXfer *x;
        cJSON *o;

        x = xfer("list", "/dir");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { "count=3", NULL });
        send_kv(x, SPACE_F_DATA, 1, (const char *[]) { "rel=a", ENTRY, "rel=b", "type=dir", "mode=493", "size=0",
                                                      "mtime=1", "uid=0", "gid=0", NULL });
        send_kv(x, SPACE_F_DATA, 1, (const char *[]) { "rel=b/c d", ENTRY, "extra=ignored", NULL });
        frame(x, SPACE_F_EOF, 1, NULL, 0);
        space_buf_append(&x->out, "", 1);
        o = cJSON_Parse((const char *) x->out.data);
        ok(o && cJSON_GetArraySize(cJSON_GetObjectItem(o, "entries")) == 3, "list: three entries in JSON");
        ok(o && streq(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "entries"), 2), "path")->valuestring,
                      "/dir/b/c d") &&
           streq(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "entries"), 2), "name")->valuestring,
                 "c d"),
           "  ... with absolute paths and names");
        cJSON_Delete(o);
        drop(x);

        static const char *const bad_rel[] = { "rel=..", "rel=.", "rel=a/../b", "rel=/a", "rel=a/", "rel=a//b", "rel=",
                                               NULL };
        for (const char *const *r = bad_rel; *r; r++) {
                x = xfer("list", "/dir");
                send_kv(x, SPACE_F_OK, 0, (const char *[]) { "count=1", NULL });
                send_kv(x, SPACE_F_DATA, 1, (const char *[]) { *r, ENTRY, NULL });
                ok(failed_with(x, "protocol_error"), "list: the name '%s' fails the transfer", *r + 4);
                drop(x);
        }
        x = xfer("list", "/dir");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { "count=1", NULL });
        send_kv(x, SPACE_F_DATA, 1, (const char *[]) { ENTRY, "rel=a", NULL });
        ok(failed_with(x, "protocol_error"), "list: an entry that does not start with its name fails it");
        drop(x);

        char name[300];
        memset(name, 'n', sizeof name);
        memcpy(name, "rel=", 4);
        name[sizeof name - 1] = 0;
        x = xfer("list", "/dir");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { "count=1", NULL });
        send_kv(x, SPACE_F_DATA, 1, (const char *[]) { name, ENTRY, NULL });
        ok(failed_with(x, "protocol_error"), "list: a name over 255 bytes fails it");
        drop(x);
}

/* Version 6's records: a symlink's resolution and a file's user.e2b.* metadata, within envd's bounds. */
static void test_meta(void) {
        _cleanup_free_ char *long_key = NULL, *big_value = NULL, *at_budget = NULL;
        FileXfer *x;
        FileEntry e;
        cJSON *o, *m;
        const char *k, *v;
        size_t off = 0;

        x = xfer("stat", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, "meta_key=owner", "meta_value=alice",
                                                     "meta_key=k=2", "meta_value=", NULL });
        ok(x->state == FILE_XFER_DONE && file_xfer_reply_entry(x, &e) == 0 && e.n_meta == 2, "meta: two pairs");
        ok(file_entry_meta_next(&e, &off, &k, &v) == 1 && streq(k, "owner") && streq(v, "alice") &&
           file_entry_meta_next(&e, &off, &k, &v) == 1 && streq(k, "k=2") && streq(v, "") &&
           file_entry_meta_next(&e, &off, &k, &v) == 0, "  ... read back in order, a key may hold '='");
        o = file_entry_to_json(x->path, &e);
        m = cJSON_GetObjectItem(o, "metadata");
        ok(cJSON_GetArraySize(m) == 2 && streq(cJSON_GetObjectItem(m, "owner")->valuestring, "alice"),
           "  ... and as JSON");
        cJSON_Delete(o);
        drop(x);

        x = xfer("stat", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, NULL });
        o = file_xfer_reply_entry(x, &e) == 0 ? file_entry_to_json(x->path, &e) : NULL;
        ok(o && e.n_meta == 0 && !cJSON_GetObjectItem(o, "metadata"), "meta: none, no metadata in JSON");
        cJSON_Delete(o);
        drop(x);

        /* the longest key, and a set exactly at the budget, are taken; one byte more is not */
        long_key = malloc(9 + SPACE_FILE_META_KEY_MAX + 2);
        memcpy(long_key, "meta_key=", 9);
        memset(long_key + 9, 'k', SPACE_FILE_META_KEY_MAX);
        long_key[9 + SPACE_FILE_META_KEY_MAX] = 0;
        at_budget = malloc(11 + SPACE_FILE_META_BYTES_MAX);
        memcpy(at_budget, "meta_value=", 11);
        memset(at_budget + 11, 'v', SPACE_FILE_META_BYTES_MAX - 9 - SPACE_FILE_META_KEY_MAX);
        at_budget[11 + SPACE_FILE_META_BYTES_MAX - 9 - SPACE_FILE_META_KEY_MAX] = 0;
        x = xfer("stat", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, long_key, at_budget, NULL });
        ok(x->state == FILE_XFER_DONE, "meta: a %u-byte key and a set of %u bytes are taken", SPACE_FILE_META_KEY_MAX,
           SPACE_FILE_META_BYTES_MAX);
        drop(x);
        big_value = strdup(at_budget);
        big_value = realloc(big_value, strlen(at_budget) + 2);
        strcat(big_value, "v");
        x = xfer("stat", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, long_key, big_value, NULL });
        ok(failed_with(x, "protocol_error"), "meta: one byte over the budget fails the transfer");
        drop(x);
        strcat(long_key, "k");
        x = xfer("stat", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, long_key, "meta_value=", NULL });
        ok(failed_with(x, "protocol_error"), "meta: a %u-byte key fails it", SPACE_FILE_META_KEY_MAX + 1);
        drop(x);

        static const char *const bad[][10] = {
                { ENTRY, "meta_key=a", NULL },                                  /* a key without its value */
                { ENTRY, "meta_value=b", NULL },                                /* a value without its key */
                { ENTRY, "meta_key=a", "mode=420", "meta_value=b", NULL },      /* not right after it */
                { ENTRY, "meta_key=", "meta_value=b", NULL },                   /* an empty key */
                { ENTRY, "meta_key=\xff", "meta_value=b", NULL },               /* not UTF-8 */
                { ENTRY, "meta_key=a", "meta_value=\xc0\x80", NULL },           /* an overlong NUL */
                { "type=symlink", "mode=511", "size=1", "mtime=1", "uid=0", "gid=0", "resolved=relative", NULL },
                { "type=symlink", "mode=511", "size=1", "mtime=1", "uid=0", "gid=0", "target_type=symlink", NULL },
                { "type=symlink", "mode=511", "size=1", "mtime=1", "uid=0", "gid=0", "target_mode=4096", NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                x = xfer("stat", "/x");
                send_kv(x, SPACE_F_OK, 0, bad[i]);
                ok(failed_with(x, "protocol_error"), "meta: malformed records (#%zu) fail the transfer", i);
                drop(x);
        }

        /* a flood: a budget lets at most 4096 / 10 pairs through; a guest that sends more is refused */
        {
                _cleanup_(space_buf_done) SpaceBuf b = {};
                unsigned n;

                kv(&b, (const char *[]) { ENTRY, NULL });
                for (n = 0; n < 1000; n++) {
                        char rec[32];

                        snprintf(rec, sizeof rec, "meta_key=%u", n);
                        space_buf_append(&b, rec, strlen(rec) + 1);
                        space_buf_append(&b, "meta_value=", 12);
                }
                x = xfer("stat", "/f");
                frame(x, SPACE_F_OK, 0, b.data, b.len > SPACE_FRAME_PAYLOAD_MAX ? SPACE_FRAME_PAYLOAD_MAX : b.len);
                ok(failed_with(x, "protocol_error"), "meta: 1000 pairs (one frame, past the budget) fail the transfer");
                drop(x);
        }

        /* a key repeated: the JSON has it once, with its first value */
        x = xfer("stat", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, "meta_key=k", "meta_value=first", "meta_key=k",
                                                     "meta_value=second", NULL });
        ok(file_xfer_reply_entry(x, &e) == 0, "meta: a key the guest repeats is taken");
        o = file_entry_to_json(x->path, &e);
        ok(o && cJSON_GetArraySize(cJSON_GetObjectItem(o, "metadata")) == 1 &&
                   streq(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "k")->valuestring, "first"),
           "  ... and shown once, with its first value");
        cJSON_Delete(o);
        drop(x);

        x = xfer("stat", "/l");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { "type=symlink", "mode=511", "size=3", "mtime=1", "uid=0", "gid=0",
                                                     "target=a/b", "resolved=/real/b", "target_type=dir",
                                                     "target_mode=493", NULL });
        ok(file_xfer_reply_entry(x, &e) == 0 && streq(e.resolved, "/real/b") && e.has_target_type &&
           e.target_type == FILE_ENTRY_DIR && e.target_mode == 0755, "symlink: its resolution is taken");
        o = file_entry_to_json(x->path, &e);
        ok(streq(cJSON_GetObjectItem(o, "resolved")->valuestring, "/real/b") &&
           streq(cJSON_GetObjectItem(o, "target_type")->valuestring, "dir") &&
           cJSON_GetObjectItem(o, "target_mode")->valuedouble == 0755, "  ... and shown as JSON");
        cJSON_Delete(o);
        drop(x);
        x = xfer("stat", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, "resolved=/x", "target_type=dir", "target_mode=1", NULL });
        ok(file_xfer_reply_entry(x, &e) == 0 && !e.resolved && !e.has_target_type,
           "  ... and ignored for what is no symlink");
        drop(x);
}

static void test_write(void) {
        uint8_t le[4];
        FileXfer *x;

        x = xfer("write", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { NULL });
        ok(x->state == FILE_XFER_OPEN, "write: the guest is ready");
        (void) space_credit_take(&x->send_credit, 1000);
        space_put_le32(le, 1000);
        frame(x, SPACE_F_CREDIT, 0, le, 4);
        ok(x->send_credit.available == SPACE_STREAM_WINDOW, "  ... credit comes back");
        frame(x, SPACE_F_CREDIT, 0, le, 4);
        ok(x->send_credit.available == SPACE_STREAM_WINDOW, "  ... never beyond the window");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, NULL });
        ok(failed_with(x, "protocol_error"), "  ... an answer before our EOF fails it");
        drop(x);

        x = xfer("write", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { NULL });
        frame(x, SPACE_F_CREDIT, 1, le, 4);
        ok(failed_with(x, "protocol_error"), "write: credit on fd 1 fails it");
        drop(x);

        x = xfer("write", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { NULL });
        frame(x, SPACE_F_DATA, 1, "x", 1);
        ok(failed_with(x, "protocol_error"), "write: data from the guest fails it");
        drop(x);

        x = xfer("write", "/f");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { NULL });
        x->eof_sent = true;
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { ENTRY, NULL });
        ok(x->state == FILE_XFER_DONE, "write: the answer after EOF finishes it");
        drop(x);
}

/* Random frames of every type on every operation: only ASan and the state machine's invariants can fail. */
/* FILE op=watch: the events the agent sends (files-watch.c). */
static void test_watch(void) {
        FileWatchEvent ev;
        FileXfer *x;
        int k;

        x = xfer("watch", "/home/user/w");
        send_kv(x, SPACE_F_DATA, 1, (const char *[]) { "ev=create", "name=a", NULL });
        ok(failed_with(x, "protocol_error"), "watch: events before the watch is armed are refused");
        drop(x);

        x = xfer("watch", "/home/user/w");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { NULL });
        ok(x->state == FILE_XFER_OPEN && file_xfer_next_event(x, &ev) == 0, "watch: OK arms it, no event yet");
        send_kv(x, SPACE_F_DATA, 1, (const char *[]) { "ev=create", "name=a", "ev=write", "name=sub/a", ENTRY,
                                                       "owner=user", "group=bad:name", "ev=remove", "name=.", NULL });
        send_kv(x, SPACE_F_DATA, 1, (const char *[]) { "ev=rename", "name=b", NULL });
        k = file_xfer_next_event(x, &ev);
        ok(k == 1 && ev.type == FILE_WATCH_CREATE && streq(ev.name, "a") && !ev.has_entry, "  ... a create");
        k = file_xfer_next_event(x, &ev);
        ok(k == 1 && ev.type == FILE_WATCH_WRITE && streq(ev.name, "sub/a") && ev.has_entry && ev.entry.size == 5 &&
           streq(ev.owner, "user") && !ev.group, "  ... a write with its entry; a group that is no name is dropped");
        k = file_xfer_next_event(x, &ev);
        ok(k == 1 && ev.type == FILE_WATCH_REMOVE && streq(ev.name, "."), "  ... the directory itself is \".\"");
        k = file_xfer_next_event(x, &ev);
        ok(k == 1 && ev.type == FILE_WATCH_RENAME && streq(ev.name, "b"), "  ... the next frame's event");
        ok(file_xfer_next_event(x, &ev) == 0 && x->out.len == 0 && x->uncredited == 0,
           "  ... then none, the buffer empty and the credit given back");
        send_kv(x, SPACE_F_ERROR, 0, (const char *[]) { "errno=75", "message=queue overflowed", "code=overflow", NULL });
        ok(failed_with(x, "resource_exhausted") && file_xfer_next_event(x, &ev) == CHANNEL_READ_ERROR,
           "  ... code=overflow ends it with resource_exhausted");
        drop(x);

        x = xfer("watch", "/w");
        send_kv(x, SPACE_F_ERROR, 0, (const char *[]) { "errno=24", "message=m", "code=too_many_watches", NULL });
        ok(failed_with(x, "limit_exceeded"), "watch: code=too_many_watches is limit_exceeded");
        drop(x);
        x = xfer("watch", "/w");
        send_kv(x, SPACE_F_ERROR, 0, (const char *[]) { "errno=38", "message=unknown file operation", NULL });
        ok(failed_with(x, "not_supported") && strstr(x->error_message, "too old"),
           "watch: an agent before version 6 is refused, saying so");
        drop(x);

        static const char *const bad[][10] = {
                { "ev=create", NULL },                               /* no name */
                { "ev=explode", "name=a", NULL },                    /* unknown type */
                { "name=a", "ev=create", NULL },                     /* name first */
                { "ev=create", "name=../etc", NULL },                /* .. */
                { "ev=create", "name=a/../../etc", NULL },
                { "ev=create", "name=/etc/passwd", NULL },           /* absolute */
                { "ev=create", "name=a//b", NULL },
                { "ev=create", "name=", NULL },
                { "ev=write", "name=a", "type=file", NULL },         /* a partial entry */
                { "ev=write", "name=a", "type=pipe", "mode=1", "size=1", "mtime=1", "uid=0", "gid=0", NULL },
                { "ev=write", "name=a", "type=file", "mode=99999", "size=1", "mtime=1", "uid=0", "gid=0", NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                x = xfer("watch", "/w");
                send_kv(x, SPACE_F_OK, 0, (const char *[]) { NULL });
                send_kv(x, SPACE_F_DATA, 1, bad[i]);
                ok(failed_with(x, "protocol_error") && file_xfer_next_event(x, &ev) == CHANNEL_READ_ERROR,
                   "watch: a malformed event fails it (%zu: %s %s)", i, bad[i][0], bad[i][1] ?: "");
                drop(x);
        }
        x = xfer("watch", "/w");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { NULL });
        frame(x, SPACE_F_DATA, 1, "", 0);
        ok(failed_with(x, "protocol_error"), "watch: an empty DATA frame is refused");
        drop(x);
        x = xfer("watch", "/w");
        send_kv(x, SPACE_F_OK, 0, (const char *[]) { NULL });
        send_kv(x, SPACE_F_EOF, 1, (const char *[]) { NULL });
        ok(failed_with(x, "protocol_error"), "watch: an EOF is refused (a watch ends with ERROR or CLOSE)");
        drop(x);
}

static void test_fuzz(void) {
        static const char *const ops[] = { "stat", "list", "read", "write", "remove", "mkdir", "watch" };
        static const char *const recs[] = { "rel=a", "rel=a/b", "rel=..", "type=file", "type=dir", "type=symlink",
                                            "ev=create", "ev=remove", "name=a", "name=.", "name=../x", "owner=u",
                                            "mode=420", "size=1", "mtime=-5", "uid=0", "gid=0", "target=x",
                                            "errno=2", "code=too_many_entries", "count=1", "junk", "=x" };
        uint8_t buf[512];
        unsigned seed = 12345, bad = 0;

        log_max_level = LOG_ERR_LEVEL; /* every protocol error is logged as a warning: not 20000 of them here */
        for (unsigned round = 0; round < 20000; round++) {
                FileXfer *x = xfer(ops[round % ELEMENTSOF(ops)], "/fz");

                for (unsigned f = 0; f < 6; f++) {
                        size_t n = 0;
                        uint8_t type = (uint8_t) (1 + rand_r(&seed) % (_SPACE_F_MAX - 1));
                        uint8_t fd = (uint8_t) (rand_r(&seed) % 3);

                        if (rand_r(&seed) % 4 == 0) {
                                n = (size_t) rand_r(&seed) % sizeof buf;
                                for (size_t i = 0; i < n; i++)
                                        buf[i] = (uint8_t) rand_r(&seed);
                        } else
                                for (unsigned k = rand_r(&seed) % 12; k > 0; k--) {
                                        const char *r = recs[rand_r(&seed) % ELEMENTSOF(recs)];
                                        size_t l = strlen(r) + 1;
                                        if (n + l > sizeof buf)
                                                break;
                                        memcpy(buf + n, r, l);
                                        n += l;
                                }
                        if (rand_r(&seed) % 3 == 0)
                                type = SPACE_F_OK;
                        frame(x, type, fd, buf, n);
                        if (streq(x->op, "watch")) {
                                FileWatchEvent ev;

                                while (file_xfer_next_event(x, &ev) == 1)
                                        if (!file_watch_event_type_name(ev.type) ||
                                            (!streq(ev.name, ".") && !file_rel_valid(ev.name)))
                                                bad++;
                        }
                }
                if (x->state == FILE_XFER_FAILED && (!x->error_code || !x->error_message))
                        bad++;
                if (x->out.len > 2 * SPACE_STREAM_WINDOW + 64)
                        bad++;
                drop(x);
        }
        ok(bad == 0, "20000 transfers of random frames: no crash, failures always say why, buffers bounded");
}

int main(void) {
        plan(0);
        test_stat();
        test_errors();
        test_read();
        test_list();
        test_meta();
        test_write();
        test_watch();
        test_fuzz();
        return done();
}
