// SPDX-License-Identifier: MIT OR Apache-2.0
// What travels between threads about a timer, besides its word: the 64-bit
// inbox messages callers (and workers) send to a shard, and the FireItem a
// shard hands to the dispatcher.
#pragma once

#include <cstdint>

#include "runtime/timer_record.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::rt {

//   63 62 | 61..56 unused | 55..32 generation | 31..0 index
enum class MsgType : std::uint64_t {
    Insert = 0,  // file a PENDING record that is not in the wheel
    Refile = 1,  // a PENDING/RUNNING record's deadline moved earlier
    Cancel = 2,  // a CANCELLED record: unlink it and recycle the slot
};
struct Msg {
    static constexpr std::uint64_t make(MsgType t, std::uint32_t gen, std::uint32_t index) noexcept {
        return (static_cast<std::uint64_t>(t) << 62) | (std::uint64_t{gen & Id::kGenMask} << 32) | index;
    }
    static constexpr MsgType type(std::uint64_t m) noexcept { return static_cast<MsgType>(m >> 62); }
    static constexpr std::uint32_t gen(std::uint64_t m) noexcept {
        return static_cast<std::uint32_t>(m >> 32) & Id::kGenMask;
    }
    static constexpr std::uint32_t index(std::uint64_t m) noexcept { return static_cast<std::uint32_t>(m); }
};

/// One due timer a shard hands to the dispatcher: the record, the full
/// generation it was dispatched under, its shard, the deadline that came
/// due, and when its shard's driver handed it over (`found_ns`, monotonic:
/// the end of the "driver" stage of its lateness, issue 34; 0: not
/// measured -- a manual runtime's advance, which steps its clocks to each
/// deadline -- and the stage counts as 0).
///
/// A claim item (gen has kClaim set; issue 21) is a one-shot the shard found
/// due in its wheel and handed over WITHOUT a transition: its word is still
/// PENDING, and `due` is the shard's "now" (the tick it judged it due at).
/// The worker makes the transition itself (TimerState::claim_run) and runs
/// it as a FireItem of generation `gen & ~kClaim` due at the word's deadline.
struct FireItem {
    static constexpr std::uint32_t kClaim = 1u << 31;  // above Record's 24-bit generation
    Record* rec;
    std::uint32_t gen;
    std::uint32_t shard;
    tick_t due;
    std::int64_t found_ns = 0;
};
static_assert(sizeof(FireItem) == 32);

}  // namespace tickwheel::rt
