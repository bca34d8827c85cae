/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: the migration stream splitter (lib/migstream.c), which reads a checkpoint's state file as a
 * QEMU the guest may own wrote it.
 *
 * Input: the stream. The memory file is 16 pages (the "mem" block of the seeds is that long).
 * Invariants (abort on violation): the split returns 0 or -EBADMSG and nothing else; the memory file keeps its
 * size; on success every byte was read, the stream out is no longer than the stream in (records are only
 * dropped, or lose their idstr to CONTINUE), the stats count what was written, every page of the block had a
 * record, and a split of the stream out fails with -EBADMSG (it has no page of the block). */

#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "fuzz-util.h"
#include "macro.h"
#include "migstream.h"

#define MEM_SIZE (16U * MIGSTREAM_PAGE_SIZE)

static int memfd_with(const char *name, const uint8_t *data, size_t size, uint64_t length) {
        int fd = memfd_create(name, MFD_CLOEXEC);

        check(fd >= 0);
        while (size > 0) {
                ssize_t k = write(fd, data, size);
                check(k > 0);
                data += k;
                size -= (size_t) k;
        }
        if (length)
                check(ftruncate(fd, (off_t) length) == 0);
        check(lseek(fd, 0, SEEK_SET) == 0);
        return fd;
}

static off_t size_of(int fd) {
        struct stat st;

        check(fstat(fd, &st) == 0);
        return st.st_size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_close_ int in = memfd_with("in", data, size, 0), out = memfd_with("out", NULL, 0, 0),
                            mem = memfd_with("mem", NULL, 0, MEM_SIZE);
        MigStreamStats st = {};
        int r;

        r = migstream_split(in, out, mem, "mem", &st);
        check(r == 0 || r == -EBADMSG);
        check(size_of(mem) == MEM_SIZE);
        if (r < 0)
                return 0;
        check(st.bytes_in == size);
        check(st.bytes_out == (uint64_t) size_of(out));
        check(st.bytes_out <= st.bytes_in);
        check(st.data_pages + st.zero_pages >= MEM_SIZE / MIGSTREAM_PAGE_SIZE);

        {
                _cleanup_close_ int out2 = memfd_with("out2", NULL, 0, 0), mem2 = memfd_with("mem2", NULL, 0, MEM_SIZE);
                check(lseek(out, 0, SEEK_SET) == 0);
                check(migstream_split(out, out2, mem2, "mem", NULL) == -EBADMSG);
        }
        return 0;
}
