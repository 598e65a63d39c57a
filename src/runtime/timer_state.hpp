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
// hazard; S = the shard (its driver thread, or a caller holding the
// shard's driver token: shard.hpp); W = a worker; O = the current owner):
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
//   PENDING(d), one-shot, d <= now --claim_run (W)--> RUNNING(d)
//                                                the shard found it due at
//                                                `now` and handed it over
//                                                untouched (a claim item:
//                                                expiry's transition on the
//                                                worker, issue 21); d > now:
//                                                W posts an Insert (Later)
//   DISPATCHED --begin_run (W)--> RUNNING(d')
//   RUNNING(d), BURST, bound to a queue --yield_run (W: the queue run, under
//          q.mu)--> DISPATCHED(d)        the run reached tw_queue_run's max
//                                        with catch-up runs owed: a live item
//                                        for the next owed deadline goes back
//                                        to the queue (issue 31)
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
//     RUNNING_STOPPED          --> RELEASING (W, then its release hook)
//                              --> CANCELLED (Cancel message)
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
// THE OWNER TABLE (issue 20). Every per-timer field beside the word, who may
// write it, in which state. "Owner of X" = the thread whose transition made
// the word X (rule 3); writes happen only by the owner of the state that
// follows, after the CAS that made it so, or versioned with the generation.
// Checked builds (TICKWHEEL_CHECK_OWNERS) assert the rule at each write
// (owner::*, OwnDeadline::store below); a violation aborts.
//
//  field (where)                   | writer: in which state / how
//  --------------------------------+----------------------------------------------
//  Record::gen (user32, low 24)    | the handle table only: recycle() (terminal ->
//                                  | FREE, owner), retire; never wraps
//  Record flags (user32, top 8)    | start (FREE, before publish); the worker of a
//                                  | one-shot that re-armed itself (RUNNING_REARMED
//                                  | or RUNNING_STOPPED: gains kHasExtra); cleared by
//                                  | recycle()'s generation store
//  callable (user16 + fn_)         | start (FREE); the owner of RELEASING or
//                                  | RUNNING_STOPPED (its release hook); the worker
//                                  | owning RUNNING* invokes it
//  period word (side array)        | start (FREE, before publish); read-only after
//  Extra::runs                     | start (FREE: 0); the worker owning RUNNING*
//                                  | (+1 per run begun, the late Extra of a
//                                  | re-armed one-shot)
//  Extra::missed                   | start (FREE: 0); the shard, for a record in
//                                  | or just popped from its wheel (Fire/Skip),
//                                  | also one a stop just CANCELLED: the shard
//                                  | still holds it until it unlinks it; a BURST
//                                  | timer (the shard never writes its missed):
//                                  | the worker owning RUNNING (+ the owed runs
//                                  | beyond Extra::kMaxOwed it skips)
//  Extra::owed (tagged: gen24)     | start (FREE); the shard (+skipped); the BURST
//                                  | worker owning RUNNING (-1 per catch-up run;
//                                  | down to kMaxOwed, a CAS); a queue run handing
//                                  | the rest back (requeue_owed: -1 for the item
//                                  | it queues, under q.mu); reset: a CAS that
//                                  | keeps only its own tag (versioned with the
//                                  | generation), under q.mu for a bound timer
//  Extra::group, leeway_ns, seq    | start (FREE); the worker of a re-armed
//                                  | one-shot (RUNNING_REARMED: zeroes); read-only
//  Extra::deadline_ns (own clock)  | the holder of Extra::own_lock (OwnDeadline,
//  with the word's tick of a       | below: versioned with the generation, taken
//  boot-time/wall-clock timer      | only for a live timer of that generation):
//                                  |   start (FREE -> PENDING, the lock taken
//                                  |   before publish), reset (after its CAS
//                                  |   succeeded), the DELAY worker after its run
//                                  |   (only when the word takes its "end + period":
//                                  |   not over a reset's RUNNING_REARMED), the
//                                  |   shard (fire/skip of a fixed-rate timer moves
//                                  |   it along the grid; a re-clock pass re-files
//                                  |   the word's tick from it)
//  Extra::own_lock                 | its takers (CAS); recycle() reads it: a record
//                                  | whose lock is held waits in quarantine
//  group index membership          | start adds it after publish (before returning);
//  (GroupIndex, per shard)         | a group stop takes the group's list (ends the
//                                  | membership of every timer it names: it stops
//                                  | them, or they are on their last run); the
//                                  | worker of a grouped one-shot that re-armed
//                                  | itself adds it again (RUNNING_REARMED, before
//                                  | the word makes it PENDING: a new pending
//                                  | episode); compaction drops dead entries and
//                                  | duplicates
//  clock-step index membership     | start adds it before it reads the clocks it
//  (Shard::clocked, ClockIndex)    | files the timer by, under own_lock (a lock-
//                                  | free push); the driver takes the pushes into
//                                  | its own vectors and drops ended timers' entries
//  the query's seqlock             | readers only (query: word acquire, fields
//                                  | relaxed, acquire fence, generation again); the
//                                  | writers' half: recycle() moves the generation
//                                  | on (release) before the next occupant's start
//                                  | writes any field, after a release fence
//                                  | (fill_record), and the own-clock deadline is
//                                  | read under own_lock's seqlock (OwnDeadline::
//                                  | read): never a deadline without its tick
//  the wheel links, deadline, loc  | the shard's driver alone (shard.hpp): its
//                                  | thread, or a manual runtime's advancing
//                                  | thread inside manual_step (TW_OWNER_ASSERT
//                                  | in Shard::handle and take_due_cells). No
//                                  | caller or worker ever touches them (1.5's
//                                  | driver token is gone: issue 31)
//  a caller cell's entry (slot +   | the cell's owner places it (due, then the
//  due; caller_cells.hpp) for a    | slot, release) after publishing the word
//  published PENDING record        | PENDING; then whoever takes it out owns it:
//                                  | the owner's take-back (CAS, after its stop's
//                                  | CAS made the word CANCELLED: it recycles the
//                                  | record), or the driver's take (CAS, when due:
//                                  | it files the record). An eviction posts the
//                                  | record's Insert BEFORE overwriting its slot
//  a FREE record's free-list link  | whoever frees it: on the free stack (any
//  (the word's low half) and which | thread, FreeChain + one CAS), or -- a record
//  list holds it                   | its owner took back from its cell -- on that
//                                  | cell's free list (CallerCells::kFreeMax),
//                                  | which only the cell's owner pushes and pops
//                                  | (plain accesses): its next start takes it
//  records given back to the kernel | the shard's driver alone (HandleTable::trim),
//  after a peak (a page's records,  | from records it took off the free stack: FREE,
//  its chunk's meta; issue 34)      | on no list, no thread acting on them (hazard
//                                   | after a barrier), no deadline lock held (taken
//                                   | to tag 0 first); it then owns them, and their
//                                   | pages read as zeros. Made again only by the
//                                   | thread that pops their chunk from the released
//                                   | list (HandleTable::revive, a start that found
//                                   | the free stack empty): generations at the
//                                   | chunk's floor, above every generation they had
//                                   | (a stale id stays stale: its full generation
//                                   | never matches), FREE, onto the free stack.
//                                   | Never given back: a record in a caller's cell,
//                                   | in quarantine, retired, or live; a chunk's header
//                                   | page only with all its pages (then revive
//                                   | rewrites the header first); readers racing with
//                                   | an end read zeros (its side arrays through the
//                                   | table: HandleTable::extra, never null)
//
// WHO MAY WAIT FOR WHOM (the progress rule, issue 31). A "caller" is any
// thread outside the runtime: it starts, stops, resets, queries, runs a
// delivery queue, destroys a queue, shuts down. The runtime's own threads
// are the shards' drivers and the workers.
//
//  waiter        | may wait for                 | never waits for
//  --------------+------------------------------+------------------------------
//  a driver      | nothing of a caller: it only | a caller: not for a lock (the
//                | tries the locks it shares    | inbox's reserve, a queue's
//                | with callers, and comes back | transition mutex: try-locked;
//                | at its next tick; the        | the clock-step index: none), a
//                | workers never (it hands      | flag, a hazard (a quarantined record
//                | them work through lock-free  | waits, nobody waits for it),
//                | lanes)                       | a message (the inbox and the
//                |                              | cells are taken from, never
//                |                              | waited on), a timer's deadline
//                |                              | lock (re-filed to the next tick)
//  a worker      | the driver's hand-off only   | a caller: a grouped one-shot's
//                | (the dispatcher's lanes,     | re-index after a run that re-
//                | between runtime threads)     | armed it never waits for the
//                |                              | group index's lock (a deferred
//                |                              | add, group_index.hpp)
//  a caller      | the runtime's threads, where | (a caller may wait for another
//                | its header says so: stop_sync| caller only where documented:
//                | (a run in progress), shutdown| shutdown for calls in flight,
//                | and queue destroy (calls in  | a queue destroy for the starts
//                | flight, runs in progress),   | bound to it, the out-of-memory
//                | an advance (serialised)      | reserve's brief lock)
//
// Giving memory back after a peak (issue 34) waits for nobody either: the
// driver's trim looks at the hazards and deadline locks once and keeps the
// pages it finds held (a frozen caller pins its record's page, no more); a
// retired inbox queue is freed at a later pass, once no poster's slot names
// it (inbox.hpp); a start that finds the free stack empty makes a released
// chunk again itself (a CAS on the released list), as it makes a fresh one.
//
// What a frozen caller can delay: only its own call in progress (a start
// not yet placed or posted: its id was never returned; a reset or stop of
// a timer whose CAS it has not made), with two exceptions, each a resource
// held for a few instructions: a stop or reset of a queue-bound timer holds
// that queue's transition mutex (that queue's deliveries wait a tick, its
// runs wait: no other timer does), and a reset of a boot-time or
// wall-clock timer holds that timer's deadline lock (another reset of the
// same timer -- a callback's too, on a worker -- waits for it). Forced by
// tests/progress_test.cpp (a caller parked at each step it passes while
// another timer of its shard must keep its period) and by `tw_stress
// history`'s freeze fault.
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
//   RUNNING -> DISPATCHED        q.run() of a BURST timer that reached its max with
//                                catch-up runs owed, under q.mu, with its next
//                                item (yield_run, DeliveryQueue::requeue_owed)
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
/// advance judges them against the end of its window). `grid_cap`: no grid
/// deadline after it counts as passed (a boot-time or wall-clock timer: the
/// last grid deadline its own clock has reached, mapped onto the word's
/// grid -- the word's ticks may run ahead of its own clock, since a start's
/// monotonic and own-clock readings are not taken at one instant, and a
/// BURST catch-up counted on ticks alone ran early: issue 20's fuzzer).
constexpr ExpireStep decide_expire(Word c, tick_t now, std::uint64_t period, tick_t grid_now = 0,
                                   tick_t grid_cap = ~tick_t{0}) noexcept {
    if (grid_now < now) grid_now = now;
    if (grid_now > grid_cap) grid_now = grid_cap;
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

/// What a worker decides for a due one-shot its shard handed over without a
/// transition (a claim item, messages.hpp: the shard only found it due in
/// its wheel at tick `now`, the judge of "never early").
enum class ClaimOutcome {
    Run,    // PENDING(d), d <= now -> RUNNING(d): the worker runs it now
    Later,  // PENDING(d), d > now (a reset moved it since): the worker posts an
            // Insert (the wheel is the shard's), the shard files it at d
    Drop,   // stopped (its canceller ends it) or another generation: nothing
};
struct ClaimStep {
    ClaimOutcome out;
    Word next;
    tick_t due;  // Run: the deadline that came due; Later: the word's deadline
};
constexpr ClaimStep decide_claim_run(Word c, std::uint32_t gen10, tick_t now) noexcept {
    if (Ctl::gen10(c) != (gen10 & Ctl::kGenMask) || Ctl::state(c) != State::Pending)
        return {ClaimOutcome::Drop, c, 0};
    const tick_t d = Ctl::deadline(c);
    if (d > now) return {ClaimOutcome::Later, c, d};
    return {ClaimOutcome::Run, Ctl::with(c, State::Running), d};
}

/// Whether a worker holding a FireItem of generation gen10 may start the run.
constexpr bool decide_begin_run(Word c, std::uint32_t gen10) noexcept {
    return Ctl::gen10(c) == (gen10 & Ctl::kGenMask) && Ctl::state(c) == State::Dispatched;
}

/// Whether the queue run that owns a BURST timer's run may hand the rest
/// of its catch-up back to its queue (issue 31: tw_queue_run's `max`):
/// RUNNING(d) of generation gen10 -> DISPATCHED(d), the word's deadline (its
/// next grid deadline, where the wheel holds it) unchanged. Not from
/// RUNNING_STOPPED (a stop during the run: it ends) or RUNNING_REARMED.
constexpr bool decide_yield_run(Word c, std::uint32_t gen10) noexcept {
    return Ctl::gen10(c) == (gen10 & Ctl::kGenMask) && Ctl::state(c) == State::Running;
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
    State from = State::Running;  // the state it left (RUNNING: the run's own outcome; RUNNING_REARMED: a reset's)
};
/// `delay_next`: for a DELAY periodic timer, the tick of its next run (the
/// end of this one plus the period); it is then re-filed as a re-armed one
/// (Rearmed: PENDING(delay_next), an Insert). 0 for the others.
constexpr FinishStep decide_finish_run(Word c, bool periodic, tick_t delay_next = 0) noexcept {
    switch (Ctl::state(c)) {
        case State::Running:
            if (delay_next != 0)
                return {FinishOutcome::Rearmed, Ctl::with(c, State::Pending, delay_next), State::Running};
            if (periodic) return {FinishOutcome::Periodic, Ctl::with(c, State::Pending), State::Running};
            return {FinishOutcome::Last, Ctl::with(c, State::Releasing), State::Running};
        case State::RunningRearmed:
            return {FinishOutcome::Rearmed, Ctl::with(c, State::Pending), State::RunningRearmed};
        default: return {FinishOutcome::Stopped, Ctl::with(c, State::Cancelled), Ctl::state(c)};
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
    /// The word as of now in its modification order: an RMW that changes
    /// nothing (acq_rel). Used by a poster of an Insert after its post
    /// (Shard::due_after_post): a transition it does not see happens after
    /// the post. Not a transition: any thread.
    static Word load_latest(Record& r) noexcept { return r.ctl.fetch_add(0, std::memory_order_acq_rel); }

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
    /// `grid_cap`: see decide_expire.
    static ExpireStep expire(Record& r, tick_t now, tick_t grid_now, std::uint64_t grid_period,
                             tick_t grid_cap = ~tick_t{0}) noexcept;

    /// DISPATCHED -> RUNNING for a FireItem of generation `gen` (worker,
    /// inside a HazardScope). False: the run is not ours (stopped, reset,
    /// or already started by another FireItem of the same timer).
    static bool begin_run(Record& r, std::uint32_t gen) noexcept;
    /// PENDING(d <= now) -> RUNNING(d) for a claim item of generation `gen`
    /// (a one-shot the shard found due at tick `now` and handed over without
    /// a transition; worker, inside a HazardScope). The worker's expiry and
    /// begin_run in one CAS: Run (the run is ours), Later (not due at `now`:
    /// re-filed through an Insert), Drop (stopped, or the record is not
    /// timer `gen` any more).
    static ClaimStep claim_run(Record& r, std::uint32_t gen, tick_t now) noexcept;
    /// After the run (worker, owner of RUNNING*). Wakes waiters, except on
    /// Last and Stopped, where the worker wakes them once the release is done
    /// (see retire() / finish_stopped()).
    /// `delay_next`: see decide_finish_run.
    static FinishStep finish_run(Record& r, tick_t delay_next = 0) noexcept;
    /// RUNNING_STOPPED -> RELEASING before the release hook of a timer
    /// stopped during its run (worker, owner): from here on it is released
    /// (query: not found), as a one-shot after its last run is.
    static void begin_stopped_release(Record& r) noexcept;
    /// RELEASING (begin_stopped_release) -> CANCELLED after the release hook
    /// (worker, owner).
    static void finish_stopped(Record& r) noexcept;
    /// RUNNING -> DISPATCHED (decide_yield_run) by the delivery queue run
    /// that owns the run of BURST timer `gen`, under the queue's transition
    /// mutex, in place of finish_run(): the run stopped at tw_queue_run's
    /// `max` with catch-up runs still owed, and the queue keeps a live item
    /// for the next one (DeliveryQueue::requeue_owed). Retries while only
    /// the shard moves the word within RUNNING (a skipped period); false if
    /// it is not RUNNING of `gen` (a stop or a reset made it RUNNING_STOPPED
    /// or RUNNING_REARMED first). Wakes stop_sync() waiters (the word leaves
    /// a busy state).
    static bool yield_run(Record& r, std::uint32_t gen) noexcept;

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

    /// PENDING(from) -> PENDING(to) for a record start() published and whose
    /// id it has not handed out yet, while it holds the own-clock deadline's
    /// lock (OwnDeadline): only a group stop can have moved the word since
    /// (then nothing changes and it returns false). Owner.
    static bool move_unstarted(Record& r, std::uint32_t gen, tick_t from, tick_t to) noexcept {
        Word c = Ctl::make(gen, State::Pending, from);
        return r.ctl.compare_exchange_strong(c, Ctl::make(gen, State::Pending, to), std::memory_order_acq_rel,
                                             std::memory_order_acquire);
    }
};

// ---- the owner rule, asserted (checked builds) ---------------------------------------
// Debug and sanitizer builds (TICKWHEEL_CHECK_OWNERS, src/CMakeLists.txt)
// check at each write of a per-timer field that the writer is the owner the
// table above names; a violation is a library bug: it is reported and the
// process aborts. Release builds compile the checks away.
#if defined(TICKWHEEL_CHECK_OWNERS)
inline constexpr bool kCheckOwners = true;
#else
inline constexpr bool kCheckOwners = false;
#endif
/// Reports a broken owner rule (field, rule, the word seen) and aborts.
[[noreturn]] void owner_violation(const char* field, const char* rule, Word seen) noexcept;

namespace owner {
/// Fields start() writes before it publishes the word: the record is still
/// FREE under the generation the allocator gave it (nobody else can act).
inline void unpublished(const Record& r, std::uint32_t gen, const char* field) noexcept {
    if constexpr (kCheckOwners) {
        const Word c = TimerState::load(r);
        if (Ctl::state(c) != State::Free || r.gen() != gen)
            owner_violation(field, "written by start() before it publishes the word (FREE, its generation)", c);
    }
}
/// Fields the worker that owns the run writes: the word is RUNNING* of the
/// record's generation (no other thread leaves those states).
inline void running(const Record& r, const char* field) noexcept {
    if constexpr (kCheckOwners) {
        const Word c = TimerState::load(r);
        if (!Ctl::running(Ctl::state(c)) || Ctl::gen10(c) != (r.gen() & Ctl::kGenMask))
            owner_violation(field, "written by the worker that owns the run (RUNNING*)", c);
    }
}
/// Fields the shard writes for a record it holds in (or just popped from)
/// its wheel: the record is not FREE and of its generation. It may be
/// RELEASING or CANCELLED: a stop's CAS can land between the shard's own CAS
/// (skip_period) and its write, and the record stays the shard's -- never
/// recycled -- until the shard itself unlinks it on the Cancel message.
inline void shard_live(const Record& r, const char* field) noexcept {
    if constexpr (kCheckOwners) {
        const Word c = TimerState::load(r);
        if (Ctl::state(c) == State::Free || Ctl::gen10(c) != (r.gen() & Ctl::kGenMask))
            owner_violation(field, "written by the shard for a record of its wheel", c);
    }
}
}  // namespace owner

// ---- the own-clock deadline's lock (Extra::own_lock) -----------------------------------
// A boot-time or wall-clock timer's deadline on its own clock (Extra::
// deadline_ns) and the word's tick derived from it are one value in two
// places, so they change together, under a small lock per timer: whoever
// writes either (start, reset, a DELAY timer's worker after its run, the
// shard firing a fixed-rate timer or re-filing after a clock step) holds
// it, and writes them only after checking the record still is its timer.
// The lock word carries the 24-bit generation of the timer it was taken for
// ([generation:24 | count:40], the count odd while held), so that:
//   * a thread with a stale id never takes the lock of a later occupant
//     (versioned with the generation); one that took it for its own timer
//     re-checks Record::gen after taking it (a seq_cst handshake with
//     recycle(), which bumps the generation and then looks at the lock) and
//     lets go without writing if the timer ended;
//   * a record is never reused while a thread holds its lock: recycle()
//     quarantines it instead, and the quarantine pass frees it once the
//     lock is free (handle_table.cpp);
//   * readers that do not take it (query) read the deadline seqlock-style:
//     the lock word before and after, equal, even and of their generation.
// No user code runs while it is held, and no other lock is taken under it
// but, for a reset of a
// queue-bound timer, that queue's transition mutex around its CAS
// (BoundTransition, timer_ops.hpp; no thread waits for a deadline lock while
// it holds a queue's mutex: the shard only tries one, a queue run takes
// none under it). Takers that may not wait (the shard)
// try once and come back later (it re-files the timer at the next tick, or
// re-runs the re-clock pass); callers, start and workers wait while another
// thread holds it (a short critical section: a few loads, a CAS, a store).
struct OwnDeadline {
    static constexpr unsigned kTagShift = 40;
    static constexpr std::uint64_t kCountMask = (std::uint64_t{1} << kTagShift) - 1;
    static constexpr std::uint64_t tag(std::uint32_t gen) noexcept {
        return std::uint64_t{gen & Record::kGenMask} << kTagShift;
    }
    static constexpr bool held(std::uint64_t l) noexcept { return (l & 1) != 0; }
    static constexpr std::uint64_t bump(std::uint64_t l, std::uint32_t gen) noexcept {
        return tag(gen) | ((l + 1) & kCountMask);
    }

    enum class Try { Locked, Busy, Stale };
    /// One attempt to take the lock of timer `r` (generation `gen`): Locked
    /// (`held` is the value to give unlock()), Busy (another thread holds
    /// it), Stale (the record is not timer gen any more). Any thread.
    static Try try_lock(Record& r, Extra& x, std::uint32_t gen, std::uint64_t& held) noexcept;
    /// Takes the lock, waiting while another thread holds it; false: stale.
    static bool lock(Record& r, Extra& x, std::uint32_t gen, std::uint64_t& held) noexcept;
    /// start(): takes the lock of the record it just allocated (generation
    /// `gen`, not yet published), whatever the lock's previous occupant
    /// (waits while a thread with a stale id lets it go).
    static std::uint64_t take_new(Extra& x, std::uint32_t gen) noexcept;
    static void unlock(Extra& x, std::uint64_t held) noexcept {
        check_held(x, held);
        x.own_lock.store((held & ~kCountMask) | ((held + 1) & kCountMask), std::memory_order_release);
    }
    /// The deadline's writes: only by the holder of the lock.
    static void store(Extra& x, std::uint64_t held, std::int64_t ns) noexcept {
        check_held(x, held);
        x.deadline_ns.store(ns, std::memory_order_relaxed);
    }
    static void advance(Extra& x, std::uint64_t held, std::int64_t by) noexcept {
        check_held(x, held);
        x.deadline_ns.store(x.deadline_ns.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
    }
    /// A reader's consistent copy of the deadline of timer `gen` (query):
    /// false if the record is not that timer's (stale), or a writer kept it
    /// busy through every try (the caller then answers with what it has).
    static bool read(const Extra& x, std::uint32_t gen, std::int64_t& ns) noexcept;
    /// recycle(): after the record's generation moved on (and a seq_cst
    /// fence), whether some thread still holds its lock (then the record
    /// must not be reused yet).
    static bool held_now(const Extra& x) noexcept { return held(x.own_lock.load(std::memory_order_acquire)); }

private:
    static void check_held(const Extra& x, std::uint64_t held_value) noexcept {
        if constexpr (kCheckOwners) {
            const std::uint64_t l = x.own_lock.load(std::memory_order_relaxed);
            if (!held(held_value) || l != held_value)
                owner_violation("Extra::deadline_ns", "written only by the holder of Extra::own_lock", l);
        }
    }
};

}  // namespace tickwheel::rt
