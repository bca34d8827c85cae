/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: the daemon's side of file transfers against a hostile guest (spaced/channel/files.c), the
 * way tests/unit/test-files.c drives it: a FileXfer made by hand, with no channel and nobody waiting.
 *
 * Input: byte 0 picks the operation (stat, list, read, write, ...), byte 1 the read size and when the host
 * "sends" its EOF of an upload, the rest is the byte stream the guest writes on the channel, cut into frames by
 * lib/proto.c's reader; every frame goes to the transfer (as agent.c would, for its stream). A reader drains
 * what the transfer produces (file bytes or a list's JSON) and gives the credit back as the agent would.
 * The invariants: a failed transfer says why, a finished one has a reply whose entry either parses or is
 * refused, a list's output is valid JSON at the end, and what the transfer holds stays bounded. */

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-util.h"
#include "macro.h"
#include "channel/files.h"
#include "core/log.h"

static Manager manager;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        log_max_level = 0; /* every protocol error is a warning: not millions of them */
        return 0;
}

static const char *const ops[] = { "stat", "list", "read", "write", "remove", "mkdir", "move", "symlink", "attrs" };

static void drain(FileXfer *x, SpaceBuf *json, size_t max) {
        static char buf[SPACE_STREAM_WINDOW];
        bool list = streq(x->op, "list");

        for (;;) {
                uint64_t before = x->uncredited;
                ssize_t n = file_xfer_read(x, buf, max);

                if (n <= 0)
                        break;
                if ((size_t) n > max)
                        abort();
                if (list)
                        (void) space_buf_append(json, buf, (size_t) n);
                /* send_credit() without an agent sends nothing: give the credit back as the guest would see it */
                if (x->uncredited == 0 && before + (list ? 0 : (uint64_t) n) > 0 && x->state == FILE_XFER_OPEN)
                        x->credit_left += before + (list ? 0 : (uint64_t) n);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static SpaceFrameReader reader;
        _cleanup_(space_buf_done) SpaceBuf json = {};
        const char *op;
        size_t max, eof_after, frames = 0;
        FileXfer *x;

        if (size < 2)
                return 0;
        op = ops[data[0] % ELEMENTSOF(ops)];
        max = (size_t) (data[1] & 0x0f) * 4099U + 1U;
        eof_after = data[1] >> 4;
        data += 2;
        size -= 2;

        x = calloc(1, sizeof *x);
        if (!x)
                return 0;
        x->manager = &manager;
        snprintf(x->op, sizeof x->op, "%s", op);
        x->path = strdup(data[-2] & 0x80 ? "/" : "/fuzz/dir");
        x->stream = 7;
        x->credit_left = SPACE_STREAM_WINDOW;
        space_credit_init(&x->send_credit);
        file_xfer_open_reader(x);

        reader.have = 0;
        while (size > 0) {
                SpaceFrameHeader h;
                const uint8_t *p;
                size_t used = 0;
                int r = space_frame_reader_feed(&reader, data, size, &used, &h, &p);

                data += used;
                size -= used;
                if (r <= 0)
                        break; /* a malformed header drops the channel; a partial frame waits forever */
                h.stream = x->stream;
                file_xfer_on_frame(x, &h, p);
                if (++frames == eof_after)
                        x->eof_sent = true;
                drain(x, &json, max);
                if (x->state == FILE_XFER_FAILED && (!x->error_code || !x->error_message))
                        abort();
                if (x->out.len > 2 * SPACE_STREAM_WINDOW + 64 * 1024)
                        abort();
        }

        if (x->state == FILE_XFER_DONE) {
                FileEntry e;
                if (file_xfer_reply_entry(x, &e) == 0) {
                        cJSON *o = file_entry_to_json(x->path, &e);
                        char *s = cJSON_PrintUnformatted(o);
                        if (!o || !s)
                                abort();
                        free(s);
                        cJSON_Delete(o);
                }
        }
        if (streq(op, "list") && x->eof && x->state != FILE_XFER_FAILED) {
                cJSON *o;
                drain(x, &json, max);
                (void) space_buf_append(&json, "", 1);
                o = cJSON_Parse((const char *) json.data);
                if (!o)
                        abort(); /* the list's JSON must be whole and valid once it ended */
                cJSON_Delete(o);
        }
        file_xfer_close_reader(x);
        return 0;
}
