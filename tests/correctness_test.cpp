// SPDX-License-Identifier: MIT OR Apache-2.0
// Regression tests for the correctness holes of issue 9, each forced at the
// exact step with the library's test hooks (src/runtime/test_hooks.hpp):
//   1. a stale id acting on an unrelated timer (the lookup-to-CAS window,
//      stop_sync's retry after a wait, the 24-bit generation wrap);
//   2. stop_sync returning while a concurrent stop's (or shutdown's)
//      release hook still runs;
//   3. shutdown deadlocking against a failing start's release hook;
//   5. a failed inbox enqueue losing a start, a cancel or a refile;
//   8. the C start's release-hook rule, for the hook-running failures.
// (4 is runtime_tbb_test.cpp, 6 fork_test.cpp, 7 capi_inline_init.c.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <span>
#include <system_error>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/handle_table.hpp"
#include "runtime/test_hooks.hpp"
#include "runtime/timer_record.hpp"
#include "test_support.hpp"
#include "test_support/capi.hpp"
#include "test_support/park.hpp"
#include "tickwheel/runtime.hpp"
#include "tickwheel/tickwheel.h"

using namespace std::chrono_literals;
using tickwheel::Runtime;
using tickwheel::Timer;
using tw_test::wait_until;
namespace hooks = tickwheel::rt::test_hooks;
using Id = tickwheel::rt::Id;

namespace {

using namespace tw_test::capi;

using tw_test::Gate;

using tw_test::HookGuard;
using tw_test::Parking;
using tw_test::t_park_me;
using tw_test::Unpark;

// Pushes of records onto a free stack (test_hooks::freed).
std::atomic<std::uint64_t> g_pushes{0};
std::atomic<std::uint32_t> g_last_top{~0u};
std::atomic<std::uint64_t> g_pushes_of[4096];  // per chain-top index (small tests only)
std::atomic<std::uint64_t> g_freed_records{0};  // records in those chains
void push_hook(std::uint32_t top, std::uint32_t count) {
    g_last_top.store(top);
    if (top < 4096) g_pushes_of[top].fetch_add(1);
    g_pushes.fetch_add(1);
    g_freed_records.fetch_add(count);
}


struct PushHook {
    PushHook() {
        g_last_top.store(~0u);
        hooks::freed.store(&push_hook);
    }
    ~PushHook() { hooks::freed.store(nullptr); }
};

tickwheel::Config one_shard() {
    tickwheel::Config c;
    c.shards = 1;
    c.workers = 2;
    return c;
}

/// Starts a 0-delay one-shot on a one-shard runtime, waits until it ran and
/// until its record was pushed back on the free stack (so that the next
/// start takes it: the stack is LIFO). `freed` says whether that happened
/// within `limit` (it does not while the record is quarantined or retired).
/// Needs a PushHook.
std::uint64_t fire_once(Runtime& rt, std::atomic<int>& runs, bool* freed = nullptr,
                        tickwheel::Duration limit = 3s) {
    const int before = runs.load();
    const std::uint64_t pushes = g_pushes.load();
    const Timer t = rt.start(0ns, [&runs] { runs.fetch_add(1); });
    EXPECT_TRUE(wait_until([&] { return runs.load() > before; }));
    const bool ok = wait_until(
        [&] { return g_pushes.load() > pushes && g_last_top.load() == Id::index(t.id()); }, limit);
    if (freed != nullptr) *freed = ok;
    return t.id();
}

/// Fires one-shots until `done(id)` says stop (returns that id) or `limit`
/// starts (returns 0).
template <class Done>
std::uint64_t churn(Runtime& rt, std::atomic<int>& runs, int limit, Done done) {
    for (int i = 0; i < limit; ++i) {
        const std::uint64_t id = fire_once(rt, runs);
        if (done(id)) return id;
    }
    return 0;
}

}  // namespace

// ---- 1. stale ids ----------------------------------------------------------------

// A reset (or stop) with a current id is parked between its load of the word
// and its CAS, while the timer is stopped and its slot goes through 1024
// more timers (the word's 10-bit generation comes back) and the 1024th is
// pending at the very same deadline: the word is bit for bit what the parked
// thread loaded. Before the fix its CAS succeeded on that unrelated timer.
// Now the parked thread's hazard keeps the slot quarantined at the wrap, so
// the slot cannot come back while it is parked, and it acts on nothing.
// The same for a batch (issue 14: 'R' a batch reset, 'C' a batch stop),
// parked at the stale element -- the first of three: the other two, the
// batch's own pending timers, must still be acted on, after the churn.
//
// Also with boot-time and wall-clock timers (issue 20): A and B on that
// clock, and B's own-clock deadline and state are checked, not just the
// call's result. A parked reset of such a timer holds A's deadline lock
// (timer_state.hpp, OwnDeadline): A's slot is then not reused at all while
// it is parked (the churn cannot reach it), and nothing is written.
class StaleWindow : public ::testing::TestWithParam<std::tuple<char, tickwheel::TimerClock>> {};

TEST_P(StaleWindow, ParkedCallerNeverActsOnTheSlotsNextOccupants) {
    const char op = std::get<0>(GetParam());  // 'r' reset, 'c' stop; 'R', 'C' the same in a batch
    const tickwheel::TimerClock clock = std::get<1>(GetParam());
    const bool clocked = clock != tickwheel::TimerClock::monotonic;
    const bool batch = op == 'R' || op == 'C';
    PushHook pushes;
    Runtime rt(one_shard());
    std::atomic<int> runs{0};
    const auto deadline = tickwheel::TimePoint(rt.now(clock) + 1h);
    const auto start_at = [&rt, clock](tickwheel::TimePoint at, auto f) {
        tickwheel::StartOptions o;
        o.deadline = at;
        o.clock = clock;
        return rt.start(o, std::move(f));
    };
    std::atomic<int> a_runs{0};
    const Timer a = start_at(deadline, [&a_runs] { a_runs.fetch_add(1); });
    std::atomic<int> others_released{0};
    using Released = tw_test::CountsRelease;
    const Timer others[2] = {rt.start(3h, Released(&others_released)), rt.start(3h, Released(&others_released))};

    Parking parking;
    parking.what = static_cast<char>(batch ? op - 'A' + 'a' : op);  // the window of the element's CAS
    HookGuard hook(parking);
    std::atomic<int> result{-1};
    std::error_code results[3];
    std::size_t batch_count = 0;
    std::thread t([&] {
        t_park_me = true;
        bool acted;
        if (batch) {
            const std::uint64_t ids[3] = {a.id(), others[0].id(), others[1].id()};
            batch_count = op == 'R' ? rt.reset(ids, 2h, results) : rt.stop(ids, results);
            acted = !results[0];
        } else {
            acted = op == 'r' ? rt.reset(a.id(), 2h) : rt.stop(a.id());
        }
        result.store(acted ? 1 : 0);
    });
    Unpark unpark{parking, t};
    ASSERT_TRUE(parking.parked.wait(30s));

    // Take A away from under the parked thread; the shard recycles its
    // slot at its next pass (a stop does not wake it: up to 100 ms).
    const std::uint32_t slot = Id::index(a.id());
    const std::uint32_t g0 = Id::gen(a.id());
    ASSERT_TRUE(rt.stop_sync(a.id()));
    if (clocked && (op == 'r' || op == 'R')) {
        // The parked reset holds A's deadline lock: the slot waits in
        // quarantine (no thread can write into a later occupant).
        EXPECT_FALSE(wait_until([&] { return g_last_top.load() == slot; }, 300ms))
            << "A's slot was reused while a reset held its deadline lock";
        parking.go.open();
        t.join();
        EXPECT_EQ(result.load(), 0) << "a call with A's id acted after A was stopped";
        if (batch) {
            EXPECT_EQ(results[0], tickwheel::errc::not_found);
            EXPECT_FALSE(results[1]);
            EXPECT_FALSE(results[2]);
            EXPECT_EQ(batch_count, 2u);
        }
        EXPECT_TRUE(wait_until([&] { return g_last_top.load() == slot; })) << "the slot stayed held";
        EXPECT_EQ(a_runs.load(), 0);
        for (const Timer& x : others) EXPECT_TRUE(rt.stop(x));
        return;
    }
    ASSERT_TRUE(wait_until([&] { return g_last_top.load() == slot; }));
    // Churn the slot until the next occupant would carry A's 10-bit
    // generation again, or until the slot stops coming back.
    std::uint64_t last = 0;
    int on_slot = 0;
    for (;;) {
        bool freed = false;
        const std::uint64_t pushes_before = g_pushes.load();
        const std::uint64_t id = fire_once(rt, runs, &freed);
        ASSERT_EQ(Id::index(id), slot) << "the churn lost the slot after " << on_slot << " reuses (gen " << Id::gen(id)
                                       << ", A's " << g0 << "; pushes " << pushes_before << " -> " << g_pushes.load()
                                       << ", last top " << g_last_top.load() << ", the slot's pushes "
                                       << g_pushes_of[slot].load() << ", freed " << freed << ")";
        ++on_slot;
        last = id;
        if (!freed || Id::gen(id) + 1 == g0 + 1024) break;
    }
    // Try to put a timer at A's deadline on the slot with A's 10-bit generation.
    std::atomic<int> b_runs{0};
    const Timer b = start_at(deadline, [&b_runs] { b_runs.fetch_add(1); });
    const bool b_on_slot_with_as_word =
        Id::index(b.id()) == slot && (Id::gen(b.id()) & 0x3FF) == (g0 & 0x3FF);
    EXPECT_FALSE(b_on_slot_with_as_word)
        << "the slot came back to A's word while a thread was between its load and its CAS (last gen on slot "
        << Id::gen(last) << ", A's " << g0 << ", " << on_slot << " reuses)";

    const std::uint64_t slot_pushes = g_pushes_of[slot].load();
    parking.go.open();
    t.join();
    EXPECT_EQ(result.load(), 0) << "a call with A's id acted on another timer";
    if (batch) {
        EXPECT_EQ(results[0], tickwheel::errc::not_found);
        EXPECT_FALSE(results[1]) << "the batch stopped at the stale element";
        EXPECT_FALSE(results[2]);
        EXPECT_EQ(batch_count, 2u);
        EXPECT_EQ(others_released.load(), op == 'C' ? 2 : 0);
    }
    // B is untouched: still pending at A's old deadline (neither stopped nor
    // moved; on its own clock exactly, else rounded up to the tick).
    const auto bi = rt.query(b);
    ASSERT_TRUE(bi) << "B must still be live";
    EXPECT_EQ(bi->state, tickwheel::TimerStatus::pending);
    if (clocked) {
        EXPECT_EQ(bi->deadline, deadline) << "B's own-clock deadline moved";
    } else {
        EXPECT_GE(bi->deadline, deadline);
        EXPECT_LT(bi->deadline, deadline + rt.resolution()) << "B's deadline moved";
    }
    EXPECT_TRUE(rt.reset(b.id(), 1h)) << "B must still be pending";
    EXPECT_TRUE(rt.stop(b.id()));
    EXPECT_EQ(a_runs.load(), 0);
    EXPECT_EQ(b_runs.load(), 0);
    // And the quarantined slot is not lost: once nobody is parked on it, it
    // is reused again (the shard's next quarantine pass frees it).
    EXPECT_TRUE(wait_until([&] { return g_pushes_of[slot].load() > slot_pushes; })) << "the slot stayed quarantined";
    // The free stack holds the slot near its top (under at most B's): a few
    // starts at once take it.
    std::vector<Timer> some;
    std::uint64_t again = 0;
    for (int i = 0; i < 4; ++i) {
        some.push_back(rt.start(1h, [] {}));
        if (Id::index(some.back().id()) == slot) again = some.back().id();
    }
    EXPECT_NE(again, 0u) << "the slot was not reused after the quarantine";
    EXPECT_EQ(Id::gen(again), Id::gen(last) + 1);
    for (const Timer& x : some) EXPECT_TRUE(rt.stop(x));
    for (const Timer& x : others) EXPECT_EQ(rt.stop(x), op != 'C');  // released now, while others_released lives
}

INSTANTIATE_TEST_SUITE_P(ResetAndStop, StaleWindow,
                         ::testing::Combine(::testing::Values('r', 'c', 'R', 'C'),
                                            ::testing::Values(tickwheel::TimerClock::monotonic,
                                                              tickwheel::TimerClock::boottime,
                                                              tickwheel::TimerClock::realtime)),
                         [](const ::testing::TestParamInfo<std::tuple<char, tickwheel::TimerClock>>& p) {
                             std::string name;
                             switch (std::get<0>(p.param)) {
                                 case 'r': name = "Reset"; break;
                                 case 'c': name = "Stop"; break;
                                 case 'R': name = "BatchReset"; break;
                                 default: name = "BatchStop"; break;
                             }
                             switch (std::get<1>(p.param)) {
                                 case tickwheel::TimerClock::boottime: return name + "Boottime";
                                 case tickwheel::TimerClock::realtime: return name + "Realtime";
                                 default: return name;  // monotonic: the names of 1.4
                             }
                         });

// stop_sync waits for A's last run, is parked after its wait (before it looks
// again), and meanwhile A's slot gets 1024 more timers and the last one is
// pending. Before the fix, stop_sync retried its CAS with the 10-bit
// generation only: it cancelled that unrelated timer (returning true for a
// timer that had run) and the new timer's slot leaked.
// Also with boot-time and wall-clock timers (issue 20): B's own-clock
// deadline and state are checked too.
class StaleIdOnClocks : public ::testing::TestWithParam<tickwheel::TimerClock> {};

TEST_P(StaleIdOnClocks, StopSyncRetryAfterItsWaitNeverActsOnTheSlotsNextOccupant) {
    const tickwheel::TimerClock clock = GetParam();
    PushHook pushes;
    Runtime rt(one_shard());
    std::atomic<int> runs{0};
    Gate in_a, release_a;
    tickwheel::StartOptions oa;
    oa.clock = clock;
    const Timer a = rt.start(oa, [&] {
        in_a.open();
        (void)release_a.wait(30s);
    });
    ASSERT_TRUE(in_a.wait(30s));

    Parking parking;
    parking.what = 'w';
    HookGuard hook(parking);
    std::atomic<int> result{-1};
    std::thread t([&] {
        t_park_me = true;
        result.store(rt.stop_sync(a.id()) ? 1 : 0);
    });
    Unpark unpark{parking, t};
    ASSERT_TRUE(parking.waiting.wait(30s));  // stop_sync waits for A's run; let the run end
    release_a.open();
    // Parked once its wait is over ('w' comes also when A's run ended before
    // the thread slept: under load it may never sleep at all).
    ASSERT_TRUE(parking.parked.wait(30s));

    const std::uint32_t slot = Id::index(a.id());
    const std::uint32_t g0 = Id::gen(a.id());
    ASSERT_TRUE(wait_until([&] { return g_last_top.load() == slot; }));  // A's slot is free again
    // Nobody holds a hazard on the slot now (stop_sync holds none while it
    // waits), so it may wrap: bring it to A's 10-bit generation again.
    const std::uint64_t last = churn(rt, runs, 5000, [&](std::uint64_t id) {
        return Id::index(id) != slot || Id::gen(id) + 1 == g0 + 1024;
    });
    ASSERT_EQ(Id::index(last), slot) << "the churn lost the slot";
    std::atomic<int> b_runs{0};
    ASSERT_TRUE(wait_until([&] { return g_last_top.load() == slot; }));  // through the quarantine at the wrap
    tickwheel::StartOptions ob;
    ob.clock = clock;
    const auto b_deadline = tickwheel::TimePoint(rt.now(clock) + 1h);
    ob.deadline = b_deadline;
    const Timer b = rt.start(ob, [&b_runs] { b_runs.fetch_add(1); });
    ASSERT_EQ(Id::index(b.id()), slot);
    ASSERT_EQ(Id::gen(b.id()) & 0x3FF, g0 & 0x3FF) << "B carries A's 10-bit generation";

    parking.go.open();
    t.join();
    EXPECT_EQ(result.load(), 0) << "stop_sync(A) returned true after A's last run: it cancelled B";
    const auto bi = rt.query(b);
    ASSERT_TRUE(bi) << "B must still be live";
    EXPECT_EQ(bi->state, tickwheel::TimerStatus::pending);
    if (clock != tickwheel::TimerClock::monotonic) {
        EXPECT_EQ(bi->deadline, b_deadline) << "B's own-clock deadline moved";
    } else {
        EXPECT_GE(bi->deadline, b_deadline);
        EXPECT_LT(bi->deadline, b_deadline + rt.resolution()) << "B's deadline moved";
    }
    EXPECT_TRUE(rt.stop(b.id())) << "B must still be pending";
}
INSTANTIATE_TEST_SUITE_P(Clocks, StaleIdOnClocks,
                         ::testing::Values(tickwheel::TimerClock::monotonic, tickwheel::TimerClock::boottime,
                                           tickwheel::TimerClock::realtime),
                         [](const ::testing::TestParamInfo<tickwheel::TimerClock>& p) {
                             return p.param == tickwheel::TimerClock::boottime   ? std::string("Boottime")
                                    : p.param == tickwheel::TimerClock::realtime ? std::string("Realtime")
                                                                                 : std::string("Monotonic");
                         });

// A slot at the last 24-bit generation is retired: the next start takes
// another slot, so an id never names two timers (before the fix the
// generation wrapped to 1 and old ids became valid again).
TEST(StaleId, SlotAtTheLastGenerationIsRetiredNotReused) {
    hooks::first_generation.store(Id::kMaxGen - 1);
    struct Reset {
        ~Reset() { hooks::first_generation.store(1); }
    } reset_hook;
    PushHook pushes;
    Runtime rt(one_shard());
    std::atomic<int> runs{0};
    const std::uint64_t x = fire_once(rt, runs);
    ASSERT_EQ(Id::gen(x), Id::kMaxGen - 1);
    hooks::first_generation.store(1);  // only x's slot starts near the end
    bool freed = false;
    const std::uint64_t y = fire_once(rt, runs, &freed, 1s);
    ASSERT_EQ(Id::index(y), Id::index(x));
    ASSERT_EQ(Id::gen(y), Id::kMaxGen);
    EXPECT_FALSE(freed) << "a record at the last generation went back on the free stack";
    // From now on the slot is never handed out again.
    for (int i = 0; i < 100; ++i) {
        const std::uint64_t z = fire_once(rt, runs);
        ASSERT_NE(Id::index(z), Id::index(x)) << "a retired slot was reused, generation " << Id::gen(z);
    }
    EXPECT_FALSE(rt.stop(x));
    EXPECT_FALSE(rt.stop(y));
    EXPECT_FALSE(rt.reset(y, 1ms));
}

// ---- 2. stop_sync and release hooks ---------------------------------------------------

namespace {
/// A callable whose destructor (the release hook) blocks until `go` opens.
struct BlockingHook {
    Gate* entered;
    Gate* go;
    std::atomic<bool>* returned;
    BlockingHook(Gate* e, Gate* g, std::atomic<bool>* r) : entered(e), go(g), returned(r) {}
    BlockingHook(BlockingHook&& o) noexcept : entered(o.entered), go(o.go), returned(std::exchange(o.returned, nullptr)) {}
    ~BlockingHook() {
        if (returned == nullptr) return;
        entered->open();
        (void)go->wait(30s);
        returned->store(true);
    }
    void operator()() const {}
};

/// stop_sync(id) on a thread of its own: its answer (`result`), whether it
/// returned, and whether the release hook had returned (`hook_returned`)
/// when it did. The test joins `th`.
struct SyncAside {
    std::atomic<bool> returned{false};
    bool saw_hook_returned = false;
    bool result = false;
    std::thread th;
    SyncAside(Runtime& rt, std::uint64_t id, const std::atomic<bool>& hook_returned)
        : th([this, &rt, id, &hook_returned] {
              result = rt.stop_sync(id);
              saw_hook_returned = hook_returned.load();
              returned.store(true);
          }) {}
};
}  // namespace

/// A timer (on one shard) whose release hook blocks until `go` opens.
/// stop_sync_beside_the_hook(trigger, what) runs `trigger` (what runs the
/// hook: a stop, the shutdown sweep) on a thread; once the hook is running,
/// stop_sync on a thread of its own (`sync`) must not return while it runs;
/// then the hook is let go and both threads are joined.
class StopSyncWaitsForTheReleaseHook : public ::testing::Test {
protected:
    Runtime rt{one_shard()};
    Gate entered, go;
    std::atomic<bool> returned{false};
    const Timer t = rt.start(1h, BlockingHook(&entered, &go, &returned));
    std::optional<SyncAside> sync;

    void stop_sync_beside_the_hook(const std::function<void()>& trigger, const char* what) {
        std::thread th(trigger);
        ASSERT_TRUE(entered.wait(30s)) << what << " never ran";  // the release hook is running
        sync.emplace(rt, t.id(), returned);
        // stop_sync must not return while the hook runs. (If it wrongly returns,
        // it does so at once; this bound only delays the check.)
        std::this_thread::sleep_for(100ms);
        EXPECT_FALSE(sync->returned.load()) << "stop_sync returned while " << what << " was still running";
        go.open();
        th.join();
        sync->th.join();
    }
};

TEST_F(StopSyncWaitsForTheReleaseHook, OfAConcurrentStop) {
    ASSERT_NO_FATAL_FAILURE(
        stop_sync_beside_the_hook([&] { EXPECT_TRUE(rt.stop(t.id())); }, "the stop's release hook"));
    EXPECT_TRUE(sync->saw_hook_returned) << "stop_sync returned before the release hook returned";
}

TEST_F(StopSyncWaitsForTheReleaseHook, OfTheShutdownSweep) {
    ASSERT_NO_FATAL_FAILURE(stop_sync_beside_the_hook([&] { rt.shutdown(); }, "shutdown's release hook"));
    EXPECT_FALSE(sync->result);  // shutdown cancelled it, not this call
    EXPECT_TRUE(sync->saw_hook_returned);
}

// ---- 3. shutdown and failing starts ------------------------------------------------------

namespace {
/// Runs `f` on a thread; fails the test and ends the process if it does not
/// finish within `limit` (a deadlock must not hang the suite).
template <class F>
void must_finish(F f, std::chrono::seconds limit, const char* what) {
    auto done = std::make_shared<std::promise<void>>();
    auto fut = done->get_future();
    std::thread([f = std::move(f), done]() mutable {
        f();
        done->set_value();
    }).detach();
    if (fut.wait_for(limit) != std::future_status::ready) {
        ADD_FAILURE() << what << ": deadlocked (no progress in " << limit.count() << " s)";
        std::fflush(nullptr);
        std::_Exit(1);
    }
}
}  // namespace

// A start that fails (limit reached) destroys its callable; that destructor
// calls shutdown(). Before the fix it ran inside the start's in-flight
// guard and shutdown waited for that very start forever. Now the callable is
// destroyed after the guard, and shutdown from a release hook reports
// would_deadlock, as the C API does.
TEST(ShutdownAndFailedStart, ShutdownFromAFailedStartsReleaseHookReportsWouldDeadlock) {
    tickwheel::Config c = one_shard();
    c.max_timers = 1;
    Runtime rt(c);
    const Timer keep = rt.start(1h, [] {});
    std::error_code from_hook;
    struct CallsShutdown {
        Runtime* rt;
        std::error_code* ec;
        CallsShutdown(Runtime* r, std::error_code* e) : rt(r), ec(e) {}
        CallsShutdown(CallsShutdown&& o) noexcept : rt(std::exchange(o.rt, nullptr)), ec(o.ec) {}
        ~CallsShutdown() {
            if (rt != nullptr) rt->shutdown(*ec);
        }
        void operator()() const {}
    };
    must_finish(
        [&] {
            std::error_code ec;
            tickwheel::StartOptions o;
            o.delay = 1h;
            const Timer t = rt.start(o, tickwheel::detail::Callback(CallsShutdown(&rt, &from_hook)), ec);
            EXPECT_EQ(ec, tickwheel::errc::limit_reached);
            EXPECT_FALSE(t);
        },
        10s, "start whose failing release hook calls shutdown");
    EXPECT_EQ(from_hook, tickwheel::errc::would_deadlock);
    EXPECT_FALSE(rt.is_shut_down());
    EXPECT_TRUE(rt.stop(keep));
}

// The C shape of the same bug: the release hook of a failing start takes a
// lock that the thread calling shutdown holds. Before the fix: the hook ran
// inside the start's guard, shutdown waited for the guard, the hook for the
// lock -- both threads stuck.
namespace {
std::mutex g_app_lock;
Gate* g_hook_entered = nullptr;
void locking_release(void*) {
    g_hook_entered->open();
    std::lock_guard<std::mutex> l(g_app_lock);
}
void noop_cb(void*, tw_timer) {}
}  // namespace

TEST(ShutdownAndFailedStart, ReleaseHookTakingTheShutdownCallersLockDoesNotDeadlock) {
    tw_config cfg = c_config(1, 0);
    cfg.max_timers = 1;
    tw_runtime* rt = create_runtime(cfg);
    ASSERT_NE(rt, nullptr);
    tw_timer keep = 0;
    ASSERT_EQ(tw_timer_start(rt, 3600'000'000'000ull, 0, noop_cb, nullptr, &keep), TW_OK);
    Gate entered;
    g_hook_entered = &entered;
    must_finish(
        [&] {
            std::unique_lock<std::mutex> app(g_app_lock);  // the application's lock, held around shutdown
            std::thread starter([&] {
                tw_timer_spec s;
                tw_timer_spec_init(&s);
                s.delay_ns = 1'000'000;
                s.callback = noop_cb;
                s.release = locking_release;
                tw_timer id = 0;
                EXPECT_EQ(tw_timer_start_ex(rt, &s, &id), TW_EAGAIN);  // limit: fails, calls the hook
            });
            ASSERT_TRUE(entered.wait(30s));  // the hook runs and waits for the lock we hold
            EXPECT_EQ(tw_runtime_shutdown(rt), TW_OK);
            app.unlock();
            starter.join();
        },
        10s, "shutdown while a failing start's release hook waits for the caller's lock");
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
    g_hook_entered = nullptr;
}

// ---- 5. inbox allocation failures -----------------------------------------------------------

namespace {
struct FailPosts {
    explicit FailPosts(std::int64_t n) { hooks::fail_inbox_posts.store(n); }
    ~FailPosts() { hooks::fail_inbox_posts.store(0); }
};
}  // namespace

// Before the fix start() ignored a failed enqueue: it reported success and
// the timer never fired. Now it fails with no_memory, releases the callable
// exactly once, and frees the slot.
using tw_test::Counted;

TEST(InboxFailure, StartFailsWithNoMemoryAndReleasesOnce) {
    PushHook pushes;
    Runtime rt(one_shard());
    std::atomic<int> runs{0};
    const std::uint64_t warm = fire_once(rt, runs);  // the slot the next start takes
    std::atomic<int> released{0}, ran{0};
    std::error_code ec;
    {
        FailPosts fail(1);
        tickwheel::StartOptions o;
        const Timer t = rt.start(o, tickwheel::detail::Callback(Counted(&released, &ran)), ec);
        EXPECT_FALSE(t);
    }
    EXPECT_EQ(ec, tickwheel::errc::no_memory);
    EXPECT_EQ(released.load(), 1);
    EXPECT_EQ(rt.stats().started, 1u);  // only `warm`
    EXPECT_EQ(rt.stats().live, 0u);
    // The slot is not lost: the next start reuses it.
    const Timer next = rt.start(1h, [] {});
    EXPECT_EQ(Id::index(next.id()), Id::index(warm));
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(ran.load(), 0);
}

// A grouped timer is in its group's index before its Insert is queued; a
// group stop may find it there. If the Insert then cannot be queued, the
// start must not take the record back (the group stop already released the
// callable and owns the record's end): the start succeeds, its timer was
// stopped at once, the callable is released once. Forced: the starter is
// parked between the indexing and the post ('i'), a group stop runs, then
// the post fails. Before the fix the start "took back" the record: the
// callable, already destroyed, was moved back out and destroyed again.
TEST(InboxFailure, GroupStopBetweenIndexingAndAFailedInsertPostEndsTheTimerOnce) {
    for (const bool batch : {false, true}) {
        SCOPED_TRACE(batch ? "start(span)" : "start");
        for (auto& n : g_pushes_of) n.store(0);
        PushHook pushes;
        Runtime rt(one_shard());
        std::atomic<int> released{0}, ran{0};
        Parking p;
        p.what = 'i';
        HookGuard hook(p);
        Timer started;
        std::error_code ec;
        std::thread starter([&] {
            t_park_me = true;
            tickwheel::StartOptions o;
            o.delay = 1h;
            o.group = 9;
            if (!batch) {
                started = rt.start(o, tickwheel::detail::Callback(Counted(&released, &ran)), ec);
            } else {
                tickwheel::detail::Callback cbs[1] = {tickwheel::detail::Callback(Counted(&released, &ran))};
                Timer out[1];
                std::error_code res[1];
                std::error_code call_ec;
                rt.start(std::span<const tickwheel::StartOptions>(&o, 1), cbs, out, res, call_ec);
                started = out[0];
                ec = call_ec ? call_ec : res[0];
            }
        });
        Unpark unpark{p, starter};
        ASSERT_TRUE(p.parked.wait(30s));
        EXPECT_EQ(rt.stop_group(9), 1u) << "the parked start's timer is in its group";
        EXPECT_EQ(released.load(), 1);
        hooks::fail_inbox_posts.store(1);
        p.go.open();
        starter.join();
        hooks::fail_inbox_posts.store(0);
        EXPECT_FALSE(ec) << ec.message();
        ASSERT_TRUE(started) << "started, then stopped by the group stop";
        EXPECT_FALSE(rt.stop(started.id())) << "already stopped";
        EXPECT_EQ(released.load(), 1) << "released once, by the group stop";
        EXPECT_EQ(rt.stats().started, 1u);
        EXPECT_EQ(rt.stats().stopped, 1u);
        // The record is recycled once, by the shard (the group stop's
        // Cancel), and the next start takes it.
        const std::uint32_t index = Id::index(started.id());
        ASSERT_TRUE(wait_until([&] { return g_pushes_of[index].load() >= 1; }));
        const Timer next = rt.start(1h, [] {});
        EXPECT_EQ(Id::index(next.id()), index);
        EXPECT_NE(next.id(), started.id());
        std::this_thread::sleep_for(20ms);
        EXPECT_EQ(ran.load(), 0);
    }
}

// Stops whose Cancel cannot be queued still free their slots (the reserve),
// also more of them than the reserve holds at once.
TEST(InboxFailure, CancelsAreNeverLost) {
    Runtime rt(one_shard());
    constexpr int kTimers = 3000;  // > Inbox::kReserve
    std::vector<Timer> timers;
    timers.reserve(kTimers);
    for (int i = 0; i < kTimers; ++i) timers.push_back(rt.start(1h, [] {}));
    ASSERT_TRUE(wait_until([&] { return rt.stats().pending_per_shard[0] == kTimers; }));
    const std::size_t slots = rt.stats().slots;
    g_freed_records.store(0);
    PushHook pushes;
    {
        FailPosts fail(1'000'000);
        for (const Timer& t : timers) ASSERT_TRUE(rt.stop(t));
    }
    // Every record comes back: the wheel is empty, every record is pushed
    // back for reuse (onto the free stack, or at most CallerCells::kFreeMax of them
    // into this thread's cell), and new starts reuse them. (Waiting for
    // the pushes, not retrying starts: a start that runs before the shard's
    // flush takes a fresh record, and a retry's own stops race the next
    // retry the same way -- a flake on a loaded machine, never a leak.)
    ASSERT_TRUE(wait_until([&] { return rt.stats().pending_per_shard[0] == 0; }));
    ASSERT_TRUE(wait_until([&] { return g_freed_records.load() >= static_cast<std::uint64_t>(kTimers); }))
        << g_freed_records.load() << " of " << kTimers << " stopped records came back: the others were leaked";
    std::vector<Timer> again;
    for (int i = 0; i < kTimers; ++i) again.push_back(rt.start(1h, [] {}));
    EXPECT_LE(rt.stats().slots, slots + tickwheel::rt::CallerCells::kFreeMax)
        << "slots grew from " << slots << " to " << rt.stats().slots << ": stopped timers were leaked";
    for (const Timer& t : again) rt.stop(t);
}

// A reset to an earlier deadline whose Refile cannot be queued still moves
// the timer: it fires at the new deadline, not at the old one.
TEST(InboxFailure, EarlierResetIsNeverLost) {
    Runtime rt(one_shard());
    std::atomic<int> ran{0};
    const Timer t = rt.start(1h, [&ran] { ran.fetch_add(1); });
    ASSERT_TRUE(wait_until([&] { return rt.stats().pending_per_shard[0] == 1; }));
    {
        FailPosts fail(1'000'000);
        ASSERT_TRUE(rt.reset(t, 10ms));
    }
    EXPECT_TRUE(wait_until([&] { return ran.load() == 1; })) << "the earlier deadline was lost";
}

// The C API's side of 5 and 8: TW_ENOMEM from a start calls the hook once.
TEST(InboxFailure, CStartEnomemCallsTheReleaseHookOnce) {
    tw_config cfg = c_config(1, 0);
    tw_runtime* rt = create_runtime(cfg);
    ASSERT_NE(rt, nullptr);
    static std::atomic<int> released{0};
    released = 0;
    tw_timer_spec s;
    tw_timer_spec_init(&s);
    s.callback = noop_cb;
    s.release = [](void*) { released.fetch_add(1); };
    tw_timer id = 5;
    {
        FailPosts fail(1);
        EXPECT_EQ(tw_timer_start_ex(rt, &s, &id), TW_ENOMEM);
    }
    EXPECT_EQ(id, 0u);
    EXPECT_EQ(released.load(), 1);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
    EXPECT_EQ(released.load(), 1);
}
