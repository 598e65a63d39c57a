// SPDX-License-Identifier: MIT OR Apache-2.0
// RuntimeCore: what a Runtime is -- its shards, its dispatcher, its counters
// and its shutdown state -- and the worker's half of the timer state machine
// (the callers' half is runtime.cpp). The shards and the dispatcher do not
// know it: a shard is built with the clock and the dispatcher it uses, the
// dispatcher with the function that runs an item (RuntimeCore::drain).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/clock.hpp"
#include "runtime/counters.hpp"
#include "runtime/delivery_queue.hpp"
#include "runtime/dispatcher.hpp"
#include "runtime/fork.hpp"
#include "runtime/shard.hpp"
#include "tickwheel/runtime.hpp"

namespace tickwheel::rt {

class DeliveryQueue;

/// Which timer (if any) this thread is running the callback of, and through
/// `prev` the runs this one is nested in (a callback that runs a delivery
/// queue, tw_queue_run(), runs other callbacks inside its own).
struct CurrentRun {
    const RuntimeCore* core = nullptr;
    const Record* rec = nullptr;
    const DeliveryQueue* queue = nullptr;  // the queue that runs it; nullptr on a worker
    const CurrentRun* prev = nullptr;
};
// (Initial-exec: a plain %fs-relative access in the shared library too, on
// every run and stop_sync; the library's TLS block is static already.)
[[gnu::tls_model("initial-exec")]] extern constinit thread_local CurrentRun t_current;
/// Whether this thread is inside a callback of `core` (at any depth).
bool inside_callback_of(const RuntimeCore* core) noexcept;
/// Whether this thread is inside the callback of record `r` (at any depth).
bool inside_callback_of(const Record* r) noexcept;
/// How many release hooks (callables' destructors run by a runtime) this
/// thread is inside. Shutting a runtime down from one is refused
/// (would_deadlock): a hook may run on a worker, inside a stop, inside a
/// shutdown sweep or a failed start, where that would deadlock or free
/// memory in use. Initial-exec: every stop's and every run's release hook
/// counts here (a plain load in the shared library too).
[[gnu::tls_model("initial-exec")]] extern thread_local int t_release_depth;

struct RuntimeCore {
    RuntimeCore(Runtime* owner, Config config);
    ~RuntimeCore();

    Shard& shard(std::uint32_t i) noexcept { return *shards[i]; }
    /// Finds the record an id names, if its generation is current (the
    /// state machine validates it again after every load). nullptr otherwise.
    Record* lookup(std::uint64_t id, Shard** shard_out) noexcept;
    /// True in a fork() child of the process that created this runtime.
    bool forked() const noexcept { return fork_epoch() != created_in_epoch; }

    /// Destroys a timer's callable (its release hook) and counts the timer
    /// as no longer live. Called exactly once per started timer, by whoever
    /// owns its terminal transition; the record itself is recycled later.
    void release(Record& r) noexcept;
    /// release() in two: the hook alone, and counting `n` released timers
    /// (a batch counts once per call).
    void release_hook(Record& r) noexcept;
    void count_released(std::uint64_t n) noexcept;
    /// Destroys the callable of a start() that failed, as a release hook.
    static void release_unstarted(detail::Callback& cb) noexcept;

    /// The dispatcher's DrainFn: runs the items of one drain task.
    static void drain(void* self, Dispatcher::Cursor& items) noexcept;
    void run_one(const FireItem& item, FreeChain& freed) noexcept;
    /// DISPATCHED -> RUNNING for `item`, unless a stop or reset got there
    /// first (then false: the item is stale). Any thread.
    bool begin_run(const FireItem& item) noexcept;
    /// Runs a begun item's callback on this thread and settles after it
    /// (finish_run). `queue`: the delivery queue running it, if any.
    /// Returns the callbacks it ran: 1, or more for a BURST timer's
    /// catch-up -- at most `budget` (>= 1) on a queue, which then keeps the
    /// rest owed (DeliveryQueue::requeue_owed: the timer is due again,
    /// not settled). Owed deadlines beyond Extra::kMaxOwed are skipped
    /// (counted in Extra::missed), the oldest first.
    std::size_t run_begun(const FireItem& item, FreeChain& freed, DeliveryQueue* queue,
                          std::size_t budget = static_cast<std::size_t>(-1)) noexcept;
    void finish_run(Record& r, const FireItem& item, FreeChain& freed) noexcept;
    /// Calls r's callable as timer `id` for deadline `due` (lateness --
    /// also the queue's that runs it, t_current.queue --, exceptions,
    /// counters).
    void call(Record& r, std::uint64_t id, tick_t due) noexcept;

    /// In a fork() child: forget threads, arena and callables (see fork.hpp).
    void abandon() noexcept;

    /// A new delivery queue (tickwheel::Queue); carries a reference for the
    /// caller. Throws Error(shutting_down), std::bad_alloc, std::system_error.
    /// Ordered against shutdown like a start (StartGuard): a queue it
    /// returns is closed by a shutdown that began at any time.
    DeliveryQueue* create_queue();
    /// tw_queue_destroy(), after q.claim_destroy(): waits for the starts in
    /// flight (a bound start that checked q before the claim is published
    /// first), closes `q`, cancels every timer bound to it
    /// (release hooks on this thread), waits until no thread can touch it,
    /// and drops the runtime's reference (the caller keeps its own).
    /// Cost: O(timer slots of the runtime). Not from inside one of q's
    /// callbacks (the caller checks: would_deadlock).
    void destroy_queue(DeliveryQueue& q) noexcept;
    /// StartOptions::queue's slot and its generation; false for another runtime's
    /// queue or a closed one.
    bool queue_slot(const Queue* q, std::uint16_t& slot, std::uint32_t& slot_gen) const noexcept;
    /// Waits until every start (and queue create) registered on a stripe of
    /// `starting` when it was called has left its StartGuard; the heavy
    /// side of the guard's fence comes first, so a start that registers
    /// later sees what the caller stored before (shutting_down, a queue's
    /// claim). Shutdown and destroy_queue. Never from inside a StartGuard.
    void wait_for_starts() noexcept;

    /// A manual runtime (Config::manual_clock): moves its clocks by `ns`
    /// and runs what falls due on this thread, in deadline order (ties:
    /// start order); returns the callbacks run. The caller checked: manual,
    /// not inside a callback of this runtime, not shut down.
    std::size_t advance(std::int64_t ns);
    /// advance()'s answer when a shutdown began before it took advance_mutex.
    static constexpr std::size_t kAdvanceShutDown = static_cast<std::size_t>(-1);

    Runtime* const owner;
    const Config config;
    Clocks clocks;  // the machine's, or a manual runtime's virtual ones
    const TickClock clock;
    const std::uint64_t max_timers;
    const std::uint32_t created_in_epoch;
    std::unique_ptr<Dispatcher> dispatcher;
    QueueTable queues;  // declared before the shards, which deliver to them
    std::vector<std::unique_ptr<Shard>> shards;
    Counters counters;
    LatencyHistogram lateness;

    // Live timers (started, not yet released), kept only when max_timers != 0;
    // stats() derives it from the counters otherwise.
    alignas(64) std::atomic<std::int64_t> live{0};

    // Shutdown. start() registers on its thread's stripe of `starting`, then
    // checks `shutting_down`; shutdown sets the flag and waits for every
    // stripe to drain, after which no start can slip past the final sweep.
    // (The two sides of that handshake are an asymmetric fence: StartGuard,
    // timer_ops.hpp, the light one; shutdown the heavy one.)
    alignas(64) std::atomic<bool> shutting_down{false};
    struct alignas(64) Guard {
        std::atomic<std::int64_t> n{0};
    };
    Guard starting[kStripes];
    std::mutex shutdown_mutex;  // serialises shutdown() callers; not on any hot path
    // A manual runtime: serialises advance() (and shutdown against it), and
    // numbers starts (Extra::seq: the order of ties).
    std::mutex advance_mutex;
    std::atomic<std::uint64_t> start_seq{0};
    std::atomic<bool> shut_down{false};
};

}  // namespace tickwheel::rt
