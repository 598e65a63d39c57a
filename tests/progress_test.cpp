// SPDX-License-Identifier: MIT OR Apache-2.0
// The progress rule (timer_state.hpp, "WHO MAY WAIT FOR WHOM"; issue 31):
// the runtime's own threads never wait for a caller. A caller thread is
// frozen -- parked for 600 ms at one schedule point of its path (every point
// it passes, one at a time: test_hooks::schedule_point) -- while a 5 ms
// periodic "monitor" timer on the same shard, run by the only worker, must
// keep its period. Each scenario is a caller's loop that passes a window
// where 1.5 made the driver or a worker wait for it:
//   start_stop      a lone caller's start+stop (1.5: the driver token, 'T')
//   reset           re-arms earlier and later (Refiles, the cells' rescan)
//   evict           more timers than a cell holds (evictions' Inserts)
//   queue_stop      stops of due timers bound to a delivery queue (the
//                   queue's transition mutex, held at 'u': 1.5's driver
//                   blocked delivering to that queue)
//   clocked_start   wall-clock starts (the clock-step index's lock, 'g',
//                   while the driver re-files after a wall-clock step)
//   group_stop      group stops (the group index's lock, 'G', while the
//                   worker re-indexes a grouped one-shot that re-arms itself)
//   reserve         stops whose Cancel goes to the out-of-memory reserve
//                   (its lock, 'R')
//   delay_reset     resets of a wall-clock DELAY timer (its deadline lock,
//                   'o', while its worker settles a run)
// And a caller frozen anywhere inside a stop does not hold back shutdown
// (1.5's driver waited for a token holder, and shutdown for the driver).
#include "test_support.hpp"
#include "tickwheel/runtime.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/test_hooks.hpp"

namespace {

using namespace tw_test::names;
namespace hooks = tickwheel::rt::test_hooks;

constexpr auto kFreeze = 1200ms;
// The largest gap between two runs of the 5 ms monitor (or between the
// freeze's start or end and the nearest run) allowed while a caller is
// frozen: a loaded 2-core machine's hiccups, well below kFreeze (a monitor
// held back by the frozen caller shows a gap of the whole freeze).
constexpr std::int64_t kMaxGapNs = kSanitized ? 800'000'000 : 600'000'000;

std::int64_t now_ns() { return tw::Clock::now().time_since_epoch().count(); }

// ---- freezing one marked thread at one site ----------------------------------
struct Freeze {
    std::atomic<char> site{0};
    std::atomic<int> skip{0};  // occurrences to let pass first
    std::atomic<bool> taken{false};
    tw_test::Gate parked, go;
};
std::atomic<Freeze*> g_freeze{nullptr};
std::array<std::atomic<int>, 128> g_seen{};  // how often the marked thread passed each site
thread_local bool t_marked = false;

void point(char site) {
    if (!t_marked) return;
    g_seen[static_cast<unsigned char>(site) & 127].fetch_add(1, std::memory_order_relaxed);
    Freeze* f = g_freeze.load();
    if (f == nullptr || f->site.load() != site) return;
    if (f->skip.fetch_sub(1) > 0) return;
    if (f->taken.exchange(true)) return;
    f->parked.open();
    (void)f->go.wait(120s);
}

struct PointHook {
    PointHook() { hooks::schedule_point.store(&point); }
    ~PointHook() {
        hooks::schedule_point.store(nullptr);
        g_freeze.store(nullptr);
    }
};

// ---- the monitor -----------------------------------------------------------------
struct Monitor {
    std::atomic<std::int64_t> last{0}, max_gap{0};
    std::atomic<int> runs{0};
    std::atomic<bool> on{false};
    void gap_to(std::int64_t t) {
        const std::int64_t prev = last.exchange(t);
        std::int64_t g = max_gap.load();
        while (t - prev > g && !max_gap.compare_exchange_weak(g, t - prev)) {
        }
    }
    void tick() {
        if (on.load()) {
            gap_to(now_ns());
            runs.fetch_add(1);
        }
    }
    /// Measures from now (the freeze's start) ...
    void begin() {
        max_gap = 0;
        runs = 0;
        last = now_ns();
        on = true;
    }
    /// ... to now (its end), counting the gap since the last run too.
    void end() {
        on = false;
        gap_to(now_ns());
    }
};

// ---- scenarios -------------------------------------------------------------------
struct World {
    tw::Runtime& rt;
    tw::Queue* q = nullptr;
};
using Step = std::function<void(World&)>;  // one round of a caller's loop

struct Scenario {
    const char* name;
    std::function<void(World&)> setup;  // before the caller runs (main thread)
    Step step;
    std::function<void(World&)> during;  // while the caller is frozen (main thread), repeatedly
};

std::vector<Scenario> scenarios() {
    std::vector<Scenario> v;
    v.push_back({"start_stop", nullptr,
                 [](World& w) {
                     const tw::Timer t = w.rt.start(60s, [] {});
                     (void)w.rt.stop(t);
                 },
                 nullptr});
    v.push_back({"reset", nullptr,
                 [](World& w) {
                     const tw::Timer t = w.rt.start(60s, [] {});
                     (void)w.rt.reset(t.id(), 30s);  // earlier: a Refile
                     (void)w.rt.reset(t.id(), 90s);  // later
                     (void)w.rt.stop(t);
                 },
                 nullptr});
    v.push_back({"evict", nullptr,
                 [](World& w) {
                     tw::Timer t[7];
                     for (auto& x : t) x = w.rt.start(60s, [] {});
                     for (auto& x : t) (void)w.rt.stop(x);
                 },
                 nullptr});
    v.push_back({"queue_stop", nullptr,
                 [](World& w) {
                     // A due timer bound to the queue (nobody runs it: it stays
                     // DISPATCHED), stopped: the stop takes the queue's mutex.
                     tw::StartOptions o;
                     o.delay = 0ns;
                     o.queue = w.q;
                     const tw::Timer t = w.rt.start(o, [] {});
                     std::this_thread::sleep_for(3ms);  // (delivered by the driver's next pass)
                     (void)w.rt.stop(t);
                 },
                 [](World& w) {
                     // More due timers of that queue: the driver delivers them.
                     tw::StartOptions o;
                     o.delay = 0ns;
                     o.queue = w.q;
                     (void)w.rt.start(o, [] {});
                 }});
    v.push_back({"clocked_start", nullptr,
                 [](World& w) {
                     tw::StartOptions o;
                     o.delay = 60s;
                     o.clock = tw::TimerClock::realtime;
                     const tw::Timer t = w.rt.start(o, [] {});
                     (void)w.rt.stop(t);
                 },
                 [](World&) {
                     // A wall-clock step: the driver re-files its clocked timers.
                     hooks::realtime_shift_ns.fetch_add(50'000'000);
                 }});
    v.push_back({"group_stop",
                 [](World& w) {
                     // A grouped one-shot that re-arms itself every 5 ms: its worker
                     // indexes it again after each run.
                     tw::StartOptions o;
                     o.delay = 5ms;
                     o.group = 77;
                     (void)w.rt.start(o, [](tw::Timer self) { (void)self.runtime()->reset(self.id(), 5ms); });
                 },
                 [](World& w) {
                     tw::StartOptions o;
                     o.delay = 60s;
                     o.group = 78;
                     (void)w.rt.start(o, [] {});
                     (void)w.rt.stop_group(78);
                 },
                 nullptr});
    v.push_back({"reserve", nullptr,
                 [](World& w) {
                     tw::StartOptions o;
                     o.delay = 60s;
                     o.leeway = 1ms;  // (not a plain timer: in the wheel, not in the caller's cell)
                     const tw::Timer t = w.rt.start(o, [] {});
                     hooks::fail_inbox_posts.store(1'000'000);
                     (void)w.rt.stop(t);  // its Cancel goes to the reserve
                     hooks::fail_inbox_posts.store(0);
                 },
                 nullptr});
    v.push_back({"delay_reset", nullptr,
                 [](World& w) {
                     static thread_local std::uint64_t id = 0;
                     if (id == 0) {
                         tw::StartOptions o;
                         o.delay = 1ms;
                         o.period = 3ms;
                         o.policy = tw::PeriodPolicy::delay;
                         o.clock = tw::TimerClock::realtime;
                         id = w.rt.start(o, [] { std::this_thread::sleep_for(200us); }).id();
                     }
                     (void)w.rt.reset(id, 2ms);
                 },
                 nullptr});
    return v;
}

tw::Config one_shard_one_worker() {
    tw::Config c;
    c.shards = 1;
    c.workers = 1;
    return c;
}

/// The sites the scenario's caller passes again and again (a dry run of 50
/// rounds: those seen at least 10 times).
std::string sites_of(const Scenario& s) {
    PointHook h;
    for (auto& b : g_seen) b.store(0);
    {
        tw::Runtime rt(one_shard_one_worker());
        tw::Queue q(rt);
        World w{rt, &q};
        if (s.setup) s.setup(w);
        std::thread caller([&] {
            t_marked = true;
            for (int i = 0; i < 50; ++i) s.step(w);
            t_marked = false;
        });
        caller.join();
        rt.shutdown();
    }
    std::string sites;
    for (unsigned c = 33; c < 127; ++c)
        if (g_seen[c].load() >= 10) sites.push_back(static_cast<char>(c));
    return sites;
}

struct Outcome {
    bool parked = false;
    std::int64_t max_gap = 0;
    int runs = 0;
};

/// Freezes the scenario's caller at its `skip`+1-th pass through `site` for
/// kFreeze and measures the monitor meanwhile.
Outcome freeze_at(const Scenario& s, char site, int skip) {
    PointHook h;
    Outcome out;
    auto rt = std::make_unique<tw::Runtime>(one_shard_one_worker());
    auto q = std::make_unique<tw::Queue>(*rt);
    World w{*rt, q.get()};
    Monitor mon;
    tw::StartOptions mo;
    mo.delay = 5ms;
    mo.period = 5ms;
    (void)rt->start(mo, [&mon] { mon.tick(); });
    if (s.setup) s.setup(w);
    Freeze f;
    f.site = site;
    f.skip = skip;
    g_freeze.store(&f);
    std::atomic<bool> stop{false};
    std::thread caller([&] {
        t_marked = true;
        while (!stop.load()) s.step(w);
        t_marked = false;
    });
    out.parked = f.parked.wait(5s);
    if (out.parked) {
        std::this_thread::sleep_for(20ms);
        mon.begin();
        const auto end = tw::Clock::now() + kFreeze;
        while (tw::Clock::now() < end) {
            if (s.during) s.during(w);
            std::this_thread::sleep_for(20ms);
        }
        mon.end();
        out.max_gap = mon.max_gap.load();
        out.runs = mon.runs.load();
    }
    stop = true;
    f.go.open();
    caller.join();
    hooks::fail_inbox_posts.store(0);
    hooks::realtime_shift_ns.store(0);
    q.reset();
    rt.reset();
    return out;
}

class Frozen : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Frozen, ACallerFrozenAtAnyStepDelaysNoOtherTimer) {
    const Scenario s = scenarios().at(GetParam());
    const std::string sites = sites_of(s);
    ASSERT_FALSE(sites.empty());
    std::printf("%s: sites %s\n", s.name, sites.c_str());
    int frozen = 0;
    for (const char site : sites) {
        const Outcome o = freeze_at(s, site, 3);
        if (!o.parked) continue;  // (not passed again after the warm-up: nothing to hold)
        ++frozen;
        EXPECT_LE(o.max_gap, kMaxGapNs) << s.name << ": a caller frozen at '" << site
                                        << "' held back the 5 ms monitor for " << o.max_gap / 1'000'000 << " ms";
        std::printf("  '%c': monitor max gap %.1f ms, %d runs\n", site, o.max_gap / 1e6, o.runs);
    }
    EXPECT_GT(frozen, 0);
}

INSTANTIATE_TEST_SUITE_P(Scenarios, Frozen, ::testing::Range<std::size_t>(0, 8),
                         [](const ::testing::TestParamInfo<std::size_t>& i) {
                             return std::string(scenarios().at(i.param).name);
                         });

// A thread frozen anywhere inside a stop (its every site, one at a time):
// shutdown completes meanwhile -- nothing of the runtime waits for it (1.5:
// a stop applied under the driver token, frozen at 'T', kept the driver, and
// so shutdown's join, waiting).
TEST(FrozenStop, ShutdownCompletesWhileAStopIsFrozen) {
    PointHook h;
    // The sites a stop passes (of a timer in the caller's cell, and of one
    // in the wheel).
    for (auto& b : g_seen) b.store(0);
    {
        tw::Runtime rt(one_shard_one_worker());
        for (int i = 0; i < 20; ++i) {
            const tw::Timer a = rt.start(60s, [] {});
            tw::StartOptions o;
            o.delay = 60s;
            o.leeway = 1ms;
            const tw::Timer b = rt.start(o, [] {});
            t_marked = true;
            (void)rt.stop(a);
            (void)rt.stop(b);
            t_marked = false;
        }
    }
    std::string sites;
    for (unsigned c = 33; c < 127; ++c)
        if (g_seen[c].load() != 0) sites.push_back(static_cast<char>(c));
    ASSERT_FALSE(sites.empty());
    std::printf("stop: sites %s\n", sites.c_str());
    for (const char site : sites) {
        for (const bool in_wheel : {false, true}) {
            auto rt = std::make_unique<tw::Runtime>(one_shard_one_worker());
            tw::StartOptions o;
            o.delay = 60s;
            if (in_wheel) o.leeway = 1ms;
            const tw::Timer t = rt->start(o, [] {});
            Freeze f;
            f.site = site;
            g_freeze.store(&f);
            std::thread stopper([&] {
                t_marked = true;
                (void)rt->stop(t);
                t_marked = false;
            });
            if (!f.parked.wait(2s)) {  // (this stop does not pass `site`)
                stopper.join();
                g_freeze.store(nullptr);
                continue;
            }
            std::atomic<bool> done{false};
            std::thread closer([&] {
                std::error_code ec;
                rt->shutdown(ec);
                done = true;
            });
            EXPECT_TRUE(wait_until([&] { return done.load(); }, kSanitized ? 5s : 2s))
                << "shutdown waited for a stop frozen at '" << site << "'" << (in_wheel ? " (in the wheel)" : "");
            f.go.open();
            closer.join();
            stopper.join();
            g_freeze.store(nullptr);
            rt.reset();
        }
    }
}

}  // namespace
