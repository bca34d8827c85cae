/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the files of a process share inside channel/ only (process.c: its life; process-events.c: its events,
 * clients and credit; process-guest.c: its frames; process-table.c: its row, lookups and JSON). The rest of the
 * daemon sees a Process through channel/process.h. */

#include "channel/process.h"

/* What one record may add to a log file: the data, its header, and a new file's header when it rotates. */
#define LOG_RECORD_OVERHEAD 64U

/* process.c */
extern Process *process_list;        /* every process in memory */
/* Through its channel while it has one (every event of a running process counts its log bytes there); by id
 * otherwise, since a process may outlive its sandbox. */
Sandbox *process_sandbox(Process *p);
Process *process_new(Manager *m, Sandbox *s);
/* The process is over: the final event is in, the guest forgets the stream. */
void process_end(Process *p);
void process_arm_timeout(Process *p);
void process_release(Process *p);

/* process-events.c */
int process_append_event(Process *p, uint8_t type, const void *data, size_t n);
void process_append_json(Process *p, uint8_t type, cJSON *o);
/* Ends p with an error event (its code and message) and the state given. */
void process_end_with_error(Process *p, ProcessState state, ErrorCode code, const char *message);
void process_wake_clients(Process *p);
void process_ring_free(Process *p);
void process_flow_update(Process *p);
void process_send_credit(Process *p, uint8_t fd, uint64_t n);
/* Output of n bytes on fd came with the last event: credit for it goes back once the clients took it. */
void process_note_output(Process *p, uint8_t fd, uint32_t n);

/* process-table.c */
void process_save(Process *p);
void process_prune_finished(Process *p);
void process_set_log_path(Process *p, const char *path);
/* In memory, by pid or (with session_id) by session; an ended one only when no live one has that pid. */
Process *process_find_live(const char *sandbox_id, int pid, const char *session_id);
/* A process from its row: ended ones only serve their log; running ones wait for adoption. */
Process *process_from_record(Manager *m, Sandbox *s, const ProcessRecord *rec);
