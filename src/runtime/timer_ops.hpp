// SPDX-License-Identifier: MIT OR Apache-2.0
// The steps of start, stop and reset on one timer, shared by the single
// calls (start.cpp, stop.cpp, reset.cpp) and the batch calls (batch.cpp),
// and what a call carries between them: its clock readings (Readings) and,
// for a batch, the inbox messages it collects to post as one block per
// shard (Outbox).
// Every change of a timer's word stays a TimerState call (timer_state.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "runtime/hazard.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/test_hooks.hpp"
#include "runtime/timer_state.hpp"

namespace tickwheel::rt {

/// The clock readings of one call: each clock is read once, when first
/// asked, and every deadline of the call is relative to that reading (a
/// batch reads the monotonic clock once for all its elements: never early,
/// since the reading is taken after the call began).
class Readings {
public:
    explicit Readings(const Clocks& clocks) noexcept : clocks_(clocks) {}
    std::int64_t mono() noexcept { return now(ClockId::Monotonic); }
    std::int64_t now(ClockId c) noexcept {
        const auto i = static_cast<unsigned>(c);
        if ((have_ & (1u << i)) == 0) {
            value_[i] = c == ClockId::Monotonic ? clocks_.mono() : clocks_.now(c);
            have_ |= 1u << i;
        }
        return value_[i];
    }
    /// An upper bound of CLOCK_MONOTONIC, read once (Clocks::mono_upper,
    /// at most ~3 us above the clock): only for "now + delay" on the
    /// monotonic clock, where a reading a little late only makes the timer
    /// as much later. Everything else (absolute deadlines, another clock's
    /// offset) uses mono().
    std::int64_t mono_upper() noexcept {
        if (!have_upper_) {
            upper_ = clocks_.mono_upper();
            have_upper_ = true;
        }
        return upper_;
    }
    /// clock.deadline_tick(mono_deadline), computed once for a run of equal
    /// deadlines (a batch's one delay from its one reading).
    tick_t deadline_tick(const TickClock& clock, std::int64_t mono_deadline) noexcept {
        if (!have_tick_ || mono_deadline != tick_of_) {
            tick_of_ = mono_deadline;
            tick_ = clock.deadline_tick(mono_deadline);
            have_tick_ = true;
        }
        return tick_;
    }

private:
    const Clocks& clocks_;
    unsigned have_ = 0;
    std::int64_t value_[kClocks] = {};
    bool have_upper_ = false;
    std::int64_t upper_ = 0;
    bool have_tick_ = false;
    std::int64_t tick_of_ = 0;
    tick_t tick_ = 0;
};

/// Inbox messages collected by a batch call, posted as one block per shard
/// (Shard::post_cancels, post_bulk_and_wake, try_post_inserts) when it is
/// full or flushed. Single thread; the caller flushes before returning.
class Outbox {
public:
    enum class Kind {
        Cancel,    // stop's Cancels: never lost; the every-kCancelWakeEvery-th wake-up rule
        Deadline,  // reset's Refiles and Inserts: never lost; wakes a shard sleeping past the earliest
        Insert,    // start's Inserts: may fail (no memory), reported to flush()'s caller by tag
    };
    static constexpr std::size_t kCapacity = 256;

    Outbox(RuntimeCore& core, Kind kind) noexcept : core_(core), kind_(kind) {}
    Outbox(const Outbox&) = delete;
    Outbox& operator=(const Outbox&) = delete;

    std::size_t size() const noexcept { return n_; }
    /// Adds message `msg` for shard `shard` about tick `due`; `tag` names it
    /// to flush()'s failure callback (Insert). A full Cancel or Deadline box
    /// flushes first; an Insert box must not be full (the caller flushes).
    void add(std::uint32_t shard, std::uint64_t msg, tick_t due, std::uint32_t tag = 0) noexcept {
        if (n_ == kCapacity) flush();
        items_[n_++] = Item{msg, due, shard, tag};
    }
    /// Posts every message, one block per shard, and empties the box. For
    /// an Insert box, failed(tag) is called for each message that could not
    /// be queued (nothing else happened to it).
    template <class Failed>
    void flush(Failed&& failed) noexcept {
        if (n_ == 0) return;
        std::uint32_t tags[kCapacity];
        std::size_t nfailed = 0;
        flush_into(tags, nfailed);
        for (std::size_t i = 0; i < nfailed; ++i) failed(tags[i]);
    }
    void flush() noexcept {
        flush([](std::uint32_t) {});
    }

private:
    struct Item {
        std::uint64_t msg;
        tick_t due;
        std::uint32_t shard;
        std::uint32_t tag;
    };
    void flush_into(std::uint32_t* failed_tags, std::size_t& nfailed) noexcept;

    RuntimeCore& core_;
    const Kind kind_;
    std::size_t n_ = 0;
    Item items_[kCapacity];
};

// ---- start -----------------------------------------------------------------
/// A caller's StartOptions of another size than ours (a released layout),
/// into `to` (which holds the defaults). False if refused.
bool read_start_options(const StartOptions* p, std::size_t size, StartOptions& to) noexcept;
/// What a start checked and computed for one timer before it takes a record.
struct StartPlan {
    tick_t tick = 0;               // the first deadline, on the monotonic wheel
    std::uint64_t period = 0;      // in ticks; 0 = one-shot
    std::int64_t own_deadline = 0; // the first deadline on the timer's own clock
    std::uint16_t queue_slot = 0;  // its delivery queue, 0 = the workers
    std::uint32_t queue_gen = 0;   // its slot's generation then (checked again inside the StartGuard)
    std::uint32_t shard = 0;
};
/// Checks `o` and `cb` for start() (all but fork, shutdown and the limits)
/// and plans the timer against the call's readings: errc{} or
/// invalid_argument. Nothing is changed.
errc plan_start(const RuntimeCore& core, const StartOptions& o, const detail::Callback& cb, Readings& now,
                StartPlan& plan) noexcept;
/// Registers the calling thread as starting (its stripe of
/// RuntimeCore::starting) for the object's life; then shutting_down() tells
/// whether a shutdown has begun (see RuntimeCore). No user code may run
/// while one is held.
///
/// Cost: a thread with a leased stripe is its stripe's only writer, so it
/// registers with a plain load and store, and orders that store before its
/// load of `shutting_down` with light_fence() (hazard.hpp): shutdown()
/// pays the heavy side (heavy_fence(), membarrier) between setting the flag
/// and reading the stripes. Without membarrier, and on the shared stripe,
/// a seq_cst fetch_add as before. Inline: on every start.
/// Inside a StartGuard: whether the queue `plan` binds to (if any) is still
/// the one in its slot -- its destroy has not begun (issue 20, race 8).
/// Reads the queue table only, never the queue (a C caller's
/// tw_queue_destroy may free it meanwhile). Bound starts only.
inline bool queue_still_bindable(const RuntimeCore& core, const StartPlan& plan) noexcept {
    return plan.queue_slot == 0 || core.queues.slot_gen(plan.queue_slot) == plan.queue_gen;
}
class StartGuard {
public:
    explicit StartGuard(RuntimeCore& core) noexcept
        : core_(core), stripe_(this_thread_stripe()), n_(core.starting[stripe_].n) {
        if (stripe_ != kShared) {
            n_.store(n_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
            light_fence();  // the store above before the flag's load below
        } else {
            n_.fetch_add(1, std::memory_order_seq_cst);
        }
    }
    ~StartGuard() {
        // Release: shutdown's sweep, which waits for 0 (acquire), sees the
        // timer this start made.
        if (stripe_ != kShared)
            n_.store(n_.load(std::memory_order_relaxed) - 1, std::memory_order_release);
        else
            n_.fetch_sub(1, std::memory_order_release);
    }
    StartGuard(const StartGuard&) = delete;
    StartGuard& operator=(const StartGuard&) = delete;
    bool shutting_down() const noexcept { return core_.shutting_down.load(std::memory_order_seq_cst); }

private:
    RuntimeCore& core_;
    const unsigned stripe_;
    std::atomic<std::int64_t>& n_;
};

// (runtime_core.hpp; shutdown, runtime.cpp, and destroy_queue,
// queue_lifecycle.cpp, inline it.)
inline void RuntimeCore::wait_for_starts() noexcept {
    // The heavy side of StartGuard's fence: a start whose registration this
    // misses sees what the caller stored before (StartGuard, above).
    heavy_fence();
    for (auto& g : starting)
        while (g.n.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
}

/// Makes a record this thread just allocated (index, gen) the timer `plan`
/// describes: period, side record, flags, the callable (moved from `cb`),
/// PENDING, group and clock indexes. `file_at` gets the tick to file it
/// at. On no_memory `cb` holds the callable again and the caller takes the
/// record back (take_back()).
errc fill_record(RuntimeCore& core, Shard& shard, Record& r, std::uint32_t index, std::uint32_t gen,
                 const StartOptions& o, const StartPlan& plan, detail::Callback& cb, tick_t& file_at) noexcept;
/// Gives back whole a record a failed start took (nobody knows its id):
/// terminal, recycled, the live count undone.
void take_back(RuntimeCore& core, Shard& shard, Record& r) noexcept;
/// take_back() of a record fill_record() published, whose Insert could not
/// be queued: if the word is still PENDING (try_unpublish), the callable
/// returns to `cb`, the record is recycled, and it returns true (the start
/// fails with no_memory). False: a group stop found the timer in its group
/// and ended it (released the callable, posted the Cancel that recycles
/// the record): the start succeeded and its timer was stopped at once.
bool take_back_published(RuntimeCore& core, Shard& shard, Record& r, std::uint32_t gen,
                         detail::Callback& cb) noexcept;

// ---- stop ------------------------------------------------------------------
/// A stop or a reset of a timer bound to a delivery queue takes the queue's
/// transition mutex around its CAS (delivery_queue.hpp: every way out of
/// DISPATCHED of a bound timer is taken under it), inside a section (the
/// queue cannot go away). The queue is found BEFORE the CAS, from the
/// record's flags and slot: they are the id's timer's if the CAS then
/// succeeds on its generation (a record is recycled -- generation + 1 --
/// before a new occupant writes them), so a thread that no longer owns the
/// record never reads them (issue 20: undue() after a reset). A timer not
/// bound to a queue costs one flags test.
class BoundTransition {
public:
    BoundTransition(const RuntimeCore& core, const Record& r, std::uint32_t gen) noexcept {
        if ((r.flags() & Record::kHasQueue) == 0) [[likely]]
            return;
        section_.emplace(core.queues);
        if (r.gen() != gen) return;  // stale id: its CAS fails; no queue to tell
        q_ = core.queues.get(HandleTable::queue_slot_of(r));
        if (q_ == nullptr) return;
        test_hooks::window(&r, 'q');
        lock_ = std::unique_lock<std::mutex>(q_->transition_mutex());
    }
    /// The CAS took the timer out of DISPATCHED: its item is no longer live.
    void left_dispatched(const Record& r) noexcept {
        if (q_ == nullptr) return;
        TW_OWNER_ASSERT(lock_.owns_lock());  // the CAS out of DISPATCHED was made under q's mutex
        test_hooks::window(&r, 'u');
        q_->undue_locked(r);
    }

private:
    std::optional<QueueTable::Section> section_;
    DeliveryQueue* q_ = nullptr;
    std::unique_lock<std::mutex> lock_;
};

/// One stop attempt (a CAS in a HazardScope on `slot`, this thread's; a
/// delivery queue's due timer is counted out). On Cancelled the caller owns
/// the record (RELEASING): settle_cancelled() runs its hook, then the
/// caller counts and posts the Cancel.
CancelOutcome try_stop(RuntimeCore& core, Record& r, std::uint32_t gen, HazardSlot* slot) noexcept;
/// After a Cancelled try_stop(): the release hook (not counted:
/// RuntimeCore::count_released), then CANCELLED; stop_sync() waiters are
/// woken, unless `wake` is false (the caller's TimerState::wake_all() does,
/// before the Cancel is posted).
void settle_cancelled(RuntimeCore& core, Record& r, bool wake = true) noexcept;

// ---- reset -----------------------------------------------------------------
/// Re-arms timer `id` to `value` -- a delay from the call's reading, or an
/// absolute deadline on the timer's own clock (`absolute`; a delay is
/// already checked against kMaxDelay). The message it needs goes to `box`,
/// or, with none, is posted at once. Not counted (the caller adds kReset).
/// False with `ec` set for shutting_down or invalid_argument, false with
/// `ec` untouched for a timer that is not pending.
bool reset_to(RuntimeCore& core, std::uint64_t id, std::int64_t value, bool absolute, Readings& now, Outbox* box,
              std::error_code& ec) noexcept;
/// reset_to() of the record `r` that id's index names on `shard` (found by
/// the caller, its generation not yet checked), in a HazardScope on `slot`.
bool reset_record(RuntimeCore& core, Shard& shard, Record& r, std::uint64_t id, std::int64_t value, bool absolute,
                  Readings& now, Outbox* box, HazardSlot* slot, std::error_code& ec) noexcept;

// ---- batches (batch.cpp) -------------------------------------------------------
// Each acts as the single call on every element in order. The caller has
// checked the fork and its arguments; `results` (may be null) receives each
// element's outcome as the single call reports it. They return how many
// elements succeeded.
std::size_t stop_batch(RuntimeCore& core, const std::uint64_t* ids, std::size_t n, std::error_code* results) noexcept;
std::size_t reset_batch(RuntimeCore& core, const std::uint64_t* ids, std::size_t n, std::int64_t delay_ns,
                        std::error_code* results) noexcept;
/// `opts`: n StartOptions of `opts_size` bytes each (a released layout);
/// `cbs[i]` is moved into the timer, or destroyed (its release hook) before
/// returning if element i fails; `out[i]` the Timer or an empty one.
std::size_t start_batch(RuntimeCore& core, Runtime* self, const StartOptions* opts, std::size_t opts_size,
                        std::size_t n, detail::Callback* cbs, Timer* out, std::error_code* results) noexcept;

}  // namespace tickwheel::rt
