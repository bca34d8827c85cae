/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "core/error.h"
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

/* Keys of spaced.conf that a subsystem above core owns (egress/settings.c): config_load offers every key it
 * does not know itself to each owner in turn, so core reads the whole file without naming the owner's types. */
typedef struct ConfigKeys {
        /* 1: key is the owner's and value was taken, 0: not the owner's, < 0 with reterr set */
        int (*parse)(void *owner, const char *key, const char *value, Error *reterr);
        void *owner;
        const char *syntax;          /* the owner's lines, for the error that names what a line may be */
} ConfigKeys;

#define CONFIG_KEYS_MAX 4
/* Long enough for a profile of some dozen rules; longer ones go over several lines. */
#define CONFIG_LINE_MAX 4096

typedef struct Config {
        AccelSetting accel;
        uint64_t memory_limit_mib;  /* sum of guest memory of live sandboxes; 0 = 80% of MemTotal */
        char *qemu_binary;
        char *state_dir;
        char *listen;               /* TCP listener "ADDR:PORT" or "off"; NULL = LISTEN_DEFAULT */
        char *e2b_tls_listen;       /* the TLS listener, the same API: "ADDR:PORT" or "off"; NULL = E2B_TLS_LISTEN_DEFAULT */
        int64_t idle_timeout;       /* default for new sandboxes, seconds; 0 = never suspend when idle */
        unsigned tcg_cache_mib;     /* TCG's translation cache per VM; 0 = VM_TCG_CACHE_MIB_DEFAULT */
        VmConfine confine;          /* QEMU in its own namespaces: auto (the default), on, off */
        ImportLimits import;        /* 0 fields: the IMPORT_MAX_* defaults (config_import_limits) */
        /* The E2B facade: e2b_template is the template E2B's default `base` names (its SDKs create from `base`
         * when given none); e2b_domain is the `domain` create and connect answer, for the SDKs' getHost()
         * ({port}-{id}.DOMAIN), NULL: none (the SDKs then use E2B_DOMAIN). */
        char *e2b_template;         /* NULL = E2B_TEMPLATE_DEFAULT */
        char *e2b_domain;
        /* The port proxy (proxy/proxy.c): how long a server in a sandbox may take to send its answer's head,
         * and how long the answer's body may then go without a byte either way; seconds, 0 = the defaults. */
        unsigned proxy_head_timeout;
        unsigned proxy_idle_timeout;
        uint64_t volume_quota;      /* volume_quota: a new volume's, bytes, when its create names none; 0 = the default */
        uint64_t volume_entries_max; /* the most entries of any one volume (ARCHITECTURE.md, "Volumes"); 0 = the default */
        ConfigKeys keys[CONFIG_KEYS_MAX];  /* the owners of the other keys (config_add_keys) */
        size_t n_keys;
} Config;

#define PROXY_HEAD_TIMEOUT_DEFAULT 60
/* Longer than the head's: an event stream, or a long computation that streams its results, may be silent for
 * minutes and still be alive. */
#define PROXY_IDLE_TIMEOUT_DEFAULT 300
#define PROXY_TIMEOUT_MAX 86400

#define VOLUME_QUOTA_DEFAULT (1ULL << 30)
#define VOLUME_ENTRIES_MAX_DEFAULT (1ULL << 20)
#define VOLUME_ENTRIES_MAX_LIMIT (1ULL << 32)
#define LISTEN_DEFAULT "127.0.0.1:7070"
#define E2B_TLS_LISTEN_DEFAULT "127.0.0.1:7443"
/* e2b_domain when it is unset and TLS is on: a name under .localhost (loopback through nss-myhostname), with
 * the TLS listener's port, as E2B_DOMAIN takes it */
#define E2B_DOMAIN_DEFAULT_NAME "space.localhost"
#define E2B_TEMPLATE_DEFAULT "seed"
/* E2B's code interpreter SDKs create from this name; it is our templates/code-interpreter */
#define E2B_CODE_INTERPRETER_NAME "code-interpreter-v1"
#define E2B_CODE_INTERPRETER_TEMPLATE "code-interpreter"

void config_done(Config *c);
/* Reads `key = value` lines; a missing file is fine (defaults). Unknown keys or bad values: -EINVAL with a
 * message naming the line in reterr (ERROR_INVALID_ARGUMENT). */
int config_load(Config *c, const char *path, Error *reterr);
/* Registers the owner of more keys, before config_load. -E2BIG past CONFIG_KEYS_MAX. */
int config_add_keys(Config *c, const ConfigKeys *k);
/* For owners that read files of their own keys: a line into buf, 1; 0 at the end; -E2BIG when it does not fit
 * (it would otherwise be read as two lines). */
int config_read_line(FILE *f, char *buf, size_t size);
/* Prefixes reterr's message (or r's) with the line it came from; returns r. */
int config_error_at(Error *reterr, const char *path, unsigned n, int r);
int accel_setting_from_string(const char *s, AccelSetting *ret);
int confine_from_string(const char *s, VmConfine *ret);
const char *confine_to_string(VmConfine c);
/* The memory budget of live sandboxes: memory_limit_mib, or 80% of the host's memory. */
uint64_t config_memory_limit_mib(const Config *c);
/* c's import limits with the defaults filled in. */
ImportLimits config_import_limits(const Config *c);
uint64_t host_memory_mib(void);
/* Parses a TCP listen setting: "ADDR:PORT" where ADDR is an IPv4 loopback address, "localhost" or "[::1]"
 * (port 0 = any free port), or "off" (returns 0 with *ret_len = 0). -EINVAL when malformed, -EADDRNOTAVAIL
 * when ADDR is not a loopback address: the TCP API is for this machine only. */
int listen_address_parse(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len);
