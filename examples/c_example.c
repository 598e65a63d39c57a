/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* c_example.c -- using tickwheel from C11 through its C API.
 *
 * Also a test (ctest capi_c_example): every CHECK that fails is printed, and
 * the program exits non-zero if any did.
 *
 * Build by hand against an installed tickwheel:
 *   cc -std=c11 c_example.c $(pkg-config --cflags --libs tickwheel)
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <tickwheel/tickwheel.h>

#define MS (UINT64_C(1000000))

static int failures = 0;
#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                     \
        }                                                                   \
    } while (0)
#define CHECK_RC(call, want)                                                \
    do {                                                                    \
        int rc_ = (call);                                                   \
        if (rc_ != (want)) {                                                \
            fprintf(stderr, "%s:%d: %s returned %d (%s), wanted %s\n", __FILE__, __LINE__, #call, rc_, \
                    tw_strerror(rc_), #want);                               \
            ++failures;                                                     \
        }                                                                   \
    } while (0)

static void sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits until *v >= want or 10 s pass; returns whether it got there. */
static int wait_for(atomic_int *v, int want) {
    const uint64_t give_up = tw_now_ns() + 10000 * MS;
    while (atomic_load(v) < want) {
        if (tw_now_ns() > give_up) return 0;
        sleep_ms(1);
    }
    return 1;
}

/* ---- a one-shot timer: the deadline is never early ------------------------ */
struct shot {
    uint64_t deadline_ns; /* the earliest the callback may run */
    uint64_t ran_at_ns;
    tw_timer id_seen;
    atomic_int fired;
};

static void on_shot(void *arg, tw_timer id) {
    struct shot *s = arg;
    s->ran_at_ns = tw_now_ns();
    s->id_seen = id;
    atomic_fetch_add(&s->fired, 1);
}

/* ---- a heap-owned context freed by its release hook ------------------------ */
struct owned {
    atomic_int *runs;
    atomic_int *released;
};

static void on_owned(void *arg, tw_timer id) {
    struct owned *o = arg;
    (void)id;
    atomic_fetch_add(o->runs, 1);
}

static void release_owned(void *arg) {
    struct owned *o = arg;
    atomic_fetch_add(o->released, 1);
    free(o);
}

static struct owned *new_owned(atomic_int *runs, atomic_int *released) {
    struct owned *o = malloc(sizeof *o);
    if (o == NULL) abort();
    o->runs = runs;
    o->released = released;
    return o;
}

/* ---- a callback that tries to destroy its own runtime ---------------------- */
struct self_destroy {
    tw_runtime *rt;
    atomic_int rc;
    atomic_int done;
};

static void on_self_destroy(void *arg, tw_timer id) {
    struct self_destroy *s = arg;
    (void)id;
    atomic_store(&s->rc, tw_runtime_destroy(s->rt));
    atomic_store(&s->done, 1);
}

static void count(void *arg, tw_timer id) {
    (void)id;
    atomic_fetch_add((atomic_int *)arg, 1);
}

int main(void) {
    printf("tickwheel %u.%u.%u (header %u.%u.%u)\n", tw_version() >> 16, (tw_version() >> 8) & 0xffu,
           tw_version() & 0xffu, TW_VERSION_MAJOR, TW_VERSION_MINOR, TW_VERSION_PATCH);
    CHECK(tw_version() == TW_VERSION);

    tw_config cfg;
    tw_config_init(&cfg);
    cfg.shards = 2;
    cfg.workers = 2;
    cfg.resolution_ns = 1 * MS;
    tw_runtime *rt = NULL;
    CHECK_RC(tw_runtime_create(&cfg, &rt), TW_OK);
    if (rt == NULL) return 1;

    /* One-shot, 20 ms: runs once, not before its deadline, with its own id. */
    struct shot shot = {0};
    tw_timer shot_id = 0;
    shot.deadline_ns = tw_now_ns() + 20 * MS;
    CHECK_RC(tw_timer_start(rt, 20 * MS, 0, on_shot, &shot, &shot_id), TW_OK);
    CHECK(shot_id != 0);
    CHECK(wait_for(&shot.fired, 1));
    CHECK(shot.ran_at_ns >= shot.deadline_ns);
    CHECK(shot.id_seen == shot_id);
    printf("one-shot fired %.3f ms after its deadline\n", (double)(shot.ran_at_ns - shot.deadline_ns) / 1e6);
    /* It fired: the id is stale now. */
    CHECK_RC(tw_timer_stop(rt, shot_id), TW_ENOENT);
    CHECK_RC(tw_timer_reset(rt, shot_id, MS), TW_ENOENT);

    /* Periodic, every 5 ms, with a release hook that frees its context. */
    atomic_int runs = 0, released = 0;
    tw_timer_spec spec;
    tw_timer_spec_init(&spec);
    spec.delay_ns = 5 * MS;
    spec.period_ns = 5 * MS;
    spec.callback = on_owned;
    spec.arg = new_owned(&runs, &released);
    spec.release = release_owned;
    tw_timer periodic = 0;
    CHECK_RC(tw_timer_start_ex(rt, &spec, &periodic), TW_OK);
    CHECK(wait_for(&runs, 3));
    CHECK_RC(tw_timer_stop_sync(rt, periodic), TW_OK);
    /* stop_sync returned: no run in progress, the hook has run, exactly once. */
    CHECK(atomic_load(&released) == 1);
    const int runs_at_stop = atomic_load(&runs);
    sleep_ms(30);
    CHECK(atomic_load(&runs) == runs_at_stop);
    CHECK_RC(tw_timer_stop(rt, periodic), TW_ENOENT);

    /* Stopped before it fires: TW_OK, released inside tw_timer_stop. */
    atomic_int runs2 = 0, released2 = 0;
    tw_timer_spec_init(&spec);
    spec.delay_ns = 10000 * MS;
    spec.callback = on_owned;
    spec.arg = new_owned(&runs2, &released2);
    spec.release = release_owned;
    tw_timer far = 0;
    CHECK_RC(tw_timer_start_ex(rt, &spec, &far), TW_OK);
    CHECK_RC(tw_timer_reset(rt, far, 20000 * MS), TW_OK);
    CHECK_RC(tw_timer_stop(rt, far), TW_OK);
    CHECK(atomic_load(&released2) == 1 && atomic_load(&runs2) == 0);

    /* An absolute deadline (CLOCK_MONOTONIC ns), on shard 1. */
    struct shot at = {0};
    tw_timer_spec_init(&spec);
    at.deadline_ns = tw_now_ns() + 15 * MS;
    spec.deadline_ns = at.deadline_ns;
    spec.shard = 1;
    spec.callback = on_shot;
    spec.arg = &at;
    tw_timer at_id = 0;
    CHECK_RC(tw_timer_start_ex(rt, &spec, &at_id), TW_OK);
    CHECK(wait_for(&at.fired, 1));
    CHECK(at.ran_at_ns >= at.deadline_ns);

    /* Reset moves a pending timer (here: earlier). */
    struct shot pushed = {0};
    tw_timer pushed_id = 0;
    CHECK_RC(tw_timer_start(rt, 1000 * MS, 0, on_shot, &pushed, &pushed_id), TW_OK);
    pushed.deadline_ns = tw_now_ns() + 60 * MS;
    CHECK_RC(tw_timer_reset(rt, pushed_id, 60 * MS), TW_OK);
    CHECK(wait_for(&pushed.fired, 1));
    CHECK(pushed.ran_at_ns >= pushed.deadline_ns);

    /* Errors are codes, never crashes. */
    tw_timer none = 1;
    CHECK_RC(tw_timer_start(NULL, MS, 0, on_shot, &shot, &none), TW_EINVAL);
    CHECK(none == 0);
    CHECK_RC(tw_timer_start(rt, MS, 0, NULL, NULL, &none), TW_EINVAL);
    CHECK_RC(tw_timer_start(rt, TW_MAX_DELAY_NS + 1, 0, on_shot, &shot, &none), TW_EINVAL);
    CHECK_RC(tw_timer_stop(rt, 0), TW_ENOENT);
    CHECK_RC(tw_runtime_create(NULL, NULL), TW_EINVAL);
    CHECK(tw_strerror(TW_EAGAIN) != NULL && tw_strerror(12345) != NULL);
    printf("tw_strerror(TW_ESHUTDOWN) = \"%s\"\n", tw_strerror(TW_ESHUTDOWN));

    /* Stats. */
    tw_stats st;
    st.size = sizeof st;
    CHECK_RC(tw_runtime_stats(rt, &st), TW_OK);
    CHECK(st.size == sizeof st && st.shards == 2 && st.workers == 2 && st.resolution_ns == MS);
    CHECK(st.started == 5 && st.fired >= 6 && st.stopped >= 2 && st.reset >= 2);
    printf("stats: started %" PRIu64 " fired %" PRIu64 " stopped %" PRIu64 " live %" PRIu64
           " lateness p50 %" PRIu64 " ns max %" PRIu64 " ns\n",
           st.started, st.fired, st.stopped, st.live, st.lateness_p50_ns, st.lateness_max_ns);

    /* A callback cannot destroy its own runtime: TW_EDEADLK, nothing done. */
    struct self_destroy sd = {rt, 0, 0};
    tw_timer sd_id = 0;
    CHECK_RC(tw_timer_start(rt, 0, 0, on_self_destroy, &sd, &sd_id), TW_OK);
    CHECK(wait_for(&sd.done, 1));
    CHECK(atomic_load(&sd.rc) == TW_EDEADLK);

    /* Shutdown cancels what is pending (release hooks run here), then every
     * call says TW_ESHUTDOWN; destroy frees. */
    atomic_int runs3 = 0, released3 = 0, never = 0;
    tw_timer_spec_init(&spec);
    spec.delay_ns = 10000 * MS;
    spec.callback = on_owned;
    spec.arg = new_owned(&runs3, &released3);
    spec.release = release_owned;
    tw_timer pending = 0;
    CHECK_RC(tw_timer_start_ex(rt, &spec, &pending), TW_OK);
    CHECK_RC(tw_runtime_shutdown(rt), TW_OK);
    CHECK(atomic_load(&released3) == 1 && atomic_load(&runs3) == 0);
    CHECK_RC(tw_timer_start(rt, MS, 0, count, &never, &none), TW_ESHUTDOWN);
    CHECK_RC(tw_timer_stop(rt, pending), TW_ESHUTDOWN);
    CHECK_RC(tw_timer_reset(rt, pending, MS), TW_ESHUTDOWN);
    CHECK_RC(tw_runtime_stats(rt, &st), TW_OK);
    CHECK(st.shut_down == 1 && st.cancelled_at_shutdown == 1);
    CHECK_RC(tw_runtime_destroy(rt), TW_OK);

    if (failures != 0) {
        fprintf(stderr, "c_example: %d check(s) failed\n", failures);
        return 1;
    }
    printf("c_example: all checks passed\n");
    return 0;
}
