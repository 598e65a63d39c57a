// The dispatcher: TBB arena hand-off, and the worker's half of the timer
// state machine (timer_record.hpp): claim the run, call, then settle.
#include "runtime/dispatcher.hpp"

#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cstring>

#include "runtime/runtime_core.hpp"
#include "runtime/tbb_parallelism.hpp"

namespace tickwheel::rt {

thread_local CurrentRun t_current;

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
        arena.initialize();
    }
};

struct Dispatcher::Batch {
    std::atomic<std::size_t> next{0};  // the next item not yet taken
    std::atomic<unsigned> drainers{0};  // drain tasks still holding the batch
    std::size_t n = 0;
    FireItem items[Shard::kFireBatch];
};

Dispatcher::Dispatcher(RuntimeCore& core, unsigned workers)
    : core_(core), workers_(workers), arena_(std::make_unique<Arena>(workers)) {}

Dispatcher::~Dispatcher() { wait_idle(); }

unsigned Dispatcher::concurrency() const noexcept { return effective_workers(workers_); }

void Dispatcher::submit(const FireItem* items, std::size_t n) {
    auto* b = new Batch;
    b->n = n;
    std::memcpy(static_cast<void*>(b->items), items, n * sizeof(FireItem));
    const auto tasks = static_cast<unsigned>(std::min<std::size_t>(n, workers_));
    b->drainers.store(tasks, std::memory_order_relaxed);
    inflight_.fetch_add(1, std::memory_order_relaxed);
    for (unsigned i = 0; i < tasks; ++i) arena_->arena.enqueue([this, b] { drain(b); });
}

void Dispatcher::wait_idle() noexcept {
    for (std::int64_t v = inflight_.load(std::memory_order_acquire); v != 0;
         v = inflight_.load(std::memory_order_acquire))
        inflight_.wait(v, std::memory_order_acquire);
}

void Dispatcher::drain(Batch* b) noexcept {
    {
        // A batch comes from one shard (Shard::flush).
        FreeChain freed(core_.shard(b->items[0].shard).table(), core_.ctl_waiters);
        for (;;) {
            const std::size_t i = b->next.fetch_add(1, std::memory_order_relaxed);
            if (i >= b->n) break;
            run_one(b->items[i], freed);
        }
    }  // flushed before the batch may count as finished (wait_idle, shutdown)
    if (b->drainers.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    delete b;  // the last drain task out frees the batch
    if (inflight_.fetch_sub(1, std::memory_order_acq_rel) == 1) inflight_.notify_all();
}

void Dispatcher::run_one(const FireItem& item, FreeChain& freed) noexcept {
    Record& r = *item.rec;
    // Claim the run: DISPATCHED -> RUNNING, unless a stop or reset got there
    // first (then the timer is no longer ours to run).
    std::uint64_t c = r.ctl.load(std::memory_order_acquire);
    for (;;) {
        if (Ctl::gen(c) != item.gen10 || Ctl::state(c) != State::Dispatched) return;
        if (r.ctl.compare_exchange_weak(c, Ctl::with(c, State::Running), std::memory_order_acq_rel,
                                        std::memory_order_acquire))
            break;
    }
    const std::int64_t start_ns = monotonic_ns();
    const std::int64_t due_ns = core_.clock.tick_start_ns(item.due);
    core_.lateness.record(start_ns > due_ns ? static_cast<std::uint64_t>(start_ns - due_ns) : 0);

    const CurrentRun saved = t_current;
    t_current = CurrentRun{&core_, &r};
    const std::uint64_t id = core_.id_of(r, item.shard);
    try {
        r.cb(Timer(core_.owner, id));
    } catch (...) {
        core_.counters.add(kCallbackExceptions);
        if (core_.config.on_callback_error) {
            try {
                core_.config.on_callback_error(std::current_exception(), id);
            } catch (...) {
                // The error hook must not throw; if it does, we drop it.
            }
        }
    }
    core_.counters.add(kFired);
    // Still "inside" the timer while settling: the release hook (the
    // callable's destructor) may run here, and from it shutdown() must report
    // would_deadlock and stop_sync() on this timer must not wait for itself.
    finish_run(r, core_.shard(item.shard), freed);
    t_current = saved;
}

// After a run: settle the state the run (or concurrent callers) left.
void Dispatcher::finish_run(Record& r, Shard& shard, FreeChain& freed) noexcept {
    // Messages are built now: once the state leaves RUNNING*, the slot may
    // be recycled and its generation move on.
    const std::uint32_t index = HandleTable::index_of(&r);
    const std::uint32_t gen = r.gen();
    std::uint64_t c = r.ctl.load(std::memory_order_acquire);
    for (;;) {
        const State s = Ctl::state(c);
        if (s == State::Running && r.period_ticks() != 0) {
            // Periodic: already back in the wheel at its next deadline.
            if (!r.ctl.compare_exchange_weak(c, Ctl::with(c, State::Pending), std::memory_order_acq_rel,
                                             std::memory_order_acquire))
                continue;
            core_.wake_ctl_waiters(r);
            return;
        }
        if (s == State::Running) {
            // One-shot, last run: release, then recycle the slot.
            if (!r.ctl.compare_exchange_weak(c, Ctl::with(c, State::Done), std::memory_order_acq_rel,
                                             std::memory_order_acquire))
                continue;
            core_.release(r);
            shard.recycle(r, freed);
            // Now, not at the chain's flush: the next callback of this drain
            // task may block, and stop_sync(this timer) must not wait for it.
            // (Only the slot's reuse waits for the flush.)
            core_.wake_ctl_waiters(r);
            return;
        }
        if (s == State::RunningRearmed) {
            // One-shot re-armed from its own callback: pending again.
            if (!r.ctl.compare_exchange_weak(c, Ctl::with(c, State::Pending), std::memory_order_acq_rel,
                                             std::memory_order_acquire))
                continue;
            shard.post_and_wake(Msg::make(MsgType::Insert, gen, index), Ctl::deadline(c));
            core_.wake_ctl_waiters(r);
            return;
        }
        // RunningStopped: a stop() returned true during the run. Nobody else
        // moves this state; release, then let the shard unlink and recycle.
        core_.release(r);
        r.ctl.store(Ctl::with(c, State::Cancelled), std::memory_order_release);
        core_.wake_ctl_waiters(r);
        shard.post_cancel(Msg::make(MsgType::Cancel, gen, index));
        return;
    }
}

}  // namespace tickwheel::rt
