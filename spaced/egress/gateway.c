/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "channel/channel.h"
#include "channel/tunnel.h"
#include "core/util.h"
#include "egress/egress-internal.h"
#include "macro.h"
#include "secret/secret.h"

/* The egress gateway (ARCHITECTURE.md, decision 10): every connection a program in a sandbox makes arrives
 * here as a CONNECT on the channel, and every DNS question as a RESOLVE. Nothing the guest says is believed:
 * names are resolved here, the policy is the daemon's, the socket is connected only to an address that was
 * checked, and the client's first bytes (TLS SNI, HTTP Host) must name what was checked before any of them
 * leaves the host.
 *
 * A connection goes through these steps (GatewayConn.state):
 *   a name (proxy)        RESOLVING -> CONNECTING -> PEEKING -> OPEN
 *   an allowed address    CONNECTING -> PEEKING -> OPEN
 *   an address no IP rule allows, captured transparently: its first bytes must name an allowed host that
 *   resolves to it        NAMING (-> RESOLVING the name) -> CONNECTING -> OPEN
 * Any step may end in a denial: the guest gets ERROR (before OK) or CLOSE (after), and the audit log a line. */

#define CONNECT_TIMEOUT_USEC (10ULL * 1000000ULL)
#define NAMING_TIMEOUT_USEC (5ULL * 1000000ULL)
/* first bytes that are a start but no verdict (half a line, half a ClientHello) are judged as they are then */
#define PEEK_MORE_TIMEOUT_USEC (10ULL * 1000000ULL)
#define DNS_TTL_SEC 30U
#define DNS_CACHE_MAX 2048U

typedef enum GatewayState {
        GW_RESOLVING,
        GW_NAMING,
        GW_CONNECTING,
        GW_PEEKING,
        GW_OPEN,
        GW_DONE,
} GatewayState;

typedef struct GatewayConn {
        Manager *manager;
        unsigned refs;
        char *sandbox_id;
        char *data_dir;
        Tunnel *tunnel;              /* NULL once it ended */
        GatewayState state;
        const char *via;             /* "proxy" or "transparent" */
        bool has_target_name;        /* the guest asked for a name (else an address) */
        char target_name[EGRESS_HOST_MAX + 1];
        char peek_name[EGRESS_HOST_MAX + 1];   /* a name the first bytes gave, being checked */
        uint16_t port;
        EgressAddr addr;             /* the address checked, and connected to */
        char addr_text[EGRESS_ADDR_STRLEN];
        bool ip_allowed;             /* an IP rule allows addr without a name */
        char rule[EGRESS_MESSAGE_MAX];
        int fd;
        sd_event_source *io, *timer;
        uint64_t opened_usec;
        GatewayPolicy *policy;
        /* plain HTTP: each request is checked as it comes (gate), and a websocket upgrade waits for the
         * server's status line (status, then switch on the loop) */
        bool http;
        EgressHttpStream hs;
        bool watching, switched;
        EgressHttpFirstAnswer first;
        sd_event_source *defer;
        /* TLS to a host a secret is bound to: terminated, and its requests checked and given their secrets on
         * the interception's threads (intercept.c) */
        bool tls, intercepted;
} GatewayConn;

/* The names each sandbox's DNS stub was answered, so that a connection captured to one of those addresses
 * with that name in its SNI needs no second lookup (and a changing DNS answer does not break it). Only
 * checked addresses go in. */
typedef struct DnsEntry {
        char *sandbox_id;
        char name[EGRESS_HOST_MAX + 1];
        EgressAddr addrs[SPACE_RESOLVE_ADDRS_MAX];
        size_t n;
        uint64_t expires_usec;
        struct DnsEntry *next;
} DnsEntry;

/* A guest's 127.0.0.0/8 is its own loopback: it can never reach the host's. When the policy opens a host
 * loopback address (an IP rule names it) for an allowed name, the DNS stub answers a stand-in address from
 * 198.18.0.0/15 instead, which the capture sends here, and which the gateway maps back to the name: the
 * connection is then decided as one to that name. */
typedef struct StandIn {
        char *sandbox_id;
        char name[EGRESS_HOST_MAX + 1];
        uint32_t index;              /* 198.18.0.0 + index */
        struct StandIn *next;
} StandIn;
#define STANDIN_MAX 4096U

static struct {
        uint16_t self_port, self_tls_port;
        DnsEntry *dns;
        unsigned n_dns;
        StandIn *standins;
        unsigned n_standins;
        uint32_t next_standin;
} gw;

static bool standin_range(const EgressAddr *a) {
        return a->family == AF_INET && a->a[0] == 198 && (a->a[1] & 0xfe) == 18;
}

static void standin_addr(uint32_t index, EgressAddr *ret) {
        uint32_t v = (198U << 24 | 18U << 16) + (index & 0x1ffff);

        *ret = (EgressAddr) { .family = AF_INET, .a = { v >> 24, (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff } };
}

/* The stand-in of (sandbox, name), made when new; false when the table is full. */
static bool standin_get(const char *sandbox_id, const char *name, EgressAddr *ret) {
        StandIn *e;

        for (e = gw.standins; e; e = e->next)
                if (streq(e->sandbox_id, sandbox_id) && streq(e->name, name)) {
                        standin_addr(e->index, ret);
                        return true;
                }
        if (gw.n_standins >= STANDIN_MAX)
                return false;
        e = calloc(1, sizeof *e);
        if (!e || !(e->sandbox_id = strdup(sandbox_id))) {
                free(e);
                return false;
        }
        strcpy(e->name, name);
        /* .0 and .255 of each /24 are skipped: some stacks treat them specially */
        do
                e->index = 1 + gw.next_standin++ % 0x1fffe;
        while ((e->index & 0xff) == 0 || (e->index & 0xff) == 0xff);
        e->next = gw.standins;
        gw.standins = e;
        gw.n_standins++;
        standin_addr(e->index, ret);
        return true;
}

static const char *standin_name(const char *sandbox_id, const EgressAddr *a) {
        if (!standin_range(a))
                return NULL;
        for (StandIn *e = gw.standins; e; e = e->next) {
                EgressAddr x;

                standin_addr(e->index, &x);
                if (streq(e->sandbox_id, sandbox_id) && memcmp(x.a, a->a, 4) == 0)
                        return e->name;
        }
        return NULL;
}

/* ---- bookkeeping ---- */

static void dns_remember(const char *sandbox_id, const char *name, const EgressAddr *addrs, size_t n) {
        uint64_t now = now_usec_monotonic();
        DnsEntry *e = NULL, **oldest = NULL;

        for (DnsEntry **i = &gw.dns; *i; i = &(*i)->next) {
                if (streq((*i)->sandbox_id, sandbox_id) && streq((*i)->name, name))
                        e = *i;
                if (!oldest || (*i)->expires_usec < (*oldest)->expires_usec)
                        oldest = i;
        }
        if (!e) {
                if (gw.n_dns >= DNS_CACHE_MAX && oldest) {
                        DnsEntry *o = *oldest;

                        *oldest = o->next;
                        free(o->sandbox_id);
                        free(o);
                        gw.n_dns--;
                }
                e = calloc(1, sizeof *e);
                if (!e || !(e->sandbox_id = strdup(sandbox_id))) {
                        free(e);
                        return;
                }
                strcpy(e->name, name);
                e->next = gw.dns;
                gw.dns = e;
                gw.n_dns++;
        }
        e->n = MIN(n, (size_t) SPACE_RESOLVE_ADDRS_MAX);
        memcpy(e->addrs, addrs, e->n * sizeof *addrs);
        e->expires_usec = now + DNS_TTL_SEC * 1000000ULL;
}

static bool addr_eq(const EgressAddr *a, const EgressAddr *b) {
        return a->family == b->family && memcmp(a->a, b->a, a->family == AF_INET ? 4 : 16) == 0;
}

static bool dns_answered(const char *sandbox_id, const char *name, const EgressAddr *addr) {
        uint64_t now = now_usec_monotonic();

        for (DnsEntry *e = gw.dns; e; e = e->next)
                if (streq(e->sandbox_id, sandbox_id) && streq(e->name, name) && e->expires_usec > now)
                        for (size_t i = 0; i < e->n; i++)
                                if (addr_eq(&e->addrs[i], addr))
                                        return true;
        return false;
}

void egress_gateway_forget(const char *sandbox_id) {
        for (DnsEntry **i = &gw.dns; *i;) {
                DnsEntry *e = *i;

                if (streq(e->sandbox_id, sandbox_id)) {
                        *i = e->next;
                        free(e->sandbox_id);
                        free(e);
                        gw.n_dns--;
                } else
                        i = &e->next;
        }
        for (StandIn **i = &gw.standins; *i;) {
                StandIn *e = *i;

                if (streq(e->sandbox_id, sandbox_id)) {
                        *i = e->next;
                        free(e->sandbox_id);
                        free(e);
                        gw.n_standins--;
                } else
                        i = &e->next;
        }
        gateway_sandbox_forget(sandbox_id);
        egress_audit_forget(sandbox_id);
}

/* ---- policy ---- */

static void decide(const GatewayConn *c, const char *host, const EgressAddr *addr, uint16_t port, EgressDecision *ret) {
        EgressQuery q = { .host = host, .addr = *addr, .port = port, .self_port = gw.self_port,
                          .self_tls_port = gw.self_tls_port };

        if (egress_decide(c->policy->policy.sources, c->policy->policy.n_sources, &q, ret) < 0) {
                *ret = (EgressDecision) { .allowed = false, .reason = EGRESS_REASON_INVALID };
                (void) snprintf(ret->message, sizeof ret->message, "not an address");
        }
}

static void rule_text(const EgressDecision *d, char *buf, size_t size) {
        if (d->rule)
                (void) snprintf(buf, size, "%s: %s", d->owner ?: "?", d->rule->text);
        else
                buf[0] = 0;
}

/* ---- a connection ---- */

static GatewayConn *conn_ref(GatewayConn *c) {
        c->refs++;
        return c;
}

static void conn_unref(GatewayConn *c) {
        if (!c || --c->refs > 0)
                return;
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->timer);
        sd_event_source_disable_unref(c->defer);
        safe_close(c->fd);
        gateway_policy_unref(c->policy);
        free(c->sandbox_id);
        free(c->data_dir);
        free(c);
}

static void audit(GatewayConn *c, const char *event, const char *host, EgressReason reason, const char *message,
                  const TunnelStats *st) {
        EgressAuditEntry e = {
                .event = event,
                .via = c->via,
                .host = host,
                .addr = c->addr.family ? c->addr_text : NULL,
                .port = c->port,
                .reason = egress_reason_to_string(reason),
                .rule = c->rule[0] ? c->rule : NULL,
                .message = message,
        };

        if (st) {
                e.bytes_up = st->up;
                e.bytes_down = st->down;
                e.duration_ms = (now_usec_monotonic() - c->opened_usec) / 1000;
        }
        egress_audit(c->manager, c->sandbox_id, c->data_dir, &e);
}

static const char *conn_host(const GatewayConn *c) {
        if (c->has_target_name)
                return c->target_name;
        return c->peek_name[0] ? c->peek_name : NULL;
}

/* Refuses the connection, before or after OK, and says why in the audit log; before OK the guest is told code. */
static void deny_va(GatewayConn *c, EgressReason reason, SpaceCode code, const char *fmt, va_list ap)
        __attribute__((format(printf, 4, 0)));
static void deny_va(GatewayConn *c, EgressReason reason, SpaceCode code, const char *fmt, va_list ap) {
        char msg[EGRESS_MESSAGE_MAX + 128];
        Tunnel *t = c->tunnel;

        (void) vsnprintf(msg, sizeof msg, fmt, ap);
        audit(c, "deny", conn_host(c), reason, msg, NULL);
        /* an open connection (a later request refused) keeps its state: conn_ended logs its end and bytes */
        if (c->state != GW_OPEN)
                c->state = GW_DONE;
        c->io = sd_event_source_disable_unref(c->io);
        c->timer = sd_event_source_disable_unref(c->timer);
        c->defer = sd_event_source_disable_unref(c->defer);
        c->fd = safe_close(c->fd);
        if (!t)
                return;
        c->tunnel = NULL;
        /* Before OK the guest gets ERROR (tunnel_refuse frees without calling ended, so its reference is
         * dropped here); after, CLOSE (tunnel_abort calls conn_ended, which drops it). */
        if (!c->opened_usec) {
                char told[sizeof msg + 32];

                /* the guest is told the reason's name too: it is what its log and `egress test` call it */
                (void) snprintf(told, sizeof told, "%s (%s)", msg, egress_reason_to_string(reason));
                tunnel_refuse(t, code, told);
                conn_unref(c);
        } else
                tunnel_abort(t, msg);
}

/* The guest is told what the table says of reason (egress_reason_code()). */
static void deny(GatewayConn *c, EgressReason reason, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void deny(GatewayConn *c, EgressReason reason, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        deny_va(c, reason, egress_reason_code(reason), fmt, ap);
        va_end(ap);
}

/* The guest is told code: a timeout, or a failure of ours that is not the connection's fault. */
static void deny_as(GatewayConn *c, EgressReason reason, SpaceCode code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static void deny_as(GatewayConn *c, EgressReason reason, SpaceCode code, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        deny_va(c, reason, code, fmt, ap);
        va_end(ap);
}

/* A decision's refusal: the guest is told denied, whatever the reason. */
static void deny_decided(GatewayConn *c, const EgressDecision *d) {
        deny_as(c, d->reason, SPACE_CODE_DENIED, "%s", d->message);
}

static int on_gate(Tunnel *t, void *userdata);
static bool intercept(GatewayConn *c);

static void open_up(GatewayConn *c) {
        c->state = GW_OPEN;
        c->timer = sd_event_source_disable_unref(c->timer);
        audit(c, "allow", conn_host(c), EGRESS_REASON_ALLOWED, NULL, NULL);
        /* Plain HTTP: a server takes request after request on one connection, each naming its own Host, so
         * each is checked as it comes, not only the first (ARCHITECTURE.md, decision 10). TLS to a host a
         * secret is bound to: the same, past the TLS the gateway ends. */
        if (c->http)
                tunnel_release_gated(c->tunnel, on_gate);
        else if (!c->tls || !intercept(c))
                tunnel_release(c->tunnel);
}

/* A later request's head against what the connection was decided for, by the rules the first one met
 * (judge) and with the name that was decided: EGRESS_REASON_ALLOWED, or the reason it is refused (and why, in
 * msg). */
static EgressReason request_refusal(const GatewayConn *c, const EgressSniff *sn, char *msg, size_t size) {
        const char *decided = conn_host(c);

        if (sn->has_name) {
                if (decided && streq(sn->name, decided))
                        return EGRESS_REASON_ALLOWED;
                (void) snprintf(msg, size, "a later request on the connection names %s, not %s", sn->name,
                                decided ?: "no host, as its first request did");
                return EGRESS_REASON_HOST_MISMATCH;
        }
        if (sn->has_literal && !addr_eq(&sn->literal, &c->addr)) {
                (void) snprintf(msg, size, "a later request's HTTP Host is an address other than %s, the one the "
                                "connection goes to", c->addr_text);
                return EGRESS_REASON_HOST_MISMATCH;
        }
        if (c->has_target_name || c->ip_allowed)
                return EGRESS_REASON_ALLOWED;
        (void) snprintf(msg, size, "a later request names no host, and %s:%u has no IP rule", c->addr_text, c->port);
        return EGRESS_REASON_NO_NAME;
}

static int on_switch(sd_event_source *s, void *userdata) {
        GatewayConn *c = userdata;

        c->defer = sd_event_source_disable_unref(c->defer);
        if (!c->tunnel)
                return 0;
        egress_http_stream_switched(&c->hs, c->switched);
        if (c->switched)
                tunnel_release(c->tunnel);   /* the new protocol's bytes, not requests: all go */
        else
                tunnel_regate(c->tunnel);    /* refused: what the guest sent since is requests again */
        return 0;
}

/* The server's first bytes after a websocket upgrade was asked for: its status line says whether it switched.
 * Acted on from the loop (on_switch): a watch may not end the tunnel, and a refusal may. */
static void on_down(Tunnel *t, const uint8_t *p, size_t n, void *userdata) {
        GatewayConn *c = userdata;

        if (egress_http_first_answer(&c->first, p, n, &c->switched) == 0)
                return;
        tunnel_watch_down(t, NULL);
        if (sd_event_add_defer(c->manager->event, &c->defer, on_switch, c) < 0 ||
            sd_event_source_set_enabled(c->defer, SD_EVENT_ONESHOT) < 0) {
                c->defer = sd_event_source_disable_unref(c->defer);
                c->switched = false; /* then the upgrade waits for nothing: requests stay held until the guest goes */
        }
}

/* A request head with its secrets (egress_secret bindings for this host and port) is at most this: the head
 * itself is bounded by the sniffer, each value by the secret store. */
#define HEAD_WITH_SECRETS_MAX EGRESS_INTERCEPT_HEAD_MAX
#define INJECTIONS_MAX 16U
#define VALUES_MAX 32U

static const char *placeholder_of(const GatewayConn *c, const char *secret) {
        for (char **k = c->policy->placeholders; k && *k; k += 2)
                if (streq(*k, secret))
                        return k[1];
        return NULL;
}

/* The values of b's secrets, read now, appended to vals and values from *n on. -1: one is missing or no room,
 * and the binding is left out (what was read of it is freed). */
static int read_values(GatewayConn *c, const EgressBinding *b, const char *placeholder, EgressValue *vals,
                       char **values, size_t *n) {
        size_t first = *n;

        for (char **name = b->secrets; name && *name; name++) {
                Secret *s = secret_find(c->manager, *name);
                size_t len;

                if (*n >= VALUES_MAX || !s || secret_value_read(c->manager, s, &values[*n], &len) < 0) {
                        audit(c, "secret", conn_host(c), EGRESS_REASON_ALLOWED,
                              *n >= VALUES_MAX ? "too many secrets for one request: the request went without some"
                              : s ? "a bound secret has no value: the request went without it"
                                  : "a bound secret does not exist any more: the request went without it", NULL);
                        while (*n > first) {
                                (*n)--;
                                secret_value_free(values[*n], vals[*n].value_len);
                        }
                        return -1;
                }
                vals[*n] = (EgressValue) { .ref = b->header ? b->refs[name - b->secrets] : placeholder,
                                           .value = values[*n], .value_len = len };
                (*n)++;
        }
        return 0;
}

/* The secrets bound to where this connection goes, into the request head at p (n bytes), the request-th on the
 * connection, into out (ARCHITECTURE.md, "Secrets"). 0: nothing to add, the head goes as it is; 1: out holds it
 * with its secrets; -1: refused (the tunnel ended). A value is read from the store for each request, so a new
 * version is used from the next request on. */
static int head_with_secrets(GatewayConn *c, const uint8_t *p, size_t n, unsigned request, SpaceBuf *out) {
        const EgressPolicy *pol = &c->policy->policy;
        EgressInjection inj[INJECTIONS_MAX];
        EgressValue vals[VALUES_MAX];
        char *values[VALUES_MAX], names[EGRESS_MESSAGE_MAX] = "";
        size_t k = 0, nv = 0;
        unsigned done = 0;
        int r;

        for (size_t i = 0; i < pol->n_bindings && k < INJECTIONS_MAX; i++) {
                const EgressBinding *b = pol->bindings[i];
                const char *placeholder = b->header ? NULL : placeholder_of(c, b->secrets[0]);
                size_t first = nv;

                if (!egress_binding_applies(b, conn_host(c), c->port))
                        continue;
                /* a placeholder that is not in this request needs no value read */
                if (!b->header && (!placeholder || !memmem(p, n, placeholder, strlen(placeholder))))
                        continue;
                if (read_values(c, b, placeholder, vals, values, &nv) < 0)
                        continue;
                inj[k++] = (EgressInjection) { .header = b->header, .template = b->template, .values = &vals[first],
                                               .n_values = nv - first };
                for (char **name = b->secrets; name && *name; name++)
                        (void) snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                                        names[0] ? ", " : "", *name);
        }
        if (k == 0)
                return 0;
        r = egress_head_rewrite(p, n, inj, k, HEAD_WITH_SECRETS_MAX, out, &done);
        for (size_t i = 0; i < nv; i++)
                secret_value_free(values[i], vals[i].value_len);
        if (r < 0) {
                if (out->data)
                        explicit_bzero(out->data, out->len);
                space_buf_done(out);
                deny(c, EGRESS_REASON_BAD_REQUEST, "refused request %u on the connection: with its secrets (%s) its "
                     "head is over %u KiB", request, names, HEAD_WITH_SECRETS_MAX / 1024);
                return -1;
        }
        char msg[EGRESS_MESSAGE_MAX + 64];
        (void) snprintf(msg, sizeof msg, "request %u%s: secret%s %s added (%u header%s or placeholder%s)", request,
                        c->intercepted ? " (HTTPS)" : "", nv == 1 ? "" : "s", names[0] ? names : "(none: fixed headers)",
                        done, done == 1 ? "" : "s", done == 1 ? "" : "s");
        audit(c, "secret", conn_host(c), EGRESS_REASON_ALLOWED, msg, NULL);
        return 1;
}

/* A plain HTTP request's head with its secrets goes out in place of the guest's: 0 nothing to add, 1 passed,
 * -1 refused (the tunnel ended). */
static int inject_secrets(GatewayConn *c, const uint8_t *p, size_t n) {
        SpaceBuf out = {};
        int r;

        r = head_with_secrets(c, p, n, c->hs.requests, &out);
        if (r <= 0)
                return r;
        r = tunnel_pass_replace(c->tunnel, n, out.data, out.len);
        if (out.data)
                explicit_bzero(out.data, out.len);
        space_buf_done(&out);
        if (r < 0) {
                deny(c, EGRESS_REASON_INTERNAL, "refused request %u on the connection: %s", c->hs.requests,
                     strerror(-r));
                return -1;
        }
        return 1;
}

/* An intercepted request's head, from the interception's thread: the checks gate() makes, then its secrets. */
static int on_intercept_head(void *userdata, const uint8_t *p, size_t n, const EgressSniff *sn, unsigned request,
                             SpaceBuf *out) {
        GatewayConn *c = userdata;
        char msg[EGRESS_MESSAGE_MAX + 2 * EGRESS_HOST_MAX];
        EgressReason refusal;

        if (!c->tunnel || c->state != GW_OPEN)
                return -1;
        refusal = request_refusal(c, sn, msg, sizeof msg);
        if (refusal != EGRESS_REASON_ALLOWED) {
                deny(c, refusal, "%s", msg);
                return -1;
        }
        return head_with_secrets(c, p, n, request, out);
}

static void on_intercept_ended(void *userdata, const EgressInterceptEnd *e) {
        GatewayConn *c = userdata;

        /* a normal end, and one the gateway refused itself, are the tunnel's "end" and the refusal's line */
        if (e->reason != EGRESS_REASON_ALLOWED && e->why[0]) {
                if (c->tunnel && c->state == GW_OPEN)
                        deny(c, e->reason, "%s", e->why);
                else
                        audit(c, "deny", conn_host(c), e->reason, e->why, NULL);
        }
        conn_unref(c);
}

static const EgressInterceptOps intercept_ops = {
        .head = on_intercept_head,
        .ended = on_intercept_ended,
};

/* Whether a secret is bound to where this TLS connection goes: then it is intercepted (true), or refused when it
 * cannot be (true: the tunnel ended). false: it goes through untouched, as every other TLS connection does. */
static bool intercept(GatewayConn *c) {
        const EgressPolicy *pol = &c->policy->policy;
        _cleanup_(error_done) Error e = {};
        EgressIntercept *x = NULL;
        int fd = -1, server_fd = -1, r;
        bool bound = false;

        for (size_t i = 0; i < pol->n_bindings && !bound; i++)
                bound = egress_binding_applies(pol->bindings[i], conn_host(c), c->port);
        if (!bound)
                return false;
        r = egress_intercept_new(c->manager, conn_host(c), c->policy->settings->tls_ca_file, &intercept_ops, c, &x,
                                 &fd, &e);
        if (r < 0) {
                deny(c, EGRESS_REASON_INTERNAL, "cannot intercept the connection to %s, which a secret is bound to: %s",
                     conn_host(c), e.message ?: strerror(-r));
                return true;
        }
        r = tunnel_swap_socket(c->tunnel, fd, &server_fd);
        if (r < 0) {
                safe_close(fd);
                egress_intercept_abandon(x);
                deny(c, EGRESS_REASON_BAD_FIRST_BYTES, "the server %s spoke first on a TLS connection a secret is "
                     "bound to: refused", conn_host(c));
                return true;
        }
        r = egress_intercept_go(x, server_fd);
        if (r < 0) {
                egress_intercept_abandon(x);
                safe_close(server_fd);
                deny(c, EGRESS_REASON_INTERNAL, "cannot intercept the connection to %s: %s", conn_host(c),
                     strerror(-r));
                return true;
        }
        c->intercepted = true;
        conn_ref(c);   /* the interception's, until it ended */
        tunnel_release(c->tunnel);
        return true;
}

/* Lets the guest's bytes through as far as they are requests whose heads were checked, or their bodies.
 * 1: the tunnel ended. */
static int gate(GatewayConn *c) {
        for (;;) {
                char msg[EGRESS_MESSAGE_MAX + 2 * EGRESS_HOST_MAX];
                const char *why;
                EgressReason refusal;
                const uint8_t *p;
                EgressSniff sn;
                size_t n, used;
                bool eof;

                tunnel_unchecked(c->tunnel, &p, &n, &eof);
                switch (egress_http_stream_step(&c->hs, p, n, eof, &used, &sn, &why)) {
                case EGRESS_HTTP_MORE:
                        return 0;
                case EGRESS_HTTP_WAIT:
                        if (c->watching)
                                return 0;
                        /* only the first answer on the connection can be read as the upgrade's */
                        if (tunnel_stats(c->tunnel)->down > 0) {
                                egress_http_stream_switched(&c->hs, false);
                                continue;
                        }
                        c->watching = true;
                        tunnel_watch_down(c->tunnel, on_down);
                        return 0;
                case EGRESS_HTTP_BAD:
                        deny(c, EGRESS_REASON_BAD_REQUEST, "refused request %u on the connection: %s",
                             c->hs.requests + 1, why);
                        return 1;
                case EGRESS_HTTP_HEAD:
                        /* the heads with secrets before it go out first: the host holds one at a time */
                        if (tunnel_injected(c->tunnel) > 0) {
                                tunnel_gate_when_sent(c->tunnel);
                                return 0;
                        }
                        refusal = request_refusal(c, &sn, msg, sizeof msg);
                        if (refusal != EGRESS_REASON_ALLOWED) {
                                deny(c, refusal, "%s", msg);
                                return 1;
                        }
                        switch (inject_secrets(c, p, used)) {
                        case 1:
                                continue;
                        case -1:
                                return 1;
                        }
                        break;
                case EGRESS_HTTP_BODY:
                        break;
                }
                tunnel_pass(c->tunnel, used);
        }
}

static int on_gate(Tunnel *t, void *userdata) {
        return gate(userdata);
}

static void start_connect(GatewayConn *c);
static void check_peek(GatewayConn *c);
static int arm_timer(GatewayConn *c, uint64_t usec);

/* The first bytes named peek_name for an address target: it must be an allowed name that this address is
 * one of (as the sandbox's DNS was answered, or as resolved now). */
static void name_checked(GatewayConn *c) {
        EgressDecision d;

        decide(c, c->peek_name, &c->addr, c->port, &d);
        if (!d.allowed)
                return deny_decided(c, &d);
        rule_text(&d, c->rule, sizeof c->rule);
        if (c->state == GW_NAMING)
                start_connect(c);
        else
                open_up(c);
}

static void on_peek_resolved(Manager *m, void *userdata, int err, const EgressAddr *addrs, size_t n) {
        GatewayConn *c = userdata;
        bool found = false;

        gateway_lookup_put(c->sandbox_id);
        if (c->tunnel && c->state != GW_DONE) {
                for (size_t i = 0; i < n && !found; i++)
                        found = addr_eq(&addrs[i], &c->addr) ||
                                (addrs[i].family == AF_INET6 && c->addr.family == AF_INET &&
                                 memcmp(addrs[i].a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0 &&
                                 memcmp(addrs[i].a + 12, c->addr.a, 4) == 0);
                for (size_t i = 0; i < n && found && err >= 0; i++) {
                        EgressDecision d;

                        decide(c, c->peek_name, &addrs[i], c->port, &d);
                        if (!d.allowed) {
                                deny_decided(c, &d);
                                goto out;
                        }
                }
                if (err < 0)
                        deny(c, EGRESS_REASON_NAME_MISMATCH, "the connection names %s, which does not resolve (%s)",
                             c->peek_name, strerror(-err));
                else if (!found)
                        deny(c, EGRESS_REASON_NAME_MISMATCH, "the connection names %s, which does not resolve to %s",
                             c->peek_name, c->addr_text);
                else
                        name_checked(c);
        }
out:
        conn_unref(c);
}

/* A verdict on the held first bytes. */
static void judge(GatewayConn *c, const EgressSniff *sn) {
        const char *why;

        if (sn->kind == EGRESS_SNIFF_BAD)
                return deny(c, EGRESS_REASON_BAD_FIRST_BYTES, "refused %s", sn->why);
        c->http = sn->kind == EGRESS_SNIFF_HTTP;
        c->tls = sn->kind == EGRESS_SNIFF_TLS;
        if (sn->has_name) {
                if (c->has_target_name) {
                        if (!streq(sn->name, c->target_name))
                                return deny(c, sn->kind == EGRESS_SNIFF_TLS ? EGRESS_REASON_SNI_MISMATCH
                                                                            : EGRESS_REASON_HOST_MISMATCH,
                                            "the %s names %s, not %s, the host the connection asked for",
                                            sn->kind == EGRESS_SNIFF_TLS ? "TLS SNI" : "HTTP Host", sn->name,
                                            c->target_name);
                        return open_up(c);
                }
                strcpy(c->peek_name, sn->name);
                if (!egress_name_permitted(&c->policy->policy, sn->name, NULL, &why))
                        return deny(c, EGRESS_REASON_NO_RULE, "the %s names %s: %s",
                                    sn->kind == EGRESS_SNIFF_TLS ? "TLS SNI" : "HTTP Host", sn->name, why);
                if (dns_answered(c->sandbox_id, sn->name, &c->addr))
                        return name_checked(c);
                if (!gateway_lookup_take(c->sandbox_id))
                        return deny(c, EGRESS_REASON_BUSY, "too many names being resolved for this sandbox");
                if (egress_resolve(c->manager, sn->name, on_peek_resolved, conn_ref(c)) < 0) {
                        gateway_lookup_put(c->sandbox_id);
                        conn_unref(c);
                        return deny(c, EGRESS_REASON_RESOLVE_FAILED, "cannot resolve %s", sn->name);
                }
                return;
        }
        if (sn->has_literal && !addr_eq(&sn->literal, &c->addr))
                return deny(c, EGRESS_REASON_HOST_MISMATCH, "the HTTP Host is an address other than %s, the one the "
                            "connection goes to", c->addr_text);
        /* No name. */
        if (c->has_target_name) {
                if (sn->kind == EGRESS_SNIFF_TLS)
                        return deny(c, EGRESS_REASON_NO_SNI, "a TLS connection to %s without an SNI", c->target_name);
                return open_up(c);
        }
        if (c->ip_allowed)
                return open_up(c);
        deny(c, EGRESS_REASON_NO_NAME,
             "%s:%u has no IP rule; a connection there must name an allowed host in its TLS SNI "
             "or HTTP Host", c->addr_text, c->port);
}

static void check_peek(GatewayConn *c) {
        const uint8_t *data;
        size_t len;
        bool eof;
        EgressSniff sn;

        if (!c->tunnel || !IN_SET(c->state, GW_NAMING, GW_PEEKING))
                return;
        tunnel_held(c->tunnel, &data, &len, &eof);
        if (len == 0 && !eof)
                return;
        egress_sniff(data, len, eof, &sn);
        if (sn.kind == EGRESS_SNIFF_MORE) {
                /* Nothing yet: a server that speaks first is served meanwhile, and the client's first bytes
                 * are still checked whenever they come. A start of something waits only so long. */
                if (len > 0 && c->state == GW_PEEKING && !c->timer)
                        (void) arm_timer(c, PEEK_MORE_TIMEOUT_USEC);
                return;
        }
        c->timer = sd_event_source_disable_unref(c->timer);
        /* judge() may go on asynchronously (a lookup): stop listening to the bytes until it ends. */
        tunnel_set_peek_waiter(c->tunnel, NULL);
        judge(c, &sn);
}

static void on_peek(Tunnel *t, void *userdata) {
        check_peek(userdata);
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        GatewayConn *c = userdata;

        if (c->state == GW_CONNECTING)
                deny_as(c, EGRESS_REASON_UNREACHABLE, SPACE_CODE_TIMEOUT, "connecting to %s:%u timed out",
                        c->addr_text, c->port);
        else if (c->state == GW_NAMING)
                deny(c, EGRESS_REASON_NO_NAME, "%s:%u has no IP rule and the connection named no host within %llu s",
                     c->addr_text, c->port, NAMING_TIMEOUT_USEC / 1000000ULL);
        else if (c->state == GW_PEEKING && c->tunnel) {
                const uint8_t *data;
                size_t len;
                bool eof;
                EgressSniff sn;

                /* judged as if the client had stopped there: half a request or a ClientHello is refused, half
                 * a line of some other protocol goes on as that protocol */
                c->timer = sd_event_source_disable_unref(c->timer);
                tunnel_held(c->tunnel, &data, &len, &eof);
                egress_sniff(data, len, true, &sn);
                tunnel_set_peek_waiter(c->tunnel, NULL);
                judge(c, &sn);
        }
        return 0;
}

static int arm_timer(GatewayConn *c, uint64_t usec) {
        c->timer = sd_event_source_disable_unref(c->timer);
        return sd_event_add_time_relative(c->manager->event, &c->timer, CLOCK_MONOTONIC, usec, 0, on_timeout, c);
}

static int on_connected(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        GatewayConn *c = userdata;
        int err = 0, r;
        socklen_t len = sizeof err;

        c->io = sd_event_source_disable_unref(c->io);
        c->timer = sd_event_source_disable_unref(c->timer);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
        if (err != 0) {
                deny(c, EGRESS_REASON_UNREACHABLE, "cannot connect to %s:%u: %s", c->addr_text, c->port, strerror(err));
                return 0;
        }
        c->opened_usec = now_usec_monotonic();
        r = tunnel_attach(c->tunnel, TAKE_FD(c->fd), c->addr_text);
        if (r < 0) {
                deny(c, EGRESS_REASON_INTERNAL, "cannot bridge the connection: %s", strerror(-r));
                return 0;
        }
        /* A name given as the target, or an address an IP rule allows: the first bytes still have to agree.
         * An address whose name was read from the first bytes already: open. */
        if (c->peek_name[0] && !c->has_target_name) {
                open_up(c);
                return 0;
        }
        c->state = GW_PEEKING;
        tunnel_set_peek_waiter(c->tunnel, on_peek);
        check_peek(c);
        return 0;
}

static void start_connect(GatewayConn *c) {
        union {
                struct sockaddr sa;
                struct sockaddr_in in;
                struct sockaddr_in6 in6;
        } sa = {};
        socklen_t len;
        int r;

        c->state = GW_CONNECTING;
        if (c->addr.family == AF_INET) {
                sa.in = (struct sockaddr_in) { .sin_family = AF_INET, .sin_port = htons(c->port) };
                memcpy(&sa.in.sin_addr, c->addr.a, 4);
                len = sizeof sa.in;
        } else {
                sa.in6 = (struct sockaddr_in6) { .sin6_family = AF_INET6, .sin6_port = htons(c->port) };
                memcpy(&sa.in6.sin6_addr, c->addr.a, 16);
                len = sizeof sa.in6;
        }
        c->fd = socket(c->addr.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0)
                return deny(c, EGRESS_REASON_INTERNAL, "cannot make a socket: %m");
        if (connect(c->fd, &sa.sa, len) < 0 && errno != EINPROGRESS)
                return deny(c, EGRESS_REASON_UNREACHABLE, "cannot connect to %s:%u: %m", c->addr_text, c->port);
        r = sd_event_add_io(c->manager->event, &c->io, c->fd, EPOLLOUT, on_connected, c);
        if (r >= 0)
                r = arm_timer(c, CONNECT_TIMEOUT_USEC);
        if (r < 0)
                deny(c, EGRESS_REASON_INTERNAL, "cannot watch the connection: %s", strerror(-r));
}

static void set_addr(GatewayConn *c, const EgressAddr *a) {
        c->addr = *a;
        egress_addr_format(a, c->addr_text);
}

static void on_target_resolved(Manager *m, void *userdata, int err, const EgressAddr *addrs, size_t n) {
        GatewayConn *c = userdata;
        EgressDecision first = {}, d;

        gateway_lookup_put(c->sandbox_id);
        if (!c->tunnel || c->state != GW_RESOLVING)
                goto out;
        if (err < 0 || n == 0) {
                deny(c, EGRESS_REASON_RESOLVE_FAILED, "cannot resolve %s: %s", c->target_name,
                     err == -ENOENT ? "no such name" : strerror(-err ?: ENOENT));
                goto out;
        }
        /* A name is only as safe as every address it has: one denied (a rebinding answer that adds 127.0.0.1 to
         * a public address) denies the name, as `egress test` says. Else the first address. */
        for (size_t i = 0; i < n; i++) {
                decide(c, c->target_name, &addrs[i], c->port, &d);
                if (i == 0)
                        first = d;
                if (!d.allowed) {
                        set_addr(c, &d.addr);
                        deny_decided(c, &d);
                        goto out;
                }
        }
        set_addr(c, &first.addr);
        rule_text(&first, c->rule, sizeof c->rule);
        start_connect(c);
out:
        conn_unref(c);
}

static void conn_ended(Tunnel *t, const TunnelStats *st, const char *why, void *userdata) {
        GatewayConn *c = userdata;

        c->tunnel = NULL;
        if (c->state == GW_OPEN)
                audit(c, "end", conn_host(c), why ? EGRESS_REASON_ABORTED : EGRESS_REASON_CLOSED, why, st);
        c->state = GW_DONE;
        c->io = sd_event_source_disable_unref(c->io);
        c->timer = sd_event_source_disable_unref(c->timer);
        c->defer = sd_event_source_disable_unref(c->defer);
        conn_unref(c);
}

static const TunnelOps conn_ops = {
        .ended = conn_ended,
};

/* A refusal before there is a connection object: the guest's CONNECT was malformed or over a limit. */
static void refuse_early(Manager *m, AgentConn *a, Sandbox *s, uint32_t stream, const char *via, const char *host,
                         uint16_t port, EgressReason reason, SpaceCode code, const char *msg) {
        EgressAuditEntry e = { .event = "deny", .via = via, .host = host, .port = port,
                               .reason = egress_reason_to_string(reason), .message = msg };

        egress_audit(m, gateway_sandbox_id(s), gateway_sandbox_data_dir(s), &e);
        channel_refuse_guest_stream(a, stream, code, msg);
}

/* Over the sandbox's share of open connections (SPACE_TUNNELS_MAX): refused, and logged once a burst. */
static void refuse_busy(Manager *m, AgentConn *a, Sandbox *s, uint32_t stream, const char *via, const char *host,
                        uint16_t port) {
        EgressAuditEntry e = { .event = "deny", .via = via, .host = host, .port = port,
                               .reason = egress_reason_to_string(EGRESS_REASON_BUSY),
                               .message = "too many open connections for this sandbox" };

        gateway_refused(m, s, GATEWAY_CONNECT, GATEWAY_LIMIT_SHARE, &e);
        channel_refuse_guest_stream(a, stream, SPACE_CODE_BUSY, e.message);
}

/* The sandbox's rate of CONNECTs, before anything else is read of one: a flood costs no more than this. */
static bool connect_admitted(Manager *m, AgentConn *a, Sandbox *s, uint32_t stream, const uint8_t *kv, size_t n) {
        EgressAuditEntry e = { .via = "proxy" };
        const char *via = NULL, *port = NULL;
        char msg[EGRESS_MESSAGE_MAX];

        /* what the first refusal of a burst logs; checked no further */
        (void) space_kv_get(kv, n, "host", &e.host);
        if (space_kv_get(kv, n, "via", &via) > 0 && streq(via, "transparent"))
                e.via = "transparent";
        if (space_kv_get(kv, n, "port", &port) > 0)
                e.port = (uint16_t) strtoul(port, NULL, 10);
        if (e.host && strlen(e.host) > EGRESS_HOST_MAX)
                e.host = NULL;
        if (gateway_admit(m, s, GATEWAY_CONNECT, &e, msg, sizeof msg))
                return true;
        channel_refuse_guest_stream(a, stream, SPACE_CODE_BUSY, msg);
        return false;
}

/* Reads host, port and via of a CONNECT; a malformed one is refused here, and -EINVAL returned. via is
 * returned as a static string, which outlives kv. */
static int connect_parse(Manager *m, AgentConn *a, Sandbox *s, uint32_t stream, const uint8_t *kv, size_t n,
                         const char **ret_host, const char **ret_via, uint16_t *ret_port) {
        const char *host = NULL, *port_s = NULL, *via = NULL;
        unsigned long port;
        char *end;

        if (space_kv_get(kv, n, "host", &host) <= 0 || space_kv_get(kv, n, "port", &port_s) <= 0 ||
            space_kv_get(kv, n, "via", &via) <= 0) {
                refuse_early(m, a, s, stream, "proxy", NULL, 0, EGRESS_REASON_INVALID, SPACE_CODE_INVALID,
                             "a CONNECT needs host, port and via");
                return -EINVAL;
        }
        if (!streq(via, "proxy") && !streq(via, "transparent")) {
                refuse_early(m, a, s, stream, "proxy", NULL, 0, EGRESS_REASON_INVALID, SPACE_CODE_INVALID,
                             "via must be proxy or transparent");
                return -EINVAL;
        }
        via = streq(via, "proxy") ? "proxy" : "transparent";
        errno = 0;
        port = strtoul(port_s, &end, 10);
        if (errno || *end || end == port_s || port == 0 || port > 65535) {
                refuse_early(m, a, s, stream, via, NULL, 0, EGRESS_REASON_INVALID, SPACE_CODE_INVALID,
                             "the port is not 1..65535");
                return -EINVAL;
        }
        if (strlen(host) > EGRESS_HOST_MAX) {
                refuse_early(m, a, s, stream, via, NULL, (uint16_t) port, EGRESS_REASON_INVALID,
                             SPACE_CODE_INVALID, "the host name is too long");
                return -EINVAL;
        }
        *ret_host = host;
        *ret_via = via;
        *ret_port = (uint16_t) port;
        return 0;
}

/* The connection object of an admitted CONNECT, with its policy and its tunnel; on failure the stream is
 * refused here. On success the tunnel holds the returned connection's first reference. */
static int conn_new_guest(Manager *m, AgentConn *a, Sandbox *s, uint32_t stream, const char *via,
                          const char *host, uint16_t port, GatewayConn **ret) {
        _cleanup_(error_done) Error e = {};
        GatewayConn *c;
        int r;

        c = calloc(1, sizeof *c);
        if (!c) {
                refuse_early(m, a, s, stream, via, host, port, EGRESS_REASON_INTERNAL, SPACE_CODE_BUSY,
                             "out of memory");
                return -ENOMEM;
        }
        c->refs = 1;
        c->manager = m;
        c->fd = -1;
        c->via = via;
        c->port = port;
        c->sandbox_id = strdup(gateway_sandbox_id(s));
        c->data_dir = strdup(gateway_sandbox_data_dir(s));
        if (!c->sandbox_id || !c->data_dir) {
                conn_unref(c);
                refuse_early(m, a, s, stream, via, host, port, EGRESS_REASON_INTERNAL, SPACE_CODE_BUSY,
                             "out of memory");
                return -ENOMEM;
        }
        r = gateway_policy_get(m, s, &c->policy, &e);
        if (r < 0) {
                conn_unref(c);
                refuse_early(m, a, s, stream, via, host, port, EGRESS_REASON_INTERNAL, SPACE_CODE_DENIED,
                             e.message ?: "the sandbox's egress policy cannot be built");
                return r;
        }
        r = tunnel_accept_guest(a, stream, &conn_ops, c, &c->tunnel);
        if (r == -EMFILE) {
                conn_unref(c);
                refuse_busy(m, a, s, stream, via, host, port);
                return r;
        }
        if (r < 0) {
                conn_unref(c);
                refuse_early(m, a, s, stream, via, host, port, EGRESS_REASON_INVALID, SPACE_CODE_INVALID,
                             "a stream already in use");
                return r;
        }
        *ret = c;
        return 0;
}

/* A CONNECT to an IP address: decided here, unless it is a stand-in's address, whose name is then returned
 * in *host to be decided as a name. Returns true when decided. */
static bool connect_literal(GatewayConn *c, const char *via, const char **host) {
        EgressDecision d;
        EgressAddr literal;
        const char *h = *host;
        char buf[EGRESS_HOST_MAX + 1];

        /* "[::1]" as a proxy may be given it */
        if (h[0] == '[' && h[strlen(h) - 1] == ']') {
                (void) snprintf(buf, sizeof buf, "%.*s", (int) strlen(h) - 2, h + 1);
                h = buf;
        }
        if (egress_addr_parse_literal(h, &literal) < 0) {
                strcpy(c->target_name, "");
                deny(c, EGRESS_REASON_INVALID, "'%s' is no IP address", *host);
                return true;
        }
        if (standin_name(c->sandbox_id, &literal)) {
                *host = standin_name(c->sandbox_id, &literal);
                return false;
        }
        decide(c, NULL, &literal, c->port, &d);
        set_addr(c, &d.addr);
        if (d.allowed) {
                c->ip_allowed = true;
                rule_text(&d, c->rule, sizeof c->rule);
                start_connect(c);
                return true;
        }
        /* Captured without a name: the first bytes may still name an allowed host at this address. A
         * program that used the proxy gave the address itself: there is no name to wait for. */
        if (d.reason == EGRESS_REASON_NO_RULE && streq(via, "transparent")) {
                c->state = GW_NAMING;
                tunnel_set_peek_waiter(c->tunnel, on_peek);
                if (arm_timer(c, NAMING_TIMEOUT_USEC) < 0)
                        deny_as(c, EGRESS_REASON_INTERNAL, SPACE_CODE_DENIED, "cannot time the connection");
                return true;
        }
        deny_decided(c, &d);
        return true;
}

/* A CONNECT to a name: checked against the policy, then resolved. */
static void connect_name(Manager *m, GatewayConn *c, const char *host) {
        if (egress_host_normalize(host, c->target_name) < 0) {
                c->target_name[0] = 0;
                return deny(c, EGRESS_REASON_INVALID, "'%.100s' is not an exact host name", host);
        }
        c->has_target_name = true;
        {
                const char *why;

                if (!egress_name_permitted(&c->policy->policy, c->target_name, NULL, &why))
                        return deny(c, EGRESS_REASON_NO_RULE, "%s: %s", c->target_name, why);
        }
        if (!gateway_lookup_take(c->sandbox_id))
                return deny(c, EGRESS_REASON_BUSY, "too many names being resolved for this sandbox");
        c->state = GW_RESOLVING;
        if (egress_resolve(m, c->target_name, on_target_resolved, conn_ref(c)) < 0) {
                gateway_lookup_put(c->sandbox_id);
                conn_unref(c);
                deny(c, EGRESS_REASON_RESOLVE_FAILED, "cannot resolve %s", c->target_name);
        }
}

static void on_guest_connect(AgentConn *a, uint32_t stream, const uint8_t *kv, size_t n) {
        Sandbox *s = agent_sandbox(a);
        Manager *m = s ? gateway_sandbox_manager(s) : NULL;
        const char *host, *via;
        GatewayConn *c;
        uint16_t port;

        if (!m)
                return;
        if (!connect_admitted(m, a, s, stream, kv, n))
                return;
        if (connect_parse(m, a, s, stream, kv, n, &host, &via, &port) < 0)
                return;
        if (conn_new_guest(m, a, s, stream, via, host, port, &c) < 0)
                return;
        /* From here the tunnel holds c's first reference: conn_ended drops it. */

        if ((egress_host_is_numeric(host) || strchr(host, ':')) && connect_literal(c, via, &host))
                return;
        connect_name(m, c, host);
}

/* ---- DNS ---- */

typedef struct DnsQuestion {
        Manager *manager;
        char *sandbox_id;
        uint32_t stream;
        int family;
        char name[EGRESS_HOST_MAX + 1];
        uint16_t port;
        GatewayPolicy *policy;        /* the one the question was decided with, for the answer too */
} DnsQuestion;

static void dns_question_free(DnsQuestion *q) {
        gateway_policy_unref(q->policy);
        free(q->sandbox_id);
        free(q);
}

static void dns_audit(Manager *m, Sandbox *s, const char *name, const char *addr, EgressReason reason,
                      const char *msg) {
        EgressAuditEntry e = { .event = "dns", .via = "dns", .host = name, .addr = addr,
                               .reason = egress_reason_to_string(reason), .message = msg };

        egress_audit(m, gateway_sandbox_id(s), gateway_sandbox_data_dir(s), &e);
}

static void on_dns_resolved(Manager *m, void *userdata, int err, const EgressAddr *addrs, size_t n) {
        DnsQuestion *q = userdata;
        Sandbox *s = gateway_sandbox_find(m, q->sandbox_id);
        EgressAddr ok[SPACE_RESOLVE_ADDRS_MAX];
        char first_denial[EGRESS_MESSAGE_MAX] = "", text[EGRESS_ADDR_STRLEN];
        size_t n_ok = 0;
        SpaceBuf kv = {};

        gateway_lookup_put(q->sandbox_id);
        if (!s || !gateway_sandbox_agent(s))
                goto out;
        if (err < 0) {
                dns_audit(m, s, q->name, NULL, EGRESS_REASON_NXDOMAIN,
                          err == -ENOENT ? "no such name" : strerror(-err));
                channel_refuse_guest_stream(gateway_sandbox_agent(s), q->stream,
                                            err == -ENOENT ? SPACE_CODE_NXDOMAIN : SPACE_CODE_UNREACHABLE,
                                            err == -ENOENT ? "no such name" : strerror(-err));
                goto out;
        }
        /* Every address is decided once: as for a connection, one denied address (of either family) denies the
         * name; the allowed ones of the family asked for are the answer. */
        for (size_t i = 0; i < n; i++) {
                EgressQuery eq = { .host = q->name, .addr = addrs[i], .port = q->port, .self_port = gw.self_port,
                                   .self_tls_port = gw.self_tls_port };
                EgressDecision d;

                if (egress_decide(q->policy->policy.sources, q->policy->policy.n_sources, &eq, &d) < 0)
                        continue;
                if (!d.allowed) {
                        if (!first_denial[0])
                                (void) snprintf(first_denial, sizeof first_denial, "%s", d.message);
                        continue;
                }
                if (addrs[i].family != q->family || n_ok >= SPACE_RESOLVE_ADDRS_MAX)
                        continue;
                if (d.cls.cls == EGRESS_CLASS_LOOPBACK) {
                        /* the guest's loopback is its own: answer the stand-in (A) or nothing (AAAA) */
                        if (q->family == AF_INET && standin_get(q->sandbox_id, q->name, &ok[n_ok]))
                                n_ok++;
                        continue;
                }
                ok[n_ok++] = d.addr.family == q->family ? d.addr : addrs[i];
        }
        if (first_denial[0]) {
                dns_audit(m, s, q->name, NULL, EGRESS_REASON_DENIED, first_denial);
                channel_refuse_guest_stream(gateway_sandbox_agent(s), q->stream, SPACE_CODE_DENIED, first_denial);
                goto out;
        }
        /* No address of this family (an AAAA question for a name with only A records): an empty answer. */
        for (size_t i = 0; i < n_ok; i++) {
                egress_addr_format(&ok[i], text);
                if (space_kv_add(&kv, "addr", text) < 0)
                        goto out;
        }
        if (space_kv_addf(&kv, "ttl", "%u", DNS_TTL_SEC) < 0)
                goto out;
        if (n_ok > 0) {
                dns_remember(q->sandbox_id, q->name, ok, n_ok);
                egress_addr_format(&ok[0], text);
                dns_audit(m, s, q->name, text, EGRESS_REASON_ALLOWED, NULL);
        }
        (void) agent_send(gateway_sandbox_agent(s), SPACE_F_OK, 0, q->stream, kv.data, kv.len);
out:
        space_buf_done(&kv);
        dns_question_free(q);
}

static void on_guest_resolve(AgentConn *a, uint32_t stream, const uint8_t *kv, size_t n) {
        Sandbox *s = agent_sandbox(a);
        Manager *m = s ? gateway_sandbox_manager(s) : NULL;
        _cleanup_(error_done) Error e = {};
        const char *name = NULL, *family = NULL, *why;
        char norm[EGRESS_HOST_MAX + 1], msg[EGRESS_MESSAGE_MAX];
        EgressAuditEntry over = { .via = "dns" };
        GatewayPolicy *p = NULL;
        DnsQuestion *q;
        uint16_t port;

        if (!m)
                return;
        /* Before anything else, so that a flood costs no more than this. */
        (void) space_kv_get(kv, n, "name", &over.host);
        if (over.host && strlen(over.host) > EGRESS_HOST_MAX)
                over.host = NULL;
        if (!gateway_admit(m, s, GATEWAY_RESOLVE, &over, msg, sizeof msg))
                return channel_refuse_guest_stream(a, stream, SPACE_CODE_BUSY, msg);
        if (space_kv_get(kv, n, "name", &name) <= 0 || space_kv_get(kv, n, "family", &family) <= 0 ||
            (!streq(family, "4") && !streq(family, "6")))
                return channel_refuse_guest_stream(a, stream, SPACE_CODE_INVALID,
                                                   "a RESOLVE needs name and family 4 or 6");
        if (strlen(name) > EGRESS_HOST_MAX || egress_host_normalize(name, norm) < 0) {
                dns_audit(m, s, NULL, NULL, EGRESS_REASON_INVALID, "a question for something that is no host name");
                return channel_refuse_guest_stream(a, stream, SPACE_CODE_INVALID, "not a host name");
        }
        if (gateway_policy_get(m, s, &p, &e) < 0)
                return channel_refuse_guest_stream(a, stream, SPACE_CODE_DENIED,
                                                   "the sandbox's egress policy cannot be built");
        if (!egress_name_permitted(&p->policy, norm, &port, &why)) {
                gateway_policy_unref(p);
                /* Never resolved: the question goes no further than this log, so it cannot carry data out. */
                dns_audit(m, s, norm, NULL, EGRESS_REASON_NO_RULE, why);
                return channel_refuse_guest_stream(a, stream, SPACE_CODE_NXDOMAIN, why);
        }
        if (!gateway_lookup_take(gateway_sandbox_id(s))) {
                EgressAuditEntry busy = { .event = "deny", .via = "dns", .host = norm,
                                          .reason = egress_reason_to_string(EGRESS_REASON_BUSY),
                                          .message = "too many names being resolved for this sandbox" };

                gateway_policy_unref(p);
                gateway_refused(m, s, GATEWAY_RESOLVE, GATEWAY_LIMIT_SHARE, &busy);
                return channel_refuse_guest_stream(a, stream, SPACE_CODE_BUSY, busy.message);
        }
        q = calloc(1, sizeof *q);
        if (!q || !(q->sandbox_id = strdup(gateway_sandbox_id(s)))) {
                free(q);
                gateway_policy_unref(p);
                gateway_lookup_put(gateway_sandbox_id(s));
                return channel_refuse_guest_stream(a, stream, SPACE_CODE_BUSY, "out of memory");
        }
        q->manager = m;
        q->stream = stream;
        q->family = streq(family, "4") ? AF_INET : AF_INET6;
        q->port = port;
        q->policy = p;
        strcpy(q->name, norm);
        if (egress_resolve(m, norm, on_dns_resolved, q) < 0) {
                gateway_lookup_put(gateway_sandbox_id(s));
                dns_question_free(q);
                channel_refuse_guest_stream(a, stream, SPACE_CODE_BUSY, "cannot resolve now");
        }
}

void egress_gateway_setup(uint16_t self_port, uint16_t self_tls_port) {
        static const ChannelGuestOps ops = {
                .connect = on_guest_connect,
                .resolve = on_guest_resolve,
        };

        gw.self_port = self_port;
        gw.self_tls_port = self_tls_port;
        channel_set_guest_ops(&ops);
}
