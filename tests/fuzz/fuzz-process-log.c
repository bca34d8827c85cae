/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: process event logs read back after a crash or from a hostile disk (spaced/channel/
 * process-log.c). The input is split at "\n--OLD--\n" into the current file (<pid>.log) and the older one
 * (<pid>.log.1), written to a scratch directory; then, as a restarted daemon does: the range of ids
 * (process_log_range), a reader from the first id to the end and from a few other ids (log_reader_seek,
 * log_reader_next), reopening the log for appends (process_log_open cuts a torn tail), one append, and the
 * range and a read again. Invariants: ids come back consecutive, lengths within EVENT_PAYLOAD_MAX, types
 * known, and after the reopen the appended record is the last one. */

#include <stdlib.h>
#include <string.h>

#include "fuzz-util.h"
#include "macro.h"
#include "channel/process-log.h"

static char path[300], old[310];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        snprintf(path, sizeof path, "%s/1.log", fuzz_dir());
        snprintf(old, sizeof old, "%s.1", path);
        return 0;
}

/* Reads from id to the end: how many events. */
static unsigned read_from(uint64_t id, uint64_t *ret_last) {
        LogReader rd = LOG_READER_INIT;
        uint64_t first = 0, got, want = id;
        unsigned n = 0;
        const uint8_t *d;
        uint8_t type;
        size_t len;
        int r;

        r = log_reader_seek(&rd, path, id, &first);
        if (r == 0)
                while ((r = log_reader_next(&rd, path, &got, &type, &d, &len)) > 0) {
                        if (got != want++ || len > EVENT_PAYLOAD_MAX || type == 0 || type >= _EVENT_TYPE_MAX)
                                abort();
                        if (len > 0)
                                (void) *(volatile const uint8_t *) &d[len - 1];
                        if (ret_last)
                                *ret_last = got;
                        if (++n > 100000)
                                abort();
                }
        log_reader_done(&rd);
        return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *parts[2];
        size_t lens[2], n;
        uint64_t first = 0, last = 0, f2 = 0, l2 = 0, got_last = 0;
        ProcessLog *l = NULL;

        n = fuzz_split(data, size, "\n--OLD--\n", parts, lens, 2);
        process_log_remove(path);
        fuzz_write_file(path, parts[0], lens[0]);
        if (n > 1)
                fuzz_write_file(old, parts[1], lens[1]);

        if (process_log_range(path, &first, &last) < 0)
                abort();
        if (first)
                (void) read_from(first, NULL);
        (void) read_from(1, NULL);
        (void) read_from(last + 1, NULL);
        if (last > 2)
                (void) read_from(last - 1, NULL);

        if (process_log_open(path, 0, &l) == 0) {
                uint64_t id = l->last_id + 1;
                static const char payload[] = "{\"pid\":1}";

                if (id != 0 && process_log_append(l, id, EVENT_EXITED, payload, sizeof payload - 1) == 0) {
                        if (process_log_range(path, &f2, &l2) < 0 || l2 != id)
                                abort();
                        (void) read_from(f2 ? f2 : id, &got_last);
                        if (read_from(id, &got_last) != 1 || got_last != id)
                                abort();
                }
                process_log_free(l);
        }
        process_log_remove(path);
        return 0;
}
