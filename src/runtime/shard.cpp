// The shard's driver thread: drain the inbox, advance the wheel, decide what
// fires, hand it to the dispatcher, sleep until the next expiry.
#include "runtime/shard.hpp"

#include <cstdio>

#include "runtime/runtime_core.hpp"

namespace tickwheel::rt {

Shard::Shard(RuntimeCore& core, unsigned index)
    : core_(core), index_(index), wheel_(core.clock.now_tick()) {}

Shard::~Shard() { stop_and_join(); }

void Shard::start(int cpu) {
    thread_ = std::thread([this, cpu] { run(cpu); });
}

void Shard::stop_and_join() {
    if (!thread_.joinable()) return;
    stopping_.store(true, std::memory_order_seq_cst);
    parker_.unpark();
    thread_.join();
}

void Shard::post_and_wake(std::uint64_t msg, tick_t due) {
    inbox_.enqueue(msg);
    // Pairs with the fence in run(): either the driver sees this message
    // before it sleeps, or we see the tick it sleeps until.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    tick_t target = sleep_until_.load(std::memory_order_relaxed);
    if (due < target && sleep_until_.compare_exchange_strong(target, 0, std::memory_order_relaxed))
        parker_.unpark();
}

void Shard::post_cancel(std::uint64_t msg) {
    inbox_.enqueue(msg);
    thread_local unsigned cancels = 0;
    if (++cancels % kCancelWakeEvery != 0) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    tick_t target = sleep_until_.load(std::memory_order_relaxed);
    if (target != 0 && sleep_until_.compare_exchange_strong(target, 0, std::memory_order_relaxed))
        parker_.unpark();
}

void Shard::recycle(Record& r, FreeChain& chain) noexcept {
    const std::uint32_t g = Id::next_gen(r.gen());
    r.set_gen(g);
    chain.add(HandleTable::index_of(&r), g);  // ctl becomes FREE under g; flush() wakes waiters
}

void Shard::handle(std::uint64_t msg, FreeChain& freed) {
    Record* r = table_.find(Msg::index(msg));
    if (r == nullptr || r->gen() != Msg::gen(msg)) return;  // stale: slot recycled since
    const std::uint64_t c = r->ctl.load(std::memory_order_acquire);
    const State s = Ctl::state(c);
    switch (Msg::type(msg)) {
        case MsgType::Insert:
            if (s == State::Pending && !r->linked()) wheel_.insert(r, Ctl::deadline(c));
            break;
        case MsgType::Refile:
            // Only earlier deadlines are posted; later ones are re-filed
            // lazily when the old slot comes due (see expire()).
            if (r->linked() && s != State::Cancelled && s != State::RunningStopped &&
                Ctl::deadline(c) < r->deadline())
                wheel_.rearm(r, Ctl::deadline(c));
            break;
        case MsgType::Cancel:
            if (s == State::Cancelled) {
                wheel_.remove(r);
                recycle(*r, freed);
            }
            break;
    }
}

bool Shard::drain_inbox() {
    std::uint64_t msgs[kDrainBatch];
    bool any = false;
    for (;;) {
        const std::size_t n = inbox_.try_dequeue_bulk(msgs, kDrainBatch);
        FreeChain freed(table_, core_.ctl_waiters);  // the bulk's cancelled slots, freed with one CAS
        for (std::size_t i = 0; i < n; ++i) handle(msgs[i], freed);
        freed.flush();
        any |= n != 0;
        if (n < kDrainBatch) return any;
    }
}

void Shard::flush(FireItem* items, std::size_t& n) {
    if (n == 0) return;
    core_.dispatcher->submit(items, n);
    n = 0;
}

// Pops every expired node and decides, with one CAS on its ctl word, whether
// it fires, moves (lazy re-arm), skips a period, or was cancelled.
void Shard::expire(tick_t now) {
    FireItem items[kFireBatch];
    std::size_t n = 0;
    while (WheelNode* node = wheel_.pop_expired()) {
        Record& r = static_cast<Record&>(*node);
        std::uint64_t c = r.ctl.load(std::memory_order_acquire);
        for (;;) {
            const State s = Ctl::state(c);
            const tick_t d = Ctl::deadline(c);
            if (s == State::Pending) {
                if (d > now) {  // re-armed later since it was filed: re-file lazily
                    wheel_.insert(&r, d);
                    break;
                }
                const tick_t next = r.period_ticks() != 0 ? RuntimeCore::next_period(d, r.period_ticks(), now) : d;
                if (!r.ctl.compare_exchange_weak(c, Ctl::with(c, State::Dispatched, next),
                                                 std::memory_order_acq_rel, std::memory_order_acquire))
                    continue;
                if (r.period_ticks() != 0) wheel_.insert(&r, next);  // the wheel keeps the rhythm
                items[n++] = FireItem{&r, Ctl::gen(c), index_, d};
                if (n == kFireBatch) flush(items, n);
                break;
            }
            if (s == State::Dispatched || s == State::Running) {
                // A periodic timer whose previous run has not finished (or
                // not started): skip this period, never run two at once.
                if (d > now) {
                    wheel_.insert(&r, d);
                    break;
                }
                const tick_t next = RuntimeCore::next_period(d, r.period_ticks(), now);
                if (!r.ctl.compare_exchange_weak(c, Ctl::with(c, s, next), std::memory_order_acq_rel,
                                                 std::memory_order_acquire))
                    continue;
                wheel_.insert(&r, next);
                break;
            }
            break;  // stopped or cancelled: stays out of the wheel; Cancel recycles it
        }
    }
    flush(items, n);
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
        const tick_t now = core_.clock.now_tick();
        wheel_.advance(now);
        expire(now);
        pending_.store(wheel_.size(), std::memory_order_relaxed);

        const tick_t next = wheel_.next_expiry();
        if (next <= now) continue;
        sleep_until_.store(next, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (inbox_.size_approx() != 0 || stopping_.load(std::memory_order_relaxed)) {
            sleep_until_.store(0, std::memory_order_relaxed);
            continue;
        }
        // Sleep until the tick boundary of `next`, but at most kHousekeepingNs
        // (also keeps tick arithmetic far from overflow for kNever).
        const std::uint64_t cap_ticks = kHousekeepingNs / core_.clock.resolution_ns() + 1;
        const std::int64_t wake_ns = next - now > cap_ticks ? monotonic_ns() + kHousekeepingNs
                                                            : core_.clock.tick_start_ns(next);
        parker_.park_until(seen, wake_ns);
        sleep_until_.store(0, std::memory_order_relaxed);
    }
}

}  // namespace tickwheel::rt
