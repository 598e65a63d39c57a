// SPDX-License-Identifier: MIT OR Apache-2.0
// The C API's implementation (tickwheel_c.cpp), called by the exported tw_*
// functions (exports.cpp). Internal: hidden symbols, not installed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tickwheel/tickwheel.h"

namespace tickwheel::capi {

void config_init(tw_config* cfg) noexcept;
int runtime_create(const tw_config* cfg, tw_runtime** out) noexcept;
int runtime_shutdown(tw_runtime* rt) noexcept;
int runtime_destroy(tw_runtime* rt) noexcept;
int timer_start(tw_runtime* rt, std::uint64_t delay_ns, std::uint64_t period_ns, tw_callback cb, void* arg,
                tw_timer* out) noexcept;
void timer_spec_init(tw_timer_spec* spec) noexcept;
int timer_start_ex(tw_runtime* rt, const tw_timer_spec* spec, tw_timer* out) noexcept;
int timer_start_n(tw_runtime* rt, const tw_timer_spec* specs, std::size_t n, tw_timer* out) noexcept;
int timer_stop(tw_runtime* rt, tw_timer id) noexcept;
int timer_stop_n(tw_runtime* rt, const tw_timer* ids, std::size_t n, int* results) noexcept;
int timer_reset_n(tw_runtime* rt, const tw_timer* ids, std::size_t n, std::uint64_t delay_ns, int* results) noexcept;
int timer_stop_sync(tw_runtime* rt, tw_timer id) noexcept;
int timer_reset(tw_runtime* rt, tw_timer id, std::uint64_t delay_ns) noexcept;
int timer_reset_at(tw_runtime* rt, tw_timer id, std::uint64_t deadline_ns) noexcept;
int timer_query(tw_runtime* rt, tw_timer id, tw_timer_info* out) noexcept;
std::int64_t group_stop(tw_runtime* rt, std::uint64_t group, unsigned flags) noexcept;
std::uint64_t now_ns_clock(int clock) noexcept;
std::uint64_t runtime_now_ns(tw_runtime* rt, int clock) noexcept;
int runtime_advance(tw_runtime* rt, std::uint64_t ns) noexcept;
std::uint64_t now_ns() noexcept;
int runtime_stats(tw_runtime* rt, tw_stats* out) noexcept;
int runtime_shard_stats(tw_runtime* rt, std::uint32_t shard, std::uint64_t* pending, std::uint64_t* inbox) noexcept;
int runtime_count_callback_exception(tw_runtime* rt) noexcept;
int runtime_metrics(tw_runtime* rt, char* buf, std::size_t cap) noexcept;
int queue_create(tw_runtime* rt, tw_queue** out) noexcept;
int queue_fd(const tw_queue* q) noexcept;
int queue_run(tw_queue* q, std::size_t max, std::int64_t timeout_ns) noexcept;
int queue_destroy(tw_queue* q) noexcept;
int queue_get_stats(tw_queue* q, tw_queue_stats* out) noexcept;
int runtimes_metrics(tw_runtime* const* rts, std::size_t n, char* buf, std::size_t cap) noexcept;
const char* error_text(int err) noexcept;

// ---- tw_last_error_message() (last_error.cpp) ---------------------------------
/// The number of threads whose message (or a recorded detail) is set; read
/// and written only with __atomic builtins (relaxed). A cache line of its
/// own: read by every success, written only when a message is set or cleared.
struct alignas(64) MessageCount {
    std::uint32_t n;
};
static_assert(sizeof(MessageCount) == 64);
extern MessageCount g_messages_set;
/// After an error `rc` of the exported function `fn`: this thread's message
/// becomes "<fn>: <detail>".
void compose_error(int rc, const char* fn) noexcept __attribute__((cold, noinline));
/// After a success: clears this thread's message and detail.
void clear_error() noexcept __attribute__((noinline));
const char* last_error_message() noexcept;

/// How every status-returning exported function returns `rc`: an error
/// composes this thread's message (cold); a success -- or TW_ENOENT, which
/// is an answer, not a mistake, and common (a stop of a timer that just
/// fired) -- clears it, reading only a process-wide word unless some thread
/// has a message set (see last_error.cpp).
inline int status(int rc, const char* fn) noexcept {
    if (rc < 0 && rc != TW_ENOENT) [[unlikely]]
        compose_error(rc, fn);
    else if (__atomic_load_n(&g_messages_set.n, __ATOMIC_RELAXED) != 0) [[unlikely]]
        clear_error();
    return rc;
}
inline std::int64_t status64(std::int64_t rc, const char* fn) noexcept {
    if (rc < 0) [[unlikely]]
        compose_error(static_cast<int>(rc), fn);
    else if (__atomic_load_n(&g_messages_set.n, __ATOMIC_RELAXED) != 0) [[unlikely]]
        clear_error();
    return rc;
}

/// Records the detail of error `code` (a TW_E* value) of the call in
/// progress on this thread, for tw_last_error_message() (exports.cpp):
/// printf format, without the function's name (the exported function
/// prefixes it). Failure paths only.
void set_detail(int code, const char* fmt, ...) noexcept __attribute__((format(printf, 2, 3), cold));
/// The C++ runtime's detail for error `code` (a TW_E* value) recorded on
/// this thread, taken (see src/runtime/error_detail.hpp): true and copied
/// into out if there is one.
bool core_detail(int code, char* out, std::size_t cap) noexcept;
std::uint32_t version() noexcept;

}  // namespace tickwheel::capi
