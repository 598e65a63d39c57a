// SPDX-License-Identifier: MIT OR Apache-2.0
/// @file
/// tickwheel/timer.hpp -- tickwheel::Timer, the handle start() returns and a
/// callback receives. Its member functions are defined in runtime.hpp.
#pragma once

// C++20 or nothing: below it (or from C) this header stops with this one
// error instead of a wall of them (the rest of the file is skipped; the
// #endif is the file's last line). ctest cxx20_header_guard checks it.
#if !defined(__cplusplus) || __cplusplus < 202002L
#error "tickwheel/timer.hpp is part of tickwheel's C++ API and needs C++20: compile with -std=c++20 (or later); from C or older C++ use the C API, <tickwheel/tickwheel.h>"
#else

#include <chrono>
#include <cstdint>
#include <optional>
#include <type_traits>

namespace tickwheel {

class Runtime;
struct TimerInfo;

/// A small copyable handle to a timer: the runtime and the timer's id. A
/// default-constructed Timer is empty (id 0). Copies name the same timer.
/// Its member functions forward to the Runtime's; see those.
/// Its layout (a Runtime* and the id) is frozen for 1.x: the library passes
/// it to callbacks compiled into programs (see runtime.hpp, "LINKING AND THE
/// C++ ABI").
class Timer {
public:
    /// An empty handle (no runtime, id 0).
    Timer() noexcept = default;
    /// A handle to timer `id` of `rt` (Runtime::start() makes them; no check).
    Timer(Runtime* rt, std::uint64_t id) noexcept : rt_(rt), id_(id) {}

    /// The timer's id (0 if empty). Once the timer has fired its last run or
    /// been stopped, the id is stale: calls with it answer "not found".
    std::uint64_t id() const noexcept { return id_; }
    /// The runtime the timer belongs to (null if empty).
    Runtime* runtime() const noexcept { return rt_; }
    /// True unless empty (id 0); says nothing about whether the timer is
    /// still pending.
    explicit operator bool() const noexcept { return id_ != 0; }

    /// runtime()->stop(id()); false if empty. See Runtime::stop().
    bool stop() noexcept;
    /// runtime()->stop_sync(id()); false if empty. See Runtime::stop_sync().
    bool stop_sync();
    /// runtime()->reset(id(), delay); false if empty. See Runtime::reset().
    bool reset(std::chrono::nanoseconds delay);
    /// runtime()->reset_at(id(), deadline); false if empty. See Runtime::reset_at(). Since 1.3.
    bool reset_at(std::chrono::time_point<std::chrono::steady_clock, std::chrono::nanoseconds> deadline);
    /// runtime()->query(id()); std::nullopt if empty. See Runtime::query(). Since 1.3.
    std::optional<TimerInfo> query() const noexcept;

    friend bool operator==(const Timer&, const Timer&) noexcept = default;

private:
    Runtime* rt_ = nullptr;
    std::uint64_t id_ = 0;
};

static_assert(std::is_trivially_copyable_v<Timer> && sizeof(Timer) == sizeof(void*) + sizeof(std::uint64_t),
              "tickwheel::Timer's layout is part of the 1.x ABI");

}  // namespace tickwheel

#endif  // C++20 (the check after #pragma once)
