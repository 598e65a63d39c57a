/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* Compiled (not run) as C99 and as C11 with -pedantic-errors -Wconversion
 * (targets capi_header_c99/capi_header_c11 in capi/CMakeLists.txt): the C
 * API header must be plain C, and its types must have the ABI-1 layout. */
#include <tickwheel/tickwheel.h>

#define TW_CHECK(name, cond) typedef char tw_check_##name[(cond) ? 1 : -1]

#if UINTPTR_MAX == UINT64_MAX
TW_CHECK(config_size, sizeof(tw_config) == 48); /* 32 in 1.0; 40 in 1.5 (`name`); 1.7: `slot_reserve` */
TW_CHECK(config_reserve, offsetof(tw_config, slot_reserve) == 40);
TW_CHECK(config_name, offsetof(tw_config, name) == 32);
TW_CHECK(spec_size, sizeof(tw_timer_spec) == 88); /* 56 in 1.0; 64 in 1.2 (`queue`); 1.3: policy, leeway, group */
TW_CHECK(spec_queue, offsetof(tw_timer_spec, queue) == 56);
TW_CHECK(spec_policy, offsetof(tw_timer_spec, period_policy) == 64);
TW_CHECK(spec_leeway, offsetof(tw_timer_spec, leeway_ns) == 72);
TW_CHECK(spec_group, offsetof(tw_timer_spec, group) == 80);
TW_CHECK(info_size, sizeof(tw_timer_info) == 64);
TW_CHECK(info_deadline, offsetof(tw_timer_info, deadline_ns) == 16);
TW_CHECK(info_missed, offsetof(tw_timer_info, missed) == 56);
TW_CHECK(spec_clock, offsetof(tw_timer_spec, clock) == 68);
TW_CHECK(queue_stats_size, sizeof(tw_queue_stats) == 112);
TW_CHECK(stats_size, sizeof(tw_stats) == 288); /* 136 in 1.0; 1.7: stages, saturation, memory */
TW_CHECK(stats_stages, offsetof(tw_stats, driver_lateness_p50_ns) == 136);
TW_CHECK(stats_resident, offsetof(tw_stats, resident_bytes) == 280);
TW_CHECK(spec_release, offsetof(tw_timer_spec, release) == 48);
TW_CHECK(stats_last, offsetof(tw_stats, lateness_samples) == 128);
#endif
TW_CHECK(timer_is_u64, sizeof(tw_timer) == 8);
TW_CHECK(max_delay, TW_MAX_DELAY_NS == ((uint64_t)1 << 60));
TW_CHECK(codes, TW_OK == 0 && TW_EINVAL == -22 && TW_ENOMEM == -12 && TW_ENOENT == -2 &&
                    TW_EAGAIN == -11 && TW_ESHUTDOWN == -108 && TW_EDEADLK == -35 && TW_EFORKED == -1001);
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
    cfg.name = "a runtime"; /* 1.5 */
    rc |= tw_runtime_create(&cfg, &rt);
    rc |= tw_last_error_message()[0] != '\0'; /* 1.5 */
    rc |= tw_timer_start(rt, 1000, 0, cb, NULL, &id);
    tw_timer_spec_init(&spec);
    spec.callback = cb;
    spec.release = rel;
    spec.deadline_ns = tw_now_ns();
    rc |= tw_timer_start_ex(rt, &spec, &id);
    rc |= tw_timer_reset(rt, id, 10);
    rc |= tw_timer_stop(rt, id);
    rc |= tw_timer_stop_sync(rt, id);
    tw_stats_init(&st); /* 1.5 */
    rc |= tw_runtime_stats(rt, &st);
    rc |= tw_runtime_shard_stats(rt, 0, &a, &b);
    {
        char text[64];
        rc |= tw_runtime_metrics(rt, text, sizeof text);
        rc |= tw_runtime_metrics(rt, NULL, 0);
        rc |= tw_runtimes_metrics(&rt, 1, text, sizeof text); /* 1.5 */
    }
    {
        tw_queue *q = NULL;
        tw_queue_stats qs;
        rc |= tw_queue_create(rt, &q);
        spec.queue = q;
        rc |= tw_timer_start_ex(rt, &spec, &id);
        rc |= tw_queue_fd(q);
        rc |= tw_queue_run(q, (size_t)16, (int64_t)-1);
        tw_queue_stats_init(&qs); /* 1.5 */
        rc |= tw_queue_get_stats(q, &qs);
        rc |= tw_queue_destroy(q);
    }
    {
        tw_timer_info info;
        spec.queue = NULL;
        spec.period_ns = 1000000;
        spec.period_policy = TW_PERIOD_BURST;
        spec.leeway_ns = 1000;
        spec.group = 7;
        rc |= tw_timer_start_ex(rt, &spec, &id);
        tw_timer_info_init(&info);
        rc |= tw_timer_query(rt, id, &info);
        rc |= info.state == TW_TIMER_PENDING || info.state == TW_TIMER_DUE || info.state == TW_TIMER_RUNNING;
        rc |= tw_timer_reset_at(rt, id, tw_now_ns() + 1000);
        rc |= (int)tw_group_stop(rt, 7, TW_SYNC);
        rc |= (int)(TW_PERIOD_SKIP + TW_PERIOD_DELAY);
        spec.clock = TW_CLOCK_BOOTTIME;
        rc |= tw_timer_start_ex(rt, &spec, &id);
        rc |= (int)(tw_now_ns_clock(TW_CLOCK_REALTIME) & 1u) + (int)(tw_runtime_now_ns(rt, TW_CLOCK_MONOTONIC) & 1u);
        rc |= tw_runtime_advance(rt, (uint64_t)1000);
        cfg.flags = TW_CONFIG_MANUAL_CLOCK;
    }
    {
        /* The batches (1.4). */
        tw_timer ids[2];
        int results[2];
        tw_timer_spec specs[2];
        specs[0] = spec;
        specs[1] = spec;
        rc |= tw_timer_start_n(rt, specs, 2, ids) != 2;
        rc |= tw_timer_reset_n(rt, ids, 2, 1000, results);
        rc |= tw_timer_stop_n(rt, ids, 2, results);
    }
    rc |= tw_runtime_shutdown(rt);
    rc |= tw_runtime_destroy(rt);
    return rc + (int)(tw_version() & 1u) + (tw_strerror(rc) != NULL);
}
