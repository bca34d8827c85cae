/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * File operations in a sandbox, the channel side (lib/proto.h, FILE): one FileXfer per HTTP request, on a
 * stream of its own, answered by the guest with OK or ERROR and, for reads and lists, DATA under credit. The
 * request waits through a ChannelWaiter and reads or writes through the functions below; http answers it.
 *
 * Everything the guest sends is checked here: frames must fit the operation and its state, DATA must stay
 * within the credit we gave, entries must have a known type, numbers in range, names without '/' or NUL
 * and paths within SPACE_FILE_PATH_MAX. A guest that breaks the rules fails its transfer ("protocol_error").
 *
 * Memory: a read holds at most the window (SPACE_STREAM_WINDOW) of data, a list at most that much of
 * entries turned into JSON; credit goes back as the HTTP client takes it.
 */

#include <cjson/cJSON.h>

#include "channel/channel.h"
#include "core/error.h"
#include "core/manager.h"

typedef enum FileXferState {
        FILE_XFER_SENT,      /* the request went out, no answer yet */
        FILE_XFER_OPEN,      /* OK came: a read or list streams DATA, a write takes DATA */
        FILE_XFER_DONE,      /* the last OK came: reply holds it */
        FILE_XFER_FAILED,    /* an ERROR came, or the channel went away: error_* say what */
} FileXferState;

typedef enum FileEntryType {
        FILE_ENTRY_FILE,
        FILE_ENTRY_DIR,
        FILE_ENTRY_SYMLINK,
        FILE_ENTRY_OTHER,
} FileEntryType;

/* An entry as the guest described it, checked. target points into the payload it came from. */
typedef struct FileEntry {
        const char *rel;     /* list entries only */
        FileEntryType type;
        unsigned mode;       /* permission bits, 07777 */
        uint64_t size;
        int64_t mtime;
        uint32_t mtime_nsec; /* 0 from an agent that does not send it */
        uint32_t uid, gid;
        const char *target;  /* symlinks, else NULL: the link's text */
        /* symlinks, from an agent of version 6 (else NULL and false): realpath's answer in the guest ("" when it
         * failed: dangling, a loop), and the type and mode of what the link leads to, when the guest saw it */
        const char *resolved;
        bool has_target_type;
        FileEntryType target_type;
        unsigned target_mode;
        /* the entry's records as they came, for its metadata (file_entry_meta_next); n_meta pairs, checked */
        const uint8_t *records;
        size_t records_len;
        unsigned n_meta;
} FileEntry;

struct FileXfer {
        Manager *manager;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        AgentConn *agent;            /* while the stream is registered */
        uint32_t stream;
        char op[8];
        char *path;                  /* the path asked for, as the API saw it */
        FileXferState state;
        SpaceBuf reply;              /* the last OK's payload */
        ErrorCode error_code;         /* FILE_XFER_FAILED: why */
        char *error_message;
        ChannelWaiter waiter;        /* the request it serves, woken on news; cleared once that is gone */
        bool reader_open;            /* a reader (a streaming response) still reads from it */

        /* read and list: DATA on fd 1, turned into what the client reads (bytes, or JSON for a list) */
        SpaceBuf out;
        size_t out_off;
        bool eof;
        uint64_t credit_left;        /* what the guest may still send */
        uint64_t uncredited;         /* taken from the guest, not yet returned */
        unsigned entries;
        size_t event_off;            /* watch: where the next event starts in the frame at out_off */

        /* write: DATA on fd 0 */
        SpaceCredit send_credit;     /* what we may still send */
        bool eof_sent;
        uint64_t sent;

        FileXfer *agent_next;        /* AgentConn's list */
};

/* Sends FILE with kv (op= and path= among them) on a new stream of s's channel; waiter is woken whenever the
 * transfer moves on (an answer, data, credit, a failure). On failure reterr says why, unless it is out of
 * memory. */
int file_xfer_start(Sandbox *s, const char *op, const char *path, const SpaceBuf *kv, const ChannelWaiter *waiter,
                    FileXfer **ret, Error *reterr);
/* The waiter is gone (its request ended): the transfer is freed unless a reader still reads from it. */
void file_xfer_detach(FileXfer *x);

/* From the channel (agent.c). */
void file_xfer_on_frame(FileXfer *x, const SpaceFrameHeader *h, const uint8_t *payload);
/* The channel went away: the transfer fails with channel_lost. */
void file_xfer_lost(FileXfer *x, const char *message);

/* The answer of a finished operation as an entry (stat, mkdir, move, symlink, attrs, write): 0, or -EBADMSG
 * when the guest sent something malformed. */
int file_xfer_reply_entry(FileXfer *x, FileEntry *ret);
/* Parses one entry's records from p at *offset (lib/proto.h, "entry"; list: it starts with rel=) up to the
 * end, the next entry of a list, or a watch's next event (ev=), and moves *offset past it: 0, or -EBADMSG for
 * anything out of its bounds (a hostile guest). */
int file_entry_parse(const uint8_t *p, size_t n, size_t *offset, bool list, FileEntry *ret);
/* The metadata pairs of a parsed entry, one per call from *offset (start at 0): 1 with key and value, 0 at
 * the end. */
int file_entry_meta_next(const FileEntry *e, size_t *offset, const char **ret_key, const char **ret_value);
/* Its metadata as a JSON object of strings ({} when it has none); NULL when out of memory. */
cJSON *file_entry_meta_json(const FileEntry *e);
/* A JSON object for an entry at path. */
cJSON *file_entry_to_json(const char *path, const FileEntry *e);

/* Shared with files-watch.c: a name below a directory (names of 1..SPACE_FILE_NAME_MAX bytes joined by single
 * '/', none "." or ".."). */
bool file_rel_valid(const char *rel);
/* Returns what the guest sent and was taken as credit (a watch's events, once read). */
int file_xfer_return_credit(FileXfer *x);

/* files-watch.c: the events of FILE op=watch (lib/proto.h), checked: a known ev= type first, a name=
 * (file_rel_valid, or "." for the watched directory itself), then, optionally, the entry and its owner= and
 * group= names (names of a user's shape, else NULL). */
typedef enum FileWatchEventType {
        FILE_WATCH_CREATE,
        FILE_WATCH_WRITE,
        FILE_WATCH_REMOVE,
        FILE_WATCH_RENAME,
        FILE_WATCH_CHMOD,
        _FILE_WATCH_MAX,
} FileWatchEventType;

typedef struct FileWatchEvent {
        FileWatchEventType type;
        const char *name;    /* points into the payload */
        bool has_entry;
        FileEntry entry;
        const char *owner, *group;
} FileWatchEvent;

/* One event from p at *offset: 1 and *offset past it, 0 at the end, -EBADMSG when malformed. */
int file_watch_event_parse(const uint8_t *p, size_t n, size_t *offset, FileWatchEvent *ret);
/* Whether a DATA frame is nothing but whole, valid events (at least one). */
bool file_watch_events_valid(const uint8_t *p, size_t n);
/* The next event a watch's guest sent: 1 with *ret (valid until the next call), 0 when none waits (the
 * waiter is woken when one comes), CHANNEL_READ_ERROR when the watch failed (x->error_* say why). Credit
 * goes back to the guest as the events are taken. */
int file_xfer_next_event(FileXfer *x, FileWatchEvent *ret);
const char *file_watch_event_type_name(FileWatchEventType t);

/* Upload (PUT): hands body bytes to the guest as credit allows; returns how many it took (fewer than n: the
 * waiter is woken when credit comes back). All of them when the transfer failed: the rest is dropped. */
size_t file_xfer_upload(FileXfer *x, const char *data, size_t n);
/* Sends EOF after the body: the guest renames the file into place and answers. */
int file_xfer_finish_upload(FileXfer *x);
/* Download (read, list): a reader takes the file's bytes (or a list's JSON) as they come. Open it before the
 * first read; close it when it will not read again (it may outlive the waiter). */
void file_xfer_open_reader(FileXfer *x);
void file_xfer_close_reader(FileXfer *x);
/* Up to max bytes: how many, 0 (nothing now: the waiter is woken when there is), CHANNEL_READ_END, or
 * CHANNEL_READ_ERROR when the transfer failed on the way. */
ssize_t file_xfer_read(FileXfer *x, char *buf, size_t max);
