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

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <initializer_list>

namespace impl = tickwheel::capi;

// ---- tw_last_error_message() ---------------------------------------------------
// Each status-returning tw_* function ends in status(): an error composes
// "<tw_function>: <detail>" into this thread's message (cold); a success
// clears it. The detail is what the C layer recorded for that code during
// the call (impl::set_detail), else what the C++ runtime recorded for it,
// else the code's tw_strerror() text; TW_ENOENT (an answer, not a mistake)
// has none and takes the success path.
//
// The success path must stay cheap: a thread-local access from a shared
// library is a call to __tls_get_addr (~3 ns; measured on tw_timer_stop of a
// stale id: 7.9 -> 11.6 ns with one per call). So it reads a process-wide
// count of the threads whose message (or a recorded detail) is set -- a
// relaxed load of a read-mostly word -- and touches its thread-local state
// only when that count is not zero. A thread always sees its own increment
// (coherence: same thread, same location), so a thread with a message set
// always clears it at its next success; other threads then pay the TLS
// access until it does. A thread that exits with a message set gives its
// count back (the thread-local's destructor).
namespace {
// Its own cache line: read on every success, written only when a thread's
// message is set or cleared.
alignas(64) std::atomic<std::uint32_t> g_set{0};  // threads with `set` true

struct LastError {
    bool set = false;          // message or detail not empty: counted in g_set
    int code = 0;              // the code `detail` was recorded for; 0: none
    char detail[232] = {};     // impl::set_detail()'s text
    char message[280] = {};    // tw_last_error_message()
    void mark() noexcept {
        if (!set) {
            set = true;
            g_set.fetch_add(1, std::memory_order_relaxed);
        }
    }
    void clear() noexcept {
        if (!set) return;
        code = 0;
        detail[0] = '\0';
        message[0] = '\0';
        set = false;
        g_set.fetch_sub(1, std::memory_order_relaxed);
    }
    LastError() = default;
    LastError(const LastError&) = delete;
    LastError& operator=(const LastError&) = delete;
    ~LastError() { clear(); }
};
thread_local LastError t_last;

__attribute__((noinline, cold)) void compose(int rc, const char* fn) noexcept {
    LastError& e = t_last;
    char core[240];
    const char* detail = nullptr;
    if (e.code == rc && e.detail[0] != '\0')
        detail = e.detail;
    else if (impl::core_detail(rc, core, sizeof core))
        detail = core;
    else
        detail = impl::error_text(rc);
    // "<fn>: <detail>", cut to the buffer.
    std::size_t at = 0;
    for (const char* part : {fn, ": ", detail})
        for (; *part != '\0' && at + 1 < sizeof e.message; ++part) e.message[at++] = *part;
    e.message[at] = '\0';
    e.code = 0;
    e.detail[0] = '\0';
    e.mark();
}

__attribute__((noinline)) void clear_slow() noexcept { t_last.clear(); }

inline void clear_last() noexcept {
    if (g_set.load(std::memory_order_relaxed) != 0) [[unlikely]]
        clear_slow();
}

// TW_ENOENT (stop of a timer that just fired: common, and an answer rather
// than a mistake) has no detail: it takes the success path, never compose().
inline int status(int rc, const char* fn) noexcept {
    if (rc < 0 && rc != TW_ENOENT) [[unlikely]]
        compose(rc, fn);
    else
        clear_last();
    return rc;
}

inline int64_t status64(int64_t rc, const char* fn) noexcept {
    if (rc < 0) [[unlikely]]
        compose(static_cast<int>(rc), fn);
    else
        clear_last();
    return rc;
}
}  // namespace

void impl::set_detail(int code, const char* fmt, ...) noexcept {
    LastError& e = t_last;
    va_list ap;
    va_start(ap, fmt);
    const int n = std::vsnprintf(e.detail, sizeof e.detail, fmt, ap);
    va_end(ap);
    if (n < 0) e.detail[0] = '\0';
    e.code = code;
    e.mark();
}

extern "C" {

TW_API const char* tw_last_error_message(void) TW_NOEXCEPT { return t_last.message; }

TW_API int tw_runtimes_metrics(tw_runtime* const* rts, size_t n, char* buf, size_t cap) TW_NOEXCEPT {
    return status(impl::runtimes_metrics(rts, n, buf, cap), "tw_runtimes_metrics");
}

TW_API void tw_config_init(tw_config* cfg) TW_NOEXCEPT { impl::config_init(cfg); }

TW_API int tw_runtime_create(const tw_config* cfg, tw_runtime** out) TW_NOEXCEPT {
    return status(impl::runtime_create(cfg, out), "tw_runtime_create");
}

TW_API int tw_runtime_shutdown(tw_runtime* rt) TW_NOEXCEPT { return status(impl::runtime_shutdown(rt), "tw_runtime_shutdown"); }

TW_API int tw_runtime_destroy(tw_runtime* rt) TW_NOEXCEPT { return status(impl::runtime_destroy(rt), "tw_runtime_destroy"); }

TW_API int tw_timer_start(tw_runtime* rt, uint64_t delay_ns, uint64_t period_ns, tw_callback cb, void* arg,
                          tw_timer* out) TW_NOEXCEPT {
    return status(impl::timer_start(rt, delay_ns, period_ns, cb, arg, out), "tw_timer_start");
}

TW_API void tw_timer_spec_init(tw_timer_spec* spec) TW_NOEXCEPT { impl::timer_spec_init(spec); }

TW_API int tw_timer_start_ex(tw_runtime* rt, const tw_timer_spec* spec, tw_timer* out) TW_NOEXCEPT {
    return status(impl::timer_start_ex(rt, spec, out), "tw_timer_start_ex");
}

TW_API int tw_timer_stop(tw_runtime* rt, tw_timer id) TW_NOEXCEPT { return status(impl::timer_stop(rt, id), "tw_timer_stop"); }

TW_API int tw_timer_start_n(tw_runtime* rt, const tw_timer_spec* specs, size_t n, tw_timer* out) TW_NOEXCEPT {
    return status(impl::timer_start_n(rt, specs, n, out), "tw_timer_start_n");
}
TW_API int tw_timer_stop_n(tw_runtime* rt, const tw_timer* ids, size_t n, int* results) TW_NOEXCEPT {
    return status(impl::timer_stop_n(rt, ids, n, results), "tw_timer_stop_n");
}
TW_API int tw_timer_reset_n(tw_runtime* rt, const tw_timer* ids, size_t n, uint64_t delay_ns, int* results) TW_NOEXCEPT {
    return status(impl::timer_reset_n(rt, ids, n, delay_ns, results), "tw_timer_reset_n");
}

TW_API int tw_timer_stop_sync(tw_runtime* rt, tw_timer id) TW_NOEXCEPT { return status(impl::timer_stop_sync(rt, id), "tw_timer_stop_sync"); }

TW_API int tw_timer_reset(tw_runtime* rt, tw_timer id, uint64_t delay_ns) TW_NOEXCEPT {
    return status(impl::timer_reset(rt, id, delay_ns), "tw_timer_reset");
}
TW_API int tw_timer_reset_at(tw_runtime* rt, tw_timer id, uint64_t deadline_ns) TW_NOEXCEPT {
    return status(impl::timer_reset_at(rt, id, deadline_ns), "tw_timer_reset_at");
}
TW_API int tw_timer_query(tw_runtime* rt, tw_timer id, tw_timer_info* out) TW_NOEXCEPT {
    return status(impl::timer_query(rt, id, out), "tw_timer_query");
}
TW_API int64_t tw_group_stop(tw_runtime* rt, uint64_t group, unsigned flags) TW_NOEXCEPT {
    return status64(impl::group_stop(rt, group, flags), "tw_group_stop");
}
TW_API uint64_t tw_now_ns_clock(int clock) TW_NOEXCEPT { return impl::now_ns_clock(clock); }
TW_API uint64_t tw_runtime_now_ns(tw_runtime* rt, int clock) TW_NOEXCEPT { return impl::runtime_now_ns(rt, clock); }
TW_API int tw_runtime_advance(tw_runtime* rt, uint64_t ns) TW_NOEXCEPT { return status(impl::runtime_advance(rt, ns), "tw_runtime_advance"); }

TW_API uint64_t tw_now_ns(void) TW_NOEXCEPT { return impl::now_ns(); }

TW_API int tw_runtime_stats(tw_runtime* rt, tw_stats* out) TW_NOEXCEPT { return status(impl::runtime_stats(rt, out), "tw_runtime_stats"); }

TW_API int tw_runtime_shard_stats(tw_runtime* rt, uint32_t shard, uint64_t* pending, uint64_t* inbox) TW_NOEXCEPT {
    return status(impl::runtime_shard_stats(rt, shard, pending, inbox), "tw_runtime_shard_stats");
}

TW_API int tw_runtime_metrics(tw_runtime* rt, char* buf, size_t cap) TW_NOEXCEPT {
    return status(impl::runtime_metrics(rt, buf, cap), "tw_runtime_metrics");
}

TW_API int tw_queue_create(tw_runtime* rt, tw_queue** out) TW_NOEXCEPT { return status(impl::queue_create(rt, out), "tw_queue_create"); }

TW_API int tw_queue_fd(const tw_queue* q) TW_NOEXCEPT { return status(impl::queue_fd(q), "tw_queue_fd"); }

TW_API int tw_queue_run(tw_queue* q, size_t max, int64_t timeout_ns) TW_NOEXCEPT {
    return status(impl::queue_run(q, max, timeout_ns), "tw_queue_run");
}

TW_API int tw_queue_destroy(tw_queue* q) TW_NOEXCEPT { return status(impl::queue_destroy(q), "tw_queue_destroy"); }

TW_API int tw_queue_get_stats(tw_queue* q, tw_queue_stats* out) TW_NOEXCEPT { return status(impl::queue_get_stats(q, out), "tw_queue_get_stats"); }

TW_API const char* tw_strerror(int err) TW_NOEXCEPT { return impl::error_text(err); }

TW_API uint32_t tw_version(void) TW_NOEXCEPT { return impl::version(); }

}  // extern "C"
