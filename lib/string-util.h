/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Small string helpers the daemon's config parsers and the recipe parser share. */

/* Appends a copy of v to the NULL-terminated list *l (which may be NULL). -ENOMEM on failure, *l intact. */
int strv_extend(char ***l, const char *v);
/* Cuts leading and trailing whitespace off s in place; returns where the text now starts. */
char *string_strip(char *s);
