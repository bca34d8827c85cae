/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The daemon's configuration as a whole (reload.c): read at start and again on a reload (SIGHUP, POST
 * /v1/daemon/reload). It sits beside main.c, above every subsystem, because it puts core's Config and egress's
 * EgressSettings together. */

#include "core/error.h"
#include "core/manager.h"

/* Reads path (spaced.conf) and SPACE_EGRESS_PROFILES into a new Config and new EgressSettings; on error nothing is
 * left allocated and reterr names the line. ret_config starts from core's defaults. */
int daemon_config_read(const char *path, Config *ret_config, EgressSettings **ret_egress, Error *reterr);
/* Re-reads m->config_path: refused whole (ERROR_INVALID_ARGUMENT, the old configuration stays) when the file or
 * SPACE_EGRESS_PROFILES is bad; otherwise the new settings apply at once, but those a running daemon cannot
 * change (state_dir, listen, accel, confine, qemu) keep their values and are named in
 * m->config_restart_needed. Logged once. */
int daemon_reload(Manager *m, Error *reterr);
