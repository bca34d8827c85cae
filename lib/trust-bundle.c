/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "trust-bundle.h"

#define PEM_BEGIN "-----BEGIN CERTIFICATE-----\n"
#define PEM_END "-----END CERTIFICATE-----\n"

bool trust_pem_valid(const char *pem) {
        size_t l = pem ? strlen(pem) : 0;

        if (l < strlen(PEM_BEGIN) + strlen(PEM_END) || l > TRUST_PEM_MAX)
                return false;
        if (strncmp(pem, PEM_BEGIN, strlen(PEM_BEGIN)) != 0 || strcmp(pem + l - strlen(PEM_END), PEM_END) != 0)
                return false;
        /* one block: the first "-----" after BEGIN is its END (no key, no second certificate) */
        return strstr(pem + strlen(PEM_BEGIN), "-----") == pem + l - strlen(PEM_END);
}

/* Where needle[0..k) is in hay[0..n), or NULL. */
static const char *find(const char *hay, size_t n, const char *needle, size_t k) {
        return k == 0 ? NULL : memmem(hay, n, needle, k);
}

int trust_bundle_edit(const char *bundle, size_t n, const char *old_pem, const char *new_pem, char **ret,
                      size_t *ret_n) {
        size_t lo = old_pem && !streq(old_pem, new_pem) ? strlen(old_pem) : 0, ln = strlen(new_pem), k = 0;
        _cleanup_free_ char *out = NULL;
        const char *p = bundle, *end = bundle + n, *hit;
        bool changed = false;

        *ret = NULL;
        *ret_n = 0;
        if (n > TRUST_BUNDLE_MAX)
                return -EFBIG;
        /* room for the bundle, a newline and the new PEM */
        out = malloc(n + 1 + ln + 1);
        if (!out)
                return -ENOMEM;
        while ((hit = find(p, (size_t) (end - p), old_pem, lo))) {
                memcpy(out + k, p, (size_t) (hit - p));
                k += (size_t) (hit - p);
                p = hit + lo;
                changed = true;
        }
        memcpy(out + k, p, (size_t) (end - p));
        k += (size_t) (end - p);
        if (!find(out, k, new_pem, ln)) {
                if (k > 0 && out[k - 1] != '\n')
                        out[k++] = '\n';
                memcpy(out + k, new_pem, ln);
                k += ln;
                changed = true;
        }
        out[k] = 0;
        if (!changed)
                return 0;
        *ret = TAKE_PTR(out);
        *ret_n = k;
        return 1;
}
