/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The TLS listener's certificates (spaced/http/tls.c): a local CA made once in $state/tls and kept, and a server
 * certificate for DOMAIN and *.DOMAIN signed by it, remade when the domain changes or it nears its end. Like
 * lib/: never logs, returns -errno and fills reterr; the caller logs once. */

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

/* Makes or loads everything in state_dir/tls for domain (a host name, its ":PORT" ignored). host_bundle: the
 * host's CA bundle to copy into ca-bundle.pem (missing: ours alone). Files are written to a temporary name and
 * renamed; a key is never readable by others; a symlink, another owner's file or a key readable by others is
 * refused (-ELOOP, -EPERM), never followed or replaced. */
int tls_setup(const char *state_dir, const char *domain, const char *host_bundle, TlsFiles *ret, Error *reterr);
void tls_files_done(TlsFiles *t);
/* The name of domain without its ":PORT", lowercased, into buf; -EINVAL when it is not a host name. */
int tls_domain_name(const char *domain, char *buf, size_t size);
