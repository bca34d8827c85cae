/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "channel/process-log.h"
#include "tap.h"

/* The process event log: records read back byte-exact, rotation keeps at least half the cap, a torn tail is
 * cut off (not trusted, not fatal), resuming by id works across both files, and the ring stays bounded. */

static char dir[] = "/tmp/test-process-log.XXXXXX";

static void fill(uint8_t *b, size_t n, uint64_t id) {
        for (size_t i = 0; i < n; i++)
                b[i] = (uint8_t) (id * 31 + i);
}

static bool check_event(uint64_t id, uint8_t type, const uint8_t *data, size_t len, size_t want_len) {
        static uint8_t exp[EVENT_PAYLOAD_MAX];

        if (type != (id % 2 ? EVENT_STDOUT : EVENT_STDERR) || len != want_len)
                return false;
        fill(exp, len, id);
        return memcmp(exp, data, len) == 0;
}

static uint64_t file_size(const char *p) {
        struct stat st;
        return stat(p, &st) < 0 ? 0 : (uint64_t) st.st_size;
}

static void test_basic(void) {
        _cleanup_free_ char *path = NULL;
        static uint8_t buf[4096];
        ProcessLog *l = NULL;
        LogReader rd = LOG_READER_INIT;
        uint64_t first, last, id;
        const uint8_t *data;
        uint8_t type;
        size_t len;
        bool all = true;

        (void) asprintf(&path, "%s/1.log", dir);
        ok(process_log_create(path, PLOG_CAP_DEFAULT, &l) == 0, "create a log");
        for (uint64_t i = 1; i <= 100; i++) {
                fill(buf, i * 7, i);
                all = all && process_log_append(l, i, i % 2 ? EVENT_STDOUT : EVENT_STDERR, buf, i * 7) == 0;
        }
        ok(all, "append 100 records");
        ok(process_log_append(l, 50, EVENT_STDOUT, buf, 1) == -EINVAL, "append with a wrong id -> EINVAL");
        ok(process_log_append(l, 101, 0, buf, 1) == -EINVAL, "append with type 0 -> EINVAL");
        ok(process_log_append(l, 101, EVENT_STDOUT, buf, EVENT_PAYLOAD_MAX + 1) == -EINVAL, "append too big -> EINVAL");
        ok(process_log_range(path, &first, &last) == 0 && first == 1 && last == 100, "range 1..100");

        ok(log_reader_seek(&rd, path, 42, NULL) == 0, "seek to 42");
        all = true;
        for (uint64_t i = 42; i <= 100; i++)
                all = all && log_reader_next(&rd, path, &id, &type, &data, &len) == 1 && id == i &&
                      check_event(id, type, data, len, i * 7);
        ok(all, "read 42..100 byte-exact");
        ok(log_reader_next(&rd, path, &id, &type, &data, &len) == 0, "nothing after 100");
        fill(buf, 3, 101);
        ok(process_log_append(l, 101, EVENT_STDOUT, buf, 3) == 0, "append 101");
        ok(log_reader_next(&rd, path, &id, &type, &data, &len) == 1 && id == 101 && len == 3,
           "a reader at the end sees the record appended after it");
        log_reader_done(&rd);
        process_log_free(l);
}

static void test_torn(void) {
        _cleanup_free_ char *path = NULL;
        static uint8_t buf[1000];
        ProcessLog *l = NULL;
        LogReader rd = LOG_READER_INIT;
        uint64_t first, last, id, size;
        const uint8_t *data;
        uint8_t type;
        size_t len;
        int fd;

        (void) asprintf(&path, "%s/2.log", dir);
        (void) process_log_create(path, PLOG_CAP_DEFAULT, &l);
        for (uint64_t i = 1; i <= 10; i++) {
                fill(buf, sizeof buf, i);
                (void) process_log_append(l, i, i % 2 ? EVENT_STDOUT : EVENT_STDERR, buf, sizeof buf);
        }
        process_log_free(l);
        size = file_size(path);

        /* A crash in the middle of the last record: only its first 500 bytes made it. */
        ok(truncate(path, (off_t) (size - 520)) == 0, "tear the last record");
        ok(process_log_range(path, &first, &last) == 0 && first == 1 && last == 9, "torn tail: range 1..9");
        ok(log_reader_seek(&rd, path, 9, NULL) == 0 &&
           log_reader_next(&rd, path, &id, &type, &data, &len) == 1 && id == 9 &&
           log_reader_next(&rd, path, &id, &type, &data, &len) == 0, "reader stops before the torn record");
        log_reader_done(&rd);

        ok(process_log_open(path, PLOG_CAP_DEFAULT, &l) == 0 && l->last_id == 9, "reopen: last id 9");
        fill(buf, 10, 10);
        ok(process_log_append(l, 10, EVENT_STDERR, buf, 10) == 0, "append 10 after the cut");
        process_log_free(l);
        ok(process_log_range(path, &first, &last) == 0 && last == 10, "range 1..10 again");
        ok(log_reader_seek(&rd, path, 10, NULL) == 0 && log_reader_next(&rd, path, &id, &type, &data, &len) == 1 &&
           id == 10 && check_event(id, type, data, len, 10), "the new 10 reads back");
        log_reader_done(&rd);

        /* Garbage where a record should be (a flipped payload byte): the check catches it. */
        fd = open(path, O_RDWR);
        ok(fd >= 0 && pwrite(fd, "X", 1, PLOG_FILE_HEADER_SIZE + 5 * (PLOG_RECORD_HEADER_SIZE + sizeof buf) +
                                                PLOG_RECORD_HEADER_SIZE + 10) == 1,
           "corrupt record 6");
        safe_close(fd);
        ok(process_log_range(path, &first, &last) == 0 && last == 5, "corrupt record 6: range ends at 5");
        /* A length field pointing far beyond the file. */
        fd = open(path, O_RDWR);
        {
                uint8_t big[4];
                space_put_le32(big, 0xfffffff0U);
                ok(fd >= 0 && pwrite(fd, big, 4, PLOG_FILE_HEADER_SIZE) == 4, "overwrite record 1's length");
        }
        safe_close(fd);
        ok(process_log_range(path, &first, &last) == 0 && first == 0 && last == 0, "bad first length: nothing kept");
        ok(log_reader_seek(&rd, path, 1, &first) < 0 || log_reader_next(&rd, path, &id, &type, &data, &len) == 0,
           "reading a record with a bad length gives nothing");
        log_reader_done(&rd);

        /* Not a log at all. */
        fd = open(path, O_WRONLY | O_TRUNC);
        ok(fd >= 0 && write(fd, "hello", 5) == 5, "replace with junk");
        safe_close(fd);
        ok(process_log_open(path, PLOG_CAP_DEFAULT, &l) == 0 && l->last_id == 0, "open junk: starts afresh");
        process_log_free(l);
}

static void test_rotation(void) {
        _cleanup_free_ char *path = NULL, *old = NULL;
        static uint8_t buf[EVENT_PAYLOAD_MAX];
        const uint64_t cap = 2 * 1024 * 1024;
        ProcessLog *l = NULL;
        LogReader rd = LOG_READER_INIT;
        uint64_t first, last, id, n = 200, kept;
        const uint8_t *data;
        uint8_t type;
        size_t len;
        bool all = true;

        (void) asprintf(&path, "%s/3.log", dir);
        (void) asprintf(&old, "%s.1", path);
        (void) process_log_create(path, cap, &l);
        for (uint64_t i = 1; i <= n; i++) {
                fill(buf, 30000, i);
                all = all && process_log_append(l, i, i % 2 ? EVENT_STDOUT : EVENT_STDERR, buf, 30000) == 0;
                all = all && file_size(path) + file_size(old) <= cap;
        }
        ok(all, "200 x 30000 bytes with a 2 MiB cap: both files together stay under the cap");
        ok(file_size(old) > 0, "rotated into .1");
        ok(process_log_range(path, &first, &last) == 0 && last == n, "last is 200");
        kept = (last - first + 1) * 30000;
        ok(kept >= cap / 2 - 2 * (30000 + PLOG_RECORD_HEADER_SIZE), "at least half the cap is kept (%llu bytes)",
           (unsigned long long) kept);
        ok(log_reader_seek(&rd, path, 1, &id) == -ENOENT && id == first, "seek to 1: gone, first available %llu",
           (unsigned long long) first);
        ok(log_reader_seek(&rd, path, first, NULL) == 0, "seek to the first kept");
        all = true;
        for (uint64_t i = first; i <= n; i++)
                all = all && log_reader_next(&rd, path, &id, &type, &data, &len) == 1 && id == i &&
                      check_event(id, type, data, len, 30000);
        ok(all, "read across the rotation, byte-exact");

        /* A reader in the older file while rotation replaces it keeps its file and then finds the next one. */
        ok(log_reader_seek(&rd, path, first, NULL) == 0, "seek to first again");
        for (uint64_t i = n + 1; i <= n + 40; i++) {
                fill(buf, 30000, i);
                (void) process_log_append(l, i, i % 2 ? EVENT_STDOUT : EVENT_STDERR, buf, 30000);
        }
        ok(log_reader_next(&rd, path, &id, &type, &data, &len) == 1 && id == first,
           "the open reader still reads its (now deleted) file");
        log_reader_done(&rd);
        process_log_free(l);
        process_log_remove(path);
        ok(access(path, F_OK) < 0 && access(old, F_OK) < 0, "remove deletes both files");
}

static void test_ring(void) {
        static uint8_t buf[1000];
        EventRing r = { .cap = 100 * 1024 };
        bool all = true;
        const Event *e;

        for (uint64_t i = 1; i <= 1000; i++) {
                fill(buf, sizeof buf, i);
                all = all && event_ring_push(&r, i, EVENT_STDOUT, buf, sizeof buf) == 0 && r.bytes <= r.cap;
        }
        ok(all, "ring stays under its cap");
        ok(r.first_id + r.count - 1 == 1000 && r.count > 50, "ring keeps the newest (%zu events)", r.count);
        e = event_ring_get(&r, 1000);
        fill(buf, sizeof buf, 1000);
        ok(e && e->id == 1000 && e->len == sizeof buf && memcmp(e->data, buf, sizeof buf) == 0, "get the newest");
        ok(!event_ring_get(&r, 1) && !event_ring_get(&r, 1001), "old and future ids are not there");
        ok(event_ring_push(&r, 5, EVENT_STDOUT, buf, 1) == -EINVAL, "a non-consecutive id -> EINVAL");
        event_ring_trim(&r, 0);
        ok(r.count == 1 && event_ring_get(&r, 1000), "trim to 0 keeps the newest");
        event_ring_done(&r);
        ok(r.count == 0 && r.bytes == 0, "done empties it");
}

int main(void) {
        plan(0);
        if (!mkdtemp(dir)) {
                printf("Bail out! mkdtemp: %m\n");
                return 1;
        }
        test_basic();
        test_torn();
        test_rotation();
        test_ring();
        {
                char cmd[128];
                snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
                (void) !system(cmd);
        }
        return done();
}
