/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: a directory watch's events as a hostile guest sends them (spaced/channel/files-watch.c,
 * and FILE op=watch's frames in spaced/channel/files.c), the way tests/unit/test-files.c drives them: a
 * FileXfer made by hand, with no channel and nobody waiting.
 *
 * Input: byte 0 bit 0 says whether the watch is armed (OK) first; the rest is the guest's byte stream on the
 * channel, cut into frames by lib/proto.c's reader, each handed to the watch; after each frame the events are
 * taken as envd-watch.c takes them. The invariants: the same bytes as one payload parse (1/0/-EBADMSG) the
 * way the frame was judged; every event taken has a known type and a name that is "." or a path below the
 * directory without "", "." or ".." parts; an entry has a known type and mode within 07777; owner and group
 * names are short; a failed watch says why; what it holds stays within a window of frames. */

#include <stdlib.h>
#include <string.h>

#include "fuzz-util.h"
#include "macro.h"
#include "channel/files.h"
#include "core/log.h"

static Manager manager;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        log_max_level = 0;
        return 0;
}

static void check_event(const FileWatchEvent *ev) {
        check(file_watch_event_type_name(ev->type));
        check(ev->name && (streq(ev->name, ".") || file_rel_valid(ev->name)));
        /* and, checked here without files.c's help: no component is empty, "." (but the whole) or ".." */
        if (!streq(ev->name, "."))
                for (const char *c = ev->name;;) {
                        size_t l = strcspn(c, "/");

                        check(l > 0 && !(l == 1 && c[0] == '.') && !(l == 2 && c[0] == '.' && c[1] == '.'));
                        if (!c[l])
                                break;
                        c += l + 1;
                }
        if (ev->has_entry) {
                check(ev->entry.type <= FILE_ENTRY_OTHER);
                check(ev->entry.mode <= 07777);
        }
        check(!ev->owner || strlen(ev->owner) <= 64);
        check(!ev->group || strlen(ev->group) <= 64);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static SpaceFrameReader reader;
        FileXfer *x;

        if (size < 1)
                return 0;
        x = calloc(1, sizeof *x);
        if (!x)
                return 0;
        x->manager = &manager;
        snprintf(x->op, sizeof x->op, "watch");
        x->path = strdup("/home/user/w");
        x->stream = 7;
        x->credit_left = SPACE_STREAM_WINDOW;
        space_credit_init(&x->send_credit);
        if (data[0] & 1) {
                SpaceFrameHeader ok = { .stream = 7, .type = SPACE_F_OK };

                file_xfer_on_frame(x, &ok, (const uint8_t *) "");
        }
        reader.have = 0;
        data++;
        size--;
        while (size > 0) {
                SpaceFrameHeader h;
                const uint8_t *payload;
                size_t used;
                int r = space_frame_reader_feed(&reader, data, size, &used, &h, &payload);
                FileWatchEvent ev;

                data += used;
                size -= used;
                if (r <= 0)
                        break;
                if (h.type == SPACE_F_DATA) {
                        /* the frame alone: valid as a whole exactly when every event of it parses */
                        bool valid = file_watch_events_valid(payload, h.length);
                        size_t off = 0;
                        int k;

                        while ((k = file_watch_event_parse(payload, h.length, &off, &ev)) > 0) {
                                check_event(&ev);
                                check(off <= h.length);
                        }
                        check(!valid || (k == 0 && off == h.length));
                }
                file_xfer_on_frame(x, &h, payload);
                while (file_xfer_next_event(x, &ev) == 1)
                        check_event(&ev);
                check(x->state != FILE_XFER_FAILED || (x->error_code && x->error_message));
                check(x->out.len <= SPACE_STREAM_WINDOW + 4 * (SPACE_STREAM_WINDOW + 1));
        }
        file_xfer_detach(x);
        return 0;
}
