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

/* Waiting for an operation that reports progress (imports, builds): one line on stderr, redrawn in place
 * while stderr is a terminal:
 *   importing team/py:3.12  layers 2/3  [#########...........]  45%  123.4/270.0 MiB  85.3 MB/s
 * and nothing at all otherwise or with quiet, so that scripts and logs stay clean. */

#define DRAW_INTERVAL_MS 200
#define LONG_POLL_SEC 30
#define BAR_WIDTH 20

static double now_sec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

typedef struct Rate {
        char phase[16];
        double t0;           /* when this phase was first seen */
        double bytes0;
} Rate;

static void draw(const char *label, const cJSON *op, double started, Rate *rate) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(op, "progress");
        const char *phase = json_str(p, "phase") ?: json_str(op, "state") ?: "waiting";
        double done = 0, total = 0, layer = 0, layers = 0, t = now_sec();
        char bar[BAR_WIDTH + 1], layer_s[32] = "", bytes_s[64] = "", rate_s[32] = "", pct_s[8] = "";

        (void) json_num(p, "bytes_done", &done);
        (void) json_num(p, "bytes_total", &total);
        (void) json_num(p, "layer", &layer);
        (void) json_num(p, "layers", &layers);

        /* the rate over the phase so far: each phase has its own pace (reading vs writing the image) */
        if (!streq(rate->phase, phase) || done < rate->bytes0) {
                snprintf(rate->phase, sizeof rate->phase, "%s", phase);
                rate->t0 = t;
                rate->bytes0 = done;
        }
        if (layers > 0 && streq(phase, "layers"))
                snprintf(layer_s, sizeof layer_s, " %.0f/%.0f", layer, layers);
        if (total > 0) {
                double f = done / total;
                unsigned fill = (unsigned) (f > 1 ? BAR_WIDTH : f * BAR_WIDTH);
                for (unsigned i = 0; i < BAR_WIDTH; i++)
                        bar[i] = i < fill ? '#' : '.';
                bar[BAR_WIDTH] = 0;
                snprintf(pct_s, sizeof pct_s, "%3.0f%%", f > 1 ? 100 : f * 100);
                snprintf(bytes_s, sizeof bytes_s, "  %.1f/%.1f MiB", done / 1048576, total / 1048576);
                if (t - rate->t0 >= 0.3 && done > rate->bytes0)
                        snprintf(rate_s, sizeof rate_s, "  %.1f MB/s", (done - rate->bytes0) / (t - rate->t0) / 1e6);
        } else {
                for (unsigned i = 0; i < BAR_WIDTH; i++)
                        bar[i] = (unsigned) ((t - started) * 5) % BAR_WIDTH == i ? '#' : '.';
                bar[BAR_WIDTH] = 0;
                snprintf(pct_s, sizeof pct_s, "%.0fs", t - started);
        }
        fprintf(stderr, "\r%s  %s%s  [%s]  %s%s%s\033[K", label, phase, layer_s, bar, pct_s, bytes_s, rate_s);
        fflush(stderr);
}

int cli_operation_wait_progress(const char *op_id, const char *label, bool quiet, cJSON **ret_result) {
        _cleanup_free_ char *eid = NULL;
        bool show = !quiet && isatty(STDERR_FILENO), drawn = false;
        double started = now_sec();
        Rate rate = {};
        SpaceHttp *h = cli_http();
        cJSON *cur = NULL;
        int r = 0;

        if (!h)
                return -ENOTCONN;
        if (!op_id || space_http_escape(op_id, &eid) < 0) {
                log_error("the daemon answered with an operation without an id");
                return -EBADMSG;
        }
        for (;;) {
                _cleanup_free_ char *path = NULL;
                SpaceHttpReply reply = {};
                const char *state;

                /* drawing: short polls; otherwise long-polls, which answer as soon as it ends */
                if (asprintf(&path, show ? "/v1/operations/%s" : "/v1/operations/%s?wait=%d", eid, LONG_POLL_SEC) < 0) {
                        r = -ENOMEM;
                        break;
                }
                r = space_http_call(h, "GET", path, NULL, &reply);
                if (r < 0) {
                        if (drawn)
                                fputs("\r\033[K", stderr);
                        drawn = false;
                        if (r != -EINTR)
                                cli_log_transport_error(h, r);
                        break;
                }
                if (!space_http_reply_ok(&reply) || !cJSON_IsObject(reply.json)) {
                        if (drawn)
                                fputs("\r\033[K", stderr);
                        drawn = false;
                        log_error("%s", reply.error_message ?: "the daemon's answer is not an operation");
                        space_http_reply_done(&reply);
                        r = -EBADMSG;
                        break;
                }
                cJSON_Delete(cur);
                cur = TAKE_PTR(reply.json);
                space_http_reply_done(&reply);
                state = json_str(cur, "state");
                if (streq_ptr(state, "succeeded") || streq_ptr(state, "failed"))
                        break;
                if (show) {
                        draw(label, cur, started, &rate);
                        drawn = true;
                        usleep(DRAW_INTERVAL_MS * 1000);
                }
                if (cli_signal_received) {
                        r = -EINTR;
                        break;
                }
        }
        if (drawn)
                fputs("\r\033[K", stderr);
        fflush(stderr);
        if (r >= 0 && streq_ptr(json_str(cur, "state"), "failed")) {
                const cJSON *err = cJSON_GetObjectItemCaseSensitive(cur, "error");
                log_error("%s", json_str(err, "message") ?: "the operation failed without saying why; see spaced's log");
                r = -EIO;
        } else if (r == -EINTR)
                log_error("interrupted; operation %s goes on ('spacectl op show %s' follows it)", op_id, op_id);
        if (r >= 0 && ret_result) {
                cJSON *res = cJSON_GetObjectItemCaseSensitive(cur, "result");
                *ret_result = res ? cJSON_Duplicate(res, true) : cJSON_CreateObject();
        }
        cJSON_Delete(cur);
        return r;
}
