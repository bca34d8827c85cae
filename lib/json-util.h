/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* String lists (NULL-terminated char **, see string-util.h) as JSON arrays of strings: argv and env in the
 * API, the store and template configs. */

#include <cjson/cJSON.h>

static inline void cjson_freep(cJSON **j) {
        cJSON_Delete(*j);
}
#define _cleanup_cjson_ __attribute__((cleanup(cjson_freep)))

/* A new array with a copy of each string of l (NULL: an empty array). NULL when out of memory. */
cJSON *json_array_from_strv(char *const *l);
/* A new list with a copy of each element of a. -EINVAL when a is not an array or an element is not a string,
 * -ENOMEM; *ret is untouched then. An empty array gives an empty list, not NULL. */
int json_array_to_strv(const cJSON *a, char ***ret);

/* l as the text of a JSON array, for a database column. NULL when out of memory. */
char *strv_to_json_text(char *const *l);
/* The strings of the JSON array in s (NULL or "": none). What is not a string is skipped and text that is not
 * an array gives an empty list: the columns this reads were written by strv_to_json_text(). NULL when out of
 * memory. */
char **strv_from_json_text(const char *s);
