// SPDX-License-Identifier: MIT OR Apache-2.0
// Dispatcher: runs batches of due timers in a oneTBB task_arena -- or, in a
// process where oneTBB cannot be used (a fork() child of a multi-threaded
// process: fork.hpp), on a WorkerPool of the runtime's own threads
// (worker_pool.hpp), with the same policy. Policy only: it knows neither
// shards nor timers' states; what running an item means is the function it
// is handed (the runtime's worker half of the state machine, worker.cpp).
//
// A shard hands over a batch of due timers as min(batch size, workers)
// tickets: each ticket is a drain task's turn at the batch; on a WorkerPool
// each ticket is one posted task, run by whichever of its threads is free.
//
// Lanes: work stealing inside a batch (issue 21). submit() splits the items
// evenly into one lane per ticket (at most kMaxLanes), each a [lo, hi)
// range on a cache line of its own. A drain task that comes to the batch
// owns the next lane: it takes items from its low end, one CAS on its own
// line each, and prefetches the record kPrefetchAhead items ahead (a
// worker's first touch of a due record is its CAS: a cold line in a
// burst). When its lane is empty it steals the upper half of another lane
// into its own (a task beyond kMaxLanes owns none and steals one item at a
// time). Before, every item of a batch was one fetch_add on a cursor all
// tasks shared: its line crossed cores at every item. Items are taken one
// at a time and whatever is left in a lane stays stealable, so a callback
// that blocks holds back only itself, as before.
//
// What running an item means is the drain function's: since issue 21 most
// items are claim items (messages.hpp), due one-shots whose transition the
// worker makes itself (TimerState::claim_run), so expiry's per-timer work
// -- the transition, the callback, the release -- spreads over the workers
// and the driver only finds what is due.
//
// Resident drain tasks (the arena). A drain task is a oneTBB task that,
// after its batch, takes the next ticket waiting (pending, oldest batch
// first), or else lingers: it sleeps on a futex of its own for up to
// kLingerNs, and submit() hands the next batch's tickets to lingering tasks
// directly, one futex wake each. Only tickets no lingering task could take
// wait as pending, for a task that finishes its batch; a new task is
// enqueued in the arena only for threads the arena does not have yet
// (fewer of our tasks alive or queued than its concurrency: with all of
// them ours and busy, an enqueued task would wait for one of them all the
// same). So a steady stream costs one futex wake per ticket and no arena
// hand-off, and between batches the workers sleep. Before (issue 14) every
// ticket was an arena.enqueue(): each batch into the empty arena raised its
// demand to all of its workers, each woken through oneTBB's market, and each
// then spun ~100 sched_yield() calls looking for more work before sleeping
// again: at 100,000 timers/s with a 100 us tick the workers used ~90% of a
// core (bench/lateness: 15 us of process CPU per timer, 5 with resident
// tasks). A task lingers only while the arena has the threads it asked for
// (effective_workers): under an application's lower TBB limit the runtimes
// share fewer threads through oneTBB's own balancing, which lingering
// tasks would keep from the others; then a task that finds nothing pending
// ends, as before. Lingering holds a oneTBB worker in this arena for up to
// kLingerNs (asleep) after the last batch: the pool was sized for it
// (tbb_parallelism.hpp).
//
// No task ever waits for another, so a callback that blocks holds back only
// itself, never the rest of its batch or the next batches, while any worker
// is free. (A first version ran each batch with tbb::parallel_for: the task
// that started it waited for stolen items, and a waiting oneTBB worker does
// not take newly enqueued tasks, so one blocking callback stalled two
// workers.) Cost per item: one uncontended CAS on the task's own lane.
// (Claiming several items at once would be cheaper, and would make a
// blocking callback hold back the items claimed with it: not done.)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/counters.hpp"
#include "runtime/messages.hpp"

namespace tickwheel::rt {

class WorkerPool;

class Dispatcher {
public:
    static constexpr std::size_t kMaxBatch = 256;
    /// Lanes a batch is split into at most (one per drain task; see "Lanes").
    static constexpr unsigned kMaxLanes = 16;
    /// How far ahead in its lane a drain task prefetches items' records.
    static constexpr std::uint32_t kPrefetchAhead = 4;

    /// The items one drain task takes, one at a time.
    class Cursor {
    public:
        /// The next item nobody has taken, or nullptr when the batch is done.
        const FireItem* next() noexcept;

    private:
        friend class Dispatcher;
        Cursor(struct Batch& b, StripedCount& taken) noexcept;
        std::int64_t take_own() noexcept;
        std::int64_t steal() noexcept;
        struct Batch& b_;
        StripedCount& taken_;
        int mine_;  // this task's lane, or -1 (more tasks than lanes)
#ifdef TICKWHEEL_STAGE_TRACE
        std::int64_t task_ns_ = 0;  // when this drain task began (stage_trace.hpp)
#endif
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
    /// Due timers handed over and not yet taken by a drain task (each item
    /// is taken once, to run it or to find it stale): what waits for a
    /// worker now (issue 34). Striped counts, a recent reading. Any thread.
    std::uint64_t waiting() const noexcept {
        const std::uint64_t taken = taken_.sum();  // (before submitted: never above the truth)
        const std::uint64_t submitted = submitted_.sum();
        return submitted > taken ? submitted - taken : 0;
    }
    /// In a fork() child of the process that created it: forgets the arena
    /// or pool without touching oneTBB or the pool (whose threads do not
    /// exist there, and whose locks may have been copied held). Both are
    /// leaked. Nothing may be submitted afterwards.
    void abandon() noexcept;

    /// How long a drain task of the arena waits for the next batch after its
    /// own is done, before it gives its thread back to oneTBB.
    static constexpr std::int64_t kLingerNs = 2'000'000;
    struct Linger;

private:
    static void run_task(void* batch) noexcept;  // a drain task of a Batch (WorkerPool)
    /// A drain task of the arena: runs `b` (if any), then the batches it
    /// takes from the pending ones or is handed while it lingers.
    void arena_task(struct Batch* b) noexcept;
    /// A pending batch's ticket, or one handed over while lingering (up to
    /// kLingerNs); nullptr: the task ends.
    struct Batch* next_batch() noexcept;
    /// submit() on the arena: returns the drain tasks the batch will get.
    unsigned submit_to_arena(struct Batch* b, unsigned tasks) noexcept;
    void run_batch(struct Batch* b) noexcept;

    const DrainFn drain_;
    void* const ctx_;
    unsigned workers_;
    struct Arena;
    std::unique_ptr<Arena> arena_;       // oneTBB; or else
    std::unique_ptr<WorkerPool> pool_;  // the runtime's own threads
    std::unique_ptr<Linger> linger_;    // with arena_: the resident drain tasks' state
    alignas(64) std::atomic<std::int64_t> inflight_{0};
    StripedCount submitted_;  // items handed over (the shards' threads)
    StripedCount taken_;      // items taken by drain tasks (Cursor::next)
};

}  // namespace tickwheel::rt
