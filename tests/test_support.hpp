// Helpers shared by the runtime test programs: sanitizer detection (bounds
// are looser under sanitizers), bounded waiting for a condition, and a small
// runtime configuration.
#pragma once

#include <chrono>
#include <thread>

#include "tickwheel/runtime.hpp"

namespace tw_test {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

/// How long wait_until() polls by default before giving up (reached only
/// when a test fails).
inline constexpr tickwheel::Duration kWait =
    kSanitized ? tickwheel::Duration(std::chrono::seconds(30)) : tickwheel::Duration(std::chrono::seconds(10));

/// Polls `pred` every 100 us until it holds or `timeout` passes; returns
/// whether it held. Never a sleep that hides a race: callers ASSERT on it.
template <class Pred>
[[nodiscard]] bool wait_until(Pred pred, tickwheel::Duration timeout = kWait) {
    const auto end = tickwheel::Clock::now() + timeout;
    for (;;) {
        if (pred()) return true;
        if (tickwheel::Clock::now() >= end) return pred();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
}

inline tickwheel::Config small_config(unsigned shards = 2, unsigned workers = 2) {
    tickwheel::Config c;
    c.shards = shards;
    c.workers = workers;
    return c;
}

}  // namespace tw_test
