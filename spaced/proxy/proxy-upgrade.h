/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The bytes of a switched protocol (a WebSocket) between the client's socket and a PORT tunnel's end, after
 * the port proxy (proxy/proxy.c) answered 101: both ways at once, in the event loop, never blocking. */

#include <stddef.h>
#include <systemd/sd-event.h>

/* What one way holds at most: a side that stops reading stops the other side from being read, so a flood
 * waits in the sockets and the tunnel's credit, not in the daemon. */
#define BRIDGE_BUFFER_MAX (64 * 1024)

typedef struct Bridge Bridge;

/* Both ways ended (why NULL: each side closed its sending half, all of it was delivered), or one socket failed
 * (why says which). Called from the event loop, never from bridge_new; the callee may free the bridge. */
typedef void (*BridgeDone)(Bridge *b, const char *why, void *userdata);

/* client and server: connected sockets, neither taken (the caller closes them after bridge_free). to_server
 * and to_client: bytes read already, which go first (copied). */
int bridge_new(sd_event *e, int client, int server, const void *to_server, size_t to_server_len,
               const void *to_client, size_t to_client_len, BridgeDone done, void *userdata, Bridge **ret);
/* Stops watching both sockets and frees what is held; closes nothing. */
Bridge *bridge_free(Bridge *b);
