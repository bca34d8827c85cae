/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Splits a QEMU 7.2 migration stream (precopy, as vm_save_state() has QEMU write it: x-ignore-shared on,
 * section footers on, no multifd, xbzrle, compression, postcopy or RDMA) into a memory file and the rest.
 *
 * The pages of one RAM block (the memory backend's, "mem") go to mem_fd at their offset in the block; zero
 * pages leave holes. What goes to out_fd is the same stream without them: the stream a source whose block was
 * shared would have written (but for PART sections that had only its pages and stay, empty, as QEMU sends
 * them when it has nothing), which an incoming QEMU with x-ignore-shared loads while it maps the memory file
 * (ARCHITECTURE.md, decision 4: how a base snapshot is restored). Pages of other blocks (ROMs, fw_cfg blobs)
 * stay in the stream. From the first device section (QEMU_VM_SECTION_FULL) on the stream is copied as it is.
 *
 * The stream is not trusted (the guest may own the QEMU that wrote it): every length, count and offset is
 * checked against the formats and the memory file, nothing is allocated by a size the stream gives, and
 * anything else than the above is refused with -EBADMSG. So is a stream that leaves a page of the block
 * unsaid: the memory file must be the block's whole content.
 */

#include <stdint.h>

#define MIGSTREAM_PAGE_SIZE 4096U   /* TARGET_PAGE_SIZE of x86 */
#define MIGSTREAM_BLOCKS_MAX 64U    /* RAM blocks in the setup's list: microvm has a handful */
#define MIGSTREAM_CAPS_MAX 64U      /* capabilities in the configuration section */

typedef struct MigStreamStats {
        uint64_t data_pages;  /* pages of the block written to the memory file */
        uint64_t zero_pages;  /* its zero pages: holes */
        uint64_t kept_pages;  /* pages of other blocks, left in the stream */
        uint64_t bytes_in;
        uint64_t bytes_out;
} MigStreamStats;

/* Reads in_fd to its end. mem_fd is the memory file, already sized to the block (its size is the block's
 * used_length, or the stream is refused) and holding zeros. ret_stats may be NULL. Returns 0, -EBADMSG for a
 * stream this does not take, or -errno of the I/O that failed; on failure whatever was written is garbage. */
int migstream_split(int in_fd, int out_fd, int mem_fd, const char *block, MigStreamStats *ret_stats);
