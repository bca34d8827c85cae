/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <sys/types.h>

/* The uid that owns the socket at the other end of fd, an accepted TCP connection on this machine (loopback):
 * asked of the kernel (NETLINK_SOCK_DIAG), which any user may ask. -ENOENT when that socket is gone (the client
 * closed), -EAFNOSUPPORT for a socket that is not TCP over IP. */
int tcp_peer_uid(int fd, uid_t *ret_uid);
