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

// ---- a reading from a signal handler, between a resync and its publication --
// (issue 31, S2) A signal handler may interrupt a thread at any instruction
// and start a timer: read the bound itself, and even re-synchronise. The
// hook 'S' (clock.cpp, resync) runs between the thread's new pair being
// taken and being published, on the same thread, as such a handler would:
// it reads the bound there, and on every other call first forgets the pair
// so that its reading re-synchronises (stores a newer pair, which the
// interrupted resync then replaces with its older one). Every bound, in the
// hook and after it, must be at or after an exact reading taken before it.
// Before the fix, tsc0 was stored before mono0 and the hook sat between the
// two stores: the nested reading extended the old mono0 from the new tsc0
// (from 0, on a thread's first pair) -- up to kResyncNs and more below the
// clock, on the first call.
namespace {
namespace hooks = tickwheel::rt::test_hooks;
thread_local bool t_reenter = false;      // this thread's hook calls re-enter the clock
thread_local bool t_in_hook = false;      // (not from the re-entered reading's own resync)
thread_local long t_hook_calls = 0, t_hook_below = 0, t_hook_nested_resyncs = 0;
thread_local std::int64_t t_hook_worst = 0;  // how far below the clock, at worst (ns)
void reenter_hook(const void*, char what) {
    if (what != 'S' || !t_reenter || t_in_hook) return;
    t_in_hook = true;
    ++t_hook_calls;
    if (t_hook_calls % 2 == 0) {
        fc::testing::forget_thread();  // this reading re-synchronises: a newer pair, stored inside the window
        ++t_hook_nested_resyncs;
    }
    const std::int64_t before = exact_ns();
    const std::int64_t u = fc::monotonic_upper_ns();
    if (u < before) {
        ++t_hook_below;
        t_hook_worst = std::max(t_hook_worst, before - u);
    }
    t_in_hook = false;
}
struct ReenterGuard {
    ReenterGuard() {
        t_reenter = true;
        hooks::in_window.store(&reenter_hook);
    }
    ~ReenterGuard() {
        hooks::in_window.store(nullptr);
        t_reenter = false;
    }
};
}  // namespace

TEST(FastClock, AReadingBetweenAResyncAndItsPublicationIsNeverBelowTheClock) {
    if (prepare_and_calibrate() != fc::Mode::kOn) GTEST_SKIP() << "the TSC path is not used on this machine";
    t_hook_calls = t_hook_below = t_hook_nested_resyncs = 0;
    t_hook_worst = 0;
    long below_after = 0, reads = 0;
    {
        ReenterGuard guard;
        // Each round: a resync forced (the pair forgotten: a thread's first
        // reading, tsc0 = 0 before it), then readings for ~60 us (past
        // kResyncNs: at least one resync of the ordinary kind).
        for (int round = 0; round < 400; ++round) {
            if (round % 4 == 0) fc::testing::forget_thread();
            const std::int64_t until = exact_ns() + 60'000;
            for (;;) {
                const std::int64_t before = exact_ns();
                const std::int64_t u = fc::monotonic_upper_ns();
                ++reads;
                if (u < before) ++below_after;
                if (before >= until) break;
            }
        }
    }
    ASSERT_GT(t_hook_calls, 100) << "the hook between a resync's pair and its publication was rarely reached";
    EXPECT_GT(t_hook_nested_resyncs, 50);
    EXPECT_EQ(t_hook_below, 0) << "readings from inside a resync's window below the clock, of " << t_hook_calls
                               << "; the worst by " << t_hook_worst << " ns";
    EXPECT_EQ(below_after, 0) << "readings after such a window below the clock, of " << reads;
    EXPECT_EQ(fc::mode(), fc::Mode::kOn) << "the check found a bound below the clock";
}

// ---- the margin and the raised rate (the 1.5 mutation survivor) ---------------
// The published rate is what the calibration measured, raised by 1/256;
// kUpperMarginNs is added to every bound. Where the kernel clocks on the TSC,
// CLOCK_MONOTONIC runs at the TSC's rate times what NTP sets, which moves by
// up to 2000 ppm after the calibration. So make that happen: scale the
// published rate down by 2000 ppm (CLOCK_MONOTONIC now runs that much faster
// than the bound extends), and read. Every bound must stay at or after the
// exact reading before it; and the raise (~3900 ppm) absorbs that rate
// change, so the check must not switch the TSC off either. Mutation check:
// with kUpperMarginNs = 0 and the rate not raised, bounds fall up to ~100 ns
// below the clock within a thread's first 50 us and the check switches the
// TSC off; without the raise alone, the TSC switches off.
namespace {
struct SlowedReadings {
    long reads = 0, below = 0;
    std::int64_t worst = 0;
};
/// Calibrates afresh, scales the published rate by (1 - ppm / 1e6), and
/// reads exact, bound on this thread until `for_ns` passed or the TSC was
/// switched off. Returns false (nothing read) where the TSC path is not used.
bool read_with_slowed_rate(std::int64_t ppm, std::int64_t for_ns, SlowedReadings& out) {
    if (prepare_and_calibrate() != fc::Mode::kOn) return false;
    const std::uint64_t mult = fc::g_published.mult.load();
    fc::testing::set_mult(mult - static_cast<std::uint64_t>(static_cast<unsigned __int128>(mult) * ppm / 1'000'000));
    fc::testing::forget_thread();  // a pair taken from now on, extended at the slower rate
    const std::int64_t until = exact_ns() + for_ns;
    for (;;) {
        const std::int64_t before = exact_ns();
        const std::int64_t u = fc::monotonic_upper_ns();
        ++out.reads;
        if (u < before) {
            ++out.below;
            out.worst = std::max(out.worst, before - u);
        }
        if (before >= until || fc::mode() != fc::Mode::kOn) break;
    }
    return true;
}
}  // namespace

TEST(FastClock, ARateSlowedBy2000PpmAfterCalibrationKeepsEveryBoundAboveTheClockAndTheTscOn) {
    // Five calibrations (10 ms each), 30 ms of readings after each.
    for (int rep = 0; rep < 5; ++rep) {
        SlowedReadings r;
        if (!read_with_slowed_rate(2000, 30'000'000, r)) GTEST_SKIP() << "the TSC path is not used on this machine";
        EXPECT_EQ(r.below, 0) << "round " << rep << ": bounds below the clock, of " << r.reads << "; the worst by "
                              << r.worst << " ns";
        EXPECT_EQ(fc::mode(), fc::Mode::kOn)
            << "round " << rep << ": a 2000 ppm rate change switched the TSC off (the raise absorbs it)";
        EXPECT_GT(r.reads, 1000);
    }
}

// Beyond the raise: a rate slowed by 2% (the check's documented reach is 4%
// over kResyncNs) falls behind the clock by up to ~800 ns per 50 us; the
// margin alone keeps every bound above it until the thread's next
// re-synchronisation finds the bound low and switches the TSC off.
// Mutation check: with kUpperMarginNs = 0, bounds fall below the clock.
TEST(FastClock, ARateSlowedBy2PercentKeepsEveryBoundAboveTheClockUntilTheCheckSwitchesItOff) {
    for (int rep = 0; rep < 5; ++rep) {
        SlowedReadings r;
        if (!read_with_slowed_rate(20'000, 30'000'000, r)) GTEST_SKIP() << "the TSC path is not used on this machine";
        EXPECT_EQ(r.below, 0) << "round " << rep << ": bounds below the clock, of " << r.reads << "; the worst by "
                              << r.worst << " ns";
        EXPECT_EQ(fc::mode(), fc::Mode::kOff) << "round " << rep << ": the check did not see a 2% rate change";
    }
}
