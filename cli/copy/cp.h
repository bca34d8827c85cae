/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * spacectl cp: files between the host and a sandbox, like docker cp. verbs/cmd-cp.c parses the arguments,
 * cp-remote.c wraps the daemon's /files routes, cp-upload.c copies host -> sandbox (a local path through
 * archive_read_disk, or a tar stream on stdin), cp-download.c sandbox -> host (through archive_write_disk with
 * the SECURE flags, or a tar stream on stdout). Nothing is held whole: file contents stream through libcurl
 * callbacks straight from or into libarchive.
 */

/* What a download may bring without --max-bytes: more than a sandbox's disk usually holds, far less than a
 * sparse file can claim. */
#define CP_MAX_BYTES_DEFAULT (UINT64_C(32) << 30)

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli.h"

typedef enum CpType {
        CP_FILE,
        CP_DIR,
        CP_SYMLINK,
        CP_OTHER,
} CpType;

/* An entry of the sandbox's file system, from stat or list. name is one path component. */
typedef struct CpEntry {
        char *path;
        char *name;
        CpType type;
        unsigned mode;
        uint64_t size;
        int64_t mtime;
        uint32_t uid, gid;
        char *target;
} CpEntry;

void cp_entry_done(CpEntry *e);
void cp_entries_free(CpEntry *l, size_t n);

typedef struct CpContext {
        SpaceHttp *http;
        const char *ref;          /* the sandbox as the user named it */
        char *files_path;         /* /v1/sandboxes/<ref>/files */
        bool archive;             /* -a: owners and the modes as they are (setuid, setgid, sticky; no umask) */
        const char *chown;        /* --chown USER[:GROUP]: the owner of what an upload makes (NULL: the daemon's
                                   * default, the sandbox's user where it could write, root elsewhere) */
        bool follow;              /* -L: follow a symlink given as SRC */
        bool quiet;
        bool progress;            /* stderr is a terminal and not quiet */
        mode_t user_umask;        /* applied to what comes out without -a */
        uint64_t max_bytes;       /* --max-bytes: file contents a download may bring in all; 0: no limit */
        uint64_t files, bytes;    /* copied so far */
        uint64_t skipped;         /* special files left out */
        char *first_skipped;
        uint64_t progress_at;     /* monotonic usec of the last progress line */
} CpContext;

/* ---- cp-remote.c ---- */

/* "a" + "/" + "b" without doubling the slash. */
char *cp_join(const char *a, const char *b);
/* The sandbox's file at path: 0, -ENOENT (not printed), or another error (printed). */
int cp_remote_stat(CpContext *c, const char *path, bool follow, CpEntry *ret);
/* The entries right below a directory (printed errors). */
int cp_remote_list(CpContext *c, const char *path, CpEntry **ret, size_t *ret_n);
/* mkdir: 0 created, -EEXIST exists (not printed), else printed. uid/gid < 0: not given. */
int cp_remote_mkdir(CpContext *c, const char *path, unsigned mode, bool parents, int64_t uid, int64_t gid);
int cp_remote_symlink(CpContext *c, const char *path, const char *target, int64_t uid, int64_t gid);
/* remove: 0, -ENOENT (not printed), else printed. */
int cp_remote_remove(CpContext *c, const char *path, bool recursive);
/* attrs: mode < 0 / mtime unset (INT64_MIN) / uid, gid < 0 are left alone. */
int cp_remote_attrs(CpContext *c, const char *path, int mode, int64_t mtime, int64_t uid, int64_t gid);
/* PUT with a streamed body. */
int cp_remote_put(CpContext *c, const char *path, unsigned mode, int64_t mtime, int64_t uid, int64_t gid,
                  bool parents, SpaceHttpReadFn read, void *userdata);
/* GET with a streamed body; *ret_bytes: how much came. */
int cp_remote_get(CpContext *c, const char *path, SpaceHttpWriteFn write, void *userdata, uint64_t *ret_bytes);
/* Prints an error reply of the daemon about path; returns the matching -errno. */
int cp_log_reply_error(CpContext *c, const SpaceHttpReply *reply, const char *path);

void cp_note_skipped(CpContext *c, const char *what);
void cp_progress(CpContext *c, uint64_t bytes, bool done);

/* ---- cp-upload.c / cp-download.c: return 0 or < 0 after printing why ---- */

/* Host -> sandbox. src is a local path ("-": a tar stream on stdin), dst the path in the sandbox. */
int cp_upload(CpContext *c, const char *src, const char *dst);
/* Sandbox -> host. src is the path in the sandbox, dst a local path ("-": a tar stream on stdout). */
int cp_download(CpContext *c, const char *src, const char *dst);
