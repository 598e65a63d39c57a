// SPDX-License-Identifier: MIT OR Apache-2.0
// How the runtimes of a process share oneTBB's worker threads.
//
// TBB's worker threads are one pool per process, shared by every task_arena,
// and the pool's size is set by tbb::global_control(max_allowed_parallelism):
// the smallest value among the live controls wins, the value counts the
// application's own thread (value v allows v - 1 workers; checked against
// oneTBB 2021.8), and with no control TBB's default applies
// (tbb::info::default_concurrency(), i.e. v = online CPUs). One control per
// runtime, as before, let the first runtime's small value cap every later
// one (issue 9, bug 4).
//
// So each runtime holds a ParallelismLease for its worker count, and this
// file keeps exactly one tickwheel-owned control alive while any lease
// exists, with the value
//
//     sum of the live runtimes' workers + tbb::info::default_concurrency()
//
// = every runtime's workers, all blocked in callbacks at once, plus the
// application's thread and the default pool (default - 1 workers) that the
// application's own TBB work (parallel_for, its arenas) had without
// tickwheel: that work competes for the same pool, and TBB splits a short
// pool between arenas in proportion to their demand, so without the default
// pool on top a parallel_for in the application could take workers a
// runtime counts on. Threads are created only on demand and an arena of
// TBB's default size never asks for more than the default pool, so the
// larger limit costs nothing and changes nothing for such work (only an
// arena the application made larger than the default can get more).
//
// An application limit above that value, alive when the first runtime is
// created, is kept: the value is at least the limit read then (as the
// single control of old did), so tickwheel never lowers a raised limit.
//
// On every change the new control is created before the old one is
// destroyed (growing or shrinking): there is always a tickwheel control
// while a lease lives, and a smaller one never outlives the change.
//
// An application control below that value wins (the application decided
// how many threads the process may have; tickwheel does not override or
// refuse it): then the runtimes get fewer workers than configured, and
// effective_workers() says how many, read at call time (the application may
// create or remove its limit at any moment). TBB also caps the pool when
// its scheduler starts (at least 256 workers); active_value(), and so
// effective_workers(), includes that cap.
//
// None of this is used where onetbb_usable() is false (a fork child of a
// multi-threaded process, fork.hpp): runtimes there hold no lease and never
// take tbb_control_mutex(), which another thread of the parent may have
// held at the fork (a child that did hung there: issue 9 follow-up).
#pragma once

#include <mutex>

namespace tickwheel::rt {

/// Holds `workers` in the process-wide TBB limit while alive. Create it
/// before the runtime's task_arena, destroy it after. Thread-safe (a mutex;
/// construction and destruction only). Throws std::bad_alloc (nothing
/// changed then).
class ParallelismLease {
public:
    explicit ParallelismLease(unsigned workers);
    ~ParallelismLease();
    ParallelismLease(const ParallelismLease&) = delete;
    ParallelismLease& operator=(const ParallelismLease&) = delete;

private:
    unsigned workers_;
};

/// How many of an arena's `workers` can run at once now: `workers`, or
/// fewer under an application's lower max_allowed_parallelism (limit - 1
/// workers, shared by all arenas; at least 1, as TBB always gives enqueued
/// work one worker). Lock-free apart from TBB's own spin lock.
unsigned effective_workers(unsigned workers) noexcept;

/// The lock under which tickwheel changes its global_control. Hold it while
/// initialising a task_arena too: oneTBB 2021.8 reads its set of controls
/// without a lock when an arena's first use creates its market
/// (market::app_parallelism_limit), racing a control being created on
/// another thread (reported by ThreadSanitizer against a TSan-built oneTBB).
std::mutex& tbb_control_mutex() noexcept;

}  // namespace tickwheel::rt
