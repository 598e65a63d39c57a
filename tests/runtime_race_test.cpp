// SPDX-License-Identifier: MIT OR Apache-2.0
// Concurrency tests for tickwheel::Runtime: many threads racing start, stop,
// stop_sync, reset and shutdown against the shards and the workers, with real
// time. Every timer carries its own bookkeeping (a Cell) and the verdicts are
// exact, per timer:
//   * exactly one of: its last callback ran / a stop() returned true /
//     it was cancelled at shutdown (summed and compared with Stats);
//   * its callable is destroyed exactly once, and no run starts after that;
//   * no run starts before its deadline (Clock::now() read before arming);
//   * runs of one timer never overlap;
//   * after stop_sync() returns, the callback is not running and never runs.
// Nothing sleeps to let a race settle: the end of a test is awaited with a
// bounded poll that is ASSERTed.
#include "test_support.hpp"
#include "tickwheel/runtime.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace tw_test::names;

// Busy-waits (yielding) until `t`: the racing threads need sub-tick precision.
void spin_until(TimePoint t) {
    while (Clock::now() < t) std::this_thread::yield();
}

std::int64_t ns(TimePoint t) { return t.time_since_epoch().count(); }

void atomic_min(std::atomic<std::int64_t>& a, std::int64_t v) {
    std::int64_t cur = a.load();
    while (v < cur && !a.compare_exchange_weak(cur, v)) {
    }
}

// Per-timer bookkeeping. Plain fields are written before start() and only
// read by threads that got the id from `id` (acquire), or by the callback.
struct Cell {
    enum Kind { OneShot, PeriodicPlain, PeriodicResettable };
    Kind kind = OneShot;
    TimePoint t0{};          // Clock::now() read before start()
    Duration first{0};       // delay of the first run
    Duration period{0};      // 0 for one-shots
    std::atomic<std::uint64_t> id{0};

    std::atomic<int> runs{0};
    std::atomic<int> stop_true{0};
    std::atomic<int> reset_true{0};
    std::atomic<int> released{0};
    std::atomic<int> in_cb{0};
    // Violations (all must stay 0).
    std::atomic<int> overlap{0};
    std::atomic<int> early{0};
    std::atomic<int> after_release{0};
    std::atomic<int> after_sync{0};
    std::atomic<int> running_after_sync{0};
    std::atomic<int> not_released_by_stop{0};
    std::atomic<bool> sync_done{false};
    // One-shot: when it ran, and the deadline in effect: the first one, or
    // the one set by the LAST successful reset. Test threads reset a one-shot
    // only under reset_mu, so the successful resets are totally ordered and
    // the last one recorded is the last one the runtime applied.
    std::atomic<std::int64_t> run_ns{0};
    std::atomic<std::int64_t> eff_deadline{0};
    std::mutex reset_mu;
    // Resettable periodic: a lower bound for any run (recorded BEFORE each reset call).
    std::atomic<std::int64_t> min_reset_deadline{std::numeric_limits<std::int64_t>::max()};

    TimePoint first_deadline() const { return t0 + first; }
};

// The callable: records a run in its Cell; its destructor (live object only)
// is the release hook.
struct CellCallback {
    Cell* c;
    std::atomic<int>* live_periodic;
    Duration busy{0};
    CellCallback(Cell* cell, std::atomic<int>* lp, Duration b = Duration(0)) : c(cell), live_periodic(lp), busy(b) {}
    CellCallback(CellCallback&& o) noexcept
        : c(std::exchange(o.c, nullptr)), live_periodic(o.live_periodic), busy(o.busy) {}
    CellCallback& operator=(CellCallback&&) = delete;
    ~CellCallback() {
        if (c == nullptr) return;
        if (c->kind != Cell::OneShot && live_periodic != nullptr) live_periodic->fetch_sub(1);
        c->released.fetch_add(1);
    }
    void operator()(tw::Timer) {
        const TimePoint now = Clock::now();
        if (c->in_cb.fetch_add(1) != 0) c->overlap.fetch_add(1);
        if (c->released.load() != 0) c->after_release.fetch_add(1);
        if (c->sync_done.load()) c->after_sync.fetch_add(1);
        const int k = c->runs.fetch_add(1);
        switch (c->kind) {
            case Cell::OneShot:  // checked against eff_deadline at the end
                c->run_ns.store(ns(now));
                break;
            case Cell::PeriodicPlain:  // fixed rate: run k starts >= t0 + (k+1) * period
                if (now < c->t0 + c->period * (k + 1)) c->early.fetch_add(1);
                break;
            case Cell::PeriodicResettable:
                if (ns(now) < std::min(ns(c->first_deadline()), c->min_reset_deadline.load())) c->early.fetch_add(1);
                break;
        }
        if (busy > Duration::zero()) {
            const TimePoint end = now + busy;
            while (Clock::now() < end) {
            }
        }
        c->in_cb.fetch_sub(1);
    }
};

// Starts the timer described by `c` (kind, first, period already set).
std::uint64_t start_cell(tw::Runtime& rt, Cell& c, int shard, std::atomic<int>* live_periodic,
                         Duration busy = Duration(0)) {
    tw::StartOptions o;
    o.delay = c.first;
    o.period = c.period;
    o.shard = shard;
    c.t0 = Clock::now();
    c.eff_deadline.store(ns(c.first_deadline()));
    const std::uint64_t id = rt.start(o, CellCallback(&c, live_periodic, busy)).id();
    c.id.store(id, std::memory_order_release);
    return id;
}

// Records a stop()/stop_sync() result in the cell.
void record_stop(Cell& c, bool ok, bool sync) {
    if (ok) {
        c.stop_true.fetch_add(1);
        // A successful stop of a one-shot never meets a run in progress: the
        // callable must already be destroyed, inside the call.
        if (c.kind == Cell::OneShot && c.released.load() != 1) c.not_released_by_stop.fetch_add(1);
    }
    if (sync) {
        if (c.in_cb.load() != 0) c.running_after_sync.fetch_add(1);
        c.sync_done.store(true);
    }
}

// Resets a one-shot, keeping eff_deadline exact (see Cell).
bool reset_one_shot(tw::Runtime& rt, Cell& c, std::uint64_t id, Duration d) {
    std::lock_guard<std::mutex> lk(c.reset_mu);
    const TimePoint before = Clock::now();
    const bool ok = rt.reset(id, d);
    if (ok) {
        c.eff_deadline.store(ns(before + d));
        c.reset_true.fetch_add(1);
    }
    return ok;
}

// Verifies every cell after the runtime is quiescent (shut down, or every
// timer is known to be finished). Returns how many were cancelled at shutdown.
std::uint64_t verify_cells(std::vector<Cell>& cells, std::size_t count, const char* what) {
    std::uint64_t cancelled = 0;
    int failures = 0;
    auto fail = [&](std::size_t i, const char* msg, long v) {
        if (++failures <= 15) ADD_FAILURE() << what << ": timer " << i << " (kind " << cells[i].kind << "): " << msg << " = " << v;
    };
    for (std::size_t i = 0; i < count; ++i) {
        Cell& c = cells[i];
        if (c.id.load() == 0) continue;  // never started
        const int runs = c.runs.load(), stops = c.stop_true.load();
        if (c.released.load() != 1) fail(i, "release hook runs", c.released.load());
        if (c.overlap.load() != 0) fail(i, "overlapping runs", c.overlap.load());
        if (c.early.load() != 0) fail(i, "early runs", c.early.load());
        if (c.after_release.load() != 0) fail(i, "runs after release", c.after_release.load());
        if (c.after_sync.load() != 0) fail(i, "runs after stop_sync returned", c.after_sync.load());
        if (c.running_after_sync.load() != 0) fail(i, "running when stop_sync returned", c.running_after_sync.load());
        if (c.not_released_by_stop.load() != 0)
            fail(i, "successful stop() returned before releasing", c.not_released_by_stop.load());
        if (stops > 1) fail(i, "stop() returned true more than once", stops);
        if (c.kind == Cell::OneShot) {
            if (runs + stops > 1) fail(i, "one-shot ran AND was stopped (runs + stops)", runs + stops);
            if (runs == 1 && c.run_ns.load() < c.eff_deadline.load())
                fail(i, "one-shot ran before its deadline (initial or last successful reset), by ns",
                     static_cast<long>(c.eff_deadline.load() - c.run_ns.load()));
            if (runs + stops == 0) ++cancelled;
        } else {
            if (stops == 0) ++cancelled;
        }
    }
    EXPECT_EQ(failures, 0) << what;
    return cancelled;
}

// =============================================================================

// The producer of the races below: starts cells[0..n) one after another,
// `step` apart, each due 1-2 ms after its start (drawn from `seed`) --
// start(c, i) starts it -- and publishes each once started (published = i + 1).
template <class Start>
std::thread produce(std::vector<Cell>& cells, Duration step, std::uint64_t seed, std::atomic<int>& published,
                    Start start) {
    return std::thread([&cells, step, seed, &published, start] {
        std::mt19937_64 rng(seed);
        const TimePoint base = Clock::now();
        for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
            std::this_thread::sleep_until(base + step * i);
            Cell& c = cells[static_cast<std::size_t>(i)];
            c.first = 1ms + std::chrono::microseconds(rng() % 1000);
            start(c, i);
            published.store(i + 1, std::memory_order_release);
        }
    });
}

// A racer's wait for cell i: until it is published, then (spinning) until
// its first deadline moved by a jitter in [-400, 400) us. Returns its id.
std::uint64_t at_its_deadline(Cell& c, int i, const std::atomic<int>& published, std::mt19937_64& rng) {
    while (published.load(std::memory_order_acquire) <= i) std::this_thread::yield();
    const auto jitter = std::chrono::microseconds(static_cast<int>(rng() % 800) - 400);
    spin_until(c.first_deadline() + jitter);
    return c.id.load(std::memory_order_acquire);
}

// Two racers (seeds seed_base, seed_base + 1), each acting on every cell at
// its deadline (at_its_deadline): act(cell, id, rng).
template <class Act>
std::vector<std::thread> race_at_deadlines(std::vector<Cell>& cells, const std::atomic<int>& published,
                                           std::uint64_t seed_base, Act act) {
    std::vector<std::thread> racers;
    for (std::uint64_t s = 0; s < 2; ++s)
        racers.emplace_back([&cells, &published, seed_base, act, s] {
            std::mt19937_64 rng(seed_base + s);
            for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
                Cell& c = cells[static_cast<std::size_t>(i)];
                act(c, at_its_deadline(c, i, published, rng), rng);
            }
        });
    return racers;
}

bool all_released(std::vector<Cell>& cells) {
    for (auto& c : cells)
        if (c.released.load() == 0) return false;
    return true;
}

// Thousands of one-shots due 1-2 ms after their start; two threads each stop
// every one of them right around its deadline (+-400 us). For every timer:
// exactly one of {it ran, one stop() returned true}.
void stop_vs_fire(bool use_stop_sync) {
    const int n = kSanitized ? 1200 : 4000;
    const Duration step = kSanitized ? Duration(150us) : Duration(60us);
    std::vector<Cell> cells(static_cast<std::size_t>(n));  // outlives the runtime
    tw::Runtime rt(small_config());
    std::atomic<int> published{0};
    std::thread producer = produce(cells, step, 1, published, [&](Cell& c, int i) {
        // Short busy callbacks so stop_sync sometimes has a run to wait for.
        start_cell(rt, c, i % 2, nullptr, use_stop_sync ? Duration(20us) : Duration(0));
    });
    std::vector<std::thread> stoppers = race_at_deadlines(cells, published, 100, [&](Cell& c, std::uint64_t id, auto&) {
        const bool ok = use_stop_sync ? rt.stop_sync(id) : rt.stop(id);
        record_stop(c, ok, use_stop_sync);
    });
    producer.join();
    for (auto& t : stoppers) t.join();
    ASSERT_TRUE(wait_until([&] { return all_released(cells); })) << "some callables were never released";
    const std::uint64_t cancelled = verify_cells(cells, cells.size(), use_stop_sync ? "stop_sync" : "stop");
    EXPECT_EQ(cancelled, 0u) << "timers that neither ran nor were stopped";
    int ran = 0, stopped = 0;
    for (auto& c : cells) {
        ran += c.runs.load();
        stopped += c.stop_true.load();
        EXPECT_EQ(c.runs.load() + c.stop_true.load(), 1);
    }
    // Both outcomes must actually have been exercised.
    EXPECT_GT(ran, 0);
    EXPECT_GT(stopped, 0);
    ASSERT_TRUE(wait_until([&] { return rt.stats().fired == static_cast<std::uint64_t>(ran); }));
    EXPECT_EQ(rt.stats().stopped, static_cast<std::uint64_t>(stopped));
    std::printf("[ info ] %d ran, %d stopped\n", ran, stopped);
}

TEST(RuntimeRace, StopVsFireIsExclusive) { stop_vs_fire(false); }

TEST(RuntimeRace, StopSyncVsFireIsExclusiveAndWaits) { stop_vs_fire(true); }

// Two threads reset (and sometimes stop) one-shots right around their
// deadlines. Each one-shot runs exactly once unless stopped, never before the
// deadline of any reset that returned true.
TEST(RuntimeRace, ResetVsFire) {
    const int n = kSanitized ? 1000 : 3000;
    const Duration step = kSanitized ? Duration(150us) : Duration(60us);
    std::vector<Cell> cells(static_cast<std::size_t>(n));  // outlives the runtime
    tw::Runtime rt(small_config());
    std::atomic<int> published{0};
    std::atomic<int> reset_ok{0};
    std::thread producer =
        produce(cells, step, 7, published, [&](Cell& c, int i) { start_cell(rt, c, i % 2, nullptr); });
    auto reset_or_stop = [&](Cell& c, std::uint64_t id, auto& rng) {
        if (rng() % 10 == 0) {
            record_stop(c, rt.stop(id), false);
            return;
        }
        if (reset_one_shot(rt, c, id, std::chrono::microseconds(rng() % 2000))) reset_ok.fetch_add(1);
    };
    std::vector<std::thread> racers = race_at_deadlines(cells, published, 200, reset_or_stop);
    producer.join();
    for (auto& t : racers) t.join();
    ASSERT_TRUE(wait_until([&] { return all_released(cells); })) << "some timers never ran nor were released";
    EXPECT_EQ(verify_cells(cells, cells.size(), "reset vs fire"), 0u);
    for (auto& c : cells) EXPECT_EQ(c.runs.load() + c.stop_true.load(), 1);
    EXPECT_GT(reset_ok.load(), 0);
    ASSERT_TRUE(wait_until([&] { return rt.stats().reset == static_cast<std::uint64_t>(reset_ok.load()); }));
}

// Four threads run a few thousand random operations each on a shared set of
// timers (one-shots, fixed-rate periodics, resettable periodics), then the
// runtime is shut down and every timer is accounted for.
TEST(RuntimeRace, HammerMixedOperationsThenShutdown) {
    constexpr int kThreads = 4;
    const int ops = kSanitized ? 800 : 3000;
    const auto capacity = static_cast<std::size_t>(kThreads * ops);
    std::vector<Cell> cells(capacity);
    std::atomic<std::size_t> count{0};
    std::atomic<int> live_periodic{0};
    std::atomic<std::uint64_t> starts{0}, stops_true{0}, resets_true{0};
    tw::Runtime rt(small_config());  // declared after everything its callables use
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(1000 + static_cast<std::uint64_t>(t));
            std::vector<std::size_t> mine;  // recently started by this thread
            auto pick = [&]() -> Cell* {
                const std::size_t n = count.load();
                if (n == 0) return nullptr;
                std::size_t i;
                if (!mine.empty() && rng() % 2 == 0)
                    i = mine[mine.size() - 1 - rng() % std::min<std::size_t>(mine.size(), 32)];
                else
                    i = rng() % n;
                return &cells[i];
            };
            for (int op = 0; op < ops; ++op) {
                if (op % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
                const unsigned r = static_cast<unsigned>(rng() % 100);
                if (r < 34) {  // start
                    const std::size_t i = count.fetch_add(1);
                    Cell& c = cells[i];
                    const bool periodic = r < 6 && live_periodic.load() < 12;
                    if (periodic) {
                        live_periodic.fetch_add(1);
                        c.kind = (r % 2) ? Cell::PeriodicPlain : Cell::PeriodicResettable;
                        c.period = std::chrono::microseconds(1000 + rng() % 3000);
                        c.first = c.period;
                    } else {
                        c.kind = Cell::OneShot;
                        c.first = std::chrono::microseconds(rng() % 3000);
                    }
                    start_cell(rt, c, static_cast<int>(rng() % 3) - 1, &live_periodic,
                               rng() % 4 == 0 ? Duration(50us) : Duration(0));
                    starts.fetch_add(1);
                    mine.push_back(i);
                    continue;
                }
                Cell* c = pick();
                if (c == nullptr) continue;
                const std::uint64_t id = c->id.load(std::memory_order_acquire);
                if (id == 0) {  // being started by another thread: id 0 is never valid
                    EXPECT_FALSE(rt.stop(0));
                    continue;
                }
                if (r < 58) {
                    const bool ok = rt.stop(id);
                    record_stop(*c, ok, false);
                    stops_true.fetch_add(ok);
                } else if (r < 68) {
                    const bool ok = rt.stop_sync(id);
                    record_stop(*c, ok, true);
                    stops_true.fetch_add(ok);
                } else {
                    if (c->kind == Cell::PeriodicPlain) continue;  // keeps its exact fixed-rate check
                    const Duration d = std::chrono::microseconds(rng() % 3000);
                    if (c->kind == Cell::OneShot) {
                        resets_true.fetch_add(reset_one_shot(rt, *c, id, d));
                    } else {
                        atomic_min(c->min_reset_deadline, ns(Clock::now() + d));
                        if (rt.reset(id, d)) {
                            c->reset_true.fetch_add(1);
                            resets_true.fetch_add(1);
                        }
                    }
                }
            }
        });
    for (auto& th : threads) th.join();
    // Let the last one-shots come due, then shut down with periodics still live.
    std::this_thread::sleep_for(5ms);
    rt.shutdown();
    const std::size_t n = count.load();
    const std::uint64_t cancelled = verify_cells(cells, n, "hammer");
    const tw::Stats st = rt.stats();
    std::uint64_t runs = 0, stops = 0, resets = 0;
    for (std::size_t i = 0; i < n; ++i) {
        runs += static_cast<std::uint64_t>(cells[i].runs.load());
        stops += static_cast<std::uint64_t>(cells[i].stop_true.load());
        resets += static_cast<std::uint64_t>(cells[i].reset_true.load());
    }
    EXPECT_EQ(st.started, starts.load());
    EXPECT_EQ(st.started, n);
    EXPECT_EQ(st.fired, runs);
    EXPECT_EQ(st.stopped, stops);
    EXPECT_EQ(st.stopped, stops_true.load());
    EXPECT_EQ(st.reset, resets);
    EXPECT_EQ(st.reset, resets_true.load());
    EXPECT_EQ(st.cancelled_at_shutdown, cancelled);
    EXPECT_EQ(st.lateness_samples, st.fired);
    EXPECT_EQ(st.live, 0u);
    EXPECT_EQ(live_periodic.load(), 0);
    std::printf("[ info ] %zu timers, %llu runs, %llu stops, %llu resets, %llu cancelled at shutdown\n", n,
                static_cast<unsigned long long>(runs), static_cast<unsigned long long>(stops),
                static_cast<unsigned long long>(resets), static_cast<unsigned long long>(cancelled));
}

// Periodic timers whose callbacks stop and reset each other at random; at the
// end the main thread stop_syncs them all. Every timer is stopped exactly once.
TEST(RuntimeRace, CallbacksStopAndResetEachOther) {
    const int n = kSanitized ? 60 : 200;
    std::vector<Cell> cells(static_cast<std::size_t>(n));
    std::atomic<bool> all_started{false};
    std::atomic<std::uint64_t> stops_from_callbacks{0};
    tw::Runtime rt(small_config());
    struct Meddler {
        CellCallback inner;
        std::vector<Cell>* all;
        std::atomic<bool>* ready;
        std::atomic<std::uint64_t>* stops;
        std::uint64_t seed;
        void operator()(tw::Timer self) {
            inner(self);
            if (!ready->load()) return;
            std::mt19937_64 rng(seed + static_cast<std::uint64_t>(inner.c->runs.load()));
            Cell& other = (*all)[rng() % all->size()];
            const std::uint64_t id = other.id.load(std::memory_order_acquire);
            if (id == self.id()) return;
            if (rng() % 8 == 0) {
                const bool ok = self.runtime()->stop(id);
                record_stop(other, ok, false);
                stops->fetch_add(ok);
            } else {
                const Duration d = std::chrono::microseconds(rng() % 4000);
                atomic_min(other.min_reset_deadline, ns(Clock::now() + d));
                if (self.runtime()->reset(id, d)) other.reset_true.fetch_add(1);
            }
        }
    };
    for (int i = 0; i < n; ++i) {
        Cell& c = cells[static_cast<std::size_t>(i)];
        c.kind = Cell::PeriodicResettable;
        c.period = std::chrono::microseconds(2000 + 37 * (i % 50));
        c.first = c.period;
        tw::StartOptions o;
        o.delay = c.first;
        o.period = c.period;
        o.shard = i;
        c.t0 = Clock::now();
        c.id.store(rt.start(o, Meddler{CellCallback(&c, nullptr), &cells, &all_started, &stops_from_callbacks,
                                       static_cast<std::uint64_t>(i) * 7919})
                       .id(),
                   std::memory_order_release);
    }
    all_started.store(true);
    ASSERT_TRUE(wait_until([&] { return stops_from_callbacks.load() >= static_cast<std::uint64_t>(n) / 4; }));
    for (auto& c : cells) record_stop(c, rt.stop_sync(c.id.load()), true);
    for (auto& c : cells) EXPECT_EQ(c.stop_true.load(), 1);
    EXPECT_EQ(verify_cells(cells, cells.size(), "callbacks meddling"), 0u);
    EXPECT_EQ(rt.stats().stopped, static_cast<std::uint64_t>(n));
}

// One shard, one slot reused over and over: a thread starts a one-shot (delay
// 0), waits for its release, starts the next (which gets the recycled slot
// with a new generation), while another thread keeps stopping and resetting
// the current id and the previous (stale) one. A stale id must never act on
// the slot's new timer; the current one is either run or stopped, once.
// (Under ThreadSanitizer this also exposes unsynchronised reads of a record's
// fields by stop()/reset() racing with start() re-initialising the slot.)
TEST(RuntimeRace, StaleIdsWhileTheSlotIsRecycled) {
    const int n = kSanitized ? 1000 : 1500;
    std::vector<Cell> cells(static_cast<std::size_t>(n));  // outlives the runtime
    std::atomic<int> current{-1};
    std::atomic<bool> done{false};
    std::atomic<int> stale_true{0};
    tw::Runtime rt(small_config(1, 2));
    std::thread meddler([&] {
        std::mt19937_64 rng(4242);
        while (!done.load()) {
            std::this_thread::yield();
            const int i = current.load(std::memory_order_acquire);
            if (i < 0) continue;
            Cell& c = cells[static_cast<std::size_t>(i)];
            const std::uint64_t id = c.id.load(std::memory_order_acquire);
            const unsigned r = static_cast<unsigned>(rng() % 1024);
            if (r < 900) {
                reset_one_shot(rt, c, id, Duration(0));
            } else if (r < 902) {  // rarely: most timers must get to run
                record_stop(c, rt.stop(id), false);
            } else if (i > 0) {  // the previous timer on this slot: released, so its id is stale
                Cell& prev = cells[static_cast<std::size_t>(i - 1)];
                if (prev.released.load() == 1) {
                    if (rt.stop(prev.id.load())) stale_true.fetch_add(1);
                    if (rt.reset(prev.id.load(), Duration(0))) stale_true.fetch_add(1);
                }
            }
        }
    });
    bool all_released = true;
    for (int i = 0; i < n && all_released; ++i) {
        Cell& c = cells[static_cast<std::size_t>(i)];
        c.first = Duration(0);
        tw::StartOptions o;
        o.shard = 0;
        c.t0 = Clock::now();
        c.eff_deadline.store(ns(c.first_deadline()));
        // Busy for 100 us: the meddler often finds the timer running.
        c.id.store(rt.start(o, CellCallback(&c, nullptr, 100us)).id(), std::memory_order_release);
        current.store(i, std::memory_order_release);
        const TimePoint give_up = Clock::now() + kWait;
        while (c.released.load() != 1 && Clock::now() < give_up) std::this_thread::yield();
        all_released = c.released.load() == 1;
    }
    done.store(true);
    meddler.join();
    ASSERT_TRUE(all_released);
    EXPECT_EQ(stale_true.load(), 0) << "a stale id acted on the slot's new timer";
    EXPECT_EQ(verify_cells(cells, cells.size(), "slot reuse"), 0u);
    for (auto& c : cells) EXPECT_EQ(c.runs.load() + c.stop_true.load(), 1);
}

// Several threads stop_sync the same periodic timer at once: exactly one gets
// true, and after ANY of them returns, no run starts.
TEST(RuntimeRace, ConcurrentStopSyncOnOnePeriodicTimer) {
    const int rounds = kSanitized ? 10 : 30;
    std::vector<Cell> cells(static_cast<std::size_t>(rounds));  // outlives the runtime
    tw::Runtime rt(small_config());
    for (int round = 0; round < rounds; ++round) {
        Cell& c = cells[static_cast<std::size_t>(round)];
        c.kind = Cell::PeriodicPlain;
        c.period = 1ms;
        c.first = c.period;
        const std::uint64_t id = start_cell(rt, c, round, nullptr, round % 2 ? Duration(300us) : Duration(0));
        ASSERT_TRUE(wait_until([&] { return c.runs.load() >= 2; }));
        std::atomic<int> go{0}, trues{0};
        std::vector<std::thread> th;
        for (int i = 0; i < 3; ++i)
            th.emplace_back([&] {
                go.fetch_add(1);
                while (go.load() < 3) std::this_thread::yield();
                const bool ok = rt.stop_sync(id);
                trues.fetch_add(ok);
                record_stop(c, ok, true);
            });
        for (auto& t : th) t.join();
        EXPECT_EQ(trues.load(), 1) << "round " << round;
        EXPECT_EQ(c.released.load(), 1) << "round " << round;
        const int n = c.runs.load();
        std::this_thread::sleep_for(5ms);  // observation window: five periods
        EXPECT_EQ(c.runs.load(), n);
        EXPECT_EQ(c.after_sync.load(), 0);
        EXPECT_EQ(c.running_after_sync.load(), 0);
        EXPECT_EQ(c.overlap.load(), 0);
        EXPECT_EQ(c.early.load(), 0);
    }
}

// Threads keep starting and stopping timers while the runtime shuts down.
// Every start either succeeds or fails with shutting_down; every callable is
// released exactly once; no callback starts after shutdown() returns; and
// every started timer ran, was stopped, or was cancelled at shutdown.
TEST(RuntimeRace, StartAndStopWhileShuttingDown) {
    constexpr int kThreads = 3;
    const std::size_t per_thread = kSanitized ? 3000 : 20000;
    std::vector<Cell> cells(kThreads * per_thread);
    std::atomic<int> refused{0}, wrong_error{0}, refused_not_released{0}, callback_after_shutdown{0};
    std::atomic<bool> shut{false};
    tw::Runtime rt(small_config());
    std::vector<std::thread> threads;
    std::atomic<std::size_t> progress{0};
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(50 + static_cast<std::uint64_t>(t));
            for (std::size_t k = 0; k < per_thread; ++k) {
                Cell& c = cells[static_cast<std::size_t>(t) * per_thread + k];
                c.kind = Cell::OneShot;
                c.first = std::chrono::microseconds(rng() % 20000);
                try {
                    tw::StartOptions o;
                    o.delay = c.first;
                    c.t0 = Clock::now();
                    const std::uint64_t id = rt.start(o, [&shut, &callback_after_shutdown,
                                                          inner = CellCallback(&c, nullptr)](tw::Timer self) mutable {
                                                  if (shut.load()) callback_after_shutdown.fetch_add(1);
                                                  inner(self);
                                              })
                                                 .id();
                    c.id.store(id, std::memory_order_release);
                } catch (const tw::Error& e) {
                    if (e.code() != tw::make_error_code(tw::errc::shutting_down)) wrong_error.fetch_add(1);
                    if (c.released.load() != 1) refused_not_released.fetch_add(1);
                    refused.fetch_add(1);  // id stays 0: not a timer, skipped by verify_cells
                    break;
                }
                if (rng() % 3 == 0) record_stop(c, rt.stop(c.id.load()), false);
                progress.fetch_add(1);
                if (k % 16 == 0) std::this_thread::yield();
            }
        });
    // Shut down while the threads are in full swing (a quarter of the way).
    // (EXPECT, not ASSERT: the threads must be joined whatever happens.)
    EXPECT_TRUE(wait_until([&] { return progress.load() >= kThreads * per_thread / 4; }));
    rt.shutdown();
    shut.store(true);
    for (auto& th : threads) th.join();
    EXPECT_EQ(wrong_error.load(), 0);
    EXPECT_EQ(refused_not_released.load(), 0) << "a refused start() must release the callable before throwing";
    EXPECT_EQ(callback_after_shutdown.load(), 0);
    std::size_t started = 0;
    for (auto& c : cells) started += c.id.load() != 0;
    const std::uint64_t cancelled = verify_cells(cells, cells.size(), "start/stop during shutdown");
    const tw::Stats st = rt.stats();
    EXPECT_EQ(st.started, started);
    EXPECT_EQ(st.cancelled_at_shutdown, cancelled);
    EXPECT_EQ(st.live, 0u);
    std::printf("[ info ] %zu started, %d refused, %llu cancelled at shutdown\n", started, refused.load(),
                static_cast<unsigned long long>(cancelled));
}

}  // namespace
