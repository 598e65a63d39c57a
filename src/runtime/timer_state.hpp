// SPDX-License-Identifier: MIT OR Apache-2.0
// The timer state machine: the ONE place where a timer's control word moves.
//
// All cross-thread agreement about a timer goes through one atomic 64-bit
// word per record, `ctl` (timer_record.hpp):
//
//     63          54 53   51 50                                  0
//    +--------------+-------+-------------------------------------+
//    | gen (10 bits)| state |  deadline in ticks (51 bits)        |
//    +--------------+-------+-------------------------------------+
//
// Packing the deadline with the state lets reset() move a deadline with one
// CAS that fails if the timer fired or was stopped in between, and lets the
// shard decide "fire now" with one CAS that fails if a reset or stop got
// there first. The low 10 bits of the record's generation make a CAS against
// a recycled record fail. The full 24-bit generation (Record::gen) answers
// stale ids; it is compared AFTER every load of the word, and two rules make
// that comparison final (handle_table.hpp, hazard.hpp):
//   * a record whose 10-bit generation is about to wrap to 0 is quarantined
//     until no thread is inside an operation on it, so the word can never
//     come back to a value a thread loaded before (no ABA between a load and
//     its CAS, however long the thread is preempted);
//   * a record whose 24-bit generation reached kMaxGen is retired, never
//     reused, so an id never names two timers.
//
// Ground rules (as Tokio's StateCell has them):
//   1. Nothing outside this file writes `ctl`. Each transition below is a
//      pure decision over an observed word (decide_*: constexpr, no memory
//      access, explored exhaustively by tests/timer_state_test.cpp) plus a
//      short load/CAS loop around it (TimerState::*).
//   2. Loads are acquire, successful CASes acq_rel, owner stores release:
//      whoever observes a state also observes what its writer did before
//      (the callable stored by start, the run that finished, the hook that
//      returned).
//   3. A thread that does not own the record (a caller with an id, a worker
//      holding a FireItem) CASes only inside a HazardScope on that record.
//      The owner of a state (below) writes it with a plain store.
//   4. User code (callbacks, release hooks) never runs inside a HazardScope:
//      a transition first makes the caller the owner, then the hook runs.
//
// States, transitions and who makes them (C = a caller with an id, under a
// hazard; S = the shard thread; W = a worker; O = the current owner):
//
//   FREE --start (O: the allocator)--> PENDING(d)
//   PENDING(d) --reset (C)--> PENDING(d2)        later: no message, the shard
//                                                re-files lazily at d
//   PENDING(d), d <= now --claim_for_dispatch (S)--> DISPATCHED(d')
//                                                d' = d (one-shot) or the next
//                                                period (re-filed at d' by S)
//   PENDING | DISPATCHED --try_cancel (C, or the shutdown sweep)--> RELEASING
//          (owner: the canceller, which runs the release hook, then)
//   RELEASING --finish_cancel (O)--> CANCELLED   (then a Cancel message)
//   DISPATCHED --begin_run (W)--> RUNNING(d')
//   DISPATCHED --reset (C)--> PENDING(d2)        due, not started: taken back
//   RUNNING, periodic --try_cancel (C)--> RUNNING_STOPPED
//   RUNNING | RUNNING_REARMED --reset (C)-->     RUNNING(d2), periodic: sets
//                                                the next run; one-shot only
//                                                from its own callback:
//                                                RUNNING_REARMED(d2)
//   RUNNING_REARMED --try_cancel (C)--> RUNNING_STOPPED
//   after the run (W, finish_run):
//     RUNNING, periodic        --> PENDING(d')   (already in the wheel)
//     RUNNING, one-shot        --> RELEASING     (W releases, then retires)
//     RUNNING_REARMED(d2)      --> PENDING(d2)   (W posts an Insert)
//     RUNNING_STOPPED          --> (W releases) --> CANCELLED (Cancel message)
//   PENDING(d) | DISPATCHED(d) | RUNNING(d), fixed-rate, d <= now
//          --skip_period (S)--> same state at the next period (never two
//                                runs at once; the passed grid deadlines are
//                                counted: missed (SKIP) or owed (BURST), and
//                                a BURST worker runs the owed ones back to
//                                back while the word stays RUNNING)
// Period policies (Record::policy): SKIP and BURST are fixed-rate (the
// wheel keeps the grid: "periodic" above). A DELAY timer is filed like a
// one-shot (out of the wheel once DISPATCHED), is "periodic" for stop
// (RUNNING -> RUNNING_STOPPED), is reset like a one-shot re-arming itself
// (RUNNING -> RUNNING_REARMED from any thread), and after a run goes
// RUNNING -> PENDING(end of the run + period) with an Insert.
//   CANCELLED --S unlinks it--> retire --> FREE (generation + 1)
//   RELEASING (after the last run) --W--> retire --> FREE (generation + 1)
//
// Busy states (a run or a release hook in progress): RUNNING,
// RUNNING_STOPPED, RUNNING_REARMED, RELEASING. stop_sync() waits while the
// word it watches is busy; every transition OUT of a busy state wakes the
// waiters (TimerState::wake), transitions within busy states need not.
//
// ==== Queue binding and delivery items: owner rules (issue 20) ====
// (delivery_queue.hpp has the machinery; q = the timer's delivery queue,
// "q.mu" its transition_mutex(). Checked by TW_OWNER_ASSERT in debug and
// sanitizer builds where they are written.)
//
//   field                        | written by, when                         | read by
//   -----------------------------+------------------------------------------+-----------------------------
//   binding: kHasQueue flag and  | start() only, owning the FREE record,    | anyone holding the id, after
//   the slot in the period word  | before publish (release); cleared by     | the word's acquire; a stop or
//                                | recycle (generation + 1). Never changes  | reset reads them BEFORE its
//                                | within a generation.                     | CAS (valid if the CAS then
//                                |                                          | succeeds on its generation),
//                                |                                          | never after (BoundTransition)
//   which queue a slot names     | QueueTable::create (a slot is reused only| a bound start: the slot's
//   (the slot's generation)      | after destroy_queue's quiesce); the      | generation, inside its
//                                | generation moves on when destroy begins  | StartGuard
//                                | (retire_slot), before destroy waits for  | (queue_still_bindable)
//                                | the starts in flight                     |
//   a delivery item              | the shard (or a manual advance) that made| q.run() under q.mu: it runs
//   (FireItem + seq in q's heap) | PENDING -> DISPATCHED, after that CAS,   | only if it is its record's
//                                | under q.mu, only if the word is still    | live item; then begin_run
//                                | DISPATCHED of its generation (deliver)   | under q.mu
//   q.live_[record] (the one     | deliver() adds (under q.mu); removed,    | run(), undue_locked(),
//   item that may run: its       | under q.mu, by the run that pops it, or  | counters() (due = its size)
//   generation and seq)          | by undue_locked() after a stop's or a    |
//                                | reset's CAS out of DISPATCHED, or by     |
//                                | close_begin() (all)                      |
//   the fd's readiness           | under q.mu: written on a delivery of a   | the user's poll/epoll
//                                | live item, drained when live_ empties;   |
//                                | written for good by close_begin()        |
//
// Transitions of a timer bound to an OPEN queue, and the lock they hold:
//   PENDING -> DISPATCHED        shard, no lock; its item then goes to q under q.mu
//   DISPATCHED -> RUNNING        q.run(), under q.mu (begin_run)
//   DISPATCHED -> PENDING        reset, under q.mu (then undue_locked)
//   DISPATCHED -> RELEASING      stop, under q.mu (then undue_locked)
//   DISPATCHED -> DISPATCHED     skip_period by the shard: the episode goes on
// So between a run's check of its item and its CAS no episode can end and
// begin again, and an item whose episode ended is never run. Once q is
// closing, its items are dropped and the shutdown sweep or destroy_queue's
// sweep cancels its timers without q.mu (nothing runs on a closed queue).
//
// Lifecycles (delivery_queue.hpp): a queue is OPEN -> CLAIMED (destroy
// begun: starts fail) -> CLOSING (close_begin: runners woken, items gone)
// -> CLOSED (close_wait: no callback of it in progress). Shutdown: the flag,
// then every start and queue create in flight ends (StartGuard), then every
// queue is CLOSING, then the advance in progress ends (it checks the flag),
// drivers stop, workers and queue runners finish (close_wait), then the sweep.
// ==== end of "Queue binding and delivery items: owner rules" ====
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/clock.hpp"
#include "runtime/timer_record.hpp"
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
    Releasing = 7,
};

using Word = std::uint64_t;

/// The word's layout. Pure bit arithmetic.
struct Ctl {
    static constexpr unsigned kDeadlineBits = 51;
    static constexpr unsigned kStateShift = kDeadlineBits;
    static constexpr unsigned kGenShift = kDeadlineBits + 3;
    static constexpr Word kDeadlineMask = (Word{1} << kDeadlineBits) - 1;
    static constexpr Word kMaxDeadline = kDeadlineMask;
    static constexpr std::uint32_t kGenMask = 0x3FF;

    static constexpr Word make(std::uint32_t gen, State s, std::uint64_t deadline) noexcept {
        return (Word{gen & kGenMask} << kGenShift) | (Word{static_cast<std::uint32_t>(s)} << kStateShift) |
               (deadline & kDeadlineMask);
    }
    static constexpr State state(Word c) noexcept { return static_cast<State>((c >> kStateShift) & 7); }
    static constexpr tick_t deadline(Word c) noexcept { return c & kDeadlineMask; }
    static constexpr std::uint32_t gen10(Word c) noexcept {
        return static_cast<std::uint32_t>(c >> kGenShift) & kGenMask;
    }
    static constexpr Word with(Word c, State s, std::uint64_t deadline) noexcept {
        return make(gen10(c), s, deadline);
    }
    static constexpr Word with(Word c, State s) noexcept { return with(c, s, deadline(c)); }
    static constexpr bool running(State s) noexcept {
        return s == State::Running || s == State::RunningStopped || s == State::RunningRearmed;
    }
    /// A run or a release hook is in progress: stop_sync() waits.
    static constexpr bool busy(State s) noexcept { return running(s) || s == State::Releasing; }
};

// ---- pure decisions ------------------------------------------------------------
// Each takes the word a thread observed (and what else it knows) and says
// what to CAS in, if anything. `gen10` is the low 10 bits of the generation
// the acting thread expects; a word of another generation is never acted on.

/// What try_cancel (stop, stop_sync, the shutdown sweep) decides.
enum class CancelOutcome {
    Cancelled,         // PENDING|DISPATCHED -> RELEASING: the canceller now owns the
                       // record: release hook, finish_cancel, Cancel message
    StoppedDuringRun,  // RUNNING (periodic) | RUNNING_REARMED -> RUNNING_STOPPED: the
                       // worker releases after the run
    Busy,              // a last run or a release hook is in progress: not stopped
    NotPending,        // fired, stopped, free, or another generation
};
struct CancelStep {
    CancelOutcome out;
    Word next;  // the word to CAS in (Cancelled, StoppedDuringRun)
};
constexpr CancelStep decide_cancel(Word c, std::uint32_t gen10, bool periodic) noexcept {
    if (Ctl::gen10(c) != (gen10 & Ctl::kGenMask)) return {CancelOutcome::NotPending, c};
    switch (Ctl::state(c)) {
        case State::Pending:
        case State::Dispatched: return {CancelOutcome::Cancelled, Ctl::with(c, State::Releasing)};
        case State::Running:
            if (periodic) return {CancelOutcome::StoppedDuringRun, Ctl::with(c, State::RunningStopped)};
            return {CancelOutcome::Busy, c};
        case State::RunningRearmed: return {CancelOutcome::StoppedDuringRun, Ctl::with(c, State::RunningStopped)};
        case State::RunningStopped:
        case State::Releasing: return {CancelOutcome::Busy, c};
        default: return {CancelOutcome::NotPending, c};
    }
}

/// What a message to the shard a transition needs (messages.hpp).
enum class Post { None, Insert, Refile };

/// What reset decides. `own_run`: the caller is this timer's running callback.
struct ResetStep {
    bool rearmed;
    Word next;
    Post post;
    State from = State::Free;  // the state it left (set by TimerState::reset on success)
};
constexpr ResetStep decide_reset(Word c, std::uint32_t gen10, tick_t tick, bool periodic, bool own_run) noexcept {
    if (Ctl::gen10(c) != (gen10 & Ctl::kGenMask)) return {false, c, Post::None};
    const tick_t old = Ctl::deadline(c);
    const Post earlier = tick < old ? Post::Refile : Post::None;  // later: re-filed lazily
    switch (Ctl::state(c)) {
        case State::Pending: return {true, Ctl::with(c, State::Pending, tick), earlier};
        case State::Dispatched:
            // Due, not started: take it back. A dispatched one-shot is out of
            // the wheel; a periodic one is filed at its next period.
            return {true, Ctl::with(c, State::Pending, tick), periodic ? earlier : Post::Insert};
        case State::Running:
            if (periodic) return {true, Ctl::with(c, State::Running, tick), earlier};
            if (own_run) return {true, Ctl::with(c, State::RunningRearmed, tick), Post::None};
            return {false, c, Post::None};  // fired, and not re-arming itself
        case State::RunningRearmed: return {true, Ctl::with(c, State::RunningRearmed, tick), Post::None};
        default: return {false, c, Post::None};
    }
}

/// What the shard decides for a record it popped from its wheel at `now`.
enum class ExpireOutcome {
    Fire,   // PENDING -> DISPATCHED(next): hand it to a worker (periodic: and re-file at next)
    Skip,   // periodic, previous run not finished: same state at next, re-file at next
    Later,  // its deadline moved later since it was filed: re-file at the word's deadline
    Drop,   // stopped or cancelled: leave it out of the wheel
};
struct ExpireStep {
    ExpireOutcome out;
    Word next;
    tick_t file_at;  // Later, Skip, and Fire of a periodic timer
    tick_t due;      // Fire: the deadline that came due
    // Grid deadlines (of a fixed-rate `period`) that passed and will not be
    // served by this step: those after `due` on Fire, all from the word's
    // deadline on Skip. The shard counts them (missed, or owed for BURST).
    std::uint64_t skipped = 0;
};
/// `period`: the grid period (Extra::period_ticks() of a Record::fixed_rate()
/// timer; 0 for one-shot and DELAY timers, which the wheel holds only while
/// PENDING). `grid_now`: the
/// time skipped grid deadlines are judged against (now; a manual runtime's
/// advance judges them against the end of its window).
constexpr ExpireStep decide_expire(Word c, tick_t now, std::uint64_t period, tick_t grid_now = 0) noexcept {
    if (grid_now < now) grid_now = now;
    const State s = Ctl::state(c);
    const tick_t d = Ctl::deadline(c);
    if (s == State::Pending) {
        if (d > now) return {ExpireOutcome::Later, c, d, 0};
        const tick_t next = period != 0 ? next_period(d, period, grid_now) : d;
        const std::uint64_t skipped = period != 0 ? (next - d) / period - 1 : 0;
        return {ExpireOutcome::Fire, Ctl::with(c, State::Dispatched, next), next, d, skipped};
    }
    if (period != 0 && (s == State::Dispatched || s == State::Running)) {
        if (d > now) return {ExpireOutcome::Later, c, d, 0};
        const tick_t next = next_period(d, period, grid_now);
        return {ExpireOutcome::Skip, Ctl::with(c, s, next), next, 0, (next - d) / period};
    }
    return {ExpireOutcome::Drop, c, 0, 0};
}

/// Whether a worker holding a FireItem of generation gen10 may start the run.
constexpr bool decide_begin_run(Word c, std::uint32_t gen10) noexcept {
    return Ctl::gen10(c) == (gen10 & Ctl::kGenMask) && Ctl::state(c) == State::Dispatched;
}

/// What the worker does after a run returns (it owns RUNNING*: no other
/// thread leaves these states, others only move within them).
enum class FinishOutcome {
    Periodic,  // RUNNING -> PENDING (already in the wheel at its next period)
    Last,      // RUNNING (one-shot) -> RELEASING: release, then retire
    Rearmed,   // RUNNING_REARMED(d2) -> PENDING(d2): post an Insert
    Stopped,   // RUNNING_STOPPED: release, then -> CANCELLED: post a Cancel
};
struct FinishStep {
    FinishOutcome out;
    Word next;
};
/// `delay_next`: for a DELAY periodic timer, the tick of its next run (the
/// end of this one plus the period); it is then re-filed as a re-armed one
/// (Rearmed: PENDING(delay_next), an Insert). 0 for the others.
constexpr FinishStep decide_finish_run(Word c, bool periodic, tick_t delay_next = 0) noexcept {
    switch (Ctl::state(c)) {
        case State::Running:
            if (delay_next != 0) return {FinishOutcome::Rearmed, Ctl::with(c, State::Pending, delay_next)};
            if (periodic) return {FinishOutcome::Periodic, Ctl::with(c, State::Pending)};
            return {FinishOutcome::Last, Ctl::with(c, State::Releasing)};
        case State::RunningRearmed: return {FinishOutcome::Rearmed, Ctl::with(c, State::Pending)};
        default: return {FinishOutcome::Stopped, Ctl::with(c, State::Cancelled)};
    }
}

/// Whether stop_sync(), watching a timer of generation gen10, must wait.
constexpr bool must_wait(Word c, std::uint32_t gen10) noexcept {
    return Ctl::gen10(c) == (gen10 & Ctl::kGenMask) && Ctl::busy(Ctl::state(c));
}

// ---- the transitions on a record's word --------------------------------------------
// Each is a load/CAS loop around one decision above. Those taking a full
// generation `gen` re-validate it (Record::gen) after every load of the word:
// a record recycled since the caller's lookup is never acted on.
struct TimerState {
    /// The current word (acquire).
    static Word load(const Record& r) noexcept { return r.ctl.load(std::memory_order_acquire); }

    /// FREE -> PENDING(tick) for a record the caller just allocated (owner).
    static void publish(Record& r, std::uint32_t gen, tick_t tick) noexcept {
        r.ctl.store(Ctl::make(gen, State::Pending, tick), std::memory_order_release);
    }
    /// Undoes publish() for a record whose id was never handed out (owner).
    static void unpublish(Record& r) noexcept {
        r.ctl.store(Ctl::with(r.ctl.load(std::memory_order_relaxed), State::Releasing), std::memory_order_relaxed);
    }
    /// Undoes publish() for a record a group stop or a clock step may have
    /// found already (it was indexed: group_index.hpp) but whose Insert was
    /// not queued (owner). PENDING (this generation) -> RELEASING; returns
    /// false if the word left PENDING: a group stop cancelled the timer and
    /// owns its end (it released the callable and posted the Cancel that
    /// recycles the record), so the start must neither touch the callable
    /// nor recycle the record.
    static bool try_unpublish(Record& r, std::uint32_t gen) noexcept {
        Word c = r.ctl.load(std::memory_order_acquire);
        while (Ctl::gen10(c) == (gen & Ctl::kGenMask) && Ctl::state(c) == State::Pending)
            if (r.ctl.compare_exchange_weak(c, Ctl::with(c, State::Releasing), std::memory_order_acq_rel,
                                            std::memory_order_acquire))
                return true;
        return false;
    }

    /// stop / stop_sync / the shutdown sweep. Caller: inside a HazardScope
    /// (or quiescent shutdown). On Cancelled the caller owns the record: it
    /// must release it, then call finish_cancel().
    /// `from` (if not null) receives the state the word left on Cancelled
    /// or StoppedDuringRun (DISPATCHED: a delivery queue counted it due).
    static CancelOutcome try_cancel(Record& r, std::uint32_t gen, State* from = nullptr) noexcept;
    /// RELEASING -> CANCELLED, after the release hook returned (owner). Wakes
    /// stop_sync() waiters -- unless `wake` is false: the caller then wakes
    /// them with wake_all() before the record can be recycled (a batch,
    /// once for many records).
    static void finish_cancel(Record& r, bool wake = true) noexcept;

    /// reset. Caller: inside a HazardScope. Returns the step taken
    /// (rearmed == false: nothing changed; else `from` is the state left).
    static ResetStep reset(Record& r, std::uint32_t gen, tick_t tick, bool own_run) noexcept;

    /// The shard's decision for a record popped from its wheel at `now`
    /// (the shard owns the wheel links, so the record cannot be recycled
    /// meanwhile: no hazard needed). `grid_period`: the period a fixed-rate
    /// timer keeps (Extra::period_ticks() if Record::fixed_rate(), else 0:
    /// the record has no period word of its own).
    static ExpireStep expire(Record& r, tick_t now, tick_t grid_now, std::uint64_t grid_period) noexcept;

    /// DISPATCHED -> RUNNING for a FireItem of generation `gen` (worker,
    /// inside a HazardScope). False: the run is not ours (stopped, reset,
    /// or already started by another FireItem of the same timer).
    static bool begin_run(Record& r, std::uint32_t gen) noexcept;
    /// After the run (worker, owner of RUNNING*). Wakes waiters, except on
    /// Last and Stopped, where the worker wakes them once the release is done
    /// (see retire() / finish_stopped()).
    /// `delay_next`: see decide_finish_run.
    static FinishStep finish_run(Record& r, tick_t delay_next = 0) noexcept;
    /// RUNNING_STOPPED -> CANCELLED after the release hook (worker, owner).
    static void finish_stopped(Record& r) noexcept;

    /// Terminal (CANCELLED, or RELEASING after a last run) -> FREE under
    /// `gen`, linked to `link` (the free stack's next index + 1). Owner only;
    /// wakes waiters. Used by the handle table (recycling) alone.
    static void mark_free(Record& r, std::uint32_t gen, std::uint32_t link) noexcept;
    /// The free-stack link of a FREE word.
    static std::uint32_t free_link(Word c) noexcept { return static_cast<std::uint32_t>(Ctl::deadline(c)); }

    /// stop_sync(): blocks while the record's word is busy for generation
    /// `gen` (must_wait), and returns the first word that is not.
    static Word wait_while_busy(Record& r, std::uint32_t gen) noexcept;
    /// Wakes stop_sync() callers waiting on r after a change of its word
    /// (only if some thread waits anywhere: libstdc++'s notify_all does a
    /// locked add on a process-wide line, a bounce per timer otherwise).
    static void wake(Record& r) noexcept;
    /// wake() of n records, with one fence.
    static void wake_all(Record* const* rs, std::size_t n) noexcept;
};

}  // namespace tickwheel::rt
