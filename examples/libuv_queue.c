/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* libuv_queue.c -- tickwheel timers whose callbacks run on a libuv loop.
 *
 * A delivery queue (tw_queue_create) is polled by the loop: a uv_poll_t on
 * tw_queue_fd() calls tw_queue_run() when the fd is readable, so every
 * callback and release hook of the timers started with
 * tw_timer_spec.queue = q runs on the loop's thread, next to the loop's
 * other handles, without a lock or a uv_async_t round trip. The program:
 *
 *  * stops a timer that is already due (the fd is readable) but not yet
 *    run: TW_OK, the callback never runs, the release hook ran inside the
 *    stop call -- and the fd is no longer readable;
 *  * re-arms (tw_timer_reset) another due timer: it runs later, once;
 *  * runs three one-shot timers (10, 20, 30 ms), one started by another
 *    thread while the loop sleeps in epoll (the fd wakes it up), and a
 *    periodic one (every 5 ms) that stops itself after 5 runs;
 *  * checks that every callback and hook ran on the loop thread, that none
 *    ran before its deadline (CLOCK_MONOTONIC, tw_now_ns()), and that
 *    tw_queue_run() from inside a callback of its queue is TW_EDEADLK;
 *  * ends when the last timer is released (the loop then has no active
 *    handle and uv_run() returns), or after a 10 s watchdog (a failure).
 *
 * Exit status 0 if every check passed (ctest example_libuv_queue).
 * Build by hand:
 *   cc -std=c11 libuv_queue.c $(pkg-config --cflags --libs tickwheel libuv)
 */
#define _GNU_SOURCE /* uv.h wants the POSIX types (pthread_rwlock_t, ...) */
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include <tickwheel/tickwheel.h>

#define MS (UINT64_C(1000000))
#define PERIODIC_RUNS 5

static int failures = 0;
#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                              \
        }                                                                            \
    } while (0)
#define CHECK_RC(call, want)                                                                            \
    do {                                                                                                \
        int rc_ = (call);                                                                               \
        if (rc_ != (want)) {                                                                            \
            fprintf(stderr, "%s:%d: %s returned %d (%s), wanted %s\n", __FILE__, __LINE__, #call, rc_, \
                    tw_strerror(rc_), #want);                                                           \
            ++failures;                                                                                 \
        }                                                                                               \
    } while (0)

static tw_runtime *rt;
static tw_queue *q;
static uv_loop_t loop;
static uv_poll_t poller;
static uv_timer_t watchdog;
static pthread_t loop_thread;
static atomic_int off_thread; /* callbacks or hooks seen on another thread: must stay 0 */
static int remaining;         /* timers not yet released (loop thread only) */

static void check_thread(void) {
    if (!pthread_equal(pthread_self(), loop_thread)) atomic_fetch_add(&off_thread, 1);
}

/* ---- the end: close the loop's handles, uv_run() returns ----------------- */
static void finish(void) {
    if (!uv_is_closing((uv_handle_t *)&poller)) {
        uv_poll_stop(&poller);
        uv_close((uv_handle_t *)&poller, NULL);
    }
    if (!uv_is_closing((uv_handle_t *)&watchdog)) {
        uv_timer_stop(&watchdog);
        uv_close((uv_handle_t *)&watchdog, NULL);
    }
}

static void released(void) {
    if (--remaining == 0) finish(); /* inside tw_queue_run, inside the poll callback: fine for libuv */
}


/* ---- one-shot timers -------------------------------------------------------- */
struct shot {
    const char *name;
    uint64_t earliest_ns; /* tw_now_ns() before the start (or reset) + the delay */
    uint64_t ran_at_ns;
    int runs;
    int releases;
};

static void on_shot(void *arg, tw_timer id) {
    struct shot *s = arg;
    (void)id;
    check_thread();
    s->ran_at_ns = tw_now_ns();
    ++s->runs;
    /* A callback cannot run its own queue (it would re-enter itself). */
    CHECK_RC(tw_queue_run(q, 1, 0), TW_EDEADLK);
}

static void release_shot(void *arg) {
    struct shot *s = arg;
    check_thread();
    ++s->releases;
    released();
}

static void release_doomed(void *arg) { /* released before the loop runs: not counted in `remaining` */
    check_thread();
    ++((struct shot *)arg)->releases;
}

static int start_shot(struct shot *s, uint64_t delay_ns, tw_timer *id) {
    tw_timer_spec spec;
    tw_timer_spec_init(&spec);
    spec.delay_ns = delay_ns;
    spec.callback = on_shot;
    spec.release = strcmp(s->name, "doomed") == 0 ? release_doomed : release_shot;
    spec.arg = s;
    spec.queue = q;
    s->earliest_ns = tw_now_ns() + delay_ns;
    return tw_timer_start_ex(rt, &spec, id);
}

/* ---- a periodic timer that stops itself ----------------------------------- */
struct tick {
    uint64_t first_ns, period_ns; /* never early: run k no sooner than first + k * period */
    tw_timer id;
    int runs;
    int releases;
};

static void on_tick(void *arg, tw_timer id) {
    struct tick *t = arg;
    check_thread();
    CHECK(tw_now_ns() >= t->first_ns + (uint64_t)t->runs * t->period_ns);
    CHECK(id == t->id);
    if (++t->runs == PERIODIC_RUNS) {
        /* From its own callback: TW_OK, this run is the last; the release
         * hook runs right after this returns, still on this thread. */
        CHECK_RC(tw_timer_stop(rt, id), TW_OK);
    }
}

static void release_tick(void *arg) {
    struct tick *t = arg;
    check_thread();
    ++t->releases;
    released();
}

/* ---- a timer started by another thread while the loop sleeps --------------- */
struct starter {
    struct shot *s;
    int rc;
};

static void *start_from_thread(void *arg) {
    struct starter *st = arg;
    tw_timer id = 0;
    st->rc = start_shot(st->s, 20 * MS, &id);
    return NULL;
}

/* ---- the loop's side ------------------------------------------------------------ */
static void on_queue_readable(uv_poll_t *h, int status, int events) {
    (void)h;
    (void)events;
    if (status < 0) {
        fprintf(stderr, "uv_poll: %s\n", uv_strerror(status));
        ++failures;
        finish();
        return;
    }
    const int rc = tw_queue_run(q, 16, 0); /* the due callbacks run here, on the loop thread */
    if (rc < 0) {
        fprintf(stderr, "tw_queue_run: %s\n", tw_strerror(rc));
        ++failures;
        finish();
    }
}

static void on_watchdog(uv_timer_t *t) {
    (void)t;
    fprintf(stderr, "libuv_queue: timed out with %d timer(s) not released\n", remaining);
    ++failures;
    finish();
}

static int fd_readable(int timeout_ms) {
    struct pollfd p = {tw_queue_fd(q), POLLIN, 0};
    return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN) != 0;
}

static uint64_t queue_due(void) {
    tw_queue_stats qs;
    memset(&qs, 0, sizeof qs);
    qs.size = sizeof qs;
    CHECK_RC(tw_queue_get_stats(q, &qs), TW_OK);
    return qs.due;
}

int main(void) {
    loop_thread = pthread_self();
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 1;
    cfg.workers = 1;
    CHECK_RC(tw_runtime_create(&cfg, &rt), TW_OK);
    if (rt == NULL) return 1;
    CHECK_RC(tw_queue_create(rt, &q), TW_OK);
    if (q == NULL) return 1;
    CHECK(tw_queue_fd(q) >= 0);
    CHECK_RC(tw_queue_run(q, 0, 0), TW_EINVAL); /* max 0 */
    CHECK_RC(tw_queue_run(q, 8, 0), 0);         /* nothing due: returns at once */
    CHECK(!fd_readable(0));

    /* 1. Stop is exact: a due (queued) timer that is stopped never runs. */
    struct shot doomed = {"doomed", 0, 0, 0, 0};
    tw_timer doomed_id = 0;
    CHECK_RC(start_shot(&doomed, 1 * MS, &doomed_id), TW_OK);
    CHECK(fd_readable(5000)); /* it came due: the fd is readable, the callback waits for us */
    CHECK(queue_due() == 1);
    CHECK_RC(tw_timer_stop(rt, doomed_id), TW_OK);
    CHECK(doomed.releases == 1 && doomed.runs == 0); /* released inside the stop call */
    CHECK(!fd_readable(0));                           /* the last due timer taken back */
    CHECK_RC(tw_queue_run(q, 8, 0), 0);

    /* 2. Reset of a due timer re-arms it: it runs once, 30 ms after the reset. */
    struct shot rearmed = {"rearmed", 0, 0, 0, 0};
    tw_timer rearmed_id = 0;
    remaining = 1 /* rearmed */ + 3 + 1 /* periodic */; /* released inside the loop only */
    CHECK_RC(start_shot(&rearmed, 1 * MS, &rearmed_id), TW_OK);
    CHECK(fd_readable(5000));
    rearmed.earliest_ns = tw_now_ns() + 30 * MS;
    CHECK_RC(tw_timer_reset(rt, rearmed_id, 30 * MS), TW_OK);
    CHECK(!fd_readable(0));

    /* 3. One-shots, one started from another thread, and a periodic timer. */
    struct shot shots[3] = {{"10ms", 0, 0, 0, 0}, {"30ms", 0, 0, 0, 0}, {"from-thread", 0, 0, 0, 0}};
    tw_timer ids[2];
    CHECK_RC(start_shot(&shots[0], 10 * MS, &ids[0]), TW_OK);
    CHECK_RC(start_shot(&shots[1], 30 * MS, &ids[1]), TW_OK);

    struct tick tick = {0, 5 * MS, 0, 0, 0};
    tw_timer_spec spec;
    tw_timer_spec_init(&spec);
    spec.delay_ns = 5 * MS;
    spec.period_ns = 5 * MS;
    spec.callback = on_tick;
    spec.release = release_tick;
    spec.arg = &tick;
    spec.queue = q;
    tick.first_ns = tw_now_ns() + 5 * MS;
    CHECK_RC(tw_timer_start_ex(rt, &spec, &tick.id), TW_OK);

    CHECK(uv_loop_init(&loop) == 0);
    CHECK(uv_poll_init(&loop, &poller, tw_queue_fd(q)) == 0);
    CHECK(uv_poll_start(&poller, UV_READABLE, on_queue_readable) == 0);
    CHECK(uv_timer_init(&loop, &watchdog) == 0);
    CHECK(uv_timer_start(&watchdog, on_watchdog, 10000, 0) == 0);

    struct starter starter = {&shots[2], -1};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, start_from_thread, &starter) == 0);

    const uint64_t t0 = tw_now_ns();
    uv_run(&loop, UV_RUN_DEFAULT); /* until finish() closed the handles */
    const double loop_ms = (double)(tw_now_ns() - t0) / 1e6;
    CHECK(uv_loop_close(&loop) == 0);
    pthread_join(th, NULL);
    CHECK_RC(starter.rc, TW_OK);

    /* Every timer ran (the periodic PERIODIC_RUNS times), once, never early, and was released once. */
    CHECK(remaining == 0);
    CHECK(doomed.runs == 0 && doomed.releases == 1);
    struct shot *all[] = {&rearmed, &shots[0], &shots[1], &shots[2]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
        struct shot *s = all[i];
        CHECK(s->runs == 1 && s->releases == 1);
        if (s->runs == 1 && s->ran_at_ns < s->earliest_ns)
            fprintf(stderr, "libuv_queue: %s ran %" PRIu64 " ns early\n", s->name, s->earliest_ns - s->ran_at_ns);
        CHECK(s->ran_at_ns >= s->earliest_ns);
        printf("%-12s ran %.3f ms after its deadline\n", s->name, (double)(s->ran_at_ns - s->earliest_ns) / 1e6);
    }
    CHECK(tick.runs == PERIODIC_RUNS && tick.releases == 1);
    CHECK(atomic_load(&off_thread) == 0);

    tw_queue_stats qs;
    memset(&qs, 0, sizeof qs);
    qs.size = sizeof qs;
    CHECK_RC(tw_queue_get_stats(q, &qs), TW_OK);
    CHECK(qs.ran == 4 + PERIODIC_RUNS && qs.due == 0 && qs.runners == 0);
    CHECK_RC(tw_queue_destroy(q), TW_OK);
    tw_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    CHECK_RC(tw_runtime_stats(rt, &st), TW_OK);
    CHECK(st.fired == 4 + PERIODIC_RUNS && st.stopped == 2 && st.reset == 1 && st.live == 0);
    CHECK_RC(tw_runtime_destroy(rt), TW_OK);

    printf("libuv_queue: loop ran %.1f ms; queue ran %" PRIu64 " callbacks (run lateness p50 %" PRIu64
           " us, max %" PRIu64 " us); off-thread %d; %s\n",
           loop_ms, qs.ran, qs.run_p50_ns / 1000, qs.run_max_ns / 1000, atomic_load(&off_thread),
           failures == 0 ? "all checks passed" : "FAILED");
    return failures == 0 ? 0 : 1;
}
