// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/parker.hpp"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include "runtime/test_hooks.hpp"

namespace tickwheel::rt {

namespace {
long futex(std::atomic<std::uint32_t>* addr, int op, std::uint32_t val, const timespec* ts,
           std::uint32_t bitset) noexcept {
    static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
    return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), op, val, ts, nullptr, bitset);
}
}  // namespace

void Parker::park_until(std::uint32_t seen, std::int64_t deadline_ns) noexcept {
    test_hooks::perturb('p');  // a schedule point (test_hooks.hpp): the check-to-sleep window
    if (deadline_ns < 0) {
        futex(&word_, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, seen, nullptr, FUTEX_BITSET_MATCH_ANY);
        return;
    }
    timespec ts;
    ts.tv_sec = static_cast<time_t>(deadline_ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(deadline_ns % 1'000'000'000);
    // With FUTEX_WAIT_BITSET the timeout is absolute, on CLOCK_MONOTONIC.
    futex(&word_, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, seen, &ts, FUTEX_BITSET_MATCH_ANY);
}

void Parker::unpark() noexcept {
    test_hooks::perturb('u');  // a schedule point: a late wake-up
    word_.fetch_add(1, std::memory_order_release);
    futex(&word_, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, nullptr, 0);
}

void set_precise_timer_slack() noexcept { prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); }

void set_thread_name(const char* name) noexcept { pthread_setname_np(pthread_self(), name); }

bool pin_to_cpu(unsigned cpu) noexcept {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

unsigned current_cpu() noexcept {
    const int c = sched_getcpu();
    return c < 0 ? 0u : static_cast<unsigned>(c);
}

}  // namespace tickwheel::rt
