/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The E2B facade (ARCHITECTURE.md, decision 9; space-e2b(7)): E2B's control plane (/sandboxes, /v2/sandboxes,
 * /snapshots) and its in-sandbox daemon envd (Connect RPC process.Process and filesystem.Filesystem, /files,
 * /health) served on the daemon's own listeners, on top of the subsystems the native API uses. */

/* Adds the facade's route tables to the HTTP router (http/router.h). */
int e2b_add_routes(void);
