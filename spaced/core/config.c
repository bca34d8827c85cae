/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "macro.h"
#include "string-util.h"

/* Long enough for a profile of some dozen rules; longer ones go over several lines. */
#define CONFIG_LINE_MAX 4096

void config_done(Config *c) {
        free(c->qemu_binary);
        free(c->state_dir);
        free(c->listen);
        free(c->e2b_template);
        free(c->e2b_domain);
        egress_config_done(&c->egress);
        strv_free(c->egress_defaults);
        c->egress_defaults = NULL;
        free(c->egress_hosts_file);
        c->egress_hosts_file = NULL;
        c->qemu_binary = c->state_dir = c->listen = c->e2b_template = c->e2b_domain = NULL;
}

int listen_address_parse(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len) {
        char host[64], *end;
        const char *colon;
        unsigned long port;
        size_t n;

        *ret = (struct sockaddr_storage) {};
        *ret_len = 0;
        if (streq(s, "off"))
                return 0;
        colon = strrchr(s, ':');
        if (!colon || colon == s || !colon[1])
                return -EINVAL;
        errno = 0;
        port = strtoul(colon + 1, &end, 10);
        if (errno || *end || port > 65535 || !isdigit((unsigned char) colon[1]))
                return -EINVAL;
        n = (size_t) (colon - s);
        if (n >= sizeof host)
                return -EINVAL;
        memcpy(host, s, n);
        host[n] = 0;

        if (streq(host, "localhost"))
                strcpy(host, "127.0.0.1");
        if (host[0] == '[') {
                struct sockaddr_in6 *sa = (struct sockaddr_in6 *) ret;

                if (n < 3 || host[n - 1] != ']')
                        return -EINVAL;
                host[n - 1] = 0;
                if (inet_pton(AF_INET6, host + 1, &sa->sin6_addr) != 1)
                        return -EINVAL;
                if (!IN6_IS_ADDR_LOOPBACK(&sa->sin6_addr))
                        return -EADDRNOTAVAIL;
                sa->sin6_family = AF_INET6;
                sa->sin6_port = htons((uint16_t) port);
                *ret_len = sizeof *sa;
        } else {
                struct sockaddr_in *sa = (struct sockaddr_in *) ret;

                if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
                        return -EINVAL;
                if ((ntohl(sa->sin_addr.s_addr) >> 24) != 127)
                        return -EADDRNOTAVAIL;
                sa->sin_family = AF_INET;
                sa->sin_port = htons((uint16_t) port);
                *ret_len = sizeof *sa;
        }
        return 0;
}

int confine_from_string(const char *s, VmConfine *ret) {
        if (streq(s, "auto"))
                *ret = VM_CONFINE_AUTO;
        else if (streq(s, "on"))
                *ret = VM_CONFINE_ON;
        else if (streq(s, "off"))
                *ret = VM_CONFINE_OFF;
        else
                return -EINVAL;
        return 0;
}

const char *confine_to_string(VmConfine c) {
        return c == VM_CONFINE_ON ? "on" : c == VM_CONFINE_OFF ? "off" : "auto";
}

int accel_setting_from_string(const char *s, AccelSetting *ret) {
        if (streq(s, "auto"))
                *ret = ACCEL_AUTO;
        else if (streq(s, "kvm"))
                *ret = ACCEL_KVM;
        else if (streq(s, "tcg"))
                *ret = ACCEL_TCG;
        else
                return -EINVAL;
        return 0;
}

uint64_t host_memory_mib(void) {
        _cleanup_fclose_ FILE *f = fopen("/proc/meminfo", "re");
        char line[256];
        uint64_t kib;

        if (!f)
                return 0;
        while (fgets(line, sizeof line, f))
                if (sscanf(line, "MemTotal: %" SCNu64 " kB", &kib) == 1)
                        return kib / 1024;
        return 0;
}

ImportLimits config_import_limits(const Config *c) {
        ImportLimits l = c->import;

        l.max_bytes = l.max_bytes ?: IMPORT_MAX_BYTES_DEFAULT;
        l.max_disk_bytes = l.max_disk_bytes ?: IMPORT_MAX_DISK_BYTES_DEFAULT;
        l.max_entries = l.max_entries ?: IMPORT_MAX_ENTRIES_DEFAULT;
        l.max_entry_bytes = l.max_entry_bytes ?: IMPORT_MAX_ENTRY_BYTES_DEFAULT;
        l.max_path = l.max_path ?: IMPORT_MAX_PATH_DEFAULT;
        l.max_layers = l.max_layers ?: IMPORT_MAX_LAYERS_DEFAULT;
        return l;
}

EgressLimits config_egress_limits(const Config *c) {
        EgressLimits l = c->egress_limits;

        l.resolve_rate = l.resolve_rate ?: EGRESS_RESOLVE_RATE_DEFAULT;
        l.resolve_burst = l.resolve_burst ?: EGRESS_RESOLVE_BURST_DEFAULT;
        l.connect_rate = l.connect_rate ?: EGRESS_CONNECT_RATE_DEFAULT;
        l.connect_burst = l.connect_burst ?: EGRESS_CONNECT_BURST_DEFAULT;
        return l;
}

/* A positive count, with an optional K, M, G or T suffix (powers of 1024). */
static int parse_size(const char *s, uint64_t *ret) {
        unsigned long long v;
        unsigned shift = 0;
        char *end;

        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || end == s || !isdigit((unsigned char) *s))
                return -EINVAL;
        if (*end) {
                const char *units = "KMGT", *u = strchr(units, toupper((unsigned char) *end));
                if (!u || end[1])
                        return -EINVAL;
                shift = 10 * (unsigned) (u - units + 1);
        }
        if (v == 0 || v > (UINT64_MAX >> shift))
                return -EINVAL;
        *ret = (uint64_t) v << shift;
        return 0;
}

/* The egress keys, shared by spaced.conf and the file SPACE_EGRESS_PROFILES may name. 1: handled, 0: not an
 * egress key, < 0 with reterr set. */
static int egress_key(Config *c, const char *key, const char *value, Error *reterr) {
        if (streq(key, "egress_profile"))
                return egress_profile_parse(&c->egress, value, reterr) ?: 1;
        if (streq(key, "egress_base"))
                return egress_rules_parse(&c->egress.base, value, "egress_base", reterr) ?: 1;
        if (streq(key, "egress_default")) {
                _cleanup_free_ char *copy = strdup(value);
                char *save = NULL;

                if (!copy)
                        return -ENOMEM;
                for (char *n = strtok_r(copy, ", \t", &save); n; n = strtok_r(NULL, ", \t", &save))
                        if (strv_extend(&c->egress_defaults, n) < 0)
                                return -ENOMEM;
                return 1;
        }
        if (streq(key, "egress_hosts_file")) {
                if (value[0] != '/')
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "egress_hosts_file must be an absolute "
                                         "path, got '%s'", value) ?: -EINVAL;
                free(c->egress_hosts_file);
                c->egress_hosts_file = strdup(value);
                return c->egress_hosts_file ? 1 : -ENOMEM;
        }
        if (streq(key, "egress_resolve")) {
                if (!streq(value, "system") && !streq(value, "hosts"))
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "egress_resolve must be 'system' or "
                                         "'hosts', got '%s'", value) ?: -EINVAL;
                c->egress_hosts_only = streq(value, "hosts");
                return 1;
        }
        return 0;
}

/* The gateway's rates (spaced.conf only: they are the daemon's, not a profile's). 1: handled, 0: not one of
 * them, < 0 with reterr set. */
static int egress_limit_key(Config *c, const char *key, const char *value, Error *reterr) {
        unsigned *field;
        unsigned long v;
        char *end;

        if (streq(key, "egress_resolve_rate"))
                field = &c->egress_limits.resolve_rate;
        else if (streq(key, "egress_resolve_burst"))
                field = &c->egress_limits.resolve_burst;
        else if (streq(key, "egress_connect_rate"))
                field = &c->egress_limits.connect_rate;
        else if (streq(key, "egress_connect_burst"))
                field = &c->egress_limits.connect_burst;
        else
                return 0;
        errno = 0;
        v = strtoul(value, &end, 10);
        if (errno || *end || end == value || !isdigit((unsigned char) value[0]) || v == 0 || v > EGRESS_LIMIT_MAX)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s must be 1..%u, got '%s'", key, EGRESS_LIMIT_MAX,
                                 value) ?: -EINVAL;
        *field = (unsigned) v;
        return 1;
}

/* Prefixes reterr's message with where the line is. */
static int egress_line_error(Error *reterr, const char *path, unsigned n, int r) {
        _cleanup_free_ char *msg = NULL;

        if (r == -ENOMEM && (!reterr || !reterr->message))
                return r;
        if (reterr && reterr->message)
                msg = strdup(reterr->message);
        return error_set(reterr, reterr ? reterr->code ?: ERROR_INVALID_ARGUMENT : ERROR_INVALID_ARGUMENT, "%s:%u: %s",
                         path, n, msg ?: strerror(-r)) ?: r;
}

/* Reads a line into buf; -E2BIG when it does not fit (it would otherwise be read as two lines). 0 at the end. */
static int read_line(FILE *f, char *buf, size_t size) {
        size_t len;

        if (!fgets(buf, (int) size, f))
                return 0;
        len = strlen(buf);
        if (len == size - 1 && buf[len - 1] != '\n' && !feof(f))
                return -E2BIG;
        return 1;
}

int config_load_egress_env(Config *c, const char *value, Error *reterr) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[CONFIG_LINE_MAX];
        unsigned n = 0;
        int r;

        if (!value || !*value)
                return 0;
        if (value[0] != '/') {
                r = egress_profiles_parse(&c->egress, value, reterr);
                if (r < 0)
                        return egress_line_error(reterr, "SPACE_EGRESS_PROFILES", 1, r);
                return 0;
        }
        f = fopen(value, "re");
        if (!f)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "SPACE_EGRESS_PROFILES=%s: %s", value,
                                 strerror(errno)) ?: -errno;
        while ((r = read_line(f, line, sizeof line)) > 0) {
                char *key, *eq;

                n++;
                key = string_strip(line);
                if (*key == 0 || *key == '#')
                        continue;
                eq = strchr(key, '=');
                if (eq) {
                        *eq = 0;
                        r = egress_key(c, string_strip(key), string_strip(eq + 1), reterr);
                        if (r < 0)
                                return egress_line_error(reterr, value, n, r);
                }
                if (!eq || r == 0)
                        return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                         "%s:%u: expected 'egress_profile = NAME: allow ...', 'egress_default = NAME' "
                                         "or 'egress_base = allow ...'", value, n) ?: -EINVAL;
        }
        if (r < 0)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s:%u: line too long (at most %d bytes); split "
                                 "a profile over several lines, which add to it", value, n + 1,
                                 CONFIG_LINE_MAX - 2) ?: r;
        return 0;
}

int config_egress_finish(Config *c, Error *reterr) {
        for (char **n = c->egress_defaults; n && *n; n++) {
                int r = egress_set_defaults(&c->egress, *n, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The keys with a number or an enum for a value: 1 when key is one of them and value was taken, 0 when it is
 * none of them, -EINVAL when value does not fit. */
static int config_number_key(Config *c, const char *key, const char *value) {
        if (streq(key, "accel")) {
                if (accel_setting_from_string(value, &c->accel) < 0)
                        return -EINVAL;
        } else if (streq(key, "confine")) {
                if (confine_from_string(value, &c->confine) < 0)
                        return -EINVAL;
        } else if (streq(key, "memory_limit_mib")) {
                char *end;
                unsigned long long v;

                errno = 0;
                v = strtoull(value, &end, 10);
                if (errno || *end || end == value)
                        return -EINVAL;
                c->memory_limit_mib = v;
        } else if (streq(key, "idle_timeout")) {
                char *end;
                long long v;

                errno = 0;
                v = strtoll(value, &end, 10);
                if (errno || *end || end == value || v < 0)
                        return -EINVAL;
                c->idle_timeout = v;
        } else if (streq(key, "tcg_cache_mib")) {
                char *end;
                unsigned long v;

                errno = 0;
                v = strtoul(value, &end, 10);
                if (errno || *end || end == value || v < 4 || v > 1024)
                        return -EINVAL;
                c->tcg_cache_mib = (unsigned) v;
        } else if (streq(key, "proxy_head_timeout") || streq(key, "proxy_idle_timeout")) {
                char *end;
                unsigned long v;

                errno = 0;
                v = strtoul(value, &end, 10);
                if (errno || *end || end == value || !isdigit((unsigned char) *value) || v < 1 ||
                    v > PROXY_TIMEOUT_MAX)
                        return -EINVAL;
                *(streq(key, "proxy_head_timeout") ? &c->proxy_head_timeout : &c->proxy_idle_timeout) =
                        (unsigned) v;
        } else if (streq(key, "import_max_bytes")) {
                if (parse_size(value, &c->import.max_bytes) < 0)
                        return -EINVAL;
        } else if (streq(key, "import_max_disk_bytes")) {
                if (parse_size(value, &c->import.max_disk_bytes) < 0)
                        return -EINVAL;
        } else if (streq(key, "import_max_entries")) {
                if (parse_size(value, &c->import.max_entries) < 0)
                        return -EINVAL;
        } else if (streq(key, "import_max_entry_bytes")) {
                if (parse_size(value, &c->import.max_entry_bytes) < 0)
                        return -EINVAL;
        } else if (streq(key, "import_max_path")) {
                if (parse_size(value, &c->import.max_path) < 0 || c->import.max_path > 65535)
                        return -EINVAL;
        } else if (streq(key, "import_max_layers")) {
                if (parse_size(value, &c->import.max_layers) < 0 || c->import.max_layers > 100000)
                        return -EINVAL;
        } else
                return 0;
        return 1;
}

/* The keys with a path, an address or a name for a value: as config_number_key(), and -ENOMEM. */
static int config_string_key(Config *c, const char *key, const char *value) {
        if (streq(key, "state_dir")) {
                if (value[0] != '/')
                        return -EINVAL;
                free(c->state_dir);
                c->state_dir = strdup(value);
                if (!c->state_dir)
                        return -ENOMEM;
        } else if (streq(key, "listen")) {
                struct sockaddr_storage sa;
                socklen_t len;

                if (listen_address_parse(value, &sa, &len) < 0)
                        return -EINVAL;
                free(c->listen);
                c->listen = strdup(value);
                if (!c->listen)
                        return -ENOMEM;
        } else if (streq(key, "e2b_template")) {
                /* a template reference (NAME[:TAG] or sha256:HEX), checked for shape only: the
                 * template may be built after the daemon starts */
                if (!*value || strlen(value) > 255 ||
                    strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:") !=
                            strlen(value))
                        return -EINVAL;
                free(c->e2b_template);
                c->e2b_template = strdup(value);
                if (!c->e2b_template)
                        return -ENOMEM;
        } else if (streq(key, "e2b_domain")) {
                /* a host name, optionally with :PORT, as E2B_DOMAIN takes it */
                if (!*value || strlen(value) > 253 ||
                    strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") !=
                            strlen(value))
                        return -EINVAL;
                free(c->e2b_domain);
                c->e2b_domain = strdup(value);
                if (!c->e2b_domain)
                        return -ENOMEM;
        } else if (streq(key, "qemu")) {
                free(c->qemu_binary);
                c->qemu_binary = strdup(value);
                if (!c->qemu_binary)
                        return -ENOMEM;
        } else
                return 0;
        return 1;
}

static int config_line_bad(const char *path, unsigned n, Error *reterr) {
        return error_set(reterr, ERROR_INVALID_ARGUMENT,
                         "%s:%u: expected one of 'accel = auto|kvm|tcg', 'memory_limit_mib = N', "
                         "'state_dir = /ABSOLUTE/PATH', 'qemu = PATH', 'idle_timeout = SECONDS', "
                         "'tcg_cache_mib = 4..1024', 'confine = auto|on|off', "
                         "'proxy_head_timeout|proxy_idle_timeout = 1..86400 (seconds)', "
                         "'import_max_bytes|import_max_disk_bytes|import_max_entry_bytes = N[K|M|G|T]', "
                         "'import_max_entries|import_max_path|import_max_layers = N', "
                         "'listen = 127.0.0.1:PORT|off' (loopback addresses only), "
                         "'e2b_template = NAME[:TAG]', 'e2b_domain = HOST[:PORT]', "
                         "'egress_profile = NAME: allow TARGET[, ...][; deny ...]', 'egress_default = NAME[, ...]', "
                         "'egress_base = allow|deny TARGET[, ...]' (space-egress(5))", path, n) ?: -EINVAL;
}

int config_load(Config *c, const char *path, Error *reterr) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[CONFIG_LINE_MAX];
        unsigned n = 0;
        int r;

        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? 0 : -errno;

        while ((r = read_line(f, line, sizeof line)) != 0) {
                char *key, *value, *eq;

                n++;
                if (r < 0)
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s:%u: line too long (at most %d bytes)",
                                         path, n, CONFIG_LINE_MAX - 2) ?: r;
                key = string_strip(line);
                if (*key == 0 || *key == '#')
                        continue;
                eq = strchr(key, '=');
                if (!eq)
                        return config_line_bad(path, n, reterr);
                *eq = 0;
                value = string_strip(eq + 1);
                key = string_strip(key);

                r = egress_key(c, key, value, reterr);
                if (r == 0)
                        r = egress_limit_key(c, key, value, reterr);
                if (r < 0)
                        return egress_line_error(reterr, path, n, r);
                if (r > 0)
                        continue;
                r = config_number_key(c, key, value);
                if (r == 0)
                        r = config_string_key(c, key, value);
                if (r == -ENOMEM)
                        return r;
                if (r <= 0) /* an unknown key, or a value that does not fit it */
                        return config_line_bad(path, n, reterr);
        }
        return 0;
}
