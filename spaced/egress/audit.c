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
#include "egress/egress-internal.h"
#include "macro.h"

/* Every gateway decision is a JSON line in the sandbox's DATA_DIR/egress.log, numbered (seq) so that a reader
 * can follow it across rotations. The file is rotated to egress.log.1 at EGRESS_AUDIT_FILE_MAX, so a sandbox
 * that hammers the gateway costs at most twice that on disk. The numbers restart from the file's last line
 * after a daemon restart. */

typedef struct AuditSeq {
        char *sandbox_id;
        uint64_t next;
        struct AuditSeq *next_entry;
} AuditSeq;

static AuditSeq *seqs;

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

static uint64_t next_seq(const char *sandbox_id, const char *log_path, const char *old_path) {
        AuditSeq *a;

        for (a = seqs; a; a = a->next_entry)
                if (streq(a->sandbox_id, sandbox_id))
                        return ++a->next;
        a = calloc(1, sizeof *a);
        if (!a || !(a->sandbox_id = strdup(sandbox_id))) {
                free(a);
                return 0;
        }
        a->next = last_seq(log_path) ?: last_seq(old_path);
        a->next_entry = seqs;
        seqs = a;
        return ++a->next;
}

void egress_audit(Manager *m, const char *sandbox_id, const char *data_dir, const EgressAuditEntry *e) {
        _cleanup_free_ char *path = NULL, *old = NULL, *text = NULL;
        _cleanup_close_ int fd = -1;
        cJSON *o;
        struct stat st;
        struct timespec ts;
        char when[64];
        struct tm tm;

        if (!data_dir || asprintf(&path, "%s/egress.log", data_dir) < 0 || asprintf(&old, "%s/egress.log.1", data_dir) < 0)
                return;
        (void) clock_gettime(CLOCK_REALTIME, &ts);
        (void) gmtime_r(&ts.tv_sec, &tm);
        (void) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        (void) snprintf(when + strlen(when), sizeof when - strlen(when), ".%03ldZ", ts.tv_nsec / 1000000);

        o = cJSON_CreateObject();
        /* seq first: last_seq() finds it by its prefix */
        cJSON_AddNumberToObject(o, "seq", (double) next_seq(sandbox_id, path, old));
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
        if (!text)
                return;

        if (stat(path, &st) == 0 && st.st_size >= (off_t) EGRESS_AUDIT_FILE_MAX)
                (void) rename(path, old);
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
                log_warning_errno(-errno, "sandbox %s: cannot write %s: %m", sandbox_id, path);
                return;
        }
        if (write(fd, text, strlen(text)) < 0 || write(fd, "\n", 1) < 0)
                log_warning_errno(-errno, "sandbox %s: cannot write %s: %m", sandbox_id, path);
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

int egress_audit_read(const char *data_dir, uint64_t after, size_t limit, cJSON **ret) {
        _cleanup_free_ char *path = NULL, *old = NULL;
        cJSON *list;

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
        for (AuditSeq **i = &seqs; *i; i = &(*i)->next_entry)
                if (streq((*i)->sandbox_id, sandbox_id)) {
                        AuditSeq *a = *i;

                        *i = a->next_entry;
                        free(a->sandbox_id);
                        free(a);
                        return;
                }
}
