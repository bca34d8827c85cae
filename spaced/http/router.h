/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The router: route tables (the API's, the proxy's, the E2B facade's), registered at start and matched in
 * that order, and the host route that takes every request whose Host names a sandbox's port. */

#include <stdbool.h>

#include "http/http.h"

#define ROUTE_ARGS_MAX 4

/* The {name} segments of a matched URL, in order. */
typedef struct RouteArgs {
        const char *arg[ROUTE_ARGS_MAX];
        char buf[ROUTE_ARGS_MAX][256];
} RouteArgs;

/* What a request over TCP needs (the unix socket checks peer credentials instead). */
typedef enum RouteAuth {
        ROUTE_AUTH_KEY,    /* the default: an API key, else 401 unauthorized */
        ROUTE_AUTH_TOKEN,  /* an API key or a token the handler checks itself (Request.authenticated says) */
        ROUTE_AUTH_NONE,   /* public (the OpenAPI document) */
} RouteAuth;

typedef struct Route {
        const char *method;
        const char *pattern;
        void (*handler)(Request *r, const RouteArgs *a);
        /* Set for routes whose body is streamed (the begin sets r->upload) instead of collected. */
        void (*begin)(Request *r, const RouteArgs *a);
        /* Optional: from the headers, before begin and before any of the body is read (and after token_ok):
         * whether the request must wait for something first (its sandbox to wake up). It answers, or parks the
         * request with http_continue() on a continuation that calls http_begin() when it carries on, or
         * returns; the handler runs once, after the body. */
        void (*ready)(Request *r, const RouteArgs *a);
        RouteAuth auth;
        /* ROUTE_AUTH_TOKEN: over TCP without a valid API key, called before any of the body is read: whether the
         * request carries a token that can open it (a lookup, no more); false when it answered (401, 404). NULL:
         * the route has no body to protect. */
        bool (*token_ok)(Request *r);
        ErrorStyle errors;
} Route;

/* Adds a table of routes, which ends with an entry whose method is NULL; tables are matched in the order added.
 * -E2BIG when there are too many. */
int http_add_routes(const Route *table);
/* The route for every request whose Host is PORT-ID.DOMAIN (r->host_port): the port proxy's. */
void http_set_host_route(const Route *rt);
const Route *http_find_route(const char *method, const char *url, RouteArgs *ret, bool *ret_path_known);
/* The route of r: http_find_route()'s, or the host route for a PORT-ID.DOMAIN Host (r->host_port). */
const Route *http_request_route(Request *r, RouteArgs *ret, bool *ret_path_known);
/* The error dialect of a URL no route matched (an unknown method or path under a facade's prefix). */
ErrorStyle http_error_style_for(const char *url);
/* Runs r's route handler (404 or 405 when there is none; 400 for a malformed {argument}). */
void http_route(Request *r);
/* Decides, from the URL of a request that has just started, whether its body is streamed (REQUEST_UPLOAD);
 * answers a malformed {argument}. */
void http_classify(Request *r);
/* Then, still before the body: the route's ready, and its begin (which sets r->upload) unless ready answered
 * or parked the request. */
void http_prepare(Request *r);
/* The route's begin, if it has one: from http_prepare(), or from the continuation of a ready that parked. */
void http_begin(Request *r);
