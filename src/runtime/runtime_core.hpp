// SPDX-License-Identifier: MIT OR Apache-2.0
// RuntimeCore: what a Runtime is -- its shards, its dispatcher, its counters
// and its shutdown state -- and the worker's half of the timer state machine
// (worker.cpp; the callers' half is start.cpp, stop.cpp and reset.cpp). The
// shards and the dispatcher do not know it: a shard is built with the clock
// and the dispatcher it uses, the dispatcher with the function that runs an
// item (RuntimeCore::drain).
//
// The rooms of the C++ API (tickwheel::Runtime and RuntimeCore), one idea
// each; every one opens with its rules (threads, owners, who waits):
//   runtime.cpp          a Runtime's life and what it shows: errors, the 1.x
//                        C++ ABI, construction, shutdown, query, stats
//   start.cpp            start(): check, plan, take a record, fill, publish, file
//   stop.cpp             stop(), stop_sync(), stop_group(); the release every
//                        end of a timer takes (release, release_hook)
//   reset.cpp            reset(), reset_at()
//   worker.cpp           the worker's half: run a due timer, settle after it
//   manual_clock.cpp     advance(), now(): a manual runtime's driver
//   queue_lifecycle.cpp  a delivery queue's creation and destruction
//   batch.cpp            the batch calls (the single calls' steps, in blocks)
// What they share: this header, and timer_ops.hpp (the steps of start, stop
// and reset on one timer). Every change of a timer's word is a TimerState
// call (timer_state.hpp); every other per-timer field has its writer in the
// owner table there ("THE OWNER TABLE").
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
// every run and stop_sync; the library's TLS block is static already.
// Defined in worker.cpp, with t_release_depth.)
[[gnu::tls_model("initial-exec")]] extern constinit thread_local CurrentRun t_current;
/// Whether this thread is inside a callback of `core` (at any depth).
/// (Inline: stop_sync, advance and shutdown, in their own rooms, inline it.)
inline bool inside_callback_of(const RuntimeCore* core) noexcept {
    for (const CurrentRun* f = &t_current; f != nullptr; f = f->prev)
        if (f->core == core) return true;
    return false;
}
/// Whether this thread is inside the callback of record `r` (at any depth).
inline bool inside_callback_of(const Record* r) noexcept {
    for (const CurrentRun* f = &t_current; f != nullptr; f = f->prev)
        if (f->rec == r) return true;
    return false;
}
/// How many release hooks (callables' destructors run by a runtime) this
/// thread is inside. Shutting a runtime down from one is refused
/// (would_deadlock): a hook may run on a worker, inside a stop, inside a
/// shutdown sweep or a failed start, where that would deadlock or free
/// memory in use. Initial-exec: every stop's and every run's release hook
/// counts here (a plain load in the shared library too).
[[gnu::tls_model("initial-exec")]] extern constinit thread_local int t_release_depth;
/// Marks this thread as inside a release hook for the scope's life.
struct ReleaseScope {
    ReleaseScope() noexcept { ++t_release_depth; }
    ~ReleaseScope() { --t_release_depth; }
    ReleaseScope(const ReleaseScope&) = delete;
    ReleaseScope& operator=(const ReleaseScope&) = delete;
};

/// The saturation gauges (Stats, metrics; issue 34).
struct Saturation {
    std::uint64_t workers_busy = 0;        // callbacks running on the workers
    std::uint64_t waiting_for_worker = 0;  // handed to the workers, not taken yet
    std::uint64_t callbacks_running = 0;   // on any thread (outermost runs)
    std::uint64_t oldest_run_age_ns = 0;   // the longest-running callback now
};

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
    /// (lookup and the release family: stop.cpp, where a stop inlines them.)
    void release(Record& r) noexcept;
    /// release() in two: the hook alone, and counting `n` released timers
    /// (a batch counts once per call).
    void release_hook(Record& r) noexcept;
    void count_released(std::uint64_t n) noexcept;
    /// Destroys the callable of a start() that failed, as a release hook
    /// (start.cpp).
    static void release_unstarted(detail::Callback& cb) noexcept;

    /// The dispatcher's DrainFn: runs the items of one drain task. (The
    /// worker's half: worker.cpp.)
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
    /// Calls r's callable as timer `id` for deadline `due`, handed over by
    /// its driver at `found_ns` (FireItem::found_ns): lateness and its
    /// stages, the callback's duration -- also the queue's that runs it,
    /// t_current.queue --, the run board, exceptions, counters, probes.
    void call(Record& r, std::uint64_t id, tick_t due, std::int64_t found_ns) noexcept;

    /// In a fork() child: forget threads, arena and callables (see fork.hpp).
    void abandon() noexcept;
    /// The saturation gauges now (runtime.cpp). Any thread.
    Saturation saturation() const noexcept;

    /// A new delivery queue (tickwheel::Queue); carries a reference for the
    /// caller (create_queue and destroy_queue: queue_lifecycle.cpp). Throws
    /// Error(shutting_down), std::bad_alloc, std::system_error.
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
    /// queue or a closed one. (start.cpp: plan_start inlines it.)
    bool queue_slot(const Queue* q, std::uint16_t& slot, std::uint32_t& slot_gen) const noexcept;
    /// Waits until every start (and queue create) registered on a stripe of
    /// `starting` when it was called has left its StartGuard; the heavy
    /// side of the guard's fence comes first, so a start that registers
    /// later sees what the caller stored before (shutting_down, a queue's
    /// claim). Shutdown and destroy_queue. Never from inside a StartGuard.
    /// (Defined in timer_ops.hpp, beside StartGuard: inline in both.)
    inline void wait_for_starts() noexcept;

    /// A manual runtime (Config::manual_clock; manual_clock.cpp): moves its
    /// clocks by `ns` and runs what falls due on this thread, in deadline
    /// order (ties: start order); returns the callbacks run. The caller
    /// checked: manual, not inside a callback of this runtime, not shut down.
    std::size_t advance(std::int64_t ns);
    /// advance()'s answer when a shutdown began before it took advance_mutex.
    static constexpr std::size_t kAdvanceShutDown = static_cast<std::size_t>(-1);

    Runtime* const owner;
    const Config config;
    Clocks clocks;  // the machine's, or a manual runtime's virtual ones
    const TickClock clock;
    const std::uint64_t max_timers;
    const std::uint32_t created_in_epoch;
    // This runtime's number in the process (never reused): names it in a
    // thread's cache of its caller cells (caller_cells.hpp).
    const std::uint64_t uid;
    std::unique_ptr<Dispatcher> dispatcher;
    QueueTable queues;  // declared before the shards, which deliver to them
    std::vector<std::unique_ptr<Shard>> shards;
    Counters counters;
    LatencyHistogram lateness;
    // Lateness by stage (issue 34): deadline -> handed over by the driver,
    // handed over -> the callback's start, and the callback's duration.
    // lateness = driver + wait for every run.
    LatencyHistogram driver_lateness;
    LatencyHistogram wait_lateness;
    LatencyHistogram run_duration;
    // Callbacks in progress, and since when (busy workers, the oldest run).
    RunBoard runs;

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

/// The start probe of a timer `id` started with `o` from the code at
/// `caller` (probes.hpp; start.cpp, batch.cpp: only while a tracer is attached).
[[gnu::cold]] void probe_start(const RuntimeCore& core, const StartOptions& o, std::uint64_t id,
                               const void* caller) noexcept;

}  // namespace tickwheel::rt
