// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/dispatcher.hpp"

#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "runtime/clock.hpp"
#include "runtime/fork.hpp"
#include "runtime/parker.hpp"
#include "runtime/stage_trace.hpp"
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

// The arena's drain tasks stay: after a batch they take the next ticket
// waiting, or wait (linger) for one; see dispatcher.hpp, "Resident drain
// tasks".
struct Dispatcher::Linger {
    struct Slot {
        Parker parker;
        Batch* batch = nullptr;  // handed over by submit(); guarded by mu
    };
    explicit Linger(unsigned workers) : slots(workers) {
        idle.reserve(workers);
        free.reserve(workers);
        for (unsigned i = workers; i-- > 0;) free.push_back(i);
    }
    std::mutex mu;
    std::condition_variable gone;  // alive reached 0 after stop
    std::vector<Slot> slots;       // one per task that may linger at once (the arena's concurrency)
    std::vector<unsigned> idle;    // slots of lingering tasks, most recent last; guarded by mu
    std::vector<unsigned> free;    // unused slots; guarded by mu
    // Batches with tickets no task has taken yet, oldest first (linked
    // through Batch::next_pending). Non-empty only while no task lingers;
    // while non-empty, some task is alive or queued to take them.
    Batch* pending_head = nullptr;  // guarded by mu
    Batch* pending_tail = nullptr;  // guarded by mu
    unsigned queued = 0;            // drain tasks enqueued in the arena, not started yet; guarded by mu
    unsigned alive = 0;             // drain tasks running (draining or lingering); guarded by mu
    bool stop = false;              // guarded by mu
};

// One drain task's share of a batch's items (dispatcher.hpp, "Lanes"): the
// items [lo, hi) nobody has taken yet, packed lo | hi << 32. Its owner takes
// from lo, thieves from hi; every change is a CAS of the whole pair. Items
// are in at most one lane at a time, and a pair tells exactly which items
// are left, so a CAS from a current pair is right whatever came before.
struct alignas(64) Lane {
    std::atomic<std::uint64_t> range{0};
    static constexpr std::uint64_t pack(std::uint32_t lo, std::uint32_t hi) noexcept {
        return lo | (std::uint64_t{hi} << 32);
    }
    static constexpr std::uint32_t lo(std::uint64_t v) noexcept { return static_cast<std::uint32_t>(v); }
    static constexpr std::uint32_t hi(std::uint64_t v) noexcept { return static_cast<std::uint32_t>(v >> 32); }
};

struct Batch {
    Dispatcher* owner = nullptr;
    std::atomic<unsigned> arrivals{0};  // drain tasks that came to the batch: the first kLanes own a lane
    std::atomic<unsigned> drainers{0};  // drain tasks still holding the batch
    unsigned lanes = 0;                 // lanes the items were split into
    std::size_t n = 0;
    unsigned tickets = 0;           // drain tasks it still wants (Linger::pending); guarded by Linger::mu
    Batch* next_pending = nullptr;  // guarded by Linger::mu
    FireItem items[Dispatcher::kMaxBatch];
    Lane lane[Dispatcher::kMaxLanes];
#ifdef TICKWHEEL_STAGE_TRACE
    std::int64_t submit_ns = 0;
    std::int64_t due_ns[Dispatcher::kMaxBatch];
#endif
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

Dispatcher::Cursor::Cursor(Batch& b, StripedCount& taken) noexcept : b_(b), taken_(taken) {
    const unsigned a = b.arrivals.fetch_add(1, std::memory_order_relaxed);
    mine_ = a < b.lanes ? static_cast<int>(a) : -1;
}

// The next item of this task's own lane (from its low end), or -1.
std::int64_t Dispatcher::Cursor::take_own() noexcept {
    Lane& l = b_.lane[mine_];
    std::uint64_t v = l.range.load(std::memory_order_relaxed);
    for (;;) {
        const std::uint32_t lo = Lane::lo(v), hi = Lane::hi(v);
        if (lo >= hi) return -1;
        if (l.range.compare_exchange_weak(v, Lane::pack(lo + 1, hi), std::memory_order_relaxed)) {
            // The record of an item this task will likely take soon: its
            // line comes while this one runs (the worker's first touch of a
            // record is its CAS: a miss per timer in a burst otherwise).
            if (lo + kPrefetchAhead < hi) __builtin_prefetch(b_.items[lo + kPrefetchAhead].rec, 1, 3);
            return lo;
        }
    }
}

// Work stealing: the upper half of another lane's items (the item at once
// if the task owns no lane: one at a time, so that no item waits behind a
// callback of a task nobody can steal from). -1: every lane is empty.
std::int64_t Dispatcher::Cursor::steal() noexcept {
    const unsigned lanes = b_.lanes;
    const unsigned from = mine_ >= 0 ? static_cast<unsigned>(mine_) + 1 : 0;
    for (unsigned k = 0; k < lanes; ++k) {
        Lane& victim = b_.lane[(from + k) % lanes];
        std::uint64_t v = victim.range.load(std::memory_order_relaxed);
        for (;;) {
            const std::uint32_t lo = Lane::lo(v), hi = Lane::hi(v);
            if (lo >= hi) break;
            const std::uint32_t take = mine_ >= 0 ? (hi - lo + 1) / 2 : 1;
            if (!victim.range.compare_exchange_weak(v, Lane::pack(lo, hi - take), std::memory_order_relaxed))
                continue;
            const std::uint32_t first = hi - take;
            // The rest of what it took goes into its own (empty) lane, where
            // others can steal it back while its callbacks run.
            if (take > 1) b_.lane[mine_].range.store(Lane::pack(first + 1, hi), std::memory_order_relaxed);
            return first;
        }
    }
    return -1;
}

const FireItem* Dispatcher::Cursor::next() noexcept {
    std::int64_t idx = mine_ >= 0 ? take_own() : -1;
    if (idx < 0) idx = steal();
    const std::size_t i = idx < 0 ? b_.n : static_cast<std::size_t>(idx);
#ifdef TICKWHEEL_STAGE_TRACE
    if (i < b_.n) {
        const std::int64_t now = monotonic_ns();
        stage_trace::record(stage_trace::kSubmitToTask, task_ns_ - b_.submit_ns);
        stage_trace::record(stage_trace::kTaskToTake, now - task_ns_);
        stage_trace::record(stage_trace::kDueToTake, now - b_.due_ns[i]);
    }
#endif
    if (i >= b_.n) return nullptr;
    taken_.add();  // no longer waiting for a worker (waiting())
    return &b_.items[i];
}

Dispatcher::Dispatcher(unsigned workers, DrainFn drain, void* ctx) : drain_(drain), ctx_(ctx), workers_(workers) {
    // Decided once per runtime: whether this process may use oneTBB cannot
    // change while it runs (only its fork children differ).
    if (onetbb_usable()) {
        arena_ = std::make_unique<Arena>(workers);
        linger_ = std::make_unique<Linger>(workers);
    } else {
        pool_ = std::make_unique<WorkerPool>(workers);
    }
}

Dispatcher::~Dispatcher() {
    if (arena_ || pool_) wait_idle();
    if (linger_) {
        // Every batch has finished: what is left of our tasks lingers (or is
        // on its way out). Wake them, and wait until none is inside our code.
        std::unique_lock<std::mutex> lock(linger_->mu);
        linger_->stop = true;
        for (const unsigned i : linger_->idle) linger_->slots[i].parker.unpark();
        // (A task enqueued for tickets that others took may not have started yet.)
        linger_->gone.wait(lock, [this] { return linger_->alive == 0 && linger_->queued == 0; });
    }
}

unsigned Dispatcher::concurrency() const noexcept {
    return pool_ ? pool_->concurrency() : effective_workers(workers_);
}

void Dispatcher::abandon() noexcept {  // leaked on purpose: see the header
    (void)arena_.release();
    (void)pool_.release();
    (void)linger_.release();
}

void Dispatcher::run_task(void* batch) noexcept {
    auto* b = static_cast<Batch*>(batch);
    b->owner->run_batch(b);
}

void Dispatcher::arena_task(Batch* b) noexcept {
    name_tbb_worker();
    Linger& l = *linger_;
    {
        std::lock_guard<std::mutex> lock(l.mu);
        --l.queued;
        ++l.alive;
    }
    if (b == nullptr) b = next_batch();  // a task enqueued for pending tickets
    for (; b != nullptr; b = next_batch()) run_batch(b);
    // next_batch() returned nullptr: this task no longer counts as alive, and
    // the Dispatcher may be gone already.
}

namespace {
// Under l.mu, by a drain task that ends: it no longer counts as alive (in the
// same critical section as its last look at the pending tickets, so that a
// submit() never counts on a task that will not look again).
void leave(Dispatcher::Linger& l) noexcept {
    if (--l.alive == 0 && l.queued == 0 && l.stop) l.gone.notify_all();
}

// Under l.mu: a ticket of the oldest pending batch, or nullptr.
Batch* take_pending(Dispatcher::Linger& l) noexcept {
    Batch* b = l.pending_head;
    if (b == nullptr) return nullptr;
    if (--b->tickets == 0) {
        l.pending_head = b->next_pending;
        if (l.pending_head == nullptr) l.pending_tail = nullptr;
        b->next_pending = nullptr;
    }
    return b;
}

}  // namespace

Batch* Dispatcher::next_batch() noexcept {
    Linger& l = *linger_;
    // Lingering is for a process where the arena has the threads it asked
    // for: under an application's lower limit the runtimes share fewer
    // threads through oneTBB's own balancing, which a lingering task would
    // keep from the others.
    const bool may_linger = effective_workers(workers_) >= workers_;
    std::unique_lock<std::mutex> lock(l.mu);
    if (Batch* b = take_pending(l)) return b;
    if (!may_linger || l.stop || l.free.empty()) {
        leave(l);
        return nullptr;
    }
    const unsigned i = l.free.back();
    l.free.pop_back();
    Linger::Slot& slot = l.slots[i];
    slot.batch = nullptr;
    l.idle.push_back(i);
    const std::int64_t until = monotonic_ns() + kLingerNs;
    for (;;) {
        const std::uint32_t seen = slot.parker.prepare();
        lock.unlock();
        slot.parker.park_until(seen, until);
        lock.lock();
        if (Batch* b = slot.batch) {  // submit() took the slot off the idle list
            slot.batch = nullptr;
            l.free.push_back(i);
            return b;
        }
        if (l.stop || monotonic_ns() >= until) {
            l.idle.erase(std::find(l.idle.begin(), l.idle.end(), i));
            l.free.push_back(i);
            // (Nothing is pending while a task lingers: submit() hands a
            // batch's tickets to lingering tasks first.)
            leave(l);
            return nullptr;
        }
    }
}

bool Dispatcher::submit(const FireItem* items, std::size_t n) noexcept {
    auto* b = new (std::nothrow) Batch;
    if (b == nullptr) return false;
    b->owner = this;
    b->n = n;
    std::memcpy(static_cast<void*>(b->items), items, n * sizeof(FireItem));
#ifdef TICKWHEEL_STAGE_TRACE
    {
        const stage_trace::Pass& p = stage_trace::t_pass;
        b->submit_ns = monotonic_ns();
        for (std::size_t i = 0; i < n; ++i) {
            b->due_ns[i] = p.epoch_ns + static_cast<std::int64_t>(items[i].due * p.res_ns);
            stage_trace::record(stage_trace::kDueToWake, p.wake_ns - b->due_ns[i]);
            stage_trace::record(stage_trace::kWakeToSubmit, b->submit_ns - p.wake_ns);
        }
    }
#endif
    const auto tasks = static_cast<unsigned>(std::min<std::size_t>(n, workers_));
    // The items, split evenly into one lane per drain task (at most
    // kMaxLanes; tasks beyond that own none and steal one item at a time).
    b->lanes = std::min<unsigned>(tasks, kMaxLanes);
    for (unsigned k = 0; k < b->lanes; ++k)
        b->lane[k].range.store(Lane::pack(static_cast<std::uint32_t>(n * k / b->lanes),
                                          static_cast<std::uint32_t>(n * (k + 1) / b->lanes)),
                               std::memory_order_relaxed);
    // One extra hold while enqueueing: a drain task may finish before the loop does.
    b->drainers.store(tasks + 1, std::memory_order_relaxed);
    inflight_.fetch_add(1, std::memory_order_relaxed);
    submitted_.add(n);  // before any drain task can take one (waiting())
    unsigned enqueued = 0;
    if (pool_) {
        enqueued = pool_->post(&Dispatcher::run_task, b, tasks);
    } else {
        enqueued = submit_to_arena(b, tasks);
    }
    if (enqueued == 0) {  // nothing will run it: hand the items back
        submitted_.add(0 - static_cast<std::uint64_t>(n));  // (modulo 2^64: the sum stays right)
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

unsigned Dispatcher::submit_to_arena(Batch* b, unsigned tasks) noexcept {
    // The batch's tickets go to lingering tasks first (one futex wake each:
    // no arena hand-off, no other worker woken), then wait for a task that
    // finishes its batch; new tasks are enqueued only for the threads the
    // arena does not have yet (the arena never runs more than its
    // concurrency at once: with all of them ours and busy, an enqueued task
    // would wait for one of them just the same).
    Linger& l = *linger_;
    const unsigned limit = effective_workers(workers_);
    Linger::Slot* woken[kMaxBatch];  // tasks <= kMaxBatch
    unsigned given = 0, spawn = 0;
    {
        std::lock_guard<std::mutex> lock(l.mu);
        while (given < tasks && !l.idle.empty()) {
            Linger::Slot& slot = l.slots[l.idle.back()];
            l.idle.pop_back();
            slot.batch = b;
            woken[given++] = &slot;
        }
        if (given < tasks) {
            b->tickets = tasks - given;
            if (l.pending_tail != nullptr)
                l.pending_tail->next_pending = b;
            else
                l.pending_head = b;
            l.pending_tail = b;
            const unsigned have = l.alive + l.queued;
            spawn = have >= limit ? 0 : std::min(tasks - given, limit - have);
            if (spawn == 0 && have == 0) spawn = 1;  // someone must take them
            l.queued += spawn;
        }
    }
    for (unsigned i = 0; i < given; ++i) woken[i]->parker.unpark();
    unsigned spawned = 0;
    try {
        for (; spawned < spawn; ++spawned) arena_->arena.enqueue([this] { arena_task(nullptr); });
    } catch (...) {  // std::bad_alloc from TBB's task allocation
    }
    if (spawned == spawn) return tasks;  // every ticket is given or will be taken
    std::lock_guard<std::mutex> lock(l.mu);
    l.queued -= spawn - spawned;
    if (l.alive + l.queued != 0) return tasks;
    // Nobody will take pending tickets: take this batch's back (earlier
    // batches' tickets were taken before: some task was alive or queued
    // while they waited, and a task leaves only when none waits).
    unsigned back = 0;
    for (Batch** p = &l.pending_head; *p != nullptr; p = &(*p)->next_pending) {
        if (*p != b) continue;
        back = b->tickets;
        *p = b->next_pending;
        if (l.pending_tail == b) {
            l.pending_tail = nullptr;
            for (Batch* q = l.pending_head; q != nullptr; q = q->next_pending) l.pending_tail = q;
        }
        b->next_pending = nullptr;
        break;
    }
    return tasks - back;
}

void Dispatcher::wait_idle() noexcept {
    for (std::int64_t v = inflight_.load(std::memory_order_acquire); v != 0;
         v = inflight_.load(std::memory_order_acquire))
        inflight_.wait(v, std::memory_order_acquire);
}

void Dispatcher::run_batch(Batch* b) noexcept {
    Cursor cursor(*b, taken_);
#ifdef TICKWHEEL_STAGE_TRACE
    cursor.task_ns_ = monotonic_ns();
#endif
    drain_(ctx_, cursor);
    if (b->drainers.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    delete b;  // the last drain task out frees the batch
    if (inflight_.fetch_sub(1, std::memory_order_acq_rel) == 1) inflight_.notify_all();
}

}  // namespace tickwheel::rt
