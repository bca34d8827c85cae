/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "macro.h"
#include "channel/process-log.h"

/* The event ring and log files of process-log.h. The files are ours, but a crash can leave a torn record at
 * the end of the current file: every length, type and id is checked before it is used. */

static const char magic[8] = { 'S', 'P', 'A', 'C', 'E', 'L', 'O', 'G' };

const char *event_type_to_string(EventType t) {
        switch (t) {
        case EVENT_STARTED:
                return "process_started";
        case EVENT_STDOUT:
                return "stdout";
        case EVENT_STDERR:
                return "stderr";
        case EVENT_EXITED:
                return "process_exited";
        case EVENT_ERROR:
                return "error";
        default:
                return NULL;
        }
}

/* ---- ring ---- */

#define EVENT_OVERHEAD (sizeof(Event) + sizeof(Event *))

static size_t event_cost(const Event *e) {
        return e->len + EVENT_OVERHEAD;
}

static void ring_pop(EventRing *r) {
        Event *e = r->slots[r->start];

        r->bytes -= event_cost(e);
        free(e);
        r->slots[r->start] = NULL;
        r->start = (r->start + 1) % r->n_slots;
        r->count--;
        r->first_id++;
}

void event_ring_trim(EventRing *r, size_t max) {
        while (r->count > 1 && r->bytes > max)
                ring_pop(r);
}

int event_ring_push(EventRing *r, uint64_t id, uint8_t type, const void *p, size_t n) {
        Event *e;

        if (n > EVENT_PAYLOAD_MAX)
                return -EINVAL;
        if (r->count > 0 && id != r->first_id + r->count)
                return -EINVAL;
        if (r->count == r->n_slots) {
                size_t ns = r->n_slots ? r->n_slots * 2 : 64;
                Event **s = calloc(ns, sizeof *s);

                if (!s)
                        return -ENOMEM;
                for (size_t i = 0; i < r->count; i++)
                        s[i] = r->slots[(r->start + i) % r->n_slots];
                free(r->slots);
                r->slots = s;
                r->n_slots = ns;
                r->start = 0;
        }
        e = malloc(sizeof *e + n);
        if (!e)
                return -ENOMEM;
        e->id = id;
        e->type = type;
        e->len = (uint32_t) n;
        if (n > 0)
                memcpy(e->data, p, n);
        if (r->count == 0) {
                r->first_id = id;
                r->start = 0;
        }
        r->slots[(r->start + r->count) % r->n_slots] = e;
        r->count++;
        r->bytes += event_cost(e);
        event_ring_trim(r, r->cap);
        return 0;
}

const Event *event_ring_get(const EventRing *r, uint64_t id) {
        if (r->count == 0 || id < r->first_id || id - r->first_id >= r->count)
                return NULL;
        return r->slots[(r->start + (size_t) (id - r->first_id)) % r->n_slots];
}

void event_ring_done(EventRing *r) {
        while (r->count > 0)
                ring_pop(r);
        free(r->slots);
        r->slots = NULL;
        r->n_slots = r->start = 0;
        r->bytes = 0;
}

/* ---- records ---- */

static uint32_t fnv1a(uint32_t h, const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n; i++) {
                h ^= p[i];
                h *= 16777619U;
        }
        return h;
}

static uint32_t record_check(uint8_t type, uint64_t id, const uint8_t *p, size_t n) {
        uint8_t b[9];
        uint32_t h;

        b[0] = type;
        space_put_le32(b + 1, (uint32_t) id);
        space_put_le32(b + 5, (uint32_t) (id >> 32));
        h = fnv1a(2166136261U, b, sizeof b);
        return fnv1a(h, p, n);
}

static uint64_t get_le64(const uint8_t *p) {
        return (uint64_t) space_get_le32(p) | (uint64_t) space_get_le32(p + 4) << 32;
}

static void put_le64(uint8_t *p, uint64_t v) {
        space_put_le32(p, (uint32_t) v);
        space_put_le32(p + 4, (uint32_t) (v >> 32));
}

static int read_full(int fd, void *buf, size_t n) {
        uint8_t *b = buf;
        size_t got = 0;

        while (got < n) {
                ssize_t k = read(fd, b + got, n - got);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                got += (size_t) k;
        }
        return (int) (got == n);
}

/* Reads and checks a file header: 1 with first id, 0 if it is not a log file (or too short). */
static int read_file_header(int fd, uint64_t *ret_first) {
        uint8_t h[PLOG_FILE_HEADER_SIZE];
        int r = read_full(fd, h, sizeof h);

        if (r <= 0)
                return r;
        if (memcmp(h, magic, sizeof magic) != 0 || get_le64(h + 8) == 0)
                return 0;
        *ret_first = get_le64(h + 8);
        return 1;
}

/* Reads the record at the fd's position, expecting id. Returns 1 (payload in buf), 0 on a torn or foreign
 * record or EOF (position then undefined), -errno on I/O errors. With buf NULL the payload is skipped
 * unchecked (for seeking), but the record must lie within size. */
static int read_record(int fd, uint64_t want_id, uint8_t *buf, uint64_t size, uint8_t *ret_type, size_t *ret_len) {
        uint8_t h[PLOG_RECORD_HEADER_SIZE];
        uint32_t len;
        uint64_t id;
        int r;

        r = read_full(fd, h, sizeof h);
        if (r <= 0)
                return r;
        len = space_get_le32(h);
        id = get_le64(h + 8);
        if (len > EVENT_PAYLOAD_MAX || h[4] == 0 || h[4] >= _EVENT_TYPE_MAX || h[5] || h[6] || h[7] || id != want_id)
                return 0;
        if (buf) {
                r = read_full(fd, buf, len);
                if (r <= 0)
                        return r;
                if (record_check(h[4], id, buf, len) != space_get_le32(h + 16))
                        return 0;
        } else {
                off_t pos = lseek(fd, 0, SEEK_CUR);
                if (pos < 0)
                        return -errno;
                if ((uint64_t) pos + len > size)
                        return 0;
                if (lseek(fd, len, SEEK_CUR) < 0)
                        return -errno;
        }
        *ret_type = h[4];
        *ret_len = len;
        return 1;
}

/* Scans a file fully (checking every record): first id, last good id and where the good part ends. */
static int scan_file(const char *path, uint64_t *ret_first, uint64_t *ret_last, uint64_t *ret_end) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        _cleanup_free_ uint8_t *buf = NULL;
        uint64_t first, id, end;
        uint8_t type;
        size_t len;
        int r;

        if (fd < 0)
                return -errno;
        r = read_file_header(fd, &first);
        if (r <= 0)
                return r < 0 ? r : -EBADMSG;
        buf = malloc(EVENT_PAYLOAD_MAX);
        if (!buf)
                return -ENOMEM;
        end = PLOG_FILE_HEADER_SIZE;
        for (id = first;; id++) {
                r = read_record(fd, id, buf, 0, &type, &len);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                end += PLOG_RECORD_HEADER_SIZE + len;
        }
        *ret_first = first;
        *ret_last = id - 1;
        *ret_end = end;
        return 0;
}

static char *older_path(const char *path) {
        char *p = NULL;
        return asprintf(&p, "%s.1", path) < 0 ? NULL : p;
}

static int write_full(int fd, const struct iovec *iov, int n) {
        size_t want = 0;
        ssize_t k;

        for (int i = 0; i < n; i++)
                want += iov[i].iov_len;
        do
                k = writev(fd, iov, n);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return -errno;
        return (size_t) k == want ? 0 : -ENOSPC;
}

/* Opens a new current file whose first record will be first_id. */
static int start_file(ProcessLog *l, uint64_t first_id) {
        uint8_t h[PLOG_FILE_HEADER_SIZE];
        struct iovec iov = { h, sizeof h };
        int fd, r;

        memcpy(h, magic, sizeof magic);
        put_le64(h + 8, first_id);
        fd = open(l->path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        r = write_full(fd, &iov, 1);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        safe_close(l->fd);
        l->fd = fd;
        l->size = sizeof h;
        return 0;
}

static ProcessLog *log_new(const char *path, uint64_t cap) {
        ProcessLog *l = calloc(1, sizeof *l);

        if (!l)
                return NULL;
        l->fd = -1;
        l->cap = cap < 2 * (PLOG_FILE_HEADER_SIZE + PLOG_RECORD_HEADER_SIZE + EVENT_PAYLOAD_MAX)
                         ? 2 * (PLOG_FILE_HEADER_SIZE + PLOG_RECORD_HEADER_SIZE + EVENT_PAYLOAD_MAX)
                         : cap;
        l->path = strdup(path);
        if (!l->path) {
                free(l);
                return NULL;
        }
        return l;
}

void process_log_remove(const char *path) {
        _cleanup_free_ char *old = older_path(path);

        (void) unlink(path);
        if (old)
                (void) unlink(old);
}

int process_log_create(const char *path, uint64_t cap, ProcessLog **ret) {
        ProcessLog *l = log_new(path, cap);
        int r;

        if (!l)
                return -ENOMEM;
        process_log_remove(path);
        r = start_file(l, 1);
        if (r < 0) {
                process_log_free(l);
                return r;
        }
        *ret = l;
        return 0;
}

int process_log_open(const char *path, uint64_t cap, ProcessLog **ret) {
        _cleanup_free_ char *old = older_path(path);
        ProcessLog *l = log_new(path, cap);
        uint64_t first = 0, last = 0, end = 0;
        int r;

        if (!l || !old) {
                process_log_free(l);
                return -ENOMEM;
        }
        r = scan_file(path, &first, &last, &end);
        if (r >= 0) {
                l->fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
                if (l->fd < 0 || ftruncate(l->fd, (off_t) end) < 0) {
                        r = -errno;
                        process_log_free(l);
                        return r;
                }
                l->size = end;
                l->last_id = last;
        } else {
                /* No usable current file: continue after what the older one holds. */
                if (scan_file(old, &first, &last, &end) < 0)
                        last = 0;
                r = start_file(l, last + 1);
                if (r < 0) {
                        process_log_free(l);
                        return r;
                }
                l->last_id = last;
        }
        *ret = l;
        return 0;
}

int process_log_append(ProcessLog *l, uint64_t id, uint8_t type, const void *p, size_t n) {
        uint8_t h[PLOG_RECORD_HEADER_SIZE] = {};
        struct iovec iov[2] = { { h, sizeof h }, { (void *) p, n } };
        uint64_t rec = sizeof h + n;
        int r;

        if (n > EVENT_PAYLOAD_MAX || type == 0 || type >= _EVENT_TYPE_MAX || id != l->last_id + 1)
                return -EINVAL;
        if (l->fd < 0)
                return -EBADF;
        if (l->size > PLOG_FILE_HEADER_SIZE && l->size + rec > l->cap / 2) {
                _cleanup_free_ char *old = older_path(l->path);

                if (!old)
                        return -ENOMEM;
                if (rename(l->path, old) < 0)
                        return -errno;
                r = start_file(l, id);
                if (r < 0)
                        return r;
        }
        space_put_le32(h, (uint32_t) n);
        h[4] = type;
        put_le64(h + 8, id);
        space_put_le32(h + 16, record_check(type, id, p, n));
        r = write_full(l->fd, iov, n > 0 ? 2 : 1);
        if (r < 0) {
                /* never leave half a record: a later append would follow garbage */
                (void) ftruncate(l->fd, (off_t) l->size);
                return r;
        }
        l->size += rec;
        l->last_id = id;
        return 0;
}

ProcessLog *process_log_free(ProcessLog *l) {
        if (!l)
                return NULL;
        safe_close(l->fd);
        free(l->path);
        free(l);
        return NULL;
}

int process_log_range(const char *path, uint64_t *ret_first, uint64_t *ret_last) {
        _cleanup_free_ char *old = older_path(path);
        uint64_t f1 = 0, l1 = 0, f2 = 0, l2 = 0, end;
        bool have_old, have_cur;

        if (!old)
                return -ENOMEM;
        have_old = scan_file(old, &f1, &l1, &end) >= 0 && l1 >= f1;
        have_cur = scan_file(path, &f2, &l2, &end) >= 0 && l2 >= f2;
        /* The older file counts only if it leads into the current one without a gap. */
        if (have_old && have_cur && l1 + 1 != f2)
                have_old = false;
        *ret_first = have_old ? f1 : have_cur ? f2 : 0;
        *ret_last = have_cur ? l2 : have_old ? l1 : 0;
        return 0;
}

/* ---- reader ---- */

void log_reader_done(LogReader *r) {
        r->fd = safe_close(r->fd);
        free(r->buf);
        r->buf = NULL;
}

/* Opens file and skips to id; 1 when positioned, 0 when id is not in this file, < 0 on errors.
 * *ret_first gets the file's first id. */
static int seek_in(const char *file, uint64_t id, int *ret_fd, uint64_t *ret_first) {
        _cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC);
        struct stat st;
        uint64_t first;
        uint8_t type;
        size_t len;
        int r;

        *ret_first = 0;
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        r = read_file_header(fd, &first);
        if (r <= 0)
                return r;
        *ret_first = first;
        if (id < first)
                return 0;
        for (uint64_t i = first; i < id; i++) {
                r = read_record(fd, i, NULL, (uint64_t) st.st_size, &type, &len);
                if (r <= 0)
                        return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 1;
}

int log_reader_seek(LogReader *r, const char *path, uint64_t id, uint64_t *ret_first) {
        _cleanup_free_ char *old = older_path(path);
        uint64_t f_old = 0, f_cur = 0;
        int fd = -1, k;

        if (!old)
                return -ENOMEM;
        r->fd = safe_close(r->fd);
        /* Look in the current file first: if id is before its first record, try the older one. */
        k = seek_in(path, id, &fd, &f_cur);
        if (k < 0)
                return k;
        if (k == 0 && (f_cur == 0 || id < f_cur)) {
                k = seek_in(old, id, &fd, &f_old);
                if (k < 0)
                        return k;
        }
        if (k == 0) {
                if (ret_first)
                        *ret_first = f_old && (!f_cur || f_old < f_cur) ? f_old : f_cur;
                return -ENOENT;
        }
        r->fd = fd;
        r->next_id = id;
        return 0;
}

int log_reader_next(LogReader *r, const char *path, uint64_t *ret_id, uint8_t *ret_type, const uint8_t **ret_data,
                    size_t *ret_len) {
        uint8_t type;
        size_t len;
        int k;

        if (!r->buf) {
                r->buf = malloc(EVENT_PAYLOAD_MAX);
                if (!r->buf)
                        return -ENOMEM;
        }
        for (int attempt = 0; attempt < 2; attempt++) {
                if (r->fd >= 0) {
                        off_t pos = lseek(r->fd, 0, SEEK_CUR);

                        k = read_record(r->fd, r->next_id, r->buf, 0, &type, &len);
                        if (k < 0)
                                return k;
                        if (k > 0) {
                                *ret_id = r->next_id++;
                                *ret_type = type;
                                *ret_data = r->buf;
                                *ret_len = len;
                                return 1;
                        }
                        /* End of this file (or a record still being written): rewind, then look again from the
                         * names, the next record may be in the newer file. */
                        if (pos >= 0)
                                (void) lseek(r->fd, pos, SEEK_SET);
                }
                if (attempt == 1)
                        break;
                k = log_reader_seek(r, path, r->next_id, NULL);
                if (k == -ENOENT)
                        return 0;
                if (k < 0)
                        return k;
        }
        return 0;
}
