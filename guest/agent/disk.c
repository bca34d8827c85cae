/* SPDX-License-Identifier: Apache-2.0 */

/* Growing the root filesystem to the disk the host gave this sandbox (`--disk`). A sandbox is restored
 * from its template's base snapshot, whose kernel knows the template image's size; the host then enlarges
 * the virtual disk (QMP block_resize, which raises virtio-blk's config-change interrupt) and sends INIT
 * disk_bytes=N. Here we wait until the kernel has seen the new capacity and grow the mounted ext4 online,
 * so the guest's filesystem is exactly as large as what the host lets the disk use: filling it gives the
 * guest ENOSPC instead of filling the host. */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "agent.h"

/* linux/ext4.h is not a uapi header on every distribution; the number is ABI. */
#ifndef EXT4_IOC_RESIZE_FS
#define EXT4_IOC_RESIZE_FS _IOW('f', 16, uint64_t)
#endif
#define EXT4_SUPER_MAGIC_ 0xEF53

/* The interrupt is delivered as soon as the vCPU runs; under TCG that can take a while on a busy host. */
#define CAPACITY_WAIT_MS 10000

static int root_device_bytes(dev_t dev, uint64_t *ret) {
        char path[64], buf[32];
        _cleanup_close_ int fd = -1;
        ssize_t n;
        char *end;
        unsigned long long sectors;

        (void) snprintf(path, sizeof path, "/sys/dev/block/%u:%u/size", major(dev), minor(dev));
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, sizeof buf - 1);
        if (n <= 0)
                return n < 0 ? -errno : -EIO;
        buf[n] = 0;
        errno = 0;
        sectors = strtoull(buf, &end, 10);
        if (errno || end == buf)
                return -EIO;
        *ret = (uint64_t) sectors * 512;
        return 0;
}

int disk_grow_root(uint64_t bytes, char *msg, size_t msg_size) {
        _cleanup_close_ int fd = -1;
        struct timespec start, now;
        struct statfs sf;
        struct stat st;
        uint64_t have = 0, blocks;
        int r;

        fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0) {
                r = -errno;
                (void) snprintf(msg, msg_size, "disk_bytes: cannot inspect the root filesystem: %s", strerror(-r));
                return r;
        }
        if (sf.f_type != EXT4_SUPER_MAGIC_) {
                (void) snprintf(msg, msg_size, "disk_bytes: the root filesystem is not ext4 (type 0x%lx)",
                                (unsigned long) sf.f_type);
                return -EOPNOTSUPP;
        }
        if (sf.f_bsize <= 0 || bytes / (uint64_t) sf.f_bsize == 0) {
                (void) snprintf(msg, msg_size, "disk_bytes: %llu is not a usable size", (unsigned long long) bytes);
                return -EINVAL;
        }
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (;;) {
                r = root_device_bytes(st.st_dev, &have);
                if (r < 0) {
                        (void) snprintf(msg, msg_size, "disk_bytes: cannot read the root disk's size: %s", strerror(-r));
                        return r;
                }
                if (have >= bytes)
                        break;
                clock_gettime(CLOCK_MONOTONIC, &now);
                if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 > CAPACITY_WAIT_MS) {
                        (void) snprintf(msg, msg_size,
                                        "disk_bytes: the root disk is still %llu bytes, not %llu, after %d s",
                                        (unsigned long long) have, (unsigned long long) bytes, CAPACITY_WAIT_MS / 1000);
                        return -ETIMEDOUT;
                }
                (void) usleep(1000);
        }
        blocks = bytes / (uint64_t) sf.f_bsize;
        if (ioctl(fd, EXT4_IOC_RESIZE_FS, &blocks) < 0) {
                r = -errno;
                (void) snprintf(msg, msg_size, "disk_bytes: growing the root filesystem to %llu blocks: %s",
                                (unsigned long long) blocks, strerror(-r));
                return r;
        }
        log_info("root filesystem grown to %llu MiB", (unsigned long long) (bytes >> 20));
        return 0;
}
