/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A process started by an exec in a sandbox: its channel stream on one side, its SSE response on the other,
 * and the credit that ties them together so a slow reader slows only its own process. */

#include "http.h"
#include "manager.h"

struct Process {
        Sandbox *sandbox;
        uint32_t stream;
        int pid;                     /* guest pid once started */
        Request *stream_request;     /* the SSE response, NULL after the client went away */
        struct MHD_Response *response;
        SpaceBuf sse;
        uint64_t next_event_id;
        SpaceCredit guest_credit[3]; /* what the guest may still send us on fd 1, 2 */
        uint64_t unreturned[3];      /* bytes received and not yet credited back */
        SpaceCredit stdin_credit;    /* what we may still send on fd 0 */
        Request *upload;             /* a stdin upload waiting for credit */
        bool want_stdin;
        bool stdin_closed;
        bool started;
        bool ended;                  /* exit or error event queued: the stream ends after it */
        bool timed_out;
        sd_event_source *timeout_source;
        Process *next;
};

typedef struct ExecSpec {
        char **argv;
        char **env;
        const char *cwd;
        bool want_stdin;
        uint64_t timeout_sec;
} ExecSpec;

/* Starts the process and answers r with the SSE stream. */
int process_start(Request *r, Sandbox *s, const ExecSpec *spec);
Process *process_find_by_pid(Sandbox *s, int pid);
int process_signal(Process *p, int sig);
int process_close_stdin(Process *p);
size_t process_upload(Process *p, Request *r, const char *data, size_t n);
void process_detach_stream(Process *p, Request *r);
void process_detach_upload(Process *p, Request *r);
/* From the channel. */
void process_on_frame(Process *p, const SpaceFrameHeader *h, const uint8_t *payload);
/* The sandbox or the channel went away. */
void process_fail(Process *p, const char *code, const char *message);
Process *process_maybe_free(Process *p);
