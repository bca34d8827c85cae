/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What envd's filesystem service (envd-filesystem.c), its /files route (envd-files.c) and its watchers
 * (envd-watch.c) share: one guest file operation per step, run as the request's user (the agent's user=),
 * and envd's EntryInfo. */

#include "channel/files.h"
#include "e2b/e2b-internal.h"

/* A JSON list bigger than this is refused (resource_exhausted): it is parsed whole. */
#define ENVD_LIST_JSON_MAX (16U * 1024U * 1024U)

/* The sandbox and the user of an envd request, the user's path made absolute (a relative one counts from the
 * user's home) and checked: 1 to go on, 0 when the request is parked or answered. */
int envd_fs_target(Request *r, Sandbox **ret_s, char *user, const char *path, char **ret_path);
/* The same once the sandbox is known: the user, and path made absolute against its home and checked. */
int envd_user_path(Request *r, Sandbox *s, char *user, const char *path, char **ret_path);
/* The absolute path that path (relative to user's home, or absolute) names, checked: 1, or 0 when answered. */
int envd_resolve_path(Request *r, const char *user, const char *path, char **ret_path);
/* Path checks of envd_fs_target for a path that is absolute already: 0, or < 0 when answered (400). */
int envd_check_path(Request *r, const char *what, const char *path);

/* The per-request state of a file operation, kept in r->stream (its detach frees it). */
typedef struct EnvdCall {
        FileXfer *x;
        SpaceBuf json;       /* a list's JSON, as it comes */
        char *path;
} EnvdCall;

EnvdCall *envd_call_of(Request *r);
/* Sends FILE op on path as user (names=1 added; kv holds the op's own records), and parks the request until
 * the guest answers, then k(r, call) answers: the call, or NULL when it answered instead. */
EnvdCall *envd_call_start(Request *r, Sandbox *s, const char *user, const char *op, const char *path, SpaceBuf *kv,
                          HttpContinuation k);
/* A continuation's first step: true when the guest answered, false while it still waits (parked again on k). */
bool envd_call_answered(Request *r, EnvdCall *call, HttpContinuation k);
/* A list's JSON, read as far as the guest sent it: 1 when complete (in call->json), 0 when parked for more
 * (on k), < 0 when answered (it failed, or it is too big). */
int envd_call_collect(Request *r, EnvdCall *call, HttpContinuation k);
/* Answers with why the operation failed, in the route's dialect ("unknown user" is 401, as envd). */
void envd_respond_failed(Request *r, FileXfer *x);

/* envd's EntryInfo for an entry at path; owner and group are names when the guest has them, else numbers. */
cJSON *envd_entry_info(const char *path, const FileEntry *e, const char *owner, const char *group);
/* The entry of a finished stat, mkdir, move or write, with the names the guest added (owner=, group=). */
cJSON *envd_reply_entry_info(FileXfer *x, const char *path);
/* EntryInfos of a list's JSON (channel/files.c's {"entries": [...]}), named from its OK (uname=, gname=). */
int envd_list_entry_infos(FileXfer *x, const SpaceBuf *json, cJSON **ret_array);

/* envd-files.c: GET and POST /files (envd_filesystem_routes has them) */
void envd_get_files(Request *r, const RouteArgs *a);
void envd_post_files(Request *r, const RouteArgs *a);
void envd_post_files_begin(Request *r, const RouteArgs *a);

/* envd-watch.c: WatchDir (a stream) and the polled watchers */
void envd_watch_dir(Request *r, const RouteArgs *a);
void envd_create_watcher(Request *r, const RouteArgs *a);
void envd_get_watcher_events(Request *r, const RouteArgs *a);
void envd_remove_watcher(Request *r, const RouteArgs *a);
