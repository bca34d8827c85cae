/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The /v1 API: the route table, and what the handler files share. */

#include <microhttpd.h>

#include "channel/channel.h"
#include "core/operation.h"
#include "http/http.h"
#include "http/router.h"
#include "volume/volume.h"

#define WAIT_MAX_SEC 3600
#define MEMORY_MIB_MIN 64
#define MEMORY_MIB_MAX 65536
#define DISK_MIB_MAX 1048576
#define ARGV_MAX 4096
#define SANDBOX_METADATA_MAX 64
#define SANDBOX_METADATA_BYTES_MAX 16384

enum {
        WAIT_NONE,
        WAIT_CREATE,
        WAIT_DELETE,
        WAIT_OPERATION,
        WAIT_LIFECYCLE,
        WAIT_IMPORT,
};

/* Every /v1 route: main.c registers it with the router first (http_add_routes()). */
extern const Route api_routes[];

/* api.c: answer once the operation finishes or `wait` seconds pass (202 with the operation then). */
void start_wait(Request *r, Operation *op, int kind, unsigned wait);
void respond_wait_result(Request *r);

/* api-lifecycle.c */
void api_post_pause(Request *r, const RouteArgs *a);
void api_post_resume(Request *r, const RouteArgs *a);
void api_post_suspend(Request *r, const RouteArgs *a);
void api_post_wake(Request *r, const RouteArgs *a);
void api_post_stop(Request *r, const RouteArgs *a);
void api_post_start(Request *r, const RouteArgs *a);
/* What a handler does with a sandbox once it can be used; a holds the route's arguments. */
typedef void (*ApiAwake)(Request *r, Sandbox *s, const RouteArgs *a);
/* A use of s: k(r, s, a) runs now when s is not suspended or waking up; else r is parked on a wake on demand
 * (ARCHITECTURE.md, decision 6) and k runs once the wake finished, with s found again by id and a copy of a, or
 * the wake's failure (or its taking over two minutes) is the answer. k may find s in any state, as a handler
 * would. r->stream must be free: the wait holds it. */
void api_when_awake(Request *r, Sandbox *s, const RouteArgs *a, ApiAwake k);

/* api-keys.c */
void api_post_keys(Request *r, const RouteArgs *a);
void api_get_keys(Request *r, const RouteArgs *a);
void api_delete_key(Request *r, const RouteArgs *a);
/* api-secrets.c: secrets (secret/secret.h), values write-only */
void api_get_secrets(Request *r, const RouteArgs *a);
void api_get_secret(Request *r, const RouteArgs *a);
void api_put_secret(Request *r, const RouteArgs *a);
void api_delete_secret(Request *r, const RouteArgs *a);
/* api-volumes.c: volumes (volume/volume.h) and their files; the JSON of both, and a file's bytes as an answer
 * (streamed from the file), shared with the E2B facade's volume API */
cJSON *volume_to_json(Manager *m, Volume *v);
cJSON *volume_entry_to_json(const VolumeEntry *e);
/* Answers status with the entry as JSON, and is done with the entry. */
void api_respond_volume_entry(Request *r, unsigned status, VolumeEntry *e);
int api_volume_respond_file(Request *r, Volume *v, const char *path, uint64_t offset, uint64_t length);
/* api-volume-upload.c: a whole file as a request's streamed body. begin (from a route's begin, after its checks)
 * starts the upload into path (refusing a Content-Length over the quota left: at once when the client waits
 * for 100 Continue, else after its body) and sets r->upload, or answers
 * and returns < 0; end (the handler, once the body is in) puts the file in place and answers status with its
 * entry, or the error that stopped it. */
int api_volume_upload_begin(Request *r, Volume *v, const char *path, const VolumeWriteOptions *o);
void api_volume_upload_end(Request *r, unsigned status);
/* A create's volume mounts ([{"name", "path"}], E2B's volumeMounts) as SandboxSpec.volume_mounts ("NAME:PATH"
 * each; sandbox_create() checks the volumes and paths). 0 (*ret NULL when there are none); < 0 when it answered. */
int api_volume_mounts_parse(Request *r, const cJSON *mounts, char ***ret);
/* A whole number from 0 to max in query value key (base 8 or 10), -1 when absent; answers and returns -EINVAL
 * when it is not one. */
int api_query_int(Request *r, const char *key, int base, int64_t max, int64_t *ret);
void api_get_volumes(Request *r, const RouteArgs *a);
void api_post_volumes(Request *r, const RouteArgs *a);
void api_get_volume(Request *r, const RouteArgs *a);
void api_delete_volume(Request *r, const RouteArgs *a);
void api_get_volume_file(Request *r, const RouteArgs *a);
void api_put_volume_file(Request *r, const RouteArgs *a);
void api_put_volume_file_begin(Request *r, const RouteArgs *a);
void api_delete_volume_file(Request *r, const RouteArgs *a);
void api_get_volume_stat(Request *r, const RouteArgs *a);
void api_get_volume_list(Request *r, const RouteArgs *a);
void api_post_volume_mkdir(Request *r, const RouteArgs *a);
void api_post_volume_attrs(Request *r, const RouteArgs *a);
void api_post_volume_move(Request *r, const RouteArgs *a);

/* api-meta.c; openapi-data.c is generated from spaced/openapi.json */
extern const char openapi_json[];
extern const size_t openapi_json_len;
void api_get_openapi(Request *r, const RouteArgs *a);
void api_get_info(Request *r, const RouteArgs *a);
void api_post_daemon_reload(Request *r, const RouteArgs *a);
void api_get_operations(Request *r, const RouteArgs *a);

/* api-templates.c */
cJSON *template_to_json(Manager *m, Template *t);
void api_get_templates(Request *r, const RouteArgs *a);
void api_get_template(Request *r, const RouteArgs *a);
void api_get_template_rootfs(Request *r, const RouteArgs *a);
void api_post_template_import(Request *r, const RouteArgs *a);
void api_post_template_import_begin(Request *r, const RouteArgs *a);
void api_delete_template(Request *r, const RouteArgs *a);
void api_post_template_tag(Request *r, const RouteArgs *a);
void api_post_templates_gc(Request *r, const RouteArgs *a);

/* api-pools.c */
void api_get_pools(Request *r, const RouteArgs *a);
void api_put_pool(Request *r, const RouteArgs *a);

/* api-checkpoints.c */
void api_post_checkpoints(Request *r, const RouteArgs *a);
void api_get_checkpoints(Request *r, const RouteArgs *a);
void api_get_checkpoint(Request *r, const RouteArgs *a);
void api_delete_checkpoint(Request *r, const RouteArgs *a);
void api_post_restore(Request *r, const RouteArgs *a);
void api_post_sandbox_fork(Request *r, const RouteArgs *a);
void api_post_checkpoint_fork(Request *r, const RouteArgs *a);

/* api-util.c */
cJSON *checkpoint_to_json(Checkpoint *c);
cJSON *sandbox_to_json(Sandbox *s);
cJSON *operation_to_json(Operation *op);
void respond_operation_error(Request *r, const Error *e, int err);
/* Answers with e; with ERROR_INTERNAL and fallback when e is empty (we ran out of memory). */
void respond_error_or(Request *r, const Error *e, const char *fallback);
/* A ChannelWaiter that resumes r: the channel wakes it, and its continuation (or the body's reader) runs. */
ChannelWaiter api_request_waiter(Request *r);
/* A channel read function's result as an HttpStream read's. */
ssize_t api_stream_result(ssize_t n);
int parse_wait(Request *r, unsigned *ret);
/* Parses the body as a JSON object with only the allowed fields; responds 400 and returns NULL otherwise. */
cJSON *parse_body_object(Request *r, const char *const *allowed);
/* t (unix seconds) at key as an RFC 3339 string. */
void api_add_time(cJSON *o, const char *key, int64_t t);
/* The same for a body that holds a secret's value: no error quotes the body, and the request's copy is wiped.
 * Free with secret_body_free(), which wipes "value" too. */
cJSON *parse_secret_body(Request *r, const char *const *allowed);
void secret_body_free(cJSON *o);
int get_uint_field(Request *r, cJSON *o, const char *key, uint64_t min, uint64_t max, uint64_t *ret);
int get_env_field(Request *r, cJSON *o, char ***ret);
/* An array of non-empty strings at key (at most max): 1, 0 absent or null, < 0 answered (400). */
int get_strv_field(Request *r, cJSON *o, const char *key, size_t max, char ***ret);
/* X-Space-Egress-Profiles: NAME[,NAME...] (space-egress(5)): 1 with the names, 0 absent, < 0 answered (400). */
int api_egress_header(Request *r, char ***ret);
/* Adds egress_profiles, egress_allow and egress_deny to o; returns o. */
cJSON *sandbox_egress_to_json(char *const *profiles, char *const *allow, char *const *deny, cJSON *o);
/* A sandbox's volume mounts ("VOLUME-ID:PATH" each) as [{"volume": ID, "name": NAME, "path": PATH}], with_id
 * false: E2B's [{"name", "path"}]. A volume removed meanwhile (a checkpoint's) is named by its id. */
cJSON *sandbox_mounts_to_json(Manager *m, char *const *mounts, bool with_id);
/* true or false at key into *ret (left as it is when absent or null): 1, 0 absent, < 0 answered (400). */
int get_bool_field(Request *r, cJSON *o, const char *key, bool *ret);
/* An object of string labels at key, as JSON text in *ret (NULL when absent): 1, 0 absent, < 0 answered. */
int get_metadata_field(Request *r, cJSON *o, const char *key, char **ret);
cJSON *sandbox_metadata_to_json(const Sandbox *s);

/* api-ports.c: port forwards (sandbox/forward.h) */
void api_post_ports(Request *r, const RouteArgs *a);
void api_get_ports(Request *r, const RouteArgs *a);
void api_get_all_ports(Request *r, const RouteArgs *a);
void api_delete_port(Request *r, const RouteArgs *a);


/* api-egress.c: profiles and what a sandbox's policy says of a destination (space-egress(5)) */
void api_get_egress_profiles(Request *r, const RouteArgs *a);
void api_get_egress_profile(Request *r, const RouteArgs *a);
void api_post_egress_test(Request *r, const RouteArgs *a);
void api_get_egress_log(Request *r, const RouteArgs *a);

/* api-processes.c */
void api_post_processes(Request *r, const RouteArgs *a);
void api_stdin_begin(Request *r, const RouteArgs *a);
void api_post_stdin(Request *r, const RouteArgs *a);
void api_post_close_stdin(Request *r, const RouteArgs *a);
void api_post_signal(Request *r, const RouteArgs *a);
void api_get_processes(Request *r, const RouteArgs *a);
void api_get_process(Request *r, const RouteArgs *a);
void api_get_process_stream(Request *r, const RouteArgs *a);
void api_get_process_logs(Request *r, const RouteArgs *a);
void api_post_resize(Request *r, const RouteArgs *a);
typedef struct ExecSpec ExecSpec;
/* Parses argv, env, cwd, user, stdin, timeout, pty, rows, cols of a process body into spec (arrays owned by the
 * caller: free *ret_argv and *ret_env with strv_free). Responds 400 itself. */
int parse_exec_spec(Request *r, cJSON *o, bool stdin_default, ExecSpec *spec, char ***ret_argv, char ***ret_env);
/* Last-Event-ID (header, or ?last_event_id=): 0 when absent. Responds 400 itself. */
int parse_last_event_id(Request *r, uint64_t *ret);
/* Answers r with an SSE stream of p's events after after_id. follow: live events until the end, and the
 * client counts for flow control; release: start a held process. */
int api_process_attach(Request *r, Process *p, uint64_t after_id, bool follow, bool release);

/* api-files.c */
void api_get_file(Request *r, const RouteArgs *a);
void api_put_file(Request *r, const RouteArgs *a);
void api_put_file_begin(Request *r, const RouteArgs *a);
void api_delete_file(Request *r, const RouteArgs *a);
void api_get_file_stat(Request *r, const RouteArgs *a);
void api_get_file_list(Request *r, const RouteArgs *a);
void api_post_file_mkdir(Request *r, const RouteArgs *a);
void api_post_file_move(Request *r, const RouteArgs *a);
void api_post_file_symlink(Request *r, const RouteArgs *a);
void api_post_file_attrs(Request *r, const RouteArgs *a);

/* api-sessions.c */
void api_post_sessions(Request *r, const RouteArgs *a);
void api_get_session_stream(Request *r, const RouteArgs *a);
void api_post_session_token(Request *r, const RouteArgs *a);
