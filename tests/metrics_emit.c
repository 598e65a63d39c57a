/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* metrics_emit: the metrics of two runtimes of one process, for the test
 * with a real Prometheus parser (tests/check_prometheus_client.py, ctest
 * metrics_prometheus_client). Runtime "app" fires 3 timers; runtime
 * LIB_NAME (a name with a quote, a backslash and a newline: label escaping)
 * fires 2 and runs 1 on a delivery queue that stays alive.
 *   metrics_emit concat     tw_runtime_metrics(app) then tw_runtime_metrics(lib)
 *   metrics_emit combined   tw_runtimes_metrics({app, lib})
 * Exit status 0 with the text on stdout; 1 with the reason on stderr. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tickwheel/tickwheel.h>

#define LIB_NAME "lib \"q\" \\ x\nnl"

static void nop(void *arg, tw_timer id) {
    (void)arg;
    (void)id;
}

static int make(const char *name, tw_runtime **rt) {
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 1;
    cfg.workers = 1;
    cfg.name = name;
    return tw_runtime_create(&cfg, rt);
}

/* Waits until rt's callbacks ran `n` times (at most 10 s). */
static int wait_fired(tw_runtime *rt, uint64_t n) {
    const uint64_t give_up = tw_now_ns() + 10000000000ull;
    for (;;) {
        tw_stats st;
        tw_stats_init(&st);
        if (tw_runtime_stats(rt, &st) != TW_OK) return -1;
        if (st.fired >= n && st.live == 0) return 0;
        if (tw_now_ns() > give_up) return -1;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

static char *text_of(int len) { return len >= 0 ? malloc((size_t)len + 1) : NULL; }

int main(int argc, char **argv) {
    const int combined = argc == 2 && strcmp(argv[1], "combined") == 0;
    if (argc != 2 || (!combined && strcmp(argv[1], "concat") != 0)) {
        fprintf(stderr, "usage: metrics_emit concat|combined\n");
        return 1;
    }
    tw_runtime *rts[2] = {NULL, NULL};
    if (make("app", &rts[0]) != TW_OK || make(LIB_NAME, &rts[1]) != TW_OK) {
        fprintf(stderr, "metrics_emit: tw_runtime_create: %s\n", tw_last_error_message());
        return 1;
    }
    tw_timer id;
    int i;
    for (i = 0; i < 3; ++i)
        if (tw_timer_start(rts[0], 1000000, 0, nop, NULL, &id) != TW_OK) return 1;
    for (i = 0; i < 2; ++i)
        if (tw_timer_start(rts[1], 1000000, 0, nop, NULL, &id) != TW_OK) return 1;
    tw_queue *q = NULL;
    tw_timer_spec spec;
    tw_timer_spec_init(&spec);
    spec.callback = nop;
    spec.delay_ns = 1000000;
    if (tw_queue_create(rts[1], &q) != TW_OK) return 1;
    spec.queue = q;
    if (tw_timer_start_ex(rts[1], &spec, &id) != TW_OK) return 1;
    if (tw_queue_run(q, 16, 10000000000ll) != 1) {
        fprintf(stderr, "metrics_emit: the queue's timer did not run\n");
        return 1;
    }
    if (wait_fired(rts[0], 3) != 0 || wait_fired(rts[1], 3) != 0) {
        fprintf(stderr, "metrics_emit: the timers did not fire within 10 s\n");
        return 1;
    }
    int rc = 0;
    if (combined) {
        const int len = tw_runtimes_metrics(rts, 2, NULL, 0);
        char *text = text_of(len + 1024);
        if (text == NULL || tw_runtimes_metrics(rts, 2, text, (size_t)len + 1024) < 0) rc = 1;
        else fputs(text, stdout);
        free(text);
    } else {
        for (i = 0; i < 2 && rc == 0; ++i) {
            const int len = tw_runtime_metrics(rts[i], NULL, 0);
            char *text = text_of(len + 1024);
            if (text == NULL || tw_runtime_metrics(rts[i], text, (size_t)len + 1024) < 0) rc = 1;
            else fputs(text, stdout);
            free(text);
        }
    }
    if (rc != 0) fprintf(stderr, "metrics_emit: %s\n", tw_last_error_message());
    tw_queue_destroy(q);
    tw_runtime_destroy(rts[0]);
    tw_runtime_destroy(rts[1]);
    return rc;
}
