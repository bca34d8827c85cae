/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * A process's events: ids 1, 2, ... kept in a bounded in-memory ring and in a bounded log file with two-file
 * rotation (<pid>.log, the older <pid>.log.1), so clients can resume from any id still kept and logs survive
 * a daemon restart.
 *
 * File format (all little-endian):
 *   file header   8 bytes magic "SPACELOG", le64 first_id (the id of the first record in this file)
 *   record        le32 length, u8 type, 3 bytes zero, le64 id, le32 check, then `length` payload bytes
 *                 check = FNV-1a 32 over type, id (8 bytes le) and the payload
 * Records in a file have consecutive ids starting at first_id. A reader stops at the first record that does
 * not check out (a torn tail after a crash): everything before it is kept, nothing after it is trusted.
 * Payloads: stdout/stderr carry the raw bytes; started/exited carry their JSON text; error carries its code's
 * name (lib/error-code.h: the names are API, never renamed, where the enum's numbers may move), a NUL and the
 * message, so that what ended a process is read back as a code (channel/process-events.c renders /v1's JSON from it).
 * An error record of a daemon before that holds its JSON text, which starts with '{' as no code's name does.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

typedef enum EventType {
        EVENT_STARTED = 1,
        EVENT_STDOUT = 2,
        EVENT_STDERR = 3,
        EVENT_EXITED = 4,
        EVENT_ERROR = 5,
        _EVENT_TYPE_MAX,
} EventType;

#define EVENT_PAYLOAD_MAX SPACE_FRAME_PAYLOAD_MAX
#define PLOG_FILE_HEADER_SIZE 16U
#define PLOG_RECORD_HEADER_SIZE 20U
#define PLOG_CAP_DEFAULT (64ULL * 1024 * 1024)

const char *event_type_to_string(EventType t);   /* the SSE event name */
static inline bool event_type_is_data(uint8_t t) {
        return t == EVENT_STDOUT || t == EVENT_STDERR;
}

/* ---- the ring ---- */
typedef struct Event {
        uint64_t id;
        uint8_t type;
        uint32_t len;
        uint8_t data[];
} Event;

typedef struct EventRing {
        Event **slots;       /* circular; slots[(start + i) % n_slots] has id first_id + i */
        size_t n_slots, start, count;
        uint64_t first_id;
        size_t bytes;        /* payloads plus per-event overhead */
        size_t cap;
} EventRing;

/* Appends an event with id == first_id + count (or any id when empty), then drops the oldest events while
 * over cap (the newest always stays). */
int event_ring_push(EventRing *r, uint64_t id, uint8_t type, const void *p, size_t n);
const Event *event_ring_get(const EventRing *r, uint64_t id);
/* Drops the oldest events until at most max bytes remain. */
void event_ring_trim(EventRing *r, size_t max);
void event_ring_done(EventRing *r);

/* ---- the log files ---- */
typedef struct ProcessLog {
        char *path;          /* current file; the older one is path + ".1" */
        int fd;
        uint64_t size;       /* of the current file */
        uint64_t cap;        /* both files together */
        uint64_t last_id;    /* last id written (0: none) */
} ProcessLog;

/* Starts a fresh log (removing what an earlier process of that name left). */
int process_log_create(const char *path, uint64_t cap, ProcessLog **ret);
/* Continues an existing log after a restart: a torn tail is cut off; last_id is what survives. */
int process_log_open(const char *path, uint64_t cap, ProcessLog **ret);
/* Appends one record; id must be last_id + 1. Rotates first when the current file would pass cap / 2. On a
 * failed write the file is cut back, so the log stays well-formed. */
int process_log_append(ProcessLog *l, uint64_t id, uint8_t type, const void *p, size_t n);
ProcessLog *process_log_free(ProcessLog *l);
/* First and last ids the files hold (0, 0 when none). */
int process_log_range(const char *path, uint64_t *ret_first, uint64_t *ret_last);
/* Removes both files. */
void process_log_remove(const char *path);

/* Sequential reader over both files. */
typedef struct LogReader {
        int fd;              /* -1 when not positioned */
        uint64_t next_id;
        uint8_t *buf;        /* EVENT_PAYLOAD_MAX, allocated on first use */
} LogReader;

#define LOG_READER_INIT ((LogReader) { .fd = -1 })
/* Positions the reader at id. -ENOENT when the files no longer (or never) hold it; then *ret_first is the
 * first id they do hold (0: none). */
int log_reader_seek(LogReader *r, const char *path, uint64_t id, uint64_t *ret_first);
/* Reads the event next_id: 1 with *ret pointing into the reader (valid until the next call), 0 when it is
 * not in the files (yet), -errno on I/O errors. Crosses from the older file into the newer one by itself. */
int log_reader_next(LogReader *r, const char *path, uint64_t *ret_id, uint8_t *ret_type, const uint8_t **ret_data,
                    size_t *ret_len);
void log_reader_done(LogReader *r);
