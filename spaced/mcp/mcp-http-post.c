/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "core/worker.h"
#include "http/sse.h"
#include "macro.h"
#include "mcp/mcp-http-internal.h"

/* What one POST gets back: the engine's messages for it (its response, progress before it), queued on the
 * loop until the client reads them, as SSE events or as the response alone. The engine sends from its call
 * threads; each message is copied there and handed to the loop as a completion, so a McpPost is touched only
 * on the loop. A client that leaves does not stop its call (MCP: a disconnect is not a cancellation): what
 * the call still sends is dropped, and the McpPost lives until the engine's done. */

static pthread_t loop_thread;

void mcp_post_setup(void) {
        loop_thread = pthread_self();
}

/* A message or a done, from an engine thread to the loop. */
typedef struct McpEvent {
        McpPost *post;
        char *text;             /* NULL: the done */
        bool response, result;
} McpEvent;

McpPost *mcp_post_new(McpSession *s, Request *r) {
        McpPost *p = calloc(1, sizeof *p);

        if (!p)
                return NULL;
        p->session = mcp_session_ref(s);
        p->request = r;
        p->ref = 2; /* the request's, the engine's */
        p->next = s->posts;
        if (s->posts)
                s->posts->prev = p;
        s->posts = p;
        s->calls++;
        s->last_active = now_usec_monotonic();
        return p;
}

void mcp_post_unref(McpPost *p) {
        if (!p || --p->ref > 0)
                return;
        mcp_session_unref(p->session);
        space_buf_done(&p->out);
        free(p->response);
        free(p->request_id);
        free(p);
}

static size_t post_pending(const McpPost *p) {
        return p->out.len - p->out_off;
}

static int post_append_event(McpPost *p, const char *text, size_t n) {
        return sse_append_event(&p->out, ++p->session->next_event_id, "message", text, n, false);
}

/* One message for p, on the loop. While the answer's form is undecided (inside mcp_server_receive()) it is
 * queued as an event and the response kept aside too, for an answer in JSON. */
static void post_deliver(McpPost *p, char *text, bool response, bool result) {
        _cleanup_free_ char *t = text;
        size_t n = strlen(t);

        if (!p->request || p->done)
                return; /* nobody reads it any more, or a stray message after the done */
        if (response) {
                p->got_result = result;
                p->got_error = !result;
        }
        if (!p->answered && response) {
                free(p->response);
                p->response = TAKE_PTR(t);
                if (post_append_event(p, p->response, n) < 0)
                        log_error("out of memory queueing an MCP response");
        } else if (p->answered && !p->sse) {
                if (response && space_buf_append(&p->out, t, n) < 0)
                        log_error("out of memory queueing an MCP response");
        } else if (!response && post_pending(p) + n > MCP_POST_QUEUE_MAX) {
                /* a client that does not read: its progress goes, its response never does */
                if (p->dropped++ == 0)
                        log_info("MCP session %.8s: a client reads too slowly, dropping its notifications",
                                 p->session->id);
        } else if (post_append_event(p, t, n) < 0)
                log_error("out of memory queueing an MCP message");
        if (p->request->suspended)
                http_resume(p->request);
}

/* The end of a call the session's end cut short: its client gets an error instead of a stream that stops. */
static void post_abandon(McpPost *p) {
        _cleanup_cjson_ cJSON *id = NULL, *m = NULL;
        char *text;

        if (!p->request_id || p->got_result || p->got_error || !p->request)
                return;
        id = cJSON_Parse(p->request_id);
        m = id ? mcp_error_message(id, -32000, "the MCP session ended (deleted, idle for an hour, or the daemon "
                                   "stopping) before this request was answered; start a new session with "
                                   "initialize") : NULL;
        text = m ? cJSON_PrintUnformatted(m) : NULL;
        if (text)
                post_deliver(p, text, true, false);
}

void mcp_post_finish(McpPost *p) {
        McpSession *s = p->session;

        if (p->done)
                return;
        if (s->ending)
                post_abandon(p);
        p->done = true;
        if (p->prev)
                p->prev->next = p->next;
        else
                s->posts = p->next;
        if (p->next)
                p->next->prev = p->prev;
        p->next = p->prev = NULL;
        s->calls--;
        s->last_active = now_usec_monotonic();
        if (p->request && p->request->suspended)
                http_resume(p->request); /* the stream ends once read */
        mcp_post_unref(p);
}

static void event_run(McpEvent *e) {
        if (e->text)
                post_deliver(e->post, e->text, e->response, e->result);
        else
                mcp_post_finish(e->post);
        free(e);
}

static void on_event(Manager *m, void *userdata) {
        (void) m;
        event_run(userdata);
}

static void post_event(McpSession *s, McpEvent *e) {
        if (pthread_equal(pthread_self(), loop_thread))
                event_run(e); /* from inside mcp_server_receive(): the handler decides the answer after it */
        else
                completion_post_foreign(s->manager, on_event, e);
}

void mcp_post_send(const cJSON *message, void *context, void *userdata) {
        McpEvent *e;

        if (!context)
                return; /* nothing to answer: we make no requests of our own */
        e = calloc(1, sizeof *e);
        if (!e)
                return;
        e->post = context;
        e->response = cJSON_HasObjectItem(message, "id") && !cJSON_HasObjectItem(message, "method");
        e->result = cJSON_HasObjectItem(message, "result");
        e->text = cJSON_PrintUnformatted(message);
        if (!e->text) {
                free(e); /* out of memory: the stream ends without it, which the client reports */
                return;
        }
        post_event(userdata, e);
}

void mcp_post_done(void *context, void *userdata) {
        McpEvent *e;

        if (!context)
                return;
        e = calloc(1, sizeof *e);
        if (!e)
                abort(); /* as completion_post_foreign(): without it the POST would never end */
        e->post = context;
        post_event(userdata, e);
}

/* ---- the response body ---- */

static ssize_t post_read(void *userdata, char *buf, size_t max) {
        McpPost *p = userdata;
        size_t n = MIN(post_pending(p), max);

        if (n == 0)
                return p->done ? HTTP_STREAM_END : 0;
        memcpy(buf, p->out.data + p->out_off, n);
        p->out_off += n;
        if (p->out_off == p->out.len) {
                p->out.len = p->out_off = 0;
                if (p->out.cap > 256 * 1024)
                        space_buf_done(&p->out); /* a large answer went: give its memory back */
        }
        return (ssize_t) n;
}

static void post_detach(void *userdata, Request *r) {
        McpPost *p = userdata;

        p->request = NULL;
        mcp_post_unref(p);
}

static void post_release(void *userdata) {
        mcp_post_unref(userdata);
}

int mcp_post_respond_stream(McpPost *p, bool sse, const char *session_id) {
        Request *r = p->request;
        const char *headers[] = {
                MHD_HTTP_HEADER_CONTENT_TYPE, sse ? "text/event-stream" : "application/json",
                MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache",
                session_id ? "Mcp-Session-Id" : NULL, session_id,
                NULL,
        };
        int q;

        p->answered = true;
        p->sse = sse;
        if (!sse) {
                /* the response alone, when it comes: what was queued as events goes */
                p->out.len = p->out_off = 0;
                if (p->response && space_buf_append(&p->out, p->response, strlen(p->response)) < 0)
                        return -ENOMEM;
        }
        r->stream = (HttpStream) { .read = post_read, .detach = post_detach, .release = post_release,
                                   .userdata = p };
        p->ref++; /* the response body's */
        q = http_respond_stream(r, headers);
        if (q == -ENOMEM)
                p->ref--; /* no body was made; the request's reference goes with its detach */
        return q;
}
