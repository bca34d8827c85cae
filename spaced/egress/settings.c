/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's egress settings: the keys of spaced.conf that egress owns (registered with core's config_load
 * through config_add_keys(), so core never names an egress type), the file or text SPACE_EGRESS_PROFILES gives,
 * and the defaults applied once every source is read. Formats: space-egress(5). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egress/egress.h"
#include "macro.h"
#include "string-util.h"

void egress_settings_done(EgressSettings *s) {
        egress_config_done(&s->policy);
        strv_free(s->defaults);
        free(s->hosts_file);
        free(s->tls_ca_file);
        *s = (EgressSettings) {};
}

EgressSettings *egress_settings_new(void) {
        EgressSettings *s = calloc(1, sizeof *s);

        if (s)
                s->refs = 1;
        return s;
}

EgressSettings *egress_settings_ref(EgressSettings *s) {
        if (s)
                s->refs++;
        return s;
}

EgressSettings *egress_settings_unref(EgressSettings *s) {
        if (s && --s->refs == 0) {
                egress_settings_done(s);
                free(s);
        }
        return NULL;
}

EgressLimits egress_settings_limits(const EgressSettings *s) {
        EgressLimits l = s->limits;

        l.resolve_rate = l.resolve_rate ?: EGRESS_RESOLVE_RATE_DEFAULT;
        l.resolve_burst = l.resolve_burst ?: EGRESS_RESOLVE_BURST_DEFAULT;
        l.connect_rate = l.connect_rate ?: EGRESS_CONNECT_RATE_DEFAULT;
        l.connect_burst = l.connect_burst ?: EGRESS_CONNECT_BURST_DEFAULT;
        return l;
}

/* The keys a policy file may hold as well as spaced.conf. 1: handled, 0: not one of them, < 0 with reterr set. */
static int policy_key(EgressSettings *s, const char *key, const char *value, Error *reterr) {
        if (streq(key, "egress_profile"))
                return egress_profile_parse(&s->policy, value, reterr) ?: 1;
        if (streq(key, "egress_secret"))
                return egress_binding_parse(&s->policy, value, reterr) ?: 1;
        if (streq(key, "egress_base"))
                return egress_rules_parse(&s->policy.base, value, "egress_base", reterr) ?: 1;
        if (streq(key, "egress_default")) {
                _cleanup_free_ char *copy = strdup(value);
                char *save = NULL;

                if (!copy)
                        return -ENOMEM;
                for (char *n = strtok_r(copy, ", \t", &save); n; n = strtok_r(NULL, ", \t", &save))
                        if (strv_extend(&s->defaults, n) < 0)
                                return -ENOMEM;
                return 1;
        }
        if (streq(key, "egress_tls_ca")) {
                if (value[0] != '/' || access(value, R_OK) < 0)
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "egress_tls_ca must be the absolute path of "
                                         "a readable PEM file of CA certificates, got '%s'", value) ?: -EINVAL;
                free(s->tls_ca_file);
                s->tls_ca_file = strdup(value);
                return s->tls_ca_file ? 1 : -ENOMEM;
        }
        if (streq(key, "egress_hosts_file")) {
                if (value[0] != '/')
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "egress_hosts_file must be an absolute "
                                         "path, got '%s'", value) ?: -EINVAL;
                free(s->hosts_file);
                s->hosts_file = strdup(value);
                return s->hosts_file ? 1 : -ENOMEM;
        }
        if (streq(key, "egress_resolve")) {
                if (!streq(value, "system") && !streq(value, "hosts"))
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "egress_resolve must be 'system' or "
                                         "'hosts', got '%s'", value) ?: -EINVAL;
                s->hosts_only = streq(value, "hosts");
                return 1;
        }
        return 0;
}

/* The gateway's rates: spaced.conf only, since they are the daemon's, not a profile's. */
static int limit_key(EgressSettings *s, const char *key, const char *value, Error *reterr) {
        unsigned *field;
        unsigned long v;
        char *end;

        if (streq(key, "egress_resolve_rate"))
                field = &s->limits.resolve_rate;
        else if (streq(key, "egress_resolve_burst"))
                field = &s->limits.resolve_burst;
        else if (streq(key, "egress_connect_rate"))
                field = &s->limits.connect_rate;
        else if (streq(key, "egress_connect_burst"))
                field = &s->limits.connect_burst;
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

static int settings_key(void *owner, const char *key, const char *value, Error *reterr) {
        EgressSettings *s = owner;
        int r = policy_key(s, key, value, reterr);

        return r != 0 ? r : limit_key(s, key, value, reterr);
}

int egress_settings_register(EgressSettings *s, Config *c) {
        return config_add_keys(c, &(ConfigKeys) {
                .parse = settings_key,
                .owner = s,
                .syntax = "'egress_profile = NAME: allow TARGET[, ...][; deny ...]', 'egress_default = NAME[, ...]', "
                          "'egress_base = allow|deny TARGET[, ...]', 'egress_secret = PROFILE: SECRET HOST[:PORT][, ...] "
                          "[header NAME: VALUE]' (space-egress(5))",
        });
}

int egress_settings_load_env(EgressSettings *s, const char *value, Error *reterr) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[CONFIG_LINE_MAX];
        unsigned n = 0;
        int r;

        if (!value || !*value)
                return 0;
        if (value[0] != '/') {
                r = egress_profiles_parse(&s->policy, value, reterr);
                return r < 0 ? config_error_at(reterr, "SPACE_EGRESS_PROFILES", 1, r) : 0;
        }
        f = fopen(value, "re");
        if (!f)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "SPACE_EGRESS_PROFILES=%s: %s", value,
                                 strerror(errno)) ?: -errno;
        while ((r = config_read_line(f, line, sizeof line)) > 0) {
                char *key, *eq;

                n++;
                key = string_strip(line);
                if (*key == 0 || *key == '#')
                        continue;
                eq = strchr(key, '=');
                if (eq) {
                        *eq = 0;
                        r = policy_key(s, string_strip(key), string_strip(eq + 1), reterr);
                        if (r < 0)
                                return config_error_at(reterr, value, n, r);
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

int egress_settings_finish(EgressSettings *s, Error *reterr) {
        for (char **n = s->defaults; n && *n; n++) {
                int r = egress_set_defaults(&s->policy, *n, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}
