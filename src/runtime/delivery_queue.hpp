// SPDX-License-Identifier: MIT OR Apache-2.0
// Delivery queues: due timers handed to a thread of the user's (an epoll
// loop, asyncio, libuv, Node's JavaScript thread) instead of the runtime's
// workers. The public faces are tw_queue (tickwheel.h) and tickwheel::Queue
// (runtime.hpp); this is the machinery.
//
// A timer started with a queue carries the queue's slot number (1..8191)
// in the top bits of its period word (timer_record.hpp, PeriodWord: beside
// the record; its flags say kHasQueue, so other timers never read it).
// When it comes due, its shard does what it does for every timer -- the
// PENDING -> DISPATCHED transition of timer_state.hpp -- and then, instead
// of handing the FireItem to the dispatcher, delivers it to the queue: a
// min-heap by deadline (ties: delivery order) under the queue's mutex, and
// an eventfd that the owner polls. tw_queue_run() pops items on the
// caller's thread and runs each with the workers' own code
// (RuntimeCore::run_one: DISPATCHED -> RUNNING, the callback, finish_run),
// so every rule of the state machine -- stop exactness, stop_sync,
// reset of a due timer, release after the last run, periodic skips -- holds
// unchanged; only the thread differs.
//
// The fd is level-triggered "is anything due": readable iff the queue holds
// a live item -- one whose timer is still DISPATCHED in the due episode the
// item was made for (`live_`, below). The eventfd is written on every
// delivery of a live item (a new edge for EPOLLET users: one per batch of
// newly due timers), and drained (read) when the last live item goes.
//
// Delivery items name their due episode. A bound timer is DISPATCHED at
// most once at a time, and the shard that makes it DISPATCHED delivers the
// item before it can make it DISPATCHED again; so the queue keeps, per
// bound record, the delivery number (`seq`) of the one item that may run
// (`live_`). Every way out of DISPATCHED for a timer bound to an open queue
// is taken under the queue's mutex: a run's begin_run (run()), and a stop's
// or a reset's CAS (try_stop, stop.cpp / reset_record, reset.cpp: they read
// the slot before their CAS and call undue_locked() after it; BoundTransition,
// timer_ops.hpp). So an item whose episode a stop or reset ended is never
// run, even when the timer is due again under the same generation (issue 20,
// race 5): its record's entry is gone or names a later item. deliver() reads
// the timer's word under the same mutex and drops an item whose episode
// ended before it arrived.
//
// Lifetime. A queue is reference-counted: its slot in the runtime's
// QueueTable holds one reference, a tickwheel::Queue the other. Its life:
//
//   OPEN --destroy claimed (claim_destroy; destroy_queue moves the slot's
//        generation on)--> CLAIMED: starts bound to it fail
//        (invalid_argument); destroy_queue waits for the starts in flight
//        (the heavy side of StartGuard's fence: a start compares the
//        queue's slot generation with the slot's inside its StartGuard,
//        without touching the queue), so every start that returned 0 is
//        published before destroy's sweep looks for it
//   OPEN | CLAIMED --close_begin()--> CLOSING: no run starts, waiting
//        runners return shutting_down, items dropped, fd readable for good
//   CLOSING --close_wait()--> CLOSED: no callback of it is in progress and
//        no thread is inside run()
//
// Destroying a queue (RuntimeCore::destroy_queue) claims it, waits for the
// starts, closes it, clears its slot, cancels its timers and then waits
// until no thread is inside a QueueTable::Section -- the span in which a
// shard, a stop or a reset may look a queue up by slot and touch it --
// before dropping the slot's reference. So a slot can be reused at once, no
// thread ever touches a freed queue, and no timer bound to the old queue
// survives into the next queue of that slot (issue 20, race 8). Shutdown
// closes every queue (close_begin) before it waits for anything, then waits
// (close_wait) after the workers (issue 20, race 1).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/counters.hpp"
#include "runtime/fork.hpp"
#include "runtime/messages.hpp"

// Debug and sanitizer builds check the owner rules of the queue binding
// and the delivery items (timer_state.hpp, "Queue binding and delivery
// items: owner rules") where they are written; release builds compile the
// checks out.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TW_QUEUE_OWNER_CHECKS 1
#endif
#endif
#if !defined(TW_QUEUE_OWNER_CHECKS) && (!defined(NDEBUG) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__))
#define TW_QUEUE_OWNER_CHECKS 1
#endif
#if defined(TW_QUEUE_OWNER_CHECKS)
#define TW_OWNER_ASSERT(cond) \
    ((cond) ? (void)0 : ::tickwheel::rt::queue_owner_rule_broken(#cond, __FILE__, __LINE__))
#else
#define TW_OWNER_ASSERT(cond) ((void)0)
#endif

namespace tickwheel::rt {

struct RuntimeCore;
/// Reports a broken owner rule and aborts (TW_OWNER_ASSERT).
[[noreturn]] void queue_owner_rule_broken(const char* what, const char* file, int line) noexcept;

/// Counters of one queue (tickwheel::QueueStats, tw_queue_stats).
struct QueueCounters {
    std::uint64_t due = 0;        // callbacks due and not yet run now
    std::uint64_t delivered = 0;  // due timers handed to the queue
    std::uint64_t ran = 0;        // callbacks run by run()
    std::uint64_t runners = 0;    // threads inside run() now
    LatencyHistogram::Summary signal;  // deadline -> delivered (fd readable)
    LatencyHistogram::Summary run;     // deadline -> callback start
    // Its runs' lateness by stage (issue 34; Stage: driver, wait -- the
    // delivery to the run() that began it --, and the callbacks' duration),
    // in the export buckets.
    LatencyHistogram::Export stage[kStageCount];
};

class DeliveryQueue {
public:
    /// A queue of `core` in slot `slot`. Throws Error(no_memory) when no
    /// eventfd can be had (EMFILE, ENFILE, ENOMEM). Starts with one
    /// reference (the slot's).
    DeliveryQueue(RuntimeCore& core, std::uint16_t slot, std::uint32_t slot_gen = 0);
    ~DeliveryQueue();
    DeliveryQueue(const DeliveryQueue&) = delete;
    DeliveryQueue& operator=(const DeliveryQueue&) = delete;

    void ref() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
    /// Drops a reference; the last one frees the queue.
    void unref() noexcept;

    int fd() const noexcept { return fd_; }
    /// True in a fork() child of the process that created the queue.
    bool forked() const noexcept { return fork_epoch() != epoch_; }
    /// Marks the queue destroyed by its owner; true for the first caller
    /// only (who then runs RuntimeCore::destroy_queue). From then on starts
    /// bound to it fail (plan_start; and inside their guard, by the slot's
    /// generation, which destroy_queue moves on).
    bool claim_destroy() noexcept { return !claimed_.exchange(true, std::memory_order_seq_cst); }

    std::uint16_t slot() const noexcept { return slot_; }
    /// Its slot's generation when it was created (QueueTable::slot_gen):
    /// a start bound to it checks it against the slot's, inside its
    /// StartGuard, without touching the queue (which a C caller's
    /// tw_queue_destroy may free meanwhile).
    std::uint32_t slot_gen() const noexcept { return slot_gen_; }
    /// The runtime, or nullptr once it is gone (detach()).
    RuntimeCore* core() const noexcept;

    // ---- the shard's side ----------------------------------------------------
    /// Takes due items (all bound to this queue) at `now_ns`. False if no
    /// memory could be had for them: nothing taken, the caller retries. A
    /// closed queue drops them (their timers are being cancelled); so is an
    /// item whose timer left DISPATCHED before it arrived (a stop or reset
    /// between the shard's transition and this delivery).
    /// `may_wait`: false for a shard's driver, which never waits for a
    /// caller: if a caller holds the transition mutex (a stop or reset of
    /// a bound timer, the queue's run) after a brief spin, nothing is
    /// delivered and false is returned, as for no memory (the driver keeps
    /// the items and tries again at its next tick). A manual runtime's
    /// advance (a caller itself) waits.
    bool deliver(const FireItem* items, std::size_t n, std::int64_t now_ns, bool may_wait) noexcept;

    // ---- the state machine's side ---------------------------------------------
    /// The mutex under which every transition out of DISPATCHED of a timer
    /// bound to this queue is made (see the top of the file). A stop or a
    /// reset of a bound timer holds it around its CAS, inside a
    /// QueueTable::Section. Never held while user code runs.
    std::mutex& transition_mutex() const noexcept { return mu_; }
    /// A bound timer left DISPATCHED otherwise than by a run of this queue
    /// (a stop, a reset), by a CAS made under transition_mutex(), which the
    /// caller still holds: its delivered item, if any, is no longer live.
    /// (Not yet delivered: deliver() will find the word moved and drop it.)
    void undue_locked(const Record& r) noexcept;

    // ---- the owner's side -----------------------------------------------------
    /// tw_queue_run() (see tickwheel.h): runs up to `max` (> 0) due
    /// callbacks in deadline order on this thread -- a BURST timer's
    /// catch-up runs count one each, and those past `max` stay owed
    /// (requeue_owed) -- and waits up to `timeout_ns` (< 0: no limit; one
    /// that reaches past the steady clock's range: no limit either) while
    /// none is due. Returns how many ran, or -errc::shutting_down if the
    /// queue is closed and none ran. The caller checked the arguments, fork
    /// and re-entry.
    std::int64_t run(std::size_t max, std::int64_t timeout_ns) noexcept;
    /// A run of BURST timer `r` (its word RUNNING, owned by this thread's
    /// run()) reached run()'s `max` with catch-up runs owed: under the
    /// transition mutex, makes it DISPATCHED again (TimerState::yield_run)
    /// with a live item `next` for the next owed deadline, taken from
    /// Extra::owed, so that the next run() goes on where this one stopped.
    /// False (nothing changed: the caller settles the run with finish_run)
    /// if nothing is owed (a reset cleared it), a stop or reset made the
    /// word RUNNING_* first, the queue is closing, or no memory.
    bool requeue_owed(Record& r, Extra& x, const FireItem& next) noexcept;
    /// Records one callback's lateness (deadline it serves -> its start)
    /// and its two stages (RuntimeCore::call), for every callback a run of
    /// this queue makes.
    void record_run_start(std::uint64_t late, std::uint64_t driver, std::uint64_t wait) const noexcept;
    /// Records the duration of a callback that record_run_start() began.
    void record_run_end(std::uint64_t ns) const noexcept;
    /// Whether this thread is inside a callback (or release hook) run by
    /// this queue, at any depth.
    bool running_on_this_thread() const noexcept;

    // ---- lifecycle --------------------------------------------------------------
    /// No run starts any more: wakes the threads waiting in run() (they
    /// return shutting_down), drops the items and makes the fd readable for
    /// good, so a loop polling it calls run() and learns that it is closed.
    /// Does not wait. Idempotent.
    void close_begin() noexcept;
    /// Waits for the callbacks in progress and the threads still inside
    /// run() (unless one is on this thread's stack: would_deadlock is the
    /// caller's check). After close_begin().
    void close_wait() noexcept;
    /// close_begin(), then close_wait().
    void close() noexcept {
        close_begin();
        close_wait();
    }
    /// close(), and forget the runtime (it is being destroyed).
    void detach() noexcept;
    bool closed() const noexcept;
    bool destroyed() const noexcept { return claimed_.load(std::memory_order_acquire); }

    QueueCounters counters() const noexcept;

private:
    struct Item {
        FireItem fire;
        std::uint64_t seq;  // delivery order: ties of `due` run first-delivered first
    };
    struct Later {  // heap order: the earliest deadline on top
        bool operator()(const Item& a, const Item& b) const noexcept {
            return a.fire.due != b.fire.due ? a.fire.due > b.fire.due : a.seq > b.seq;
        }
    };
    /// Owner-rule checks: r's binding names this queue's slot.
    bool bound_here(const Record& r) const noexcept;
    void signal_locked() noexcept;   // write the eventfd (a new edge)
    void drain_fd_locked() noexcept;  // read it back to 0 (not readable)

    RuntimeCore* core_;  // nullptr once detached; guarded by mu_
    const std::uint16_t slot_;
    const std::uint32_t slot_gen_;
    const std::uint32_t epoch_;
    int fd_ = -1;
    std::atomic<std::int32_t> refs_{1};

    mutable std::mutex mu_;
    std::condition_variable cv_;  // runners wait for items; close() for runs in progress
    std::vector<Item> heap_;
    std::uint64_t seq_ = 0;
    // The live item of each bound record that is DISPATCHED with its item
    // delivered here: record -> (its generation, the item's seq). Its size
    // is the number of callbacks due (the fd is readable iff it is not 0).
    // Owner rules: timer_state.hpp, "Queue binding and delivery items".
    struct Live {
        std::uint32_t gen;
        std::uint64_t seq;
    };
    std::unordered_map<const Record*, Live> live_;
    std::uint32_t waiting_ = 0;  // runners asleep in cv_
    std::uint32_t running_ = 0;  // callbacks in progress
    std::uint32_t runners_ = 0;  // threads inside run()
    bool closed_ = false;
    std::atomic<bool> claimed_{false};  // destroy claimed (see the top of the file)
    bool signalled_ = false;     // the eventfd's counter is non-zero
    std::uint64_t delivered_ = 0, ran_ = 0;
    LockedHistogram signal_lateness_;
    mutable LockedHistogram run_lateness_;  // under mu_ (record_run_start)
    mutable LockedExportHistogram stage_[kStageCount];  // under mu_ (record_run_start, record_run_end)
};

/// The runtime's queues by slot, and the sections that make dropping one
/// safe (see the top of the file). Slots are 1..kMaxQueues; 0 is "no queue".
class QueueTable {
public:
    static constexpr std::uint32_t kMaxQueues = PeriodWord::kMaxQueueSlot;  // 8191

    QueueTable() = default;
    ~QueueTable();
    QueueTable(const QueueTable&) = delete;
    QueueTable& operator=(const QueueTable&) = delete;

    /// The queue in `slot`, or nullptr. Inside a Section (the queue then
    /// stays alive until the section ends).
    DeliveryQueue* get(std::uint16_t slot) const noexcept;
    /// A new queue of `core` in a free slot. Throws std::bad_alloc, or
    /// Error(no_memory) when no eventfd can be had or every slot is taken. The returned queue carries a reference for the caller.
    DeliveryQueue* create(RuntimeCore& core);
    /// Clears `slot` (its queue is being destroyed); the caller then waits
    /// with quiesce() before dropping the slot's reference and release_slot().
    void clear(std::uint16_t slot) noexcept;
    /// Makes a cleared slot free for reuse (after quiesce()).
    void release_slot(std::uint16_t slot) noexcept;
    /// The generation of `slot` (a slot handed out at least once): moved on
    /// by retire_slot() when its queue's destroy begins. seq_cst.
    std::uint32_t slot_gen(std::uint16_t slot) const noexcept {
        return gens(slot / kChunk)[slot % kChunk].load(std::memory_order_seq_cst);
    }
    /// Moves the generation of `slot` on: starts bound to its queue that
    /// check from now on fail (destroy_queue, before it waits for starts).
    void retire_slot(std::uint16_t slot) noexcept {
        gens(slot / kChunk)[slot % kChunk].fetch_add(1, std::memory_order_seq_cst);
    }
    /// Waits until every Section that was open when it was called has ended.
    void quiesce() const noexcept;
    /// Calls f(DeliveryQueue&) for every queue in a slot, holding a
    /// reference to it meanwhile (a concurrent destroy cannot free it).
    /// Takes no lock: f may block. Runtime shutdown and destruction.
    template <class F>
    void for_each(F&& f) const {
        const std::uint32_t n = next_.load(std::memory_order_acquire);
        for (std::uint32_t s = 1; s < n; ++s) {
            DeliveryQueue* q;
            {
                Section in(*this);
                q = get(static_cast<std::uint16_t>(s));
                if (q != nullptr) q->ref();
            }
            if (q == nullptr) continue;
            f(*q);
            q->unref();
        }
    }
    /// Clears every slot and drops its reference (the runtime's destructor,
    /// single-threaded as far as the table goes; no lock taken, so it also
    /// serves a fork() child).
    void drop_all() noexcept;
    /// True once a queue was ever created: before that, nobody opens Sections.
    bool in_use() const noexcept { return in_use_.load(std::memory_order_acquire); }

    /// While alive, the queues looked up through get() stay alive. Cost: a
    /// locked add on this thread's own stripe on entry and a store on exit,
    /// and only while in_use(). Sections do not nest.
    class Section {
    public:
        explicit Section(const QueueTable& t) noexcept;
        /// A section on the shared stripe: it may end on another thread
        /// than the one that opened it, and nests with this thread's own
        /// (a shard's delivery section, which a manual runtime's advance
        /// may open on one advancing thread and end on another).
        struct Shared {};
        Section(const QueueTable& t, Shared) noexcept;
        ~Section();
        Section(const Section&) = delete;
        Section& operator=(const Section&) = delete;

    private:
        std::atomic<std::uint64_t>* cell_ = nullptr;
        bool shared_ = false;
    };

private:
    static constexpr std::uint32_t kChunk = 256;
    std::atomic<DeliveryQueue*>* chunk(std::uint32_t c) const noexcept {
        return chunks_[c].load(std::memory_order_acquire);
    }
    std::atomic<std::uint32_t>* gens(std::uint32_t c) const noexcept {
        return gen_chunks_[c].load(std::memory_order_acquire);
    }
    // slot s lives in chunks_[s / kChunk][s % kChunk], its generation in
    // gen_chunks_ likewise; chunks are made on first use and never freed
    // before the table.
    std::atomic<std::atomic<DeliveryQueue*>*> chunks_[kMaxQueues / kChunk + 1] = {};
    std::atomic<std::atomic<std::uint32_t>*> gen_chunks_[kMaxQueues / kChunk + 1] = {};
    std::mutex mu_;  // create/release_slot/all: not on any hot path
    std::vector<std::uint16_t> free_;
    std::atomic<std::uint32_t> next_{1};  // slots below it were handed out once
    std::atomic<bool> in_use_{false};
    // Per stripe (counters.hpp's leases): a leased stripe counts sections
    // entered + left (odd: inside; only its thread writes it); the shared
    // stripe counts the sections open on it.
    struct alignas(64) Cell {
        std::atomic<std::uint64_t> v{0};
    };
    mutable Cell sections_[kStripes];
};

}  // namespace tickwheel::rt
