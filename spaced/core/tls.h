/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The daemon's local CA and the certificates it signs (ARCHITECTURE.md, "Secrets" and "The E2B facade"): a CA made
 * once in $state/tls and kept; the TLS listener's certificate for DOMAIN and *.DOMAIN, remade when the domain
 * changes or it nears its end; and, in memory, one for each host whose HTTPS the egress gateway intercepts.
 * Like lib/: never logs, returns -errno and fills reterr; the caller logs once. */

#include <gnutls/gnutls.h>
#include <stdbool.h>

#include "core/error.h"

/* What clients are told to trust, and the server's pair for MHD (PEM, in memory). */
typedef struct TlsFiles {
        char *dir;         /* $state/tls */
        char *ca_file;     /* ca.pem: our CA alone (NODE_EXTRA_CA_CERTS, curl --cacert) */
        char *ca_bundle;   /* ca-bundle.pem: the host's CAs and ours (SSL_CERT_FILE) */
        char *cert_pem;    /* the server certificate */
        char *key_pem;     /* its key */
        bool ca_made;      /* this start made a new CA */
        bool cert_made;    /* this start made a new server certificate */
} TlsFiles;

/* The CA is valid for ten years, the server certificate for one; either is remade when it has less than this
 * left. */
#define TLS_RENEW_BEFORE_SEC (30LL * 24 * 3600)
#define TLS_HOST_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* The CA, for everything signed while the daemon runs. Loaded (made when there is none, or it nears its end)
 * from state_dir/tls once at start; *ret_made: this call made it. Files are written to a temporary name and
 * renamed; a key is never readable by others; a symlink, another owner's file or a key readable by others is
 * refused (-ELOOP, -EPERM), never followed or replaced. */
typedef struct TlsCa TlsCa;
int tls_ca_load(const char *state_dir, TlsCa **ret, bool *ret_made, Error *reterr);

/* Makes or loads the TLS listener's files in state_dir/tls for domain (a host name, its ":PORT" ignored), its
 * certificate signed by ca (loaded by tls_ca_load(); ca_made: that load made it, so the certificate is remade).
 * host_bundle: the host's CA bundle to copy into ca-bundle.pem (missing: ours alone). Same file rules as the
 * CA's. */
int tls_setup(TlsCa *ca, bool ca_made, const char *state_dir, const char *domain, const char *host_bundle,
              TlsFiles *ret, Error *reterr);
void tls_files_done(TlsFiles *t);
/* The name of domain without its ":PORT", lowercased, into buf; -EINVAL when it is not a host name. */
int tls_domain_name(const char *domain, char *buf, size_t size);

TlsCa *tls_ca_free(TlsCa *ca);   /* NULL */
/* Its certificate (PEM), what a guest is given to trust. */
const char *tls_ca_pem(const TlsCa *ca);
/* The first 16 hex digits of its certificate's SHA-256: names what was made with it (a sandbox base). */
const char *tls_ca_fingerprint(const TlsCa *ca);
/* Server credentials for host (a DNS name) signed by ca, valid TLS_HOST_CERT_DAYS, with a new key each: what the
 * egress gateway shows a guest whose HTTPS it intercepts. */
#define TLS_HOST_CERT_DAYS 7
int tls_ca_issue(TlsCa *ca, const char *host, gnutls_certificate_credentials_t *ret, Error *reterr);
