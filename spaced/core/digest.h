/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

int file_digest(const char *path, char **ret);   /* "sha256:<hex>", from PATH.sha256 when fresh */
