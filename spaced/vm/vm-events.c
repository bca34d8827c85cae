/* SPDX-License-Identifier: Apache-2.0 */

/*
 * What QEMU's event monitor says, read as the run-state watcher (vm-events-watch.c) needs it: one QMP line into a
 * VmQmpMsg, a status into a VmRunFailure, and a failure into the sandbox's error. Pure functions: fuzzed
 * (tests/fuzz/fuzz-vm-events.c) and unit-tested with QEMU 7.2's own lines (tests/unit/test-vm-events.c).
 * QEMU is as untrusted as the guest (the guest may have taken it over): every field is checked for its type.
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* asprintf */
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "macro.h"
#include "vm/vmm.h"

/* How much of the guest's panic line goes into the sandbox's error. */
#define PANIC_LINE_MAX 200U

VmRunFailure vm_run_status_failure(const char *status) {
        if (!status)
                return VM_RUN_OK;
        if (streq(status, "internal-error"))
                return VM_RUN_INTERNAL_ERROR;
        if (streq(status, "guest-panicked"))
                return VM_RUN_GUEST_PANICKED;
        if (streq(status, "shutdown"))
                return VM_RUN_GUEST_SHUTDOWN;
        /* paused, postmigrate, finish-migrate, ...: the daemon's own stops (pause, checkpoint, save) */
        return VM_RUN_OK;
}

void vm_qmp_msg_done(VmQmpMsg *m) {
        if (!m)
                return;
        m->text = mfree(m->text);
}

static int parse_event(const cJSON *j, const char *name, VmQmpMsg *m) {
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");

        if (data && !cJSON_IsObject(data))
                return -EBADMSG;
        if (streq(name, "STOP"))
                m->kind = VM_QMP_STOP;
        else if (streq(name, "GUEST_PANICKED"))
                m->kind = VM_QMP_GUEST_PANICKED;
        else if (streq(name, "SHUTDOWN")) {
                const cJSON *guest = cJSON_GetObjectItemCaseSensitive(data, "guest");
                const cJSON *reason = cJSON_GetObjectItemCaseSensitive(data, "reason");

                if ((guest && !cJSON_IsBool(guest)) || (reason && !cJSON_IsString(reason)))
                        return -EBADMSG;
                m->kind = VM_QMP_SHUTDOWN;
                m->guest = cJSON_IsTrue(guest);
                if (reason && !(m->text = strdup(reason->valuestring)))
                        return -ENOMEM;
        }
        return 0;
}

static int parse_return(const cJSON *ret, VmQmpMsg *m) {
        m->kind = VM_QMP_RETURN;
        if (cJSON_IsString(ret)) {
                m->text = strdup(ret->valuestring);
                return m->text ? 0 : -ENOMEM;
        }
        if (cJSON_IsObject(ret)) {
                const cJSON *status = cJSON_GetObjectItemCaseSensitive(ret, "status");

                if (status && !cJSON_IsString(status))
                        return -EBADMSG;
                if (status && !(m->text = strdup(status->valuestring)))
                        return -ENOMEM;
        }
        return 0;
}

int vm_qmp_msg_parse(const char *line, VmQmpMsg *ret) {
        VmQmpMsg m = { .kind = VM_QMP_OTHER };
        cJSON *j;
        int r = 0;

        if (!line || !ret)
                return -EINVAL;
        j = cJSON_Parse(line);
        if (!j || !cJSON_IsObject(j)) {
                cJSON_Delete(j);
                return -EBADMSG;
        }

        const cJSON *event = cJSON_GetObjectItemCaseSensitive(j, "event");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
        const cJSON *retv = cJSON_GetObjectItemCaseSensitive(j, "return");
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");

        /* Ids are ours, short strings; any other id is not an answer to us and stays "". */
        if (cJSON_IsString(id) && strlen(id->valuestring) < sizeof(m.id))
                strcpy(m.id, id->valuestring);

        if (event) {
                if (!cJSON_IsString(event))
                        r = -EBADMSG;
                else
                        r = parse_event(j, event->valuestring, &m);
        } else if (retv)
                r = parse_return(retv, &m);
        else if (err) {
                if (!cJSON_IsObject(err))
                        r = -EBADMSG;
                m.kind = VM_QMP_ERROR;
        } else if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(j, "QMP")))
                m.kind = VM_QMP_GREETING;
        /* anything else is an object we have no use for: OTHER */

        cJSON_Delete(j);
        if (r < 0) {
                vm_qmp_msg_done(&m);
                return r;
        }
        *ret = m;
        return 0;
}

/* The last line of console that says "Kernel panic", up to PANIC_LINE_MAX bytes, printable ASCII only (it is
 * the guest's text, bound for logs and JSON); NULL when there is none. */
static char *panic_line(const char *console) {
        const char *p = NULL;
        char *line;
        size_t n;

        for (const char *q = console; q && (q = strstr(q, "Kernel panic")); q++)
                p = q;
        if (!p)
                return NULL;
        n = strcspn(p, "\r\n"); /* hvc0 ends its lines with CRLF */
        n = MIN(n, PANIC_LINE_MAX);
        line = strndup(p, n);
        if (!line)
                return NULL;
        for (char *c = line; *c; c++)
                if ((unsigned char) *c < 0x20 || (unsigned char) *c > 0x7e)
                        *c = '?';
        while (n > 0 && line[n - 1] == ' ')
                line[--n] = 0;
        return line;
}

int vm_run_failure_reason(VmRunFailure f, const char *shutdown_reason, const char *console, char **ret) {
        _cleanup_free_ char *line = NULL;
        char *s = NULL;
        int r;

        if (!ret)
                return -EINVAL;
        line = panic_line(console);
        switch (f) {
        case VM_RUN_INTERNAL_ERROR:
                r = asprintf(&s, "QEMU stopped the VM with an internal error (KVM could not emulate an "
                                 "instruction); see qemu.log");
                break;
        case VM_RUN_GUEST_PANICKED:
                r = asprintf(&s, "the guest's kernel panicked%s%s", line ? ": " : "", line ?: "");
                break;
        case VM_RUN_GUEST_SHUTDOWN:
                if (line)
                        r = asprintf(&s, "the guest's kernel panicked: %s", line);
                else if (streq_ptr(shutdown_reason, "guest-reset"))
                        r = asprintf(&s, "the guest rebooted; a sandbox's VM does not boot again");
                else if (streq_ptr(shutdown_reason, "guest-shutdown"))
                        r = asprintf(&s, "the guest powered off");
                else
                        /* QEMU's reasons are a short enum, but what came is QEMU's: quote none of it */
                        r = asprintf(&s, "the guest shut down");
                break;
        default:
                return -EINVAL;
        }
        if (r < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}
