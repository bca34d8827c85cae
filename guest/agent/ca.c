/* SPDX-License-Identifier: Apache-2.0 */

/* The daemon's local CA, which INIT's ca= carries (ARCHITECTURE.md, "Secrets"): the egress gateway shows it to
 * the guest's HTTPS clients for the hosts whose secrets it adds, so the guest trusts it. It is put in
 * AGENT_CA_FILE alone and in the system bundle AGENT_CA_BUNDLE (made with it alone where the template has
 * none), in place of the one it replaces, and named to the processes the agent starts by the variables of
 * ca_env(). A template's base snapshot gets it before its save, so that a sandbox restored from it finds it
 * in place and this costs a comparison in memory; a fork or a restore of an older snapshot gets the new one
 * here. Only a certificate ever arrives: the key stays with the daemon. */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/io-util.h"
#include "../../lib/macro.h"
#include "../../lib/trust-bundle.h"
#include "agent.h"

static char *ca_installed;       /* the PEM in place: a restored guest remembers it */
static const char *ca_vars[4];

const char *const *ca_env(void) {
        return ca_installed ? ca_vars : NULL;
}

/* path's content (a regular file, followed, at most max bytes) into *ret; -ENOENT when there is none. */
static int read_small(const char *path, size_t max, char **ret, size_t *ret_n) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t k = 0;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if ((uint64_t) st.st_size > max)
                return -EFBIG;
        buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return -ENOMEM;
        while (k < (size_t) st.st_size) {
                ssize_t n = read(fd, buf + k, (size_t) st.st_size - k);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                k += (size_t) n;
        }
        buf[k] = 0;
        *ret = TAKE_PTR(buf);
        *ret_n = k;
        return 0;
}

/* data as path, 0644, by a rename: a reader sees the old file or the new one, and a symlink there is replaced,
 * not followed. */
static int write_replace(const char *path, const char *data, size_t n) {
        char tmp[PATH_MAX];
        _cleanup_close_ int fd = -1;
        int r;

        if ((size_t) snprintf(tmp, sizeof tmp, "%s.space-new", path) >= sizeof tmp)
                return -ENAMETOOLONG;
        (void) unlink(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        r = loop_write(fd, data, n);
        if (r == 0 && fchmod(fd, 0644) < 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0)
                (void) unlink(tmp);
        return r;
}

/* The directories of path, 0755, as root owns them. */
static int mkdir_parents(const char *path) {
        char p[PATH_MAX];

        if ((size_t) snprintf(p, sizeof p, "%s", path) >= sizeof p)
                return -ENAMETOOLONG;
        for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = 0;
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        return 0;
}

static int ca_fail(int r, const char *path, char *msg, size_t size) {
        (void) snprintf(msg, size, "ca: %s: %s", path, strerror(-r));
        return r;
}

/* The bundle first, then the CA's own file: the file names what the bundle holds, so a failure between them
 * leaves the old CA's name for the next INIT to take out. */
static int ca_write(const char *root, const char *pem, char *msg, size_t size) {
        _cleanup_free_ char *old = NULL, *bundle = NULL, *edited = NULL;
        char file[PATH_MAX], bundle_path[PATH_MAX], local[PATH_MAX];
        size_t n = 0, old_n = 0, edited_n = 0;
        struct stat st;
        int r;

        (void) snprintf(file, sizeof file, "%s" AGENT_CA_FILE, root);
        (void) snprintf(bundle_path, sizeof bundle_path, "%s" AGENT_CA_BUNDLE, root);
        (void) snprintf(local, sizeof local, "%s" AGENT_CA_LOCAL_DIR, root);
        if (read_small(file, TRUST_PEM_MAX, &old, &old_n) < 0 || !trust_pem_valid(old))
                old = mfree(old);
        r = read_small(bundle_path, TRUST_BUNDLE_MAX, &bundle, &n);
        if (r == -ENOENT)
                r = mkdir_parents(bundle_path);
        if (r < 0)
                return ca_fail(r, bundle_path, msg, size);
        r = trust_bundle_edit(bundle ?: "", n, old, pem, &edited, &edited_n);
        if (r > 0)
                r = write_replace(bundle_path, edited, edited_n);
        if (r < 0)
                return ca_fail(r, bundle_path, msg, size);
        r = mkdir_parents(file);
        if (r >= 0 && (!old || !streq(old, pem)))
                r = write_replace(file, pem, strlen(pem));
        if (r < 0)
                return ca_fail(r, file, msg, size);
        /* where Debian's update-ca-certificates looks, so that a bundle it makes again keeps ours */
        if (stat(local, &st) == 0 && S_ISDIR(st.st_mode)) {
                if (strlen(local) + sizeof "/" AGENT_CA_LOCAL_NAME > sizeof local)
                        return ca_fail(-ENAMETOOLONG, local, msg, size);
                strcat(local, "/" AGENT_CA_LOCAL_NAME);
                r = write_replace(local, pem, strlen(pem));
                if (r < 0)
                        return ca_fail(r, local, msg, size);
        }
        return 0;
}

int ca_install(const char *pem, char *msg, size_t size) {
        /* Outside a VM (a test run on a host) the machine is not ours: only under $SPACE_AGENT_CA_ROOT. */
        const char *root = getpid() == 1 ? "" : getenv("SPACE_AGENT_CA_ROOT");
        char *copy;
        int r;

        if (!trust_pem_valid(pem)) {
                (void) snprintf(msg, size, "ca: not one PEM certificate");
                return -EINVAL;
        }
        if (ca_installed && streq(ca_installed, pem))
                return 0;
        if (!root)
                return 0;
        copy = strdup(pem);
        if (!copy) {
                (void) snprintf(msg, size, "ca: %s", strerror(ENOMEM));
                return -ENOMEM;
        }
        r = ca_write(root, pem, msg, size);
        if (r < 0) {
                free(copy);
                return r;
        }
        free(ca_installed);
        ca_installed = copy;
        ca_vars[0] = "SSL_CERT_FILE=" AGENT_CA_BUNDLE;
        ca_vars[1] = "REQUESTS_CA_BUNDLE=" AGENT_CA_BUNDLE;
        ca_vars[2] = "NODE_EXTRA_CA_CERTS=" AGENT_CA_FILE;
        ca_vars[3] = NULL;
        return 0;
}
