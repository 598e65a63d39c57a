// SPDX-License-Identifier: MIT OR Apache-2.0
// The shard's driver thread: drain the inbox, advance the wheel, decide what
// fires (TimerState::expire), hand it to the dispatcher, sleep until the
// next expiry.
#include "runtime/shard.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "runtime/hazard.hpp"
#include "runtime/probes.hpp"
#include "runtime/stage_trace.hpp"
#include "runtime/test_hooks.hpp"
#include "runtime/timer_state.hpp"

namespace tickwheel::rt {

namespace {
/// A poster's half of the barrier that pairs with the driver's before a long
/// sleep (hazard_barrier(): membarrier where available, else a full fence).
inline void poster_fence() noexcept {
    if (hazard_detail::light_asymmetric())
        std::atomic_signal_fence(std::memory_order_seq_cst);
    else
        std::atomic_thread_fence(std::memory_order_seq_cst);
}
}  // namespace

namespace {
// The shard this thread drives now (its driver thread, or a manual
// runtime's advancing thread inside manual_step()): TW_OWNER_ASSERT's
// notion of the wheel's owner.
[[gnu::tls_model("initial-exec")]] constinit thread_local const Shard* t_driving = nullptr;
}  // namespace

struct Shard::DrivingScope {
    const Shard* saved;
    explicit DrivingScope(const Shard* s) noexcept : saved(t_driving) { t_driving = s; }
    ~DrivingScope() { t_driving = saved; }
    DrivingScope(const DrivingScope&) = delete;
    DrivingScope& operator=(const DrivingScope&) = delete;
};

bool Shard::on_driver() const noexcept { return t_driving == this; }

Shard::Shard(unsigned index, const TickClock& clock, const Clocks& clocks, Dispatcher& dispatcher,
             const QueueTable& queues, const char* name, std::size_t slot_reserve)
    : index_(index),
      name_(name),
      slot_reserve_(slot_reserve),
      clock_(clock),
      clocks_(clocks),
      dispatcher_(dispatcher),
      queues_(queues),
      wheel_(clock.now_tick(clocks.mono())) {
    const std::int64_t mono = clocks.mono();
    for (unsigned c = 1; c < kClocks; ++c) seen_offset_[c] = clocks.now(static_cast<ClockId>(c)) - mono;
    // Records grew (a burst, perhaps all in callers' cells, which post
    // nothing): a driver in a long sleep wakes for one pass, whose
    // maybe_trim() then keeps it on the housekeeping cadence until it may
    // give the surplus back (issue 34). Once per 2 MiB chunk.
    // Only once there may be enough to give back (no extra pass for a
    // small runtime's first chunks).
    table_.on_grow(
        [](void* self) noexcept {
            Shard& s = *static_cast<Shard*>(self);
            if (s.slot_reserve_ != kNeverTrim &&
                s.table_.resident_slots() + HandleTable::kChunkSize >= s.slot_reserve_ + kTrimMinRecords)
                s.wake_for(0, true);
        },
        this);
}

Shard::~Shard() { stop_and_join(); }

void Shard::start(int cpu) {
    thread_ = std::make_unique<std::thread>([this, cpu] { run(cpu); });
}

void Shard::stop_and_join() {
    if (!thread_ || !thread_->joinable()) return;
    stopping_.store(true, std::memory_order_seq_cst);
    parker_.unpark();
    thread_->join();
}

void Shard::abandon() noexcept {
    (void)thread_.release();  // the parent's thread: not ours to join or detach
    const std::uint32_t hw = table_.high_water();
    for (std::uint32_t i = 0; i < hw; ++i)
        if (Record* r = table_.find(i)) r->forget_callable();
}

void Shard::wake_if_sleeping_past(tick_t due) noexcept {
    // Posted while the driver was awake: if it finds the message still
    // queued when it parks, it sleeps no later than the earliest such
    // deadline (run()). Always an RMW, so that the driver's reset (drain
    // _inbox) either precedes it or makes the message visible to its drain.
    tick_t m = posted_min_due_.load(std::memory_order_relaxed);
    while (!posted_min_due_.compare_exchange_weak(m, std::min(m, due), std::memory_order_release,
                                                  std::memory_order_relaxed)) {
    }
    // Pairs with the fence in run(): either the driver sees the message (or
    // the deadline above) before it sleeps, or we see the tick it sleeps until.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    wake_for(due, true);
}

void Shard::wake_for(tick_t due, bool any_in_long_sleep) noexcept {
    // The driver may lower the tick it sleeps until after we read it (it
    // found a queued message or a cell's entry due earlier): a failed CAS
    // looks again at the value it found (issue 31, S1: a single CAS that
    // lost to such a lowering woke nobody, and the timer waited for the
    // driver's next wake-up, up to kHousekeepingNs).
    // A message to the inbox wakes a driver in a long sleep whatever its
    // tick (it drains it now, then sleeps at most kHousekeepingNs while
    // messages keep coming: they are never left queued for hours).
    tick_t target = sleep_until_.load(std::memory_order_relaxed);
    while (due < (target & ~kLongSleep) || (any_in_long_sleep && (target & kLongSleep) != 0)) {
        test_hooks::window(nullptr, 'v');  // read the tick the driver sleeps until; before the CAS
        if (sleep_until_.compare_exchange_weak(target, 0, std::memory_order_relaxed, std::memory_order_relaxed)) {
            parker_.unpark();
            return;
        }
    }
}

tick_t Shard::due_after_post(std::uint64_t msg, tick_t due) noexcept {
    if (Msg::type(msg) != MsgType::Insert) return due;
    // An Insert of a record whose word a reset may have moved earlier since
    // its poster read it (a worker's claim that found it later, a one-shot
    // re-armed from its callback, a reset of a due one-shot, a cell's
    // eviction): that reset's Refile found the record in no list and was
    // dropped, and its wake-up may have been spent on that drain. The
    // word's deadline, read by an RMW after our post, is either the reset's
    // (we wake for it) or older in the word's modification order -- then the
    // reset's CAS read our RMW's value and happens after our post, and the
    // drain that takes its Refile finds our Insert too. (issue 31, bug 3)
    Record* r = table_.find(Msg::index(msg));
    if (r == nullptr) return due;
    const Word w = TimerState::load_latest(*r);
    if (Ctl::gen10(w) == (Msg::gen(msg) & Ctl::kGenMask) && Ctl::state(w) == State::Pending &&
        Ctl::deadline(w) < due)
        return Ctl::deadline(w);
    return due;
}

bool Shard::try_post_insert(std::uint64_t msg, tick_t due) noexcept {
    // A start's Insert: its record is new, nobody else knows its id yet.
    if (!inbox_.try_post(msg)) return false;
    wake_if_sleeping_past(due);
    return true;
}

void Shard::post_and_wake(std::uint64_t msg, tick_t due) noexcept {
    inbox_.post(msg, [this] { parker_.unpark(); });
    wake_if_sleeping_past(due_after_post(msg, due));
}

void Shard::post_cancel(std::uint64_t msg) noexcept {
    inbox_.post(msg, [this] { parker_.unpark(); });
    count_cancels(1);
}

bool Shard::place(CallerCells::Cell& c, std::uint32_t pos, std::uint32_t index, std::uint32_t gen,
                  tick_t due) noexcept {
    if (!cells_.place(c, pos, index, gen, due)) return false;
    test_hooks::window(nullptr, 'l');  // a timer placed in a cell, the driver not yet told
    // Pairs with the driver's fence before it reads the cells (run()):
    // either it sees our entry (owner_min) before it sleeps, or we see the
    // tick it sleeps until.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    wake_for(due, false);  // (a cell's entry needs no drain: only its tick counts)
    return true;
}

bool Shard::take_back_and_recycle(CallerCells::Cell& c, Record& r, std::uint32_t gen) noexcept {
    const std::uint32_t index = HandleTable::index_of(&r);
    if (!cells_.take_back(c, index, gen)) return false;
    // Never seen by the driver: in no list of the wheel, no message about it
    // queued (an eviction's Insert would have taken the entry out first).
    FreeChain freed(table_);
    if (recycle_ended(r, freed)) return true;  // quarantined (a generation wrap): the driver reclaims it
    (void)freed.keep_in(cells_, c);  // kept for this thread's next start, else to the free stack
    // A take-back posts nothing: after a burst that a cell held, a driver in
    // a long sleep would never look at the records freed. Every
    // kTakeBackWakeEvery take-backs of this thread, if the table holds
    // enough free records for a trim, it is woken for a pass (issue 34).
    [[gnu::tls_model("initial-exec")]] constinit thread_local std::uint32_t taken_back = 0;
    if (++taken_back >= kTakeBackWakeEvery) [[unlikely]] {
        taken_back = 0;
        // (Only with a surplus to give back: a steady churn beside many
        // pending timers wakes nobody.)
        if (slot_reserve_ != kNeverTrim && table_.resident_slots() >= pending() + slot_reserve_ + kTrimMinRecords)
            wake_for(0, true);
    }
    return true;
}

void Shard::count_cancels(unsigned n) noexcept {
    [[gnu::tls_model("initial-exec")]] constinit thread_local unsigned cancels = 0;  // (a plain load: see pick_shard)
    const unsigned before = cancels;
    cancels += n;
    if (before / kCancelWakeEvery != cancels / kCancelWakeEvery) {
        // A burst of stops: the shard reclaims them now, not at its next pass.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        tick_t target = sleep_until_.load(std::memory_order_relaxed);
        if (target != 0 && sleep_until_.compare_exchange_strong(target, 0, std::memory_order_relaxed))
            parker_.unpark();
        return;
    }
    // A shard in a long sleep (kLongSleep) is woken by the first message:
    // it passes again within kHousekeepingNs while messages keep coming.
    // The barrier pairing with the driver's before it sleeps long is
    // asymmetric (see run()): here only the compiler's, when membarrier is
    // available.
    poster_fence();
    tick_t target = sleep_until_.load(std::memory_order_relaxed);
    if ((target & kLongSleep) != 0 && sleep_until_.compare_exchange_strong(target, 0, std::memory_order_relaxed))
        parker_.unpark();
}

bool Shard::recycle_ended(Record& r, FreeChain& freed) noexcept {
    if (!table_.recycle(r, freed)) return false;  // (quarantined: a generation wrap, or an own-deadline lock held)
    std::atomic_thread_fence(std::memory_order_seq_cst);  // rare: pairs with either of the driver's barriers
    tick_t target = sleep_until_.load(std::memory_order_relaxed);
    if ((target & kLongSleep) != 0 && sleep_until_.compare_exchange_strong(target, 0, std::memory_order_relaxed))
        parker_.unpark();
    return true;
}

std::size_t Shard::try_post_inserts(const std::uint64_t* msgs, std::size_t n, tick_t due, bool* ok) noexcept {
    std::size_t queued = n;
    if (inbox_.try_post_bulk(msgs, n)) {
        std::fill(ok, ok + n, true);
    } else {
        queued = 0;
        for (std::size_t i = 0; i < n; ++i) queued += (ok[i] = inbox_.try_post(msgs[i]));
    }
    if (queued != 0) wake_if_sleeping_past(due);
    return queued;
}

void Shard::post_bulk_and_wake(const std::uint64_t* msgs, std::size_t n, tick_t due) noexcept {
    inbox_.post_bulk(msgs, n, [this] { parker_.unpark(); });
    for (std::size_t i = 0; i < n; ++i) due = std::min(due, due_after_post(msgs[i], due));  // (Inserts: see there)
    wake_if_sleeping_past(due);
}

void Shard::post_cancels(const std::uint64_t* msgs, std::size_t n) noexcept {
    inbox_.post_bulk(msgs, n, [this] { parker_.unpark(); });
    count_cancels(static_cast<unsigned>(n));
}

tick_t Shard::file_tick(const Record& r, tick_t d) const noexcept {
    if ((r.flags() & Record::kHasLeeway) == 0) return d;
    return coalesce(d, HandleTable::extra_of(r).leeway_ticks(clock_.resolution_ns()));
}

void Shard::count_skipped(const Record& r, std::uint64_t skipped) noexcept {
    if (skipped == 0 || !r.has_extra()) return;  // every periodic timer has an Extra
    Extra& x = table_.extra(HandleTable::index_of(&r));
    owner::shard_live(r, "Extra::missed/owed");
    (r.policy() == Policy::Burst ? x.owed : x.missed).fetch_add(skipped, std::memory_order_relaxed);
}

bool Shard::handle(std::uint64_t msg, FreeChain& freed) {
    TW_OWNER_ASSERT(on_driver());  // the wheel's owner: the driver
    Record* r = table_.find(Msg::index(msg));
    if (r == nullptr || r->gen() != Msg::gen(msg)) return false;  // stale: slot recycled since
    const Word c = TimerState::load(*r);
    const State s = Ctl::state(c);
    switch (Msg::type(msg)) {
        case MsgType::Insert:
            if (s == State::Pending && !r->linked()) wheel_.insert(r, file_tick(*r, Ctl::deadline(c)));
            break;
        case MsgType::Refile:
            // Only earlier deadlines are posted; later ones are re-filed
            // lazily when the old slot comes due (see TimerState::expire).
            if (r->linked() && (s == State::Pending || s == State::Dispatched || s == State::Running)) {
                const tick_t at = file_tick(*r, Ctl::deadline(c));
                if (at < r->deadline()) wheel_.rearm(r, at);
            } else if (s == State::Pending && !r->linked()) {
                // In no list: waiting in a caller's cell (by a due tick the
                // reset just made too late: take it now, it is filed at the
                // word's deadline), or an Insert of it is on its way (its
                // poster wakes us for the word's deadline: due_after_post).
                const std::uint64_t e = CallerCells::entry(Msg::index(msg), Msg::gen(msg));
                if (cells_.take_at(table_.cell_slot(Msg::index(msg)), e)) file_taken(e);
            }
            break;
        case MsgType::Cancel:
            if (s == State::Cancelled) {
                wheel_.remove(r);
                // Stopped by a thread other than its cell's owner: its entry
                // goes before the record does (a stale one would only be
                // dropped, but it would hold a position until it is due).
                if (!r->linked())
                    (void)cells_.take_at(table_.cell_slot(Msg::index(msg)), CallerCells::entry(Msg::index(msg), Msg::gen(msg)));
                return table_.recycle(*r, freed);  // (quarantined: reclaimed by the driver's next pass)
            }
            break;
    }
    return false;
}

bool Shard::drain_inbox() {
    // (Posts after this set it again.)
    posted_min_due_.exchange(Wheel::kNever, std::memory_order_acq_rel);
    std::uint64_t msgs[kDrainBatch];
    bool any = false;
    reserve_busy_ = false;
    std::size_t drained = 0;
    for (;;) {
        bool busy = false;
        const std::size_t n = inbox_.drain(msgs, kDrainBatch, busy);
        reserve_busy_ |= busy;  // a poster holds the reserve's lock: we look again next tick
        FreeChain freed(table_);  // the bulk's cancelled slots, freed with one CAS
        for (std::size_t i = 0; i < n; ++i) handle(msgs[i], freed);
        freed.flush();
        any |= n != 0;
        drained += n;
        if (n < kDrainBatch) break;
    }
    // After a big backlog the inbox's queue is retired and freed, memory and
    // all (inbox.hpp, "Memory after a peak"; issue 34).
    inbox_pending_ = inbox_.housekeep(drained);
    last_drained_ = drained;
    return any;
}

bool Shard::flush_fired() {
    if (fired_n_ == 0) return true;
    if (manual_sink_ != nullptr) {
        manual_sink_->insert(manual_sink_->end(), fired_, fired_ + fired_n_);
        fired_n_ = 0;
        return true;
    }
    // The gauge of pending timers (stats, metrics) first: once a worker can
    // run these, none of them is counted pending any more (the hand-over
    // orders this store before their callbacks; stored after the pass
    // instead, a reader that saw a callback finish could still read it).
    pending_.store(wheel_.size(), std::memory_order_relaxed);
    test_hooks::window(nullptr, 'h');  // a driver mid-hand-off: its items popped, not handed over yet
    // The end of their "driver" stage (issue 34): handed over now.
    const std::int64_t found_ns = clocks_.mono();
    for (std::size_t i = 0; i < fired_n_; ++i) fired_[i].found_ns = found_ns;
    if (!dispatcher_.submit(fired_, fired_n_)) return false;  // no memory: keep them, retry soon
    TW_PROBE(dispatch, name_, index_, fired_n_, found_ns);
    fired_n_ = 0;
    test_hooks::window(nullptr, 'H');  // handed over: the workers may be running them
    return true;
}

// Delivers the queue-bound due timers to their queues, grouped by queue (one
// eventfd edge per queue and pass). False if a queue had no memory for them:
// they stay here, and so does the section, for the next pass.
bool Shard::flush_queued(std::int64_t now_ns) {
    if (queued_n_ != 0) {
        pending_.store(wheel_.size(), std::memory_order_relaxed);  // before a queue can run them (flush_fired)
        std::stable_sort(queued_, queued_ + queued_n_,
                         [](const Queued& a, const Queued& b) { return a.slot < b.slot; });
        // The end of their "driver" stage (issue 34): delivered now; their
        // "wait" lasts until their queue's run() begins them.
        const std::int64_t found_ns = clocks_.mono();
        for (std::size_t k = 0; k < queued_n_; ++k) queued_[k].fire.found_ns = found_ns;
        FireItem group[kFireBatch];
        std::size_t i = 0;
        while (i < queued_n_) {
            std::size_t j = i, n = 0;
            for (; j < queued_n_ && queued_[j].slot == queued_[i].slot; ++j) group[n++] = queued_[j].fire;
            // A cleared slot: the queue is being destroyed and cancels these.
            DeliveryQueue* q = queues_.get(queued_[i].slot);
            if (q != nullptr && !q->deliver(group, n, now_ns, manual_sink_ != nullptr)) {
                std::copy(queued_ + i, queued_ + queued_n_, queued_);
                queued_n_ -= i;
                return false;
            }
            TW_PROBE(queue_deliver, name_, queued_[i].slot, n, found_ns);
            i = j;
        }
        queued_n_ = 0;
    }
    section_.reset();
    return true;
}

// Pops every expired node and lets TimerState decide, with one CAS on its
// word, whether it fires, moves (lazy re-arm), skips a period, or was
// stopped. False if due timers could not be handed over (no memory): the
// rest stay on the wheel's expired list for the next pass.
bool Shard::clocked_due(Record& r, const Extra& x, tick_t now, std::int64_t& own_now) noexcept {
    const Word c = TimerState::load(r);
    const State st = Ctl::state(c);
    // PENDING; or a fixed-rate timer whose run is in progress or not begun
    // yet (the word skips the grid deadline, or BURST owes it): judged on
    // its own clock too. The others: the word decides (drop).
    if (st != State::Pending && !(r.fixed_rate() && (st == State::Dispatched || st == State::Running))) return true;
    const ClockId id = r.clock();
    // "Never early" is judged on its own clock.
    const std::int64_t own_deadline = x.deadline_ns.load(std::memory_order_relaxed);
    own_now = clocks_.now(id);
    if (own_now >= own_deadline) return true;
    // Its clock is behind (set back, or not yet caught up): file it where the
    // clock will reach the deadline, by today's offset.
    const std::int64_t mono_now = clocks_.mono();
    const tick_t at = std::max(clock_.deadline_tick(own_deadline - (own_now - mono_now)), now + 1);
    wheel_.insert(&r, file_tick(r, at));
    return false;
}

template <class F>
void Shard::for_each_clocked(unsigned c, F&& f) {
    // The driver's own entries (clock_index.hpp: starts push, lock-free; we
    // take what they pushed and keep it): nothing here waits for a caller.
    std::vector<std::uint64_t>& v = clocked_.entries(c);
    std::size_t keep = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        const std::uint64_t e = v[i];
        const std::uint32_t index = ClockIndex::index_of(e), gen = ClockIndex::gen_of(e);
        Record* r = table_.find(index);
        if (r == nullptr || r->gen() != gen) continue;  // ended: drop the entry (owner: the shard)
        v[keep++] = e;  // still ours: keep it indexed
        f(r, index, gen);
    }
    v.resize(keep);
    clocked_.settled();
}

void Shard::reclock() noexcept {
    const std::int64_t mono = clocks_.mono();
    bool moved = false;
    std::int64_t offset[kClocks] = {};
    for (unsigned c = 1; c < kClocks; ++c) {
        offset[c] = clocks_.now(static_cast<ClockId>(c)) - mono;
        const std::int64_t d = offset[c] - seen_offset_[c];
        if (d >= static_cast<std::int64_t>(clock_.resolution_ns()) || -d >= static_cast<std::int64_t>(clock_.resolution_ns()))
            moved = true;
    }
    // Also again after a pass that found a timer's deadline lock held (a
    // start, a reset or a run settling it): it is re-filed now.
    if (!moved && !reclock_again_) return;
    reclock_again_ = false;
    for (unsigned c = 1; c < kClocks; ++c) seen_offset_[c] = offset[c];
    test_hooks::window(nullptr, 'k');
    // Every live timer of the moved clocks: same deadline on its clock, a
    // new tick on the wheel's (an earlier one fires at once: the clock was
    // set forward past it, or the machine slept through it). A start indexes
    // its timer (under the timer's deadline lock) before it reads the clocks
    // it files it by, so a timer this pass does not find was filed by a
    // reading taken after the offsets above.
    for (unsigned c = 1; c < kClocks; ++c) {
        for_each_clocked(c, [&](Record* r, std::uint32_t index, std::uint32_t gen) {
            Extra& x = table_.extra(index);
            // A DELAY timer's run in progress: nothing to re-file (its worker
            // files it from its clock when the run ends), and its worker
            // only tries the lock: not taken here (worker.cpp, finish_run).
            if (const Word w0 = TimerState::load(*r); Ctl::state(w0) == State::Running && !r->fixed_rate()) return;
            std::uint64_t held = 0;
            switch (OwnDeadline::try_lock(*r, x, gen, held)) {
                case OwnDeadline::Try::Locked: break;
                case OwnDeadline::Try::Busy: reclock_again_ = true; return;  // its holder files it; we look again
                case OwnDeadline::Try::Stale: return;
            }
            const Word w = TimerState::load(*r);
            const State st = Ctl::state(w);
            // PENDING, or RUNNING with its next grid deadline in the word (a
            // fixed-rate timer; a DELAY one's word holds the run's own).
            if (Ctl::gen10(w) == (gen & Ctl::kGenMask) &&
                (st == State::Pending || (st == State::Running && r->fixed_rate()))) {
                const tick_t tick =
                    std::min(clock_.deadline_tick(x.deadline_ns.load(std::memory_order_relaxed) - offset[c]),
                             Ctl::kMaxDeadline);
                ResetStep step;
                {
                    HazardScope acting_on(r);
                    step = TimerState::reset(*r, gen, tick, false);
                }
                // (Fired or stopped meanwhile; a running one is filed after its run.)
                if (step.rearmed && r->linked()) wheel_.rearm(r, file_tick(*r, tick));
            }
            OwnDeadline::unlock(x, held);
        });
    }
}

// A boot-time or wall-clock timer popped from the wheel: its deadline on
// its own clock and the word's tick move together, under its deadline lock
// (OwnDeadline), held from the check on its own clock through the word's
// decision and the deadline's move along the grid (a fixed-rate timer).
// Held by a start, a reset or a run settling it: the timer is looked at
// again next tick (a manual runtime's advance waits for the holder
// instead: its clock would step on meanwhile, and the holder -- a reset on
// another thread -- never waits for the advance). False: not to be decided
// now (re-filed); else `out` is the word's step. Out of line: only such
// timers pay for it.
bool Shard::expire_clocked(Record& r, std::uint32_t gen, tick_t now, tick_t grid_now, std::uint64_t period,
                           ExpireStep& out) noexcept {
    Extra& own = HandleTable::extra_of(r);
    std::uint64_t held = 0;
    const OwnDeadline::Try t =
        manual_sink_ == nullptr
            ? OwnDeadline::try_lock(r, own, gen, held)
            : (OwnDeadline::lock(r, own, gen, held) ? OwnDeadline::Try::Locked : OwnDeadline::Try::Stale);
    const tick_t judge_at = r.policy() == Policy::Burst ? now : grid_now;
    switch (t) {
        case OwnDeadline::Try::Busy: wheel_.insert(&r, now + 1); return false;
        case OwnDeadline::Try::Stale: out = TimerState::expire(r, now, judge_at, period); return true;  // (the word decides)
        case OwnDeadline::Try::Locked: break;
    }
    // Skips are counted before the item is handed over, so a query from the
    // run that begins next already counts them.
    std::int64_t own_now = INT64_MIN;
    if (!clocked_due(r, own, now, own_now)) {
        OwnDeadline::unlock(own, held);
        return false;
    }
    // A fixed-rate timer's passed grid deadlines are counted on its own
    // clock: the word's grid (ticks) may run ahead of it (decide_expire's
    // grid_cap), and a BURST catch-up of a deadline its clock has not
    // reached would run early. (A manual runtime's clocks move together.)
    tick_t cap = ~tick_t{0};
    if (period != 0 && own_now != INT64_MIN && !clocks_.manual()) {
        const std::int64_t own_deadline = own.deadline_ns.load(std::memory_order_relaxed);
        const std::uint64_t k = static_cast<std::uint64_t>(own_now - own_deadline) / (period * clock_.resolution_ns());
        const tick_t d = Ctl::deadline(TimerState::load(r));
        if (k < (Ctl::kMaxDeadline - d) / period) cap = d + k * period;
    }
    out = TimerState::expire(r, now, judge_at, period, cap);
    if (period != 0 && (out.out == ExpireOutcome::Fire || out.out == ExpireOutcome::Skip)) {
        // Its deadline on its own clock moves along the grid with the word.
        const std::uint64_t periods = out.out == ExpireOutcome::Fire ? out.skipped + 1 : out.skipped;
        OwnDeadline::advance(own, held, static_cast<std::int64_t>(periods * period * clock_.resolution_ns()));
    }
    OwnDeadline::unlock(own, held);
    return true;
}

void Shard::probe_expire(const Record& r, std::uint32_t gen, tick_t due, std::int64_t now_ns) const noexcept {
    TW_PROBE(expire, name_, index_, Id::make(gen, index_, HandleTable::index_of(&r)), clock_.tick_start_ns(due), now_ns);
}

bool Shard::expire(tick_t now, std::int64_t now_ns, tick_t grid_now) {
    // The expire probe's semaphore, read once per pass (a tracer attaching
    // meanwhile sees the next pass): one register test per due timer.
    const bool traced = TW_PROBE_ENABLED(expire);
    if (!flush_fired()) return false;
    // A queue whose transition mutex a caller holds (or that had no memory)
    // keeps its items here; the rest of the pass goes on (issue 31: the
    // driver never waits for a caller, and one queue's caller does not hold
    // back the shard's other timers).
    bool queues_ok = flush_queued(now_ns);
    // Popped kPopAhead at a time, from both ends of every expired list at
    // once (Wheel::pop_expired_n: their cold lines' misses overlap; one pop
    // after the other was ~90% of this loop's time in a burst of 1 M). A
    // manual advance pops one at a time.
    static constexpr std::size_t kPopAhead = 32;
    WheelNode* popped[kPopAhead];
    std::size_t n_popped = 0, next_popped = 0;
    // Gives the popped nodes not yet looked at back to the wheel's expired
    // list (a pass that ends early: no memory to hand over).
    const auto give_back = [&] {
        for (; next_popped < n_popped; ++next_popped)
            wheel_.insert(popped[next_popped], popped[next_popped]->deadline());
    };
    for (;;) {
        if (next_popped == n_popped) {
            next_popped = 0;
            if (manual_sink_ != nullptr) {
                popped[0] = wheel_.pop_expired();
                n_popped = popped[0] != nullptr ? 1 : 0;
            } else {
                n_popped = wheel_.pop_expired_n(popped, kPopAhead);
            }
            if (n_popped == 0) break;
        }
        Record& r = static_cast<Record&>(*popped[next_popped++]);
        const std::uint32_t gen = r.gen();
        // The queue's slot and the grid period are in the period word
        // beside the record; its flags say whether it has one (the common
        // timer: no read).
        const std::uint16_t flags = r.flags();
        // A due monotonic one-shot for the workers: handed over as a claim
        // item, without a transition (messages.hpp): the worker's one CAS
        // makes it RUNNING, judged at this pass's `now`. Only a plain load
        // here; a timer whose word says otherwise (moved later, stopped)
        // takes the usual decision below. (Not on a manual runtime: its
        // advance runs what fires itself, in deadline order.)
        if ((flags & (Record::kClockMask | Record::kHasQueue | Record::kPeriodic)) == 0 && manual_sink_ == nullptr) {
            const Word w = TimerState::load(r);
            if (Ctl::state(w) == State::Pending && Ctl::deadline(w) <= now &&
                Ctl::gen10(w) == (gen & Ctl::kGenMask)) {
                fired_[fired_n_++] = FireItem{&r, gen | FireItem::kClaim, index_, now};
                if (traced) [[unlikely]]
                    probe_expire(r, gen, Ctl::deadline(w), now_ns);
                if (fired_n_ == kFireBatch && !flush_fired()) {
                    give_back();
                    return false;
                }
                continue;
            }
        }
        const bool fixed_rate = r.fixed_rate();
        const std::uint64_t word =
            (flags & (Record::kHasQueue | Record::kPeriodic)) != 0 ? HandleTable::period_word_of(r) : 0;
        const std::uint16_t slot = PeriodWord::queue_slot(word);
        const std::uint64_t period = fixed_rate ? PeriodWord::period_ticks(word) : 0;
        if (slot != 0 && queued_n_ == kFireBatch) {
            // No room for another queue-bound item until a queue takes its
            // own: this one is looked at again next tick, undecided.
            wheel_.insert(&r, now + 1);
            queues_ok = false;
            continue;
        }
        // A queue-bound timer's transition and its delivery happen inside one
        // section (delivery_queue.hpp: a queue is never freed in between).
        // (A manual runtime's on the shared stripe: its advance may open it
        // on one advancing thread and end it on another -- when a queue had
        // no memory, it stays open across advances -- and it may nest with
        // that thread's own sections: issue 20. A driver thread opens and
        // ends its own, on its own stripe, where a destroy's quiesce waits
        // for a change, not for the shared count to reach 0.)
        if (slot != 0 && !section_) {
            if (clocks_.manual())
                section_.emplace(queues_, QueueTable::Section::Shared{});
            else
                section_.emplace(queues_);
        }
        // A boot-time or wall-clock timer: its own clock decides too
        // (expire_clocked; false: not due on it, or looked at next tick).
        // A manual advance judges skips against the end of its window
        // (grid_now); a BURST timer instead runs every crossed deadline in
        // deadline order among the others, so it is judged at `now`.
        ExpireStep s;
        if ((flags & Record::kClockMask) != 0) [[unlikely]] {
            if (!expire_clocked(r, gen, now, grid_now, period, s)) continue;
        } else {
            s = TimerState::expire(r, now, r.policy() == Policy::Burst ? now : grid_now, period);
        }
        switch (s.out) {
            case ExpireOutcome::Fire:
                if (traced) [[unlikely]]
                    probe_expire(r, gen, s.due, now_ns);
                count_skipped(r, s.skipped);
                if (fixed_rate) wheel_.insert(&r, file_tick(r, s.file_at));  // the wheel keeps the rhythm
                if (slot != 0)
                    queued_[queued_n_++] = Queued{FireItem{&r, gen, index_, s.due}, slot};
                else
                    fired_[fired_n_++] = FireItem{&r, gen, index_, s.due};
                break;
            case ExpireOutcome::Skip:
                count_skipped(r, s.skipped);
                wheel_.insert(&r, file_tick(r, s.file_at));
                break;
            case ExpireOutcome::Later: wheel_.insert(&r, file_tick(r, s.file_at)); break;
            case ExpireOutcome::Drop: break;  // stopped: out of the wheel; its Cancel recycles it
        }
        if (fired_n_ == kFireBatch && !flush_fired()) {
            give_back();
            return false;
        }
        if (queued_n_ == kFireBatch && !flush_queued(now_ns)) queues_ok = false;
    }
    const bool fired_ok = flush_fired();
    return fired_ok && flush_queued(now_ns) && queues_ok;
}

// Checked builds (TICKWHEEL_CHECK_WHEEL, src/CMakeLists.txt): the wheel's
// invariants after every pass of the loop, while the scan stays cheap. A
// violation is a library bug: report it and abort, before it loses a timer.
void Shard::check_wheel() const noexcept {
#ifdef TICKWHEEL_CHECK_WHEEL_MAX
    if (wheel_.size() > TICKWHEEL_CHECK_WHEEL_MAX) return;
    const Wheel::CheckResult r = wheel_.check();
    if (r.ok()) return;
    std::ostringstream what;
    what << r;
    std::fprintf(stderr, "tickwheel: shard %u: Wheel::check() failed: %s\n", index_, what.str().c_str());
    std::abort();
#endif
}

bool Shard::maybe_trim(tick_t now, std::int64_t now_ns) noexcept {
    if (slot_reserve_ == kNeverTrim) return false;
    const std::uint64_t resident = table_.resident_slots();
    // (Live timers are in the wheel or wait in callers' cells.)
    const std::uint64_t need = wheel_.size() + cells_.waiting() + slot_reserve_;
    if (resident < need + kTrimMinRecords) {
        trim_quiet_since_ns_ = 0;
        return false;
    }
    // Quiet for kTrimQuietNs: no record taken fresh (a burst of starts
    // grows the high-water mark) and few messages drained (a burst of stops
    // posts Cancels) since the last look.
    // (Nor while due timers wait for the workers: an expiry burst's
    // callbacks are running and freeing records; a trim then would take the
    // driver's core from them, and the records it gives back would be
    // faulted in again by the next burst.)
    const std::uint32_t hw = table_.high_water();
    if (trim_quiet_since_ns_ == 0 || hw != trim_hw_ || last_drained_ >= kTrimBusyMessages ||
        dispatcher_.waiting() != 0) {
        trim_hw_ = hw;
        trim_quiet_since_ns_ = now_ns;
        return true;
    }
    if (now_ns - trim_quiet_since_ns_ < kTrimQuietNs || now_ns < trim_not_before_ns_) return true;
    // Idle enough: the walk (~10 ns a free record, the driver's time) ends
    // before the next timer is due -- or it was put off long enough.
    const std::uint64_t res = clock_.resolution_ns();
    const std::uint64_t walk_ticks = (resident - wheel_.size()) * 10 / res + 1;
    const tick_t next = std::min(wheel_.next_expiry(), cells_min_due());
    if (next != Wheel::kNever && next - now <= walk_ticks) {
        if (trim_deferred_since_ns_ == 0) trim_deferred_since_ns_ = now_ns;
        if (now_ns - trim_deferred_since_ns_ < kTrimMaxDeferNs) return true;
    }
    trim_deferred_since_ns_ = 0;
    const std::uint64_t gave = table_.trim(slot_reserve_);
    // Another try only after another quiet period; a trim that gave little
    // back (live timers spread over the chunks) backs off longer.
    trim_quiet_since_ns_ = 0;
    if (gave < kTrimMinRecords) trim_not_before_ns_ = now_ns + kTrimBackoffNs;
    return false;
}

void Shard::manual_step(tick_t now, tick_t grid_now, std::vector<FireItem>& out) {
    const DrivingScope driving(this);
    drain_inbox();
    take_due_cells(now);
    wheel_.advance(now);
    manual_sink_ = &out;
    // Never short of memory here: fired items go to `out`; a queue without
    // memory keeps its items for the next step (flush_queued).
    (void)expire(now, clocks_.mono(), grid_now);
    manual_sink_ = nullptr;
    pending_.store(wheel_.size(), std::memory_order_relaxed);
    if (table_.quarantine_due(clocks_.mono())) table_.reclaim_quarantine();
}

tick_t Shard::manual_next_expiry() {
    const DrivingScope driving(this);
    drain_inbox();
    check_wheel();
    return std::min(wheel_.next_expiry(), cells_min_due());
}

// ---- the callers' cells (caller_cells.hpp) ----------------------------------
void Shard::file_taken(std::uint64_t e) noexcept {
    Record* r = table_.find(CallerCells::index_of(e));
    if (r == nullptr || r->gen() != CallerCells::gen_of(e)) return;  // ended and recycled since
    const Word w = TimerState::load(*r);
    // Stopped, or already filed by its eviction's Insert: nothing to do
    // (the stop's Cancel recycles it; an Insert of a linked record is dropped).
    if (Ctl::state(w) != State::Pending || Ctl::gen10(w) != (CallerCells::gen_of(e) & Ctl::kGenMask) || r->linked())
        return;
    wheel_.insert(r, file_tick(*r, Ctl::deadline(w)));
}

void Shard::take_due_cells(tick_t now) noexcept {
    TW_OWNER_ASSERT(on_driver());
    // A cell whose earliest entry is due is scanned: every entry due within
    // kTakeAheadNs joins the wheel (so a cell is scanned about once per
    // kTakeAheadNs while its timers come due, not at every tick).
    const tick_t ahead = static_cast<tick_t>(kTakeAheadNs) / clock_.resolution_ns();
    const unsigned hw = cells_.high_water();
    for (unsigned ci = 0; ci < hw; ++ci) {
        CallerCells::Cell& c = cells_.cell(ci);
        if (CallerCells::earliest(c) > now) continue;
        cells_.scan(c, now + ahead, [this](std::uint64_t e) { file_taken(e); });
    }
}

tick_t Shard::cells_min_due() const noexcept {
    tick_t m = Wheel::kNever;
    const unsigned hw = cells_.high_water();
    for (unsigned ci = 0; ci < hw; ++ci) m = std::min(m, CallerCells::earliest(cells_.cell(ci)));
    return m;
}

std::size_t Shard::pending() const noexcept {
    const std::size_t wheel = pending_.load(std::memory_order_relaxed);
    return swept_.load(std::memory_order_relaxed) ? wheel : wheel + cells_.waiting();
}

void Shard::prune_clocked() noexcept {
    // Entries of ended timers stay in the index (a worker recycling a fired
    // timer does not know it is indexed); a shard whose boot-time and
    // wall-clock timers have all ended drops them here and stops polling.
    for (unsigned c = 1; c < kClocks; ++c) for_each_clocked(c, [](Record*, std::uint32_t, std::uint32_t) {});
}

void Shard::run(int cpu) {
    char name[16];
    std::snprintf(name, sizeof name, "tw-shard-%u", index_);
    set_thread_name(name);
    set_precise_timer_slack();
    if (cpu >= 0) pin_to_cpu(static_cast<unsigned>(cpu));

    const std::uint64_t res = clock_.resolution_ns();
    const std::uint64_t housekeeping_ticks = static_cast<std::uint64_t>(kHousekeepingNs) / res + 1;
    const std::uint64_t max_sleep_ticks = static_cast<std::uint64_t>(kMaxSleepNs) / res + 1;
    unsigned clocked_passes = 0;
#ifdef TICKWHEEL_STAGE_TRACE
    stage_trace::t_pass = {monotonic_ns(), clock_.epoch_ns(), res};
#endif
    const DrivingScope driving(this);
    for (;;) {
        const std::uint32_t seen = parker_.prepare();
        const bool drained = drain_inbox();
        test_hooks::window(nullptr, 'P');
        if (stopping_.load(std::memory_order_acquire)) break;
        const std::int64_t now_ns = monotonic_ns();
        const tick_t now = clock_.now_tick(now_ns);
        take_due_cells(now);  // the callers' timers due by now join the wheel
        wheel_.advance_uncounted(now);  // (a due level-0 slot joins the expired lists whole)
#ifdef TICKWHEEL_STAGE_TRACE
        stage_trace::record(stage_trace::kAdvance, monotonic_ns() - now_ns);
#endif
        const std::size_t clocked = clocked_.entries_hint();
        if (clocked != 0 || reclock_again_) {
            reclock();  // a wall-clock step, or a suspend: within a pass (<= kHousekeepingNs)
            if (++clocked_passes >= std::max<std::size_t>(kPruneClockedPasses, clocked / 64)) {
                prune_clocked();
                clocked_passes = 0;
            }
        }
        const bool handed_over = expire(now, now_ns, now);
        pending_.store(wheel_.size(), std::memory_order_relaxed);
        check_wheel();
        if (table_.quarantine_due(now_ns)) table_.reclaim_quarantine();
        const bool trim_pending = maybe_trim(now, now_ns);  // memory back after a peak (issue 34)

        tick_t next = wheel_.next_expiry();
        // Out of memory, or a lock a caller held (the inbox's reserve, a
        // delivery queue), or a clocked timer's deadline lock: try again next
        // tick. We never wait for a caller.
        if (!handed_over || reserve_busy_ || reclock_again_) next = std::min(next, now + 1);
        if (next <= now) continue;
        // How long to sleep. Until the next expiry, but at most
        // kHousekeepingNs while the shard has housekeeping to do: messages
        // came in this pass (more may follow that do not wake it: cancels,
        // far inserts), boot-time or wall-clock timers whose clock may step,
        // records in quarantine. Otherwise nothing but a deadline or a
        // message can give it work: it sleeps until the deadline (a "long
        // sleep", kLongSleep in sleep_until_), and the first message wakes it.
        const bool housekeeping =
            drained || clocked_.entries_hint() != 0 || table_.quarantined() != 0 || trim_pending || inbox_pending_;
        const std::uint64_t cap_ticks = housekeeping ? housekeeping_ticks : max_sleep_ticks;
        bool capped = next - now > cap_ticks;
        bool long_sleep = !housekeeping && next - now > housekeeping_ticks;
        sleep_until_.store(long_sleep ? (next | kLongSleep) : next, std::memory_order_relaxed);
        // Pairs with the posters' fences: either the driver sees the message
        // (or the cell's entry) before it sleeps, or the poster sees the
        // tick it sleeps until. A long sleep pays an asymmetric barrier
        // (membarrier, at most once per kHousekeepingNs and in practice once
        // per quiet period), so that a cancel's poster pays only a compiler
        // barrier.
        if (long_sleep)
            hazard_barrier();
        else
            std::atomic_thread_fence(std::memory_order_seq_cst);
        // (A record a worker put into quarantine meanwhile: recycle_ended.)
        if (stopping_.load(std::memory_order_relaxed) || (long_sleep && table_.quarantined() != 0)) {
            sleep_until_.store(0, std::memory_order_relaxed);
            continue;
        }
        // How long: until the tick boundary of `next`, at most the cap
        // (which also keeps tick arithmetic far from overflow); an empty
        // wheel with nothing to keep sleeps until a message comes.
        bool timed = next != Wheel::kNever || housekeeping;
        std::int64_t cap_ns = capped ? (housekeeping ? kHousekeepingNs : kMaxSleepNs) : 0;
        // The callers' cells: their owners placed these without telling us
        // (they saw us awake, or sleeping no later than their due tick).
        const tick_t cell_due = cells_min_due();
        const tick_t posted = posted_min_due_.load(std::memory_order_relaxed);
        const bool queued = posted != Wheel::kNever || inbox_.size_approx() != 0;
        if (queued || cell_due < next) {
            // Messages came during the pass: their posters saw us awake and
            // woke nobody. They stay queued; we drain them by the earliest
            // deadline posted since our drain began (`posted`; the fences
            // above pair with theirs) and within kHousekeepingNs (a cancel's
            // record is reclaimed). Another pass at once instead would keep
            // a caller that posts as fast as we drain, and us, on the inbox
            // path for as long as it posts.
            const tick_t earliest = std::min(posted, cell_due);
            if (earliest <= now) {
                sleep_until_.store(0, std::memory_order_relaxed);
                continue;
            }
            if (earliest < next) next = earliest;
            if (queued) {
                long_sleep = false;
                cap_ns = next - now > housekeeping_ticks ? kHousekeepingNs : 0;
            } else {  // only a cell's entry: the sleep keeps its kind, to an earlier tick
                long_sleep = long_sleep && next - now > housekeeping_ticks;
                capped = next - now > cap_ticks;
                cap_ns = capped ? (housekeeping ? kHousekeepingNs : kMaxSleepNs) : 0;
            }
            test_hooks::window(nullptr, 'y');  // about to lower the tick it sleeps until
            sleep_until_.store(long_sleep ? (next | kLongSleep) : next, std::memory_order_relaxed);
            timed = true;
        }
        test_hooks::window(nullptr, 'd');
        std::int64_t wake_ns = -1;
        if (timed) wake_ns = cap_ns > 0 ? monotonic_ns() + cap_ns : clock_.tick_start_ns(next);
        parker_.park_until(seen, wake_ns);
#ifdef TICKWHEEL_STAGE_TRACE
        stage_trace::t_pass.wake_ns = monotonic_ns();
#endif
        sleep_until_.store(0, std::memory_order_relaxed);
    }
    // Stopping (shutdown): queue-bound timers not yet delivered are left to
    // shutdown's sweep, which cancels them after closing their queues.
    queued_n_ = 0;
    section_.reset();
}

}  // namespace tickwheel::rt
