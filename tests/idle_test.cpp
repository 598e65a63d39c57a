// SPDX-License-Identifier: MIT OR Apache-2.0
// An idle runtime's shards sleep until there is work (issue 14): they do not
// wake while their pending timers are far away, yet stopped timers are still
// reclaimed promptly and a shard holding wall-clock timers still polls the
// clocks (README, "Clocks and virtual time": a clock step is noticed within
// ~100 ms).
//
// Wake-ups are counted, not timed: each ended sleep of a shard thread
// (named tw-shard-N) is one voluntary context switch in
// /proc/self/task/<tid>/status. A window only sets how long we count.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../bench/thread_stats.hpp"
#include "runtime/test_hooks.hpp"
#include "runtime/timer_record.hpp"
#include "test_support.hpp"
#include "tickwheel/runtime.hpp"

using namespace std::chrono;
namespace tw = tickwheel;

namespace {

/// Voluntary context switches of this process's shard threads, so far.
long shard_wakeups() { return tw_threads::read().shard_wakeups; }

/// Shard wake-ups during `window`.
long wakeups_over(milliseconds window) {
    const long w0 = shard_wakeups();
    std::this_thread::sleep_for(window);
    return shard_wakeups() - w0;
}

/// Waits until every shard has filed what was posted to it and holds
/// `pending` timers in all.
[[nodiscard]] bool filed(tw::Runtime& rt, std::size_t pending) {
    return tw_test::wait_until([&] {
        const tw::Stats s = rt.stats();
        std::size_t p = 0, q = 0;
        for (std::size_t i = 0; i < s.pending_per_shard.size(); ++i) {
            p += s.pending_per_shard[i];
            q += s.inbox_per_shard[i];
        }
        return p == pending && q == 0;
    });
}

}  // namespace

// Before issue 14 every shard woke every 100 ms (housekeeping): ~20 wake-ups
// per second here. Now the shards sleep until their first deadline, an hour
// away: at most the one pass after the last message (it drained messages,
// so it looks again within 100 ms), which may fall into the window.
TEST(Idle, PendingFarTimersCostNoWakeUps) {
    tw::Runtime rt(tw_test::small_config(2, 1));
    for (int i = 0; i < 10000; ++i) rt.start(hours(1) + milliseconds(i), [] {});
    ASSERT_TRUE(filed(rt, 10000));
    std::this_thread::sleep_for(milliseconds(300));  // the pass after the last message
    const long wakes = wakeups_over(seconds(1));
    EXPECT_LE(wakes, 2) << "shard wake-ups in 1 s with 10,000 timers pending an hour away";
    RecordProperty("idle_shard_wakeups_per_s", std::to_string(wakes));
}

// A runtime without any timer sleeps too (an empty wheel: no deadline).
TEST(Idle, AnEmptyRuntimeCostsNoWakeUps) {
    tw::Runtime rt(tw_test::small_config(2, 1));
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_LE(wakeups_over(seconds(1)), 2);
}

// A stop's Cancel wakes a shard in a long sleep, which reclaims the record
// at once: the slot is free for the next start without waiting for the
// stopped timer's old deadline (an hour) or for other stops.
TEST(Idle, AStoppedTimersSlotIsReclaimedWithoutOtherTraffic) {
    static std::atomic<std::uint32_t> freed_top{~0u};
    tickwheel::rt::test_hooks::freed.store([](std::uint32_t top, std::uint32_t) { freed_top.store(top); });
    struct Unhook {
        ~Unhook() { tickwheel::rt::test_hooks::freed.store(nullptr); }
    } unhook;
    tw::Runtime rt(tw_test::small_config(1, 1));
    const tw::Timer keep = rt.start(hours(2), [] {});  // the shard has a deadline, far away
    const tw::Timer t = rt.start(hours(1), [] {});
    ASSERT_TRUE(filed(rt, 2));
    std::this_thread::sleep_for(milliseconds(300));  // the shard's pass after the inserts: then a long sleep
    ASSERT_LE(wakeups_over(milliseconds(300)), 1) << "the shard sleeps before the stop";
    const auto index = static_cast<std::uint32_t>(t.id() & 0xFFFFFFFFu);
    ASSERT_TRUE(rt.stop(t));
    ASSERT_TRUE(tw_test::wait_until([&] { return freed_top.load() == index; }))
        << "the stopped timer's record was not recycled";
    ASSERT_TRUE(filed(rt, 1));
    // ...and the next start on that shard takes the same slot.
    const tw::Timer again = rt.start(hours(1), [] {});
    EXPECT_EQ(static_cast<std::uint32_t>(again.id() & 0xFFFFFFFFu), index);
    EXPECT_TRUE(rt.stop(keep));
}

// Many threads each stopping fewer timers than a shard's per-thread wake-up
// count (4096), then silence: the shards still reclaim every stopped timer
// (they look again within 100 ms while messages come, and the first message
// after a quiet period wakes them), and a second round reuses the slots.
//
// Reclaiming is observed, not timed: test_hooks::freed counts the records
// pushed back onto the shards' free stacks. Reuse is checked exactly: a
// start takes a new slot only when its shard's free stack is empty, so once
// every record of round 1 is free, a round-2 start on shard s that gets a
// new slot (index >= round 1's high water there) comes after round 2 took
// each of round 1's slots of shard s at least once.
TEST(Idle, StopsFromManyThreadsAreReclaimedWhileOtherwiseIdle) {
    using tickwheel::rt::Id;
    static std::atomic<std::uint64_t> freed{0};
    freed.store(0);
    tickwheel::rt::test_hooks::freed.store([](std::uint32_t, std::uint32_t n) { freed.fetch_add(n); });
    struct Unhook {
        ~Unhook() { tickwheel::rt::test_hooks::freed.store(nullptr); }
    } unhook;
    constexpr unsigned kShards = 2;
    tw::Runtime rt(tw_test::small_config(kShards, 1));
    constexpr int kThreads = 16, kPairs = 2000;
    constexpr std::uint64_t kRound = std::uint64_t{kThreads} * kPairs;
    // Per shard: the highest slot index + 1 (round 1), or the starts that
    // took a slot below / at or above round 1's high water (round 2).
    struct Tally {
        std::uint32_t top[kShards] = {};
        std::uint64_t old[kShards] = {}, fresh[kShards] = {};
    };
    auto round = [&](const std::uint32_t* high_water) {
        std::vector<Tally> tallies(kThreads);
        std::vector<std::thread> th;
        for (int t = 0; t < kThreads; ++t)
            th.emplace_back([&, t] {
                Tally& y = tallies[static_cast<std::size_t>(t)];
                for (int i = 0; i < kPairs; ++i) {
                    const tw::Timer timer = rt.start(hours(1), [] {});
                    const std::uint32_t s = Id::shard(timer.id()), index = Id::index(timer.id());
                    if (s < kShards) {
                        y.top[s] = std::max(y.top[s], index + 1);
                        if (high_water != nullptr) ++(index < high_water[s] ? y.old[s] : y.fresh[s]);
                    }
                    rt.stop(timer);
                }
            });
        for (auto& x : th) x.join();
        Tally sum;
        for (const Tally& y : tallies)
            for (unsigned s = 0; s < kShards; ++s) {
                sum.top[s] = std::max(sum.top[s], y.top[s]);
                sum.old[s] += y.old[s];
                sum.fresh[s] += y.fresh[s];
            }
        return sum;
    };
    const Tally r1 = round(nullptr);
    ASSERT_TRUE(filed(rt, 0)) << "stopped timers left in the wheels";
    ASSERT_TRUE(tw_test::wait_until([&] { return freed.load() == kRound; }))
        << "records freed after round 1: " << freed.load() << " of " << kRound;
    ASSERT_EQ(rt.stats().slots, std::size_t{r1.top[0]} + r1.top[1]);
    std::this_thread::sleep_for(milliseconds(300));  // quiet: the shards go to a long sleep
    const Tally r2 = round(r1.top);
    ASSERT_TRUE(filed(rt, 0)) << "stopped timers left in the wheels";
    ASSERT_TRUE(tw_test::wait_until([&] { return freed.load() == 2 * kRound; }))
        << "records freed after round 2: " << freed.load() - kRound << " of " << kRound;
    for (unsigned s = 0; s < kShards; ++s) {
        if (r2.fresh[s] != 0) {
            EXPECT_GE(r2.old[s], r1.top[s])
                << "shard " << s << " took " << r2.fresh[s] << " new slots while round 1's were free";
        }
    }
    EXPECT_EQ(rt.stats().stopped, 2 * kRound);
}

// A shard holding a wall-clock timer keeps polling the clocks (a step is
// noticed within ~100 ms: Realtime.ClockSetForwardPastTheDeadlineFiresThen
// in clock_test measures it); once that timer is gone it stops.
TEST(Idle, AShardPollsTheClocksOnlyWhileItHoldsWallClockTimers) {
    tw::Runtime rt(tw_test::small_config(1, 1));
    tw::StartOptions o;
    o.clock = tw::TimerClock::realtime;
    o.delay = hours(1);
    const tw::Timer t = rt.start(o, [] {});
    ASSERT_TRUE(filed(rt, 1));
    EXPECT_GE(wakeups_over(seconds(1)), 5) << "no clock polling while a wall-clock timer is pending";
    ASSERT_TRUE(rt.stop(t));
    // Its index entry is pruned after at least 10 passes (~1 s): then the
    // shard sleeps. Look for a quiet second within the bound.
    bool quiet = false;
    const auto end = steady_clock::now() + (tw_test::kSanitized ? seconds(30) : seconds(10));
    while (!quiet && steady_clock::now() < end) quiet = wakeups_over(seconds(1)) <= 1;
    EXPECT_TRUE(quiet) << "the shard kept polling the clocks after its last wall-clock timer ended";
}
