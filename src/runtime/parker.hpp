// SPDX-License-Identifier: MIT OR Apache-2.0
// Parker: how a shard's driver thread sleeps until a deadline or a wake-up.
//
// A futex word that wakers bump. The sleeper reads the word (prepare), checks
// for work, then sleeps only if the word is unchanged (park_until). A wake-up
// that lands between the check and the sleep changes the word, so the futex
// call returns at once: no lost wake-ups. The timeout is an absolute
// CLOCK_MONOTONIC time (FUTEX_WAIT_BITSET), so the sleep ends at the tick
// boundary itself, not "about" there.
#pragma once

#include <atomic>
#include <cstdint>

namespace tickwheel::rt {

class Parker {
public:
    /// Snapshot to pass to park_until. Call before checking for work.
    std::uint32_t prepare() const noexcept { return word_.load(std::memory_order_acquire); }
    /// Sleeps until unpark() is called after prepare(), or until
    /// `deadline_ns` (CLOCK_MONOTONIC; < 0 = no deadline). Spurious returns
    /// are possible.
    void park_until(std::uint32_t seen, std::int64_t deadline_ns) noexcept;
    /// Wakes the sleeper (or makes its next park_until return at once).
    void unpark() noexcept;

private:
    std::atomic<std::uint32_t> word_{0};
};

/// Sets this thread's timer slack to 1 ns (Linux defaults to 50 us, which
/// would add up to 50 us of lateness to every sleep).
void set_precise_timer_slack() noexcept;
/// Names this thread (shows in top/gdb/perf). At most 15 characters.
void set_thread_name(const char* name) noexcept;
/// Pins this thread to `cpu`. Returns false if it could not.
bool pin_to_cpu(unsigned cpu) noexcept;
/// The CPU this thread runs on now (sched_getcpu), 0 if unknown.
unsigned current_cpu() noexcept;

}  // namespace tickwheel::rt
