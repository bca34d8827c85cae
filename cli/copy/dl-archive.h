/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * libarchive, loaded by `spacectl cp` when it starts (dl_archive_open()). Linked directly it costs every
 * spacectl call libxml2, ICU (and with it libstdc++), nettle, acl, lzma, lz4 and bzip2. Calls go through
 * the table: libarchive.archive_read_new(). A direct call does not link, there being no -larchive.
 */

#include <archive.h>
#include <archive_entry.h>

#include "client/dl-util.h"

#define DL_ARCHIVE_SONAME "libarchive.so.13"
#define DL_ARCHIVE_PACKAGE "libarchive13"

#define DL_ARCHIVE_FOREACH(X)                           \
        X(archive_error_string)                         \
        X(archive_entry_new)                            \
        X(archive_entry_free)                           \
        X(archive_entry_filetype)                       \
        X(archive_entry_pathname)                       \
        X(archive_entry_perm)                           \
        X(archive_entry_mtime)                          \
        X(archive_entry_uid)                            \
        X(archive_entry_gid)                            \
        X(archive_entry_hardlink)                       \
        X(archive_entry_symlink)                        \
        X(archive_entry_set_filetype)                   \
        X(archive_entry_set_pathname)                   \
        X(archive_entry_set_perm)                       \
        X(archive_entry_set_mtime)                      \
        X(archive_entry_set_uid)                        \
        X(archive_entry_set_gid)                        \
        X(archive_entry_set_size)                       \
        X(archive_entry_set_symlink)                    \
        X(archive_read_new)                             \
        X(archive_read_support_format_all)              \
        X(archive_read_support_filter_all)              \
        X(archive_read_open_fd)                         \
        X(archive_read_next_header)                     \
        X(archive_read_next_header2)                    \
        X(archive_read_data)                            \
        X(archive_read_free)                            \
        X(archive_read_disk_new)                        \
        X(archive_read_disk_set_behavior)               \
        X(archive_read_disk_set_symlink_hybrid)         \
        X(archive_read_disk_set_symlink_physical)       \
        X(archive_read_disk_open)                       \
        X(archive_read_disk_can_descend)                \
        X(archive_read_disk_descend)                    \
        X(archive_write_new)                            \
        X(archive_write_set_format_pax_restricted)      \
        X(archive_write_open_fd)                        \
        X(archive_write_disk_new)                       \
        X(archive_write_disk_set_options)               \
        X(archive_write_header)                         \
        X(archive_write_data)                           \
        X(archive_write_finish_entry)                   \
        X(archive_write_fail)                           \
        X(archive_write_close)                          \
        X(archive_write_free)

typedef struct DlArchive {
        DL_ARCHIVE_FOREACH(DL_FIELD)
} DlArchive;

extern DlArchive libarchive;

/* Loads libarchive (once): 0, or -ENOPKG after printing which package the verb needs. */
int dl_archive_open(void);
