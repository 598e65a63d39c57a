// SPDX-License-Identifier: MIT OR Apache-2.0
// tickwheel/coro.hpp, issue 32 c1: destroying a coroutine while it waits is
// a supported way to cancel. The frames of these tests come from a
// quarantine: a destroyed frame is not freed but filled with zeros and kept
// until the test ends, which then checks that nothing wrote into it (at
// 069403a the timer's callback set a bit in the dead frame's wait node:
// ASan's heap-use-after-free of the issue). The release hook counts
// (Stats::live) say whether the timer was taken back inside the destructor.
#include <gtest/gtest.h>

// g++ 12 reports the coroutine frames' class-specific operator new/delete
// pair below as mismatched (-Wmismatched-new-delete, a false positive at
// the end of each coroutine; clang has no such warning).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace {
// ---- hooks: park T (the timer's callback) as it enters on_timer ----------
std::atomic<bool> g_park_timer{false};   // armed by a test: the next T parks
std::atomic<bool> g_timer_parked{false};
std::atomic<bool> g_timer_left{false};   // T's hook returned (T then reads the word and returns)
std::atomic<bool> g_gone_seen{false};
[[maybe_unused]] void timer_hook(const std::atomic<std::uint32_t>& state) {
    if (!g_park_timer.exchange(false)) return;
    g_timer_parked = true;
    // Until the destructor has won (GONE, 1 << 5), then a little longer: the
    // destructor must still be waiting for us (stop_sync), not return.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((state.load() & (1u << 5)) == 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    g_timer_left = true;
}
[[maybe_unused]] void gone_hook(const std::atomic<std::uint32_t>&) { g_gone_seen = true; }
}  // namespace
#define TICKWHEEL_CORO_TEST_HOOK_TIMER(state) timer_hook(state)
#define TICKWHEEL_CORO_TEST_HOOK_GONE(state) gone_hook(state)
#include "tickwheel/coro.hpp"

using namespace std::chrono_literals;
using tickwheel::wake;

namespace {
// ---- frames from a quarantine ----------------------------------------------
struct Quarantine {
    std::mutex m;
    std::vector<std::pair<unsigned char*, std::size_t>> dead;
    ~Quarantine() {
        for (auto& d : dead) std::free(d.first);
    }
    // Bytes of destroyed frames written since they were destroyed.
    std::size_t written() {
        std::lock_guard<std::mutex> lk(m);
        std::size_t n = 0;
        for (auto& d : dead)
            for (std::size_t i = 16; i < d.second; ++i) n += d.first[i] != 0;
        return n;
    }
};
Quarantine* g_q = nullptr;

// A task the test owns: eager, suspends at the end (the owner destroys it),
// its frame from the quarantine.
struct task {
    struct promise_type {
        // (The size in a 16-byte header: g++ 12 warns about a sized class
        // operator delete for coroutine frames.)
        static void* operator new(std::size_t n) {
            auto* p = static_cast<unsigned char*>(std::malloc(n + 16));
            if (p == nullptr) throw std::bad_alloc();
            std::memcpy(p, &n, sizeof n);
            return p + 16;
        }
        static void operator delete(void* frame) noexcept {
            auto* p = static_cast<unsigned char*>(frame) - 16;
            std::size_t n = 0;
            std::memcpy(&n, p, sizeof n);
            std::memset(frame, 0, n);
            std::lock_guard<std::mutex> lk(g_q->m);
            g_q->dead.emplace_back(p, n + 16);
        }
        task get_return_object() noexcept { return task{std::coroutine_handle<promise_type>::from_promise(*this)}; }
        std::suspend_never initial_suspend() noexcept { return {}; }
        std::suspend_always final_suspend() noexcept { return {}; }
        void return_void() noexcept {}
        [[noreturn]] void unhandled_exception() noexcept { std::terminate(); }
    };
    std::coroutine_handle<promise_type> h;
};

struct Seen {
    std::atomic<int> resumed{0};
    std::atomic<bool> done{false};
    wake why{};
    bool threw = false;
};

task sleeper(tickwheel::Runtime* rt, tickwheel::Duration d, tickwheel::resume_on where, std::stop_token st, Seen* s) {
    const wake w = co_await tickwheel::sleep_for(*rt, d, where, std::move(st));
    s->why = w;
    s->resumed.fetch_add(1);
    s->done = true;
}
task waiter(tickwheel::Runtime* rt, tickwheel::event* ev, tickwheel::resume_on where, tickwheel::Duration limit,
            Seen* s) {
    try {
        const wake w = co_await tickwheel::with_deadline(*rt, limit, ev->wait(*rt, where));
        s->why = w;
    } catch (const tickwheel::Error&) {
        s->threw = true;
    }
    s->resumed.fetch_add(1);
    s->done = true;
}

tickwheel::Config manual_config() {
    tickwheel::Config c;
    c.manual_clock = true;
    return c;
}

class CoroDestroy : public ::testing::Test {
protected:
    void SetUp() override { g_q = &q_; }
    void TearDown() override {
        EXPECT_EQ(q_.written(), 0u) << "the library wrote into a destroyed coroutine frame";
        g_q = nullptr;
    }
    Quarantine q_;
};
}  // namespace

// A pending sleep: the destructor stops the timer (its release hook runs
// inside the destroy), nothing fires into the frame later, no resumption.
TEST_F(CoroDestroy, APendingSleepIsStoppedInsideTheDestroyAndNeverResumes) {
    tickwheel::Runtime rt(manual_config());
    std::stop_source ss;
    Seen s;
    task t = sleeper(&rt, 1h, tickwheel::on_worker(), ss.get_token(), &s);
    EXPECT_EQ(rt.stats().live, 1u);
    t.h.destroy();
    EXPECT_EQ(rt.stats().live, 0u) << "the destroyed coroutine's timer was not taken back (its release hook did not run)";
    rt.advance(2h);
    ss.request_stop();  // its stop callback is gone with it
    rt.advance(1ms);
    EXPECT_EQ(s.resumed.load(), 0);
    EXPECT_EQ(rt.stats().fired, 0u);
}

// Due in a delivery queue (DISPATCHED) when destroyed on the queue's thread:
// taken back from the queue; the queue's next run runs nothing.
TEST_F(CoroDestroy, AWaitDueInItsQueueIsTakenBackFromTheQueue) {
    tickwheel::Runtime rt(manual_config());
    tickwheel::Queue q(rt);
    Seen s;
    task t = sleeper(&rt, 10ms, tickwheel::on_queue(q), {}, &s);
    rt.advance(20ms);
    ASSERT_EQ(q.stats().due, 1u);
    t.h.destroy();
    EXPECT_EQ(q.stats().due, 0u);
    EXPECT_EQ(rt.stats().live, 0u);
    EXPECT_EQ(q.run(16), 0u);
    EXPECT_EQ(s.resumed.load(), 0);
}

// An event wait: unregistered (at 069403a the event kept naming the dead
// waiter: the next wait threw invalid_argument, notify wrote into the
// frame); a later waiter gets the notify.
TEST_F(CoroDestroy, AnEventWaitIsUnregisteredAndTheNextWaiterIsNotified) {
    tickwheel::Runtime rt(manual_config());
    tickwheel::event ev;
    Seen a, b;
    task t = waiter(&rt, &ev, tickwheel::on_worker(), 1h, &a);
    t.h.destroy();
    EXPECT_EQ(rt.stats().live, 0u);
    task u = waiter(&rt, &ev, tickwheel::on_worker(), 1h, &b);
    ASSERT_FALSE(b.threw) << "the event still names the destroyed waiter (the next wait threw invalid_argument)";
    ev.notify();
    rt.advance(0ns);
    EXPECT_EQ(b.resumed.load(), 1);
    EXPECT_EQ(b.why, wake::notified);
    EXPECT_EQ(a.resumed.load(), 0);
    u.h.destroy();
}

// The wait took the event's set state (a notified wake-up on its way, not
// yet delivered) and is destroyed: the notify goes back to the event.
TEST_F(CoroDestroy, ANotifyTheDestroyedWaitTookGoesBackToTheEvent) {
    tickwheel::Runtime rt(manual_config());
    tickwheel::event ev;
    ev.notify();
    Seen a;
    task t = waiter(&rt, &ev, tickwheel::on_worker(), 1h, &a);
    EXPECT_FALSE(ev.is_set());  // taken by the wait
    t.h.destroy();
    EXPECT_TRUE(ev.is_set()) << "the notify the destroyed wait took was lost";
    rt.advance(1ms);
    EXPECT_EQ(a.resumed.load(), 0);
}

// T is running on a worker (parked before it reads the wait's word) when
// the frame is destroyed: the destructor wins the decision, then waits for T
// (stop_sync) -- it returns only after T left the node, and T never resumes.
TEST_F(CoroDestroy, ACallbackRunningOnAWorkerLosesAndIsWaitedFor) {
    tickwheel::Runtime rt;
    Seen s;
    g_timer_parked = false;
    g_timer_left = false;
    g_gone_seen = false;
    g_park_timer = true;
    task t = sleeper(&rt, 1ms, tickwheel::on_worker(), {}, &s);
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (!g_timer_parked.load() && std::chrono::steady_clock::now() < end) std::this_thread::yield();
    ASSERT_TRUE(g_timer_parked.load());
    t.h.destroy();  // T is inside the run: stop() cannot take it back
    EXPECT_TRUE(g_gone_seen.load());
    EXPECT_TRUE(g_timer_left.load()) << "the destructor returned while the timer's callback was still at the node";
    std::this_thread::sleep_for(5ms);
    EXPECT_EQ(s.resumed.load(), 0);
    rt.shutdown();
    EXPECT_EQ(rt.stats().live, 0u);
}

// Destroyed from inside another coroutine's resumption on the same queue
// (inside q.run()), and from inside a release hook at shutdown (the
// shutdown's sweep resumes X inline, X's body destroys Y): no deadlock, Y
// never resumes.
namespace {
task killer(tickwheel::Runtime* rt, tickwheel::Duration d, tickwheel::resume_on where,
            std::coroutine_handle<>* victim, Seen* s) {
    const wake w = co_await tickwheel::sleep_for(*rt, d, where);
    s->why = w;
    if (*victim) std::exchange(*victim, {}).destroy();
    s->resumed.fetch_add(1);
    s->done = true;
}
}  // namespace

TEST_F(CoroDestroy, FromAnotherCoroutineInsideTheQueuesRun) {
    tickwheel::Runtime rt(manual_config());
    tickwheel::Queue q(rt);
    Seen x, y;
    task ty = sleeper(&rt, 6ms, tickwheel::on_queue(q), {}, &y);  // due in the same advance, after X
    std::coroutine_handle<> victim = ty.h;
    task tx = killer(&rt, 5ms, tickwheel::on_queue(q), &victim, &x);
    rt.advance(10ms);
    ASSERT_EQ(q.stats().due, 2u);
    EXPECT_EQ(q.run(16), 1u);  // X ran and took Y back from the queue
    EXPECT_EQ(x.resumed.load(), 1);
    EXPECT_EQ(y.resumed.load(), 0);
    EXPECT_EQ(q.stats().due, 0u);
    tx.h.destroy();
}

TEST_F(CoroDestroy, FromInsideAReleaseHookAtShutdown) {
    tickwheel::Runtime rt;
    Seen x, y;
    task ty = sleeper(&rt, 1h, tickwheel::on_worker(), {}, &y);
    std::coroutine_handle<> victim = ty.h;
    task tx = killer(&rt, 1h, tickwheel::on_worker(), &victim, &x);
    rt.shutdown();  // the sweep resumes X inline, here
    EXPECT_EQ(x.resumed.load(), 1);
    EXPECT_EQ(x.why, wake::shutdown);
    // Y was destroyed inside X's resumption (the sweep's release hook of X),
    // or resumed with shutdown by the sweep before X: never both, never twice.
    EXPECT_LE(y.resumed.load(), 1);
    if (y.resumed.load() == 1) {
        EXPECT_EQ(y.why, wake::shutdown);
    }
    EXPECT_EQ(rt.stats().live, 0u);
    tx.h.destroy();
    if (victim) victim.destroy();
}

// An executor that destroys the handles posted to it instead of resuming
// them (a closed executor: "or destroy the frame deliberately"): the wake-up
// was decided; the destructor only takes back the event registration and
// gives the notified wake-up back to the event.
namespace {
void destroy_post(void*, std::coroutine_handle<> h) noexcept { h.destroy(); }
}  // namespace

TEST_F(CoroDestroy, AnExecutorDestroyingThePostedHandleGivesTheNotifyBack) {
    tickwheel::Runtime rt(manual_config());
    tickwheel::event ev;
    Seen a;
    task t = waiter(&rt, &ev, tickwheel::on_executor(nullptr, &destroy_post), 1h, &a);
    ev.notify();
    rt.advance(0ns);  // decided (notified), posted, destroyed by the executor
    EXPECT_EQ(a.resumed.load(), 0);
    EXPECT_TRUE(ev.is_set()) << "a notified wake-up that never reached the coroutine was lost";
    EXPECT_EQ(rt.stats().live, 0u);
    (void)t;
}
