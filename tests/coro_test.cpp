// SPDX-License-Identifier: MIT OR Apache-2.0
// tickwheel/coro.hpp: the awaitables' contract (exactly once, why, where,
// never inline), with the races forced by parking the arming thread at the
// one step between starting the timer and publishing it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

namespace {
// ---- the hook: parks the arming thread of a wait that asked for it -------
enum class Park { none, until_fired, until_released };
thread_local Park t_park = Park::none;
std::atomic<bool> g_parked{false};
std::atomic<bool> g_release{false};
std::atomic<bool> g_hook_timed_out{false};

void coro_hook(const std::atomic<std::uint32_t>& state) {
    const Park p = t_park;
    t_park = Park::none;
    if (p == Park::none) return;
    g_parked = true;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
        if (p == Park::until_fired && (state.load() & 2u) != 0) return;  // wait_node::kFired
        if (p == Park::until_released && g_release.load()) return;
        if (std::chrono::steady_clock::now() > give_up) {
            g_hook_timed_out = true;
            return;
        }
        std::this_thread::yield();
    }
}
// Parks the thread that has just decided a wake-up (DONE set, not yet
// resumed), once, when armed.
std::atomic<bool> g_park_decided{false};
std::atomic<bool> g_parked_decided{false};
std::atomic<bool> g_release_decided{false};
void decided_hook(const std::atomic<std::uint32_t>&) {
    if (!g_park_decided.exchange(false)) return;
    g_parked_decided = true;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!g_release_decided.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
}
// Parks the arming thread after a VOID publication (T ran first), before it
// arms again, once, when armed. The handshake is relaxed on purpose: it
// must not order the thread that releases it before what the arming thread
// does next (TSan then sees the re-arm's write of id_ race with a setter's
// read, if a setter reads it: issue 32's id_ race).
std::atomic<bool> g_park_repost{false};
std::atomic<bool> g_repost_parked{false};
std::atomic<bool> g_repost_release{false};
[[maybe_unused]] void repost_hook(const std::atomic<std::uint32_t>&) {
    if (!g_park_repost.exchange(false, std::memory_order_relaxed)) return;
    g_repost_parked.store(true, std::memory_order_relaxed);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!g_repost_release.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < give_up)
        std::this_thread::yield();
}
}  // namespace
#define TICKWHEEL_CORO_TEST_HOOK(state) coro_hook(state)
#define TICKWHEEL_CORO_TEST_HOOK_DECIDED(state) decided_hook(state)
#define TICKWHEEL_CORO_TEST_HOOK_REPOST(state) repost_hook(state)
#include "tickwheel/coro.hpp"

using namespace std::chrono_literals;
using tickwheel::wake;

namespace {
thread_local int t_ctx = 0;  // 1 on a thread running a queue for the test
constexpr int kQueueCtx = 1;

struct Probe {
    std::atomic<int> resumed{0};
    std::atomic<bool> done{false};
    wake why{};
    std::thread::id tid;
    int ctx = -1;
    tickwheel::TimePoint at{};
    bool threw = false;
};

void finish(Probe* p, wake w) {
    p->why = w;
    p->tid = std::this_thread::get_id();
    p->ctx = t_ctx;
    p->at = std::chrono::steady_clock::now();
    p->resumed.fetch_add(1);
    p->done.store(true);
}

// Each co_await is a statement of its own (g++ 12 keeps the awaiter of a
// co_await inside an if/while condition on the stack: coroutines.md).
tickwheel::detached sleeper(tickwheel::Runtime* rt, tickwheel::Duration d, tickwheel::resume_on where,
                            std::stop_token st, Probe* p) {
    const wake w = co_await tickwheel::sleep_for(*rt, d, where, std::move(st));
    finish(p, w);
}
tickwheel::detached deadline_sleeper(tickwheel::Runtime* rt, tickwheel::Duration d, tickwheel::Duration limit,
                                     Probe* p) {
    const wake w = co_await tickwheel::with_deadline(*rt, limit, tickwheel::sleep_for(*rt, d));
    finish(p, w);
}
tickwheel::detached event_waiter(tickwheel::Runtime* rt, tickwheel::event* ev, tickwheel::resume_on where,
                                 tickwheel::Duration limit, Probe* p) {
    wake w;
    if (limit > tickwheel::Duration::zero()) {
        w = co_await tickwheel::cancel_after(*rt, limit, ev->wait(*rt, where));
    } else {
        w = co_await ev->wait(*rt, where);
    }
    finish(p, w);
}
tickwheel::detached throwing_waiter(tickwheel::Runtime* rt, tickwheel::event* ev, tickwheel::Duration limit,
                                    Probe* p) {
    try {
        const wake w = co_await tickwheel::cancel_after(*rt, limit, ev->wait(*rt));
        finish(p, w);
    } catch (const tickwheel::Error&) {
        p->threw = true;
        finish(p, wake::shutdown);
    }
}
tickwheel::detached throwing_sleeper(tickwheel::Runtime* rt, tickwheel::resume_on where, Probe* p) {
    try {
        const wake w = co_await tickwheel::sleep_for(*rt, 1ms, where);
        finish(p, w);
    } catch (const tickwheel::Error&) {
        p->threw = true;
        finish(p, wake::shutdown);
    }
}

bool wait_for(const Probe& p, std::chrono::milliseconds limit = 5s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!p.done.load()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(200us);
    }
    return true;
}
bool run_until(tickwheel::Queue& q, const Probe& p, std::chrono::milliseconds limit = 5s) {
    t_ctx = kQueueCtx;
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!p.done.load()) {
        if (std::chrono::steady_clock::now() > end) break;
        q.run(64, 5ms);
    }
    t_ctx = 0;
    return p.done.load();
}
}  // namespace

TEST(Coro, SleepExpiresOnAWorkerNeverEarly) {
    tickwheel::Runtime rt;
    Probe p;
    const auto t0 = std::chrono::steady_clock::now();
    sleeper(&rt, 10ms, tickwheel::on_worker(), {}, &p);
    ASSERT_TRUE(wait_for(p));
    EXPECT_EQ(p.why, wake::expired);
    EXPECT_GE(p.at - t0, 10ms);
    EXPECT_NE(p.tid, std::this_thread::get_id());
    std::this_thread::sleep_for(2ms);
    EXPECT_EQ(p.resumed.load(), 1);
}

TEST(Coro, ZeroSleepIsPostedToTheQueueNotResumedInline) {
    tickwheel::Runtime rt;
    tickwheel::Queue q(rt);
    Probe p;
    sleeper(&rt, 0ns, tickwheel::on_queue(q), {}, &p);
    EXPECT_FALSE(p.done.load()) << "a 0 ns sleep resumed inside the co_await";
    ASSERT_TRUE(run_until(q, p));
    EXPECT_EQ(p.why, wake::expired);
    EXPECT_EQ(p.tid, std::this_thread::get_id());
    EXPECT_EQ(p.ctx, kQueueCtx);
}

namespace {
tickwheel::detached zero_loop(tickwheel::Runtime* rt, tickwheel::Queue* q, std::stop_token st,
                              std::atomic<long>* laps, Probe* p) {
    for (;;) {
        const wake w = co_await tickwheel::sleep_for(*rt, 0ns, tickwheel::on_queue(*q), st);
        if (w != wake::expired) break;
        ++*laps;
    }
    finish(p, wake::stopped);
}
}  // namespace

TEST(Coro, ALoopOfZeroSleepsDoesNotStarveTheQueue) {
    tickwheel::Runtime rt;
    tickwheel::Queue q(rt);
    std::stop_source ss;
    std::atomic<long> laps{0};
    Probe p;
    std::atomic<bool> other{false};
    zero_loop(&rt, &q, ss.get_token(), &laps, &p);
    tickwheel::StartOptions o;
    o.delay = 5ms;
    o.queue = &q;
    rt.start(o, [&] { other = true; });
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (!other.load() && std::chrono::steady_clock::now() < end) q.run(1, 5ms);  // returns between laps
    EXPECT_TRUE(other.load());
    ss.request_stop();
    ASSERT_TRUE(run_until(q, p));
    EXPECT_GE(laps.load(), 1);
}

TEST(Coro, StopBeforeTheCoAwaitResumesOnTheQueueWithStopped) {
    tickwheel::Runtime rt;
    tickwheel::Queue q(rt);
    std::stop_source ss;
    ss.request_stop();
    Probe p;
    sleeper(&rt, 1h, tickwheel::on_queue(q), ss.get_token(), &p);
    EXPECT_FALSE(p.done.load());
    ASSERT_TRUE(run_until(q, p, 2s));
    EXPECT_EQ(p.why, wake::stopped);
    EXPECT_EQ(p.ctx, kQueueCtx);
}

TEST(Coro, StopWhilePendingResumesPromptly) {
    tickwheel::Runtime rt;
    std::stop_source ss;
    Probe p;
    sleeper(&rt, 1h, tickwheel::on_worker(), ss.get_token(), &p);
    std::this_thread::sleep_for(2ms);
    EXPECT_FALSE(p.done.load());
    ss.request_stop();
    ASSERT_TRUE(wait_for(p, 2s));
    EXPECT_EQ(p.why, wake::stopped);
    EXPECT_NE(p.tid, std::this_thread::get_id());
    ss.request_stop();
    std::this_thread::sleep_for(2ms);
    EXPECT_EQ(p.resumed.load(), 1);
}

// chriskohlhoff/asio#878: the expiry is queued, then the wait is cancelled:
// the coroutine must hear "stopped", not "expired".
TEST(Coro, StopWhileDueInTheQueueIsReportedAsStopped) {
    tickwheel::Config c;
    c.manual_clock = true;
    tickwheel::Runtime rt(c);
    tickwheel::Queue q(rt);
    std::stop_source ss;
    Probe p;
    sleeper(&rt, 10ms, tickwheel::on_queue(q), ss.get_token(), &p);
    rt.advance(20ms);
    ASSERT_EQ(q.stats().due, 1u);
    EXPECT_FALSE(p.done.load());
    ss.request_stop();
    t_ctx = kQueueCtx;
    EXPECT_EQ(q.run(16), 1u);
    t_ctx = 0;
    ASSERT_TRUE(p.done.load());
    EXPECT_EQ(p.why, wake::stopped);
    EXPECT_EQ(p.ctx, kQueueCtx);
}

TEST(Coro, StopAfterTheWakeUpChangesNothing) {
    tickwheel::Config c;
    c.manual_clock = true;
    tickwheel::Runtime rt(c);
    std::stop_source ss;
    Probe p;
    sleeper(&rt, 10ms, tickwheel::on_worker(), ss.get_token(), &p);
    rt.advance(10ms);  // resumes inside advance, on this thread
    ASSERT_TRUE(p.done.load());
    ss.request_stop();
    EXPECT_EQ(p.why, wake::expired);
    EXPECT_EQ(p.resumed.load(), 1);
}

TEST(Coro, ManualClockResumesInsideAdvanceAtTheDeadline) {
    tickwheel::Config c;
    c.manual_clock = true;
    tickwheel::Runtime rt(c);
    Probe p;
    sleeper(&rt, 30s, tickwheel::on_worker(), {}, &p);
    rt.advance(29s);
    EXPECT_FALSE(p.done.load());
    rt.advance(1s);
    ASSERT_TRUE(p.done.load());
    EXPECT_EQ(p.why, wake::expired);
    EXPECT_EQ(p.tid, std::this_thread::get_id());
}

TEST(Coro, ShutdownResumesEveryWaiterOnceWithShutdown) {
    auto rt = std::make_unique<tickwheel::Runtime>();
    tickwheel::Queue q(*rt);
    Probe a, b;
    sleeper(rt.get(), 1h, tickwheel::on_worker(), {}, &a);
    sleeper(rt.get(), 1h, tickwheel::on_queue(q), {}, &b);
    rt->shutdown();
    ASSERT_TRUE(a.done.load());
    ASSERT_TRUE(b.done.load());
    EXPECT_EQ(a.why, wake::shutdown);
    EXPECT_EQ(b.why, wake::shutdown);
    EXPECT_EQ(a.tid, std::this_thread::get_id());  // on the thread shutting down
    // A co_await after shutdown resumes at once (inline) with shutdown.
    Probe c;
    sleeper(rt.get(), 1ms, tickwheel::on_worker(), {}, &c);
    ASSERT_TRUE(c.done.load());
    EXPECT_EQ(c.why, wake::shutdown);
    rt.reset();
    EXPECT_EQ(a.resumed.load() + b.resumed.load() + c.resumed.load(), 3);
}

TEST(Coro, ClosingTheQueueResumesItsWaitersWithShutdown) {
    tickwheel::Runtime rt;
    Probe p;
    {
        tickwheel::Queue q(rt);
        sleeper(&rt, 1h, tickwheel::on_queue(q), {}, &p);
    }
    ASSERT_TRUE(p.done.load());
    EXPECT_EQ(p.why, wake::shutdown);
}

TEST(Coro, AQueueOfAnotherRuntimeThrowsIntoTheCoroutine) {
    tickwheel::Runtime rt, other;
    tickwheel::Queue q(other);
    Probe p;
    throwing_sleeper(&rt, tickwheel::on_queue(q), &p);
    ASSERT_TRUE(p.done.load());
    EXPECT_TRUE(p.threw);
}

TEST(Coro, WithDeadlineTimesOutOrLetsTheSleepExpire) {
    tickwheel::Runtime rt;
    Probe a, b;
    const auto t0 = std::chrono::steady_clock::now();
    deadline_sleeper(&rt, 1h, 10ms, &a);
    deadline_sleeper(&rt, 5ms, 1h, &b);
    ASSERT_TRUE(wait_for(a));
    ASSERT_TRUE(wait_for(b));
    EXPECT_EQ(a.why, wake::timed_out);
    EXPECT_GE(a.at - t0, 10ms);
    EXPECT_EQ(b.why, wake::expired);
}

TEST(Coro, EventNotifyWakesTheWaiterOnItsQueue) {
    tickwheel::Runtime rt;
    tickwheel::Queue q(rt);
    tickwheel::event ev;
    Probe p;
    event_waiter(&rt, &ev, tickwheel::on_queue(q), 0ns, &p);
    std::thread([&] { ev.notify(); }).join();
    ASSERT_TRUE(run_until(q, p, 2s));
    EXPECT_EQ(p.why, wake::notified);
    EXPECT_EQ(p.ctx, kQueueCtx);
    EXPECT_FALSE(ev.is_set());

    // Notified before the wait: posted, not inline.
    ev.notify();
    EXPECT_TRUE(ev.is_set());
    Probe p2;
    event_waiter(&rt, &ev, tickwheel::on_queue(q), 0ns, &p2);
    EXPECT_FALSE(p2.done.load());
    ASSERT_TRUE(run_until(q, p2, 2s));
    EXPECT_EQ(p2.why, wake::notified);
}

TEST(Coro, CancelAfterTimesOutAnEventWaitAndKeepsALateNotify) {
    tickwheel::Runtime rt;
    tickwheel::event ev;
    Probe p;
    const auto t0 = std::chrono::steady_clock::now();
    event_waiter(&rt, &ev, tickwheel::on_worker(), 10ms, &p);
    ASSERT_TRUE(wait_for(p));
    EXPECT_EQ(p.why, wake::timed_out);
    EXPECT_GE(p.at - t0, 10ms);
    ev.notify();  // nobody waits: kept
    EXPECT_TRUE(ev.is_set());
}

// capy#233: the timer fires (on another thread) before await_suspend has
// finished arming. The firing thread must not resume (the frame would be
// destroyed under await_suspend's feet); the arming thread re-posts the
// wake-up, which resumes once, on the context asked for.
TEST(Coro, TimerFiringBeforeArmingFinishesIsRepostedNotLostNotDoubled) {
    tickwheel::Runtime rt;
    Probe p;
    g_hook_timed_out = false;
    t_park = Park::until_fired;
    sleeper(&rt, 0ns, tickwheel::on_worker(), {}, &p);
    EXPECT_FALSE(g_hook_timed_out.load());
    ASSERT_TRUE(wait_for(p));
    EXPECT_EQ(p.why, wake::expired);
    EXPECT_NE(p.tid, std::this_thread::get_id());
    std::this_thread::sleep_for(5ms);
    EXPECT_EQ(p.resumed.load(), 1);
}

TEST(Coro, QueueTimerFiringBeforeArmingFinishesIsReposted) {
    tickwheel::Runtime rt;
    tickwheel::Queue q(rt);
    Probe p;
    std::atomic<bool> stop{false};
    std::thread loop([&] {
        t_ctx = kQueueCtx;
        while (!stop.load()) q.run(64, 2ms);
    });
    g_hook_timed_out = false;
    t_park = Park::until_fired;
    sleeper(&rt, 0ns, tickwheel::on_queue(q), {}, &p);
    EXPECT_FALSE(g_hook_timed_out.load());
    ASSERT_TRUE(wait_for(p));
    stop = true;
    loop.join();
    EXPECT_EQ(p.why, wake::expired);
    EXPECT_EQ(p.ctx, kQueueCtx);
    EXPECT_EQ(p.resumed.load(), 1);
}

// A stop requested while the arming thread is between start and publish:
// the stop callback cannot hurry the timer (no id yet); the arming thread
// must see the bit and hurry it itself, or the coroutine sleeps an hour.
TEST(Coro, StopDuringArmingIsNotLost) {
    tickwheel::Runtime rt;
    std::stop_source ss;
    Probe p;
    g_parked = false;
    g_release = false;
    std::thread stopper([&] {
        while (!g_parked.load()) std::this_thread::yield();
        ss.request_stop();
        g_release = true;
    });
    t_park = Park::until_released;
    sleeper(&rt, 1h, tickwheel::on_worker(), ss.get_token(), &p);
    stopper.join();
    ASSERT_TRUE(wait_for(p, 2s)) << "the stop that came during arming was lost";
    EXPECT_EQ(p.why, wake::stopped);
}

// Shutdown cancels the timer (its release hook runs) before the arming
// thread published it: resumed once, with shutdown, inline.
TEST(Coro, ShutdownDuringArmingResumesOnceWithShutdown) {
    tickwheel::Runtime rt;
    Probe p;
    g_parked = false;
    g_hook_timed_out = false;
    std::thread killer([&] {
        while (!g_parked.load()) std::this_thread::yield();
        rt.shutdown();
    });
    t_park = Park::until_fired;
    sleeper(&rt, 1h, tickwheel::on_worker(), {}, &p);
    killer.join();
    EXPECT_FALSE(g_hook_timed_out.load());
    ASSERT_TRUE(p.done.load());
    EXPECT_EQ(p.why, wake::shutdown);
    EXPECT_EQ(p.resumed.load(), 1);
}

// ---- the manual clock: 100,000 coroutines through a simulated hour -------
namespace {
struct HourLog {
    std::vector<std::int64_t> at;   // virtual ns at the resumption
    std::vector<std::uint32_t> who;
    long bad = 0;
    long finished = 0;
};
tickwheel::detached hour_sleeper(tickwheel::Runtime* rt, std::uint32_t idx, std::uint64_t seed, HourLog* log,
                                 tickwheel::Duration end) {
    std::mt19937_64 g(seed * 0x9E3779B97F4A7C15ull + idx);
    for (;;) {
        const auto d = tickwheel::Duration(std::int64_t(g() % (20ull * 60 * 1000)) * 1'000'000);  // ms, < 20 min
        const tickwheel::Duration now = rt->now(tickwheel::TimerClock::monotonic);
        if (now + d > end) break;
        const wake w = co_await tickwheel::sleep_for(*rt, d);
        const tickwheel::Duration t = rt->now(tickwheel::TimerClock::monotonic);
        if (w != wake::expired || t < now + d || t >= now + d + 1ms) ++log->bad;
        log->at.push_back(t.count());
        log->who.push_back(idx);
    }
    ++log->finished;
}
HourLog run_hour(std::uint64_t seed, std::uint32_t n) {
    tickwheel::Config c;
    c.manual_clock = true;
    tickwheel::Runtime rt(c);
    HourLog log;
    log.at.reserve(std::size_t(n) * 4);
    log.who.reserve(std::size_t(n) * 4);
    const tickwheel::Duration t0 = rt.now(tickwheel::TimerClock::monotonic);
    for (std::uint32_t i = 0; i < n; ++i) hour_sleeper(&rt, i, seed, &log, t0 + 1h);
    for (int s = 0; s < 3600; ++s) rt.advance(1s);
    for (auto& t : log.at) t -= t0.count();
    return log;
}
}  // namespace

TEST(Coro, ManualClockDrives100kCoroutinesThroughAnHourInDeadlineOrder) {
    constexpr std::uint32_t kN = 100'000;
    const HourLog a = run_hour(42, kN);
    EXPECT_EQ(a.finished, long(kN));
    EXPECT_EQ(a.bad, 0);
    EXPECT_GT(a.at.size(), std::size_t(kN));
    for (std::size_t i = 1; i < a.at.size(); ++i)
        ASSERT_LE(a.at[i - 1], a.at[i]) << "resumed out of deadline order at " << i;
    const HourLog b = run_hour(42, kN);  // the same seed: the same story
    EXPECT_EQ(a.at, b.at);
    EXPECT_EQ(a.who, b.who);
    const HourLog c = run_hour(43, 1000);
    EXPECT_NE(std::vector<std::int64_t>(a.at.begin(), a.at.begin() + 100),
              std::vector<std::int64_t>(c.at.begin(), c.at.begin() + 100));
}

// A notify is never lost, however it races with the waiter timing out: a
// waiter loops on cancel_after(random 0-200 us, ev.wait()); another thread
// notifies, then waits until the waiter has seen `notified` once more (in
// the wait it raced with, or in the next one, from the kept set state).
namespace {
tickwheel::detached notified_counter(tickwheel::Runtime* rt, tickwheel::event* ev, std::atomic<long>* seen,
                                     std::atomic<bool>* quit, std::atomic<long>* resumed, Probe* p) {
    std::minstd_rand g(7);
    while (!quit->load()) {
        const auto limit = tickwheel::Duration(std::int64_t(g() % 200'000));
        const wake w = co_await tickwheel::cancel_after(*rt, limit, ev->wait(*rt));
        resumed->fetch_add(1);
        if (w == wake::notified) seen->fetch_add(1);
    }
    finish(p, wake::stopped);
}
}  // namespace

TEST(Coro, EventNotifyIsNeverLostWhileRacingTimeouts) {
    tickwheel::Config c;
    c.resolution = 50us;
    tickwheel::Runtime rt(c);
    tickwheel::event ev;
    std::atomic<long> seen{0}, resumed{0};
    std::atomic<bool> quit{false};
    Probe p;
    notified_counter(&rt, &ev, &seen, &quit, &resumed, &p);
    constexpr long kRounds = 1000;
    long lost_at = -1;
    for (long i = 0; i < kRounds && lost_at < 0; ++i) {
        ev.notify();
        const auto end = std::chrono::steady_clock::now() + 5s;
        while (seen.load() < i + 1) {
            if (std::chrono::steady_clock::now() > end) {
                lost_at = i;
                break;
            }
            std::this_thread::yield();
        }
    }
    EXPECT_EQ(lost_at, -1) << "notify number " << lost_at << " was lost";
    EXPECT_EQ(seen.load(), kRounds);
    quit = true;
    ev.notify();
    ASSERT_TRUE(wait_for(p));
    EXPECT_GT(resumed.load(), kRounds);  // timeouts happened in between
}

// The window the test above rarely hits, forced: the wait timed out (DONE
// set) but its coroutine has not resumed and unregistered yet when notify()
// comes. The notify must be kept (the event stays set) for the next wait.
TEST(Coro, NotifyAfterTheTimeoutWasDecidedIsKeptForTheNextWait) {
    tickwheel::Runtime rt;
    tickwheel::event ev;
    Probe p;
    g_parked_decided = false;
    g_release_decided = false;
    g_park_decided = true;
    event_waiter(&rt, &ev, tickwheel::on_worker(), 2ms, &p);
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (!g_parked_decided.load() && std::chrono::steady_clock::now() < end) std::this_thread::yield();
    ASSERT_TRUE(g_parked_decided.load());
    ev.notify();  // the waiter is still registered, its wake-up already decided
    g_release_decided = true;
    ASSERT_TRUE(wait_for(p));
    EXPECT_EQ(p.why, wake::timed_out);
    EXPECT_TRUE(ev.is_set()) << "the notify was lost";
    Probe p2;
    event_waiter(&rt, &ev, tickwheel::on_worker(), 1h, &p2);
    ASSERT_TRUE(wait_for(p2, 2s));
    EXPECT_EQ(p2.why, wake::notified);
}

// ---- issue 32 ------------------------------------------------------------

// c3: an event wait whose timer cannot start (limit_reached) took the
// event's set state before the start; it must give it back when it throws
// (at 069403a the next wait slept until shutdown: the notify was lost).
TEST(CoroEvent, AWaitThatCannotStartGivesTheSetStateBack) {
    tickwheel::Config c;
    c.manual_clock = true;
    c.max_timers = 1;
    tickwheel::Runtime rt(c);
    const tickwheel::Timer blocker = rt.start(1h, [] {});  // the one live timer allowed
    tickwheel::event ev;
    ev.notify();
    ASSERT_TRUE(ev.is_set());
    Probe p;
    throwing_waiter(&rt, &ev, 1h, &p);
    ASSERT_TRUE(p.done.load());
    EXPECT_TRUE(p.threw);
    EXPECT_TRUE(ev.is_set()) << "the wait that threw kept the event's set state: the notify is lost";
    ASSERT_TRUE(rt.stop(blocker));
    Probe p2;
    event_waiter(&rt, &ev, tickwheel::on_worker(), 1h, &p2);
    rt.advance(0ns);
    ASSERT_TRUE(p2.done.load()) << "the next wait was not woken by the kept notify";
    EXPECT_EQ(p2.why, wake::notified);
}

// c4: on a manual runtime whose virtual time is off the tick grid, a stop or
// a notify resumes the coroutine at the very next advance(), even
// advance(0) (at 069403a the hurry was reset(id, 0), rounded up to the next
// tick of the grid: neither advance(0) nor a shorter one got there).
namespace {
struct CoroOffGrid : ::testing::Test {
    CoroOffGrid() : rt(config()) { rt.advance(500us); }  // half a tick: off the 1 ms grid
    static tickwheel::Config config() {
        tickwheel::Config c;
        c.manual_clock = true;
        c.resolution = 1ms;
        return c;
    }
    tickwheel::Runtime rt;
};
}  // namespace

TEST_F(CoroOffGrid, AStopWhilePendingResumesAtAdvanceZero) {
    std::stop_source ss;
    Probe p;
    sleeper(&rt, 1h, tickwheel::on_worker(), ss.get_token(), &p);
    ss.request_stop();
    rt.advance(0ns);
    ASSERT_TRUE(p.done.load()) << "the stop waited for the next tick of the grid";
    EXPECT_EQ(p.why, wake::stopped);
}

TEST_F(CoroOffGrid, AStopBeforeTheCoAwaitResumesAtAShortAdvance) {
    std::stop_source ss;
    ss.request_stop();
    Probe p;
    sleeper(&rt, 1h, tickwheel::on_worker(), ss.get_token(), &p);
    EXPECT_FALSE(p.done.load());  // never inline
    rt.advance(300us);            // still before the next tick
    ASSERT_TRUE(p.done.load()) << "the stop waited for the next tick of the grid";
    EXPECT_EQ(p.why, wake::stopped);
}

TEST_F(CoroOffGrid, ANotifyResumesAtAdvanceZeroAlsoFromTheSetState) {
    tickwheel::event ev;
    Probe p;
    event_waiter(&rt, &ev, tickwheel::on_worker(), 1h, &p);
    ev.notify();
    rt.advance(0ns);
    ASSERT_TRUE(p.done.load()) << "the notify waited for the next tick of the grid";
    EXPECT_EQ(p.why, wake::notified);
    ev.notify();  // nobody waits: set
    Probe p2;
    event_waiter(&rt, &ev, tickwheel::on_worker(), 1h, &p2);
    EXPECT_FALSE(p2.done.load());
    rt.advance(0ns);
    ASSERT_TRUE(p2.done.load());
    EXPECT_EQ(p2.why, wake::notified);
}

TEST_F(CoroOffGrid, AStopOfAQueueWaitIsDeliveredByAdvanceZero) {
    tickwheel::Queue q(rt);
    std::stop_source ss;
    Probe p;
    sleeper(&rt, 1h, tickwheel::on_queue(q), ss.get_token(), &p);
    ss.request_stop();
    rt.advance(0ns);
    EXPECT_EQ(q.stats().due, 1u) << "advance(0) did not deliver the stopped wait to its queue";
    t_ctx = kQueueCtx;
    q.run(16);
    t_ctx = 0;
    ASSERT_TRUE(p.done.load());
    EXPECT_EQ(p.why, wake::stopped);
    EXPECT_EQ(p.ctx, kQueueCtx);
}

// c5: the queue's close() cancels the timer between its start and the
// wait's publication: the coroutine resumes with shutdown, inline (at
// 069403a the re-arm hit the closed queue and threw invalid_argument).
TEST(CoroClose, ACloseWhileTheWaitIsBeingArmedResumesWithShutdown) {
    tickwheel::Runtime rt;
    auto q = std::make_unique<tickwheel::Queue>(rt);
    Probe p;
    g_parked = false;
    g_hook_timed_out = false;
    std::thread closer([&] {
        while (!g_parked.load()) std::this_thread::yield();
        std::error_code ec;
        q->close(ec);  // cancels the timer: its release hook runs here, before the publication
    });
    t_park = Park::until_fired;
    throwing_sleeper(&rt, tickwheel::on_queue(*q), &p);
    closer.join();
    EXPECT_FALSE(g_hook_timed_out.load());
    ASSERT_TRUE(p.done.load());
    EXPECT_FALSE(p.threw) << "the co_await threw (invalid_argument) instead of resuming with shutdown";
    EXPECT_EQ(p.why, wake::shutdown);
    EXPECT_EQ(p.resumed.load(), 1);
}

// The id_ re-arm race: T fired before the publication (a void one); a stop
// comes while the arming thread, parked, has not yet armed again. The stop's
// setter must not read id_ (the arming thread writes the next timer's id
// there, unordered with that read: a data race TSan reports when the setter
// reads); the wait resumes once, stopped, through the re-armed timer.
TEST(CoroRearm, AStopDuringAVoidPublicationNeverReadsTheIdAndIsNotLost) {
    tickwheel::Runtime rt;
    std::stop_source ss;
    Probe p;
    g_hook_timed_out = false;
    g_repost_parked.store(false, std::memory_order_relaxed);
    g_repost_release.store(false, std::memory_order_relaxed);
    g_park_repost.store(true, std::memory_order_relaxed);
    std::thread stopper([&] {
        const auto end = std::chrono::steady_clock::now() + 10s;
        while (!g_repost_parked.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < end)
            std::this_thread::yield();
        ss.request_stop();
        g_repost_release.store(true, std::memory_order_relaxed);
    });
    t_park = Park::until_fired;  // T runs the 0 ns timer on a worker before we publish
    sleeper(&rt, 0ns, tickwheel::on_worker(), ss.get_token(), &p);
    stopper.join();
    EXPECT_FALSE(g_hook_timed_out.load());
    EXPECT_TRUE(g_repost_parked.load());
    ASSERT_TRUE(wait_for(p, 2s));
    EXPECT_EQ(p.why, wake::stopped);
    std::this_thread::sleep_for(5ms);
    EXPECT_EQ(p.resumed.load(), 1);
}

// c2: a steady_clock deadline over a wait on another clock is refused at
// compile time (at 069403a it compiled and the realtime wait took the
// steady nanoseconds as a 1970 wall-clock limit: timed_out after 0 ms). If
// it compiles (the refusal removed), the program runs and must
// report expired after 200 ms, never timed_out at once.
namespace {
template <class R>
constexpr bool kMixedClockDeadlineCompiles = requires(R& rt) {
    tickwheel::with_deadline(rt, tickwheel::TimePoint{},
                             tickwheel::sleep_until(rt, tickwheel::TimerClock::realtime, tickwheel::Duration{}));
};
template <class R>
tickwheel::detached mixed_clock_sleeper(R* rt, Probe* p) {
    if constexpr (kMixedClockDeadlineCompiles<R>) {
        const auto tp = rt->clock_now() + 2s;
        const auto wall = rt->now(tickwheel::TimerClock::realtime) + 200ms;
        const wake w = co_await tickwheel::with_deadline(
            *rt, tp, tickwheel::sleep_until(*rt, tickwheel::TimerClock::realtime, wall));
        finish(p, w);
    } else {
        finish(p, wake::expired);
        co_return;
    }
}
}  // namespace

TEST(CoroClock, ASteadyDeadlineOverAWallClockSleepIsRefusedAtCompileTime) {
    tickwheel::Runtime rt;
    Probe p;
    const auto t0 = std::chrono::steady_clock::now();
    mixed_clock_sleeper(&rt, &p);
    ASSERT_TRUE(wait_for(p, 5s));
    EXPECT_EQ(p.why, wake::expired);
    if (kMixedClockDeadlineCompiles<tickwheel::Runtime>) {
        EXPECT_GE(p.at - t0, 200ms);
    }
    EXPECT_FALSE(kMixedClockDeadlineCompiles<tickwheel::Runtime>)
        << "with_deadline(rt, TimePoint, sleep_until(rt, TimerClock::realtime, ...)) compiles";
}

// The Duration form counts on the inner wait's own clock (here the wall
// clock, on a manual runtime): timed_out once the wall clock passed d.
TEST(CoroClock, ADurationDeadlineCountsOnTheInnerWaitsClock) {
    tickwheel::Config c;
    c.manual_clock = true;
    tickwheel::Runtime rt(c);
    Probe p;
    [](tickwheel::Runtime* r, Probe* pr) -> tickwheel::detached {
        const auto wall = r->now(tickwheel::TimerClock::realtime) + 1h;
        const wake w = co_await tickwheel::with_deadline(
            *r, 10s, tickwheel::sleep_until(*r, tickwheel::TimerClock::realtime, wall));
        finish(pr, w);
    }(&rt, &p);
    rt.advance(9s);
    EXPECT_FALSE(p.done.load());
    rt.advance(1s);
    ASSERT_TRUE(p.done.load());
    EXPECT_EQ(p.why, wake::timed_out);
}
