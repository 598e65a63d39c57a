// SPDX-License-Identifier: MIT OR Apache-2.0
// Clocks and virtual time (issue 13): boot-time and wall-clock timers, and a
// manual clock whose advance() runs what falls due on the caller's thread,
// in deadline order. Wall-clock steps go through the test seam
// (test_hooks::realtime_shift_ns), never the machine's clock.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/test_hooks.hpp"
#include "test_support.hpp"
#include "tickwheel/runtime.hpp"
#include "tickwheel/tickwheel.h"

namespace tw = tickwheel;
using namespace std::chrono_literals;
using tw_test::kWait;
using tw_test::wait_until;

namespace {

tw::Config manual_config(tw::Duration resolution = 1ms, unsigned shards = 2) {
    tw::Config c = tw_test::small_config(shards, 1);
    c.manual_clock = true;
    c.resolution = resolution;
    return c;
}

std::int64_t ns(tw::Duration d) { return d.count(); }

/// Restores the wall-clock seam when a test ends, however it ends.
struct ShiftGuard {
    ~ShiftGuard() { tickwheel::rt::test_hooks::realtime_shift_ns.store(0); }
};

std::int64_t clock_ns(clockid_t id) {
    timespec ts{};
    clock_gettime(id, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

// ---- the manual clock ------------------------------------------------------------

TEST(ManualClock, ClocksStandStillAndAdvanceTogetherByExactlyTheStep) {
    tw::Runtime rt(manual_config());
    EXPECT_TRUE(rt.is_manual_clock());
    const auto m0 = rt.now(tw::TimerClock::monotonic), b0 = rt.now(tw::TimerClock::boottime),
               r0 = rt.now(tw::TimerClock::realtime);
    // They start at the machine's values.
    EXPECT_NEAR(static_cast<double>(m0.count()), static_cast<double>(clock_ns(CLOCK_MONOTONIC)), 1e9);
    EXPECT_NEAR(static_cast<double>(r0.count()), static_cast<double>(clock_ns(CLOCK_REALTIME)), 1e9);
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(rt.now(tw::TimerClock::monotonic), m0) << "a manual clock stands still";
    EXPECT_EQ(rt.now(tw::TimerClock::realtime), r0);
    EXPECT_EQ(rt.advance(1234567ns), 0u);
    EXPECT_EQ(rt.now(tw::TimerClock::monotonic) - m0, 1234567ns);
    EXPECT_EQ(rt.now(tw::TimerClock::boottime) - b0, 1234567ns);
    EXPECT_EQ(rt.now(tw::TimerClock::realtime) - r0, 1234567ns);

    tw_runtime* crt = nullptr;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.flags = TW_CONFIG_MANUAL_CLOCK;
    ASSERT_EQ(tw_runtime_create(&cfg, &crt), TW_OK);
    const std::uint64_t c0 = tw_runtime_now_ns(crt, TW_CLOCK_REALTIME);
    EXPECT_EQ(tw_runtime_advance(crt, 5'000'000'000ull), 0);
    EXPECT_EQ(tw_runtime_now_ns(crt, TW_CLOCK_REALTIME) - c0, 5'000'000'000ull);
    EXPECT_EQ(tw_runtime_now_ns(crt, 3), 0u);
    EXPECT_EQ(tw_runtime_now_ns(nullptr, TW_CLOCK_MONOTONIC), 0u);
    EXPECT_EQ(tw_runtime_advance(crt, TW_MAX_DELAY_NS + 1), TW_EINVAL);
    EXPECT_EQ(tw_runtime_destroy(crt), TW_OK);
}

// 10,000 timers at random deadlines over three simulated hours, advanced in random
// steps: each fires in exactly the step that crosses its (rounded) deadline,
// never early, all in deadline order, ties in start order.
TEST(ManualClock, RandomTimersFireInTheStepThatCrossesTheirDeadlineInDeadlineOrder) {
    tw::Runtime rt(manual_config(1ms, 3));
    constexpr int kN = 10'000;
    const std::int64_t t0 = ns(rt.now(tw::TimerClock::monotonic));
    struct Fired {
        int index;
        std::int64_t at;
        int step;
    };
    std::vector<Fired> fired;
    std::vector<std::int64_t> rounded(kN);
    std::atomic<int> step{0};
    std::mt19937_64 rng(42);
    const std::int64_t res = 1'000'000;
    const std::int64_t epoch = t0;  // the runtime's tick epoch is its creation time: t0
    for (int i = 0; i < kN; ++i) {
        // Many ties: deadlines on a coarse grid of whole seconds for a third of them.
        std::int64_t delay = static_cast<std::int64_t>(rng() % 10'800'000'000'000ull);  // < 3 h
        if (i % 3 == 0) delay = delay / 1'000'000'000 * 1'000'000'000;
        const std::int64_t d = t0 + delay;
        rounded[static_cast<std::size_t>(i)] = epoch + (d - epoch + res - 1) / res * res;
        tw::StartOptions o;
        o.deadline = tw::TimePoint(tw::Duration(d));
        rt.start(o, [&, i] { fired.push_back({i, ns(rt.now(tw::TimerClock::monotonic)), step.load()}); });
    }
    std::int64_t now = t0;
    int steps = 0;
    while (now < t0 + 10'900'000'000'000) {
        const std::int64_t dt = static_cast<std::int64_t>(rng() % 2 ? rng() % 1'000'000 : rng() % 120'000'000'000);
        const std::size_t before = fired.size();
        const std::size_t ran = rt.advance(tw::Duration(dt));
        now += dt;
        ASSERT_EQ(ns(rt.now(tw::TimerClock::monotonic)), now);
        ASSERT_EQ(ran, fired.size() - before);
        // Exactly the timers whose rounded deadline lies in (previous now, now] fired in this step.
        for (std::size_t k = before; k < fired.size(); ++k) {
            const auto& f = fired[k];
            const std::int64_t r = rounded[static_cast<std::size_t>(f.index)];
            ASSERT_LE(r, now) << "fired before its deadline was crossed";
            ASSERT_GT(r, now - dt) << "fired in a later step than the one crossing its deadline";
            ASSERT_EQ(f.at, r) << "the clock stands at the deadline while its callback runs";
        }
        step.fetch_add(1);
        ++steps;
    }
    ASSERT_EQ(fired.size(), static_cast<std::size_t>(kN)) << steps << " steps";
    for (std::size_t k = 1; k < fired.size(); ++k) {
        const auto& a = fired[k - 1];
        const auto& b = fired[k];
        ASSERT_LE(rounded[static_cast<std::size_t>(a.index)], rounded[static_cast<std::size_t>(b.index)]) << k;
        if (rounded[static_cast<std::size_t>(a.index)] == rounded[static_cast<std::size_t>(b.index)]) {
            ASSERT_LT(a.index, b.index) << "ties run in start order";
        }
    }
}

TEST(ManualClock, ChainsAndPastDeadlinesStartedFromCallbacksRunInTheSameAdvanceInOrder) {
    tw::Runtime rt(manual_config());
    std::vector<std::string> order;
    std::function<void(int)> chain = [&](int depth) {
        order.push_back("chain" + std::to_string(depth));
        if (depth < 10) rt.start(1ms, [&, depth] { chain(depth + 1); });
    };
    const tw::TimePoint base = tw::TimePoint(rt.now(tw::TimerClock::monotonic));
    rt.start(1ms, [&] { chain(1); });
    // At 5 ms a callback starts a timer whose deadline (2.5 ms) is already
    // past; it runs in this advance, before the chain's later links.
    tw::StartOptions late;
    late.deadline = base + 5ms;
    rt.start(late, [&] {
        order.push_back("at5");
        tw::StartOptions past;
        past.deadline = base + 2500us;
        rt.start(past, [&] { order.push_back("past"); });
    });
    EXPECT_EQ(rt.advance(20ms), 12u);
    const std::vector<std::string> want = {"chain1", "chain2", "chain3", "chain4", "at5", "past",  "chain5",
                                           "chain6", "chain7", "chain8", "chain9", "chain10"};
    // chain4 runs at 4 ms, at5 at 5 ms (started first: before chain5 also at 5 ms), past at once.
    EXPECT_EQ(std::vector<std::string>(order.begin(), order.begin() + 4),
              std::vector<std::string>(want.begin(), want.begin() + 4));
    ASSERT_EQ(order.size(), 12u);
    EXPECT_EQ(order[4], "at5");
    EXPECT_EQ(order[5], "past");
    EXPECT_EQ(order.back(), "chain10");
}

TEST(ManualClock, PeriodicPoliciesCrossedKTimesByOneAdvance) {
    tw::Runtime rt(manual_config());
    struct Seen {
        int runs = 0;
        std::uint64_t missed = 0;
        std::vector<std::int64_t> at;
    };
    Seen skip, burst, delay;
    auto start = [&](tw::PeriodPolicy p, Seen& s) {
        tw::StartOptions o;
        o.delay = 10ms;
        o.period = 10ms;
        o.policy = p;
        return rt.start(o, [&rt, &s](tw::Timer self) {
            ++s.runs;
            s.missed = rt.query(self)->missed;
            s.at.push_back(ns(rt.now(tw::TimerClock::monotonic)));
        });
    };
    const std::int64_t t0 = ns(rt.now(tw::TimerClock::monotonic));
    const tw::Timer ts = start(tw::PeriodPolicy::skip, skip);
    const tw::Timer tb = start(tw::PeriodPolicy::burst, burst);
    const tw::Timer td = start(tw::PeriodPolicy::delay, delay);
    rt.advance(35ms);  // crosses 10, 20 and 30 ms: k = 3
    EXPECT_EQ(skip.runs, 1);
    EXPECT_EQ(skip.missed, 2u) << "skip: once, missed += k - 1";
    EXPECT_EQ(burst.runs, 3);
    EXPECT_EQ(burst.missed, 0u);
    EXPECT_EQ(delay.runs, 3) << "delay: each run 10 ms after the last one's end";
    EXPECT_EQ(delay.at, (std::vector<std::int64_t>{t0 + 10'000'000, t0 + 20'000'000, t0 + 30'000'000}));
    EXPECT_EQ(burst.at, (std::vector<std::int64_t>{t0 + 10'000'000, t0 + 20'000'000, t0 + 30'000'000}));
    // The next deadline stays on the grid: 40 ms.
    EXPECT_EQ(ns(rt.query(ts)->deadline.time_since_epoch()), t0 + 40'000'000);
    EXPECT_EQ(ns(rt.query(tb)->deadline.time_since_epoch()), t0 + 40'000'000);
    rt.advance(5ms);
    EXPECT_EQ(skip.runs, 2);
    EXPECT_EQ(skip.missed, 2u);
    EXPECT_EQ(burst.runs, 4);
    EXPECT_EQ(delay.runs, 4);
    EXPECT_TRUE(rt.stop(ts));
    EXPECT_TRUE(rt.stop(tb));
    EXPECT_TRUE(rt.stop(td));
}

TEST(ManualClock, StopsAndResetsFromCallbacksAndOtherThreadsAreHonoured) {
    tw::Runtime rt(manual_config());
    int a = 0, b = 0, c = 0;
    tw::Timer tb = rt.start(20ms, [&] { ++b; });
    tw::Timer tc = rt.start(30ms, [&] { ++c; });
    rt.start(10ms, [&] {
        ++a;
        EXPECT_TRUE(rt.stop(tb));
        EXPECT_TRUE(rt.reset(tc.id(), 1ms));  // now 11 ms
    });
    std::thread other([&] { rt.start(15ms, [&] { ++a; }); });
    other.join();
    EXPECT_EQ(rt.advance(12ms), 2u);
    EXPECT_EQ(a, 1);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(c, 1);
    EXPECT_EQ(rt.advance(10ms), 1u);
    EXPECT_EQ(a, 2);
}

TEST(ManualClock, ErrorsAndTheCallingContext) {
    tw::Runtime real(tw_test::small_config(1, 1));
    std::error_code ec;
    EXPECT_EQ(real.advance(1ms, ec), 0u);
    EXPECT_EQ(ec, tw::errc::invalid_argument) << "not a manual runtime";
    EXPECT_FALSE(real.is_manual_clock());
    EXPECT_NEAR(static_cast<double>(real.now(tw::TimerClock::monotonic).count()),
                static_cast<double>(clock_ns(CLOCK_MONOTONIC)), 1e8);

    tw::Runtime rt(manual_config());
    const auto caller = std::this_thread::get_id();
    std::thread::id ran_on;
    std::error_code inner;
    rt.start(1ms, [&] {
        ran_on = std::this_thread::get_id();
        rt.advance(1ms, inner);
    });
    EXPECT_EQ(rt.advance(-1ns, ec), 0u);
    EXPECT_EQ(ec, tw::errc::invalid_argument);
    EXPECT_EQ(rt.advance(2ms), 1u);
    EXPECT_EQ(ran_on, caller) << "callbacks run on the advancing thread";
    EXPECT_EQ(inner, tw::errc::would_deadlock);
    rt.shutdown();
    EXPECT_EQ(rt.advance(1ms, ec), 0u);
    EXPECT_EQ(ec, tw::errc::shutting_down);

    tw_runtime* crt = nullptr;
    ASSERT_EQ(tw_runtime_create(nullptr, &crt), TW_OK);
    EXPECT_EQ(tw_runtime_advance(crt, 1), TW_EINVAL);
    EXPECT_EQ(tw_runtime_advance(nullptr, 1), TW_EINVAL);
    EXPECT_EQ(tw_runtime_destroy(crt), TW_OK);
}

TEST(ManualClock, QueueBoundTimersAreDeliveredToTheirQueue) {
    tw::Runtime rt(manual_config());
    tw::Queue q(rt);
    int ran = 0;
    tw::StartOptions o;
    o.delay = 5ms;
    o.queue = &q;
    rt.start(o, [&] { ++ran; });
    EXPECT_EQ(rt.advance(10ms), 0u) << "not run by advance";
    EXPECT_EQ(ran, 0);
    EXPECT_EQ(q.run(16, 0ms), 1u);
    EXPECT_EQ(ran, 1);
}

// What a user's "30 s idle timeout" test costs with the manual clock.
TEST(ManualClock, AThirtySecondIdleTimeoutIsTestedWithoutWaiting) {
    const auto wall0 = std::chrono::steady_clock::now();
    tw::Runtime rt(manual_config());
    bool closed = false;
    const tw::Timer idle = rt.start(30s, [&] { closed = true; });
    rt.advance(20s);
    EXPECT_TRUE(rt.reset(idle, 30s)) << "activity at 20 s";
    rt.advance(29999ms);
    EXPECT_FALSE(closed);
    rt.advance(1ms);
    EXPECT_TRUE(closed);
    const auto wall = std::chrono::steady_clock::now() - wall0;
    EXPECT_LT(wall, 2s);
    std::printf("[ manual  ] a 30 s idle-timeout test took %.3f ms of wall time\n",
                std::chrono::duration<double, std::milli>(wall).count());
}

TEST(ManualClock, WallClockTimersOnAManualRuntimeFollowItsRealtimeClock) {
    tw_runtime* rt = nullptr;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.flags = TW_CONFIG_MANUAL_CLOCK;
    ASSERT_EQ(tw_runtime_create(&cfg, &rt), TW_OK);
    static std::atomic<std::uint64_t> at{0};
    static tw_runtime* s_rt = nullptr;
    s_rt = rt;
    tw_timer_spec spec;
    tw_timer_spec_init(&spec);
    spec.clock = TW_CLOCK_REALTIME;
    const std::uint64_t d = tw_runtime_now_ns(rt, TW_CLOCK_REALTIME) + 5'000'000'000ull;
    spec.deadline_ns = d;
    spec.callback = [](void*, tw_timer) { at = tw_runtime_now_ns(s_rt, TW_CLOCK_REALTIME); };
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt, &spec, &id), TW_OK);
    tw_timer_info info;
    tw_timer_info_init(&info);
    ASSERT_EQ(tw_timer_query(rt, id, &info), TW_OK);
    EXPECT_GE(info.deadline_ns, d);
    EXPECT_EQ(info.deadline_ns, d) << "the deadline on the timer's clock (exact)";
    EXPECT_EQ(info.clock, TW_CLOCK_REALTIME);
    EXPECT_EQ(tw_runtime_advance(rt, 4'999'000'000ull), 0);
    EXPECT_EQ(tw_runtime_advance(rt, 1'000'000ull), 1);
    EXPECT_GE(at.load(), d);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
}

// ---- boot time and the wall clock (the machine's clocks) -------------------------

TEST(Boottime, FiresAndIsNeverEarlyAgainstCLOCK_BOOTTIME) {
    tw::Runtime rt(tw_test::small_config(1, 1));
    std::atomic<std::int64_t> at{0};
    tw::StartOptions o;
    o.clock = tw::TimerClock::boottime;
    const std::int64_t d = clock_ns(CLOCK_BOOTTIME) + 20'000'000;
    o.deadline = tw::TimePoint(tw::Duration(d));
    rt.start(o, [&] { at = clock_ns(CLOCK_BOOTTIME); });
    o.deadline = {};
    o.delay = 30ms;
    std::atomic<std::int64_t> at2{0};
    const std::int64_t d2 = clock_ns(CLOCK_BOOTTIME) + 30'000'000;
    rt.start(o, [&] { at2 = clock_ns(CLOCK_BOOTTIME); });
    ASSERT_TRUE(wait_until([&] { return at.load() != 0 && at2.load() != 0; }));
    EXPECT_GE(at.load(), d);
    EXPECT_GE(at2.load(), d2);
}

namespace {
// A timer on CLOCK_REALTIME, `delay_ns` from now, whose callback stores
// that clock's now in *at (a static of the test's: the callback may run
// after a failed test returned).
tw_timer_spec realtime_spec(std::uint64_t delay_ns, std::atomic<std::uint64_t>* at) {
    tw_timer_spec spec;
    tw_timer_spec_init(&spec);
    spec.clock = TW_CLOCK_REALTIME;
    spec.delay_ns = delay_ns;
    spec.callback = [](void* arg, tw_timer) {
        static_cast<std::atomic<std::uint64_t>*>(arg)->store(tw_now_ns_clock(TW_CLOCK_REALTIME));
    };
    spec.arg = at;
    return spec;
}
}  // namespace

TEST(Realtime, AFiftyMillisecondTimerFiresNotEarly) {
    tw_runtime* rt = nullptr;
    ASSERT_EQ(tw_runtime_create(nullptr, &rt), TW_OK);
    static std::atomic<std::uint64_t> at{0};
    const std::uint64_t t0 = tw_now_ns_clock(TW_CLOCK_REALTIME);
    const tw_timer_spec spec = realtime_spec(50'000'000, &at);
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt, &spec, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return at.load() != 0; }));
    EXPECT_GE(at.load(), t0 + 50'000'000);
    EXPECT_NEAR(static_cast<double>(tw_now_ns_clock(TW_CLOCK_REALTIME)), static_cast<double>(clock_ns(CLOCK_REALTIME)),
                1e8);
    EXPECT_EQ(tw_now_ns_clock(7), 0u);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
}

namespace {
// Starts a timer on rt's realtime clock at `deadline` (ns) that stores that
// clock's now in `at` when it runs.
tw::Timer start_realtime_at(tw::Runtime& rt, std::int64_t deadline, std::atomic<std::int64_t>& at) {
    tw::StartOptions o;
    o.clock = tw::TimerClock::realtime;
    o.deadline = tw::TimePoint(tw::Duration(deadline));
    return rt.start(o, [&rt, &at] { at = rt.now(tw::TimerClock::realtime).count(); });
}
}  // namespace

TEST(Realtime, ClockSetForwardPastTheDeadlineFiresThen) {
    ShiftGuard restore;
    tw::Runtime rt(tw_test::small_config(2, 1));
    std::atomic<std::int64_t> at{0};
    const std::int64_t d = rt.now(tw::TimerClock::realtime).count() + 3600'000'000'000;  // in an hour
    const tw::Timer t = start_realtime_at(rt, d, at);
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(at.load(), 0);
    const auto stepped = std::chrono::steady_clock::now();
    tickwheel::rt::test_hooks::realtime_shift_ns.store(3601'000'000'000);  // the wall clock jumps 1 h 1 s ahead
    ASSERT_TRUE(wait_until([&] { return at.load() != 0; }));
    const auto after = std::chrono::steady_clock::now() - stepped;
    EXPECT_GE(at.load(), d) << "never early on its own clock";
    if (!tw_test::kSanitized) {
        EXPECT_LT(after, 2s) << "noticed within a shard pass (<= 100 ms) plus scheduling";
    }
    // The callback stored `at` while it ran: the one-shot is gone once it
    // returned and its record was released (not at once: TSan, a full
    // ctest run, found it still RUNNING).
    EXPECT_TRUE(wait_until([&] { return !rt.query(t); })) << "the one-shot stayed live after its run";
}

TEST(Realtime, ClockSetBackMakesPendingTimersWaitForTheirDeadlineAgain) {
    ShiftGuard restore;
    tw::Runtime rt(tw_test::small_config(1, 1));
    std::atomic<std::int64_t> at{0};
    // Two seconds out: far more than this thread can be delayed before it
    // steps the clock back (the timer must still be pending then).
    const std::int64_t d = rt.now(tw::TimerClock::realtime).count() + 2'000'000'000;
    const auto mono_deadline = std::chrono::steady_clock::now() + 2s;
    const tw::Timer t = start_realtime_at(rt, d, at);
    // Several steps back and forth (each re-files it), ending an hour back.
    for (const std::int64_t shift : {-3600'000'000'000LL, -1800'000'000'000LL, -5400'000'000'000LL, -3600'000'000'000LL}) {
        tickwheel::rt::test_hooks::realtime_shift_ns.store(shift);
        std::this_thread::sleep_for(120ms);  // a shard pass (<= 100 ms) notices each step
    }
    std::this_thread::sleep_until(mono_deadline + 300ms);  // past the deadline's monotonic equivalent
    EXPECT_EQ(at.load(), 0) << "the wall clock has not reached the deadline again";
    const auto info = rt.query(t);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->state, tw::TimerStatus::pending);
    EXPECT_EQ(info->deadline.time_since_epoch().count(), d)
        << "its deadline on the wall clock is unchanged, exactly: re-filing adds no rounding";
    tickwheel::rt::test_hooks::realtime_shift_ns.store(0);  // and forward again, past it
    ASSERT_TRUE(wait_until([&] { return at.load() != 0; }));
    EXPECT_GE(at.load(), d);
}

TEST(Realtime, ResetAtIsOnTheTimersClockAndUnknownClocksAreInvalid) {
    tw_runtime* rt = nullptr;
    ASSERT_EQ(tw_runtime_create(nullptr, &rt), TW_OK);
    static std::atomic<std::uint64_t> at{0};
    tw_timer_spec spec = realtime_spec(3600'000'000'000ull, &at);
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt, &spec, &id), TW_OK);
    const std::uint64_t d = tw_now_ns_clock(TW_CLOCK_REALTIME) + 30'000'000;
    ASSERT_EQ(tw_timer_reset_at(rt, id, d), TW_OK);
    ASSERT_TRUE(wait_until([&] { return at.load() != 0; }));
    EXPECT_GE(at.load(), d);
    for (const int bad : {-1, 3, 100}) {
        spec.clock = bad;
        EXPECT_EQ(tw_timer_start_ex(rt, &spec, &id), TW_EINVAL) << bad;
    }
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
}
