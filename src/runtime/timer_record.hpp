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

#include "runtime/callable.hpp"
#include "runtime/clock.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::rt {

struct TimerState;

/// What a timer has beyond the common case (a one-shot, no group, no
/// leeway): a periodic timer's run and miss counters and its policy, a
/// leeway, a group. Kept apart from the record, in a lazily created side
/// arena of the handle table (HandleTable::extra), one 64-byte line each, so
/// that the timers that have none never touch it. Written by start() before
/// it publishes the record's word (relaxed stores, ordered by that release),
/// read after an acquire of the word by whoever validated the id; the
/// counters are updated by the owner of the state that counts (the shard:
/// missed and owed; the worker that begins a run: runs). Atomic because a
/// reader holding a stale id may read them while start() reuses the record
/// (it then re-validates the generation and discards what it read). Who
/// writes each field in which state: the owner table in timer_state.hpp.
struct alignas(64) Extra {
    std::atomic<std::uint64_t> runs{0};    // runs begun (tw_timer_info.runs)
    std::atomic<std::uint64_t> missed{0};  // grid deadlines skipped (SKIP)
    // Grid deadlines passed, not yet run (BURST): the count in the low 40
    // bits, tagged with the timer's 24-bit generation above them, so that a
    // reset that clears it (a CAS) never touches a later occupant's count.
    std::atomic<std::uint64_t> owed{0};
    static constexpr unsigned kOwedTagShift = 40;
    static constexpr std::uint64_t kOwedCountMask = (std::uint64_t{1} << kOwedTagShift) - 1;
    static constexpr std::uint64_t owed_tag(std::uint32_t gen) noexcept { return std::uint64_t{gen} << kOwedTagShift; }
    // The most owed runs a catch-up serves (kBurstMaxOwed, runtime.hpp;
    // TW_BURST_MAX_OWED): when a run looks and finds more, the oldest are
    // skipped and counted in `missed` (issue 31).
    static constexpr std::uint64_t kMaxOwed = 1000;
    std::atomic<std::uint64_t> group{0};   // 0 = none
    std::atomic<std::uint64_t> leeway_ns{0};  // (its whole ticks, the coalescing window: leeway_ticks())
    // A boot-time or wall-clock timer: the nominal deadline of its next run
    // on its own clock (exact: the word holds it converted to a tick of the
    // monotonic wheel by the offset of the moment). The shard checks it on
    // its own clock before it fires, moves it along the grid with the word
    // (fixed-rate), and re-converts it when the clock moves against the
    // monotonic one (Shard::reclock) -- from this value, so repeated clock
    // steps never add up rounding.
    // It and the word's tick derived from it change together, only under
    // `own_lock` (OwnDeadline, timer_state.hpp): a lock word versioned with
    // the timer's 24-bit generation, so that a thread holding a stale id can
    // never take it, and a record is not reused while a thread holds it.
    std::atomic<std::int64_t> deadline_ns{0};
    std::atomic<std::uint64_t> own_lock{0};  // [generation:24 | count:40], count odd = held
    std::atomic<std::uint64_t> seq{0};  // a manual runtime's timers: start order (ties of an advance)

    /// The leeway in whole ticks of `resolution_ns` (the coalescing window).
    std::uint64_t leeway_ticks(std::uint64_t resolution_ns) const noexcept {
        return leeway_ns.load(std::memory_order_relaxed) / resolution_ns;
    }
};
static_assert(sizeof(Extra) == 64, "one side record = one cache line");

/// A periodic or queue-bound timer's period word: the period in ticks (0 =
/// one-shot) in the low kPeriodBits, and the slot of the delivery queue the
/// timer is bound to (delivery_queue.hpp; 0 = the runtime's workers) in the
/// bits above. The 80-byte record of 1.3 carried it; it now lives beside the
/// record, in a dense side array of 8 bytes per record
/// (HandleTable::period_word_of): read-mostly lines that the shard reads on
/// every fire of a periodic timer without pulling the line a worker counts
/// runs on, and that stay in cache for a million queue-bound timers where a
/// side record each would cost a cold line. The record's flags (kPeriodic,
/// kHasQueue) say whether a timer has one: other timers never read it.
struct PeriodWord {
    static constexpr unsigned kPeriodBits = 51;  // > log2(2^60 ns / 1 us): the longest period in ticks
    static constexpr std::uint64_t kPeriodMask = (std::uint64_t{1} << kPeriodBits) - 1;
    static constexpr std::uint32_t kMaxQueueSlot = (1u << (64 - kPeriodBits)) - 1;  // 8191
    /// `ticks` <= kPeriodMask, `queue_slot` <= kMaxQueueSlot.
    static constexpr std::uint64_t make(std::uint64_t ticks, std::uint16_t queue_slot) noexcept {
        return (std::uint64_t{queue_slot} << kPeriodBits) | ticks;
    }
    static constexpr std::uint64_t period_ticks(std::uint64_t w) noexcept { return w & kPeriodMask; }
    /// The delivery queue's slot, 0 = the workers.
    static constexpr std::uint16_t queue_slot(std::uint64_t w) noexcept {
        return static_cast<std::uint16_t>(w >> kPeriodBits);
    }
};

/// A periodic timer's policy when runs fall behind (tw_timer_spec.period_policy).
enum class Policy : std::uint16_t { Skip = 0, Delay = 1, Burst = 2 };

/// One timer: 64 bytes, one cache line (records are 64-aligned in their
/// chunks, handle_table.hpp), so a start, a stop, a fire touch one line:
///
///    0      8      16        24  26     28             32      40                64
///   +------+------+---------+---+------+--------------+-------+------------------+
///   | next | prev | wheel   |loc| kind | flags | gen  |  ctl  | callable bytes   |
///   |      |      | deadline|   | (16) | (8)   | (24) |       | (24)             |
///   +------+------+---------+---+------+--------------+-------+------------------+
///    WheelNode (32 B: links, deadline and location are the wheel's;
///    user16 = kind, user32 = flags | gen)
///
/// The callable is the 24 inline bytes of the detail::Callback the timer was
/// started with, and its kind: the index of the Callback's ops table in the
/// process-wide registry (callable.hpp) in place of the 8-byte pointer. A
/// callable type the full registry has no room for is boxed (kind
/// CallableKinds::kBoxed). What only some timers have is beside the record,
/// flagged here: a leeway, a group, another clock, a periodic timer's
/// counters in the side record (Extra); the period word (a period, a
/// delivery queue) in a side array of its own (PeriodWord), which the 80-byte
/// record of 1.3 carried. kPeriodic and kHasQueue answer stop's and the
/// driver's questions without reading it.
class alignas(64) Record : public WheelNode {
public:
    // ---- flags (the top 8 bits of WheelNode::user32) -------------------------
    // 0 for the common timer (one-shot, no leeway, no group, no queue).
    // Written by the record's owner only (start() before the word is
    // published, recycle(), a worker settling a one-shot that re-armed
    // itself), read after an acquire of the word; release/acquire (plain
    // moves on x86) also order a worker's late Extra for a one-shot that
    // re-armed itself. They share their 32 bits with the generation: one
    // load gives both, and the store that moves the generation on clears
    // them (recycle()).
    static constexpr std::uint16_t kHasExtra = 1;       // Extra is valid for this occupant
    static constexpr std::uint16_t kPolicyShift = 1;    // 2 bits: Policy (periodic timers)
    static constexpr std::uint16_t kPolicyMask = 3u << kPolicyShift;
    static constexpr std::uint16_t kHasLeeway = 1u << 3;  // Extra::leeway_ticks != 0
    static constexpr std::uint16_t kPeriodic = 1u << 4;   // PeriodWord::period_ticks() != 0
    static constexpr std::uint16_t kClockShift = 5;       // 2 bits: ClockId (0: monotonic)
    static constexpr std::uint16_t kClockMask = 3u << kClockShift;
    static constexpr std::uint16_t kHasQueue = 1u << 7;   // PeriodWord::queue_slot() != 0
    // (A group needs no flag: Extra::group, read with the other fields.)
    static constexpr unsigned kFlagsShift = 24;
    static constexpr std::uint32_t kGenMask = (1u << kFlagsShift) - 1;
    std::uint16_t flags() const noexcept { return static_cast<std::uint16_t>(word32() >> kFlagsShift); }
    /// Sets the flags, keeping the generation (the owner; see above).
    void set_flags(std::uint16_t f) noexcept {
        static_assert(kHasQueue < (1u << (32 - kFlagsShift)), "the flags fit the top byte of user32");
        std::atomic_ref<std::uint32_t>(user32).store(
            (std::uint32_t{f} << kFlagsShift) | (std::atomic_ref<std::uint32_t>(user32).load(std::memory_order_relaxed) & kGenMask),
            std::memory_order_release);
    }
    bool has_extra() const noexcept { return (flags() & kHasExtra) != 0; }
    Policy policy() const noexcept { return static_cast<Policy>((flags() & kPolicyMask) >> kPolicyShift); }
    /// The clock the timer counts on (kept in Extra::deadline_ns when not monotonic).
    ClockId clock() const noexcept { return static_cast<ClockId>((flags() & kClockMask) >> kClockShift); }
    /// Periodic (its period: Extra::period_ticks()). Read on every stop: no Extra load.
    bool periodic() const noexcept { return (flags() & kPeriodic) != 0; }
    /// Whether the wheel keeps a rhythm for it: a fixed-rate (SKIP, BURST)
    /// periodic timer; not a one-shot nor DELAY (re-filed after each run).
    bool fixed_rate() const noexcept {
        const std::uint16_t f = flags();
        return (f & kPeriodic) != 0 && (f & kPolicyMask) != static_cast<std::uint16_t>(Policy::Delay) << kPolicyShift;
    }

    /// The full 24-bit generation (the low 24 bits of WheelNode::user32);
    /// written only by the handle table while it owns the record, read by
    /// anyone validating an id (after loading ctl: see timer_state.hpp).
    std::uint32_t gen() const noexcept { return word32() & kGenMask; }
    /// Sets the generation and clears the flags: the next occupant starts as
    /// a common timer (the handle table, owning the record).
    void set_gen(std::uint32_t g) noexcept { std::atomic_ref<std::uint32_t>(user32).store(g & kGenMask, std::memory_order_release); }

    // ---- the callable (its kind in WheelNode::user16, its bytes in fn_) -------
    // Touched only by whoever owns the timer's current state (as the
    // Callback of 1.3 was); plain accesses.
    /// Moves `cb`'s callable in (start(), owning the record; the record holds
    /// none). False if it had to be boxed and there was no memory for the
    /// box: then `cb` is unchanged. Precondition: cb is not empty.
    bool store_callable(detail::Callback& cb) noexcept { return store_callable(cb, kind_of(cb)); }
    /// The kind store_callable() gives `cb` (kNone: it would box it -- a heap
    /// allocation -- first).
    static std::uint16_t kind_of(const detail::Callback& cb) noexcept {
        return CallableKinds::find(CallbackAccess::ops(cb));
    }
    /// store_callable() of a callable whose kind_of() is `kind`.
    bool store_callable(detail::Callback& cb, std::uint16_t kind) noexcept {
        if (kind == CallableKinds::kNone) [[unlikely]] {
            if (!CallableKinds::box(cb, fn_)) return false;
            user16 = CallableKinds::kBoxed;
            return true;
        }
        CallbackAccess::move_out(cb, fn_);
        user16 = kind;
        return true;
    }
    /// Moves the callable back out into the empty `cb` (a start that failed
    /// after storing it).
    void return_callable(detail::Callback& cb) noexcept {
        const std::uint16_t kind = user16 & kKindMask;
        user16 = CallableKinds::kNone;
        if (kind != CallableKinds::kNone) CallbackAccess::move_in(cb, CallableKinds::ops(kind), fn_);
    }
    /// Calls the callable (the owner of RUNNING). May throw what it throws.
    void invoke(Timer t) { CallableKinds::ops(user16 & kKindMask)->invoke(fn_, t); }
    /// The top bit of user16, beside the kind (< 4096): this occupant was
    /// placed in its starter's cell (caller_cells.hpp). Set by the start
    /// before it publishes the word; cleared with the callable (release,
    /// the next store_callable). A stop reads it after its CAS (before the
    /// release) to know whether a take-back is worth its lookups.
    static constexpr std::uint16_t kInCell = 0x8000;
    static constexpr std::uint16_t kKindMask = 0x0FFF;
    void mark_in_cell() noexcept { user16 = static_cast<std::uint16_t>(user16 | kInCell); }
    bool placed_in_cell() const noexcept { return (user16 & kInCell) != 0; }
    /// Destroys the callable -- its release hook -- and leaves none.
    void destroy_callable() noexcept {
        const std::uint16_t kind = user16 & kKindMask;
        if (kind == CallableKinds::kNone) return;
        user16 = CallableKinds::kNone;
        CallableKinds::ops(kind)->destroy(fn_);
    }
    /// Leaves no callable WITHOUT destroying it (no release hook; a boxed
    /// callable leaks). Only for a fork() child discarding its parent's timers.
    void forget_callable() noexcept { user16 = CallableKinds::kNone; }
    bool has_callable() const noexcept { return (user16 & kKindMask) != CallableKinds::kNone; }
    /// What names the callable for a tracer (the run_end probe, issue 34):
    /// its type's invoker (a C++ callable's, by type; every C callback
    /// shares the C API's) and the first word of its bytes (the C API's
    /// tw_callback). The owner of RUNNING* only; for probes, never on a hot
    /// path unless a tracer is attached.
    const void* invoker_address() const noexcept {
        const CallbackOps* ops = CallableKinds::ops(user16 & kKindMask);
        return ops == nullptr ? nullptr : reinterpret_cast<const void*>(ops->invoke);
    }
    const void* first_word() const noexcept {
        const void* w;
        __builtin_memcpy(&w, fn_, sizeof w);
        return w;
    }

private:
    friend struct TimerState;
    std::uint32_t word32() const noexcept {
        return std::atomic_ref<const std::uint32_t>(user32).load(std::memory_order_acquire);
    }
    std::atomic<std::uint64_t> ctl{0};
    alignas(8) unsigned char fn_[CallbackAccess::kInline];
};
static_assert(sizeof(Record) == 64 && alignof(Record) == 64, "a record is one cache line");

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
    static_assert(kGenMask == Record::kGenMask);

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
