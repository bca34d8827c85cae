/* SPDX-License-Identifier: Apache-2.0 */
/* The QMP verbs the other subsystems send, by name: they say what they want done to the VM, and the words QEMU
 * takes for it stay here. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "macro.h"
#include "vm/vmm.h"

int vm_cont(Qmp *q, int timeout_ms, Error *reterr) {
        return qmp_execute(q, "cont", NULL, -1, timeout_ms, NULL, reterr);
}

int vm_stop(Qmp *q, int timeout_ms, Error *reterr) {
        return qmp_execute(q, "stop", NULL, -1, timeout_ms, NULL, reterr);
}

int vm_cont_at(const char *run_dir, Error *reterr) {
        return vm_qmp_simple(run_dir, "cont", reterr);
}

int vm_stop_at(const char *run_dir, Error *reterr) {
        return vm_qmp_simple(run_dir, "stop", reterr);
}

int vm_disk_resize(Qmp *q, uint64_t bytes, int timeout_ms, Error *reterr) {
        _cleanup_free_ char *args = NULL;

        if (asprintf(&args, "{\"device\":\"d0\",\"size\":%llu}", (unsigned long long) bytes) < 0)
                return -ENOMEM;
        return qmp_execute(q, "block_resize", args, -1, timeout_ms, NULL, reterr);
}

int vm_disk_snapshot(Qmp *q, const char *overlay, int timeout_ms, Error *reterr) {
        _cleanup_free_ char *args = NULL;
        cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddStringToObject(o, "device", "d0") || !cJSON_AddStringToObject(o, "snapshot-file", overlay) ||
            !cJSON_AddStringToObject(o, "format", "qcow2") || !cJSON_AddStringToObject(o, "mode", "existing") ||
            !(args = cJSON_PrintUnformatted(o))) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        cJSON_Delete(o);
        return qmp_execute(q, "blockdev-snapshot-sync", args, -1, timeout_ms, NULL, reterr);
}
