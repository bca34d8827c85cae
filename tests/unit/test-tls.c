/* SPDX-License-Identifier: Apache-2.0 */
/* The TLS listener's certificates (spaced/http/tls.c): the CA made once and kept, the server's certificate kept
 * for the same domain and remade for another, the bundle, modes, and what is planted in the directory refused. */
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

#include "../../lib/macro.h"
#include "http/tls.h"
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

        r = tls_setup(dir, "space.localhost:7443", host_bundle, &t, &e);
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

        r = tls_setup(dir, "space.localhost:7443", host_bundle, &t, &e);
        ca2 = slurp(t.ca_file);
        ok(r == 0 && !t.ca_made && !t.cert_made, "second start: nothing is made");
        ok(ca2 && ca1 && strcmp(ca1, ca2) == 0 && t.cert_pem && strcmp(t.cert_pem, cert1) == 0,
           "... the same CA and certificate");
        tls_files_done(&t);

        r = tls_setup(dir, "space.localhost:9443", host_bundle, &t, &e);
        ok(r == 0 && !t.cert_made, "another port of the same name: the certificate stays (names have no ports)");
        tls_files_done(&t);

        r = tls_setup(dir, "other.localhost:7443", host_bundle, &t, &e);
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
        r = tls_setup(dir, "other.localhost:7443", host_bundle, &t, &e);
        ok(r == -ELOOP && e.message && strstr(e.message, "symlink"), "a symlink at server.key: refused (%s)",
           e.message ?: "no message");
        cert3 = slurp(host_bundle);
        ok(cert3 && strstr(cert3, "HOSTCA") && !strstr(cert3, "PRIVATE"), "... and what it points at is untouched");
        error_done(&e);
        tls_files_done(&t);
        ASSERT(unlink(path) == 0);

        snprintf(path, sizeof path, "%s/tls/ca.key", dir);
        ASSERT(chmod(path, 0644) == 0);
        r = tls_setup(dir, "other.localhost:7443", host_bundle, &t, &e);
        ok(r == -EPERM && e.message && strstr(e.message, "0600"), "a CA key others may read: refused (%s)",
           e.message ?: "no message");
        error_done(&e);
        tls_files_done(&t);
        ASSERT(chmod(path, 0600) == 0);

        r = tls_setup(dir, "other.localhost:7443", host_bundle, &t, &e);
        ok(r == 0 && !t.ca_made && t.cert_made, "the server key gone: a new certificate, the CA kept");
        tls_files_done(&t);

        snprintf(path, sizeof path, "%s/tls", dir);
        ASSERT(chmod(path, 0755) == 0);
        r = tls_setup(dir, "other.localhost:7443", host_bundle, &t, &e);
        ok(r == -EPERM, "a tls directory others may enter: refused (%s)", e.message ?: "no message");
        error_done(&e);
        tls_files_done(&t);

        snprintf(path, sizeof path, "rm -rf '%s'", dir);
        (void) system(path);
        return done();
}
