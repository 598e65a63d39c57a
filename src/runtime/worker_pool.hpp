// SPDX-License-Identifier: MIT OR Apache-2.0
// WorkerPool: a runtime's own callback threads, used instead of a oneTBB
// task_arena where oneTBB cannot be used: in a process descended through
// fork() from a multi-threaded process (fork.hpp, onetbb_usable()).
//
// Why not oneTBB there: its worker pool is one per process, and fork()
// copies the pool's bookkeeping without its threads. Once the parent had
// workers, the child's oneTBB believes they exist: tasks enqueued in the
// child are never run (a runtime created in the child never fired, and
// destroying it hung waiting for them). And any lock another thread of the
// parent held at the fork -- oneTBB's own, or tickwheel's
// tbb_control_mutex() while that thread created or destroyed a runtime --
// stays held forever in the child. oneTBB offers no way to re-initialise
// after fork(); tbb::finalize() in the parent before forking only works
// when no arena is alive, which a runtime kept across the fork contradicts.
// So such a child's runtimes do not touch oneTBB at all.
//
// Same policy as the arena (dispatcher.hpp): a posted task is run once by
// one of the threads; no task waits for another, so a blocked callback
// holds only its own thread. Threads are created on demand, as oneTBB does:
// when a task is posted and fewer threads are free than tasks wait, one
// more is started, up to `max_threads`; they live until the pool is
// destroyed (idle ones sleep on a condition variable). Posting takes a
// mutex (an arena's enqueue does not): acceptable for the fork-child case.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace tickwheel::rt {

class WorkerPool {
public:
    using Task = void (*)(void* arg) noexcept;

    /// At most `max_threads` (>= 1) threads. Starts the first one at once, so
    /// that every posted task has a thread to run it even if no other can be
    /// started later. Throws std::system_error (no thread) or std::bad_alloc.
    explicit WorkerPool(unsigned max_threads);
    /// Runs every task still queued, then joins the threads. Must not run on
    /// one of them.
    ~WorkerPool();
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    /// Queues `copies` runs of task(arg); returns how many were queued (fewer
    /// only when out of memory). Starts threads as needed (see above); a
    /// thread that cannot be started lowers concurrency() for good. Any
    /// thread.
    unsigned post(Task task, void* arg, unsigned copies) noexcept;
    /// Tasks that can run at once: max_threads, or the threads the system
    /// let the pool start once it refused one.
    unsigned concurrency() const noexcept { return limit_.load(std::memory_order_relaxed); }

private:
    void run() noexcept;
    void start_threads(unsigned n) noexcept;

    std::atomic<unsigned> limit_;
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::pair<Task, void*>> queue_;  // guarded by m_
    unsigned threads_ = 0;                      // started (or being started); guarded by m_
    unsigned busy_ = 0;                         // running a task; guarded by m_
    bool stop_ = false;                         // guarded by m_
    std::vector<std::thread> handles_;          // guarded by m_; capacity max_threads (never reallocates)
};

}  // namespace tickwheel::rt
