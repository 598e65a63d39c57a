// SPDX-License-Identifier: MIT OR Apache-2.0
// Shard: one hierarchical wheel, its handle table, its inbox and the driver
// thread that owns them.
//
// Who touches the wheel. Only the shard's driver: its thread (or, on a
// manual runtime, the thread that advances) -- the owner of the wheel and
// of every record's wheel links (timer_state.hpp's owner table). No other
// thread ever holds anything the driver needs: callers and workers reach
// the wheel through the inbox (below) and through the callers' cells
// (caller_cells.hpp), both of which the driver takes from without waiting
// for anyone. 1.5 let a caller take a "driver token" and apply its message
// to the wheel itself while the driver was parked; a caller preempted,
// stopped or in a signal handler while it held the token stalled every
// timer of its shard (issue 31). The token is gone; what it bought -- a
// lone caller's start+stop pair that stays on the caller's core -- the
// cells buy without a lock: a thread's newest timers wait in its cell
// until they are due (the driver takes them then) or stopped (the thread
// takes them back and recycles the record at once).
//
// Who may wait for whom (the progress rule; timer_state.hpp has the table):
// the driver never waits for a caller -- not for a lock, a flag, a hazard or
// a message. Where it shares a lock with callers (the inbox's
// out-of-memory reserve, a delivery queue's
// transition mutex) it only tries it, and comes back at its next tick if
// it is held.
//
// The inbox. Other threads reach the wheel through the inbox (inbox.hpp:
// insert / refile earlier / cancel messages), drained in bulk by the
// driver at each pass. The driver sleeps on a futex until the wheel's next
// expiry (or the earliest timer waiting in a caller's cell), or until a
// request that needs an earlier wake-up arrives. While it has housekeeping
// to do -- messages came in its last pass (cancels and far inserts do not
// wake it), boot-time or wall-clock timers whose clock may step, records in
// quarantine -- it sleeps at most kHousekeepingNs; otherwise it sleeps until
// its next deadline however far (a "long sleep"), and the first message
// posted to the inbox wakes it. Messages posted during a pass that are
// still queued when the driver parks stay there: the driver sleeps no later
// than the earliest deadline among them (posted_min_due_). An idle
// runtime's shards therefore do not wake at all, and a stopped timer is
// reclaimed at once (a caller's cell) or within kHousekeepingNs (at once
// after a quiet period); every kCancelWakeEvery-th cancel a thread posts
// also wakes a sleeping driver, so a burst of stops is reclaimed as it goes
// (memory stays flat). The driver's decisions about a timer are
// TimerState's (timer_state.hpp); it hands due timers to the Dispatcher and
// never runs user code.
//
// No lost wake-up. Every message that can move a timer's deadline earlier
// wakes a driver that sleeps past it: a start's Insert and a place in a
// cell by the timer's tick; a reset's Refile by its new tick; an Insert
// posted after a transition (a worker's claim that found the word moved
// later, a one-shot re-armed from its own callback, a DELAY timer's next
// run, a reset of a due one-shot, a cell's eviction) by the deadline the
// word holds AFTER the post (post_and_wake re-reads it with an RMW, so that
// a reset that moved it earlier meanwhile -- whose Refile found the record
// in no list and was dropped -- is either seen by that re-read or
// happened-after the post, and then the driver's drain that took its
// Refile finds the Insert too). A poster that reads the tick the driver
// sleeps until and finds it lowered by the driver meanwhile tries again
// with the new one (a CAS loop: wake_if_sleeping_past).
//
// Expiry is split between the driver and the workers (issue 21). The driver
// only finds what is due: it pops the expired nodes (Wheel::pop_expired_n:
// several lists from both ends at once, their cache misses overlapping),
// and a monotonic one-shot whose word it sees PENDING and due -- one plain
// load, no write -- goes to the dispatcher as a claim item (messages.hpp),
// batched kFireBatch at a time. The workers, stealing from each other
// (dispatcher.hpp, "Lanes"), make each one's transition (TimerState::
// claim_run: PENDING -> RUNNING, judged at the driver's tick, so never
// early), run it and release it. A worker that finds the word moved later
// (a reset) posts an Insert: the wheel stays the driver's alone. Periodic,
// boot-time/wall-clock and queue-bound timers, and a manual advance, keep
// the driver's transition (expire_clocked, the grid re-file, the delivery
// queues' deadline order). The driver advances with
// Wheel::advance_uncounted(): a level-0 slot that comes due joins the
// expired lists whole instead of node by node (one cache miss less per due
// timer on the driver). Before, the driver made every transition (a CAS
// on each record) and the workers a second one: one driver thread per
// shard bounded expiry at ~5-10 M callbacks/s however many workers ran.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/caller_cells.hpp"
#include "runtime/clock.hpp"
#include "runtime/clock_index.hpp"
#include "runtime/delivery_queue.hpp"
#include "runtime/dispatcher.hpp"
#include "runtime/group_index.hpp"
#include "runtime/handle_table.hpp"
#include "runtime/inbox.hpp"
#include "runtime/messages.hpp"
#include "runtime/parker.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::rt {

class Shard {
public:
    /// Upper bound of a driver's sleep while it has housekeeping to do (see
    /// above): reclaims cancelled timers, files far inserts, refreshes
    /// stats and polls the boot-time and wall-clock offsets this often.
    static constexpr std::int64_t kHousekeepingNs = 100'000'000;
    /// Upper bound of a long sleep (keeps tick arithmetic far from overflow).
    static constexpr std::int64_t kMaxSleepNs = 3600'000'000'000;
    static constexpr unsigned kCancelWakeEvery = 4096;
    /// A scan of a caller's cell takes the entries due within this much
    /// (caller_cells.hpp): a cell is scanned about once per this while its
    /// timers come due.
    static constexpr std::int64_t kTakeAheadNs = 100'000'000;
    /// Passes between two prunings of the clocked index's ended entries
    /// (at least; more while it is large: clocked entries / 64).
    static constexpr std::size_t kPruneClockedPasses = 10;
    static constexpr std::size_t kDrainBatch = 512;
    /// slot_reserve: never give memory back (Config::slot_reserve = kKeepAllSlots).
    static constexpr std::size_t kNeverTrim = static_cast<std::size_t>(-1);
    // Giving memory back after a peak (maybe_trim; issue 34). A trim is
    // tried once the shard's records exceed its pending timers plus the
    // reserve by kTrimMinRecords (4 MiB of records), its high-water mark has
    // not moved for kTrimQuietNs and nothing is due within the walk's time
    // (~10 ns per record: it holds the free stack meanwhile); after one that
    // gave back less than kTrimMinRecords, not for kTrimBackoffNs; deferred
    // for a due timer at most kTrimMaxDeferNs.
    static constexpr std::uint64_t kTrimMinRecords = 65536;
    static constexpr std::int64_t kTrimQuietNs = 200'000'000;
    static constexpr std::int64_t kTrimBackoffNs = 2'000'000'000;
    static constexpr std::int64_t kTrimMaxDeferNs = 2'000'000'000;
    static constexpr std::size_t kTrimBusyMessages = 1024;  // drained in a pass: not quiet
    // A thread's take-backs (callers' cells) between two looks at whether
    // its shard's driver should wake to give memory back (take_back_and_recycle).
    static constexpr std::uint32_t kTakeBackWakeEvery = 16384;
    static constexpr std::size_t kFireBatch = Dispatcher::kMaxBatch;

    /// Shard `index`, on `clock`'s ticks, handing due timers to `dispatcher`,
    /// or to their delivery queue in `queues` (timers bound to one).
    /// `clocks`: the runtime's clocks (boot-time and wall-clock timers are
    /// checked against theirs; a manual runtime's shards run no thread).
    /// `name`: the runtime's name (its probes' first argument; it outlives
    /// the shard).
    /// `slot_reserve`: the free records it keeps resident when it gives
    /// memory back after a peak (Config::slot_reserve, resolved;
    /// kKeepAllSlots: never).
    Shard(unsigned index, const TickClock& clock, const Clocks& clocks, Dispatcher& dispatcher,
          const QueueTable& queues, const char* name = "", std::size_t slot_reserve = kNeverTrim);
    ~Shard();
    Shard(const Shard&) = delete;
    Shard& operator=(const Shard&) = delete;

    /// Starts the driver thread (pinned to `cpu` if cpu >= 0).
    void start(int cpu);
    /// Stops the driver thread and joins it. Messages still queued stay
    /// queued (shutdown's sweep takes care of their records).
    void stop_and_join();
    /// In a fork() child: forgets the driver thread (which does not exist
    /// there) and every timer's callable without running it or its release
    /// hook, so that destroying the shard frees only memory.
    void abandon() noexcept;

    HandleTable& table() noexcept { return table_; }
    /// The shard's timers by group (any thread; see group_index.hpp).
    GroupIndex& groups() noexcept { return groups_; }
    /// The shard's boot-time and wall-clock timers (keyed by ClockId), which
    /// it re-files when their clock moves against the monotonic one
    /// (clock_index.hpp: starts add, lock-free; only the driver reads).
    ClockIndex& clocked() noexcept { return clocked_; }

    // ---- a manual runtime (Config::manual_clock): the advancing thread drives
    /// Drains the inbox and moves the wheel to `now`; the timers that fire
    /// are appended to `out` (queue-bound ones are delivered to their queue),
    /// periodic skips judged against `grid_now` (the end of the advance).
    /// Only the thread that advances (the runtime serialises it).
    void manual_step(tick_t now, tick_t grid_now, std::vector<FireItem>& out);
    /// The wheel's next expiry after draining the inbox (kNever if empty).
    tick_t manual_next_expiry();
    const HandleTable& table() const noexcept { return table_; }
    unsigned index() const noexcept { return index_; }

    /// Queues start()'s Insert of a record nobody else knows yet, waking the
    /// driver if it sleeps past `due`. False: no memory to queue it (nothing
    /// queued). Any thread.
    bool try_post_insert(std::uint64_t msg, tick_t due) noexcept;
    // ---- a caller's cell (caller_cells.hpp): a lone caller's start+stop stays on its core
    /// The calling thread's cell in this shard, claimed on first use if
    /// `claim` (a start); nullptr: none (all taken, not claimed yet, a
    /// manual runtime's shard, or a stopped one). `runtime_uid`: the
    /// runtime's, for the thread's cache. Any caller.
    CallerCells::Cell* my_cell(std::uint64_t runtime_uid, bool claim) noexcept {
        if (clocks_.manual() || stopping_.load(std::memory_order_relaxed)) return nullptr;
        return cells_.mine(runtime_uid, index_, claim);
    }
    /// A FREE record kept in the caller's cell (its last stops'), or nullptr.
    Record* allocate_kept(CallerCells::Cell& c, std::uint32_t& index, std::uint32_t& gen) noexcept {
        return cells_.allocate(c, index, gen);
    }
    /// Whether a caller's own core should do its timers' work (place in and
    /// take back from its cell): while the shard's wheel holds fewer than
    /// kCellMaxPending timers. Beyond, a record a stop finds (its side slot,
    /// its cell's entry) is a cold line, and leaving it to the driver, on
    /// another core, pays -- as for 1.5's token (measured there: the
    /// caller's own path 1.1x slower at 400 K and 1 M pending; here, at 1 M
    /// the take-backs cost ~15%). A hint (relaxed). Any caller.
    static constexpr std::size_t kCellMaxPending = 131072;
    bool cells_pay() const noexcept { return pending_.load(std::memory_order_relaxed) < kCellMaxPending; }
    /// A position of the caller's cell `c` for its next start, or
    /// CallerCells::kNoPosition (full): before the start publishes.
    std::uint32_t reserve_in(CallerCells::Cell& c) noexcept { return cells_.reserve(c); }
    void unreserve_in(CallerCells::Cell& c, std::uint32_t pos) noexcept { CallerCells::unreserve(c, pos); }
    /// Places a published PENDING record, due at `due`, at reserved position
    /// `pos` of the caller's cell `c`, and wakes the driver if it sleeps past
    /// `due`. False: not placed (no memory for its side slot): the caller
    /// posts its Insert. The cell's owner.
    bool place(CallerCells::Cell& c, std::uint32_t pos, std::uint32_t index, std::uint32_t gen, tick_t due) noexcept;
    /// After a stop made the record CANCELLED and released it: takes its
    /// entry back from the caller's cell `c` and recycles the record into
    /// the cell (true), or, if the cell no longer holds it (the driver took
    /// it, or it was evicted), does nothing (false: post its Cancel). The
    /// cell's owner.
    bool take_back_and_recycle(CallerCells::Cell& c, Record& r, std::uint32_t gen) noexcept;
    /// Queues a message about a deadline `due` (never lost: see inbox.hpp),
    /// waking the driver if it sleeps past `due`. Any thread.
    void post_and_wake(std::uint64_t msg, tick_t due) noexcept;
    /// Queues a cancel (never lost): no early wake-up, except of a driver in
    /// a long sleep, and every kCancelWakeEvery-th cancel from this thread
    /// wakes a sleeping driver. Any thread.
    void post_cancel(std::uint64_t msg) noexcept;

    /// Recycles the record of a timer that ended off the driver thread (a
    /// worker's or a queue's last run), as HandleTable::recycle; if that
    /// puts it into quarantine (its 10-bit generation wraps: every 1024th
    /// reuse of a slot), wakes the driver from a long sleep, since only the
    /// driver reclaims quarantined records. Any thread. True if quarantined.
    bool recycle_ended(Record& r, FreeChain& freed) noexcept;

    // ---- batches: one block of messages per shard and call, at most one wake-up
    /// try_post_insert() of `n` Inserts as one block (else one by one):
    /// ok[i] tells which were queued; wakes the driver if it sleeps past
    /// `due` (the earliest). Returns how many were queued. Any thread.
    std::size_t try_post_inserts(const std::uint64_t* msgs, std::size_t n, tick_t due, bool* ok) noexcept;
    /// post_and_wake() of `n` messages (never lost), as one block, `due` the
    /// earliest of their deadlines. Any thread.
    void post_bulk_and_wake(const std::uint64_t* msgs, std::size_t n, tick_t due) noexcept;
    /// post_cancel() of `n` cancels (never lost), as one block; a sleeping
    /// driver is woken once if this thread's count of cancels passes a
    /// multiple of kCancelWakeEvery. Any thread.
    void post_cancels(const std::uint64_t* msgs, std::size_t n) noexcept;

    /// Timers pending in this shard: filed in its wheel (as the driver last
    /// stored it) plus those waiting in callers' cells. Any thread.
    std::size_t pending() const noexcept;
    /// After shutdown's sweep (the driver is joined): every timer left in
    /// the wheel was cancelled, so none is pending any more.
    void clear_pending_after_sweep() noexcept {
        pending_.store(0, std::memory_order_relaxed);
        swept_.store(true, std::memory_order_relaxed);  // (the cells' entries were cancelled too)
    }
    std::size_t inbox_size() const noexcept { return inbox_.size_approx(); }
    /// Inbox queues retired and freed after a big backlog (tests).
    std::uint64_t inbox_retired() const noexcept { return inbox_.retired(); }

private:
    void run(int cpu);
    void check_wheel() const noexcept;
    bool drain_inbox();
    /// Applies one message to the wheel (the driver). True if it put the
    /// record into quarantine (a Cancel whose recycle did).
    bool handle(std::uint64_t msg, FreeChain& freed);
    bool expire(tick_t now, std::int64_t now_ns, tick_t grid_now);
    /// A boot-time or wall-clock timer popped PENDING (or a fixed-rate one
    /// popped DISPATCHED or RUNNING, to be skipped or owed): false (and
    /// re-filed) if its own clock has not reached its deadline yet; else
    /// true, with `own_now` its own clock's reading (left as is when the
    /// word alone decides). The caller holds its deadline lock (OwnDeadline).
    bool clocked_due(Record& r, const Extra& x, tick_t now, std::int64_t& own_now) noexcept;
    /// The expiry decision of a boot-time or wall-clock timer popped from
    /// the wheel, under its deadline lock (shard.cpp).
    [[gnu::noinline]] bool expire_clocked(Record& r, std::uint32_t gen, tick_t now, tick_t grid_now,
                                          std::uint64_t period, ExpireStep& out) noexcept;
    /// Re-files the boot-time and wall-clock timers after their clock moved
    /// against the monotonic clock by `moved` (ns per ClockId).
    void reclock() noexcept;
    /// Drops the clocked index's entries of ended timers.
    void prune_clocked() noexcept;
    /// Takes clock `c`'s entries, drops those of ended timers, keeps the
    /// others and calls f(record, index, generation) for each of them.
    template <class F>
    void for_each_clocked(unsigned c, F&& f);
    bool flush_fired();
    bool flush_queued(std::int64_t now_ns);
    /// The expire probe of `r` (generation `gen`, due at tick `due`) found
    /// at a pass at `now_ns` (probes.hpp): out of the driver's loop.
    [[gnu::cold, gnu::noinline]] void probe_expire(const Record& r, std::uint32_t gen, tick_t due,
                                                   std::int64_t now_ns) const noexcept;
    /// The driver, at the end of a pass at `now` (`now_ns`): gives free
    /// records back to the kernel when the shard has far more than it needs
    /// and has been quiet (HandleTable::trim; the constants above). Returns
    /// whether a trim is pending (the driver then keeps its housekeeping
    /// rhythm instead of a long sleep).
    bool maybe_trim(tick_t now, std::int64_t now_ns) noexcept;
    void wake_if_sleeping_past(tick_t due) noexcept;

    /// Files a record taken from a caller's cell (entry `e`) into the wheel
    /// by its word's deadline, if it is still PENDING of the entry's
    /// generation and in no list. The driver.
    void file_taken(std::uint64_t e) noexcept;
    /// The driver, before a pass at tick `now`: scans the callers' cells
    /// whose earliest entry is due, takes every entry due within
    /// kTakeAheadNs and files it.
    void take_due_cells(tick_t now) noexcept;
    /// The earliest due tick among the entries in callers' cells (kNever if
    /// none). The driver, before it parks.
    tick_t cells_min_due() const noexcept;
    /// TW_OWNER_ASSERT: this thread is the shard's driver (the wheel's owner).
    bool on_driver() const noexcept;
    struct DrivingScope;  // marks this thread the shard's driver (shard.cpp)
    /// Wakes a driver that sleeps past `due`, or, if `any_in_long_sleep`
    /// (an inbox post), one in a long sleep (a CAS loop: see there).
    void wake_for(tick_t due, bool any_in_long_sleep) noexcept;
    /// The tick to wake the driver for after posting `msg` about `due`: for
    /// an Insert, the earlier of `due` and its word's deadline re-read
    /// after the post (shard.cpp).
    tick_t due_after_post(std::uint64_t msg, tick_t due) noexcept;
    /// Counts `n` cancels of this thread; wakes a sleeping driver if the
    /// count passed a multiple of kCancelWakeEvery.
    void count_cancels(unsigned n) noexcept;
    /// The tick to file `r` at for deadline `d`: d, or its leeway's
    /// coalesced tick (clock.hpp, coalesce()).
    tick_t file_tick(const Record& r, tick_t d) const noexcept;
    /// Counts `skipped` grid deadlines of a fixed-rate timer: missed (SKIP)
    /// or owed (BURST: its worker runs them back to back).
    void count_skipped(const Record& r, std::uint64_t skipped) noexcept;

    const unsigned index_;
    const char* const name_;  // the runtime's (probes)
    const std::size_t slot_reserve_;
    // maybe_trim()'s state (the driver only): the high-water mark it last
    // saw and since when; no try before trim_not_before_ns_; the first
    // deferral for a due timer.
    std::uint32_t trim_hw_ = 0;
    std::int64_t trim_quiet_since_ns_ = 0;
    std::int64_t trim_not_before_ns_ = 0;
    std::int64_t trim_deferred_since_ns_ = 0;
    std::size_t last_drained_ = 0;  // messages the last drain took (quiet or not)
    const TickClock& clock_;
    const Clocks& clocks_;
    Dispatcher& dispatcher_;
    const QueueTable& queues_;
    HandleTable table_;
    Wheel wheel_;
    Inbox inbox_;
    Parker parker_;
    // The callers' cells (after table_: destroyed before it).
    CallerCells cells_{table_};
    // The inbox's out-of-memory reserve was locked by a poster when the
    // driver drained: it looks again at its next tick (driver only).
    bool reserve_busy_ = false;
    // The inbox retired its queue after a big backlog and has not freed it
    // yet (Inbox::housekeep): the driver keeps passing (driver only).
    bool inbox_pending_ = false;
    // The tick the driver sleeps until, 0 while it is awake (it re-checks the
    // inbox before sleeping), with kLongSleep set during a long sleep. A
    // poster whose deadline is earlier (any poster, in a long sleep) claims
    // the wake-up by CAS-ing this to 0, so one wake-up costs one futex call.
    static constexpr tick_t kLongSleep = tick_t{1} << 63;
    alignas(64) std::atomic<tick_t> sleep_until_{0};
    // The earliest deadline posted to the inbox since the last drain began
    // (posters' wake_if_sleeping_past; reset by drain_inbox): a driver that
    // parks with messages still queued sleeps no later than this.
    std::atomic<tick_t> posted_min_due_{Wheel::kNever};
    std::atomic<bool> stopping_{false};
    std::atomic<bool> swept_{false};  // shutdown's sweep cancelled every timer: none waits in a cell
    std::atomic<std::size_t> pending_{0};
    // Due timers popped from the wheel, not yet handed to the dispatcher
    // (kept here if the dispatcher had no memory for them).
    FireItem fired_[kFireBatch];
    std::size_t fired_n_ = 0;
    std::vector<FireItem>* manual_sink_ = nullptr;  // manual_step(): fired items go here
    // Due timers bound to a delivery queue, with the queue's slot, not yet
    // delivered. The shard holds a QueueTable::Section from the first such
    // transition until all are delivered (across passes if a queue had no
    // memory for them): the slots stay valid meanwhile.
    struct Queued {
        FireItem fire;
        std::uint16_t slot;
    };
    Queued queued_[kFireBatch];
    std::size_t queued_n_ = 0;
    std::optional<QueueTable::Section> section_;
    std::unique_ptr<std::thread> thread_;
    // Kept apart from the hot members above (the wheel, the inbox, the
    // sleep word): only grouped and clocked timers touch these.
    alignas(64) GroupIndex groups_{table_};
    ClockIndex clocked_;
    // The boot-time and wall-clock offsets to the monotonic clock at the last
    // reclock (shard thread only).
    std::int64_t seen_offset_[kClocks] = {};
    // The last re-clock pass found a timer's deadline lock held (its
    // holder, a start or reset of that timer, files it): the next pass (at
    // the next tick) re-files every clocked timer again (shard thread only).
    bool reclock_again_ = false;
};

}  // namespace tickwheel::rt
