// SPDX-License-Identifier: MIT OR Apache-2.0
// start(): the callers' first transition, FREE -> PENDING.
//
// A start checks its options against one set of clock readings (plan_start,
// or start_plain's own checks for the common timer), registers against
// shutdown (StartGuard, timer_ops.hpp), takes a record of its shard (the
// calling thread's, pick_shard), writes the record's fields while its word
// is FREE (fill_record: this start is the owner of every field -- the owner
// table in timer_state.hpp), publishes it PENDING (TimerState::publish),
// indexes it (group, clock steps), and files it: a plain timer into the
// calling thread's cell of the shard (caller_cells.hpp), any other by an
// Insert through the shard's inbox. A start that fails
// after taking the record gives it back whole (take_back), and its callable
// is released on the caller's thread outside the guard (release_unstarted).
//
// Threads: any thread, including callbacks and release hooks. Progress:
// nothing here waits for another thread but a group start for the group
// index's lock (held only by callers, for O(1) amortised work: a worker
// never waits for it; the clock-step index takes a lock-free push), and
// nothing here holds what the runtime's threads
// wait for (timer_state.hpp, "WHO MAY WAIT FOR WHOM"); no user code runs
// inside a StartGuard.
// (The C++ API's rooms, one idea each, are listed in runtime_core.hpp.)
#include "tickwheel/runtime.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/abi_sizes.hpp"
#include "runtime/error_detail.hpp"
#include "runtime/hazard.hpp"
#include "runtime/probes.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/timer_ops.hpp"
#include "runtime/test_hooks.hpp"
#include "runtime/timer_state.hpp"

namespace tickwheel {
namespace rt {

// ---- the 1.x C++ ABI: a caller's StartOptions of a released size (abi_sizes.hpp)
bool read_start_options(const StartOptions* p, std::size_t size, StartOptions& to) noexcept {
    // Only the sizes of released layouts: any other one would cut a field.
    if (p == nullptr || (size != kStartOptionsSizeV1 && size != kStartOptionsSizeV12 && size != kStartOptionsSizeV13))
        return false;
    std::memcpy(&to, p, size);  // trivially copyable; the fields past `size` keep their defaults
    return true;
}

void RuntimeCore::release_unstarted(detail::Callback& cb) noexcept {
    ReleaseScope in_hook;
    cb.reset();
}

}  // namespace rt

// ---- start -----------------------------------------------------------------
namespace rt {
namespace {
std::atomic<std::uint32_t> next_thread_seq{0};

/// Checks start()'s times against the call's readings; the first
/// deadline's tick (on the monotonic wheel), the period in ticks, and the
/// first deadline on the timer's own clock on success.
errc start_args(const RuntimeCore& core, const StartOptions& o, Readings& readings, tick_t& tick,
                std::uint64_t& period, std::int64_t& own_deadline) noexcept {
    const TickClock& clock = core.clock;
    if (static_cast<std::uint32_t>(o.clock) >= kClocks) {
        set_error_detail(errc::invalid_argument, "clock %u is not a TimerClock (0 .. 2)", static_cast<unsigned>(o.clock));
        return errc::invalid_argument;
    }
    if (o.reserved != 0) {
        set_error_detail(errc::invalid_argument, "StartOptions::reserved is %u, not 0", o.reserved);
        return errc::invalid_argument;
    }
    const auto cid = static_cast<ClockId>(o.clock);
    // "now + delay" on the monotonic clock: the upper bound (clock.hpp).
    const bool upper = cid == ClockId::Monotonic && o.deadline == TimePoint{};
    const std::int64_t mono = upper ? readings.mono_upper() : readings.mono();
    const std::int64_t now = upper ? mono : readings.now(cid);
    const std::int64_t offset = now - mono;  // the timer's clock minus the monotonic one
    std::int64_t deadline;
    if (o.deadline != TimePoint{}) {
        deadline = std::chrono::duration_cast<Duration>(o.deadline.time_since_epoch()).count();
        if (deadline > now && deadline - now > kMaxDelay.count()) {
            set_error_detail(errc::invalid_argument,
                             "deadline %lld ns is %lld ns after the runtime's clock reads now (%lld): above kMaxDelay "
                             "(%lld ns)",
                             static_cast<long long>(deadline), static_cast<long long>(deadline - now),
                             static_cast<long long>(now), static_cast<long long>(kMaxDelay.count()));
            return errc::invalid_argument;
        }
    } else {
        if (o.delay < Duration::zero() || o.delay > kMaxDelay) {
            set_error_detail(errc::invalid_argument, "delay %lld ns is %s kMaxDelay (%lld ns)",
                             static_cast<long long>(o.delay.count()),
                             o.delay < Duration::zero() ? "negative: not within 0 .." : "above",
                             static_cast<long long>(kMaxDelay.count()));
            return errc::invalid_argument;
        }
        deadline = now + o.delay.count();
    }
    if (o.period < Duration::zero() || o.period > kMaxDelay) {
        set_error_detail(errc::invalid_argument, "period %lld ns is %s kMaxDelay (%lld ns)",
                         static_cast<long long>(o.period.count()),
                         o.period < Duration::zero() ? "negative: not within 0 .." : "above",
                         static_cast<long long>(kMaxDelay.count()));
        return errc::invalid_argument;
    }
    tick = readings.deadline_tick(clock, deadline - offset);
    own_deadline = deadline;
    if (tick > Ctl::kMaxDeadline) {
        set_error_detail(errc::invalid_argument, "deadline %lld ns is beyond the wheel's range",
                         static_cast<long long>(deadline));
        return errc::invalid_argument;
    }
    period = o.period > Duration::zero() ? clock.period_ticks(static_cast<std::uint64_t>(o.period.count())) : 0;
    return errc{};
}
}  // namespace

bool RuntimeCore::queue_slot(const Queue* q, std::uint16_t& slot, std::uint32_t& slot_gen) const noexcept {
    // Another runtime's queue, or one closed by its owner: refused. (Checked
    // again inside the start's guard, by the slot's generation.)
    if (q->rt_ != owner || q->impl_->destroyed()) return false;
    slot = q->impl_->slot();
    slot_gen = q->impl_->slot_gen();
    return true;
}

namespace {
/// The shard a start goes to: StartOptions::shard, or by default the
/// calling thread's own shard.
std::uint32_t pick_shard(const RuntimeCore& core, const StartOptions& o) noexcept {
    // Default placement: the calling thread's own shard, assigned
    // round-robin on its first start (measured against CPU-local,
    // round-robin-per-call and single-shard placement in
    // bench/shard_choice.cpp: see README).
    // (Initial-exec and constant-initialised: a plain load in the shared
    // library too, no __tls_get_addr and no guard; 0 = not assigned yet.)
    [[gnu::tls_model("initial-exec")]] constinit thread_local std::uint32_t t_thread_seq1 = 0;
    std::uint32_t seq1 = t_thread_seq1;
    if (seq1 == 0) [[unlikely]]
        t_thread_seq1 = seq1 = next_thread_seq.fetch_add(1, std::memory_order_relaxed) + 1;
    const auto nshards = static_cast<std::uint32_t>(core.shards.size());
    return o.shard >= 0 ? static_cast<std::uint32_t>(o.shard) % nshards : (seq1 - 1) % nshards;
}
}  // namespace

errc plan_start(const RuntimeCore& core, const StartOptions& o, const detail::Callback& cb, Readings& now,
                StartPlan& plan) noexcept {
    if (!cb) {
        set_error_detail(errc::invalid_argument, "the callback is empty");
        return errc::invalid_argument;
    }
    if (static_cast<std::uint32_t>(o.policy) > static_cast<std::uint32_t>(PeriodPolicy::burst)) {
        set_error_detail(errc::invalid_argument, "policy %u is not a PeriodPolicy (0 .. 2)",
                         static_cast<unsigned>(o.policy));
        return errc::invalid_argument;
    }
    if (o.leeway < Duration::zero() || o.leeway > kMaxDelay) {
        set_error_detail(errc::invalid_argument, "leeway %lld ns is %s kMaxDelay (%lld ns)",
                         static_cast<long long>(o.leeway.count()),
                         o.leeway < Duration::zero() ? "negative: not within 0 .." : "above",
                         static_cast<long long>(kMaxDelay.count()));
        return errc::invalid_argument;
    }
    plan.queue_slot = 0;
    plan.queue_gen = 0;
    if (o.queue != nullptr && !core.queue_slot(o.queue, plan.queue_slot, plan.queue_gen)) {
        set_error_detail(errc::invalid_argument, "the queue belongs to another runtime or was closed");
        return errc::invalid_argument;
    }
    if (const errc bad = start_args(core, o, now, plan.tick, plan.period, plan.own_deadline); bad != errc{}) return bad;
    plan.shard = pick_shard(core, o);
    return errc{};
}

// StartGuard (timer_ops.hpp): register as an in-flight start, then check
// for shutdown (see RuntimeCore). Nothing runs user code while registered:
// a failed start's callable is destroyed after leaving (a release hook that
// waits for a thread that is shutting down would deadlock here).

void take_back(RuntimeCore& core, Shard& shard, Record& r) noexcept {
    TimerState::unpublish(r);
    FreeChain freed(shard.table());
    // (A record that goes into quarantine wakes a shard in a long sleep:
    // only the shard reclaims it.)
    shard.recycle_ended(r, freed);
    if (core.max_timers != 0) core.live.fetch_sub(1, std::memory_order_relaxed);
}

bool take_back_published(RuntimeCore& core, Shard& shard, Record& r, std::uint32_t gen,
                         detail::Callback& cb) noexcept {
    if (!TimerState::try_unpublish(r, gen)) return false;  // a group stop ended it
    r.return_callable(cb);
    take_back(core, shard, r);
    return true;
}

namespace {
/// fill_record()'s publish of a boot-time or wall-clock timer: its deadline
/// on its clock and the word's tick are set under its deadline lock
/// (OwnDeadline). It is indexed for clock steps first, then its tick is
/// computed from clock readings taken after that: a re-clock pass that does
/// not find it in the index read its clock offsets before these readings
/// (it moved nothing this timer depends on); one that finds it waits for
/// the lock (looks again next pass) and re-files it from its exact deadline
/// (issue 20, race 7). `tick` gets the word's tick. False: no memory for
/// the index entry (nothing published). Out of line: only such timers pay.
[[gnu::noinline]] bool publish_clocked(RuntimeCore& core, Shard& shard, Record& r, Extra& x, std::uint32_t index,
                                       std::uint32_t gen, const StartOptions& o, const StartPlan& plan,
                                       tick_t& tick) noexcept {
    const std::uint64_t held = OwnDeadline::take_new(x, gen);
    OwnDeadline::store(x, held, plan.own_deadline);
    if (!core.clocks.manual()) {
        try {
            shard.clocked().add(static_cast<std::uint64_t>(o.clock), gen, index);
        } catch (...) {
            OwnDeadline::unlock(x, held);
            return false;  // (a stale index entry at most: dropped when seen)
        }
        Readings fresh(core.clocks);
        const std::int64_t mono = fresh.mono();
        const std::int64_t offset = fresh.now(static_cast<ClockId>(o.clock)) - mono;
        tick = std::min(core.clock.deadline_tick(plan.own_deadline - offset), Ctl::kMaxDeadline);
    }
    TimerState::publish(r, gen, tick);
    OwnDeadline::unlock(x, held);
    return true;
}
}  // namespace

errc fill_record(RuntimeCore& core, Shard& shard, Record& r, std::uint32_t index, std::uint32_t gen,
                 const StartOptions& o, const StartPlan& plan, detail::Callback& cb, tick_t& file_at) noexcept {
    // What the common timer (one-shot, no leeway, no group) does not
    // have goes to the side record (timer_record.hpp, Extra). Every field
    // below is written by this start, the record's owner, while its word is
    // FREE (the owner table, timer_state.hpp), after the release fence that
    // orders them after the generation's move (HandleTable::recycle): a
    // query holding a stale id that reads one of them sees the new
    // generation when it checks again, and discards what it read.
    std::atomic_thread_fence(std::memory_order_release);
    const std::uint64_t leeway_ticks =
        o.leeway > Duration::zero() ? static_cast<std::uint64_t>(o.leeway.count()) / core.clock.resolution_ns() : 0;
    file_at = plan.tick;
    const bool clocked = o.clock != TimerClock::monotonic;
    Extra* x = nullptr;
    std::uint16_t f = 0;  // the record's flags
    if (plan.period != 0 || leeway_ticks != 0 || o.group != 0 || o.leeway > Duration::zero() || clocked ||
        core.clocks.manual()) {
        x = shard.table().make_extra(index);
        if (x == nullptr) return errc::no_memory;  // (the callable is still in `cb`)
        owner::unpublished(r, gen, "Extra (start)");
        x->runs.store(0, std::memory_order_relaxed);
        x->missed.store(0, std::memory_order_relaxed);
        x->owed.store(Extra::owed_tag(gen), std::memory_order_relaxed);
        x->group.store(o.group, std::memory_order_relaxed);
        x->leeway_ns.store(static_cast<std::uint64_t>(o.leeway.count()), std::memory_order_relaxed);
        x->seq.store(core.clocks.manual() ? core.start_seq.fetch_add(1, std::memory_order_relaxed) : 0,
                     std::memory_order_relaxed);
        f |= Record::kHasExtra;
        f |= static_cast<std::uint16_t>(static_cast<std::uint16_t>(o.clock) << Record::kClockShift);
        if (plan.period != 0) {
            f |= Record::kPeriodic;
            f |= static_cast<std::uint16_t>(static_cast<std::uint16_t>(o.policy) << Record::kPolicyShift);
        }
        if (leeway_ticks != 0) f |= Record::kHasLeeway;
    }
    if (plan.period != 0 || plan.queue_slot != 0) {
        owner::unpublished(r, gen, "the period word");
        if (!shard.table().set_period_word(index, PeriodWord::make(plan.period, plan.queue_slot)))
            return errc::no_memory;
        if (plan.queue_slot != 0) f |= Record::kHasQueue;
    }
    if (f != 0) r.set_flags(f);
    // (No memory for the box of a callable the registry of kinds has no
    // room for: the callable is still in `cb`.)
    if (!r.store_callable(cb)) return errc::no_memory;
    tick_t tick = plan.tick;
    if (clocked) [[unlikely]] {
        if (!publish_clocked(core, shard, r, *x, index, gen, o, plan, tick)) {
            r.return_callable(cb);
            return errc::no_memory;
        }
    } else {
        TimerState::publish(r, gen, tick);
    }
    file_at = leeway_ticks != 0 ? coalesce(tick, leeway_ticks) : tick;
    if (o.group != 0) {
        // Indexed before start() returns: a group stop that begins after
        // it finds the timer (group_index.hpp).
        try {
            shard.groups().add(o.group, gen, index);
        } catch (...) {
            // No memory for the group's entry.
            if (!TimerState::try_unpublish(r, gen)) return errc{};  // (cannot happen: nobody found it)
            r.return_callable(cb);
            return errc::no_memory;
        }
    }
    if (o.group != 0 || (clocked && !core.clocks.manual())) test_hooks::window(&r, 'i');
    return errc{};
}
}  // namespace rt

namespace rt {
namespace {
/// The common timer: a one-shot on the monotonic clock (from a delay or at
/// a deadline), with no queue, leeway, group or period, on a runtime with
/// the machine's clock. Its start (start_plain) skips the planning the
/// options need: it checks what it uses and reads the monotonic clock once.
/// Anything else -- and every bad value -- takes plan_start(), which also
/// words the errors.
bool is_plain(const RuntimeCore& core, const StartOptions& o) noexcept {
    return o.period == Duration::zero() && o.queue == nullptr &&
           o.leeway == Duration::zero() && o.group == 0 && o.clock == TimerClock::monotonic && o.reserved == 0 &&
           o.policy == PeriodPolicy::skip && !core.clocks.manual();
}

/// Counts a starting timer against max_timers: false (nothing counted) if
/// max_timers are alive. uncount_live() undoes it.
bool count_live(RuntimeCore& core) noexcept {
    if (core.max_timers != 0 &&
        core.live.fetch_add(1, std::memory_order_relaxed) >= static_cast<std::int64_t>(core.max_timers)) {
        core.live.fetch_sub(1, std::memory_order_relaxed);
        return false;
    }
    return true;
}
void uncount_live(RuntimeCore& core) noexcept {
    if (core.max_timers != 0) core.live.fetch_sub(1, std::memory_order_relaxed);
}

/// A StartGuard'ed start's record: max_timers counted, then a record of
/// `shard` taken (errc{}, `r` set), or limit_reached / no_memory with
/// nothing taken.
errc take_record(RuntimeCore& core, Shard& shard, Record*& r, std::uint32_t& index, std::uint32_t& gen) noexcept {
    if (!count_live(core)) return errc::limit_reached;
    r = shard.table().allocate(index, gen);
    if (r == nullptr) {
        uncount_live(core);
        return errc::no_memory;
    }
    return errc{};
}

/// Files a filled, published record: its Insert posted to the shard's inbox
/// (the driver applies it at its next pass; it never waits for us). errc{} and `id`, or
/// no_memory with the timer taken back whole (its callable back in `cb`).
errc file_started(RuntimeCore& core, Shard& shard, Record& r, std::uint32_t shard_index, std::uint32_t index,
                  std::uint32_t gen, tick_t file_at, detail::Callback& cb, std::uint64_t& id) noexcept {
    if (!shard.try_post_insert(Msg::make(MsgType::Insert, gen, index), file_at)) {
        // No memory to queue the Insert: nobody knows this id yet, so the
        // timer is taken back whole (its callable returns to `cb`).
        // (Unless a group stop found it in its group and ended it: then
        // the start succeeded, and the timer was stopped at once.)
        if (take_back_published(core, shard, r, gen, cb)) return errc::no_memory;
    }
    core.counters.add(kStarted);
    id = Id::make(gen, shard_index, index);
    return errc{};
}

/// start() of any timer (and of a plain one with a bad value: it words
/// the error).
errc start_general(RuntimeCore& core, const StartOptions& o, detail::Callback& cb, std::uint64_t& id) noexcept {
    if (core.forked()) return errc::forked;
    Readings now(core.clocks);
    StartPlan plan;
    if (const errc bad = plan_start(core, o, cb, now, plan); bad != errc{}) return bad;

    const StartGuard guard(core);
    if (guard.shutting_down()) return errc::shutting_down;
    // Bound to a queue whose destroy began: refused (inside the guard, so
    // destroy_queue's sweep finds every bound start that gets past here).
    if (plan.queue_slot != 0 && !queue_still_bindable(core, plan)) [[unlikely]]
        return errc::invalid_argument;
    Shard& shard = core.shard(plan.shard);
    Record* r;
    std::uint32_t index, gen;
    if (const errc e = take_record(core, shard, r, index, gen); e != errc{}) return e;
    // A start that fails after taking the record gives it back whole
    // (take_back(); the callable is back in `cb`).
    tick_t file_at;
    if (fill_record(core, shard, *r, index, gen, o, plan, cb, file_at) != errc{}) {
        take_back(core, shard, *r);
        return errc::no_memory;
    }
    return file_started(core, shard, *r, plan.shard, index, gen, file_at, cb, id);
}

/// start() of a plain timer (is_plain): the general path below without
/// plan_start()'s option checks or fill_record()'s side records.
errc start_plain(RuntimeCore& core, const StartOptions& o, detail::Callback& cb, std::uint64_t& id) noexcept {
    if (core.forked()) [[unlikely]]
        return errc::forked;
    std::int64_t due;
    bool ok = static_cast<bool>(cb);
    if (o.deadline == TimePoint{}) {
        ok = ok && o.delay >= Duration::zero() && o.delay <= kMaxDelay;
        due = core.clocks.mono_upper() + o.delay.count();  // the start's one clock read: an upper bound (clock.hpp)
    } else {
        // An absolute deadline needs no reading: CLOCK_MONOTONIC is never
        // negative, so a deadline within kMaxDelay of 0 is within kMaxDelay
        // of now. Only a later one is checked against a reading.
        due = std::chrono::duration_cast<Duration>(o.deadline.time_since_epoch()).count();
        if (due > kMaxDelay.count()) {
            const std::int64_t now = core.clocks.mono();
            ok = ok && (due <= now || due - now <= kMaxDelay.count());
        }
    }
    const tick_t tick = core.clock.deadline_tick(due);
    if (!ok || tick > Ctl::kMaxDeadline) [[unlikely]]
        return start_general(core, o, cb, id);  // (words the error)
    const std::uint32_t si = pick_shard(core, o);
    const StartGuard guard(core);
    if (guard.shutting_down()) return errc::shutting_down;
    Shard& shard = core.shard(si);
    // The calling thread's cell in the shard (caller_cells.hpp), when its
    // callable needs no heap box: a record its last stops kept there, and
    // the timer waits in the cell -- no Insert, no line of another core --
    // until it is due (the driver takes it) or this thread stops it (it
    // takes it back). Otherwise: a record from the free stack, and the
    // Insert through the inbox.
    const std::uint16_t kind = Record::kind_of(cb);
    CallerCells::Cell* cell = nullptr;
    if (kind != CallableKinds::kNone && test_hooks::fail_inbox_posts.load(std::memory_order_relaxed) == 0 &&
        shard.cells_pay())
        cell = shard.my_cell(core.uid, true);
    Record* r = nullptr;
    std::uint32_t index, gen;
    if (!count_live(core)) return errc::limit_reached;
    if (cell != nullptr) r = shard.allocate_kept(*cell, index, gen);
    if (r == nullptr) r = shard.table().allocate(index, gen);
    if (r == nullptr) [[unlikely]] {
        uncount_live(core);
        return errc::no_memory;
    }
    // The record's fields are written by this start, its owner, while its
    // word is FREE, after the fence that orders them after the generation's
    // move (as in fill_record()).
    std::atomic_thread_fence(std::memory_order_release);
    if (!r->store_callable(cb, kind)) [[unlikely]] {  // (never with a cell: no box to allocate)
        take_back(core, shard, *r);
        return errc::no_memory;
    }
    // A position in the cell, reserved before the record is published (and
    // the record marked placed, for its stop), or none: the cell is full.
    std::uint32_t pos = CallerCells::kNoPosition;
    if (cell != nullptr) {
        pos = shard.reserve_in(*cell);
        if (pos != CallerCells::kNoPosition) r->mark_in_cell();
    }
    TimerState::publish(*r, gen, tick);
    if (pos != CallerCells::kNoPosition && shard.place(*cell, pos, index, gen, tick)) {
        core.counters.add(kStarted);
        id = Id::make(gen, si, index);
        return errc{};
    }
    return file_started(core, shard, *r, si, index, gen, tick, cb, id);
}

/// The error detail of a failed start (those plan_start() did not word)
/// and the release of its callable (cold).
[[gnu::noinline, gnu::cold]] void start_failed(RuntimeCore& core, errc e, detail::Callback& cb,
                                                std::error_code& ec) noexcept {
    if (e == errc::limit_reached)
        set_error_detail(e, "max_timers (%zu) timers are alive", core.max_timers);
    else if (e == errc::shutting_down)
        set_error_detail(e, "the runtime \"%s\" is shut down or shutting down", core.config.name.c_str());
    else if (e == errc::forked)
        set_error_detail(e, "the runtime \"%s\" was created in the parent of this fork() child",
                         core.config.name.c_str());
    else if (e == errc::no_memory)
        set_error_detail(e, "no memory for a timer record or its start request");
    RuntimeCore::release_unstarted(cb);  // the release hook runs even on failure, outside the guard
    ec = make_error_code(e);
}

/// std::system_category(), looked up once (error_code::clear() calls it
/// through libstdc++'s PLT on every start otherwise).
const std::error_category& g_system_category = std::system_category();
}  // namespace

void probe_start(const RuntimeCore& core, const StartOptions& o, std::uint64_t id, const void* caller) noexcept {
    std::int64_t delay = o.delay.count();
    if (o.deadline != TimePoint{}) {
        const std::int64_t d = std::chrono::duration_cast<Duration>(o.deadline.time_since_epoch()).count() -
                               core.clocks.now(static_cast<ClockId>(o.clock));
        delay = d > 0 ? d : 0;
    }
    TW_PROBE(start, core.config.name.c_str(), id, Id::shard(id), delay, o.period.count(), caller);
}
}  // namespace rt

Timer Runtime::start_sized(const StartOptions* opts, std::size_t opts_size, detail::Callback&& cb,
                           std::error_code& ec) noexcept {
    if (opts_size != sizeof(StartOptions)) [[unlikely]] {
        // A caller built against another 1.x header (the hot path is the
        // single compare above).
        StartOptions ours;
        if (rt::read_start_options(opts, opts_size, ours))
            return start_sized(&ours, sizeof(StartOptions), std::move(cb), ec);
        rt::RuntimeCore::release_unstarted(cb);
        rt::set_error_detail(errc::invalid_argument, "StartOptions of %zu bytes: not a size of a released 1.x layout",
                             opts_size);
        ec = make_error_code(errc::invalid_argument);
        return Timer{};
    }
    rt::RuntimeCore& core = *core_;
    std::uint64_t id = 0;
    errc e;
    if (opts == nullptr) [[unlikely]]
        e = core.forked() ? errc::forked : errc::invalid_argument;
    else if (rt::is_plain(core, *opts)) [[likely]]
        e = rt::start_plain(core, *opts, cb, id);
    else
        e = rt::start_general(core, *opts, cb, id);
    if (e != errc{}) [[unlikely]] {
        rt::start_failed(core, e, cb, ec);
        return Timer{};
    }
    ec.assign(0, rt::g_system_category);
    if (TW_PROBE_ENABLED(start)) rt::probe_start(core, *opts, id, __builtin_return_address(0));
    return Timer(this, id);
}

}  // namespace tickwheel
