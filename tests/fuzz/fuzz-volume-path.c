/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: paths and names in a volume (spaced/volume/volume-path.c), which come from any client of the
 * API and from a guest that mounts the volume.
 *
 * Input: the bytes of a path (cut at a NUL, as a C string is).
 * Invariants (abort on violation): the normalizer answers 0 or -EINVAL/-ENAMETOOLONG with an error of code
 * invalid_path (-ENOMEM aside); what it takes is relative and clean (no leading, trailing or doubled '/', no "."
 * or ".." component, no name over 255 bytes, no longer than the input) and normalizes to itself again; an input
 * with a ".." component is never taken. A valid volume name has none of '/', NUL or a leading '.' or '-'. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-util.h"
#include "volume/volume.h"

static bool has_dotdot(const char *p) {
        for (const char *c = p; (c = strstr(c, "..")); c++)
                if ((c == p || c[-1] == '/') && (c[2] == '\0' || c[2] == '/'))
                        return true;
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = malloc(size + 1), *out = NULL, *again = NULL;
        Error e = {};
        int r;

        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        r = volume_path_normalize(text, &out, &e);
        check(r == 0 || r == -EINVAL || r == -ENAMETOOLONG || r == -ENOMEM);
        if (r == -EINVAL || r == -ENAMETOOLONG)
                check(e.code == ERROR_INVALID_PATH && e.message);
        if (r == 0) {
                size_t n = strlen(out);

                check(n <= strlen(text) && !has_dotdot(text));
                check(n == 0 || (out[0] != '/' && out[n - 1] != '/' && !strstr(out, "//")));
                for (const char *c = out; *c;) {
                        size_t k = strcspn(c, "/");
                        check(k > 0 && k <= VOLUME_COMPONENT_MAX);
                        check(!(k == 1 && c[0] == '.') && !(k == 2 && c[0] == '.' && c[1] == '.'));
                        c += k + (c[k] == '/');
                }
                check(volume_path_normalize(out, &again, NULL) == 0 && strcmp(again, out) == 0);
        }
        if (volume_name_valid(text))
                check(!strchr(text, '/') && text[0] != '.' && text[0] != '-' && strlen(text) <= VOLUME_NAME_MAX);
        error_done(&e);
        free(again);
        free(out);
        free(text);
        return 0;
}
