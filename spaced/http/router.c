/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>

#include "http/router.h"
#include "macro.h"

/* The router: the route tables that the API, the proxy and the E2B facade register at start, matched in the
 * order they were added; the shape of a URL's {arguments} is checked before any handler runs. */

/* {ref} and {template} are template references, which may have '/' in them. */
static bool is_template_ref(const char *seg, size_t len) {
        return (len == 5 && strncmp(seg, "{ref}", 5) == 0) || (len == 10 && strncmp(seg, "{template}", 10) == 0);
}

/* Matches url against pattern segment by segment; {name} segments are captured in order. */
static bool route_match(const char *pattern, const char *url, RouteArgs *ret) {
        const char *p = pattern, *u = url;
        unsigned n = 0;

        *ret = (RouteArgs) {};
        for (;;) {
                size_t pl, ul;

                while (*p == '/')
                        p++;
                /* {path}, last: the rest of the URL from the '/' that must follow (the handler reads it from the
                 * URL itself, which may be longer than an argument) */
                if (strcmp(p, "{path}") == 0)
                        return *u == '/';
                while (*u == '/')
                        u++;
                if (!*p || !*u)
                        return !*p && !*u;
                pl = strcspn(p, "/");
                ul = strcspn(u, "/");
                if (is_template_ref(p, pl)) {
                        /* a template reference spans segments (team/python:3.12): it takes all the URL's
                         * segments but as many as the pattern has after it */
                        unsigned after = 0, have = 0;
                        const char *e;

                        if (n >= ROUTE_ARGS_MAX)
                                return false;
                        for (const char *q = p + pl; *q; q++)
                                after += *q == '/' && q[1] && q[1] != '/';
                        for (const char *q = u; *q; q++)
                                have += *q != '/' && (q == u || q[-1] == '/');
                        if (have < after + 1)
                                return false;
                        e = u;
                        for (unsigned k = 0; k < have - after; k++) {
                                while (*e == '/')
                                        e++;
                                e += strcspn(e, "/");
                        }
                        ul = (size_t) (e - u);
                        size_t keep = ul < sizeof ret->buf[0] ? ul : sizeof ret->buf[0] - 1;
                        memcpy(ret->buf[n], u, keep);
                        ret->buf[n][keep] = 0;
                        ret->arg[n] = ret->buf[n];
                        n++;
                } else if (*p == '{') {
                        if (n >= ROUTE_ARGS_MAX)
                                return false;
                        /* an overlong segment is cut short here and refused by args_valid() */
                        size_t keep = ul < sizeof ret->buf[0] ? ul : sizeof ret->buf[0] - 1;
                        memcpy(ret->buf[n], u, keep);
                        ret->buf[n][keep] = 0;
                        ret->arg[n] = ret->buf[n];
                        n++;
                } else if (pl != ul || memcmp(p, u, pl) != 0)
                        return false;
                p += pl;
                u += ul;
        }
}

#define ROUTE_TABLES_MAX 12
static const Route *route_tables[ROUTE_TABLES_MAX];
static const Route *host_route;

int http_add_routes(const Route *table) {
        for (size_t i = 0; i < ROUTE_TABLES_MAX; i++) {
                if (route_tables[i] == table)
                        return 0;
                if (!route_tables[i]) {
                        route_tables[i] = table;
                        return 0;
                }
        }
        return -E2BIG;
}

const Route *http_find_route(const char *method, const char *url, RouteArgs *ret, bool *ret_path_known) {
        const Route *found = NULL;
        bool known = false;

        for (size_t i = 0; i < ROUTE_TABLES_MAX && route_tables[i] && !found; i++)
                for (const Route *rt = route_tables[i]; rt->method; rt++)
                        if (route_match(rt->pattern, url, ret)) {
                                known = true;
                                if (streq(rt->method, method)) {
                                        found = rt;
                                        break;
                                }
                        }
        if (ret_path_known)
                *ret_path_known = known;
        return found;
}

const Route *http_request_route(Request *r, RouteArgs *ret, bool *ret_path_known) {
        if (r->host_port && host_route) {
                *ret = (RouteArgs) {};
                if (ret_path_known)
                        *ret_path_known = true;
                return host_route;
        }
        return http_find_route(r->method, r->url, ret, ret_path_known);
}

ErrorStyle http_error_style_for(const char *url) {
        RouteArgs a;

        /* the dialect of any route on the same path (another method), else the native one */
        for (size_t i = 0; i < ROUTE_TABLES_MAX && route_tables[i]; i++)
                for (const Route *rt = route_tables[i]; rt->method; rt++)
                        if (route_match(rt->pattern, url, &a))
                                return rt->errors;
        return ERROR_STYLE_NATIVE;
}

/* Ids in URLs are checked for shape before any handler sees them: a {pid} is a number, everything else
 * (sandbox ids and names, operation, session and key ids) 1 to ROUTE_ARG_MAX of [A-Za-z0-9._-]. */
#define ROUTE_ARG_MAX 64

static bool args_valid(Request *r, const Route *rt, const RouteArgs *a) {
        const char *p = rt->pattern;

        for (unsigned i = 0; i < ROUTE_ARGS_MAX && a->arg[i]; i++) {
                const char *v = a->arg[i], *name;
                size_t n = strlen(v), namelen;
                bool number, good;

                p = strchr(p, '{');
                if (!p)
                        break;
                name = ++p;
                namelen = strcspn(name, "}");
                number = namelen == 3 && memcmp(name, "pid", 3) == 0;
                if (is_template_ref(name - 1, namelen + 2)) {
                        /* template references: the handler says precisely what is wrong with one */
                        if (n < 1 || n > 255 ||
                            strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:") != n) {
                                http_respond_error(r, ERROR_INVALID_REF,
                                                   "'%.64s' in the URL is not a template reference: use "
                                                   "NAME[:TAG] or sha256:<hex>", v);
                                return false;
                        }
                        continue;
                }
                good = n >= 1 && n <= (number ? 10 : ROUTE_ARG_MAX) &&
                       strspn(v, number ? "0123456789"
                                        : "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
                if (!good) {
                        int shown = n > ROUTE_ARG_MAX ? ROUTE_ARG_MAX : (int) n;
                        if (number)
                                http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                                   "'%.*s' in the URL is not a process id (a number)", shown, v);
                        else
                                http_respond_error(r, ERROR_INVALID_ARGUMENT,
                                                   "'%.*s%s' in the URL is not a valid {%.*s}: use 1 to %d letters, "
                                                   "digits, '.', '_' or '-'",
                                                   shown, v, n > ROUTE_ARG_MAX ? "..." : "", (int) namelen, name,
                                                   ROUTE_ARG_MAX);
                        return false;
                }
        }
        return true;
}

void http_classify(Request *r) {
        RouteArgs a;
        const Route *rt = http_request_route(r, &a, NULL);

        if (rt && !args_valid(r, rt, &a))
                return;
        if (rt && rt->begin)
                r->kind = REQUEST_UPLOAD;
}

void http_prepare(Request *r) {
        RouteArgs a;
        const Route *rt = http_request_route(r, &a, NULL);

        if (!rt)
                return;
        if (rt->ready) {
                rt->ready(r, &a);
                if (r->responded || r->suspended)
                        return;
        }
        if (rt->begin)
                rt->begin(r, &a);
}

void http_begin(Request *r) {
        RouteArgs a;
        const Route *rt = http_request_route(r, &a, NULL);

        if (rt && rt->begin && !r->responded)
                rt->begin(r, &a);
}

void http_set_host_route(const Route *rt) {
        host_route = rt;
}

void http_route(Request *r) {
        const Route *rt;
        RouteArgs a;
        bool known;

        rt = http_request_route(r, &a, &known);
        if (!rt) {
                if (known)
                        http_respond_error(r, ERROR_METHOD_NOT_ALLOWED, "%s is not allowed on %s", r->method, r->url);
                else
                        http_respond_error(r, ERROR_NOT_FOUND, "no such route: %s %s", r->method, r->url);
                return;
        }
        if (!args_valid(r, rt, &a))
                return;
        rt->handler(r, &a);
}
