// SPDX-License-Identifier: MIT OR Apache-2.0
// Shard: one hierarchical wheel, its handle table, its inbox and the driver
// thread that owns them.
//
// The driver token. Only the token's holder touches the wheel and the
// records' wheel links (timer_state.hpp's owner table): the driver thread
// during a pass, or a caller -- a thread that starts, stops or resets a
// timer, or a worker re-arming one -- while the driver is parked. The
// driver takes the token before each pass (take_token_as_driver: it says
// it wants it, so callers stop taking it, and waits for a holder) and gives
// it back right before it parks, after it stored the tick it sleeps until.
// A caller whose message is an Insert, a Refile or a Cancel takes the free
// token with one CAS (try_take_token; also only while the wheel holds
// fewer than kDirectMaxPending timers), drains what others posted
// meanwhile, applies its own message on its own core (handle(), as the
// driver would), gives the token back, and wakes the driver only if it
// filed a deadline before the tick the driver sleeps until (or put a record
// into quarantine during a long sleep): a lone caller touches only lines
// its own core holds, and a stopped record is recycled at once. Contended
// (the driver in a pass, or another caller holding it) it posts to the
// inbox as below. A manual runtime's shards never give the token out (no
// driver thread: the advancing thread drives), nor does a stopped shard.
// The races of the handoff are forced in tests/shard_token_test.cpp.
// A caller's start of a common timer (a monotonic one-shot: Runtime's
// start_plain), when the shard has a spare record, takes the token before
// its record: take_token_and_record() pops one of the spare records --
// those the token holders' stops freed (HandleTable::kSpareMax, at most
// 64): plain loads and stores, the token orders its holders; a fresh
// record (maybe a new chunk: an mmap) is never taken under the token. So a
// lone caller's start+stop pair touches no line another core writes and
// makes no locked instruction but the token's CASes and the stop's word
// CAS (measured: 1 K pending, C ABI, 103 -> 73 ns a pair;
// docs/site/design/performance.md).
//
// The inbox. Other threads reach the wheel through the inbox (inbox.hpp:
// insert / refile earlier / cancel messages), drained in bulk by the
// driver at each pass and by a caller that takes the token. The driver
// sleeps on a futex until the wheel's next expiry, or until a request that
// needs an earlier wake-up arrives. While it has housekeeping to do --
// messages came in its last pass (cancels and far inserts do not wake it),
// boot-time or wall-clock timers whose clock may step, records in
// quarantine -- it sleeps at most kHousekeepingNs; otherwise it sleeps until
// its next deadline however far (a "long sleep"), and the first message
// posted to the inbox wakes it. Messages posted during a pass that are
// still queued when the driver parks stay there for the next token holder:
// the driver sleeps no later than the earliest deadline among them
// (posted_min_due_). An idle runtime's shards therefore do not wake at
// all, and a stopped timer is reclaimed at once (the token) or within
// kHousekeepingNs (at once after a quiet period); every kCancelWakeEvery-th
// cancel a thread posts also wakes a sleeping driver, so a burst of stops
// is reclaimed as it goes (memory stays flat). The driver's decisions about
// a timer are TimerState's (timer_state.hpp); it hands due timers to the
// Dispatcher and never runs user code, nor does a caller holding the token.
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
// (a reset) posts an Insert: the wheel stays the token holder's alone. Periodic,
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

#include "runtime/clock.hpp"
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
    /// Passes between two prunings of the clocked index's ended entries
    /// (at least; more while it is large: clocked entries / 64).
    static constexpr std::size_t kPruneClockedPasses = 10;
    static constexpr std::size_t kDrainBatch = 512;
    static constexpr std::size_t kFireBatch = Dispatcher::kMaxBatch;
    /// A caller applies its message itself (the driver token) only while the
    /// shard's wheel holds fewer timers than this (8 MiB of records): beyond,
    /// the records its unlink and insert touch (the neighbours in a slot's
    /// list) are cold, and leaving them to the driver, on another core,
    /// pays. Below, the caller's own core is as fast or much faster: the
    /// posted path depends on the machine's state, the caller's barely
    /// (measured, C ABI start+stop pairs on 2 vCPUs, interleaved: at 100 K
    /// pending 90-150 ns applied by the caller, posted 102 ns in some
    /// minutes and 230-237 ns in others; at 200 K equal, at 400 K and 1 M
    /// the caller 1.1x slower; docs/site/design/performance.md).
    static constexpr std::size_t kDirectMaxPending = 131072;

    /// Shard `index`, on `clock`'s ticks, handing due timers to `dispatcher`,
    /// or to their delivery queue in `queues` (timers bound to one).
    /// `clocks`: the runtime's clocks (boot-time and wall-clock timers are
    /// checked against theirs; a manual runtime's shards run no thread).
    Shard(unsigned index, const TickClock& clock, const Clocks& clocks, Dispatcher& dispatcher,
          const QueueTable& queues);
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
    /// it re-files when their clock moves against the monotonic one.
    GroupIndex& clocked() noexcept { return clocked_; }

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
    /// A caller's start with the token free (try_take_token()) and a spare
    /// record (HandleTable::allocate_spare: the one this thread's last stop
    /// freed, most likely, its line still in this core's cache): takes the
    /// token and the record, and returns the record with the token held:
    /// the caller publishes it and files it with file_with_token(), which
    /// gives the token back. nullptr (nothing taken, the token not held) if
    /// the token is not free or there is no spare: the caller allocates
    /// and posts as usual (a new record may need a fresh chunk -- an mmap
    /// and 2 MiB of first touches -- which is never done under the token,
    /// for the driver may be waiting for it).
    Record* take_token_and_record(std::uint32_t& index, std::uint32_t& gen) noexcept {
        if (table_.spares_hint() == 0 || test_hooks::fail_inbox_posts.load(std::memory_order_relaxed) != 0 ||
            !try_take_token())
            return nullptr;
        Record* r = table_.allocate_spare(index, gen);
        if (r == nullptr) [[unlikely]]
            token_.store(0, std::memory_order_release);  // (taken meanwhile: the hint was stale)
        return r;
    }
    /// Files the record take_token_and_record() gave (published: `msg` its
    /// Insert, `due` its tick) and gives the token back (apply_with_token()).
    void file_with_token(std::uint64_t msg, tick_t due) noexcept { apply_with_token(msg, due); }
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
    /// driver reclaims quarantined records. Any thread.
    void recycle_ended(Record& r, FreeChain& freed) noexcept;

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

    std::size_t pending() const noexcept { return pending_.load(std::memory_order_relaxed); }
    /// After shutdown's sweep (the driver is joined): every timer left in
    /// the wheel was cancelled, so none is pending any more.
    void clear_pending_after_sweep() noexcept { pending_.store(0, std::memory_order_relaxed); }
    std::size_t inbox_size() const noexcept { return inbox_.size_approx(); }

private:
    void run(int cpu);
    void check_wheel() const noexcept;
    bool drain_inbox();
    /// Applies one message to the wheel (the token holder). True if it put
    /// the record into quarantine (a Cancel whose recycle did).
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
    void wake_if_sleeping_past(tick_t due) noexcept;

    // ---- the driver token (see the top comment) ----
    /// A caller's try: takes the token if it is free, the driver does not
    /// want it, and the wheel is small enough (kDirectMaxPending): one CAS.
    /// Any thread but the driver.
    bool try_take_token() noexcept {
        std::uint32_t v = 0;
        return token_.load(std::memory_order_relaxed) == 0 && !driver_wants_.load(std::memory_order_relaxed) &&
               pending_.load(std::memory_order_relaxed) < kDirectMaxPending &&
               token_.compare_exchange_strong(v, 1, std::memory_order_acquire, std::memory_order_relaxed);
    }
    /// The driver, before a pass: takes the token, waiting for a caller that
    /// holds it (it marks its want first, so no further caller takes it).
    void take_token_as_driver() noexcept;
    /// With the token (try_take_token()): applies message `msg` to the wheel
    /// on this thread, gives the token back, and wakes the driver if `due`
    /// (an Insert's or a Refile's tick; kNever for a Cancel) is before the
    /// tick it sleeps until, or if the record went into quarantine while
    /// it sleeps long.
    void apply_with_token(std::uint64_t msg, tick_t due) noexcept;
    /// TW_OWNER_ASSERT: this thread holds the token (the wheel's owner).
    bool token_held() const noexcept { return token_.load(std::memory_order_relaxed) != 0; }
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
    const TickClock& clock_;
    const Clocks& clocks_;
    Dispatcher& dispatcher_;
    const QueueTable& queues_;
    HandleTable table_;
    Wheel wheel_;
    Inbox inbox_;
    Parker parker_;
    // The tick the driver sleeps until, 0 while it is awake (it re-checks the
    // inbox before sleeping), with kLongSleep set during a long sleep. A
    // poster whose deadline is earlier (any poster, in a long sleep) claims
    // the wake-up by CAS-ing this to 0, so one wake-up costs one futex call.
    static constexpr tick_t kLongSleep = tick_t{1} << 63;
    alignas(64) std::atomic<tick_t> sleep_until_{0};
    // The driver token: who may touch the wheel and the records' wheel links
    // now. 1: held -- by the driver during a pass, or by a caller applying
    // its message while the driver is parked; 0: free (the driver is parked).
    // Held from construction until the driver's first park, and for good
    // once the driver leaves its loop: a manual runtime's shards (no driver;
    // the advancing thread drives) and a stopped one's take the inbox path.
    // driver_wants_: the driver, awake, waits for a caller to give it back;
    // callers do not take it then (a hint: the CAS decides who holds it).
    std::atomic<std::uint32_t> token_{1};
    std::atomic<bool> driver_wants_{false};
    // Set by every post (after it), cleared by the drainer (before it
    // drains): a caller that takes the token drains the inbox first only
    // when this says someone posted (the token was held). A hint: the driver
    // drains on every pass regardless.
    std::atomic<bool> inbox_dirty_{false};
    // The earliest deadline posted to the inbox since the last drain began
    // (posters' wake_if_sleeping_past; reset by drain_inbox): a driver that
    // parks with messages still queued sleeps no later than this.
    std::atomic<tick_t> posted_min_due_{Wheel::kNever};
    std::atomic<bool> stopping_{false};
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
    GroupIndex clocked_{table_};
    // The boot-time and wall-clock offsets to the monotonic clock at the last
    // reclock (shard thread only).
    std::int64_t seen_offset_[kClocks] = {};
    // The last re-clock pass found a timer's deadline lock held: the next
    // pass re-files every clocked timer again (shard thread only).
    bool reclock_again_ = false;
};

}  // namespace tickwheel::rt
