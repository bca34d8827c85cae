/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The host end of a sandbox's channel, shared inside channel/ only (agent.c, tunnel.c, and the process files
 * for a process's sandbox); the rest of the daemon sees AgentConn through channel/channel.h. */

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "channel/channel.h"
#include "channel/tunnel.h"

/* Tunnels read their sockets only while the channel's output queue is below this; agent_flush() wakes them
 * (tunnels_kick) when it drains below it again. */
#define AGENT_TUNNEL_QUEUE_MAX (1U * 1024U * 1024U)

struct AgentConn {
        Sandbox *sandbox;
        int fd;
        sd_event_source *io;
        sd_event_source *reconnect;
        SpaceFrameReader *reader;
        SpaceBuf out;
        uint32_t next_stream;
        Process *processes;
        unsigned n_processes;
        FileXfer *files;             /* file operations (files.c), on streams of their own */
        unsigned n_files;
        Tunnel *tunnels;             /* tunnel.c: CONNECT and PORT streams */
        unsigned n_tunnels;
        bool tunnels_throttled;      /* a tunnel stopped reading its socket because out was full */
        bool awaiting_identity;      /* agent_reidentify_send()'s OK or ERROR is still to come */
        bool warming_up;             /* agent_warm_up_send()'s command has not ended yet */
        AgentFreezeDone freeze_done; /* agent_freeze()'s: its answer is still to come */
        void *freeze_userdata;
        sd_event_source *freeze_timer;
        bool freeze_for_stop;        /* the PING was "stop": PONG "synced" is its answer */
};

void tunnels_kick(AgentConn *a);

/* agent-freeze.c. The stream of the freeze's PING (one of the daemon's own, below AGENT_FIRST_STREAM). */
#define AGENT_FREEZE_STREAM 7U
/* The answer to PING "freeze", PONG or ERROR: 1 frozen, 0 froze nothing (an older agent echoes the PING),
 * -errno with the guest's message, bounded, in msg. */
int agent_freeze_answer(const SpaceFrameHeader *h, const uint8_t *payload, char *msg, size_t msg_size);
/* The same for PING "stop": 1 synced, 0 synced nothing (an older agent echoes it). */
int agent_stop_answer(const SpaceFrameHeader *h, const uint8_t *payload, char *msg, size_t msg_size);
void agent_freeze_on_frame(AgentConn *a, const SpaceFrameHeader *h, const uint8_t *payload);
/* The channel goes away: a freeze waiting for its answer ends with -ECONNRESET. */
void agent_freeze_cancel(AgentConn *a);
/* Whether the workload may be frozen, across the sandbox's connections: a reconnect then asks the sandbox for
 * the INIT that thaws it (ChannelSandboxOps.reconnected). */
void agent_health_set_frozen(AgentConn *a, bool frozen);
