/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>

#include "base64.h"
#include "http/sse.h"

int sse_format_event(SpaceBuf *buf, uint64_t id, const char *name, const void *data, size_t n, bool base64) {
        buf->len = 0;
        return sse_append_event(buf, id, name, data, n, base64);
}

int sse_append_event(SpaceBuf *buf, uint64_t id, const char *name, const void *data, size_t n, bool base64) {
        char head[96];
        int k;

        k = snprintf(head, sizeof head, "id: %" PRIu64 "\nevent: %s\ndata: ", id, name);
        if (space_buf_append(buf, head, (size_t) k) < 0)
                return -ENOMEM;
        if (base64) {
                if (space_buf_append_base64(buf, data, n) < 0)
                        return -ENOMEM;
        } else if (space_buf_append(buf, data, n) < 0)
                return -ENOMEM;
        return space_buf_append(buf, "\n\n", 2);
}

int sse_respond(Request *r) {
        static const char *const headers[] = {
                MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream",
                MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache",
                NULL,
        };

        return http_respond_stream(r, headers);
}
