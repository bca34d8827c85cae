/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress/egress-internal.h"
#include "macro.h"
#include "string-util.h"

/* Secret bindings (space-egress(5), "Secrets"; ARCHITECTURE.md, "Secrets"): which secret goes to which
 * destinations, and how, from egress_secret lines; and the rewrite of a request head that applies them. Pure:
 * no I/O, no logging, and nothing here ever sees a value but the rewrite, which never copies it anywhere but
 * into the head it returns. */

/* Headers a binding may not set: they frame the request or name its destination, which the gateway checked. */
static const char *const framing_headers[] = {
        "host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "expect", NULL,
};

static bool token_char(char c) {
        return isalnum((unsigned char) c) || strchr("!#$%&'*+-.^_`|~", c);
}

void egress_binding_done(EgressBinding *b) {
        strv_free(b->secrets);
        egress_rules_done(&b->dests);
        free(b->header);
        free(b->template);
        strv_free(b->refs);
        free(b->text);
        *b = (EgressBinding) {};
}

static bool secret_name_valid(const char *s, size_t n) {
        if (n == 0 || n > 64 || !isalnum((unsigned char) s[0]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char) s[i]) && !strchr("._-", s[i]))
                        return false;
        return true;
}

/* b uses secret, written ref in its template (once each). */
static int add_secret(EgressBinding *b, const char *secret, size_t n, const char *ref, size_t ref_len) {
        _cleanup_free_ char *name = strndup(secret, n), *r = strndup(ref, ref_len);

        if (!name || !r)
                return -ENOMEM;
        for (char **k = b->secrets; k && *k; k++)
                if (streq(*k, name))
                        return 0;
        if (strv_extend(&b->secrets, name) < 0 || strv_extend(&b->refs, r) < 0)
                return -ENOMEM;
        return 0;
}

/* The secrets a sandbox's own binding names in its value: each ${e2b.secrets.NAME}. Another ${e2b. reference
 * would go out as it is, so it is refused rather than sent to a destination that expects a credential. */
static int parse_refs(EgressBinding *b, const char *where, Error *reterr) {
        for (const char *t = strstr(b->template, "${"); t; t = strstr(t + 2, "${")) {
                const char *name = t + strlen(EGRESS_SECRET_REF_PREFIX), *end;
                int r;

                if (strncmp(t, "${e2b.", 6) != 0)
                        continue;
                if (strncmp(t, EGRESS_SECRET_REF_PREFIX, strlen(EGRESS_SECRET_REF_PREFIX)) != 0)
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s: '%.40s' is not resolved by space: only "
                                         EGRESS_SECRET_REF_PREFIX "NAME} is", where, t) ?: -EINVAL;
                end = strchr(name, '}');
                if (!end || !secret_name_valid(name, (size_t) (end - name)))
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s: '%.80s' does not name a secret "
                                         "(letters, digits, '.', '_', '-', at most 64)", where, t) ?: -EINVAL;
                r = add_secret(b, name, (size_t) (end - name), t, (size_t) (end + 1 - t));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* "NAME: TEMPLATE" of a header binding into b: an egress_secret line's with {value} for its secret, a
 * sandbox's own (own) with the secrets it names, or none. */
static int parse_header(EgressBinding *b, const char *spec, bool own, const char *where, Error *reterr) {
        const char *colon = strchr(spec, ':'), *t;
        size_t n;

        n = colon ? (size_t) (colon - spec) : 0;
        if (n == 0 || n > 64)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s: 'header %s': expected 'header NAME: VALUE' "
                                 "with {value} where the secret goes", where, spec) ?: -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!token_char(spec[i]))
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s: '%.*s' is not a header name", where,
                                         (int) n, spec) ?: -EINVAL;
        b->header = strndup(spec, n);
        if (!b->header)
                return -ENOMEM;
        for (const char *const *f = framing_headers; *f; f++)
                if (strcasecmp(b->header, *f) == 0)
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s: a binding cannot set %s: it frames the "
                                         "request or names where it goes", where, b->header) ?: -EINVAL;
        t = colon + 1 + strspn(colon + 1, " \t");
        for (const char *c = t; *c; c++)
                if ((unsigned char) *c < 0x20 && *c != '\t')
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s: the header's value holds a control "
                                         "character", where) ?: -EINVAL;
        if (strlen(t) > EGRESS_TEMPLATE_MAX)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s: the header's value is over %u bytes", where,
                                 EGRESS_TEMPLATE_MAX) ?: -EINVAL;
        if (!own && !strstr(t, "{value}"))
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s: the header's value '%s' has no {value} for the "
                                 "secret to go", where, t) ?: -EINVAL;
        b->template = strdup(t);
        if (!b->template)
                return -ENOMEM;
        return own ? parse_refs(b, where, reterr) : 0;
}

/* The destinations: exact host names (the gateway must know a name to say where a secret may go, and to make
 * a certificate for it), each with ports or not. */
static int parse_dests(EgressBinding *b, char *list, const char *where, Error *reterr) {
        char *save = NULL;
        int r;

        for (char *d = strtok_r(list, ", \t", &save); d; d = strtok_r(NULL, ", \t", &save)) {
                r = egress_rule_parse(&b->dests, EGRESS_ALLOW, d, where, reterr);
                if (r < 0)
                        return r;
                if (!b->dests.rules[b->dests.n - 1].host)
                        return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s: '%s' is an address: a binding names "
                                         "hosts", where, d) ?: -EINVAL;
        }
        if (b->dests.n == 0)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s: no destination: name the hosts it goes to",
                                 where) ?: -EINVAL;
        return 0;
}

/* "header" ends the destinations: what follows it is the header, commas and all. */
static char *find_header(char *rest) {
        char *header = strstr(rest, "header ");

        while (header && header != rest && !isspace((unsigned char) header[-1]))
                header = strstr(header + 1, "header ");
        return header;
}

int egress_binding_parse(EgressConfig *c, const char *text, Error *reterr) {
        _cleanup_free_ char *copy = strdup(text ?: ""), *where = NULL;
        _cleanup_(egress_binding_done) EgressBinding b = {};
        char *colon, *rest, *secret, *header;
        EgressProfile *p;
        EgressBinding *n;
        int r;

        if (!copy)
                return -ENOMEM;
        colon = strchr(copy, ':');
        if (!colon)
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                 "expected 'PROFILE: SECRET HOST[:PORT][, ...] [header NAME: VALUE]'") ?: -EINVAL;
        *colon = 0;
        r = egress_profile_get(c, string_strip(copy), &p, reterr);
        if (r < 0)
                return r;
        rest = colon + 1 + strspn(colon + 1, " \t");
        secret = rest;
        rest += strcspn(rest, " \t");
        if (*rest)
                *rest++ = 0;
        if (asprintf(&where, "egress profile %s, secret %s", p->name, secret) < 0)
                return -ENOMEM;
        if (!secret_name_valid(secret, strlen(secret)))
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "%s: not a secret name", where) ?: -EINVAL;
        r = add_secret(&b, secret, strlen(secret), "{value}", strlen("{value}"));
        if (r < 0)
                return r;
        header = find_header(rest);
        if (header) {
                *header = 0;
                r = parse_header(&b, header + strlen("header "), false, where, reterr);
                if (r < 0)
                        return r;
        }
        r = parse_dests(&b, rest, where, reterr);
        if (r < 0)
                return r;
        b.text = strdup(text);
        if (!b.text)
                return -ENOMEM;
        if (p->n_bindings >= EGRESS_RULES_MAX)
                return error_set(reterr, ERROR_LIMIT_EXCEEDED, "%s: too many bindings", where) ?: -E2BIG;
        n = reallocarray(p->bindings, p->n_bindings + 1, sizeof *n);
        if (!n)
                return -ENOMEM;
        p->bindings = n;
        n[p->n_bindings++] = b;
        b = (EgressBinding) {};
        return 0;
}

int egress_binding_parse_own(const char *text, EgressBinding *ret, Error *reterr) {
        _cleanup_free_ char *copy = strdup(text ?: "");
        _cleanup_(egress_binding_done) EgressBinding b = {};
        char *header;
        int r;

        if (!copy)
                return -ENOMEM;
        header = find_header(copy);
        if (!header)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "sandbox binding '%.200s': expected "
                                 "'HOST[, ...] header NAME: VALUE'", text) ?: -EINVAL;
        *header = 0;
        r = parse_header(&b, header + strlen("header "), true, "sandbox binding", reterr);
        if (r >= 0)
                r = parse_dests(&b, copy, "sandbox binding", reterr);
        if (r < 0)
                return r;
        b.text = strdup(text);
        if (!b.text)
                return -ENOMEM;
        *ret = b;
        b = (EgressBinding) {};
        return 0;
}

int egress_policy_add_bindings(EgressPolicy *p, char *const *lines, Error *reterr) {
        const EgressBinding **all;
        size_t n = 0;
        int r;

        while (lines && lines[n])
                n++;
        if (n == 0)
                return 0;
        if (n > EGRESS_OWN_BINDINGS_MAX || p->own_bindings)
                return -E2BIG;
        /* made whole before any pointer into it is taken */
        p->own_bindings = calloc(n, sizeof *p->own_bindings);
        all = reallocarray(p->bindings, p->n_bindings + n, sizeof *all);
        if (all)
                p->bindings = all;
        if (!p->own_bindings || !all)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                r = egress_binding_parse_own(lines[i], &p->own_bindings[i], reterr);
                if (r < 0)
                        return r;
                p->n_own_bindings++;
        }
        for (size_t i = 0; i < n; i++)
                p->bindings[p->n_bindings++] = &p->own_bindings[i];
        return 0;
}

bool egress_binding_applies(const EgressBinding *b, const char *host, uint16_t port) {
        if (!host)
                return false;
        for (size_t i = 0; i < b->dests.n; i++) {
                const EgressRule *r = &b->dests.rules[i];

                if (!r->host || !streq(r->host, host))
                        continue;
                if (r->port_min == 0 && r->port_max == 0 ? port != 25 && port != 465 && port != 587
                                                         : port >= r->port_min && port <= r->port_max)
                        return true;
        }
        return false;
}

int egress_profiles_secrets(const EgressConfig *c, char *const *profiles, char ***ret) {
        char **names = NULL;

        for (char *const *a = profiles; a && *a; a++) {
                const EgressProfile *p = egress_profile_find(c, *a);

                for (size_t i = 0; p && i < p->n_bindings; i++) {
                        const char *secret = p->bindings[i].secrets[0];
                        bool seen = false;

                        for (char **n = names; n && *n && !seen; n++)
                                seen = streq(*n, secret);
                        if (!seen && strv_extend(&names, secret) < 0) {
                                strv_free(names);
                                return -ENOMEM;
                        }
                }
        }
        *ret = names;
        return 0;
}

int egress_placeholder_variable(const char *secret, char **ret) {
        char *v;

        if (asprintf(&v, "SPACE_SECRET_%s", secret) < 0)
                return -ENOMEM;
        for (char *c = v; *c; c++)
                *c = *c == '.' || *c == '-' ? '_' : (char) toupper((unsigned char) *c);
        *ret = v;
        return 0;
}

bool egress_placeholder_valid(const char *secret, const char *value) {
        size_t n = strlen(secret);

        return value && strncmp(value, "space-secret-", 13) == 0 && strncmp(value + 13, secret, n) == 0 &&
               value[13 + n] == '-' && string_is_hex(value + 14 + n, 16);
}

/* ---- the rewrite */

static int append(SpaceBuf *out, const void *p, size_t n, size_t max) {
        if (out->len + n > max)
                return -E2BIG;
        return space_buf_append(out, p, n) < 0 ? -ENOMEM : 0;
}

static bool is_header(const char *line, size_t n, const char *name) {
        size_t k = strlen(name);

        return n > k && line[k] == ':' && strncasecmp(line, name, k) == 0;
}

static bool is_framing(const char *line, size_t n) {
        for (const char *const *f = framing_headers; *f; f++)
                if (is_header(line, n, *f))
                        return true;
        return false;
}

/* line (a header line without its CRLF) with every placeholder of inj replaced by its value; framing headers
 * (Host above all, which the gateway checked) go as they are. */
static int append_replaced(SpaceBuf *out, const char *line, size_t n, const EgressInjection *inj, size_t n_inj,
                           size_t max, unsigned *ret_done) {
        const char *colon = memchr(line, ':', n);
        size_t i = colon && !is_framing(line, n) ? (size_t) (colon - line) + 1 : n;
        int r;

        /* the name as it is: a placeholder is replaced in values only */
        r = append(out, line, i, max);
        while (r >= 0 && i < n) {
                const EgressValue *hit = NULL;

                for (size_t k = 0; k < n_inj && !hit; k++) {
                        const char *ph = !inj[k].header && inj[k].n_values == 1 ? inj[k].values[0].ref : NULL;
                        size_t pl = ph ? strlen(ph) : 0;
                        if (pl > 0 && n - i >= pl && memcmp(line + i, ph, pl) == 0)
                                hit = &inj[k].values[0];
                }
                if (hit) {
                        r = append(out, hit->value, hit->value_len, max);
                        i += strlen(hit->ref);
                        (*ret_done)++;
                } else
                        r = append(out, line + i++, 1, max);
        }
        return r;
}


/* One header of a header binding: NAME: TEMPLATE with each secret's reference replaced by its value. The
 * template is read once, left to right, so a value is never searched for references. */
static int append_header(SpaceBuf *out, const EgressInjection *inj, size_t max) {
        const char *t = inj->template;
        int r = append(out, inj->header, strlen(inj->header), max);

        if (r >= 0)
                r = append(out, ": ", 2, max);
        while (r >= 0 && *t) {
                const EgressValue *hit = NULL;

                for (size_t k = 0; k < inj->n_values && !hit; k++)
                        if (inj->values[k].ref[0] && strncmp(t, inj->values[k].ref, strlen(inj->values[k].ref)) == 0)
                                hit = &inj->values[k];
                if (hit) {
                        r = append(out, hit->value, hit->value_len, max);
                        t += strlen(hit->ref);
                } else
                        r = append(out, t++, 1, max);
        }
        return r >= 0 ? append(out, "\r\n", 2, max) : r;
}

int egress_head_rewrite(const uint8_t *head, size_t n, const EgressInjection *inj, size_t n_inj, size_t max,
                        SpaceBuf *out, unsigned *ret_done) {
        const char *p = (const char *) head, *end = p + n;
        unsigned done = 0;
        bool first = true;
        int r = 0;

        /* a head as egress_http_stream_step() gave it: lines ending in CRLF, the last one empty */
        if (n < 4 || memcmp(end - 4, "\r\n\r\n", 4) != 0)
                return -EINVAL;
        while (r >= 0 && p < end) {
                const char *eol = memmem(p, (size_t) (end - p), "\r\n", 2);
                size_t len = (size_t) (eol - p);
                bool drop = false;

                if (len == 0) {
                        /* the end of the head: the header bindings' headers go last */
                        for (size_t k = 0; k < n_inj && r >= 0; k++)
                                if (inj[k].header) {
                                        r = append_header(out, &inj[k], max);
                                        done++;
                                }
                        if (r >= 0)
                                r = append(out, "\r\n", 2, max);
                        break;
                }
                for (size_t k = 0; k < n_inj && !first && !drop; k++)
                        drop = inj[k].header && is_header(p, len, inj[k].header);
                if (first)
                        r = append(out, p, len, max); /* the request line as it is */
                else if (!drop)
                        r = append_replaced(out, p, len, inj, n_inj, max, &done);
                if (r >= 0 && !drop)
                        r = append(out, "\r\n", 2, max);
                first = false;
                p = eol + 2;
        }
        if (r < 0)
                return r;
        if (ret_done)
                *ret_done = done;
        return 0;
}
