// SPDX-License-Identifier: MIT OR Apache-2.0
// fork(): a child process has none of its parent's threads, so a runtime
// created before the fork has no shard drivers and no workers there. Every
// runtime remembers the process's fork epoch at creation; a pthread_atfork
// child handler bumps the epoch, and every operation compares (one relaxed
// load of a read-mostly global): in the child, operations on an inherited
// runtime fail with errc::forked, and destroying it frees what can be freed
// without running any callback or release hook (~RuntimeCore, runtime.cpp).
//
// A runtime created in the child must work, and oneTBB is not fork-safe:
// its process-wide worker pool is copied without its threads (tasks
// enqueued in the child would never run), and a lock held by another
// thread at the fork (oneTBB's, or tbb_control_mutex() while that thread
// creates or destroys a runtime) stays held in the child forever. So the
// handlers also record whether the process had more than one thread when
// it forked (before the fork, in the forking thread): if it had -- or if
// any ancestor had, the state is inherited -- onetbb_usable() is false and
// runtimes created here run their callbacks on threads of their own
// (dispatcher.hpp, worker_pool.hpp) and never touch oneTBB. A process that
// was single-threaded when it forked (a daemon forking before it starts
// any thread) had no oneTBB worker and no other thread inside oneTBB or a
// tickwheel lock: its child keeps using oneTBB.
#pragma once

#include <atomic>
#include <cstdint>

namespace tickwheel::rt {

namespace fork_detail {
extern std::atomic<std::uint32_t> g_epoch;
extern std::atomic<bool> g_onetbb_unusable;
// The child handler's resets of process-wide state (fork.cpp lists every
// such state and its rule), each defined next to the state it resets. Run
// in the child's only thread, before anything else of the library there.
void hazard_in_child() noexcept;   // hazard.cpp: the slots and the unguarded count of threads gone
void stripes_in_child() noexcept;  // counters.cpp: the stripe leases of threads gone
void waiters_in_child() noexcept;  // timer_state.cpp: stop_sync waiters gone
}  // namespace fork_detail

/// The number of fork() children this process descends from (0 in the
/// original process).
inline std::uint32_t fork_epoch() noexcept { return fork_detail::g_epoch.load(std::memory_order_relaxed); }

/// False in a process descended through fork() from a process that had
/// more than one thread when it forked (at any depth): there, oneTBB must
/// not be used at all (see above). True otherwise. Never changes in a
/// running process (only in its fork children).
inline bool onetbb_usable() noexcept { return !fork_detail::g_onetbb_unusable.load(std::memory_order_relaxed); }

}  // namespace tickwheel::rt
