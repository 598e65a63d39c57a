// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/test_hooks.hpp"

#include <ctime>

#include "runtime/clock.hpp"

namespace tickwheel::rt::test_hooks {

std::atomic<void (*)(const void*, char)> in_window{nullptr};
std::atomic<std::uint32_t> first_generation{1};
std::atomic<std::int64_t> fail_inbox_posts{0};
std::atomic<void (*)(std::uint32_t, std::uint32_t)> freed{nullptr};
std::atomic<std::int64_t> realtime_shift_ns{0};
std::atomic<std::int64_t> fail_box_allocs{0};
std::atomic<void (*)(char)> schedule_point{nullptr};

}  // namespace tickwheel::rt::test_hooks

namespace tickwheel::rt {

std::int64_t system_clock_ns(ClockId c) noexcept {
    timespec ts{};
    if (c != ClockId::Monotonic) test_hooks::perturb('k');
    switch (c) {
        case ClockId::Monotonic: return monotonic_ns();
        case ClockId::Boottime: clock_gettime(CLOCK_BOOTTIME, &ts); break;
        case ClockId::Realtime: clock_gettime(CLOCK_REALTIME, &ts); break;
    }
    const std::int64_t ns = std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
    return c == ClockId::Realtime ? ns + test_hooks::realtime_shift_ns.load(std::memory_order_relaxed) : ns;
}

}  // namespace tickwheel::rt
