// SPDX-License-Identifier: MIT OR Apache-2.0
// The shard's driver thread: drain the inbox, advance the wheel, decide what
// fires (TimerState::expire), hand it to the dispatcher, sleep until the
// next expiry.
#include "runtime/shard.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "runtime/timer_state.hpp"

namespace tickwheel::rt {

Shard::Shard(unsigned index, const TickClock& clock, Dispatcher& dispatcher, const QueueTable& queues)
    : index_(index), clock_(clock), dispatcher_(dispatcher), queues_(queues), wheel_(clock.now_tick()) {}

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
        if (Record* r = table_.find(i)) r->cb.forget();
}

void Shard::wake_if_sleeping_past(tick_t due) noexcept {
    // Pairs with the fence in run(): either the driver sees the message
    // before it sleeps, or we see the tick it sleeps until.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    tick_t target = sleep_until_.load(std::memory_order_relaxed);
    if (due < target && sleep_until_.compare_exchange_strong(target, 0, std::memory_order_relaxed))
        parker_.unpark();
}

bool Shard::try_post_insert(std::uint64_t msg, tick_t due) noexcept {
    if (!inbox_.try_post(msg)) return false;
    wake_if_sleeping_past(due);
    return true;
}

void Shard::post_and_wake(std::uint64_t msg, tick_t due) noexcept {
    inbox_.post(msg, [this] { parker_.unpark(); });
    wake_if_sleeping_past(due);
}

void Shard::post_cancel(std::uint64_t msg) noexcept {
    inbox_.post(msg, [this] { parker_.unpark(); });
    thread_local unsigned cancels = 0;
    if (++cancels % kCancelWakeEvery != 0) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    tick_t target = sleep_until_.load(std::memory_order_relaxed);
    if (target != 0 && sleep_until_.compare_exchange_strong(target, 0, std::memory_order_relaxed))
        parker_.unpark();
}

tick_t Shard::file_tick(const Record& r, tick_t d) const noexcept {
    if ((r.flags() & Record::kHasLeeway) == 0) return d;
    return coalesce(d, table_.extra(HandleTable::index_of(&r)).leeway_ticks.load(std::memory_order_relaxed));
}

void Shard::count_skipped(const Record& r, std::uint64_t skipped) noexcept {
    if (skipped == 0 || !r.has_extra()) return;  // every periodic timer has an Extra
    Extra& x = table_.extra(HandleTable::index_of(&r));
    (r.policy() == Policy::Burst ? x.owed : x.missed).fetch_add(skipped, std::memory_order_relaxed);
}

void Shard::handle(std::uint64_t msg, FreeChain& freed) {
    Record* r = table_.find(Msg::index(msg));
    if (r == nullptr || r->gen() != Msg::gen(msg)) return;  // stale: slot recycled since
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
            }
            break;
        case MsgType::Cancel:
            if (s == State::Cancelled) {
                wheel_.remove(r);
                table_.recycle(*r, freed);
            }
            break;
    }
}

bool Shard::drain_inbox() {
    std::uint64_t msgs[kDrainBatch];
    bool any = false;
    for (;;) {
        const std::size_t n = inbox_.drain(msgs, kDrainBatch);
        FreeChain freed(table_);  // the bulk's cancelled slots, freed with one CAS
        for (std::size_t i = 0; i < n; ++i) handle(msgs[i], freed);
        freed.flush();
        any |= n != 0;
        if (n < kDrainBatch) return any;
    }
}

bool Shard::flush_fired() {
    if (fired_n_ == 0) return true;
    if (!dispatcher_.submit(fired_, fired_n_)) return false;  // no memory: keep them, retry soon
    fired_n_ = 0;
    return true;
}

// Delivers the queue-bound due timers to their queues, grouped by queue (one
// eventfd edge per queue and pass). False if a queue had no memory for them:
// they stay here, and so does the section, for the next pass.
bool Shard::flush_queued(std::int64_t now_ns) {
    if (queued_n_ != 0) {
        std::stable_sort(queued_, queued_ + queued_n_,
                         [](const Queued& a, const Queued& b) { return a.slot < b.slot; });
        FireItem group[kFireBatch];
        std::size_t i = 0;
        while (i < queued_n_) {
            std::size_t j = i, n = 0;
            for (; j < queued_n_ && queued_[j].slot == queued_[i].slot; ++j) group[n++] = queued_[j].fire;
            // A cleared slot: the queue is being destroyed and cancels these.
            DeliveryQueue* q = queues_.get(queued_[i].slot);
            if (q != nullptr && !q->deliver(group, n, now_ns)) {
                std::copy(queued_ + i, queued_ + queued_n_, queued_);
                queued_n_ -= i;
                return false;
            }
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
bool Shard::expire(tick_t now, std::int64_t now_ns) {
    if (!flush_fired() || !flush_queued(now_ns)) return false;
    while (WheelNode* node = wheel_.pop_expired()) {
        Record& r = static_cast<Record&>(*node);
        const std::uint32_t gen = r.gen();
        const std::uint16_t slot = r.queue_slot();
        // A queue-bound timer's transition and its delivery happen inside one
        // section (delivery_queue.hpp: a queue is never freed in between).
        if (slot != 0 && !section_) section_.emplace(queues_);
        // Skips are counted before the item is handed over, so a query from
        // the run that begins next already counts them.
        const bool fixed_rate = r.grid_period() != 0;
        const ExpireStep s = TimerState::expire(r, now);
        switch (s.out) {
            case ExpireOutcome::Fire:
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
        if (fired_n_ == kFireBatch && !flush_fired()) return false;
        if (queued_n_ == kFireBatch && !flush_queued(now_ns)) return false;
    }
    return flush_fired() && flush_queued(now_ns);
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

void Shard::run(int cpu) {
    char name[16];
    std::snprintf(name, sizeof name, "tw-shard-%u", index_);
    set_thread_name(name);
    set_precise_timer_slack();
    if (cpu >= 0) pin_to_cpu(static_cast<unsigned>(cpu));

    for (;;) {
        const std::uint32_t seen = parker_.prepare();
        drain_inbox();
        if (stopping_.load(std::memory_order_acquire)) break;
        const std::int64_t now_ns = monotonic_ns();
        const tick_t now = clock_.now_tick(now_ns);
        wheel_.advance(now);
        const bool handed_over = expire(now, now_ns);
        pending_.store(wheel_.size(), std::memory_order_relaxed);
        check_wheel();
        if (table_.quarantine_due(now_ns)) table_.reclaim_quarantine();

        tick_t next = wheel_.next_expiry();
        if (!handed_over) next = now + 1;  // out of memory: try again next tick
        if (next <= now) continue;
        sleep_until_.store(next, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (inbox_.size_approx() != 0 || stopping_.load(std::memory_order_relaxed)) {
            sleep_until_.store(0, std::memory_order_relaxed);
            continue;
        }
        // Sleep until the tick boundary of `next`, but at most kHousekeepingNs
        // (also keeps tick arithmetic far from overflow for kNever).
        const std::uint64_t cap_ticks = kHousekeepingNs / clock_.resolution_ns() + 1;
        const std::int64_t wake_ns = next - now > cap_ticks ? monotonic_ns() + kHousekeepingNs
                                                            : clock_.tick_start_ns(next);
        parker_.park_until(seen, wake_ns);
        sleep_until_.store(0, std::memory_order_relaxed);
    }
    // Stopping (shutdown): queue-bound timers not yet delivered are left to
    // shutdown's sweep, which cancels them after closing their queues.
    queued_n_ = 0;
    section_.reset();
}

}  // namespace tickwheel::rt
