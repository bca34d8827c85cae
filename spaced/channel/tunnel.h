/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A TCP connection carried over the channel (lib/proto.h, "Tunnels"): a socket on the host bridged to a stream,
 * with credit both ways. The egress gateway (egress/gateway.c) makes one from each CONNECT the guest sends; port
 * forwards make one with PORT for each connection they accept. Everything from the guest is bounded by credit:
 * the host never holds more than SPACE_STREAM_WINDOW bytes of a tunnel's guest data. */

#include <stdbool.h>
#include <stdint.h>

#include "channel/channel.h"

typedef struct Tunnel Tunnel;

typedef struct TunnelStats {
        uint64_t up;         /* bytes from the guest to the host socket */
        uint64_t down;       /* bytes from the host socket to the guest */
} TunnelStats;

typedef struct TunnelOps {
        /* The guest answered PORT: err 0, or -errno with its message. An error ends the tunnel right after
         * (ended is not called then). */
        void (*opened)(Tunnel *t, int err, const char *message, void *userdata);
        /* The tunnel is over: both directions closed, a CLOSE, the socket failed, or the channel went away. why
         * is NULL for a normal end. The tunnel is freed right after. */
        void (*ended)(Tunnel *t, const TunnelStats *st, const char *why, void *userdata);
} TunnelOps;

/* Inbound: opens a PORT stream to guest_port and, once the guest is connected, bridges fd (a connected,
 * non-blocking socket, which the tunnel takes over and closes) to it. On failure fd stays the caller's.
 * -EMFILE over SPACE_TUNNELS_MAX. */
int tunnel_open_port(AgentConn *a, uint16_t guest_port, int fd, const TunnelOps *ops, void *userdata,
                     Tunnel **ret);

/* Outbound (egress/gateway.c): a CONNECT from the guest on stream. The tunnel starts without a socket: the
 * guest's first bytes are held (tunnel_held) until the gateway attaches the socket it connected. */
int tunnel_accept_guest(AgentConn *a, uint32_t stream, const TunnelOps *ops, void *userdata, Tunnel **ret);
/* The guest bytes held so far, and whether the guest closed its side already. */
void tunnel_held(Tunnel *t, const uint8_t **ret_data, size_t *ret_len, bool *ret_eof);
/* Calls wake each time more guest bytes were held (or the guest closed), until a socket is attached. */
void tunnel_set_peek_waiter(Tunnel *t, void (*wake)(Tunnel *t, void *userdata));
/* Takes over a connected non-blocking socket and sends OK(addr=addr_text) to the guest: from now on what the
 * socket reads goes to the guest (a server may speak first), but the guest's bytes stay held until
 * tunnel_release(), so the gateway can still read the SNI or Host a client sends only after OK. */
int tunnel_attach(Tunnel *t, int fd, const char *addr_text);
/* Puts fd (connected, non-blocking; taken) in place of the socket attached, whose fd goes to *ret_old: the egress
 * gateway's TLS interception (egress/intercept.c) stands between the guest and the server from here on. Only
 * before release and before any byte went either way (-EBUSY); on failure fd stays the caller's. */
int tunnel_swap_socket(Tunnel *t, int fd, int *ret_old);
/* The guest's bytes, held ones first, now go to the socket (all of them, also after tunnel_release_gated). */
void tunnel_release(Tunnel *t);
/* Released, but guest bytes go to the socket only as far as gate lets them: gate runs now and whenever bytes
 * came past that point (or the guest closed), reads them with tunnel_unchecked() and lets some go with
 * tunnel_pass(). It returns 1 when it ended the tunnel (tunnel_abort), else 0. The gateway checks each
 * request of a plain HTTP connection this way; what waits for it is bounded by the window. */
typedef int (*TunnelGate)(Tunnel *t, void *userdata);
void tunnel_release_gated(Tunnel *t, TunnelGate gate);
/* The guest's bytes the gate has not let go yet, and whether the guest closed its side. */
void tunnel_unchecked(Tunnel *t, const uint8_t **ret_data, size_t *ret_len, bool *ret_eof);
/* Lets n more of them go (sent as the socket takes them; nothing is sent from inside this call). */
void tunnel_pass(Tunnel *t, size_t n);
/* Lets go data in place of the next n unchecked bytes (the gateway's request head with a secret added): the
 * guest gets its credit for those n at once. -EINVAL when there are not n unchecked bytes or no gate. */
int tunnel_pass_replace(Tunnel *t, size_t n, const void *data, size_t len);
/* The gate's own bytes not sent yet; and to hold the stream until they are: the gate runs again then. Each
 * head's credit comes back at once (tunnel_pass_replace), so without this a guest sending small requests
 * fast could have the host hold a secret-sized header for each. */
size_t tunnel_injected(Tunnel *t);
void tunnel_gate_when_sent(Tunnel *t);
/* Runs the gate again (something it waited for happened) and sends what it lets go. */
void tunnel_regate(Tunnel *t);
/* Calls watch with the server's bytes as they are read, before they go to the guest (may be NULL: no more).
 * watch must not end the tunnel. */
void tunnel_watch_down(Tunnel *t, void (*watch)(Tunnel *t, const uint8_t *p, size_t n, void *userdata));
const TunnelStats *tunnel_stats(Tunnel *t);
/* Refuses a CONNECT not yet attached: ERROR(code, message) to the guest; the tunnel is freed (ended is not
 * called). */
void tunnel_refuse(Tunnel *t, SpaceCode code, const char *message);

/* Ends a tunnel from the host: CLOSE to the guest, the socket reset. ended is called with why. */
void tunnel_abort(Tunnel *t, const char *why);

/* agent.c's side: frames for a tunnel's stream, and the channel going away (every tunnel ends with why). */
Tunnel *tunnel_find(AgentConn *a, uint32_t stream);
void tunnel_on_frame(Tunnel *t, const SpaceFrameHeader *h, const uint8_t *payload);
void tunnels_lost(AgentConn *a, const char *why);
