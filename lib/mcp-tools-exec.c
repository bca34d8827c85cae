/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* asprintf, sigabbrev_np */
#endif

/*
 * The exec tool (its entry in lib/mcp-tools-run.c's table): a command over the process stream, its output
 * streamed as progress while it runs and kept, head and tail, for the result.
 *
 * What the guest sends is hostile: each stream is bounded (head and tail of each, a cap on what waits for the
 * next progress message), every event's JSON is checked for its types, and every byte that ends up in a JSON
 * string is made valid UTF-8 first.
 */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base64.h"
#include "macro.h"
#include "mcp-tools-internal.h"
#include "utf8.h"

#define EXEC_TIMEOUT_DEFAULT 60
#define EXEC_TIMEOUT_MAX 3600
#define EXEC_KEEP_HEAD (32U * 1024U)            /* head + tail: 64 KiB of each stream */
#define EXEC_KEEP_TAIL (32U * 1024U)
#define EXEC_ARGV_MAX 4096
#define EXEC_STDIN_CHUNK (64U * 1024U)          /* one POST at a time, as spacectl exec sends it */
#define PROGRESS_INTERVAL_USEC (100ULL * 1000ULL) /* at most 10 progress messages a second */
#define PROGRESS_RAW_MAX 4000U                  /* output held for the next message */
#define PROGRESS_TEXT_MAX 4096U                 /* one message's text */

/* The first and the last bytes of a stream; what lies between is only counted. */
typedef struct Capture {
        uint8_t head[EXEC_KEEP_HEAD];
        size_t head_len;
        uint8_t tail[EXEC_KEEP_TAIL];           /* a ring */
        size_t tail_start, tail_len;
        uint64_t total;
} Capture;

static void capture_add(Capture *c, const uint8_t *p, size_t n) {
        size_t k = MIN(n, EXEC_KEEP_HEAD - c->head_len);

        memcpy(c->head + c->head_len, p, k);
        c->head_len += k;
        c->total += n;
        p += k;
        n -= k;
        if (n > EXEC_KEEP_TAIL) {
                p += n - EXEC_KEEP_TAIL;
                n = EXEC_KEEP_TAIL;
        }
        while (n > 0) {
                size_t end = (c->tail_start + c->tail_len) % EXEC_KEEP_TAIL;
                size_t m = MIN(n, EXEC_KEEP_TAIL - end);

                memcpy(c->tail + end, p, m);
                if (c->tail_len + m > EXEC_KEEP_TAIL) {
                        /* the oldest bytes were overwritten */
                        c->tail_start = (c->tail_start + c->tail_len + m - EXEC_KEEP_TAIL) % EXEC_KEEP_TAIL;
                        c->tail_len = EXEC_KEEP_TAIL;
                } else
                        c->tail_len += m;
                p += m;
                n -= m;
        }
}

static uint64_t capture_cut(const Capture *c) {
        return c->total - c->head_len - c->tail_len;
}

/* The kept bytes as text, with a note where bytes were cut. */
static int capture_text(const Capture *c, McpText *ret) {
        _cleanup_free_ uint8_t *buf = malloc(EXEC_KEEP_HEAD + EXEC_KEEP_TAIL);
        uint64_t cut = capture_cut(c);
        size_t n = 0, first;
        int r;

        if (!buf)
                return -ENOMEM;
        memcpy(buf, c->head, c->head_len);
        n = c->head_len;
        first = MIN(c->tail_len, EXEC_KEEP_TAIL - c->tail_start);
        memcpy(buf + n, c->tail + c->tail_start, first);
        memcpy(buf + n + first, c->tail, c->tail_len - first);
        if (cut == 0)
                /* one piece, so a character across head and tail stays whole */
                return mcp_text_append_utf8(ret, buf, n + c->tail_len, SIZE_MAX, NULL);

        r = mcp_text_append_utf8(ret, buf, n, SIZE_MAX, NULL);
        if (r >= 0)
                r = mcp_text_printf(ret, "\n[... %" PRIu64 " bytes cut here ...]\n", cut);
        if (r >= 0)
                r = mcp_text_append_utf8(ret, buf + n, c->tail_len, SIZE_MAX, NULL);
        return r;
}

typedef struct ExecRun {
        McpCall *call;
        SpaceStream *stream;
        char *processes_path;                   /* /v1/sandboxes/ID/processes */
        long pid;                               /* -1 until process_started */
        const char *stdin_data;                 /* NULL: the process reads nothing */
        size_t stdin_len, stdin_sent;
        Capture out, err;
        uint8_t *decoded;
        size_t decoded_size;
        /* output not yet sent as progress, and how it is paced */
        McpText pending;
        uint64_t pending_dropped, bytes_seen, progress_sent;
        uint64_t last_progress_usec;
        int timer_fd;
        bool timer_armed;
        /* the outcome */
        bool exited, timed_out;
        int64_t exit_code, exit_signal;
        char *error_code, *error_message;
        int fatal;                              /* < 0: the stream was malformed or we ran out of memory */
} ExecRun;

static ExecRun *exec_run_free(ExecRun *x) {
        if (!x)
                return NULL;
        space_stream_free(x->stream);
        free(x->processes_path);
        free(x->decoded);
        mcp_text_done(&x->pending);
        if (x->timer_fd >= 0)
                (void) close(x->timer_fd);
        free(x->error_code);
        free(x->error_message);
        free(x);
        return NULL;
}

static void exec_run_freep(ExecRun **x) {
        exec_run_free(*x);
}

static uint64_t now_usec(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000ULL;
}

/* Sends what output is pending as one progress message (a no-op unless the caller asked for progress). An
 * incomplete character at the end waits for its next bytes unless final. */
static int exec_progress_flush(ExecRun *x, bool final) {
        _cleanup_(mcp_text_done) McpText msg = {};
        uint64_t dropped;
        size_t keep, taken, n;
        int r;

        keep = final || x->pending_dropped ? 0 : utf8_incomplete_tail((uint8_t *) x->pending.data, x->pending.len);
        n = x->pending.len - keep;
        if (n == 0 && x->pending_dropped == 0)
                return 0;
        r = mcp_text_append_utf8(&msg, x->pending.data, n, PROGRESS_TEXT_MAX - 64, &taken);
        if (r < 0)
                return r;
        dropped = x->pending_dropped + (n - taken);
        if (dropped > 0) {
                r = mcp_text_printf(&msg, "\n[... %" PRIu64 " more bytes, in the result ...]\n", dropped);
                if (r < 0)
                        return r;
        }
        /* progress must grow: the value is the output seen, minus what waits for the next message */
        if (x->bytes_seen - keep > x->progress_sent) {
                x->progress_sent = x->bytes_seen - keep;
                mcp_call_progress(x->call, (double) x->progress_sent, 0, mcp_text_str(&msg));
        }
        memmove(x->pending.data, x->pending.data + n, keep);
        x->pending.len = keep;
        x->pending_dropped = 0;
        x->last_progress_usec = now_usec();
        return 0;
}

static int exec_timer_fired(SpaceStream *s, int fd, void *userdata) {
        ExecRun *x = userdata;
        uint64_t expirations;

        (void) !read(fd, &expirations, sizeof expirations);
        x->timer_armed = false;
        return exec_progress_flush(x, false);
}

/* Output merges into the pending message; it goes at once when the last went long enough ago, else when the
 * timer fires. */
static int exec_progress_add(ExecRun *x, const uint8_t *p, size_t n) {
        size_t k = MIN(n, PROGRESS_RAW_MAX - MIN(x->pending.len, PROGRESS_RAW_MAX));
        uint64_t now = now_usec(), due = x->last_progress_usec + PROGRESS_INTERVAL_USEC;
        int r;

        r = mcp_text_append(&x->pending, p, k);
        if (r < 0)
                return r;
        x->pending_dropped += n - k;
        x->bytes_seen += n;
        if (now >= due)
                return exec_progress_flush(x, false);
        if (x->timer_fd >= 0 && !x->timer_armed) {
                struct itimerspec its = {
                        .it_value.tv_sec = (time_t) ((due - now) / 1000000ULL),
                        .it_value.tv_nsec = (long) ((due - now) % 1000000ULL) * 1000L,
                };

                if (timerfd_settime(x->timer_fd, 0, &its, NULL) >= 0)
                        x->timer_armed = true;
        }
        return 0;
}

static int exec_output(ExecRun *x, Capture *c, const char *data, size_t len) {
        size_t need = len / 4 * 3 + 3;
        long n;

        if (need > x->decoded_size) {
                uint8_t *p = realloc(x->decoded, need);

                if (!p)
                        return x->fatal = -ENOMEM;
                x->decoded = p;
                x->decoded_size = need;
        }
        n = base64_decode(data, len, x->decoded);
        if (n < 0)
                return x->fatal = -EBADMSG;
        capture_add(c, x->decoded, (size_t) n);
        return exec_progress_add(x, x->decoded, (size_t) n) < 0 ? (x->fatal = -ENOMEM) : 0;
}

/* A POST about our process (stdin, close-stdin), queued on the stream. */
static int exec_post(ExecRun *x, const char *what, const void *body, size_t len, SpaceStreamPostDone done) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/%ld/%s", x->processes_path, x->pid, what) < 0)
                return -ENOMEM;
        return space_stream_post(x->stream, path, body ? "application/octet-stream" : NULL, body, len, done, x);
}

static int exec_stdin_next(ExecRun *x);

static void exec_stdin_done(SpaceStream *s, int r, const SpaceHttpReply *reply, void *userdata) {
        ExecRun *x = userdata;

        if (r >= 0 && space_http_reply_ok(reply) && x->stdin_sent < x->stdin_len)
                r = exec_stdin_next(x);
        else
                /* all sent, or refused (stdin_closed: the process closed it or exited): EOF either way */
                r = exec_post(x, "close-stdin", NULL, 0, NULL);
        if (r == -ENOMEM)
                space_stream_stop(s, r);
}

/* One chunk at a time: the daemon answers once the guest took it, so we never run ahead of the process. */
static int exec_stdin_next(ExecRun *x) {
        size_t n = MIN(x->stdin_len - x->stdin_sent, (size_t) EXEC_STDIN_CHUNK);
        int r;

        if (n == 0)
                return exec_post(x, "close-stdin", NULL, 0, NULL);
        r = exec_post(x, "stdin", x->stdin_data + x->stdin_sent, n, exec_stdin_done);
        if (r >= 0)
                x->stdin_sent += n;
        return r;
}

static int exec_started(ExecRun *x, const char *data, size_t len) {
        _cleanup_cjson_ cJSON *j = mcp_json_object_parse(data, len);
        int64_t pid;

        if (!j || !mcp_json_integer(j, "pid", 1, INT32_MAX, &pid) || x->pid >= 0)
                return x->fatal = -EBADMSG; /* a second one too: stdin would go twice */
        x->pid = (long) pid;
        if (x->stdin_data && exec_stdin_next(x) < 0)
                return x->fatal = -ENOMEM;
        return 0;
}

static int exec_exited(ExecRun *x, const char *data, size_t len) {
        _cleanup_cjson_ cJSON *j = mcp_json_object_parse(data, len);
        const cJSON *sig, *timed_out;

        if (!j || !mcp_json_integer(j, "exit_code", INT32_MIN, INT32_MAX, &x->exit_code))
                return x->fatal = -EBADMSG;
        sig = cJSON_GetObjectItemCaseSensitive(j, "signal");
        timed_out = cJSON_GetObjectItemCaseSensitive(j, "timed_out");
        if (sig && !cJSON_IsNull(sig) && !mcp_json_integer(j, "signal", 0, 127, &x->exit_signal))
                return x->fatal = -EBADMSG;
        if (timed_out && !cJSON_IsBool(timed_out))
                return x->fatal = -EBADMSG;
        x->timed_out = cJSON_IsTrue(timed_out);
        x->exited = true;
        return 0;
}

static int exec_error_event(ExecRun *x, const char *data, size_t len) {
        _cleanup_cjson_ cJSON *j = mcp_json_object_parse(data, len);
        const char *code = mcp_json_string(j, "code"), *message = mcp_json_string(j, "message");

        if (!code)
                return x->fatal = -EBADMSG;
        free(x->error_code);
        free(x->error_message);
        x->error_code = mcp_string_clean(code, 64);
        x->error_message = mcp_string_clean(message, 1000);
        if (!x->error_code || !x->error_message)
                return x->fatal = -ENOMEM;
        return 0;
}

static int exec_on_event(const char *event, const char *data, size_t len, const char *id, void *userdata) {
        ExecRun *x = userdata;

        if (streq(event, "stdout"))
                return exec_output(x, &x->out, data, len);
        if (streq(event, "stderr"))
                return exec_output(x, &x->err, data, len);
        if (streq(event, "process_started"))
                return exec_started(x, data, len);
        if (streq(event, "process_exited"))
                return exec_exited(x, data, len);
        if (streq(event, "error"))
                return exec_error_event(x, data, len);
        return 0; /* events of later API versions */
}

/* The process is ours to end when the call ends without its exit: SIGKILL (to its process group: the agent
 * signals the group) on the connection that is not cancelled. Best effort. */
static void exec_kill(ExecRun *x) {
        SpaceHttp *h = mcp_call_http_uncancelled(x->call);
        _cleanup_free_ char *path = NULL;
        _cleanup_cjson_ cJSON *body = NULL;
        SpaceHttpReply reply = {};

        if (!h || x->pid < 0 || x->exited)
                return;
        body = cJSON_CreateObject();
        if (!body || !cJSON_AddNumberToObject(body, "signal", SIGKILL) ||
            asprintf(&path, "%s/%ld/signal", x->processes_path, x->pid) < 0)
                return;
        if (space_http_call(h, "POST", path, body, &reply) >= 0)
                space_http_reply_done(&reply);
}

static int exec_argv(const cJSON *args, cJSON **ret_argv, cJSON **ret_error) {
        const cJSON *argv = cJSON_GetObjectItemCaseSensitive(args, "argv"), *a;
        const char *command;
        _cleanup_cjson_ cJSON *l = NULL;
        int r, n = 0;

        r = mcp_arg_string(args, "command", false, &command, ret_error);
        if (r != 0)
                return r;
        if (!!command == !!argv) {
                *ret_error = mcp_result_errorf("exec: give exactly one of command (a shell line, run with /bin/sh -c) "
                                               "and argv (an array of strings, run as it is)");
                return *ret_error ? 1 : -ENOMEM;
        }
        if (command && !*command) {
                *ret_error = mcp_result_errorf("exec: command is empty: give a shell line, e.g. command=\"ls -l\"");
                return *ret_error ? 1 : -ENOMEM;
        }
        if (command) {
                const char *sh[] = { "/bin/sh", "-c", command };

                l = cJSON_CreateStringArray(sh, 3);
                if (!l)
                        return -ENOMEM;
                *ret_argv = TAKE_PTR(l);
                return 0;
        }
        if (!cJSON_IsArray(argv) || cJSON_GetArraySize(argv) < 1 || cJSON_GetArraySize(argv) > EXEC_ARGV_MAX)
                goto invalid;
        cJSON_ArrayForEach(a, argv) {
                if (!cJSON_IsString(a) || (n++ == 0 && !*a->valuestring))
                        goto invalid;
        }
        l = cJSON_Duplicate(argv, true);
        if (!l)
                return -ENOMEM;
        *ret_argv = TAKE_PTR(l);
        return 0;
invalid:
        *ret_error = mcp_result_errorf("exec: argv must be an array of 1 to %d strings, the first the program "
                                       "(e.g. [\"ls\", \"-l\", \"/tmp\"]); or give command=\"ls -l /tmp\" instead",
                                       EXEC_ARGV_MAX);
        return *ret_error ? 1 : -ENOMEM;
}

/* The body of POST .../processes from the tool's arguments: 0, 1 with *ret_error, or -ENOMEM. */
static int exec_body(const cJSON *args, int64_t timeout, bool with_stdin, cJSON **ret_body, cJSON **ret_error) {
        _cleanup_cjson_ cJSON *b = cJSON_CreateObject();
        const char *cwd, *user;
        const cJSON *env;
        cJSON *argv = NULL;
        int r;

        if (!b)
                return -ENOMEM;
        r = exec_argv(args, &argv, ret_error);
        if (r != 0)
                return r;
        if (!cJSON_AddItemToObject(b, "argv", argv)) {
                cJSON_Delete(argv);
                return -ENOMEM;
        }
        if ((r = mcp_arg_string(args, "cwd", false, &cwd, ret_error)) != 0 ||
            (r = mcp_arg_string(args, "user", false, &user, ret_error)) != 0 ||
            (r = mcp_arg_string_map(args, "env", &env, ret_error)) != 0)
                return r;
        if (cwd && cwd[0] != '/') {
                *ret_error = mcp_result_errorf("exec: cwd must be an absolute path (e.g. /home/user), got '%.200s'",
                                               cwd);
                return *ret_error ? 1 : -ENOMEM;
        }
        if (env) {
                cJSON *e = cJSON_Duplicate(env, true);

                if (!e || !cJSON_AddItemToObject(b, "env", e)) {
                        cJSON_Delete(e);
                        return -ENOMEM;
                }
        }
        if ((cwd && !cJSON_AddStringToObject(b, "cwd", cwd)) || (user && !cJSON_AddStringToObject(b, "user", user)) ||
            !cJSON_AddBoolToObject(b, "stdin", with_stdin) || !cJSON_AddNumberToObject(b, "timeout", (double) timeout))
                return -ENOMEM;
        *ret_body = TAKE_PTR(b);
        return 0;
}

/* An exec error event as a tool error that says what to change. */
static cJSON *exec_error_result(const ExecRun *x, const char *sandbox_id) {
        const char *code = x->error_code, *hint;

        if (streq(code, "command_not_found"))
                hint = "check the program's name or give its full path; exec command=\"ls /usr/local/bin /usr/bin\" "
                       "shows what is installed";
        else if (streq(code, "invalid_cwd"))
                hint = "give an existing directory as cwd, or leave cwd out to start in the user's home";
        else if (streq(code, "permission_denied"))
                hint = "make the file executable (chmod +x) or run it through its interpreter, e.g. "
                       "command=\"sh ./script.sh\"";
        else if (streq(code, "unknown_user") || streq(code, "unknown_group"))
                hint = "give a user (and group) the sandbox's /etc/passwd (and /etc/group) has, e.g. root, or leave "
                       "user out for the template's default user";
        else if (streq(code, "channel_lost") || streq(code, "sandbox_gone") || streq(code, "process_lost"))
                hint = "the sandbox's agent went away; check the sandbox with sandbox_list, and wake it or make a new "
                       "one";
        else if (streq(code, "too_many_processes") || streq(code, "too_many_streams"))
                hint = "the sandbox runs too many processes or streams; wait for some to end, then try again";
        else
                hint = "see the message";
        return mcp_result_errorf("exec in sandbox %s failed (%s): %s; %s", sandbox_id, code, x->error_message, hint);
}

static int exec_outcome_text(const ExecRun *x, int64_t timeout, McpText *t) {
        const char *abbrev = x->exit_signal > 0 ? sigabbrev_np((int) x->exit_signal) : NULL;
        int r;

        r = mcp_text_printf(t, "exit code %" PRId64, x->exit_code);
        if (r >= 0 && x->exit_signal > 0)
                r = mcp_text_printf(t, " (killed by signal %" PRId64 "%s%s)", x->exit_signal, abbrev ? ", SIG" : "",
                                    abbrev ?: "");
        if (r >= 0 && x->timed_out)
                r = mcp_text_printf(t, ": timed out after %" PRId64 " s and was killed; raise timeout (at most %d) or "
                                    "start it in the background (nohup CMD >/tmp/out.log 2>&1 &) and check on it later",
                                    timeout, EXEC_TIMEOUT_MAX);
        return r >= 0 ? mcp_text_puts(t, "\n") : r;
}

static int exec_result(const ExecRun *x, int64_t timeout, cJSON **ret_result) {
        _cleanup_(mcp_text_done) McpText out = {}, err = {}, t = {};
        _cleanup_cjson_ cJSON *o = cJSON_CreateObject();
        int r;

        if (!o)
                return -ENOMEM;
        r = capture_text(&x->out, &out);
        if (r >= 0)
                r = capture_text(&x->err, &err);
        if (r >= 0)
                r = exec_outcome_text(x, timeout, &t);
        if (r >= 0)
                r = mcp_text_add_stream(&t, "stdout", &out);
        if (r >= 0)
                r = mcp_text_add_stream(&t, "stderr", &err);
        if (r < 0)
                return r;
        if (!cJSON_AddNumberToObject(o, "exit_code", (double) x->exit_code) ||
            !(x->exit_signal > 0 ? cJSON_AddNumberToObject(o, "signal", (double) x->exit_signal)
                                 : cJSON_AddNullToObject(o, "signal")) ||
            !cJSON_AddBoolToObject(o, "timed_out", x->timed_out) ||
            !cJSON_AddStringToObject(o, "stdout", mcp_text_str(&out)) ||
            !cJSON_AddStringToObject(o, "stderr", mcp_text_str(&err)) ||
            !cJSON_AddNumberToObject(o, "stdout_truncated_bytes", (double) capture_cut(&x->out)) ||
            !cJSON_AddNumberToObject(o, "stderr_truncated_bytes", (double) capture_cut(&x->err)))
                return -ENOMEM;
        *ret_result = mcp_result_text(mcp_text_str(&t), TAKE_PTR(o));
        return *ret_result ? 0 : -ENOMEM;
}

/* What the stream's end means for the call. */
static int exec_finish(ExecRun *x, const char *sandbox_id, int64_t timeout, int r, const SpaceHttpReply *reply,
                       cJSON **ret_result) {
        SpaceHttp *h = mcp_call_http(x->call);

        if (r == -EINTR || (r < 0 && mcp_call_cancelled(x->call))) {
                exec_kill(x);
                return -EINTR;
        }
        if (r == -ENOMEM || x->fatal == -ENOMEM) {
                exec_kill(x);
                return -ENOMEM;
        }
        if (r < 0 && x->fatal == -EBADMSG) {
                exec_kill(x);
                *ret_result = mcp_result_errorf("exec: spaced sent a malformed event on the process stream, so the "
                                                "command (pid %ld) was killed; try again, and report it if it repeats",
                                                x->pid);
        } else if (r < 0) {
                exec_kill(x);
                *ret_result = mcp_result_transport_error("exec", h, r);
        } else if (!space_http_reply_ok(reply))
                *ret_result = mcp_result_api_error("exec", reply);
        else if (x->exited) {
                if (exec_progress_flush(x, true) < 0)
                        return -ENOMEM;
                return exec_result(x, timeout, ret_result);
        } else if (x->error_code)
                *ret_result = exec_error_result(x, sandbox_id);
        else if (x->pid < 0)
                *ret_result = mcp_result_errorf("exec: the process stream from spaced ended before the command "
                                                "started; is spaced still running? Try again");
        else {
                exec_kill(x);
                *ret_result = mcp_result_errorf("exec: the process stream from spaced ended before the command "
                                                "exited; it was killed (pid %ld). Is spaced still running? Try again",
                                                x->pid);
        }
        return *ret_result ? 0 : -ENOMEM;
}

int mcp_tool_exec(McpCall *call, const cJSON *args, cJSON **ret_result) {
        _cleanup_(exec_run_freep) ExecRun *x = NULL;
        _cleanup_cjson_ cJSON *body = NULL;
        _cleanup_free_ char *id = NULL;
        SpaceHttpReply reply = {};
        const char *stdin_data;
        int64_t timeout;
        int r;

        if ((r = mcp_arg_int(args, "timeout", 1, EXEC_TIMEOUT_MAX, EXEC_TIMEOUT_DEFAULT, &timeout, ret_result)) != 0 ||
            (r = mcp_arg_string(args, "stdin", false, &stdin_data, ret_result)) != 0 ||
            (r = exec_body(args, timeout, !!stdin_data, &body, ret_result)) != 0 ||
            (r = mcp_call_sandbox_running(call, args, &id, ret_result)) != 0)
                return r < 0 ? r : 0;

        x = calloc(1, sizeof *x);
        if (!x)
                return -ENOMEM;
        *x = (ExecRun) { .call = call, .pid = -1, .timer_fd = -1, .stdin_data = stdin_data,
                         .stdin_len = stdin_data ? strlen(stdin_data) : 0 };
        if (mcp_sandbox_path(id, "/processes", &x->processes_path) < 0)
                return -ENOMEM;
        r = space_stream_new(mcp_call_http(call), x->processes_path, body, exec_on_event, x, &x->stream);
        if (r < 0)
                return r; /* -ENOMEM: it makes no connection yet */
        /* without a timer, merged output waits for the next chunk or the end: slower, still correct */
        x->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (x->timer_fd >= 0 && space_stream_watch_fd(x->stream, x->timer_fd, exec_timer_fired, x) < 0)
                x->timer_fd = safe_close(x->timer_fd);

        r = space_stream_run(x->stream, &reply);
        r = exec_finish(x, id, timeout, r, &reply, ret_result);
        space_http_reply_done(&reply);
        return r;
}
