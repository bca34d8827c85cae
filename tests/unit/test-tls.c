/* SPDX-License-Identifier: Apache-2.0 */
/* The daemon's certificates (spaced/core/tls.c): the CA made once and kept, the server's certificate kept for the
 * same domain and remade for another, the bundle, modes, what is planted in the directory refused, and the
 * certificates issued for intercepted hosts. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gnutls/x509.h>

#include "../../lib/macro.h"
#include "core/tls.h"
#include "tap.h"

static char *slurp(const char *path) {
        FILE *f = fopen(path, "re");
        char *buf;
        size_t n;

        if (!f)
                return NULL;
        buf = calloc(1, 1 << 20);
        n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
        fclose(f);
        if (buf)
                buf[n] = 0;
        return buf;
}

static unsigned mode_of(const char *path) {
        struct stat st;

        return lstat(path, &st) < 0 ? 0 : (unsigned) (st.st_mode & 07777);
}

/* A start: the CA loaded, then the listener's files made or loaded with it. */
static int setup(const char *dir, const char *domain, const char *host_bundle, TlsFiles *ret, Error *reterr) {
        TlsCa *ca = NULL;
        bool made = false;
        int r;

        r = tls_ca_load(dir, &ca, &made, reterr);
        if (r >= 0)
                r = tls_setup(ca, made, dir, domain, host_bundle, ret, reterr);
        tls_ca_free(ca);
        return r;
}

/* The CA as loaded for the gateway is the listener's, and what it issues for a host is signed by it, names that
 * host alone and is a server's. */
static void test_issue(const char *dir, const char *ca_pem) {
        gnutls_certificate_credentials_t cred = NULL;
        gnutls_x509_crt_t *chain = NULL, ca_crt = NULL;
        unsigned n_chain = 0, status = 1;
        TlsCa *ca = NULL;
        bool made = true;
        Error e = {};
        gnutls_datum_t d;
        int r;

        r = tls_ca_load(dir, &ca, &made, &e);
        ok(r == 0 && !made && ca_pem && strcmp(tls_ca_pem(ca), ca_pem) == 0 && strlen(tls_ca_fingerprint(ca)) == 16,
           "the CA loaded for the gateway is the one made before (fingerprint %s)", r == 0 ? tls_ca_fingerprint(ca) : "-");
        r = r == 0 ? tls_ca_issue(ca, "api.example.test", &cred, &e) : r;
        ok(r == 0, "a certificate is issued for a host (%s)", e.message ?: "no message");
        if (r == 0 && gnutls_certificate_get_x509_crt(cred, 0, &chain, &n_chain) >= 0 && n_chain == 1 &&
            gnutls_x509_crt_init(&ca_crt) >= 0) {
                d = (gnutls_datum_t) { (unsigned char *) ca_pem, (unsigned) strlen(ca_pem) };
                ASSERT(gnutls_x509_crt_import(ca_crt, &d, GNUTLS_X509_FMT_PEM) >= 0);
                ok(gnutls_x509_crt_verify(chain[0], &ca_crt, 1, 0, &status) >= 0 && status == 0,
                   "it is signed by the CA");
                ok(gnutls_x509_crt_check_hostname(chain[0], "api.example.test") &&
                           !gnutls_x509_crt_check_hostname(chain[0], "x.api.example.test") &&
                           !gnutls_x509_crt_check_hostname(chain[0], "example.test"),
                   "it names that host alone");
                ok(gnutls_x509_crt_get_ca_status(chain[0], NULL) == 0, "it is no CA");
                gnutls_x509_crt_deinit(ca_crt);
        } else
                ok(false, "its certificate can be read back");
        for (unsigned i = 0; i < n_chain; i++)
                gnutls_x509_crt_deinit(chain[i]);
        gnutls_free(chain);
        if (cred)
                gnutls_certificate_free_credentials(cred);
        tls_ca_free(ca);
        error_done(&e);
}

int main(void) {
        char dir[] = "/tmp/test-tls.XXXXXX", path[256], host_bundle[256];
        _cleanup_free_ char *ca1 = NULL, *cert1 = NULL, *ca2 = NULL, *cert2 = NULL, *cert3 = NULL, *bundle = NULL;
        TlsFiles t = {};
        Error e = {};
        char name[64];
        FILE *f;
        int r;

        plan(0);
        ASSERT(mkdtemp(dir));
        snprintf(host_bundle, sizeof host_bundle, "%s/host.crt", dir);
        f = fopen(host_bundle, "we");
        ASSERT(f);
        fputs("-----BEGIN CERTIFICATE-----\nHOSTCA\n-----END CERTIFICATE-----", f);
        fclose(f);

        ok(tls_domain_name("Space.Localhost:7443", name, sizeof name) == 0 && strcmp(name, "space.localhost") == 0,
           "the certificate's name is the domain without its port, lowercased");
        ok(tls_domain_name(":7443", name, sizeof name) < 0 && tls_domain_name("a b", name, sizeof name) < 0 &&
                   tls_domain_name(".x", name, sizeof name) < 0,
           "an empty or malformed domain is no name");

        r = setup(dir, "space.localhost:7443", host_bundle, &t, &e);
        ok(r == 0 && t.ca_made && t.cert_made, "first start: a CA and a certificate are made (%s)",
           e.message ?: "ok");
        ok(t.key_pem && strstr(t.key_pem, "PRIVATE KEY") && t.cert_pem && strstr(t.cert_pem, "CERTIFICATE"),
           "... the server's key and certificate come back as PEM");
        snprintf(path, sizeof path, "%s/tls", dir);
        ok(mode_of(path) == 0700, "$state/tls is 0700");
        snprintf(path, sizeof path, "%s/tls/ca.key", dir);
        ok(mode_of(path) == 0600, "ca.key is 0600");
        snprintf(path, sizeof path, "%s/tls/server.key", dir);
        ok(mode_of(path) == 0600, "server.key is 0600");
        ca1 = slurp(t.ca_file);
        cert1 = strdup(t.cert_pem ?: "");
        bundle = slurp(t.ca_bundle);
        ok(bundle && strstr(bundle, "HOSTCA") && ca1 && strstr(bundle, ca1),
           "the bundle holds the host's CAs and ours");
        tls_files_done(&t);

        r = setup(dir, "space.localhost:7443", host_bundle, &t, &e);
        ca2 = slurp(t.ca_file);
        ok(r == 0 && !t.ca_made && !t.cert_made, "second start: nothing is made");
        ok(ca2 && ca1 && strcmp(ca1, ca2) == 0 && t.cert_pem && strcmp(t.cert_pem, cert1) == 0,
           "... the same CA and certificate");
        tls_files_done(&t);

        r = setup(dir, "space.localhost:9443", host_bundle, &t, &e);
        ok(r == 0 && !t.cert_made, "another port of the same name: the certificate stays (names have no ports)");
        tls_files_done(&t);

        r = setup(dir, "other.localhost:7443", host_bundle, &t, &e);
        free(ca2);
        ca2 = slurp(t.ca_file);
        cert2 = strdup(t.cert_pem ?: "");
        ok(r == 0 && !t.ca_made && t.cert_made && strcmp(cert2, cert1) != 0, "a new domain: a new certificate");
        ok(ca2 && strcmp(ca1, ca2) == 0, "... from the same CA");
        tls_files_done(&t);

        /* what is planted in the directory */
        snprintf(path, sizeof path, "%s/tls/server.key", dir);
        ASSERT(unlink(path) == 0);
        ASSERT(symlink(host_bundle, path) == 0);
        r = setup(dir, "other.localhost:7443", host_bundle, &t, &e);
        ok(r == -ELOOP && e.message && strstr(e.message, "symlink"), "a symlink at server.key: refused (%s)",
           e.message ?: "no message");
        cert3 = slurp(host_bundle);
        ok(cert3 && strstr(cert3, "HOSTCA") && !strstr(cert3, "PRIVATE"), "... and what it points at is untouched");
        error_done(&e);
        tls_files_done(&t);
        ASSERT(unlink(path) == 0);

        snprintf(path, sizeof path, "%s/tls/ca.key", dir);
        ASSERT(chmod(path, 0644) == 0);
        r = setup(dir, "other.localhost:7443", host_bundle, &t, &e);
        ok(r == -EPERM && e.message && strstr(e.message, "0600"), "a CA key others may read: refused (%s)",
           e.message ?: "no message");
        error_done(&e);
        tls_files_done(&t);
        ASSERT(chmod(path, 0600) == 0);

        r = setup(dir, "other.localhost:7443", host_bundle, &t, &e);
        ok(r == 0 && !t.ca_made && t.cert_made, "the server key gone: a new certificate, the CA kept");
        tls_files_done(&t);

        test_issue(dir, ca2);

        snprintf(path, sizeof path, "%s/tls", dir);
        ASSERT(chmod(path, 0755) == 0);
        r = setup(dir, "other.localhost:7443", host_bundle, &t, &e);
        ok(r == -EPERM, "a tls directory others may enter: refused (%s)", e.message ?: "no message");
        error_done(&e);
        tls_files_done(&t);

        snprintf(path, sizeof path, "rm -rf '%s'", dir);
        (void) system(path);
        return done();
}
