// SPDX-License-Identifier: MIT OR Apache-2.0
// Helpers shared by the runtime test programs: sanitizer detection (bounds
// are looser under sanitizers; test_support/sanitizers.hpp), bounded
// waiting for a condition, a small runtime configuration, a gate a callback
// can be held on, and the documented id layout (with a helper that forces a
// stale id's slot to be reused). Public API only (tickwheel/runtime.hpp):
// nothing from src/. More in tests/test_support/ (docs/site/development.md).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "test_support/sanitizers.hpp"
#include "tickwheel/runtime.hpp"

namespace tw_test {

/// How long wait_until() polls by default before giving up (reached only
/// when a test fails).
inline constexpr tickwheel::Duration kWait =
    kSanitized ? tickwheel::Duration(std::chrono::seconds(30)) : tickwheel::Duration(std::chrono::seconds(10));

/// Polls `pred` every 100 us until it holds or `timeout` passes; returns
/// whether it held. Never a sleep that hides a race: callers ASSERT on it.
template <class Pred>
[[nodiscard]] bool wait_until(Pred pred, tickwheel::Duration timeout = kWait) {
    const auto end = tickwheel::Clock::now() + timeout;
    for (;;) {
        if (pred()) return true;
        if (tickwheel::Clock::now() >= end) return pred();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
}

inline tickwheel::Config small_config(unsigned shards = 2, unsigned workers = 2) {
    tickwheel::Config c;
    c.shards = shards;
    c.workers = workers;
    return c;
}

/// A gate, shut until open()ed: a callback blocks in wait() until the test,
/// having observed what it wanted to observe WHILE the callback was blocked,
/// opens it. wait() gives up after `timeout` (returns false), only so that a
/// failing test still ends: a test asserts that it did not give up. Sleeps
/// (no spinning), so a blocked callback takes no CPU from the rest.
class Gate {
public:
    void open() {
        {
            std::lock_guard<std::mutex> lk(m_);
            open_ = true;
        }
        cv_.notify_all();
    }
    bool is_open() {
        std::lock_guard<std::mutex> lk(m_);
        return open_;
    }
    [[nodiscard]] bool wait(tickwheel::Duration timeout) {
        std::unique_lock<std::mutex> lk(m_);
        return cv_.wait_for(lk, timeout, [this] { return open_; });
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    bool open_ = false;
};

/// Opens a gate when it goes out of scope: declared after the Runtime, it
/// runs before the Runtime's destructor (which waits for running callbacks),
/// also when an ASSERT returns early.
struct OpenOnExit {
    Gate& gate;
    ~OpenOnExit() { gate.open(); }
};

// ---- ids ---------------------------------------------------------------------
// The id layout is documented (README, "Handles"): [generation:24 | shard:8 |
// index:32] -- the low 32 bits are the slot index within its shard, bits
// 32..39 the shard, bits 40..63 the generation. Tests rely on the layout
// only through these helpers.
inline std::uint32_t id_index(std::uint64_t id) noexcept { return static_cast<std::uint32_t>(id); }
inline std::uint32_t id_shard(std::uint64_t id) noexcept { return static_cast<std::uint32_t>(id >> 32) & 0xFFu; }
inline std::uint32_t id_gen(std::uint64_t id) noexcept { return static_cast<std::uint32_t>(id >> 40); }
inline std::uint64_t make_id(std::uint32_t gen, std::uint32_t shard, std::uint32_t index) noexcept {
    return (std::uint64_t{gen & 0xFFFFFFu} << 40) | (std::uint64_t{shard & 0xFFu} << 32) | index;
}

/// Forces the reuse of a stale id's slot. Calls `start()` -- which starts a
/// pending timer on the stale id's shard and returns its id (0 if the start
/// failed) -- until a new timer lands on the stale id's slot (same shard and
/// index), and returns that timer's id: it is always the one the LAST call
/// to start() made. Every other timer started on the way stays pending and
/// its id is appended to `held` (the caller stops them at the end). Returns
/// 0 if no new timer got the slot within `timeout` (one attempt per 100 us):
/// the caller must fail the test then.
///
/// Why the misses are held rather than stopped: a stopped timer's slot goes
/// back to the shard's free slots, and a start takes the most recently freed
/// one first (a LIFO free list); stopping each miss would hand its slot
/// straight back to the next attempt, forever, with the stale slot under it.
/// Held, each miss takes one free slot (or a fresh one) out of the way for
/// good, so once the shard has recycled the stale slot, a start reaches it
/// whatever order the free slots are handed out in.
template <class Start>
[[nodiscard]] std::uint64_t start_on_the_slot_of(std::uint64_t stale, Start&& start, std::vector<std::uint64_t>& held,
                                                 tickwheel::Duration timeout = kWait) {
    std::uint64_t got = 0;
    const bool reused = wait_until(
        [&] {
            if (got != 0) return true;
            const std::uint64_t id = start();
            if (id == 0) return false;
            if (id_shard(id) == id_shard(stale) && id_index(id) == id_index(stale)) {
                got = id;
                return true;
            }
            held.push_back(id);
            return false;
        },
        timeout);
    return reused ? got : 0;
}

/// A callable that does nothing and counts its release (the destruction of
/// the live object; moves empty the source): move-only.
struct CountsRelease {
    std::atomic<int>* counter = nullptr;
    explicit CountsRelease(std::atomic<int>* c) noexcept : counter(c) {}
    CountsRelease(CountsRelease&& o) noexcept : counter(std::exchange(o.counter, nullptr)) {}
    CountsRelease(const CountsRelease&) = delete;
    CountsRelease& operator=(const CountsRelease&) = delete;
    CountsRelease& operator=(CountsRelease&&) = delete;
    ~CountsRelease() {
        if (counter != nullptr) counter->fetch_add(1);
    }
    void operator()() const {}
};

/// A callable that counts its runs and its release (its destruction, which
/// the runtime performs exactly once per started timer): move-only, so a
/// copy cannot count twice.
struct Counted {
    std::atomic<int>* released;
    std::atomic<int>* ran;
    Counted(std::atomic<int>* r, std::atomic<int>* n) noexcept : released(r), ran(n) {}
    Counted(Counted&& o) noexcept : released(std::exchange(o.released, nullptr)), ran(o.ran) {}
    Counted(const Counted&) = delete;
    Counted& operator=(const Counted&) = delete;
    Counted& operator=(Counted&&) = delete;
    ~Counted() {
        if (released != nullptr) released->fetch_add(1);
    }
    void operator()() const { ran->fetch_add(1); }
};

/// The names most runtime tests use unqualified, taken with one
/// `using namespace tw_test::names;`.
namespace names {
using namespace std::chrono_literals;
namespace tw = tickwheel;
using tickwheel::Clock;
using tickwheel::Duration;
using tickwheel::TimePoint;
using tw_test::kSanitized;
using tw_test::kWait;
using tw_test::small_config;
using tw_test::wait_until;
}  // namespace names

}  // namespace tw_test
