/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The facade's parsers of what a client sends (envelopes, request messages, headers, query values, part
 * names), apart from the handlers that use them: they need no sandbox and no connection, so that the fuzz
 * targets (tests/fuzz/fuzz-e2b-*.c) reach them. Each lives in the file of its handler. */

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "e2b/e2b-internal.h"

/* ---- e2b.c: headers and Connect framing */

/* The user of "Authorization: Basic base64(NAME[:PASSWORD])" (the password is ignored), into buf
 * (E2B_USER_MAX + 1); not yet checked against lib/user.h's rules. -EINVAL when malformed. */
int e2b_user_from_basic_auth(const char *v, char *buf);
/* A connect-timeout-ms value (NULL: absent, 0): at most 10 digits. -EINVAL when malformed. */
int connect_timeout_parse(const char *v, uint64_t *ret);
/* A Keepalive-Ping-Interval value in seconds: 0 when absent, malformed or over an hour. */
unsigned connect_keepalive_parse(const char *v);

/* A client stream's body as a sequence of envelopes, read as it arrives in slices of any size. */
typedef struct ConnectEnvelopeReader {
        uint8_t head[CONNECT_ENVELOPE_HEADER];
        size_t head_len;
        uint32_t msg_len;
        SpaceBuf msg;                 /* the message being read; whole when connect_envelope_read() says 1 */
} ConnectEnvelopeReader;

/* Reads from data (n bytes) up to the end of the next envelope: 1 when an envelope is complete (its message
 * in er->msg until the next call), 0 when all of data was taken and the envelope goes on, < 0 when the body
 * is refused (*ret_code: why in a word, *ret_message: why). *ret_used: the bytes taken. */
int connect_envelope_read(ConnectEnvelopeReader *er, const uint8_t *data, size_t n, size_t *ret_used,
                          ErrorCode *ret_code, const char **ret_message);
/* Whether the body ended inside an envelope (its header or its message cut short). */
bool connect_envelope_reader_inside(const ConnectEnvelopeReader *er);
void connect_envelope_reader_done(ConnectEnvelopeReader *er);

/* ---- envd-process.c, envd-process-input.c: process.Process messages */

/* StartRequest, checked and bounded: everything in it comes from the network. */
typedef struct StartRequest {
        char **argv;
        char **env;                   /* KEY=VALUE, as given */
        char *cwd;                    /* resolved; NULL: the default */
        const char *tag;              /* in the message */
        bool pty, want_stdin;
        unsigned rows, cols;
} StartRequest;

void envd_start_request_done(StartRequest *q);
/* A Start message as user would run it: 0, -EINVAL with *ret_err (why, for invalid_argument), -ENOMEM. */
int envd_parse_start_request(const cJSON *o, const char *user, StartRequest *q, const char **ret_err);
/* pty {size: {rows, cols}} of Start and Update (sizes default to 24x80): into q's pty, rows and cols. */
int envd_parse_pty(const cJSON *o, StartRequest *q, const char **ret_err);
/* SendSignal's signal: SIGNAL_SIGKILL, SIGNAL_SIGTERM or their numbers. -EINVAL for any other. */
int envd_parse_signal(const cJSON *v, int *ret);
/* A ProcessSelector: {pid} (*ret_pid, a uint32) or {tag} (*ret_tag, in selector), exactly one. -EINVAL. */
int envd_selector_parse(const cJSON *selector, uint64_t *ret_pid, const char **ret_tag);
/* input {stdin | pty} of SendInput and StreamInput's data: the decoded bytes (NULL, 0 for none), at most
 * ENVD_INPUT_MAX. -EINVAL, -E2BIG, -ENOMEM. */
int envd_input_decode(const cJSON *input, uint8_t **ret, size_t *ret_size);

/* ---- e2b-sandbox-info.c, e2b-sandboxes.c: the control plane */

#define METADATA_FILTER_MAX 64

/* The list's ?metadata= (already form-decoded once by MHD): KEY=VALUE pairs joined by '&', each part
 * form-decoded and then unescaped again, as E2B's API does. Appends to key[] and value[] from *n_pairs on
 * (the caller frees what is there, also after a failure). -EINVAL for a broken escape, a NUL, a pair without
 * '=' or a key, or more than METADATA_FILTER_MAX pairs. */
int e2b_metadata_filter_parse(const char *v, char *key[static METADATA_FILTER_MAX],
                              char *value[static METADATA_FILTER_MAX], unsigned *n_pairs);

/* An RFC 3339 time (a list's ?startedAfter=: "2026-01-02T15:04:05[.fraction](Z|+HH:MM|-HH:MM)") as unix
 * seconds, the fraction dropped. -EINVAL when malformed or before 1970. */
int e2b_rfc3339_parse(const char *v, int64_t *ret);

/* NewSandbox, checked (r->body): what a create asks for. */
typedef struct E2bNewSandbox {
        cJSON *body;
        const char *template_ref;     /* templateID, in body: a template, "base" or a snapshot */
        int64_t timeout;              /* seconds; E2B_TIMEOUT_DEFAULT when not given */
        char *metadata;               /* JSON text of an object of strings, or NULL */
        char **env;                   /* envVars as NAME=VALUE, or NULL */
        bool auto_pause, auto_resume;
        bool auto_pause_memory;  /* false: the timeout stops it (mode 'filesystem') */
        char **egress_allow;          /* allow_internet_access and network.allowOut/denyOut, as egress lists */
        char **egress_deny;
        char **egress_bindings;       /* network.rules, as the sandbox's own secret bindings */
} E2bNewSandbox;

void e2b_new_sandbox_done(E2bNewSandbox *n);

/* ---- e2b-network.c: network.rules ({HOST: [{transform: {headers: {NAME: VALUE}}}, ...]}) as a sandbox's own
 * bindings ("HOST header NAME: VALUE", egress_binding_parse_own()), one per host and header, a later header of
 * a host's replacing an earlier one of that name, as E2B's do; and back, for the sandbox's info. NULL rules:
 * none (*ret NULL). ERROR_INVALID_ARGUMENT naming the field. */
int e2b_rules_to_bindings(const cJSON *rules, char ***ret, Error *reterr);
cJSON *e2b_rules_from_bindings(char *const *bindings);
/* 0 with *ret, < 0 when answered (400), or -ENOMEM. */
int e2b_new_sandbox_parse(Request *r, E2bNewSandbox *ret);

/* ---- e2b-sandbox-info.c: metrics (text from the guest) */

/* The value of "KEY: N kB" in a /proc/meminfo text, in bytes: 0, -ENOENT when absent, -EBADMSG when it is
 * not a number of kB that fits. */
int e2b_meminfo_field(const char *text, const char *key, uint64_t *ret);

/* ---- envd-filesystem.c: EntryInfo */

/* The symlinkTarget of the link at path (absolute) whose text is target, as envd gives it: absolute and clean
 * (".", ".." and repeated '/' gone), a relative target taken from path's directory. Links it passes through
 * are not followed (the guest reads the link's text only). -EINVAL for a path that is not absolute or an
 * empty target, -ENOMEM. */
int envd_symlink_target(const char *path, const char *target, char **ret);

/* ---- envd-files.c: /files */

#define SIGNATURE_MAX 128

/* "v1_" + base64(sha256("{path}:{read|write}:{user}:{token}[:{exp}]")) without '=' padding, as the SDKs
 * make it. */
int envd_signature_of(const char *path, const char *op, const char *user, const char *token, const char *exp,
                      char ret[static SIGNATURE_MAX]);
/* ?signature_expiration=: unix seconds (may be negative: it has then expired). -EINVAL when malformed. */
int envd_signature_expiration_parse(const char *exp, long long *ret);
/* The target of a multipart part: given (the resolved ?path=, for the first part) or name (its filename,
 * resolved against user's home), a file's path of at most SPACE_FILE_PATH_MAX bytes. -EINVAL with why in
 * err (invalid path), -ENOMEM. */
int envd_part_path(const char *name, const char *given, const char *user, char **ret_path, char *err,
                   size_t err_size);
