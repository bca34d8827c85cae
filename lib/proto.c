/* SPDX-License-Identifier: Apache-2.0 */

/* The channel protocol: framing, key=value records, credit accounting. See proto.h. Everything here treats
 * its input as hostile: lengths, types, fds and reserved bits are checked before anything is trusted. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* vasprintf */
#endif

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "proto.h"

static const char *const frame_type_names[_SPACE_F_MAX] = {
        [SPACE_F_HELLO] = "HELLO",   [SPACE_F_PING] = "PING",       [SPACE_F_PONG] = "PONG",
        [SPACE_F_INIT] = "INIT",     [SPACE_F_OK] = "OK",           [SPACE_F_ERROR] = "ERROR",
        [SPACE_F_EXEC] = "EXEC",     [SPACE_F_STARTED] = "STARTED", [SPACE_F_DATA] = "DATA",
        [SPACE_F_EOF] = "EOF",       [SPACE_F_CREDIT] = "CREDIT",   [SPACE_F_SIGNAL] = "SIGNAL",
        [SPACE_F_RESIZE] = "RESIZE", [SPACE_F_EXIT] = "EXIT",       [SPACE_F_CLOSE] = "CLOSE",
        [SPACE_F_RELEASE] = "RELEASE", [SPACE_F_ADOPT] = "ADOPT",   [SPACE_F_FILE] = "FILE",
        [SPACE_F_CONNECT] = "CONNECT", [SPACE_F_RESOLVE] = "RESOLVE", [SPACE_F_PORT] = "PORT",
        [SPACE_F_VOLUME] = "VOLUME",
};

const char *space_frame_type_to_string(uint8_t type) {
        if (type == 0 || type >= _SPACE_F_MAX)
                return NULL;
        return frame_type_names[type];
}

static const char *const code_names[_SPACE_CODE_MAX] = {
        [SPACE_CODE_UNKNOWN_USER] = "unknown_user", [SPACE_CODE_UNKNOWN_GROUP] = "unknown_group",
        [SPACE_CODE_INVALID_USER] = "invalid_user", [SPACE_CODE_EXEC_FAILED] = "exec_failed",
        [SPACE_CODE_TOO_MANY_ENTRIES] = "too_many_entries",
        [SPACE_CODE_DENIED] = "denied",             [SPACE_CODE_UNREACHABLE] = "unreachable",
        [SPACE_CODE_INVALID] = "invalid",           [SPACE_CODE_BUSY] = "busy",
        [SPACE_CODE_TIMEOUT] = "timeout",           [SPACE_CODE_NXDOMAIN] = "nxdomain",
        [SPACE_CODE_TOO_MANY_WATCHES] = "too_many_watches", [SPACE_CODE_OVERFLOW] = "overflow",
};

const char *space_code_to_string(SpaceCode c) {
        return (unsigned) c < _SPACE_CODE_MAX ? code_names[c] : NULL;
}

int space_code_from_string(const char *s, SpaceCode *ret) {
        if (!s)
                return -EINVAL;
        for (unsigned i = 0; i < _SPACE_CODE_MAX; i++)
                if (strcmp(code_names[i], s) == 0) {
                        *ret = (SpaceCode) i;
                        return 0;
                }
        return -EINVAL;
}

static bool frame_type_valid(uint8_t type) {
        return type >= SPACE_F_HELLO && type < _SPACE_F_MAX;
}

int space_frame_header_pack(const SpaceFrameHeader *h, uint8_t out[static SPACE_FRAME_HEADER_SIZE]) {
        if (!h || h->length > SPACE_FRAME_PAYLOAD_MAX || !frame_type_valid(h->type) || h->fd > 2)
                return -EINVAL;

        space_put_le32(out, h->length);
        space_put_le32(out + 4, h->stream);
        out[8] = h->type;
        out[9] = h->fd;
        space_put_le16(out + 10, 0);
        return 0;
}

int space_frame_header_unpack(const uint8_t in[static SPACE_FRAME_HEADER_SIZE], SpaceFrameHeader *ret) {
        uint32_t length = space_get_le32(in);

        if (length > SPACE_FRAME_PAYLOAD_MAX || !frame_type_valid(in[8]) || in[9] > 2 ||
            space_get_le16(in + 10) != 0)
                return -EBADMSG;

        if (ret)
                *ret = (SpaceFrameHeader) {
                        .length = length,
                        .stream = space_get_le32(in + 4),
                        .type = in[8],
                        .fd = in[9],
                };
        return 0;
}

int space_frame_reader_feed(SpaceFrameReader *r, const uint8_t *data, size_t n, size_t *ret_consumed,
                            SpaceFrameHeader *ret_header, const uint8_t **ret_payload) {
        SpaceFrameHeader h;
        size_t consumed = 0, want, take;
        int k;

        if (!r || (!data && n > 0))
                return -EINVAL;
        if (ret_consumed)
                *ret_consumed = 0;

        /* The reader only ever holds bytes of one frame. If that frame is complete, it was handed out by the
         * previous call: drop it now, which is why the payload pointer is only valid until the next call. */
        if (r->have >= SPACE_FRAME_HEADER_SIZE) {
                k = space_frame_header_unpack(r->buf, &h);
                if (k < 0)
                        return k;
                if (r->have == SPACE_FRAME_HEADER_SIZE + (size_t) h.length)
                        r->have = 0;
        }

        for (;;) {
                if (r->have < SPACE_FRAME_HEADER_SIZE)
                        want = SPACE_FRAME_HEADER_SIZE - r->have;
                else {
                        k = space_frame_header_unpack(r->buf, &h);
                        if (k < 0)
                                return k;
                        want = SPACE_FRAME_HEADER_SIZE + (size_t) h.length - r->have;
                }

                take = want < n - consumed ? want : n - consumed;
                if (take > 0) {
                        memcpy(r->buf + r->have, data + consumed, take);
                        r->have += take;
                        consumed += take;
                        if (ret_consumed)
                                *ret_consumed = consumed;
                }

                if (r->have < SPACE_FRAME_HEADER_SIZE)
                        return 0;
                k = space_frame_header_unpack(r->buf, &h);
                if (k < 0)
                        return k;
                if (r->have == SPACE_FRAME_HEADER_SIZE + (size_t) h.length) {
                        if (ret_header)
                                *ret_header = h;
                        if (ret_payload)
                                *ret_payload = r->buf + SPACE_FRAME_HEADER_SIZE;
                        return 1;
                }
                if (consumed == n)
                        return 0;
        }
}

void space_buf_done(SpaceBuf *b) {
        if (!b)
                return;
        free(b->data);
        *b = (SpaceBuf) {};
}

int space_buf_append(SpaceBuf *b, const void *p, size_t n) {
        size_t need, cap;
        uint8_t *d;

        if (!b || (!p && n > 0))
                return -EINVAL;
        if (n == 0)
                return 0;
        if (n > SIZE_MAX - b->len)
                return -ENOMEM;

        need = b->len + n;
        if (need > b->cap) {
                cap = b->cap ? b->cap : 256;
                while (cap < need)
                        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
                d = realloc(b->data, cap);
                if (!d)
                        return -ENOMEM;
                b->data = d;
                b->cap = cap;
        }

        memcpy(b->data + b->len, p, n);
        b->len += n;
        return 0;
}

void space_buf_consume(SpaceBuf *b, size_t n) {
        if (!b)
                return;
        if (n >= b->len) {
                b->len = 0;
                return;
        }
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
}

int space_frame_append(SpaceBuf *b, uint8_t type, uint8_t fd, uint32_t stream, const void *payload, size_t n) {
        uint8_t hdr[SPACE_FRAME_HEADER_SIZE];
        size_t old;
        int r;

        if (n > SPACE_FRAME_PAYLOAD_MAX)
                return -EINVAL;
        r = space_frame_header_pack(&(SpaceFrameHeader) { .length = n, .stream = stream, .type = type, .fd = fd },
                                    hdr);
        if (r < 0)
                return r;

        old = b->len;
        r = space_buf_append(b, hdr, sizeof hdr);
        if (r < 0)
                return r;
        r = space_buf_append(b, payload, n);
        if (r < 0) {
                b->len = old; /* never leave half a frame queued */
                return r;
        }
        return 0;
}

int space_kv_add(SpaceBuf *b, const char *key, const char *value) {
        size_t old;
        int r;

        if (!b || !key || !value || key[0] == 0 || strchr(key, '='))
                return -EINVAL;

        old = b->len;
        r = space_buf_append(b, key, strlen(key));
        if (r >= 0)
                r = space_buf_append(b, "=", 1);
        if (r >= 0)
                r = space_buf_append(b, value, strlen(value) + 1);
        if (r < 0) {
                b->len = old;
                return r;
        }
        return 0;
}

int space_kv_addf(SpaceBuf *b, const char *key, const char *fmt, ...) {
        char *v = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&v, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;

        r = space_kv_add(b, key, v);
        free(v);
        return r;
}

/* Checks one record at p[off..n): returns its length including the NUL, or -EBADMSG. */
static ssize_t kv_record_check(const uint8_t *p, size_t n, size_t off, size_t *ret_key_len) {
        const uint8_t *rec = p + off, *nul, *eq;

        nul = memchr(rec, 0, n - off);
        if (!nul)
                return -EBADMSG;
        eq = memchr(rec, '=', (size_t) (nul - rec));
        if (!eq || eq == rec)
                return -EBADMSG;

        if (ret_key_len)
                *ret_key_len = (size_t) (eq - rec);
        return (ssize_t) (nul - rec) + 1;
}

int space_kv_next(const uint8_t *p, size_t n, size_t *offset, const char **ret_key, size_t *ret_key_len,
                  const char **ret_value) {
        size_t off, key_len, records = 0;
        ssize_t l;

        if (!offset || (!p && n > 0))
                return -EINVAL;

        off = *offset;
        if (off >= n)
                return 0;

        /* The first call validates the whole payload, so callers never act on a prefix of a malformed
         * message and the record cap holds without keeping a count in the caller's state. */
        if (off == 0)
                for (size_t o = 0; o < n; o += (size_t) l) {
                        l = kv_record_check(p, n, o, NULL);
                        if (l < 0)
                                return (int) l;
                        if (++records > SPACE_KV_RECORDS_MAX)
                                return -EBADMSG;
                }

        l = kv_record_check(p, n, off, &key_len);
        if (l < 0)
                return (int) l;

        if (ret_key)
                *ret_key = (const char *) p + off;
        if (ret_key_len)
                *ret_key_len = key_len;
        if (ret_value)
                *ret_value = (const char *) p + off + key_len + 1;
        *offset = off + (size_t) l;
        return 1;
}

int space_kv_get(const uint8_t *p, size_t n, const char *key, const char **ret_value) {
        size_t off = 0, klen, want;
        const char *k, *v;
        int r;

        if (!key)
                return -EINVAL;
        want = strlen(key);

        while ((r = space_kv_next(p, n, &off, &k, &klen, &v)) > 0)
                if (klen == want && memcmp(k, key, klen) == 0) {
                        if (ret_value)
                                *ret_value = v;
                        return 1;
                }
        return r;
}

int space_kv_get_code(const uint8_t *p, size_t n, SpaceCode *ret) {
        const char *v;
        int r;

        r = space_kv_get(p, n, "code", &v);
        if (r <= 0)
                return r;
        return space_code_from_string(v, ret) < 0 ? 0 : 1;
}

int space_credit_take(SpaceCredit *c, size_t n) {
        if (n > c->available)
                return -ENOBUFS;
        c->available -= n;
        return 0;
}

int space_credit_give(SpaceCredit *c, uint32_t n) {
        if ((uint64_t) n > SPACE_STREAM_WINDOW - c->available || c->available > SPACE_STREAM_WINDOW)
                return -EOVERFLOW;
        c->available += n;
        return 0;
}

void space_credit_give_clamp(SpaceCredit *c, uint32_t n) {
        if (c->available >= SPACE_STREAM_WINDOW || (uint64_t) n >= SPACE_STREAM_WINDOW - c->available)
                c->available = SPACE_STREAM_WINDOW;
        else
                c->available += n;
}

int space_kv_parse_u64(const char *s, uint64_t max, uint64_t *ret) {
        uint64_t v = 0;

        if (!*s)
                return -EBADMSG;
        for (; *s; s++) {
                if (*s < '0' || *s > '9' || v > (max - (uint64_t) (*s - '0')) / 10)
                        return -EBADMSG;
                v = v * 10 + (uint64_t) (*s - '0');
        }
        *ret = v;
        return 0;
}

int space_volume_payload_split(const uint8_t *p, size_t n, const uint8_t **ret_kv, size_t *ret_kv_len,
                               const uint8_t **ret_data, size_t *ret_data_len) {
        uint32_t kv_len;

        if (n < 4)
                return -EBADMSG;
        kv_len = space_get_le32(p);
        if (kv_len > n - 4)
                return -EBADMSG;
        *ret_kv = p + 4;
        *ret_kv_len = kv_len;
        *ret_data = p + 4 + kv_len;
        *ret_data_len = n - 4 - kv_len;
        return 0;
}

int space_volume_payload_build(SpaceBuf *b, const SpaceBuf *kv, const void *data, size_t data_len) {
        uint8_t len[4];
        size_t kv_len = kv ? kv->len : 0;
        int r;

        if (b->len + 4 + kv_len + data_len > SPACE_FRAME_PAYLOAD_MAX)
                return -EMSGSIZE;
        space_put_le32(len, (uint32_t) kv_len);
        r = space_buf_append(b, len, sizeof len);
        if (r >= 0 && kv_len)
                r = space_buf_append(b, kv->data, kv_len);
        if (r >= 0 && data_len)
                r = space_buf_append(b, data, data_len);
        return r;
}
