/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "string-util.h"
#include "volume/volume.h"

/* Names and paths as clients give them (volume.h): checked here, before anything touches the disk. A path is
 * made relative and clean; ".." is refused, not resolved, so that what a client names is what it gets (and the
 * resolution below, openat2(RESOLVE_IN_ROOT), is the second wall, not the only one). */

bool volume_name_valid(const char *name) {
        size_t n = name ? strlen(name) : 0;

        if (n == 0 || n > VOLUME_NAME_MAX ||
            !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') ||
              (name[0] >= '0' && name[0] <= '9')))
                return false;
        if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
                return false;
        /* "vol-" and 16 hex digits is an id's shape */
        return !(n == VOLUME_ID_LEN && strncmp(name, "vol-", 4) == 0 && string_is_hex(name + 4, 16));
}

static bool temp_name(const char *name, size_t n) {
        size_t k = strlen(VOLUME_TEMP_PREFIX);

        return n == k + 16 && strncmp(name, VOLUME_TEMP_PREFIX, k) == 0 && strspn(name + k, "0123456789abcdef") >= 16;
}

int volume_path_normalize(const char *path, char **ret, Error *reterr) {
        _cleanup_free_ char *out = NULL;
        size_t len = path ? strlen(path) : 0, o = 0;

        if (len > VOLUME_PATH_MAX)
                return error_set(reterr, ERROR_INVALID_PATH, "a path in a volume is at most %d bytes", VOLUME_PATH_MAX)
                        ?: -ENAMETOOLONG;
        out = malloc(len + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len;) {
                size_t n = strcspn(path + i, "/");

                if (n == 0 || (n == 1 && path[i] == '.')) {
                        i += n + 1;
                        continue;
                }
                if (n == 2 && path[i] == '.' && path[i + 1] == '.')
                        return error_set(reterr, ERROR_INVALID_PATH,
                                         "a path in a volume cannot hold '..': name the entry from the volume's root")
                                ?: -EINVAL;
                if (n > VOLUME_COMPONENT_MAX)
                        return error_set(reterr, ERROR_INVALID_PATH, "a name in a volume is at most %d bytes",
                                         VOLUME_COMPONENT_MAX) ?: -ENAMETOOLONG;
                if (temp_name(path + i, n))
                        return error_set(reterr, ERROR_INVALID_PATH,
                                         "'%.*s': names '" VOLUME_TEMP_PREFIX "' and 16 hex digits are the daemon's "
                                         "(a write in progress)", (int) n, path + i) ?: -EINVAL;
                if (o > 0)
                        out[o++] = '/';
                memcpy(out + o, path + i, n);
                o += n;
                i += n + 1;
        }
        out[o] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}

bool volume_temp_name(const char *name) {
        return temp_name(name, strlen(name));
}
