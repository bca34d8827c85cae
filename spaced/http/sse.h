/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Server-sent events (text/event-stream): the framing of the process streams. The process decides which
 * event comes next; this turns it into bytes and answers a request with such a stream. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/http.h"

/* Replaces what buf holds with one event: "id: ID\nevent: NAME\ndata: DATA\n\n". base64: DATA is data
 * base64-encoded (output bytes); otherwise data is sent as it is and must hold no newline (one-line JSON). */
int sse_format_event(SpaceBuf *buf, uint64_t id, const char *name, const void *data, size_t n, bool base64);
/* The same event added after what buf holds (a queue of events). */
int sse_append_event(SpaceBuf *buf, uint64_t id, const char *name, const void *data, size_t n, bool base64);

/* Answers r with an event stream read from r->stream (no caching: every read is live). */
int sse_respond(Request *r);
