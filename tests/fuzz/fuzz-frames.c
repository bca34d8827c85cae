/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: the channel's framing as the host reads it from a hostile guest (lib/proto.c).
 *
 * Input: byte 0 picks the read() chunk size (so the split points are fuzzed too), the rest is the byte stream
 * the guest writes. Every frame the reader hands back is checked against what the reader promises (bounded
 * length, known type and fd, the header packs back to the same bytes), its payload is walked as kv records
 * (space_kv_next, space_kv_get), and DATA and CREDIT frames run through per-(stream, fd) credit accounting the
 * way the host keeps it: a stream that overruns its window or returns more credit than it was given is
 * killed, and nothing ever goes above the window. */

#include <stdlib.h>
#include <string.h>

#include "fuzz-util.h"
#include "proto.h"

#define STREAMS 8

static void check_kv(const uint8_t *p, size_t n) {
        size_t off = 0, klen, records = 0;
        const char *k, *v;
        int r;

        while ((r = space_kv_next(p, n, &off, &k, &klen, &v)) > 0) {
                if (klen == 0 || k[klen] != '=' || v != k + klen + 1 || off > n ||
                    (size_t) (v - (const char *) p) + strlen(v) >= n)
                        abort();
                if (memchr(k, 0, klen))
                        abort();
                if (++records > SPACE_KV_RECORDS_MAX)
                        abort();
        }
        if (r != 0 && r != -EBADMSG)
                abort();
        for (const char *const *key = (const char *const[]) { "argv", "env", "pid", "errno", "code", NULL }; *key; key++) {
                r = space_kv_get(p, n, *key, &v);
                if (r < 0 && r != -EBADMSG)
                        abort();
                if (r > 0 && (v < (const char *) p || v >= (const char *) p + n))
                        abort();
        }
}

typedef struct Stream {
        uint32_t id;
        bool dead;
        SpaceCredit recv[3]; /* what the guest may still send us on fd 0..2 */
        SpaceCredit send[3]; /* what we may still send it */
} Stream;

static Stream *stream_of(Stream *s, uint32_t id) {
        Stream *free_slot = NULL;

        for (unsigned i = 0; i < STREAMS; i++) {
                if (s[i].id == id)
                        return &s[i];
                if (!s[i].id && !free_slot)
                        free_slot = &s[i];
        }
        if (!free_slot)
                return NULL;
        free_slot->id = id;
        for (unsigned fd = 0; fd < 3; fd++) {
                space_credit_init(&free_slot->recv[fd]);
                space_credit_init(&free_slot->send[fd]);
        }
        return free_slot;
}

static void on_frame(Stream *streams, const SpaceFrameHeader *h, const uint8_t *p) {
        uint8_t packed[SPACE_FRAME_HEADER_SIZE];
        SpaceFrameHeader back;
        Stream *s;

        if (h->length > SPACE_FRAME_PAYLOAD_MAX || h->type == 0 || h->type >= _SPACE_F_MAX || h->fd > 2)
                abort();
        if (!space_frame_type_to_string(h->type))
                abort();
        if (space_frame_header_pack(h, packed) < 0 || space_frame_header_unpack(packed, &back) < 0 ||
            back.length != h->length || back.stream != h->stream || back.type != h->type ||
            back.fd != h->fd)
                abort();
        check_kv(p, h->length);

        if (h->stream == 0 || !(s = stream_of(streams, h->stream)) || s->dead)
                return;
        switch (h->type) {
        case SPACE_F_DATA:
                if (space_credit_take(&s->recv[h->fd], h->length) < 0) {
                        s->dead = true; /* the host kills a stream that overruns its window */
                        return;
                }
                /* the host passes the bytes on and gives the credit back */
                if (h->length > 0 && p[0] & 1 && space_credit_give(&s->recv[h->fd], h->length) < 0)
                        abort();
                break;
        case SPACE_F_CREDIT:
                if (h->length != 4) {
                        s->dead = true;
                        return;
                }
                if (space_credit_give(&s->send[h->fd], space_get_le32(p)) < 0)
                        space_credit_give_clamp(&s->send[h->fd], space_get_le32(p));
                (void) space_credit_take(&s->send[h->fd], h->length * 1000U);
                break;
        case SPACE_F_CLOSE:
                s->id = 0;
                s->dead = false;
                break;
        default:
                break;
        }
        for (unsigned fd = 0; fd < 3; fd++)
                if (s->recv[fd].available > SPACE_STREAM_WINDOW || s->send[fd].available > SPACE_STREAM_WINDOW)
                        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static SpaceFrameReader reader;
        Stream streams[STREAMS] = {};
        size_t pos = 0, chunk;

        if (size == 0)
                return 0;
        chunk = (size_t) data[0] * 37U + 1U;
        data++;
        size--;
        reader.have = 0;

        /* the whole input as one payload too */
        check_kv(data, size);

        while (pos < size) {
                size_t n = chunk < size - pos ? chunk : size - pos, off = 0;

                while (off < n) {
                        SpaceFrameHeader h;
                        const uint8_t *p;
                        size_t used = 0;
                        int r;

                        r = space_frame_reader_feed(&reader, data + pos + off, n - off, &used, &h, &p);
                        if (used > n - off)
                                abort();
                        off += used;
                        if (r == -EBADMSG)
                                return 0; /* the host disconnects here */
                        if (r < 0)
                                abort();
                        if (r == 0) {
                                if (off != n)
                                        abort();
                                break;
                        }
                        on_frame(streams, &h, p);
                }
                pos += n;
        }
        return 0;
}
