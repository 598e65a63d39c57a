// SPDX-License-Identifier: MIT OR Apache-2.0
// fork(): the pthread_atfork handlers (fork.hpp says what a fork child may
// do with a runtime). A child must be able to create a runtime and fire a
// timer whatever instant its parent forked at (issue 31): every piece of
// process-wide state below is either taken around fork() (prepare handler,
// in the forking thread, before the fork) or re-initialised in the child
// (child handler, in the child's only thread, before anything else of the
// library runs there). tests/fork_anywhere_test.cpp forks at every schedule
// point a runtime's creation and first start pass through, from the thread
// at the point and from another thread while it is parked there.
//
// Process-wide state, and its rule:
//  1. The fast clock (clock.cpp: its mode, the calibration's first pair, the
//     published rate). No lock: its two once-per-process steps (the decision,
//     the end of the calibration) are each taken by a CAS. Re-initialised:
//     fast_clock::after_fork_in_child() undoes a step in progress at the fork
//     (the decision back to kUnknown: decided afresh by the next runtime; the
//     end of the calibration back to kCalibrating, nothing published: ended
//     by the next start). (Before issue 31: a std::mutex held through both
//     steps; a child forked while another thread held it never returned from
//     tw_runtime_create(), and one forked at the calibration's end read the
//     exact clock for ever.) Each thread's pair (thread_local): only the
//     forking thread's exists in the child, valid there (same TSC, same
//     clock).
//  2. Hazard slots (hazard.cpp: a lock-free list of per-thread slots, the
//     count of threads acting without one, the membarrier decision).
//     Re-initialised: fork_detail::hazard_in_child() frees every slot but the
//     forking thread's (a slot of a thread gone would hold its record -- or
//     a new runtime's record at the same address -- in quarantine for ever)
//     and sets the count to the forking thread's own; the membarrier
//     decision is kept only if the child's registration holds (below).
//  3. Stripe leases of the striped counters (counters.cpp). Re-initialised:
//     fork_detail::stripes_in_child() gives back every lease but the forking
//     thread's (else the child's threads would share one contended stripe).
//  4. stop_sync()'s count of waiting threads (timer_state.cpp).
//     Re-initialised: fork_detail::waiters_in_child() sets it to the forking
//     thread's own (else every wake-up would pay a futex call for ever).
//  5. The registry of callable kinds (callable.cpp): slots written once by a
//     CAS. Nothing to do: lock-free, whole at every instruction (a fork
//     between a slot's CAS and the count's increment leaves the count, a
//     statistic, one low).
//  6. oneTBB, tickwheel's global_control registry and tbb_control_mutex()
//     (tbb_parallelism.cpp, with their function-local statics' guards).
//     Abandoned: never touched in a child of a process that had more than one
//     thread at the fork (onetbb_usable() false, set below: runtimes there
//     run callbacks on threads of their own). In a child of a single-threaded
//     process no other thread can hold them, and the forking thread holds
//     them only inside a runtime's creation or destruction, where no hook and
//     no user code runs.
//  7. error_category()'s function-local static (runtime.cpp; its guard is
//     held while a thread initialises it). Taken around fork(): the prepare
//     handler calls error_category(), which waits for an initialisation in
//     progress (and does nothing once it is done).
//  8. The C API's count of threads with a last-error message
//     (capi/last_error.cpp). Re-initialised by that file's own child handler
//     (the C API's objects register it): the forking thread's own.
//  9. This file's fork epoch and oneTBB flag: the child handler moves them.
// 10. Counters of names and thread numbers (runtime.cpp: runtimes_named,
//     next_thread_seq), the stage trace's histograms (stage_trace.cpp, a
//     build option): plain atomics, whole at every instruction. The metrics
//     text (metrics.cpp) has no process-wide state at all. Nothing to do.
// 11. Per-thread state (error details, the running callback, release-hook
//     depth, stripe, hazard slot, thread names): the child has the forking
//     thread's only, which is its own.
// 12. Per-runtime locks and flags (the shards' try-locks and callers' cells,
//     shutdown and advance mutexes, delivery queues' and group indexes' mutexes, worker
//     pools, the dispatcher's linger mutex, the inbox reserve, the C API's
//     queues_mu): they belong to runtimes created before the fork, on which
//     every call in the child fails with forked and whose destruction there
//     takes none of them (runtime.cpp, capi/tickwheel_c.cpp).
// 13. Outside the library: libstdc++'s table of atomic-wait waiters (counts
//     and futex words, no lock on Linux: a count of a thread gone costs a
//     spare wake-up); glibc's malloc, stdio and thread stacks (glibc's own
//     fork handling).
// A fork() from a signal handler is outside this promise: POSIX does not
// make fork() async-signal-safe (glibc's malloc takes its locks around it).
// The handlers below take no lock, and the fast clock's steps are undone
// even when the forking thread itself was inside one.
#include "runtime/fork.hpp"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#if __has_include(<sys/single_threaded.h>)  // glibc >= 2.32
#include <sys/single_threaded.h>
#define TW_HAVE_LIBC_SINGLE_THREADED 1
#endif

#include "runtime/clock.hpp"
#include "runtime/hazard.hpp"
#include "tickwheel/runtime.hpp"

namespace tickwheel::rt {

namespace fork_detail {

std::atomic<std::uint32_t> g_epoch{0};
std::atomic<bool> g_onetbb_unusable{false};

namespace {
// Set in the forking thread just before fork(), read in the child (by the
// same thread: the child's only one).
std::atomic<bool> g_threaded_at_fork{true};

bool single_threaded() noexcept {
#ifdef TW_HAVE_LIBC_SINGLE_THREADED
    // glibc sets it false when the process creates its first thread and (as
    // of 2.36) never sets it back: true means no other thread ever existed,
    // so none can be a oneTBB worker or hold a lock. Conservative, as it
    // must be.
    return __libc_single_threaded != 0;
#else
    return false;  // unknown: assume threads
#endif
}

void before_fork() noexcept {
    g_threaded_at_fork.store(!single_threaded(), std::memory_order_relaxed);
    (void)tickwheel::error_category();  // rule 7: an initialisation in progress ends before the fork
}

void in_child() noexcept {
    g_epoch.fetch_add(1, std::memory_order_relaxed);
    if (g_threaded_at_fork.load(std::memory_order_relaxed)) g_onetbb_unusable.store(true, std::memory_order_relaxed);
    fast_clock::after_fork_in_child();  // rule 1
    hazard_in_child();                  // rule 2
    stripes_in_child();                 // rule 3
    waiters_in_child();                 // rule 4
    // The child has one thread now, so the hazard protocol may change sides
    // safely: keep the asymmetric fences only if the child's registration
    // for membarrier holds.
    if (hazard_detail::g_asymmetric.load(std::memory_order_relaxed) == 1 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) != 0)
        hazard_detail::g_asymmetric.store(0, std::memory_order_relaxed);
}

[[maybe_unused]] const int registered = pthread_atfork(before_fork, nullptr, in_child);
}  // namespace

}  // namespace fork_detail

}  // namespace tickwheel::rt
