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

#include "runtime/test_hooks.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::rt {

/// CLOCK_MONOTONIC now (a schedule point: test_hooks::perturb('m')).
inline std::int64_t monotonic_ns() noexcept {
    test_hooks::perturb('m');
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

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
class Clocks {
public:
    explicit Clocks(bool manual) noexcept : manual_(manual) {
        const std::int64_t mono = monotonic_ns();
        virt_.store(mono, std::memory_order_relaxed);
        offset_[0] = 0;
        offset_[1] = system_clock_ns(ClockId::Boottime) - mono;
        offset_[2] = system_clock_ns(ClockId::Realtime) - mono;
    }
    bool manual() const noexcept { return manual_; }
    /// CLOCK_MONOTONIC now (the wheels' clock). Any thread.
    std::int64_t mono() const noexcept { return manual_ ? virt_.load(std::memory_order_acquire) : monotonic_ns(); }
    /// Clock `c` now. Any thread.
    std::int64_t now(ClockId c) const noexcept {
        if (!manual_) return system_clock_ns(c);
        return virt_.load(std::memory_order_acquire) + offset_[static_cast<unsigned>(c)];
    }
    /// Manual clocks only: moves every clock to monotonic time `mono_ns`
    /// (never back). The caller serialises advances.
    void advance_to(std::int64_t mono_ns) noexcept {
        if (mono_ns > virt_.load(std::memory_order_relaxed)) virt_.store(mono_ns, std::memory_order_release);
    }

private:
    bool manual_;
    std::atomic<std::int64_t> virt_{0};
    std::int64_t offset_[kClocks] = {};
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
