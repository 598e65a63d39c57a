// SPDX-License-Identifier: MIT OR Apache-2.0
// The start path's reading of CLOCK_MONOTONIC (runtime/clock.hpp,
// fast_clock): an upper bound, never below the exact reading and at most a
// few microseconds above it; calibrated where the kernel clocks on the TSC,
// off with TICKWHEEL_TSC=0 (ctest runs this program a second time so) and
// switched off for good when a re-synchronisation finds the bound below the
// clock.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/clock.hpp"
#include "test_support.hpp"
#include "tickwheel/runtime.hpp"

namespace fc = tickwheel::rt::fast_clock;
namespace tw = tickwheel;
using namespace std::chrono_literals;

namespace {

std::int64_t exact_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

/// Whether this machine should run the TSC path: the kernel clocks on the
/// TSC (which implies an invariant one) and the environment does not say 0.
bool tsc_expected() {
#if defined(__x86_64__)
    const char* env = std::getenv("TICKWHEEL_TSC");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    std::string s;
    return static_cast<bool>(f >> s) && s == "tsc";
#else
    return false;
#endif
}

/// Starts from kUnknown, prepares, and reads until the calibration ended
/// (at most 200 ms: it needs kCalibrationNs = 10 ms).
fc::Mode prepare_and_calibrate() {
    fc::testing::reset();
    fc::prepare();
    const std::int64_t until = exact_ns() + 200'000'000;
    while (fc::mode() == fc::Mode::kCalibrating && exact_ns() < until) (void)fc::monotonic_upper_ns();
    return fc::mode();
}

// The one bound that "never early" rests on, and how far above the clock
// it may be: margin (2 us) + a pair's bracket (<= kMaxBracketTicks, <= 1 us
// at 2 GHz and up) + the rate's 1/256 over kResyncNs (~200 ns). 4 us covers
// all three.
constexpr std::int64_t kMaxAbove = 4'000;

}  // namespace

TEST(FastClock, CalibratesWhereTheKernelClocksOnTheTscAndNowhereElse) {
    const fc::Mode m = prepare_and_calibrate();
    if (tsc_expected()) {
        EXPECT_EQ(m, fc::Mode::kOn) << "the kernel clocks on the TSC, but the calibration did not end in 200 ms";
    } else {
        EXPECT_EQ(m, fc::Mode::kOff);
    }
}

// Four threads (two per core on the CI machine: they migrate and are
// preempted) read exact, bound, exact for 300 ms. Every bound is at or
// after the reading before it, and at most kMaxAbove after the one after it.
TEST(FastClock, NeverBelowTheExactReadingAndAtMostMicrosecondsAbove) {
    const fc::Mode m = prepare_and_calibrate();
    std::atomic<long> below{0}, above{0}, reads{0};
    std::atomic<std::int64_t> worst_above{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t) {
        ts.emplace_back([&] {
            const std::int64_t until = exact_ns() + 300'000'000;
            long n = 0;
            for (;;) {
                const std::int64_t before = exact_ns();
                const std::int64_t u = fc::monotonic_upper_ns();
                const std::int64_t after = exact_ns();
                ++n;
                if (u < before) below.fetch_add(1);
                if (u - after > kMaxAbove) above.fetch_add(1);
                std::int64_t w = worst_above.load();
                while (u - after > w && !worst_above.compare_exchange_weak(w, u - after)) {
                }
                if (after >= until) break;
            }
            reads.fetch_add(n);
        });
    }
    for (auto& t : ts) t.join();
    EXPECT_EQ(below.load(), 0) << "bounds below the exact reading taken before them, of " << reads.load();
    EXPECT_EQ(above.load(), 0) << "bounds more than " << kMaxAbove << " ns above the reading after them; worst "
                               << worst_above.load() << " ns";
    EXPECT_GT(reads.load(), 1000);
    EXPECT_EQ(fc::mode(), m) << "the check switched the TSC off: its bound was found below the clock";
}

// A rate too low (half the real one) makes the bound fall behind the clock:
// the next re-synchronisation finds it below the exact reading and switches
// the TSC off; the readings after it are the exact clock's.
TEST(FastClock, ABoundFoundBelowTheClockSwitchesTheTscOff) {
    if (prepare_and_calibrate() != fc::Mode::kOn) GTEST_SKIP() << "the TSC path is not used on this machine";
    const std::uint64_t mult = fc::g_published.mult.load();
    fc::testing::set_mult(mult / 2);
    fc::testing::forget_thread();
    (void)fc::monotonic_upper_ns();  // a pair, extended at half speed from here
    const std::int64_t until = exact_ns() + 20'000'000;  // 400 x kResyncNs
    while (fc::mode() == fc::Mode::kOn && exact_ns() < until) (void)fc::monotonic_upper_ns();
    EXPECT_EQ(fc::mode(), fc::Mode::kOff);
    EXPECT_EQ(fc::g_published.resync_ticks.load(), 0u) << "readings still take the TSC path";
    for (int i = 0; i < 1000; ++i) {
        const std::int64_t before = exact_ns();
        const std::int64_t u = fc::monotonic_upper_ns();
        ASSERT_GE(u, before);
        ASSERT_LE(u - exact_ns(), 0);
    }
}

// Through the runtime, after the calibration: a timer started with a delay
// never runs before the delay has passed since a reading taken before the
// call (the start read the bound), 3000 timers of 1-4 ms from two threads.
TEST(FastClock, TimersStartedOnTheBoundNeverFireEarly) {
    fc::testing::reset();  // (an earlier test of this program may have switched it off)
    tw::Config c = tw_test::small_config(2, 2);
    tw::Runtime rt(c);  // prepares the clock
    const std::int64_t until = exact_ns() + 200'000'000;
    while (fc::mode() == fc::Mode::kCalibrating && exact_ns() < until) (void)fc::monotonic_upper_ns();
    if (tsc_expected()) {
        ASSERT_EQ(fc::mode(), fc::Mode::kOn);
    }
    constexpr int kPerThread = 1500;
    std::atomic<int> fired{0}, early{0};
    std::atomic<std::int64_t> worst{0};
    auto starter = [&](int seed) {
        for (int i = 0; i < kPerThread; ++i) {
            const auto delay = std::chrono::microseconds(1000 + (i * 7 + seed * 13) % 3000);
            const std::int64_t before = exact_ns();
            const std::int64_t due = before + std::chrono::duration_cast<std::chrono::nanoseconds>(delay).count();
            (void)rt.start(delay, [&, due] {
                const std::int64_t at = exact_ns();
                if (at < due) {
                    early.fetch_add(1);
                    std::int64_t w = worst.load();
                    while (due - at > w && !worst.compare_exchange_weak(w, due - at)) {
                    }
                }
                fired.fetch_add(1);
            });
        }
    };
    std::thread a(starter, 1), b(starter, 2);
    a.join();
    b.join();
    ASSERT_TRUE(tw_test::wait_until([&] { return fired.load() == 2 * kPerThread; }, tw_test::kWait));
    EXPECT_EQ(early.load(), 0) << "fired early, the worst by " << worst.load() << " ns";
    EXPECT_NE(fc::mode(), fc::Mode::kCalibrating);
    if (tsc_expected()) {
        EXPECT_EQ(fc::mode(), fc::Mode::kOn);
    }
}
