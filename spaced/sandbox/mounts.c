/* SPDX-License-Identifier: Apache-2.0 */
/* Volumes mounted in sandboxes (ARCHITECTURE.md, "Volumes"): which a create asks for, checked and kept on the
 * sandbox ("VOLUME-ID:PATH" each, also on its checkpoints, whose guest memory has them mounted), who mounts a
 * volume (for volume_remove()), and the guest's VOLUME requests, answered by volume/ for the volumes that
 * guest has mounted and no other. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel/channel.h"
#include "core/log.h"
#include "macro.h"
#include "proto.h"
#include "sandbox/sandbox.h"
#include "string-util.h"
#include "volume/volume.h"

/* The mount of volume id (n bytes, not terminated) in l, or NULL. */
static const char *mount_find(char *const *l, const char *id, size_t n) {
        for (char *const *i = l; i && *i; i++)
                if (channel_mount_id_len(*i) == n && strncmp(*i, id, n) == 0)
                        return *i;
        return NULL;
}

/* Whether a and b are the same directory or one is below the other: a mount there would hide the other. */
static bool paths_overlap(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;

        return strncmp(a, b, n) == 0 && (la == lb || (la < lb ? b[la] : a[lb]) == '/');
}

static int add_mount(Manager *m, char ***l, const char *spec, Error *reterr) {
        _cleanup_free_ char *ref = NULL, *path = NULL, *line = NULL;
        size_t n = channel_mount_id_len(spec);
        const char *twice;
        Volume *v;
        int r;

        if (n == 0)
                return error_set(reterr, ERROR_INVALID_ARGUMENT,
                                 "a volume mount is NAME:/PATH (got '%.300s')", spec) ?: -EINVAL;
        ref = strndup(spec, n);
        if (!ref)
                return -ENOMEM;
        r = volume_mount_check(m, ref, spec + n + 1, &v, &path, reterr);
        if (r < 0)
                return r;
        twice = mount_find(*l, v->rec.id, strlen(v->rec.id));
        if (twice)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "volume '%s' is mounted twice (at %s and %s)",
                                 v->rec.name, channel_mount_path(twice), path) ?: -EINVAL;
        for (char **i = *l; i && *i; i++)
                if (paths_overlap(channel_mount_path(*i), path))
                        return error_set(reterr, ERROR_INVALID_PATH,
                                         "volume '%s' cannot be mounted at %s: another volume is mounted at %s",
                                         v->rec.name, path, channel_mount_path(*i)) ?: -EINVAL;
        if (asprintf(&line, "%s:%s", v->rec.id, path) < 0 || strv_extend(l, line) < 0)
                return -ENOMEM;
        return 0;
}

int sandbox_mounts_choose(Manager *m, const SandboxSpec *spec, char ***ret, Error *reterr) {
        _cleanup_strv_free_ char **l = sandbox_strv_copy(spec->source ? spec->source->mounts : NULL);
        int r;

        if (!l)
                return -ENOMEM;
        for (char **i = spec->volume_mounts; i && *i; i++) {
                r = add_mount(m, &l, *i, reterr);
                if (r < 0)
                        return r;
        }
        if (strv_length(l) > SPACE_VOLUME_MOUNTS_MAX)
                return error_set(reterr, ERROR_INVALID_ARGUMENT, "at most %u volumes can be mounted in a sandbox",
                                 SPACE_VOLUME_MOUNTS_MAX) ?: -E2BIG;
        *ret = TAKE_PTR(l);
        return 0;
}

int sandbox_volume_users(Manager *m, const char *volume_id, char ***ret_ids) {
        _cleanup_strv_free_ char **ids = NULL;

        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (s->state != SANDBOX_DELETING && mount_find(s->mounts, volume_id, strlen(volume_id)) &&
                    strv_extend(&ids, s->id) < 0)
                        return -ENOMEM;
        *ret_ids = TAKE_PTR(ids);
        return 0;
}

static void answer_error(AgentConn *a, uint32_t stream, int err, const char *message) {
        _cleanup_(space_buf_done) SpaceBuf kv = {};

        if (space_kv_addf(&kv, "errno", "%d", err) >= 0 && space_kv_add(&kv, "message", message) >= 0)
                (void) agent_send(a, SPACE_F_ERROR, 0, stream, kv.data, kv.len);
}

void sandbox_volume_request(AgentConn *a, uint32_t stream, const uint8_t *payload, size_t n) {
        _cleanup_(space_buf_done) SpaceBuf answer = {};
        Sandbox *s = agent_sandbox(a);
        const uint8_t *kv, *data;
        size_t kv_len, data_len;
        const char *id = NULL;
        char msg[256] = "";
        Volume *v;
        int r;

        if (!s)
                return;
        if (space_volume_payload_split(payload, n, &kv, &kv_len, &data, &data_len) < 0 ||
            space_kv_get(kv, kv_len, "volume", &id) <= 0)
                return answer_error(a, stream, EINVAL, "a VOLUME request is le32 n, n bytes of records with volume=");
        /* the guest names the volume: only those mounted in it, the mount kept by its sandbox */
        if (!mount_find(s->mounts, id, strlen(id)))
                return answer_error(a, stream, EACCES, "no such volume is mounted in this sandbox");
        v = volume_find(s->manager, id);
        if (!v)
                return answer_error(a, stream, ENODEV, "the volume was removed");
        r = volume_guest_request(s->manager, v, kv, kv_len, data, data_len, &answer, msg, sizeof msg);
        if (r < 0)
                return answer_error(a, stream, -r, msg[0] ? msg : strerror(-r));
        /* no sandbox_touch(): what the guest does by itself is not a use of it, as its egress is not */
        (void) agent_send(a, SPACE_F_VOLUME, 0, stream, answer.data, answer.len);
}
