// SPDX-License-Identifier: MIT OR Apache-2.0
// Issue 20: the state BESIDE a timer's control word -- the own-clock
// deadline (Extra::deadline_ns), group and clock-step index membership --
// under the owner rule of src/runtime/timer_state.hpp. Each race is forced
// at its exact step: a thread is parked at a test hook
// (src/runtime/test_hooks.hpp), inside its own callback, or inside an
// interposed clock_gettime() (below) while another thread acts; the wall
// clock steps through a seam, never the machine's clock.
//   race 2: a grouped one-shot re-arming itself during a group stop left
//           its group's index (later group stops returned 0);
//   race 3: a DELAY timer on a boot-time or wall-clock clock reset during
//           its run ran a period late (the worker overwrote the reset's
//           own-clock deadline);
//   race 4: a reset with a stale id rewrote the own-clock deadline of the
//           timer now in the slot (late, or early after a clock step);
//   race 7: a wall-clock timer whose start overlapped a clock step missed
//           it (fired seconds late);
//   and a reset racing the fire of a wall-clock fixed-rate timer, which
//   added a period to the reset's deadline (a reading-only item).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/test_hooks.hpp"
#include "runtime/timer_state.hpp"
#include "test_support.hpp"
#include "test_support/capi.hpp"
#include "test_support/park.hpp"
#include "tickwheel/runtime.hpp"
#include "tickwheel/tickwheel.h"

namespace tw = tickwheel;
using namespace std::chrono_literals;
using tw_test::Gate;
using tw_test::wait_until;
namespace hooks = tickwheel::rt::test_hooks;

// ---- an interposed clock_gettime -------------------------------------------------
// The library's clock reads go through clock_gettime(): this definition
// takes their place in this test program. It adds g_wall_step to
// CLOCK_REALTIME readings (a step of the machine's wall clock, as the
// library sees it), and parks the ONE thread that asked for it (t_park_clock)
// on its next reading of clock g_park_clock -- after the reading was taken:
// the parked thread returns with the value it read before it was parked,
// however the clock moves meanwhile.
namespace {

using namespace tw_test::capi;
std::atomic<std::int64_t> g_wall_step{0};
thread_local clockid_t t_park_clock = -1;
thread_local int t_park_skip = 0;  // readings of t_park_clock to let pass before parking
std::mutex g_clock_mu;
std::condition_variable g_clock_cv;
bool g_clock_parked = false, g_clock_go = false;
// Parks the shard thread "tw-shard-0" once, in its own-clock check of a due
// wall-clock timer (see clock_gettime below).
std::atomic<bool> g_park_shard_armed{false};
thread_local clockid_t t_last_clock = -1;
// CLOCK_MONOTONIC readings this thread made (StartClockReads).
thread_local int t_mono_reads = 0;
bool is_shard_thread();
void park_here();

using ClockGettime = int (*)(clockid_t, timespec*);
ClockGettime real_clock_gettime() {
    static const auto f = reinterpret_cast<ClockGettime>(dlsym(RTLD_NEXT, "clock_gettime"));
    return f;
}

void reset_clock_parking() {
    std::lock_guard<std::mutex> l(g_clock_mu);
    g_clock_parked = false;
    g_clock_go = false;
}
bool wait_clock_parked(tw::Duration limit = 30s) {
    std::unique_lock<std::mutex> l(g_clock_mu);
    return g_clock_cv.wait_for(l, limit, [] { return g_clock_parked; });
}
void unpark_clock() {
    {
        std::lock_guard<std::mutex> l(g_clock_mu);
        g_clock_go = true;
    }
    g_clock_cv.notify_all();
}
}  // namespace

extern "C" int clock_gettime(clockid_t id, timespec* ts) noexcept {
    ClockGettime real = real_clock_gettime();
    const int rc = real != nullptr ? real(id, ts) : static_cast<int>(syscall(SYS_clock_gettime, id, ts));
    if (id == CLOCK_MONOTONIC) ++t_mono_reads;
    if (id == CLOCK_REALTIME && rc == 0) {
        const std::int64_t step = g_wall_step.load(std::memory_order_relaxed);
        if (step != 0) {
            std::int64_t ns = std::int64_t{ts->tv_sec} * 1'000'000'000 + ts->tv_nsec + step;
            ts->tv_sec = static_cast<time_t>(ns / 1'000'000'000);
            ts->tv_nsec = static_cast<long>(ns % 1'000'000'000);
        }
    }
    if (g_park_shard_armed.load(std::memory_order_relaxed) && is_shard_thread()) {
        // The shard's own-clock check of a due wall-clock timer: its second
        // CLOCK_REALTIME reading in a row (each pass re-clocks first:
        // BOOTTIME, then REALTIME; clocked_due() then reads REALTIME again).
        const bool second = id == CLOCK_REALTIME && t_last_clock == CLOCK_REALTIME;
        t_last_clock = id;
        if (second) {
            bool armed = true;
            if (g_park_shard_armed.compare_exchange_strong(armed, false)) park_here();
        }
    }
    if (t_park_clock == id && t_park_skip > 0) {
        --t_park_skip;
    } else if (t_park_clock == id) {
        t_park_clock = -1;  // once
        std::unique_lock<std::mutex> l(g_clock_mu);
        g_clock_parked = true;
        g_clock_cv.notify_all();
        g_clock_cv.wait_for(l, 120s, [] { return g_clock_go; });
    }
    return rc;
}

// An interposed syscall(): the futex waits of std::atomic::wait (libstdc++
// calls syscall(SYS_futex, ...)) of the thread that asked (t_note_futex) are
// announced (g_futex_waits) just before the thread goes to sleep in them.
namespace {
thread_local bool t_note_futex = false;
std::atomic<int> g_futex_waits{0};
}  // namespace
extern "C" long syscall(long number, ...) noexcept {
    using Syscall = long (*)(long, ...);
    static const auto real = reinterpret_cast<Syscall>(dlsym(RTLD_NEXT, "syscall"));
    // The five arguments passed in registers (x86-64, AArch64: va_arg reads
    // them from this frame's register save area, harmless past the caller's
    // arguments; a stack argument would not be); a sixth is passed as 0 --
    // the system calls this process makes through syscall() (futex waits
    // and wakes, membarrier, gettid) take it as 0 or not at all.
    va_list ap;
    va_start(ap, number);
    long a[6] = {};
    for (int i = 0; i < 5; ++i) a[i] = va_arg(ap, long);
    va_end(ap);
    if (number == SYS_futex && t_note_futex && (a[1] & 0x7f) == 0 /* FUTEX_WAIT */) g_futex_waits.fetch_add(1);
    return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

namespace {
bool is_shard_thread() {
    thread_local int known = -1;  // -1: not asked yet
    if (known < 0) {
        char name[16] = {};
        pthread_getname_np(pthread_self(), name, sizeof name);
        known = std::string(name) == "tw-shard-0" ? 1 : 0;
    }
    return known == 1;
}
void park_here() {
    std::unique_lock<std::mutex> l(g_clock_mu);
    g_clock_parked = true;
    g_clock_cv.notify_all();
    g_clock_cv.wait_for(l, 120s, [] { return g_clock_go; });
}
}  // namespace

namespace {

/// Restores the wall-clock steps when a test ends, however it ends.
struct StepGuard {
    ~StepGuard() {
        g_wall_step.store(0);
        hooks::realtime_shift_ns.store(0);
    }
};

/// Joins a thread parked in clock_gettime when the test ends, also on a failed ASSERT.
struct UnparkClock {
    std::thread& t;
    ~UnparkClock() {
        unpark_clock();
        if (t.joinable()) t.join();
    }
};

/// Options of a start on the realtime clock at `deadline`.
tw::StartOptions realtime_at(tw::TimePoint deadline) {
    tw::StartOptions o;
    o.clock = tw::TimerClock::realtime;
    o.deadline = deadline;
    return o;
}

// ---- parking at a test hook (test_hooks::in_window): test_support/park.hpp ----
using tw_test::HookGuard;
using tw_test::Parking;
using tw_test::t_park_me;
using tw_test::Unpark;

// ---- records pushed back on a free stack (test_hooks::freed) ----
std::atomic<std::uint32_t> g_pushes_of[4096];
void push_hook(std::uint32_t top, std::uint32_t) {
    if (top < 4096) g_pushes_of[top].fetch_add(1);
}
struct PushHook {
    PushHook() { hooks::freed.store(&push_hook); }
    ~PushHook() { hooks::freed.store(nullptr); }
};

tw::Config one_shard(unsigned workers = 2) { return tw_test::small_config(1, workers); }

clockid_t posix_clock(tw::TimerClock c) {
    return c == tw::TimerClock::realtime ? CLOCK_REALTIME : c == tw::TimerClock::boottime ? CLOCK_BOOTTIME
                                                                                         : CLOCK_MONOTONIC;
}
std::string clock_name(const ::testing::TestParamInfo<tw::TimerClock>& p) {
    return p.param == tw::TimerClock::realtime ? "Realtime" : "Boottime";
}
std::int64_t ns_of(tw::TimePoint t) { return t.time_since_epoch().count(); }

}  // namespace

// ---- race 2: a grouped one-shot re-arming itself during a group stop ------------------
// The group stop takes the group's list while the one-shot runs; a run in
// progress is not stopped (a one-shot on its last run). The callback then
// re-arms itself (allowed). On a4e5bb9 the group stop had dropped the entry
// and nothing put it back: every later group stop returned 0 and the timer
// kept firing. Now the worker indexes it again when the re-arm makes it
// pending (a new pending episode).
TEST(GroupReArm, AOneShotReArmingItselfDuringAGroupStopStaysInItsGroup) {
    tw::Runtime rt(one_shard());
    constexpr std::uint64_t kGroup = 0x2020;
    Gate in_run, release;
    std::atomic<int> runs{0};
    std::atomic<int> rearmed{-1};
    tw::StartOptions o;
    o.delay = 0ns;
    o.group = kGroup;
    const tw::Timer t = rt.start(o, [&](tw::Timer self) {
        if (runs.fetch_add(1) == 0) {
            in_run.open();
            (void)release.wait(30s);
            rearmed.store(self.runtime()->reset(self.id(), 1h) ? 1 : 0);
        }
    });
    tw_test::OpenOnExit open_release{release};
    ASSERT_TRUE(in_run.wait(30s));
    EXPECT_EQ(rt.stop_group(kGroup), 0u) << "a one-shot's run in progress is not stopped";
    release.open();
    ASSERT_TRUE(wait_until([&] {
        const auto i = rt.query(t);
        return rearmed.load() != -1 && i && i->state == tw::TimerStatus::pending;
    })) << "the callback's re-arm did not make it pending";
    ASSERT_EQ(rearmed.load(), 1);
    EXPECT_EQ(rt.stop_group(kGroup), 1u) << "the re-armed one-shot left its group's index";
    EXPECT_FALSE(rt.query(t)) << "still live after its group was stopped";
    EXPECT_EQ(runs.load(), 1);
}

// Without a group stop between, re-arming does not grow the group without
// bound, and the group stop counts the timer once.
TEST(GroupReArm, ManyReArmsCountOnceInAGroupStop) {
    // A 100 us tick: each re-arm to "now" costs one tick, and 3000 of them
    // must fit kWait on a loaded machine (at 1 ms they took 3-12 s).
    tw::Config c = one_shard();
    c.resolution = 100us;
    tw::Runtime rt(c);
    constexpr std::uint64_t kGroup = 0x2021;
    constexpr int kReArms = 3000;
    std::atomic<int> runs{0};
    tw::StartOptions o;
    o.delay = 0ns;
    o.group = kGroup;
    const tw::Timer t = rt.start(o, [&](tw::Timer self) {
        const int n = runs.fetch_add(1) + 1;
        (void)self.runtime()->reset(self.id(), n < kReArms ? 0ns : 1h);
    });
    ASSERT_TRUE(wait_until([&] {
        const auto i = rt.query(t);
        return runs.load() >= kReArms && i && i->state == tw::TimerStatus::pending;
    }));
    EXPECT_EQ(rt.stop_group(kGroup), 1u);
    EXPECT_EQ(rt.stop_group(kGroup), 0u);
}

// ---- two group stops of one group at once (found by the history fuzzer) ----------------
// Group stop A takes the group's list and is parked in stop()'s
// lookup-to-CAS window of its one timer. Group stop B of the same group then
// began after the timer's start returned, so when B returns the timer must
// be stopped: no run may follow. On c5850ce B found the list empty (A had
// taken it), returned 0 with the timer still pending, and it ran 50 ms
// later while A was still parked (runs == 1). Now B stops the timers A claimed as well (B returns 1)
// and A's CAS then finds the timer stopped (A returns 0).
TEST(GroupStopRace, ASecondGroupStopStopsWhatAFirstOneTookButHasNotStoppedYet) {
    tw::Runtime rt(one_shard());
    constexpr std::uint64_t kGroup = 0x2022;
    std::atomic<int> runs{0};
    tw::StartOptions o;
    o.delay = 50ms;
    o.group = kGroup;
    const tw::Timer t = rt.start(o, [&] { runs.fetch_add(1); });
    Parking p;
    p.what = 'c';
    HookGuard hook(p);
    std::atomic<std::size_t> a_stopped{99};
    std::thread a([&] {
        t_park_me = true;
        a_stopped.store(rt.stop_group(kGroup));
    });
    Unpark unpark{p, a};
    ASSERT_TRUE(p.parked.wait(30s)) << "group stop A never reached its stop's window";
    const std::size_t b_stopped = rt.stop_group(kGroup);
    EXPECT_FALSE(rt.query(t)) << "still live after group stop B returned " << b_stopped;
    // The timer's deadline passes while A is still parked: with B's return
    // it must not run.
    std::this_thread::sleep_for(150ms);
    EXPECT_EQ(runs.load(), 0) << "the timer ran after group stop B returned " << b_stopped;
    EXPECT_EQ(b_stopped, 1u);
    p.go.open();
    a.join();
    EXPECT_EQ(a_stopped.load(), 0u) << "B stopped it; A's stop finds it stopped";
    EXPECT_FALSE(rt.query(t));
    EXPECT_EQ(runs.load(), 0);
}

// ---- a BURST timer on its own clock: catch-up runs judged on that clock ------------------
// Found by the history fuzzer (--features periodic,delay,rearm,batch,stale,
// boottime,realtime,steps --seed 3: a catch-up run 0.8 ms early). A start
// computes the word's tick from a monotonic and an own-clock reading; a
// thread descheduled between the two files the tick early by that gap (the
// own clock then re-files the run until its deadline). Here the start is
// parked 300 ms after its monotonic reading. On c5850ce the grid deadlines
// a BURST timer owes were counted on those early ticks: its first run was
// followed at once by catch-up runs of deadlines its own clock had not
// reached: the Boottime case fails there ("run 6 began 16794 us before grid
// deadline 6"; the Realtime case happened to pass). Now they are counted on
// its own clock (decide_expire's grid_cap).
class BurstOwnClock : public ::testing::TestWithParam<tw::TimerClock> {};

TEST_P(BurstOwnClock, CatchUpRunsNeverServeADeadlineTheirClockHasNotReached) {
    const tw::TimerClock clock = GetParam();
    StepGuard steps;
    tw::Runtime rt(one_shard());
    constexpr auto kDelay = 20ms, kPeriod = 50ms;
    constexpr int kRuns = 8;
    std::mutex mu;
    std::vector<std::int64_t> at;  // the own clock at each run's entry
    Gate enough;
    tw::StartOptions o;
    o.clock = clock;
    o.delay = kDelay;
    o.period = kPeriod;
    o.policy = tw::PeriodPolicy::burst;
    std::atomic<std::int64_t> before{0};
    std::optional<tw::Timer> t;
    reset_clock_parking();
    std::thread starter([&] {
        before.store(ns_of(tw::TimePoint(rt.now(clock))));
        // start_args() reads the monotonic clock, then the own one; the
        // publish reads both again, the monotonic one first: park there.
        t_park_clock = CLOCK_MONOTONIC;
        t_park_skip = 1;
        t.emplace(rt.start(o, [&] {
            const std::int64_t now = ns_of(tw::TimePoint(rt.now(clock)));
            std::lock_guard<std::mutex> l(mu);
            at.push_back(now);
            if (at.size() == kRuns) enough.open();
        }));
        t_park_clock = -1;
        t_park_skip = 0;
    });
    UnparkClock unpark{starter};
    ASSERT_TRUE(wait_clock_parked()) << "the start never read the monotonic clock twice";
    std::this_thread::sleep_for(300ms);  // the gap between the start's two readings
    unpark_clock();
    starter.join();
    ASSERT_TRUE(t.has_value());
    ASSERT_TRUE(enough.wait(30s)) << "fewer than " << kRuns << " runs";
    (void)rt.stop_sync(t->id());
    std::lock_guard<std::mutex> l(mu);
    const std::int64_t d0 = before.load() + std::chrono::nanoseconds(kDelay).count();
    for (std::size_t j = 0; j < at.size(); ++j) {
        const std::int64_t dj = d0 + static_cast<std::int64_t>(j) * std::chrono::nanoseconds(kPeriod).count();
        EXPECT_GE(at[j], dj) << "run " << j << " began " << (dj - at[j]) / 1000 << " us before grid deadline " << j
                             << " on its own clock";
    }
}

INSTANTIATE_TEST_SUITE_P(Clocks, BurstOwnClock, ::testing::Values(tw::TimerClock::boottime, tw::TimerClock::realtime),
                         clock_name);

// ---- race 3: a DELAY timer on its own clock reset during its run ------------------------
// On a4e5bb9 the worker, after the run, stored "end of run + period" as the
// own-clock deadline before the word decided -- over the deadline the reset
// had written -- while the word took the reset's tick: the next run waited
// for the period (the shard re-files a clocked timer until its own clock
// reaches that deadline). The same program on MONOTONIC was right.
class DelayReset : public ::testing::TestWithParam<tw::TimerClock> {};

TEST_P(DelayReset, AResetDuringTheRunSetsTheNextRunNotThePeriod) {
    const tw::TimerClock clock = GetParam();
    tw::Runtime rt(one_shard());
    Gate in_run, release;
    std::atomic<int> runs{0};
    tw::StartOptions o;
    o.delay = 0ns;
    o.period = 30s;
    o.policy = tw::PeriodPolicy::delay;
    o.clock = clock;
    const tw::Timer t = rt.start(o, [&] {
        if (runs.fetch_add(1) == 0) {
            in_run.open();
            (void)release.wait(30s);
        }
    });
    tw_test::OpenOnExit open_release{release};
    ASSERT_TRUE(in_run.wait(30s));
    const std::int64_t reset_at = ns_of(tw::TimePoint(rt.now(clock)));
    ASSERT_TRUE(rt.reset(t.id(), 100ms)) << "a DELAY timer may be reset while it runs";
    release.open();
    // After the run: pending at the reset's deadline (on its clock).
    ASSERT_TRUE(wait_until([&] {
        const auto i = rt.query(t);
        return runs.load() >= 2 || (i && i->state != tw::TimerStatus::running);
    }));
    if (runs.load() < 2) {
        const auto i = rt.query(t);
        ASSERT_TRUE(i);
        EXPECT_LE(ns_of(i->deadline), reset_at + 100'000'000 + 1'000'000'000)
            << "the run's end + period replaced the reset's deadline";
    }
    EXPECT_TRUE(wait_until([&] { return runs.load() >= 2; }, 5s))
        << "the reset's next run did not come within 5 s: it waits for the 30 s period";
    EXPECT_TRUE(rt.stop(t));
}
INSTANTIATE_TEST_SUITE_P(OwnClock, DelayReset, ::testing::Values(tw::TimerClock::boottime, tw::TimerClock::realtime),
                         clock_name);

// ---- race 4: a stale id's reset and the own-clock deadline of the slot's next timer --------
// A's reset (id still valid) is parked inside its clock reading -- after the
// generation check, before it writes anything -- while A is stopped, its
// slot recycled and B started on it. On a4e5bb9 the reset then stored its
// deadline into B's side record (checked once, stored before the CAS that
// re-validates): it returned TW_ENOENT, but B's deadline had moved (query),
// and after a wall-clock step B fired at once -- early. Now the reset holds
// A's deadline lock (versioned with A's generation) from before its reading
// to its end: the slot is not reused until it lets go, and it then finds A
// gone and writes nothing.
class StaleReset : public ::testing::TestWithParam<tw::TimerClock> {};

TEST_P(StaleReset, NeverWritesTheDeadlineOfTheSlotsNextTimer) {
    const tw::TimerClock clock = GetParam();
    StepGuard steps;
    PushHook pushes;
    tw::Runtime rt(one_shard());
    tw::StartOptions oa;
    oa.clock = clock;
    oa.deadline = tw::TimePoint(rt.now(clock) + 1h);
    const tw::Timer a = rt.start(oa, [] {});
    const std::uint32_t slot = tw_test::id_index(a.id());
    ASSERT_LT(slot, 4096u);

    reset_clock_parking();
    std::atomic<int> result{-1};
    std::thread t([&] {
        t_park_clock = posix_clock(clock);
        result.store(rt.reset(a.id(), 1ms) ? 1 : 0);
    });
    UnparkClock unpark{t};
    ASSERT_TRUE(wait_clock_parked());

    // A goes away under the parked reset; its slot is recycled at the
    // shard's next pass (a stop does not wake it: up to 100 ms) -- unless
    // something holds it back.
    const std::uint32_t before = g_pushes_of[slot].load();
    ASSERT_TRUE(rt.stop(a));
    const bool recycled = wait_until([&] { return g_pushes_of[slot].load() > before; }, 1s);
    std::atomic<int> b_runs{0};
    tw::StartOptions ob;
    ob.clock = clock;
    const tw::TimePoint b_deadline = tw::TimePoint(rt.now(clock) + 2h);
    ob.deadline = b_deadline;
    const tw::Timer b = rt.start(ob, [&b_runs] { b_runs.fetch_add(1); });
    const bool b_on_slot = tw_test::id_index(b.id()) == slot;

    unpark_clock();
    t.join();
    EXPECT_EQ(result.load(), 0) << "a reset with A's id acted after A was stopped";
    const auto i = rt.query(b);
    ASSERT_TRUE(i) << "B must still be pending";
    EXPECT_EQ(i->state, tw::TimerStatus::pending);
    EXPECT_EQ(ns_of(i->deadline), ns_of(b_deadline))
        << "the stale reset rewrote B's own-clock deadline (slot recycled: " << recycled
        << ", B on A's slot: " << b_on_slot << ")";
    if (clock == tw::TimerClock::realtime) {
        // A small wall-clock step makes the shard re-file every wall-clock
        // timer from its own-clock deadline: B must not fire (it is 2 h
        // away). The probe, due in 0.5 s and stepped past, tells that the
        // shard has re-filed.
        std::atomic<int> probe_runs{0};
        tw::StartOptions op;
        op.clock = clock;
        op.deadline = tw::TimePoint(rt.now(clock) + 500ms);
        const tw::Timer probe = rt.start(op, [&probe_runs] { probe_runs.fetch_add(1); });
        (void)probe;
        g_wall_step.store(1'000'000'000);
        ASSERT_TRUE(wait_until([&] { return probe_runs.load() == 1; }));
        EXPECT_EQ(b_runs.load(), 0) << "B fired early, by the stale reset's deadline";
    }
    EXPECT_TRUE(rt.stop(b));
    // The slot is not lost: once the parked reset let go, it is reused.
    EXPECT_TRUE(wait_until([&] { return g_pushes_of[slot].load() > before; })) << "A's slot stayed held";
}
INSTANTIATE_TEST_SUITE_P(OwnClock, StaleReset, ::testing::Values(tw::TimerClock::boottime, tw::TimerClock::realtime),
                         clock_name);

// ---- race 7: a wall-clock start overlapping a clock step ------------------------------------
// The start reads the clocks (the wall clock before the step), is parked
// there while the wall clock steps 20 s forward and the shard re-files its
// wall-clock timers for the step (the probe firing at once tells it has),
// then goes on. On a4e5bb9 it filed X by its pre-step reading and indexed it
// for clock steps only after the shard's pass: X's deadline, 30 s ahead
// before the step and 10 s past after it, came 30 s late. Now a start indexes
// the timer, then files it by clock readings taken after that.
TEST(StartDuringClockStep, AWallClockStartThatOverlapsAStepFollowsIt) {
    StepGuard steps;
    tw::Runtime rt(one_shard());
    std::atomic<int> probe_runs{0}, x_runs{0};
    std::atomic<std::int64_t> x_ran_at{0};
    const tw::StartOptions op = realtime_at(tw::TimePoint(rt.now(tw::TimerClock::realtime) + 5s));
    const tw::Timer probe = rt.start(op, [&probe_runs] { probe_runs.fetch_add(1); });
    (void)probe;

    reset_clock_parking();
    const std::int64_t x_deadline = ns_of(tw::TimePoint(rt.now(tw::TimerClock::realtime) + 30s));
    std::thread t([&] {
        const tw::StartOptions ox = realtime_at(tw::TimePoint(tw::Duration(x_deadline)));
        t_park_clock = CLOCK_REALTIME;  // parked inside the start's wall-clock reading
        (void)rt.start(ox, [&] {
            x_ran_at.store(rt.now(tw::TimerClock::realtime).count());
            x_runs.fetch_add(1);
        });
    });
    UnparkClock unpark{t};
    ASSERT_TRUE(wait_clock_parked());
    g_wall_step.store(40'000'000'000);  // the wall clock steps 40 s forward
    ASSERT_TRUE(wait_until([&] { return probe_runs.load() == 1; })) << "the shard did not follow the step";
    unpark_clock();
    t.join();
    // X's deadline is 10 s in the past now: it fires at once (within a pass).
    EXPECT_TRUE(wait_until([&] { return x_runs.load() == 1; }, tw_test::kSanitized ? 8s : 4s))
        << "X missed the clock step: filed by a reading from before it";
    if (x_runs.load() == 1) {
        EXPECT_GE(x_ran_at.load(), x_deadline) << "never early on its own clock";
    }
}

// ---- the clock-step index and a clocked start in flight ------------------------------------
// A clocked start indexes its timer for clock steps before it publishes it
// (race 7's fix). The index's compaction -- run by another add to the same
// shard's list once it holds 64 entries or more -- dropped entries whose
// record was FREE, which a start in flight's still is: that timer then
// ignored every clock step and ran at its monotonic deadline (found by
// tw_stress history --features realtime,steps,far: 8 of seeds 1..10). The
// start is parked in its second wall-clock reading (indexed, not yet
// published) while 200 other wall-clock starts compact the list.
TEST(ClockIndex, AStartInFlightKeepsItsEntryThroughACompaction) {
    StepGuard steps;
    tw::Runtime rt(one_shard());
    std::atomic<int> x_runs{0};
    reset_clock_parking();
    const std::int64_t x_deadline = ns_of(tw::TimePoint(rt.now(tw::TimerClock::realtime) + 1h));
    std::thread t([&] {
        const tw::StartOptions ox = realtime_at(tw::TimePoint(tw::Duration(x_deadline)));
        t_park_clock = CLOCK_REALTIME;
        t_park_skip = 1;  // its second wall-clock reading: publish_clocked's, after the index add
        (void)rt.start(ox, [&x_runs] { x_runs.fetch_add(1); });
    });
    UnparkClock unpark{t};
    ASSERT_TRUE(wait_clock_parked());
    std::vector<tw::Timer> others;
    for (int i = 0; i < 200; ++i) {
        const tw::StartOptions o = realtime_at(tw::TimePoint(rt.now(tw::TimerClock::realtime) + 2h));
        others.push_back(rt.start(o, [] {}));
    }
    unpark_clock();
    t.join();
    for (const tw::Timer& o : others) EXPECT_TRUE(rt.stop(o));
    g_wall_step.store(3'610'000'000'000);  // 1 h 10 s forward: X's deadline is 10 s in the past
    EXPECT_TRUE(wait_until([&] { return x_runs.load() == 1; }, tw_test::kSanitized ? 8s : 4s))
        << "X ignored the clock step: its index entry was dropped while its start was in flight";
}

// ---- a reset racing the fire of a wall-clock fixed-rate timer ---------------------------------
// The shard is parked in its own-clock check of the due SKIP timer (inside
// the wall-clock reading, the old deadline already read), while a reset
// goes on up to its CAS (hook 'r'); then the shard fires. On a4e5bb9 the
// reset had stored its own-clock deadline before its CAS; the shard's fire
// added a period to it; the reset's CAS then set the word to its tick: the
// next run came a period (5 s) late. Now the shard holds the timer's
// deadline lock from its check through the fire's move of the deadline:
// the reset waits for it, and then moves deadline and tick together.
TEST(FixedRateReset, AResetRacingTheFireOfAWallClockTimerIsNotAPeriodLate) {
    tw::Runtime rt(one_shard());
    std::atomic<int> runs{0};
    std::atomic<std::int64_t> last_run{0};
    tw::StartOptions o;
    o.clock = tw::TimerClock::realtime;
    o.delay = 300ms;
    o.period = 5s;
    reset_clock_parking();
    g_park_shard_armed.store(true);
    struct Disarm {
        ~Disarm() { g_park_shard_armed.store(false); }
    } disarm;
    const tw::Timer t = rt.start(o, [&] {
        last_run.store(rt.now(tw::TimerClock::realtime).count());
        runs.fetch_add(1);
    });
    std::thread none;
    UnparkClock unpark_shard{none};
    ASSERT_TRUE(wait_clock_parked()) << "the shard never checked the timer on its clock";
    ASSERT_EQ(runs.load(), 0);

    Parking parking;
    parking.what = 'r';
    HookGuard hook(parking);
    std::atomic<std::int64_t> reset_called{0};
    std::atomic<int> result{-1};
    std::thread th([&] {
        t_park_me = true;
        reset_called.store(rt.now(tw::TimerClock::realtime).count());
        result.store(rt.reset(t.id(), 300ms) ? 1 : 0);
    });
    Unpark unpark{parking, th};
    // a4e5bb9: the reset reaches its CAS while the shard is parked; now it
    // waits for the shard's lock.
    const bool reset_first = parking.parked.wait(300ms);
    unpark_clock();  // the shard fires the timer
    ASSERT_TRUE(wait_until([&] { return runs.load() == 1; })) << "the due timer did not fire";
    ASSERT_TRUE(parking.parked.wait(30s));
    parking.go.open();
    th.join();
    ASSERT_EQ(result.load(), 1) << "(the reset reached its CAS before the fire: " << reset_first << ")";
    const std::int64_t due = reset_called.load() + 300'000'000;
    EXPECT_TRUE(wait_until([&] { return runs.load() >= 2; }, 3s)) << "the reset's deadline was moved a period later";
    if (runs.load() >= 2) {
        EXPECT_GE(last_run.load(), due) << "never early on its own clock";
    }
    EXPECT_TRUE(rt.stop(t));
}

// ---- a batch stop and the stop_sync() waiters of its elements -----------------------------------
// stop({X, Y}) runs X's release hook, then Y's. Meanwhile a stop_sync(X)
// waits for X's hook (it is asleep in its futex when the hook returns), and
// Y's hook waits for that stop_sync(X) to return. On a4e5bb9 the batch
// woke the waiters of its elements only at the end of its 64-element
// window, after Y's hook: Y's hook waited in vain (a real hook would
// deadlock). Now each element's waiters are woken right after its hook.
TEST(BatchStop, AStopSyncWaitingForAnElementsHookReturnsBeforeTheNextHookRuns) {
    tw::Runtime rt(one_shard());
    Gate in_x_hook, w_returned;
    std::atomic<int> y_saw_w{-1};
    struct Hook {
        std::function<void()> on_release;
        explicit Hook(std::function<void()> f) : on_release(std::move(f)) {}
        Hook(Hook&& o) noexcept : on_release(std::exchange(o.on_release, nullptr)) {}
        ~Hook() {
            if (on_release) on_release();
        }
        void operator()() const {}
    };
    const int futex_before = g_futex_waits.load();
    const tw::Timer x = rt.start(1h, Hook([&] {
        in_x_hook.open();
        // Until the stop_sync(X) below is asleep in its futex.
        (void)wait_until([&] { return g_futex_waits.load() > futex_before; }, 10s);
    }));
    const tw::Timer y = rt.start(1h, Hook([&] { y_saw_w.store(w_returned.wait(3s) ? 1 : 0); }));
    std::thread batch([&] {
        const std::uint64_t ids[2] = {x.id(), y.id()};
        EXPECT_EQ(rt.stop(ids), 2u);
    });
    ASSERT_TRUE(in_x_hook.wait(30s));
    std::thread w([&] {
        t_note_futex = true;
        (void)rt.stop_sync(x);  // X is RELEASING: waits for its hook
        t_note_futex = false;
        w_returned.open();
    });
    batch.join();
    w.join();
    EXPECT_GT(g_futex_waits.load(), futex_before) << "stop_sync(X) did not sleep (the test forced nothing)";
    EXPECT_EQ(y_saw_w.load(), 1) << "Y's hook ran while stop_sync(X) still waited for X's hook, which had returned";
}

// ---- a failed start's quarantined record and a shard in a long sleep ---------------------------
// A start takes a fresh record at the last 10-bit generation (the test seam
// first_generation), and fails: its Insert cannot be queued (the seam
// fail_inbox_posts). Giving the record back puts it into quarantine (its
// 10-bit generation wraps), which only the shard reclaims -- and the shard,
// idle, is in a long sleep that no message will end. On a4e5bb9 the record
// stayed quarantined (a slot lost until something woke the shard: up to an
// hour). Now giving it back wakes the shard, as a worker's recycle does.
std::atomic<int> g_freed_pushes{0};
void count_push(std::uint32_t, std::uint32_t) { g_freed_pushes.fetch_add(1); }

TEST(FailedStart, AQuarantinedRecordWakesAShardInALongSleep) {
    hooks::first_generation.store(1023);
    struct Restore {
        ~Restore() {
            hooks::first_generation.store(1);
            hooks::fail_inbox_posts.store(0);
            hooks::freed.store(nullptr);
        }
    } restore;
    tw::Runtime rt(one_shard());
    // Idle since its creation: the shard sleeps until a message comes.
    std::this_thread::sleep_for(300ms);
    hooks::freed.store(&count_push);
    const int before = g_freed_pushes.load();
    hooks::fail_inbox_posts.store(1);
    std::error_code ec;
    tw::StartOptions o;
    o.delay = 1h;
    const tw::Timer t = rt.start(o, tw::detail::Callback([] {}), ec);
    EXPECT_EQ(ec, tw::errc::no_memory);
    EXPECT_FALSE(t);
    EXPECT_TRUE(wait_until([&] { return g_freed_pushes.load() > before; }, 3s))
        << "the quarantined record was not reclaimed: the shard slept on";
}

// ---- the owner rule is asserted (checked builds) -----------------------------------------
// Debug and sanitizer builds check at each write of the own-clock deadline
// that the writer holds the timer's deadline lock (OwnDeadline): a write
// without it aborts with the rule it broke.
// ---- the clock reads of a start (issue 21: "no clock read where none is
// needed") ----
// A start with a delay reads CLOCK_MONOTONIC at most once (its deadline is
// "now + delay": never a cached now, which could fire it early; where the
// TSC path is on, the TSC extends this thread's reading of at most 50 us
// ago to an upper bound of now instead: runtime/clock.hpp); one at an
// absolute monotonic deadline reads none: the deadline is the deadline, and
// one within kMaxDelay of 0 is within kMaxDelay of now (the clock is never
// negative). Only a deadline beyond kMaxDelay is checked against a reading.
// Counted on this thread by the interposed clock_gettime() above (a start
// placed in this thread's cell runs here whole; a posted one too).
TEST(StartClockReads, AtMostOneForADelayNoneForAMonotonicDeadline) {
    tw::Config c;
    c.shards = 1;
    tw::Runtime rt(c);
    std::vector<tw::Timer> keep;
    int before = t_mono_reads;
    keep.push_back(rt.start(60s, [] {}));
    EXPECT_LE(t_mono_reads - before, 1) << "start(delay)";
    const tw::TimePoint at = tw::Clock::now() + 60s;
    before = t_mono_reads;
    keep.push_back(rt.start_at(at, [] {}));
    EXPECT_EQ(t_mono_reads - before, 0) << "start_at(deadline)";
    before = t_mono_reads;
    keep.push_back(rt.start_at(tw::TimePoint{} + 1ns, [] {}));  // long past: fires at once
    EXPECT_EQ(t_mono_reads - before, 0) << "start_at(past deadline)";
    // Beyond kMaxDelay from 0: checked against a reading (and refused when
    // it is beyond kMaxDelay from now too).
    before = t_mono_reads;
    EXPECT_THROW((void)rt.start_at(tw::TimePoint{} + tw::kMaxDelay * 2, [] {}), tw::Error);
    EXPECT_GE(t_mono_reads - before, 1);
    for (auto& t : keep) (void)t.stop();
}

TEST(StartClockReads, TheCApiReadsOnceForADelayAndNoneForAMonotonicDeadline) {
    tw_config cfg = c_config(1, 0);
    tw_runtime* rt = create_runtime(cfg);
    ASSERT_NE(rt, nullptr);
    const auto noop = [](void*, tw_timer) {};
    tw_timer a = 0, b = 0, c = 0;
    int before = t_mono_reads;
    ASSERT_EQ(tw_timer_start(rt, 60'000'000'000ull, 0, noop, nullptr, &a), TW_OK);
    EXPECT_EQ(t_mono_reads - before, 1) << "tw_timer_start";
    tw_timer_spec s;
    tw_timer_spec_init(&s);
    s.callback = noop;
    s.deadline_ns = tw_now_ns() + 60'000'000'000ull;
    before = t_mono_reads;
    ASSERT_EQ(tw_timer_start_ex(rt, &s, &b), TW_OK);
    EXPECT_EQ(t_mono_reads - before, 0) << "tw_timer_start_ex(deadline_ns)";
    s.deadline_ns = 0;
    s.delay_ns = 1'000'000'000;
    before = t_mono_reads;
    ASSERT_EQ(tw_timer_start_ex(rt, &s, &c), TW_OK);
    EXPECT_EQ(t_mono_reads - before, 1) << "tw_timer_start_ex(delay_ns)";
    s.delay_ns = 0;
    s.deadline_ns = TW_MAX_DELAY_NS * 3;  // beyond: checked against a reading, refused
    tw_timer d = 0;
    before = t_mono_reads;
    EXPECT_EQ(tw_timer_start_ex(rt, &s, &d), TW_EINVAL);
    EXPECT_GE(t_mono_reads - before, 1);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
}

TEST(OwnerRule, AnOwnClockDeadlineWriteWithoutTheLockAborts) {
    namespace rt = tickwheel::rt;
    alignas(64) rt::Extra x;
    x.own_lock.store(rt::OwnDeadline::tag(7));  // free, generation 7
    if constexpr (!rt::kCheckOwners) GTEST_SKIP() << "a release build: the owner checks are compiled away";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(rt::OwnDeadline::store(x, rt::OwnDeadline::tag(7) | 1, 42), "owner rule broken: Extra::deadline_ns");
    // Held by generation 7 (count 1): the holder's write passes.
    x.own_lock.store(rt::OwnDeadline::tag(7) | 1);
    rt::OwnDeadline::store(x, rt::OwnDeadline::tag(7) | 1, 42);
    EXPECT_EQ(x.deadline_ns.load(), 42);
    // A stale holder's value (generation 6) does not.
    EXPECT_DEATH(rt::OwnDeadline::store(x, rt::OwnDeadline::tag(6) | 1, 43), "owner rule broken");
}
