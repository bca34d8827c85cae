/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"
#include "sock-diag.h"

/*
 * Who is at the other end of a TCP connection on this machine: the kernel knows the uid that made each socket
 * (what ss -e shows as uid:), and NETLINK_SOCK_DIAG tells it for one exact address pair to any user. The client's
 * socket is the one whose source is our peer and whose destination is us.
 */

typedef struct DiagRequest {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 req;
} DiagRequest;

int tcp_peer_uid(int fd, uid_t *ret_uid) {
        struct sockaddr_storage local = {}, peer = {};
        socklen_t llen = sizeof local, plen = sizeof peer;
        _cleanup_close_ int nl = -EBADF;
        DiagRequest q = {};
        union {
                struct nlmsghdr h;
                char buf[8192];
        } a;
        ssize_t n;

        if (getsockname(fd, (struct sockaddr *) &local, &llen) < 0 || getpeername(fd, (struct sockaddr *) &peer, &plen) < 0)
                return -errno;
        if (local.ss_family != peer.ss_family || (local.ss_family != AF_INET && local.ss_family != AF_INET6))
                return -EAFNOSUPPORT;

        q.nlh.nlmsg_len = sizeof q;
        q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
        q.nlh.nlmsg_flags = NLM_F_REQUEST;
        q.req.sdiag_family = (uint8_t) local.ss_family;
        q.req.sdiag_protocol = IPPROTO_TCP;
        q.req.idiag_states = ~0U;
        q.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
        q.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
        if (local.ss_family == AF_INET) {
                const struct sockaddr_in *l = (const struct sockaddr_in *) &local, *p = (const struct sockaddr_in *) &peer;

                q.req.id.idiag_sport = p->sin_port;
                q.req.id.idiag_dport = l->sin_port;
                memcpy(q.req.id.idiag_src, &p->sin_addr, sizeof p->sin_addr);
                memcpy(q.req.id.idiag_dst, &l->sin_addr, sizeof l->sin_addr);
        } else {
                const struct sockaddr_in6 *l = (const struct sockaddr_in6 *) &local, *p = (const struct sockaddr_in6 *) &peer;

                q.req.id.idiag_sport = p->sin6_port;
                q.req.id.idiag_dport = l->sin6_port;
                memcpy(q.req.id.idiag_src, &p->sin6_addr, sizeof p->sin6_addr);
                memcpy(q.req.id.idiag_dst, &l->sin6_addr, sizeof l->sin6_addr);
        }

        nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
        if (nl < 0)
                return -errno;
        if (send(nl, &q, sizeof q, 0) < 0)
                return -errno;
        /* an exact request answers one message: the socket, or an error (ENOENT when it is gone already) */
        n = recv(nl, &a, sizeof a, 0);
        if (n < 0)
                return -errno;
        if ((size_t) n < sizeof a.h || !NLMSG_OK(&a.h, (size_t) n))
                return -EBADMSG;
        if (a.h.nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = NLMSG_DATA(&a.h);

                if (a.h.nlmsg_len < NLMSG_LENGTH(sizeof *e))
                        return -EBADMSG;
                return e->error < 0 ? e->error : -ENOENT;
        }
        if (a.h.nlmsg_type != SOCK_DIAG_BY_FAMILY || a.h.nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
                return -EBADMSG;
        *ret_uid = (uid_t) ((const struct inet_diag_msg *) NLMSG_DATA(&a.h))->idiag_uid;
        return 0;
}
