// SPDX-License-Identifier: MIT OR Apache-2.0
// Dispatcher: runs batches of due timers in a oneTBB task_arena -- or, in a
// process where oneTBB cannot be used (a fork() child of a multi-threaded
// process: fork.hpp), on a WorkerPool of the runtime's own threads
// (worker_pool.hpp), with the same policy. Policy only: it knows neither
// shards nor timers' states; what running an item means is the function it
// is handed (the runtime's worker half of the state machine, runtime.cpp).
//
// A shard hands over a batch of due timers as min(batch size, workers) drain
// tasks, each one arena.enqueue(). The drain tasks share an atomic cursor
// over the batch: each takes the next item not yet started, runs it, and
// takes the next, until the batch is empty; TBB's scheduler runs the drain
// tasks on whichever workers are free (and moves them between workers); a
// WorkerPool, on whichever of its threads is free.
// No task ever waits for another, so a callback that blocks holds back only
// itself, never the rest of its batch or the next batches, while any worker
// is free. (A first version ran each batch with tbb::parallel_for: the task
// that started it waited for stolen items, and a waiting oneTBB worker does
// not take newly enqueued tasks, so one blocking callback stalled two
// workers.) Cost per item: one relaxed fetch_add. (Claiming several items
// at once would be cheaper, and would make a blocking callback hold back the
// items claimed with it: not done.)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/messages.hpp"

namespace tickwheel::rt {

class WorkerPool;

class Dispatcher {
public:
    static constexpr std::size_t kMaxBatch = 256;

    /// The items one drain task takes, one at a time.
    class Cursor {
    public:
        /// The next item nobody has taken, or nullptr when the batch is done.
        const FireItem* next() noexcept;

    private:
        friend class Dispatcher;
        explicit Cursor(struct Batch& b) noexcept : b_(b) {}
        struct Batch& b_;
    };
    /// Runs a drain task: takes items from the cursor until it is done. Called
    /// on a worker thread; must not throw.
    using DrainFn = void (*)(void* ctx, Cursor& items) noexcept;

    /// `workers`: the arena's (or pool's) concurrency. `drain(ctx, cursor)`
    /// runs items. Uses oneTBB only if onetbb_usable() (fork.hpp). Throws
    /// std::bad_alloc, or std::system_error if the pool's first thread
    /// cannot be started.
    Dispatcher(unsigned workers, DrainFn drain, void* ctx);
    ~Dispatcher();
    Dispatcher(const Dispatcher&) = delete;
    Dispatcher& operator=(const Dispatcher&) = delete;

    /// Hands `n` (<= kMaxBatch) due timers, all of one shard, to the arena.
    /// Shard threads only. False if no memory could be had for it: nothing
    /// was handed over, the caller keeps the items (and retries).
    bool submit(const FireItem* items, std::size_t n) noexcept;
    /// Waits until every submitted batch has finished running.
    void wait_idle() noexcept;
    /// The callbacks that can run at once now: the configured workers, or
    /// fewer under an application's lower TBB limit (tbb_parallelism.hpp),
    /// or, on a WorkerPool, fewer once the system refused it a thread.
    unsigned concurrency() const noexcept;
    /// In a fork() child of the process that created it: forgets the arena
    /// or pool without touching oneTBB or the pool (whose threads do not
    /// exist there, and whose locks may have been copied held). Both are
    /// leaked. Nothing may be submitted afterwards.
    void abandon() noexcept;

private:
    static void run_task(void* batch) noexcept;  // a drain task of a Batch
    void run_batch(struct Batch* b) noexcept;

    const DrainFn drain_;
    void* const ctx_;
    unsigned workers_;
    struct Arena;
    std::unique_ptr<Arena> arena_;       // oneTBB; or else
    std::unique_ptr<WorkerPool> pool_;  // the runtime's own threads
    alignas(64) std::atomic<std::int64_t> inflight_{0};
};

}  // namespace tickwheel::rt
