/* SPDX-License-Identifier: Apache-2.0 */

/* Unit tests for lib/user.c: the USER[:GROUP] spec, and resolving it against passwd and group files the way
 * the guest agent does (malformed and overlong lines skipped, first match wins, supplementary groups). */

#define _GNU_SOURCE 1
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/macro.h"
#include "../../lib/user.h"
#include "tap.h"

static const char passwd_text[] =
        "root:x:0:0:root:/root:/bin/bash\n"
        "broken line without fields\n"
        "bad:x:notanumber:0::/:/bin/sh\n"
        "user:x:1000:1000:user:/home/user:/bin/bash\n"
        "user:x:2000:2000:shadowed by the first:/nope:/bin/sh\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
        "relhome:x:1001:1001::relative/home:/bin/sh\n"
        "last:x:1002:1002::/home/last:/bin/sh"; /* no newline at the end */

static const char group_text[] =
        "root:x:0:\n"
        "user:x:1000:\n"
        "audio:x:29:user,other\n"
        "video:x:44:other\n"
        "staff:x:50:other,user\n"
        "nogroup:x:65534:\n"
        "garbage\n";

static FILE *mem(const char *text) {
        return fmemopen((void *) text, strlen(text), "r");
}

static void test_spec(void) {
        static const char *const good[] = { "user", "1000", "user:root", "1000:1000", "a.b_c-d", "0", "4294967294",
                                            "nobody:65534" };
        static const char *const bad[] = { "", ":", "user:", ":root", "a b", "a;b", "user:root:x", "4294967295",
                                           "99999999999", "ü", "user/..", NULL };
        SpaceUserSpec s;
        char long_name[SPACE_USER_SPEC_MAX + 2];

        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                ok(space_user_spec_parse(good[i], NULL) == 0, "'%s' is a spec", good[i]);
        for (size_t i = 0; bad[i]; i++)
                ok(space_user_spec_parse(bad[i], NULL) == -EINVAL, "'%s' is not a spec", bad[i]);
        ok(space_user_spec_parse(NULL, NULL) == -EINVAL, "NULL is not a spec");

        memset(long_name, 'a', SPACE_USER_SPEC_MAX);
        long_name[SPACE_USER_SPEC_MAX] = 0;
        ok(space_user_spec_parse(long_name, NULL) == 0, "%d characters are fine", SPACE_USER_SPEC_MAX);
        long_name[SPACE_USER_SPEC_MAX] = 'a';
        long_name[SPACE_USER_SPEC_MAX + 1] = 0;
        ok(space_user_spec_parse(long_name, NULL) == -EINVAL, "%d are too many", SPACE_USER_SPEC_MAX + 1);

        ok(space_user_spec_parse("user:50", &s) == 0 && streq(s.user, "user") && !s.user_is_id &&
                   streq(s.group, "50") && s.group_is_id && s.gid == 50,
           "user:50 parses into a name and a gid");
        ok(space_user_spec_parse("1000", &s) == 0 && s.user_is_id && s.uid == 1000 && s.group[0] == 0,
           "1000 is a uid without a group");
}

static int resolve(const char *spec_text, bool with_files, SpaceUser *u) {
        _cleanup_fclose_ FILE *p = with_files ? mem(passwd_text) : NULL, *g = with_files ? mem(group_text) : NULL;
        SpaceUserSpec spec;

        if (space_user_spec_parse(spec_text, &spec) < 0)
                return -EINVAL;
        return space_user_resolve(&spec, p, g, u);
}

static void test_resolve(void) {
        SpaceUser u;

        ok(resolve("user", true, &u) == 0 && u.uid == 1000 && u.gid == 1000 && streq(u.name, "user") &&
                   streq(u.home, "/home/user"),
           "user: uid, gid, name and home from the first matching line");
        ok(u.n_groups == 3 && u.groups[0] == 1000 && u.groups[1] == 29 && u.groups[2] == 50,
           "user: primary group first, then the groups that list it (audio, staff)");

        ok(resolve("1000", true, &u) == 0 && u.uid == 1000 && u.gid == 1000 && streq(u.name, "user"),
           "1000 is user: the name comes from passwd");
        ok(resolve("user:root", true, &u) == 0 && u.uid == 1000 && u.gid == 0 && u.groups[0] == 0 &&
                   u.n_groups == 3,
           "user:root: gid 0 first, the member groups stay");
        ok(resolve("user:29", true, &u) == 0 && u.gid == 29 && u.n_groups == 2 && u.groups[0] == 29 &&
                   u.groups[1] == 50,
           "user:29: a member group as the primary one is not listed twice");
        ok(resolve("nobody", true, &u) == 0 && u.uid == 65534 && u.gid == 65534 && streq(u.home, "/nonexistent") &&
                   u.n_groups == 1,
           "nobody");
        ok(resolve("4242", true, &u) == 0 && u.uid == 4242 && u.gid == 0 && u.name[0] == 0 && streq(u.home, "/") &&
                   u.n_groups == 1 && u.groups[0] == 0,
           "a uid that passwd does not have: gid 0, home /, no name");
        ok(resolve("4242:nogroup", true, &u) == 0 && u.gid == 65534, "... with a group name");
        ok(resolve("relhome", true, &u) == 0 && streq(u.home, "/"), "a relative home is not used");
        ok(resolve("last", true, &u) == 0 && u.uid == 1002, "the last line needs no newline");

        ok(resolve("bob", true, &u) == -ESRCH, "an unknown name is -ESRCH");
        ok(resolve("bad", true, &u) == -ESRCH, "a line with a bad uid does not count");
        ok(resolve("user:wheel", true, &u) == -ENOENT, "an unknown group is -ENOENT");
        ok(resolve("user", false, &u) == -ESRCH, "no passwd file: a name is unknown");
        ok(resolve("1000:1000", false, &u) == 0 && u.uid == 1000 && u.gid == 1000, "no files: numbers still work");
        ok(resolve("1000:users", false, &u) == -ENOENT, "no group file: a group name is unknown");
}

static void test_overlong_line(void) {
        _cleanup_free_ char *text = NULL;
        _cleanup_fclose_ FILE *p = NULL;
        SpaceUserSpec spec;
        SpaceUser u;
        size_t n = 20000;

        /* a line far longer than the buffer whose tail looks like an entry: it must not be taken for one */
        text = malloc(n + 200);
        if (!text)
                abort();
        memset(text, 'a', n);
        strcpy(text + n, "user:x:0:0::/evil:/bin/sh\nuser:x:7:7::/u:/bin/sh\n");
        p = mem(text);
        ok(space_user_spec_parse("user", &spec) == 0 && space_user_resolve(&spec, p, NULL, &u) == 0 && u.uid == 7 &&
                   streq(u.home, "/u"),
           "an overlong line is skipped whole, the next one is read");
}

int main(void) {
        plan(0);
        test_spec();
        test_resolve();
        test_overlong_line();
        return done();
}
