// The timer record and its state machine.
//
// A record lives in a shard's handle table for as long as the process keeps
// the runtime; ids name (shard, index, generation). All cross-thread agreement
// about a timer goes through ONE atomic 64-bit word, `ctl`:
//
//     63          54 53   51 50                                  0
//    +--------------+-------+-------------------------------------+
//    | gen (10 bits)| state |  deadline in ticks (51 bits)        |
//    +--------------+-------+-------------------------------------+
//
// Packing the deadline with the state lets reset() move a deadline with one
// CAS that fails if the timer fired or was stopped in between, and lets the
// shard decide "fire now" with one CAS that fails if a reset or stop got
// there first. The 10 low bits of the generation make a CAS against a
// recycled record fail; the full 24-bit generation (checked first, in
// `gen()`) answers stale ids.
//
// States and who moves them (S = shard thread, W = worker, C = any caller):
//
//   FREE ---start(C)---> PENDING(d) ---expired, CAS (S)---> DISPATCHED(d')
//   PENDING(d) --reset(C)--> PENDING(d2)          (d2 > d: nothing else; the
//                                                  shard re-files lazily)
//   PENDING | DISPATCHED --stop(C)--> CANCELLED   (callable destroyed by C,
//                                                  then C tells the shard)
//   DISPATCHED --W starts the run--> RUNNING(d')
//   RUNNING, one-shot, run returns --> DONE (W destroys the callable) --> FREE
//   RUNNING, periodic, run returns --> PENDING(d')  (already back in the wheel)
//   RUNNING --stop(C), periodic--> RUNNING_STOPPED --run returns--> CANCELLED
//   RUNNING --reset(C) from its own one-shot callback--> RUNNING_REARMED(d2)
//          --run returns--> PENDING(d2) (W asks the shard to file it)
//   CANCELLED --shard unlinks it from its wheel--> FREE (generation + 1)
//
// For a periodic timer d' is the NEXT deadline: the shard re-files the record
// at d' when it dispatches a run, so the wheel, not the worker, keeps the
// rhythm; if d' comes while the run is still going (RUNNING or DISPATCHED),
// the shard skips that period.
#pragma once

#include <atomic>
#include <cstdint>

#include "tickwheel/detail/callback.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::rt {

enum class State : std::uint32_t {
    Free = 0,
    Pending = 1,
    Dispatched = 2,
    Running = 3,
    RunningStopped = 4,
    RunningRearmed = 5,
    Cancelled = 6,
    Done = 7,
};

struct Ctl {
    static constexpr unsigned kDeadlineBits = 51;
    static constexpr unsigned kStateShift = kDeadlineBits;
    static constexpr unsigned kGenShift = kDeadlineBits + 3;
    static constexpr std::uint64_t kDeadlineMask = (std::uint64_t{1} << kDeadlineBits) - 1;
    static constexpr std::uint64_t kMaxDeadline = kDeadlineMask;
    static constexpr std::uint32_t kGenMask = 0x3FF;

    static constexpr std::uint64_t make(std::uint32_t gen, State s, std::uint64_t deadline) noexcept {
        return (std::uint64_t{gen & kGenMask} << kGenShift) |
               (std::uint64_t{static_cast<std::uint32_t>(s)} << kStateShift) | (deadline & kDeadlineMask);
    }
    static constexpr State state(std::uint64_t c) noexcept {
        return static_cast<State>((c >> kStateShift) & 7);
    }
    static constexpr std::uint64_t deadline(std::uint64_t c) noexcept { return c & kDeadlineMask; }
    static constexpr std::uint32_t gen(std::uint64_t c) noexcept {
        return static_cast<std::uint32_t>(c >> kGenShift) & kGenMask;
    }
    static constexpr std::uint64_t with(std::uint64_t c, State s, std::uint64_t deadline) noexcept {
        return make(gen(c), s, deadline);
    }
    static constexpr std::uint64_t with(std::uint64_t c, State s) noexcept {
        return with(c, s, deadline(c));
    }
    static constexpr bool running(State s) noexcept {
        return s == State::Running || s == State::RunningStopped || s == State::RunningRearmed;
    }
};

/// One timer. 80 bytes: the wheel node (links, wheel deadline, location,
/// and the full generation in the node's spare 32 bits), ctl, period and
/// the callable.
struct Record : WheelNode {
    std::atomic<std::uint64_t> ctl{0};
    // Ticks; 0 = one-shot. Written by start() before ctl is published, read
    // after an acquire of ctl. Atomic because a caller holding a stale id may
    // read it while start() reuses the slot (its CAS on ctl then fails).
    std::atomic<std::uint64_t> period{0};
    std::uint64_t period_ticks() const noexcept { return period.load(std::memory_order_relaxed); }
    detail::Callback cb;       // touched only by whoever owns the timer's current state

    /// The full 24-bit generation. Stored in the node's spare bytes; written
    /// only when the record is recycled, read by anyone validating an id.
    std::uint32_t gen() const noexcept {
        return std::atomic_ref<const std::uint32_t>(user32).load(std::memory_order_acquire);
    }
    void set_gen(std::uint32_t g) noexcept {
        std::atomic_ref<std::uint32_t>(user32).store(g, std::memory_order_release);
    }
};

// ---- ids ------------------------------------------------------------------
//   63        40 39     32 31                 0
//  +------------+---------+--------------------+
//  | gen (24)   | shard(8)|  index (32)        |
//  +------------+---------+--------------------+
// Generations run 1 .. 2^24-1 and skip 0, so no valid id is 0.
struct Id {
    static constexpr std::uint32_t kGenBits = 24;
    static constexpr std::uint32_t kGenMask = (1u << kGenBits) - 1;
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
    static constexpr std::uint32_t next_gen(std::uint32_t g) noexcept {
        g = (g + 1) & kGenMask;
        return g == 0 ? 1 : g;
    }
};

}  // namespace tickwheel::rt
