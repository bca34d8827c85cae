/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Small string helpers of the daemon, the CLI and the recipe parser. */

#include <stdbool.h>
#include <stddef.h>

/* Appends a copy of v to the NULL-terminated list *l (which may be NULL). -ENOMEM on failure, *l intact. */
int strv_extend(char ***l, const char *v);
/* The entries of a NULL-terminated list (0 for NULL), and whether it has none. */
size_t strv_length(char *const *l);
static inline bool strv_isempty(char *const *l) {
        return !l || !l[0];
}
/* Puts a copy of kv ("K=V") into *l in place of the entry with the same K, or appends it (env lists). */
int strv_set_kv(char ***l, const char *kv);
/* Cuts leading and trailing whitespace off s in place; returns where the text now starts. */
char *string_strip(char *s);
/* Whether s is exactly n lowercase hex digits (ids, tokens and digests are written that way): s[0..n-1] are
 * 0-9 or a-f and s[n] is the end of the string. False for NULL. */
bool string_is_hex(const char *s, size_t n);
/* The n bytes at b as 2n lowercase hex digits and a NUL, into ret (2n + 1 bytes): digests, seeds, MACs. */
void string_hex_encode(const void *b, size_t n, char *ret);
/* Whether the n bytes at a and b are equal, in a time that does not depend on where they differ: for
 * comparing secrets (API keys, attach tokens) with what a client sent. */
bool memeq_const_time(const void *a, const void *b, size_t n);
/* A copy of s with every control character written as \xNN: bytes below 0x20, 0x7f, and the C1 controls
 * U+0080..U+009F in UTF-8 (both bytes). For text from a guest (file names, messages that carry them) that is
 * printed on a terminal, where an ESC could move the cursor, set the title or hide what came before. Other
 * bytes, valid UTF-8 or not, stay as they are. NULL: out of memory. */
char *string_escape_control(const char *s);
