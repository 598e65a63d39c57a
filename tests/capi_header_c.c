/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Compiled (not run) as C99 and as C11 with -pedantic-errors -Wconversion
 * (targets capi_header_c99/capi_header_c11 in capi/CMakeLists.txt): the C
 * API header must be plain C, and its types must have the ABI-1 layout. */
#include <tickwheel/tickwheel.h>

#define TW_CHECK(name, cond) typedef char tw_check_##name[(cond) ? 1 : -1]

#if UINTPTR_MAX == UINT64_MAX
TW_CHECK(config_size, sizeof(tw_config) == 32);
TW_CHECK(spec_size, sizeof(tw_timer_spec) == 64); /* 56 in 1.0; 1.2 appended `queue` */
TW_CHECK(spec_queue, offsetof(tw_timer_spec, queue) == 56);
TW_CHECK(queue_stats_size, sizeof(tw_queue_stats) == 112);
TW_CHECK(stats_size, sizeof(tw_stats) == 136);
TW_CHECK(spec_release, offsetof(tw_timer_spec, release) == 48);
TW_CHECK(stats_last, offsetof(tw_stats, lateness_samples) == 128);
#endif
TW_CHECK(timer_is_u64, sizeof(tw_timer) == 8);
TW_CHECK(max_delay, TW_MAX_DELAY_NS == ((uint64_t)1 << 60));
TW_CHECK(codes, TW_OK == 0 && TW_EINVAL == -22 && TW_ENOMEM == -12 && TW_ENOENT == -2 &&
                    TW_EAGAIN == -11 && TW_ESHUTDOWN == -108 && TW_EDEADLK == -35);
TW_CHECK(version, TW_VERSION == ((TW_VERSION_MAJOR << 16) | (TW_VERSION_MINOR << 8) | TW_VERSION_PATCH));

static void cb(void *arg, tw_timer id) {
    (void)arg;
    (void)id;
}
static void rel(void *arg) { (void)arg; }

/* Every function, called with the C types (never executed). */
int tw_header_c_compiles(void);
int tw_header_c_compiles(void) {
    tw_config cfg;
    tw_timer_spec spec;
    tw_stats st;
    tw_runtime *rt = NULL;
    tw_timer id = 0;
    uint64_t a = 0, b = 0;
    int rc = 0;
    tw_config_init(&cfg);
    cfg.flags = TW_PIN_SHARDS;
    rc |= tw_runtime_create(&cfg, &rt);
    rc |= tw_timer_start(rt, 1000, 0, cb, NULL, &id);
    tw_timer_spec_init(&spec);
    spec.callback = cb;
    spec.release = rel;
    spec.deadline_ns = tw_now_ns();
    rc |= tw_timer_start_ex(rt, &spec, &id);
    rc |= tw_timer_reset(rt, id, 10);
    rc |= tw_timer_stop(rt, id);
    rc |= tw_timer_stop_sync(rt, id);
    st.size = sizeof st;
    rc |= tw_runtime_stats(rt, &st);
    rc |= tw_runtime_shard_stats(rt, 0, &a, &b);
    {
        char text[64];
        rc |= tw_runtime_metrics(rt, text, sizeof text);
        rc |= tw_runtime_metrics(rt, NULL, 0);
    }
    {
        tw_queue *q = NULL;
        tw_queue_stats qs;
        rc |= tw_queue_create(rt, &q);
        spec.queue = q;
        rc |= tw_timer_start_ex(rt, &spec, &id);
        rc |= tw_queue_fd(q);
        rc |= tw_queue_run(q, (size_t)16, (int64_t)-1);
        qs.size = sizeof qs;
        rc |= tw_queue_get_stats(q, &qs);
        rc |= tw_queue_destroy(q);
    }
    rc |= tw_runtime_shutdown(rt);
    rc |= tw_runtime_destroy(rt);
    return rc + (int)(tw_version() & 1u) + (tw_strerror(rc) != NULL);
}
