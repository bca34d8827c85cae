/* SPDX-License-Identifier: Apache-2.0 */
#include "e2b/e2b-internal.h"

/* envd's process.Process service over Connect RPC (JSON). */

const Route envd_process_routes[] = {
        {},
};
