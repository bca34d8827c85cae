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

typedef struct Progress {
        const char *label;
        bool show, drawn;
        double started;
        Rate rate;
} Progress;

static void progress_wipe(void *userdata) {
        Progress *p = userdata;

        if (p->drawn)
                fputs("\r\033[K", stderr);
        p->drawn = false;
}

/* After each answer that shows the operation still running: redraw, then give the user's signal its say. */
static int progress_draw(const cJSON *op, long *wait_sec, void *userdata) {
        Progress *p = userdata;

        if (!op)
                return 0;
        if (p->show) {
                draw(p->label, op, p->started, &p->rate);
                p->drawn = true;
                usleep(DRAW_INTERVAL_MS * 1000);
        }
        return cli_signal_received ? -EINTR : 0;
}

int cli_operation_wait_progress(const char *op_id, const char *label, bool quiet, cJSON **ret_result) {
        Progress p = { .label = label, .show = !quiet && isatty(STDERR_FILENO), .started = now_sec() };
        cJSON *cur = NULL;
        int r;

        /* drawing: short polls; otherwise long-polls, which answer as soon as it ends */
        r = cli_operation_wait(&(OperationWait) { .id = op_id, .poll_sec = p.show ? 0 : LONG_POLL_SEC,
                                                  .quiet_interrupt = true, .progress = progress_draw,
                                                  .wipe = progress_wipe, .userdata = &p },
                               &cur);
        progress_wipe(&p);
        fflush(stderr);
        if (r >= 0)
                r = cli_operation_check(cur);
        else if (r == -EINTR)
                log_error("interrupted; operation %s goes on ('spacectl op show %s' follows it)", op_id, op_id);
        if (r >= 0 && ret_result) {
                cJSON *res = cJSON_GetObjectItemCaseSensitive(cur, "result");
                *ret_result = res ? cJSON_Duplicate(res, true) : cJSON_CreateObject();
        }
        cJSON_Delete(cur);
        return r;
}
