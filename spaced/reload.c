/* SPDX-License-Identifier: Apache-2.0 */
/* What a reload changes (spaced(8), space-egress(5) "Reload"): the egress profiles, base policy, defaults,
 * resolver and rates (each running sandbox keeps the profile names it was created with, and from its next
 * connection or DNS question on they mean their new definitions: tightening a profile takes effect at once,
 * which is the point of a reload; connections already open stay as they were decided), the defaults for new
 * sandboxes (idle_timeout), import limits, the proxy's timeouts, the E2B settings, the memory limit and the TCG
 * cache of VMs started from then on. What the running daemon is built on (its state directory, its listener,
 * the accelerator, confinement, the QEMU binary) takes a restart, and keeps its value until then. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "egress/egress.h"
#include "macro.h"
#include "reload.h"
#include "sandbox/sandbox.h"
#include "string-util.h"

int daemon_config_read(const char *path, Config *ret_config, EgressSettings **ret_egress, Error *reterr) {
        Config c = { .idle_timeout = IDLE_TIMEOUT_DEFAULT };
        EgressSettings *e = egress_settings_new();
        int r;

        if (!e)
                return -ENOMEM;
        r = egress_settings_register(e, &c);
        if (r >= 0)
                r = config_load(&c, path, reterr);
        /* egress profiles may also come from the environment; a bad one counts as a bad config line */
        if (r >= 0)
                r = egress_settings_load_env(e, getenv("SPACE_EGRESS_PROFILES"), reterr);
        if (r >= 0)
                r = egress_settings_finish(e, reterr);
        if (r < 0) {
                config_done(&c);
                egress_settings_unref(e);
                return r;
        }
        *ret_config = c;
        *ret_egress = e;
        return 0;
}

/* Keeps old's value of a setting that takes a restart in new, naming it when the file now says otherwise. */
#define KEEP_STRING(field, key)                                                                 \
        do {                                                                                    \
                if (!streq_ptr(old->field, new->field) && strv_extend(ret_names, key) < 0)       \
                        return -ENOMEM;                                                         \
                char *_t = old->field;                                                          \
                old->field = new->field;                                                        \
                new->field = _t;                                                                \
        } while (0)
#define KEEP_VALUE(field, key)                                                                  \
        do {                                                                                    \
                if (old->field != new->field && strv_extend(ret_names, key) < 0)                \
                        return -ENOMEM;                                                         \
                new->field = old->field;                                                        \
        } while (0)

static int keep_restart_settings(Config *old, Config *new, char ***ret_names) {
        KEEP_STRING(state_dir, "state_dir");
        KEEP_STRING(listen, "listen");
        KEEP_STRING(e2b_tls_listen, "e2b_tls_listen");
        KEEP_STRING(qemu_binary, "qemu");
        KEEP_VALUE(accel, "accel");
        KEEP_VALUE(confine, "confine");
        return 0;
}

int daemon_reload(Manager *m, Error *reterr) {
        _cleanup_strv_free_ char **restart = NULL;
        EgressSettings *egress;
        Config c;
        int r;

        r = daemon_config_read(m->config_path, &c, &egress, reterr);
        if (r < 0) {
                log_warning("reload of %s refused, the configuration in use stays: %s", m->config_path,
                            reterr && reterr->message ? reterr->message : strerror(-r));
                return r;
        }
        r = keep_restart_settings(&m->config, &c, &restart);
        if (r < 0) {
                config_done(&c);
                egress_settings_unref(egress);
                return r;
        }
        config_done(&m->config);
        m->config = c;
        /* a gateway policy built from the old settings holds them until its last connection ends */
        egress_settings_unref(m->egress);
        m->egress = egress;
        m->memory_limit_mib = config_memory_limit_mib(&m->config);
        strv_free(m->config_restart_needed);
        m->config_restart_needed = TAKE_PTR(restart);
        m->config_loaded_at = now_unix();
        {
                char keys[128] = "";
                size_t len = 0;

                for (char **k = m->config_restart_needed; k && *k && len < sizeof keys; k++)
                        len += (size_t) snprintf(keys + len, sizeof keys - len, "%s%s", len ? ", " : "", *k);
                log_info("reloaded %s: %zu egress profile(s), %zu base rule(s)%s%s", m->config_path,
                         m->egress->policy.n_profiles, m->egress->policy.base.n,
                         len ? "; takes a restart to change: " : "", keys);
        }
        return 0;
}
