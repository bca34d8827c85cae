/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "user.h"

/* passwd and group lines: a line longer than this is skipped (a group with thousands of members, say). */
#define LINE_MAX_BYTES (SPACE_USER_HOME_MAX + 4096)

static bool name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '-';
}

/* 1 with *ret for a number (decimal, no sign, below (uint32_t) -1, which means "no change" to setuid), 0 for
 * anything else. */
static int parse_id(const char *s, size_t n, uint32_t *ret) {
        uint64_t v = 0;

        if (n == 0 || n > 10)
                return 0;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return 0;
                v = v * 10 + (uint64_t) (s[i] - '0');
        }
        if (v >= UINT32_MAX)
                return 0;
        *ret = (uint32_t) v;
        return 1;
}

static int parse_part(const char *s, size_t n, char out[static SPACE_USER_SPEC_MAX + 1], bool *ret_is_id,
                      uint32_t *ret_id) {
        bool digits = n > 0;

        if (n == 0 || n > SPACE_USER_SPEC_MAX)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (!name_char(s[i]))
                        return -EINVAL;
                digits = digits && s[i] >= '0' && s[i] <= '9';
        }
        /* all digits is a number, and then it must be one a uid can be */
        *ret_is_id = digits;
        if (digits && !parse_id(s, n, ret_id))
                return -EINVAL;
        memcpy(out, s, n);
        out[n] = 0;
        return 0;
}

int space_user_spec_parse(const char *s, SpaceUserSpec *ret) {
        SpaceUserSpec spec = {};
        const char *colon;
        size_t len;
        int r;

        if (!s)
                return -EINVAL;
        len = strnlen(s, SPACE_USER_SPEC_MAX + 1);
        if (len > SPACE_USER_SPEC_MAX)
                return -EINVAL;
        colon = strchr(s, ':');
        r = parse_part(s, colon ? (size_t) (colon - s) : len, spec.user, &spec.user_is_id, &spec.uid);
        if (r < 0)
                return r;
        if (colon) {
                r = parse_part(colon + 1, len - (size_t) (colon + 1 - s), spec.group, &spec.group_is_id, &spec.gid);
                if (r < 0)
                        return r;
        }
        if (ret)
                *ret = spec;
        return 0;
}

/* Reads one line without its newline into buf: 1, or 0 at the end. Overlong lines are skipped whole. */
static int read_line(FILE *f, char *buf, size_t size) {
        while (fgets(buf, (int) size, f)) {
                size_t n = strlen(buf);

                if (n > 0 && buf[n - 1] == '\n') {
                        buf[n - 1] = 0;
                        return 1;
                }
                if (feof(f))
                        return 1; /* a last line without a newline */
                /* too long: drop the rest of it */
                int c;
                do
                        c = fgetc(f);
                while (c != EOF && c != '\n');
        }
        return 0;
}

/* Splits line at ':' into exactly n fields; false when it has another number of fields. */
static bool split_fields(char *line, char **fields, size_t n) {
        size_t i = 0;

        fields[i++] = line;
        for (char *p = line; *p; p++)
                if (*p == ':') {
                        if (i == n)
                                return false;
                        *p = 0;
                        fields[i++] = p + 1;
                }
        return i == n;
}

static void add_group(SpaceUser *u, uint32_t gid) {
        for (size_t i = 0; i < u->n_groups; i++)
                if (u->groups[i] == gid)
                        return;
        if (u->n_groups < SPACE_USER_GROUPS_MAX)
                u->groups[u->n_groups++] = gid;
}

static bool member_of(char *members, const char *name) {
        for (char *m = members, *next; m; m = next) {
                next = strchr(m, ',');
                if (next)
                        *next++ = 0;
                if (strcmp(m, name) == 0)
                        return true;
        }
        return false;
}

/* passwd: name:password:uid:gid:gecos:home:shell */
static int find_passwd(const SpaceUserSpec *spec, FILE *passwd, SpaceUser *u) {
        char line[LINE_MAX_BYTES];

        if (!passwd)
                return 0;
        rewind(passwd);
        while (read_line(passwd, line, sizeof line) > 0) {
                char *f[7];
                uint32_t uid, gid;

                if (!split_fields(line, f, 7) || !parse_id(f[2], strlen(f[2]), &uid) ||
                    !parse_id(f[3], strlen(f[3]), &gid))
                        continue;
                if (spec->user_is_id ? uid != spec->uid : strcmp(f[0], spec->user) != 0)
                        continue;
                u->uid = uid;
                u->gid = gid;
                /* a name we could not pass on as USER, or a home we could not chdir to, is left out */
                if (strlen(f[0]) <= SPACE_USER_SPEC_MAX && space_user_spec_parse(f[0], NULL) >= 0)
                        strcpy(u->name, f[0]);
                if (f[5][0] == '/' && strlen(f[5]) < sizeof u->home)
                        strcpy(u->home, f[5]);
                return 1;
        }
        return 0;
}

int space_user_resolve(const SpaceUserSpec *spec, FILE *passwd, FILE *group, SpaceUser *ret) {
        char line[LINE_MAX_BYTES];
        SpaceUser u = { .home = "/" };
        bool found_group = !spec->group[0] || spec->group_is_id;

        if (!find_passwd(spec, passwd, &u)) {
                if (!spec->user_is_id)
                        return -ESRCH;
                u.uid = spec->uid;
                u.gid = 0;
        }
        if (spec->group[0] && spec->group_is_id)
                u.gid = spec->gid;

        /* group: name:password:gid:member,member,... */
        if (group && (!found_group || u.name[0])) {
                rewind(group);
                while (read_line(group, line, sizeof line) > 0) {
                        char *f[4];
                        uint32_t gid;

                        if (!split_fields(line, f, 4) || !parse_id(f[2], strlen(f[2]), &gid))
                                continue;
                        if (!found_group && strcmp(f[0], spec->group) == 0) {
                                u.gid = gid;
                                found_group = true;
                        }
                        if (u.name[0] && member_of(f[3], u.name))
                                add_group(&u, gid);
                }
        }
        if (!found_group)
                return -ENOENT;

        /* the primary group goes first; it may have been added as a member's group already */
        {
                uint32_t rest[SPACE_USER_GROUPS_MAX];
                size_t n = 0;

                for (size_t i = 0; i < u.n_groups; i++)
                        if (u.groups[i] != u.gid && n < SPACE_USER_GROUPS_MAX - 1)
                                rest[n++] = u.groups[i];
                u.groups[0] = u.gid;
                memcpy(u.groups + 1, rest, n * sizeof *rest);
                u.n_groups = n + 1;
        }
        *ret = u;
        return 0;
}
