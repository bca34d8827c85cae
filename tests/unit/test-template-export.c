/* SPDX-License-Identifier: Apache-2.0 */
/* Exports (spaced/template/template-export.c): an image's tree comes back as a tar with the manifest's owners,
 * modes and times, and an image or manifest that disagree is refused, never exported: a manifest that does not
 * hash to the digest, a file whose content or size is not the manifest's, a directory that is a symlink in the
 * image. Needs mkfs.ext4 and debugfs (e2fsprogs), as the daemon does. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "string-util.h"
#include "tap.h"
#include "template/template.h"

static char base[] = "/tmp/test-template-export.XXXXXX";
static unsigned n_cases;

static void sha_hex(const void *p, size_t n, char hex[65]) {
        uint8_t md[32];

        EVP_Digest(p, n, md, NULL, EVP_sha256(), NULL);
        string_hex_encode(md, 32, hex);
}

/* Runs cmd with every %s in it replaced by dir. */
static void sh(const char *cmd, const char *dir) {
        char buf[2048], *o = buf;

        for (const char *c = cmd; *c && o < buf + sizeof buf - 256; c++)
                if (c[0] == '%' && c[1] == 's') {
                        o = stpcpy(o, dir);
                        c++;
                } else
                        *o++ = *c;
        *o = 0;
        if (system(buf) != 0) {
                fprintf(stderr, "failed: %s\n", buf);
                exit(1);
        }
}

/* A template directory: an image of the tree make_tree (a shell command on %s/src) makes, and this manifest;
 * *ret_digest is the manifest's sha256 (what the store would call it). */
static char *template_dir(const char *make_tree, const char *manifest, char **ret_digest) {
        _cleanup_free_ char *path = NULL;
        char *dir, hex[65];
        FILE *f;

        if (asprintf(&dir, "%s/t%u", base, n_cases++) < 0 || mkdir(dir, 0700) < 0)
                exit(1);
        sh("mkdir %s/src", dir);
        sh(make_tree, dir);
        sh("truncate -s 16M %s/rootfs.ext4 && mkfs.ext4 -q -F -d %s/src %s/rootfs.ext4 >/dev/null 2>&1", dir);
        if (asprintf(&path, "%s/" TEMPLATE_MANIFEST, dir) < 0 || !(f = fopen(path, "we")))
                exit(1);
        fputs(manifest, f);
        fclose(f);
        sha_hex(manifest, strlen(manifest), hex);
        if (asprintf(ret_digest, "sha256:%s", hex) < 0)
                exit(1);
        return dir;
}

static int export(const char *dir, const char *digest, char **ret_tar, Error *e) {
        _cleanup_close_ int fd = -1;

        if (asprintf(ret_tar, "%s/out.tar", dir) < 0)
                exit(1);
        fd = open(*ret_tar, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                exit(1);
        return template_export(dir, digest, base, fd, e);
}

static const char *const good_tree = "mkdir %s/src/a && printf hello > %s/src/a/f && ln -s a/f %s/src/l";

static char *good_manifest(const char *content) {
        char f[65], l[65], *m;

        sha_hex(content, strlen(content), f);
        sha_hex("a/f", 3, l);
        if (asprintf(&m, "space-rootfs-manifest v1\n"
                         "/\td\t0755\t0\t0\t86400\t0\t-\n"
                         "/a\td\t0750\t1000\t1000\t86400\t0\t-\n"
                         "/a/f\tf\t4755\t1000\t100\t123456\t%zu\t%s\n"
                         "/l\tl\t0777\t0\t0\t86400\t3\t%s\n",
                     strlen(content), f, l) < 0)
                exit(1);
        return m;
}

static void check_tar(const char *tar) {
        struct archive *a = archive_read_new();
        struct archive_entry *ae;
        char got[1024] = "";
        int n = 0;

        archive_read_support_format_tar(a);
        if (archive_read_open_filename(a, tar, 10240) != ARCHIVE_OK) {
                ok(false, "the tar opens: %s", archive_error_string(a));
                archive_read_free(a);
                return;
        }
        while (archive_read_next_header(a, &ae) == ARCHIVE_OK && n++ < 10) {
                char line[256];
                snprintf(line, sizeof line, "%s %o %lld:%lld %lld %s|", archive_entry_pathname(ae),
                         (unsigned) archive_entry_mode(ae), (long long) archive_entry_uid(ae),
                         (long long) archive_entry_gid(ae), (long long) archive_entry_mtime(ae),
                         archive_entry_symlink(ae) ?: "");
                strncat(got, line, sizeof got - strlen(got) - 1);
        }
        archive_read_free(a);
        if (!ok(streq(got, "./ 40755 0:0 86400 |a/ 40750 1000:1000 86400 |a/f 104755 1000:100 123456 |"
                           "l 120777 0:0 86400 a/f|"),
                "the tar holds the manifest's entries with its owners, modes and times"))
                diag("got %s", got);
}

int main(void) {
        _cleanup_free_ char *m = NULL, *bad = NULL;
        char *dir, *digest, *tar;
        Error e = {};
        int k;

        if (!mkdtemp(base))
                return 1;
        if (system("command -v mkfs.ext4 >/dev/null && command -v debugfs >/dev/null") != 0) {
                printf("1..0 # SKIP needs mkfs.ext4 and debugfs\n");
                return 0;
        }

        m = good_manifest("hello");
        dir = template_dir(good_tree, m, &digest);
        k = export(dir, digest, &tar, &e);
        if (ok(k == 0, "a tree is exported"))
                check_tar(tar);
        else
                diag("%d: %s", k, error_message(&e));
        error_done(&e);
        free(tar);

        k = export(dir, "sha256:0000000000000000000000000000000000000000000000000000000000000000", &tar, &e);
        ok(k == -EBADMSG && e.message && strstr(e.message, "does not hash to the template's digest"),
           "a manifest that does not hash to the digest is refused: %s", error_message(&e));
        error_done(&e);
        free(tar);
        free(dir);
        free(digest);

        bad = good_manifest("HELLO");
        dir = template_dir(good_tree, bad, &digest);
        k = export(dir, digest, &tar, &e);
        ok(k < 0 && e.message && strstr(e.message, "/a/f: its content is not the manifest's"),
           "a file whose content is not the manifest's is refused: %s", error_message(&e));
        error_done(&e);
        free(tar);
        free(dir);
        free(digest);
        free(bad);

        bad = good_manifest("hello!");
        dir = template_dir(good_tree, bad, &digest);
        k = export(dir, digest, &tar, &e);
        ok(k < 0 && e.message && strstr(e.message, "/a/f: not a regular file of the manifest's size"),
           "a file of another size is refused: %s", error_message(&e));
        error_done(&e);
        free(tar);
        free(dir);
        free(digest);

        /* the manifest's directory a is a symlink in the image, to a directory outside the tree */
        dir = template_dir("mkdir %s/src/x && printf hello > %s/src/x/f && ln -s /tmp %s/src/a && ln -s a/f %s/src/l",
                           m, &digest);
        k = export(dir, digest, &tar, &e);
        ok(k < 0 && e.message && strstr(e.message, "/a: no such directory"),
           "a directory that is a symlink in the image is not followed: %s", error_message(&e));
        error_done(&e);
        free(tar);
        free(dir);
        free(digest);

        {
                _cleanup_free_ char *cmd = NULL;
                if (asprintf(&cmd, "rm -rf %s", base) >= 0)
                        (void) !system(cmd);
        }
        return done();
}
