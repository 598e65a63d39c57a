// SPDX-License-Identifier: MIT OR Apache-2.0
// The runtime's clock and its tick arithmetic.
//
// Deadlines are CLOCK_MONOTONIC nanoseconds (std::chrono::steady_clock). The
// wheels count ticks of `resolution` ns since the runtime's epoch. The two
// roundings below are what makes "never early" hold:
//   deadline tick = ceil((deadline_ns - epoch) / res)   (round the deadline up)
//   now tick      = floor((now_ns - epoch) / res)       (round now down)
// A timer fires when now tick >= deadline tick, hence now_ns >= deadline_ns.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <limits>

#include "runtime/test_hooks.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::rt {

/// CLOCK_MONOTONIC now, read as it is (no schedule point).
inline std::int64_t raw_monotonic_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

/// CLOCK_MONOTONIC now (a schedule point: test_hooks::perturb('m')).
inline std::int64_t monotonic_ns() noexcept {
    test_hooks::perturb('m');
    return raw_monotonic_ns();
}

// ---- the start path's reading: an upper bound of CLOCK_MONOTONIC -----------
// A start with a relative delay needs "now" only to add the delay to it, and
// only one promise rests on that reading: the timer must not fire before
// `delay` has passed since the call. Any reading at or after the call keeps
// it; one a little later only makes the timer as much later. clock_gettime()
// (the vDSO) gives the exact reading, but it orders its TSC read (RDTSCP or
// LFENCE; RDTSC) after every earlier instruction: the start then waits for
// whatever the caller's previous calls left in flight -- the cache misses of
// the timer it just stopped, above all. Measured on the 2-vCPU EPYC VM with
// bench/peers (a start+stop pair through the C ABI, 1 K pending, 4
// interleaved rounds of variants built to measure): 75.7 ns with
// clock_gettime, 61.3 ns with a TSC bound read by RDTSC, 76.6 ns with the same
// bound read by RDTSCP (ordered): the order costs the time, not the call.
// This implementation: 73.0 -> 63.8 ns (design/performance.md, "The start's
// clock reading").
//
// monotonic_upper_ns() therefore reads the TSC unordered and extends a
// thread's last exact reading by it:
//
//   upper = mono0 + (tsc - tsc0) * rate_hi + kUpperMarginNs
//
// where (tsc0, mono0) is a pair this thread took at most kResyncNs ago (tsc0
// read before mono0's clock_gettime, so tsc - tsc0 over-counts the time
// since mono0), rate_hi the TSC's period measured against CLOCK_MONOTONIC
// over >= kCalibrationNs and raised by 1/256 (~3900 ppm), and kUpperMarginNs
// covers the unordered read running ahead of the call (an older instruction
// still in flight -- a DRAM miss, a page walk -- for at most a few hundred
// ns). Where the kernel clocks on the TSC, CLOCK_MONOTONIC *is* the TSC times
// a rate that NTP moves by at most 500 ppm of frequency and 500 ppm of phase
// slew either way: at most 2000 ppm from the rate measured, half the raise.
// So the bound is never below the exact reading and at most about
// kUpperMarginNs + a pair's bracket (<= kMaxBracketTicks, ~1 us) + 200 ns
// above it: deadlines are rounded up to a tick anyway, and a timer due in
// the last microseconds of a tick moves to the next tick's start, no later
// than its tick-mates.
//
// Signal handlers (issue 31, S2). A handler may interrupt this thread at any
// instruction and read the clock itself (a start from a handler), and may
// re-synchronise, i.e. store a newer pair. So the pair is published with one
// 16-byte store (clock.cpp, store_pair: a handler sees the old pair or the
// new one, never a mix), and the reading loads tsc0 before mono0 (a signal
// fence between): a handler's newer pair landing between the two loads gives
// (older tsc0, newer mono0), a later bound, never a lower one. A resync
// interrupted by a handler that re-synchronised stores its own, older pair
// afterwards: still a pair, still a bound. (Before, tsc0 was stored before
// mono0: a handler between the two stores extended the old mono0 from the
// new tsc0 -- a bound up to kResyncNs below the clock. Forced by
// FastClock.AReadingBetweenAResyncAndItsPublicationIsNeverBelowTheClock,
// through test_hooks 'S'.)
//
// It is used only where the machine's kernel keeps CLOCK_MONOTONIC on the
// TSC (clocksource "tsc", which requires an invariant TSC synchronised across
// CPUs) on x86-64, after a calibration of kCalibrationNs, and unless
// TICKWHEEL_TSC=0 is set in the environment; elsewhere, or until then, it is
// clock_gettime(). Each re-synchronisation also checks the bound against the
// exact reading: a bound found below it (the TSC's rate changed: a migrated
// VM, a kernel that gave the TSC up) switches the TSC off for the process
// (fast_clock::mode() == Mode::kOff). A timer started in the <= 50 us
// before that check counted from a bound off by at most the rate's error
// over 50 us, which kUpperMarginNs covers unless the rate moved by more
// than 4%.
// Used for "now + delay" on the monotonic clock: starts (start_plain,
// start_args), resets and their batches (Readings::mono_upper). Everything
// that compares a reading with a deadline (the shard's firing, absolute
// deadlines, other clocks' offsets, clock steps) reads the exact clock.
//
// No lock, no waiting, fork-safe (issue 31, bug 2 and S3): the decision
// (kUnknown -> kDeciding -> kCalibrating or kOff) and the end of the
// calibration (kCalibrating -> kFinishing -> kOn or kOff) are each taken by
// one thread with a CAS; every other thread goes on at once with the exact
// clock meanwhile (the published rate stays 0 until kOn). A fork() child
// whose parent was inside either step (in another thread, or in the forking
// thread itself) gets it undone by after_fork_in_child() (fork.cpp): the
// decision back to kUnknown (the next prepare() decides afresh), the end of
// the calibration back to kCalibrating (the next re-synchronisation ends it:
// the calibration's first pair is valid). A thread that resumes such a step
// in the child finds its final CAS failed and drops its result. (Before, a
// std::mutex was held through both steps: a child forked meanwhile never
// returned from its first tw_runtime_create(), and one forked at the end of
// the calibration calibrated for ever. Forced by fork_anywhere_test through
// test_hooks 'C'.)
namespace fast_clock {
enum class Mode : int {
    kUnknown = 0,
    kCalibrating = 1,
    kOn = 2,
    kOff = -1,
    kDeciding = 3,   // transient: one thread decides (prepare)
    kFinishing = 4,  // transient: one thread ends the calibration (resync)
};
/// Guards "never early" against what the unordered TSC read runs ahead of
/// the call and against a rate change between two checks (up to 4% over
/// kResyncNs). It and the rate's raise (1/256, clock.cpp
/// finish_calibration) are guarded by these tests of fast_clock_test:
///   FastClock.ARateSlowedBy2000PpmAfterCalibrationKeepsEveryBoundAboveTheClockAndTheTscOn
///     the published rate slowed by 2000 ppm (what NTP may do): fails
///     without the margin and the raise (bounds ~80 ns below the clock),
///     and without the raise alone (the check switches the TSC off);
///   FastClock.ARateSlowedBy2PercentKeepsEveryBoundAboveTheClockUntilTheCheckSwitchesItOff
///     beyond the raise: fails without the margin alone (~800 ns below).
inline constexpr std::int64_t kUpperMarginNs = 2000;
inline constexpr std::int64_t kCalibrationNs = 10'000'000;
inline constexpr std::int64_t kResyncNs = 50'000;

// Published once calibrated: `mult` = rate_hi * 2^32 (ns per TSC tick,
// fixed point, rounded up), `resync_ticks` = kResyncNs in TSC ticks; 0 while
// not on, so that every reading takes the slow path. resync_ticks is stored
// after mult (release) and read before it (acquire).
struct alignas(64) Published {
    std::atomic<std::uint64_t> resync_ticks{0};
    std::atomic<std::uint64_t> mult{0};
};
extern Published g_published;
/// A pair: a TSC value read before an exact reading `mono0` (tsc0 == 0:
/// none yet). Stored with one 16-byte store (see "Signal handlers").
struct alignas(16) Pair0 {
    std::uint64_t tsc0;
    std::int64_t mono0;
};
// This thread's last exact pair.
[[gnu::tls_model("initial-exec")]] extern constinit thread_local Pair0 t_pair;

/// Decides, once per process, whether the TSC may be used (environment,
/// CPU, kernel clocksource) and starts its calibration. Called by every
/// runtime's construction; cheap after the first. Any thread; never waits
/// (a thread that finds another deciding returns at once).
void prepare() noexcept;
/// The current mode (tests, tw_runtime's diagnostics).
Mode mode() noexcept;
/// The slow path of monotonic_upper_ns(): an exact reading, kept as this
/// thread's pair; calibrates and checks the bound on the way.
std::int64_t resync() noexcept;
/// fork.cpp's child handler: undoes a decision or an end of calibration
/// that was in progress at the fork (see above). The child's only thread.
void after_fork_in_child() noexcept;

/// An upper bound of CLOCK_MONOTONIC now (see above). Any thread, and
/// signal handlers.
inline std::int64_t monotonic_upper_ns() noexcept {
#if defined(__x86_64__)
    test_hooks::perturb('m');
    const std::uint64_t limit = g_published.resync_ticks.load(std::memory_order_acquire);
    const std::uint64_t tsc0 = t_pair.tsc0;
    std::atomic_signal_fence(std::memory_order_seq_cst);  // tsc0 before mono0 (see "Signal handlers")
    const std::uint64_t d = __builtin_ia32_rdtsc() - tsc0;  // (a thread's first reading: huge)
    if (d >= limit) [[unlikely]]
        return resync();
    const std::uint64_t mult = g_published.mult.load(std::memory_order_relaxed);
    return t_pair.mono0 + static_cast<std::int64_t>((d * mult) >> 32) + kUpperMarginNs;
#else
    return monotonic_ns();
#endif
}

namespace testing {
/// Replaces the published rate by `mult` (ns per tick * 2^32): a rate too
/// low makes the next re-synchronisation find the bound below the clock.
void set_mult(std::uint64_t mult) noexcept;
/// Forgets this thread's pair (its next reading re-synchronises).
void forget_thread() noexcept;
/// Back to kUnknown, nothing published, this thread's pair forgotten: the
/// next prepare() decides and calibrates again. Only while no other thread
/// reads the clock or prepares it.
void reset() noexcept;
}  // namespace testing
}  // namespace fast_clock

/// The clocks a timer may count on (tw_timer_spec.clock, TimerClock).
enum class ClockId : std::uint8_t { Monotonic = 0, Boottime = 1, Realtime = 2 };
constexpr unsigned kClocks = 3;

/// The machine's clock `c` in ns (CLOCK_REALTIME plus the test seam's shift,
/// test_hooks::realtime_shift_ns).
std::int64_t system_clock_ns(ClockId c) noexcept;

/// Next deadline of a periodic timer: the first d + k*period > now, k >= 1.
constexpr tick_t next_period(tick_t d, std::uint64_t period, tick_t now) noexcept {
    if (now < d) return d + period;
    return d + ((now - d) / period + 1) * period;
}

/// Leeway (tw_timer_spec.leeway_ns): the tick a timer due at `tick` that
/// may run up to `window` ticks late is filed at -- the multiple of the
/// largest power of two that has one in [tick, tick + window], so that
/// timers whose windows overlap share a slot and a wake-up (the wheel's
/// coarser levels hold exactly such aligned ranges). Never before `tick`.
constexpr tick_t coalesce(tick_t tick, std::uint64_t window) noexcept {
    if (window == 0) return tick;
    // 2^k <= window + 1 always has a multiple in the window; try coarser first.
    for (unsigned k = 64 - static_cast<unsigned>(__builtin_clzll(window)); k > 0; --k) {
        const tick_t step = tick_t{1} << k;
        const tick_t up = (tick + step - 1) & ~(step - 1);
        if (up - tick <= window) return up;
    }
    return tick;
}

/// The clocks of one runtime: the machine's (system_clock_ns), or, for a
/// runtime with a manual clock (Config::manual_clock), three virtual clocks
/// that stand still until advance_to() moves them, together, forward. They
/// start at the machine's values at creation and keep those offsets.
///
/// A manual runtime's clocks stop at max_mono() (issue 31): every reading
/// of any of its clocks plus 2 x kMaxDelay (2^61 ns, the most a caller's
/// delay, period or leeway adds to one) stays below INT64_MAX, so "now +
/// delay" never overflows into the past (a timer started on a saturated
/// clock fired at once). The wall clock then reads 2^63 - 2^61 ns after
/// 1970 (the year 2189): advances beyond it run what is due up to it and
/// leave the clocks there.
class Clocks {
public:
    /// The headroom kept above every reading of a manual clock: 2 x
    /// kMaxDelay (runtime.hpp), so that a reading plus a delay plus a
    /// period (or a leeway) never overflows.
    static constexpr std::int64_t kHeadroomNs = std::int64_t{1} << 61;

    explicit Clocks(bool manual) noexcept : manual_(manual) {
        const std::int64_t mono = monotonic_ns();
        virt_.store(mono, std::memory_order_relaxed);
        offset_[0] = 0;
        offset_[1] = system_clock_ns(ClockId::Boottime) - mono;
        offset_[2] = system_clock_ns(ClockId::Realtime) - mono;
        std::int64_t above = 0;  // the largest offset of another clock above the monotonic one
        for (const std::int64_t o : offset_) above = o > above ? o : above;
        max_mono_ = std::numeric_limits<std::int64_t>::max() - kHeadroomNs - above;
    }
    bool manual() const noexcept { return manual_; }
    /// CLOCK_MONOTONIC now (the wheels' clock). Any thread.
    std::int64_t mono() const noexcept { return manual_ ? virt_.load(std::memory_order_acquire) : monotonic_ns(); }
    /// An upper bound of CLOCK_MONOTONIC now, at most ~2 us above it
    /// (fast_clock::monotonic_upper_ns): only for `now + delay`. Any thread.
    std::int64_t mono_upper() const noexcept {
        return manual_ ? virt_.load(std::memory_order_acquire) : fast_clock::monotonic_upper_ns();
    }
    /// Clock `c` now. Any thread.
    std::int64_t now(ClockId c) const noexcept {
        if (!manual_) return system_clock_ns(c);
        return virt_.load(std::memory_order_acquire) + offset_[static_cast<unsigned>(c)];
    }
    /// Manual clocks only: the latest monotonic time the clocks move to
    /// (see the class comment).
    std::int64_t max_mono() const noexcept { return max_mono_; }
    /// Manual clocks only: the monotonic time `ns` after `from` (a reading
    /// of mono()), capped at max_mono() -- never an overflow.
    std::int64_t mono_after(std::int64_t from, std::int64_t ns) const noexcept {
        return ns > max_mono_ - from ? max_mono_ : from + ns;
    }
    /// Manual clocks only: moves every clock to monotonic time `mono_ns`
    /// (capped at max_mono()), never back. Any thread: an advance steps it
    /// to each deadline it serves, and so does a delivery queue's run of a
    /// manual runtime's timer (RuntimeCore::call), concurrently -- so it is
    /// a CAS-max, never a load and a store (issue 31: a store of the smaller
    /// value after another thread's larger one moved the clock back).
    /// Hook 'V' (test_hooks.hpp) between the load and the CAS.
    void advance_to(std::int64_t mono_ns) noexcept {
        if (mono_ns > max_mono_) mono_ns = max_mono_;
        std::int64_t v = virt_.load(std::memory_order_relaxed);
        test_hooks::window(nullptr, 'V');
        while (mono_ns > v && !virt_.compare_exchange_weak(v, mono_ns, std::memory_order_release,
                                                            std::memory_order_relaxed)) {
        }
    }

private:
    bool manual_;
    std::atomic<std::int64_t> virt_{0};
    std::int64_t offset_[kClocks] = {};
    std::int64_t max_mono_ = 0;
};

class TickClock {
public:
    TickClock(std::int64_t epoch_ns, std::uint64_t resolution_ns) noexcept
        : epoch_(epoch_ns), res_(resolution_ns) {}

    std::uint64_t resolution_ns() const noexcept { return res_; }
    std::int64_t epoch_ns() const noexcept { return epoch_; }

    /// The first tick at or after `deadline_ns` (0 for anything before the epoch).
    tick_t deadline_tick(std::int64_t deadline_ns) const noexcept {
        if (deadline_ns <= epoch_) return 0;
        const auto d = static_cast<std::uint64_t>(deadline_ns - epoch_);
        return d / res_ + (d % res_ != 0);
    }
    /// The tick `now_ns` lies in (rounded down).
    tick_t now_tick(std::int64_t now_ns) const noexcept {
        if (now_ns <= epoch_) return 0;
        return static_cast<std::uint64_t>(now_ns - epoch_) / res_;
    }
    tick_t now_tick() const noexcept { return now_tick(monotonic_ns()); }
    /// The CLOCK_MONOTONIC time at which tick `t` begins.
    std::int64_t tick_start_ns(tick_t t) const noexcept {
        return epoch_ + static_cast<std::int64_t>(t * res_);
    }
    /// Period in ticks, rounded up, at least 1.
    std::uint64_t period_ticks(std::uint64_t period_ns) const noexcept {
        const std::uint64_t p = period_ns / res_ + (period_ns % res_ != 0);
        return p == 0 ? 1 : p;
    }

private:
    std::int64_t epoch_;
    std::uint64_t res_;
};

}  // namespace tickwheel::rt
