/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* An out-of-tree program using an installed tickwheel through its C API.
 * Prints "consumer: OK" and exits 0 when a one-shot timer fired and the
 * runtime's Prometheus metrics (tw_runtime_metrics, TICKWHEEL_1.1) count it,
 * and a timer started on a delivery queue (tw_queue_*, TICKWHEEL_1.2) ran
 * inside tw_queue_run on this thread after its fd polled readable, and the
 * timer model's calls (TICKWHEEL_1.3) answer: a periodic timer of a group
 * is queried, moved to an absolute deadline and stopped with its group; a
 * wall-clock timer on a manual-clock runtime fires inside tw_runtime_advance;
 * and the batch calls (TICKWHEEL_1.4) start, re-arm and stop three timers,
 * a refused spec and a stale id among them; and the pinned 1.5 API
 * (TICKWHEEL_1.5): tw_config.name labels the metrics, and
 * tw_last_error_message() names the argument and the limit of a refused
 * delay, and is "" after a success. */
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tickwheel/tickwheel.h>

static void on_fire(void *arg, tw_timer id) {
    (void)id;
    atomic_store((atomic_int *)arg, 1);
}

/* Prints the message (printf's format and arguments) on stderr, destroys rt
 * and answers 1, the exit status of a failed check. */
__attribute__((format(printf, 2, 3))) static int fail(tw_runtime *rt, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    tw_runtime_destroy(rt);
    return 1;
}

int main(void) {
    if (tw_version() != TW_VERSION) {
        fprintf(stderr, "consumer: header %#x, library %#x\n", (unsigned)TW_VERSION, (unsigned)tw_version());
        return 1;
    }
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 1;
    cfg.workers = 1;
    cfg.name = "consumer";
    tw_runtime *rt = NULL;
    int rc = tw_runtime_create(&cfg, &rt);
    if (rc != TW_OK) {
        fprintf(stderr, "consumer: tw_runtime_create: %s\n", tw_strerror(rc));
        return 1;
    }
    atomic_int fired = 0;
    tw_timer id = 0;
    rc = tw_timer_start(rt, 1000000 /* 1 ms */, 0, on_fire, &fired, &id);
    if (rc != TW_OK) {
        return fail(rt, "consumer: tw_timer_start: %s\n", tw_strerror(rc));
    }
    const uint64_t give_up = tw_now_ns() + 10ull * 1000000000ull;
    while (!atomic_load(&fired) && tw_now_ns() < give_up) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    /* The pinned metrics call: cap 0 with NULL sizes, cap 1 writes "", then
     * the whole text, which counts the timer that fired. */
    const int len = tw_runtime_metrics(rt, NULL, 0);
    char one = 'x';
    char *text = len > 0 ? malloc((size_t)len + 1) : NULL;
    if (len <= 0 || text == NULL || tw_runtime_metrics(rt, &one, 1) != len || one != '\0' ||
        tw_runtime_metrics(rt, text, (size_t)len + 1) < len ||
        strstr(text, "tickwheel_timers_started_total{runtime=\"consumer\"} 1\n") == NULL ||
        strstr(text, "tickwheel_build_info{runtime=\"consumer\",version=\"") == NULL) {
        fprintf(stderr, "consumer: tw_runtime_metrics: %d\n%s\n", len, text != NULL ? text : "");
        free(text);
        tw_runtime_destroy(rt);
        return 1;
    }
    free(text);
    /* The pinned error detail (1.5). */
    {
        tw_timer bad = 0;
        const char *msg;
        if (tw_timer_start(rt, TW_MAX_DELAY_NS + 1, 0, on_fire, &fired, &bad) != TW_EINVAL) {
            return fail(rt, "consumer: a delay above TW_MAX_DELAY_NS was not TW_EINVAL\n");
        }
        msg = tw_last_error_message();
        if (msg == NULL || strstr(msg, "tw_timer_start") == NULL || strstr(msg, "delay_ns") == NULL ||
            strstr(msg, "TW_MAX_DELAY_NS") == NULL || strstr(msg, "1152921504606846977") == NULL) {
            return fail(rt, "consumer: tw_last_error_message: \"%s\"\n", msg != NULL ? msg : "(null)");
        }
        if (tw_timer_stop(rt, id) != TW_ENOENT || tw_last_error_message()[0] != '\0') {
            return fail(rt, "consumer: after TW_ENOENT: \"%s\"\n", tw_last_error_message());
        }
    }
    /* The pinned delivery-queue calls. */
    tw_queue *q = NULL;
    atomic_int on_queue = 0;
    tw_timer_spec spec;
    tw_timer_spec_init(&spec);
    spec.delay_ns = 1000000;
    spec.callback = on_fire;
    spec.arg = &on_queue;
    rc = tw_queue_create(rt, &q);
    spec.queue = q;
    if (rc != TW_OK || tw_timer_start_ex(rt, &spec, &id) != TW_OK) {
        return fail(rt, "consumer: tw_queue_create / tw_timer_start_ex on a queue failed\n");
    }
    struct pollfd pfd = {tw_queue_fd(q), POLLIN, 0};
    const int readable = poll(&pfd, 1, 10000);
    const int not_yet = atomic_load(&on_queue); /* nothing runs outside tw_queue_run */
    const int ran = tw_queue_run(q, 8, (int64_t)-1);
    if (readable != 1 || not_yet != 0 || ran != 1 || atomic_load(&on_queue) != 1 || tw_queue_destroy(q) != TW_OK) {
        return fail(rt, "consumer: delivery queue: readable %d, ran %d\n", readable, ran);
    }
    /* The pinned timer-model calls. */
    tw_timer_spec_init(&spec);
    spec.delay_ns = 3600ull * 1000000000ull;
    spec.period_ns = 1000000;
    spec.period_policy = TW_PERIOD_DELAY;
    spec.leeway_ns = 2000000;
    spec.group = 42;
    spec.callback = on_fire;
    spec.arg = &on_queue;
    tw_timer_info info;
    tw_timer_info_init(&info);
    if (tw_timer_start_ex(rt, &spec, &id) != TW_OK || tw_timer_query(rt, id, &info) != TW_OK ||
        info.state != TW_TIMER_PENDING || info.group != 42 || info.period_ns != 1000000 ||
        tw_timer_reset_at(rt, id, tw_now_ns() + 7200ull * 1000000000ull) != TW_OK ||
        tw_group_stop(rt, 42, TW_SYNC) != 1 || tw_timer_query(rt, id, &info) != TW_ENOENT) {
        return fail(rt, "consumer: timer model: query / reset_at / group stop failed\n");
    }
    /* The pinned clock calls: a wall-clock timer on a manual runtime fires
     * inside tw_runtime_advance, on this thread, once its clock reaches it. */
    {
        tw_runtime *mrt = NULL;
        atomic_int on_manual = 0;
        tw_config mcfg;
        tw_config_init(&mcfg);
        mcfg.flags = TW_CONFIG_MANUAL_CLOCK;
        tw_timer_spec_init(&spec);
        spec.clock = TW_CLOCK_REALTIME;
        spec.callback = on_fire;
        spec.arg = &on_manual;
        if (tw_now_ns_clock(TW_CLOCK_BOOTTIME) == 0 || tw_now_ns_clock(99) != 0 ||
            tw_runtime_create(&mcfg, &mrt) != TW_OK) {
            return fail(rt, "consumer: clocks: tw_now_ns_clock / manual runtime failed\n");
        }
        const uint64_t t0 = tw_runtime_now_ns(mrt, TW_CLOCK_REALTIME);
        spec.deadline_ns = t0 + 30ull * 1000000000ull;
        const int started = tw_timer_start_ex(mrt, &spec, &id);
        const int before = tw_runtime_advance(mrt, 29ull * 1000000000ull);
        const int after = tw_runtime_advance(mrt, 1000000000ull);
        const uint64_t moved = tw_runtime_now_ns(mrt, TW_CLOCK_REALTIME) - t0;
        const int not_manual = tw_runtime_advance(rt, 1);
        if (started != TW_OK || before != 0 || after != 1 || atomic_load(&on_manual) != 1 ||
            moved != 30ull * 1000000000ull || not_manual != TW_EINVAL || tw_runtime_destroy(mrt) != TW_OK) {
            return fail(rt, "consumer: manual clock: start %d, advances %d %d, moved %llu\n", started, before, after,
                    (unsigned long long)moved);
        }
    }
    /* The pinned batch calls: three specs (the middle one refused: no
     * callback), re-armed and stopped with a stale id among them. */
    {
        tw_timer_spec specs[3];
        tw_timer ids[3] = {1, 1, 1};
        int results[4] = {1, 1, 1, 1};
        int i;
        for (i = 0; i < 3; ++i) {
            tw_timer_spec_init(&specs[i]);
            specs[i].delay_ns = 3600ull * 1000000000ull;
            specs[i].callback = i == 1 ? NULL : on_fire;
            specs[i].arg = &fired;
        }
        const int started = tw_timer_start_n(rt, specs, 3, ids);
        const tw_timer batch[4] = {ids[0], ids[2], 0, ids[0]};
        const int rearmed = tw_timer_reset_n(rt, batch, 2, 7200ull * 1000000000ull, results);
        const int stopped = tw_timer_stop_n(rt, batch, 4, results);
        if (started != 2 || ids[0] == 0 || ids[1] != 0 || ids[2] == 0 || rearmed != 2 || stopped != 2 ||
            results[0] != TW_OK || results[1] != TW_OK || results[2] != TW_ENOENT || results[3] != TW_ENOENT ||
            tw_timer_stop_n(rt, NULL, 0, NULL) != 0 || tw_timer_reset_n(NULL, batch, 1, 0, NULL) != TW_EINVAL) {
            return fail(rt, "consumer: batches: started %d, re-armed %d, stopped %d\n", started, rearmed, stopped);
        }
    }
    rc = tw_runtime_destroy(rt);
    if (!atomic_load(&fired) || rc != TW_OK) {
        fprintf(stderr, "consumer: the timer did not fire (destroy: %s)\n", tw_strerror(rc));
        return 1;
    }
    printf("consumer: OK (tickwheel %u.%u.%u)\n", tw_version() >> 16, (tw_version() >> 8) & 0xffu,
           tw_version() & 0xffu);
    return 0;
}
