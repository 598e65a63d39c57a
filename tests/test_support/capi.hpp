// SPDX-License-Identifier: MIT OR Apache-2.0
// Set-ups shared by the tests of the C ABI (include/tickwheel/tickwheel.h):
// a runtime from a config (destroyed by RtPtr), a queue, a timer spec from
// its callback, argument and release, the stats structs read whole, and
// whether a queue's fd polls readable. A failed call is a test failure
// (EXPECT) where it happens; the helper still returns. A test takes them
// all with `using namespace tw_test::capi;`.
#pragma once

#include <poll.h>

#include <cstdint>
#include <memory>

#include <gtest/gtest.h>

#include "tickwheel/tickwheel.h"

namespace tw_test::capi {

inline constexpr std::uint64_t kMs = 1'000'000;  ///< a millisecond in ns

/// tw_config_init() with `shards` shards and `workers` workers.
inline tw_config c_config(std::uint32_t shards, std::uint32_t workers) {
    tw_config c;
    tw_config_init(&c);
    c.shards = shards;
    c.workers = workers;
    return c;
}

/// A runtime made with `c` (nullptr if tw_runtime_create failed: the test
/// fails then).
inline tw_runtime* create_runtime(const tw_config& c) {
    tw_runtime* rt = nullptr;
    EXPECT_EQ(tw_runtime_create(&c, &rt), TW_OK);
    EXPECT_NE(rt, nullptr);
    return rt;
}

/// Destroys a runtime at the end of the scope (its timers cancelled, their
/// releases run); the test fails if tw_runtime_destroy does.
struct RtDeleter {
    void operator()(tw_runtime* rt) const { EXPECT_EQ(tw_runtime_destroy(rt), TW_OK); }
};
using RtPtr = std::unique_ptr<tw_runtime, RtDeleter>;

inline tw_queue* make_queue(tw_runtime* rt) {
    tw_queue* q = nullptr;
    EXPECT_EQ(tw_queue_create(rt, &q), TW_OK);
    return q;
}

/// Whether the fd polls readable within `ms` (0: now).
inline bool readable(int fd, int ms = 0) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, ms) == 1 && (p.revents & POLLIN) != 0;
}

/// tw_timer_spec_init() with the callback, its argument and release hook,
/// and the delay and period; the caller sets any other field.
inline tw_timer_spec c_spec(tw_callback cb, void* arg, tw_release release, std::uint64_t delay_ns = 0,
                            std::uint64_t period_ns = 0) {
    tw_timer_spec s;
    tw_timer_spec_init(&s);
    s.delay_ns = delay_ns;
    s.period_ns = period_ns;
    s.callback = cb;
    s.arg = arg;
    s.release = release;
    return s;
}

inline tw_queue_stats queue_stats(tw_queue* q) {
    tw_queue_stats st;
    tw_queue_stats_init(&st);
    EXPECT_EQ(tw_queue_get_stats(q, &st), TW_OK);
    return st;
}

inline tw_stats rt_stats(tw_runtime* rt) {
    tw_stats st;
    tw_stats_init(&st);
    EXPECT_EQ(tw_runtime_stats(rt, &st), TW_OK);
    return st;
}

}  // namespace tw_test::capi
