/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <unistd.h>

#include "io-util.h"

int loop_write(int fd, const void *buf, size_t n) {
        const uint8_t *p = buf;

        while (n > 0) {
                ssize_t k = write(fd, p, n);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                struct pollfd pfd = { .fd = fd, .events = POLLOUT };

                                /* POLLERR and POLLHUP end the poll too: the next write() reports them. */
                                if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
                                        return -errno;
                                continue;
                        }
                        return -errno;
                }
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

int loop_pwrite(int fd, const void *buf, size_t n, uint64_t off) {
        const uint8_t *p = buf;

        while (n > 0) {
                ssize_t k = pwrite(fd, p, n, (off_t) off);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -EIO;
                p += k;
                n -= (size_t) k;
                off += (uint64_t) k;
        }
        return 0;
}
