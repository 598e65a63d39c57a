// SPDX-License-Identifier: MIT OR Apache-2.0
// The worker's half of the timer state machine: run a due timer's callback
// and settle after it.
//
// A shard hands due timers to the dispatcher in batches (FireItem,
// messages.hpp); a worker drains a batch (drain), takes each timer
// DISPATCHED -> RUNNING (begin_run), or PENDING -> RUNNING for a claim item
// the shard only found due (TimerState::claim_run), unless a stop or reset
// got there first; runs it (call: lateness, exceptions, counters), a BURST
// timer's catch-up runs after it, and settles (finish_run): a periodic
// timer is pending again, a one-shot ends (release, then its record is
// freed with the batch's one CAS, FreeChain), a re-armed one goes back to
// its shard, a stopped one is released here. run_begun() also serves a
// delivery queue's runner (delivery_queue.cpp) and a manual runtime's
// advance (manual_clock.cpp).
//
// Threads: the dispatcher's workers (oneTBB arena or the runtime's own
// pool), a thread running a delivery queue, the advancing thread. While it
// runs a callback the thread is marked (t_current): shutdown() from there
// reports would_deadlock and stop_sync() of its own timer does not wait.
// The worker owns the record while the word is RUNNING*: the fields it may
// write then are in the owner table in timer_state.hpp.
// (The C++ API's rooms, one idea each, are listed in runtime_core.hpp.)
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>

#include "runtime/hazard.hpp"
#include "runtime/probes.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/timer_state.hpp"

namespace tickwheel {
namespace rt {

// This thread's place: the run it is inside (if any), and how many release
// hooks it is inside (runtime_core.hpp). Defined here, where a run sets
// t_current.
[[gnu::tls_model("initial-exec")]] constinit thread_local CurrentRun t_current;
[[gnu::tls_model("initial-exec")]] constinit thread_local int t_release_depth = 0;

// ---- the worker's half -------------------------------------------------------
void RuntimeCore::drain(void* self, Dispatcher::Cursor& items) noexcept {
    auto& core = *static_cast<RuntimeCore*>(self);
    const FireItem* item = items.next();
    if (item == nullptr) return;
    // A batch comes from one shard; its one-shot records are freed with one
    // CAS when this drain task leaves it (before the batch counts as done).
    FreeChain freed(core.shard(item->shard).table());
    do {
        core.run_one(*item, freed);
    } while ((item = items.next()) != nullptr);
}

void RuntimeCore::run_one(const FireItem& item, FreeChain& freed) noexcept {
    if ((item.gen & FireItem::kClaim) != 0) {
        // A claim item: the shard only found it due; expiry's transition is
        // ours (PENDING -> RUNNING, judged at the shard's tick: never early).
        const FireItem own{item.rec, item.gen & ~FireItem::kClaim, item.shard, item.due};
        // Its index, read while it is still this timer's (or the claim below
        // fails): once a stop ends it, its chunk may be given back to the
        // kernel, header and all (HandleTable::trim), and a Later's Insert
        // must not name another slot.
        const std::uint32_t index = HandleTable::index_of(own.rec);
        ClaimStep step;
        {
            HazardScope acting_on(own.rec);
            step = TimerState::claim_run(*own.rec, own.gen, own.due);
        }
        switch (step.out) {
            case ClaimOutcome::Run:
                run_begun(FireItem{own.rec, own.gen, own.shard, step.due, item.found_ns}, freed, nullptr);
                return;
            case ClaimOutcome::Later:
                // A reset moved it later after the shard looked: back to the
                // wheel, which only its shard touches (it files it at the
                // word's deadline; a stale Insert is dropped there). Its
                // wake-up is for the word's deadline after the post, not
                // step.due: a reset may move it earlier meanwhile (issue
                // 31, bug 3; Shard::post_and_wake).
                shard(own.shard).post_and_wake(Msg::make(MsgType::Insert, own.gen, index), step.due);
                return;
            case ClaimOutcome::Drop: return;  // stopped: its canceller ends it
        }
        return;
    }
    if (begin_run(item)) run_begun(item, freed, nullptr);
}

bool RuntimeCore::begin_run(const FireItem& item) noexcept {
    // DISPATCHED -> RUNNING, unless a stop or reset got there first.
    HazardScope acting_on(item.rec);
    return TimerState::begin_run(*item.rec, item.gen);
}

void RuntimeCore::call(Record& r, std::uint64_t id, tick_t due, std::int64_t found_ns) noexcept {
    const std::int64_t due_ns = clock.tick_start_ns(due);
    const bool manual = clocks.manual();
    if (manual) clocks.advance_to(due_ns);  // an advance steps the clocks to each deadline it serves
    // One reading of the machine's clock serves the lateness and the run's
    // start: fast_clock's upper bound (clock.hpp: an unordered TSC read, at
    // most ~2 us above CLOCK_MONOTONIC -- a lateness over-stated by that
    // much at most, never under-stated), not a vDSO call besides it. A
    // manual runtime's lateness is on its virtual clock.
    const std::int64_t run_ns = fast_clock::monotonic_upper_ns();
    const std::int64_t start_ns = manual ? clocks.mono() : run_ns;
    const std::uint64_t late = start_ns > due_ns ? static_cast<std::uint64_t>(start_ns - due_ns) : 0;
    // Lateness by stage (issue 34): the driver's share ends when it handed
    // the timer over (found_ns; 0 = not measured: a manual advance), the
    // rest is the wait for a worker or for the queue's run(). They add up
    // to the lateness. (A BURST catch-up's deadline may be after its hand-
    // over: its lateness is all wait.)
    const std::uint64_t driver =
        found_ns > due_ns ? static_cast<std::uint64_t>(std::min(found_ns, std::max(start_ns, due_ns)) - due_ns) : 0;
    const std::uint64_t wait = late - driver;
    const unsigned si = this_thread_stripe();  // (one lookup for the four histograms and the run board)
    lateness.record_on(si, late);
    driver_lateness.record_on(si, driver);
    wait_lateness.record_on(si, wait);
    DeliveryQueue* const queue = const_cast<DeliveryQueue*>(t_current.queue);
    // Every run gives its queue a sample too, against the deadline it
    // serves (a BURST catch-up's own; issue 31).
    if (queue != nullptr) queue->record_run_start(late, driver, wait);
    // On a worker: not a queue's thread, not an advance (the busy-worker gauge).
    const bool on_worker = queue == nullptr && !manual;
    // The run's duration, on the machine's clock (a manual runtime's too):
    // the upper-bound reading at both ends (its margin cancels out).
    runs.begin_on(si, run_ns, on_worker);
    TW_PROBE(run_begin, config.name.c_str(), id, Id::shard(id), driver, wait, queue != nullptr ? queue->slot() : 0);
    bool threw = false;
    try {
        r.invoke(Timer(owner, id));
    } catch (...) {
        threw = true;
        counters.add(kCallbackExceptions);
        if (config.on_callback_error) {
            try {
                config.on_callback_error(std::current_exception(), id);
            } catch (...) {
                // The error hook must not throw; if it does, we drop it.
            }
        }
    }
    const std::int64_t end_ns = fast_clock::monotonic_upper_ns();
    runs.end_on(si, on_worker);  // (the same thread: its lease for life)
    const std::uint64_t took = end_ns > run_ns ? static_cast<std::uint64_t>(end_ns - run_ns) : 0;
    run_duration.record_on(si, took);
    if (queue != nullptr) queue->record_run_end(took);
    TW_PROBE(run_end, config.name.c_str(), id, took, threw ? 1 : 0, r.invoker_address(), r.first_word());
    counters.add(kFired);
}

std::size_t RuntimeCore::run_begun(const FireItem& item, FreeChain& freed, DeliveryQueue* queue,
                                   std::size_t budget) noexcept {
    Record& r = *item.rec;
    const std::uint32_t index = HandleTable::index_of(&r);
    Extra* x = r.has_extra() ? &shard(item.shard).table().extra(index) : nullptr;
    if (x != nullptr) {
        owner::running(r, "Extra::runs");
        x->runs.fetch_add(1, std::memory_order_relaxed);
    }

    const CurrentRun saved = t_current;
    t_current = CurrentRun{this, &r, queue, &saved};
    const std::uint64_t id = Id::make(item.gen, item.shard, index);
    call(r, id, item.due, item.found_ns);
    std::size_t calls = 1;
    if (x != nullptr && r.policy() == Policy::Burst) {
        // Catch up: the grid deadlines that passed meanwhile (owed, counted
        // by the shard) run now, back to back, while the word stays RUNNING
        // (a stop makes it RUNNING_STOPPED, a reset clears owed: either ends
        // the burst). They serve due + period, due + 2 period, ... At most
        // Extra::kMaxOwed are owed when the loop looks: older ones are
        // skipped (missed; issue 31). On a queue, at most `budget` calls in
        // all: the rest stay owed, the timer due again (requeue_owed).
        const std::uint64_t period = HandleTable::period_ticks_of(r);
        tick_t due = item.due;
        for (;;) {
            std::uint64_t o = x->owed.load(std::memory_order_relaxed);
            const std::uint64_t n = o & Extra::kOwedCountMask;
            if (n == 0 || Ctl::state(TimerState::load(r)) != State::Running) break;
            if (n > Extra::kMaxOwed) {
                if (!x->owed.compare_exchange_weak(o, (o & ~Extra::kOwedCountMask) | Extra::kMaxOwed,
                                                   std::memory_order_relaxed))
                    continue;
                owner::running(r, "Extra::missed (a BURST timer's owed runs past kMaxOwed)");
                x->missed.fetch_add(n - Extra::kMaxOwed, std::memory_order_relaxed);
                due += (n - Extra::kMaxOwed) * period;
                continue;
            }
            if (calls >= budget && queue != nullptr) {
                if (queue->requeue_owed(r, *x, FireItem{item.rec, item.gen, item.shard, due + period, item.found_ns})) {
                    t_current = saved;  // not settled: due again on its queue (the word is not ours any more)
                    return calls;
                }
                // Not handed back (a reset cleared what was owed, a stop, a
                // closing queue, no memory): look again, and catch up now
                // rather than leave owed runs behind for a later episode
                // (they would serve deadlines after its own: early).
                budget = static_cast<std::size_t>(-1);
                continue;
            }
            if (!x->owed.compare_exchange_weak(o, o - 1, std::memory_order_relaxed)) continue;
            x->runs.fetch_add(1, std::memory_order_relaxed);
            due += period;
            call(r, id, due, item.found_ns);
            ++calls;
        }
    }
    if (x == nullptr && Ctl::state(TimerState::load(r)) == State::RunningRearmed) {
        // A one-shot that re-armed itself lives on: from now on it counts
        // its runs (only its own callback could re-arm it, and that has
        // returned, so the word stays RUNNING_REARMED or goes
        // RUNNING_STOPPED meanwhile: the worker owns the record).
        if (Extra* e = shard(item.shard).table().make_extra(index)) {
            owner::running(r, "Extra (a one-shot that re-armed itself)");
            e->runs.store(1, std::memory_order_relaxed);
            e->missed.store(0, std::memory_order_relaxed);
            e->owed.store(Extra::owed_tag(item.gen), std::memory_order_relaxed);
            e->group.store(0, std::memory_order_relaxed);
            e->leeway_ns.store(0, std::memory_order_relaxed);
            r.set_flags(static_cast<std::uint16_t>(r.flags() | Record::kHasExtra));
        }
    }
    // Still "inside" the timer while settling: the release hook may run here,
    // and from it shutdown() must report would_deadlock and stop_sync() on
    // this timer must not wait for itself.
    finish_run(r, item, freed);
    t_current = saved;
    return calls;
}

void RuntimeCore::finish_run(Record& r, const FireItem& item, FreeChain& freed) noexcept {
    // Messages are built from the item: once the word leaves RUNNING*, the
    // record may be recycled and its generation move on.
    const std::uint32_t index = HandleTable::index_of(&r);
    Shard& s = shard(item.shard);
    // A DELAY timer's next run: the end of this one plus the period.
    const std::uint64_t delay_period =
        r.periodic() && r.policy() == Policy::Delay ? HandleTable::period_ticks_of(r) : 0;
    // A boot-time or wall-clock DELAY timer: its next deadline on its clock
    // and the word's tick are set together under its deadline lock, and
    // only if the word takes this run's "end + period" -- not when a reset
    // during the run set the next deadline already (RUNNING_REARMED: the
    // reset wrote its own; issue 20, race 3).
    Extra* own = delay_period != 0 && r.clock() != rt::ClockId::Monotonic ? &HandleTable::extra_of(r) : nullptr;
    std::uint64_t held = 0;
    // Tried, never waited for (issue 31: a worker never waits for a caller).
    // While this run is in progress only a reset of this timer takes the
    // lock (the driver's re-clock pass skips a running DELAY timer, and a
    // start holds it only before publishing): a holder is a reset that,
    // after its CAS, stores its own deadline -- over RUNNING (then
    // RUNNING_REARMED: we store nothing anyway) or over the PENDING(end +
    // period) our CAS below makes -- so ours would be superseded.
    if (own != nullptr && OwnDeadline::try_lock(r, *own, item.gen, held) != OwnDeadline::Try::Locked) own = nullptr;
    const tick_t delay_next = delay_period != 0 ? clock.deadline_tick(clocks.mono()) + delay_period : 0;
    const std::int64_t own_next =
        own != nullptr ? clocks.now(r.clock()) + static_cast<std::int64_t>(delay_period * clock.resolution_ns()) : 0;
    // A grouped one-shot that re-armed itself begins a new pending episode:
    // it is indexed again before the word makes it PENDING, so a group stop
    // that took its entry while it ran (and could not stop a run in
    // progress) does not lose it (issue 20, race 2). The index drops the
    // duplicate this leaves when no group stop came (GroupIndex::compact).
    if (!r.periodic() && r.has_extra() && Ctl::state(TimerState::load(r)) == State::RunningRearmed) {
        if (const std::uint64_t group = HandleTable::extra_of(r).group.load(std::memory_order_relaxed); group != 0) {
            // Never waiting for a caller that holds the index's lock (a group
            // stop, a grouped start): a deferred add, merged by the next
            // holder before anything else. False: no memory for the entry
            // (the timer is left out of its group's index).
            (void)s.groups().add_from_worker(group, item.gen, index);
        }
    }
    const FinishStep step = TimerState::finish_run(r, delay_next);
    if (own != nullptr) {
        if (step.out == FinishOutcome::Rearmed && step.from == State::Running) OwnDeadline::store(*own, held, own_next);
        OwnDeadline::unlock(*own, held);
    }
    switch (step.out) {
        case FinishOutcome::Periodic: return;  // pending again, already in the wheel
        case FinishOutcome::Last:
            release(r);
            s.recycle_ended(r, freed);  // FREE at once (waiters woken); reused after the chain's flush
            return;
        case FinishOutcome::Rearmed:
            s.post_and_wake(Msg::make(MsgType::Insert, item.gen, index), Ctl::deadline(step.next));
            return;
        case FinishOutcome::Stopped:
            // A stop() returned true during the run; release (RELEASING
            // first: from the hook on, a query says "not found", as it does
            // for a one-shot after its last run), then let the shard unlink
            // and recycle it.
            TimerState::begin_stopped_release(r);
            release(r);
            TimerState::finish_stopped(r);
            s.post_cancel(Msg::make(MsgType::Cancel, item.gen, index));
            return;
    }
}

}  // namespace rt

}  // namespace tickwheel
