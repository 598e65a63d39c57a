// SPDX-License-Identifier: MIT OR Apache-2.0
// Dispatcher: runs batches of due timers in a oneTBB task_arena. Policy
// only: it knows neither shards nor timers' states; what running an item
// means is the function it is handed (the runtime's worker half of the
// state machine, runtime.cpp).
//
// A shard hands over a batch of due timers as min(batch size, workers) drain
// tasks, each one arena.enqueue(). The drain tasks share an atomic cursor
// over the batch: each takes the next item not yet started, runs it, and
// takes the next, until the batch is empty; TBB's scheduler runs the drain
// tasks on whichever workers are free (and moves them between workers).
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

    /// `workers`: the arena's concurrency. `drain(ctx, cursor)` runs items.
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
    /// fewer under an application's lower TBB limit (tbb_parallelism.hpp).
    unsigned concurrency() const noexcept;
    /// In a fork() child: forgets the arena without touching oneTBB (whose
    /// threads do not exist there). Nothing may be submitted afterwards.
    void abandon() noexcept;

private:
    void run_batch(struct Batch* b) noexcept;

    const DrainFn drain_;
    void* const ctx_;
    unsigned workers_;
    struct Arena;
    std::unique_ptr<Arena> arena_;
    alignas(64) std::atomic<std::int64_t> inflight_{0};
};

}  // namespace tickwheel::rt
