// SPDX-License-Identifier: MIT OR Apache-2.0
// The start path's upper bound of CLOCK_MONOTONIC: eligibility, calibration,
// re-synchronisation and the check that switches it off (clock.hpp,
// "the start path's reading").
#include "runtime/clock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace tickwheel::rt::fast_clock {

Published g_published;
[[gnu::tls_model("initial-exec")]] constinit thread_local std::uint64_t t_tsc0 = 0;
[[gnu::tls_model("initial-exec")]] constinit thread_local std::int64_t t_mono0 = 0;

namespace {

std::atomic<int> g_mode{static_cast<int>(Mode::kUnknown)};
std::mutex g_mutex;  // prepare() and the calibration's end: once per process each
// The calibration's first pair: written under g_mutex before g_mode moves to
// kCalibrating (release), read after an acquire of kCalibrating.
std::uint64_t g_cal_tsc_after = 0;  // the TSC read just after g_cal_mono
std::int64_t g_cal_mono = 0;

// A pair whose two TSC reads are further apart than this (the thread was
// preempted or interrupted between them) is not kept: its reading could be
// far from its TSC. <= 1 us at 2 GHz and up; clock_gettime takes ~20-50 ns.
constexpr std::uint64_t kMaxBracketTicks = 2000;

#if defined(__x86_64__)
struct Pair {
    std::uint64_t before;  // TSC read before the reading
    std::int64_t mono;
    std::uint64_t after;   // TSC read after it
};
Pair take_pair() noexcept {
    Pair p;
    p.before = __builtin_ia32_rdtsc();
    p.mono = raw_monotonic_ns();  // (the vDSO orders its own TSC read after ours)
    unsigned aux;
    p.after = __builtin_ia32_rdtscp(&aux);  // ordered after the reading
    return p;
}

bool invariant_tsc() noexcept {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(0x80000000u, &a, &b, &c, &d) == 0 || a < 0x80000007u) return false;
    if (__get_cpuid(0x80000007u, &a, &b, &c, &d) == 0) return false;
    return (d & (1u << 8)) != 0;  // CPUID.80000007H:EDX[8], invariant TSC
}

bool kernel_clocksource_is_tsc() noexcept {
    const int fd = ::open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[16] = {};
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    return n >= 3 && std::strncmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}

bool allowed_by_environment() noexcept {
    const char* v = std::getenv("TICKWHEEL_TSC");
    return v == nullptr || std::strcmp(v, "0") != 0;
}

void switch_off() noexcept {
    g_published.resync_ticks.store(0, std::memory_order_release);  // every reading takes the exact path
    g_mode.store(static_cast<int>(Mode::kOff), std::memory_order_release);
}

// The calibrating pair's rate, raised (clock.hpp): (mono_b - mono_a) ns over
// at least (b.before - a.after) ticks, * (1 + 1/256), as 2^32 fixed point,
// rounded up.
void finish_calibration(const Pair& b) noexcept {
    std::unique_lock lock(g_mutex, std::try_to_lock);
    if (!lock.owns_lock() || g_mode.load(std::memory_order_relaxed) != static_cast<int>(Mode::kCalibrating)) return;
    if (b.before <= g_cal_tsc_after || b.mono <= g_cal_mono) {
        switch_off();  // the TSC or the clock did not move forward with the other
        return;
    }
    const unsigned __int128 ns = static_cast<unsigned __int128>(b.mono - g_cal_mono) << 32;
    const std::uint64_t ticks = b.before - g_cal_tsc_after;
    const unsigned __int128 exact = ns / ticks + 1;
    if (exact >= (std::uint64_t{1} << 40)) {  // a TSC slower than ~4 MHz: not the clock this is for
        switch_off();
        return;
    }
    auto mult = static_cast<std::uint64_t>(exact);
    mult += (mult >> 8) + 1;
    // Ticks in kResyncNs: kResyncNs * 2^32 / mult (at least 1).
    const std::uint64_t resync =
        std::max<std::uint64_t>(1, static_cast<std::uint64_t>((static_cast<unsigned __int128>(kResyncNs) << 32) / mult));
    g_published.mult.store(mult, std::memory_order_relaxed);
    g_published.resync_ticks.store(resync, std::memory_order_release);
    g_mode.store(static_cast<int>(Mode::kOn), std::memory_order_release);
}
#endif

}  // namespace

void prepare() noexcept {
    if (g_mode.load(std::memory_order_acquire) != static_cast<int>(Mode::kUnknown)) return;
    std::lock_guard lock(g_mutex);
    if (g_mode.load(std::memory_order_relaxed) != static_cast<int>(Mode::kUnknown)) return;
#if defined(__x86_64__)
    if (allowed_by_environment() && invariant_tsc() && kernel_clocksource_is_tsc()) {
        for (int tries = 0; tries < 100; ++tries) {
            const Pair p = take_pair();
            if (p.after >= p.before && p.after - p.before <= kMaxBracketTicks) {
                g_cal_tsc_after = p.after;
                g_cal_mono = p.mono;
                g_mode.store(static_cast<int>(Mode::kCalibrating), std::memory_order_release);
                return;
            }
        }
    }
#endif
    g_mode.store(static_cast<int>(Mode::kOff), std::memory_order_release);
}

Mode mode() noexcept { return static_cast<Mode>(g_mode.load(std::memory_order_acquire)); }

std::int64_t resync() noexcept {
#if defined(__x86_64__)
    const auto m = static_cast<Mode>(g_mode.load(std::memory_order_acquire));
    if (m != Mode::kCalibrating && m != Mode::kOn) return raw_monotonic_ns();
    const Pair p = take_pair();
    if (p.after < p.before || p.after - p.before > kMaxBracketTicks) return p.mono;  // not kept (see kMaxBracketTicks)
    if (m == Mode::kCalibrating) {
        if (p.mono - g_cal_mono >= kCalibrationNs) finish_calibration(p);
    } else if (t_tsc0 != 0) {
        // The check: this thread's previous pair extended to now must not be
        // below the exact reading (at p.after, which is after the reading).
        if (p.after < t_tsc0) {
            switch_off();  // the TSC went back between two reads of this thread
            return p.mono;
        }
        const std::uint64_t mult = g_published.mult.load(std::memory_order_relaxed);
        const unsigned __int128 ext = (static_cast<unsigned __int128>(p.after - t_tsc0) * mult) >> 32;
        if (static_cast<unsigned __int128>(p.mono - t_mono0) > ext && p.mono > t_mono0) {
            switch_off();
            return p.mono;
        }
    }
    t_tsc0 = p.before;
    t_mono0 = p.mono;
    return p.mono;
#else
    return raw_monotonic_ns();
#endif
}

namespace testing {
void set_mult(std::uint64_t mult) noexcept { g_published.mult.store(mult, std::memory_order_relaxed); }
void forget_thread() noexcept { t_tsc0 = 0; }
void reset() noexcept {
    std::lock_guard lock(g_mutex);
    g_published.resync_ticks.store(0, std::memory_order_release);
    g_published.mult.store(0, std::memory_order_relaxed);
    g_mode.store(static_cast<int>(Mode::kUnknown), std::memory_order_release);
    t_tsc0 = 0;
}
}  // namespace testing

}  // namespace tickwheel::rt::fast_clock
