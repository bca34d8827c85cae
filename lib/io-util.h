/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Writes all n bytes of buf to fd. Returns 0, or -errno of the write that failed (-EPIPE when the reader is
 * gone; SIGPIPE should be ignored).
 *
 * EINTR retries and a short write goes on with the rest. EAGAIN waits in poll(POLLOUT) and goes on, so the
 * caller may hand in a non-blocking fd: spacectl's stdout can be one without spacectl having asked, when it
 * shares an open file description with a program that set O_NONBLOCK (a terminal, a pipe to a shell). All
 * callers want every byte written and nothing dropped:
 *   - spacectl exec, attach and logs copy a process's output to stdout and stderr; spinning on EAGAIN (as
 *     attach did) burns a CPU while the terminal is slow, and failing (as logs did) lost output and ended
 *     `logs` as if stdout were closed;
 *   - spaced's agent handshake writes frames on a blocking socket, where EAGAIN does not happen.
 * A reader that never reads blocks the caller, as a blocking write would. */
int loop_write(int fd, const void *buf, size_t n);

/* Writes all n bytes of buf to fd at offset off (a regular file: no EAGAIN). Returns 0, or -errno of the pwrite
 * that failed; a pwrite that writes nothing is -EIO. EINTR retries and a short write goes on with the rest. */
int loop_pwrite(int fd, const void *buf, size_t n, uint64_t off);
