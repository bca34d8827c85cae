/* SPDX-License-Identifier: Apache-2.0 */
#include "e2b/e2b-internal.h"

/* E2B's control plane: /sandboxes, /v2/sandboxes, /snapshots. */

const Route e2b_sandbox_routes[] = {
        {},
};
