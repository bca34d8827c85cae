/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel/agent-internal.h"
#include "core/log.h"
#include "core/util.h"
#include "macro.h"

/* The workload's freeze on an attached channel (lib/proto.h, PING "freeze"), answered in the event loop: the
 * host asks before it saves a VM others restore from, and goes on with the save whatever the answer, so a
 * guest that never answers costs the timeout and no more (ARCHITECTURE.md, "Checkpoint, fork and restore"). */

static void freeze_finish(AgentConn *a, int r, const char *message) {
        AgentFreezeDone done = a->freeze_done;
        void *userdata = a->freeze_userdata;

        a->freeze_done = NULL;
        a->freeze_userdata = NULL;
        a->freeze_timer = sd_event_source_disable_unref(a->freeze_timer);
        if (done)
                done(r, message, userdata);
}

static int on_freeze_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        freeze_finish(userdata, -ETIMEDOUT, "the guest agent did not answer in time");
        return 0;
}

static int freeze_ask(AgentConn *a, const char *payload, uint64_t timeout_usec, AgentFreezeDone done,
                      void *userdata) {
        int r;

        if (!a || a->fd < 0)
                return -ENOTCONN;
        if (a->freeze_done)
                return -EBUSY;
        r = sd_event_add_time_relative(channel_sandbox->manager(a->sandbox)->event, &a->freeze_timer,
                                       CLOCK_MONOTONIC, timeout_usec, 1000, on_freeze_timeout, a);
        if (r < 0)
                return r;
        r = agent_send(a, SPACE_F_PING, 0, AGENT_FREEZE_STREAM, payload, strlen(payload));
        if (r < 0) {
                a->freeze_timer = sd_event_source_disable_unref(a->freeze_timer);
                return r;
        }
        a->freeze_done = done;
        a->freeze_userdata = userdata;
        a->freeze_for_stop = streq(payload, SPACE_PING_STOP);
        return 0;
}

int agent_freeze(AgentConn *a, uint64_t timeout_usec, AgentFreezeDone done, void *userdata) {
        return freeze_ask(a, SPACE_PING_FREEZE, timeout_usec, done, userdata);
}

/* A stop rides on the freeze's stream and timer: the two never overlap, since both come from a lifecycle
 * operation or a save, one at a time on a sandbox. */
int agent_stop_sync(AgentConn *a, uint64_t timeout_usec, AgentFreezeDone done, void *userdata) {
        return freeze_ask(a, SPACE_PING_STOP, timeout_usec, done, userdata);
}

int agent_stop_answer(const SpaceFrameHeader *h, const uint8_t *payload, char *msg, size_t msg_size) {
        if (h->type == SPACE_F_PONG)
                /* an older agent echoes "stop": it synced nothing */
                return h->length == strlen(SPACE_PONG_SYNCED) && memcmp(payload, SPACE_PONG_SYNCED, h->length) == 0;
        return agent_freeze_answer(h, payload, msg, msg_size);
}

int agent_freeze_answer(const SpaceFrameHeader *h, const uint8_t *payload, char *msg, size_t msg_size) {
        const char *v = NULL;
        long e;

        if (h->type == SPACE_F_PONG)
                /* an older agent echoes "freeze": it froze nothing, and anything else is no "frozen" either */
                return h->length == strlen(SPACE_PONG_FROZEN) &&
                       memcmp(payload, SPACE_PONG_FROZEN, h->length) == 0;
        /* ERROR: the guest's own words, bounded, and an errno in range or EIO */
        if (space_kv_get(payload, h->length, "message", &v) <= 0)
                v = "no reason given";
        (void) snprintf(msg, msg_size, "%.200s", v);
        if (space_kv_get(payload, h->length, "errno", &v) <= 0 || (e = strtol(v, NULL, 10)) <= 0 || e > 4095)
                e = EIO;
        return (int) -e;
}

void agent_freeze_on_frame(AgentConn *a, const SpaceFrameHeader *h, const uint8_t *payload) {
        char msg[256] = "";
        int r;

        if (!a->freeze_done || (h->type != SPACE_F_PONG && h->type != SPACE_F_ERROR))
                return; /* nobody asked, or not an answer */
        r = a->freeze_for_stop ? agent_stop_answer(h, payload, msg, sizeof msg)
                               : agent_freeze_answer(h, payload, msg, sizeof msg);
        if (r > 0)
                agent_health_set_frozen(a, true);
        freeze_finish(a, r, r < 0 ? msg : NULL);
}

void agent_freeze_cancel(AgentConn *a) {
        if (a->freeze_done)
                freeze_finish(a, -ECONNRESET, "the channel to the guest agent closed");
}
