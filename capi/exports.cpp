// SPDX-License-Identifier: MIT OR Apache-2.0
// The exported symbols of the C API: each tw_* function forwards to its
// implementation in tickwheel_c.cpp. This translation unit sees nothing but
// tickwheel.h, and it is the only one compiled with debug info for the ABI
// check: abidw's dump of libtickwheel.so.1 (abi/) then describes exactly the
// C interface -- no libstdc++ or runtime internals -- and only a change to
// tickwheel.h can change it.
// The exported initialisers are defined here, so this file must not see
// the inline ones of tickwheel.h.
#define TW_NO_INLINE_INIT
#include "capi_impl.hpp"

namespace impl = tickwheel::capi;

extern "C" {

TW_API const char* tw_last_error_message(void) TW_NOEXCEPT { return impl::last_error_message(); }

TW_API int tw_runtimes_metrics(tw_runtime* const* rts, size_t n, char* buf, size_t cap) TW_NOEXCEPT {
    return impl::status(impl::runtimes_metrics(rts, n, buf, cap), "tw_runtimes_metrics");
}

TW_API void tw_config_init(tw_config* cfg) TW_NOEXCEPT { impl::config_init(cfg); }

TW_API int tw_runtime_create(const tw_config* cfg, tw_runtime** out) TW_NOEXCEPT {
    return impl::status(impl::runtime_create(cfg, out), "tw_runtime_create");
}

TW_API int tw_runtime_shutdown(tw_runtime* rt) TW_NOEXCEPT { return impl::status(impl::runtime_shutdown(rt), "tw_runtime_shutdown"); }

TW_API int tw_runtime_destroy(tw_runtime* rt) TW_NOEXCEPT { return impl::status(impl::runtime_destroy(rt), "tw_runtime_destroy"); }

TW_API int tw_timer_start(tw_runtime* rt, uint64_t delay_ns, uint64_t period_ns, tw_callback cb, void* arg,
                          tw_timer* out) TW_NOEXCEPT {
    return impl::status(impl::timer_start(rt, delay_ns, period_ns, cb, arg, out), "tw_timer_start");
}

TW_API void tw_timer_spec_init(tw_timer_spec* spec) TW_NOEXCEPT { impl::timer_spec_init(spec); }

TW_API int tw_timer_start_ex(tw_runtime* rt, const tw_timer_spec* spec, tw_timer* out) TW_NOEXCEPT {
    return impl::status(impl::timer_start_ex(rt, spec, out), "tw_timer_start_ex");
}

TW_API int tw_timer_stop(tw_runtime* rt, tw_timer id) TW_NOEXCEPT { return impl::status(impl::timer_stop(rt, id), "tw_timer_stop"); }

TW_API int tw_timer_start_n(tw_runtime* rt, const tw_timer_spec* specs, size_t n, tw_timer* out) TW_NOEXCEPT {
    return impl::status(impl::timer_start_n(rt, specs, n, out), "tw_timer_start_n");
}
TW_API int tw_timer_stop_n(tw_runtime* rt, const tw_timer* ids, size_t n, int* results) TW_NOEXCEPT {
    return impl::status(impl::timer_stop_n(rt, ids, n, results), "tw_timer_stop_n");
}
TW_API int tw_timer_reset_n(tw_runtime* rt, const tw_timer* ids, size_t n, uint64_t delay_ns, int* results) TW_NOEXCEPT {
    return impl::status(impl::timer_reset_n(rt, ids, n, delay_ns, results), "tw_timer_reset_n");
}

TW_API int tw_timer_stop_sync(tw_runtime* rt, tw_timer id) TW_NOEXCEPT { return impl::status(impl::timer_stop_sync(rt, id), "tw_timer_stop_sync"); }

TW_API int tw_timer_reset(tw_runtime* rt, tw_timer id, uint64_t delay_ns) TW_NOEXCEPT {
    return impl::status(impl::timer_reset(rt, id, delay_ns), "tw_timer_reset");
}
TW_API int tw_timer_reset_at(tw_runtime* rt, tw_timer id, uint64_t deadline_ns) TW_NOEXCEPT {
    return impl::status(impl::timer_reset_at(rt, id, deadline_ns), "tw_timer_reset_at");
}
TW_API int tw_timer_query(tw_runtime* rt, tw_timer id, tw_timer_info* out) TW_NOEXCEPT {
    return impl::status(impl::timer_query(rt, id, out), "tw_timer_query");
}
TW_API int64_t tw_group_stop(tw_runtime* rt, uint64_t group, unsigned flags) TW_NOEXCEPT {
    return impl::status64(impl::group_stop(rt, group, flags), "tw_group_stop");
}
TW_API uint64_t tw_now_ns_clock(int clock) TW_NOEXCEPT { return impl::now_ns_clock(clock); }
TW_API uint64_t tw_runtime_now_ns(tw_runtime* rt, int clock) TW_NOEXCEPT { return impl::runtime_now_ns(rt, clock); }
TW_API int tw_runtime_advance(tw_runtime* rt, uint64_t ns) TW_NOEXCEPT { return impl::status(impl::runtime_advance(rt, ns), "tw_runtime_advance"); }

TW_API uint64_t tw_now_ns(void) TW_NOEXCEPT { return impl::now_ns(); }

TW_API int tw_runtime_stats(tw_runtime* rt, tw_stats* out) TW_NOEXCEPT { return impl::status(impl::runtime_stats(rt, out), "tw_runtime_stats"); }

TW_API int tw_runtime_shard_stats(tw_runtime* rt, uint32_t shard, uint64_t* pending, uint64_t* inbox) TW_NOEXCEPT {
    return impl::status(impl::runtime_shard_stats(rt, shard, pending, inbox), "tw_runtime_shard_stats");
}

TW_API int tw_runtime_metrics(tw_runtime* rt, char* buf, size_t cap) TW_NOEXCEPT {
    return impl::status(impl::runtime_metrics(rt, buf, cap), "tw_runtime_metrics");
}

TW_API int tw_queue_create(tw_runtime* rt, tw_queue** out) TW_NOEXCEPT { return impl::status(impl::queue_create(rt, out), "tw_queue_create"); }

TW_API int tw_queue_fd(const tw_queue* q) TW_NOEXCEPT { return impl::status(impl::queue_fd(q), "tw_queue_fd"); }

TW_API int tw_queue_run(tw_queue* q, size_t max, int64_t timeout_ns) TW_NOEXCEPT {
    return impl::status(impl::queue_run(q, max, timeout_ns), "tw_queue_run");
}

TW_API int tw_queue_destroy(tw_queue* q) TW_NOEXCEPT { return impl::status(impl::queue_destroy(q), "tw_queue_destroy"); }

TW_API int tw_queue_get_stats(tw_queue* q, tw_queue_stats* out) TW_NOEXCEPT { return impl::status(impl::queue_get_stats(q, out), "tw_queue_get_stats"); }

TW_API const char* tw_strerror(int err) TW_NOEXCEPT { return impl::error_text(err); }

TW_API int tw_runtime_count_callback_exception(tw_runtime* rt) TW_NOEXCEPT {
    return impl::status(impl::runtime_count_callback_exception(rt), "tw_runtime_count_callback_exception");
}
TW_API uint32_t tw_version(void) TW_NOEXCEPT { return impl::version(); }

}  // extern "C"
