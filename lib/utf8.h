/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* UTF-8 as RFC 3629 has it: no overlong forms, no surrogates, nothing above U+10FFFF. NUL counts as invalid
 * everywhere here: it would end a C or a cJSON string early. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The length of the character at p (n bytes there), 0 when it is no valid one or is cut short. */
size_t utf8_char_len(const uint8_t *p, size_t n);
/* Whether the n bytes at p are all valid characters. */
bool utf8_valid(const void *p, size_t n);
/* How many bytes at the end of p (n bytes) are the start of a valid character cut short: 0 to 3. */
size_t utf8_incomplete_tail(const uint8_t *p, size_t n);
