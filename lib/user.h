/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Users of a sandbox: the `user` of an EXEC (lib/proto.h) and of the API's exec, session and template config.
 *
 * A spec is NAME|UID[:GROUP|GID]: each part a name of [A-Za-z0-9._-] or a number, the whole at most
 * SPACE_USER_SPEC_MAX bytes. The daemon only checks the form; the guest agent resolves it against the guest's
 * own /etc/passwd and /etc/group, read as plain files (the agent is static: no NSS), like docker exec -u:
 *   - a name must be in passwd; its uid, primary group and home come from there;
 *   - a number need not be: one that is not in passwd runs with gid 0 and home "/" (what docker does);
 *   - :GROUP (a name, which must be in group) or :GID replaces the primary group;
 *   - the supplementary groups are the primary group plus every group that lists the user's name.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SPACE_USER_SPEC_MAX 64
#define SPACE_USER_GROUPS_MAX 64
#define SPACE_USER_HOME_MAX 4096

typedef struct SpaceUserSpec {
        char user[SPACE_USER_SPEC_MAX + 1];  /* the name or the number, as given */
        char group[SPACE_USER_SPEC_MAX + 1]; /* "" when there is no :GROUP */
        bool user_is_id, group_is_id;
        uint32_t uid, gid;                   /* when *_is_id */
} SpaceUserSpec;

/* -EINVAL when s is not a spec (empty part, a character outside [A-Za-z0-9._-], a number over 4294967294, more
 * than one ':', longer than SPACE_USER_SPEC_MAX). ret may be NULL to only check. */
int space_user_spec_parse(const char *s, SpaceUserSpec *ret);

typedef struct SpaceUser {
        uint32_t uid, gid;
        char name[SPACE_USER_SPEC_MAX + 1]; /* "" for a number that is not in passwd */
        char home[SPACE_USER_HOME_MAX];
        uint32_t groups[SPACE_USER_GROUPS_MAX]; /* gid first */
        size_t n_groups;
} SpaceUser;

/* Resolves spec against the passwd and group files (either may be NULL: the file is missing). Returns 0;
 * -ESRCH when the user is a name that passwd does not have; -ENOENT when the group is a name that group does
 * not have. Lines that are malformed or longer than the buffer are skipped; the first match wins. */
int space_user_resolve(const SpaceUserSpec *spec, FILE *passwd, FILE *group, SpaceUser *ret);
