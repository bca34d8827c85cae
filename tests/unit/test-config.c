/* SPDX-License-Identifier: Apache-2.0 */
/* spaced.conf as core reads it (spaced/core/config.c) with the keys egress owns registered from above
 * (spaced/egress/settings.c): each key reaches its owner, a bad line names its place and what lines may be,
 * and SPACE_EGRESS_PROFILES takes only policy keys. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "egress/egress.h"
#include "macro.h"
#include "tap.h"

#define strempty(s) ((s) ? (s) : "")

static char dir[] = "/tmp/test-config-XXXXXX";

static const char *write_file(const char *name, const char *text) {
        static char path[256];
        FILE *f;

        snprintf(path, sizeof path, "%s/%s", dir, name);
        ASSERT((f = fopen(path, "we")));
        ASSERT(fputs(text, f) >= 0);
        ASSERT(fclose(f) == 0);
        return path;
}

/* Loads text as spaced.conf into fresh settings; returns config_load's result and the message in msg. */
static int load(const char *text, Config *c, EgressSettings *s, char *msg, size_t size) {
        Error e = {};
        int r;

        *c = (Config) {};
        *s = (EgressSettings) {};
        ASSERT(egress_settings_register(s, c) >= 0);
        r = config_load(c, write_file("spaced.conf", text), &e);
        snprintf(msg, size, "%s", strempty(e.message));
        error_done(&e);
        return r;
}

static void done_both(Config *c, EgressSettings *s) {
        config_done(c);
        egress_settings_done(s);
}

int main(void) {
        EgressSettings s;
        Config c;
        Error e = {};
        char msg[2048];
        int r;

        ASSERT(mkdtemp(dir));

        r = load("accel = tcg\negress_profile = pypi: allow pypi.org:443\negress_default = pypi\n"
                 "egress_resolve = hosts\negress_hosts_file = /etc/hosts\negress_connect_rate = 7\n", &c, &s, msg,
                 sizeof msg);
        ok(r == 0, "a file with core's and egress's keys loads (%d: %s)", r, msg);
        ok(c.accel == ACCEL_TCG, "core's key reaches the Config");
        ok(s.policy.n_profiles == 1 && streq(s.policy.profiles[0].name, "pypi"), "egress_profile reaches egress");
        ok(s.hosts_only && s.hosts_file && streq(s.hosts_file, "/etc/hosts"), "the resolver keys reach egress");
        ok(egress_settings_limits(&s).connect_rate == 7 &&
                   egress_settings_limits(&s).resolve_rate == EGRESS_RESOLVE_RATE_DEFAULT,
           "a rate set is kept, the others get their defaults");
        ok(!s.policy.profiles[0].is_default, "defaults wait for egress_settings_finish");
        ok(egress_settings_finish(&s, &e) == 0 && s.policy.profiles[0].is_default, "then the default is marked");
        error_done(&e);
        done_both(&c, &s);

        r = load("accel = tcg\nno_such_key = 1\n", &c, &s, msg, sizeof msg);
        ok(r == -EINVAL && strstr(msg, "spaced.conf:2:") && strstr(msg, "egress_profile = NAME") &&
                   strstr(msg, "accel = auto|kvm|tcg"),
           "an unknown key names its line and every key's syntax, egress's too: %s", msg);
        done_both(&c, &s);

        r = load("\n\negress_connect_rate = 0\n", &c, &s, msg, sizeof msg);
        ok(r == -EINVAL && strstr(msg, "spaced.conf:3: egress_connect_rate must be 1..") != NULL,
           "an owner's refusal is prefixed with the line: %s", msg);
        done_both(&c, &s);

        r = load("egress_profile = bad name: allow x.org\n", &c, &s, msg, sizeof msg);
        ok(r < 0 && strstr(msg, "spaced.conf:1:") != NULL, "a bad profile names its line: %s", msg);
        done_both(&c, &s);

        r = load("egress_default = nope\n", &c, &s, msg, sizeof msg);
        if (r == 0)
                r = egress_settings_finish(&s, &e);
        ok(r < 0 && e.code == ERROR_EGRESS_PROFILE_NOT_FOUND,
           "a default naming no profile fails at finish: %s", strempty(e.message));
        error_done(&e);
        done_both(&c, &s);

        /* SPACE_EGRESS_PROFILES: inline, a file of policy keys, never the daemon's rates */
        s = (EgressSettings) {};
        ok(egress_settings_load_env(&s, "a: allow a.org; b: allow b.org:80", &e) == 0 && s.policy.n_profiles == 2,
           "inline profiles load");
        egress_settings_done(&s);
        ok(egress_settings_load_env(&s, write_file("p", "# c\negress_profile = p: allow p.org\negress_default = p\n"),
                                    &e) == 0 &&
                   egress_settings_finish(&s, &e) == 0 && s.policy.profiles[0].is_default,
           "a file of profiles and defaults loads");
        egress_settings_done(&s);
        r = egress_settings_load_env(&s, write_file("q", "egress_connect_rate = 5\n"), &e);
        ok(r == -EINVAL && e.message && strstr(e.message, "q:1: expected 'egress_profile"),
           "the file may not set the daemon's rates: %s", strempty(e.message));
        error_done(&e);
        egress_settings_done(&s);

        /* more owners than there is room for fail, never overflow */
        c = (Config) {};
        for (size_t i = 0; i < CONFIG_KEYS_MAX; i++)
                ASSERT(egress_settings_register(&s, &c) == 0);
        ok(egress_settings_register(&s, &c) == -E2BIG, "a fifth owner of keys is refused");

        unlink(write_file("spaced.conf", ""));
        unlink(write_file("p", ""));
        unlink(write_file("q", ""));
        rmdir(dir);
        return done();
}
