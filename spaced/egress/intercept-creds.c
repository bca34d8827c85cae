/* SPDX-License-Identifier: Apache-2.0 */
/* What HTTPS interception (intercept.c) shows and checks: a certificate per intercepted host from the daemon's
 * CA, and the trust that servers are verified against. Both are made on the loop and only read by the
 * interception's threads; the loop counts who holds a host's. */
#include <errno.h>
#include <gnutls/gnutls.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/tls.h"
#include "core/util.h"
#include "egress/egress-internal.h"
#include "macro.h"

#define HOST_CERTS_MAX 256U

/* A host's credentials, shared by its connections: the loop counts the references. */
struct InterceptCert {
        char host[EGRESS_HOST_MAX + 1];
        gnutls_certificate_credentials_t cred;
        uint64_t expires_usec;
        unsigned refs;
        struct InterceptCert *next;
};

/* The trust for servers: the host's store and one egress_tls_ca file, as it was when read. Kept while the
 * daemon runs (a few, one for each version of the file a reload saw): a thread may still use an older one. */
typedef struct Trust {
        char *file;
        struct stat st;
        gnutls_certificate_credentials_t cred;
        struct Trust *next;
} Trust;

static struct {
        InterceptCert *certs;
        unsigned n_certs;
        Trust *trusts;
} ic;

void intercept_cert_unref(InterceptCert *h) {
        if (h && --h->refs == 0) {
                gnutls_certificate_free_credentials(h->cred);
                free(h);
        }
}

/* The credentials for host: the cached ones while they have a day left, else new ones. */
int intercept_cert_get(Manager *m, const char *host, InterceptCert **ret, Error *reterr) {
        uint64_t now = now_usec_monotonic();
        InterceptCert *h, **p;
        int r;

        for (p = &ic.certs; (h = *p); p = &h->next)
                if (streq(h->host, host)) {
                        *p = h->next;   /* unlinked: to the front, or gone when old */
                        ic.n_certs--;
                        if (h->expires_usec > now)
                                break;
                        intercept_cert_unref(h);
                        h = NULL;
                        break;
                }
        if (!h) {
                h = calloc(1, sizeof *h);
                if (!h)
                        return -ENOMEM;
                r = tls_ca_issue(m->tls_ca, host, &h->cred, reterr);
                if (r < 0) {
                        free(h);
                        return r;
                }
                strcpy(h->host, host);
                h->refs = 1;
                h->expires_usec = now + (TLS_HOST_CERT_DAYS - 1) * 86400ULL * 1000000ULL;
        }
        h->next = ic.certs;
        ic.certs = h;
        if (++ic.n_certs > HOST_CERTS_MAX) {
                InterceptCert *last = ic.certs;

                while (last->next && last->next->next)
                        last = last->next;
                intercept_cert_unref(last->next);
                last->next = NULL;
                ic.n_certs--;
        }
        h->refs++;
        *ret = h;
        return 0;
}

int intercept_trust_get(const char *file, gnutls_certificate_credentials_t *ret, Error *reterr) {
        struct stat st = {};
        Trust *t;
        int g;

        if (file && stat(file, &st) < 0)
                return error_set(reterr, ERROR_IO_ERROR, "egress_tls_ca %s cannot be read: %m", file) ?: -errno;
        for (t = ic.trusts; t; t = t->next)
                if ((!file && !t->file) ||
                    (file && t->file && streq(file, t->file) && st.st_ino == t->st.st_ino &&
                     st.st_size == t->st.st_size && st.st_mtim.tv_sec == t->st.st_mtim.tv_sec &&
                     st.st_mtim.tv_nsec == t->st.st_mtim.tv_nsec)) {
                        *ret = t->cred;
                        return 0;
                }
        t = calloc(1, sizeof *t);
        if (!t || (file && !(t->file = strdup(file)))) {
                free(t);
                return -ENOMEM;
        }
        t->st = st;
        g = gnutls_certificate_allocate_credentials(&t->cred);
        if (g >= 0)
                g = gnutls_certificate_set_x509_system_trust(t->cred);
        if (g >= 0 && file) {
                g = gnutls_certificate_set_x509_trust_file(t->cred, file, GNUTLS_X509_FMT_PEM);
                if (g == 0)
                        g = GNUTLS_E_NO_CERTIFICATE_FOUND;
        }
        if (g < 0) {
                if (t->cred)
                        gnutls_certificate_free_credentials(t->cred);
                free(t->file);
                free(t);
                return error_set(reterr, ERROR_INTERNAL, "cannot load the trust for servers%s%s: %s",
                                 file ? " with egress_tls_ca " : "", file ?: "", gnutls_strerror(g)) ?: -EIO;
        }
        /* kept: threads may hold any of them; a reload that changes the file adds one */
        t->next = ic.trusts;
        ic.trusts = t;
        *ret = t->cred;
        return 0;
}

gnutls_certificate_credentials_t intercept_cert_credentials(const InterceptCert *c) {
        return c->cred;
}
