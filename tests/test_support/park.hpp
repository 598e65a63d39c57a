// SPDX-License-Identifier: MIT OR Apache-2.0
// Parking one chosen thread at a test hook point (src/runtime/test_hooks.hpp,
// test_hooks::in_window), so that a test acts in exactly that window. The
// thread asks for it by setting t_park_me; at the hook point `what` it opens
// `parked` and waits (up to 120 s, only so that a failing test still ends)
// until the test opens `go`, once. On its way it opens `waiting` when it is
// about to wait in a stop_sync (hook point 'W'). One Parking at a time
// (HookGuard installs it; Unpark lets the thread go and joins it, also on a
// failed ASSERT). Shared by correctness_test and timer_fields_test.
//
// ThreadPark parks by thread id instead, spinning: the thread `who` (which
// names itself, or is named by arm()) parks the first time it reaches hook
// point `what` until release(); any other thread passing hook point
// `seen_at` sets `seen` (how a test learns that a second thread reached the
// window's mutex). Static state: the hook is a plain function that a
// library thread may still call after the test. Other tests keep parks of
// their own where they park by other rules (a record, libc calls).
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/test_hooks.hpp"
#include "../test_support.hpp"

namespace tw_test {

struct Parking {
    char what = 0;
    Gate parked, go, waiting;
};
inline Parking* g_parking = nullptr;
inline thread_local bool t_park_me = false;

inline void park_hook(const void*, char what) {
    if (!t_park_me || g_parking == nullptr) return;
    if (what == 'W') g_parking->waiting.open();
    if (what != g_parking->what) return;
    t_park_me = false;
    g_parking->parked.open();
    (void)g_parking->go.wait(std::chrono::seconds(120));
}

/// Installs `p` (and park_hook) for its life.
struct HookGuard {
    explicit HookGuard(Parking& p) {
        g_parking = &p;
        tickwheel::rt::test_hooks::in_window.store(&park_hook);
    }
    ~HookGuard() {
        tickwheel::rt::test_hooks::in_window.store(nullptr);
        g_parking = nullptr;
    }
    HookGuard(const HookGuard&) = delete;
    HookGuard& operator=(const HookGuard&) = delete;
};

/// Joins a parked thread when the test ends, also on a failed ASSERT.
struct Unpark {
    Parking& p;
    std::thread& t;
    ~Unpark() {
        p.go.open();
        if (t.joinable()) t.join();
    }
};

struct ThreadPark {
    static inline std::atomic<std::thread::id> who{};
    static inline std::atomic<char> what{0};
    static inline std::atomic<char> seen_at{0};
    static inline std::atomic<bool> parked{false};
    static inline std::atomic<bool> go{false};
    static inline std::atomic<bool> seen{false};
    static void hook(const void*, char w) {
        if (std::this_thread::get_id() != who.load()) {
            if (w == seen_at.load() && w != 0) seen.store(true);
            return;
        }
        if (w != what.load() || parked.load()) return;
        parked.store(true);
        while (!go.load()) std::this_thread::yield();
    }
    /// Installs the hook: `t` (none yet: it names itself later) parks at
    /// `at`; others passing `seen_at_point` (0: none) set `seen`.
    static void arm(std::thread::id t, char at, char seen_at_point = 0) {
        parked = false;
        go = false;
        seen = false;
        seen_at = seen_at_point;
        what = at;
        who = t;
        tickwheel::rt::test_hooks::in_window.store(&ThreadPark::hook);
    }
    static void release() { go = true; }
    ThreadPark() = default;
    explicit ThreadPark(char at, char seen_at_point = 0) { arm(std::thread::id{}, at, seen_at_point); }
    ThreadPark(const ThreadPark&) = delete;
    ThreadPark& operator=(const ThreadPark&) = delete;
    /// Releases the thread (also on a failed ASSERT) and unhooks.
    ~ThreadPark() {
        go = true;
        tickwheel::rt::test_hooks::in_window.store(nullptr);
    }
};

}  // namespace tw_test
