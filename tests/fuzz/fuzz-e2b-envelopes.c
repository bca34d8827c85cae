/* SPDX-License-Identifier: Apache-2.0 */

/* libFuzzer target: the E2B facade's request bodies (spaced/e2b/e2b.c, envd-process*.c, e2b-sandboxes.c,
 * declared in e2b/e2b-parse.h).
 *
 * Input: byte 0 is the largest slice (1 to 256 bytes) the StreamInput body arrives in, byte 1 seeds the slice
 * sizes; the rest is the body. The body goes
 *   - to the StreamInput envelope reader (connect_envelope_read) in slices, and each message it completes to
 *     what StreamInput does with it (start's selector, data's input);
 *   - to connect_request_message as a streaming call's body (one envelope) and as a unary call's (JSON);
 *   - as the request message (the envelope's, else the body) to every process.Process message parser: Start,
 *     the pty of Update, SendSignal, the process selector, SendInput's input;
 *   - to the NewSandbox checks of POST /sandboxes.
 * Invariants (abort on violation): the reader yields exactly the envelopes a whole-body reference reading
 * finds, whatever the slices, takes every byte it is given up to a refusal, and refuses only a flagged or
 * too long envelope, always with a code and a message; a refused request is answered exactly once, an
 * accepted one not at all; decoded input is no longer than its base64 allows nor than ENVD_INPUT_MAX, and
 * decodes again to itself; what each message parser accepts is within the bounds it promises. */

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "fuzz-util.h"
#include "macro.h"
#include "string-util.h"
#include "http/http.h"
#include "api/api.h"
#include "e2b/e2b-control.h"
#include "e2b/e2b-parse.h"
#include "e2b/envd-process.h"

static void new_request(Request *r, const uint8_t *data, size_t size, ErrorStyle style) {
        *r = (Request) { .method = "POST", .url = "/process.Process/Start", .error_style = style };
        if (space_buf_append(&r->body, data, size) < 0)
                abort();
        r->body.len = size; /* the body as it came: no NUL after it */
}

static uint32_t be32(const uint8_t *p) {
        return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
}

/* ---- request messages */

static bool has_control_free_name(const char *kv) {
        const char *eq = strchr(kv, '=');

        return eq && eq != kv;
}

static void check_input(const cJSON *input) {
        _cleanup_free_ uint8_t *data = NULL, *again = NULL;
        _cleanup_free_ char *text = NULL;
        size_t n = 0, m = 0;
        const cJSON *v;
        cJSON *wrap;
        int k;

        k = envd_input_decode(input, &data, &n);
        if (k < 0) {
                check(k == -EINVAL || k == -E2BIG || k == -ENOMEM);
                check(!data && n == 0);
                return;
        }
        check(n <= ENVD_INPUT_MAX);
        check(data || n == 0);
        v = cJSON_GetObjectItemCaseSensitive(input, "stdin") ?: cJSON_GetObjectItemCaseSensitive(input, "pty");
        if (cJSON_IsString(v))
                /* every 4 characters (padding added) are at most 3 bytes */
                check(n <= (strlen(v->valuestring) + 3) / 4 * 3);
        else
                check(n == 0);
        /* what was decoded, encoded again, decodes to the same bytes */
        text = malloc(base64_encoded_len(n) + 1);
        check(text);
        base64_encode(data, n, text);
        text[base64_encoded_len(n)] = 0;
        wrap = cJSON_CreateObject();
        check(wrap && cJSON_AddStringToObject(wrap, "pty", text));
        k = envd_input_decode(wrap, &again, &m);
        cJSON_Delete(wrap);
        check(k == 0 && m == n && (n == 0 || memcmp(again, data, n) == 0));
}

static void check_selector(const cJSON *selector) {
        const char *tag = (const char *) 1;
        uint64_t pid = 1;
        int k = envd_selector_parse(selector, &pid, &tag);

        if (k < 0) {
                check(k == -EINVAL);
                return;
        }
        check(k == 0);
        if (tag)
                check(pid == 0 && strlen(tag) <= ENVD_TAG_MAX);
        else
                check(pid <= UINT32_MAX);
}

static void check_start(const cJSON *o, const char *user) {
        _cleanup_(envd_start_request_done) StartRequest q = {};
        const char *err = NULL;
        size_t n = 0;
        int k = envd_parse_start_request(o, user, &q, &err);

        if (k == -EINVAL) {
                check(err && *err);
                return;
        }
        if (k < 0) {
                check(k == -ENOMEM);
                return;
        }
        check(k == 0 && q.argv && q.argv[0] && q.argv[0][0]);
        for (char **a = q.argv; *a; a++) {
                check(strlen(*a) <= 64 * 1024);
                n++;
        }
        check(n <= ARGV_MAX);
        n = 0;
        for (char **e = q.env; e && *e; e++) {
                check(has_control_free_name(*e));
                n++;
        }
        check(n <= 1024);
        if (q.cwd)
                check(q.cwd[0] == '/');
        if (q.tag)
                check(strlen(q.tag) <= ENVD_TAG_MAX);
        if (q.pty)
                check(q.rows >= 1 && q.rows <= 65535 && q.cols >= 1 && q.cols <= 65535);
        else
                check(q.rows == 0 && q.cols == 0);
}

static void check_messages(const cJSON *o) {
        StartRequest pty = {};
        const char *err = NULL;
        int sig = 0, k;

        if (!cJSON_IsObject(o))
                return;
        check_start(o, "root");
        check_start(o, "user");
        check_selector(cJSON_GetObjectItemCaseSensitive(o, "process"));
        check_input(cJSON_GetObjectItemCaseSensitive(o, "input"));
        k = envd_parse_pty(cJSON_GetObjectItemCaseSensitive(o, "pty"), &pty, &err);
        if (k < 0)
                check(k == -EINVAL && err && *err);
        else if (pty.pty)
                check(pty.rows >= 1 && pty.rows <= 65535 && pty.cols >= 1 && pty.cols <= 65535);
        k = envd_parse_signal(cJSON_GetObjectItemCaseSensitive(o, "signal"), &sig);
        if (k == 0)
                check(sig == SIGKILL || sig == SIGTERM);
        else
                check(k == -EINVAL);
}

/* What StreamInput does with one message: start names a process, data carries input, keepalive nothing. */
static void stream_input_message(const uint8_t *json, size_t n) {
        cJSON *o = cJSON_ParseWithLength((const char *) json, n);
        const cJSON *start = cJSON_GetObjectItemCaseSensitive(o, "start"),
                    *data = cJSON_GetObjectItemCaseSensitive(o, "data");

        if (cJSON_IsObject(o)) {
                if (start)
                        check_selector(cJSON_GetObjectItemCaseSensitive(start, "process"));
                else if (data)
                        check_input(cJSON_GetObjectItemCaseSensitive(data, "input"));
        }
        cJSON_Delete(o);
}

/* ---- StreamInput: the envelope reader against a reading of the whole body */

typedef struct Envelope {
        size_t off, len;              /* the message's place in the body */
} Envelope;

/* The envelopes of body, whole, and how the body ends: 0 at an envelope's end, 1 inside one, -EINVAL/-E2BIG
 * at a refused header (*ret_stop: the offset after it). */
static int reference_envelopes(const uint8_t *body, size_t size, Envelope **ret, size_t *ret_n, size_t *ret_stop) {
        Envelope *l = NULL;
        size_t n = 0, p = 0;

        for (;;) {
                uint32_t len;

                if (p == size) {
                        *ret = l, *ret_n = n, *ret_stop = p;
                        return 0;
                }
                if (size - p < CONNECT_ENVELOPE_HEADER) {
                        *ret = l, *ret_n = n, *ret_stop = size;
                        return 1;
                }
                len = be32(body + p + 1);
                if (body[p] != 0 || len > HTTP_BODY_MAX) {
                        *ret = l, *ret_n = n, *ret_stop = p + CONNECT_ENVELOPE_HEADER;
                        return body[p] != 0 ? -EINVAL : -E2BIG;
                }
                if (size - p - CONNECT_ENVELOPE_HEADER < len) {
                        *ret = l, *ret_n = n, *ret_stop = size;
                        return 1;
                }
                l = reallocarray(l, n + 1, sizeof *l);
                check(l);
                l[n++] = (Envelope) { .off = p + CONNECT_ENVELOPE_HEADER, .len = len };
                p += CONNECT_ENVELOPE_HEADER + len;
        }
}

static void stream_input(uint8_t max_slice, uint8_t seed, const uint8_t *body, size_t size) {
        _cleanup_(connect_envelope_reader_done) ConnectEnvelopeReader er = {};
        _cleanup_free_ Envelope *want = NULL;
        size_t n_want = 0, got = 0, stop = 0, pos = 0;
        uint32_t rng = seed * 2654435761u + 1;
        int end = reference_envelopes(body, size, &want, &n_want, &stop), k = 0;

        while (pos < size) {
                size_t slice, used = 0, took;

                rng = rng * 1103515245u + 12345u;
                slice = 1 + (rng >> 16) % ((size_t) max_slice + 1);
                if (slice > size - pos)
                        slice = size - pos;
                /* as stream_write(): envelopes are taken one by one until the slice is used up */
                while (used < slice) {
                        const char *message = (const char *) 1;
                        ErrorCode code = _ERROR_CODE_MAX;

                        k = connect_envelope_read(&er, body + pos + used, slice - used, &took, &code, &message);
                        check(took <= slice - used);
                        used += took;
                        if (k < 0) {
                                check(code != ERROR_NONE && code < _ERROR_CODE_MAX && message && *message);
                                check(k == end && pos + used == stop);
                                check(got == n_want);
                                return;
                        }
                        check(code == ERROR_NONE && !message);
                        if (k == 0) {
                                check(used == slice); /* all of it went into an envelope not complete yet */
                                break;
                        }
                        check(k == 1 && got < n_want);
                        check(er.msg.len == want[got].len && pos + used == want[got].off + want[got].len);
                        check(er.msg.len == 0 || memcmp(er.msg.data, body + want[got].off, er.msg.len) == 0);
                        stream_input_message(er.msg.data, er.msg.len);
                        got++;
                }
                pos += slice;
        }
        check(end >= 0 && got == n_want);
        check(connect_envelope_reader_inside(&er) == (end == 1));
}

/* ---- a streaming call's one envelope, a unary call's JSON */

static void request_message(const uint8_t *body, size_t size) {
        Request r;
        cJSON *o;
        bool one_envelope;

        /* streaming: the body is exactly one uncompressed envelope of a JSON object */
        one_envelope = size >= CONNECT_ENVELOPE_HEADER && body[0] == 0 &&
                       be32(body + 1) == size - CONNECT_ENVELOPE_HEADER;
        new_request(&r, body, size, ERROR_STYLE_CONNECT_STREAM);
        o = connect_request_message(&r, true);
        check((o != NULL) != r.responded);
        if (o) {
                check(one_envelope && cJSON_IsObject(o));
                check_messages(o);
        } else if (one_envelope)
                /* the message of a well-formed envelope is not a JSON object: still, each parser takes it */
                stream_input_message(body + CONNECT_ENVELOPE_HEADER, size - CONNECT_ENVELOPE_HEADER);
        cJSON_Delete(o);
        space_buf_done(&r.body);

        new_request(&r, body, size, ERROR_STYLE_CONNECT);
        o = connect_request_message(&r, false);
        check((o != NULL) != r.responded);
        if (o) {
                check(cJSON_IsObject(o));
                check_messages(o);
        }
        cJSON_Delete(o);
        space_buf_done(&r.body);
}

/* ---- POST /sandboxes */

static void new_sandbox(const uint8_t *body, size_t size) {
        _cleanup_(e2b_new_sandbox_done) E2bNewSandbox n = {};
        Request r;
        cJSON *md, *i;
        int k;

        new_request(&r, body, size, ERROR_STYLE_E2B);
        k = e2b_new_sandbox_parse(&r, &n);
        if (k < 0) {
                check(r.responded || k == -ENOMEM);
                check(!n.body && !n.env && !n.metadata);
                goto out;
        }
        check(k == 0 && !r.responded && cJSON_IsObject(n.body));
        check(n.template_ref && n.template_ref[0] && strlen(n.template_ref) <= 255);
        check(n.timeout >= 0 && n.timeout <= E2B_TIMEOUT_MAX);
        check(!n.auto_resume || n.auto_pause);
        for (char **e = n.env; e && *e; e++)
                check(has_control_free_name(*e));
        if (n.metadata) {
                md = cJSON_Parse(n.metadata);
                check(cJSON_IsObject(md));
                cJSON_ArrayForEach(i, md)
                        check(cJSON_IsString(i) && i->string[0]);
                cJSON_Delete(md);
        }
out:
        space_buf_done(&r.body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 2)
                return 0;
        stream_input(data[0], data[1], data + 2, size - 2);
        request_message(data + 2, size - 2);
        new_sandbox(data + 2, size - 2);
        return 0;
}
