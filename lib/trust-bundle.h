/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The daemon's local CA in a guest's trust bundle (ARCHITECTURE.md, "Secrets"): the agent adds the CA that INIT
 * names to the PEM bundle the guest's TLS clients read, and takes out the one it replaces. Pure: the agent does
 * the files, so that the edit is tested on the host. */

#include <stdbool.h>
#include <stddef.h>

/* A CA's PEM as INIT may carry it: at most this long */
#define TRUST_PEM_MAX (16U * 1024U)
/* ... and a bundle the agent edits (Debian's is about 200 KiB) */
#define TRUST_BUNDLE_MAX (16U * 1024U * 1024U)

/* Whether pem is one certificate and nothing else: BEGIN CERTIFICATE first, END CERTIFICATE and a newline
 * last, no other PEM block (a key above all), at most TRUST_PEM_MAX bytes. */
bool trust_pem_valid(const char *pem);

/* The bundle[0..n) without each copy of old_pem (NULL: none to take out) and with new_pem once at its end (on
 * a line of its own), into *ret (NUL-terminated, *ret_n bytes). Returns 1 when that differs from bundle, 0 when
 * it is the same (then *ret is NULL), -ENOMEM, -EFBIG past TRUST_BUNDLE_MAX. */
int trust_bundle_edit(const char *bundle, size_t n, const char *old_pem, const char *new_pem, char **ret,
                      size_t *ret_n);
