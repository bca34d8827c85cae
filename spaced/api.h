/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The /v1 API: the route table, and what the handler files share. */

#include "http.h"

#define WAIT_MAX_SEC 3600
#define MEMORY_MIB_MIN 64
#define MEMORY_MIB_MAX 65536
#define DISK_MIB_MAX 1048576
#define ARGV_MAX 4096
#define ROUTE_ARGS_MAX 4

enum {
        WAIT_NONE,
        WAIT_CREATE,
        WAIT_DELETE,
        WAIT_OPERATION,
        WAIT_LIFECYCLE,
};

/* The {name} segments of a matched URL, in order. */
typedef struct RouteArgs {
        const char *arg[ROUTE_ARGS_MAX];
        char buf[ROUTE_ARGS_MAX][256];
} RouteArgs;

typedef struct Route {
        const char *method;
        const char *pattern;
        void (*handler)(Request *r, const RouteArgs *a);
        /* Set for routes whose body is streamed to the handler (api_upload) instead of collected. */
        void (*begin)(Request *r, const RouteArgs *a);
} Route;

extern const Route api_routes[];
const Route *api_find_route(const char *method, const char *url, RouteArgs *ret, bool *ret_path_known);

/* api.c: answer once the operation finishes or `wait` seconds pass (202 with the operation then). */
void start_wait(Request *r, Operation *op, int kind, unsigned wait);
void respond_wait_result(Request *r);

/* api-lifecycle.c */
void api_post_pause(Request *r, const RouteArgs *a);
void api_post_resume(Request *r, const RouteArgs *a);
void api_post_suspend(Request *r, const RouteArgs *a);
void api_post_wake(Request *r, const RouteArgs *a);

/* api-util.c */
cJSON *sandbox_to_json(Sandbox *s);
cJSON *operation_to_json(Operation *op);
unsigned status_for_code(const char *code);
void respond_operation_error(Request *r, const OperationError *e, int err);
int parse_wait(Request *r, unsigned *ret);
/* Parses the body as a JSON object with only the allowed fields; responds 400 and returns NULL otherwise. */
cJSON *parse_body_object(Request *r, const char *const *allowed);
int get_uint_field(Request *r, cJSON *o, const char *key, uint64_t min, uint64_t max, uint64_t *ret);
int get_env_field(Request *r, cJSON *o, char ***ret);
int resolve_sandbox(Request *r, const char *ref, Sandbox **ret);

/* api-processes.c */
void api_post_processes(Request *r, const RouteArgs *a);
void api_stdin_begin(Request *r, const RouteArgs *a);
void api_post_stdin(Request *r, const RouteArgs *a);
void api_post_close_stdin(Request *r, const RouteArgs *a);
void api_post_signal(Request *r, const RouteArgs *a);
