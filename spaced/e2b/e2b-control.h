/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the files of E2B's control plane share (e2b-sandboxes.c, e2b-sandbox-info.c, e2b-snapshots.c): the
 * sandbox a URL names, its JSON views, and requests parked until an operation ends. */

#include "e2b/e2b-internal.h"

/* A time to live in seconds (E2B's `timeout`), as the native API bounds it. */
#define E2B_TIMEOUT_MAX (10LL * 365 * 86400)
/* E2B's own default when a create names none (its OpenAPI document's). */
#define E2B_TIMEOUT_DEFAULT 15
/* A parked create, connect, pause, kill or snapshot answers within this (the SDKs give up after 60 s). */
#define E2B_WAIT_SEC 120
/* Why a filesystem-only snapshot (E2B's `memory: false` on a snapshot) is refused: a snapshot is a checkpoint,
 * which holds memory, and a create from a checkpoint restores that memory; a create that cold-boots a
 * checkpoint's disk alone is not there (a filesystem-only pause is: a stop, and its connect a start). */
#define E2B_NO_FS_SNAPSHOT                                                                                    \
        "is not supported by space: its snapshots are checkpoints, which hold memory, and a sandbox made from " \
        "one restores that memory (no create cold-boots a disk alone)"
#define E2B_LIST_LIMIT_DEFAULT 100
#define E2B_LIST_LIMIT_MAX 100

/* Handlers, for the route table in e2b-sandboxes.c. */
void e2b_get_sandbox(Request *r, const RouteArgs *a);
void e2b_get_sandboxes(Request *r, const RouteArgs *a);
void e2b_get_sandboxes_v2(Request *r, const RouteArgs *a);
void e2b_get_metrics(Request *r, const RouteArgs *a);
void e2b_get_logs(Request *r, const RouteArgs *a);
void e2b_get_logs_v2(Request *r, const RouteArgs *a);
void e2b_post_snapshots(Request *r, const RouteArgs *a);
void e2b_get_snapshots(Request *r, const RouteArgs *a);
void e2b_delete_template(Request *r, const RouteArgs *a);
void e2b_post_fork(Request *r, const RouteArgs *a);       /* e2b-fork.c */
void e2b_put_network(Request *r, const RouteArgs *a);     /* e2b-network.c */
void e2b_post_volumes(Request *r, const RouteArgs *a);    /* e2b-volumes.c */
void e2b_get_volumes(Request *r, const RouteArgs *a);
void e2b_get_volume(Request *r, const RouteArgs *a);
void e2b_delete_volume(Request *r, const RouteArgs *a);
void e2b_post_secrets(Request *r, const RouteArgs *a);    /* e2b-secrets.c */
void e2b_get_secrets(Request *r, const RouteArgs *a);
void e2b_get_secret(Request *r, const RouteArgs *a);
void e2b_post_secret(Request *r, const RouteArgs *a);
void e2b_delete_secret(Request *r, const RouteArgs *a);

/* The sandbox {sandboxID} names: an exact id (E2B has no prefixes or names), not a pool member, not being
 * removed. Answers 404 {"code": 404, "message": "sandbox ID not found"} otherwise. */
int e2b_find_sandbox(Request *r, const char *id, Sandbox **ret);
/* E2B's state of a sandbox: "running", "paused" (paused, or suspended: E2B's pause keeps memory on disk), or
 * NULL for one E2B would not show (being created, failed, stopped). */
const char *e2b_state(const Sandbox *s);
/* The `Sandbox` create and connect answer. */
cJSON *e2b_sandbox_json(Manager *m, Sandbox *s);
/* `ListedSandbox`, or with detail `SandboxDetail` (token, domain, lifecycle). */
cJSON *e2b_listed_json(Manager *m, Sandbox *s, bool detail);
/* http_respond_json with more headers: name, value, ..., NULL. */
int e2b_respond_json_headers(Request *r, unsigned status, cJSON *body, const char *const *headers);
/* ?limit= (1 to E2B_LIST_LIMIT_MAX, default E2B_LIST_LIMIT_DEFAULT): 0, or < 0 when answered. */
int e2b_query_limit(Request *r, unsigned *ret);
/* A JSON body as an object whose fields are all among allowed (an empty body is {}); NULL when answered. */
cJSON *e2b_body_object(Request *r, const char *const *allowed);
/* A whole number of seconds at key, from 0 to max: 1, 0 when absent, < 0 when answered. */
int e2b_seconds_field(Request *r, cJSON *o, const char *key, int64_t max, int64_t *ret);

/* A request parked until an operation ends: a continuation carries on then, with this (what the handler
 * parsed and did so far). Held by the request (freed with it). */
typedef struct E2bWait {
        char op_id[OPERATION_ID_LEN + 1];
        bool own;            /* the request started op_id: its failure is the answer */
        bool own_done;       /* ... and it succeeded: the handler answers now */
        bool resumed;        /* connect: the sandbox was resumed or woken (201, its timeout counts from now) */
        unsigned rounds;     /* how often the handler parked: bounds a state that does not settle */
        char sandbox_id[SANDBOX_ID_LEN + 1];
        char checkpoint_id[CHECKPOINT_ID_LEN + 1];
        int64_t timeout;     /* create: the time to live, counted from when it runs */
        uint64_t deadline;   /* monotonic usec */
        char arg[256];       /* the route's {sandboxID}: looked up again after each wait (it may be gone) */
        bool deprecated_resume;
        bool require_healthy;  /* pause: requireHealthyGuest */
        bool no_memory;        /* pause: memory=false (a stop); connect: memory=false (a cold boot, not a wake) */
        char snapshot_name[SANDBOX_NAME_MAX + 1]; /* "" for none */
        char fork_op[OPERATION_ID_LEN + 1];       /* fork: its operation, once started ("" before) */
        unsigned count;                           /* fork: how many were asked for */
} E2bWait;

/* The request's wait (NULL: none yet), made when make is true (NULL: out of memory, answered 500). */
E2bWait *e2b_wait_get(Request *r, bool make);
/* The request's wait, made, for the route's {sandboxID} arg (NULL: out of memory, answered 500). */
E2bWait *e2b_wait_new(Request *r, const char *arg);
/* At the top of a continuation of e2b_wait_op(): 1 to go on (own_done set when the request's own operation
 * succeeded), 0 parked again (on k), < 0 answered (its own operation failed, out of time). */
int e2b_wait_resume(Request *r, E2bWait *w, HttpContinuation k);
/* Parks r until op ends (own: r started it), then k(r, the wait) carries on; when op has ended already, k runs
 * now. 0 parked (or carried on), < 0 answered (out of time, out of memory). */
int e2b_wait_op(Request *r, Operation *op, bool own, HttpContinuation k);
/* Parks r until what keeps s busy ends (another request's operation): as e2b_wait_op; 409 when none is found. */
int e2b_wait_busy(Request *r, Sandbox *s, HttpContinuation k);
