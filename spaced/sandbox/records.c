/* SPDX-License-Identifier: Apache-2.0 */
/* A Sandbox to and from its row: the store (core/store.h) keeps plain records and knows no Sandbox. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/store.h"
#include "json-util.h"
#include "macro.h"
#include "sandbox/sandbox.h"
#include "string-util.h"

int store_put_sandbox(Store *s, const Sandbox *sb) {
        _cleanup_free_ char *env = strv_to_json_text(sb->env), *egress_profiles = strv_to_json_text(sb->egress_profiles),
                            *egress_allow = strv_to_json_text(sb->egress_allow),
                            *egress_deny = strv_to_json_text(sb->egress_deny),
                            *egress_bindings = strv_to_json_text(sb->egress_bindings),
                            *mounts = strv_to_json_text(sb->mounts);

        if (!env || !egress_profiles || !egress_allow || !egress_deny || !egress_bindings || !mounts)
                return -ENOMEM;
        return store_put_sandbox_record(s, &(SandboxRecord) {
                .id = sb->id,
                .name = sb->name,
                .template_name = sb->template_name,
                .template_digest = sb->template_digest,
                .state = sandbox_state_to_string(sb->state),
                .vcpu = sb->vcpu,
                .memory_mib = sb->memory_mib,
                .disk_mib = sb->disk_mib,
                .env = env,
                .created_at = sb->created_at,
                .qemu_pid = sb->qemu_pid,
                .run_dir = sb->run_dir,
                .data_dir = sb->data_dir,
                .error = sb->error,
                .idle_timeout = sb->idle_timeout,
                .expires_at = sb->expires_at,
                .on_expiry = sb->on_expiry == EXPIRY_SUSPEND ? "suspend"
                           : sb->on_expiry == EXPIRY_STOP ? "stop" : "remove",
                .last_active = sb->last_active,
                .metadata = sb->metadata,
                .access_token = sb->access_token,
                .auto_resume = sb->auto_resume,
                .ttl = sb->ttl,
                .egress_profiles = egress_profiles,
                .egress_allow = egress_allow,
                .egress_deny = egress_deny,
                .egress_bindings = egress_bindings,
                .mounts = mounts,
                .traffic_token = sb->traffic_token,
                .confined = sb->confined == SANDBOX_CONFINED_UNKNOWN ? -1 : sb->confined == SANDBOX_CONFINED_YES,
                .unconfined_reason = sb->unconfined_reason,
                .host = sb->host,
        });
}

static char *strdup_or_null(const char *s) {
        return s ? strdup(s) : NULL;
}

static int sandbox_from_record(void *userdata, const SandboxRecord *r) {
        Manager *m = userdata;
        Sandbox *sb = calloc(1, sizeof *sb);

        if (!sb)
                return -ENOMEM;
        sb->manager = m;
        if (!r->id || strlen(r->id) != SANDBOX_ID_LEN || !r->state ||
            sandbox_state_from_string(r->state, &sb->state) < 0) {
                free(sb);
                return 0; /* a row we cannot make sense of; leave it for a human */
        }
        memcpy(sb->id, r->id, SANDBOX_ID_LEN + 1);
        sb->name = strdup_or_null(r->name);
        sb->template_name = strdup_or_null(r->template_name);
        sb->template_digest = strdup_or_null(r->template_digest);
        sb->vcpu = r->vcpu;
        sb->memory_mib = r->memory_mib;
        sb->disk_mib = r->disk_mib;
        sb->env = strv_from_json_text(r->env);
        sb->created_at = r->created_at;
        sb->qemu_pid = (pid_t) r->qemu_pid;
        sb->run_dir = strdup_or_null(r->run_dir);
        sb->data_dir = strdup_or_null(r->data_dir);
        sb->error = strdup_or_null(r->error);
        sb->idle_timeout = r->idle_timeout;
        sb->expires_at = r->expires_at;
        sb->on_expiry = streq_ptr(r->on_expiry, "suspend") ? EXPIRY_SUSPEND
                      : streq_ptr(r->on_expiry, "stop") ? EXPIRY_STOP : EXPIRY_REMOVE;
        sb->last_active = r->last_active;
        if (!streq_ptr(r->metadata, "{}"))
                sb->metadata = strdup_or_null(r->metadata);
        sb->access_token = strdup_or_null(r->access_token);
        sb->auto_resume = r->auto_resume;
        sb->ttl = r->ttl;
        sb->egress_profiles = strv_from_json_text(r->egress_profiles);
        sb->egress_allow = strv_from_json_text(r->egress_allow);
        sb->egress_deny = strv_from_json_text(r->egress_deny);
        sb->egress_bindings = strv_from_json_text(r->egress_bindings ?: "[]");
        sb->mounts = strv_from_json_text(r->mounts ?: "[]");
        sb->traffic_token = strdup_or_null(r->traffic_token);
        if (r->confined >= 0)
                sb->confined = r->confined ? SANDBOX_CONFINED_YES : SANDBOX_CONFINED_NO;
        sb->unconfined_reason = strdup_or_null(r->unconfined_reason);
        sb->host = strdup_or_null(r->host);
        if (!sb->template_name || !sb->env || !sb->egress_profiles || !sb->egress_allow || !sb->egress_deny ||
            !sb->egress_bindings || !sb->mounts) {
                sandbox_free(sb);
                return -ENOMEM;
        }
        /* keep creation order */
        Sandbox **tail = &m->sandboxes;
        while (*tail)
                tail = &(*tail)->next;
        *tail = sb;
        return 0;
}

int store_load_sandboxes(Store *s, Manager *m) {
        return store_load_sandbox_records(s, sandbox_from_record, m);
}
