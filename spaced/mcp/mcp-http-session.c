/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "core/worker.h"
#include "http-client.h"
#include "macro.h"
#include "mcp/mcp-http.h"
#include "mcp/mcp-http-internal.h"

/* The sessions of /mcp: a table in memory, one engine each. A session ends on a worker, since freeing its
 * engine waits for its calls and removes its sandboxes through the API, which this loop serves meanwhile. */

#define MCP_IDLE_CHECK_USEC (60ULL * USEC_PER_SEC)
#define MCP_SHUTDOWN_USEC (20ULL * USEC_PER_SEC)

static McpSession *sessions;
static unsigned n_sessions, n_ending;
static bool closed;
static Manager *manager;
static sd_event_source *idle_timer, *shutdown_timer;
static void (*shutdown_done)(Manager *m);

McpSession *mcp_session_find(const char *id) {
        for (McpSession *s = sessions; s; s = s->next)
                if (streq(s->id, id))
                        return s;
        return NULL;
}

unsigned mcp_sessions_count(void) {
        return n_sessions;
}

bool mcp_sessions_closed(void) {
        return closed;
}

McpSession *mcp_session_ref(McpSession *s) {
        s->ref++;
        return s;
}

void mcp_session_unref(McpSession *s) {
        if (!s || --s->ref > 0)
                return;
        free(s);
}

/* Each call's own connection: the daemon's unix socket, whatever the environment says. */
static int session_connect(SpaceHttp **ret, void *userdata) {
        McpSession *s = userdata;

        return space_http_new_unix(s->manager->socket_path, ret);
}

int mcp_session_new(Manager *m, Request *r, McpSession **ret) {
        _cleanup_free_ McpSession *s = calloc(1, sizeof *s);
        McpServerOptions opts = { .connect = session_connect, .send = mcp_post_send, .done = mcp_post_done };
        int q;

        if (!s)
                return log_error_errno(-ENOMEM, "cannot start an MCP session");
        s->manager = m;
        s->tcp = r->tcp;
        if (r->tcp)
                memcpy(s->key_id, r->key_id, sizeof s->key_id);
        opts.userdata = s;
        q = mcp_server_new(&opts, &s->server);
        if (q < 0)
                return log_error_errno(q, "cannot start an MCP session");
        /* the engine's id, which also labels the sandboxes the session makes */
        (void) snprintf(s->id, sizeof s->id, "%s", mcp_server_session_id(s->server));
        s->ref = 1;
        s->last_active = now_usec_monotonic();
        s->next = sessions;
        sessions = s;
        n_sessions++;
        /* a quarter of the id names it in the log without giving it away */
        if (s->tcp)
                log_info("MCP session %.8s started over TCP with API key %s", s->id, s->key_id);
        else
                log_info("MCP session %.8s started over the unix socket", s->id);
        *ret = TAKE_PTR(s);
        return 0;
}

bool mcp_session_owned_by(McpSession *s, Request *r) {
        return s->tcp == r->tcp && (!s->tcp || streq(s->key_id, r->key_id));
}

typedef struct EndJob {
        Manager *manager;
        McpServer *server;
        McpSession *session;
        void (*ended)(void *userdata);
        void *userdata;
} EndJob;

static void shutdown_check(void);

/* On the loop, once the engine is freed: posts it never finished end now (their clients get an error). */
static void end_done(Manager *m, void *userdata) {
        EndJob *j = userdata;
        McpSession *s = j->session;

        s->server = NULL;
        while (s->posts)
                mcp_post_finish(s->posts);
        log_info("MCP session %.8s ended", s->id);
        if (j->ended)
                j->ended(j->userdata);
        mcp_session_unref(s);
        free(j);
        n_ending--;
        shutdown_check();
}

static void *end_worker(void *arg) {
        EndJob *j = arg;

        mcp_server_free(j->server);
        completion_post(j->manager, end_done, j);
        return NULL;
}

int mcp_session_end(McpSession *s, const char *why, void (*ended)(void *userdata), void *userdata) {
        EndJob *j = calloc(1, sizeof *j);
        int q;

        if (!j)
                return log_error_errno(-ENOMEM, "cannot end MCP session %.8s", s->id);
        *j = (EndJob) { .manager = s->manager, .server = s->server, .session = s, .ended = ended,
                        .userdata = userdata };
        q = worker_start(s->manager, end_worker, j);
        if (q < 0) {
                free(j);
                return log_error_errno(q, "cannot end MCP session %.8s: no worker thread", s->id);
        }
        /* out of the table at once: its id answers 404 from now on; the table's reference is the job's */
        for (McpSession **i = &sessions; *i; i = &(*i)->next)
                if (*i == s) {
                        *i = s->next;
                        break;
                }
        s->next = NULL;
        s->ending = true;
        n_sessions--;
        n_ending++;
        log_info("ending MCP session %.8s: %s", s->id, why);
        return 0;
}

static int on_idle_check(sd_event_source *es, uint64_t usec, void *userdata) {
        uint64_t now = now_usec_monotonic();

        for (McpSession *s = sessions, *next; s; s = next) {
                next = s->next;
                if (s->calls == 0 && mcp_server_running(s->server) == 0 &&
                    now - s->last_active >= MCP_SESSION_IDLE_USEC)
                        (void) mcp_session_end(s, "idle for an hour", NULL, NULL); /* else the next check */
        }
        (void) sd_event_source_set_time(es, usec + MCP_IDLE_CHECK_USEC);
        (void) sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
        return 0;
}

int mcp_http_setup(Manager *m) {
        int q;

        manager = m;
        mcp_post_setup();
        q = http_add_routes(mcp_routes);
        if (q < 0)
                return q;
        return sd_event_add_time_relative(m->event, &idle_timer, CLOCK_MONOTONIC, MCP_IDLE_CHECK_USEC,
                                          USEC_PER_SEC, on_idle_check, m);
}

static void shutdown_finish(void) {
        void (*done)(Manager *m) = shutdown_done;

        shutdown_done = NULL;
        shutdown_timer = sd_event_source_disable_unref(shutdown_timer);
        if (done)
                done(manager);
}

static void shutdown_check(void) {
        if (shutdown_done && n_ending == 0)
                shutdown_finish();
}

static int on_shutdown_deadline(sd_event_source *es, uint64_t usec, void *userdata) {
        log_warning("%u MCP sessions still ending after %llu s; exiting without waiting for them (their "
                    "sandboxes stay: remove them with 'spacectl rm')", n_ending,
                    (unsigned long long) (MCP_SHUTDOWN_USEC / USEC_PER_SEC));
        shutdown_finish();
        return 0;
}

bool mcp_http_shutdown(Manager *m, void (*done)(Manager *m)) {
        if (closed || !manager)
                return false;
        closed = true;
        idle_timer = sd_event_source_disable_unref(idle_timer);
        if (!sessions && n_ending == 0)
                return false;
        log_info("ending %u MCP sessions before exiting", n_sessions + n_ending);
        for (McpSession *s = sessions, *next; s; s = next) {
                next = s->next;
                (void) mcp_session_end(s, "the daemon is stopping", NULL, NULL); /* logged; not waited for */
        }
        if (n_ending == 0)
                return false;
        shutdown_done = done;
        (void) sd_event_add_time_relative(m->event, &shutdown_timer, CLOCK_MONOTONIC, MCP_SHUTDOWN_USEC,
                                          USEC_PER_SEC, on_shutdown_deadline, NULL);
        return true;
}
