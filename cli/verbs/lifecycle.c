/* SPDX-License-Identifier: Apache-2.0 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "macro.h"

/* The lifecycle verbs start an operation and follow it. Suspends and checkpoints can take long (the whole RAM
 * is written), so on a terminal, from the first second on, they show a spinner with the seconds spent and
 * the bytes written so far, which the daemon reports as the operation's progress. */

/* Before the first second: long polls, which return at once when the operation ends. After: a redraw this
 * often. */
#define SPIN_POLL_SEC 1
#define SPIN_REDRAW_MS 200

/* "  written 123.4 of ~270.0 MiB, 85.3 MB/s" from the operation's progress, or "" */
static void format_written(const cJSON *op, double t, char *buf, size_t size) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(op, "progress");
        double done, total;

        buf[0] = 0;
        if (!json_num(p, "bytes_done", &done) || done <= 0)
                return;
        if (!json_num(p, "bytes_total", &total) || total < done)
                total = done;
        snprintf(buf, size, "  written %.1f of ~%.1f MiB, %.1f MB/s", done / 1048576, total / 1048576,
                 t > 0 ? done / t / 1e6 : 0);
}

int cli_get_quiet(const char *path, SpaceHttpReply *ret) {
        SpaceHttpReply reply = {};
        SpaceHttp *h;
        int r;

        h = cli_http();
        if (!h)
                return -ENOTCONN;
        r = space_http_call(h, "GET", path, NULL, &reply);
        if (r == -ENOMEM) {
                log_error("out of memory");
                return r;
        }
        if (r < 0) {
                cli_log_transport_error(h, r);
                return r;
        }
        if (!space_http_reply_ok(&reply)) {
                r = reply.status == 404 ? -ENOENT : -EBADMSG;
                space_http_reply_done(&reply);
                return r;
        }
        *ret = reply;
        return 0;
}

int cli_checkpoint_path(const char *ref, const char *suffix, char **ret) {
        _cleanup_free_ char *e = NULL;
        int r;

        r = space_http_escape(ref, &e);
        if (r < 0)
                return r;
        if (asprintf(ret, "/v1/checkpoints/%s%s", e, suffix ?: "") < 0)
                return -ENOMEM;
        return 0;
}

static double elapsed_sec(const struct timespec *start) {
        struct timespec now;

        clock_gettime(CLOCK_MONOTONIC, &now);
        return (double) (now.tv_sec - start->tv_sec) + (double) (now.tv_nsec - start->tv_nsec) / 1e9;
}

typedef struct Spinner {
        const char *label;
        struct timespec start;
        bool drawn;
        unsigned tick;
} Spinner;

static void spinner_wipe(void *userdata) {
        Spinner *s = userdata;

        if (s->drawn)
                fputs("\r\033[K", stderr); /* the message starts on a clean line */
        s->drawn = false;
}

/* "⠋ suspending SB… 3 s" on stderr from the first second on; until then long polls of a second. */
static int spinner_draw(const cJSON *op, long *wait_sec, void *userdata) {
        static const char *const frames[] = { "|", "/", "-", "\\" };
        Spinner *s = userdata;
        double t = elapsed_sec(&s->start);

        if (t >= 1.0) {
                char written[96];

                format_written(op, t, written, sizeof written);
                fprintf(stderr, "\r%s %s... %.0f s%s\033[K", frames[s->tick++ % ELEMENTSOF(frames)], s->label, t,
                        written);
                fflush(stderr);
                if (s->drawn)
                        (void) usleep(SPIN_REDRAW_MS * 1000);
                s->drawn = true;
        }
        *wait_sec = s->drawn ? 0 : SPIN_POLL_SEC;
        return 0;
}

/* Follows op with the spinner; no limit but the daemon's own. */
static int wait_with_spinner(const cJSON *op, const char *label, cJSON **ret_op) {
        Spinner s = { .label = label };
        cJSON *cur = NULL;
        int r;

        clock_gettime(CLOCK_MONOTONIC, &s.start);
        r = cli_operation_wait(&(OperationWait) { .id = json_str(op, "id"), .op = op, .poll_sec = SPIN_POLL_SEC,
                                                  .progress = spinner_draw, .wipe = spinner_wipe, .userdata = &s },
                               &cur);
        spinner_wipe(&s);
        if (r >= 0)
                r = cli_operation_check(cur);
        if (r < 0) {
                cJSON_Delete(cur);
                return r;
        }
        if (ret_op)
                *ret_op = cur;
        else
                cJSON_Delete(cur);
        return 0;
}

int cli_lifecycle(const LifecycleRequest *q, cJSON **ret_op) {
        SpaceHttpReply reply = {};
        const cJSON *op;
        cJSON *final = NULL;
        int r;

        if (ret_op)
                *ret_op = NULL;
        r = cli_call(q->method, q->path, q->body, &reply);
        if (r < 0)
                return r;

        /* {"operation", "sandbox"} for pause..wake and restore; the Operation itself for checkpoint and fork */
        op = cJSON_GetObjectItemCaseSensitive(reply.json, "operation");
        if (!cJSON_IsObject(op))
                op = reply.json;
        if (!json_str(op, "id")) {
                log_error("the daemon started the operation but did not say its id");
                space_http_reply_done(&reply);
                return -EBADMSG;
        }

        if (q->async) {
                r = q->json ? cli_print_json(op) : (printf("%s\n", json_str(op, "id")) < 0 ? -EIO : 0);
                space_http_reply_done(&reply);
                return r >= 0 && fflush(stdout) == 0 ? 0 : -EIO;
        }

        if (q->progress && isatty(STDERR_FILENO))
                r = wait_with_spinner(op, q->progress, &final);
        else
                r = cli_wait_operation(op, &final);
        space_http_reply_done(&reply);
        if (r < 0) {
                cJSON_Delete(final); /* cli_wait_operation() hands out a failed operation too */
                return r;
        }
        if (ret_op)
                *ret_op = final;
        else
                cJSON_Delete(final);
        return 0;
}

/* pause, resume, suspend, wake: POST /v1/sandboxes/{ref}/ACTION for each SANDBOX, printing its id when done. */
int cli_lifecycle_verb(int argc, char *argv[], const char *action, const char *progress) {
        bool async = false, quiet = false, failed = false;
        _cleanup_free_ char *suffix = NULL;
        int r;
        const CliOption options[] = {
                CLI_FLAG("async", 0, &async),
                CLI_FLAG("quiet", 'q', &quiet),
        };

        r = cli_parse_options(argc, argv, options, ELEMENTSOF(options), 0);
        if (r >= 0)
                return r;
        if (optind >= argc)
                return cli_usage_error("%s needs at least one SANDBOX", action);
        if (asprintf(&suffix, "/%s", action) < 0) {
                log_error("out of memory");
                return EXIT_FAIL;
        }

        for (int i = optind; i < argc; i++) {
                _cleanup_free_ char *path = NULL, *label = NULL;
                cJSON *op = NULL;
                const char *id;

                if (!*argv[i]) {
                        log_error("an empty SANDBOX names nothing");
                        failed = true;
                        continue;
                }
                if (cli_sandbox_path(argv[i], suffix, &path) < 0 ||
                    (progress && asprintf(&label, "%s %s", progress, argv[i]) < 0)) {
                        log_error("out of memory");
                        return EXIT_FAIL;
                }
                r = cli_lifecycle(&(LifecycleRequest) { .method = "POST", .path = path, .async = async,
                                                        .progress = quiet ? NULL : label },
                                  &op);
                if (r < 0) {
                        failed = true;
                        if (!cli_http())
                                break; /* no daemon: the rest would fail the same way */
                        continue;
                }
                if (!async) {
                        id = json_str(op, "sandbox_id");
                        printf("%s\n", id ?: argv[i]);
                        fflush(stdout);
                }
                cJSON_Delete(op);
        }
        return failed ? EXIT_FAIL : 0;
}
