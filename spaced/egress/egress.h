/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The egress subsystem (ARCHITECTURE.md, decision 10): the policy (profiles and rules parsed from spaced.conf
 * and SPACE_EGRESS_PROFILES, the address classes no sandbox reaches unless an IP rule names them, IP literals
 * in every form the guest may write them, and the decision with its reason: pure functions, no I/O, no
 * logging, -errno and an Error), and the gateway that applies it to every connection and DNS question a
 * sandbox's agent tunnels to the host (gateway.c), with its audit log. The format: space-egress(5). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/error.h"
#include "proto.h"

typedef struct Manager Manager;

#define EGRESS_PROFILE_NAME_MAX 63
#define EGRESS_HOST_MAX 253
#define EGRESS_RULES_MAX 4096      /* per profile, per base policy, per sandbox */
#define EGRESS_PROFILES_MAX 256
#define EGRESS_ADDR_STRLEN 46      /* INET6_ADDRSTRLEN */
#define EGRESS_MESSAGE_MAX 384

/* An address, IPv4 in a[0..3] (network order), IPv6 in a[0..15]. */
typedef struct EgressAddr {
        int family;                /* AF_INET or AF_INET6 */
        uint8_t a[16];
} EgressAddr;

typedef enum EgressAction {
        EGRESS_ALLOW,
        EGRESS_DENY,
} EgressAction;

typedef struct EgressRule {
        EgressAction action;
        char *host;                /* an exact domain name, lowercase, no final dot; NULL: an address rule */
        EgressAddr addr;           /* an address rule's network, host bits zero */
        unsigned prefix;
        uint16_t port_min, port_max; /* 0, 0: every port but SMTP's (a rule must name those) */
        char *text;                /* canonical, as shown: "allow 10.1.0.0/16:5432" */
} EgressRule;

typedef struct EgressRules {
        EgressRule *rules;
        size_t n;
} EgressRules;

/* A secret binding: which secrets go to which destinations only, and how. An egress_secret line (binding.c)
 * binds one secret, as a header of its own (header: its name, template: its value with "{value}" where the
 * secret goes) or, with header NULL, in place of the sandbox's placeholder wherever that appears in a request's
 * header values. A sandbox's own binding (E2B's network.rules) is always a header, whose value may name any
 * number of secrets as ${e2b.secrets.NAME}, with literal text around them. */
typedef struct EgressBinding {
        char **secrets;              /* the secrets it uses, each once: an egress_secret line's one */
        EgressRules dests;           /* allow rules naming hosts (and ports) */
        char *header;
        char *template;
        char **refs;                 /* with header: what stands for secrets[i] in template */
        char *text;                  /* the line, as shown */
} EgressBinding;

#define EGRESS_SECRET_REF_PREFIX "${e2b.secrets."
#define EGRESS_TEMPLATE_MAX 4096U    /* a header binding's value, before its secrets go in */
#define EGRESS_OWN_BINDINGS_MAX 64U  /* per sandbox */

typedef struct EgressProfile {
        char *name;
        bool is_default;
        EgressRules rules;
        EgressBinding *bindings;
        size_t n_bindings;
} EgressProfile;

/* What the daemon loaded: the base policy every sandbox gets, and the profiles. */
typedef struct EgressConfig {
        EgressRules base;
        EgressProfile *profiles;
        size_t n_profiles;
} EgressConfig;

/* How fast one sandbox may ask the gateway (gateway-sandbox.c): token buckets of a rate a second and a burst,
 * for DNS questions (RESOLVE) and connections (CONNECT). A name lookup is two questions (A and AAAA), a
 * connection through the proxy none. The defaults are several times what the busiest client we know (a
 * parallel package download) asks for, and far below a guest that floods. */
typedef struct EgressLimits {
        unsigned resolve_rate;       /* egress_resolve_rate: questions a second */
        unsigned resolve_burst;      /* egress_resolve_burst: questions at once */
        unsigned connect_rate;       /* egress_connect_rate: connections a second */
        unsigned connect_burst;      /* egress_connect_burst: connections at once */
} EgressLimits;

#define EGRESS_RESOLVE_RATE_DEFAULT 200U
#define EGRESS_RESOLVE_BURST_DEFAULT 800U
#define EGRESS_CONNECT_RATE_DEFAULT 100U
#define EGRESS_CONNECT_BURST_DEFAULT 400U
#define EGRESS_LIMIT_MAX 1000000U

/* The daemon's egress settings (settings.c, space-egress(5)), held by the Manager: the policy from
 * egress_base and egress_profile lines and SPACE_EGRESS_PROFILES; the egress_default names, applied by
 * egress_settings_finish() once every source is read; the gateway's resolver (names are looked up in
 * hosts_file, hosts(5) lines, first, then, unless egress_resolve = hosts, by the system's resolver); the
 * gateway's rates (0 fields: the defaults, egress_settings_limits()). */
typedef struct EgressSettings {
        unsigned refs;               /* the Manager's, and each gateway policy built from these settings */
        EgressConfig policy;
        char **defaults;
        char *hosts_file;
        char *tls_ca_file;           /* egress_tls_ca: servers of intercepted HTTPS may also be signed by these */
        bool hosts_only;
        EgressLimits limits;
} EgressSettings;

/* Settings are replaced whole on a reload; a policy built from the old ones keeps them by its reference. */
EgressSettings *egress_settings_new(void);
EgressSettings *egress_settings_ref(EgressSettings *s);
EgressSettings *egress_settings_unref(EgressSettings *s);   /* NULL */
void egress_settings_done(EgressSettings *s);
/* Makes spaced.conf's egress keys s's: call before config_load. */
int egress_settings_register(EgressSettings *s, Config *c);
/* SPACE_EGRESS_PROFILES: an absolute path to a file of egress_profile, egress_default and egress_base lines,
 * or profiles inline ("NAME: allow ...; deny ...; NAME2: allow ..."). NULL or empty: nothing. */
int egress_settings_load_env(EgressSettings *s, const char *value, Error *reterr);
/* Marks the default profiles, checking that each one named exists. */
int egress_settings_finish(EgressSettings *s, Error *reterr);
/* s's rates with the defaults filled in. */
EgressLimits egress_settings_limits(const EgressSettings *s);

void egress_rules_done(EgressRules *r);
void egress_config_done(EgressConfig *c);

bool egress_profile_name_valid(const char *s);
/* Normalises a domain name (lowercase, final dot dropped) into ret. -EINVAL for what is no exact host name:
 * wildcards, empty labels, bad characters, a name whose last label is a number (an IPv4 literal in
 * disguise); -ENAMETOOLONG. */
int egress_host_normalize(const char *s, char ret[static EGRESS_HOST_MAX + 1]);
/* Parses an IP literal as a client would: IPv4 in inet_aton's forms (decimal "2130706433", octal
 * "0177.0.0.1", hex "0x7f.1", short "127.1"), IPv6 with or without brackets. -EINVAL when s is none. */
int egress_addr_parse_literal(const char *s, EgressAddr *ret);
/* Whether s is meant as an IPv4 literal (its last label is a number): such a name never reaches a resolver
 * as a name; it is a literal or an error. */
bool egress_host_is_numeric(const char *s);
void egress_addr_format(const EgressAddr *a, char buf[static EGRESS_ADDR_STRLEN]);

/* One target ("example.com", "10.0.0.0/8:5432", "[2001:db8::1]:443", "1.2.3.4:8000-8100") as a rule added to
 * rules. where names the owner in errors ("profile pypi"). ERROR_INVALID_ARGUMENT naming where and the rule. */
int egress_rule_parse(EgressRules *rules, EgressAction action, const char *target, const char *where, Error *reterr);
/* Clauses "allow T[, T...]; deny T[, T...]" added to rules. */
int egress_rules_parse(EgressRules *rules, const char *text, const char *where, Error *reterr);
/* "NAME: CLAUSES": adds the rules to profile NAME, making it when new (lines naming a profile again add to
 * it). */
int egress_profile_parse(EgressConfig *c, const char *text, Error *reterr);
/* Several profiles, ';'-separated: a segment "NAME: ..." starts one, "allow ..."/"deny ..." continue it. */
int egress_profiles_parse(EgressConfig *c, const char *text, Error *reterr);
/* Marks the profiles named (comma-separated) default; ERROR_EGRESS_PROFILE_NOT_FOUND for an unknown one. */
int egress_set_defaults(EgressConfig *c, const char *names, Error *reterr);
const EgressProfile *egress_profile_find(const EgressConfig *c, const char *name);
/* The profiles a create gets: those requested (each must exist: ERROR_EGRESS_PROFILE_NOT_FOUND; duplicates
 * dropped) or, with requested NULL, the default ones. *ret is a new list, empty when there are none. */
int egress_profiles_select(const EgressConfig *c, char *const *requested, char ***ret, Error *reterr);
/* "PROFILE: SECRET HOST[:PORT][, ...] [header NAME: VALUE]" (egress_secret, space-egress(5)): a binding added
 * to PROFILE (made when new). ERROR_INVALID_ARGUMENT naming the profile, the secret and what is wrong. */
int egress_binding_parse(EgressConfig *c, const char *text, Error *reterr);
void egress_binding_done(EgressBinding *b);
/* A sandbox's own binding, "HOST[, HOST...] header NAME: VALUE" with ${e2b.secrets.NAME} in VALUE for each
 * secret it uses, into *ret. ERROR_INVALID_ARGUMENT saying what is wrong. */
int egress_binding_parse_own(const char *text, EgressBinding *ret, Error *reterr);
/* Whether b applies to a connection to host (a normalised name; NULL: none) and port. */
bool egress_binding_applies(const EgressBinding *b, const char *host, uint16_t port);
/* The names of the secrets the profiles bind, each once (NULL: none). */
int egress_profiles_secrets(const EgressConfig *c, char *const *profiles, char ***ret);
/* The variable a sandbox holds a secret's placeholder in: SPACE_SECRET_ and the name, upper case, with '_'
 * for '.' and '-'. And whether value is a placeholder's shape ("space-secret-", the name, "-", 16 hex). */
int egress_placeholder_variable(const char *secret, char **ret);
bool egress_placeholder_valid(const char *secret, const char *value);

/* Checks per-sandbox allow or deny entries (targets as in a rule). */
int egress_list_check(char *const *list, EgressAction action, const char *what, Error *reterr);

/* E2B's network.allowOut, network.denyOut and allow_internet_access as a sandbox's own allow and deny lists
 * (E2B's allows win over the denies that hold them; here denies win, so those denies are dropped: see
 * egress.c). The lists are new (NULL when empty); ERROR_INVALID_ARGUMENT names the option and the entry. */
int egress_lists_from_e2b(char *const *allow_out, char *const *deny_out, bool internet, char ***ret_allow,
                          char ***ret_deny, Error *reterr);

/* Address classes no sandbox reaches unless an IP rule inside the class names them. */
typedef enum EgressClass {
        EGRESS_CLASS_PUBLIC,
        EGRESS_CLASS_THIS_NETWORK,    /* 0.0.0.0/8, :: */
        EGRESS_CLASS_LOOPBACK,
        EGRESS_CLASS_PRIVATE,
        EGRESS_CLASS_SHARED,          /* 100.64.0.0/10, carrier-grade NAT */
        EGRESS_CLASS_LINK_LOCAL,
        EGRESS_CLASS_METADATA,        /* cloud instance metadata */
        EGRESS_CLASS_UNIQUE_LOCAL,
        EGRESS_CLASS_MULTICAST,
        EGRESS_CLASS_BROADCAST,
        EGRESS_CLASS_DOCUMENTATION,
        EGRESS_CLASS_BENCHMARKING,
        EGRESS_CLASS_RESERVED,
        EGRESS_CLASS_NAT64_LOCAL,     /* 64:ff9b:1::/48: maps to whatever its operator chose */
        _EGRESS_CLASS_MAX,
} EgressClass;

typedef struct EgressClassification {
        EgressClass cls;
        EgressAddr range;             /* the class's range, in the address's own family */
        unsigned prefix;
        const char *via;              /* how an IPv4 address was embedded ("NAT64", "6to4", ...), NULL: not */
        bool has_embedded;
        EgressAddr embedded;          /* the IPv4 address inside, when has_embedded */
} EgressClassification;

const char *egress_class_to_string(EgressClass c);
void egress_classify(const EgressAddr *a, EgressClassification *ret);

/* A list of rules and whose they are ("base", "profile pypi", "sandbox"), for reasons. */
typedef struct EgressSource {
        const char *owner;
        const EgressRules *rules;
} EgressSource;

typedef struct EgressQuery {
        const char *host;             /* the name the connection asked for, NULL: an address only */
        EgressAddr addr;              /* the address it would connect to */
        uint16_t port;
        uint16_t self_port;           /* the daemon's own TCP API port, 0: none */
        uint16_t self_tls_port;       /* and its TLS listener's, 0: none */
} EgressQuery;

/* Why a connection or a DNS question was let through or refused, as the audit log names it; the table
 * (egress.c) also gives the code the guest is told (ERROR code=, lib/proto.h) for a refusal of that reason. */
typedef enum EgressReason {
        /* egress_decide()'s */
        EGRESS_REASON_ALLOWED,        /* rule allows it */
        EGRESS_REASON_DENIED_BY_RULE, /* rule denies it: denies win */
        EGRESS_REASON_PROTECTED,      /* in a protected class, no IP rule inside it */
        EGRESS_REASON_SMTP,           /* an SMTP port, no rule names it */
        EGRESS_REASON_SELF,           /* the daemon's own API */
        EGRESS_REASON_NO_RULE,
        EGRESS_REASON_INVALID,        /* port 0, a bad name */
        /* the gateway's own: what the first bytes or a later request named, the lookup, the connect */
        EGRESS_REASON_HOST_MISMATCH,
        EGRESS_REASON_SNI_MISMATCH,
        EGRESS_REASON_NAME_MISMATCH,  /* the name the connection asked for does not resolve to its address */
        EGRESS_REASON_NO_NAME,
        EGRESS_REASON_NO_SNI,
        EGRESS_REASON_BAD_REQUEST,
        EGRESS_REASON_BAD_FIRST_BYTES,
        EGRESS_REASON_RESOLVE_FAILED,
        EGRESS_REASON_NXDOMAIN,
        EGRESS_REASON_DENIED,         /* a DNS answer with an address the policy denies */
        EGRESS_REASON_UNREACHABLE,
        EGRESS_REASON_BUSY,           /* over the sandbox's share in flight */
        EGRESS_REASON_RATE_LIMITED,
        EGRESS_REASON_INTERNAL,
        EGRESS_REASON_UPSTREAM_CERTIFICATE, /* an intercepted host's certificate is not one the host trusts */
        /* how an allowed connection ended */
        EGRESS_REASON_CLOSED,
        EGRESS_REASON_ABORTED,
        _EGRESS_REASON_MAX,
} EgressReason;

typedef struct EgressDecision {
        bool allowed;
        EgressReason reason;
        const char *owner;            /* of rule */
        const EgressRule *rule;       /* the rule that decided (allowed, denied by rule), else NULL */
        EgressAddr addr;              /* the address decided on (an IPv4-mapped one as IPv4) */
        EgressClassification cls;
        char message[EGRESS_MESSAGE_MAX];
} EgressDecision;

const char *egress_reason_to_string(EgressReason r);
/* What the guest is told when it is refused for r (a refusal may tell it otherwise: a timeout, a failure of ours). */
SpaceCode egress_reason_code(EgressReason r);
/* Decides q against the rules of sources: explicit denies win; then the daemon's own API, protected classes
 * and SMTP ports, which only an allow rule naming them opens; then the first allow rule that matches.
 * -EINVAL for a query without an address. */
int egress_decide(const EgressSource *sources, size_t n_sources, const EgressQuery *q, EgressDecision *ret);

/* A sandbox's policy: the sources egress_decide() takes, built from the config, its profiles and its own
 * lists. Profiles no longer in the config are left out (their allowances are gone, denies never widen). Never
 * copied: its last source points at its own rules (own), so a copy would point at the original's. */
typedef struct EgressPolicy {
        EgressRules own;              /* the sandbox's allow and deny lists, parsed */
        EgressSource *sources;
        size_t n_sources;
        char **owners;
        const EgressBinding **bindings; /* its profiles' secret bindings (into the config, as sources are), then
                                         * its own (into own_bindings) */
        size_t n_bindings;
        EgressBinding *own_bindings;
        size_t n_own_bindings;
} EgressPolicy;
int egress_policy_build(const EgressConfig *c, char *const *profiles, char *const *allow, char *const *deny,
                        EgressPolicy *ret, Error *reterr);
void egress_policy_done(EgressPolicy *p);
/* Adds the sandbox's own bindings (egress_binding_parse_own() lines) to a policy built without them. They
 * open nothing: a request reaches a bound host only if the policy's rules allow it. */
int egress_policy_add_bindings(EgressPolicy *p, char *const *lines, Error *reterr);
/* Whether some allow rule of p names host (normalised) and no deny rule does; *ret_port is a port such a rule
 * allows (for DNS, which has none), *ret_why says why not. The gateway resolves only such names, so a lookup
 * cannot carry data out, and `egress test` asks the same before it resolves. */
bool egress_name_permitted(const EgressPolicy *p, const char *host, uint16_t *ret_port, const char **ret_why);

/* The gateway (gateway.c): serves the CONNECT and RESOLVE streams of every sandbox's channel. self_port is the
 * daemon's own TCP API port and self_tls_port its TLS listener's (0: none), which no sandbox reaches. */
void egress_gateway_setup(uint16_t self_port, uint16_t self_tls_port);
/* What the gateway reads of a sandbox, which sits above it: sandbox/ sets these at start
 * (sandbox_register_ops()). The gateway keeps a Sandbox only as a handle. */
typedef struct Sandbox Sandbox;
typedef struct AgentConn AgentConn;
typedef struct EgressSandboxOps {
        Sandbox *(*find)(Manager *m, const char *id);    /* NULL: gone */
        Manager *(*manager)(Sandbox *s);
        const char *(*id)(Sandbox *s);
        const char *(*data_dir)(Sandbox *s);
        AgentConn *(*agent)(Sandbox *s);                 /* NULL: no channel now */
        /* its egress: the profiles chosen at create, and its own allow and deny targets (which E2B's network
         * update may replace, telling egress_gateway_policy_changed()) */
        void (*egress)(Sandbox *s, char ***ret_profiles, char ***ret_allow, char ***ret_deny);
        /* its environment (the user's), where the placeholders of its secrets are */
        char **(*env)(Sandbox *s);
        /* its own bindings (E2B's network.rules, egress_binding_parse_own() lines; NULL: none) */
        char **(*bindings)(Sandbox *s);
} EgressSandboxOps;
void egress_set_sandbox_ops(const EgressSandboxOps *ops);
/* A sandbox is gone: drop what the gateway remembers of it (its policy, DNS answers, rates), and write out its
 * audit log. */
void egress_gateway_forget(const char *sandbox_id);
/* The sandbox's egress lists or profiles changed (a pool member handed out to a create, E2B's network update
 * through sandbox_set_egress_lists()): the gateway builds its
 * policy again at the next question. It keeps one per sandbox otherwise, pointing into the config's profiles,
 * which are loaded once at start. */
void egress_gateway_policy_changed(const char *sandbox_id);

/* Names, the way the gateway and `egress test` look them up: the hosts file (egress_hosts_file) first, then
 * the system resolver on a worker thread (unless egress_resolve = hosts). done runs on the event loop, always
 * after egress_resolve() returned; err is 0 or -ENOENT (no such name), -EAGAIN (try again), -EIO. */
#define EGRESS_RESOLVE_ADDRS_MAX 32U
typedef void (*EgressResolveDone)(Manager *m, void *userdata, int err, const EgressAddr *addrs, size_t n);
int egress_resolve(Manager *m, const char *name, EgressResolveDone done, void *userdata);

/* The audit log of a sandbox (DATA_DIR/egress.log and its rotated predecessor): the entries numbered above
 * after, oldest first, at most limit, as a JSON array of objects (space-egress(5), "Audit"). Lines still
 * buffered are written first. */
typedef struct cJSON cJSON;
int egress_audit_read(const char *sandbox_id, const char *data_dir, uint64_t after, size_t limit, cJSON **ret);
void egress_audit_forget(const char *sandbox_id);
/* Writes every sandbox's buffered audit lines (the daemon exits). */
void egress_audit_flush_all(void);
