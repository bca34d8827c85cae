/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "macro.h"

cJSON *json_array_from_strv(char *const *l) {
        cJSON *a = cJSON_CreateArray();

        for (char *const *i = l; a && i && *i; i++) {
                cJSON *s = cJSON_CreateString(*i);

                if (!s || !cJSON_AddItemToArray(a, s)) {
                        cJSON_Delete(s);
                        cJSON_Delete(a);
                        return NULL;
                }
        }
        return a;
}

int json_array_to_strv(const cJSON *a, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        const cJSON *i;
        size_t n = 0;

        if (!cJSON_IsArray(a))
                return -EINVAL;
        cJSON_ArrayForEach(i, a)
                if (!cJSON_IsString(i))
                        return -EINVAL;
        l = calloc((size_t) cJSON_GetArraySize(a) + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        cJSON_ArrayForEach(i, a) {
                l[n] = strdup(i->valuestring);
                if (!l[n])
                        return -ENOMEM;
                n++;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

char *strv_to_json_text(char *const *l) {
        cJSON *a = json_array_from_strv(l);
        char *s = a ? cJSON_PrintUnformatted(a) : NULL;

        cJSON_Delete(a);
        return s;
}

char **strv_from_json_text(const char *s) {
        cJSON *a = cJSON_Parse(s && *s ? s : "[]");
        const cJSON *i;
        char **l;
        size_t n = 0;

        l = calloc((size_t) (cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0) + 1, sizeof(char *));
        if (l && cJSON_IsArray(a))
                cJSON_ArrayForEach(i, a)
                        if (cJSON_IsString(i) && (l[n] = strdup(i->valuestring)))
                                n++;
        cJSON_Delete(a);
        return l;
}
