// RuntimeCore: everything a Runtime is, shared by the API layer
// (runtime.cpp), the shards (shard.cpp) and the dispatcher (dispatcher.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/clock.hpp"
#include "runtime/counters.hpp"
#include "runtime/dispatcher.hpp"
#include "runtime/shard.hpp"
#include "tickwheel/runtime.hpp"

namespace tickwheel::rt {

/// Which timer (if any) this thread is running the callback of.
struct CurrentRun {
    const RuntimeCore* core = nullptr;
    const Record* rec = nullptr;
};
extern thread_local CurrentRun t_current;

struct RuntimeCore {
    RuntimeCore(Runtime* owner, Config config);
    ~RuntimeCore();

    /// Next deadline of a periodic timer: the first d + k*period > now, k >= 1.
    static tick_t next_period(tick_t d, std::uint64_t period, tick_t now) noexcept {
        if (now < d) return d + period;
        return d + ((now - d) / period + 1) * period;
    }

    Shard& shard(std::uint32_t i) noexcept { return *shards[i]; }
    std::uint64_t id_of(const Record& r, std::uint32_t shard_index) const noexcept {
        return Id::make(r.gen(), shard_index, HandleTable::index_of(&r));
    }
    /// Finds the record an id names, if the id is current. nullptr otherwise.
    Record* lookup(std::uint64_t id, Shard** shard_out) noexcept;

    /// Destroys a timer's callable (its release hook) and counts the timer
    /// as no longer live. Called exactly once per started timer, by whoever
    /// owns its terminal transition; the slot itself is recycled later.
    void release(Record& r) noexcept {
        r.cb.reset();
        counters.add(kReleased);
        if (max_timers != 0) live.fetch_sub(1, std::memory_order_relaxed);
    }

    /// Wakes stop_sync() callers waiting on r.ctl, after a change of r.ctl.
    /// Any thread. Costs a fence and a read of a shared, read-mostly word when
    /// nobody waits: libstdc++'s notify_all itself does a locked add on a
    /// process-wide waiter-table line (a cross-core bounce for every timer
    /// that finishes), so it is called only while some stop_sync waits.
    void wake_ctl_waiters(Record& r) noexcept {
        // Pairs with the fence in stop_sync (ctl_waiters + 1, fence, load ctl):
        // either this thread sees the waiter, or the waiter sees the new ctl.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (ctl_waiters.load(std::memory_order_relaxed) != 0) r.ctl.notify_all();
    }

    Runtime* const owner;
    const Config config;
    const TickClock clock;
    const std::uint64_t max_timers;
    std::vector<std::unique_ptr<Shard>> shards;
    std::unique_ptr<Dispatcher> dispatcher;
    Counters counters;
    LatencyHistogram lateness;

    // Live timers (started, not yet released), kept only when max_timers != 0;
    // stats() derives it from the counters otherwise.
    alignas(64) std::atomic<std::int64_t> live{0};

    // stop_sync() callers currently waiting on some record's ctl word.
    alignas(64) std::atomic<std::uint32_t> ctl_waiters{0};

    // Shutdown. start() registers on its thread's stripe of `starting`, then
    // checks `shutting_down`; shutdown sets the flag and waits for every
    // stripe to drain, after which no start can slip past the final sweep.
    alignas(64) std::atomic<bool> shutting_down{false};
    struct alignas(64) Guard {
        std::atomic<std::int64_t> n{0};
    };
    Guard starting[kStripes];
    std::mutex shutdown_mutex;  // serialises shutdown() callers; not on any hot path
    std::atomic<bool> shut_down{false};
};

}  // namespace tickwheel::rt
