/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>

#include "channel/files.h"
#include "macro.h"
#include "user.h"

/* The events of a directory watch, as the guest sends them (lib/proto.h, FILE op=watch): see files.h. The
 * guest is not trusted: every record is checked before anybody reads it. */

static const char *const type_names[_FILE_WATCH_MAX] = {
        [FILE_WATCH_CREATE] = "create", [FILE_WATCH_WRITE] = "write",   [FILE_WATCH_REMOVE] = "remove",
        [FILE_WATCH_RENAME] = "rename", [FILE_WATCH_CHMOD] = "chmod",
};

const char *file_watch_event_type_name(FileWatchEventType t) {
        return (unsigned) t < _FILE_WATCH_MAX ? type_names[t] : NULL;
}

/* An owner= or group= name: a user's shape, short, else not used. */
static const char *valid_name(const char *v) {
        return v && *v && strlen(v) <= SPACE_USER_SPEC_MAX && space_user_spec_parse(v, NULL) >= 0 && !strchr(v, ':')
                       ? v
                       : NULL;
}

#define KEY(s) (klen == sizeof(s) - 1 && memcmp(k, s, klen) == 0)

int file_watch_event_parse(const uint8_t *p, size_t n, size_t *offset, FileWatchEvent *ret) {
        FileWatchEvent ev = { .type = _FILE_WATCH_MAX };
        size_t off = *offset, klen, at;
        const char *k, *v;
        int r;

        r = space_kv_next(p, n, &off, &k, &klen, &v);
        if (r <= 0)
                return r;
        if (!KEY("ev"))
                return -EBADMSG;
        for (unsigned i = 0; i < _FILE_WATCH_MAX; i++)
                if (streq(v, type_names[i]))
                        ev.type = (FileWatchEventType) i;
        if (ev.type == _FILE_WATCH_MAX)
                return -EBADMSG;
        r = space_kv_next(p, n, &off, &k, &klen, &v);
        if (r <= 0 || !KEY("name") || (!streq(v, ".") && !file_rel_valid(v)))
                return -EBADMSG;
        ev.name = v;

        /* the entry, unless the next event (or the end) comes first */
        at = off;
        r = space_kv_next(p, n, &at, &k, &klen, &v);
        if (r < 0)
                return r;
        if (r > 0 && !KEY("ev")) {
                size_t start = off;

                if (file_entry_parse(p, n, &off, false, &ev.entry) < 0)
                        return -EBADMSG;
                ev.has_entry = true;
                for (size_t o = start; o < off;) {
                        r = space_kv_next(p, off, &o, &k, &klen, &v);
                        if (r <= 0)
                                break;
                        if (KEY("owner"))
                                ev.owner = valid_name(v);
                        else if (KEY("group"))
                                ev.group = valid_name(v);
                }
        }
        *offset = off;
        *ret = ev;
        return 1;
}

#undef KEY

bool file_watch_events_valid(const uint8_t *p, size_t n) {
        size_t off = 0;
        unsigned count = 0;

        for (;;) {
                FileWatchEvent ev;
                int r = file_watch_event_parse(p, n, &off, &ev);

                if (r < 0)
                        return false;
                if (r == 0)
                        return count > 0 && off == n;
                count++;
        }
}

int file_xfer_next_event(FileXfer *x, FileWatchEvent *ret) {
        /* x->out holds the frames as they came, each after its le32 length (files.c, on_data) */
        while (x->out_off + 4 <= x->out.len) {
                uint32_t len = space_get_le32(x->out.data + x->out_off);

                if (len <= x->out.len - x->out_off - 4 &&
                    file_watch_event_parse(x->out.data + x->out_off + 4, len, &x->event_off, ret) > 0)
                        return 1;
                x->out_off += 4 + (size_t) len; /* that frame is done (or, which cannot be, bad) */
                x->event_off = 0;
        }
        /* all taken: the buffer starts again, and the guest may send as much again */
        x->out.len = x->out_off = x->event_off = 0;
        (void) file_xfer_return_credit(x);
        return x->state == FILE_XFER_FAILED ? CHANNEL_READ_ERROR : 0;
}
