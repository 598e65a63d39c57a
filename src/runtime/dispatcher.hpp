// Dispatcher: runs expired timers' callbacks in a oneTBB task_arena.
//
// A shard hands over a batch of due timers with one arena.enqueue(); the
// task runs them with tbb::parallel_for over the batch (simple_partitioner,
// grain 1), so every callback not yet started stays in a TBB deque that idle
// workers steal from: a callback that blocks holds back only itself, never
// the rest of its batch, while any worker is free.
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
    unsigned concurrency() const noexcept { return workers_; }

    struct Batch;

private:
    void run_batch(Batch* b) noexcept;
    void run_one(const FireItem& item) noexcept;
    void finish_run(Record& r, Shard& shard) noexcept;

    RuntimeCore& core_;
    unsigned workers_;
    struct Arena;
    std::unique_ptr<Arena> arena_;
    alignas(64) std::atomic<std::int64_t> inflight_{0};
};

}  // namespace tickwheel::rt
