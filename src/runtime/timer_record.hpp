// SPDX-License-Identifier: MIT OR Apache-2.0
// The timer record and the ids that name it.
//
// A record lives in a shard's handle table for as long as the process keeps
// the runtime (handle_table.hpp owns its life: allocation, generations,
// recycling, quarantine, retirement). Its control word `ctl` is written only
// by TimerState (timer_state.hpp), which also documents the states.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/clock.hpp"
#include "tickwheel/detail/callback.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::rt {

struct TimerState;

/// What a timer has beyond the common case (a one-shot, no group, no
/// leeway): a periodic timer's run and miss counters and its policy, a
/// leeway, a group. Kept apart from the record, in a lazily created side
/// arena of the handle table (HandleTable::extra), so that the timers that
/// have none never touch it. Written by start() before it publishes the
/// record's word (relaxed stores, ordered by that release), read after an
/// acquire of the word by whoever validated the id; the counters are
/// updated by the owner of the state that counts (the shard: missed and
/// owed; the worker that begins a run: runs). Atomic because a reader
/// holding a stale id may read them while start() reuses the record (it
/// then re-validates the generation and discards what it read).
struct Extra {
    std::atomic<std::uint64_t> runs{0};    // runs begun (tw_timer_info.runs)
    std::atomic<std::uint64_t> missed{0};  // grid deadlines skipped (SKIP)
    // Grid deadlines passed, not yet run (BURST): the count in the low 40
    // bits, tagged with the timer's 24-bit generation above them, so that a
    // reset that clears it (a CAS) never touches a later occupant's count.
    std::atomic<std::uint64_t> owed{0};
    static constexpr unsigned kOwedTagShift = 40;
    static constexpr std::uint64_t kOwedCountMask = (std::uint64_t{1} << kOwedTagShift) - 1;
    static constexpr std::uint64_t owed_tag(std::uint32_t gen) noexcept { return std::uint64_t{gen} << kOwedTagShift; }
    std::atomic<std::uint64_t> group{0};   // 0 = none
    std::atomic<std::uint64_t> leeway_ns{0};
    std::atomic<std::uint64_t> leeway_ticks{0};  // leeway_ns in whole ticks (the coalescing window)
    // A boot-time or wall-clock timer: the nominal deadline of its next run
    // on its own clock (exact: the word holds it converted to a tick of the
    // monotonic wheel by the offset of the moment). The shard checks it on
    // its own clock before it fires, moves it along the grid with the word
    // (fixed-rate), and re-converts it when the clock moves against the
    // monotonic one (Shard::reclock) -- from this value, so repeated clock
    // steps never add up rounding.
    std::atomic<std::int64_t> deadline_ns{0};
    std::atomic<std::uint64_t> seq{0};  // a manual runtime's timers: start order (ties of an advance)
};

/// A periodic timer's policy when runs fall behind (tw_timer_spec.period_policy).
enum class Policy : std::uint16_t { Skip = 0, Delay = 1, Burst = 2 };

/// One timer. 80 bytes: the wheel node (links, wheel deadline, location,
/// flags in its spare 16 bits and the full generation in its spare 32
/// bits), ctl, period and the callable.
class Record : public WheelNode {
public:
    // ---- flags (WheelNode::user16) -----------------------------------------
    // 0 for the common timer (one-shot, no leeway, no group), which never
    // writes them: start() stores them only when non-zero, recycle() clears
    // them only when non-zero (both own the record then), so the common
    // start touches no extra line. Written before the word is published,
    // read after an acquire of it; release/acquire (plain moves on x86) also
    // order a worker's late Extra for a one-shot that re-armed itself.
    static constexpr std::uint16_t kHasExtra = 1;       // Extra is valid for this occupant
    static constexpr std::uint16_t kPolicyShift = 1;    // 2 bits: Policy
    static constexpr std::uint16_t kPolicyMask = 3u << kPolicyShift;
    static constexpr std::uint16_t kHasLeeway = 1u << 3;  // Extra::leeway_ticks != 0
    static constexpr std::uint16_t kHasGroup = 1u << 4;   // Extra::group != 0
    static constexpr std::uint16_t kClockShift = 5;       // 2 bits: ClockId (0: monotonic)
    static constexpr std::uint16_t kClockMask = 3u << kClockShift;
    std::uint16_t flags() const noexcept {
        return std::atomic_ref<const std::uint16_t>(user16).load(std::memory_order_acquire);
    }
    void set_flags(std::uint16_t f) noexcept { std::atomic_ref<std::uint16_t>(user16).store(f, std::memory_order_release); }
    bool has_extra() const noexcept { return (flags() & kHasExtra) != 0; }
    Policy policy() const noexcept { return static_cast<Policy>((flags() & kPolicyMask) >> kPolicyShift); }
    /// The clock the timer counts on (kept in Extra::deadline_ns when not monotonic).
    ClockId clock() const noexcept { return static_cast<ClockId>((flags() & kClockMask) >> kClockShift); }
    /// The period the wheel keeps a rhythm for: a fixed-rate (SKIP, BURST)
    /// timer's; 0 for a one-shot and for DELAY (re-filed after each run).
    std::uint64_t grid_period() const noexcept { return policy() == Policy::Delay ? 0 : period_ticks(); }

    // The period in ticks (0 = one-shot) in the low kPeriodBits, and the
    // slot of the delivery queue the timer is bound to (delivery_queue.hpp;
    // 0 = the runtime's workers) in the bits above: one word that start()
    // writes anyway, in the record's second cache line with ctl and the
    // callable (the queue slot in the node's spare bytes cost a second line
    // per start, ~5% at 1 M pending). Written by start() before ctl is
    // published, read after an acquire of ctl. Atomic because a caller
    // holding a stale id may read it while start() reuses the slot (its CAS
    // on ctl then fails).
    static constexpr unsigned kPeriodBits = 51;  // > log2(2^60 ns / 1 us): the longest period in ticks
    static constexpr std::uint64_t kPeriodMask = (std::uint64_t{1} << kPeriodBits) - 1;
    static constexpr std::uint32_t kMaxQueueSlot = (1u << (64 - kPeriodBits)) - 1;  // 8191
    std::atomic<std::uint64_t> period{0};
    std::uint64_t period_ticks() const noexcept { return period.load(std::memory_order_relaxed) & kPeriodMask; }
    bool periodic() const noexcept { return period_ticks() != 0; }
    /// The delivery queue's slot, 0 = the workers.
    std::uint16_t queue_slot() const noexcept {
        return static_cast<std::uint16_t>(period.load(std::memory_order_relaxed) >> kPeriodBits);
    }
    /// Sets both (start(), before publishing ctl). `ticks` <= kPeriodMask,
    /// `queue_slot` <= kMaxQueueSlot.
    void set_period(std::uint64_t ticks, std::uint16_t queue_slot) noexcept {
        period.store((std::uint64_t{queue_slot} << kPeriodBits) | ticks, std::memory_order_relaxed);
    }
    detail::Callback cb;  // touched only by whoever owns the timer's current state

    /// The full 24-bit generation. Stored in the node's spare bytes; written
    /// only by the handle table while it owns the record, read by anyone
    /// validating an id (after loading ctl: see timer_state.hpp).
    std::uint32_t gen() const noexcept {
        return std::atomic_ref<const std::uint32_t>(user32).load(std::memory_order_acquire);
    }
    void set_gen(std::uint32_t g) noexcept {
        std::atomic_ref<std::uint32_t>(user32).store(g, std::memory_order_release);
    }

private:
    friend struct TimerState;
    std::atomic<std::uint64_t> ctl{0};
};

// ---- ids ------------------------------------------------------------------
//   63        40 39     32 31                 0
//  +------------+---------+--------------------+
//  | gen (24)   | shard(8)|  index (32)        |
//  +------------+---------+--------------------+
// Generations run 1 .. kMaxGen and never wrap: a slot that reaches kMaxGen
// is retired (never reused), so no valid id is 0 and no id names two timers.
struct Id {
    static constexpr std::uint32_t kGenBits = 24;
    static constexpr std::uint32_t kGenMask = (1u << kGenBits) - 1;
    static constexpr std::uint32_t kMaxGen = kGenMask;
    static constexpr unsigned kMaxShards = 256;

    static constexpr std::uint64_t make(std::uint32_t gen, std::uint32_t shard, std::uint32_t index) noexcept {
        return (std::uint64_t{gen & kGenMask} << 40) | (std::uint64_t{shard & 0xFF} << 32) | index;
    }
    static constexpr std::uint32_t gen(std::uint64_t id) noexcept {
        return static_cast<std::uint32_t>(id >> 40) & kGenMask;
    }
    static constexpr std::uint32_t shard(std::uint64_t id) noexcept {
        return static_cast<std::uint32_t>(id >> 32) & 0xFF;
    }
    static constexpr std::uint32_t index(std::uint64_t id) noexcept {
        return static_cast<std::uint32_t>(id);
    }
};

}  // namespace tickwheel::rt
