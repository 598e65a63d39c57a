// SPDX-License-Identifier: MIT OR Apache-2.0
// The callers' cells (src/runtime/caller_cells.hpp) and the driver's
// wake-ups (shard.hpp, "No lost wake-up"; issue 31). Each race is forced by
// parking one side at the exact step with the test hooks (test_hooks.hpp),
// never by sleeping:
//   * a caller that places an earlier timer in its cell while the driver is
//     about to park ('d') wakes it;
//   * a poster whose wake-up CAS loses to the driver lowering its sleep
//     ('y', 'v') tries again (S1);
//   * a worker's claim that found the word moved later re-files it, and a
//     reset to "now" that lands meanwhile ('b', 'a') is not late (bug 3);
// and the cells' own behaviour: evictions, resets of a timer in a cell,
// stops by another thread, a thread's exit, a runtime destroyed first.
#include "test_support.hpp"
#include "tickwheel/runtime.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/caller_cells.hpp"
#include "runtime/shard.hpp"
#include "runtime/test_hooks.hpp"

namespace {

using namespace tw_test::names;
namespace hooks = tickwheel::rt::test_hooks;

// How late a timer may be on a loaded 2-core machine when nothing is lost
// (a lost wake-up makes it as late as the far timers below: seconds).
constexpr auto kLate = kSanitized ? 800ms : 400ms;

std::int64_t ns(TimePoint t) { return t.time_since_epoch().count(); }

struct Fired {
    std::atomic<std::int64_t> at{0};
    std::atomic<int> n{0};
};
std::uint64_t start_recorded(tw::Runtime& rt, TimePoint at, Fired& run) {
    return rt.start_at(at, [&run] {
                 run.at.store(ns(Clock::now()));
                 run.n.fetch_add(1);
             })
        .id();
}

// ---- parking one thread at one hook point --------------------------------------
struct Park {
    std::atomic<char> what{0};
    std::atomic<const void*> rec{nullptr};  // only this record's point (nullptr: any)
    std::atomic<bool> mine_only{false};     // only a thread with t_mine set
    std::atomic<bool> taken{false};
    tw_test::Gate parked, go;
};
std::atomic<Park*> g_park[2] = {};
std::atomic<int> g_seen_d{0}, g_seen_P{0};
std::atomic<std::int64_t> g_last_P_ns{0}, g_last_d_ns{0};  // when a driver last passed 'P' (in its pass), 'd' (parking)
thread_local bool t_mine = false;

void hook(const void* rec, char what) {
    if (what == 'd') {
        g_seen_d.fetch_add(1);
        g_last_d_ns.store(ns(Clock::now()));
    }
    if (what == 'P') {
        g_seen_P.fetch_add(1);
        g_last_P_ns.store(ns(Clock::now()));
    }
    for (auto& slot : g_park) {
        Park* p = slot.load();
        if (p == nullptr || p->what.load() != what) continue;
        if (p->rec.load() != nullptr && p->rec.load() != rec) continue;
        if (p->mine_only.load() && !t_mine) continue;
        if (p->taken.exchange(true)) continue;
        p->parked.open();
        (void)p->go.wait(60s);
    }
}
struct Hooks {
    Hooks() {
        g_seen_d = 0;
        g_seen_P = 0;
        hooks::in_window.store(&hook);
    }
    ~Hooks() {
        hooks::in_window.store(nullptr);
        for (auto& s : g_park) s.store(nullptr);
    }
};
/// Parks live in static storage: a library thread may still read the last
/// one after its test returned.
Park& fresh_park() {
    static Park parks[256];
    static int next = 0;
    if (next == 256) std::abort();
    return parks[next++];
}
/// Opens `p.go` when the test ends (also on a failed ASSERT).
struct Release {
    Park& p;
    ~Release() { p.go.open(); }
};

tw::Config one_shard(unsigned workers = 2) {
    tw::Config c;
    c.shards = 1;
    c.workers = workers;
    return c;
}

// ---- wake-ups -------------------------------------------------------------------------
// The driver computed its sleep (until the far timer), looked at the cells,
// and is parked at 'd' before its futex sleep. A caller places an earlier
// timer in its cell: it must wake the driver (the futex word moves, so the
// sleep that follows returns at once).
TEST(CellWakeUp, APlaceWhileTheDriverParksWakesIt) {
    Hooks h;
    tw::Runtime rt(one_shard());
    Fired far, near;
    ASSERT_TRUE(wait_until([] { return g_seen_d.load() > 0; }));
    Park& p = fresh_park();
    Release rel{p};
    p.what = 'd';
    g_park[0].store(&p);
    start_recorded(rt, Clock::now() + 30s, far);  // wakes it; it parks at 'd' until the far one
    ASSERT_TRUE(p.parked.wait(kWait)) << "the driver never reached 'd'";
    const TimePoint due = Clock::now() + 50ms;
    start_recorded(rt, due, near);  // into this thread's cell
    p.go.open();
    ASSERT_TRUE(wait_until([&] { return near.n.load() == 1; }, kLate + 1s)) << "lost wake-up";
    EXPECT_GE(near.at.load(), ns(due)) << "early";
    EXPECT_LT(near.at.load(), ns(due + kLate)) << "late: the driver slept past it";
    EXPECT_EQ(far.n.load(), 0);
}

// S1: a poster read the tick the driver sleeps until (the far one) and is
// about to CAS it to 0 ('v') when the driver lowers it to an earlier one it
// found (another caller's timer in its cell, placed while the driver was
// awake: 'y'). The CAS fails; the poster must look again: its own timer is
// earlier still. (1.5 gave up after one failed CAS: the timer waited for the
// driver's wake-up at the lowered tick.)
TEST(CellWakeUp, APosterWhoseCasLosesToTheDriverLoweringItsSleepTriesAgain) {
    Hooks h;
    tw::Runtime rt(one_shard());
    Fired far, mid, near;
    ASSERT_TRUE(wait_until([] { return g_seen_d.load() > 0; }));
    start_recorded(rt, Clock::now() + 60s, far);
    ASSERT_TRUE(wait_until([&] { return g_seen_d.load() > 1; }));  // asleep until the far one
    // 1. Another thread places `mid`: it wakes the driver, whose pass finds
    //    nothing due; it stores the far tick as its sleep, then finds `mid`
    //    in the cell and stops at 'y', about to lower its sleep to it.
    Park& lowering = fresh_park();
    Release r1{lowering};
    lowering.what = 'y';
    g_park[0].store(&lowering);
    const TimePoint mid_due = Clock::now() + 3s;
    std::thread([&] { start_recorded(rt, mid_due, mid); }).join();
    ASSERT_TRUE(lowering.parked.wait(kWait)) << "the driver did not lower its sleep for the cell's timer";
    // 2. A third thread places `near`: it reads the far tick and stops at 'v'.
    Park& poster = fresh_park();
    Release r2{poster};
    poster.what = 'v';
    poster.mine_only = true;
    g_park[1].store(&poster);
    const TimePoint near_due = Clock::now() + 100ms;
    std::thread placer([&] {
        t_mine = true;
        start_recorded(rt, near_due, near);
    });
    ASSERT_TRUE(poster.parked.wait(kWait)) << "the placer did not try to wake the driver";
    // 3. The driver lowers its sleep to `mid`'s tick and parks; then the CAS.
    const int parks = g_seen_d.load();
    lowering.go.open();
    ASSERT_TRUE(wait_until([&] { return g_seen_d.load() > parks; }));
    std::this_thread::sleep_for(20ms);  // (let the driver reach its futex)
    poster.go.open();
    placer.join();
    ASSERT_TRUE(wait_until([&] { return near.n.load() == 1; }, 5s));
    EXPECT_GE(near.at.load(), ns(near_due)) << "early";
    EXPECT_LT(near.at.load(), ns(near_due + kLate))
        << "late by " << (near.at.load() - ns(near_due)) / 1'000'000 << " ms: the wake-up was lost to the lowering";
    EXPECT_EQ(mid.n.load(), 0);
}

// A lost wake-up is late every time (by the rest of the driver's ~100 ms
// sleep); a loaded machine only sometimes: up to three tries, and the test
// fails only if every one was late.
/// The scenario of both bug-3 tests: a worker parked at 'L' with the timer
/// moved 3 s later, then reset(t, 0). `long_sleep`: released once the driver
/// has gone back to its long sleep (until the far timer); else as soon as it
/// parked after the pass that drained the Refile (its short sleep). Returns
/// how late t ran after that moment (a reset's "now"), in ns.
std::int64_t reset_during_refile_lateness_ns(bool long_sleep) {
    Hooks h;
    tw::Runtime rt(one_shard());
    Fired keep_asleep, t_run;
    start_recorded(rt, Clock::now() + 2s, keep_asleep);
    const std::uint64_t t = start_recorded(rt, Clock::now() + 20ms, t_run);
    Park& claim = fresh_park();
    Release r1{claim};
    claim.what = 'b';
    g_park[0].store(&claim);
    EXPECT_TRUE(claim.parked.wait(kWait)) << "no worker claimed the due timer";
    EXPECT_TRUE(rt.reset(t, 3s));
    Park& refile = fresh_park();
    Release r2{refile};
    refile.what = 'L';
    g_park[1].store(&refile);
    claim.go.open();
    EXPECT_TRUE(refile.parked.wait(kWait)) << "the worker did not find the timer moved later";
    // The first pass after the reset began (its drain takes the Refile: 'P'
    // follows the drain), then its park ('d'): the driver is in the short
    // sleep of a pass that drained a message. (Stamped after the reset, a
    // quick driver's pass was missed and the next one, with nothing to
    // drain, went to a long sleep, which any message ends.)
    const std::int64_t reset_begin = ns(Clock::now());
    EXPECT_TRUE(rt.reset(t, 0ns));
    EXPECT_TRUE(wait_until([&] {
        const std::int64_t p = g_last_P_ns.load();
        return p > reset_begin && g_last_d_ns.load() > p;
    })) << "the driver did not take the Refile";
    if (long_sleep) {
        // It passes once more, quiet, and parks until the far timer: the
        // Insert's own wake-up is the only one left.
        const std::int64_t quiet_after = ns(Clock::now()) + 90'000'000;
        EXPECT_TRUE(wait_until([&] { return g_last_P_ns.load() > quiet_after && g_last_d_ns.load() > g_last_P_ns.load(); }));
    }
    const TimePoint released = long_sleep ? TimePoint(std::chrono::nanoseconds(reset_begin)) : Clock::now();
    refile.go.open();
    EXPECT_TRUE(wait_until([&] { return t_run.n.load() == 1; }, 5s));
    EXPECT_EQ(keep_asleep.n.load(), 0);
    return t_run.at.load() - ns(released);
}

// Bug 3: a worker holds a claim item of a due timer; a reset moves the timer
// 3 s later before the worker's CAS ('b'), so the worker finds it later and
// re-files it ('L'); meanwhile reset(t, 0) moves it to now, and its Refile
// finds the record in no list of the wheel (dropped) -- the wake-up is
// spent. The worker's Insert must wake the driver for the word's deadline
// (now), not the one it read (3 s). A far timer keeps the driver asleep
// until 2 s, so a lost wake-up shows as ~2 s late. (The review's
// reproduction saw ~80 ms: the driver's sleep was then capped at
// kHousekeepingNs after the Refile; here it has gone back to a long sleep.)
TEST(CellWakeUp, AResetToNowDuringAWorkersRefileOfALaterClaimIsNotLate) {
    const std::int64_t late = reset_during_refile_lateness_ns(true);
    EXPECT_LT(late, std::chrono::nanoseconds(kLate).count())
        << "late by " << late / 1'000'000 << " ms: the Insert woke nobody";
}

// Bug 3 again, the driver in a short sleep: right after it drained the
// reset's Refile (a pass that drained a message sleeps at most
// kHousekeepingNs, and only a wake-up for a deadline before its tick ends
// that sleep early). The worker's Insert must wake it for the word's
// deadline (now); a wake-up for the stale 3 s leaves the timer until the
// sleep ends (~100 ms late: the review's ~80 ms). In the test above the
// driver had gone back to a long sleep, which any message ends.
TEST(CellWakeUp, AResetToNowDuringARefileWakesADriverInAShortSleep) {
    // A wake-up takes well under a millisecond; the lost one ~100 ms.
    constexpr std::int64_t kWakeNs = kSanitized ? 70'000'000 : 50'000'000;
    std::int64_t late[3] = {0, 0, 0};
    for (auto& l : late) {
        l = reset_during_refile_lateness_ns(false);
        if (HasFailure() || l < kWakeNs) return;
    }
    ADD_FAILURE() << "late by " << late[0] / 1'000'000 << ", " << late[1] / 1'000'000 << " and "
                  << late[2] / 1'000'000 << " ms: the Insert woke nobody";
}

// ---- the cells ------------------------------------------------------------------------
// A start+stop pair stays in the caller's cell: the record is reused at
// once (the slots stay few), nothing is left pending, and the driver is not
// woken by it (its passes stay few while the pairs run).
TEST(Cells, APairStaysOnTheCallersCore) {
    Hooks h;
    tw::Runtime rt(one_shard());
    const tw::Timer far = rt.start(1h, [] {});
    ASSERT_TRUE(wait_until([&] { return g_seen_d.load() > 0; }));
    std::this_thread::sleep_for(50ms);
    const int passes = g_seen_d.load();
    for (int i = 0; i < 20000; ++i) {
        const tw::Timer t = rt.start(10s, [] {});
        ASSERT_TRUE(rt.stop(t));
    }
    // (Every 1024th reuse of a record wraps its 10-bit generation: it waits
    // in quarantine for the driver, which such a record wakes, and the next
    // start takes another record meanwhile.)
    constexpr int kWraps = 20000 / 1024 + 1;
    EXPECT_LE(g_seen_d.load() - passes, 2 + kWraps) << "the pairs woke the driver";
    const tw::Stats st = rt.stats();
    EXPECT_LE(st.slots, 4u + kWraps) << "the pairs took fresh records";
    EXPECT_EQ(st.pending_per_shard.at(0), 1u);
    EXPECT_TRUE(rt.stop(far));
}

// More timers than a cell holds: entries are evicted (their Inserts go to
// the inbox before their entry is replaced) and every timer fires, in
// time, never early -- those left in the cell (taken by the driver's scans
// as they come due) and those evicted alike.
TEST(Cells, EvictedTimersFireOnTime) {
    tw::Runtime rt(one_shard());
    constexpr std::uint32_t kCap = tw::rt::CallerCells::kChunkSlots * tw::rt::CallerCells::kMaxChunks;
    constexpr std::uint32_t kN = kCap + 2000;
    struct Hit {
        std::atomic<std::int64_t> at{0};
        std::int64_t due = 0;
        std::int64_t started = 0;  // when its start returned
    };
    std::vector<Hit> hits(kN);
    // Due after the start loop, spread over a window the workers can keep
    // up with: under ThreadSanitizer on a loaded 2-core machine the 133 K
    // starts took 1.7 s and 133 K callbacks over 300 ms fell ~1 s behind
    // (CPU, not the cells: the cell's and the posted timers alike).
    constexpr std::uint32_t kWindowUs = kSanitized ? 3'000'000u : 300'000u;
    const TimePoint t0 = Clock::now() + (kSanitized ? 3s : 300ms);
    for (std::uint32_t i = 0; i < kN; ++i) {
        // Spread over the window, in an order that mixes early and late ones.
        const TimePoint due = t0 + std::chrono::microseconds((i * 7919u) % kWindowUs);
        hits[i].due = ns(due);
        Hit* h = &hits[i];
        (void)rt.start_at(due, [h] { h->at.store(ns(Clock::now())); });
        h->started = ns(Clock::now());
    }
    ASSERT_TRUE(wait_until([&] {
        for (auto& h : hits)
            if (h.at.load() == 0) return false;
        return true;
    }, kWait + 10s));
    std::uint32_t early = 0, late = 0;
    for (auto& h : hits) {
        early += h.at.load() < h.due;
        // On time: within kLate of its deadline, or of its start where the
        // start loop outran the deadline (133 K starts take over 300 ms
        // under ThreadSanitizer: those timers were due when started).
        late += h.at.load() >= std::max(h.due, h.started) + std::chrono::nanoseconds(kLate).count();
    }
    EXPECT_EQ(early, 0u);
    EXPECT_EQ(late, 0u);
}

// A reset of a timer still in its caller's cell: earlier fires at the new
// deadline (the driver reads the cells' words after the Refile), later
// never before it.
TEST(Cells, ResetsOfATimerInACell) {
    tw::Runtime rt(one_shard());
    Fired keep_asleep, earlier, later;
    start_recorded(rt, Clock::now() + 5s, keep_asleep);
    const std::uint64_t e = start_recorded(rt, Clock::now() + 4s, earlier);
    const std::uint64_t l = start_recorded(rt, Clock::now() + 20ms, later);
    const TimePoint e_due = Clock::now() + 50ms;
    ASSERT_TRUE(rt.reset_at(e, e_due));
    const TimePoint l_due = Clock::now() + 300ms;
    ASSERT_TRUE(rt.reset_at(l, l_due));
    ASSERT_TRUE(wait_until([&] { return earlier.n.load() == 1 && later.n.load() == 1; }));
    EXPECT_GE(earlier.at.load(), ns(e_due));
    EXPECT_LT(earlier.at.load(), ns(e_due + kLate)) << "the reset to an earlier deadline was not seen";
    EXPECT_GE(later.at.load(), ns(l_due)) << "fired at the deadline its cell entry had";
    EXPECT_LT(later.at.load(), ns(l_due + kLate));
    EXPECT_EQ(keep_asleep.n.load(), 0);
}

// A timer in one thread's cell, stopped by another thread: stopped exactly
// once, never runs, and its record comes back (the slots do not grow).
TEST(Cells, AStopFromAnotherThreadEndsACellsTimer) {
    static std::atomic<std::uint64_t> freed{0};
    freed.store(0);
    hooks::freed.store([](std::uint32_t, std::uint32_t n) { freed.fetch_add(n); });
    struct Unhook {
        ~Unhook() { hooks::freed.store(nullptr); }
    } unhook;
    tw::Runtime rt(one_shard());
    std::atomic<int> ran{0}, released{0};
    constexpr int kN = 3000;
    for (int i = 0; i < kN; ++i) {
        const tw::Timer t = rt.start(10s, tw_test::Counted(&released, &ran));
        bool stopped = false;
        std::thread([&] { stopped = rt.stop(t); }).join();
        ASSERT_TRUE(stopped);
    }
    EXPECT_EQ(ran.load(), 0);
    EXPECT_EQ(released.load(), kN);
    ASSERT_TRUE(wait_until([&] { return rt.stats().pending_per_shard.at(0) == 0; }));
    // Every record comes back for reuse (the driver recycles each: its
    // entry, left in the starter's cell, is stale and dropped).
    ASSERT_TRUE(wait_until([&] { return freed.load() >= static_cast<std::uint64_t>(kN); }))
        << freed.load() << " of " << kN << " records came back";
}

// Threads that start a timer and exit: every timer fires; the cells they
// held are given back (the last thread still gets one: its start is placed
// in a cell, hook 'l'), many more threads than cells.
TEST(Cells, ExitingThreadsGiveTheirCellsBack) {
    Hooks h;
    tw::Runtime rt(one_shard());
    constexpr int kThreads = 3 * tw::rt::CallerCells::kCells;
    std::vector<Fired> runs(kThreads);
    for (int i = 0; i < kThreads; ++i)
        std::thread([&, i] { start_recorded(rt, Clock::now() + 10ms, runs[i]); }).join();
    ASSERT_TRUE(wait_until([&] {
        for (auto& r : runs)
            if (r.n.load() != 1) return false;
        return true;
    }));
    Park& placed = fresh_park();
    Release rel{placed};
    placed.what = 'l';
    placed.mine_only = true;
    g_park[0].store(&placed);
    placed.go.open();  // (pass through: only whether it gets there)
    Fired last;
    std::thread([&] {
        t_mine = true;
        start_recorded(rt, Clock::now() + 10ms, last);
    }).join();
    EXPECT_TRUE(placed.parked.is_open()) << "no cell was free for a new thread: exits did not give them back";
    ASSERT_TRUE(wait_until([&] { return last.n.load() == 1; }));
}

// A runtime destroyed while a thread still holds a cell in it: the
// thread's exit later touches nothing of it (ASan), and a new runtime
// works for it.
TEST(Cells, ARuntimeDestroyedBeforeTheThreadExits) {
    tw_test::Gate started, destroyed;
    auto rt = std::make_unique<tw::Runtime>(one_shard());
    Fired mine;
    std::thread th([&] {
        start_recorded(*rt, Clock::now() + 1h, mine);
        started.open();
        (void)destroyed.wait(kWait);
        tw::Runtime again(one_shard());
        Fired x;
        start_recorded(again, Clock::now() + 5ms, x);
        EXPECT_TRUE(wait_until([&] { return x.n.load() == 1; }));
    });
    ASSERT_TRUE(started.wait(kWait));
    rt.reset();
    destroyed.open();
    th.join();
    EXPECT_EQ(mine.n.load(), 0);
}

// A scan takes what is due by its horizon and leaves the rest in the cell
// (their stops stay on the owner's core), the earliest of them noted.
TEST(CellScan, AReadLeavesTheLaterEntries) {
    tw::rt::HandleTable table;
    tw::rt::CallerCells cells(table);
    tw::rt::CallerCells::Cell& c = cells.cell(0);
    using Cells = tw::rt::CallerCells;
    for (std::uint32_t i = 0; i < Cells::kChunkSlots; ++i) {
        std::uint32_t index = 0, gen = 0;
        ASSERT_NE(table.allocate(index, gen), nullptr);
        const std::uint32_t pos = cells.reserve(c);
        ASSERT_TRUE(cells.place(c, pos, index, gen, i % 2 == 0 ? 10 : 1000));  // half due at 10
    }
    std::uint64_t taken = 0;
    cells.scan(c, 10, [&](std::uint64_t) { ++taken; });
    EXPECT_EQ(taken, Cells::kChunkSlots / 2);
    EXPECT_EQ(Cells::earliest(c), 1000u);
}

// stats().pending counts the timers waiting in callers' cells.
TEST(Cells, PendingCountsTimersInCells) {
    tw::Runtime rt(one_shard());
    std::vector<tw::Timer> t;
    for (unsigned i = 0; i < 3; ++i) t.push_back(rt.start(1h, [] {}));
    EXPECT_EQ(rt.stats().pending_per_shard.at(0), t.size());
    for (auto& x : t) EXPECT_TRUE(rt.stop(x));
    EXPECT_EQ(rt.stats().pending_per_shard.at(0), 0u);
}

}  // namespace
