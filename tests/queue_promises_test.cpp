// SPDX-License-Identifier: MIT OR Apache-2.0
// The promises of tw_queue_run a loop relies on (issue 31, third review),
// each reproduced through the C API first:
//   (q1) a timeout up to INT64_MAX ns means that long: 069403a added it to
//        the steady clock's reading and overflowed, so tw_queue_run returned
//        0 at once and a loop that waits "for ever" spun. The same overflow
//        on a manual runtime whose clocks an advance had saturated: "now +
//        delay" wrapped into the past and a timer fired at once.
//   (q2) `max` bounds the callbacks a call runs: a BURST timer's catch-up
//        runs count one each, those past `max` stay owed (the timer stays
//        due), and a timer owes at most TW_BURST_MAX_OWED deadlines (the
//        oldest beyond are skipped, counted in missed) -- 069403a ran and
//        returned 150 from tw_queue_run(q, 1, 0).
// And, found by reading: every run gives a lateness sample against the
// deadline it serves (the queue's catch-up runs gave none); a manual
// clock's advance_to is a CAS-max (a load and a store let two movers take
// it back); tw_queue_stats.due and the fd after shutdown/close; and the
// deadline lock's generation check in the reset path, forced with hook 'O'
// (a stale reset parked before the lock while the slot is reused); a query
// of a due wall-clock timer beside a reset answers one side of it, forced
// with hook 'Q'.
#include <poll.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/clock.hpp"
#include "runtime/test_hooks.hpp"
#include "test_support.hpp"
#include "test_support/capi.hpp"
#include "test_support/park.hpp"
#include "tickwheel/runtime.hpp"
#include "tickwheel/tickwheel.h"

namespace {

using namespace tw_test::capi;
using tw_test::ThreadPark;

using namespace std::chrono_literals;
using tw_test::wait_until;

constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();

RtPtr make_runtime(bool manual, std::uint32_t shards = 1, std::uint64_t resolution_ns = 0) {
    tw_config c = c_config(shards, 2);
    c.resolution_ns = resolution_ns;
    if (manual) c.flags |= TW_CONFIG_MANUAL_CLOCK;
    return RtPtr(create_runtime(c));
}

struct Count {
    std::atomic<std::uint64_t> runs{0};
    std::atomic<int> released{0};
};
void count_cb(void* arg, tw_timer) { static_cast<Count*>(arg)->runs.fetch_add(1); }
void count_release(void* arg) { static_cast<Count*>(arg)->released.fetch_add(1); }

tw_timer start(tw_runtime* rt, tw_queue* q, Count& c, std::uint64_t delay_ns, std::uint64_t period_ns = 0,
               std::uint32_t policy = TW_PERIOD_SKIP) {
    tw_timer_spec s = c_spec(count_cb, &c, count_release, delay_ns, period_ns);
    s.period_policy = policy;
    s.queue = q;
    tw_timer id = 0;
    EXPECT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
    return id;
}

tw_timer_info query(tw_runtime* rt, tw_timer id) {
    tw_timer_info i;
    tw_timer_info_init(&i);
    EXPECT_EQ(tw_timer_query(rt, id, &i), TW_OK);
    return i;
}

// ---- (q1) timeouts up to INT64_MAX -----------------------------------------------------
// A loop that waits "for ever" with a huge positive timeout. At 069403a
// every timeout above INT64_MAX minus the steady clock's reading returned 0
// at once (the deadline wrapped into the past): the loop spun, ~10^5 times
// in the 100 ms before its timer came due. Now it waits for the timer.
class HugeTimeout : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(HugeTimeout, WaitsForTheTimerInsteadOfReturningAtOnce) {
    const std::int64_t timeout = GetParam();
    Count c;
    RtPtr rt = make_runtime(false, 2);
    tw_queue* q = make_queue(rt.get());
    const auto t0 = std::chrono::steady_clock::now();
    start(rt.get(), q, c, 100 * kMs);
    int spins = 0;
    int rc;
    while ((rc = tw_queue_run(q, 1, timeout)) == 0 && spins < 1'000'000) ++spins;
    EXPECT_EQ(rc, 1);
    EXPECT_EQ(spins, 0) << "tw_queue_run(q, 1, " << timeout << ") returned 0 with nothing due";
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 100ms);
    EXPECT_EQ(c.runs.load(), 1u);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}
INSTANTIATE_TEST_SUITE_P(
    Queue, HugeTimeout,
    ::testing::Values(kI64Max, kI64Max - 1, std::int64_t{1} << 62 /* worked before */,
                      // just past the steady clock's end from now
                      kI64Max - static_cast<std::int64_t>(tw_now_ns()) + 1'000'000'000));

// A thread waiting with INT64_MAX and nothing due at all stays inside
// until the runtime shuts down (then TW_ESHUTDOWN), as with -1.
TEST(HugeTimeout, WithNothingDueWaitsUntilShutdown) {
    Count c;  // (outlives the runtime: its release hook)
    RtPtr rt = make_runtime(false, 2);
    tw_queue* q = make_queue(rt.get());
    std::atomic<int> calls{0}, rc{1};
    std::thread runner([&] {
        int r;
        do {
            calls.fetch_add(1);
            r = tw_queue_run(q, 1, kI64Max);
        } while (r >= 0 && calls.load() < 1000);
        rc.store(r);
    });
    struct Join {
        tw_runtime* rt;
        std::thread& t;
        ~Join() {
            if (t.joinable()) {
                (void)tw_runtime_shutdown(rt);
                t.join();
            }
        }
    } join{rt.get(), runner};
    ASSERT_TRUE(wait_until([&] { return queue_stats(q).runners == 1; }));
    // A timer due in 50 ms wakes it once; then it waits again. Any return
    // with nothing run would show in `calls` (069403a: 1000 calls at once).
    start(rt.get(), q, c, 50 * kMs);
    ASSERT_TRUE(wait_until([&] { return c.runs.load() == 1; }));
    ASSERT_TRUE(wait_until([&] { return calls.load() >= 2 && queue_stats(q).runners == 1; }));
    EXPECT_EQ(tw_runtime_shutdown(rt.get()), TW_OK);
    runner.join();
    EXPECT_EQ(rc.load(), TW_ESHUTDOWN);
    EXPECT_EQ(calls.load(), 2) << "tw_queue_run returned with nothing run and no shutdown";
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

// The C++ face: Queue::run(n, Duration::max()) is the same call.
TEST(HugeTimeout, CxxQueueRunWithDurationMax) {
    tickwheel::Runtime rt(tw_test::small_config(1, 2));
    tickwheel::Queue q(rt);
    std::atomic<int> runs{0};
    tickwheel::StartOptions o;
    o.delay = 50ms;
    o.queue = &q;
    rt.start(o, [&runs] { runs.fetch_add(1); });
    int zeros = 0;
    std::size_t n;
    while ((n = q.run(1, tickwheel::Duration::max())) == 0 && zeros < 1'000'000) ++zeros;
    EXPECT_EQ(n, 1u);
    EXPECT_EQ(zeros, 0);
    EXPECT_EQ(runs.load(), 1);
}

// ---- a manual clock at its end ------------------------------------------------------------
// Eight advances of TW_MAX_DELAY_NS reach past INT64_MAX: 069403a saturated
// the virtual clock there, after which "now + delay" of a start wrapped to
// a deadline in the past (the 1 s timer below ran at the next advance, at
// once) and the wall clock's reading overflowed. The clocks now stop at
// Clocks::max_mono(), where every reading plus 2 x TW_MAX_DELAY_NS fits.
TEST(ManualClockEnd, AdvancesPastTheRangeStopTheClocksWhereADelayStillFits) {
    Count c;  // (outlives the runtime: the release hooks of the timers it still holds)
    RtPtr rt = make_runtime(true);
    std::uint64_t mono = tw_runtime_now_ns(rt.get(), TW_CLOCK_MONOTONIC);
    std::uint64_t wall = tw_runtime_now_ns(rt.get(), TW_CLOCK_REALTIME);
    for (int i = 0; i < 9; ++i) {
        ASSERT_EQ(tw_runtime_advance(rt.get(), TW_MAX_DELAY_NS), 0) << i;
        const std::uint64_t m = tw_runtime_now_ns(rt.get(), TW_CLOCK_MONOTONIC);
        const std::uint64_t w = tw_runtime_now_ns(rt.get(), TW_CLOCK_REALTIME);
        EXPECT_GE(m, mono) << i;
        EXPECT_GE(w, wall) << i;
        EXPECT_LE(w, static_cast<std::uint64_t>(kI64Max) - 2 * TW_MAX_DELAY_NS) << "the wall clock overflowed, " << i;
        mono = m;
        wall = w;
    }
    // A timer 1 s from the clock's end: never early -- the clocks cannot
    // reach its deadline any more, so it never runs.
    const tw_timer id = start(rt.get(), nullptr, c, 1000 * kMs);
    EXPECT_EQ(tw_runtime_advance(rt.get(), 0), 0);
    EXPECT_EQ(tw_runtime_advance(rt.get(), 500 * kMs), 0);
    EXPECT_EQ(c.runs.load(), 0u) << "a timer due 1 s from now ran at once";
    const tw_timer_info i = query(rt.get(), id);
    EXPECT_EQ(i.state, TW_TIMER_PENDING);
    EXPECT_GT(i.deadline_ns, tw_runtime_now_ns(rt.get(), TW_CLOCK_MONOTONIC));
    // Starts at the clock's end on every clock, up to TW_MAX_DELAY_NS away.
    tw_timer_spec s = c_spec(count_cb, &c, count_release);
    for (const int clk : {TW_CLOCK_MONOTONIC, TW_CLOCK_BOOTTIME, TW_CLOCK_REALTIME}) {
        s.clock = clk;
        s.delay_ns = TW_MAX_DELAY_NS;
        tw_timer t = 0;
        ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &t), TW_OK) << clk;
        EXPECT_GT(query(rt.get(), t).deadline_ns, tw_runtime_now_ns(rt.get(), clk)) << clk;
    }
    EXPECT_EQ(tw_runtime_advance(rt.get(), TW_MAX_DELAY_NS), 0);
    EXPECT_EQ(c.runs.load(), 0u);
}

// Clocks::advance_to from two threads (an advance, and a queue's run of a
// manual runtime's timer: RuntimeCore::call): one parked between its load
// and its CAS (hook 'V') while the other moves the clock further. With a
// load and a store (069403a) the parked one stored its older, smaller value
// on waking: the clock went back 100 ns.
TEST(ManualClockEnd, AdvanceToNeverMovesTheClockBack) {
    tickwheel::rt::Clocks clocks(true);
    const std::int64_t base = clocks.mono();
    ThreadPark park('V');
    std::thread t([&] {
        ThreadPark::who = std::this_thread::get_id();
        clocks.advance_to(base + 200);
    });
    ASSERT_TRUE(wait_until([] { return ThreadPark::parked.load(); }));
    clocks.advance_to(base + 300);  // (not parked: another thread)
    EXPECT_EQ(clocks.mono(), base + 300);
    ThreadPark::release();
    t.join();
    tickwheel::rt::test_hooks::in_window.store(nullptr);
    EXPECT_EQ(clocks.mono(), base + 300) << "the clock moved back by " << base + 300 - clocks.mono() << " ns";
    clocks.advance_to(base + 250);
    EXPECT_EQ(clocks.mono(), base + 300);
    clocks.advance_to(kI64Max);
    EXPECT_EQ(clocks.mono(), clocks.max_mono());
}

// ---- (q2) max bounds the callbacks, BURST catch-ups included -----------------------------
// A BURST timer (period 2 ms) bound to q, on a manual runtime, left unrun
// for 300 ms: due at 2 ms and owing the 149 grid deadlines after it. At
// 069403a tw_queue_run(q, 1, 0) ran all 150 and returned 150. Now each call
// runs at most max callbacks and returns how many ran; the rest stay owed
// (the timer stays due: fd readable, tw_queue_stats.due 1, state DUE);
// each callback gives one lateness sample, against the deadline it serves.
TEST(QueueBurst, MaxCountsEveryCatchUpRunAndTheRestStayDue) {
    Count c;
    RtPtr rt = make_runtime(true);
    tw_queue* q = make_queue(rt.get());
    const tw_timer id = start(rt.get(), q, c, 2 * kMs, 2 * kMs, TW_PERIOD_BURST);
    ASSERT_EQ(tw_runtime_advance(rt.get(), 300 * kMs), 0);  // delivered, not run
    EXPECT_EQ(c.runs.load(), 0u);
    EXPECT_TRUE(readable(tw_queue_fd(q)));

    EXPECT_EQ(tw_queue_run(q, 1, 0), 1) << "a BURST timer's catch-up ran past max";
    EXPECT_EQ(c.runs.load(), 1u);
    EXPECT_TRUE(readable(tw_queue_fd(q))) << "owed runs left: still due";
    EXPECT_EQ(queue_stats(q).due, 1u);
    tw_timer_info i = query(rt.get(), id);
    EXPECT_EQ(i.state, TW_TIMER_DUE);
    EXPECT_EQ(i.runs, 1u);

    EXPECT_EQ(tw_queue_run(q, 10, 0), 10);
    EXPECT_EQ(c.runs.load(), 11u);
    EXPECT_EQ(query(rt.get(), id).runs, 11u);
    EXPECT_EQ(tw_queue_run(q, 1000, 0), 139);  // the rest: 150 deadlines in 300 ms
    EXPECT_EQ(c.runs.load(), 150u);
    EXPECT_FALSE(readable(tw_queue_fd(q)));
    EXPECT_EQ(tw_queue_run(q, 1000, 0), 0);
    i = query(rt.get(), id);
    EXPECT_EQ(i.state, TW_TIMER_PENDING);
    EXPECT_EQ(i.runs, 150u);
    EXPECT_EQ(i.missed, 0u);
    EXPECT_EQ(i.deadline_ns - tw_runtime_now_ns(rt.get(), TW_CLOCK_MONOTONIC), 2 * kMs);  // on its grid

    const tw_queue_stats qs = queue_stats(q);
    EXPECT_EQ(qs.ran, 150u);
    EXPECT_EQ(qs.run_samples, 150u) << "a catch-up run gave no lateness sample";
    // The runs served 2, 4, ..., 300 ms and all began at 300 ms: the
    // latest deadline served was 0 late, the earliest 298 ms (histogram
    // buckets: within 6.25%).
    EXPECT_GE(qs.run_max_ns, 280 * kMs);
    EXPECT_LE(qs.run_p50_ns, 170 * kMs) << "catch-up runs measured against the first deadline";
    EXPECT_EQ(rt_stats(rt.get()).lateness_samples, 150u);

    ASSERT_EQ(tw_runtime_advance(rt.get(), 2 * kMs), 0);
    EXPECT_EQ(tw_queue_run(q, 1000, 0), 1);
    EXPECT_EQ(tw_timer_stop(rt.get(), id), TW_OK);
    EXPECT_EQ(c.released.load(), 1);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

// The same through the reproduction: real time, a 2 ms BURST timer
// left unrun for 300 ms, tw_queue_run(q, 1, 0) -- returned ~150 at 069403a.
TEST(QueueBurst, RealTimeRunOfOneRunsOne) {
    Count c;
    RtPtr rt = make_runtime(false, 2);
    tw_queue* q = make_queue(rt.get());
    start(rt.get(), q, c, 2 * kMs, 2 * kMs, TW_PERIOD_BURST);
    ASSERT_TRUE(wait_until([&] { return readable(tw_queue_fd(q)); }));
    std::this_thread::sleep_for(300ms);  // the time it is left unrun (owed runs pile up)
    for (int k = 0; k < 20; ++k) {
        const std::uint64_t before = c.runs.load();
        EXPECT_EQ(tw_queue_run(q, 1, 0), 1) << k;
        EXPECT_EQ(c.runs.load(), before + 1) << k;
    }
    const std::uint64_t before = c.runs.load();
    const int n = tw_queue_run(q, 7, 0);
    EXPECT_EQ(n, 7);
    EXPECT_EQ(c.runs.load(), before + static_cast<std::uint64_t>(n));
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
    EXPECT_EQ(c.released.load(), 1);
}

// Stop and reset of a BURST timer that a run left due with owed runs: the
// stop is exact (TW_OK, the hook inside the call, no more runs, the fd no
// longer readable); a reset takes it back and forgets what it owed (its
// next run is the reset's deadline).
TEST(QueueBurst, ADueTimerWithOwedRunsIsStoppedOrResetExactly) {
    Count a, b;
    RtPtr rt = make_runtime(true);
    tw_queue* q = make_queue(rt.get());
    const tw_timer ida = start(rt.get(), q, a, 2 * kMs, 2 * kMs, TW_PERIOD_BURST);
    const tw_timer idb = start(rt.get(), q, b, 2 * kMs, 2 * kMs, TW_PERIOD_BURST);
    ASSERT_EQ(tw_runtime_advance(rt.get(), 100 * kMs), 0);
    // Each owes 49 after its first run (deadline order: a, b, then a's and
    // b's owed ones by their deadlines).
    EXPECT_EQ(tw_queue_run(q, 3, 0), 3);
    EXPECT_EQ(a.runs.load() + b.runs.load(), 3u);
    EXPECT_EQ(query(rt.get(), ida).state, TW_TIMER_DUE);
    EXPECT_EQ(query(rt.get(), idb).state, TW_TIMER_DUE);
    EXPECT_EQ(queue_stats(q).due, 2u);

    EXPECT_EQ(tw_timer_stop(rt.get(), ida), TW_OK);
    EXPECT_EQ(a.released.load(), 1);
    EXPECT_EQ(queue_stats(q).due, 1u);
    ASSERT_EQ(tw_timer_reset(rt.get(), idb, 10 * kMs), TW_OK);
    EXPECT_EQ(queue_stats(q).due, 0u);
    EXPECT_FALSE(readable(tw_queue_fd(q)));
    const std::uint64_t a_runs = a.runs.load(), b_runs = b.runs.load();
    EXPECT_EQ(tw_queue_run(q, 1000, 0), 0) << "a stopped or reset timer's owed runs ran";
    ASSERT_EQ(tw_runtime_advance(rt.get(), 9 * kMs), 0);
    EXPECT_EQ(tw_queue_run(q, 1000, 0), 0);
    ASSERT_EQ(tw_runtime_advance(rt.get(), 1 * kMs), 0);
    EXPECT_EQ(tw_queue_run(q, 1000, 0), 1) << "the reset's deadline: one run, nothing owed from before";
    EXPECT_EQ(a.runs.load(), a_runs);
    EXPECT_EQ(b.runs.load(), b_runs + 1);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
    EXPECT_EQ(b.released.load(), 1);
}

// A timer owes at most TW_BURST_MAX_OWED deadlines: 5 s unrun at 1 ms owes
// 4999 after its first; the catch-up serves the latest 1000 and counts the
// 3999 before them in missed (runs + missed - 1 is still the index of the
// deadline the last run served). 069403a ran all 5000 in one call.
TEST(QueueBurst, OwedRunsAreCappedTheOldestCountedAsMissed) {
    Count c;
    RtPtr rt = make_runtime(true);
    tw_queue* q = make_queue(rt.get());
    const tw_timer id = start(rt.get(), q, c, 1 * kMs, 1 * kMs, TW_PERIOD_BURST);
    ASSERT_EQ(tw_runtime_advance(rt.get(), 5000 * kMs), 0);
    EXPECT_EQ(tw_queue_run(q, INT_MAX, 0), 1 + static_cast<int>(TW_BURST_MAX_OWED));
    EXPECT_EQ(tw_queue_run(q, INT_MAX, 0), 0);
    const tw_timer_info i = query(rt.get(), id);
    EXPECT_EQ(i.runs, 1 + TW_BURST_MAX_OWED);
    EXPECT_EQ(i.missed, 4999 - TW_BURST_MAX_OWED);
    EXPECT_EQ(i.runs + i.missed - 1, 4999u);  // the last run served the 5000 ms deadline
    EXPECT_EQ(i.deadline_ns - tw_runtime_now_ns(rt.get(), TW_CLOCK_MONOTONIC), 1 * kMs);
    const tw_queue_stats qs = queue_stats(q);
    EXPECT_EQ(qs.run_samples, qs.ran);
    EXPECT_LE(qs.run_p50_ns, 1000 * kMs) << "the runs served the latest 1000 deadlines";
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

// On the workers a burst is bounded by the same cap: a 100 us BURST timer
// whose first run blocks for 300 ms (~3000 grid deadlines) runs at most
// TW_BURST_MAX_OWED of them back to back after it, the older ones counted
// in missed; every run gives a lateness sample. (069403a: missed stayed 0
// and the burst ran all ~3000.)
TEST(WorkerBurst, OwedRunsAreCappedTheOldestCountedAsMissed) {
    tw_test::Gate gate;
    struct Arg {
        tw_test::Gate* gate;
        std::atomic<std::uint64_t> runs{0};
    } arg{&gate};
    RtPtr rt = make_runtime(false, 1, 100'000);
    tw_timer_spec s = tw_test::capi::c_spec(
        [](void* p, tw_timer) {
            auto* a = static_cast<Arg*>(p);
            if (a->runs.fetch_add(1) == 0) (void)a->gate->wait(std::chrono::seconds(30));
        },
        &arg, nullptr, 100'000, 100'000);
    s.period_policy = TW_PERIOD_BURST;
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    tw_test::OpenOnExit open{gate};
    ASSERT_TRUE(wait_until([&] { return arg.runs.load() == 1; }));
    std::this_thread::sleep_for(300ms);  // the first run overruns ~3000 periods
    gate.open();
    // The burst: ~1000 runs, then one per period.
    ASSERT_TRUE(wait_until([&] { return arg.runs.load() > TW_BURST_MAX_OWED; }));
    const tw_timer_info i = query(rt.get(), id);
    // >= 3000 grid deadlines passed during the first run (300 ms at 100
    // us): at least ~2000 beyond the cap were skipped (1500: room for a
    // shard that counted late under load).
    EXPECT_GE(i.missed, 1500u) << "the burst ran every owed deadline (" << i.runs << " runs)";
    ASSERT_EQ(tw_timer_stop_sync(rt.get(), id), TW_OK);
    const tw_stats st = rt_stats(rt.get());
    EXPECT_EQ(st.lateness_samples, arg.runs.load()) << "a run gave no lateness sample";
    EXPECT_EQ(st.fired, arg.runs.load());
}

// ---- the fd and tw_queue_stats.due after shutdown and close --------------------------------
// While the queue is open, the fd is readable iff due > 0; once it is
// closed (the runtime shut down, or the C++ Queue closed) due is 0 and the
// fd readable for good, and a run reports the end.
TEST(QueueClosed, DueIsZeroAndTheFdReadableForGood) {
    Count c;
    RtPtr rt = make_runtime(false, 2);
    tw_queue* q = make_queue(rt.get());
    start(rt.get(), q, c, 0);
    ASSERT_TRUE(wait_until([&] { return readable(tw_queue_fd(q)); }));
    EXPECT_EQ(queue_stats(q).due, 1u);
    EXPECT_EQ(tw_runtime_shutdown(rt.get()), TW_OK);
    EXPECT_EQ(queue_stats(q).due, 0u);
    EXPECT_TRUE(readable(tw_queue_fd(q)));
    EXPECT_EQ(tw_queue_run(q, 1, 0), TW_ESHUTDOWN);
    EXPECT_TRUE(readable(tw_queue_fd(q)));
    EXPECT_EQ(c.runs.load(), 0u);
    EXPECT_EQ(c.released.load(), 1);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);

    tickwheel::Runtime rt2(tw_test::small_config(1, 2));
    tickwheel::Queue q2(rt2);
    tickwheel::StartOptions o;
    o.queue = &q2;
    rt2.start(o, [] {});
    ASSERT_TRUE(wait_until([&] { return q2.stats().due == 1; }));
    EXPECT_TRUE(readable(q2.fd()));
    std::error_code ec;
    q2.close(ec);
    ASSERT_FALSE(ec);
    EXPECT_EQ(q2.stats().due, 0u);
    EXPECT_TRUE(readable(q2.fd()));
    EXPECT_EQ(q2.run(1, tickwheel::Duration::zero(), ec), 0u);
    EXPECT_EQ(ec, tickwheel::make_error_code(tickwheel::errc::invalid_argument));
}

// ---- a stale reset before the deadline lock (hook 'O') ------------------------------------
// A reset of wall-clock timer A passes its generation check and is parked
// right before it takes A's deadline lock (hook 'O'), while A is stopped,
// its slot recycled and wall-clock timer B started on it. Released, the
// reset must find the lock B's (OwnDeadline::lock's generation check) and
// do nothing: it returns false, B still answers query() with its own
// deadline and fires at it. Without that check the stale reset took B's
// lock under A's generation and let it go with A's tag on it: B answered
// "not found" to query() for good (the mutant that survived mutation
// testing of 1.5).
TEST(StaleResetBeforeTheDeadlineLock, LeavesTheSlotsNextTimerAlone) {
    for (const auto clock : {tickwheel::TimerClock::realtime, tickwheel::TimerClock::boottime}) {
        SCOPED_TRACE(clock == tickwheel::TimerClock::realtime ? "realtime" : "boottime");
        tickwheel::Runtime rt(tw_test::small_config(1, 2));
        tickwheel::StartOptions oa;
        oa.clock = clock;
        oa.deadline = tickwheel::TimePoint(rt.now(clock) + 1h);
        const tickwheel::Timer a = rt.start(oa, [] {});

        ThreadPark park('O');  // (its destructor releases and unhooks)
        std::atomic<int> result{-1};
        std::thread t([&] {
            ThreadPark::who = std::this_thread::get_id();
            result.store(rt.reset(a.id(), 1ms) ? 1 : 0);
        });
        ASSERT_TRUE(wait_until([] { return ThreadPark::parked.load(); }));

        // A stop through the inbox (a batch of one): the shard recycles A's
        // record onto the free stack (not the spare records a stop applied
        // under the shard's token keeps, which only plain starts take), and
        // the next start of B takes it from there.
        static std::atomic<std::uint32_t> slot{0};
        static std::atomic<bool> slot_freed{false};
        slot = tw_test::id_index(a.id());
        slot_freed = false;
        tickwheel::rt::test_hooks::freed.store(+[](std::uint32_t top, std::uint32_t) {
            if (top == slot.load()) slot_freed.store(true);
        });
        struct Unfreed {
            ~Unfreed() { tickwheel::rt::test_hooks::freed.store(nullptr); }
        } unfreed;
        const std::uint64_t ids[] = {a.id()};
        ASSERT_EQ(rt.stop(ids), 1u);
        ASSERT_TRUE(wait_until([] { return slot_freed.load(); })) << "A's record was not recycled";
        std::atomic<int> b_runs{0};
        std::atomic<std::int64_t> b_ran_at{0};
        tickwheel::TimePoint b_deadline{};
        std::vector<std::uint64_t> held;
        const std::uint64_t b = tw_test::start_on_the_slot_of(
            a.id(),
            [&]() -> std::uint64_t {
                tickwheel::StartOptions ob;
                ob.clock = clock;
                b_deadline = tickwheel::TimePoint(rt.now(clock) + 300ms);
                ob.deadline = b_deadline;
                return rt.start(ob, [&b_runs, &b_ran_at, &rt, clock] {
                    b_ran_at.store(rt.now(clock).count());
                    b_runs.fetch_add(1);
                }).id();
            },
            held);
        ASSERT_NE(b, 0u) << "A's slot was not reused";

        ThreadPark::release();
        t.join();
        EXPECT_EQ(result.load(), 0) << "a reset with A's id acted after A was stopped";
        const auto i = rt.query(b);
        ASSERT_TRUE(i) << "B answered \"not found\" to query(): the stale reset took its deadline lock";
        EXPECT_EQ(i->deadline, b_deadline);
        EXPECT_EQ(i->state, tickwheel::TimerStatus::pending);
        // B's own reset (to the same deadline) still takes its lock.
        EXPECT_TRUE(rt.reset_at(b, b_deadline)) << "B's deadline lock carries another generation";
        ASSERT_TRUE(wait_until([&] { return b_runs.load() == 1; }));
        EXPECT_GE(b_ran_at.load(), b_deadline.time_since_epoch().count()) << "B fired early";
        // A one-shot that ran is gone, once its callback (which counted the
        // run) has returned and its record was released.
        EXPECT_TRUE(wait_until([&] { return !rt.query(b); })) << "B stayed live after its run";
        for (const std::uint64_t h : held) (void)rt.stop(h);  // (those due already ran)
    }
}

}  // namespace

// ---- a query beside a reset (hook 'Q') -----------------------------------------------------
// A wall-clock (or boot-time) timer bound to a delivery queue whose thread
// does not call run() is DUE. A query reads its word (DUE) and is parked at
// hook 'Q', before it reads the timer's own-clock deadline, while a reset
// to an hour from now moves both (the word and the deadline, under the
// deadline lock). Released, the query must answer one side of the reset;
// since the reset returned before it read the deadline, the new one:
// PENDING, an hour ahead. Before the fix it answered DUE with the new
// deadline, an hour ahead of the clock (seen in stress.history under TSan:
// DUE with a deadline 25 ms ahead).
TEST(QueryBesideAReset, AnswersTheStateAndTheDeadlineOfOneSide) {
    for (const auto clock : {tickwheel::TimerClock::realtime, tickwheel::TimerClock::boottime}) {
        SCOPED_TRACE(clock == tickwheel::TimerClock::realtime ? "realtime" : "boottime");
        tickwheel::Runtime rt(tw_test::small_config(1, 1));
        tickwheel::Queue q(rt);
        tickwheel::StartOptions o;
        o.clock = clock;
        o.queue = &q;
        const tickwheel::TimePoint due_at(rt.now(clock));
        o.deadline = due_at;
        const tickwheel::Timer t = rt.start(o, [] {});
        ASSERT_TRUE(wait_until([&] {
            const auto i = rt.query(t);
            return i && i->state == tickwheel::TimerStatus::due;
        })) << "the timer never became due";

        ThreadPark park('Q');  // (its destructor releases and unhooks)
        std::optional<tickwheel::TimerInfo> answer;
        std::thread th([&] {
            ThreadPark::who = std::this_thread::get_id();
            answer = rt.query(t);
        });
        ASSERT_TRUE(wait_until([] { return ThreadPark::parked.load(); }));
        const tickwheel::TimePoint later(rt.now(clock) + 1h);
        EXPECT_TRUE(rt.reset_at(t.id(), later));
        ThreadPark::release();
        th.join();
        ASSERT_TRUE(answer) << "the query did not find a live timer";
        EXPECT_EQ(answer->state, tickwheel::TimerStatus::pending) << "the old state beside the new deadline";
        EXPECT_EQ(answer->deadline, later);
        const auto now_answer = rt.query(t);
        ASSERT_TRUE(now_answer);
        EXPECT_EQ(now_answer->state, tickwheel::TimerStatus::pending);
        EXPECT_EQ(now_answer->deadline, later);
        EXPECT_TRUE(rt.stop(t));
    }
}
