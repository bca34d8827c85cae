/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "e2b/e2b-control.h"
#include "e2b/e2b-parse.h"
#include "egress/egress.h"
#include "json-util.h"
#include "macro.h"
#include "string-util.h"
#include "template/template.h"

/* E2B's control plane (space-e2b(7)): /sandboxes, /v2/sandboxes, /snapshots, on the subsystems the native API
 * uses. Here: the route table, create, connect, kill, timeouts and pause, and the parking of requests until
 * their operation ends (the SDKs expect a create or a resume to be done when it is answered). */

static void post_sandboxes(Request *r, const RouteArgs *a);
static void post_connect(Request *r, const RouteArgs *a);
static void post_resume(Request *r, const RouteArgs *a);
static void delete_sandbox(Request *r, const RouteArgs *a);
static void post_timeout(Request *r, const RouteArgs *a);
static void post_refreshes(Request *r, const RouteArgs *a);
static void post_pause(Request *r, const RouteArgs *a);

const Route e2b_sandbox_routes[] = {
        E2B_ROUTE("POST", "/sandboxes", post_sandboxes),
        E2B_ROUTE("POST", "/v2/sandboxes", post_sandboxes),
        E2B_ROUTE("GET", "/sandboxes", e2b_get_sandboxes),
        E2B_ROUTE("GET", "/v2/sandboxes", e2b_get_sandboxes_v2),
        E2B_ROUTE("GET", "/sandboxes/{sandboxID}", e2b_get_sandbox),
        E2B_ROUTE("DELETE", "/sandboxes/{sandboxID}", delete_sandbox),
        E2B_ROUTE("POST", "/sandboxes/{sandboxID}/connect", post_connect),
        E2B_ROUTE("POST", "/v2/sandboxes/{sandboxID}/connect", post_connect),
        E2B_ROUTE("POST", "/sandboxes/{sandboxID}/resume", post_resume),
        E2B_ROUTE("POST", "/sandboxes/{sandboxID}/pause", post_pause),
        E2B_ROUTE("POST", "/sandboxes/{sandboxID}/timeout", post_timeout),
        E2B_ROUTE("POST", "/sandboxes/{sandboxID}/refreshes", post_refreshes),
        E2B_ROUTE("GET", "/sandboxes/{sandboxID}/metrics", e2b_get_metrics),
        E2B_ROUTE("GET", "/sandboxes/{sandboxID}/logs", e2b_get_logs),
        E2B_ROUTE("GET", "/v2/sandboxes/{sandboxID}/logs", e2b_get_logs_v2),
        E2B_ROUTE("POST", "/sandboxes/{sandboxID}/snapshots", e2b_post_snapshots),
        E2B_ROUTE("POST", "/sandboxes/{sandboxID}/fork", e2b_post_fork),
        E2B_ROUTE("PUT", "/sandboxes/{sandboxID}/network", e2b_put_network),
        E2B_ROUTE("GET", "/snapshots", e2b_get_snapshots),
        E2B_ROUTE("POST", "/volumes", e2b_post_volumes),
        E2B_ROUTE("GET", "/volumes", e2b_get_volumes),
        E2B_ROUTE("GET", "/volumes/{volumeID}", e2b_get_volume),
        E2B_ROUTE("DELETE", "/volumes/{volumeID}", e2b_delete_volume),
        E2B_ROUTE("POST", "/secrets", e2b_post_secrets),
        E2B_ROUTE("GET", "/secrets", e2b_get_secrets),
        E2B_ROUTE("GET", "/secrets/{secretID}", e2b_get_secret),
        E2B_ROUTE("POST", "/secrets/{secretID}", e2b_post_secret),
        E2B_ROUTE("DELETE", "/secrets/{secretID}", e2b_delete_secret),
        /* E2B's snapshots are templates; here only snapshots (checkpoints) are deleted this way */
        E2B_ROUTE("DELETE", "/templates/{template}", e2b_delete_template),
        {},
};

/* ---- parking a request on an operation */

static void wait_detach(void *userdata, Request *r) {
        free(userdata);
}

E2bWait *e2b_wait_get(Request *r, bool make) {
        E2bWait *w;

        if (r->stream.detach == wait_detach)
                return r->stream.userdata;
        if (!make)
                return NULL;
        w = calloc(1, sizeof *w);
        if (!w) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return NULL;
        }
        w->deadline = now_usec_monotonic() + E2B_WAIT_SEC * 1000000ULL;
        /* what the request waits for is held like a stream it serves: freed when the request ends */
        r->stream = (HttpStream) { .detach = wait_detach, .userdata = w };
        return w;
}

E2bWait *e2b_wait_new(Request *r, const char *arg) {
        E2bWait *w = e2b_wait_get(r, true);

        if (w)
                snprintf(w->arg, sizeof w->arg, "%s", arg);
        return w;
}

static bool op_ended(const Operation *op) {
        return op->state == OPERATION_SUCCEEDED || op->state == OPERATION_FAILED;
}

int e2b_wait_op(Request *r, Operation *op, bool own, HttpContinuation k) {
        E2bWait *w = e2b_wait_get(r, true);
        int q;

        if (!w)
                return -ENOMEM;
        memcpy(w->op_id, op->id, sizeof w->op_id);
        w->own = own;
        /* a state that keeps asking for another operation is not waited out forever */
        if (++w->rounds > 8) {
                http_respond_error(r, ERROR_SANDBOX_BUSY, "sandbox %s keeps changing state; try again",
                                   op->sandbox_id);
                return -EBUSY;
        }
        if (op_ended(op)) {
                k(r, w);
                return 0;
        }
        if (now_usec_monotonic() >= w->deadline) {
                http_respond_error(r, ERROR_DEADLINE_EXCEEDED,
                                   "sandbox %s: the %s operation (%s) is still running after %d s; try again later",
                                   op->sandbox_id, op->kind, op->id, E2B_WAIT_SEC);
                return -ETIME;
        }
        q = http_wait_on(r, &op->waiters, w->deadline, k, w);
        if (q < 0)
                http_respond_error(r, ERROR_INTERNAL, "cannot wait for operation %s: %s", op->id, strerror(-q));
        return q;
}

int e2b_wait_resume(Request *r, E2bWait *w, HttpContinuation k) {
        Operation *op;

        if (!w->op_id[0])
                return 1;
        op = operation_find(http_manager(r->http), w->op_id);
        if (op && !op_ended(op)) {
                if (now_usec_monotonic() >= w->deadline) {
                        http_respond_error(r, ERROR_DEADLINE_EXCEEDED,
                                           "sandbox %s: the %s operation (%s) is still running after %d s; try "
                                           "again later", op->sandbox_id, op->kind, op->id, E2B_WAIT_SEC);
                        return -ETIME;
                }
                w->rounds--; /* the same wait, not another round */
                return e2b_wait_op(r, op, w->own, k);
        }
        if (w->own) {
                if (!op) {
                        http_respond_error(r, ERROR_INTERNAL, "operation %s is gone", w->op_id);
                        return -ENOENT;
                }
                if (op->state == OPERATION_FAILED) {
                        respond_operation_error(r, &op->error, -EIO);
                        return -EIO;
                }
                w->own_done = true;
        }
        w->op_id[0] = 0;
        return 1;
}

int e2b_wait_busy(Request *r, Sandbox *s, HttpContinuation k) {
        for (Operation *op = http_manager(r->http)->operations; op; op = op->next)
                if (streq(op->sandbox_id, s->id) && !op_ended(op))
                        return e2b_wait_op(r, op, false, k);
        http_respond_error(r, ERROR_SANDBOX_BUSY, "sandbox %s is %s; try again when that is done", s->id,
                           sandbox_state_to_string(s->state));
        return -EBUSY;
}

/* ---- request bodies */

cJSON *e2b_body_object(Request *r, const char *const *allowed) {
        return parse_body_object(r, allowed);
}

int e2b_seconds_field(Request *r, cJSON *o, const char *key, int64_t max, int64_t *ret) {
        uint64_t v;
        int q = get_uint_field(r, o, key, 0, (uint64_t) max, &v);

        if (q > 0)
                *ret = (int64_t) v;
        return q;
}

/* envVars: the sandbox-wide environment of every process, as NAME=VALUE. */
static int env_vars_field(Request *r, cJSON *o, char ***ret) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "envVars"), *i;
        _cleanup_strv_free_ char **env = NULL;

        *ret = NULL;
        if (!v || cJSON_IsNull(v))
                return 0;
        if (!cJSON_IsObject(v) || cJSON_GetArraySize(v) > SANDBOX_ENV_MAX) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "envVars must be an object of strings (at most %d)",
                                   SANDBOX_ENV_MAX);
                return -EINVAL;
        }
        env = calloc(1, sizeof(char *));
        if (!env)
                return -ENOMEM;
        cJSON_ArrayForEach(i, v) {
                _cleanup_free_ char *e = NULL;

                if (!cJSON_IsString(i) || !i->string[0] || strchr(i->string, '=')) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "envVars: '%.64s' must be a name without '=' with a string value",
                                           i->string ?: "");
                        return -EINVAL;
                }
                if (asprintf(&e, "%s=%s", i->string, i->valuestring) < 0 || strv_extend(&env, e) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(env);
        return 1;
}

static bool json_empty(const cJSON *v) {
        return !v || cJSON_IsNull(v) || (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0) ||
               (cJSON_IsString(v) && !v->valuestring[0]);
}

/* json_empty(), or an object without members (what the SDKs send for options given as {}). */
static bool json_none(const cJSON *v) {
        return json_empty(v) || (cJSON_IsObject(v) && cJSON_GetArraySize(v) == 0);
}

/* The newer network options of a create: dnsServers is taken as the network update takes it (the gateway
 * resolves what the lists allow itself); a proxy or TLS ports are refused (network.rules are secret bindings:
 * network_lists()). */
static int check_network_extras(Request *r, cJSON *net) {
        if (!json_empty(cJSON_GetObjectItemCaseSensitive(net, "egressProxy")))
                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                          "network.egressProxy is not supported by space: egress goes through its "
                                          "own gateway (space-egress(5)); leave it out") ?: -EOPNOTSUPP;
        if (!json_empty(cJSON_GetObjectItemCaseSensitive(net, "httpsPorts")))
                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                          "network.httpsPorts is not supported by space: its gateway does not "
                                          "terminate TLS; leave it out") ?: -EOPNOTSUPP;
        return 0;
}

/* What of E2B's create space cannot do yet is refused, so that nobody believes a sandbox is confined or
 * connected when it is not. (network.allowOut and denyOut are egress lists: network_lists().) */
static int check_unsupported(Request *r, cJSON *o) {
        static const char *const network_fields[] = { "allowOut", "denyOut", "allowPublicTraffic",
                                                      "maskRequestHost", "dnsServers", "egressProxy",
                                                      "httpsPorts", "rules", NULL };
        cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "network"), *i;

        if (v && !cJSON_IsNull(v)) {
                if (!cJSON_IsObject(v)) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT, "network must be an object");
                        return -EINVAL;
                }
                cJSON_ArrayForEach(i, v) {
                        bool known = false;
                        for (const char *const *f = network_fields; *f; f++)
                                known = known || streq(i->string, *f);
                        if (!known) {
                                http_respond_error(r, ERROR_INVALID_ARGUMENT, "network: unknown field '%.64s'",
                                                   i->string);
                                return -EINVAL;
                        }
                }
                if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(v, "allowPublicTraffic")) ||
                    !json_empty(cJSON_GetObjectItemCaseSensitive(v, "maskRequestHost"))) {
                        http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                           "network.allowPublicTraffic=false and network.maskRequestHost are not "
                                           "supported by space: it has no public sandbox URLs to protect or mask; "
                                           "leave them out");
                        return -EOPNOTSUPP;
                }
                if (check_network_extras(r, v) < 0)
                        return -EOPNOTSUPP;
        }
        if (!json_empty(cJSON_GetObjectItemCaseSensitive(o, "mcp"))) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                   "mcp is not supported by space yet: its templates have no mcp-gateway; leave it "
                                   "out and start MCP servers with commands.run");
                return -EOPNOTSUPP;
        }
        if (!json_none(cJSON_GetObjectItemCaseSensitive(o, "iam"))) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                   "iam is not supported by space: it mints no workload identity tokens for a "
                                   "sandbox; leave it out and pass credentials with envVars");
                return -EOPNOTSUPP;
        }
        return 0;
}

/* The snapshot templateID names, when it names one: a checkpoint's exact id, or its name when no template
 * has that name. */
static Checkpoint *snapshot_of(Manager *m, const char *ref) {
        Checkpoint *c = checkpoint_find(m, ref);

        if (!c)
                return NULL;
        if (streq(c->id, ref))
                return c;
        if (streq_ptr(c->name, ref) && !template_find(m, ref))
                return c;
        return NULL;
}

/* ---- answers */

static void respond_sandbox(Request *r, unsigned status, Sandbox *s) {
        cJSON *o = e2b_sandbox_json(http_manager(r->http), s);

        if (!o) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return;
        }
        http_respond_json(r, status, o);
}

/* ---- POST /sandboxes: NewSandbox -> 201 Sandbox, once it runs */

static void created(Request *r, E2bWait *w) {
        Sandbox *s = sandbox_find_by_id(http_manager(r->http), w->sandbox_id);

        if (!s || s->state != SANDBOX_RUNNING) {
                http_respond_error(r, ERROR_CREATE_FAILED, "sandbox %s was made but is %s now", w->sandbox_id,
                                   s ? sandbox_state_to_string(s->state) : "gone");
                return;
        }
        /* the time to live counts from when it runs, as E2B's does */
        sandbox_set_timeout(s, w->timeout);
        respond_sandbox(r, 201, s);
}

/* allow_internet_access, network.allowOut and network.denyOut as the sandbox's own egress lists
 * (space-egress(5), egress_lists_from_e2b()). */
static int network_lists(Request *r, cJSON *body, bool internet, E2bNewSandbox *n) {
        _cleanup_strv_free_ char **allow_out = NULL, **deny_out = NULL;
        _cleanup_(error_done) Error e = {};
        cJSON *net = cJSON_GetObjectItemCaseSensitive(body, "network");
        int q;

        if (net && cJSON_IsObject(net) &&
            ((q = get_strv_field(r, net, "allowOut", EGRESS_RULES_MAX, &allow_out)) < 0 ||
             (q = get_strv_field(r, net, "denyOut", EGRESS_RULES_MAX, &deny_out)) < 0))
                return q;
        q = egress_lists_from_e2b(allow_out, deny_out, internet, &n->egress_allow, &n->egress_deny, &e);
        /* network.rules: the sandbox's own secret bindings; whether their secrets exist is the create's to say */
        if (q >= 0 && net && cJSON_IsObject(net))
                q = e2b_rules_to_bindings(cJSON_GetObjectItemCaseSensitive(net, "rules"), &n->egress_bindings, &e);
        if (q == -ENOMEM && !e.message)
                return http_respond_error(r, ERROR_INTERNAL, "out of memory") ?: q;
        if (q < 0)
                return http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s", e.message ?: "bad network options") ?: q;
        return 0;
}

/* autoPauseMemory (the SDKs' lifecycle onTimeout {action: "pause", mode}): a pause at the timeout that keeps
 * memory is what autoPause does already; false (mode 'filesystem') stops the sandbox there instead, which
 * auto-resume cannot wake (the SDKs refuse the two together too). */
static int auto_pause_memory(Request *r, cJSON *body, bool *ret_memory) {
        cJSON *ar = cJSON_GetObjectItemCaseSensitive(body, "autoResume");
        cJSON *en = cJSON_IsObject(ar) ? cJSON_GetObjectItemCaseSensitive(ar, "enabled") : NULL;
        int q;

        *ret_memory = true;
        q = get_bool_field(r, body, "autoPauseMemory", ret_memory);
        if (q < 0)
                return q;
        if (!*ret_memory && cJSON_IsTrue(en))
                return http_respond_error(r, ERROR_INVALID_ARGUMENT, "autoPauseMemory=false (lifecycle onTimeout "
                                          "mode 'filesystem') cannot be combined with autoResume: a sandbox paused "
                                          "without memory is booted again by a connect, not by its use")
                               ?: -EINVAL;
        return 0;
}

void e2b_new_sandbox_done(E2bNewSandbox *n) {
        cJSON_Delete(n->body);
        free(n->metadata);
        strv_free(n->env);
        strv_free(n->egress_allow);
        strv_free(n->egress_deny);
        strv_free(n->egress_bindings);
        *n = (E2bNewSandbox) {};
}

int e2b_new_sandbox_parse(Request *r, E2bNewSandbox *ret) {
        static const char *const fields[] = { "templateID", "timeout", "metadata", "envVars", "secure",
                                              "allow_internet_access", "autoPause", "autoPauseMemory",
                                              "autoResume", "network", "mcp", "iam", "volumeMounts", NULL };
        static const char *const auto_resume_fields[] = { "enabled", NULL };
        _cleanup_(e2b_new_sandbox_done) E2bNewSandbox n = { .timeout = E2B_TIMEOUT_DEFAULT };
        bool flag;
        cJSON *v;
        int q;

        n.body = e2b_body_object(r, fields);
        if (!n.body)
                return -EINVAL;
        v = cJSON_GetObjectItemCaseSensitive(n.body, "templateID");
        if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) > 255)
                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                          "templateID is required: a template (NAME[:TAG] or digest), 'base' for "
                                          "the configured default, or a snapshot id") ?: -EINVAL;
        n.template_ref = v->valuestring;
        if ((q = e2b_seconds_field(r, n.body, "timeout", E2B_TIMEOUT_MAX, &n.timeout)) < 0 ||
            (q = get_metadata_field(r, n.body, "metadata", &n.metadata)) < 0 ||
            (q = env_vars_field(r, n.body, &n.env)) < 0 ||
            (q = get_bool_field(r, n.body, "autoPause", &n.auto_pause)) < 0 ||
            (q = get_bool_field(r, n.body, "secure", &flag)) < 0 || (q = check_unsupported(r, n.body)) < 0 ||
            (q = auto_pause_memory(r, n.body, &n.auto_pause_memory)) < 0)
                return q;
        /* true is the SDKs' default (the sandbox's profiles decide); false denies everything the allowOut list
         * does not name */
        flag = true;
        if ((q = get_bool_field(r, n.body, "allow_internet_access", &flag)) < 0 || (q = network_lists(r, n.body, flag, &n)) < 0)
                return q;
        v = cJSON_GetObjectItemCaseSensitive(n.body, "autoResume");
        if (v && !cJSON_IsNull(v)) {
                cJSON *i;

                if (!cJSON_IsObject(v))
                        return http_respond_error(r, ERROR_INVALID_ARGUMENT, "autoResume must be {\"enabled\": BOOL}")
                                       ?: -EINVAL;
                cJSON_ArrayForEach(i, v)
                        if (!streq(i->string, auto_resume_fields[0]))
                                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                                          "autoResume: unknown field '%.64s'", i->string) ?: -EINVAL;
                if ((q = get_bool_field(r, v, "enabled", &n.auto_resume)) < 0)
                        return q;
        }
        if (n.auto_resume && !n.auto_pause)
                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                          "autoResume needs autoPause (lifecycle onTimeout 'pause'): a sandbox that "
                                          "is killed at its timeout cannot be resumed") ?: -EINVAL;
        *ret = n;
        n = (E2bNewSandbox) {};
        return 0;
}

/* The create's own operation ended. */
static void create_continue(Request *r, void *userdata) {
        E2bWait *w = userdata;

        if (e2b_wait_resume(r, w, create_continue) > 0)
                created(r, w);
}

static void post_sandboxes(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        _cleanup_(e2b_new_sandbox_done) E2bNewSandbox n = {};
        _cleanup_strv_free_ char **merged = NULL, **egress = NULL, **mounts = NULL;
        _cleanup_(error_done) Error e = {};
        const char *tmpl;
        Checkpoint *source;
        Operation *op;
        E2bWait *w;
        Sandbox *s;
        int q;

        if (e2b_new_sandbox_parse(r, &n) < 0)
                return;
        /* after the parse, which reads the body alone: this one looks the volumes up */
        if (api_volume_mounts_parse(r, cJSON_GetObjectItemCaseSensitive(n.body, "volumeMounts"), &mounts) < 0)
                return;
        tmpl = n.template_ref;
        if (streq(tmpl, "base"))
                tmpl = m->config.e2b_template ?: E2B_TEMPLATE_DEFAULT;
        /* the code interpreter SDKs' default: space's template of that protocol, unless a template has the name */
        else if (streq(tmpl, E2B_CODE_INTERPRETER_NAME) && !template_find(m, tmpl))
                tmpl = E2B_CODE_INTERPRETER_TEMPLATE;
        source = snapshot_of(m, tmpl);
        if (source) {
                /* a snapshot's sandbox keeps its environment; envVars add to it */
                merged = calloc(1, sizeof(char *));
                if (!merged)
                        goto oom;
                for (char **i = source->env; i && *i; i++)
                        if (strv_extend(&merged, *i) < 0)
                                goto oom;
                for (char **i = n.env; i && *i; i++)
                        if (strv_extend(&merged, *i) < 0)
                                goto oom;
        }
        /* a snapshot's sandbox keeps its egress, as forks do; a template's takes the header's profiles */
        if (api_egress_header(r, &egress) < 0)
                return;
        SandboxSpec spec = {
                .egress_profiles = egress,
                .egress_allow = n.egress_allow,
                .egress_deny = n.egress_deny,
                .egress_bindings = n.egress_bindings,
                .template_ref = source ? source->template_name : tmpl,
                .env = source ? merged : n.env,
                .metadata = n.metadata,
                .source = source,
                .volume_mounts = mounts,
                /* until it runs, a create nobody waits for any more is bounded by the same time to live */
                .ttl = n.timeout,
                .ttl_grace = E2B_WAIT_SEC,
                .on_expiry = !n.auto_pause ? EXPIRY_REMOVE : n.auto_pause_memory ? EXPIRY_SUSPEND : EXPIRY_STOP,
                .auto_resume = n.auto_resume,
                /* E2B's timeout is a sandbox's whole lifetime policy: one killed at its timeout is bounded by it
                 * and must not be suspended before while idle (E2B would call it running, envd would answer
                 * 502). One that pauses at its timeout keeps the idle suspend, which bounds it once it was
                 * resumed without a new timeout. */
                .idle_timeout_set = !n.auto_pause,
                .idle_timeout = 0,
        };
        if (source) {
                spec.vcpu = source->vcpu;
                spec.memory_mib = source->memory_mib;
                spec.disk_mib = source->disk_mib;
        }
        q = sandbox_create(m, &spec, &op, &s, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                return;
        }
        log_info("sandbox %s: created for E2B from %s%s, timeout %lld s%s", s->id, source ? "snapshot " : "",
                 source ? source->id : tmpl, (long long) n.timeout, n.auto_pause ? ", pauses at its timeout" : "");

        w = e2b_wait_get(r, true);
        if (!w)
                return;
        memcpy(w->sandbox_id, s->id, sizeof w->sandbox_id);
        w->timeout = n.timeout;
        (void) e2b_wait_op(r, op, true, create_continue);
        return;
oom:
        http_respond_error(r, ERROR_INTERNAL, "out of memory");
}

/* ---- connect: running -> 200, resumed or woken -> 201 */

/* A body of {key: seconds}. */
static int parse_timeout_body(Request *r, const char *key, bool required, int64_t max, int64_t *ret) {
        const char *const fields[] = { key, NULL };
        cJSON *o = e2b_body_object(r, fields);
        int q;

        if (!o)
                return -EINVAL;
        q = e2b_seconds_field(r, o, key, max, ret);
        cJSON_Delete(o);
        if (q == 0 && required) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s (seconds) is required", key);
                return -EINVAL;
        }
        return q;
}

static void connect_continue(Request *r, void *userdata);

/* Brings s back to running: 1 when it runs, 0 parked (connect_continue() carries on), < 0 answered. */
static int ensure_running(Request *r, Sandbox *s, E2bWait *w) {
        _cleanup_(error_done) Error e = {};
        LifecycleKind kind;
        Operation *op;
        int q;

        if (s->busy || s->state == SANDBOX_CREATING)
                return e2b_wait_busy(r, s, connect_continue);
        if (s->state == SANDBOX_RUNNING)
                return 1;
        /* memory=false: a cold boot from the disk, whatever memory was kept (a suspend's is dropped: once the
         * disk boots, the two no longer match); a sandbox paused with memory=false is booted either way */
        if (s->state == SANDBOX_PAUSED && !w->no_memory)
                kind = LIFECYCLE_RESUME;
        else if (s->state == SANDBOX_SUSPENDED && !w->no_memory)
                kind = LIFECYCLE_WAKE;
        else if (s->state == SANDBOX_SUSPENDED || (s->state == SANDBOX_STOPPED && !s->error))
                kind = LIFECYCLE_START;
        else if (s->state == SANDBOX_PAUSED) {
                http_respond_error(r, ERROR_INVALID_STATE, "sandbox %s is paused in place (spacectl pause): connect "
                                   "without memory=false resumes it", s->id);
                return -EINVAL;
        } else {
                http_respond_error(r, ERROR_SANDBOX_NOT_RUNNING, "sandbox %s is %s%s%s; kill it", s->id,
                                   sandbox_state_to_string(s->state), s->error ? ": " : "", s->error ?: "");
                return -EINVAL;
        }
        q = sandbox_lifecycle_start(http_manager(r->http), s, kind, &op, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                return q;
        }
        log_info("sandbox %s: %s for an E2B connect", s->id,
                 kind == LIFECYCLE_WAKE ? "waking" : kind == LIFECYCLE_START ? "starting (a cold boot)" : "resuming");
        w->resumed = true;
        return e2b_wait_op(r, op, true, connect_continue);
}

/* connect from the lookup on, which is where it carries on after each wait. */
static void connect_step(Request *r, E2bWait *w) {
        int64_t timeout = w->timeout;
        Sandbox *s;
        int q;

        if (e2b_find_sandbox(r, w->arg, &s) < 0)
                return;
        if (w->deprecated_resume && !w->resumed && s->state == SANDBOX_RUNNING && !s->busy) {
                http_respond_error(r, ERROR_INVALID_STATE, "sandbox %s is already running", s->id);
                return;
        }
        q = ensure_running(r, s, w);
        if (q <= 0)
                return;
        /* E2B: a running sandbox's timeout only grows; a resumed one's counts from now */
        if (w->resumed || (s->expires_at > 0 && now_unix() + timeout > s->expires_at))
                sandbox_set_timeout(s, timeout);
        respond_sandbox(r, w->resumed ? 201 : 200, s);
}

static void connect_continue(Request *r, void *userdata) {
        E2bWait *w = userdata;

        if (e2b_wait_resume(r, w, connect_continue) > 0)
                connect_step(r, w);
}

/* A connect's {timeout, memory}: memory=false, the newer SDKs' on_resume "reboot", boots a paused sandbox from
 * its disk (a start) instead of waking its memory; a no-op for one that runs or was paused without memory. The
 * older resume takes {timeout, autoPause} (autoPause ignored, fixed at create). */
static int parse_connect_body(Request *r, bool deprecated_resume, int64_t *timeout, bool *ret_no_memory) {
        const char *const fields[] = { "timeout", deprecated_resume ? "autoPause" : "memory", NULL };
        _cleanup_(cjson_freep) cJSON *o = e2b_body_object(r, fields);
        bool memory = true;
        int q;

        if (!o)
                return -EINVAL;
        if ((q = e2b_seconds_field(r, o, "timeout", E2B_TIMEOUT_MAX, timeout)) < 0 ||
            (!deprecated_resume && (q = get_bool_field(r, o, "memory", &memory)) < 0))
                return q;
        *ret_no_memory = !memory;
        return 0;
}

static void connect_sandbox(Request *r, const RouteArgs *a, bool deprecated_resume) {
        int64_t timeout = 300;
        bool no_memory = false;
        E2bWait *w;

        /* newer SDKs leave the timeout out when the caller gave none: E2B's default then */
        if (parse_connect_body(r, deprecated_resume, &timeout, &no_memory) < 0)
                return;
        w = e2b_wait_new(r, a->arg[0]);
        if (!w)
                return;
        w->timeout = timeout;
        w->no_memory = no_memory;
        w->deprecated_resume = deprecated_resume;
        connect_step(r, w);
}

static void post_connect(Request *r, const RouteArgs *a) {
        connect_sandbox(r, a, false);
}

/* The older form of connect: 201 once resumed, 409 for one that runs. */
static void post_resume(Request *r, const RouteArgs *a) {
        connect_sandbox(r, a, true);
}

/* ---- kill, timeouts, pause */

static void delete_continue(Request *r, void *userdata);

/* kill from the lookup on; after a wait for another request's operation it starts here again. */
static void delete_step(Request *r, E2bWait *w) {
        _cleanup_(error_done) Error e = {};
        Operation *op;
        Sandbox *s;
        int q;

        if (e2b_find_sandbox(r, w->arg, &s) < 0)
                return;
        /* E2B's kill ends the processes: the VM is killed, not shut down */
        q = sandbox_delete_start(http_manager(r->http), s, true, &op, &e);
        if (q == -EBUSY) {
                (void) e2b_wait_busy(r, s, delete_continue);
                return;
        }
        if (q < 0) {
                respond_operation_error(r, &e, q);
                return;
        }
        (void) e2b_wait_op(r, op, true, delete_continue);
}

static void delete_continue(Request *r, void *userdata) {
        E2bWait *w = userdata;

        if (e2b_wait_resume(r, w, delete_continue) <= 0)
                return;
        if (w->own_done) {
                http_respond_empty(r, 204);
                return;
        }
        delete_step(r, w);
}

static void delete_sandbox(Request *r, const RouteArgs *a) {
        E2bWait *w = e2b_wait_new(r, a->arg[0]);

        if (w)
                delete_step(r, w);
}

static void post_timeout(Request *r, const RouteArgs *a) {
        int64_t timeout = 0;
        Sandbox *s;

        if (parse_timeout_body(r, "timeout", true, E2B_TIMEOUT_MAX, &timeout) < 0 ||
            e2b_find_sandbox(r, a->arg[0], &s) < 0)
                return;
        /* a paused sandbox keeps no clock (E2B's do not time out while paused): connect sets one */
        if (s->state == SANDBOX_SUSPENDED || s->state == SANDBOX_SUSPENDING || s->state == SANDBOX_STOPPED ||
            s->state == SANDBOX_STOPPING) {
                http_respond_error(r, ERROR_SANDBOX_NOT_RUNNING,
                                   "sandbox %s is paused: connect to it (which resumes it) with the new timeout",
                                   s->id);
                return;
        }
        sandbox_set_timeout(s, timeout);
        http_respond_empty(r, 204);
}

/* The older keep-alive: the timeout grows to at least now + duration (at most an hour, as E2B's). */
static void post_refreshes(Request *r, const RouteArgs *a) {
        int64_t duration = 0;
        Sandbox *s;

        if (parse_timeout_body(r, "duration", false, 3600, &duration) < 0 || e2b_find_sandbox(r, a->arg[0], &s) < 0)
                return;
        if (s->expires_at > 0 && now_unix() + duration > s->expires_at)
                sandbox_set_timeout(s, duration);
        http_respond_empty(r, 204);
}

static void pause_continue(Request *r, void *userdata);

/* pause from the lookup on; after a wait for another request's operation it starts here again. */
static void pause_step(Request *r, E2bWait *w) {
        _cleanup_(error_done) Error e = {};
        Operation *op;
        Sandbox *s;
        int q;

        if (e2b_find_sandbox(r, w->arg, &s) < 0)
                return;
        if (s->busy) {
                (void) e2b_wait_busy(r, s, pause_continue);
                return;
        }
        if (s->state == SANDBOX_SUSPENDED || (s->state == SANDBOX_STOPPED && !s->error)) {
                http_respond_error(r, ERROR_INVALID_STATE, "sandbox %s is already paused", s->id);
                return;
        }
        /* strict: a guest whose agent is not attached is not paused (E2B's requireHealthyGuest); a pause without
         * memory always wants it, to sync the guest's filesystems */
        if ((w->require_healthy || w->no_memory) && s->state == SANDBOX_RUNNING && !s->channel.agent) {
                http_respond_error(r, ERROR_CHANNEL_LOST, "sandbox %s: its guest agent does not answer; the sandbox "
                                   "keeps running", s->id);
                return;
        }
        /* memory=false (mode 'filesystem'): a stop, which drops the processes and keeps the disk */
        q = sandbox_lifecycle_start(http_manager(r->http), s, w->no_memory ? LIFECYCLE_STOP : LIFECYCLE_SUSPEND,
                                    &op, &e);
        if (q < 0) {
                respond_operation_error(r, &e, q);
                return;
        }
        /* paused, it does not time out (E2B's are kept until resumed or killed) */
        sandbox_stop_timeout(s);
        (void) e2b_wait_op(r, op, true, pause_continue);
}

static void pause_continue(Request *r, void *userdata) {
        E2bWait *w = userdata;

        if (e2b_wait_resume(r, w, pause_continue) <= 0)
                return;
        if (w->own_done) {
                http_respond_empty(r, 204);
                return;
        }
        pause_step(r, w);
}

/* The pause's {memory, requireHealthyGuest}: memory=false, a filesystem-only pause, is a stop; true (the
 * default) is a suspend. */
static int parse_pause_body(Request *r, bool *ret_require_healthy, bool *ret_no_memory) {
        static const char *const fields[] = { "memory", "requireHealthyGuest", NULL };
        _cleanup_(cjson_freep) cJSON *o = e2b_body_object(r, fields);
        bool memory = true;
        int q;

        if (!o)
                return -EINVAL;
        *ret_require_healthy = false;
        if ((q = get_bool_field(r, o, "memory", &memory)) < 0 ||
            (q = get_bool_field(r, o, "requireHealthyGuest", ret_require_healthy)) < 0)
                return q;
        *ret_no_memory = !memory;
        return 0;
}

/* E2B's pause keeps the sandbox's memory and frees its machine: space's suspend; without memory, its stop. 409
 * when it is paused. */
static void post_pause(Request *r, const RouteArgs *a) {
        bool require_healthy, no_memory;
        E2bWait *w;

        if (parse_pause_body(r, &require_healthy, &no_memory) < 0)
                return;
        w = e2b_wait_new(r, a->arg[0]);
        if (!w)
                return;
        w->require_healthy = require_healthy;
        w->no_memory = no_memory;
        pause_step(r, w);
}
