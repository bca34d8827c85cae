/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/log.h"
#include "io-util.h"
#include "egress/egress-internal.h"
#include "macro.h"
#include "proto.h"

/* Every gateway decision is a JSON line in the sandbox's DATA_DIR/egress.log, numbered (seq) so that a reader
 * can follow it across rotations. The file is rotated to egress.log.1 at EGRESS_AUDIT_FILE_MAX, so a sandbox
 * that hammers the gateway costs at most twice that on disk. The numbers restart from the file's last line
 * after a daemon restart.
 *
 * Lines are buffered per sandbox and written together: AUDIT_FLUSH_USEC after the first one waiting, when a
 * sandbox's buffer reaches AUDIT_BUFFER_MAX, before its log is read, when it goes and when the daemon exits
 * (egress_audit_flush_all), so that a flood of decisions is a few write(2) a second, memory stays bounded, and
 * `spacectl egress log -f` is at most that late. A daemon that crashes loses what it had not written. */

#define AUDIT_FLUSH_USEC (200ULL * 1000ULL)
#define AUDIT_BUFFER_MAX (64U * 1024U)

typedef struct AuditLog {
        char *sandbox_id;
        char *path, *old_path;
        uint64_t next;                  /* the last seq given */
        SpaceBuf pending;               /* lines not written yet */
        bool warned;                    /* a write failed: said once, until one works again */
        struct AuditLog *next_entry;
} AuditLog;

static struct {
        AuditLog *logs;
        sd_event *event;
        sd_event_source *timer;         /* armed while some log has lines pending */
} audit;

/* The seq of the last line of path, 0 when none. */
static uint64_t last_seq(const char *path) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        char buf[4096];
        uint64_t seq = 0;
        long size;
        size_t n;

        if (!f || fseek(f, 0, SEEK_END) < 0 || (size = ftell(f)) <= 0)
                return 0;
        (void) fseek(f, size > (long) sizeof buf - 1 ? size - (long) sizeof buf + 1 : 0, SEEK_SET);
        n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        for (char *l = buf; (l = strstr(l, "{\"seq\":")); l++)
                seq = strtoull(l + 7, NULL, 10);
        return seq;
}

static void audit_log_free(AuditLog *a) {
        space_buf_done(&a->pending);
        free(a->sandbox_id);
        free(a->path);
        free(a->old_path);
        free(a);
}

static AuditLog *audit_log_get(const char *sandbox_id, const char *data_dir) {
        AuditLog *a;

        for (a = audit.logs; a; a = a->next_entry)
                if (streq(a->sandbox_id, sandbox_id))
                        return a;
        a = calloc(1, sizeof *a);
        if (!a || !(a->sandbox_id = strdup(sandbox_id)) || asprintf(&a->path, "%s/egress.log", data_dir) < 0 ||
            asprintf(&a->old_path, "%s/egress.log.1", data_dir) < 0) {
                if (a)
                        audit_log_free(a);
                return NULL;
        }
        a->next = last_seq(a->path) ?: last_seq(a->old_path);
        a->next_entry = audit.logs;
        audit.logs = a;
        return a;
}

/* Writes what a has pending, rotating first when the file is full. */
static void audit_log_flush(AuditLog *a) {
        _cleanup_close_ int fd = -1;
        struct stat st;
        int r;

        if (a->pending.len == 0)
                return;
        if (stat(a->path, &st) == 0 && st.st_size >= (off_t) EGRESS_AUDIT_FILE_MAX)
                (void) rename(a->path, a->old_path);
        fd = open(a->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        r = fd < 0 ? -errno : loop_write(fd, a->pending.data, a->pending.len);
        space_buf_consume(&a->pending, a->pending.len);
        /* no directory: the sandbox is being removed, and its log with it */
        if (r < 0 && r != -ENOENT && !a->warned)
                log_warning_errno(r, "sandbox %s: cannot write %s, dropping its lines until it can: %m",
                                  a->sandbox_id, a->path);
        a->warned = r < 0;
}

void egress_audit_flush_all(void) {
        for (AuditLog *a = audit.logs; a; a = a->next_entry)
                audit_log_flush(a);
        audit.timer = sd_event_source_disable_unref(audit.timer);
}

static int on_flush(sd_event_source *s, uint64_t usec, void *userdata) {
        egress_audit_flush_all();
        return 0;
}

static void audit_log_append(AuditLog *a, const char *line) {
        size_t n = strlen(line);

        if (a->pending.len + n + 1 > AUDIT_BUFFER_MAX)
                audit_log_flush(a);
        if (space_buf_append(&a->pending, line, n) < 0 || space_buf_append(&a->pending, "\n", 1) < 0) {
                audit_log_flush(a); /* out of memory: write what there is, this line is lost */
                return;
        }
        /* no loop to flush from, or no timer: no waiting either */
        if (!audit.event || (!audit.timer && sd_event_add_time_relative(audit.event, &audit.timer, CLOCK_MONOTONIC,
                                                                        AUDIT_FLUSH_USEC, 0, on_flush, NULL) < 0))
                audit_log_flush(a);
}

static char *entry_json(uint64_t seq, const char *sandbox_id, const EgressAuditEntry *e) {
        struct timespec ts;
        char when[64], *text;
        struct tm tm;
        cJSON *o;

        (void) clock_gettime(CLOCK_REALTIME, &ts);
        (void) gmtime_r(&ts.tv_sec, &tm);
        (void) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        (void) snprintf(when + strlen(when), sizeof when - strlen(when), ".%03ldZ", ts.tv_nsec / 1000000);

        o = cJSON_CreateObject();
        /* seq first: last_seq() finds it by its prefix */
        cJSON_AddNumberToObject(o, "seq", (double) seq);
        cJSON_AddStringToObject(o, "time", when);
        cJSON_AddStringToObject(o, "sandbox", sandbox_id);
        cJSON_AddStringToObject(o, "event", e->event);
        cJSON_AddStringToObject(o, "via", e->via ?: "");
        if (e->host)
                cJSON_AddStringToObject(o, "host", e->host);
        else
                cJSON_AddNullToObject(o, "host");
        if (e->addr)
                cJSON_AddStringToObject(o, "address", e->addr);
        else
                cJSON_AddNullToObject(o, "address");
        cJSON_AddNumberToObject(o, "port", e->port);
        cJSON_AddStringToObject(o, "reason", e->reason ?: "");
        if (e->rule)
                cJSON_AddStringToObject(o, "rule", e->rule);
        if (e->message)
                cJSON_AddStringToObject(o, "message", e->message);
        if (streq(e->event, "end")) {
                cJSON_AddNumberToObject(o, "bytes_up", (double) e->bytes_up);
                cJSON_AddNumberToObject(o, "bytes_down", (double) e->bytes_down);
                cJSON_AddNumberToObject(o, "duration_ms", (double) e->duration_ms);
        }
        text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        return text;
}

void egress_audit(Manager *m, const char *sandbox_id, const char *data_dir, const EgressAuditEntry *e) {
        _cleanup_free_ char *text = NULL;
        AuditLog *a;

        if (!data_dir)
                return;
        if (m && m->event)
                audit.event = m->event;
        a = audit_log_get(sandbox_id, data_dir);
        if (!a)
                return;
        text = entry_json(++a->next, sandbox_id, e);
        if (text)
                audit_log_append(a, text);
}

/* Appends the entries of one file with seq > after to list, at most *left of them. */
static void read_file(const char *path, uint64_t after, size_t *left, cJSON *list) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        char line[8192];

        while (f && *left > 0 && fgets(line, sizeof line, f)) {
                cJSON *o = cJSON_Parse(line), *seq;

                seq = o ? cJSON_GetObjectItem(o, "seq") : NULL;
                if (!cJSON_IsNumber(seq) || (uint64_t) seq->valuedouble <= after) {
                        cJSON_Delete(o);
                        continue;
                }
                cJSON_AddItemToArray(list, o);
                (*left)--;
        }
}

int egress_audit_read(const char *sandbox_id, const char *data_dir, uint64_t after, size_t limit, cJSON **ret) {
        _cleanup_free_ char *path = NULL, *old = NULL;
        cJSON *list;

        /* what is still buffered first: a reader sees every decision made before it asked */
        for (AuditLog *a = audit.logs; a; a = a->next_entry)
                if (streq(a->sandbox_id, sandbox_id))
                        audit_log_flush(a);

        if (asprintf(&path, "%s/egress.log", data_dir) < 0 || asprintf(&old, "%s/egress.log.1", data_dir) < 0)
                return -ENOMEM;
        list = cJSON_CreateArray();
        if (!list)
                return -ENOMEM;
        read_file(old, after, &limit, list);
        read_file(path, after, &limit, list);
        *ret = list;
        return 0;
}

void egress_audit_forget(const char *sandbox_id) {
        for (AuditLog **i = &audit.logs; *i; i = &(*i)->next_entry)
                if (streq((*i)->sandbox_id, sandbox_id)) {
                        AuditLog *a = *i;

                        *i = a->next_entry;
                        audit_log_flush(a);
                        audit_log_free(a);
                        return;
                }
}
