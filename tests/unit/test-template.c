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
#include <stdatomic.h>
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
static TreeBudget *budget; /* given to the trees extract() makes */

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
        tree_set_budget(t, budget);
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

/* ---- hand-made archives: what libarchive's writer will not make ---- */

static void tar_header(uint8_t h[512], const char *name, char type, uint64_t size) {
        unsigned sum = 0;

        memset(h, 0, 512);
        snprintf((char *) h, 100, "%s", name);
        memcpy(h + 100, "0000644", 8);
        memcpy(h + 108, "0000000", 8);
        memcpy(h + 116, "0000000", 8);
        snprintf((char *) h + 124, 12, "%011llo", (unsigned long long) size);
        memcpy(h + 136, "00000000001", 12);
        h[156] = (uint8_t) type;
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
        memset(h + 148, ' ', 8);
        for (unsigned i = 0; i < 512; i++)
                sum += h[i];
        snprintf((char *) h + 148, 8, "%06o", sum);
}

/* One file of 512 bytes of data that its pax (GNU sparse 0.1) header says is `logical` bytes long: the attack
 * of a 10 KB archive that declares a 1 TiB file. */
static int write_sparse(const char *path, uint64_t logical) {
        char records[512], rec[128];
        uint8_t h[512], data[512];
        size_t n = 0;
        FILE *f = fopen(path, "we");

        if (!f)
                return -errno;
        records[0] = 0;
        for (unsigned i = 0; i < 2; i++) {
                char kv[96];
                int len;
                if (i == 0)
                        snprintf(kv, sizeof kv, "GNU.sparse.size=%llu\n", (unsigned long long) logical);
                else
                        snprintf(kv, sizeof kv, "GNU.sparse.map=0,512\n");
                /* the record's length counts its own digits */
                len = (int) strlen(kv) + 3;
                if (len >= 100)
                        len++;
                snprintf(rec, sizeof rec, "%d %s", len, kv);
                strcat(records, rec);
        }
        n = strlen(records);
        tar_header(h, "PaxHeaders/big", 'x', n);
        fwrite(h, 1, 512, f);
        memset(data, 0, sizeof data);
        memcpy(data, records, n);
        fwrite(data, 1, 512, f);
        tar_header(h, "big", '0', 512);
        fwrite(h, 1, 512, f);
        memset(data, 'A', sizeof data);
        fwrite(data, 1, 512, f);
        memset(data, 0, sizeof data);
        fwrite(data, 1, 512, f);
        fwrite(data, 1, 512, f);
        return fclose(f) == 0 ? 0 : -errno;
}

/* A gzip bomb: one file of n zero bytes. */
static int write_zeros(const char *path, const char *name, uint64_t n, int filter) {
        struct archive *a = archive_write_new();
        struct archive_entry *ae = archive_entry_new();
        static const char zeros[65536];
        int r = -EIO;

        archive_write_set_format_pax_restricted(a);
        archive_write_add_filter(a, filter);
        if (archive_write_open_filename(a, path) != ARCHIVE_OK)
                goto out;
        archive_entry_set_pathname(ae, name);
        archive_entry_set_filetype(ae, AE_IFREG);
        archive_entry_set_perm(ae, 0644);
        archive_entry_set_size(ae, (la_int64_t) n);
        if (archive_write_header(a, ae) != ARCHIVE_OK)
                goto out;
        for (uint64_t done = 0; done < n; done += sizeof zeros)
                archive_write_data(a, zeros, n - done < sizeof zeros ? n - done : sizeof zeros);
        r = 0;
out:
        archive_entry_free(ae);
        archive_write_close(a);
        archive_write_free(a);
        return r;
}

/* Extracts path with the budget b; ok when it fails with want_code and want_in_message. */
static void over_budget(const char *name, const char *path, TreeBudget *b, ErrorCode want_code,
                        const char *want_in_message) {
        _cleanup_(error_done) Error err = {};
        Tree *t = NULL;
        int r;

        budget = b;
        r = extract(name, (const char *const[]) { path, NULL }, false, &t, NULL, &err);
        budget = NULL;
        ok(r < 0 && err.code == want_code && err.message && strstr(err.message, want_in_message), "%s: %s", name,
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

        /* names no debugfs command can carry are refused, and shown escaped */
        {
                Entry e_tab[] = { { "etc/a\tb", AE_IFREG, 0644, 0, 0, 1, "x", 0 }, { NULL } };
                Entry e_nl[] = { { "etc/a\nsif /bin/sh mode 04777", AE_IFREG, 0644, 0, 0, 1, "x", 0 }, { NULL } };
                Entry e_esc[] = { { "etc/\033[2Jx", AE_IFREG, 0644, 0, 0, 1, "x", 0 }, { NULL } };
                Entry e_del[] = { { "dir\x7f/x", AE_IFREG, 0644, 0, 0, 1, "x", 0 }, { NULL } };
                hostile("tab", e_tab, "'etc/a\\x09b': names with control characters are refused");
                hostile("newline", e_nl, "'etc/a\\x0asif /bin/sh mode 04777': names with line breaks are refused");
                hostile("escape", e_esc, "'etc/\\x1b[2Jx': names with control characters are refused");
                hostile("delete", e_del, "names with control characters are refused");
        }

        /* the budget: limits from the headers before any data, bytes counted as they come, cancel */
        {
                _cleanup_free_ char *sparse = NULL, *bomb = NULL, *zst = NULL, *many = NULL, *deep = NULL, *small = NULL;
                static const Entry e_many[] = {
                        { "a", AE_IFREG, 0644, 0, 0, 1, "1", 0 }, { "b", AE_IFREG, 0644, 0, 0, 1, "2", 0 },
                        { "c", AE_IFREG, 0644, 0, 0, 1, "3", 0 }, { "d", AE_IFREG, 0644, 0, 0, 1, "4", 0 },
                        { NULL },
                };
                static const Entry e_deep[] = {
                        { "aaaaaaaaaa/bbbbbbbbbb/cccccccccc/dddddddddd/eeeeeeeeee", AE_IFREG, 0644, 0, 0, 1, "x", 0 },
                        { NULL },
                };
                TreeBudget b;
                atomic_bool cancel;
                uint64_t t0;

                if (asprintf(&sparse, "%s/sparse.tar", tmp) < 0 || asprintf(&bomb, "%s/bomb.tar.gz", tmp) < 0 ||
                    asprintf(&zst, "%s/bomb.tar.zst", tmp) < 0 || asprintf(&many, "%s/many.tar", tmp) < 0 ||
                    asprintf(&deep, "%s/deep.tar", tmp) < 0 || asprintf(&small, "%s/small.tar.gz", tmp) < 0 ||
                    write_sparse(sparse, 1ULL << 40) < 0 || write_zeros(bomb, "zeros", 64ULL << 20, ARCHIVE_FILTER_GZIP) < 0 ||
                    write_zeros(zst, "zeros", 64ULL << 20, ARCHIVE_FILTER_ZSTD) < 0 ||
                    write_zeros(small, "zeros", 4ULL << 20, ARCHIVE_FILTER_GZIP) < 0 ||
                    write_archive(many, e_many, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_NONE) < 0 ||
                    write_archive(deep, e_deep, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED, ARCHIVE_FILTER_NONE) < 0)
                        return 1;

                t0 = now_usec_monotonic();
                b = (TreeBudget) { .max_bytes = 4ULL << 30, .max_entry_bytes = 2ULL << 30 };
                over_budget("a sparse file of 1 TiB", sparse, &b, ERROR_LIMIT_EXCEEDED,
                            "'big': its size (1.0 TiB) is over the import limit of 2.0 GiB (import_max_entry_bytes");
                ok(now_usec_monotonic() - t0 < 2000000, "... refused from its header, at once");
                b = (TreeBudget) { .max_bytes = 16ULL << 20 };
                over_budget("a gzip bomb", bomb, &b, ERROR_LIMIT_EXCEEDED,
                            "the sum of the entries' sizes (64.0 MiB) is over the import limit of 16.0 MiB (import_max_bytes");
                b = (TreeBudget) { .max_entry_bytes = 1ULL << 20 };
                over_budget("a zstd bomb", zst, &b, ERROR_LIMIT_EXCEEDED, "import_max_entry_bytes");
                b = (TreeBudget) { .max_entries = 3 };
                over_budget("four entries", many, &b, ERROR_LIMIT_EXCEEDED,
                            "'d': the number of entries (4) is over the import limit of 3 (import_max_entries");
                b = (TreeBudget) { .max_path = 32 };
                over_budget("a long path", deep, &b, ERROR_LIMIT_EXCEEDED, "import_max_path");
                {
                        _cleanup_free_ char *ustar = NULL;
                        if (asprintf(&ustar, "%s/ustar-none.archive", tmp) < 0)
                                return 1;
                        b = (TreeBudget) { .max_disk_bytes = 16 };
                        over_budget("data over the disk limit", ustar, &b, ERROR_LIMIT_EXCEEDED,
                                    "'./etc/passwd': the data written so far (26 bytes) is over the import limit of "
                                    "16 bytes (import_max_disk_bytes");
                }
                atomic_init(&cancel, true);
                b = (TreeBudget) { .cancel = &cancel };
                over_budget("a cancelled extraction", bomb, &b, ERROR_CANCELLED, "cancelled");
                {
                        _cleanup_free_ char *root = NULL, *zpath = NULL;
                        _cleanup_(error_done) Error err = {};
                        struct stat st = {};
                        Tree *t = NULL;
                        bool hole;

                        b = (TreeBudget) { .max_bytes = 16ULL << 20, .max_disk_bytes = 4096 };
                        budget = &b;
                        ok(extract("zeros", (const char *const[]) { small, NULL }, false, &t, &root, &err) == 0 &&
                                   tree_lookup(t, "zeros") && tree_lookup(t, "zeros")->size == 4ULL << 20,
                           "4 MiB of zeros fit a budget of 16 MiB logical and 4 KiB on disk (%s)", err.message ?: "ok");
                        budget = NULL;
                        hole = root && asprintf(&zpath, "%s/zeros", root) >= 0 && stat(zpath, &st) == 0 &&
                               st.st_size == 4LL << 20 && st.st_blocks == 0;
                        ok(hole, "... as a hole: %lld bytes allocated", (long long) st.st_blocks * 512);
                        ok(b.bytes == 4ULL << 20 && b.entries == 1 && b.disk_bytes == 0, "... and counted as such");
                        tree_free(t);
                }
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
                   streq(bn.initramfs_digest, "bbbbbbbbbbbb") && !bn.devices_current,
                   "a base name gives its three short digests; one without a device suffix is of old devices");
                ok(base_name_parse("0123456789ab-kaaaaaaaaaaaa-ibbbbbbbbbbbb-m256-c1-tcg-btrfs-pvpanic", &bn) == 0 &&
                   streq(bn.template_digest, "0123456789ab") && bn.devices_current,
                   "a base of today's device set (pvpanic) says so");
                ok(base_name_parse("0123456789ab-kaaaaaaaaaaaa-ibbbbbbbbbbbb-m256-c1-tcg-btrfs-pvpanic", &bn) == 0 &&
                   streq(bn.ca_fingerprint, ""), "... one without a CA says none (made before guests trusted one)");
                ok(base_name_parse("0123456789ab-kaaaaaaaaaaaa-ibbbbbbbbbbbb-m256-c1-tcg-ca0011223344556677-pvpanic",
                                   &bn) == 0 && streq(bn.ca_fingerprint, "0011223344556677") && bn.devices_current &&
                   streq(bn.initramfs_digest, "bbbbbbbbbbbb"), "a base of today names its CA's fingerprint");
                ok(base_name_parse("0123456789ab-kaaaaaaaaaaaa-ibbbbbbbbbbbb-m256-c1-kvm-btrfs-ca0011223344556677-pvpanic",
                                   &bn) == 0 && streq(bn.ca_fingerprint, "0011223344556677"), "... on btrfs too");
                ok(base_name_parse("0123456789ab-kaaaaaaaaaaaa-ibbbbbbbbbbbb-m256-c1-tcg-ca00112233-pvpanic", &bn) == 0 &&
                   streq(bn.ca_fingerprint, ""), "... a cut-off fingerprint is none");
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
