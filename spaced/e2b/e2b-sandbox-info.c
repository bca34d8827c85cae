/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "channel/files.h"
#include "core/store.h"
#include "core/util.h"
#include "json-util.h"
#include "e2b/e2b-control.h"
#include "e2b/e2b-parse.h"
#include "macro.h"
#include "string-util.h"

/* E2B's views of sandboxes: info, lists with their filters and pages, metrics and logs. */

/* E2B's endAt of a sandbox that does not time out (one made natively, or paused): the far future. */
#define END_AT_NEVER 253402300799LL /* 9999-12-31T23:59:59Z */

int e2b_find_sandbox(Request *r, const char *id, Sandbox **ret) {
        Sandbox *s = sandbox_find_by_id(http_manager(r->http), id);

        if (!s || s->pooled || s->state == SANDBOX_DELETING)
                return http_respond_error(r, ERROR_SANDBOX_NOT_FOUND, "sandbox %s not found", id) ?: -ENOENT;
        *ret = s;
        return 0;
}

const char *e2b_state(const Sandbox *s) {
        switch (s->state) {
        case SANDBOX_RUNNING:
                return "running";
        case SANDBOX_PAUSED:
        case SANDBOX_SUSPENDING:
        case SANDBOX_SUSPENDED:
        case SANDBOX_WAKING:
        case SANDBOX_STOPPING:
        case SANDBOX_STARTING:
                return "paused";
        case SANDBOX_STOPPED:
                /* paused with memory=false, or at its timeout in mode 'filesystem' (E2B's paused); one whose
                 * QEMU died is not */
                return s->error ? NULL : "paused";
        default:
                return NULL;
        }
}

/* The e2b_domain in force (with TLS on and none configured, the TLS listener's), on every listener: the SDKs'
 * getHost() then names the TLS listener, never E2B's own domain. */
static void add_domain(Manager *m, cJSON *o) {
        const char *domain = m->http ? http_e2b_domain(m->http) : m->config.e2b_domain;

        if (domain)
                cJSON_AddStringToObject(o, "domain", domain);
        else
                cJSON_AddNullToObject(o, "domain");
}

cJSON *e2b_sandbox_json(Manager *m, Sandbox *s) {
        const char *token = e2b_sandbox_token(s), *traffic = e2b_sandbox_traffic_token(s);
        cJSON *o;

        if (!token || !traffic)
                return NULL;
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "sandboxID", s->id);
        cJSON_AddStringToObject(o, "templateID", s->template_name);
        cJSON_AddStringToObject(o, "alias", s->template_name);
        cJSON_AddStringToObject(o, "clientID", E2B_CLIENT_ID);
        cJSON_AddStringToObject(o, "envdVersion", E2B_ENVD_VERSION);
        cJSON_AddStringToObject(o, "envdAccessToken", token);
        cJSON_AddStringToObject(o, "trafficAccessToken", traffic);
        add_domain(m, o);
        return o;
}

cJSON *e2b_listed_json(Manager *m, Sandbox *s, bool detail) {
        cJSON *o = cJSON_CreateObject(), *l;

        cJSON_AddStringToObject(o, "sandboxID", s->id);
        cJSON_AddStringToObject(o, "templateID", s->template_name);
        cJSON_AddStringToObject(o, "alias", s->template_name);
        cJSON_AddStringToObject(o, "clientID", E2B_CLIENT_ID);
        api_add_time(o, "startedAt", s->created_at);
        api_add_time(o, "endAt", s->expires_at > 0 ? s->expires_at : END_AT_NEVER);
        cJSON_AddNumberToObject(o, "cpuCount", s->vcpu);
        cJSON_AddNumberToObject(o, "memoryMB", (double) s->memory_mib);
        cJSON_AddNumberToObject(o, "diskSizeMB", (double) s->disk_mib);
        cJSON_AddStringToObject(o, "state", e2b_state(s) ?: "paused");
        cJSON_AddStringToObject(o, "envdVersion", E2B_ENVD_VERSION);
        cJSON_AddItemToObject(o, "metadata", sandbox_metadata_to_json(s));
        cJSON_AddItemToObject(o, "volumeMounts", sandbox_mounts_to_json(m, s->mounts, false));
        if (detail) {
                const char *token = e2b_sandbox_token(s);

                if (token)
                        cJSON_AddStringToObject(o, "envdAccessToken", token);
                add_domain(m, o);
                /* the egress lists in force (the create's network, or the last PUT .../network), as E2B's
                 * SandboxNetworkConfig: what get_info's network shows */
                l = cJSON_AddObjectToObject(o, "network");
                cJSON_AddItemToObject(l, "allowOut", json_array_from_strv(s->egress_allow));
                cJSON_AddItemToObject(l, "denyOut", json_array_from_strv(s->egress_deny));
                /* its request transforms, as given: they hold secrets' references, never their values */
                if (s->egress_bindings && s->egress_bindings[0])
                        cJSON_AddItemToObject(l, "rules", e2b_rules_from_bindings(s->egress_bindings));
                /* never null: the Python SDK would parse it */
                l = cJSON_AddObjectToObject(o, "lifecycle");
                cJSON_AddStringToObject(l, "onTimeout", s->on_expiry == EXPIRY_REMOVE ? "kill" : "pause");
                cJSON_AddBoolToObject(l, "autoResume", s->auto_resume);
        }
        return o;
}

int e2b_respond_json_headers(Request *r, unsigned status, cJSON *body, const char *const *headers) {
        char *text = cJSON_PrintUnformatted(body);
        struct MHD_Response *resp;
        enum MHD_Result q;

        cJSON_Delete(body);
        if (!text)
                return -ENOMEM;
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return -ENOMEM;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        for (const char *const *h = headers; h && h[0]; h += 2)
                MHD_add_response_header(resp, h[0], h[1]);
        q = MHD_queue_response(r->connection, status, resp);
        MHD_destroy_response(resp);
        r->responded = true;
        return q == MHD_YES ? 0 : -EIO;
}

static int query_uint(Request *r, const char *key, uint64_t min, uint64_t max, uint64_t *ret) {
        const char *v = http_query(r, key);
        unsigned long long n;
        char *end;

        if (!v)
                return 0;
        errno = 0;
        n = strtoull(v, &end, 10);
        if (errno || end == v || *end || !isdigit((unsigned char) v[0]) || n < min || n > max)
                return http_respond_error(r, ERROR_INVALID_ARGUMENT, "%s=%.32s: expected a whole number from %llu "
                                          "to %llu", key, v, (unsigned long long) min, (unsigned long long) max)
                               ?: -EINVAL;
        *ret = n;
        return 1;
}

int e2b_query_limit(Request *r, unsigned *ret) {
        uint64_t n = E2B_LIST_LIMIT_DEFAULT;
        int q = query_uint(r, "limit", 1, E2B_LIST_LIMIT_MAX, &n);

        if (q < 0)
                return q;
        *ret = (unsigned) n;
        return 0;
}

/* ---- GET /sandboxes/{id} */

void e2b_get_sandbox(Request *r, const RouteArgs *a) {
        Manager *m = http_manager(r->http);
        Sandbox *s;

        if (e2b_find_sandbox(r, a->arg[0], &s) < 0)
                return;
        if (!e2b_state(s)) {
                http_respond_error(r, ERROR_SANDBOX_NOT_FOUND, "sandbox %s not found: it is %s%s%s", s->id,
                                   sandbox_state_to_string(s->state), s->error ? ": " : "", s->error ?: "");
                return;
        }
        http_respond_json(r, 200, e2b_listed_json(m, s, true));
}

/* ---- lists */

/* One level of form decoding (%XX, '+' for space) of n bytes: -EINVAL for a broken escape or a NUL. */
static int form_unescape(const char *s, size_t n, char **ret) {
        char *out = malloc(n + 1), *o = out;

        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '+')
                        *o++ = ' ';
                else if (s[i] == '%') {
                        char hex[3] = {};
                        if (i + 2 >= n) {
                                free(out);
                                return -EINVAL;
                        }
                        hex[0] = s[i + 1];
                        hex[1] = s[i + 2];
                        if (!isxdigit((unsigned char) hex[0]) || !isxdigit((unsigned char) hex[1]) ||
                            (hex[0] == '0' && hex[1] == '0')) {
                                free(out);
                                return -EINVAL;
                        }
                        *o++ = (char) strtol(hex, NULL, 16);
                        i += 2;
                } else
                        *o++ = s[i];
        }
        *o = 0;
        *ret = out;
        return 0;
}

/* A part of the metadata filter: form-decoded, then unescaped again (the SDKs escape keys and values before
 * they encode the form; E2B's API does ParseQuery, then QueryUnescape). */
static int filter_part(const char *s, size_t n, char **ret) {
        _cleanup_free_ char *once = NULL;
        int q = form_unescape(s, n, &once);

        if (q < 0)
                return q;
        return form_unescape(once, strlen(once), ret);
}

typedef struct ListFilter {
        char *key[METADATA_FILTER_MAX];
        char *value[METADATA_FILTER_MAX];
        unsigned n;
        bool running, paused;
        int64_t started_after;   /* ?startedAfter=, unix seconds; -1: any */
        const char *template;    /* ?template=, "base" resolved; NULL: any */
        int order;               /* ?order=: 1 ascending (the default), -1 descending */
} ListFilter;

static void list_filter_done(ListFilter *f) {
        for (unsigned i = 0; i < f->n; i++) {
                free(f->key[i]);
                free(f->value[i]);
        }
        f->n = 0;
}

int e2b_metadata_filter_parse(const char *v, char *key[static METADATA_FILTER_MAX],
                              char *value[static METADATA_FILTER_MAX], unsigned *n_pairs) {
        for (const char *p = v; p && *p;) {
                size_t n = strcspn(p, "&");
                const char *eq = memchr(p, '=', n);

                if (n > 0) {
                        /* past the limit there is no key[*n_pairs] to free */
                        if (!eq || eq == p || *n_pairs >= METADATA_FILTER_MAX)
                                return -EINVAL;
                        if (filter_part(p, (size_t) (eq - p), &key[*n_pairs]) < 0 ||
                            filter_part(eq + 1, n - (size_t) (eq - p) - 1, &value[*n_pairs]) < 0) {
                                free(key[*n_pairs]);
                                key[*n_pairs] = NULL;
                                return -EINVAL;
                        }
                        (*n_pairs)++;
                }
                p += n;
                if (*p == '&')
                        p++;
        }
        return 0;
}

static int parse_metadata_filter(Request *r, ListFilter *f) {
        const char *v = http_query(r, "metadata");

        if (!v || !*v)
                return 0;
        if (e2b_metadata_filter_parse(v, f->key, f->value, &f->n) < 0)
                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                          "metadata=%.64s: expected KEY=VALUE pairs joined by '&' (at most %d), "
                                          "each part URL-encoded", v, METADATA_FILTER_MAX) ?: -EINVAL;
        return 0;
}

static int parse_state_filter(Request *r, ListFilter *f, bool running_only) {
        const char *v = http_query(r, "state");

        f->running = true;
        f->paused = !running_only;
        if (!v)
                return 0;
        f->running = f->paused = false;
        for (const char *p = v; *p;) {
                size_t n = strcspn(p, ",");

                if (n == 7 && strncmp(p, "running", 7) == 0)
                        f->running = true;
                else if (n == 6 && strncmp(p, "paused", 6) == 0)
                        f->paused = true;
                else
                        return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                                  "state=%.64s: expected running, paused or both, joined by ','", v)
                                       ?: -EINVAL;
                p += n;
                if (*p == ',')
                        p++;
        }
        return 0;
}

int e2b_rfc3339_parse(const char *v, int64_t *ret) {
        struct tm tm = {};
        int n = 0, y, mo, d, h, mi, sec;
        long off = 0;
        time_t t;

        if (!v || sscanf(v, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 || n != 19 ||
            mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || y < 1970)
                return -EINVAL;
        v += n;
        if (*v == '.' && isdigit((unsigned char) v[1]))
                v += 1 + strspn(v + 1, "0123456789");
        if ((v[0] == '+' || v[0] == '-') && isdigit((unsigned char) v[1]) && isdigit((unsigned char) v[2]) &&
            v[3] == ':' && isdigit((unsigned char) v[4]) && isdigit((unsigned char) v[5]) && !v[6]) {
                off = ((v[1] - '0') * 10 + (v[2] - '0')) * 3600L + ((v[4] - '0') * 10 + (v[5] - '0')) * 60L;
                if (off > 24 * 3600)
                        return -EINVAL;
                off = v[0] == '-' ? -off : off;
        } else if (!((v[0] == 'Z' || v[0] == 'z') && !v[1]))
                return -EINVAL;
        tm = (struct tm) { .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi,
                           .tm_sec = sec };
        t = timegm(&tm);
        if (t == (time_t) -1)
                return -EINVAL;
        *ret = (int64_t) t - off;
        return 0;
}

/* ?startedAfter= (RFC 3339, as both SDKs send it), ?template= and ?order=: what the newer SDKs send. */
static int parse_list_options(Request *r, ListFilter *f) {
        Manager *m = http_manager(r->http);
        const char *after = http_query(r, "startedAfter"), *order = http_query(r, "order");

        f->started_after = -1;
        f->order = 1;
        if (after && *after && e2b_rfc3339_parse(after, &f->started_after) < 0)
                return http_respond_error(r, ERROR_INVALID_ARGUMENT, "startedAfter=%.64s: expected an RFC 3339 "
                                          "time, such as 2026-01-02T15:04:05Z", after) ?: -EINVAL;
        if (order && *order && !streq(order, "asc") && !streq(order, "desc"))
                return http_respond_error(r, ERROR_INVALID_ARGUMENT, "order=%.16s: expected asc or desc", order)
                               ?: -EINVAL;
        if (streq_ptr(order, "desc"))
                f->order = -1;
        f->template = http_query(r, "template");
        if (f->template && !*f->template)
                f->template = NULL;
        else if (streq_ptr(f->template, "base"))
                f->template = m->config.e2b_template ?: E2B_TEMPLATE_DEFAULT;
        return 0;
}

/* ?template= names a template by its name (with or without its tag) or digest, as templateID shows it. */
static bool template_matches(const char *want, const Sandbox *s) {
        const char *name = s->template_name ?: "";
        size_t n = strcspn(name, ":");

        return !want || streq(want, name) || streq_ptr(s->template_digest, want) ||
               (strlen(want) == n && strncmp(want, name, n) == 0);
}

static bool list_matches(const ListFilter *f, const Sandbox *s) {
        const char *state = e2b_state(s);
        cJSON *md;
        bool ok = true;

        if (!state || s->pooled || (streq(state, "running") ? !f->running : !f->paused))
                return false;
        /* E2B's is "at or after" a time with its fraction; a sandbox's start is kept to the second */
        if ((f->started_after >= 0 && s->created_at < f->started_after) || !template_matches(f->template, s))
                return false;
        if (f->n == 0)
                return true;
        md = sandbox_metadata_to_json(s);
        for (unsigned i = 0; i < f->n && ok; i++) {
                cJSON *v = cJSON_GetObjectItemCaseSensitive(md, f->key[i]);
                ok = cJSON_IsString(v) && streq(v->valuestring, f->value[i]);
        }
        cJSON_Delete(md);
        return ok;
}

/* Pages are in the order sandboxes were made (?order=desc: newest first); the token is where the last page
 * ended ("SECONDS.ID"), so that a sandbox removed meanwhile moves nothing. */
typedef struct Cursor {
        int64_t created_at;
        char id[SANDBOX_ID_LEN + 1];
} Cursor;

static int cursor_cmp(int64_t t1, const char *id1, int64_t t2, const char *id2) {
        return t1 != t2 ? (t1 < t2 ? -1 : 1) : strcmp(id1, id2);
}

static int parse_cursor(Request *r, const char *v, size_t id_len, Cursor *ret) {
        char *end;
        long long t;

        errno = 0;
        t = strtoll(v, &end, 10);
        if (errno || end == v || *end != '.' || t < 0 || strlen(end + 1) != id_len ||
            strspn(end + 1, "0123456789abcdefghijklmnopqrstuvwxyz-") != id_len)
                return http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                          "nextToken=%.64s is not a token of this server: pass the x-next-token of "
                                          "the previous page", v) ?: -EINVAL;
        ret->created_at = t;
        memcpy(ret->id, end + 1, id_len);
        ret->id[id_len] = 0;
        return 0;
}

static int sandbox_order(const void *a, const void *b) {
        const Sandbox *x = *(Sandbox *const *) a, *y = *(Sandbox *const *) b;

        return cursor_cmp(x->created_at, x->id, y->created_at, y->id);
}

static int sandbox_order_desc(const void *a, const void *b) {
        return sandbox_order(b, a);
}

static void list_sandboxes(Request *r, bool v2) {
        Manager *m = http_manager(r->http);
        _cleanup_(list_filter_done) ListFilter f = {};
        _cleanup_free_ Sandbox **all = NULL;
        const char *token = v2 ? http_query(r, "nextToken") : NULL;
        char next[64] = "";
        Cursor after = { .created_at = -1 };
        size_t n = 0, count = 0, taken = 0;
        unsigned limit = UINT32_MAX;
        cJSON *list;

        if (parse_metadata_filter(r, &f) < 0 || parse_state_filter(r, &f, !v2) < 0 ||
            parse_list_options(r, &f) < 0 || (v2 && e2b_query_limit(r, &limit) < 0) ||
            (token && *token && parse_cursor(r, token, SANDBOX_ID_LEN, &after) < 0))
                return;
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                count++;
        all = calloc(count + 1, sizeof *all);
        if (!all) {
                http_respond_error(r, ERROR_INTERNAL, "out of memory");
                return;
        }
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (list_matches(&f, s) &&
                    (after.created_at < 0 || f.order * cursor_cmp(s->created_at, s->id, after.created_at, after.id) > 0))
                        all[n++] = s;
        qsort(all, n, sizeof *all, f.order > 0 ? sandbox_order : sandbox_order_desc);
        list = cJSON_CreateArray();
        for (; taken < n && taken < limit; taken++)
                cJSON_AddItemToArray(list, e2b_listed_json(m, all[taken], false));
        if (taken < n)
                snprintf(next, sizeof next, "%lld.%s", (long long) all[taken - 1]->created_at, all[taken - 1]->id);
        e2b_respond_json_headers(r, 200, list, next[0] ? (const char *const[]) { "x-next-token", next, NULL } : NULL);
}

/* The first list: running sandboxes only (with ?state= the same as v2), all of them. */
void e2b_get_sandboxes(Request *r, const RouteArgs *a) {
        list_sandboxes(r, false);
}

void e2b_get_sandboxes_v2(Request *r, const RouteArgs *a) {
        list_sandboxes(r, true);
}

/* ---- metrics */

/* CPU time is sampled per sandbox: the use since the last sample (or since QEMU started), so that a metrics
 * call needs no sleep on the event loop. */
#define CPU_SAMPLES_MAX 64
static struct CpuSample {
        char id[SANDBOX_ID_LEN + 1];
        pid_t pid;
        uint64_t ticks;
        uint64_t at_usec;
        double pct;
} cpu_samples[CPU_SAMPLES_MAX];

/* utime + stime and the start time (clock ticks) of a process, from /proc/PID/stat. */
static int proc_cpu_ticks(pid_t pid, uint64_t *ret_ticks, uint64_t *ret_start) {
        _cleanup_fclose_ FILE *f = NULL;
        char path[64], buf[1024], *p;
        unsigned long long utime, stime, start;
        size_t n;

        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        p = strrchr(buf, ')'); /* the command name may hold anything */
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu",
                         &utime, &stime, &start) != 3)
                return -EIO;
        *ret_ticks = utime + stime;
        *ret_start = start;
        return 0;
}

static double uptime_sec(void) {
        _cleanup_fclose_ FILE *f = fopen("/proc/uptime", "re");
        double up = 0;

        if (!f || fscanf(f, "%lf", &up) != 1)
                return 0;
        return up;
}

/* QEMU's CPU use as a share of the sandbox's vCPUs, in percent: what the guest took, with QEMU's own I/O
 * threads, over the time since the last call (at least 0.1 s, else the last value again). */
static double cpu_used_pct(const Sandbox *s) {
        long hz = sysconf(_SC_CLK_TCK);
        uint64_t ticks, start, now = now_usec_monotonic();
        struct CpuSample *slot = NULL, *oldest = &cpu_samples[0];
        double used, elapsed, pct;

        if (s->qemu_pid <= 0 || hz <= 0 || proc_cpu_ticks(s->qemu_pid, &ticks, &start) < 0)
                return 0;
        for (size_t i = 0; i < CPU_SAMPLES_MAX; i++) {
                if (streq(cpu_samples[i].id, s->id))
                        slot = &cpu_samples[i];
                if (cpu_samples[i].at_usec < oldest->at_usec)
                        oldest = &cpu_samples[i];
        }
        if (slot && slot->pid == s->qemu_pid && ticks >= slot->ticks) {
                elapsed = (double) (now - slot->at_usec) / 1e6;
                if (elapsed < 0.1)
                        return slot->pct;
                used = (double) (ticks - slot->ticks) / (double) hz;
        } else {
                elapsed = uptime_sec() - (double) start / (double) hz;
                used = (double) ticks / (double) hz;
        }
        pct = elapsed > 0 ? 100.0 * used / elapsed / (s->vcpu ?: 1) : 0;
        if (pct > 100)
                pct = 100;
        if (pct < 0)
                pct = 0;
        slot = slot ?: oldest;
        snprintf(slot->id, sizeof slot->id, "%s", s->id);
        slot->pid = s->qemu_pid;
        slot->ticks = ticks;
        slot->at_usec = now;
        slot->pct = pct;
        return pct;
}

/* The bytes the sandbox's own writable disk layer takes on the host: what it wrote, not the template's
 * image under it. */
static uint64_t disk_used_bytes(const Sandbox *s) {
        _cleanup_free_ char *disk = NULL;

        if (!s->data_dir || sandbox_disk_get(s->data_dir, &disk) < 0)
                return 0;
        return disk_usage(disk);
}

/* Memory as the guest sees it, as envd reports it: its /proc/meminfo, read through the agent like any file
 * (the request waits for it). Used is total less available, cache is the page cache. */
#define MEMINFO_MAX (16U * 1024U)

typedef struct MetricsRead {
        FileXfer *x;
        SpaceBuf text;
        char arg[256];        /* the route's {sandboxID}: looked up again after each wait (it may be gone) */
        uint64_t start, end;
} MetricsRead;

static void metrics_read_detach(void *userdata, Request *r) {
        MetricsRead *m = userdata;

        if (m->x) {
                if (m->x->reader_open)
                        file_xfer_close_reader(m->x);
                file_xfer_detach(m->x);
        }
        space_buf_done(&m->text);
        free(m);
}

int e2b_meminfo_field(const char *text, const char *key, uint64_t *ret) {
        size_t n = strlen(key);

        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, key, n) == 0 && l[n] == ':') {
                        const char *v = l + n + 1 + strspn(l + n + 1, " \t");
                        unsigned long long kib;

                        /* %llu would take a sign and wrap it */
                        if (!isdigit((unsigned char) *v) || sscanf(v, "%llu kB", &kib) != 1 || kib > (UINT64_MAX >> 10))
                                return -EBADMSG;
                        *ret = (uint64_t) kib << 10;
                        return 0;
                }
        return -ENOENT;
}

static void metrics_step(Request *r, void *userdata);

/* 1 with the guest's meminfo in *ret_text (NUL-terminated), 0 while it is read (parked: metrics_step()
 * carries on), < 0 answered. */
static int guest_meminfo(Request *r, Sandbox *s, MetricsRead *m, const char **ret_text) {
        _cleanup_(error_done) Error err = {};
        _cleanup_(space_buf_done) SpaceBuf kv = {};
        ChannelWaiter w = api_request_waiter(r);
        char buf[4096];
        ssize_t n;

        if (!m->x) {
                if (space_kv_add(&kv, "op", "read") < 0 || space_kv_add(&kv, "path", "/proc/meminfo") < 0)
                        return http_respond_error(r, ERROR_INTERNAL, "out of memory") ?: -ENOMEM;
                if (file_xfer_start(s, "read", "/proc/meminfo", &kv, &w, &m->x, &err) < 0) {
                        respond_error_or(r, &err, "cannot read the guest's memory use");
                        return -EIO;
                }
                http_continue(r, metrics_step, m);
                return 0;
        }
        if (m->x->state == FILE_XFER_SENT) {
                http_continue(r, metrics_step, m);
                return 0;
        }
        if (m->x->state == FILE_XFER_FAILED)
                return http_respond_error(r, m->x->error_code ?: ERROR_IO_ERROR,
                                          "cannot read the guest's memory use: %s",
                                          m->x->error_message ?: "the read failed") ?: -EIO;
        if (!m->x->reader_open)
                file_xfer_open_reader(m->x);
        for (;;) {
                n = file_xfer_read(m->x, buf, sizeof buf);
                if (n == 0) {
                        http_continue(r, metrics_step, m);
                        return 0;
                }
                if (n == CHANNEL_READ_END)
                        break;
                if (n < 0 || m->text.len + (size_t) n > MEMINFO_MAX)
                        return http_respond_error(r, ERROR_PROTOCOL_ERROR,
                                                  "the guest's /proc/meminfo could not be read whole (at most %u "
                                                  "bytes)", MEMINFO_MAX) ?: -EBADMSG;
                if (space_buf_append(&m->text, buf, (size_t) n) < 0)
                        return http_respond_error(r, ERROR_INTERNAL, "out of memory") ?: -ENOMEM;
        }
        if (space_buf_append(&m->text, "", 1) < 0)
                return http_respond_error(r, ERROR_INTERNAL, "out of memory") ?: -ENOMEM;
        *ret_text = (const char *) m->text.data;
        return 1;
}

/* One sample, now: space keeps no history of metrics. Only a running sandbox has any (E2B's paused ones have
 * none): CPU from its QEMU on the host, memory from the guest, disk from its layer on the host. */
/* The sample, from the lookup on; it carries on here while the guest's meminfo comes. */
static void metrics_step(Request *r, void *userdata) {
        MetricsRead *m = userdata;
        uint64_t start = m->start, end = m->end, mem_total = 0, mem_avail = 0, mem_cache = 0;
        const char *meminfo;
        int64_t now = now_unix();
        cJSON *list, *o;
        Sandbox *s;
        char when[32];
        int q;

        if (e2b_find_sandbox(r, m->arg, &s) < 0)
                return;
        list = cJSON_CreateArray();
        if (s->state != SANDBOX_RUNNING || s->qemu_pid <= 0 || (uint64_t) now < start || (uint64_t) now > end) {
                http_respond_json(r, 200, list);
                return;
        }
        q = guest_meminfo(r, s, m, &meminfo);
        if (q <= 0) {
                cJSON_Delete(list);
                return;
        }
        if (e2b_meminfo_field(meminfo, "MemTotal", &mem_total) < 0 ||
            e2b_meminfo_field(meminfo, "MemAvailable", &mem_avail) < 0 || mem_avail > mem_total ||
            e2b_meminfo_field(meminfo, "Cached", &mem_cache) < 0) {
                cJSON_Delete(list);
                http_respond_error(r, ERROR_PROTOCOL_ERROR,
                                   "the guest's /proc/meminfo lacks MemTotal, MemAvailable or Cached");
                return;
        }
        o = cJSON_CreateObject();
        format_rfc3339(now, when);
        cJSON_AddStringToObject(o, "timestamp", when);
        cJSON_AddNumberToObject(o, "timestampUnix", (double) now);
        cJSON_AddNumberToObject(o, "cpuCount", s->vcpu);
        cJSON_AddNumberToObject(o, "cpuUsedPct", cpu_used_pct(s));
        cJSON_AddNumberToObject(o, "memUsed", (double) (mem_total - mem_avail));
        cJSON_AddNumberToObject(o, "memTotal", (double) mem_total);
        cJSON_AddNumberToObject(o, "memCache", (double) (mem_cache < mem_total ? mem_cache : mem_total));
        cJSON_AddNumberToObject(o, "diskUsed", (double) disk_used_bytes(s));
        cJSON_AddNumberToObject(o, "diskTotal", (double) (s->disk_mib << 20));
        cJSON_AddItemToArray(list, o);
        http_respond_json(r, 200, list);
}

void e2b_get_metrics(Request *r, const RouteArgs *a) {
        uint64_t start = 0, end = UINT64_MAX;
        MetricsRead *m;

        if (query_uint(r, "start", 0, INT64_MAX, &start) < 0 || query_uint(r, "end", 0, INT64_MAX, &end) < 0)
                return;
        m = calloc(1, sizeof *m);
        if (!m)
                return (void) http_respond_error(r, ERROR_INTERNAL, "out of memory");
        r->stream = (HttpStream) { .detach = metrics_read_detach, .userdata = m };
        snprintf(m->arg, sizeof m->arg, "%s", a->arg[0]);
        m->start = start;
        m->end = end;
        metrics_step(r, m);
}

/* ---- logs: a sandbox's log is what happened in it that space records, its processes: each start (what ran,
 * as whom, where) and each end (how). Output is not in it; it is each command's own (commands, logs). */

#define LOG_LIMIT_DEFAULT 1000U
#define LOG_LIMIT_MAX 10000U
#define LOG_SEARCH_MAX 256

typedef struct LogEntry {
        int64_t at_ms;
        const char *level;   /* E2B's: debug, info, warn, error */
        char *message;
        const ProcessRecord *process;
        size_t seq;          /* made in this order: a start before its end within the same second */
} LogEntry;

static int log_entry_cmp(const void *a, const void *b) {
        const LogEntry *x = a, *y = b;

        if (x->at_ms != y->at_ms)
                return x->at_ms < y->at_ms ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The argv column is JSON text of the words: shown as one line, control characters escaped. */
static char *argv_line(const char *json) {
        _cleanup_strv_free_ char **argv = strv_from_json_text(json);
        _cleanup_free_ char *line = NULL;
        size_t n = 0;

        if (!argv)
                return strdup("?");
        for (char **w = argv; *w; w++)
                n += strlen(*w) + 1;
        line = calloc(1, n + 1);
        if (!line)
                return NULL;
        for (char **w = argv; *w; w++) {
                if (w != argv)
                        strcat(line, " ");
                strcat(line, *w);
        }
        return string_escape_control(line);
}

static int log_entries_of(const ProcessRecord *recs, size_t n, LogEntry **ret, size_t *ret_n) {
        LogEntry *e = calloc(2 * n + 1, sizeof *e);
        size_t k = 0;

        if (!e)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const ProcessRecord *p = &recs[i];
                _cleanup_free_ char *cmd = argv_line(p->argv);
                char *msg = NULL;

                if (!cmd || asprintf(&msg, "process %d started as %s in %s: %s", p->pid, p->user ?: "root",
                                     p->cwd ?: "/", cmd) < 0)
                        goto oom;
                e[k++] = (LogEntry) { p->started_at * 1000, "info", msg, p };
                msg = NULL;
                if (streq_ptr(p->state, "exited")) {
                        bool clean = p->exit_code == 0 && p->signal <= 0 && !p->timed_out;
                        int m;

                        if (p->timed_out)
                                m = asprintf(&msg, "process %d timed out and was killed", p->pid);
                        else if (p->signal > 0)
                                m = asprintf(&msg, "process %d was killed by signal %d", p->pid, p->signal);
                        else
                                m = asprintf(&msg, "process %d exited with code %d", p->pid, p->exit_code);
                        if (m < 0)
                                goto oom;
                        e[k++] = (LogEntry) { (p->exited_at > 0 ? p->exited_at : p->started_at) * 1000,
                                              clean ? "info" : "warn", msg, p };
                } else if (streq_ptr(p->state, "lost")) {
                        if (asprintf(&msg, "process %d was lost (the daemon restarted and the guest no longer "
                                           "knew it)", p->pid) < 0)
                                goto oom;
                        e[k++] = (LogEntry) { p->started_at * 1000, "error", msg, p };
                }
        }
        for (size_t i = 0; i < k; i++)
                e[i].seq = i;
        qsort(e, k, sizeof *e, log_entry_cmp);
        *ret = e;
        *ret_n = k;
        return 0;
oom:
        for (size_t i = 0; i < k; i++)
                free(e[i].message);
        free(e);
        return -ENOMEM;
}

static cJSON *log_entry_json(const LogEntry *e, bool v1_line) {
        cJSON *o = cJSON_CreateObject(), *fields;
        char when[40];
        time_t t = (time_t) (e->at_ms / 1000);
        struct tm tm;

        gmtime_r(&t, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(when + strlen(when), sizeof when - strlen(when), ".%03dZ", (int) (e->at_ms % 1000));
        cJSON_AddStringToObject(o, "timestamp", when);
        if (v1_line) {
                cJSON_AddStringToObject(o, "line", e->message);
                return o;
        }
        cJSON_AddStringToObject(o, "level", e->level);
        cJSON_AddStringToObject(o, "message", e->message);
        fields = cJSON_AddObjectToObject(o, "fields");
        cJSON_AddNumberToObject(fields, "pid", e->process->pid);
        cJSON_AddStringToObject(fields, "user", e->process->user ?: "root");
        return o;
}

static bool level_at_least(const char *level, const char *min) {
        static const char *const order[] = { "debug", "info", "warn", "error" };
        int a = 0, b = 0;

        for (int i = 0; i < 4; i++) {
                if (streq(level, order[i]))
                        a = i;
                if (min && streq(min, order[i]))
                        b = i;
        }
        return a >= b;
}

/* v1: ?start= (unix ms) and ?limit=, oldest first, as lines and as entries. v2: ?cursor= (unix ms),
 * ?limit=, ?direction=forward|backward, ?level= (the least level shown), ?search= (a substring). */
static void respond_logs(Request *r, const RouteArgs *a, bool v2) {
        const char *dir = http_query(r, "direction"), *level = http_query(r, "level"), *search = http_query(r, "search");
        ProcessRecord *recs = NULL;
        LogEntry *entries = NULL;
        uint64_t from = 0, limit = LOG_LIMIT_DEFAULT;
        size_t n = 0, k = 0, shown = 0;
        bool backward = false;
        cJSON *o, *lines = NULL, *list;
        Sandbox *s;
        int q;

        if (query_uint(r, v2 ? "cursor" : "start", 0, INT64_MAX, &from) < 0 ||
            query_uint(r, "limit", 0, LOG_LIMIT_MAX, &limit) < 0 || e2b_find_sandbox(r, a->arg[0], &s) < 0)
                return;
        if (v2 && dir && !(backward = streq(dir, "backward")) && !streq(dir, "forward")) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "direction must be forward or backward");
                return;
        }
        if (v2 && level && !streq(level, "debug") && !streq(level, "info") && !streq(level, "warn") &&
            !streq(level, "error")) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "level must be debug, info, warn or error");
                return;
        }
        if (v2 && search && strlen(search) > LOG_SEARCH_MAX) {
                http_respond_error(r, ERROR_INVALID_ARGUMENT, "search is longer than %d bytes", LOG_SEARCH_MAX);
                return;
        }
        q = store_load_processes(http_manager(r->http)->store, s->id, NULL, &recs, &n);
        if (q >= 0)
                q = log_entries_of(recs, n, &entries, &k);
        if (q < 0) {
                http_respond_error(r, ERROR_INTERNAL, "cannot read the sandbox's processes: %s", strerror(-q));
                goto out;
        }
        o = cJSON_CreateObject();
        if (!v2)
                lines = cJSON_AddArrayToObject(o, "logs");
        list = cJSON_AddArrayToObject(o, v2 ? "logs" : "logEntries");
        for (size_t i = 0; i < k && shown < limit; i++) {
                const LogEntry *e = &entries[backward ? k - 1 - i : i];

                if (from > 0 && (backward ? (uint64_t) e->at_ms > from : (uint64_t) e->at_ms < from))
                        continue;
                if (v2 && ((level && !level_at_least(e->level, level)) || (search && !strstr(e->message, search))))
                        continue;
                if (lines)
                        cJSON_AddItemToArray(lines, log_entry_json(e, true));
                cJSON_AddItemToArray(list, log_entry_json(e, false));
                shown++;
        }
        http_respond_json(r, 200, o);
out:
        for (size_t i = 0; i < k; i++)
                free(entries[i].message);
        free(entries);
        for (size_t i = 0; i < n; i++)
                process_record_done(&recs[i]);
        free(recs);
}

void e2b_get_logs(Request *r, const RouteArgs *a) {
        respond_logs(r, a, false);
}

void e2b_get_logs_v2(Request *r, const RouteArgs *a) {
        respond_logs(r, a, true);
}
