/* SPDX-License-Identifier: Apache-2.0 */

/* Unit tests for lib/migstream.c: a QEMU 7.2 migration stream built by hand (configuration, the "ram" setup,
 * pages with ZERO and CONTINUE records, a ROM's pages that stay, PART and END, device sections) split and
 * checked byte for byte, then hostile streams (offsets past a block, long names, truncation, unknown flags,
 * unknown blocks, a page left out, ...) each refused with -EBADMSG. */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "../../lib/migstream.h"
#include "tap.h"

#define PAGE MIGSTREAM_PAGE_SIZE
#define MEM_PAGES 16U
#define ROM "/rom@etc/acpi/tables"
#define ROM_PAGES 2U
#define RAM_SECTION 2U

enum { ZERO = 0x02, MEM_SIZE = 0x04, PAGEF = 0x08, EOS = 0x10, CONT = 0x20 };

typedef struct Buf {
        uint8_t *p;
        size_t n, cap;
} Buf;

static void put(Buf *b, const void *src, size_t n) {
        if (b->n + n > b->cap) {
                b->cap = (b->n + n) * 2 + 64;
                b->p = realloc(b->p, b->cap);
                ASSERT(b->p);
        }
        memcpy(b->p + b->n, src, n);
        b->n += n;
}

static void put8(Buf *b, uint8_t v) {
        put(b, &v, 1);
}

static void put32(Buf *b, uint32_t v) {
        uint8_t x[4] = { (uint8_t) (v >> 24), (uint8_t) (v >> 16), (uint8_t) (v >> 8), (uint8_t) v };
        put(b, x, 4);
}

static void put64(Buf *b, uint64_t v) {
        put32(b, (uint32_t) (v >> 32));
        put32(b, (uint32_t) v);
}

static void put_name(Buf *b, const char *s) {
        put8(b, (uint8_t) strlen(s));
        put(b, s, strlen(s));
}

/* Magic, version and the configuration section, with one capability. */
static void prologue(Buf *b, const char *cap) {
        put32(b, 0x5145564d);
        put32(b, 3);
        put8(b, 0x07);
        put32(b, 7);
        put(b, "microvm", 7);
        put8(b, 0x05);
        put_name(b, "configuration/capabilities");
        put32(b, 1);
        put32(b, 1);
        put_name(b, cap);
}

static void section(Buf *b, uint8_t type, uint32_t id) {
        put8(b, type);
        put32(b, id);
}

static void footer(Buf *b, uint32_t id) {
        put8(b, 0x7e);
        put32(b, id);
}

static void eos_footer(Buf *b) {
        put64(b, EOS);
        footer(b, RAM_SECTION);
}

/* The "ram" START section: the block list (mem, then the ROM) and EOS. */
/* The START of the "ram" section up to its MEM_SIZE record; the block list follows. */
static void ram_start(Buf *b, uint64_t total) {
        section(b, 0x01, RAM_SECTION);
        put_name(b, "ram");
        put32(b, 0);
        put32(b, 4);
        put64(b, total | MEM_SIZE);
}

/* One entry of the block list: its name, length and (x-ignore-shared) address. */
static void ram_block(Buf *b, const char *name, uint64_t len) {
        put_name(b, name);
        put64(b, len);
        put64(b, 0);
}

static void ram_setup(Buf *b, uint64_t mem_len) {
        ram_start(b, mem_len + ROM_PAGES * PAGE);
        ram_block(b, "mem", mem_len);
        ram_block(b, ROM, ROM_PAGES * PAGE);
        eos_footer(b);
}

/* A page record; block NULL: CONTINUE. data NULL: a ZERO record with fill. */
static void page(Buf *b, const char *block, uint64_t off, const uint8_t *data, uint8_t fill) {
        put64(b, off | (data ? PAGEF : ZERO) | (block ? 0 : CONT));
        if (block)
                put_name(b, block);
        if (data)
                put(b, data, PAGE);
        else
                put8(b, fill);
}

/* Device state: copied as it is, whatever it holds. */
static void devices(Buf *b) {
        static const char json[] = "{\"page_size\": 4096, \"devices\": []}";

        section(b, 0x04, 3);
        put_name(b, "timer");
        put32(b, 0);
        put32(b, 2);
        put64(b, 0x0123456789abcdefULL | CONT);  /* looks like a page header: not one here */
        footer(b, 3);
        section(b, 0x04, 4);
        put_name(b, "cpu");
        put32(b, 0);
        put32(b, 17);
        for (unsigned i = 0; i < 300; i++)
                put8(b, (uint8_t) (i * 7));
        footer(b, 4);
        put8(b, 0x00);
        put8(b, 0x06);
        put32(b, sizeof json - 1);
        put(b, json, sizeof json - 1);
}

static int memfd_of(const char *name, const Buf *content, uint64_t size) {
        int fd = memfd_create(name, MFD_CLOEXEC);

        ASSERT(fd >= 0);
        if (content)
                ASSERT(write(fd, content->p, content->n) == (ssize_t) content->n);
        if (size)
                ASSERT(ftruncate(fd, (off_t) size) == 0);
        ASSERT(lseek(fd, 0, SEEK_SET) == 0);
        return fd;
}

static void read_all(int fd, Buf *ret) {
        uint8_t buf[65536];
        ssize_t k;

        ASSERT(lseek(fd, 0, SEEK_SET) == 0);
        while ((k = read(fd, buf, sizeof buf)) > 0)
                put(ret, buf, (size_t) k);
        ASSERT(k == 0);
}

/* ret_allocated: the bytes the memory file takes, holes not counted. */
static int split(const Buf *in, uint64_t mem_size, Buf *ret_out, Buf *ret_mem, uint64_t *ret_allocated,
                 MigStreamStats *ret_stats) {
        _cleanup_close_ int ifd = memfd_of("in", in, 0), ofd = memfd_of("out", NULL, 0),
                            mfd = memfd_of("mem", NULL, mem_size);
        int r = migstream_split(ifd, ofd, mfd, "mem", ret_stats);

        if (ret_out)
                read_all(ofd, ret_out);
        if (ret_mem) {
                struct stat st;
                read_all(mfd, ret_mem);
                ASSERT(fstat(mfd, &st) == 0);
                *ret_allocated = (uint64_t) st.st_blocks * 512;
        }
        return r;
}

static void test_split(void) {
        Buf in = {}, exp = {}, out = {}, mem = {}, want_mem = {};
        uint8_t a[PAGE], bb[PAGE], b2[PAGE], c[PAGE], r0[PAGE], r1[PAGE];
        MigStreamStats st = {};
        uint64_t allocated = 0;
        size_t tail;
        int r;

        for (unsigned i = 0; i < PAGE; i++) {
                a[i] = (uint8_t) (i + 1);
                bb[i] = (uint8_t) (i * 3 + 1);
                b2[i] = (uint8_t) (i ^ 0x55);
                c[i] = (uint8_t) (0xc0 | (i & 0x3f));
                r0[i] = (uint8_t) ('R' + i);
                r1[i] = (uint8_t) ('r' - i);
        }

        prologue(&in, "x-ignore-shared");
        prologue(&exp, "x-ignore-shared");
        ram_setup(&in, MEM_PAGES * PAGE);
        ram_setup(&exp, MEM_PAGES * PAGE);

        /* PART 1: mem pages with and without CONTINUE, a ROM page between them, then the rest as ZERO */
        section(&in, 0x02, RAM_SECTION);
        section(&exp, 0x02, RAM_SECTION);
        page(&in, "mem", 0, a, 0);
        page(&in, NULL, 1 * PAGE, bb, 0);
        page(&in, NULL, 2 * PAGE, NULL, 0);
        page(&in, ROM, 0, r0, 0);
        page(&exp, ROM, 0, r0, 0);
        page(&in, "mem", 3 * PAGE, c, 0);
        /* the ROM again after a mem page: named in the input, CONTINUE in the output */
        page(&in, ROM, 1 * PAGE, NULL, 0);
        page(&exp, NULL, 1 * PAGE, NULL, 0);
        page(&in, "mem", 4 * PAGE, NULL, 0);
        for (unsigned i = 5; i < MEM_PAGES; i++)
                page(&in, NULL, i * PAGE, NULL, 0);
        eos_footer(&in);
        eos_footer(&exp);

        /* PART 2: the CONTINUE chain across sections; pages sent again, one now zero */
        section(&in, 0x02, RAM_SECTION);
        section(&exp, 0x02, RAM_SECTION);
        page(&in, ROM, 1 * PAGE, r1, 0);
        page(&exp, NULL, 1 * PAGE, r1, 0);
        page(&in, "mem", 1 * PAGE, b2, 0);
        page(&in, NULL, 0, NULL, 0);
        eos_footer(&in);
        eos_footer(&exp);

        /* END: a ZERO record with a fill byte is a page of that byte */
        section(&in, 0x03, RAM_SECTION);
        section(&exp, 0x03, RAM_SECTION);
        page(&in, "mem", 5 * PAGE, NULL, 0x5a);
        eos_footer(&in);
        eos_footer(&exp);

        tail = in.n;
        devices(&in);
        put(&exp, in.p + tail, in.n - tail);

        r = split(&in, MEM_PAGES * PAGE, &out, &mem, &allocated, &st);
        ok(r == 0, "a valid stream splits (r=%d)", r);
        ok(out.n == exp.n && memcmp(out.p, exp.p, exp.n) == 0, "the stream out is the expected one, byte for byte "
           "(%zu bytes, want %zu)", out.n, exp.n);
        memset(&want_mem, 0, sizeof want_mem);
        for (unsigned i = 0; i < MEM_PAGES; i++) {
                uint8_t fill[PAGE];
                const uint8_t *p = fill;
                memset(fill, 0, sizeof fill);
                if (i == 1)
                        p = b2;
                else if (i == 3)
                        p = c;
                else if (i == 5)
                        memset(fill, 0x5a, sizeof fill);
                put(&want_mem, p, PAGE);
        }
        ok(mem.n == want_mem.n && memcmp(mem.p, want_mem.p, want_mem.n) == 0,
           "the memory file holds the last data of each page, zeros elsewhere");
        ok(st.data_pages == 5 && st.zero_pages == 14 && st.kept_pages == 3,
           "stats: 5 data pages, 14 zero, 3 kept (%llu, %llu, %llu)", (unsigned long long) st.data_pages,
           (unsigned long long) st.zero_pages, (unsigned long long) st.kept_pages);
        ok(st.bytes_in == in.n && st.bytes_out == out.n, "stats: bytes in and out");
        /* pages 0 (data, then zero), 1, 3 and 5 */
        ok(allocated <= 4 * PAGE, "the memory file has holes where pages were zero (%llu bytes allocated)",
           (unsigned long long) allocated);

        /* The output is what a source with the block shared writes: no page of the block, so it cannot fill a
         * memory file. */
        {
                Buf again = {};
                r = split(&out, MEM_PAGES * PAGE, &again, NULL, NULL, NULL);
                ok(r == -EBADMSG, "the output, which has no page of the block, does not fill a memory file (r=%d)", r);
                free(again.p);
        }
        free(in.p);
        free(exp.p);
        free(out.p);
        free(mem.p);
        free(want_mem.p);
}

/* ---- hostile streams ---- */

/* A valid stream around what body puts into the first PART section. */
static void wrap(Buf *b, void (*body)(Buf *b)) {
        prologue(b, "x-ignore-shared");
        ram_setup(b, MEM_PAGES * PAGE);
        section(b, 0x02, RAM_SECTION);
        if (body)
                body(b);
        page(b, "mem", 0, NULL, 0);
        for (unsigned i = 1; i < MEM_PAGES; i++)
                page(b, NULL, i * PAGE, NULL, 0);
        eos_footer(b);
        section(b, 0x03, RAM_SECTION);
        eos_footer(b);
        devices(b);
}

static void refused(const char *what, void (*body)(Buf *b)) {
        Buf b = {};
        int r;

        wrap(&b, body);
        r = split(&b, MEM_PAGES * PAGE, NULL, NULL, NULL, NULL);
        ok(r == -EBADMSG, "refused: %s (r=%d)", what, r);
        free(b.p);
}

static uint8_t data[PAGE];

static void past_block(Buf *b) {
        page(b, "mem", MEM_PAGES * PAGE, data, 0);
}
static void far_past_block(Buf *b) {
        page(b, "mem", UINT64_MAX & ~(uint64_t) (PAGE - 1), NULL, 0);
}
static void past_rom(Buf *b) {
        page(b, ROM, ROM_PAGES * PAGE, data, 0);
}
static void unknown_block(Buf *b) {
        page(b, "nope", 0, data, 0);
}
static void long_idstr(Buf *b) {
        char name[256];
        memset(name, 'x', 255);
        name[255] = 0;
        page(b, name, 0, data, 0);
}
static void empty_idstr(Buf *b) {
        put64(b, PAGEF);
        put8(b, 0);
        put(b, data, PAGE);
}
static void first_continue(Buf *b) {
        page(b, NULL, 0, data, 0);
}
static void flag_xbzrle(Buf *b) {
        put64(b, 0x40);
        put_name(b, "mem");
}
static void flag_compress(Buf *b) {
        put64(b, 0x100);
        put_name(b, "mem");
}
static void flag_hook(Buf *b) {
        put64(b, 0x80);
}
static void flag_full(Buf *b) {
        put64(b, 0x01);
}
static void flag_zero_and_page(Buf *b) {
        put64(b, ZERO | PAGEF);
        put_name(b, "mem");
        put(b, data, PAGE);
}
static void mem_size_again(Buf *b) {
        put64(b, PAGE | MEM_SIZE);
        put_name(b, "mem");
        put64(b, PAGE);
        put64(b, 0);
}
static void eos_with_offset(Buf *b) {
        put64(b, PAGE | EOS);
}
static void resent_forever(Buf *b) {
        for (unsigned i = 0; i < 4 * MEM_PAGES + 1; i++)
                page(b, "mem", 0, data, 0);
}

static void refuse_whole(const char *what, const Buf *b, uint64_t mem_size) {
        int r = split(b, mem_size, NULL, NULL, NULL, NULL);
        ok(r == -EBADMSG, "refused: %s (r=%d)", what, r);
}

static void test_hostile(void) {
        Buf ok_stream = {}, b = {};
        size_t full_at;
        int r;

        memset(data, 0xab, sizeof data);
        refused("a page past the end of its block", past_block);
        refused("an offset that overflows", far_past_block);
        refused("a ROM page past the end of the ROM", past_rom);
        refused("a page of an unknown block", unknown_block);
        refused("a 255-byte idstr no block has", long_idstr);
        refused("an empty idstr", empty_idstr);
        refused("CONTINUE before any block", first_continue);
        refused("XBZRLE", flag_xbzrle);
        refused("a compressed page", flag_compress);
        refused("the RDMA hook", flag_hook);
        refused("the old FULL flag", flag_full);
        refused("ZERO and PAGE together", flag_zero_and_page);
        refused("MEM_SIZE in a PART section", mem_size_again);
        refused("EOS with an offset", eos_with_offset);
        refused("a page sent again without end", resent_forever);

        wrap(&ok_stream, NULL);
        r = split(&ok_stream, MEM_PAGES * PAGE, NULL, NULL, NULL, NULL);
        ok(r == 0, "the stream these are made from splits (r=%d)", r);
        refuse_whole("a memory file smaller than the block", &ok_stream, (MEM_PAGES - 1) * PAGE);
        refuse_whole("a memory file larger than the block", &ok_stream, (MEM_PAGES + 1) * PAGE);

        /* Every prefix that ends before the device state is a truncated stream. */
        full_at = ok_stream.n;
        for (size_t i = 0; i + 5 < ok_stream.n; i++)
                if (ok_stream.p[i] == 0x04 && ok_stream.p[i + 1] == 0 && ok_stream.p[i + 4] == 3 &&
                    ok_stream.p[i + 5] == 5 && memcmp(ok_stream.p + i + 6, "timer", 5) == 0) {
                        full_at = i;
                        break;
                }
        ASSERT(full_at < ok_stream.n);
        {
                unsigned bad = 0, tried = 0;
                for (size_t n = 0; n <= full_at; n += n < 400 ? 1 : 37) {
                        Buf cut = { .p = ok_stream.p, .n = n };
                        tried++;
                        if (split(&cut, MEM_PAGES * PAGE, NULL, NULL, NULL, NULL) != -EBADMSG)
                                bad++;
                }
                ok(bad == 0, "every truncation before the device state is refused (%u of %u cuts were not)", bad, tried);
        }

        /* Hand-made variations of the prologue and the setup. */
        prologue(&b, "postcopy-ram");
        ram_setup(&b, MEM_PAGES * PAGE);
        refuse_whole("no x-ignore-shared in the configuration", &b, MEM_PAGES * PAGE);
        b.n = 0;

        put32(&b, 0x5145564d);
        put32(&b, 3);
        put8(&b, 0x07);
        put32(&b, 0xffffffffU);
        refuse_whole("a machine name of 4 GiB", &b, MEM_PAGES * PAGE);
        b.n = 0;

        put32(&b, 0x5145564e);
        put32(&b, 3);
        refuse_whole("a wrong magic", &b, MEM_PAGES * PAGE);
        b.n = 0;

        prologue(&b, "x-ignore-shared");
        put8(&b, 0x05);
        put_name(&b, "configuration/capabilities");
        put32(&b, 1);
        put32(&b, 0x7fffffffU);
        refuse_whole("two billion capabilities", &b, MEM_PAGES * PAGE);
        b.n = 0;

        prologue(&b, "x-ignore-shared");
        put8(&b, 0x05);
        put_name(&b, "configuration/something-new");
        put32(&b, 1);
        refuse_whole("an unknown configuration subsection", &b, MEM_PAGES * PAGE);
        b.n = 0;

        prologue(&b, "x-ignore-shared");
        section(&b, 0x01, 1);
        put_name(&b, "block");
        put32(&b, 0);
        put32(&b, 1);
        refuse_whole("another iterable section (block migration)", &b, MEM_PAGES * PAGE);
        b.n = 0;

        prologue(&b, "x-ignore-shared");
        ram_start(&b, UINT64_MAX & ~(uint64_t) (PAGE - 1));
        for (unsigned i = 0; i < 100; i++) {
                char name[16];
                snprintf(name, sizeof name, "b%u", i);
                ram_block(&b, name, PAGE);
        }
        refuse_whole("more blocks than any machine has", &b, MEM_PAGES * PAGE);
        b.n = 0;

        prologue(&b, "x-ignore-shared");
        ram_start(&b, MEM_PAGES * PAGE);
        ram_block(&b, "mem", 2 * MEM_PAGES * PAGE);
        refuse_whole("a block longer than the total", &b, MEM_PAGES * PAGE);
        b.n = 0;

        prologue(&b, "x-ignore-shared");
        ram_start(&b, 2 * MEM_PAGES * PAGE);
        ram_block(&b, "mem", MEM_PAGES * PAGE);
        ram_block(&b, "mem", MEM_PAGES * PAGE);
        refuse_whole("the same block twice", &b, MEM_PAGES * PAGE);
        b.n = 0;

        /* a page of the block never said: the file would not be the guest's RAM */
        prologue(&b, "x-ignore-shared");
        ram_setup(&b, MEM_PAGES * PAGE);
        section(&b, 0x03, RAM_SECTION);
        page(&b, "mem", 0, NULL, 0);
        for (unsigned i = 1; i < MEM_PAGES - 1; i++)
                page(&b, NULL, i * PAGE, NULL, 0);
        eos_footer(&b);
        devices(&b);
        refuse_whole("a page of the block left out", &b, MEM_PAGES * PAGE);
        b.n = 0;

        /* device state before the iterable sections ended */
        prologue(&b, "x-ignore-shared");
        ram_setup(&b, MEM_PAGES * PAGE);
        devices(&b);
        refuse_whole("device state before the END section", &b, MEM_PAGES * PAGE);
        b.n = 0;

        /* a footer of another section */
        prologue(&b, "x-ignore-shared");
        ram_setup(&b, MEM_PAGES * PAGE);
        section(&b, 0x02, RAM_SECTION);
        put64(&b, EOS);
        footer(&b, RAM_SECTION + 1);
        refuse_whole("a footer with the wrong section id", &b, MEM_PAGES * PAGE);
        b.n = 0;

        /* a PART of a section that never started */
        prologue(&b, "x-ignore-shared");
        ram_setup(&b, MEM_PAGES * PAGE);
        section(&b, 0x02, RAM_SECTION + 7);
        refuse_whole("a PART of an unknown section", &b, MEM_PAGES * PAGE);
        b.n = 0;

        prologue(&b, "x-ignore-shared");
        ram_setup(&b, MEM_PAGES * PAGE);
        put8(&b, 0x08);
        refuse_whole("a QEMU_VM_COMMAND", &b, MEM_PAGES * PAGE);

        free(b.p);
        free(ok_stream.p);
}

int main(void) {
        test_split();
        test_hostile();
        return done();
}
