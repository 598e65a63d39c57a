// Helpers shared by the runtime test programs: sanitizer detection (bounds
// are looser under sanitizers), bounded waiting for a condition, a small
// runtime configuration, and the documented id layout. Public API only
// (tickwheel/runtime.hpp): nothing from src/.
#pragma once

#include <chrono>
#include <cstdint>
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

// ---- ids ---------------------------------------------------------------------
// The id layout is documented (README, "Handles"): [generation:24 | shard:8 |
// index:32] -- the low 32 bits are the slot index within its shard, bits
// 32..39 the shard, bits 40..63 the generation. Tests rely on the layout
// only through these helpers.
inline std::uint32_t id_index(std::uint64_t id) noexcept { return static_cast<std::uint32_t>(id); }
inline std::uint32_t id_shard(std::uint64_t id) noexcept { return static_cast<std::uint32_t>(id >> 32) & 0xFFu; }
inline std::uint32_t id_gen(std::uint64_t id) noexcept { return static_cast<std::uint32_t>(id >> 40); }
inline std::uint64_t make_id(std::uint32_t gen, std::uint32_t shard, std::uint32_t index) noexcept {
    return (std::uint64_t{gen & 0xFFFFFFu} << 40) | (std::uint64_t{shard & 0xFFu} << 32) | index;
}

}  // namespace tw_test
