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

void config_done(Config *c) {
        free(c->qemu_binary);
        free(c->state_dir);
        free(c->listen);
        free(c->e2b_tls_listen);
        free(c->e2b_template);
        free(c->e2b_domain);
        c->qemu_binary = c->state_dir = c->listen = c->e2b_tls_listen = c->e2b_template = c->e2b_domain = NULL;
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

uint64_t config_memory_limit_mib(const Config *c) {
        return c->memory_limit_mib ?: host_memory_mib() * 8 / 10;
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

int config_error_at(Error *reterr, const char *path, unsigned n, int r) {
        _cleanup_free_ char *msg = NULL;

        if (r == -ENOMEM && (!reterr || !reterr->message))
                return r;
        if (reterr && reterr->message)
                msg = strdup(reterr->message);
        return error_set(reterr, reterr ? reterr->code ?: ERROR_INVALID_ARGUMENT : ERROR_INVALID_ARGUMENT, "%s:%u: %s",
                         path, n, msg ?: strerror(-r)) ?: r;
}

int config_read_line(FILE *f, char *buf, size_t size) {
        size_t len;

        if (!fgets(buf, (int) size, f))
                return 0;
        len = strlen(buf);
        if (len == size - 1 && buf[len - 1] != '\n' && !feof(f))
                return -E2BIG;
        return 1;
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
        } else if (streq(key, "volume_quota")) {
                if (parse_size(value, &c->volume_quota) < 0)
                        return -EINVAL;
        } else if (streq(key, "volume_entries_max")) {
                if (parse_size(value, &c->volume_entries_max) < 0 || c->volume_entries_max > VOLUME_ENTRIES_MAX_LIMIT)
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
        } else if (streq(key, "listen") || streq(key, "e2b_tls_listen")) {
                char **field = streq(key, "listen") ? &c->listen : &c->e2b_tls_listen;
                struct sockaddr_storage sa;
                socklen_t len;

                if (listen_address_parse(value, &sa, &len) < 0)
                        return -EINVAL;
                free(*field);
                *field = strdup(value);
                if (!*field)
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

int config_add_keys(Config *c, const ConfigKeys *k) {
        if (c->n_keys >= ELEMENTSOF(c->keys))
                return -E2BIG;
        c->keys[c->n_keys++] = *k;
        return 0;
}

static int config_line_bad(const Config *c, const char *path, unsigned n, Error *reterr) {
        char owners[1024] = "";
        size_t len = 0;

        for (size_t i = 0; i < c->n_keys && len < sizeof owners; i++)
                len += (size_t) snprintf(owners + len, sizeof owners - len, ", %s", c->keys[i].syntax);
        return error_set(reterr, ERROR_INVALID_ARGUMENT,
                         "%s:%u: expected one of 'accel = auto|kvm|tcg', 'memory_limit_mib = N', "
                         "'state_dir = /ABSOLUTE/PATH', 'qemu = PATH', 'idle_timeout = SECONDS', "
                         "'tcg_cache_mib = 4..1024', 'confine = auto|on|off', "
                         "'proxy_head_timeout|proxy_idle_timeout = 1..86400 (seconds)', "
                         "'import_max_bytes|import_max_disk_bytes|import_max_entry_bytes = N[K|M|G|T]', "
                         "'import_max_entries|import_max_path|import_max_layers = N', 'volume_quota = N[K|M|G|T]', "
                         "'volume_entries_max = N', "
                         "'listen = 127.0.0.1:PORT|off', 'e2b_tls_listen = 127.0.0.1:PORT|off' (loopback addresses only), "
                         "'e2b_template = NAME[:TAG]', 'e2b_domain = HOST[:PORT]'%s", path, n, owners) ?: -EINVAL;
}

/* Offers key to the subsystems that own keys of their own: 1 when one took it, 0 when none knows it. */
static int config_owner_key(Config *c, const char *key, const char *value, Error *reterr) {
        for (size_t i = 0; i < c->n_keys; i++) {
                int r = c->keys[i].parse(c->keys[i].owner, key, value, reterr);
                if (r != 0)
                        return r;
        }
        return 0;
}

int config_load(Config *c, const char *path, Error *reterr) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[CONFIG_LINE_MAX];
        unsigned n = 0;
        int r;

        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? 0 : -errno;

        while ((r = config_read_line(f, line, sizeof line)) != 0) {
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
                        return config_line_bad(c, path, n, reterr);
                *eq = 0;
                value = string_strip(eq + 1);
                key = string_strip(key);

                r = config_owner_key(c, key, value, reterr);
                if (r < 0)
                        return config_error_at(reterr, path, n, r);
                if (r > 0)
                        continue;
                r = config_number_key(c, key, value);
                if (r == 0)
                        r = config_string_key(c, key, value);
                if (r == -ENOMEM)
                        return r;
                if (r <= 0) /* an unknown key, or a value that does not fit it */
                        return config_line_bad(c, path, n, reterr);
        }
        return 0;
}
