/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Inside the agent's network side (net*.c, tunnel.c); agent.h has what main.c and channel.c call. */

#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>

#include "agent.h"

/* How long each side may keep us waiting. */
#define NET_HEAD_TIMEOUT_MS 30000U    /* a proxy client's request head */
#define NET_CONNECT_TIMEOUT_MS 60000U /* the host's answer to CONNECT (its own connect has a timeout too) */
#define NET_PORT_TIMEOUT_MS 10000U    /* our connect() to a guest port (loopback: refused at once normally) */
#define NET_RESOLVE_TIMEOUT_MS 5000U  /* the host's answer to RESOLVE; resolvers retry on their own */

typedef enum TunnelKind {
        TUNNEL_PROXY,       /* a client of the HTTP proxy */
        TUNNEL_TRANSPARENT, /* a captured connection (nftables redirect) */
        TUNNEL_PORT,        /* the host's PORT: we connected to a guest port */
} TunnelKind;

typedef enum TunnelState {
        TUNNEL_HEAD,        /* proxy: reading the request head; no stream yet */
        TUNNEL_CONNECTING,  /* CONNECT sent, no answer yet; PORT: our connect() in progress */
        TUNNEL_OPEN,
} TunnelState;

/* A TCP connection in the guest bridged to a channel stream (lib/proto.h, "Tunnels"). */
typedef struct Tunnel {
        uint32_t id;               /* the stream; 0 while there is none */
        TunnelKind kind;
        TunnelState state;
        int fd;
        uint64_t deadline_ms;      /* HEAD, CONNECTING: monotonic ms to give up at; 0 for none */
        SpaceBuf head;             /* proxy: the request head as read so far */
        bool connect_method;       /* proxy: CONNECT (answer 200 at OK), else a plain request */
        SpaceBuf pending;          /* guest -> host bytes for once we may send them (rewritten head, early bytes) */
        SpaceBuf to_sock;          /* host -> guest bytes not yet written to the socket */
        uint32_t credit_pending;   /* of those, written but not yet credited back */
        SpaceCredit in_credit;     /* what the host may still send (fd 0) */
        SpaceCredit out_credit;    /* what we may still send (fd 1) */
        bool host_eof;             /* EOF(fd 0) came */
        bool shut;                 /* ... and became shutdown(SHUT_WR) once to_sock was written */
        bool sock_eof;             /* our socket read 0, and EOF(fd 1) went */
        int port_family;           /* PORT: the family being tried, AF_INET first */
        uint16_t port;             /* PORT: the guest port */
        int port_err4;             /* PORT: why 127.0.0.1 failed, when [::1] is tried next */
        char target[272];          /* CONNECT: "HOST:PORT" asked for, for a refusal's note */
} Tunnel;

uint64_t net_now_ms(void);
/* The next free id for a stream the guest opens (SPACE_STREAM_GUEST_BIT set). */
uint32_t net_id_next(void);
/* Closes fd with a TCP reset (SO_LINGER 0) rather than a FIN: the client sees the connection fail. */
void net_reset_fd(int fd);
/* Appends one line to /run/space/egress-refused.log (in a VM): when, how (proxy, transparent, dns), what was
 * asked and what the host said, so that a program's vague failure can be read where it happened. Bounded. */
void net_note_refusal(const char *via, const char *what, const char *message);
/* "1.2.3.4" / "::1" for a sockaddr_in or sockaddr_in6; the port in *ret_port. */
int net_addr_text(const struct sockaddr_storage *sa, char *buf, size_t size, uint16_t *ret_port);

/* tunnel.c */
size_t tunnels_count(void);
Tunnel *tunnel_find(uint32_t id);
/* Registers a tunnel for fd (taken either way). NULL when SPACE_TUNNELS_MAX are open: fd is then reset. */
Tunnel *tunnel_new(TunnelKind kind, TunnelState state, int fd);
/* Forgets a tunnel: closes its socket (with a reset if asked). Sends nothing. */
void tunnel_free(Tunnel *t, bool reset);
/* Aborts: CLOSE(s) to the host if there is a stream, a reset for the socket, forgotten. */
void tunnel_abort(Channel *c, Tunnel *t);
/* Opens the stream: CONNECT(host, port, via). -ENOTCONN without a host to ask. */
int tunnel_connect(Channel *c, Tunnel *t, const char *host, unsigned port, const char *via);
/* The stream is open (OK): bytes flow both ways. */
void tunnel_opened(Channel *c, Tunnel *t);
/* Queues bytes for the host, sent as credit allows once they may be (a proxy's: after OK). */
int tunnel_queue(Channel *c, Tunnel *t, const void *p, size_t n);
void tunnel_port(Channel *c, uint32_t id, const uint8_t *p, size_t n);
bool tunnel_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p);
size_t tunnels_poll_fill(const Channel *c, struct pollfd *fds, size_t max, Tunnel **owners);
void tunnels_poll_handle(Channel *c, const struct pollfd *fds, size_t n, Tunnel **owners);
void tunnels_timeouts(Channel *c, uint64_t now, uint64_t *next);
void tunnels_drop_all(void);

/* net-proxy.c: the HTTP proxy's and the transparent listener's sides of a tunnel */
void proxy_accept(Channel *c, int listen_fd);
void transparent_accept(Channel *c, int listen_fd);
/* HEAD: reads what the client sent; once the head is whole, answers it or sends CONNECT. */
void proxy_head_read(Channel *c, Tunnel *t);
/* The host's answer to a proxy's CONNECT: OK (addr) or ERROR (code, message). */
void proxy_answer(Channel *c, Tunnel *t, bool ok, const char *code, const char *message);
/* Answers a client that never got its head out, or whose host never answered, and forgets it. */
void proxy_timeout(Channel *c, Tunnel *t);

/* net-dns.c: the DNS stub */
void dns_stub_set_fd(int fd);
int dns_stub_fd(void);
void dns_stub_read(Channel *c);
bool dns_stub_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p);
bool dns_stub_has(uint32_t id);
void dns_stub_timeouts(Channel *c, uint64_t now, uint64_t *next);
void dns_stub_drop_all(Channel *c);
