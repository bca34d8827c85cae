/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* SQLite state: the desired and observed state of sandboxes, and operations. One file, WAL mode; written
 * from the event loop thread only. */

#include "manager.h"

int store_open(const char *path, Store **ret, char **reterr_message);
Store *store_close(Store *s);
int store_put_sandbox(Store *s, const Sandbox *sb);
int store_delete_sandbox(Store *s, const char *id);
/* Creates Sandbox objects for every row and links them into m->sandboxes. */
int store_load_sandboxes(Store *s, Manager *m);
int store_put_operation(Store *s, const Operation *op);
int store_load_operations(Store *s, Manager *m);
/* Drops finished operations older than max_age seconds. */
int store_prune_operations(Store *s, int64_t older_than);
