/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/tls.h"
#include "macro.h"

/* The files of $state/tls. The directory and every file in it are opened relative to the directory's fd with
 * O_NOFOLLOW, so that nothing planted there (a symlink to another file of the user's) is read or written
 * through. */
#define TLS_CA_KEY "ca.key"
#define TLS_CA_CERT "ca.pem"
#define TLS_KEY "server.key"
#define TLS_CERT "server.pem"
#define TLS_BUNDLE "ca-bundle.pem"
#define TLS_FILE_MAX (4 * 1024 * 1024)
#define TLS_CA_DAYS 3650
#define TLS_CERT_DAYS 365

typedef struct Pair {
        gnutls_x509_privkey_t key;
        gnutls_x509_crt_t crt;
} Pair;

static void pair_done(Pair *p) {
        if (p->crt)
                gnutls_x509_crt_deinit(p->crt);
        if (p->key)
                gnutls_x509_privkey_deinit(p->key);
        *p = (Pair) {};
}

static void datum_done(gnutls_datum_t *d) {
        gnutls_free(d->data);
        *d = (gnutls_datum_t) {};
}

static int gnutls_failed(Error *reterr, const char *what, int g) {
        return error_set(reterr, ERROR_INTERNAL, "%s: %s", what, gnutls_strerror(g)) ?: -EIO;
}

void tls_files_done(TlsFiles *t) {
        free(t->dir);
        free(t->ca_file);
        free(t->ca_bundle);
        free(t->cert_pem);
        if (t->key_pem) {
                explicit_bzero(t->key_pem, strlen(t->key_pem));
                free(t->key_pem);
        }
        *t = (TlsFiles) {};
}

int tls_domain_name(const char *domain, char *buf, size_t size) {
        size_t n = domain ? strcspn(domain, ":") : 0;

        if (n == 0 || n >= size || domain[0] == '.' || domain[n - 1] == '.')
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) domain[i];

                if (!isalnum(c) && c != '-' && c != '.')
                        return -EINVAL;
                buf[i] = (char) tolower(c);
        }
        buf[n] = 0;
        return 0;
}

/* Our own directory: made 0700 if missing, then opened without following a symlink and checked to be ours
 * and closed to others. */
static int open_dir(const char *path, Error *reterr) {
        struct stat st;
        int fd;

        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return error_set(reterr, ERROR_IO_ERROR, "cannot create %s: %m", path) ?: -errno;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                int e = errno;
                return error_set(reterr, ERROR_IO_ERROR, "cannot open %s: %s%s", path, strerror(e),
                                 e == ELOOP || e == ENOTDIR ? " (it is not a directory; a symlink is refused)" : "")
                               ?: -e;
        }
        if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
                close(fd);
                return error_set(reterr, ERROR_PERMISSION_DENIED,
                                 "%s must be a directory of the daemon's user with mode 0700", path) ?: -EPERM;
        }
        return fd;
}

/* A file of the directory into ret (NUL-terminated): -ENOENT when there is none, -ELOOP for a symlink, -EPERM
 * when it is not a regular file of ours or, secret, when others may read it. */
static int read_at(int dfd, const char *dir, const char *name, bool secret, char **ret, Error *reterr) {
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t len = 0;

        fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) {
                int e = errno;
                if (e == ENOENT)
                        return -ENOENT;
                return error_set(reterr, ERROR_PERMISSION_DENIED, "cannot open %s/%s: %s%s", dir, name, strerror(e),
                                 e == ELOOP ? " (a symlink: refused, remove it)" : "") ?: -e;
        }
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (secret && (st.st_mode & 077)) ||
            st.st_size > TLS_FILE_MAX)
                return error_set(reterr, ERROR_PERMISSION_DENIED,
                                 "%s/%s must be a regular file of the daemon's user%s, under %d bytes", dir, name,
                                 secret ? " with mode 0600" : "", TLS_FILE_MAX) ?: -EPERM;
        buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        while (len < (size_t) st.st_size) {
                ssize_t n = read(fd, buf + len, (size_t) st.st_size - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return error_set(reterr, ERROR_IO_ERROR, "cannot read %s/%s: %m", dir, name) ?: -errno;
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        buf[len] = 0;
        *ret = TAKE_PTR(buf);
        return 0;
}

/* Writes name atomically (a new temporary file, O_EXCL and O_NOFOLLOW, then a rename over name) with mode. A
 * symlink at name is refused rather than replaced. */
static int write_at(int dfd, const char *dir, const char *name, const void *data, size_t len, mode_t mode,
                    Error *reterr) {
        char tmp[64];
        struct stat st;
        unsigned char rnd[6];
        size_t done = 0;
        int fd, r = 0;

        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
                return error_set(reterr, ERROR_PERMISSION_DENIED, "%s/%s is not a regular file (%s): refused, remove it",
                                 dir, name, S_ISLNK(st.st_mode) ? "a symlink" : "of another type") ?: -ELOOP;
        if (gnutls_rnd(GNUTLS_RND_NONCE, rnd, sizeof rnd) < 0)
                return -EIO;
        snprintf(tmp, sizeof tmp, ".%s.%02x%02x%02x%02x%02x%02x", name, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
                 rnd[5]);
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0)
                return error_set(reterr, ERROR_IO_ERROR, "cannot create %s/%s: %m", dir, tmp) ?: -errno;
        if (fchmod(fd, mode) < 0)
                r = -errno;
        while (r == 0 && done < len) {
                ssize_t n = write(fd, (const char *) data + done, len - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        r = -errno;
                else
                        done += (size_t) n;
        }
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlinkat(dfd, tmp, 0);
                return error_set(reterr, ERROR_IO_ERROR, "cannot write %s/%s: %s", dir, name, strerror(-r)) ?: r;
        }
        return 0;
}

static int pair_load(int dfd, const char *dir, const char *key_name, const char *crt_name, Pair *ret,
                     Error *reterr) {
        _cleanup_free_ char *key_pem = NULL, *crt_pem = NULL;
        unsigned char id1[64], id2[64];
        size_t n1 = sizeof id1, n2 = sizeof id2;
        gnutls_datum_t d;
        Pair p = {};
        int r;

        r = read_at(dfd, dir, key_name, true, &key_pem, reterr);
        if (r < 0)
                return r;
        r = read_at(dfd, dir, crt_name, false, &crt_pem, reterr);
        if (r < 0)
                goto out;
        r = -EBADMSG;
        if (gnutls_x509_privkey_init(&p.key) < 0 || gnutls_x509_crt_init(&p.crt) < 0)
                goto out;
        d = (gnutls_datum_t) { (unsigned char *) key_pem, (unsigned) strlen(key_pem) };
        if (gnutls_x509_privkey_import(p.key, &d, GNUTLS_X509_FMT_PEM) < 0)
                goto out;
        d = (gnutls_datum_t) { (unsigned char *) crt_pem, (unsigned) strlen(crt_pem) };
        if (gnutls_x509_crt_import(p.crt, &d, GNUTLS_X509_FMT_PEM) < 0)
                goto out;
        /* the certificate must be the key's */
        if (gnutls_x509_privkey_get_key_id(p.key, 0, id1, &n1) < 0 || gnutls_x509_crt_get_key_id(p.crt, 0, id2, &n2) < 0 ||
            n1 != n2 || memcmp(id1, id2, n1) != 0)
                goto out;
        *ret = p;
        p = (Pair) {};
        r = 0;
out:
        if (key_pem)
                explicit_bzero(key_pem, strlen(key_pem));
        pair_done(&p);
        if (r == -EBADMSG)
                (void) error_set(reterr, ERROR_INVALID_ARGUMENT, "%s/%s and %s do not hold a key and its certificate",
                                 dir, key_name, crt_name);
        return r;
}

/* Key (ECDSA P-256) and a certificate for it: the CA's own (issuer NULL) or a server's for name and, with
 * wildcard, *.name, valid for days. */
static int pair_make(const Pair *issuer, const char *name, bool wildcard, unsigned days, Pair *ret, Error *reterr) {
        _cleanup_free_ char *dn = NULL, *wild = NULL;
        unsigned char serial[16], id[64];
        size_t n = sizeof id;
        time_t now = time(NULL);
        const char *err = NULL;
        Pair p = {};
        int g;

        if ((g = gnutls_x509_privkey_init(&p.key)) < 0 || (g = gnutls_x509_crt_init(&p.crt)) < 0)
                goto fail;
        g = gnutls_x509_privkey_generate(p.key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
        if (g < 0)
                goto fail;
        if ((g = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial)) < 0)
                goto fail;
        serial[0] = (serial[0] & 0x7f) | 0x01; /* positive, and no leading zero byte */
        if (issuer ? asprintf(&dn, "CN=%s", name) < 0 : !(dn = strdup("CN=space local CA,O=space"))) {
                dn = NULL;
                pair_done(&p);
                return -ENOMEM;
        }
        if ((g = gnutls_x509_crt_set_version(p.crt, 3)) < 0 ||
            (g = gnutls_x509_crt_set_serial(p.crt, serial, sizeof serial)) < 0 ||
            (g = gnutls_x509_crt_set_activation_time(p.crt, now - 3600)) < 0 ||
            (g = gnutls_x509_crt_set_expiration_time(p.crt, now + 24 * 3600 * (time_t) days)) < 0 ||
            (g = gnutls_x509_crt_set_dn(p.crt, dn, &err)) < 0 || (g = gnutls_x509_crt_set_key(p.crt, p.key)) < 0 ||
            (g = gnutls_x509_crt_get_key_id(p.crt, 0, id, &n)) < 0 ||
            (g = gnutls_x509_crt_set_subject_key_id(p.crt, id, n)) < 0)
                goto fail;
        if (!issuer) {
                if ((g = gnutls_x509_crt_set_basic_constraints(p.crt, 1, 0)) < 0 ||
                    (g = gnutls_x509_crt_set_key_usage(p.crt, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN)) < 0 ||
                    (g = gnutls_x509_crt_sign2(p.crt, p.crt, p.key, GNUTLS_DIG_SHA256, 0)) < 0)
                        goto fail;
        } else {
                n = sizeof id;
                if (asprintf(&wild, "*.%s", name) < 0) {
                        wild = NULL;
                        pair_done(&p);
                        return -ENOMEM;
                }
                if ((g = gnutls_x509_crt_set_basic_constraints(p.crt, 0, -1)) < 0 ||
                    (g = gnutls_x509_crt_set_key_usage(p.crt, GNUTLS_KEY_DIGITAL_SIGNATURE)) < 0 ||
                    (g = gnutls_x509_crt_set_key_purpose_oid(p.crt, GNUTLS_KP_TLS_WWW_SERVER, 0)) < 0 ||
                    (g = gnutls_x509_crt_set_subject_alt_name(p.crt, GNUTLS_SAN_DNSNAME, name, (unsigned) strlen(name),
                                                              GNUTLS_FSAN_APPEND)) < 0 ||
                    (wildcard && (g = gnutls_x509_crt_set_subject_alt_name(p.crt, GNUTLS_SAN_DNSNAME, wild,
                                                                           (unsigned) strlen(wild),
                                                                           GNUTLS_FSAN_APPEND)) < 0) ||
                    (g = gnutls_x509_crt_get_key_id(issuer->crt, 0, id, &n)) < 0 ||
                    (g = gnutls_x509_crt_set_authority_key_id(p.crt, id, n)) < 0 ||
                    (g = gnutls_x509_crt_sign2(p.crt, issuer->crt, issuer->key, GNUTLS_DIG_SHA256, 0)) < 0)
                        goto fail;
        }
        *ret = p;
        return 0;
fail:
        pair_done(&p);
        return gnutls_failed(reterr, issuer ? "cannot make the server certificate" : "cannot make the local CA", g);
}

static int pair_save(int dfd, const char *dir, const Pair *p, const char *key_name, const char *crt_name,
                     char **ret_key_pem, char **ret_crt_pem, Error *reterr) {
        gnutls_datum_t k = {}, c = {};
        int r, g;

        if ((g = gnutls_x509_privkey_export2(p->key, GNUTLS_X509_FMT_PEM, &k)) < 0 ||
            (g = gnutls_x509_crt_export2(p->crt, GNUTLS_X509_FMT_PEM, &c)) < 0) {
                datum_done(&k);
                return gnutls_failed(reterr, "cannot export a key or certificate", g);
        }
        /* the key first: a certificate without its key is remade at the next start, never used */
        r = write_at(dfd, dir, key_name, k.data, k.size, 0600, reterr);
        if (r >= 0)
                r = write_at(dfd, dir, crt_name, c.data, c.size, 0644, reterr);
        if (r >= 0 && ret_key_pem && !(*ret_key_pem = strndup((const char *) k.data, k.size)))
                r = -ENOMEM;
        if (r >= 0 && ret_crt_pem && !(*ret_crt_pem = strndup((const char *) c.data, c.size)))
                r = -ENOMEM;
        explicit_bzero(k.data, k.size);
        datum_done(&k);
        datum_done(&c);
        return r;
}

static bool expires_soon(gnutls_x509_crt_t crt) {
        time_t end = gnutls_x509_crt_get_expiration_time(crt);

        return end == (time_t) -1 || (long long) end < (long long) time(NULL) + TLS_RENEW_BEFORE_SEC;
}

/* The server pair is kept when it is signed by ca, names name and *.name, and is not near its end. */
static bool server_fits(const Pair *srv, const Pair *ca, const char *name) {
        _cleanup_free_ char *sub = NULL;
        unsigned status = 0;

        if (asprintf(&sub, "api.%s", name) < 0)
                return false;
        return gnutls_x509_crt_verify(srv->crt, &ca->crt, 1, 0, &status) >= 0 && status == 0 &&
               gnutls_x509_crt_check_hostname(srv->crt, name) && gnutls_x509_crt_check_hostname(srv->crt, sub) &&
               !expires_soon(srv->crt);
}

/* ca-bundle.pem: the host's bundle, then our CA. */
static int write_bundle(int dfd, const char *dir, const char *host_bundle, const char *ca_pem, Error *reterr) {
        _cleanup_free_ char *host = NULL, *all = NULL;
        _cleanup_fclose_ FILE *f = host_bundle ? fopen(host_bundle, "re") : NULL;
        size_t n = 0;

        if (f) {
                host = malloc(TLS_FILE_MAX + 1);
                if (!host)
                        return -ENOMEM;
                n = fread(host, 1, TLS_FILE_MAX, f);
                host[n] = 0;
        }
        if (asprintf(&all, "%s%s# space local CA (%s/%s)\n%s", host ?: "", n && host[n - 1] != '\n' ? "\n" : "", dir,
                     TLS_CA_CERT, ca_pem) < 0)
                return -ENOMEM;
        return write_at(dfd, dir, TLS_BUNDLE, all, strlen(all), 0644, reterr);
}

/* The CA: kept across restarts; made when there is none (or its key is gone) or it nears its end. */
static int ca_get(int dfd, const char *dir, Pair *ret, bool *ret_made, char **ret_pem, Error *reterr) {
        Pair ca = {};
        int r;

        *ret_made = false;
        r = pair_load(dfd, dir, TLS_CA_KEY, TLS_CA_CERT, &ca, reterr);
        if (r >= 0 && expires_soon(ca.crt)) {
                pair_done(&ca);
                r = -ENOENT;
        }
        if (r == -ENOENT) {
                r = pair_make(NULL, NULL, false, TLS_CA_DAYS, &ca, reterr);
                if (r >= 0)
                        r = pair_save(dfd, dir, &ca, TLS_CA_KEY, TLS_CA_CERT, NULL, NULL, reterr);
                *ret_made = r >= 0;
        }
        if (r >= 0)
                r = read_at(dfd, dir, TLS_CA_CERT, false, ret_pem, reterr);
        if (r < 0) {
                pair_done(&ca);
                return r;
        }
        *ret = ca;
        return 0;
}

struct TlsCa {
        Pair pair;
        char *pem;
        char fingerprint[17];
};

int tls_setup(TlsCa *ca, bool ca_made, const char *state_dir, const char *domain, const char *host_bundle,
              TlsFiles *ret, Error *reterr) {
        _cleanup_(tls_files_done) TlsFiles t = { .ca_made = ca_made };
        _cleanup_close_ int dfd = -1;
        Pair srv = {};
        char name[256];
        int r;

        r = tls_domain_name(domain, name, sizeof name);
        if (r < 0)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "'%s' is not a host name for a certificate",
                                 domain ?: "") ?: r;
        if (asprintf(&t.dir, "%s/tls", state_dir) < 0 || asprintf(&t.ca_file, "%s/" TLS_CA_CERT, t.dir) < 0 ||
            asprintf(&t.ca_bundle, "%s/" TLS_BUNDLE, t.dir) < 0)
                return -ENOMEM;
        dfd = open_dir(t.dir, reterr);
        if (dfd < 0)
                return dfd;

        /* the server's: remade for a new CA, a new domain or near its end */
        r = t.ca_made ? -ENOENT : pair_load(dfd, t.dir, TLS_KEY, TLS_CERT, &srv, reterr);
        if (r == -EBADMSG)
                r = -ENOENT; /* ours to remake: it is only ever written by us */
        if (r >= 0 && !server_fits(&srv, &ca->pair, name)) {
                pair_done(&srv);
                r = -ENOENT;
        }
        if (r >= 0) {
                r = read_at(dfd, t.dir, TLS_KEY, true, &t.key_pem, reterr);
                if (r >= 0)
                        r = read_at(dfd, t.dir, TLS_CERT, false, &t.cert_pem, reterr);
        } else if (r == -ENOENT) {
                error_done(reterr);
                r = pair_make(&ca->pair, name, true, TLS_CERT_DAYS, &srv, reterr);
                if (r >= 0)
                        r = pair_save(dfd, t.dir, &srv, TLS_KEY, TLS_CERT, &t.key_pem, &t.cert_pem, reterr);
                t.cert_made = r >= 0;
        }
        if (r >= 0)
                r = write_bundle(dfd, t.dir, host_bundle, ca->pem, reterr);
        if (r >= 0) {
                *ret = t;
                t = (TlsFiles) {};
        }
        pair_done(&srv);
        return r;
}

int tls_ca_load(const char *state_dir, TlsCa **ret, bool *ret_made, Error *reterr) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int dfd = -1;
        unsigned char sha[32];
        size_t n = sizeof sha;
        TlsCa *ca;
        int r;

        if (asprintf(&dir, "%s/tls", state_dir) < 0)
                return -ENOMEM;
        dfd = open_dir(dir, reterr);
        if (dfd < 0)
                return dfd;
        ca = calloc(1, sizeof *ca);
        if (!ca)
                return -ENOMEM;
        r = ca_get(dfd, dir, &ca->pair, ret_made, &ca->pem, reterr);
        if (r >= 0 && gnutls_x509_crt_get_fingerprint(ca->pair.crt, GNUTLS_DIG_SHA256, sha, &n) < 0)
                r = error_set(reterr, ERROR_INTERNAL, "cannot read the local CA's fingerprint") ?: -EIO;
        if (r < 0) {
                tls_ca_free(ca);
                return r;
        }
        for (size_t i = 0; i < 8; i++)
                (void) snprintf(ca->fingerprint + 2 * i, 3, "%02x", sha[i]);
        *ret = ca;
        return 0;
}

TlsCa *tls_ca_free(TlsCa *ca) {
        if (ca) {
                pair_done(&ca->pair);
                free(ca->pem);
                free(ca);
        }
        return NULL;
}

const char *tls_ca_pem(const TlsCa *ca) {
        return ca->pem;
}

const char *tls_ca_fingerprint(const TlsCa *ca) {
        return ca->fingerprint;
}

int tls_ca_issue(TlsCa *ca, const char *host, gnutls_certificate_credentials_t *ret, Error *reterr) {
        gnutls_certificate_credentials_t cred = NULL;
        Pair p = {};
        int r, g;

        r = pair_make(&ca->pair, host, false, TLS_HOST_CERT_DAYS, &p, reterr);
        if (r < 0)
                return r;
        g = gnutls_certificate_allocate_credentials(&cred);
        if (g >= 0)
                g = gnutls_certificate_set_x509_key(cred, &p.crt, 1, p.key);
        pair_done(&p);
        if (g < 0) {
                if (cred)
                        gnutls_certificate_free_credentials(cred);
                return gnutls_failed(reterr, "cannot make credentials for an intercepted host", g);
        }
        *ret = cred;
        return 0;
}
