/* SPDX-License-Identifier: Apache-2.0 */

/* A QEMU 7.2 migration stream split into a memory file and the stream without that memory (lib/migstream.h).
 * The format, from QEMU 7.2's migration/savevm.c and migration/ram.c:
 *
 *   be32 QEMU_VM_FILE_MAGIC, be32 QEMU_VM_FILE_VERSION                       qemu_savevm_state_header()
 *   u8 QEMU_VM_CONFIGURATION, be32 len, name[len] (the machine's)            vmstate_configuration
 *     { u8 QEMU_VM_SUBSECTION, u8 len, name[len], be32 version, fields }*   vmstate_subsection_save()
 *   sections, each u8 type, be32 section_id,                                 save_section_header()
 *     START and FULL then u8 len, idstr[len], be32 instance_id, be32 version_id,
 *     the handler's data, u8 QEMU_VM_SECTION_FOOTER, be32 section_id        save_section_footer()
 *   "ram" START: be64 total | MEM_SIZE, { u8 len, idstr, be64 used_length,  ram_save_setup()
 *     be64 mr->addr (with x-ignore-shared) }* until the lengths make total, be64 EOS
 *   "ram" PART and END: page records, be64 EOS                               ram_save_iterate(), _complete()
 *     be64 offset | flags, without CONTINUE u8 len, idstr[len]             save_page_header()
 *     then ZERO: u8 fill byte; PAGE: TARGET_PAGE_SIZE bytes
 *   FULL sections of the devices, QEMU_VM_EOF, the JSON description         qemu_savevm_state_complete_precopy()
 *
 * CONTINUE says "the block of the previous page record", across sections too (ram_block_from_stream() keeps
 * the last block in the incoming state): the records kept are re-chained as save_page_header() would have
 * chained them had the dropped ones never been sent. */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io-util.h"
#include "macro.h"
#include "migstream.h"

#define QEMU_VM_FILE_MAGIC 0x5145564dU
#define QEMU_VM_FILE_VERSION 0x00000003U

enum {
        QEMU_VM_EOF = 0x00,
        QEMU_VM_SECTION_START = 0x01,
        QEMU_VM_SECTION_PART = 0x02,
        QEMU_VM_SECTION_END = 0x03,
        QEMU_VM_SECTION_FULL = 0x04,
        QEMU_VM_SUBSECTION = 0x05,
        QEMU_VM_CONFIGURATION = 0x07,
        QEMU_VM_SECTION_FOOTER = 0x7e,
};

enum {
        RAM_SAVE_FLAG_ZERO = 0x02,
        RAM_SAVE_FLAG_MEM_SIZE = 0x04,
        RAM_SAVE_FLAG_PAGE = 0x08,
        RAM_SAVE_FLAG_EOS = 0x10,
        RAM_SAVE_FLAG_CONTINUE = 0x20,
};

#define FLAGS_MASK ((uint64_t) MIGSTREAM_PAGE_SIZE - 1)
#define RAM_VERSION 4U             /* register_savevm_live("ram", 0, 4, ...) */
#define TARGET_PAGE_BITS 12U
#define CONFIG_NAME_MAX 256U       /* a machine type's name */
#define IO_BUF_SIZE (256U * 1024U)
#define RUN_BYTES (64U * MIGSTREAM_PAGE_SIZE) /* contiguous pages written to the memory file in one pwrite */
#define MEM_WRITES_FACTOR 4U       /* a block's pages may be sent again, but not without end */

typedef struct Reader {
        int fd;
        uint8_t *buf;
        size_t pos, len;
        uint64_t total;
} Reader;

typedef struct Writer {
        int fd;
        uint8_t *buf;
        size_t len;
        uint64_t total;
} Writer;

typedef struct Block {
        char id[256];
        uint8_t id_len;
        uint64_t length;
} Block;

typedef struct Split {
        Reader in;
        Writer out;
        int mem_fd;
        uint64_t mem_size, mem_pages;
        const char *target_id;
        Block blocks[MIGSTREAM_BLOCKS_MAX];
        unsigned n_blocks;
        int target;          /* index of the block that goes to the memory file, -1 until the setup names it */
        int in_last;         /* the block of the last page record read, for CONTINUE; -1: none yet */
        int out_last;        /* the same of the records written out */
        uint64_t *seen;      /* pages of the target that had a record */
        uint64_t *written;   /* pages of the target that hold data in the file */
        uint8_t *run;        /* contiguous pages not yet written to the file */
        uint64_t run_off;
        size_t run_len;
        uint64_t mem_writes, mem_writes_max;
        uint8_t page[MIGSTREAM_PAGE_SIZE];
        MigStreamStats stats;
} Split;

static bool bit_get(const uint64_t *b, uint64_t i) {
        return b[i / 64] & (UINT64_C(1) << (i % 64));
}

static void bit_set(uint64_t *b, uint64_t i) {
        b[i / 64] |= UINT64_C(1) << (i % 64);
}

static void bit_clear(uint64_t *b, uint64_t i) {
        b[i / 64] &= ~(UINT64_C(1) << (i % 64));
}

static int rd_fill(Reader *r) {
        ssize_t n;

        r->pos = r->len = 0;
        do
                n = read(r->fd, r->buf, IO_BUF_SIZE);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        r->len = (size_t) n;
        return n > 0;
}

/* 0 once there is a byte to read; -EBADMSG at the end: a stream that ends inside a field is truncated. */
static int rd_ensure(Reader *r) {
        int q;

        if (r->pos < r->len)
                return 0;
        q = rd_fill(r);
        return q < 0 ? q : q == 0 ? -EBADMSG : 0;
}

/* n bytes or -EBADMSG. */
static int rd_get(Reader *r, void *dst, size_t n) {
        uint8_t *d = dst;

        while (n > 0) {
                size_t k;
                int q = rd_ensure(r);

                if (q < 0)
                        return q;
                k = MIN(n, r->len - r->pos);
                memcpy(d, r->buf + r->pos, k);
                r->pos += k;
                r->total += k;
                d += k;
                n -= k;
        }
        return 0;
}

static int rd_peek(Reader *r, uint8_t *ret) {
        int q = rd_ensure(r);

        if (q < 0)
                return q;
        *ret = r->buf[r->pos];
        return 0;
}

static int rd_u8(Reader *r, uint8_t *ret) {
        return rd_get(r, ret, 1);
}

static int rd_be32(Reader *r, uint32_t *ret) {
        uint8_t b[4];
        int q = rd_get(r, b, sizeof b);

        if (q < 0)
                return q;
        *ret = (uint32_t) b[0] << 24 | (uint32_t) b[1] << 16 | (uint32_t) b[2] << 8 | b[3];
        return 0;
}

static int rd_be64(Reader *r, uint64_t *ret) {
        uint32_t hi, lo;
        int q = rd_be32(r, &hi);

        if (q >= 0)
                q = rd_be32(r, &lo);
        if (q < 0)
                return q;
        *ret = (uint64_t) hi << 32 | lo;
        return 0;
}

static int wr_flush(Writer *w) {
        int q;

        if (w->len == 0)
                return 0;
        q = loop_write(w->fd, w->buf, w->len);
        w->len = 0;
        return q;
}

static int wr_put(Writer *w, const void *src, size_t n) {
        int q;

        w->total += n;
        if (n > IO_BUF_SIZE - w->len) {
                q = wr_flush(w);
                if (q < 0)
                        return q;
                if (n >= IO_BUF_SIZE)
                        return loop_write(w->fd, src, n);
        }
        memcpy(w->buf + w->len, src, n);
        w->len += n;
        return 0;
}

static int wr_u8(Writer *w, uint8_t v) {
        return wr_put(w, &v, 1);
}

static int wr_be32(Writer *w, uint32_t v) {
        uint8_t b[4] = { (uint8_t) (v >> 24), (uint8_t) (v >> 16), (uint8_t) (v >> 8), (uint8_t) v };
        return wr_put(w, b, sizeof b);
}

static int wr_be64(Writer *w, uint64_t v) {
        int q = wr_be32(w, (uint32_t) (v >> 32));
        return q < 0 ? q : wr_be32(w, (uint32_t) v);
}

/* u8 len, then len bytes: an idstr or a name. Copied out as read. */
static int copy_name(Split *s, char *ret, size_t size, uint8_t *ret_len) {
        uint8_t len;
        int q;

        q = rd_u8(&s->in, &len);
        if (q < 0)
                return q;
        if (len == 0 || (size_t) len >= size)
                return -EBADMSG;
        q = rd_get(&s->in, ret, len);
        if (q < 0)
                return q;
        ret[len] = 0;
        if (strlen(ret) != len)
                return -EBADMSG;
        if (ret_len)
                *ret_len = len;
        q = wr_u8(&s->out, len);
        return q < 0 ? q : wr_put(&s->out, ret, len);
}

static int copy_be32(Split *s, uint32_t *ret) {
        int q = rd_be32(&s->in, ret);
        return q < 0 ? q : wr_be32(&s->out, *ret);
}

static int copy_be64(Split *s, uint64_t *ret) {
        int q = rd_be64(&s->in, ret);
        return q < 0 ? q : wr_be64(&s->out, *ret);
}

static int copy_u8(Split *s, uint8_t *ret) {
        int q = rd_u8(&s->in, ret);
        return q < 0 ? q : wr_u8(&s->out, *ret);
}

/* ---- the header and the configuration section ---- */

static int copy_header(Split *s) {
        uint32_t magic, version;
        int q;

        if ((q = copy_be32(s, &magic)) < 0 || (q = copy_be32(s, &version)) < 0)
                return q;
        return magic == QEMU_VM_FILE_MAGIC && version == QEMU_VM_FILE_VERSION ? 0 : -EBADMSG;
}

/* The subsections savevm.c's vmstate_configuration has in 7.2. The capabilities must list x-ignore-shared:
 * without it the setup's block list has no addresses and the incoming side would want the block's pages. */
static int copy_config_subsection(Split *s, bool *ignore_shared) {
        char name[256];
        uint32_t version, v;
        uint8_t type;
        int q;

        if ((q = copy_u8(s, &type)) < 0 || (q = copy_name(s, name, sizeof name, NULL)) < 0 ||
            (q = copy_be32(s, &version)) < 0)
                return q;
        if (version != 1)
                return -EBADMSG;
        if (streq(name, "configuration/capabilities")) {
                if ((q = copy_be32(s, &v)) < 0)
                        return q;
                if (v > MIGSTREAM_CAPS_MAX)
                        return -EBADMSG;
                for (uint32_t i = 0; i < v; i++) {
                        char cap[256];
                        if ((q = copy_name(s, cap, sizeof cap, NULL)) < 0)
                                return q;
                        if (streq(cap, "x-ignore-shared"))
                                *ignore_shared = true;
                }
                return 0;
        }
        if (streq(name, "configuration/target-page-bits")) {
                if ((q = copy_be32(s, &v)) < 0)
                        return q;
                return v == TARGET_PAGE_BITS ? 0 : -EBADMSG;
        }
        if (streq(name, "configuration/uuid")) {
                uint8_t uuid[16];
                if ((q = rd_get(&s->in, uuid, sizeof uuid)) < 0)
                        return q;
                return wr_put(&s->out, uuid, sizeof uuid);
        }
        return -EBADMSG;
}

static int copy_config(Split *s) {
        uint8_t type, name[CONFIG_NAME_MAX];
        bool ignore_shared = false;
        uint32_t len;
        int q;

        if ((q = copy_u8(s, &type)) < 0)
                return q;
        if (type != QEMU_VM_CONFIGURATION)
                return -EBADMSG;
        if ((q = copy_be32(s, &len)) < 0)
                return q;
        if (len == 0 || len > sizeof name)
                return -EBADMSG;
        if ((q = rd_get(&s->in, name, len)) < 0 || (q = wr_put(&s->out, name, len)) < 0)
                return q;
        for (unsigned i = 0;; i++) {
                if ((q = rd_peek(&s->in, &type)) < 0)
                        return q;
                if (type != QEMU_VM_SUBSECTION)
                        break;
                if (i >= 8)
                        return -EBADMSG;
                if ((q = copy_config_subsection(s, &ignore_shared)) < 0)
                        return q;
        }
        return ignore_shared ? 0 : -EBADMSG;
}

/* ---- the "ram" sections ---- */

static int copy_footer(Split *s, uint32_t section_id) {
        uint32_t id;
        uint8_t type;
        int q;

        if ((q = copy_u8(s, &type)) < 0 || (q = copy_be32(s, &id)) < 0)
                return q;
        return type == QEMU_VM_SECTION_FOOTER && id == section_id ? 0 : -EBADMSG;
}

static int copy_ram_setup(Split *s) {
        uint64_t v, total;
        int q;

        if ((q = copy_be64(s, &v)) < 0)
                return q;
        if ((v & FLAGS_MASK) != RAM_SAVE_FLAG_MEM_SIZE)
                return -EBADMSG;
        total = v & ~FLAGS_MASK;
        if (total == 0)
                return -EBADMSG;
        while (total > 0) {
                Block *b;
                uint64_t addr;

                if (s->n_blocks >= MIGSTREAM_BLOCKS_MAX)
                        return -EBADMSG;
                b = &s->blocks[s->n_blocks];
                if ((q = copy_name(s, b->id, sizeof b->id, &b->id_len)) < 0 || (q = copy_be64(s, &b->length)) < 0 ||
                    (q = copy_be64(s, &addr)) < 0)
                        return q;
                if (b->length == 0 || b->length > total || b->length % MIGSTREAM_PAGE_SIZE != 0)
                        return -EBADMSG;
                for (unsigned i = 0; i < s->n_blocks; i++)
                        if (streq(s->blocks[i].id, b->id))
                                return -EBADMSG;
                if (streq(b->id, s->target_id)) {
                        if (b->length != s->mem_size)
                                return -EBADMSG;
                        s->target = (int) s->n_blocks;
                }
                total -= b->length;
                s->n_blocks++;
        }
        if (s->target < 0)
                return -EBADMSG;
        if ((q = copy_be64(s, &v)) < 0)
                return q;
        return v == RAM_SAVE_FLAG_EOS ? 0 : -EBADMSG;
}

static int mem_flush(Split *s) {
        int q;

        if (s->run_len == 0)
                return 0;
        q = loop_pwrite(s->mem_fd, s->run, s->run_len, s->run_off);
        s->run_len = 0;
        return q;
}

static const uint8_t zero_page[MIGSTREAM_PAGE_SIZE];

static bool page_is_zero(const uint8_t *p) {
        return memcmp(p, zero_page, MIGSTREAM_PAGE_SIZE) == 0;
}

/* A page of the target block: its data at its offset in the file, or a hole. */
static int mem_page(Split *s, uint64_t off, const uint8_t *data) {
        uint64_t i = off / MIGSTREAM_PAGE_SIZE;
        int q;

        bit_set(s->seen, i);
        if (!data || page_is_zero(data)) {
                s->stats.zero_pages++;
                if (!bit_get(s->written, i))
                        return 0;
                /* sent again, now zero: the data written before must go */
                if ((q = mem_flush(s)) < 0)
                        return q;
                bit_clear(s->written, i);
                return loop_pwrite(s->mem_fd, zero_page, sizeof zero_page, off);
        }
        if (++s->mem_writes > s->mem_writes_max)
                return -EBADMSG;
        s->stats.data_pages++;
        if (s->run_len > 0 && (off != s->run_off + s->run_len || s->run_len == RUN_BYTES))
                if ((q = mem_flush(s)) < 0)
                        return q;
        if (s->run_len == 0)
                s->run_off = off;
        memcpy(s->run + s->run_len, data, MIGSTREAM_PAGE_SIZE);
        s->run_len += MIGSTREAM_PAGE_SIZE;
        bit_set(s->written, i);
        return 0;
}

static int copy_page_record(Split *s, uint64_t v) {
        uint64_t flags = v & FLAGS_MASK, off = v & ~FLAGS_MASK;
        bool cont = flags & RAM_SAVE_FLAG_CONTINUE;
        uint8_t fill = 0;
        int b, q;

        flags &= ~(uint64_t) RAM_SAVE_FLAG_CONTINUE;
        if (flags != RAM_SAVE_FLAG_ZERO && flags != RAM_SAVE_FLAG_PAGE)
                return -EBADMSG;
        if (cont) {
                if (s->in_last < 0)
                        return -EBADMSG;
                b = s->in_last;
        } else {
                char id[256];
                uint8_t len;

                if ((q = rd_u8(&s->in, &len)) < 0)
                        return q;
                if (len == 0)
                        return -EBADMSG;
                if ((q = rd_get(&s->in, id, len)) < 0)
                        return q;
                for (b = 0; b < (int) s->n_blocks; b++)
                        if (s->blocks[b].id_len == len && memcmp(s->blocks[b].id, id, len) == 0)
                                break;
                if (b == (int) s->n_blocks)
                        return -EBADMSG;
        }
        if (off >= s->blocks[b].length || s->blocks[b].length - off < MIGSTREAM_PAGE_SIZE)
                return -EBADMSG;
        if (flags == RAM_SAVE_FLAG_ZERO)
                q = rd_u8(&s->in, &fill);
        else
                q = rd_get(&s->in, s->page, sizeof s->page);
        if (q < 0)
                return q;
        s->in_last = b;

        if (b == s->target) {
                if (flags == RAM_SAVE_FLAG_ZERO && fill != 0)
                        memset(s->page, fill, sizeof s->page);
                return mem_page(s, off, flags == RAM_SAVE_FLAG_ZERO && fill == 0 ? NULL : s->page);
        }

        /* kept: CONTINUE exactly when the previous record written out is of the same block */
        s->stats.kept_pages++;
        if (b == s->out_last)
                q = wr_be64(&s->out, off | flags | RAM_SAVE_FLAG_CONTINUE);
        else {
                q = wr_be64(&s->out, off | flags);
                if (q >= 0)
                        q = wr_u8(&s->out, s->blocks[b].id_len);
                if (q >= 0)
                        q = wr_put(&s->out, s->blocks[b].id, s->blocks[b].id_len);
        }
        s->out_last = b;
        if (q < 0)
                return q;
        if (flags == RAM_SAVE_FLAG_ZERO)
                return wr_u8(&s->out, fill);
        return wr_put(&s->out, s->page, sizeof s->page);
}

static int copy_ram_pages(Split *s) {
        for (;;) {
                uint64_t v;
                int q;

                if ((q = rd_be64(&s->in, &v)) < 0)
                        return q;
                if (v == RAM_SAVE_FLAG_EOS)
                        return wr_be64(&s->out, v);
                if ((q = copy_page_record(s, v)) < 0)
                        return q;
        }
}

/* ---- the whole stream ---- */

static int copy_rest(Split *s) {
        int q;

        if ((q = wr_flush(&s->out)) < 0)
                return q;
        for (;;) {
                if (s->in.pos < s->in.len) {
                        size_t n = s->in.len - s->in.pos;
                        if ((q = loop_write(s->out.fd, s->in.buf + s->in.pos, n)) < 0)
                                return q;
                        s->in.total += n;
                        s->out.total += n;
                        s->in.pos = s->in.len;
                }
                q = rd_fill(&s->in);
                if (q <= 0)
                        return q;
        }
}

static int split_stream(Split *s) {
        bool ram_started = false, ram_ended = false;
        uint32_t ram_id = 0;
        int q;

        if ((q = copy_header(s)) < 0 || (q = copy_config(s)) < 0)
                return q;
        for (;;) {
                uint32_t id;
                uint8_t type;

                if ((q = copy_u8(s, &type)) < 0)
                        return q;
                if (type == QEMU_VM_SECTION_FULL) {
                        /* device state: iterable sections are over, the rest is the devices', as it is */
                        if (!ram_ended)
                                return -EBADMSG;
                        if ((q = mem_flush(s)) < 0)
                                return q;
                        for (uint64_t i = 0; i < s->mem_pages; i++)
                                if (!bit_get(s->seen, i))
                                        return -EBADMSG;
                        return copy_rest(s);
                }
                if (type != QEMU_VM_SECTION_START && type != QEMU_VM_SECTION_PART && type != QEMU_VM_SECTION_END)
                        return -EBADMSG;
                if ((q = copy_be32(s, &id)) < 0)
                        return q;
                if (type == QEMU_VM_SECTION_START) {
                        char idstr[256];
                        uint32_t instance, version;

                        /* "ram" is the one iterable handler this takes; any other (block, dirty-bitmap) is
                         * a stream it does not know */
                        if ((q = copy_name(s, idstr, sizeof idstr, NULL)) < 0 || (q = copy_be32(s, &instance)) < 0 ||
                            (q = copy_be32(s, &version)) < 0)
                                return q;
                        if (ram_started || !streq(idstr, "ram") || instance != 0 || version != RAM_VERSION)
                                return -EBADMSG;
                        ram_started = true;
                        ram_id = id;
                        q = copy_ram_setup(s);
                } else {
                        if (!ram_started || ram_ended || id != ram_id)
                                return -EBADMSG;
                        q = copy_ram_pages(s);
                        ram_ended = type == QEMU_VM_SECTION_END;
                }
                if (q < 0)
                        return q;
                if ((q = copy_footer(s, id)) < 0)
                        return q;
        }
}

int migstream_split(int in_fd, int out_fd, int mem_fd, const char *block, MigStreamStats *ret_stats) {
        _cleanup_free_ uint8_t *inbuf = NULL, *outbuf = NULL, *run = NULL;
        _cleanup_free_ uint64_t *seen = NULL, *written = NULL;
        _cleanup_free_ Split *s = NULL;
        struct stat st;
        size_t words;
        int q;

        if (in_fd < 0 || out_fd < 0 || mem_fd < 0 || !block || !*block || strlen(block) > 255)
                return -EINVAL;
        if (fstat(mem_fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_size <= 0 || (uint64_t) st.st_size % MIGSTREAM_PAGE_SIZE != 0)
                return -EINVAL;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->mem_size = (uint64_t) st.st_size;
        s->mem_pages = s->mem_size / MIGSTREAM_PAGE_SIZE;
        words = (size_t) ((s->mem_pages + 63) / 64);
        inbuf = malloc(IO_BUF_SIZE);
        outbuf = malloc(IO_BUF_SIZE);
        run = malloc(RUN_BYTES);
        seen = calloc(words, sizeof *seen);
        written = calloc(words, sizeof *written);
        if (!inbuf || !outbuf || !run || !seen || !written)
                return -ENOMEM;
        s->in = (Reader) { .fd = in_fd, .buf = inbuf };
        s->out = (Writer) { .fd = out_fd, .buf = outbuf };
        s->mem_fd = mem_fd;
        s->target_id = block;
        s->target = s->in_last = s->out_last = -1;
        s->seen = seen;
        s->written = written;
        s->run = run;
        s->mem_writes_max = MEM_WRITES_FACTOR * s->mem_pages;

        q = split_stream(s);
        if (q >= 0)
                q = wr_flush(&s->out);
        if (q < 0)
                return q;
        s->stats.bytes_in = s->in.total;
        s->stats.bytes_out = s->out.total;
        if (ret_stats)
                *ret_stats = s->stats;
        return 0;
}
