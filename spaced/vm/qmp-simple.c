/* SPDX-License-Identifier: Apache-2.0 */

/* QMP verbs on a short connection to a sandbox's monitor, for callers that hold no Qmp of their own. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "macro.h"
#include "vm/vmm.h"

int vm_qmp_simple(const char *run_dir, const char *cmd, Error *reterr) {
        _cleanup_free_ char *path = NULL;
        Qmp *q = NULL;
        int r;

        if (asprintf(&path, "%s/qmp.sock", run_dir) < 0)
                return -ENOMEM;
        r = qmp_open(path, 5000, &q, reterr);
        if (r >= 0)
                r = qmp_execute(q, cmd, NULL, -1, 5000, NULL, reterr);
        qmp_close(q);
        return r;
}

/* A daemon killed while a VM was stopped for a checkpoint leaves it stopped: let it run again. */
void vm_cont_if_stopped(const char *run_dir) {
        _cleanup_free_ char *path = NULL, *status = NULL;
        Qmp *q = NULL;

        if (asprintf(&path, "%s/qmp.sock", run_dir) < 0)
                return;
        if (qmp_open(path, 2000, &q, NULL) < 0)
                return;
        if (qmp_execute(q, "query-status", NULL, -1, 2000, &status, NULL) >= 0 && status) {
                cJSON *o = cJSON_Parse(status);
                cJSON *running = cJSON_GetObjectItemCaseSensitive(o, "running");

                if (cJSON_IsFalse(running))
                        (void) qmp_execute(q, "cont", NULL, -1, 2000, NULL, NULL);
                cJSON_Delete(o);
        }
        qmp_close(q);
}
