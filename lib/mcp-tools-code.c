/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf */
#endif

/*
 * The run_code tool (its entry in lib/mcp-tools-run.c's table): the sandbox's code interpreter on port 49999,
 * through the daemon's port proxy. Its answer is a stream of JSON lines that may run for minutes.
 *
 * What the guest sends is hostile: the stream is bounded here (a line's length, a budget of text, a count and
 * size of images), every JSON value is checked for its type, and every byte that ends up in a JSON string is
 * made valid UTF-8 first.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "mcp-tools-internal.h"

#define CODE_PORT 49999
#define CODE_TIMEOUT_DEFAULT 300
#define CODE_TIMEOUT_MAX 3600
#define CODE_LINE_MAX (8U * 1024U * 1024U)
#define CODE_TEXT_MAX (1024U * 1024U)           /* stdout, stderr, results and the error together */
#define CODE_IMAGES_MAX 8U
#define CODE_IMAGE_MAX (4U * 1024U * 1024U)     /* base64 bytes of one image */
#define CODE_ERROR_FIELD_MIN (16U * 1024U)      /* of each field of an exception, whatever came before */

/* One execution: the interpreter's stream of lines as it comes, and what it said. */
typedef struct CodeRun {
        bool streaming;                         /* a 2xx reply's body began */
        /* the stream of lines */
        McpText line;
        bool skipping;                          /* the line being read went over CODE_LINE_MAX */
        uint64_t lines_dropped, lines_malformed;
        /* what came */
        McpText out, err, results_text;
        size_t budget;                          /* text bytes left */
        uint64_t text_cut;
        cJSON *results;                         /* structured, one per result */
        char *images[CODE_IMAGES_MAX];
        const char *image_mime[CODE_IMAGES_MAX];
        unsigned n_images, images_dropped;
        cJSON *error;                           /* {name, value, traceback} */
        int64_t execution_count;                /* -1: none */
        bool ended;                             /* end_of_execution came */
} CodeRun;

static void code_run_done(CodeRun *c) {
        mcp_text_done(&c->line);
        mcp_text_done(&c->out);
        mcp_text_done(&c->err);
        mcp_text_done(&c->results_text);
        cJSON_Delete(c->results);
        cJSON_Delete(c->error);
        for (unsigned i = 0; i < c->n_images; i++)
                free(c->images[i]);
}

/* Appends a guest's text within what is left of the budget, or within at_least when that is more (an error's
 * fields are shown even after a flood of output); what does not fit is counted. */
static int code_take_text(CodeRun *c, McpText *t, const char *s, size_t at_least) {
        size_t n = strlen(s), taken = 0, before = t->len;
        int r;

        r = mcp_text_append_utf8(t, s, n, c->budget > at_least ? c->budget : at_least, &taken);
        if (r < 0)
                return r;
        c->budget -= MIN(c->budget, t->len - before);
        c->text_cut += n - taken;
        return 0;
}

/* A base64 image of the kind mime says: its alphabet only, and its magic number as the first bytes encode. */
static bool image_valid(const char *b64, const char *mime) {
        const char *magic = streq(mime, "image/png") ? "iVBORw0KGgo" : "/9j/";

        if (strncmp(b64, magic, strlen(magic)) != 0)
                return false;
        return strspn(b64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") == strlen(b64);
}

/* b64 without its line breaks: Jupyter's image/png is base64 in lines of 76 (ipykernel's encodebytes), and MCP's
 * image data is one run of base64. */
static char *base64_unfold(const char *b64) {
        char *out = malloc(strlen(b64) + 1), *o = out;

        if (!out)
                return NULL;
        for (const char *p = b64; *p; p++)
                if (!strchr(" \t\r\n", *p))
                        *o++ = *p;
        *o = '\0';
        return out;
}

static int code_image(CodeRun *c, const cJSON *result, const char *key, const char *mime, bool *ret_added) {
        const char *b64 = mcp_json_string(result, key);
        _cleanup_free_ char *flat = NULL;

        *ret_added = false;
        if (!b64)
                return 0;
        flat = base64_unfold(b64);
        if (!flat)
                return -ENOMEM;
        if (c->n_images >= CODE_IMAGES_MAX || strlen(flat) > CODE_IMAGE_MAX || !image_valid(flat, mime)) {
                c->images_dropped++;
                return 0;
        }
        c->images[c->n_images] = TAKE_PTR(flat);
        c->image_mime[c->n_images++] = mime;
        *ret_added = true;
        return 0;
}

static int code_result(CodeRun *c, const cJSON *j) {
        static const char *const formats[] = { "text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex",
                                               "json", "javascript", "data", "chart", "extra" };
        const char *text = mcp_json_string(j, "text");
        bool main_result = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "is_main_result")), png, jpeg;
        _cleanup_cjson_ cJSON *o = cJSON_CreateObject();
        cJSON *f = o ? cJSON_AddArrayToObject(o, "formats") : NULL;
        int r;

        if (!f || !cJSON_AddBoolToObject(o, "is_main_result", main_result))
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(formats); i++)
                if (cJSON_GetObjectItemCaseSensitive(j, formats[i]) &&
                    !cJSON_AddItemToArray(f, cJSON_CreateString(formats[i])))
                        return -ENOMEM;
        if ((r = code_image(c, j, "png", "image/png", &png)) < 0 ||
            (r = code_image(c, j, "jpeg", "image/jpeg", &jpeg)) < 0)
                return r;
        if (text) {
                size_t before = c->results_text.len;

                r = mcp_text_puts(&c->results_text, main_result ? "result: " : "display: ");
                if (r >= 0)
                        r = code_take_text(c, &c->results_text, text, 0);
                if (r >= 0 && !cJSON_AddStringToObject(o, "text", c->results_text.data + before +
                                                        strlen(main_result ? "result: " : "display: ")))
                        r = -ENOMEM;
                if (r >= 0)
                        r = mcp_text_puts(&c->results_text, "\n");
        } else if (!mcp_json_string(j, "png") && !mcp_json_string(j, "jpeg"))
                r = mcp_text_puts(&c->results_text, "[a result without text: see formats in the structured content]\n");
        if (r >= 0 && (png || jpeg))
                r = mcp_text_printf(&c->results_text, "[%s: image %u, below]\n", main_result ? "result" : "display",
                                    c->n_images);
        else if (r >= 0 && (mcp_json_string(j, "png") || mcp_json_string(j, "jpeg")))
                r = mcp_text_puts(&c->results_text, "[an image, left out: see below]\n");
        if (r < 0)
                return r;
        if (png || jpeg)
                (void) cJSON_AddNumberToObject(o, "image", c->n_images);
        return cJSON_AddItemToArray(c->results, TAKE_PTR(o)) ? 0 : -ENOMEM;
}

/* IPython colours its tracebacks: ANSI escapes are noise to a reader that is no terminal. */
static void strip_ansi(char *s) {
        char *w = s;

        for (char *p = s; *p;) {
                if (p[0] == '\x1b' && p[1] == '[') {
                        p += 2;
                        while (*p && !(*p >= 0x40 && *p <= 0x7e))
                                p++;
                        if (*p)
                                p++;
                        continue;
                }
                *w++ = *p++;
        }
        *w = 0;
}

static int code_error(CodeRun *c, const cJSON *j) {
        static const char *const keys[] = { "name", "value", "traceback" };
        _cleanup_cjson_ cJSON *o = cJSON_CreateObject();

        if (!o)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                _cleanup_(mcp_text_done) McpText t = {};
                const char *v = mcp_json_string(j, keys[i]);
                int r;

                r = code_take_text(c, &t, v ?: "", CODE_ERROR_FIELD_MIN);
                if (r < 0)
                        return r;
                strip_ansi(t.data ?: (char[]) { 0 });
                if (!cJSON_AddStringToObject(o, keys[i], mcp_text_str(&t)))
                        return -ENOMEM;
        }
        cJSON_Delete(c->error);
        c->error = TAKE_PTR(o);
        return 0;
}

static int code_line(CodeRun *c, const char *line, size_t len) {
        _cleanup_cjson_ cJSON *j = NULL;
        const char *type, *text;
        int64_t n;

        if (len == 0 || (len == 1 && line[0] == '\r'))
                return 0;
        j = mcp_json_object_parse(line, len);
        type = mcp_json_string(j, "type");
        if (!type) {
                c->lines_malformed++;
                return 0;
        }
        text = mcp_json_string(j, "text");
        if (streq(type, "stdout") || streq(type, "stderr"))
                return text ? code_take_text(c, streq(type, "stdout") ? &c->out : &c->err, text, 0) : 0;
        if (streq(type, "result"))
                return code_result(c, j);
        if (streq(type, "error"))
                return code_error(c, j);
        if (streq(type, "number_of_executions") && mcp_json_integer(j, "execution_count", 0, INT64_MAX / 2, &n))
                c->execution_count = n;
        else if (streq(type, "end_of_execution"))
                c->ended = true;
        return 0; /* keepalive, and types of later servers */
}

/* Splits the body into lines; a line over CODE_LINE_MAX is dropped whole, up to its end. */
static int code_feed(CodeRun *c, const char *p, size_t n) {
        while (n > 0) {
                const char *nl = memchr(p, '\n', n);
                size_t k = nl ? (size_t) (nl - p) : n;
                int r;

                if (!c->skipping && c->line.len + k > CODE_LINE_MAX) {
                        c->skipping = true;
                        c->lines_dropped++;
                        mcp_text_done(&c->line);
                }
                if (!c->skipping && (r = mcp_text_append(&c->line, p, k)) < 0)
                        return r;
                if (!nl)
                        return 0;
                if (!c->skipping && (r = code_line(c, mcp_text_str(&c->line), c->line.len)) < 0)
                        return r;
                c->line.len = 0;
                c->skipping = false;
                p += k + 1;
                n -= k + 1;
        }
        return 0;
}

/* The 2xx reply's body, as it arrives (space_http_post_streamed()); < 0 (-ENOMEM) ends the transfer. */
static int code_write(const void *buf, size_t n, void *userdata) {
        CodeRun *c = userdata;

        c->streaming = true;
        return code_feed(c, buf, n);
}

/* The sandbox's template, for messages; NULL when it cannot be told (free()). */
static char *sandbox_template(McpCall *call, const char *id) {
        _cleanup_free_ char *path = NULL;
        SpaceHttpReply reply = {};
        char *t = NULL;

        if (mcp_sandbox_path(id, "", &path) < 0 || space_http_call(mcp_call_http(call), "GET", path, NULL, &reply) < 0)
                return NULL;
        if (space_http_reply_ok(&reply) && mcp_json_string(reply.json, "template"))
                t = mcp_string_clean(mcp_json_string(reply.json, "template"), 200);
        space_http_reply_done(&reply);
        return t;
}

/* A reply that is no stream: the daemon's error (a JSON {"code", "message"}, in reply's error fields) or the
 * interpreter's (FastAPI's {"detail"}, or no JSON at all). Both come from the guest's side: cleaned first. */
static int code_refused(McpCall *call, const SpaceHttpReply *reply, const char *id, const char *context_id,
                        cJSON **ret_result) {
        const char *detail = mcp_json_string(reply->json, "detail"), *message = mcp_json_string(reply->json, "message");
        bool daemon_error = reply->error_code && mcp_json_string(reply->json, "code") && message;
        _cleanup_free_ char *body = NULL, *template = NULL;

        if (streq_ptr(reply->error_code, "port_unreachable")) {
                template = sandbox_template(call, id);
                if (template && strstr(template, "code-interpreter"))
                        *ret_result = mcp_result_errorf(
                                "run_code: the code interpreter of sandbox %s (template %s) does not answer on "
                                "port %d: it may still be starting; try again in a few seconds, or look with exec "
                                "command=\"ss -ltn\"", id, template, CODE_PORT);
                else
                        *ret_result = mcp_result_errorf(
                                "sandbox %s (template %s) has no code interpreter: create one with sandbox_create "
                                "template=code-interpreter, or use exec", id, template ?: "unknown");
        } else if (daemon_error) {
                SpaceHttpReply clean = { .status = reply->status, .error = reply->error };

                clean.error_code = mcp_string_clean(reply->error_code, 64);
                clean.error_message = mcp_string_clean(reply->error_message, 1000);
                *ret_result = clean.error_code && clean.error_message ? mcp_result_api_error("run_code", &clean) : NULL;
                space_http_reply_done(&clean);
        } else if (reply->status == 404 && context_id)
                *ret_result = mcp_result_errorf("run_code: the code interpreter has no context '%.100s': leave "
                                                "context_id out to use the language's default context", context_id);
        else {
                if ((detail ?: message) && !(body = mcp_string_clean(detail ?: message, 1000)))
                        return -ENOMEM;
                *ret_result = mcp_result_errorf("run_code: the code interpreter answered HTTP %ld%s%s%s",
                                                reply->status, body ? ": " : " without an error message", body ?: "",
                                                reply->status == 400 ? " (check language and context_id: give at "
                                                "most one of them)" : "");
        }
        return *ret_result ? 0 : -ENOMEM;
}

static int code_result_text(const CodeRun *c, bool timed_out, int64_t timeout, McpText *t) {
        const cJSON *e = c->error;
        int r = 0;

        if (c->execution_count >= 0)
                r = mcp_text_printf(t, "execution %" PRId64 "\n", c->execution_count);
        if (r >= 0)
                r = mcp_text_add_stream(t, "stdout", &c->out);
        if (r >= 0)
                r = mcp_text_add_stream(t, "stderr", &c->err);
        if (r >= 0 && c->results_text.len > 0)
                r = mcp_text_puts(t, c->results_text.data);
        if (r >= 0 && e)
                r = mcp_text_printf(t, "error: %s: %s\n%s%s", mcp_json_string(e, "name"), mcp_json_string(e, "value"),
                                    mcp_json_string(e, "traceback"), *mcp_json_string(e, "traceback") ? "\n" : "");
        if (r >= 0 && c->text_cut > 0)
                r = mcp_text_printf(t, "[%" PRIu64 " bytes of text cut: output is kept up to %u KiB; write large "
                                    "output to a file and read it with file_read]\n", c->text_cut,
                                    CODE_TEXT_MAX / 1024);
        if (r >= 0 && c->images_dropped > 0)
                r = mcp_text_printf(t, "[%u images left out: at most %u PNG/JPEG images of %u MiB each are shown; save "
                                    "others to files]\n", c->images_dropped, CODE_IMAGES_MAX, CODE_IMAGE_MAX >> 20);
        if (r >= 0 && c->lines_dropped + c->lines_malformed > 0)
                r = mcp_text_printf(t, "[%" PRIu64 " lines of the interpreter's stream dropped: over %u MiB or not "
                                    "JSON]\n", c->lines_dropped + c->lines_malformed, CODE_LINE_MAX >> 20);
        if (r >= 0 && timed_out)
                r = mcp_text_printf(t, "timed out after %" PRId64 " s: the execution was interrupted; raise timeout "
                                    "(at most %d) or run long jobs in the background with exec\n", timeout,
                                    CODE_TIMEOUT_MAX);
        else if (r >= 0 && !c->ended)
                r = mcp_text_puts(t, "the interpreter's stream ended before the end of the execution: its kernel may "
                                  "have died; run the code again, or restart with a new context\n");
        return r;
}

static int code_build_result(CodeRun *c, bool timed_out, int64_t timeout, cJSON **ret_result) {
        _cleanup_cjson_ cJSON *o = cJSON_CreateObject();
        _cleanup_(mcp_text_done) McpText t = {};
        int r;

        if (!o)
                return -ENOMEM;
        r = code_result_text(c, timed_out, timeout, &t);
        if (r < 0)
                return r;
        if (!cJSON_AddStringToObject(o, "stdout", mcp_text_str(&c->out)) ||
            !cJSON_AddStringToObject(o, "stderr", mcp_text_str(&c->err)))
                return -ENOMEM;
        cJSON_AddItemToObject(o, "results", TAKE_PTR(c->results));
        cJSON_AddItemToObject(o, "error", c->error ? TAKE_PTR(c->error) : cJSON_CreateNull());
        if (!(c->execution_count >= 0 ? cJSON_AddNumberToObject(o, "execution_count", (double) c->execution_count)
                                      : cJSON_AddNullToObject(o, "execution_count")) ||
            !cJSON_AddNumberToObject(o, "images", c->n_images) ||
            !cJSON_AddNumberToObject(o, "truncated_bytes", (double) c->text_cut) ||
            !cJSON_AddBoolToObject(o, "timed_out", timed_out) ||
            !cJSON_AddBoolToObject(o, "complete", c->ended) ||
            !cJSON_GetObjectItem(o, "results") || !cJSON_GetObjectItem(o, "error"))
                return -ENOMEM;
        *ret_result = mcp_result_text(mcp_text_str(&t), TAKE_PTR(o));
        if (!*ret_result)
                return -ENOMEM;
        for (unsigned i = 0; i < c->n_images; i++)
                if (mcp_result_add_image(*ret_result, c->images[i], c->image_mime[i]) < 0)
                        return -ENOMEM;
        return 0;
}

static int code_body(const cJSON *args, const char **ret_context_id, cJSON **ret_body, cJSON **ret_error) {
        _cleanup_cjson_ cJSON *b = cJSON_CreateObject();
        const char *code, *language, *context_id;
        int r;

        if (!b)
                return -ENOMEM;
        if ((r = mcp_arg_string(args, "code", true, &code, ret_error)) != 0 ||
            (r = mcp_arg_string(args, "language", false, &language, ret_error)) != 0 ||
            (r = mcp_arg_string(args, "context_id", false, &context_id, ret_error)) != 0)
                return r;
        if (language && context_id) {
                *ret_error = mcp_result_errorf("run_code: give language or context_id, not both: a context has its "
                                               "language already");
                return *ret_error ? 1 : -ENOMEM;
        }
        if (!cJSON_AddStringToObject(b, "code", code) ||
            (language && !cJSON_AddStringToObject(b, "language", language)) ||
            (context_id && !cJSON_AddStringToObject(b, "context_id", context_id)))
                return -ENOMEM;
        *ret_body = TAKE_PTR(b);
        *ret_context_id = context_id;
        return 0;
}

int mcp_tool_run_code(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(code_run_done) CodeRun c = { .budget = CODE_TEXT_MAX, .execution_count = -1 };
        _cleanup_(space_http_reply_done) SpaceHttpReply reply = {};
        _cleanup_cjson_ cJSON *body = NULL;
        _cleanup_free_ char *id = NULL, *path = NULL;
        SpaceHttp *h = mcp_call_http(call);
        const char *context_id = NULL;
        int64_t timeout;
        int r;

        if ((r = mcp_arg_int(args, "timeout", 1, CODE_TIMEOUT_MAX, CODE_TIMEOUT_DEFAULT, &timeout, ret_result)) != 0 ||
            (r = code_body(args, &context_id, &body, ret_result)) != 0 ||
            (r = mcp_call_sandbox_running(call, args, &id, ret_result)) != 0)
                return r < 0 ? r : 0;
        c.results = cJSON_CreateArray();
        if (!c.results || asprintf(&path, "/v1/sandboxes/%s/ports/%d/execute", id, CODE_PORT) < 0)
                return -ENOMEM;
        r = space_http_post_streamed(h, path, body, (long) timeout, code_write, &c, &reply);
        if (r == -ENOMEM || r == -EINTR)
                return r; /* cancelled: the interpreter interrupts its kernel once we are gone */
        if (r >= 0 && !space_http_reply_ok(&reply))
                return code_refused(call, &reply, id, context_id, ret_result);
        /* timed out after the stream began: what came so far, interrupted */
        if (r >= 0 || (r == -ETIMEDOUT && c.streaming))
                return code_build_result(&c, r < 0, timeout, ret_result);
        if (r == -ETIMEDOUT)
                *ret_result = mcp_result_errorf("run_code: no answer from the code interpreter of sandbox %s within "
                                                "%" PRId64 " s; raise timeout, or check the sandbox with exec", id,
                                                timeout);
        else if (r == -EPERM)
                *ret_result = mcp_result_errorf("run_code: the process listening on %s is not spaced running as us "
                                                "or root (%s); check SPACE_SOCKET", space_http_endpoint(h),
                                                space_http_last_error(h));
        else
                *ret_result = mcp_result_errorf("run_code: the request to spaced at %s failed: %s; is spaced "
                                                "running?", space_http_endpoint(h), space_http_last_error(h));
        return *ret_result ? 0 : -ENOMEM;
}
