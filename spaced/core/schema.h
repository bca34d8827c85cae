/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The state database's schema and its migrations (schema.c). Only store.c and its unit test include this. */

#include "core/error.h"

struct sqlite3;

/* The newest user_version this daemon writes and understands. */
#define SCHEMA_VERSION 15

/* Brings the database to SCHEMA_VERSION, each pending migration in a transaction of its own. -EPROTONOSUPPORT
 * for a database from a newer daemon; on any failure reterr (ERROR_INTERNAL) says which migration and why. */
int schema_migrate(struct sqlite3 *db, Error *reterr);
