/* SPDX-License-Identifier: Apache-2.0 */

/* Unit tests for lib/proto.c: framing, the incremental reader, key=value records and credit. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/macro.h"
#include "../../lib/proto.h"
#include "tap.h"

static void test_header_roundtrip(void) {
        for (uint8_t t = SPACE_F_HELLO; t < _SPACE_F_MAX; t++) {
                SpaceFrameHeader h = { .length = t * 100U, .stream = 0x12345678U + t, .type = t, .fd = t % 3 }, g;
                uint8_t raw[SPACE_FRAME_HEADER_SIZE];

                ok(space_frame_header_pack(&h, raw) == 0 && space_frame_header_unpack(raw, &g) == 0 &&
                           g.length == h.length && g.stream == h.stream && g.type == h.type && g.fd == h.fd,
                   "header round-trip %s", space_frame_type_to_string(t));
        }
}

static void test_header_invalid(void) {
        uint8_t raw[SPACE_FRAME_HEADER_SIZE], bad[SPACE_FRAME_HEADER_SIZE];
        SpaceFrameHeader h = { .length = SPACE_FRAME_PAYLOAD_MAX, .stream = 1, .type = SPACE_F_DATA, .fd = 1 }, g;

        ok(space_frame_header_pack(&h, raw) == 0, "pack max length");
        ok(space_frame_header_unpack(raw, &g) == 0 && g.length == SPACE_FRAME_PAYLOAD_MAX, "unpack max length");

        h.length = SPACE_FRAME_PAYLOAD_MAX + 1;
        ok(space_frame_header_pack(&h, raw) == -EINVAL, "pack: length over max -> EINVAL");
        h = (SpaceFrameHeader) { .length = 0, .type = 0 };
        ok(space_frame_header_pack(&h, raw) == -EINVAL, "pack: type 0 -> EINVAL");
        h.type = _SPACE_F_MAX;
        ok(space_frame_header_pack(&h, raw) == -EINVAL, "pack: type MAX -> EINVAL");
        h = (SpaceFrameHeader) { .type = SPACE_F_DATA, .fd = 3 };
        ok(space_frame_header_pack(&h, raw) == -EINVAL, "pack: fd 3 -> EINVAL");

        h = (SpaceFrameHeader) { .length = 4, .stream = 7, .type = SPACE_F_CREDIT, .fd = 2 };
        ok(space_frame_header_pack(&h, raw) == 0, "pack credit");

        memcpy(bad, raw, sizeof bad);
        space_put_le32(bad, SPACE_FRAME_PAYLOAD_MAX + 1);
        ok(space_frame_header_unpack(bad, &g) == -EBADMSG, "unpack: length over max -> EBADMSG");
        space_put_le32(bad, UINT32_MAX);
        ok(space_frame_header_unpack(bad, &g) == -EBADMSG, "unpack: length 0xffffffff -> EBADMSG");

        memcpy(bad, raw, sizeof bad);
        bad[8] = 0;
        ok(space_frame_header_unpack(bad, &g) == -EBADMSG, "unpack: type 0 -> EBADMSG");
        bad[8] = _SPACE_F_MAX;
        ok(space_frame_header_unpack(bad, &g) == -EBADMSG, "unpack: unknown type -> EBADMSG");
        bad[8] = 0xff;
        ok(space_frame_header_unpack(bad, &g) == -EBADMSG, "unpack: type 255 -> EBADMSG");

        memcpy(bad, raw, sizeof bad);
        bad[9] = 3;
        ok(space_frame_header_unpack(bad, &g) == -EBADMSG, "unpack: fd 3 -> EBADMSG");

        memcpy(bad, raw, sizeof bad);
        bad[10] = 1;
        ok(space_frame_header_unpack(bad, &g) == -EBADMSG, "unpack: reserved low byte -> EBADMSG");
        memcpy(bad, raw, sizeof bad);
        bad[11] = 0x80;
        ok(space_frame_header_unpack(bad, &g) == -EBADMSG, "unpack: reserved high bit -> EBADMSG");

        ok(space_frame_type_to_string(SPACE_F_EXEC) && streq(space_frame_type_to_string(SPACE_F_EXEC), "EXEC"),
           "type name EXEC");
        ok(space_frame_type_to_string(0) == NULL && space_frame_type_to_string(200) == NULL, "type name unknown");
}

static int stream_payload_byte(uint32_t stream, size_t i) {
        return (int) ((stream * 31U + i * 7U) & 0xff);
}

/* Builds frames of every type with varied payload sizes into b. */
static void build_frames(SpaceBuf *b, unsigned count) {
        static uint8_t payload[SPACE_FRAME_PAYLOAD_MAX];

        for (unsigned i = 0; i < count; i++) {
                uint8_t type = SPACE_F_HELLO + i % (_SPACE_F_MAX - 1);
                size_t len = (i * 977U) % 3000U;

                if (i % 17 == 5)
                        len = SPACE_FRAME_PAYLOAD_MAX;
                if (i % 5 == 0)
                        len = 0;
                for (size_t j = 0; j < len; j++)
                        payload[j] = (uint8_t) stream_payload_byte(i, j);
                (void) space_frame_append(b, type, (uint8_t) (i % 3), i, payload, len);
        }
}

static bool check_frame(unsigned i, const SpaceFrameHeader *h, const uint8_t *p) {
        size_t len = (i * 977U) % 3000U;

        if (i % 17 == 5)
                len = SPACE_FRAME_PAYLOAD_MAX;
        if (i % 5 == 0)
                len = 0;
        if (h->type != SPACE_F_HELLO + i % (_SPACE_F_MAX - 1) || h->fd != i % 3 || h->stream != i || h->length != len)
                return false;
        for (size_t j = 0; j < len; j++)
                if (p[j] != stream_payload_byte(i, j))
                        return false;
        return true;
}

/* Feeds data in chunks of `chunk` bytes (0: all at once) and checks every frame comes out intact. */
static bool feed_all(const SpaceBuf *b, unsigned count, size_t chunk) {
        SpaceFrameReader *r = calloc(1, sizeof *r);
        size_t pos = 0;
        unsigned seen = 0;
        bool good = true;

        while (pos < b->len && good) {
                size_t n = chunk == 0 || chunk > b->len - pos ? b->len - pos : chunk, off = 0;

                while (off < n || n == 0) {
                        SpaceFrameHeader h;
                        const uint8_t *p;
                        size_t used;
                        int k;

                        k = space_frame_reader_feed(r, b->data + pos + off, n - off, &used, &h, &p);
                        off += used;
                        if (k < 0) {
                                good = false;
                                break;
                        }
                        if (k == 0) {
                                if (off != n)
                                        good = false;
                                break;
                        }
                        if (!check_frame(seen, &h, p))
                                good = false;
                        seen++;
                }
                pos += n;
        }
        free(r);
        return good && seen == count;
}

static void test_reader(void) {
        SpaceBuf b = {};
        const unsigned count = 60;

        build_frames(&b, count);
        ok(b.len > 0, "built %u frames, %zu bytes", count, b.len);
        ok(feed_all(&b, count, 0), "many frames in one feed");
        ok(feed_all(&b, count, 1), "frames fed byte by byte");
        ok(feed_all(&b, count, 7), "frames fed 7 bytes at a time");
        ok(feed_all(&b, count, 4096), "frames fed 4096 bytes at a time");
        ok(feed_all(&b, count, SPACE_FRAME_MAX + 3), "frames fed SPACE_FRAME_MAX+3 bytes at a time");
        space_buf_done(&b);

        /* A truncated frame never comes out. */
        {
                SpaceFrameReader *r = calloc(1, sizeof *r);
                uint8_t pl[100] = { 1, 2, 3 };
                SpaceFrameHeader h;
                const uint8_t *p;
                size_t used, total = 0;
                int k = 0;
                bool never = true;

                (void) space_frame_append(&b, SPACE_F_DATA, 1, 9, pl, sizeof pl);
                for (size_t i = 0; i + 1 < b.len; i++) {
                        k = space_frame_reader_feed(r, b.data + i, 1, &used, &h, &p);
                        total += used;
                        if (k != 0)
                                never = false;
                }
                ok(never && total == b.len - 1, "truncated frame byte by byte: no frame, all bytes taken");
                k = space_frame_reader_feed(r, b.data + b.len - 1, 1, &used, &h, &p);
                ok(k == 1 && used == 1 && h.length == sizeof pl && h.stream == 9 && p[2] == 3,
                   "last byte completes the frame");
                k = space_frame_reader_feed(r, NULL, 0, &used, &h, &p);
                ok(k == 0 && used == 0 && r->have == 0, "empty feed after a frame resets the reader");
                free(r);
                space_buf_done(&b);
        }

        /* Garbage: a bad header is fatal and sticky. */
        {
                SpaceFrameReader *r = calloc(1, sizeof *r);
                uint8_t junk[64];
                SpaceFrameHeader h;
                const uint8_t *p;
                size_t used;
                int k;

                for (size_t i = 0; i < sizeof junk; i++)
                        junk[i] = (uint8_t) (0xa5 ^ (i * 13));
                k = space_frame_reader_feed(r, junk, sizeof junk, &used, &h, &p);
                ok(k == -EBADMSG, "garbage bytes -> EBADMSG");
                k = space_frame_reader_feed(r, junk, sizeof junk, &used, &h, &p);
                ok(k == -EBADMSG, "reader stays broken after EBADMSG");
                free(r);

                r = calloc(1, sizeof *r);
                uint8_t hdr[SPACE_FRAME_HEADER_SIZE] = {};
                space_put_le32(hdr, SPACE_FRAME_PAYLOAD_MAX + 1);
                hdr[8] = SPACE_F_DATA;
                k = space_frame_reader_feed(r, hdr, sizeof hdr, &used, &h, &p);
                ok(k == -EBADMSG, "over-long length in the reader -> EBADMSG");
                free(r);

                /* A good frame followed by garbage: the good frame comes out first. */
                r = calloc(1, sizeof *r);
                (void) space_frame_append(&b, SPACE_F_PING, 0, 3, "abc", 3);
                (void) space_buf_append(&b, junk, sizeof junk);
                k = space_frame_reader_feed(r, b.data, b.len, &used, &h, &p);
                ok(k == 1 && h.type == SPACE_F_PING && used == SPACE_FRAME_HEADER_SIZE + 3 && memcmp(p, "abc", 3) == 0,
                   "good frame before garbage is delivered");
                k = space_frame_reader_feed(r, b.data + used, b.len - used, &used, &h, &p);
                ok(k == -EBADMSG, "then the garbage -> EBADMSG");
                free(r);
                space_buf_done(&b);
        }
}

static void test_buf(void) {
        SpaceBuf b = {};
        uint8_t big[SPACE_FRAME_PAYLOAD_MAX + 1] = {};

        ok(space_buf_append(&b, "hello", 5) == 0 && b.len == 5, "buf append");
        space_buf_consume(&b, 2);
        ok(b.len == 3 && memcmp(b.data, "llo", 3) == 0, "buf consume partial");
        space_buf_consume(&b, 100);
        ok(b.len == 0, "buf consume all");
        ok(space_frame_append(&b, SPACE_F_DATA, 1, 1, big, sizeof big) == -EINVAL && b.len == 0,
           "frame_append over max -> EINVAL, nothing queued");
        ok(space_frame_append(&b, SPACE_F_DATA, 3, 1, big, 1) == -EINVAL && b.len == 0,
           "frame_append fd 3 -> EINVAL");
        space_buf_done(&b);
        ok(b.data == NULL && b.len == 0 && b.cap == 0, "buf done");
}

static void test_kv(void) {
        SpaceBuf b = {};
        const char *k, *v;
        size_t off = 0, kl;
        int r;

        ok(space_kv_add(&b, "argv", "echo") == 0 && space_kv_add(&b, "argv", "a=b") == 0 &&
                   space_kv_add(&b, "cwd", "") == 0 && space_kv_addf(&b, "pid", "%d", 42) == 0,
           "kv add");
        ok(space_kv_add(&b, "", "x") == -EINVAL, "kv add empty key -> EINVAL");
        ok(space_kv_add(&b, "a=b", "x") == -EINVAL, "kv add key with '=' -> EINVAL");

        r = space_kv_next(b.data, b.len, &off, &k, &kl, &v);
        ok(r == 1 && kl == 4 && strncmp(k, "argv", 4) == 0 && streq(v, "echo"), "kv next 1");
        r = space_kv_next(b.data, b.len, &off, &k, &kl, &v);
        ok(r == 1 && kl == 4 && streq(v, "a=b"), "kv next 2: value may hold '='");
        r = space_kv_next(b.data, b.len, &off, &k, &kl, &v);
        ok(r == 1 && kl == 3 && streq(v, ""), "kv next 3: empty value");
        r = space_kv_next(b.data, b.len, &off, &k, &kl, &v);
        ok(r == 1 && streq(v, "42"), "kv next 4: addf");
        r = space_kv_next(b.data, b.len, &off, &k, &kl, &v);
        ok(r == 0, "kv next end");

        ok(space_kv_get(b.data, b.len, "pid", &v) == 1 && streq(v, "42"), "kv get");
        ok(space_kv_get(b.data, b.len, "argv", &v) == 1 && streq(v, "echo"), "kv get first of repeated");
        ok(space_kv_get(b.data, b.len, "nope", &v) == 0, "kv get missing");
        ok(space_kv_get(b.data, b.len, "arg", &v) == 0, "kv get does not match a key prefix");
        ok(space_kv_get(NULL, 0, "x", &v) == 0, "kv get empty payload");
        space_buf_done(&b);

        off = 0;
        ok(space_kv_next((const uint8_t *) "a=1\0b=2", 7, &off, &k, &kl, &v) == -EBADMSG,
           "kv missing NUL -> EBADMSG (before any record is returned)");
        off = 0;
        ok(space_kv_next((const uint8_t *) "ab\0", 3, &off, &k, &kl, &v) == -EBADMSG, "kv missing '=' -> EBADMSG");
        off = 0;
        ok(space_kv_next((const uint8_t *) "=v\0", 3, &off, &k, &kl, &v) == -EBADMSG, "kv empty key -> EBADMSG");
        off = 0;
        ok(space_kv_next((const uint8_t *) "\0", 1, &off, &k, &kl, &v) == -EBADMSG, "kv empty record -> EBADMSG");
        ok(space_kv_get((const uint8_t *) "a=1\0b", 5, "a", &v) == -EBADMSG, "kv get on malformed -> EBADMSG");

        for (unsigned i = 0; i < SPACE_KV_RECORDS_MAX; i++)
                (void) space_kv_add(&b, "e", "");
        off = 0;
        r = space_kv_next(b.data, b.len, &off, &k, &kl, &v);
        ok(r == 1, "kv exactly SPACE_KV_RECORDS_MAX records ok");
        (void) space_kv_add(&b, "e", "");
        off = 0;
        r = space_kv_next(b.data, b.len, &off, &k, &kl, &v);
        ok(r == -EBADMSG, "kv too many records -> EBADMSG");
        space_buf_done(&b);
}

/* A guest's code=: parsed once into the enum; anything that is no code of ours is "none", never a guess. */
static void test_kv_code(void) {
        _cleanup_(space_buf_done) SpaceBuf b = {}, big = {};
        _cleanup_free_ char *huge = malloc(SPACE_FRAME_PAYLOAD_MAX - 16);
        SpaceCode c = _SPACE_CODE_MAX;

        ASSERT(huge);
        ok(space_kv_add(&b, "errno", "2") == 0 && space_kv_add(&b, "code", "too_many_entries") == 0 &&
           space_kv_get_code(b.data, b.len, &c) == 1 && c == SPACE_CODE_TOO_MANY_ENTRIES, "kv code: a known name");
        for (unsigned i = 0; i < _SPACE_CODE_MAX; i++) {
                SpaceBuf one = {};

                c = _SPACE_CODE_MAX;
                ASSERT(space_kv_add(&one, "code", space_code_to_string((SpaceCode) i)) == 0);
                ok(space_kv_get_code(one.data, one.len, &c) == 1 && c == (SpaceCode) i, "kv code: %s round trips",
                   space_code_to_string((SpaceCode) i));
                space_buf_done(&one);
        }
        space_buf_done(&b);
        c = SPACE_CODE_BUSY;
        ok(space_kv_add(&b, "errno", "2") == 0 && space_kv_get_code(b.data, b.len, &c) == 0 && c == SPACE_CODE_BUSY,
           "kv code: absent is 0, *ret untouched");
        space_buf_done(&b);
        ok(space_kv_add(&b, "code", "no_such_code") == 0 && space_kv_get_code(b.data, b.len, &c) == 0 &&
           c == SPACE_CODE_BUSY, "kv code: an unknown name is 0, *ret untouched");
        space_buf_done(&b);
        ok(space_kv_add(&b, "code", "") == 0 && space_kv_get_code(b.data, b.len, &c) == 0, "kv code: empty is 0");
        space_buf_done(&b);
        ok(space_kv_add(&b, "code", "denied_x") == 0 && space_kv_get_code(b.data, b.len, &c) == 0 &&
           space_kv_add(&b, "code", "DENIED") == 0 && space_kv_get_code(b.data, b.len, &c) == 0,
           "kv code: a known name with a tail, or in capitals, is no code");
        space_buf_done(&b);
        ok(space_kv_add(&b, "code", "unknown_user") == 0 && space_kv_add(&b, "code", "busy") == 0 &&
           space_kv_get_code(b.data, b.len, &c) == 1 && c == SPACE_CODE_UNKNOWN_USER,
           "kv code: the first code= counts, as space_kv_get()");
        memset(huge, 'a', SPACE_FRAME_PAYLOAD_MAX - 17);
        huge[SPACE_FRAME_PAYLOAD_MAX - 17] = '\0';
        ok(space_kv_add(&big, "code", huge) == 0 && space_kv_get_code(big.data, big.len, &c) == 0,
           "kv code: a value as long as a frame is no code");
        ok(space_kv_get_code((const uint8_t *) "code=busy", 9, &c) == -EBADMSG,
           "kv code: a record without its NUL -> EBADMSG, nothing read past n");
        ok(space_kv_get_code(NULL, 0, &c) == 0, "kv code: an empty payload has none");
}

static void test_kv_number(void) {
        uint64_t v = 7;

        ok(space_kv_parse_u64("0", 10, &v) == 0 && v == 0 && space_kv_parse_u64("4095", 4095, &v) == 0 && v == 4095,
           "kv number: digits, up to max");
        ok(space_kv_parse_u64("18446744073709551615", UINT64_MAX, &v) == 0 && v == UINT64_MAX,
           "kv number: UINT64_MAX");
        v = 7;
        ok(space_kv_parse_u64("4096", 4095, &v) == -EBADMSG && space_kv_parse_u64("18446744073709551616", UINT64_MAX, &v) == -EBADMSG &&
           space_kv_parse_u64("99999999999999999999999", UINT64_MAX, &v) == -EBADMSG && v == 7,
           "kv number: past max, past 64 bits: refused, nothing set");
        ok(space_kv_parse_u64("", 10, &v) == -EBADMSG && space_kv_parse_u64("-1", 10, &v) == -EBADMSG &&
           space_kv_parse_u64("+1", 10, &v) == -EBADMSG && space_kv_parse_u64(" 1", 10, &v) == -EBADMSG &&
           space_kv_parse_u64("\t1", 10, &v) == -EBADMSG && space_kv_parse_u64("1 ", 10, &v) == -EBADMSG &&
           space_kv_parse_u64("0x1", 10, &v) == -EBADMSG,
           "kv number: empty, a sign, spaces, a tab, hex: refused (strtoull would take some)");
}

static void test_credit(void) {
        SpaceCredit c;

        space_credit_init(&c);
        ok(c.available == SPACE_STREAM_WINDOW, "credit starts at the window");
        ok(space_credit_give(&c, 1) == -EOVERFLOW && c.available == SPACE_STREAM_WINDOW,
           "give past the window -> EOVERFLOW");
        ok(space_credit_take(&c, 1000) == 0 && c.available == SPACE_STREAM_WINDOW - 1000, "take 1000");
        ok(space_credit_give(&c, 1001) == -EOVERFLOW, "give 1001 after take 1000 -> EOVERFLOW");
        ok(space_credit_give(&c, 1000) == 0 && c.available == SPACE_STREAM_WINDOW, "give 1000 back");
        ok(space_credit_take(&c, SPACE_STREAM_WINDOW) == 0 && c.available == 0, "take the whole window");
        ok(space_credit_take(&c, 1) == -ENOBUFS && c.available == 0, "take past the window -> ENOBUFS");
        ok(space_credit_give(&c, UINT32_MAX) == -EOVERFLOW, "give UINT32_MAX -> EOVERFLOW");
        ok(space_credit_take(&c, 0) == 0, "take 0 with no credit is fine");

        /* The guest's side: a re-granted window clamps instead of failing. */
        space_credit_give_clamp(&c, 1000);
        ok(c.available == 1000, "clamp: give 1000 from 0");
        space_credit_give_clamp(&c, SPACE_STREAM_WINDOW);
        ok(c.available == SPACE_STREAM_WINDOW, "clamp: a full window on top stops at the window");
        space_credit_give_clamp(&c, UINT32_MAX);
        ok(c.available == SPACE_STREAM_WINDOW, "clamp: UINT32_MAX stays at the window");
        ok(space_frame_type_to_string(SPACE_F_RELEASE) && streq(space_frame_type_to_string(SPACE_F_RELEASE), "RELEASE") &&
           space_frame_type_to_string(SPACE_F_ADOPT) && streq(space_frame_type_to_string(SPACE_F_ADOPT), "ADOPT"),
           "type names RELEASE and ADOPT");
        ok(SPACE_F_RELEASE == 16, "RELEASE is frame type 16 (API.md)");
}

int main(void) {
        plan(0);
        test_header_roundtrip();
        test_header_invalid();
        test_reader();
        test_buf();
        test_kv();
        test_kv_code();
        test_kv_number();
        test_credit();
        return done();
}
