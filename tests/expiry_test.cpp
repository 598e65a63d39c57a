// SPDX-License-Identifier: MIT OR Apache-2.0
// Expiry split between the driver and the workers (issue 21): a shard hands
// due monotonic one-shots to the dispatcher as claim items, their words
// still PENDING, and the worker makes the transition itself
// (TimerState::claim_run: PENDING(d <= the driver's tick) -> RUNNING). The
// new interleavings are forced with the test hooks (src/runtime/
// test_hooks.hpp): a worker parked between taking the item and its CAS
// ('b') while another thread stops, resets or recycles the timer; the
// driver parked mid-hand-off ('h', items popped, not handed over) while
// another thread stops or resets them. Plus the wheel's two-ended pop
// (Wheel::pop_expired_n), the pure claim decision, and a burst racing stops.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "runtime/test_hooks.hpp"
#include "runtime/timer_state.hpp"
#include "test_support.hpp"
#include "test_support/capi.hpp"
#include "tickwheel/tickwheel.h"
#include "tickwheel/wheel.hpp"

using namespace std::chrono_literals;
namespace hooks = tickwheel::rt::test_hooks;
using tw_test::wait_until;

namespace {

using namespace tw_test::capi;

// ---- parking one thread at one hook point ------------------------------------
// The first thread that reaches window `what` parks there (once) until the
// test opens `go`; `parked` opens when it is there.
struct Park {
    char what = 0;
    std::atomic<bool> armed{false};
    tw_test::Gate parked, go;
};
std::atomic<Park*> g_park{nullptr};
// Threads inside park_hook: ~ParkGuard waits for none before the Park (a
// local of the test) goes away -- the driver may call the hook again at the
// same window right after the test opened `go`.
std::atomic<int> g_in_hook{0};

void park_hook(const void*, char what) {
    g_in_hook.fetch_add(1);
    Park* p = g_park.load();
    if (p != nullptr && what == p->what) {
        bool expected = true;
        if (p->armed.compare_exchange_strong(expected, false)) {
            p->parked.open();
            (void)p->go.wait(60s);
        }
    }
    g_in_hook.fetch_sub(1);
}

struct ParkGuard {
    Park& p;
    explicit ParkGuard(Park& park, char what) : p(park) {
        p.what = what;
        p.armed.store(true);
        g_park.store(&p);
        hooks::in_window.store(&park_hook);
    }
    ~ParkGuard() {
        p.go.open();  // never leave a thread parked (also on a failed ASSERT)
        hooks::in_window.store(nullptr);
        g_park.store(nullptr);
        while (g_in_hook.load() != 0) std::this_thread::yield();
    }
};

// ---- a timer's callback and release hook, counted ------------------------------
struct Probe {
    std::atomic<int> runs{0}, released{0};
    std::atomic<std::uint64_t> ran_at{0};
    std::uint64_t not_before = 0;  // the deadline it must not run before (set before it can run)
    std::atomic<int> early{0};
};
void probe_fire(void* arg, tw_timer) {
    auto* p = static_cast<Probe*>(arg);
    const std::uint64_t now = tw_now_ns();
    if (now < p->not_before) p->early.fetch_add(1);
    p->ran_at.store(now);
    p->runs.fetch_add(1);
}
void probe_release(void* arg) { static_cast<Probe*>(arg)->released.fetch_add(1); }

tw_runtime* make_runtime(unsigned shards = 1, unsigned workers = 2) {
    return create_runtime(c_config(shards, workers));
}

tw_timer start_at(tw_runtime* rt, std::uint64_t deadline, Probe& p) {
    tw_timer_spec s = c_spec(probe_fire, &p, probe_release);
    s.deadline_ns = deadline;
    p.not_before = deadline;
    tw_timer id = 0;
    EXPECT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
    return id;
}

struct Destroy {
    tw_runtime* rt;
    ~Destroy() {
        if (rt != nullptr) {
            EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
        }
    }
};

// The pending gauge (stats' pending, the metrics' tickwheel_timers_pending)
// never counts a timer whose callback may already have run: the driver
// stores it before it hands a batch to the workers. With the driver parked
// right after the hand-over ('H'), the worker runs the timer and releases
// it, and the gauge reads 0 already. (Stored only after the pass, as before,
// it read 1 here: a reader that waited for the callback could see the timer
// both run and pending -- MetricsCombined's scrape did, under TSan.)
TEST(PendingGauge, ATimerHandedToTheWorkersIsNoLongerCountedPending) {
    tw_runtime* rt = make_runtime(1, 1);
    Destroy d{rt};
    Park park;
    ParkGuard guard(park, 'H');
    Probe p;
    tw_timer id = 0;
    tw_timer_spec s = c_spec(probe_fire, &p, probe_release, 1'000'000);
    ASSERT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
    ASSERT_TRUE(park.parked.wait(30s)) << "the driver never handed a batch over";
    ASSERT_TRUE(wait_until([&] { return p.released.load() == 1; })) << "the worker did not run and release it";
    EXPECT_EQ(p.runs.load(), 1);
    tw_stats st;
    tw_stats_init(&st);
    ASSERT_EQ(tw_runtime_stats(rt, &st), TW_OK);
    EXPECT_EQ(st.pending, 0u) << "a timer that ran is still counted pending";
    park.go.open();
}

}  // namespace

// ---- the pure decision ------------------------------------------------------------
TEST(ClaimRun, DecisionRunsOnlyAPendingWordOfItsGenerationDueAtTheDriversTick) {
    using namespace tickwheel::rt;
    const Word p = Ctl::make(5, State::Pending, 100);
    EXPECT_EQ(decide_claim_run(p, 5, 100).out, ClaimOutcome::Run);
    EXPECT_EQ(decide_claim_run(p, 5, 100).next, Ctl::make(5, State::Running, 100));
    EXPECT_EQ(decide_claim_run(p, 5, 100).due, 100u);
    EXPECT_EQ(decide_claim_run(p, 5, 150).out, ClaimOutcome::Run);
    EXPECT_EQ(decide_claim_run(p, 5, 99).out, ClaimOutcome::Later);  // never early
    EXPECT_EQ(decide_claim_run(p, 5, 99).due, 100u);
    EXPECT_EQ(decide_claim_run(p, 6, 100).out, ClaimOutcome::Drop);             // another generation
    EXPECT_EQ(decide_claim_run(p, 5 + 1024, 100).out, ClaimOutcome::Run);       // gen10 compares
    for (const State s : {State::Free, State::Dispatched, State::Running, State::RunningStopped,
                          State::RunningRearmed, State::Cancelled, State::Releasing})
        EXPECT_EQ(decide_claim_run(Ctl::make(5, s, 10), 5, 100).out, ClaimOutcome::Drop) << static_cast<int>(s);
}

// ---- the wheel's two-ended pop ------------------------------------------------------
TEST(PopExpiredN, TakesEveryExpiredNodeOnceInAnyBatchSize) {
    struct Node : tickwheel::WheelNode {};
    for (const std::size_t count : {0u, 1u, 2u, 3u, 31u, 64u, 65u}) {
        for (const std::size_t max : {1u, 2u, 3u, 32u}) {
            tickwheel::Wheel w(0);
            std::vector<Node> nodes(count + 3);
            for (std::size_t i = 0; i < count; ++i) w.insert(&nodes[i], 1 + i % 5);
            for (std::size_t i = count; i < count + 3; ++i) w.insert(&nodes[i], 1000);  // not due
            w.advance(10);
            std::set<const tickwheel::WheelNode*> seen;
            tickwheel::WheelNode* out[32];
            for (;;) {
                const std::size_t n = w.pop_expired_n(out, max);
                ASSERT_LE(n, max);
                if (n == 0) break;
                for (std::size_t i = 0; i < n; ++i) {
                    ASSERT_FALSE(out[i]->linked());
                    ASSERT_TRUE(seen.insert(out[i]).second) << "popped twice";
                }
            }
            EXPECT_EQ(seen.size(), count) << count << " " << max;
            EXPECT_EQ(w.size(), 3u);
            EXPECT_FALSE(w.has_expired());
            EXPECT_TRUE(w.check().ok());
        }
    }
}

// ---- a worker parked between taking a claim item and its CAS ------------------------
TEST(ClaimRun, StopThatWinsTheWordBeforeTheWorkersCasMeansTheCallbackNeverRuns) {
    tw_runtime* rt = make_runtime();
    Destroy d{rt};
    Park park;
    ParkGuard guard(park, 'b');
    Probe p;
    const tw_timer id = start_at(rt, tw_now_ns() + 20'000'000, p);
    ASSERT_TRUE(park.parked.wait(30s)) << "no worker reached its claim";
    EXPECT_EQ(tw_timer_stop(rt, id), TW_OK);  // PENDING -> RELEASING: the stop won
    EXPECT_EQ(p.released.load(), 1);
    park.go.open();
    ASSERT_EQ(tw_runtime_destroy(rt), TW_OK);  // waits for the worker
    d.rt = nullptr;
    EXPECT_EQ(p.runs.load(), 0);
    EXPECT_EQ(p.released.load(), 1);
}

TEST(ClaimRun, ResetLaterWhileTheWorkerIsParkedRunsOnceAtTheNewDeadline) {
    tw_runtime* rt = make_runtime();
    Destroy d{rt};
    Park park;
    ParkGuard guard(park, 'b');
    Probe p;
    const tw_timer id = start_at(rt, tw_now_ns() + 20'000'000, p);
    ASSERT_TRUE(park.parked.wait(30s));
    const std::uint64_t reset_at = tw_now_ns();
    p.not_before = reset_at + 200'000'000;  // before the reset: the worker is parked, nothing can run
    ASSERT_EQ(tw_timer_reset(rt, id, 200'000'000), TW_OK);
    park.go.open();  // its CAS fails; the word says later: back to the wheel
    ASSERT_TRUE(wait_until([&] { return p.runs.load() == 1; }));
    EXPECT_GE(p.ran_at.load(), reset_at + 200'000'000) << "ran before the reset's deadline";
    EXPECT_EQ(p.early.load(), 0);
    ASSERT_TRUE(wait_until([&] { return p.released.load() == 1; }));
    std::this_thread::sleep_for(30ms);  // a second run would come now (none may)
    EXPECT_EQ(p.runs.load(), 1);
}

std::atomic<std::uint32_t> g_last_freed_top{~0u};
void freed_hook(std::uint32_t top, std::uint32_t) { g_last_freed_top.store(top); }

TEST(ClaimRun, ParkedWorkerNeverActsOnTheSlotsNextOccupant) {
    // One worker: once a later timer ran, the parked worker's claim is over.
    tw_runtime* rt = make_runtime(1, 1);
    Destroy d{rt};
    g_last_freed_top.store(~0u);
    hooks::freed.store(&freed_hook);
    struct Unhook {
        ~Unhook() { hooks::freed.store(nullptr); }
    } unhook;
    Park park;
    ParkGuard guard(park, 'b');
    Probe a;
    const tw_timer ida = start_at(rt, tw_now_ns() + 20'000'000, a);
    ASSERT_TRUE(park.parked.wait(30s));
    ASSERT_EQ(tw_timer_stop(rt, ida), TW_OK);
    // The driver recycles A's slot on the Cancel (pushed on the free stack,
    // which is LIFO): B takes it, pending far away -- A's word bits but for
    // B's generation and deadline.
    ASSERT_TRUE(wait_until([&] { return g_last_freed_top.load() == tw_test::id_index(ida); }))
        << "A's slot was not freed";
    Probe b;
    const tw_timer idb = start_at(rt, tw_now_ns() + 3'600'000'000'000ull, b);
    ASSERT_EQ(tw_test::id_index(idb), tw_test::id_index(ida)) << "B did not take A's slot";
    park.go.open();  // A's claim: its CAS fails, the generation says the record is not A's
    Probe c;
    start_at(rt, tw_now_ns(), c);
    ASSERT_TRUE(wait_until([&] { return c.runs.load() == 1; }));
    tw_timer_info info;
    std::memset(&info, 0, sizeof info);
    info.size = sizeof info;
    ASSERT_EQ(tw_timer_query(rt, idb, &info), TW_OK);
    EXPECT_EQ(info.state, TW_TIMER_PENDING);
    EXPECT_EQ(b.runs.load(), 0);
    EXPECT_EQ(a.runs.load(), 0);
    EXPECT_EQ(tw_timer_stop(rt, idb), TW_OK);
    EXPECT_EQ(a.released.load(), 1);
    EXPECT_EQ(b.released.load(), 1);
}

TEST(ClaimRun, StopSyncWaitsForAClaimedRunInProgress) {
    tw_runtime* rt = make_runtime();
    Destroy d{rt};
    struct Blocking {
        tw_test::Gate in, go;
        std::atomic<int> runs{0};
    } blk;
    tw_timer_spec s;
    tw_timer_spec_init(&s);
    s.delay_ns = 10'000'000;
    s.arg = &blk;
    s.callback = [](void* arg, tw_timer) {
        auto* b = static_cast<Blocking*>(arg);
        b->in.open();
        (void)b->go.wait(60s);
        b->runs.fetch_add(1);
    };
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
    tw_test::OpenOnExit open{blk.go};
    ASSERT_TRUE(blk.in.wait(30s));
    Park park;
    ParkGuard guard(park, 'W');  // stop_sync about to wait for the run
    std::atomic<bool> returned{false};
    std::thread t([&] {
        EXPECT_EQ(tw_timer_stop_sync(rt, id), TW_ENOENT);  // a one-shot's run cannot be prevented
        returned.store(true);
    });
    ASSERT_TRUE(park.parked.wait(30s)) << "stop_sync did not wait for the run";
    park.go.open();
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(returned.load()) << "stop_sync returned while the run was in progress";
    blk.go.open();
    t.join();
    EXPECT_EQ(blk.runs.load(), 1);
}

// ---- the driver parked mid-hand-off --------------------------------------------------
TEST(ClaimRun, DriverParkedMidHandOffLosesNoStopOrReset) {
    tw_runtime* rt = make_runtime();
    Destroy d{rt};
    Park park;
    ParkGuard guard(park, 'h');
    Probe stopped, moved, plain;
    const std::uint64_t due = tw_now_ns() + 20'000'000;
    const tw_timer ids = start_at(rt, due, stopped);
    const tw_timer idm = start_at(rt, due, moved);
    start_at(rt, due, plain);
    ASSERT_TRUE(park.parked.wait(30s)) << "the driver did not hand over";
    // Popped from the wheel, words still PENDING: a stop and a reset win.
    EXPECT_EQ(tw_timer_stop(rt, ids), TW_OK);
    const std::uint64_t reset_at = tw_now_ns();
    moved.not_before = reset_at + 100'000'000;
    ASSERT_EQ(tw_timer_reset(rt, idm, 100'000'000), TW_OK);
    park.go.open();
    ASSERT_TRUE(wait_until([&] { return plain.runs.load() == 1 && moved.runs.load() == 1; }));
    EXPECT_GE(moved.ran_at.load(), reset_at + 100'000'000);
    EXPECT_EQ(moved.early.load() + plain.early.load(), 0);
    ASSERT_TRUE(wait_until([&] { return plain.released.load() == 1 && moved.released.load() == 1; }));
    EXPECT_EQ(stopped.runs.load(), 0);
    EXPECT_EQ(stopped.released.load(), 1);
}

// ---- a burst racing stops --------------------------------------------------------------
// Many one-shots due at one deadline on one shard (one driver, two workers)
// while another thread stops them in random order: each either ran once
// (its stop said TW_ENOENT) or never (TW_OK), never early, released once.
TEST(ClaimRun, BurstRacingStopsRunsEachTimerOnceOrNever) {
    const std::size_t n = tw_test::kSanitized ? 5000 : 50000;
    tw_runtime* rt = make_runtime(1, 2);
    Destroy d{rt};
    std::vector<Probe> probes(n);
    std::vector<tw_timer> ids(n);
    const std::uint64_t due = tw_now_ns() + 50'000'000;
    for (std::size_t i = 0; i < n; ++i) ids[i] = start_at(rt, due, probes[i]);
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937(21));
    std::vector<int> result(n, 1);
    while (tw_now_ns() + 200'000 < due) std::this_thread::sleep_for(100us);
    for (std::size_t k = 0; k < n / 2; ++k) result[order[k]] = tw_timer_stop(rt, ids[order[k]]);
    ASSERT_TRUE(wait_until([&] {
        for (const Probe& p : probes)
            if (p.released.load() != 1) return false;
        return true;
    }));
    std::size_t ran = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const Probe& p = probes[i];
        ASSERT_EQ(p.early.load(), 0) << i;
        ASSERT_EQ(p.released.load(), 1) << i;
        if (result[i] == TW_OK) {
            ASSERT_EQ(p.runs.load(), 0) << "timer " << i << " ran though its stop returned TW_OK";
        } else {
            ASSERT_EQ(p.runs.load(), 1) << i;
            if (result[i] != 1) {
                ASSERT_EQ(result[i], TW_ENOENT) << i;
            }
        }
        ran += static_cast<std::size_t>(p.runs.load());
    }
    EXPECT_GE(ran, n / 2);
}
