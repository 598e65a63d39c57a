// Dispatcher: runs expired timers' callbacks in a oneTBB task_arena.
//
// A shard hands over a batch of due timers as min(batch size, workers) drain
// tasks, each one arena.enqueue(). The drain tasks share an atomic cursor
// over the batch: each takes the next callback not yet started, runs it, and
// takes the next, until the batch is empty; TBB's scheduler runs the drain
// tasks on whichever workers are free (and moves them between workers).
// No task ever waits for another, so a callback that blocks holds back only
// itself, never the rest of its batch or the next batches, while any worker
// is free. (A first version ran each batch with tbb::parallel_for: the task
// that started it waited for stolen items, and a waiting oneTBB worker does
// not take newly enqueued tasks, so one blocking callback stalled two
// workers.) Cost per callback: one relaxed fetch_add. (Claiming several
// items at once would be cheaper, and would make a blocking callback hold
// back the items claimed with it: not done.) The slots of one-shot timers a
// drain task finishes are freed with one CAS when it leaves the batch.
//
// This file also holds the worker's half of the timer state machine (see
// timer_record.hpp): DISPATCHED -> RUNNING, the call, and what follows it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/shard.hpp"

namespace tickwheel::rt {

struct RuntimeCore;

class Dispatcher {
public:
    Dispatcher(RuntimeCore& core, unsigned workers);
    ~Dispatcher();
    Dispatcher(const Dispatcher&) = delete;
    Dispatcher& operator=(const Dispatcher&) = delete;

    /// Hands `n` due timers to the arena. Shard threads only.
    void submit(const FireItem* items, std::size_t n);
    /// Waits until every submitted batch has finished running.
    void wait_idle() noexcept;
    /// The callbacks that can run at once now: the configured workers, or
    /// fewer under an application's lower TBB limit (tbb_parallelism.hpp).
    unsigned concurrency() const noexcept;

    struct Batch;

private:
    void drain(Batch* b) noexcept;
    void run_one(const FireItem& item, FreeChain& freed) noexcept;
    void finish_run(Record& r, Shard& shard, FreeChain& freed) noexcept;

    RuntimeCore& core_;
    unsigned workers_;
    struct Arena;
    std::unique_ptr<Arena> arena_;
    alignas(64) std::atomic<std::int64_t> inflight_{0};
};

}  // namespace tickwheel::rt
