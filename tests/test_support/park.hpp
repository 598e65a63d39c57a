// SPDX-License-Identifier: MIT OR Apache-2.0
// Parking one chosen thread at a test hook point (src/runtime/test_hooks.hpp,
// test_hooks::in_window), so that a test acts in exactly that window. The
// thread asks for it by setting t_park_me; at the hook point `what` it opens
// `parked` and waits (up to 120 s, only so that a failing test still ends)
// until the test opens `go`, once. On its way it opens `waiting` when it is
// about to wait in a stop_sync (hook point 'W'). One Parking at a time
// (HookGuard installs it; Unpark lets the thread go and joins it, also on a
// failed ASSERT). Shared by correctness_test and timer_fields_test; other
// tests keep parks of their own where they park by other rules (a thread id,
// a record, libc calls).
#pragma once

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

}  // namespace tw_test
