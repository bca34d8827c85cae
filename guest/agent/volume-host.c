/* SPDX-License-Identifier: Apache-2.0 */

/*
 * The VOLUME requests in flight (lib/proto.h, "Volume mounts"): at most SPACE_VOLUME_OPS_MAX, each on a stream
 * the guest opens. A request is sent at once when there is a host, else when it comes back; and when the host
 * comes back (a restart, a restore, a fork), every request without an answer is sent again on a new stream:
 * the new host knows nothing of the old ones, and the ops are idempotent enough (a write at an offset, a
 * lookup) or fail cleanly when they ran twice (a create that must be new: EEXIST). An answer on a stream we no
 * longer wait on is dropped.
 */

#include <errno.h>
#include <string.h>

#include "../../lib/macro.h"
#include "net.h"
#include "volume.h"

static VolumeRequest requests[SPACE_VOLUME_OPS_MAX];
static size_t n_requests;

size_t volume_requests_in_flight(void) {
        return n_requests;
}

static VolumeRequest *request_by_stream(uint32_t stream) {
        if (stream == 0)
                return NULL;
        for (size_t i = 0; i < SPACE_VOLUME_OPS_MAX; i++)
                if (requests[i].used && requests[i].stream == stream)
                        return &requests[i];
        return NULL;
}

VolumeRequest *volume_request_new(VolumeMount *m, const struct fuse_in_header *h) {
        for (size_t i = 0; i < SPACE_VOLUME_OPS_MAX; i++)
                if (!requests[i].used) {
                        VolumeRequest *q = &requests[i];

                        *q = (VolumeRequest) { .used = true, .mount = m, .unique = h->unique, .opcode = h->opcode,
                                               .nodeid = h->nodeid };
                        n_requests++;
                        return q;
                }
        return NULL;
}

void volume_request_free(VolumeRequest *q) {
        space_buf_done(&q->payload);
        *q = (VolumeRequest) {};
        n_requests--;
}

/* A stream id of the guest's (net.c hands them out for tunnels and questions too) that no request uses. */
static uint32_t stream_next(void) {
        for (;;) {
                uint32_t id = net_id_next();

                if (!request_by_stream(id))
                        return id;
        }
}

void volume_request_send(Channel *c, VolumeRequest *q) {
        if (!c->host_connected) {
                q->stream = 0; /* volume_host_back() sends it */
                return;
        }
        q->stream = stream_next();
        if (channel_send(c, SPACE_F_VOLUME, 0, q->stream, q->payload.data, q->payload.len) < 0) {
                volume_reply_err(q->mount, q->unique, EIO);
                volume_request_free(q);
        }
}

void volume_requests_orphan(VolumeMount *m) {
        for (size_t i = 0; i < SPACE_VOLUME_OPS_MAX; i++)
                if (requests[i].used && requests[i].mount == m)
                        requests[i].mount = NULL;
}

void volume_requests_forget(void) {
        for (size_t i = 0; i < SPACE_VOLUME_OPS_MAX; i++)
                if (requests[i].used)
                        volume_request_free(&requests[i]);
}

void volume_host_gone(void) {
        for (size_t i = 0; i < SPACE_VOLUME_OPS_MAX; i++)
                requests[i].stream = 0; /* no answer comes on those */
}

void volume_host_back(Channel *c) {
        size_t sent = 0;

        for (size_t i = 0; i < SPACE_VOLUME_OPS_MAX; i++) {
                VolumeRequest *q = &requests[i];

                if (!q->used)
                        continue;
                if (!q->mount) { /* unmounted meanwhile: nobody waits */
                        volume_request_free(q);
                        continue;
                }
                q->stream = 0;
                volume_request_send(c, q);
                sent++;
        }
        if (sent > 0)
                log_info("volumes: %zu requests sent again to the new host", sent);
}

bool volume_frame(Channel *c, const SpaceFrameHeader *h, const uint8_t *p) {
        VolumeRequest *q;

        (void) c;
        if (!(h->stream & SPACE_STREAM_GUEST_BIT) || !(q = request_by_stream(h->stream)))
                return false;
        if (h->type != SPACE_F_VOLUME && h->type != SPACE_F_ERROR)
                return true; /* nothing else belongs on a VOLUME stream: dropped */
        if (q->mount)
                volume_answer(q, h->type, p, h->length);
        volume_request_free(q);
        return true;
}
