// SPDX-License-Identifier: MIT OR Apache-2.0
// The driver token (src/runtime/shard.hpp): a caller that finds its shard's
// driver parked takes the token and applies its message to the wheel on its
// own thread; the driver takes the token back before each pass. Each race
// of the handoff is forced here by parking one side at the exact step with
// the test hooks (test_hooks.hpp: 'T' a caller holding the token, 'd' a
// driver that gave it back and is about to park, 'D' a driver about to take
// it, 'X' a driver that found it held), never by sleeping:
//   * a caller that files an earlier deadline while the driver is between
//     giving the token back and parking wakes it (no lost wake-up);
//   * a caller that files one while the driver is awake, about to take the
//     token, needs no wake-up: the driver's pass sees it;
//   * a driver whose pass is due while a caller holds the token waits for
//     it, no other caller takes it meanwhile (they post to the inbox), and
//     the due timer fires once the caller gives it back;
//   * a stop applied with the token recycles the record at once (the next
//     start reuses it), and a manual runtime never hands the token out;
//   * many threads racing starts at ever earlier deadlines against the
//     driver: every timer fires, never early, within a bound.
#include "test_support.hpp"
#include "tickwheel/runtime.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/handle_table.hpp"
#include "runtime/shard.hpp"
#include "runtime/test_hooks.hpp"

namespace {

using namespace std::chrono_literals;
namespace tw = tickwheel;
namespace hooks = tickwheel::rt::test_hooks;
using tw::Clock;
using tw::TimePoint;
using tw_test::kSanitized;
using tw_test::kWait;
using tw_test::wait_until;

// How late a timer may fire on a loaded 2-core machine (a bound that a lost
// wake-up -- the timer firing with the far one, 30 s later -- breaks).
constexpr auto kLate = kSanitized ? 5s : 2s;

/// One parking place: the first thread that reaches hook point `what`
/// (and, for caller points, has t_mine set) opens `parked` and waits on `go`.
struct Park {
    std::atomic<char> what{0};
    std::atomic<bool> taken{false};
    tw_test::Gate parked, go;
};
std::atomic<Park*> g_park{nullptr};
/// A Park for one test, never used before (a Park parks once). Static
/// storage: a library thread may still be inside the hook, reading the last
/// one, after its test returned. (1024: --gtest_repeat=100 of the 9 parks this file's tests make.)
Park& fresh_park() {
    static Park parks[1024];
    static int next = 0;
    if (next == 1024) std::abort();
    return parks[next++];
}
// Counts of the hook points seen (any thread), and 'T's of threads marked.
std::atomic<int> g_seen_T{0}, g_seen_X{0}, g_seen_d{0}, g_seen_D{0};
thread_local bool t_mine = false;
thread_local int t_took_token = 0;

void hook(const void*, char what) {
    switch (what) {
        case 'T':
            g_seen_T.fetch_add(1);
            ++t_took_token;
            break;
        case 'X': g_seen_X.fetch_add(1); break;
        case 'd': g_seen_d.fetch_add(1); break;
        case 'D': g_seen_D.fetch_add(1); break;
        case 'P': break;
        default: return;
    }
    Park* p = g_park.load();
    if (p == nullptr || p->what.load() != what) return;
    if (what == 'T' && !t_mine) return;  // callers: only the one the test marked
    if (p->taken.exchange(true)) return;  // once
    p->parked.open();
    (void)p->go.wait(60s);
}

struct Hooks {
    Hooks() {
        g_seen_T = g_seen_X = g_seen_d = g_seen_D = 0;
        hooks::in_window.store(&hook);
    }
    ~Hooks() {
        hooks::in_window.store(nullptr);
        g_park.store(nullptr);
    }
};

/// Opens `p.go` when the test ends (also on a failed ASSERT) and joins `t`.
struct Release {
    Park& p;
    std::thread* t = nullptr;
    ~Release() {
        p.go.open();
        if (t != nullptr && t->joinable()) t->join();
    }
};

tw::Config one_shard() {
    tw::Config c;
    c.shards = 1;
    c.workers = 2;
    return c;
}

/// A timer's observed run: when it ran (ns since the clock's epoch), 0 = not yet.
struct Fired {
    std::atomic<std::int64_t> at{0};
    std::atomic<int> n{0};
};
std::int64_t ns(TimePoint t) { return t.time_since_epoch().count(); }

std::uint64_t start_recorded(tw::Runtime& rt, TimePoint at, Fired& run) {
    return rt.start_at(at, [&run] {
                 run.at.store(ns(Clock::now()));
                 run.n.fetch_add(1);
             })
        .id();
}

/// Holds `rt`'s driver at 'D' with `p` (awake, before it takes the token
/// back: callers may take it meanwhile): starts `near`, due at `due`, whose
/// filing wakes the parked driver. False if it did not get there in kWait.
[[nodiscard]] bool hold_driver_at_D(tw::Runtime& rt, Park& p, TimePoint due, Fired& near) {
    p.what = 'D';
    g_park.store(&p);
    start_recorded(rt, due, near);
    return p.parked.wait(kWait);
}

// The driver gave the token back (sleep_until_ set to the far timer) and is
// parked at 'd', before its futex sleep. A caller takes the token and files
// a deadline earlier than the one the driver is about to sleep until: it
// must wake it (the futex word moves, so the sleep that follows returns at
// once). Without that wake-up the near timer would fire with the far one.
TEST(ShardToken, CallerFilingEarlierWhileDriverParksAtHandoffWakesIt) {
    Hooks h;
    tw::Runtime rt(one_shard());
    Fired far, near;
    // Let the driver settle (its first passes), then park it at its next 'd'.
    ASSERT_TRUE(wait_until([] { return g_seen_d.load() > 0; }));
    Park& p = fresh_park();
    p.what = 'd';
    Release rel{p};
    g_park.store(&p);
    // The far timer: applied with the token (the driver is parked), earlier
    // than the empty wheel's "never": the driver wakes, passes, gives the
    // token back and parks at 'd' with sleep_until_ = the far tick.
    start_recorded(rt, Clock::now() + 30s, far);
    ASSERT_TRUE(p.parked.wait(kWait)) << "the driver never reached 'd'";
    const int before = t_took_token;
    const TimePoint t0 = Clock::now();
    const TimePoint due = t0 + 50ms;
    start_recorded(rt, due, near);
    EXPECT_EQ(t_took_token, before + 1) << "the start did not take the free token";
    p.go.open();
    ASSERT_TRUE(wait_until([&] { return near.n.load() == 1; }, kLate + 1s)) << "lost wake-up: the near timer did not fire";
    EXPECT_GE(near.at.load(), ns(due)) << "early";
    EXPECT_LT(near.at.load(), ns(due + kLate)) << "late: the driver slept past it";
    EXPECT_EQ(far.n.load(), 0);
}

// The driver woke (the near timer is due) and is parked at 'D', about to
// take the token for its pass. A caller takes the free token and files
// another due timer: no wake-up is needed (sleep_until_ is 0), the pass
// that follows sees it; both fire, never early.
TEST(ShardToken, CallerAppliesWhileTheAwakeDriverWaitsAtTheHandoff) {
    Hooks h;
    tw::Runtime rt(one_shard());
    ASSERT_TRUE(wait_until([] { return g_seen_d.load() > 0; }));
    Fired first, second;
    Park& p = fresh_park();
    Release rel{p};
    const TimePoint due1 = Clock::now() + 30ms;
    ASSERT_TRUE(hold_driver_at_D(rt, p, due1, first));
    const int before = t_took_token;
    const TimePoint due2 = Clock::now() + 1ms;
    start_recorded(rt, due2, second);
    EXPECT_EQ(t_took_token, before + 1) << "the driver is outside its pass: the token is free";
    p.go.open();
    ASSERT_TRUE(wait_until([&] { return first.n.load() == 1 && second.n.load() == 1; }, kLate + 1s));
    EXPECT_GE(first.at.load(), ns(due1));
    EXPECT_GE(second.at.load(), ns(due2));
    EXPECT_LT(first.at.load(), ns(due1 + kLate));
}

// A caller holds the token (parked at 'T', stopping a timer) when the
// driver's pass comes due. The driver must wait ('X'), no other caller may
// take the token meanwhile (their messages go to the inbox), nothing fires
// while the holder is parked, and once it gives the token back the due
// timer, the stop and the other caller's start all take effect within a bound.
TEST(ShardToken, DriverWaitsForACallerHoldingTheTokenThenRunsTheDuePass) {
    Hooks h;
    tw::Runtime rt(one_shard());
    ASSERT_TRUE(wait_until([] { return g_seen_d.load() > 0; }));
    Fired due_run, victim_run, other_run;
    const std::uint64_t victim = start_recorded(rt, Clock::now() + 20s, victim_run);
    // The due timer wakes the driver (earlier than the victim): once that
    // pass has parked again, the token is free for the stop below.
    const int passes = g_seen_d.load();
    const TimePoint due = Clock::now() + 300ms;
    start_recorded(rt, due, due_run);
    ASSERT_TRUE(wait_until([&] { return g_seen_d.load() > passes; }));
    Park& p = fresh_park();
    p.what = 'T';
    std::atomic<bool> stopped{false};
    std::thread holder;  // (before `rel`, which joins it)
    Release rel{p, &holder};
    g_park.store(&p);
    holder = std::thread([&] {
        t_mine = true;
        stopped = rt.stop(victim);  // takes the token, parks at 'T' before applying
    });
    ASSERT_TRUE(p.parked.wait(kWait)) << "the stop did not take the token";
    // The due pass: the driver wakes and finds the token held.
    ASSERT_TRUE(wait_until([] { return g_seen_X.load() > 0; }, 5s + kLate)) << "the driver never wanted the token";
    const int before = t_took_token;
    const TimePoint due2 = Clock::now();
    start_recorded(rt, due2, other_run);
    EXPECT_EQ(t_took_token, before) << "a caller took the token the driver wants";
    EXPECT_EQ(due_run.n.load(), 0) << "a pass ran while a caller held the token";
    const TimePoint released = Clock::now();
    p.go.open();
    holder.join();
    EXPECT_TRUE(stopped.load());
    ASSERT_TRUE(wait_until([&] { return due_run.n.load() == 1 && other_run.n.load() == 1; }, kLate + 1s))
        << "the due timer did not fire once the token came back";
    EXPECT_GE(due_run.at.load(), ns(due));
    EXPECT_LT(due_run.at.load(), ns(released + kLate));
    EXPECT_GE(other_run.at.load(), ns(due2));
    EXPECT_EQ(victim_run.n.load(), 0);
    // The stop's record is reclaimed: the shard's live timers are 0.
    ASSERT_TRUE(wait_until([&] { return rt.stats().pending_per_shard.at(0) == 0; }, kLate));
}

// The driver is in its pass (parked at 'P': it holds the token, its inbox
// just drained, its sleep word 0). A caller's start due 50 ms later finds
// the token held and posts to the inbox; its wake-up check sees the driver
// awake and wakes nobody. The driver's pass then ends with the message still
// queued: it parks, leaving it to the next holder, but no later than the
// posted deadline (posted_min_due_), not until its own next one (a timer
// 20 s away; its housekeeping cap would wake it after 100 ms, so a driver
// that ignored the posted deadline fires the timer >= 50 ms late, every
// time). The best of three tries must be under 45 ms late (a loaded machine
// may delay one or two), and none early or lost.
TEST(ShardToken, DriverParkingWithAQueuedEarlierDeadlineSleepsNoLaterThanIt) {
    Hooks h;
    tw::Runtime rt(one_shard());
    ASSERT_TRUE(wait_until([] { return g_seen_d.load() > 0; }));
    Fired far;
    const int passes = g_seen_d.load();
    start_recorded(rt, Clock::now() + 30s, far);  // wakes the driver once
    ASSERT_TRUE(wait_until([&] { return g_seen_d.load() > passes; }));
    std::int64_t best = std::numeric_limits<std::int64_t>::max();
    for (int attempt = 0; attempt < 3; ++attempt) {
        Fired near;
        Park& p = fresh_park();
        p.what = 'P';
        Release rel{p};
        g_park.store(&p);
        // Wake the driver for a pass (an earlier timer, still seconds
        // away), and hold it inside the pass.
        start_recorded(rt, Clock::now() + std::chrono::seconds(20 - attempt), far);
        ASSERT_TRUE(p.parked.wait(kWait));
        const int before = t_took_token;
        const TimePoint due = Clock::now() + 50ms;
        start_recorded(rt, due, near);
        EXPECT_EQ(t_took_token, before) << "the driver holds the token: the start must post";
        EXPECT_GT(rt.stats().inbox_per_shard.at(0), 0u);
        p.go.open();
        ASSERT_TRUE(wait_until([&] { return near.n.load() == 1; }, kLate + 1s)) << "lost";
        EXPECT_GE(near.at.load(), ns(due)) << "early";
        best = std::min(best, near.at.load() - ns(due));
        g_park.store(nullptr);
    }
    EXPECT_LT(best, std::chrono::nanoseconds(45ms).count())
        << "the driver slept past the deadline posted during its pass (best of 3: " << best / 1000 << " us late)";
    EXPECT_EQ(far.n.load(), 0);
}

// With the driver held outside its pass (parked at 'D': awake, before it
// takes the token), every start+stop pair applies both messages with the
// token: the stopped record is recycled at once, so the next start reuses
// its slot, and the runtime stays at a handful of slots (a slot's 10-bit
// generation wraps every 1024 reuses: quarantined, it waits for the driver,
// and the next start takes another). Through the inbox (the token path
// disabled) the same loop left over 4000 slots (measured).
TEST(ShardToken, StopWithTheTokenRecyclesTheRecordAtOnce) {
    Hooks h;
    tw::Runtime rt(one_shard());
    ASSERT_TRUE(wait_until([] { return g_seen_d.load() > 0; }));
    Fired near;
    Park& p = fresh_park();
    Release rel{p};
    const TimePoint due = Clock::now() + 1ms;
    ASSERT_TRUE(hold_driver_at_D(rt, p, due, near));
    constexpr int kPairs = 20000;
    const int before = t_took_token;
    const std::size_t slots_before = rt.stats().slots;
    for (int i = 0; i < kPairs; ++i) {
        tw::Timer t = rt.start(60s, [] {});
        ASSERT_TRUE(t.stop());
    }
    EXPECT_EQ(t_took_token - before, 2 * kPairs);
    EXPECT_LE(rt.stats().slots - slots_before, 64u) << "stopped records were not recycled at once";
    EXPECT_EQ(near.n.load(), 0);  // (the driver has not run its pass)
    p.go.open();
    ASSERT_TRUE(wait_until([&] { return near.n.load() == 1; }, kLate + 1s));
    EXPECT_GE(near.at.load(), ns(due));
}

// kDirectMaxPending: a lone caller applies its requests itself (the token)
// while its shard's wheel holds fewer timers than that, and posts them to
// the inbox once the wheel holds as many (the driver, on another core, then
// absorbs the cold records of large wheels). 100 000 pending is below it
// (it was not in 1.5: 65 536). With the driver held at 'D' (awake, before it
// takes the token back: callers may take it), 500 start+stop pairs take the
// token 1000 times with 100 000 timers filed, and never with
// kDirectMaxPending filed.
TEST(ShardToken, ALoneCallerTakesTheTokenOnlyWhileTheWheelHoldsFewerThanKDirectMaxPending) {
    constexpr std::size_t kBelow = 100000;  // (applied by the caller: the figure the threshold is for)
    for (const std::size_t filed : {kBelow, tickwheel::rt::Shard::kDirectMaxPending}) {
        SCOPED_TRACE(filed);
        Hooks h;
        tw::Runtime rt(one_shard());
        ASSERT_TRUE(wait_until([] { return g_seen_d.load() > 0; }));
        for (std::size_t i = 0; i < filed; ++i) (void)rt.start(60s, [] {});
        // All filed: those posted (once the wheel was full) drained by the driver.
        ASSERT_TRUE(wait_until([&] { return rt.stats().pending_per_shard.at(0) == filed; }, kWait));
        Fired near;
        Park& p = fresh_park();
        Release rel{p};
        const TimePoint due = Clock::now() + 1ms;
        ASSERT_TRUE(hold_driver_at_D(rt, p, due, near));  // (its start posted or applied)
        const int before = t_took_token;
        for (int i = 0; i < 500; ++i) {
            tw::Timer t = rt.start(60s, [] {});
            ASSERT_TRUE(t.stop());
        }
        EXPECT_EQ(t_took_token - before, filed == kBelow ? 1000 : 0);
        p.go.open();
        ASSERT_TRUE(wait_until([&] { return near.n.load() == 1; }, kLate + 1s));
        EXPECT_GE(near.at.load(), ns(due));
    }
}

// Spare records (HandleTable::kSpareMax): a stop applied with the token
// keeps its record for the next start that holds the token, up to
// kSpareMax per shard; the others go to the shared free stack. With the
// driver held at 'D' (awake, before it takes the token back: callers take
// it), 100 starts and then 100 stops run under the token: 64 records become
// spares, 36 go to the free stack. Then another thread holds the token
// (parked at 'T', inside its own start): our starts cannot take it, so they
// allocate from the free stack -- the 36 -- and then fresh records; the
// spares are not theirs. Once the token is free again, starts under it
// take the spares: no fresh record.
TEST(ShardToken, StopsUnderTheTokenKeepAtMostKSpareMaxRecordsForTheNextTokenHolder) {
    Hooks h;
    tw::Runtime rt(one_shard());
    ASSERT_TRUE(wait_until([] { return g_seen_d.load() > 0; }));
    Park& d = fresh_park();
    d.what = 'D';
    Release rel_d{d};
    g_park.store(&d);
    Fired near;
    start_recorded(rt, Clock::now() + 1ms, near);  // wakes the driver: it parks at 'D'
    ASSERT_TRUE(d.parked.wait(kWait));

    constexpr std::size_t kN = 100;
    constexpr std::size_t kSpare = tickwheel::rt::HandleTable::kSpareMax;
    static_assert(kN > kSpare);
    std::vector<tw::Timer> first;
    for (std::size_t i = 0; i < kN; ++i) first.push_back(rt.start(60s, [] {}));
    const int took = t_took_token;
    for (auto& t : first) ASSERT_TRUE(t.stop());
    ASSERT_EQ(t_took_token - took, static_cast<int>(kN)) << "a stop did not take the token";
    std::vector<std::uint32_t> freed;
    for (auto& t : first) freed.push_back(tw_test::id_index(t.id()));
    std::sort(freed.begin(), freed.end());

    Park& holder = fresh_park();
    holder.what = 'T';
    std::thread th;  // (before rel_t: joined by it, destroyed after it)
    Release rel_t{holder, &th};
    g_park.store(&holder);
    th = std::thread([&] {
        t_mine = true;
        (void)rt.start(60s, [] {});
    });
    ASSERT_TRUE(holder.parked.wait(kWait));
    const std::size_t slots0 = rt.stats().slots;
    std::vector<tw::Timer> second;
    const int took2 = t_took_token;
    for (std::size_t i = 0; i < kN; ++i) second.push_back(rt.start(60s, [] {}));
    EXPECT_EQ(t_took_token, took2) << "a start took the token another thread holds";
    std::size_t reused = 0;
    for (auto& t : second) reused += std::binary_search(freed.begin(), freed.end(), tw_test::id_index(t.id())) ? 1 : 0;
    EXPECT_EQ(reused, kN - kSpare) << "the free stack did not hold exactly the records past kSpareMax";
    EXPECT_EQ(rt.stats().slots - slots0, kSpare) << "fresh records: as many as the spares held back";
    holder.go.open();
    th.join();

    // The token is free again (the driver still waits at 'D'): the spares
    // serve the next starts under it, less the one the holder took.
    const std::size_t slots1 = rt.stats().slots;
    const int took3 = t_took_token;
    std::vector<tw::Timer> third;
    for (std::size_t i = 0; i + 1 < kSpare; ++i) third.push_back(rt.start(60s, [] {}));
    EXPECT_EQ(t_took_token - took3, static_cast<int>(kSpare - 1));
    EXPECT_EQ(rt.stats().slots, slots1) << "a start under the token took a fresh record while spares were left";
    for (auto& t : third) EXPECT_TRUE(t.stop());
    for (auto& t : second) EXPECT_TRUE(t.stop());
    d.go.open();
    ASSERT_TRUE(wait_until([&] { return near.n.load() == 1; }, kLate + 1s));
}

// Threads starting and stopping on one shard at once, with its driver
// running: the token passes between them (and the driver), and with it the
// spare records (plain loads and stores, ordered by the token: the
// ThreadSanitizer build checks them). Every timer is released exactly once
// and none runs.
TEST(ShardToken, ThreadsSharingOneShardsSpareRecordsReleaseEachTimerOnce) {
    tw::Runtime rt(one_shard());
    constexpr int kThreads = 4;
    const int kPairs = kSanitized ? 3000 : 30000;
    std::atomic<int> released{0}, ran{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t) {
        th.emplace_back([&] {
            while (!go.load()) std::this_thread::yield();
            std::vector<tw::Timer> live;
            for (int i = 0; i < kPairs; ++i) {
                live.push_back(rt.start(60s, tw_test::Counted(&released, &ran)));
                if (live.size() == 8) {
                    for (auto& x : live) ASSERT_TRUE(x.stop());
                    live.clear();
                }
            }
            for (auto& x : live) ASSERT_TRUE(x.stop());
        });
    }
    go.store(true);
    for (auto& x : th) x.join();
    EXPECT_EQ(released.load(), kThreads * kPairs);
    EXPECT_EQ(ran.load(), 0);
}

// A manual runtime has no driver thread: its shards keep the token (the
// advancing thread drives), so every message goes to the inbox, and timers
// fire by the advance exactly as before.
TEST(ShardToken, ManualRuntimeNeverHandsOutTheToken) {
    Hooks h;
    tw::Config c = one_shard();
    c.manual_clock = true;
    tw::Runtime rt(c);
    std::atomic<int> ran{0};
    const int before = t_took_token;
    (void)rt.start(10ms, [&] { ran.fetch_add(1); });
    tw::Timer b = rt.start(20ms, [&] { ran.fetch_add(1); });
    ASSERT_TRUE(b.stop());
    EXPECT_EQ(t_took_token, before);
    EXPECT_EQ(rt.advance(9ms), 0u);
    EXPECT_EQ(rt.advance(1ms), 1u);
    EXPECT_EQ(rt.advance(20ms), 0u);
    EXPECT_EQ(ran.load(), 1);
}

// Threads racing the driver with starts at ever earlier deadlines (each
// earlier than every other pending one: each needs the driver woken, by
// the token path or by the inbox's), stops of half of them, and the driver's
// own passes. Every timer not stopped fires exactly once, never early, and
// within the bound; none stopped fires after its stop returned true.
TEST(ShardToken, RacingEarlierDeadlinesAreNeverLostNorEarly) {
    tw::Runtime rt(one_shard());
    constexpr int kThreads = 3;
    const int kPer = kSanitized ? 150 : 600;
    struct Cell {
        std::int64_t due = 0;
        Fired run;
        std::atomic<bool> stopped{false};
    };
    std::vector<std::unique_ptr<Cell>> cells(static_cast<std::size_t>(kThreads * kPer));
    for (auto& c : cells) c = std::make_unique<Cell>();
    std::atomic<bool> go{false};
    std::vector<std::thread> th;
    const TimePoint base = Clock::now() + 300ms;
    for (int t = 0; t < kThreads; ++t) {
        th.emplace_back([&, t] {
            std::mt19937 rng(static_cast<unsigned>(t) + 1);
            while (!go.load()) std::this_thread::yield();
            for (int i = 0; i < kPer; ++i) {
                Cell& c = *cells[static_cast<std::size_t>(t * kPer + i)];
                // Earlier and earlier (down to "now"), interleaved across threads.
                const TimePoint at = std::max(Clock::now(), base - std::chrono::microseconds(i * 400));
                c.due = ns(at);
                Fired* run = &c.run;
                tw::Timer timer = rt.start_at(at, [run] {
                    run->at.store(ns(Clock::now()));
                    run->n.fetch_add(1);
                });
                ASSERT_TRUE(timer);
                if (rng() % 2 == 0 && timer.stop()) c.stopped.store(true);
            }
        });
    }
    go.store(true);
    for (auto& x : th) x.join();
    const TimePoint end = Clock::now();
    ASSERT_TRUE(wait_until(
        [&] {
            for (auto& c : cells)
                if (!c->stopped.load() && c->run.n.load() == 0) return false;
            return true;
        },
        kLate + 1s))
        << "a timer was lost";
    for (auto& c : cells) {
        if (c->stopped.load()) {
            EXPECT_EQ(c->run.n.load(), 0) << "ran after its stop returned true";
            continue;
        }
        EXPECT_EQ(c->run.n.load(), 1);
        EXPECT_GE(c->run.at.load(), c->due) << "early";
        EXPECT_LT(c->run.at.load(), std::max(c->due, ns(end)) + std::chrono::nanoseconds(kLate).count())
            << "late: a lost wake-up";
    }
}

}  // namespace
