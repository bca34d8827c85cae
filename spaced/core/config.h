/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>
#include <sys/socket.h>

#include "core/error.h"
#include "egress/egress.h"
#include "core/host.h"

typedef enum AccelSetting {
        ACCEL_AUTO,
        ACCEL_KVM,
        ACCEL_TCG,
} AccelSetting;

/* What one template import may cost (template/template-tree.h enforces it): safe defaults, raised in
 * spaced.conf for big images. */
typedef struct ImportLimits {
        uint64_t max_bytes;          /* import_max_bytes: sum of the entries' sizes, sparse files in full */
        uint64_t max_disk_bytes;     /* import_max_disk_bytes: data written to disk (an upload, the tree) */
        uint64_t max_entries;        /* import_max_entries */
        uint64_t max_entry_bytes;    /* import_max_entry_bytes: one file */
        uint64_t max_path;           /* import_max_path: bytes of a path */
        uint64_t max_layers;         /* import_max_layers: of an OCI image */
} ImportLimits;

#define IMPORT_MAX_BYTES_DEFAULT (4ULL << 30)
#define IMPORT_MAX_DISK_BYTES_DEFAULT (4ULL << 30)
#define IMPORT_MAX_ENTRIES_DEFAULT 500000ULL
#define IMPORT_MAX_ENTRY_BYTES_DEFAULT (2ULL << 30)
#define IMPORT_MAX_PATH_DEFAULT 4095ULL
#define IMPORT_MAX_LAYERS_DEFAULT 128ULL

/* How fast one sandbox may ask the egress gateway (egress/gateway-sandbox.c): token buckets of a rate a second
 * and a burst, for DNS questions (RESOLVE) and connections (CONNECT). A name lookup is two questions (A and
 * AAAA), a connection through the proxy none. The defaults are several times what the busiest client we know
 * (a parallel package download) asks for, and far below a guest that floods. */
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

typedef struct Config {
        AccelSetting accel;
        uint64_t memory_limit_mib;  /* sum of guest memory of live sandboxes; 0 = 80% of MemTotal */
        char *qemu_binary;
        char *state_dir;
        char *listen;               /* TCP listener "ADDR:PORT" or "off"; NULL = LISTEN_DEFAULT */
        int64_t idle_timeout;       /* default for new sandboxes, seconds; 0 = never suspend when idle */
        unsigned tcg_cache_mib;     /* TCG's translation cache per VM; 0 = VM_TCG_CACHE_MIB_DEFAULT */
        VmConfine confine;          /* QEMU in its own namespaces: auto (the default), on, off */
        ImportLimits import;        /* 0 fields: the IMPORT_MAX_* defaults (config_import_limits) */
        /* The E2B facade: e2b_template is the template E2B's default `base` names (its SDKs create from `base`
         * when given none); e2b_domain is the `domain` create and connect answer, for the SDKs' getHost()
         * ({port}-{id}.DOMAIN), NULL: none (the SDKs then use E2B_DOMAIN). */
        char *e2b_template;         /* NULL = E2B_TEMPLATE_DEFAULT */
        char *e2b_domain;
        /* Egress (space-egress(5)): egress_base, egress_profile lines and SPACE_EGRESS_PROFILES; the
         * egress_default names, applied by config_egress_finish() once every source is read. */
        EgressConfig egress;
        char **egress_defaults;
        /* The gateway's resolver: names are looked up in egress_hosts_file (hosts(5) lines) first, then, unless
         * egress_resolve = hosts, by the system's resolver. */
        char *egress_hosts_file;
        bool egress_hosts_only;
        /* The port proxy (proxy/proxy.c): how long a server in a sandbox may take to send its answer's head,
         * and how long the answer's body may then go without a byte either way; seconds, 0 = the defaults. */
        unsigned proxy_head_timeout;
        unsigned proxy_idle_timeout;
        EgressLimits egress_limits;  /* 0 fields: the EGRESS_*_DEFAULT values (config_egress_limits) */
} Config;

#define PROXY_HEAD_TIMEOUT_DEFAULT 60
/* Longer than the head's: an event stream, or a long computation that streams its results, may be silent for
 * minutes and still be alive. */
#define PROXY_IDLE_TIMEOUT_DEFAULT 300
#define PROXY_TIMEOUT_MAX 86400

#define LISTEN_DEFAULT "127.0.0.1:7070"
#define E2B_TEMPLATE_DEFAULT "seed"

void config_done(Config *c);
/* Reads `key = value` lines; a missing file is fine (defaults). Unknown keys or bad values: -EINVAL with a
 * message naming the line in reterr (ERROR_INVALID_ARGUMENT). */
int config_load(Config *c, const char *path, Error *reterr);
/* SPACE_EGRESS_PROFILES: an absolute path to a file of egress_profile, egress_default and egress_base lines,
 * or profiles inline ("NAME: allow ...; deny ...; NAME2: allow ..."). NULL or empty: nothing. */
int config_load_egress_env(Config *c, const char *value, Error *reterr);
/* Marks the default profiles, checking that each one named exists. */
int config_egress_finish(Config *c, Error *reterr);
int accel_setting_from_string(const char *s, AccelSetting *ret);
int confine_from_string(const char *s, VmConfine *ret);
const char *confine_to_string(VmConfine c);
/* c's import limits with the defaults filled in. */
ImportLimits config_import_limits(const Config *c);
/* c's egress rates with the defaults filled in. */
EgressLimits config_egress_limits(const Config *c);
uint64_t host_memory_mib(void);
/* Parses a TCP listen setting: "ADDR:PORT" where ADDR is an IPv4 loopback address, "localhost" or "[::1]"
 * (port 0 = any free port), or "off" (returns 0 with *ret_len = 0). -EINVAL when malformed, -EADDRNOTAVAIL
 * when ADDR is not a loopback address: the TCP API is for this machine only. */
int listen_address_parse(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len);
