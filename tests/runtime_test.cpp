// SPDX-License-Identifier: MIT OR Apache-2.0
// Semantics tests for tickwheel::Runtime (include/tickwheel/runtime.hpp and
// include/tickwheel/timer.hpp), with real threads and real time.
//
// Rules every test follows:
//  * "Never early" is checked EXACTLY: the deadline is Clock::now() read just
//    before the call that arms the timer, plus the delay, and the callback
//    compares Clock::now() with it.
//  * Lateness is checked loosely (kLate), so the suite holds on a loaded
//    2-core machine and under the sanitizers.
//  * Nothing waits with a bare sleep for a race to settle: conditions are
//    polled with wait_until() (bounded) and the result is ASSERTed. The only
//    sleeps are inside callbacks (to make them long) and observation windows
//    whose length is itself the quantity under test (e.g. "runs per 300 ms").
//  * A callable's release hook is observed through Probe, a move-only member
//    whose destructor counts only the live (not moved-from) object.
#include "test_support.hpp"
#include "tickwheel/runtime.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace tw_test::names;

using tw_test::Gate;
using tw_test::id_gen;
using tw_test::id_index;
using tw_test::id_shard;
using tw_test::make_id;
using tw_test::OpenOnExit;
using tw_test::start_on_the_slot_of;

// Loose lateness bound: a timer must have started within this after its deadline.
constexpr Duration kLate = kSanitized ? Duration(5s) : Duration(2s);

std::error_code code(tw::errc e) { return tw::make_error_code(e); }

long ms_of(Duration d) { return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); }

// Calls f, which must throw tickwheel::Error with code e.
template <class F>
void expect_error(F&& f, tw::errc e, const char* what) {
    try {
        f();
        ADD_FAILURE() << what << ": no exception, expected tickwheel::Error(" << code(e).message() << ")";
    } catch (const tw::Error& err) {
        EXPECT_EQ(err.code(), code(e)) << what << ": " << err.what();
        EXPECT_EQ(&err.code().category(), &tw::error_category()) << what;
    } catch (const std::exception& other) {
        ADD_FAILURE() << what << ": unexpected exception " << other.what();
    }
}

// Counts the destruction of the live object only (moves empty the source).
using Probe = tw_test::CountsRelease;

// Everything a test wants to know about one timer's runs.
struct Track {
    std::atomic<int> runs{0};
    std::atomic<int> released{0};
    std::atomic<int> in_cb{0};
    std::atomic<int> max_in_cb{0};
    std::atomic<int> early{0};          // runs that started before the deadline
    std::atomic<int> after_release{0};  // runs that started after the release hook
    std::atomic<std::uint64_t> seen_id{0};
    std::atomic<tw::Runtime*> seen_rt{nullptr};
    std::mutex mu;
    std::vector<TimePoint> times;  // start time of every run

    void enter(tw::Timer t, TimePoint now, TimePoint deadline) {
        const int in = in_cb.fetch_add(1) + 1;
        int m = max_in_cb.load();
        while (in > m && !max_in_cb.compare_exchange_weak(m, in)) {
        }
        if (now < deadline) early.fetch_add(1);
        if (released.load() != 0) after_release.fetch_add(1);
        seen_id.store(t.id());
        seen_rt.store(t.runtime());
        {
            std::lock_guard<std::mutex> lk(mu);
            times.push_back(now);
        }
        runs.fetch_add(1);
    }
    void leave() { in_cb.fetch_sub(1); }
    std::vector<TimePoint> run_times() {
        std::lock_guard<std::mutex> lk(mu);
        return times;
    }
    TimePoint run_time(std::size_t i) {
        std::lock_guard<std::mutex> lk(mu);
        return i < times.size() ? times[i] : TimePoint{};
    }
};

// The usual callable: records the run in a Track, checks never-early against
// `deadline`, optionally stays busy for `busy`.
struct Recorder {
    Probe probe;
    Track* tr;
    TimePoint deadline;
    Duration busy;
    void operator()(tw::Timer t) {
        tr->enter(t, Clock::now(), deadline);
        if (busy > Duration::zero()) std::this_thread::sleep_for(busy);
        tr->leave();
    }
};
Recorder recorder(Track& tr, TimePoint deadline, Duration busy = Duration::zero()) {
    return Recorder{Probe(&tr.released), &tr, deadline, busy};
}

// Waits for a one-shot timer to be completely done (ran and released).
[[nodiscard]] bool wait_released(Track& tr, int n = 1) {
    return wait_until([&] { return tr.released.load() >= n; });
}

// Spins (yielding) until f() is true or `timeout` passes; for use inside callbacks.
template <class F>
bool spin_until(F f, Duration timeout = kWait) {
    const TimePoint end = Clock::now() + timeout;
    while (!f()) {
        if (Clock::now() >= end) return false;
        std::this_thread::yield();
    }
    return true;
}

std::size_t sum(const std::vector<std::size_t>& v) {
    std::size_t s = 0;
    for (std::size_t x : v) s += x;
    return s;
}

unsigned online_cpus() {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<unsigned>(n) : 1u;
}

// =============================================================================
// start
// =============================================================================

TEST(RuntimeStart, DelayFiresOnceNeverEarlyWithItsOwnHandle) {
    Track tr;
    tw::Runtime rt(small_config());
    const TimePoint deadline = Clock::now() + 20ms;
    const tw::Timer t = rt.start(20ms, recorder(tr, deadline));
    ASSERT_TRUE(t);
    EXPECT_NE(t.id(), 0u);
    EXPECT_EQ(t.runtime(), &rt);
    ASSERT_TRUE(wait_released(tr));
    EXPECT_EQ(tr.runs.load(), 1);
    EXPECT_EQ(tr.early.load(), 0);
    EXPECT_EQ(tr.after_release.load(), 0);
    EXPECT_LE(tr.run_time(0) - deadline, kLate);
    // The callback received a Timer equal to the one start() returned.
    EXPECT_EQ(tw::Timer(tr.seen_rt.load(), tr.seen_id.load()), t);
}

TEST(RuntimeStart, ZeroDelayFiresPromptly) {
    Track tr;
    tw::Runtime rt(small_config());
    const TimePoint deadline = Clock::now();
    const tw::Timer t = rt.start(0ns, recorder(tr, deadline));
    ASSERT_TRUE(wait_released(tr));
    EXPECT_EQ(tr.runs.load(), 1);
    EXPECT_EQ(tr.early.load(), 0);
    EXPECT_LE(tr.run_time(0) - deadline, kLate);
    EXPECT_EQ(tr.seen_id.load(), t.id());
}

TEST(RuntimeStart, StartAtFutureDeadlineNeverEarly) {
    Track tr;
    tw::Runtime rt(small_config());
    const TimePoint deadline = Clock::now() + 25ms;
    const tw::Timer t = rt.start_at(deadline, recorder(tr, deadline));
    ASSERT_TRUE(wait_released(tr));
    EXPECT_EQ(tr.runs.load(), 1);
    EXPECT_EQ(tr.early.load(), 0);
    EXPECT_LE(tr.run_time(0) - deadline, kLate);
    EXPECT_EQ(tw::Timer(tr.seen_rt.load(), tr.seen_id.load()), t);
}

TEST(RuntimeStart, StartAtPastDeadlineFiresAtOnce) {
    Track a, b;
    tw::Runtime rt(small_config());
    const TimePoint before = Clock::now();
    rt.start_at(before - 1s, recorder(a, before - 1s));
    // Far in the past (before the runtime's epoch, and before the clock's).
    rt.start_at(TimePoint::min() + 1ns, recorder(b, TimePoint::min() + 1ns));
    ASSERT_TRUE(wait_released(a));
    ASSERT_TRUE(wait_released(b));
    EXPECT_EQ(a.runs.load(), 1);
    EXPECT_EQ(b.runs.load(), 1);
    EXPECT_LE(a.run_time(0) - before, kLate);
    EXPECT_LE(b.run_time(0) - before, kLate);
}

TEST(RuntimeStart, PeriodicFirstRunAfterOnePeriodThenEveryPeriod) {
    Track tr;
    tw::Runtime rt(small_config());
    const TimePoint t0 = Clock::now();
    const tw::Timer t = rt.start_periodic(30ms, recorder(tr, t0 + 30ms));
    ASSERT_TRUE(wait_until([&] { return tr.runs.load() >= 3; }));
    EXPECT_TRUE(rt.stop_sync(t));
    const auto times = tr.run_times();
    ASSERT_GE(times.size(), 3u);
    for (std::size_t k = 0; k < times.size(); ++k)
        EXPECT_GE(times[k], t0 + 30ms * static_cast<long>(k + 1)) << "run " << k << " early";
    EXPECT_LE(times[0] - (t0 + 30ms), kLate);
    EXPECT_EQ(tr.seen_id.load(), t.id());
    EXPECT_EQ(tr.released.load(), 1);
}

TEST(RuntimeStart, StartOptionsShardHintIsTakenModuloShardCount) {
    std::vector<tw::Timer> timers;
    std::atomic<int> released{0};
    tw::Runtime rt(small_config(3, 2));
    ASSERT_EQ(rt.shard_count(), 3u);
    for (int hint = 0; hint < 6; ++hint) {
        tw::StartOptions o;
        o.delay = 30s;
        o.shard = hint;
        timers.push_back(rt.start(o, [p = Probe(&released)](tw::Timer) {}));
        EXPECT_EQ(id_shard(timers.back().id()), static_cast<unsigned>(hint) % 3u) << "hint " << hint;
    }
    // The wheels see them where the ids say.
    ASSERT_TRUE(wait_until([&] { return rt.stats().pending_per_shard == std::vector<std::size_t>{2, 2, 2}; }))
        << "pending_per_shard never became {2,2,2}";
    // shard = -1: the calling CPU's shard, some valid shard.
    tw::StartOptions any;
    any.delay = 30s;
    const tw::Timer t = rt.start(any, [p = Probe(&released)] {});
    EXPECT_LT(id_shard(t.id()), 3u);
    timers.push_back(t);
    for (auto& x : timers) EXPECT_TRUE(rt.stop(x));
    EXPECT_EQ(released.load(), 7);
}

TEST(RuntimeStart, StartOptionsDelayPeriodAndDeadline) {
    Track p;
    Track d;
    tw::Runtime rt(small_config());
    // delay + period: first run after `delay`, then every `period`.
    TimePoint t0 = Clock::now();
    tw::StartOptions o;
    o.delay = 10ms;
    o.period = 40ms;
    o.shard = 1;
    const tw::Timer pt = rt.start(o, recorder(p, t0 + 10ms));
    ASSERT_TRUE(wait_until([&] { return p.runs.load() >= 3; }));
    EXPECT_TRUE(rt.stop_sync(pt));
    const auto times = p.run_times();
    ASSERT_GE(times.size(), 3u);
    for (std::size_t k = 0; k < times.size(); ++k)
        EXPECT_GE(times[k], t0 + 10ms + 40ms * static_cast<long>(k)) << "run " << k;
    EXPECT_EQ(id_shard(pt.id()), 1u);

    // An explicit deadline overrides the delay.
    t0 = Clock::now();
    tw::StartOptions od;
    od.deadline = t0 + 15ms;
    od.delay = 1h;
    rt.start(od, recorder(d, t0 + 15ms));
    ASSERT_TRUE(wait_released(d));
    EXPECT_EQ(d.early.load(), 0);
    EXPECT_LE(d.run_time(0) - (t0 + 15ms), kLate);
}

TEST(RuntimeStart, CallableTakingNoArgumentsWorks) {
    std::atomic<int> runs{0}, released{0};
    std::atomic<int> early{0};
    tw::Runtime rt(small_config());
    const TimePoint deadline = Clock::now() + 5ms;
    rt.start(5ms, [&runs, &early, deadline, p = Probe(&released)] {
        if (Clock::now() < deadline) early.fetch_add(1);
        runs.fetch_add(1);
    });
    ASSERT_TRUE(wait_until([&] { return released.load() == 1; }));
    EXPECT_EQ(runs.load(), 1);
    EXPECT_EQ(early.load(), 0);
}

TEST(RuntimeStart, BigAndOveralignedCapturesWork) {
    std::atomic<std::uint64_t> seen{0};
    std::atomic<int> released{0};
    std::array<std::uint64_t, 8> data{};
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = (i + 1) * 1000003u;
    std::uint64_t expected = 0;
    for (auto x : data) expected += x;
    std::atomic<std::uint64_t> wide_seen{0};
    std::atomic<bool> aligned{false};
    tw::Runtime rt(small_config());
    auto big = [data, &seen, p = Probe(&released)](tw::Timer) {
        std::uint64_t s = 0;
        for (auto x : data) s += x;
        seen.store(s);
    };
    static_assert(sizeof(big) > tw::detail::Callback::kInline, "must exceed the inline buffer");
    rt.start(2ms, std::move(big));
    ASSERT_TRUE(wait_until([&] { return released.load() == 1; }));
    EXPECT_EQ(seen.load(), expected);

    struct alignas(64) Wide {
        std::uint64_t v[3];
    };
    Wide w{{7, 11, 13}};
    auto over = [w, &wide_seen, &aligned, p = Probe(&released)] {
        aligned.store(reinterpret_cast<std::uintptr_t>(&w) % 64 == 0);
        wide_seen.store(w.v[0] * w.v[1] * w.v[2]);
    };
    rt.start(2ms, std::move(over));
    ASSERT_TRUE(wait_until([&] { return released.load() == 2; }));
    EXPECT_EQ(wide_seen.load(), 7u * 11u * 13u);
    EXPECT_TRUE(aligned.load());
}

struct Payload {
    std::atomic<int>* destroyed;
    int value;
    Payload(std::atomic<int>* d, int v) : destroyed(d), value(v) {}
    Payload(const Payload&) = delete;
    Payload& operator=(const Payload&) = delete;
    ~Payload() { destroyed->fetch_add(1); }
};

TEST(RuntimeStart, MoveOnlyCapturesWork) {
    std::atomic<int> destroyed{0};
    std::atomic<int> got{0};
    tw::Runtime rt(small_config());
    // Small (inline) move-only capture.
    auto up = std::make_unique<Payload>(&destroyed, 42);
    rt.start(2ms, [q = std::move(up), &got](tw::Timer) { got.store(q->value); });
    ASSERT_TRUE(wait_until([&] { return destroyed.load() == 1; }));
    EXPECT_EQ(got.load(), 42);
    // Large (boxed) move-only capture.
    auto up2 = std::make_unique<Payload>(&destroyed, 43);
    std::array<std::uint64_t, 6> pad{1, 2, 3, 4, 5, 6};
    auto boxed = [q = std::move(up2), pad, &got] { got.store(q->value + static_cast<int>(pad[5] - 6)); };
    static_assert(sizeof(boxed) > tw::detail::Callback::kInline);
    rt.start(2ms, std::move(boxed));
    ASSERT_TRUE(wait_until([&] { return destroyed.load() == 2; }));
    EXPECT_EQ(got.load(), 43);
}

TEST(RuntimeStart, InvalidArgumentsThrowAndReleaseTheCallable) {
    std::atomic<int> released{0};
    std::atomic<int> runs{0};
    Track sentinel;
    tw::Runtime rt(small_config());
    auto cb = [&] { return [&runs, p = Probe(&released)](tw::Timer) { runs.fetch_add(1); }; };
    int expected_released = 0;
    auto check = [&](auto&& f, const char* what) {
        expect_error(f, tw::errc::invalid_argument, what);
        ++expected_released;
        EXPECT_EQ(released.load(), expected_released) << what << ": release hook must run exactly once";
    };
    check([&] { rt.start(-1ns, cb()); }, "negative delay");
    check([&] { rt.start(tw::kMaxDelay + 1ns, cb()); }, "delay > kMaxDelay");
    check([&] { rt.start_at(Clock::now() + tw::kMaxDelay + 1s, cb()); }, "deadline beyond kMaxDelay");
    check([&] { rt.start_at(TimePoint::max(), cb()); }, "deadline TimePoint::max()");
    check([&] { rt.start_periodic(-1ms, cb()); }, "negative period");
    check(
        [&] {
            tw::StartOptions o;
            o.delay = 1ms;
            o.period = -1ns;
            rt.start(o, cb());
        },
        "StartOptions negative period");
    check(
        [&] {
            tw::StartOptions o;
            o.delay = 1ms;
            o.period = tw::kMaxDelay + 1ns;
            rt.start(o, cb());
        },
        "StartOptions period > kMaxDelay");
    // The error_code overload: an empty callable is invalid too.
    std::error_code ec;
    const tw::Timer t = rt.start(tw::StartOptions{}, tw::detail::Callback{}, ec);
    EXPECT_EQ(ec, code(tw::errc::invalid_argument));
    EXPECT_FALSE(t);
    EXPECT_EQ(rt.stats().started, 0u);
    // None of them ever runs (a valid timer on the same shards fires afterwards).
    rt.start(10ms, recorder(sentinel, Clock::now() + 10ms));
    ASSERT_TRUE(wait_released(sentinel));
    EXPECT_EQ(runs.load(), 0);
}

TEST(RuntimeStart, PeriodicWithZeroPeriodIsInvalid) {
    // runtime.hpp: start_periodic "Throws as start(), and invalid_argument for period <= 0."
    std::atomic<int> released{0};
    std::atomic<int> runs{0};
    tw::Runtime rt(small_config());
    expect_error([&] { rt.start_periodic(0ns, [&runs, p = Probe(&released)] { runs.fetch_add(1); }); },
                 tw::errc::invalid_argument, "start_periodic(0ns)");
    ASSERT_TRUE(wait_until([&] { return released.load() == 1; }));
    EXPECT_EQ(runs.load(), 0) << "start_periodic(0) started a timer and ran it";
}

TEST(RuntimeStart, MaxDelayIsAcceptedAtEveryResolution) {
    for (Duration res : {Duration(1us), Duration(1ms), Duration(1s)}) {
        tw::Config c = small_config();
        c.resolution = res;
        tw::Runtime rt(c);
        std::atomic<int> released{0}, runs{0};
        const tw::Timer t = rt.start(tw::kMaxDelay, [&runs, p = Probe(&released)] { runs.fetch_add(1); });
        const tw::Timer a = rt.start_at(Clock::now() + tw::kMaxDelay - 1s, [&runs, p = Probe(&released)] {
            runs.fetch_add(1);
        });
        tw::StartOptions o;
        o.delay = tw::kMaxDelay;
        o.period = tw::kMaxDelay;
        const tw::Timer p = rt.start(o, [&runs, q = Probe(&released)] { runs.fetch_add(1); });
        // Let the shards file them (far deadlines go to the top levels or overflow).
        ASSERT_TRUE(wait_until([&] { return sum(rt.stats().pending_per_shard) == 3; }))
            << "resolution " << res.count();
        EXPECT_TRUE(rt.stop(t));
        EXPECT_TRUE(rt.stop(a));
        EXPECT_TRUE(rt.stop(p));
        EXPECT_EQ(released.load(), 3);
        EXPECT_EQ(runs.load(), 0);
    }
}

TEST(RuntimeStart, ErrorCodeOverloadReportsAndReleasesBeforeReturning) {
    std::atomic<int> released{0};
    std::atomic<int> runs{0};
    tw::Runtime rt(small_config());
    tw::detail::Callback bad([&runs, p = Probe(&released)](tw::Timer) { runs.fetch_add(1); });
    tw::StartOptions o;
    o.delay = -5ms;
    std::error_code ec;
    const tw::Timer t = rt.start(o, std::move(bad), ec);
    EXPECT_EQ(ec, code(tw::errc::invalid_argument));
    EXPECT_FALSE(t);
    EXPECT_EQ(t.id(), 0u);
    EXPECT_EQ(released.load(), 1) << "the callable must be destroyed before start() returns";

    // Success clears a stale ec and returns a live timer.
    tw::detail::Callback good([&runs, p = Probe(&released)](tw::Timer) { runs.fetch_add(1); });
    o.delay = 1ms;
    ec = code(tw::errc::no_memory);
    const tw::Timer t2 = rt.start(o, std::move(good), ec);
    EXPECT_FALSE(ec);
    EXPECT_TRUE(t2);
    ASSERT_TRUE(wait_until([&] { return released.load() == 2; }));
    EXPECT_EQ(runs.load(), 1);
}

// =============================================================================
// never early
// =============================================================================

TEST(RuntimeNeverEarly, ThousandsOfRandomTimersAcrossShardsFireExactlyOnce) {
    const int n = kSanitized ? 1000 : 3000;
    std::vector<Track> tracks(static_cast<std::size_t>(n));
    std::vector<TimePoint> deadlines(static_cast<std::size_t>(n));
    tw::Runtime rt(small_config());
    std::vector<std::uint64_t> ids(static_cast<std::size_t>(n));
    std::mt19937_64 rng(12345);
    std::uniform_int_distribution<std::int64_t> delay_us(0, 50'000);
    std::uniform_int_distribution<int> shard(-1, 3);
    for (int i = 0; i < n; ++i) {
        auto& tr = tracks[static_cast<std::size_t>(i)];
        tw::StartOptions o;
        o.delay = std::chrono::microseconds(delay_us(rng)) + std::chrono::nanoseconds(rng() % 1000);
        o.shard = shard(rng);
        const TimePoint deadline = Clock::now() + o.delay;
        deadlines[static_cast<std::size_t>(i)] = deadline;
        ids[static_cast<std::size_t>(i)] = rt.start(o, recorder(tr, deadline)).id();
    }
    ASSERT_TRUE(wait_until([&] {
        for (auto& tr : tracks)
            if (tr.released.load() == 0) return false;
        return true;
    })) << "not every timer fired";
    Duration worst{0};
    int bad = 0;
    for (int i = 0; i < n; ++i) {
        auto& tr = tracks[static_cast<std::size_t>(i)];
        if (tr.runs.load() != 1 || tr.early.load() != 0 || tr.released.load() != 1 || tr.after_release.load() != 0 ||
            tr.seen_id.load() != ids[static_cast<std::size_t>(i)]) {
            if (++bad <= 10)
                ADD_FAILURE() << "timer " << i << ": runs=" << tr.runs.load() << " early=" << tr.early.load()
                              << " released=" << tr.released.load() << " id ok="
                              << (tr.seen_id.load() == ids[static_cast<std::size_t>(i)]);
            continue;
        }
        worst = std::max(worst, tr.run_time(0) - deadlines[static_cast<std::size_t>(i)]);
    }
    EXPECT_EQ(bad, 0);
    EXPECT_LE(worst, kLate) << "worst lateness " << ms_of(worst) << " ms";
    ASSERT_TRUE(wait_until([&] { return rt.stats().fired == static_cast<std::uint64_t>(n); }));
    const tw::Stats st = rt.stats();
    EXPECT_EQ(st.started, static_cast<std::uint64_t>(n));
    EXPECT_EQ(st.lateness_samples, static_cast<std::uint64_t>(n));
}

// Fine and coarse ticks: deadlines are rounded UP to the tick, never down.
void never_early_at_resolution(Duration res, Duration max_delay, int n) {
    tw::Config c = small_config();
    c.resolution = res;
    std::vector<Track> tracks(static_cast<std::size_t>(n));
    std::vector<TimePoint> deadlines(static_cast<std::size_t>(n));
    tw::Runtime rt(c);
    EXPECT_EQ(rt.resolution(), res);
    std::mt19937_64 rng(static_cast<std::uint64_t>(res.count()));
    for (int i = 0; i < n; ++i) {
        auto& tr = tracks[static_cast<std::size_t>(i)];
        const Duration d(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(max_delay.count())));
        TimePoint deadline;
        if (i % 2 == 0) {
            deadline = Clock::now() + d;
            rt.start(d, recorder(tr, deadline));
        } else {  // absolute deadlines with arbitrary nanoseconds
            deadline = Clock::now() + d;
            rt.start_at(deadline, recorder(tr, deadline));
        }
        deadlines[static_cast<std::size_t>(i)] = deadline;
    }
    ASSERT_TRUE(wait_until([&] {
        for (auto& tr : tracks)
            if (tr.released.load() == 0) return false;
        return true;
    })) << "resolution " << res.count() << " ns: not every timer fired";
    Duration worst{0};
    for (int i = 0; i < n; ++i) {
        auto& tr = tracks[static_cast<std::size_t>(i)];
        EXPECT_EQ(tr.runs.load(), 1) << i;
        EXPECT_EQ(tr.early.load(), 0) << "timer " << i << " fired early at resolution " << res.count() << " ns";
        worst = std::max(worst, tr.run_time(0) - deadlines[static_cast<std::size_t>(i)]);
    }
    EXPECT_LE(worst, kLate + res);
}

TEST(RuntimeNeverEarly, Resolution100usNeverFiresEarly) { never_early_at_resolution(100us, 20ms, 600); }

TEST(RuntimeNeverEarly, CoarseResolutionRoundsDeadlinesUp) { never_early_at_resolution(20ms, 30ms, 60); }

// =============================================================================
// stop
// =============================================================================

TEST(RuntimeStop, PendingTimerStopsReleasesInsideStopAndNeverRuns) {
    Track tr, sentinel;
    tw::Runtime rt(small_config());
    tw::StartOptions o;
    o.shard = 0;
    o.delay = 100ms;
    const tw::Timer t = rt.start(o, recorder(tr, Clock::now() + 100ms));
    ASSERT_TRUE(rt.stop(t));
    EXPECT_EQ(tr.released.load(), 1) << "the callable must be destroyed inside a successful stop()";
    EXPECT_FALSE(rt.stop(t)) << "second stop";
    EXPECT_FALSE(t.runtime()->stop(t.id()));
    // A later timer on the same shard fires: the stopped one's deadline is past.
    o.delay = 150ms;
    rt.start(o, recorder(sentinel, Clock::now() + 150ms));
    ASSERT_TRUE(wait_released(sentinel));
    EXPECT_EQ(tr.runs.load(), 0);
    EXPECT_EQ(tr.released.load(), 1);
    EXPECT_EQ(rt.stats().stopped, 1u);
}

TEST(RuntimeStop, ThroughTheTimerHandle) {
    Track tr;
    tw::Runtime rt(small_config());
    tw::Timer t = rt.start(10s, recorder(tr, Clock::now() + 10s));
    tw::Timer copy = t;
    EXPECT_TRUE(copy.stop());
    EXPECT_FALSE(t.stop());
    EXPECT_EQ(tr.released.load(), 1);
    tw::Timer empty;
    EXPECT_FALSE(empty);
    EXPECT_FALSE(empty.stop());
    EXPECT_FALSE(empty.stop_sync());
    EXPECT_FALSE(empty.reset(1ms));
    EXPECT_EQ(empty.runtime(), nullptr);
}

TEST(RuntimeStop, ReturnsFalseAfterTheTimerFired) {
    Track tr;
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start(2ms, recorder(tr, Clock::now() + 2ms));
    ASSERT_TRUE(wait_released(tr));
    EXPECT_FALSE(rt.stop(t));
    EXPECT_FALSE(rt.stop_sync(t));
    EXPECT_EQ(tr.runs.load(), 1);
    EXPECT_EQ(rt.stats().stopped, 0u);
}

TEST(RuntimeStop, ReturnsFalseWhileAOneShotRuns) {
    std::atomic<bool> started{false}, go{false}, finished{false};
    std::atomic<int> released{0};
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start(1ms, [&, p = Probe(&released)] {
        started = true;
        spin_until([&] { return go.load(); });
        finished = true;
    });
    ASSERT_TRUE(wait_until([&] { return started.load(); }));
    EXPECT_FALSE(rt.stop(t)) << "a one-shot that is running cannot be prevented";
    EXPECT_EQ(released.load(), 0);
    go = true;
    ASSERT_TRUE(wait_until([&] { return released.load() == 1; }));
    EXPECT_TRUE(finished.load());
    EXPECT_FALSE(rt.stop(t));
}

TEST(RuntimeStop, InvalidStaleAndForeignIdsAreNeverActedOn) {
    Track live_tr;
    tw::Runtime rt(small_config());
    ASSERT_EQ(rt.shard_count(), 2u);
    const tw::Timer live = rt.start(30s, recorder(live_tr, Clock::now() + 30s));
    const std::uint64_t id = live.id();
    const std::uint32_t gen = id_gen(id), sh = id_shard(id), idx = id_index(id);

    EXPECT_FALSE(rt.stop(0));
    EXPECT_FALSE(rt.stop_sync(0));
    EXPECT_FALSE(rt.reset(0, 1ms));
    // Same slot, other generations: including one that agrees in the low 10
    // bits (the ctl word's copy) but not in the full 24-bit generation.
    for (std::uint32_t g : {gen + 1, gen - 1 == 0 ? 2u : gen - 1, gen ^ (1u << 10), gen ^ (1u << 23), 0u}) {
        const std::uint64_t other = make_id(g, sh, idx);
        if (other == id) continue;
        EXPECT_FALSE(rt.stop(other)) << "gen " << g;
        EXPECT_FALSE(rt.reset(other, 1ms)) << "gen " << g;
        EXPECT_FALSE(rt.stop_sync(other)) << "gen " << g;
    }
    // Shard indices >= shard_count.
    for (std::uint32_t s : {2u, 3u, 17u, 255u}) {
        const std::uint64_t other = make_id(gen, s, idx);
        EXPECT_FALSE(rt.stop(other)) << "shard " << s;
        EXPECT_FALSE(rt.reset(other, 1ms)) << "shard " << s;
        EXPECT_FALSE(rt.stop_sync(other)) << "shard " << s;
    }
    // The other (valid) shard, and indices far beyond anything allocated.
    EXPECT_FALSE(rt.stop(make_id(gen, 1 - sh, idx)));
    EXPECT_FALSE(rt.stop(make_id(gen, sh, idx + 1)));
    EXPECT_FALSE(rt.stop(make_id(gen, sh, 0xFFFFFFFFu)));
    EXPECT_FALSE(rt.stop(make_id(gen, sh, 1u << 20)));
    // Random garbage.
    std::mt19937_64 rng(777);
    for (int i = 0; i < 20000; ++i) {
        std::uint64_t g = rng();
        if (i % 4 == 1) g &= 0xFFFFFF00FFFFFFFFull;  // shard 0
        if (i % 4 == 2) g = (g & 0xFFFFFF0000000000ull) | (std::uint64_t{sh} << 32) | (g & 0xF);  // small index
        if (g == id) continue;
        ASSERT_FALSE(rt.stop(g)) << std::hex << g;
        ASSERT_FALSE(rt.reset(g, 1ms)) << std::hex << g;
        if (i % 16 == 0) {
            ASSERT_FALSE(rt.stop_sync(g)) << std::hex << g;
        }
    }
    EXPECT_EQ(live_tr.released.load(), 0) << "a foreign id released the live timer";
    EXPECT_TRUE(rt.stop(live));
    EXPECT_EQ(live_tr.runs.load(), 0);
}

// The stale id of a slot that now holds a newer timer. The reuse is forced
// and asserted, not hoped for: one shard, so every start competes for the
// recycled slot, and start_on_the_slot_of() keeps starting timers until one
// lands on it (see test_support.hpp). Then stop, stop_sync and reset with the
// stale id must do nothing to the slot's new timer: it is not released, and
// it fires exactly once, at the deadline its own id set.
TEST(RuntimeStop, StaleIdOfARecycledSlotIsNotActedOn) {
    Track first;
    std::deque<Track> newer;  // one per timer started on the way; the last one got the slot
    tw::Runtime rt(small_config(1, 2));
    const tw::Timer t1 = rt.start(0ns, recorder(first, Clock::now()));
    ASSERT_TRUE(wait_released(first));
    std::vector<std::uint64_t> held;
    // (No early check in the recorder: the deadline is moved below; checked by hand.)
    const std::uint64_t id2 = start_on_the_slot_of(
        t1.id(), [&] { return rt.start(30s, recorder(newer.emplace_back(), TimePoint{})).id(); }, held);
    ASSERT_NE(id2, 0u) << "no new timer got the slot of the stale id within " << ms_of(kWait) << " ms ("
                       << held.size() << " tried): the slot was never reused";
    const tw::Timer t2(&rt, id2);
    Track& second = newer.back();
    ASSERT_EQ(id_index(t2.id()), id_index(t1.id()));
    ASSERT_EQ(id_shard(t2.id()), id_shard(t1.id()));
    EXPECT_NE(id_gen(t2.id()), id_gen(t1.id())) << "same slot, same generation: the stale id names the new timer";

    EXPECT_FALSE(rt.stop(t1));
    EXPECT_FALSE(rt.stop_sync(t1));
    EXPECT_EQ(second.released.load(), 0) << "a stale stop cancelled the slot's new timer";
    // Move the new timer's deadline near with its own id, then try to fire it
    // at once and to push it hours away with the stale one: it must fire
    // once, at its own deadline (not before: a stale reset(0) acted on; not
    // never: a stale reset(1h) acted on).
    const TimePoint own_deadline = Clock::now() + 20ms;
    EXPECT_TRUE(rt.reset(t2, 20ms));
    EXPECT_FALSE(rt.reset(t1, 0ns));
    EXPECT_FALSE(rt.reset(t1, 1h));
    ASSERT_TRUE(wait_released(second)) << "the slot's new timer never fired: a stale reset moved it";
    EXPECT_EQ(second.runs.load(), 1);
    EXPECT_GE(second.run_time(0), own_deadline) << "the slot's new timer fired early: a stale reset moved it";
    EXPECT_EQ(second.seen_id.load(), t2.id());
    EXPECT_FALSE(rt.stop(t1));
    EXPECT_EQ(first.runs.load(), 1);
    // The timers started on the way were untouched too.
    for (std::uint64_t id : held) EXPECT_TRUE(rt.stop(id)) << std::hex << id;
    for (std::size_t i = 0; i + 1 < newer.size(); ++i) {
        EXPECT_EQ(newer[i].runs.load(), 0) << i;
        EXPECT_EQ(newer[i].released.load(), 1) << i;
    }
}

// =============================================================================
// release hook
// =============================================================================

struct OrderedRelease {
    std::atomic<int>* released;
    std::atomic<bool>* run_finished;
    std::atomic<int>* released_before_run_end;
    std::atomic<std::thread::id>* thread;
    bool live = true;
    OrderedRelease(std::atomic<int>* r, std::atomic<bool>* f, std::atomic<int>* b, std::atomic<std::thread::id>* t)
        : released(r), run_finished(f), released_before_run_end(b), thread(t) {}
    OrderedRelease(OrderedRelease&& o) noexcept
        : released(o.released),
          run_finished(o.run_finished),
          released_before_run_end(o.released_before_run_end),
          thread(o.thread),
          live(std::exchange(o.live, false)) {}
    OrderedRelease& operator=(OrderedRelease&&) = delete;
    ~OrderedRelease() {
        if (!live) return;
        if (!run_finished->load()) released_before_run_end->fetch_add(1);
        thread->store(std::this_thread::get_id());
        released->fetch_add(1);
    }
};

TEST(RuntimeRelease, OneShotReleasedExactlyOnceAfterItsRun) {
    std::atomic<int> released{0}, bad{0}, runs{0};
    std::atomic<bool> finished{false};
    std::atomic<std::thread::id> where{};
    tw::Runtime rt(small_config());
    rt.start(2ms, [&runs, &finished, h = OrderedRelease(&released, &finished, &bad, &where)] {
        runs.fetch_add(1);
        finished.store(true);
    });
    ASSERT_TRUE(wait_until([&] { return released.load() == 1; }));
    EXPECT_EQ(runs.load(), 1);
    EXPECT_EQ(bad.load(), 0) << "released before the run ended";
    EXPECT_NE(where.load(), std::this_thread::get_id()) << "released on the caller's thread";
}

TEST(RuntimeRelease, PeriodicStoppedDuringARunIsReleasedRightAfterThatRun) {
    std::atomic<int> released{0}, bad{0}, runs{0}, after_release{0};
    std::atomic<bool> started{false}, go{false}, finished{false};
    std::atomic<std::thread::id> where{};
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start_periodic(10ms, [&, h = OrderedRelease(&released, &finished, &bad, &where)] {
        if (released.load() != 0) after_release.fetch_add(1);
        runs.fetch_add(1);
        started.store(true);
        spin_until([&] { return go.load(); });
        finished.store(true);
    });
    ASSERT_TRUE(wait_until([&] { return started.load(); }));
    EXPECT_TRUE(rt.stop(t)) << "stop() of a periodic timer during a run prevents the next runs";
    EXPECT_EQ(released.load(), 0) << "released while its run is still in progress";
    go.store(true);
    ASSERT_TRUE(wait_until([&] { return released.load() == 1; }));
    EXPECT_EQ(bad.load(), 0);
    EXPECT_NE(where.load(), std::this_thread::get_id()) << "should be released on the worker, after the run";
    EXPECT_EQ(runs.load(), 1) << "no run may start after stop() returned true";
    EXPECT_EQ(after_release.load(), 0);
    EXPECT_FALSE(rt.stop(t));
}

TEST(RuntimeRelease, PendingTimersAreReleasedAtShutdownOnTheShutdownThread) {
    constexpr int kN = 20;
    std::atomic<int> released{0}, bad{0}, runs{0};
    std::atomic<bool> never{true};  // run_finished is irrelevant here: they never run
    std::vector<std::atomic<std::thread::id>> where(kN);
    tw::Runtime rt(small_config());
    for (int i = 0; i < kN; ++i) {
        tw::StartOptions o;
        o.delay = 30s + std::chrono::milliseconds(i);
        o.period = (i % 2) ? Duration(1s) : Duration(0);
        o.shard = i;
        rt.start(o, [&runs, h = OrderedRelease(&released, &never, &bad, &where[static_cast<std::size_t>(i)])] {
            runs.fetch_add(1);
        });
    }
    rt.shutdown();
    EXPECT_EQ(released.load(), kN);
    EXPECT_EQ(runs.load(), 0);
    for (auto& w : where) EXPECT_EQ(w.load(), std::this_thread::get_id());
    EXPECT_EQ(rt.stats().cancelled_at_shutdown, static_cast<std::uint64_t>(kN));
}

TEST(RuntimeRelease, DestructorReleasesPendingTimers) {
    std::atomic<int> released{0}, runs{0};
    {
        tw::Runtime rt(small_config());
        for (int i = 0; i < 10; ++i) rt.start(30s, [&runs, p = Probe(&released)] { runs.fetch_add(1); });
        rt.start_periodic(20s, [&runs, p = Probe(&released)] { runs.fetch_add(1); });
    }
    EXPECT_EQ(released.load(), 11);
    EXPECT_EQ(runs.load(), 0);
}

// =============================================================================
// stop_sync
// =============================================================================

TEST(RuntimeStopSync, WaitsForARunningOneShotCallback) {
    std::atomic<bool> started{false}, done{false};
    std::atomic<int> released{0};
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start(1ms, [&, p = Probe(&released)] {
        started.store(true);
        std::this_thread::sleep_for(100ms);
        done.store(true);  // the very end of the callback
    });
    ASSERT_TRUE(wait_until([&] { return started.load(); }));
    EXPECT_FALSE(rt.stop_sync(t)) << "the one-shot already runs: nothing to prevent";
    EXPECT_TRUE(done.load()) << "stop_sync returned while the callback was still running";
    EXPECT_EQ(released.load(), 1) << "stop_sync also waits for the release after the last run";
}

TEST(RuntimeStopSync, WaitsForARunningPeriodicCallbackAndReturnsTrue) {
    std::atomic<bool> started{false}, done{false};
    std::atomic<int> released{0}, runs{0};
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start_periodic(10ms, [&, p = Probe(&released)] {
        runs.fetch_add(1);
        started.store(true);
        std::this_thread::sleep_for(100ms);
        done.store(true);
    });
    ASSERT_TRUE(wait_until([&] { return started.load(); }));
    EXPECT_TRUE(rt.stop_sync(t));
    EXPECT_TRUE(done.load()) << "stop_sync returned while the callback was still running";
    EXPECT_EQ(released.load(), 1);
    const int n = runs.load();
    EXPECT_GE(n, 1);
    // Observation window of several periods: no further run.
    std::this_thread::sleep_for(60ms);
    EXPECT_EQ(runs.load(), n);
    EXPECT_FALSE(rt.stop_sync(t));
}

TEST(RuntimeStopSync, TrueForPendingFalseForFiredStaleAndZero) {
    Track a, b;
    tw::Runtime rt(small_config());
    const tw::Timer pending = rt.start(30s, recorder(a, Clock::now() + 30s));
    EXPECT_TRUE(rt.stop_sync(pending));
    EXPECT_EQ(a.released.load(), 1);
    EXPECT_FALSE(rt.stop_sync(pending));
    const tw::Timer fired = rt.start(1ms, recorder(b, Clock::now() + 1ms));
    ASSERT_TRUE(wait_released(b));
    EXPECT_FALSE(rt.stop_sync(fired));
    EXPECT_FALSE(rt.stop_sync(0));
    EXPECT_EQ(a.runs.load(), 0);
    EXPECT_EQ(rt.stats().stopped, 1u);
}

TEST(RuntimeStopSync, FromItsOwnOneShotCallbackDoesNotDeadlock) {
    std::atomic<int> result{-1}, released{0};
    std::atomic<bool> done{false};
    tw::Runtime rt(small_config());
    rt.start(1ms, [&, p = Probe(&released)](tw::Timer self) {
        result.store(self.stop_sync() ? 1 : 0);
        done.store(true);
    });
    ASSERT_TRUE(wait_until([&] { return done.load(); })) << "stop_sync on itself deadlocked";
    EXPECT_EQ(result.load(), 0) << "a running one-shot cannot be prevented";
    ASSERT_TRUE(wait_until([&] { return released.load() == 1; }));
}

TEST(RuntimeStopSync, FromItsOwnPeriodicCallbackStopsIt) {
    std::atomic<int> result{-1}, released{0}, runs{0}, after{0};
    std::atomic<bool> returned{false};
    tw::Runtime rt(small_config());
    rt.start_periodic(5ms, [&, p = Probe(&released)](tw::Timer self) {
        if (returned.load()) after.fetch_add(1);
        if (runs.fetch_add(1) + 1 == 3) {
            result.store(self.runtime()->stop_sync(self.id()) ? 1 : 0);
            returned.store(true);
        }
    });
    ASSERT_TRUE(wait_until([&] { return released.load() == 1; })) << "stop_sync on itself deadlocked or failed";
    EXPECT_EQ(result.load(), 1);
    std::this_thread::sleep_for(30ms);  // observation window: six periods
    EXPECT_EQ(runs.load(), 3);
    EXPECT_EQ(after.load(), 0);
}

struct SlowRelease {
    std::atomic<bool>* done;
    bool live = true;
    explicit SlowRelease(std::atomic<bool>* d) : done(d) {}
    SlowRelease(SlowRelease&& o) noexcept : done(o.done), live(std::exchange(o.live, false)) {}
    SlowRelease& operator=(SlowRelease&&) = delete;
    ~SlowRelease() {
        if (!live) return;
        std::this_thread::sleep_for(100ms);
        done->store(true);
    }
};

TEST(RuntimeStopSync, WaitsForTheReleaseHookAfterTheLastRun) {
    std::atomic<bool> ran{false}, released{false};
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start(1ms, [&ran, h = SlowRelease(&released)] { ran.store(true); });
    ASSERT_TRUE(wait_until([&] { return ran.load(); }));
    EXPECT_FALSE(rt.stop_sync(t));
    EXPECT_TRUE(released.load()) << "stop_sync returned while the callable's destructor was running";
}

// Two one-shots due together on one worker run from one drain task, one
// after the other. stop_sync on the first, called while it runs, must return
// when it (and its release) is done, not when the second, which blocks,
// returns: the worker wakes stop_sync waiters at once, not at the end of
// its batch. (If the machine is so slow that the first has finished before
// stop_sync is called, stop_sync returns at once and the test still holds.)
TEST(RuntimeStopSync, ReturnsWithoutWaitingForTheNextCallbackOfTheBatch) {
    std::atomic<int> order{0};
    std::atomic<std::uint64_t> first{0};
    std::atomic<bool> let_go{false};
    tw::Runtime rt(small_config(1, 1));
    const TimePoint due = Clock::now() + 5ms;
    for (int i = 0; i < 2; ++i) {
        rt.start_at(due, [&](tw::Timer self) {
            if (order.fetch_add(1) == 0) {
                first.store(self.id());
                std::this_thread::sleep_for(100ms);  // stop_sync(first) waits meanwhile
            } else {
                (void)wait_until([&] { return let_go.load(); }, 10s);  // blocks until the test ends
            }
        });
    }
    ASSERT_TRUE(wait_until([&] { return first.load() != 0; }));
    const auto t0 = Clock::now();
    EXPECT_FALSE(rt.stop_sync(first.load()));
    const auto waited = Clock::now() - t0;
    let_go.store(true);
    EXPECT_LT(waited, 5s) << "stop_sync waited for the next callback of the batch";
}

TEST(RuntimeStopSync, NoPeriodicRunStartsAfterItReturns) {
    tw::Runtime rt(small_config());
    const int rounds = kSanitized ? 6 : 15;
    for (int r = 0; r < rounds; ++r) {
        std::atomic<int> runs{0}, after{0}, released{0};
        std::atomic<bool> returned{false};
        const tw::Timer t = rt.start_periodic(1ms, [&, p = Probe(&released)] {
            if (returned.load()) after.fetch_add(1);
            runs.fetch_add(1);
            if (r % 3 == 0) std::this_thread::sleep_for(200us);
        });
        ASSERT_TRUE(wait_until([&] { return runs.load() >= 3 + r % 4; }));
        EXPECT_TRUE(rt.stop_sync(t));
        returned.store(true);
        EXPECT_EQ(released.load(), 1);
        const int n = runs.load();
        std::this_thread::sleep_for(10ms);  // observation window: ten periods
        EXPECT_EQ(runs.load(), n) << "round " << r;
        EXPECT_EQ(after.load(), 0) << "round " << r;
    }
}

// =============================================================================
// reset
// =============================================================================

TEST(RuntimeReset, LaterFiresAtTheNewTimeNotTheOld) {
    Track tr;
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start(100ms, recorder(tr, Clock::now() + 100ms));
    const TimePoint tr0 = Clock::now();
    ASSERT_TRUE(rt.reset(t, 300ms));
    const TimePoint new_deadline = tr0 + 300ms;
    ASSERT_TRUE(wait_released(tr));
    EXPECT_EQ(tr.runs.load(), 1);
    EXPECT_GE(tr.run_time(0), new_deadline) << "fired "
                                            << ms_of(new_deadline - tr.run_time(0)) << " ms before the new deadline";
    EXPECT_LE(tr.run_time(0) - new_deadline, kLate);
    EXPECT_EQ(rt.stats().reset, 1u);
}

TEST(RuntimeReset, EarlierFiresAtTheNewTime) {
    Track tr;
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start(10s, recorder(tr, Clock::now() + 10s));
    const TimePoint tr0 = Clock::now();
    ASSERT_TRUE(rt.reset(t, 10ms));
    ASSERT_TRUE(wait_released(tr));
    EXPECT_EQ(tr.runs.load(), 1);
    EXPECT_GE(tr.run_time(0), tr0 + 10ms);
    EXPECT_LE(tr.run_time(0) - (tr0 + 10ms), kLate) << "the earlier deadline was not honoured";
}

TEST(RuntimeReset, SeveralResetsFireOnceAtTheLastDeadline) {
    Track tr;
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start(200ms, recorder(tr, Clock::now() + 200ms));
    TimePoint last{};
    for (Duration d : {Duration(300ms), Duration(400ms), Duration(200ms), Duration(5s), Duration(60ms)}) {
        last = Clock::now() + d;
        ASSERT_TRUE(rt.reset(t, d));
    }
    ASSERT_TRUE(wait_released(tr));
    EXPECT_EQ(tr.runs.load(), 1);
    EXPECT_GE(tr.run_time(0), last);
    EXPECT_LE(tr.run_time(0) - last, kLate);
    EXPECT_EQ(rt.stats().reset, 5u);
}

TEST(RuntimeReset, FalseAfterFireAfterStopForStaleAndZero) {
    Track a, b;
    tw::Runtime rt(small_config());
    const tw::Timer fired = rt.start(1ms, recorder(a, Clock::now() + 1ms));
    ASSERT_TRUE(wait_released(a));
    EXPECT_FALSE(rt.reset(fired, 10ms));
    EXPECT_FALSE(fired.runtime()->reset(fired.id(), 0ns));
    const tw::Timer stopped = rt.start(10s, recorder(b, Clock::now() + 10s));
    ASSERT_TRUE(rt.stop(stopped));
    EXPECT_FALSE(rt.reset(stopped, 1ms));
    EXPECT_FALSE(rt.reset(0, 1ms));
    std::error_code ec = code(tw::errc::no_memory);
    EXPECT_FALSE(rt.reset(stopped.id(), 1ms, ec));
    EXPECT_FALSE(ec) << "not found is a false return, not an error: " << ec.message();
    EXPECT_EQ(rt.stats().reset, 0u);
    EXPECT_EQ(a.runs.load(), 1);
    EXPECT_EQ(b.runs.load(), 0);
}

TEST(RuntimeReset, FromItsOwnOneShotCallbackRearmsIt) {
    std::atomic<int> runs{0}, released{0}, reset_ok{-1}, early{0}, after{0};
    std::atomic<std::int64_t> rearm_deadline{0};
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start(2ms, [&, p = Probe(&released)](tw::Timer self) {
        if (released.load() != 0) after.fetch_add(1);
        const int n = runs.fetch_add(1) + 1;
        if (n == 1) {
            const TimePoint before = Clock::now();
            rearm_deadline.store((before + 20ms).time_since_epoch().count());
            reset_ok.store(self.reset(20ms) ? 1 : 0);
        } else if (Clock::now().time_since_epoch().count() < rearm_deadline.load()) {
            early.fetch_add(1);
        }
    });
    ASSERT_TRUE(wait_until([&] { return released.load() == 1; }));
    EXPECT_EQ(reset_ok.load(), 1);
    EXPECT_EQ(runs.load(), 2) << "the re-armed one-shot must run exactly once more";
    EXPECT_EQ(early.load(), 0);
    EXPECT_EQ(after.load(), 0);
    EXPECT_FALSE(rt.stop(t));
    EXPECT_EQ(rt.stats().reset, 1u);
}

TEST(RuntimeReset, ResetMovesAPeriodicTimersNextRun) {
    Track tr;
    tw::Runtime rt(small_config());
    const TimePoint t0 = Clock::now();
    const tw::Timer t = rt.start_periodic(100ms, recorder(tr, t0 + 100ms));
    const TimePoint tr0 = Clock::now();
    ASSERT_TRUE(rt.reset(t, 250ms));
    ASSERT_TRUE(wait_until([&] { return tr.runs.load() >= 2; }));
    EXPECT_TRUE(rt.stop_sync(t));
    const auto times = tr.run_times();
    ASSERT_GE(times.size(), 2u);
    EXPECT_GE(times[0], tr0 + 250ms) << "ran at the old deadline, "
                                     << ms_of(times[0] - t0) << " ms after start";
    for (std::size_t k = 1; k < times.size(); ++k)
        EXPECT_GE(times[k], tr0 + 250ms + 100ms * static_cast<long>(k)) << "run " << k;
}

TEST(RuntimeReset, ResetEarlierOfALongPeriodicTimer) {
    Track tr;
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start_periodic(10s, recorder(tr, Clock::now() + 10s));
    const TimePoint tr0 = Clock::now();
    ASSERT_TRUE(rt.reset(t, 10ms));
    ASSERT_TRUE(wait_until([&] { return tr.runs.load() >= 1; }));
    EXPECT_GE(tr.run_time(0), tr0 + 10ms);
    EXPECT_LE(tr.run_time(0) - (tr0 + 10ms), kLate);
    EXPECT_TRUE(rt.stop_sync(t));
    EXPECT_EQ(tr.runs.load(), 1);
}

TEST(RuntimeReset, FromItsOwnPeriodicCallbackMovesTheNextRun) {
    std::atomic<int> runs{0}, released{0}, ok{-1}, early{0};
    std::atomic<std::int64_t> next_not_before{0};
    std::atomic<std::int64_t> second_run{0};
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start_periodic(10ms, [&, p = Probe(&released)](tw::Timer self) {
        const TimePoint now = Clock::now();
        const int n = runs.fetch_add(1) + 1;
        if (n == 2) {
            second_run.store(now.time_since_epoch().count());
            if (now.time_since_epoch().count() < next_not_before.load()) early.fetch_add(1);
        }
        if (n == 1) {
            next_not_before.store((Clock::now() + 120ms).time_since_epoch().count());
            ok.store(self.reset(120ms) ? 1 : 0);
        }
    });
    ASSERT_TRUE(wait_until([&] { return runs.load() >= 2; }));
    EXPECT_TRUE(rt.stop_sync(t));
    EXPECT_EQ(ok.load(), 1);
    EXPECT_EQ(early.load(), 0) << "second run "
                               << (next_not_before.load() - second_run.load()) / 1000000 << " ms early";
}

TEST(RuntimeReset, InvalidDelayThrowsAndLeavesTheTimerPending) {
    Track tr;
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start(30s, recorder(tr, Clock::now() + 30s));
    expect_error([&] { rt.reset(t, -1ns); }, tw::errc::invalid_argument, "reset(-1ns)");
    expect_error([&] { rt.reset(t.id(), tw::kMaxDelay + 1ns); }, tw::errc::invalid_argument, "reset(> kMaxDelay)");
    expect_error([&] { t.runtime()->reset(t, -1h); }, tw::errc::invalid_argument, "reset(-1h) via Timer");
    std::error_code ec;
    EXPECT_FALSE(rt.reset(t.id(), -1ms, ec));
    EXPECT_EQ(ec, code(tw::errc::invalid_argument));
    EXPECT_TRUE(rt.reset(t.id(), tw::kMaxDelay, ec)) << "kMaxDelay itself is valid";
    EXPECT_FALSE(ec);
    EXPECT_EQ(tr.released.load(), 0);
    EXPECT_TRUE(rt.stop(t));
    EXPECT_EQ(tr.runs.load(), 0);
    EXPECT_EQ(rt.stats().reset, 1u);
}

// =============================================================================
// periodic
// =============================================================================

// The run count of a fixed-rate timer, against the number of periods
// elapsed as read from the runtime's own clock (Clock::now()) at each run --
// not against a wall-clock window, whose run count depends on how busy the
// machine is. Run k (0-based) is the run of some period j >= k (one run per
// period at most: skipped periods are skipped, never run twice or in a
// burst), due at first + j*P >= t0 + (k+1)*P (the first deadline is t0 + P
// or later; P = 10 ms is a whole number of 1 ms ticks), and never starts
// early. So when run k starts, at least k+1 periods have elapsed since t0:
// the runs so far never outnumber the periods elapsed. Exact, at any load.
// That the timer keeps running is the bounded wait for kRuns runs (reached
// only on failure).
TEST(RuntimePeriodic, RunCountOverAWindowIsPlausible) {
    constexpr Duration kP = 10ms;
    constexpr int kRuns = 20;
    Track tr;
    tw::Runtime rt(small_config());
    const TimePoint t0 = Clock::now();
    const tw::Timer t = rt.start_periodic(kP, recorder(tr, t0 + kP));
    ASSERT_TRUE(wait_until([&] { return tr.runs.load() >= kRuns; }))
        << "only " << tr.runs.load() << " runs in " << ms_of(kWait) << " ms";
    EXPECT_TRUE(rt.stop_sync(t));
    const TimePoint t1 = Clock::now();
    const auto times = tr.run_times();
    ASSERT_EQ(static_cast<int>(times.size()), tr.runs.load());
    for (std::size_t k = 0; k < times.size(); ++k) {
        const auto elapsed = (times[k] - t0) / kP;  // whole periods elapsed when run k started
        EXPECT_GE(elapsed, static_cast<long>(k + 1))
            << "run " << k << " started when " << elapsed << " periods had elapsed: early, or two runs for one period";
    }
    EXPECT_LE(static_cast<long>(times.size()), (t1 - t0) / kP) << "more runs than periods elapsed";
    EXPECT_EQ(tr.early.load(), 0);
    EXPECT_EQ(tr.max_in_cb.load(), 1);
}

TEST(RuntimePeriodic, FixedRateRunsNeverStartBeforeStartPlusKPeriods) {
    Track tr;
    tw::Runtime rt(small_config());
    const TimePoint t0 = Clock::now();
    // The callback takes 4 ms of each 15 ms period: fixed rate, not fixed delay.
    const tw::Timer t = rt.start_periodic(15ms, recorder(tr, t0 + 15ms, 4ms));
    ASSERT_TRUE(wait_until([&] { return tr.runs.load() >= 12; }));
    EXPECT_TRUE(rt.stop_sync(t));
    const auto times = tr.run_times();
    for (std::size_t k = 0; k < times.size(); ++k)
        EXPECT_GE(times[k], t0 + 15ms * static_cast<long>(k + 1)) << "run " << k << " early";
    EXPECT_EQ(tr.max_in_cb.load(), 1);
}

// What the contract promises about rounding (runtime.hpp: deadlines and the
// period are rounded UP to the resolution; fixed rate: runs at first +
// k*period), worked out exactly. The ticks are counted from the runtime's
// creation (its epoch), which the API does not expose, so the tick
// boundaries are NOT aligned with t0 (Clock::now() read just before
// start_periodic(P)):
//  * the first deadline is start()'s own reading (>= t0) plus P, rounded up
//    to the next tick boundary: rounding adds anything from 0 to just under
//    one tick. So the first run is bounded by t0 + P, not by t0 + R (R = P
//    rounded up to the tick): that would take the rounding for granted.
//  * every later deadline is the first plus a whole number of periods of R
//    (= ceil(P / res) ticks, at least one), at least one more per run
//    (skipped periods only push later runs later).
// Hence, exactly: run k (0-based) starts at or after t0 + P + k*R.
// The test runs two timers at a 2 ms resolution: P = 1 ns (R = 2 ms: at
// least one tick) and P = 3 ms (R = 4 ms: rounded UP). Were 3 ms rounded
// down (2 ms) or kept (3 ms), run k would be due before t0' + 5 ms + 3k ms
// (t0' read just after start()), below the bound t0 + 3 ms + 4k ms: caught
// by every run that starts less than (k - 2) ms late.
TEST(RuntimePeriodic, PeriodIsRoundedUpToTheResolution) {
    constexpr Duration kRes = 2ms;
    tw::Config c = small_config();
    c.resolution = kRes;
    tw::Runtime rt(c);
    ASSERT_EQ(rt.resolution(), kRes);
    struct Case {
        Duration period;
        Duration rounded;
    };
    for (const Case cs : {Case{1ns, 2ms}, Case{3ms, 4ms}}) {
        SCOPED_TRACE("period " + std::to_string(cs.period.count()) + " ns");
        Track tr;
        const TimePoint t0 = Clock::now();
        const tw::Timer t = rt.start_periodic(cs.period, recorder(tr, t0 + cs.period));
        ASSERT_TRUE(wait_until([&] { return tr.runs.load() >= 10; }));
        EXPECT_TRUE(rt.stop_sync(t));
        const TimePoint t1 = Clock::now();
        const auto times = tr.run_times();
        for (std::size_t k = 0; k < times.size(); ++k) {
            const TimePoint bound = t0 + cs.period + cs.rounded * static_cast<long>(k);
            EXPECT_GE(times[k], bound) << "run " << k << " started " << (bound - times[k]).count()
                                       << " ns before t0 + P + k * rounded period";
        }
        // The same bound as a count: no more runs than deadlines up to t1.
        EXPECT_LE(static_cast<long>(times.size()), (t1 - t0 - cs.period) / cs.rounded + 1);
        EXPECT_EQ(tr.early.load(), 0);
    }
}

TEST(RuntimePeriodic, RunsNeverOverlap) {
    Track tr;
    Track tr2;
    tw::Runtime rt(small_config());
    // Each run takes longer than the period; two workers are free to overlap them.
    const tw::Timer t = rt.start_periodic(5ms, recorder(tr, Clock::now() + 5ms, 12ms));
    const tw::Timer t2 = rt.start_periodic(1ms, recorder(tr2, Clock::now() + 1ms, 3ms));
    ASSERT_TRUE(wait_until([&] { return tr.runs.load() >= 8 && tr2.runs.load() >= 20; }));
    EXPECT_TRUE(rt.stop_sync(t));
    EXPECT_TRUE(rt.stop_sync(t2));
    EXPECT_EQ(tr.max_in_cb.load(), 1);
    EXPECT_EQ(tr2.max_in_cb.load(), 1);
}

TEST(RuntimePeriodic, OverrunSkipsPeriodsInsteadOfBursting) {
    Track tr;
    std::atomic<int> runs{0};
    std::atomic<std::int64_t> first_end{0};
    std::mutex mu;
    std::vector<TimePoint> starts;
    tw::Runtime rt(small_config());
    // Every run takes 35 ms of a 10 ms period: ~3 periods skipped per run.
    const TimePoint t0 = Clock::now();
    const tw::Timer t = rt.start_periodic(10ms, recorder(tr, t0 + 10ms, 35ms));
    std::this_thread::sleep_for(300ms);  // the measurement window
    EXPECT_TRUE(rt.stop_sync(t));
    EXPECT_LE(tr.runs.load(), 12);
    EXPECT_GE(tr.runs.load(), 2);
    EXPECT_EQ(tr.max_in_cb.load(), 1);

    // Only the first run overruns (by ~6 periods). After it ends, skipped
    // periods must not be run back to back: at most the run of the next due
    // period (and, on a late shard, one late one) start within one period.
    constexpr Duration kP = 10ms;
    const tw::Timer u = rt.start_periodic(kP, [&] {
        const TimePoint now = Clock::now();
        {
            std::lock_guard<std::mutex> lk(mu);
            starts.push_back(now);
        }
        if (runs.fetch_add(1) == 0) {
            std::this_thread::sleep_for(65ms);
            first_end.store(Clock::now().time_since_epoch().count());
        }
    });
    ASSERT_TRUE(wait_until([&] { return runs.load() >= 6; }));
    EXPECT_TRUE(rt.stop_sync(u));
    const TimePoint end{Duration(first_end.load())};
    int burst = 0;
    std::lock_guard<std::mutex> lk(mu);
    for (std::size_t i = 1; i < starts.size(); ++i)
        if (starts[i] >= end && starts[i] < end + kP) ++burst;
    EXPECT_LE(burst, 2) << "skipped periods were run in a burst after the overrun";
}

// =============================================================================
// callbacks calling the API
// =============================================================================

TEST(RuntimeCallbacks, StartNewTimersFromACallback) {
    Track child;
    std::atomic<std::uint64_t> child_id{0};
    std::atomic<int> parent_released{0};
    std::atomic<std::int64_t> child_deadline{0};
    tw::Runtime rt(small_config());
    // The child's Track needs the deadline read in the callback: carry it via Recorder.
    rt.start(2ms, [&, p = Probe(&parent_released)](tw::Timer self) {
        const TimePoint deadline = Clock::now() + 5ms;
        child_deadline.store(deadline.time_since_epoch().count());
        child_id.store(self.runtime()->start(5ms, recorder(child, deadline)).id());
    });
    ASSERT_TRUE(wait_released(child));
    // The child may fire, and be released, before its parent's callback has
    // stored child_id (the parent's worker can be preempted for longer than
    // 5 ms): the parent's release hook runs after its callback returned.
    ASSERT_TRUE(wait_until([&] { return parent_released.load() == 1; }));
    EXPECT_EQ(child.runs.load(), 1);
    EXPECT_EQ(child.early.load(), 0);
    EXPECT_EQ(child.seen_id.load(), child_id.load());
    EXPECT_EQ(parent_released.load(), 1);
}

struct ChainLink {
    Probe probe;
    std::atomic<int>* reached;
    std::atomic<int>* early;
    TimePoint deadline;
    int depth;
    void operator()(tw::Timer self) {
        if (Clock::now() < deadline) early->fetch_add(1);
        reached->fetch_add(1);
        if (depth > 1) {
            const Duration d = std::chrono::microseconds(500 * (depth % 4));
            const TimePoint next = Clock::now() + d;
            tw::StartOptions o;
            o.delay = d;
            o.shard = depth;  // hop across shards
            self.runtime()->start(o, ChainLink{Probe(probe.counter), reached, early, next, depth - 1});
        }
    }
};

TEST(RuntimeCallbacks, ChainsOfTimersStartingTheNext) {
    constexpr int kDepth = 40;
    std::atomic<int> reached{0}, early{0}, released{0};
    tw::Runtime rt(small_config());
    rt.start(1ms, ChainLink{Probe(&released), &reached, &early, Clock::now() + 1ms, kDepth});
    ASSERT_TRUE(wait_until([&] { return released.load() == kDepth; }));
    EXPECT_EQ(reached.load(), kDepth);
    EXPECT_EQ(early.load(), 0);
}

TEST(RuntimeCallbacks, StopItselfFalseForOneShotTrueForPeriodic) {
    std::atomic<int> one_result{-1}, per_result{-1}, per_runs{0}, released{0}, after{0};
    std::atomic<bool> per_stopped{false};
    tw::Runtime rt(small_config());
    rt.start(1ms, [&, p = Probe(&released)](tw::Timer self) { one_result.store(self.stop() ? 1 : 0); });
    rt.start_periodic(3ms, [&, p = Probe(&released)](tw::Timer self) {
        if (per_stopped.load()) after.fetch_add(1);
        if (per_runs.fetch_add(1) + 1 == 2) {
            per_result.store(self.stop() ? 1 : 0);
            per_stopped.store(true);
        }
    });
    ASSERT_TRUE(wait_until([&] { return released.load() == 2; }));
    EXPECT_EQ(one_result.load(), 0);
    EXPECT_EQ(per_result.load(), 1);
    std::this_thread::sleep_for(20ms);  // observation window
    EXPECT_EQ(per_runs.load(), 2);
    EXPECT_EQ(after.load(), 0);
    EXPECT_EQ(rt.stats().stopped, 1u);
}

TEST(RuntimeCallbacks, ResetThenStopFromItsOwnOneShotCallback) {
    std::atomic<int> runs{0}, released{0}, reset_ok{-1}, stop_ok{-1};
    std::atomic<bool> inside_released{false};
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start(1ms, [&, p = Probe(&released)](tw::Timer self) {
        runs.fetch_add(1);
        reset_ok.store(self.reset(5ms) ? 1 : 0);
        stop_ok.store(self.stop() ? 1 : 0);  // prevents the re-armed run
        inside_released.store(released.load() != 0);
    });
    ASSERT_TRUE(wait_until([&] { return released.load() == 1; }));
    EXPECT_EQ(reset_ok.load(), 1);
    EXPECT_EQ(stop_ok.load(), 1);
    EXPECT_FALSE(inside_released.load()) << "released while the run was still in progress";
    std::this_thread::sleep_for(20ms);  // observation window past the re-armed deadline
    EXPECT_EQ(runs.load(), 1);
    EXPECT_FALSE(rt.stop(t));
}

TEST(RuntimeCallbacks, ResetAndStopSiblings) {
    Track to_reset, to_stop;
    std::atomic<int> reset_ok{-1}, stop_ok{-1}, stop_released_inside{-1};
    std::atomic<std::int64_t> new_deadline{0};
    std::atomic<int> released{0};
    tw::Runtime rt(small_config());
    const tw::Timer b = rt.start(10s, recorder(to_reset, Clock::now() + 10s));
    const tw::Timer c = rt.start(10s, recorder(to_stop, Clock::now() + 10s));
    rt.start(2ms, [&, p = Probe(&released)](tw::Timer self) {
        new_deadline.store((Clock::now() + 20ms).time_since_epoch().count());
        reset_ok.store(self.runtime()->reset(b, 20ms) ? 1 : 0);
        stop_ok.store(self.runtime()->stop(c) ? 1 : 0);
        stop_released_inside.store(to_stop.released.load());
    });
    ASSERT_TRUE(wait_released(to_reset));
    EXPECT_EQ(reset_ok.load(), 1);
    EXPECT_EQ(stop_ok.load(), 1);
    EXPECT_EQ(stop_released_inside.load(), 1);
    EXPECT_EQ(to_reset.runs.load(), 1);
    EXPECT_GE(to_reset.run_time(0).time_since_epoch().count(), new_deadline.load());
    EXPECT_EQ(to_stop.runs.load(), 0);
    EXPECT_EQ(to_stop.released.load(), 1);
}

TEST(RuntimeCallbacks, StopSyncAnotherTimerRunningOnTheOtherWorker) {
    std::atomic<bool> b_started{false}, b_done{false};
    std::atomic<int> b_released{0}, b_runs{0};
    std::atomic<int> result{-1};
    std::atomic<bool> done_at_return{false}, a_done{false};
    tw::Runtime rt(small_config(2, 2));
    const tw::Timer b = rt.start_periodic(5ms, [&, p = Probe(&b_released)] {
        b_runs.fetch_add(1);
        b_started.store(true);
        std::this_thread::sleep_for(100ms);
        b_done.store(true);
    });
    ASSERT_TRUE(wait_until([&] { return b_started.load(); }));
    rt.start(0ns, [&](tw::Timer self) {
        result.store(self.runtime()->stop_sync(b) ? 1 : 0);
        done_at_return.store(b_done.load());
        a_done.store(true);
    });
    ASSERT_TRUE(wait_until([&] { return a_done.load(); }));
    EXPECT_EQ(result.load(), 1);
    EXPECT_TRUE(done_at_return.load()) << "stop_sync from a callback returned while the other callback ran";
    EXPECT_EQ(b_released.load(), 1);
    const int n = b_runs.load();
    std::this_thread::sleep_for(30ms);  // observation window: six periods
    EXPECT_EQ(b_runs.load(), n) << "a run started after stop_sync returned";
}

// =============================================================================
// shutdown and destruction
// =============================================================================

TEST(RuntimeShutdown, CancelsPendingTimersReleasesAndCountsThem) {
    constexpr int kN = 25;
    std::atomic<int> released{0}, runs{0};
    tw::Runtime rt(small_config());
    for (int i = 0; i < kN; ++i) {
        if (i % 5 == 0)
            rt.start_periodic(10s, [&runs, p = Probe(&released)] { runs.fetch_add(1); });
        else
            rt.start(10s + std::chrono::milliseconds(i), [&runs, p = Probe(&released)] { runs.fetch_add(1); });
    }
    EXPECT_FALSE(rt.is_shut_down());
    // Filed in the wheels (not just queued), so the sweep finds them there.
    ASSERT_TRUE(wait_until([&] {
        std::size_t pending = 0;
        for (std::size_t p : rt.stats().pending_per_shard) pending += p;
        return pending == kN;
    }));
    rt.shutdown();
    EXPECT_TRUE(rt.is_shut_down());
    EXPECT_EQ(released.load(), kN);
    EXPECT_EQ(runs.load(), 0);
    const tw::Stats st = rt.stats();
    for (std::size_t p : st.pending_per_shard) EXPECT_EQ(p, 0u) << "a cancelled timer still counts as pending";
    EXPECT_EQ(st.cancelled_at_shutdown, static_cast<std::uint64_t>(kN));
    EXPECT_EQ(st.started, static_cast<std::uint64_t>(kN));
    EXPECT_EQ(st.fired, 0u);
    EXPECT_EQ(st.live, 0u);
}

TEST(RuntimeShutdown, WaitsForRunningCallbacks) {
    std::atomic<bool> started{false}, done{false};
    std::atomic<int> released{0};
    tw::Runtime rt(small_config());
    rt.start(1ms, [&, p = Probe(&released)] {
        started.store(true);
        std::this_thread::sleep_for(200ms);
        done.store(true);
    });
    ASSERT_TRUE(wait_until([&] { return started.load(); }));
    rt.shutdown();
    EXPECT_TRUE(done.load()) << "shutdown returned while a callback was running";
    EXPECT_EQ(released.load(), 1);
}

TEST(RuntimeShutdown, StartAfterShutdownFailsAndReleases) {
    std::atomic<int> released{0}, runs{0};
    tw::Runtime rt(small_config());
    rt.shutdown();
    expect_error([&] { rt.start(1ms, [&runs, p = Probe(&released)] { runs.fetch_add(1); }); },
                 tw::errc::shutting_down, "start after shutdown");
    EXPECT_EQ(released.load(), 1);
    expect_error([&] { rt.start_periodic(1ms, [&runs, p = Probe(&released)] { runs.fetch_add(1); }); },
                 tw::errc::shutting_down, "start_periodic after shutdown");
    EXPECT_EQ(released.load(), 2);
    expect_error([&] { rt.start_at(Clock::now(), [&runs, p = Probe(&released)] { runs.fetch_add(1); }); },
                 tw::errc::shutting_down, "start_at after shutdown");
    EXPECT_EQ(released.load(), 3);
    std::error_code ec;
    tw::detail::Callback cb([&runs, p = Probe(&released)] { runs.fetch_add(1); });
    tw::StartOptions o;
    o.delay = 1ms;
    const tw::Timer t = rt.start(o, std::move(cb), ec);
    EXPECT_EQ(ec, code(tw::errc::shutting_down));
    EXPECT_FALSE(t);
    EXPECT_EQ(released.load(), 4);
    EXPECT_EQ(runs.load(), 0);
    EXPECT_EQ(rt.stats().started, 0u);
}

TEST(RuntimeShutdown, StopResetAndStopSyncAfterShutdownReturnFalse) {
    Track a, b;
    tw::Runtime rt(small_config());
    const tw::Timer ta = rt.start(10s, recorder(a, Clock::now() + 10s));
    const tw::Timer tb = rt.start_periodic(10s, recorder(b, Clock::now() + 10s));
    rt.shutdown();
    EXPECT_FALSE(rt.stop(ta));
    EXPECT_FALSE(rt.stop_sync(tb));
    EXPECT_FALSE(ta.runtime()->stop_sync(ta.id()));
    EXPECT_FALSE(rt.reset(ta, 1ms)) << "the throwing reset returns false after shutdown";
    EXPECT_FALSE(tb.runtime()->reset(tb.id(), 1ms));
    std::error_code ec;
    EXPECT_FALSE(rt.reset(ta.id(), 1ms, ec));
    EXPECT_EQ(ec, code(tw::errc::shutting_down));
    EXPECT_EQ(a.released.load(), 1);
    EXPECT_EQ(b.released.load(), 1);
    EXPECT_EQ(rt.stats().stopped, 0u);
    EXPECT_EQ(rt.stats().reset, 0u);
}

TEST(RuntimeShutdown, IsIdempotentAndConcurrentCallersAllWait) {
    std::atomic<bool> started{false}, done{false};
    tw::Runtime rt(small_config());
    rt.start(1ms, [&] {
        started.store(true);
        std::this_thread::sleep_for(200ms);
        done.store(true);
    });
    ASSERT_TRUE(wait_until([&] { return started.load(); }));
    std::atomic<int> returned_early{0};
    std::vector<std::thread> callers;
    for (int i = 0; i < 3; ++i)
        callers.emplace_back([&, i] {
            if (i % 2 == 0) {
                rt.shutdown();
            } else {
                std::error_code ec;
                rt.shutdown(ec);
                if (ec) returned_early.fetch_add(100);
            }
            if (!done.load()) returned_early.fetch_add(1);
        });
    for (auto& th : callers) th.join();
    EXPECT_EQ(returned_early.load(), 0) << "a shutdown() caller returned before the running callback ended";
    EXPECT_TRUE(rt.is_shut_down());
    rt.shutdown();
    std::error_code ec = code(tw::errc::no_memory);
    rt.shutdown(ec);
    EXPECT_FALSE(ec);
}

TEST(RuntimeShutdown, FromACallbackReportsWouldDeadlockAndChangesNothing) {
    std::atomic<int> ec_value{-1}, thrown_value{-1};
    std::atomic<bool> ec_category_ok{false}, done{false}, shut{true};
    Track tr;
    tw::Runtime rt(small_config());
    rt.start(1ms, [&](tw::Timer self) {
        std::error_code ec;
        self.runtime()->shutdown(ec);
        ec_value.store(ec.value());
        ec_category_ok.store(ec == tw::make_error_code(tw::errc::would_deadlock));
        try {
            self.runtime()->shutdown();
        } catch (const tw::Error& e) {
            thrown_value.store(e.code() == tw::make_error_code(tw::errc::would_deadlock) ? 1 : 0);
        } catch (...) {
            thrown_value.store(2);
        }
        shut.store(self.runtime()->is_shut_down());
        done.store(true);
    });
    ASSERT_TRUE(wait_until([&] { return done.load(); })) << "shutdown() from a callback hung";
    EXPECT_TRUE(ec_category_ok.load()) << "ec value " << ec_value.load();
    EXPECT_EQ(thrown_value.load(), 1) << "-1: no exception, 0: wrong code, 2: wrong type";
    EXPECT_FALSE(shut.load());
    EXPECT_FALSE(rt.is_shut_down());
    // The runtime keeps working.
    rt.start(2ms, recorder(tr, Clock::now() + 2ms));
    ASSERT_TRUE(wait_released(tr));
    EXPECT_EQ(tr.runs.load(), 1);
}

TEST(RuntimeShutdown, NoCallbackRunsAfterShutdownReturns) {
    const int n = kSanitized ? 500 : 2000;
    std::atomic<int> one_runs{0}, periodic_runs{0}, released{0}, after{0};
    std::atomic<bool> shut{false};
    tw::Runtime rt(small_config());
    std::mt19937 rng(99);
    int periodic = 0;
    for (int i = 0; i < n; ++i) {
        const auto d = std::chrono::microseconds(rng() % 20000);
        if (i % 10 == 0) {
            ++periodic;
            rt.start_periodic(std::chrono::milliseconds(1 + i % 3), [&, p = Probe(&released)] {
                if (shut.load()) after.fetch_add(1);
                periodic_runs.fetch_add(1);
            });
        } else {
            rt.start(d, [&, p = Probe(&released)] {
                if (shut.load()) after.fetch_add(1);
                one_runs.fetch_add(1);
            });
        }
    }
    std::this_thread::sleep_for(10ms);  // let about half of them come due
    rt.shutdown();
    shut.store(true);
    EXPECT_EQ(released.load(), n);
    std::this_thread::sleep_for(30ms);  // observation window
    EXPECT_EQ(after.load(), 0);
    const tw::Stats st = rt.stats();
    EXPECT_EQ(st.fired, static_cast<std::uint64_t>(one_runs.load() + periodic_runs.load()));
    // Every one-shot either ran or was cancelled; every periodic was cancelled.
    EXPECT_EQ(st.cancelled_at_shutdown, static_cast<std::uint64_t>(n - periodic - one_runs.load() + periodic));
    EXPECT_EQ(st.live, 0u);
}

namespace {
// Whether rt's shutdown has begun: a start is refused with shutting_down
// (the refused callable is released: `released` counts it).
bool refuses_starts(tw::Runtime& rt, std::atomic<int>& released) {
    std::error_code ec;
    tw::StartOptions o;
    o.delay = 30s;
    rt.start(o, tw::detail::Callback([p = Probe(&released)] {}), ec);
    return ec == code(tw::errc::shutting_down);
}
}  // namespace

// Stats::live is "started and not yet released". A periodic timer stopped
// while its run is in progress is released right after that run; if that run
// ends while shutdown() is waiting for callbacks, it is still released.
TEST(RuntimeShutdown, LiveIsZeroAfterShutdownEvenIfAStoppedRunEndsDuringIt) {
    std::atomic<bool> started{false}, go{false};
    std::atomic<int> released{0};
    tw::Runtime rt(small_config());
    const tw::Timer t = rt.start_periodic(5ms, [&, p = Probe(&released)] {
        started.store(true);
        spin_until([&] { return go.load(); });
    });
    ASSERT_TRUE(wait_until([&] { return started.load(); }));
    ASSERT_TRUE(rt.stop(t));
    std::thread closer([&] { rt.shutdown(); });
    // Wait until shutdown has begun (start() is refused) ...
    // (EXPECT, not ASSERT: `closer` must be released and joined whatever happens.)
    EXPECT_TRUE(wait_until([&] { return refuses_starts(rt, released); }));
    // ... and give it time to stop the shard threads (this only makes the
    // interesting interleaving likely; the assertions hold in every one).
    std::this_thread::sleep_for(50ms);
    go.store(true);
    closer.join();
    EXPECT_TRUE(rt.is_shut_down());
    const tw::Stats st = rt.stats();
    EXPECT_EQ(static_cast<std::uint64_t>(released.load()), st.started + 1) << "every callable was released";
    EXPECT_EQ(st.live, 0u) << "Stats::live after shutdown, with every callable released";
}

// As above, through the other door: a stop() that returns true while
// shutdown() waits for a running callback (after the shards stopped).
TEST(RuntimeShutdown, LiveIsZeroAfterShutdownEvenIfAStopLandsDuringIt) {
    std::atomic<bool> started{false}, go{false};
    std::atomic<int> released{0};
    tw::Runtime rt(small_config());
    const tw::Timer pending = rt.start(30s, [p = Probe(&released)] {});
    rt.start(1ms, [&, p = Probe(&released)] {
        started.store(true);
        spin_until([&] { return go.load(); });
    });
    ASSERT_TRUE(wait_until([&] { return started.load(); }));
    std::thread closer([&] { rt.shutdown(); });
    // (EXPECT, not ASSERT: `closer` must be released and joined whatever happens.)
    EXPECT_TRUE(wait_until([&] { return refuses_starts(rt, released); }));
    std::this_thread::sleep_for(50ms);  // see above: makes the interleaving likely
    const bool stopped = rt.stop(pending);
    go.store(true);
    closer.join();
    const tw::Stats st = rt.stats();
    EXPECT_EQ(static_cast<std::uint64_t>(released.load()), st.started + 1) << "every callable was released";
    EXPECT_EQ(st.stopped + st.cancelled_at_shutdown + st.fired, st.started);
    EXPECT_EQ(st.live, 0u) << "Stats::live after shutdown (the racing stop() returned " << stopped << ")";
}

TEST(RuntimeShutdown, DestructorWaitsForARunningCallback) {
    std::atomic<bool> started{false}, done{false};
    std::atomic<int> released{0};
    {
        tw::Runtime rt(small_config());
        rt.start(1ms, [&, p = Probe(&released)] {
            started.store(true);
            std::this_thread::sleep_for(150ms);
            done.store(true);
        });
        ASSERT_TRUE(wait_until([&] { return started.load(); }));
    }
    EXPECT_TRUE(done.load());
    EXPECT_EQ(released.load(), 1);
}

// =============================================================================
// throwing callbacks
// =============================================================================

struct ErrorLog {
    std::mutex mu;
    std::vector<std::pair<std::uint64_t, std::string>> entries;
};

TEST(RuntimeExceptions, CountedAndReportedWithTheTimerId) {
    auto log = std::make_shared<ErrorLog>();
    tw::Config c = small_config();
    c.on_callback_error = [log](std::exception_ptr e, std::uint64_t id) {
        std::string what = "?";
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            what = ex.what();
        } catch (int v) {
            what = "int " + std::to_string(v);
        } catch (...) {
        }
        std::lock_guard<std::mutex> lk(log->mu);
        log->entries.emplace_back(id, what);
    };
    std::atomic<int> released{0}, good_runs{0};
    tw::Runtime rt(c);
    const tw::Timer bad1 = rt.start(1ms, [p = Probe(&released)]() -> void { throw std::runtime_error("boom-1"); });
    const tw::Timer bad2 = rt.start(2ms, [p = Probe(&released)](tw::Timer) -> void { throw 7; });
    for (int i = 0; i < 20; ++i)
        rt.start(std::chrono::milliseconds(i % 5), [&good_runs, p = Probe(&released)] { good_runs.fetch_add(1); });
    ASSERT_TRUE(wait_until([&] { return released.load() == 22; }));
    EXPECT_EQ(good_runs.load(), 20) << "other timers must keep firing";
    ASSERT_TRUE(wait_until([&] { return rt.stats().fired == 22; }));
    EXPECT_EQ(rt.stats().callback_exceptions, 2u);
    std::lock_guard<std::mutex> lk(log->mu);
    ASSERT_EQ(log->entries.size(), 2u);
    std::sort(log->entries.begin(), log->entries.end());
    std::vector<std::pair<std::uint64_t, std::string>> want{{bad1.id(), "boom-1"}, {bad2.id(), "int 7"}};
    std::sort(want.begin(), want.end());
    EXPECT_EQ(log->entries, want);
}

TEST(RuntimeExceptions, ThrowingPeriodicTimerKeepsRunning) {
    std::atomic<int> reported{0};
    tw::Config c = small_config();
    c.on_callback_error = [&reported](std::exception_ptr, std::uint64_t) { reported.fetch_add(1); };
    std::atomic<int> runs{0}, released{0};
    tw::Runtime rt(c);
    const tw::Timer t = rt.start_periodic(3ms, [&runs, p = Probe(&released)] {
        runs.fetch_add(1);
        throw std::logic_error("periodic");
    });
    ASSERT_TRUE(wait_until([&] { return runs.load() >= 5; }));
    EXPECT_TRUE(rt.stop_sync(t));
    EXPECT_EQ(released.load(), 1);
    EXPECT_EQ(reported.load(), runs.load());
    EXPECT_EQ(rt.stats().callback_exceptions, static_cast<std::uint64_t>(runs.load()));
}

TEST(RuntimeExceptions, SwallowedWithoutAHandler) {
    std::atomic<int> released{0};
    Track tr;
    tw::Runtime rt(small_config());
    rt.start(1ms, [p = Probe(&released)]() -> void { throw std::runtime_error("nobody listens"); });
    rt.start(3ms, recorder(tr, Clock::now() + 3ms));
    ASSERT_TRUE(wait_until([&] { return released.load() == 1; }));
    ASSERT_TRUE(wait_released(tr));
    ASSERT_TRUE(wait_until([&] { return rt.stats().callback_exceptions == 1; }));
}

// =============================================================================
// max_timers
// =============================================================================

TEST(RuntimeLimits, MaxTimersRejectsBeyondTheLimitAndRecovers) {
    tw::Config c = small_config();
    c.max_timers = 100;
    std::atomic<int> released{0}, runs{0};
    std::atomic<int> fired_released{0};
    tw::Runtime rt(c);
    auto cb = [&] { return [&runs, p = Probe(&released)] { runs.fetch_add(1); }; };
    std::vector<tw::Timer> timers;
    for (int i = 0; i < 100; ++i) timers.push_back(rt.start(30s, cb()));
    expect_error([&] { rt.start(1ms, cb()); }, tw::errc::limit_reached, "101st start");
    EXPECT_EQ(released.load(), 1);
    std::error_code ec;
    EXPECT_FALSE(rt.start(tw::StartOptions{}, tw::detail::Callback(cb()), ec));
    EXPECT_EQ(ec, code(tw::errc::limit_reached));
    EXPECT_EQ(released.load(), 2);
    expect_error([&] { rt.start_periodic(1ms, cb()); }, tw::errc::limit_reached, "periodic beyond the limit");
    EXPECT_EQ(released.load(), 3);

    // After stopping them, starting works again (allowing the runtime time to recycle).
    for (auto& t : timers) EXPECT_TRUE(rt.stop(t));
    EXPECT_EQ(released.load(), 103);
    timers.clear();
    ASSERT_TRUE(wait_until([&] { return rt.stats().live == 0; }));
    for (int i = 0; i < 100; ++i)
        timers.push_back(rt.start(std::chrono::milliseconds(1 + i % 10), [&runs, p = Probe(&fired_released)] {
            runs.fetch_add(1);
        }));
    // After they fire (and are released), starting works again.
    ASSERT_TRUE(wait_until([&] { return fired_released.load() == 100; }));
    EXPECT_EQ(runs.load(), 100);
    ASSERT_TRUE(wait_until([&] { return rt.stats().live == 0; }));
    for (int i = 0; i < 100; ++i) timers.push_back(rt.start(30s, cb()));
    expect_error([&] { rt.start(1ms, cb()); }, tw::errc::limit_reached, "101st start, second round");
}

TEST(RuntimeLimits, AStoppedTimerNoLongerCountsAgainstTheLimit) {
    // Config::max_timers counts "live timers (started and not yet released)",
    // and stop() returning true released the timer inside the call.
    tw::Config c = small_config();
    c.max_timers = 100;
    std::atomic<int> released{0};
    std::vector<tw::Timer> timers;
    tw::Runtime rt(c);
    for (int i = 0; i < 100; ++i) timers.push_back(rt.start(30s, [p = Probe(&released)] {}));
    ASSERT_TRUE(rt.stop(timers[0]));
    ASSERT_EQ(released.load(), 1);
    EXPECT_EQ(rt.stats().live, 99u) << "Stats::live counts a released timer";
    std::error_code ec;
    tw::StartOptions o;
    o.delay = 30s;
    const tw::Timer t = rt.start(o, tw::detail::Callback([p = Probe(&released)] {}), ec);
    EXPECT_FALSE(ec) << "start() right after a successful stop() failed: " << ec.message();
    EXPECT_TRUE(t);
}

// =============================================================================
// Config
// =============================================================================

TEST(RuntimeConfig, InvalidConfigsThrowInvalidArgument) {
    auto bad = [](auto mutate, const char* what) {
        tw::Config c = small_config();
        mutate(c);
        expect_error([&] { tw::Runtime rt(c); }, tw::errc::invalid_argument, what);
    };
    bad([](tw::Config& c) { c.resolution = Duration::zero(); }, "resolution 0");
    bad([](tw::Config& c) { c.resolution = 999ns; }, "resolution < 1us");
    bad([](tw::Config& c) { c.resolution = -1ms; }, "negative resolution");
    bad([](tw::Config& c) { c.resolution = 1s + 1ns; }, "resolution > 1s");
    bad([](tw::Config& c) { c.resolution = 1h; }, "resolution 1h");
    bad([](tw::Config& c) { c.shards = 257; }, "257 shards");
    bad([](tw::Config& c) { c.shards = 100000; }, "100000 shards");
}

TEST(RuntimeConfig, BoundaryConfigsWork) {
    for (Duration res : {Duration(1us), Duration(1s)}) {
        tw::Config c = small_config();
        c.resolution = res;
        tw::Runtime rt(c);
        EXPECT_EQ(rt.resolution(), res);
    }
    Track tr;
    tw::Config c = small_config(256, 2);
    tw::Runtime rt(c);
    EXPECT_EQ(rt.shard_count(), 256u);
    tw::StartOptions o;
    o.shard = 255;
    o.delay = 2ms;
    const tw::Timer t = rt.start(o, recorder(tr, Clock::now() + 2ms));
    EXPECT_EQ(id_shard(t.id()), 255u);
    ASSERT_TRUE(wait_released(tr));
    EXPECT_EQ(tr.early.load(), 0);
    EXPECT_EQ(tr.seen_id.load(), t.id());
    EXPECT_EQ(rt.stats().pending_per_shard.size(), 256u);
}

TEST(RuntimeConfig, DefaultsFollowTheOnlineCpus) {
    Track tr;
    tw::Runtime rt;
    EXPECT_EQ(rt.shard_count(), online_cpus());
    EXPECT_EQ(rt.worker_count(), online_cpus());
    EXPECT_EQ(rt.resolution(), Duration(1ms));
    tw::Runtime rt2(small_config(3, 5));
    EXPECT_EQ(rt2.shard_count(), 3u);
    EXPECT_EQ(rt2.worker_count(), 5u);
    EXPECT_EQ(rt2.stats().pending_per_shard.size(), 3u);
    EXPECT_EQ(rt2.stats().inbox_per_shard.size(), 3u);
    rt.start(2ms, recorder(tr, Clock::now() + 2ms));
    ASSERT_TRUE(wait_released(tr));
}

TEST(RuntimeConfig, PinnedShardsWork) {
    tw::Config c = small_config(3, 2);
    c.pin_shards = true;
    std::vector<Track> tracks(6);
    tw::Runtime rt(c);
    for (int i = 0; i < 6; ++i) {
        tw::StartOptions o;
        o.shard = i;
        o.delay = std::chrono::milliseconds(i);
        rt.start(o, recorder(tracks[static_cast<std::size_t>(i)], Clock::now() + o.delay));
    }
    for (auto& tr : tracks) {
        ASSERT_TRUE(wait_released(tr));
        EXPECT_EQ(tr.early.load(), 0);
    }
}

// =============================================================================
// stats
// =============================================================================

// Counters are striped by a per-thread lease (src/runtime/counters.hpp):
// more threads alive at once than there are leases share a fallback stripe,
// and leases pass to later threads. Counts stay exact through both, over
// two rounds of threads that exit (so the second round reuses leases).
TEST(RuntimeStats, CountsStayExactWithMoreThreadsThanStripesAndThreadTurnover) {
    constexpr int kThreads = 80;  // > rt::kLeases (64): some use the shared stripe
    const int per_thread = kSanitized ? 50 : 500;
    tw::Runtime rt(small_config());
    std::atomic<int> released{0};
    for (int round = 1; round <= 2; ++round) {
        std::atomic<int> ready{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([&] {
                ready.fetch_add(1);
                while (ready.load() < kThreads) std::this_thread::yield();  // all alive at once
                for (int i = 0; i < per_thread; ++i) {
                    const tw::Timer timer = rt.start(1h, [p = Probe(&released)] {});
                    EXPECT_TRUE(rt.reset(timer, 2h));
                    EXPECT_TRUE(rt.stop(timer));
                }
            });
        for (auto& th : threads) th.join();
        const tw::Stats st = rt.stats();
        const auto n = static_cast<std::uint64_t>(round) * kThreads * static_cast<std::uint64_t>(per_thread);
        EXPECT_EQ(st.started, n) << "round " << round;
        EXPECT_EQ(st.reset, n) << "round " << round;
        EXPECT_EQ(st.stopped, n) << "round " << round;
        EXPECT_EQ(st.live, 0u) << "round " << round;
        EXPECT_EQ(released.load(), static_cast<int>(n)) << "round " << round;
    }
}

TEST(RuntimeStats, CountersMatchWhatTheTestDid) {
    std::atomic<int> far_released{0}, near_released{0}, runs{0};
    std::vector<tw::Timer> far;
    tw::Runtime rt(small_config());
    for (int i = 0; i < 10; ++i) {
        tw::StartOptions o;
        o.delay = 30s;
        o.shard = i < 6 ? 0 : 1;
        far.push_back(rt.start(o, [&runs, p = Probe(&far_released)] { runs.fetch_add(1); }));
    }
    tw::StartOptions po;
    po.delay = 30s;
    po.period = 30s;
    po.shard = 1;
    far.push_back(rt.start(po, [&runs, p = Probe(&far_released)] { runs.fetch_add(1); }));  // index 10
    for (int i = 0; i < 20; ++i)
        rt.start(std::chrono::milliseconds(1 + i % 4), [&runs, p = Probe(&near_released)] { runs.fetch_add(1); });
    // shard 0 loses far[0], far[1]; shard 1 loses far[6] -> {4, 4} pending.
    EXPECT_TRUE(rt.stop(far[0]));
    EXPECT_TRUE(rt.stop_sync(far[1]));
    EXPECT_TRUE(rt.stop(far[6]));
    EXPECT_FALSE(rt.stop(far[6]));
    EXPECT_TRUE(rt.reset(far[2], 40s));
    EXPECT_TRUE(rt.reset(far[7], 20s));
    EXPECT_FALSE(rt.reset(far[0], 1s));
    ASSERT_TRUE(wait_until([&] { return near_released.load() == 20; }));
    ASSERT_TRUE(wait_until([&] {
        const tw::Stats s = rt.stats();
        return s.fired == 20 && s.pending_per_shard == std::vector<std::size_t>{4, 4} && s.live == 8;
    })) << "pending_per_shard/live never settled";
    const tw::Stats st = rt.stats();
    EXPECT_EQ(st.started, 31u);
    EXPECT_EQ(st.fired, 20u);
    EXPECT_EQ(st.stopped, 3u);
    EXPECT_EQ(st.reset, 2u);
    EXPECT_EQ(st.callback_exceptions, 0u);
    EXPECT_EQ(st.cancelled_at_shutdown, 0u);
    EXPECT_EQ(st.lateness_samples, st.fired);
    EXPECT_EQ(sum(st.pending_per_shard), 8u);
    EXPECT_EQ(st.inbox_per_shard.size(), 2u);
    EXPECT_LE(st.lateness_p50, st.lateness_p99);
    EXPECT_LE(st.lateness_p99, st.lateness_p999);
    EXPECT_LE(st.lateness_p999, st.lateness_max);
    EXPECT_LE(st.lateness_max, kLate);
    rt.shutdown();
    const tw::Stats end = rt.stats();
    EXPECT_EQ(end.cancelled_at_shutdown, 8u);
    EXPECT_EQ(end.live, 0u);
    EXPECT_EQ(far_released.load(), 11);
    EXPECT_EQ(runs.load(), 20);
}

// =============================================================================
// blocking callbacks
// =============================================================================

// A callback blocked on one worker must not hold back timers that come due
// meanwhile: they run on the other worker WHILE it is blocked. Proved by
// construction, not by timing: the blocker stays blocked on a gate that the
// test opens only after all kN timers have run. Had they waited for it, they
// could not run at all, and the bounded wait for them fails (the blocker
// gives up on its own only after 3 x kWait, so a failing test still ends).
// However slow the machine, a correct runtime passes.
TEST(RuntimeBlocking, BlockingCallbackDoesNotDelayOtherDueTimers) {
    constexpr int kN = 50;
    Gate unblock;
    std::atomic<bool> blocker_started{false}, blocker_done{false}, blocker_gave_up{false};
    std::atomic<int> runs{0}, while_blocked{0}, early{0};
    std::atomic<std::int64_t> worst_ns{0};
    tw::Runtime rt(small_config(2, 2));
    const OpenOnExit unblock_on_exit{unblock};
    rt.start(1ms, [&] {
        blocker_started.store(true);
        if (!unblock.wait(3 * kWait)) blocker_gave_up.store(true);
        blocker_done.store(true);
    });
    ASSERT_TRUE(wait_until([&] { return blocker_started.load(); }));
    const TimePoint base = Clock::now();
    for (int i = 0; i < kN; ++i) {
        const TimePoint deadline = base + 10ms + std::chrono::microseconds(200 * i);
        rt.start_at(deadline, [&, deadline] {
            const TimePoint now = Clock::now();
            if (!blocker_done.load()) while_blocked.fetch_add(1);
            if (now < deadline) early.fetch_add(1);
            const std::int64_t late = (now - deadline).count();
            std::int64_t w = worst_ns.load();
            while (late > w && !worst_ns.compare_exchange_weak(w, late)) {
            }
            runs.fetch_add(1);
        });
    }
    const bool all_ran = wait_until([&] { return runs.load() == kN; });
    unblock.open();  // only now
    ASSERT_TRUE(all_ran) << "only " << runs.load() << " of " << kN << " due timers ran in " << ms_of(kWait)
                         << " ms while a callback was blocked on the other worker";
    ASSERT_TRUE(wait_until([&] { return blocker_done.load(); }));
    EXPECT_FALSE(blocker_gave_up.load());
    EXPECT_EQ(while_blocked.load(), kN) << "short timers waited for the blocking callback";
    EXPECT_EQ(early.load(), 0);
    EXPECT_LE(Duration(worst_ns.load()), kLate) << "worst lateness " << worst_ns.load() / 1000000 << " ms";
}

// The blocking callback is one of a batch of timers due at the same tick: the
// rest of its batch, and timers due later, must not wait for it while the
// other worker is free. By construction again, whatever the machine's speed:
//  * the batch's first callback (on worker A) holds A until another worker
//    (B) has taken a callback of the same batch: a free worker must pick up
//    the rest of a batch whose callback blocks. That callback, the first on
//    B, is the blocker: it blocks on a gate the test holds;
//  * the test then starts kLater timers, and opens the gate only after they
//    and the rest of the batch have all run -- on A, while B was blocked;
//  * any stall (the batch never spread over two workers, or the rest of it
//    or the later timers queued behind the blocker) makes a bounded wait
//    fail; nothing depends on how fast the second worker wakes up.
TEST(RuntimeBlocking, BlockingCallbackInsideABatchDoesNotStallLaterTimers) {
    constexpr int kBatch = 40;
    constexpr int kLater = 20;
    Gate blocker_in, unblock;
    std::atomic<int> batch_runs{0}, later_runs{0}, later_while_blocked{0};
    std::atomic<std::thread::id> first_thread{};
    std::atomic<bool> blocker_claimed{false}, blocker_done{false}, first_gave_up{false}, blocker_gave_up{false};
    tw::Runtime rt(small_config(1, 2));
    const OpenOnExit unblock_on_exit{unblock};
    const OpenOnExit blocker_in_on_exit{blocker_in};
    const TimePoint due = Clock::now() + 5ms;
    for (int i = 0; i < kBatch; ++i) {
        rt.start_at(due, [&] {
            const std::thread::id me = std::this_thread::get_id();
            std::thread::id none{};
            if (first_thread.compare_exchange_strong(none, me)) {
                // The batch's first callback: hold worker A until worker B
                // has taken a callback of this batch.
                if (!blocker_in.wait(kWait)) first_gave_up.store(true);
            } else if (first_thread.load() != me && !blocker_claimed.exchange(true)) {
                blocker_in.open();
                if (!unblock.wait(3 * kWait)) blocker_gave_up.store(true);
                blocker_done.store(true);
            }
            batch_runs.fetch_add(1);
        });
    }
    ASSERT_TRUE(wait_until([&] { return blocker_in.is_open(); }, kWait + kWait))
        << "no second worker took a callback of the batch while its first callback blocked";
    EXPECT_FALSE(first_gave_up.load());
    const TimePoint base = Clock::now();
    for (int i = 0; i < kLater; ++i)
        rt.start_at(base + 10ms + std::chrono::milliseconds(i), [&] {
            if (!blocker_done.load()) later_while_blocked.fetch_add(1);
            later_runs.fetch_add(1);
        });
    const bool all_ran = wait_until([&] { return later_runs.load() == kLater && batch_runs.load() == kBatch - 1; });
    unblock.open();  // only now
    ASSERT_TRUE(all_ran) << "while one callback of the batch was blocked on worker B, only " << batch_runs.load()
                         << " of the other " << kBatch - 1 << " callbacks of the batch and " << later_runs.load()
                         << " of " << kLater << " later timers ran in " << ms_of(kWait) << " ms";
    ASSERT_TRUE(wait_until([&] { return batch_runs.load() == kBatch; }));
    EXPECT_FALSE(blocker_gave_up.load());
    EXPECT_EQ(later_while_blocked.load(), kLater)
        << kLater - later_while_blocked.load() << " of " << kLater
        << " later timers only ran after the blocking callback returned";
}

}  // namespace
