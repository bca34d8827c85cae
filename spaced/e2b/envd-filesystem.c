/* SPDX-License-Identifier: Apache-2.0 */
#include "e2b/e2b-internal.h"

/* envd's filesystem.Filesystem service over Connect RPC (JSON), and its /files REST route. */

const Route envd_filesystem_routes[] = {
        {},
};
