// SPDX-License-Identifier: MIT OR Apache-2.0
// Test-only hooks: places where a test parks a thread at an exact step, or
// makes a rare failure happen on demand. Each is one relaxed load of a
// null pointer (or flag) on its path when no test sets it. Never set by the
// library itself; tests/ set them (tests link the static library).
#pragma once

#include <atomic>
#include <cstdint>

namespace tickwheel::rt::test_hooks {

/// Called by a thread acting on a record through an id or a FireItem (stop,
/// stop_sync, reset, a worker's begin_run), after it loaded the record's
/// word and validated the generation, before its CAS: the lookup-to-CAS
/// window. `what`: 'c' cancel, 'r' reset, 'b' begin_run (or a worker's
/// claim_run of a claim item: expiry's transition on the worker, issue 21);
/// and 'W' when
/// stop_sync() is about to wait for a run, 'w' when that wait is over
/// (whether or not the thread slept: the run may end before it does) and
/// stop_sync is about to look at the record again; 'i' when a start has
/// put a grouped or clocked timer into its shard's index (a group stop can
/// now find it) and has not yet queued its Insert; 'q' when a stop or a
/// reset of a timer bound to a delivery queue has found its queue and is
/// about to take the queue's transition mutex, before its CAS (issue 20:
/// every way out of DISPATCHED of a bound timer is taken under that mutex;
/// a test parks a run inside begin_run's window, 'b', and shows that such a
/// stop or reset, past 'q', waits for the run's CAS); 'u' when such a stop
/// or reset has taken the timer out of DISPATCHED by its CAS and is about
/// to tell the queue (still holding the mutex: nobody can end the timer,
/// recycle its record and bind it to another queue in between). Called by a
/// shard thread with a null record: 'k' when a re-clock pass begins (it saw
/// a boot-time or wall-clock offset move, or re-runs after finding a timer's
/// deadline lock held), after it took the new offsets and before it re-files;
/// 'h' when a driver is about to hand a batch of due timers to the
/// dispatcher (its items popped from the wheel, claim items still PENDING:
/// a test parks it mid-hand-off while another thread stops or resets them).
/// 'H' right after it handed such a batch over (the workers may be running
/// them already). 'L' by a worker whose claim item found its timer's
/// deadline moved later by a reset (ClaimOutcome::Later), after it read the
/// word and before it re-files the timer (its Insert): a reset landing here
/// must still make the timer run by its deadline (issue 31, bug 3). The 'h' and 'H' windows are not schedule points of their
/// own (they are a shard's).
/// The driver's park (shard.hpp), with a null record: 'P' by a driver in its
/// pass, its inbox just drained; 'y' by a driver about to lower the tick it
/// sleeps until (a queued message or a caller's cell is due earlier); 'd'
/// by a driver about to park. A poster's wake-up ('v', null record): it read
/// the tick the driver sleeps until and is about to CAS it to 0. A caller's
/// cell (caller_cells.hpp): 'l' by a caller that placed a timer in its cell
/// and has not yet checked whether the driver needs a wake-up. (A worker
/// whose claim item found the word moved later: 'L', above.) Callers
/// holding a lock the runtime's threads share with them (issue 31, the
/// progress rule: the driver and the workers only try these, or never
/// take them): 'g' inside GroupIndex::add (a grouped start, null record), 'G' inside a group stop's claim (null record), 'R' inside
/// the inbox's out-of-memory reserve (null record), 'o' a reset holding a
/// boot-time or wall-clock timer's deadline lock, before its CAS.
/// 'O' by a reset of a boot-time or wall-clock timer (reset_record,
/// reset.cpp; also a batch's) after its generation check and before it
/// takes the timer's deadline lock (OwnDeadline::lock, which checks the
/// generation again: a stale reset parked here while the slot is reused
/// must not take the next timer's lock; issue 31). 'Q' by a query of a
/// boot-time or wall-clock timer (Runtime::query_sized) between its read of
/// the timer's word and its read of the own-clock deadline (a reset landing
/// here moves both: the query must not answer the old state with the new
/// deadline). 'V', with a null
/// record, by a manual runtime's Clocks::advance_to (clock.hpp) between its
/// load of the virtual clock and its CAS (an advance, or a delivery queue's
/// run of a manual runtime's timer: two threads may move it at once).
/// The start path's clock (clock.cpp), with a null record, on the thread
/// that reads it: 'C' inside one of its once-per-process steps -- the
/// decision (mode kDeciding, from the process's first runtime creation) or
/// the end of the calibration (kFinishing, from a start) -- where a fork
/// leaves the child a step to undo (fork.cpp); 'S' in a re-synchronisation,
/// between this thread's new pair being taken and being published, where a
/// signal handler of this thread that reads the clock sees the old pair.
extern std::atomic<void (*)(const void* record, char what)> in_window;

/// The generation a never-used slot starts at (default 1). Lets a test
/// bring a slot near a generation wrap without recycling it millions of times.
extern std::atomic<std::uint32_t> first_generation;

/// While > 0, each inbox post that may fail fails (and decrements it): the
/// moodycamel queue's allocation failure, on demand. Starts then post their
/// Insert to the inbox even when they could use their caller cell.
extern std::atomic<std::int64_t> fail_inbox_posts;

/// Called after a chain of records was pushed onto a handle table's free
/// stack (a flush), with the chain's top index and its length: lets a test
/// wait until a given record, or a given number of records, can be taken
/// again.
extern std::atomic<void (*)(std::uint32_t top_index, std::uint32_t count)> freed;

/// Added to every CLOCK_REALTIME reading the library makes (tw_now_ns_clock,
/// realtime timers): a test steps "the wall clock" forward or back without
/// touching the machine's clock.
extern std::atomic<std::int64_t> realtime_shift_ns;

/// While > 0, each allocation of a callable's box (callable.hpp: a callable
/// type the full registry of kinds has no room for) fails (and decrements
/// it): the start then fails with no_memory, on demand.
extern std::atomic<std::int64_t> fail_box_allocs;

/// Schedule fuzzing (tw_stress history --fuzz, stress/history.hpp): called
/// at every schedule point -- each in_window point ('c' 'r' 'b' 'W' 'w'
/// 'i' 'L', the driver's and the cells', the clock's 'C' 'S', as above),
/// each clock reading the library makes ('m' monotonic,
/// 'k' boot-time or wall clock), before a parker's futex sleep ('p') and
/// wake ('u'), when a delivery queue is created ('q': before it enters the
/// queue table) and before its eventfd is written ('e') and read ('E') --
/// with that site's code. A fuzzer
/// installed here yields, sleeps or parks the calling thread by a seeded
/// random choice, so that the windows between these steps open wide on
/// some runs. It must not call into the library (it runs inside the
/// library's locks and clock reads).
/// Null (the default): one relaxed load of a null pointer per point.
extern std::atomic<void (*)(char site)> schedule_point;
inline void perturb(char site) noexcept {
    if (auto* f = schedule_point.load(std::memory_order_relaxed)) [[unlikely]] f(site);
}

inline void window(const void* rec, char what) noexcept {
    // Acquire (a plain load on x86): a hook that a library thread calls --
    // a shard's driver at its token points -- sees what the test wrote
    // before installing it (TSan: a test's static state, constructed just
    // before the store, read by the driver through the hook).
    if (auto* f = in_window.load(std::memory_order_acquire)) f(rec, what);
    perturb(what);
}

}  // namespace tickwheel::rt::test_hooks
