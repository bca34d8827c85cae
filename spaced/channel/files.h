/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * File operations in a sandbox, the channel side (lib/proto.h, FILE): one FileXfer per HTTP request, on a
 * stream of its own, answered by the guest with OK or ERROR and, for reads and lists, DATA under credit.
 *
 * Everything the guest sends is checked here: frames must fit the operation and its state, DATA must stay
 * within the credit we gave, entries must have a known type, numbers in range, names without '/' or NUL
 * and paths within SPACE_FILE_PATH_MAX. A guest that breaks the rules fails its transfer ("protocol_error").
 *
 * Memory: a read holds at most the window (SPACE_STREAM_WINDOW) of data, a list at most that much of
 * entries turned into JSON; credit goes back as the HTTP client takes it.
 */

#include <cjson/cJSON.h>

#include "http/http.h"
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
        uint32_t uid, gid;
        const char *target;  /* symlinks, else NULL */
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
        Request *request;            /* the HTTP request it serves; NULL once that is gone */
        bool response_live;          /* a streaming response still reads from it */
        bool passed_headers;         /* PUT: the handler let the body come */

        /* read and list: DATA on fd 1, turned into what the client reads (bytes, or JSON for a list) */
        SpaceBuf out;
        size_t out_off;
        bool eof;
        uint64_t credit_left;        /* what the guest may still send */
        uint64_t uncredited;         /* taken from the guest, not yet returned */
        unsigned entries;

        /* write: DATA on fd 0 */
        SpaceCredit send_credit;     /* what we may still send */
        bool eof_sent;
        uint64_t sent;

        FileXfer *agent_next;        /* AgentConn's list */
};

/* Sends FILE with kv (op= and path= among them) on a new stream of s's channel; the transfer serves r
 * (r->stream, detached when r ends). Responds to r itself when that fails (returns < 0 then). */
int file_xfer_start(Request *r, Sandbox *s, const char *op, const char *path, const SpaceBuf *kv, FileXfer **ret);
/* The transfer r serves, or NULL. */
FileXfer *file_xfer_of(Request *r);
/* The request is done with it (when r ends, through r->stream). */
void file_xfer_detach(FileXfer *x, Request *r);

/* From the channel (agent.c). */
void file_xfer_on_frame(FileXfer *x, const SpaceFrameHeader *h, const uint8_t *payload);
/* The channel went away: the transfer fails with channel_lost. */
void file_xfer_lost(FileXfer *x, const char *message);

/* The answer of a finished operation as an entry (stat, mkdir, move, symlink, attrs, write): 0, or -EBADMSG
 * when the guest sent something malformed. */
int file_xfer_reply_entry(FileXfer *x, FileEntry *ret);
/* A JSON object for an entry at path. */
cJSON *file_entry_to_json(const char *path, const FileEntry *e);

/* Upload (PUT): hands body bytes to the guest as credit allows; returns how many it took (0 with the
 * request suspended until credit comes back). */
size_t file_xfer_upload(FileXfer *x, Request *r, const char *data, size_t n);
/* Sends EOF after the body: the guest renames the file into place and answers. */
int file_xfer_finish_upload(FileXfer *x);
/* Download (read, list): answers r with a streaming (chunked) response fed by the transfer; for a read the
 * headers carry the file's mode and mtime from the OK. */
int file_xfer_respond_stream(FileXfer *x, Request *r);
