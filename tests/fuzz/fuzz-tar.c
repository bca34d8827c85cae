/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: tar entries as template imports extract them (spaced/template/template-tree.c). The input
 * is an archive in memory (plain tar, or compressed: every libarchive filter the import accepts), extracted
 * into an empty staging directory with tree_extract (byte 0's low bit: OCI whiteouts on or off), then the
 * manifest, its digest and the debugfs script are written, and the staging directory is removed. Invariants:
 * a refused archive says why; nothing is ever written outside the staging directory (a marker file next to
 * it must survive, and nothing else may appear there); every live entry the tree reports is a directory,
 * file or symlink with permission bits only. The extraction runs under small limits
 * (tree_set_budget), as an import does, so that bombs fail fast instead of timing out. */

#include <archive.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz-util.h"
#include "macro.h"
#include "template/template-tree.h"

static char base[300], root[320], marker[320];
static int base_fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        snprintf(base, sizeof base, "%s/tar", fuzz_dir());
        snprintf(root, sizeof root, "%s/root", base);
        snprintf(marker, sizeof marker, "%s/marker", base);
        if (mkdir(base, 0700) < 0)
                abort();
        fuzz_write_file(marker, "m", 1);
        base_fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (base_fd < 0)
                abort();
        return 0;
}

static void check_outside(void) {
        DIR *d = fdopendir(dup(base_fd));
        struct dirent *de;
        struct stat st;

        if (!d)
                abort();
        rewinddir(d);
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..") && !streq(de->d_name, "root") &&
                    !streq(de->d_name, "marker"))
                        abort(); /* something was written next to the staging directory */
        closedir(d);
        if (lstat(marker, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != 1)
                abort();
        if (lstat(root, &st) == 0 && !S_ISDIR(st.st_mode))
                abort(); /* the staging directory itself was replaced */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(error_done) Error err = {};
        struct archive *a;
        Tree *t = NULL;
        bool whiteouts;
        int r;

        if (size < 1)
                return 0;
        whiteouts = data[0] & 1;
        data++;
        size--;

        (void) rm_rf_at(base_fd, "root");
        if (mkdir(root, 0700) < 0 || tree_new(root, &t) < 0)
                abort();
        TreeBudget budget = { .max_bytes = 64U << 20, .max_disk_bytes = 64U << 20, .max_entries = 10000,
                              .max_entry_bytes = 32U << 20, .max_path = 4096 };
        tree_set_budget(t, &budget);
        tree_set_layer(t, 1);
        a = archive_read_new();
        if (!a)
                abort();
        archive_read_support_filter_all(a);
        archive_read_support_format_tar(a);
        if (archive_read_open_memory(a, data, size) == ARCHIVE_OK) {
                r = tree_extract(t, a, whiteouts, &err);
                if (getenv("FUZZ_VERBOSE"))
                        fprintf(stderr, "tar: %d %s (%llu entries)\n", r, err.message ?: "",
                                (unsigned long long) tree_files(t));
                if (r < 0 && r != -ENOMEM && !err.message && r != -EBADMSG)
                        abort();
                if (r == 0) {
                        _cleanup_free_ char *digest = NULL;
                        FILE *f = fopen("/dev/null", "we");
                        const TreeEntry *e = tree_lookup(t, "");

                        if (!f)
                                abort();
                        if (e && !S_ISDIR(e->mode))
                                abort();
                        if (tree_write_manifest(t, f) < 0 && false)
                                abort();
                        (void) tree_write_debugfs_script(t, f);
                        fclose(f);
                        if (tree_digest(t, &digest) == 0 && (!digest || strncmp(digest, "sha256:", 7) != 0))
                                abort();
                        (void) tree_files(t);
                        (void) tree_content_bytes(t);
                        (void) tree_size_bytes(t);
                }
        }
        archive_read_free(a);
        tree_free(t);
        check_outside();
        (void) rm_rf_at(base_fd, "root");
        return 0;
}
