/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The gateway's own pieces (egress/), behind the door egress/egress.h: what it reads from a connection's first
 * bytes (sniff.c), how it resolves names (resolve.c) and its audit log (audit.c). */

#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/manager.h"
#include "egress/egress.h"

/* sniff.c: what a client's first bytes say about where it means to go. Pure: no I/O. */
#define EGRESS_SNIFF_MAX (16U * 1024U + 5U)   /* a TLS record, or an HTTP request head */

typedef enum EgressSniffKind {
        EGRESS_SNIFF_MORE,       /* not enough bytes yet */
        EGRESS_SNIFF_TLS,        /* a TLS ClientHello */
        EGRESS_SNIFF_HTTP,       /* an HTTP/1 request head */
        EGRESS_SNIFF_OTHER,      /* some other protocol: no name to read */
        EGRESS_SNIFF_BAD,        /* looks like TLS or HTTP but is malformed: why says how */
} EgressSniffKind;

typedef struct EgressSniff {
        EgressSniffKind kind;
        bool has_name;           /* SNI, or an HTTP Host that is a name */
        char name[EGRESS_HOST_MAX + 1];
        bool has_literal;        /* an HTTP Host that is an IP literal */
        EgressAddr literal;
        const char *why;         /* for BAD */
        /* HTTP: the head's bytes (through its empty line) and how the body after it is framed */
        size_t head_len;
        bool chunked;            /* Transfer-Encoding ending in chunked */
        uint64_t length;         /* else Content-Length (0: none, no body) */
        bool upgrade;            /* Upgrade: websocket with Connection: upgrade */
        bool http10;
} EgressSniff;

/* eof: the client will send nothing more (a short request is then judged as it is). An HTTP head is read
 * strictly (RFC 9112): CRLF line ends only, no control bytes, header names that are tokens, one Host, one
 * Content-Length of digits, no Transfer-Encoding but one ending in chunked and never with a Content-Length:
 * whatever lenient servers could read otherwise is refused, so that they and the gateway agree on the Host
 * and on where the next request starts. */
void egress_sniff(const uint8_t *p, size_t n, bool eof, EgressSniff *ret);

/* http-stream.c: the requests of a plain HTTP connection, one after another (RFC 9112 6.3): a head, its body
 * by Content-Length or chunked framing (a request without either has none), then the next head. The gateway
 * lets bytes through only as far as this says they belong to a request whose head it checked. Pure: no I/O.
 * A websocket upgrade on the connection's first request leaves the stream to the gateway, which has seen
 * the server's answer: switched (101), the rest is the new protocol's; else requests go on. */
typedef enum EgressHttpStep {
        EGRESS_HTTP_MORE,        /* no verdict on the bytes yet: hold them, and give more */
        EGRESS_HTTP_HEAD,        /* a request head, *ret_used bytes: *ret_head says what it names */
        EGRESS_HTTP_BODY,        /* *ret_used bytes of the request's body or its chunk framing */
        EGRESS_HTTP_WAIT,        /* an upgrade was asked for: hold what follows until egress_http_stream_switched() */
        EGRESS_HTTP_BAD,         /* framing no two servers would read alike: *ret_why */
} EgressHttpStep;

typedef struct EgressHttpStream {
        unsigned state;
        uint64_t left;           /* bytes of a body or chunk */
        size_t scanned;          /* bytes of a head looked at already without finding its end */
        size_t trailer;          /* bytes of the trailer section */
        unsigned requests;
} EgressHttpStream;

/* p[0..n) are the stream's bytes from where the last step's *ret_used ended (the held ones and any that
 * came since); eof: the client sends no more. */
EgressHttpStep egress_http_stream_step(EgressHttpStream *s, const uint8_t *p, size_t n, bool eof, size_t *ret_used,
                                       EgressSniff *ret_head, const char **ret_why);
/* The server's answer to an upgrade (EGRESS_HTTP_WAIT): switched or not. */
void egress_http_stream_switched(EgressHttpStream *s, bool switched);
/* The status code of a response's first bytes: 1 with *ret_status; 0: not enough bytes; -EBADMSG: no status
 * line. */
int egress_http_status(const uint8_t *p, size_t n, unsigned *ret_status);
/* The server's first answer on a connection that asked for an upgrade, fed as its bytes come (the plain gate's
 * watch and the interception's way back both keep one): 0 no verdict yet; 1 known, *ret_switched whether it is
 * 101 (bytes that are no status line are not). */
typedef struct EgressHttpFirstAnswer {
        uint8_t bytes[13];
        size_t n;
} EgressHttpFirstAnswer;
int egress_http_first_answer(EgressHttpFirstAnswer *a, const uint8_t *p, size_t n, bool *ret_switched);

/* The hosts file alone (tests, and the `hosts` mode): 1 and the addresses, 0 when it has no such name. */
int egress_hosts_lookup(const char *path, const char *name, EgressAddr *addrs, size_t max, size_t *ret_n);

/* audit.c: the per-sandbox log of decisions (space-egress(5), "Audit"), JSON lines in DATA_DIR/egress.log,
 * rotated to egress.log.1 at EGRESS_AUDIT_FILE_MAX. */
#define EGRESS_AUDIT_FILE_MAX (1024U * 1024U)

typedef struct EgressAuditEntry {
        const char *event;       /* "allow", "deny", "end" (an allowed connection closed), "dns" */
        const char *via;         /* "proxy", "transparent", "dns" */
        const char *host;        /* the name asked for, NULL: none */
        const char *addr;        /* the address, NULL: none */
        uint16_t port;
        const char *reason;      /* egress_reason_to_string(), or the gateway's own ("sni_mismatch", ...) */
        const char *rule;        /* "profile NAME: allow ...", NULL: none */
        const char *message;
        uint64_t bytes_up, bytes_down;
        uint64_t duration_ms;
} EgressAuditEntry;

void egress_audit(Manager *m, const char *sandbox_id, const char *data_dir, const EgressAuditEntry *e);

/* gateway-sandbox.c: what the gateway keeps of each sandbox between frames: its policy, built once from the
 * settings in force (again once a reload replaced them); its lookups in flight; its rates, and its refusals
 * logged once a burst. */
typedef struct GatewayPolicy {
        unsigned refs;
        EgressPolicy policy;
        EgressSettings *settings;    /* a reference: policy's sources point into these settings' rules */
        char **placeholders;         /* secret name, placeholder, ...: those of its bindings' secrets */
} GatewayPolicy;

/* What the gateway reads of a sandbox, through the ops sandbox/ registers (egress_set_sandbox_ops()). */
Sandbox *gateway_sandbox_find(Manager *m, const char *id);
Manager *gateway_sandbox_manager(Sandbox *s);
const char *gateway_sandbox_id(Sandbox *s);
const char *gateway_sandbox_data_dir(Sandbox *s);
AgentConn *gateway_sandbox_agent(Sandbox *s);

/* A reference to the sandbox's policy, built when it has none (-errno and reterr when it cannot be). */
int gateway_policy_get(Manager *m, Sandbox *s, GatewayPolicy **ret, Error *reterr);
GatewayPolicy *gateway_policy_ref(GatewayPolicy *p);
GatewayPolicy *gateway_policy_unref(GatewayPolicy *p);   /* NULL */

/* Counts a lookup against the sandbox's share and everyone's; false when there are too many in flight. */
bool gateway_lookup_take(const char *sandbox_id);
void gateway_lookup_put(const char *sandbox_id);

typedef enum GatewayKind {
        GATEWAY_RESOLVE,
        GATEWAY_CONNECT,
        _GATEWAY_KIND_MAX,
} GatewayKind;

/* Takes a token of the sandbox's bucket for kind. false: over its rate, refused; e (via, host, port as far as
 * known) is then filled with the refusal (reason rate_limited, the message in ret_message) and logged if it is
 * the first of a burst. */
bool gateway_admit(Manager *m, Sandbox *s, GatewayKind kind, EgressAuditEntry *e, char *ret_message, size_t size);
typedef enum GatewayLimit {
        GATEWAY_LIMIT_RATE,      /* the sandbox's rate (rate_limited) */
        GATEWAY_LIMIT_SHARE,     /* its lookups or connections in flight (busy) */
        _GATEWAY_LIMIT_MAX,
} GatewayLimit;

/* A refusal over one of the sandbox's limits: logged if it is the first of a burst of them, else counted (and
 * the count logged when the burst ends, or a minute on if it does not). */
void gateway_refused(Manager *m, Sandbox *s, GatewayKind kind, GatewayLimit limit, const EgressAuditEntry *e);
void gateway_sandbox_forget(const char *sandbox_id);

/* egress.c: the profile NAME of c, made when new (checked: ERROR_INVALID_ARGUMENT for a bad name). */
int egress_profile_get(EgressConfig *c, const char *name, EgressProfile **ret, Error *reterr);

/* binding.c: a secret's value and what stands for it (a placeholder, "{value}", "${e2b.secrets.NAME}"). */
typedef struct EgressValue {
        const char *ref;
        const char *value;
        size_t value_len;
} EgressValue;
/* The secrets of a binding as one request gets them: a header of its own, or a placeholder's replacement. */
typedef struct EgressInjection {
        const char *header;          /* its name (matched without case); NULL: replace a placeholder in header values */
        const char *template;        /* with header: its value, where each values[i].ref goes as values[i].value */
        const EgressValue *values;   /* without header: one, whose ref is the placeholder */
        size_t n_values;
} EgressInjection;
/* The request head (as egress_http_stream_step() gave it, through its empty line) with inj applied into out:
 * a header binding's header replaces every one of that name the client sent and goes last; a placeholder is
 * replaced in header values only, never in the request line, a name, or the headers that frame the request or
 * name its host (Host, Content-Length, Transfer-Encoding, Connection, ...). At most max bytes (-E2BIG). *ret_done:
 * how many headers were added and placeholders replaced. */
int egress_head_rewrite(const uint8_t *head, size_t n, const EgressInjection *inj, size_t n_inj, size_t max,
                        SpaceBuf *out, unsigned *ret_done);

/* intercept.c: HTTPS to a host a secret is bound to, terminated and re-encrypted (ARCHITECTURE.md, "Secrets").
 * A request head with its secrets is at most this: the head itself is bounded by the sniffer, each value by the
 * secret store. */
#define EGRESS_INTERCEPT_HEAD_MAX (64U * 1024U)

typedef struct EgressIntercept EgressIntercept;

/* How an intercepted connection ended: reason ALLOWED and an empty why for a normal end, else why. Bytes and
 * requests are the plaintext's. */
typedef struct EgressInterceptEnd {
        uint64_t up, down;
        unsigned requests;
        EgressReason reason;
        char why[EGRESS_MESSAGE_MAX];
} EgressInterceptEnd;

typedef struct EgressInterceptOps {
        /* A request head from the guest (through its empty line, as the sniffer read it into sn), the
         * request-th on the connection, on the loop: 0 it goes as it is; 1 *out goes in its place; -1 the
         * connection ends (the callee said why). */
        int (*head)(void *userdata, const uint8_t *p, size_t n, const EgressSniff *sn, unsigned request,
                    SpaceBuf *out);
        /* The threads are done and have closed both sides; the interception is freed right after. */
        void (*ended)(void *userdata, const EgressInterceptEnd *e);
} EgressInterceptOps;

/* Stands between the guest and the server in two steps: new makes it, and *ret_tunnel_fd, the socket the tunnel
 * is to carry the guest's bytes to from now on (tunnel_swap_socket()); go takes the server's socket (connected
 * to host; stays the caller's on failure, when the interception is still to be abandoned) and starts. ops are
 * called on the loop, the last one ended. trust_file: egress_tls_ca, trusted for servers besides the host's
 * store (NULL: none). -errno with reterr. */
int egress_intercept_new(Manager *m, const char *host, const char *trust_file, const EgressInterceptOps *ops,
                         void *userdata, EgressIntercept **ret, int *ret_tunnel_fd, Error *reterr);
int egress_intercept_go(EgressIntercept *x, int server_fd);
void egress_intercept_abandon(EgressIntercept *x);

/* intercept-creds.c: the certificate shown for an intercepted host (from the daemon's CA, cached per host for days
 * and shared by its connections), and the trust servers are verified against (the host's store and trust_file,
 * egress_tls_ca, read again when the file changed). Loop only; the credentials are only read by the threads. */
typedef struct InterceptCert InterceptCert;
int intercept_cert_get(Manager *m, const char *host, InterceptCert **ret, Error *reterr);
void intercept_cert_unref(InterceptCert *c);
gnutls_certificate_credentials_t intercept_cert_credentials(const InterceptCert *c);
int intercept_trust_get(const char *trust_file, gnutls_certificate_credentials_t *ret, Error *reterr);
