// SPDX-License-Identifier: MIT OR Apache-2.0
// tw_stress coro-history: the record of one run of coroutines over
// tickwheel/coro.hpp's awaitables (every co_await, its arming, every stop,
// notify, frame destruction, queue close, limit hold, advance and the
// shutdown, every resumption with its reason, context and own-clock
// reading), and the checker that holds it against a sequential model of
// the coroutine contract (coro_history_check.cpp). The driver that produces
// the record is coro_history_run.cpp; usage is at the top of it.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace stress::coro_history {

constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();

enum Ctx : std::uint8_t { kOnWorker = 0, kOnQueue = 1, kOnExecutor = 2, kOnAsio = 3 };
enum WaitKind : std::uint8_t { kSleepFor = 0, kSleepUntil = 1, kEventWait = 2 };
enum StopMode : std::uint8_t { kNoStop = 0, kStopBefore = 1, kStopArming = 2, kStopLater = 3 };
enum Outcome : std::uint8_t { kPending = 0, kWoke = 1, kThrew = 2, kDestroyed = 3 };

/// Where a resumption ran: the context flags of the resuming thread.
struct Where {
    std::int32_t run_queue = -1;      // inside run() of this queue (its id), -1 none
    std::int32_t closing_queue = -1;  // inside close() of this queue
    bool in_advance = false;          // inside Runtime::advance (manual)
    bool in_executor = false;         // inside the user executor's drain
    bool in_asio = false;             // inside io_context::run/poll
    bool in_shutdown = false;         // inside Runtime::shutdown
    bool inline_ = false;             // went on inside its own co_await (await_suspend returned false)
    bool ours = false;                // a thread of the checker (not a runtime worker)
};

/// One co_await. Times: CLOCK_MONOTONIC ns (real runtime) or a step counter
/// (manual runtime: one thread, every action one step). Own-clock values:
/// Runtime::now(clock) readings (the manual runtime's virtual clocks).
struct Wait {
    std::uint32_t slot = 0;  // the coroutine slot (its event is the slot's)
    std::uint32_t coro = 0;  // the coroutine (a slot hosts a new one after a destruction)
    std::uint8_t kind = kSleepFor;
    std::uint8_t clock = 0;  // TimerClock of the sleep (and of its Duration limits); event waits: 0
    std::uint8_t ctx = kOnWorker;
    std::uint8_t stop_mode = kNoStop;
    bool victim = false;     // a far sleep another thread may destroy (nothing else can end it)
    std::int32_t queue = -1; // kOnQueue: the queue's id
    std::int64_t t_call = 0;       // before the co_await
    std::int64_t t_armed = 0;      // its timer started (first arming hook), 0 = never
    std::int64_t own_before[3] = {0, 0, 0};  // now(c) before the co_await, c = 0, 1, 2
    std::int64_t natural = kNone;  // the sleep's deadline on `clock` (lower bound for sleep_for)
    std::int64_t delay = -1;       // sleep_for's d (-1 otherwise)
    std::int64_t limit_d[2] = {-1, -1};  // with_deadline/cancel_after Durations (on `clock`)
    std::int64_t limit_tp = kNone;       // with_deadline TimePoint (monotonic)
    std::int64_t stop_t0 = kNone, stop_t1 = kNone;        // the first request_stop call
    std::int64_t destroy_t0 = kNone, destroy_t1 = kNone;  // its frame's destruction
    // The resumption (or the exception).
    std::uint8_t outcome = kPending;
    std::uint8_t why = 0;  // tickwheel::wake
    std::int32_t err = 0;  // tickwheel::errc of the exception
    std::int32_t resumed = 0;  // resumptions seen (or exceptions caught)
    std::int64_t t_resume = 0;
    std::int64_t own_resume = 0;       // now(clock) at the resumption
    std::int64_t own_resume_mono = 0;  // now(monotonic) at the resumption
    Where where;
};

struct Notify {
    std::uint32_t slot = 0;
    std::int64_t t0 = 0, t1 = 0;
};
struct Close {
    std::int32_t queue = -1;
    std::int64_t t0 = 0, t1 = 0;
};
struct Span {
    std::int64_t t0 = 0, t1 = 0;
};
struct Advance {
    std::int64_t t0 = 0, t1 = 0;   // the advance() call
    std::int64_t drained = 0;      // the end of the queue/executor runs that followed it
    std::int64_t size_ns = 0;
    std::int64_t vt_end = 0;       // virtual monotonic time at its end
};

struct History {
    bool manual = false;
    std::int64_t resolution_ns = 1'000'000;
    std::int64_t late_ns = 2'500'000'000;  // real runtime: a wake-up this late before the shutdown is LOST
    std::vector<Wait> waits;
    std::vector<Notify> notifies;
    std::vector<Close> closes;
    std::vector<Span> holds;        // max_timers reached by the ballast
    std::vector<Advance> advances;  // manual
    Span shutdown{kNone, kNone};
    std::vector<std::uint8_t> event_set_at_end;  // per slot: the event is set after the shutdown
    std::vector<std::string> run_complaints;     // found by the driver (frame writes, leaks)
};

/// Checks the history; prints up to `max_reports` violations in full and
/// returns how many it found.
std::size_t check(const History& h, unsigned max_reports = 4);

/// tw_stress coro-history-selftest: the checker against small histories
/// with known violations, and correct ones. Returns the exit status.
int selftest();

struct Options {
    double seconds = 3;
    unsigned long seed = 1;
    bool manual = false;  // the manual-clock runtime (one thread, deterministic), else the real one
    unsigned fuzz = 64;   // schedule fuzzing at the awaiters' test hooks (0 = off)
    unsigned slots = 0;   // coroutines at once (0: 192 real, 96 manual)
};
/// tw_stress coro-history: runs the program, shuts down, checks. Returns
/// the exit status (0 = no violation).
int run(const Options& o);

}  // namespace stress::coro_history
