/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The port proxy: HTTP to a server in a sandbox through a PORT tunnel, for
 * /v1/sandboxes/{id}/ports/{port}/{path} (a route of the API's table) and for every request whose Host is
 * PORT-ID.DOMAIN (proxy_host_route, the router's host route: any key, or the sandbox's traffic token). The
 * answer's framing is proxy/proxy-answer.h, a WebSocket's bytes after a 101 proxy/proxy-upgrade.h. */

#include "http/router.h"

void api_proxy(Request *r, const RouteArgs *a);
extern const Route proxy_host_route;
