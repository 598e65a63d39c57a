// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/dispatcher.hpp"

#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "runtime/fork.hpp"
#include "runtime/parker.hpp"
#include "runtime/tbb_parallelism.hpp"
#include "runtime/worker_pool.hpp"

namespace tickwheel::rt {

struct Dispatcher::Arena {
    // TBB's worker threads are one pool shared by every arena in the process,
    // capped by the smallest live max_allowed_parallelism: the lease keeps
    // tickwheel's one control at what all live runtimes need at once
    // (tbb_parallelism.hpp). Declared first: held before the arena exists,
    // given back after it is gone.
    ParallelismLease lease;
    tbb::task_arena arena;
    explicit Arena(unsigned workers)
        : lease(workers), arena(static_cast<int>(workers), /*reserved_for_masters=*/0) {
        std::lock_guard<std::mutex> lock(tbb_control_mutex());  // see tbb_control_mutex()
        arena.initialize();
    }
};

struct Batch {
    Dispatcher* owner = nullptr;
    std::atomic<std::size_t> next{0};   // the next item not yet taken
    std::atomic<unsigned> drainers{0};  // drain tasks still holding the batch
    std::size_t n = 0;
    FireItem items[Dispatcher::kMaxBatch];
};

namespace {
/// Names a oneTBB worker "tw-tbb-worker" (top -H, ps, gdb) the first time it
/// runs one of our tasks: oneTBB starts its workers from the thread that
/// first enqueues -- a shard -- so they showed as "tw-shard-N". (A
/// task_scheduler_observer would do it on arena entry, but oneTBB 2021.8
/// leaks its proxy.) The runtime's own threads are "tw-worker".
void name_tbb_worker() noexcept {
    thread_local bool named = false;
    if (named) return;
    named = true;
    set_thread_name("tw-tbb-worker");
}
}  // namespace

const FireItem* Dispatcher::Cursor::next() noexcept {
    const std::size_t i = b_.next.fetch_add(1, std::memory_order_relaxed);
    return i < b_.n ? &b_.items[i] : nullptr;
}

Dispatcher::Dispatcher(unsigned workers, DrainFn drain, void* ctx) : drain_(drain), ctx_(ctx), workers_(workers) {
    // Decided once per runtime: whether this process may use oneTBB cannot
    // change while it runs (only its fork children differ).
    if (onetbb_usable())
        arena_ = std::make_unique<Arena>(workers);
    else
        pool_ = std::make_unique<WorkerPool>(workers);
}

Dispatcher::~Dispatcher() {
    if (arena_ || pool_) wait_idle();
}

unsigned Dispatcher::concurrency() const noexcept {
    return pool_ ? pool_->concurrency() : effective_workers(workers_);
}

void Dispatcher::abandon() noexcept {  // leaked on purpose: see the header
    (void)arena_.release();
    (void)pool_.release();
}

void Dispatcher::run_task(void* batch) noexcept {
    auto* b = static_cast<Batch*>(batch);
    b->owner->run_batch(b);
}

bool Dispatcher::submit(const FireItem* items, std::size_t n) noexcept {
    auto* b = new (std::nothrow) Batch;
    if (b == nullptr) return false;
    b->owner = this;
    b->n = n;
    std::memcpy(static_cast<void*>(b->items), items, n * sizeof(FireItem));
    const auto tasks = static_cast<unsigned>(std::min<std::size_t>(n, workers_));
    // One extra hold while enqueueing: a drain task may finish before the loop does.
    b->drainers.store(tasks + 1, std::memory_order_relaxed);
    inflight_.fetch_add(1, std::memory_order_relaxed);
    unsigned enqueued = 0;
    if (pool_) {
        enqueued = pool_->post(&Dispatcher::run_task, b, tasks);
    } else {
        try {
            for (; enqueued < tasks; ++enqueued)
                arena_->arena.enqueue([b] {
                    name_tbb_worker();
                    run_task(b);
                });
        } catch (...) {  // std::bad_alloc from TBB's task allocation
        }
    }
    if (enqueued == 0) {  // nothing will run it: hand the items back
        delete b;
        inflight_.fetch_sub(1, std::memory_order_relaxed);
        return false;
    }
    // Drop the tasks that were never enqueued and our own hold; any one
    // drain task runs the whole batch.
    if (b->drainers.fetch_sub(tasks - enqueued + 1, std::memory_order_acq_rel) == tasks - enqueued + 1) {
        delete b;
        if (inflight_.fetch_sub(1, std::memory_order_acq_rel) == 1) inflight_.notify_all();
    }
    return true;
}

void Dispatcher::wait_idle() noexcept {
    for (std::int64_t v = inflight_.load(std::memory_order_acquire); v != 0;
         v = inflight_.load(std::memory_order_acquire))
        inflight_.wait(v, std::memory_order_acquire);
}

void Dispatcher::run_batch(Batch* b) noexcept {
    Cursor cursor(*b);
    drain_(ctx_, cursor);
    if (b->drainers.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    delete b;  // the last drain task out frees the batch
    if (inflight_.fetch_sub(1, std::memory_order_acq_rel) == 1) inflight_.notify_all();
}

}  // namespace tickwheel::rt
