// SPDX-License-Identifier: MIT OR Apache-2.0
// How runtimes share oneTBB's worker threads (issue 9, bug 4).
//
// TBB's worker threads are one pool per process, shared by every arena, and
// its size is set by the smallest max_allowed_parallelism among the live
// tbb::global_control objects. These tests check, through the public API
// only, that every runtime can run as many callbacks at once as its
// worker_count() says, whatever other runtimes exist and in any creation or
// destruction order; that an application's own, lower, limit is reported by
// worker_count() (and is exactly what runs); and that tickwheel's limit is
// gone once the last runtime is.
//
// A callback "holds": it counts itself in and stays until the test releases
// it. The test thread waits (bounded) until the expected number is inside at
// the same time. Nothing sleeps to let a race settle; the only fixed wait is
// the short one that looks for a callback beyond a limit, which can only make
// a test pass that should fail, never the reverse.
#include "test_support.hpp"
#include "tickwheel/runtime.hpp"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <pthread.h>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
namespace tw = tickwheel;
using tw::Duration;
using tw_test::kWait;
using tw_test::small_config;

using gc = tbb::global_control;

std::size_t tbb_limit() { return gc::active_value(gc::max_allowed_parallelism); }
std::size_t tbb_default() { return static_cast<std::size_t>(tbb::info::default_concurrency()); }

// How long a held callback stays at most: only reached when a test has
// already failed (and forgot nothing: the test releases on every path).
constexpr Duration kHold = 3 * kWait;
// How long to look for one more callback beyond a limit.
constexpr Duration kBeyond = 500ms;

class Gate {
public:
    /// Called by a callback: counts itself in, stays until release().
    void hold() {
        std::unique_lock<std::mutex> lk(m_);
        ++entered_;
        max_inside_ = std::max(max_inside_, ++inside_);
        cv_.notify_all();
        cv_.wait_for(lk, kHold, [&] { return released_; });
        --inside_;
        ++left_;
        cv_.notify_all();
    }
    /// Waits until at least `n` callbacks are inside at the same time (held
    /// callbacks stay inside until release()).
    [[nodiscard]] bool wait_inside(int n, Duration timeout = kWait) {
        std::unique_lock<std::mutex> lk(m_);
        return cv_.wait_for(lk, timeout, [&] { return inside_ >= n; });
    }
    /// Waits until `n` callbacks have come and gone.
    [[nodiscard]] bool wait_left(int n, Duration timeout = kWait) {
        std::unique_lock<std::mutex> lk(m_);
        return cv_.wait_for(lk, timeout, [&] { return left_ >= n; });
    }
    void release() {
        std::lock_guard<std::mutex> lk(m_);
        released_ = true;
        cv_.notify_all();
    }
    int inside() const {
        std::lock_guard<std::mutex> lk(m_);
        return inside_;
    }
    int max_inside() const {
        std::lock_guard<std::mutex> lk(m_);
        return max_inside_;
    }

private:
    mutable std::mutex m_;
    std::condition_variable cv_;
    int entered_ = 0, inside_ = 0, max_inside_ = 0, left_ = 0;
    bool released_ = false;
};

// Callbacks share their gate: after a failed ASSERT, callbacks not yet run
// may still come.
using GatePtr = std::shared_ptr<Gate>;

// Releases its gates when it goes out of scope, so that a failed ASSERT does
// not leave a runtime's destructor waiting kHold for held callbacks.
struct ReleaseOnExit {
    std::vector<GatePtr> gates;
    ~ReleaseOnExit() {
        for (const GatePtr& g : gates) g->release();
    }
};

// Starts `n` timers due now whose callbacks hold at `g`.
void start_holders(tw::Runtime& rt, const GatePtr& g, int n) {
    for (int i = 0; i < n; ++i) rt.start(Duration(0), [g] { g->hold(); });
}

std::unique_ptr<tw::Runtime> make_runtime(unsigned workers) {
    return std::make_unique<tw::Runtime>(small_config(/*shards=*/1, workers));
}

// Every runtime in `rts` (in this order) gets workers[i] callbacks that all
// hold at once: runtime i's are started only when runtime i-1's are all
// inside, so the earlier ones occupy their workers while the later ones ask.
void expect_all_held_at_once(const std::vector<tw::Runtime*>& rts) {
    std::vector<GatePtr> gates;
    for (std::size_t i = 0; i < rts.size(); ++i) gates.push_back(std::make_shared<Gate>());
    ReleaseOnExit release{gates};
    for (std::size_t i = 0; i < rts.size(); ++i) {
        const int w = static_cast<int>(rts[i]->worker_count());
        start_holders(*rts[i], gates[i], w);
        ASSERT_TRUE(gates[i]->wait_inside(w)) << "runtime " << i << ": only " << gates[i]->inside() << " of " << w
                                             << " callbacks run at once, but worker_count() says " << w;
    }
    // The earlier runtimes' callbacks are all still inside, at the same time.
    for (std::size_t i = 0; i < rts.size(); ++i)
        EXPECT_EQ(gates[i]->inside(), static_cast<int>(rts[i]->worker_count())) << "runtime " << i;
    for (const GatePtr& g : gates) g->release();
    for (std::size_t i = 0; i < rts.size(); ++i)
        ASSERT_TRUE(gates[i]->wait_left(static_cast<int>(rts[i]->worker_count()))) << "runtime " << i;
}

// a (2 workers) and b (6), created in either order: each says, and gets, all its workers at once.
void expect_two_and_six(tw::Runtime& a, tw::Runtime& b) {
    EXPECT_EQ(a.worker_count(), 2u);
    EXPECT_EQ(b.worker_count(), 6u);
    expect_all_held_at_once({&a, &b});
}

// (a) The reported bug: B (6 workers) created after A (2) ran only 2
// callbacks at once while its worker_count() said 6.
TEST(TbbParallelism, LaterRuntimeGetsAllItsWorkers) {
    auto a = make_runtime(2);
    auto b = make_runtime(6);
    expect_two_and_six(*a, *b);
}

// (b) The other creation order.
TEST(TbbParallelism, EarlierRuntimeGetsAllItsWorkers) {
    auto b = make_runtime(6);
    auto a = make_runtime(2);
    expect_two_and_six(*a, *b);
    expect_all_held_at_once({b.get(), a.get()});
}

// (b) One runtime is destroyed before the other starts timers: the survivor
// keeps all its workers (the limit shrinks to its need, not below, and does
// not vanish), whichever of the two goes first.
TEST(TbbParallelism, SurvivorKeepsItsWorkers) {
    for (const bool destroy_first_created : {true, false}) {
        SCOPED_TRACE(destroy_first_created ? "A(2), B(6); A destroyed" : "A(2), B(6); B destroyed");
        auto a = make_runtime(2);
        auto b = make_runtime(6);
        if (destroy_first_created) {
            a.reset();
            EXPECT_EQ(b->worker_count(), 6u);
            expect_all_held_at_once({b.get()});
        } else {
            b.reset();
            EXPECT_EQ(a->worker_count(), 2u);
            expect_all_held_at_once({a.get()});
            // A runtime created now gets its workers too.
            auto c = make_runtime(5);
            EXPECT_EQ(c->worker_count(), 5u);
            expect_all_held_at_once({a.get(), c.get()});
        }
    }
}

// (b) Three runtimes, all blocked at once: 2 + 3 + 4 callbacks (more than
// four times the cores of a small machine).
TEST(TbbParallelism, ThreeRuntimesAllBlockedAtOnce) {
    auto a = make_runtime(2);
    auto b = make_runtime(3);
    auto c = make_runtime(4);
    expect_all_held_at_once({a.get(), b.get(), c.get()});
    expect_all_held_at_once({c.get(), b.get(), a.get()});
}

// Holds `workers` callbacks of `rt` and checks that exactly
// rt.worker_count() of them run at once, and that all run in the end.
void expect_exactly_worker_count_at_once(tw::Runtime& rt, int started) {
    const int n = static_cast<int>(rt.worker_count());
    const auto g = std::make_shared<Gate>();
    {
        ReleaseOnExit release{{g}};
        start_holders(rt, g, started);
        ASSERT_TRUE(g->wait_inside(n)) << "only " << g->inside() << " callbacks run at once, worker_count() says " << n;
        if (n < started) {
            EXPECT_FALSE(g->wait_inside(n + 1, kBeyond)) << "worker_count() says " << n << " but more run at once";
        }
    }
    ASSERT_TRUE(g->wait_left(started)) << "not every callback ran";
    EXPECT_EQ(g->max_inside(), n);
}

// (c) The application's own limit, lower than the runtime needs, created
// before the runtime: worker_count() says what can run (the limit counts
// the application's own thread; a limit of 1 still runs one callback, as
// TBB gives enqueued work one worker), and exactly that many run.
TEST(TbbParallelism, ApplicationLimitIsReported) {
    for (const std::size_t limit : {std::size_t{1}, std::size_t{3}}) {
        SCOPED_TRACE(limit);
        gc app(gc::max_allowed_parallelism, limit);
        auto rt = make_runtime(4);
        const unsigned expected = static_cast<unsigned>(std::max<std::size_t>(limit - 1, 1));
        EXPECT_EQ(rt->worker_count(), expected);
        expect_exactly_worker_count_at_once(*rt, 4);
        EXPECT_EQ(tbb_limit(), limit);  // the application's limit wins
    }
}

// (c) The application's limit created after the runtime, then removed:
// worker_count() follows it.
TEST(TbbParallelism, LaterApplicationLimitIsReported) {
    auto rt = make_runtime(4);
    EXPECT_EQ(rt->worker_count(), 4u);
    {
        gc app(gc::max_allowed_parallelism, 3);
        EXPECT_EQ(rt->worker_count(), 2u);
        expect_exactly_worker_count_at_once(*rt, 4);
    }
    EXPECT_EQ(rt->worker_count(), 4u);
    expect_all_held_at_once({rt.get()});
}

// (c) An application limit above what the runtimes need changes nothing,
// and is not lowered by them.
TEST(TbbParallelism, HigherApplicationLimitIsKept) {
    gc app(gc::max_allowed_parallelism, 64);
    {
        auto a = make_runtime(2);
        EXPECT_EQ(tbb_limit(), 64u);
        auto b = make_runtime(6);
        EXPECT_EQ(tbb_limit(), 64u);
        EXPECT_EQ(b->worker_count(), 6u);
        expect_all_held_at_once({a.get(), b.get()});
        a.reset();
        EXPECT_EQ(tbb_limit(), 64u);
    }
    EXPECT_EQ(tbb_limit(), 64u);
}

// The application's own TBB work (an arena of TBB's default size, which is
// what it had before any runtime existed) blocked at the same time as a
// runtime's callbacks, in either order: neither takes the other's workers.
TEST(TbbParallelism, ApplicationTbbWorkKeepsItsWorkersToo) {
    tbb::task_arena app(tbb::task_arena::automatic, /*reserved_for_masters=*/1);
    const int app_workers = app.max_concurrency() - 1;  // TBB's default pool
    if (app_workers < 1) GTEST_SKIP() << "one CPU: TBB's default pool has no worker";
    for (const bool app_first : {true, false}) {
        SCOPED_TRACE(app_first ? "application's tasks first" : "runtime's callbacks first");
        auto rt = make_runtime(6);
        const auto app_gate = std::make_shared<Gate>();
        const auto rt_gate = std::make_shared<Gate>();
        {
            ReleaseOnExit release{{app_gate, rt_gate}};
            const auto start_app = [&] {
                for (int i = 0; i < app_workers; ++i) app.enqueue([app_gate] { app_gate->hold(); });
                ASSERT_TRUE(app_gate->wait_inside(app_workers))
                    << "application: only " << app_gate->inside() << " of " << app_workers << " tasks run at once";
            };
            const auto start_rt = [&] {
                start_holders(*rt, rt_gate, 6);
                ASSERT_TRUE(rt_gate->wait_inside(6)) << "runtime: only " << rt_gate->inside() << " of 6 run at once";
            };
            if (app_first) {
                start_app();
                start_rt();
            } else {
                start_rt();
                start_app();
            }
            EXPECT_EQ(app_gate->inside(), app_workers);
            EXPECT_EQ(rt_gate->inside(), 6);
        }
        ASSERT_TRUE(app_gate->wait_left(app_workers));
        ASSERT_TRUE(rt_gate->wait_left(6));
    }
}

// (d) While runtimes live, the limit covers all of them at once; when the
// last one is gone, tickwheel's limit is gone too, in either order.
TEST(TbbParallelism, LimitGoneWithLastRuntime) {
    const std::size_t dflt = tbb_limit();
    EXPECT_EQ(dflt, tbb_default());
    for (const bool a_first : {true, false}) {
        SCOPED_TRACE(a_first ? "A destroyed first" : "B destroyed first");
        auto a = make_runtime(2);
        EXPECT_GE(tbb_limit(), 2u + 1);
        auto b = make_runtime(6);
        EXPECT_GE(tbb_limit(), 2u + 6 + 1);  // all workers, plus the application's thread
        (a_first ? a : b).reset();
        EXPECT_GE(tbb_limit(), (a_first ? 6u : 2u) + 1);
        (a_first ? b : a).reset();
        EXPECT_EQ(tbb_limit(), dflt);
    }
    // With an application limit alive: back to exactly that one.
    gc app(gc::max_allowed_parallelism, 5);
    {
        auto a = make_runtime(3);
        EXPECT_EQ(tbb_limit(), 5u);
    }
    EXPECT_EQ(tbb_limit(), 5u);
}

// Runtimes created and destroyed from several threads at once: each one,
// while it lives, reports (and is given a limit covering) all its workers;
// nothing is left behind.
TEST(TbbParallelism, ConcurrentCreateAndDestroy) {
    const std::size_t dflt = tbb_limit();
    constexpr int kThreads = 4, kRounds = 8;
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([t, &bad] {
            for (int i = 0; i < kRounds; ++i) {
                const unsigned w = 1 + static_cast<unsigned>((t + i) % 4);
                auto rt = make_runtime(w);
                if (rt->worker_count() != w || tbb_limit() < w + 1) bad.fetch_add(1);
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(tbb_limit(), dflt);
}

}  // namespace

// oneTBB starts its workers from the thread that first enqueues (a shard):
// unnamed they would show as "tw-shard-N". ("tw-worker" is the runtime's own
// threads, in a fork child: fork_test tells them apart by name.)
TEST(TbbWorkers, AreNamedTwTbbWorker) {
    tickwheel::Runtime rt(tw_test::small_config(1, 2));
    std::mutex m;
    std::vector<std::string> names;
    std::atomic<int> ran{0};
    for (int i = 0; i < 20; ++i)
        rt.start(std::chrono::milliseconds(1), [&] {
            char name[16] = {};
            pthread_getname_np(pthread_self(), name, sizeof name);
            {
                std::lock_guard<std::mutex> lock(m);
                names.emplace_back(name);
            }
            ran.fetch_add(1);
        });
    ASSERT_TRUE(tw_test::wait_until([&] { return ran.load() == 20; }));
    std::lock_guard<std::mutex> lock(m);
    for (const std::string& n : names) EXPECT_EQ(n, "tw-tbb-worker");
}
