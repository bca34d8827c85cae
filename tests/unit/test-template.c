/* SPDX-License-Identifier: Apache-2.0 */

/* Template references (spaced/template/template.c) and the staging tree (spaced/template/template-tree.c) on real files:
 * which references parse and to what; one tree written as tar, pax, gzip and xz gives one digest (and a
 * changed mode, owner, mtime, content or symlink target gives another); whiteouts and opaque directories of
 * OCI layers; hostile entries are refused and write nothing outside the root; device nodes are dropped. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf */
#endif

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/macro.h"
#include "template/template-tree.h"
#include "template/template.h"
#include "tap.h"
#include "core/util.h"
#include "sandbox/sandbox.h"

static char *tmp;

/* ---- references ---- */

static void ref(const char *in, const char *want_tag, const char *want_prefix) {
        _cleanup_free_ char *tag = NULL, *prefix = NULL;
        _cleanup_(error_done) Error msg = {};
        int r = template_ref_parse(in, &tag, &prefix, &msg);

        if (!want_tag && !want_prefix)
                ok(r == -EINVAL && msg.message && msg.code == ERROR_INVALID_REF, "'%s' is refused (%s)", in,
                   msg.message ?: "no message");
        else
                ok(r == 0 && streq_ptr(tag, want_tag) && streq_ptr(prefix, want_prefix), "'%s' -> %s%s", in,
                   tag ?: "", prefix ?: "");
}

/* ---- archives ---- */

typedef struct Entry {
        const char *path;
        mode_t type;         /* 0: hard link */
        mode_t perm;
        unsigned uid, gid;
        long mtime;
        const char *data;    /* content, symlink or hard link target */
        unsigned rdev_major;
} Entry;

static const Entry tree_a[] = {
        { "./", AE_IFDIR, 0755, 0, 0, 100, NULL, 0 },
        { "./etc/", AE_IFDIR, 0755, 0, 0, 100, NULL, 0 },
        { "./etc/passwd", AE_IFREG, 0644, 0, 0, 200, "root:x:0:0::/root:/bin/sh\n", 0 },
        { "./usr/bin/tool", AE_IFREG, 04755, 0, 0, 300, "#!/bin/sh\n", 0 },
        { "./home/user/", AE_IFDIR, 0700, 1000, 1000, 400, NULL, 0 },
        { "./home/user/notes", AE_IFREG, 0600, 1000, 1000, 500, "secret", 0 },
        { "./bin", AE_IFLNK, 0777, 0, 0, 600, "usr/bin", 0 },
        { "./usr/bin/tool2", 0, 0, 0, 0, 300, "usr/bin/tool", 0 },
        { "./name with spaces and \"quotes\"", AE_IFREG, 0644, 0, 0, 700, "x", 0 },
        { NULL },
};

static int write_archive(const char *path, const Entry *entries, int format, int filter) {
        struct archive *a = archive_write_new();
        int r = -EIO;

        archive_write_set_format(a, format);
        if (filter != ARCHIVE_FILTER_NONE)
                archive_write_add_filter(a, filter);
        if (archive_write_open_filename(a, path) != ARCHIVE_OK)
                goto out;
        for (const Entry *e = entries; e->path; e++) {
                struct archive_entry *ae = archive_entry_new();
                archive_entry_set_pathname(ae, e->path);
                archive_entry_set_mtime(ae, e->mtime, 0);
                archive_entry_set_uid(ae, e->uid);
                archive_entry_set_gid(ae, e->gid);
                if (e->type == 0) {
                        archive_entry_set_hardlink(ae, e->data);
                        archive_entry_set_filetype(ae, AE_IFREG);
                        archive_entry_set_perm(ae, 04755);
                } else {
                        archive_entry_set_filetype(ae, e->type);
                        archive_entry_set_perm(ae, e->perm);
                        if (e->type == AE_IFLNK)
                                archive_entry_set_symlink(ae, e->data);
                        if (e->type == AE_IFCHR || e->type == AE_IFBLK)
                                archive_entry_set_rdevmajor(ae, e->rdev_major);
                        if (e->type == AE_IFREG)
                                archive_entry_set_size(ae, (la_int64_t) strlen(e->data));
                }
                if (archive_write_header(a, ae) != ARCHIVE_OK) {
                        archive_entry_free(ae);
                        goto out;
                }
                if (e->type == AE_IFREG)
                        archive_write_data(a, e->data, strlen(e->data));
                archive_entry_free(ae);
        }
        r = 0;
out:
        archive_write_close(a);
        archive_write_free(a);
        return r;
}

/* Extracts the archives in order (a layer each when whiteouts) into a fresh root; returns the tree. */
static int extract(const char *name, const char *const *archives, bool whiteouts, Tree **ret, char **ret_root,
                   Error *reterr) {
        _cleanup_free_ char *root = NULL;
        Tree *t;
        int r;

        if (asprintf(&root, "%s/%s", tmp, name) < 0 || mkdir(root, 0700) < 0)
                return -errno;
        r = tree_new(root, &t);
        if (r < 0)
                return r;
        for (unsigned i = 0; archives[i]; i++) {
                struct archive *a = archive_read_new();
                archive_read_support_filter_all(a);
                archive_read_support_format_tar(a);
                if (archive_read_open_filename(a, archives[i], 65536) != ARCHIVE_OK) {
                        archive_read_free(a);
                        tree_free(t);
                        return -EIO;
                }
                tree_set_layer(t, i + 1);
                r = tree_extract(t, a, whiteouts, reterr);
                archive_read_free(a);
                if (r < 0) {
                        tree_free(t);
                        return r;
                }
        }
        *ret = t;
        if (ret_root)
                *ret_root = TAKE_PTR(root);
        return 0;
}

static char *digest_of(const char *name, const Entry *entries, int format, int filter) {
        _cleanup_free_ char *path = NULL;
        _cleanup_(error_done) Error err = {};
        char *digest = NULL;
        Tree *t;

        if (asprintf(&path, "%s/%s.archive", tmp, name) < 0 || write_archive(path, entries, format, filter) < 0)
                return NULL;
        if (extract(name, (const char *const[]) { path, NULL }, false, &t, NULL, &err) < 0) {
                diag("%s: %s", name, err.message ?: "?");
                return NULL;
        }
        (void) tree_digest(t, &digest);
        tree_free(t);
        return digest;
}

static bool exists_at(const char *root, const char *rel) {
        _cleanup_free_ char *p = NULL;
        struct stat st;
        return asprintf(&p, "%s/%s", root, rel) >= 0 && lstat(p, &st) == 0;
}

static void hostile(const char *name, const Entry *entries, const char *want_in_message) {
        _cleanup_free_ char *path = NULL;
        _cleanup_(error_done) Error err = {};
        Tree *t = NULL;
        int r;

        if (asprintf(&path, "%s/%s.tar", tmp, name) < 0 || write_archive(path, entries, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED,
                                                                         ARCHIVE_FILTER_NONE) < 0) {
                ok(false, "%s: cannot write the archive", name);
                return;
        }
        r = extract(name, (const char *const[]) { path, NULL }, false, &t, NULL, &err);
        ok(r < 0 && err.message && strstr(err.message, want_in_message), "%s is refused: %s", name,
           err.message ?: "(no message)");
        tree_free(t);
}

int main(void) {
        char tmpl[] = "/tmp/test-template-XXXXXX";
        _cleanup_free_ char *d1 = NULL, *d2 = NULL, *d3 = NULL, *d4 = NULL, *d5 = NULL, *outside = NULL;

        tmp = mkdtemp(tmpl);
        if (!tmp)
                return 1;

        ref("minimal", "minimal:latest", NULL);
        ref("minimal:latest", "minimal:latest", NULL);
        ref("team/python:3.12", "team/python:3.12", NULL);
        ref("a.b/c__d/e-f--g:V1_x.y-z", "a.b/c__d/e-f--g:V1_x.y-z", NULL);
        ref("sha256:0123456789ab", NULL, "0123456789ab");
        ref("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", NULL,
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
        ref("", NULL, NULL);
        ref("Minimal", NULL, NULL);
        ref("team//python", NULL, NULL);
        ref("team/", NULL, NULL);
        ref("/team", NULL, NULL);
        ref("-x", NULL, NULL);
        ref("a..b", NULL, NULL);
        ref("a:", NULL, NULL);
        ref("a:.tag", NULL, NULL);
        ref("host:5000/name", NULL, NULL);
        ref("sha256:0123abcd", NULL, NULL);
        ref("sha256:0123456789AB", NULL, NULL);
        ref("../etc", NULL, NULL);

        /* one tree, five encodings */
        d1 = digest_of("ustar-none", tree_a, ARCHIVE_FORMAT_TAR_GNUTAR, ARCHIVE_FILTER_NONE);
        d2 = digest_of("pax-gzip", tree_a, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_GZIP);
        d3 = digest_of("pax-xz", tree_a, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE, ARCHIVE_FILTER_XZ);
        ok(d1 && strlen(d1) == 71 && strncmp(d1, "sha256:", 7) == 0, "a digest: %s", d1 ?: "(none)");
        ok(d1 && streq_ptr(d1, d2) && streq_ptr(d1, d3), "gnu tar, pax + gzip and pax + xz give one digest");

        /* anything the manifest covers changes it */
        {
                static const struct {
                        const char *what;
                        size_t index;
                        int field;
                } changes[] = { { "a mode", 2, 0 }, { "an owner", 2, 1 }, { "an mtime", 2, 2 }, { "content", 2, 3 },
                                { "a symlink target", 6, 3 } };
                for (size_t i = 0; i < ELEMENTSOF(changes); i++) {
                        Entry copy[ELEMENTSOF(tree_a)];
                        _cleanup_free_ char *d = NULL, *name = NULL;

                        memcpy(copy, tree_a, sizeof copy);
                        switch (changes[i].field) {
                        case 0: copy[changes[i].index].perm = 0640; break;
                        case 1: copy[changes[i].index].uid = 1; break;
                        case 2: copy[changes[i].index].mtime += 1; break;
                        case 3: copy[changes[i].index].data = "other"; break;
                        }
                        if (asprintf(&name, "change-%zu", i) < 0)
                                return 1;
                        d = digest_of(name, copy, ARCHIVE_FORMAT_TAR_GNUTAR, ARCHIVE_FILTER_NONE);
                        ok(d && d1 && !streq(d, d1), "changing %s changes the digest", changes[i].what);
                }
        }

        /* the tree on disk, and its manifest */
        {
                _cleanup_free_ char *path = NULL, *root = NULL, *manifest = NULL, *script = NULL;
                _cleanup_(error_done) Error err = {};
                size_t len = 0, slen = 0;
                Tree *t = NULL;
                FILE *f;

                if (asprintf(&path, "%s/ustar-none.archive", tmp) < 0)
                        return 1;
                ok(extract("manifest", (const char *const[]) { path, NULL }, false, &t, &root, &err) == 0,
                   "extract for the manifest");
                f = open_memstream(&manifest, &len);
                tree_write_manifest(t, f);
                fclose(f);
                f = open_memstream(&script, &slen);
                tree_write_debugfs_script(t, f);
                fclose(f);
                ok(manifest && strstr(manifest, "space-rootfs-manifest v1\n/\td\t0755\t0\t0\t100\t0\t-\n"),
                   "the manifest starts with its version and the root");
                ok(manifest && strstr(manifest, "\n/usr/bin/tool\tf\t4755\t0\t0\t300\t10\t") &&
                           strstr(manifest, "\n/usr/bin/tool2\tf\t4755\t0\t0\t300\t10\t"),
                   "setuid kept; the hard link is a file like its target");
                ok(manifest && strstr(manifest, "\n/usr\td\t0755\t0\t0\t0\t0\t-\n"),
                   "an implied directory is 0755 root with mtime 0");
                ok(manifest && strstr(manifest, "\n/name%20with%20spaces%20and%20\"quotes\"\tf\t"),
                   "spaces are escaped in the manifest");
                ok(manifest && strstr(manifest, "\n/bin\tl\t0777\t0\t0\t600\t7\t"), "the symlink with its target's length");
                ok(script && strstr(script, "sif \"/name with spaces and \"\"quotes\"\"\" mode 0100644\n"),
                   "debugfs quoting doubles quotes");
                ok(script && strstr(script, "sif \"/home/user/notes\" uid 1000\n"), "debugfs sets owners");
                ok(tree_files(t) == 12, "12 paths (root and implied dirs included): %llu",
                   (unsigned long long) tree_files(t));
                tree_free(t);
        }

        /* OCI layers: whiteouts and opaque directories hide lower layers only */
        {
                static const Entry l1[] = {
                        { "opt/keep", AE_IFREG, 0644, 0, 0, 1, "k", 0 },
                        { "opt/gone", AE_IFREG, 0644, 0, 0, 1, "g", 0 },
                        { "opt/gonedir/x", AE_IFREG, 0644, 0, 0, 1, "x", 0 },
                        { "opt/opq/lower", AE_IFREG, 0644, 0, 0, 1, "l", 0 },
                        { "opt/opq/sub/lower2", AE_IFREG, 0644, 0, 0, 1, "l", 0 },
                        { NULL },
                };
                static const Entry l2[] = {
                        { "opt/opq/upper", AE_IFREG, 0644, 0, 0, 2, "u", 0 },  /* before the marker */
                        { "opt/opq/.wh..wh..opq", AE_IFREG, 0644, 0, 0, 2, "", 0 },
                        { "opt/.wh.gone", AE_IFREG, 0644, 0, 0, 2, "", 0 },
                        { "opt/.wh.gonedir", AE_IFREG, 0644, 0, 0, 2, "", 0 },
                        { "opt/.wh.never-there", AE_IFREG, 0644, 0, 0, 2, "", 0 },
                        { NULL },
                };
                _cleanup_free_ char *p1 = NULL, *p2 = NULL, *root = NULL;
                _cleanup_(error_done) Error err = {};
                Tree *t = NULL;

                if (asprintf(&p1, "%s/l1.tar", tmp) < 0 || asprintf(&p2, "%s/l2.tar", tmp) < 0 ||
                    write_archive(p1, l1, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_NONE) < 0 ||
                    write_archive(p2, l2, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_GZIP) < 0)
                        return 1;
                ok(extract("layers", (const char *const[]) { p1, p2, NULL }, true, &t, &root, &err) == 0,
                   "two layers apply (%s)", err.message ?: "ok");
                ok(t && tree_lookup(t, "opt/keep") && exists_at(root, "opt/keep"), "untouched lower files stay");
                ok(t && !tree_lookup(t, "opt/gone") && !exists_at(root, "opt/gone"), ".wh.NAME removes a file");
                ok(t && !tree_lookup(t, "opt/gonedir/x") && !exists_at(root, "opt/gonedir"), ".wh.NAME removes a directory");
                ok(t && !tree_lookup(t, "opt/opq/lower") && !tree_lookup(t, "opt/opq/sub") && !exists_at(root, "opt/opq/sub"),
                   "an opaque directory hides the lower layers' content");
                ok(t && tree_lookup(t, "opt/opq/upper") && exists_at(root, "opt/opq/upper"),
                   "... but not its own layer's, even before the marker");
                ok(t && !tree_lookup(t, "opt/.wh.gone") && !exists_at(root, "opt/.wh.gone"), "whiteout files are not content");
                tree_free(t);
        }

        /* hostile entries; the target outside the root must stay absent */
        if (asprintf(&outside, "%s/outside", tmp) < 0 || mkdir(outside, 0700) < 0)
                return 1;
        {
                _cleanup_free_ char *abs = NULL, *dotdot = NULL, *hl = NULL;
                if (asprintf(&abs, "%s/abs", outside) < 0 || asprintf(&dotdot, "../outside/dotdot") < 0 ||
                    asprintf(&hl, "%s/victim", outside) < 0)
                        return 1;
                {
                        FILE *v = fopen(hl, "w");
                        fputs("victim\n", v);
                        fclose(v);
                }
                Entry e_abs[] = { { abs, AE_IFREG, 0644, 0, 0, 1, "x", 0 }, { NULL } };
                Entry e_dotdot[] = { { dotdot, AE_IFREG, 0644, 0, 0, 1, "x", 0 }, { NULL } };
                Entry e_inner_dotdot[] = { { "a/../../outside/inner", AE_IFREG, 0644, 0, 0, 1, "x", 0 }, { NULL } };
                Entry e_symlink[] = { { "evil", AE_IFLNK, 0777, 0, 0, 1, outside, 0 },
                                      { "evil/through", AE_IFREG, 0644, 0, 0, 1, "x", 0 },
                                      { NULL } };
                Entry e_rel_symlink[] = { { "evil", AE_IFLNK, 0777, 0, 0, 1, "../outside", 0 },
                                          { "evil/through2", AE_IFREG, 0644, 0, 0, 1, "x", 0 },
                                          { NULL } };
                Entry e_hardlink[] = { { "victim", 0, 0, 0, 0, 1, hl, 0 }, { NULL } };
                Entry e_hardlink_symlink[] = { { "l", AE_IFLNK, 0777, 0, 0, 1, hl, 0 },
                                               { "victim", 0, 0, 0, 0, 1, "l", 0 },
                                               { NULL } };
                hostile("absolute", e_abs, "absolute paths are refused");
                hostile("dotdot", e_dotdot, "'..' components are refused");
                hostile("inner-dotdot", e_inner_dotdot, "'..' components are refused");
                hostile("symlink", e_symlink, "entries through symlinks are refused");
                hostile("relative-symlink", e_rel_symlink, "entries through symlinks are refused");
                hostile("hardlink", e_hardlink, "absolute paths are refused");
                hostile("hardlink-to-symlink", e_hardlink_symlink, "not a regular file");
                ok(!exists_at(outside, "abs") && !exists_at(outside, "dotdot") && !exists_at(outside, "inner") &&
                           !exists_at(outside, "through") && !exists_at(outside, "through2"),
                   "nothing was written outside the roots");
                {
                        struct stat st;
                        ok(stat(hl, &st) == 0 && st.st_nlink == 1 && st.st_size == 7, "the victim is untouched");
                }
        }

        /* device nodes are dropped */
        {
                static const Entry devs[] = {
                        { "dev/", AE_IFDIR, 0755, 0, 0, 1, NULL, 0 },
                        { "dev/null", AE_IFCHR, 0666, 0, 0, 1, NULL, 1 },
                        { "dev/sda", AE_IFBLK, 0660, 0, 0, 1, NULL, 8 },
                        { "dev/fifo", AE_IFIFO, 0644, 0, 0, 1, NULL, 0 },
                        { NULL },
                };
                _cleanup_free_ char *p = NULL, *root = NULL;
                _cleanup_(error_done) Error err = {};
                Tree *t = NULL;

                if (asprintf(&p, "%s/devs.tar", tmp) < 0 ||
                    write_archive(p, devs, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_NONE) < 0)
                        return 1;
                ok(extract("devs", (const char *const[]) { p, NULL }, false, &t, &root, &err) == 0 && t &&
                           tree_dropped(t) == 3 && !tree_lookup(t, "dev/null") && !exists_at(root, "dev/null") &&
                           tree_lookup(t, "dev"),
                   "device nodes and fifos are dropped and counted (%u)", t ? tree_dropped(t) : 0);
                tree_free(t);
        }

        {
                char *argv[] = { "rm", "-rf", tmp, NULL };
                (void) run_command(argv, NULL);
        }
        /* Base snapshot directory names (sandbox/base.c), which templates_gc() reads back. */
        {
                BaseName bn;

                ok(base_name_parse("0123456789ab-kaaaaaaaaaaaa-ibbbbbbbbbbbb-m256-c1-tcg", &bn) == 0 &&
                   streq(bn.template_digest, "0123456789ab") && streq(bn.kernel_digest, "aaaaaaaaaaaa") &&
                   streq(bn.initramfs_digest, "bbbbbbbbbbbb"), "a base name gives its three short digests");
                ok(base_name_parse("my-kind-0123456789ab-kaaaaaaaaaaaa-ibbbbbbbbbbbb-m256-c1-kvm-btrfs", &bn) == 0 &&
                   streq(bn.template_digest, "0123456789ab"), "an older name with the template's name first too");
                ok(base_name_parse("0123456789ab-kaaaaaaaaaaaa-ibbbbbbbbbb", &bn) == -EINVAL,
                   "a cut-off name is refused");
                ok(base_name_parse("0123456789aB-kaaaaaaaaaaaa-ibbbbbbbbbbbb-m256", &bn) == -EINVAL,
                   "upper case is no digest");
                ok(base_name_parse("-k", &bn) == -EINVAL && base_name_parse("", &bn) == -EINVAL,
                   "short names are refused without reading past their end");
        }
        return done();
}
