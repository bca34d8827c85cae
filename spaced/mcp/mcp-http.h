/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * /mcp: MCP's streamable HTTP transport (revisions 2025-03-26 to 2025-11-25) on every listener, over the
 * engine of lib/mcp.h (ARCHITECTURE.md, "MCP"). A POST carries one JSON-RPC message; an initialize without a
 * session makes one (Mcp-Session-Id), whose tools call this daemon's own /v1 API over its unix socket. A
 * session lives in memory, belongs to who made it (the unix socket's user, or one API key), and ends with a
 * DELETE, an hour idle, or the daemon's stop, which removes the sandboxes it made.
 */

#include <stdbool.h>

#include "core/manager.h"

/* Adds the /mcp routes to the router and arms the idle timer. */
int mcp_http_setup(Manager *m);

/* Ends every session (each on a worker: its calls cancelled, its sandboxes removed through the API, so the
 * loop must keep running meanwhile), then calls done(m), at the latest after a deadline. New sessions are
 * refused from then on. False when there was nothing to end (or a shutdown is under way already): done is not
 * called, the caller goes on at once. */
bool mcp_http_shutdown(Manager *m, void (*done)(Manager *m));
