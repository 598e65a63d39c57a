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

#if defined(__x86_64__)
#include <cpuid.h>
#include <emmintrin.h>
#endif

namespace tickwheel::rt::fast_clock {

Published g_published;
[[gnu::tls_model("initial-exec")]] constinit thread_local Pair0 t_pair = {0, 0};

namespace {

constexpr int kUnknown = static_cast<int>(Mode::kUnknown);
constexpr int kDeciding = static_cast<int>(Mode::kDeciding);
constexpr int kCalibrating = static_cast<int>(Mode::kCalibrating);
constexpr int kFinishing = static_cast<int>(Mode::kFinishing);
constexpr int kOn = static_cast<int>(Mode::kOn);
constexpr int kOff = static_cast<int>(Mode::kOff);

// No lock (clock.hpp, "No lock, no waiting, fork-safe"): each once-per-process
// step is taken by a CAS of g_mode.
std::atomic<int> g_mode{kUnknown};
// The calibration's first pair (tsc0: the TSC read just after mono0):
// written by the decider before g_mode moves to kCalibrating (release),
// read after an acquire of kCalibrating.
Pair0 g_cal = {0, 0};

/// Publishes a pair with one instruction (a 16-byte aligned store): a signal
/// handler of this thread, or a fork child's thread that resumes here, sees
/// the whole old pair or the whole new one (clock.hpp, "Signal handlers").
inline void store_pair(Pair0& dst, std::uint64_t tsc0, std::int64_t mono0) noexcept {
#if defined(__x86_64__)
    const __m128i v = _mm_set_epi64x(mono0, static_cast<long long>(tsc0));
    asm volatile("movdqa %1, %0" : "=m"(dst) : "x"(v));
#else
    dst.tsc0 = tsc0;
    dst.mono0 = mono0;
#endif
}

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
    g_mode.store(kOff, std::memory_order_release);
}

// The calibrating pair's rate, raised (clock.hpp): (mono_b - mono_a) ns over
// at least (b.before - a.after) ticks, * (1 + 1/256), as 2^32 fixed point,
// rounded up. One thread ends the calibration (the CAS to kFinishing); the
// others go on with the exact clock meanwhile.
void finish_calibration(const Pair& b) noexcept {
    int expected = kCalibrating;
    if (!g_mode.compare_exchange_strong(expected, kFinishing, std::memory_order_acquire, std::memory_order_relaxed))
        return;  // another thread ends it (or did)
    // A schedule point inside the step (a fork here: after_fork_in_child).
    test_hooks::window(nullptr, 'C');
    const std::uint64_t cal_tsc_after = g_cal.tsc0;
    const std::int64_t cal_mono = g_cal.mono0;
    if (b.before <= cal_tsc_after || b.mono <= cal_mono) {
        switch_off();  // the TSC or the clock did not move forward with the other
        return;
    }
    const unsigned __int128 ns = static_cast<unsigned __int128>(b.mono - cal_mono) << 32;
    const std::uint64_t ticks = b.before - cal_tsc_after;
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
    // Fails only in a fork child whose handler undid this step (the rate
    // published is still a valid one: a re-synchronisation may end the
    // calibration again).
    expected = kFinishing;
    g_mode.compare_exchange_strong(expected, kOn, std::memory_order_release, std::memory_order_relaxed);
}
#endif

}  // namespace

void prepare() noexcept {
    int expected = kUnknown;
    if (g_mode.load(std::memory_order_acquire) != kUnknown) return;
    // One thread decides; a thread that finds it taken returns at once (its
    // runtime reads the exact clock until the mode is kOn): nobody waits for
    // the decider, and there is no lock a fork could copy held.
    if (!g_mode.compare_exchange_strong(expected, kDeciding, std::memory_order_acquire, std::memory_order_relaxed))
        return;
    // A schedule point inside the step (a fork here: after_fork_in_child).
    test_hooks::window(nullptr, 'C');
    int decided = kOff;
#if defined(__x86_64__)
    if (allowed_by_environment() && invariant_tsc() && kernel_clocksource_is_tsc()) {
        for (int tries = 0; tries < 100; ++tries) {
            const Pair p = take_pair();
            if (p.after >= p.before && p.after - p.before <= kMaxBracketTicks) {
                store_pair(g_cal, p.after, p.mono);
                decided = kCalibrating;
                break;
            }
        }
    }
#endif
    // Fails only in a fork child whose handler undid the decision: then the
    // next prepare() decides (or did) afresh.
    expected = kDeciding;
    g_mode.compare_exchange_strong(expected, decided, std::memory_order_release, std::memory_order_relaxed);
}

Mode mode() noexcept { return static_cast<Mode>(g_mode.load(std::memory_order_acquire)); }

std::int64_t resync() noexcept {
#if defined(__x86_64__)
    const int m = g_mode.load(std::memory_order_acquire);
    if (m != kCalibrating && m != kOn) return raw_monotonic_ns();
    // This thread's pair before the new one is taken: a signal handler that
    // re-synchronises in between leaves this copy an older pair, still one
    // (tsc0 loaded first, as in monotonic_upper_ns()).
    const std::uint64_t tsc0 = t_pair.tsc0;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    const std::int64_t mono0 = t_pair.mono0;
    const Pair p = take_pair();
    if (p.after < p.before || p.after - p.before > kMaxBracketTicks) return p.mono;  // not kept (see kMaxBracketTicks)
    if (m == kCalibrating) {
        if (p.mono - g_cal.mono0 >= kCalibrationNs) finish_calibration(p);
    } else if (tsc0 != 0) {
        // The check: this thread's previous pair extended to now must not be
        // below the exact reading (at p.after, which is after the reading).
        if (p.after < tsc0) {
            switch_off();  // the TSC went back between two reads of this thread
            return p.mono;
        }
        const std::uint64_t mult = g_published.mult.load(std::memory_order_relaxed);
        const unsigned __int128 ext = (static_cast<unsigned __int128>(p.after - tsc0) * mult) >> 32;
        if (static_cast<unsigned __int128>(p.mono - mono0) > ext && p.mono > mono0) {
            switch_off();
            return p.mono;
        }
    }
    // Between the new pair and its publication: a signal handler here reads
    // (and may replace) the old pair (tests force it, FastClock.AReading...).
    test_hooks::window(nullptr, 'S');
    store_pair(t_pair, p.before, p.mono);
    return p.mono;
#else
    return raw_monotonic_ns();
#endif
}

void after_fork_in_child() noexcept {
    const int m = g_mode.load(std::memory_order_relaxed);
    if (m == kDeciding) {
        g_mode.store(kUnknown, std::memory_order_relaxed);  // the decider is gone (or resumes and finds its CAS failed)
    } else if (m == kFinishing) {
        // The calibration's first pair is valid: the next re-synchronisation
        // ends it. Nothing published meanwhile.
        g_published.resync_ticks.store(0, std::memory_order_relaxed);
        g_published.mult.store(0, std::memory_order_relaxed);
        g_mode.store(kCalibrating, std::memory_order_relaxed);
    } else if (m == kOn && g_published.resync_ticks.load(std::memory_order_relaxed) == 0) {
        g_mode.store(kOff, std::memory_order_relaxed);  // forked inside switch_off()
    }
}

namespace testing {
void set_mult(std::uint64_t mult) noexcept { g_published.mult.store(mult, std::memory_order_relaxed); }
void forget_thread() noexcept { t_pair.tsc0 = 0; }
void reset() noexcept {
    g_published.resync_ticks.store(0, std::memory_order_release);
    g_published.mult.store(0, std::memory_order_relaxed);
    g_mode.store(kUnknown, std::memory_order_release);
    t_pair.tsc0 = 0;
}
}  // namespace testing

}  // namespace tickwheel::rt::fast_clock
