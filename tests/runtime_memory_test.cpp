// SPDX-License-Identifier: MIT OR Apache-2.0
// Memory of stopped timers is reclaimed promptly by their shard, not when
// their old deadline would have come (the out-of-memory trap of wheels that
// leave cancelled timeouts in their buckets).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tickwheel/runtime.hpp"

using namespace std::chrono;

TEST(RuntimeMemory, StartStopOfHourLongTimersKeepsSlotsFlat) {
    tickwheel::Config cfg;
    cfg.shards = 2;
    cfg.workers = 1;
    tickwheel::Runtime rt(cfg);
    constexpr long kPairs = 1'000'000;
    for (long i = 0; i < kPairs; ++i) {
        auto t = rt.start(hours(1), [] {});
        ASSERT_TRUE(rt.stop(t));
    }
    const auto s = rt.stats();
    EXPECT_EQ(s.stopped, static_cast<std::uint64_t>(kPairs));
    EXPECT_EQ(s.fired, 0u);
    // Without prompt reclamation every pair would hold a slot for an hour:
    // 1,000,000 slots. The shards recycle them as they go; the bound leaves
    // room for a shard that gets little CPU on a loaded machine.
    EXPECT_LT(s.slots, static_cast<std::size_t>(kPairs / 4)) << "slots allocated: " << s.slots;
    RecordProperty("slots_after_1M_start_stop", std::to_string(s.slots));
    std::cout << "slots allocated after " << kPairs << " start+stop pairs of 1 h timers: " << s.slots << "\n";
}

TEST(RuntimeMemory, LiveCountReturnsToZeroAfterStops) {
    tickwheel::Config cfg;
    cfg.shards = 2;
    cfg.workers = 1;
    tickwheel::Runtime rt(cfg);
    for (int i = 0; i < 10000; ++i) ASSERT_TRUE(rt.stop(rt.start(hours(1), [] {})));
    // Recycling is asynchronous (the shard does it); wait for it, bounded.
    const auto until = steady_clock::now() + seconds(10);
    while (rt.stats().live != 0 && steady_clock::now() < until) std::this_thread::sleep_for(milliseconds(5));
    EXPECT_EQ(rt.stats().live, 0u);
}

// The release hook of a one-shot timer runs on the worker after its run; from
// there, shutdown() must report would_deadlock (not wait for its own task),
// and stop_sync() on the same timer must not wait for itself.
TEST(RuntimeRelease, HookOnWorkerCountsAsInsideTheCallback) {
    tickwheel::Config cfg;
    cfg.shards = 1;
    cfg.workers = 2;
    tickwheel::Runtime rt(cfg);
    std::atomic<int> shutdown_code{-1};
    std::atomic<bool> sync_returned{false};
    std::atomic<std::uint64_t> id{0};
    struct Hook {
        tickwheel::Runtime* rt;
        std::atomic<int>* code;
        std::atomic<bool>* synced;
        std::atomic<std::uint64_t>* id;
        bool armed = true;
        Hook(tickwheel::Runtime* r, std::atomic<int>* c, std::atomic<bool>* s, std::atomic<std::uint64_t>* i)
            : rt(r), code(c), synced(s), id(i) {}
        Hook(Hook&& o) noexcept : rt(o.rt), code(o.code), synced(o.synced), id(o.id), armed(o.armed) { o.armed = false; }
        ~Hook() {
            if (!armed) return;
            std::error_code ec;
            rt->shutdown(ec);
            code->store(ec.value());
            rt->stop_sync(id->load());  // must return: not wait for this very release
            synced->store(true);
        }
        void operator()() const {}
    };
    id = rt.start(milliseconds(1), Hook(&rt, &shutdown_code, &sync_returned, &id)).id();
    const auto until = steady_clock::now() + seconds(10);
    while (!sync_returned.load() && steady_clock::now() < until) std::this_thread::sleep_for(milliseconds(1));
    ASSERT_TRUE(sync_returned.load());
    EXPECT_EQ(shutdown_code.load(), static_cast<int>(tickwheel::errc::would_deadlock));
    EXPECT_FALSE(rt.is_shut_down());
}
