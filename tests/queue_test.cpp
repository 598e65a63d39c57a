// SPDX-License-Identifier: MIT OR Apache-2.0
// Delivery queues (issue 11): tw_queue_* and tickwheel::Queue, with real
// threads and real time. What is pinned: callbacks (and release hooks after
// the last run) run only inside tw_queue_run() on its caller's thread; the
// fd is level-triggered "something is due"; stop of a due, not-yet-run timer
// is exact; stop_sync waits for a run on the queue's thread; reset re-arms a
// due timer; destroy and shutdown cancel bound timers once; bad input gets
// an error. Races between a stop/reset and a run are forced with the
// lookup-to-CAS test hook (src/runtime/test_hooks.hpp), not hoped for.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/test_hooks.hpp"
#include "test_support.hpp"
#include "test_support/capi.hpp"
#include "test_support/park.hpp"
#include "tickwheel/runtime.hpp"
#include "tickwheel/tickwheel.h"

namespace {

using namespace tw_test::capi;

using namespace std::chrono_literals;
using tw_test::kWait;
using tw_test::wait_until;

RtPtr make_runtime(std::uint32_t shards = 2, std::uint32_t workers = 2) {
    return RtPtr(create_runtime(c_config(shards, workers)));
}

/// What a timer did, and where.
struct Probe {
    std::atomic<int> runs{0};
    std::atomic<int> released{0};
    std::atomic<int> wrong_thread{0};  // runs or releases not on `home`
    std::atomic<std::uint64_t> last_run_ns{0};
    std::thread::id home;              // the thread expected to run it
    std::thread::id released_on;
    std::atomic<std::uint64_t> deadline_ns{0};  // the earliest allowed start
    std::atomic<int> early{0};
    tw_queue* run_inside = nullptr;    // cb: try tw_queue_run on this queue
    std::atomic<int> run_inside_rc{1};
    tw_runtime* rt = nullptr;
    bool stop_self_sync = false;
    std::atomic<int> stop_self_rc{1};
};

void probe_cb(void* arg, tw_timer id) {
    auto* p = static_cast<Probe*>(arg);
    const std::uint64_t now = tw_now_ns();
    if (now < p->deadline_ns) p->early.fetch_add(1);
    if (std::this_thread::get_id() != p->home) p->wrong_thread.fetch_add(1);
    p->last_run_ns.store(now);
    if (p->run_inside != nullptr) p->run_inside_rc.store(tw_queue_run(p->run_inside, 1, 0));
    if (p->stop_self_sync) p->stop_self_rc.store(tw_timer_stop_sync(p->rt, id));
    p->runs.fetch_add(1);
}

void probe_release(void* arg) {
    auto* p = static_cast<Probe*>(arg);
    p->released_on = std::this_thread::get_id();
    p->released.fetch_add(1);
}

tw_timer start_on(tw_runtime* rt, tw_queue* q, Probe& p, std::uint64_t delay_ns, std::uint64_t period_ns = 0) {
    tw_timer_spec s = c_spec(probe_cb, &p, probe_release, delay_ns, period_ns);
    s.queue = q;
    if (p.home == std::thread::id{}) p.home = std::this_thread::get_id();
    p.deadline_ns = tw_now_ns() + delay_ns;
    tw_timer id = 0;
    EXPECT_EQ(tw_timer_start_ex(rt, &s, &id), TW_OK);
    return id;
}

// ---- bad input ------------------------------------------------------------------
TEST(QueueApi, BadInput) {
    RtPtr rt = make_runtime();
    tw_queue* q = reinterpret_cast<tw_queue*>(1);
    EXPECT_EQ(tw_queue_create(nullptr, &q), TW_EINVAL);
    EXPECT_EQ(q, nullptr);
    EXPECT_EQ(tw_queue_create(rt.get(), nullptr), TW_EINVAL);
    EXPECT_LT(tw_queue_fd(nullptr), 0);
    EXPECT_EQ(tw_queue_run(nullptr, 1, 0), TW_EINVAL);
    EXPECT_EQ(tw_queue_destroy(nullptr), TW_EINVAL);
    tw_queue_stats st;
    st.size = sizeof st;
    EXPECT_EQ(tw_queue_get_stats(nullptr, &st), TW_EINVAL);

    q = make_queue(rt.get());
    ASSERT_NE(q, nullptr);
    EXPECT_GE(tw_queue_fd(q), 0);
    EXPECT_EQ(tw_queue_run(q, 0, 0), TW_EINVAL);
    EXPECT_EQ(tw_queue_get_stats(q, nullptr), TW_EINVAL);
    for (std::uint32_t size : {0u, 8u, static_cast<std::uint32_t>(sizeof st - 1), 4097u}) {
        st.size = size;
        EXPECT_EQ(tw_queue_get_stats(q, &st), TW_EINVAL) << size;
    }

    // A queue of another runtime in a spec: TW_EINVAL, and the hook is not
    // called (the call was rejected: arg is still the caller's).
    RtPtr other = make_runtime(1, 1);
    Probe p;
    tw_timer_spec s = c_spec(probe_cb, &p, probe_release);
    s.queue = q;
    tw_timer id = 7;
    EXPECT_EQ(tw_timer_start_ex(other.get(), &s, &id), TW_EINVAL);
    EXPECT_EQ(id, 0u);
    EXPECT_EQ(p.released.load(), 0);
    EXPECT_EQ(rt_stats(other.get()).started, 0u);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

TEST(QueueApi, NoFileDescriptorIsEnomem) {
    // The sanitizers' runtimes need file descriptors themselves (UBSan's vptr
    // check probes memory through a pipe), so the window without any would
    // fail their checks in the runtime's threads, not ours.
    if (tw_test::kSanitized) GTEST_SKIP() << "needs fds for the sanitizer runtime; run in release";
    RtPtr rt = make_runtime();
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
    const int lowest_free = ::dup(0);
    ASSERT_GE(lowest_free, 0);
    ::close(lowest_free);
    rlimit low = old;
    low.rlim_cur = static_cast<rlim_t>(lowest_free);  // no new fd can be opened
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    tw_queue* q = reinterpret_cast<tw_queue*>(1);
    const int rc = tw_queue_create(rt.get(), &q);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
    EXPECT_EQ(rc, TW_ENOMEM);
    EXPECT_EQ(q, nullptr);
    ASSERT_EQ(tw_queue_create(rt.get(), &q), TW_OK);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

TEST(QueueApiDeathTest, CxxQueueDestroyedFromItsOwnCallbackTerminates) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
            tickwheel::Runtime rt(tw_test::small_config(1, 1));
            auto* q = new tickwheel::Queue(rt);
            tickwheel::StartOptions o;
            o.queue = q;
            rt.start(o, [q] { delete q; });
            q->run(1, tickwheel::Queue::kForever);
        },
        "destroyed from inside one of its own callbacks");
}

TEST(QueueApi, ASpecOfTheOldSizeStartsOnTheWorkers) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    Probe p;
    tw_timer_spec s;
    tw_timer_spec_init(&s);
    s.size = 56;     // a program built against the 1.0 header
    s.queue = q;     // beyond its size: never read
    s.callback = probe_cb;
    s.arg = &p;
    s.release = probe_release;
    p.home = std::this_thread::get_id();
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    ASSERT_TRUE(wait_until([&] { return p.released.load() == 1; }));
    EXPECT_EQ(p.runs.load(), 1);
    EXPECT_EQ(p.wrong_thread.load(), 1) << "ran on a worker, not here";
    EXPECT_FALSE(readable(tw_queue_fd(q)));
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

// ---- the fd and run ------------------------------------------------------------------
TEST(QueueFd, LevelTriggeredNeverEarlyAndOnTheCallersThread) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    const int fd = tw_queue_fd(q);
    EXPECT_FALSE(readable(fd)) << "an empty queue";
    Probe p;
    start_on(rt.get(), q, p, 30 * kMs);
    const bool looked = readable(fd);
    if (tw_now_ns() < p.deadline_ns) {
        EXPECT_FALSE(looked) << "readable before the deadline";
    }
    ASSERT_TRUE(readable(fd, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(kWait).count())));
    EXPECT_GE(tw_now_ns(), p.deadline_ns) << "readable before the deadline";
    EXPECT_TRUE(readable(fd)) << "level-triggered: still readable";
    EXPECT_EQ(p.runs.load(), 0) << "nothing runs outside tw_queue_run";
    EXPECT_EQ(tw_queue_run(q, 16, 0), 1);
    EXPECT_EQ(p.runs.load(), 1);
    EXPECT_EQ(p.released.load(), 1);
    EXPECT_EQ(p.released_on, std::this_thread::get_id()) << "the release hook after the last run: here too";
    EXPECT_EQ(p.wrong_thread.load(), 0);
    EXPECT_EQ(p.early.load(), 0);
    EXPECT_FALSE(readable(fd)) << "everything due ran";
    EXPECT_EQ(tw_queue_run(q, 16, 0), 0);
    const tw_queue_stats st = queue_stats(q);
    EXPECT_EQ(st.delivered, 1u);
    EXPECT_EQ(st.ran, 1u);
    EXPECT_EQ(st.due, 0u);
    EXPECT_EQ(st.signal_samples, 1u);
    EXPECT_EQ(st.run_samples, 1u);
    EXPECT_GE(st.run_max_ns, st.signal_max_ns);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

TEST(QueueRun, DeadlineOrderAndMax) {
    RtPtr rt = make_runtime(2, 1);
    tw_queue* q = make_queue(rt.get());
    std::vector<int> order;
    struct Item {
        std::vector<int>* order;
        int n;
    };
    Item items[6];
    const std::uint64_t base = tw_now_ns() + 20 * kMs;
    const int offsets[6] = {5, 1, 4, 0, 3, 2};  // ms after base; run order must be 3,1,5,4,2,0
    for (int i = 0; i < 6; ++i) {
        items[i] = Item{&order, i};
        tw_timer_spec s;
        tw_timer_spec_init(&s);
        s.deadline_ns = base + static_cast<std::uint64_t>(offsets[i]) * kMs;
        s.shard = i % 2;  // deliveries from both shards
        s.callback = [](void* arg, tw_timer) {
            auto* it = static_cast<Item*>(arg);
            it->order->push_back(it->n);
        };
        s.arg = &items[i];
        s.queue = q;
        tw_timer id;
        ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    }
    ASSERT_TRUE(wait_until([&] { return queue_stats(q).due == 6; }));
    EXPECT_EQ(tw_queue_run(q, 2, 0), 2);
    EXPECT_TRUE(readable(tw_queue_fd(q))) << "4 still due";
    EXPECT_EQ(queue_stats(q).due, 4u);
    EXPECT_EQ(tw_queue_run(q, 100, 0), 4);
    EXPECT_EQ(order, (std::vector<int>{3, 1, 5, 4, 2, 0}));
    EXPECT_FALSE(readable(tw_queue_fd(q)));
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

TEST(QueueRun, TimeoutWaitsTheWholeTimeWhenNothingIsDue) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    const std::uint64_t t0 = tw_now_ns();
    EXPECT_EQ(tw_queue_run(q, 4, 40 * static_cast<std::int64_t>(kMs)), 0);
    EXPECT_GE(tw_now_ns() - t0, 40 * kMs);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

TEST(QueueRun, ABlockedRunWakesForATimerStartedLaterByAnotherThread) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    Probe p;
    std::atomic<int> rc{-1000};
    std::thread runner([&] {
        p.home = std::this_thread::get_id();
        rc.store(tw_queue_run(q, 8, -1));
    });
    ASSERT_TRUE(wait_until([&] { return queue_stats(q).runners == 1; }));
    while (p.home == std::thread::id{}) std::this_thread::yield();
    tw_timer_spec s = c_spec(probe_cb, &p, probe_release, 5 * kMs);
    s.queue = q;
    p.deadline_ns = tw_now_ns() + s.delay_ns;
    tw_timer id;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    runner.join();
    EXPECT_EQ(rc.load(), 1);
    EXPECT_EQ(p.runs.load(), 1);
    EXPECT_EQ(p.wrong_thread.load(), 0);
    EXPECT_EQ(p.early.load(), 0);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

TEST(QueueRun, EdgeTriggeredEpollGetsAnEdgePerBatch) {
    RtPtr rt = make_runtime(1, 1);
    tw_queue* q = make_queue(rt.get());
    const int ep = epoll_create1(EPOLL_CLOEXEC);
    ASSERT_GE(ep, 0);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, tw_queue_fd(q), &ev), 0);
    const int wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(kWait).count());
    Probe a, b;
    start_on(rt.get(), q, a, 1 * kMs);
    epoll_event out{};
    ASSERT_EQ(epoll_wait(ep, &out, 1, wait_ms), 1);
    EXPECT_EQ(epoll_wait(ep, &out, 1, 0), 0) << "edge-triggered: one event per edge";
    start_on(rt.get(), q, b, 1 * kMs);  // a second batch while the first is still due
    ASSERT_EQ(epoll_wait(ep, &out, 1, wait_ms), 1) << "a new edge for newly due timers";
    EXPECT_EQ(tw_queue_run(q, 8, 0), 2);
    ::close(ep);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

// ---- stop, stop_sync, reset of queue-bound timers ---------------------------------------------
TEST(QueueStop, ADueNotYetRunTimerIsStoppedExactly) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    for (const bool sync : {false, true}) {
        Probe p;
        const tw_timer id = start_on(rt.get(), q, p, 0);
        ASSERT_TRUE(readable(tw_queue_fd(q), 10000));
        EXPECT_EQ(queue_stats(q).due, 1u);
        EXPECT_EQ(sync ? tw_timer_stop_sync(rt.get(), id) : tw_timer_stop(rt.get(), id), TW_OK);
        EXPECT_EQ(p.released.load(), 1) << "released inside the stop";
        EXPECT_EQ(p.released_on, std::this_thread::get_id());
        EXPECT_FALSE(readable(tw_queue_fd(q))) << "nothing due any more";
        EXPECT_EQ(queue_stats(q).due, 0u);
        EXPECT_EQ(tw_queue_run(q, 8, 0), 0);
        EXPECT_EQ(p.runs.load(), 0) << "a stopped timer never runs";
        EXPECT_EQ(tw_timer_stop(rt.get(), id), TW_ENOENT);
    }
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

// A due, not yet run timer is reset: it is taken back (not due, the fd not
// readable, a run finds nothing) and runs once at its new deadline, with
// its lateness from that deadline. On a manual clock, so that each step is
// checked whatever the machine's load (the real clock's version of this
// test could only skip its checks when descheduled past the deadline).
TEST(QueueReset, ADueTimerIsReArmed) {
    tw_config c;
    tw_config_init(&c);
    c.flags |= TW_CONFIG_MANUAL_CLOCK;
    tw_runtime* raw = nullptr;
    ASSERT_EQ(tw_runtime_create(&c, &raw), TW_OK);
    RtPtr rt(raw);
    tw_queue* q = make_queue(rt.get());
    Probe p;
    p.home = std::this_thread::get_id();
    tw_timer_spec s = c_spec(probe_cb, &p, probe_release, kMs);
    s.queue = q;
    tw_timer id = 0;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    ASSERT_EQ(tw_runtime_advance(rt.get(), kMs), 0);  // due, delivered, not run
    ASSERT_TRUE(readable(tw_queue_fd(q)));
    ASSERT_EQ(queue_stats(q).due, 1u);
    ASSERT_EQ(tw_timer_reset(rt.get(), id, 30 * kMs), TW_OK);
    EXPECT_FALSE(readable(tw_queue_fd(q))) << "taken back";
    EXPECT_EQ(queue_stats(q).due, 0u);
    EXPECT_EQ(tw_queue_run(q, 8, 0), 0);
    ASSERT_EQ(tw_runtime_advance(rt.get(), 29 * kMs), 0);
    EXPECT_FALSE(readable(tw_queue_fd(q))) << "not before its new deadline";
    EXPECT_EQ(tw_queue_run(q, 8, 0), 0);
    ASSERT_EQ(tw_runtime_advance(rt.get(), kMs), 0);
    EXPECT_TRUE(readable(tw_queue_fd(q)));
    EXPECT_EQ(tw_queue_run(q, 8, 0), 1);
    EXPECT_EQ(p.runs.load(), 1);
    EXPECT_EQ(p.released.load(), 1);
    EXPECT_EQ(queue_stats(q).run_max_ns, 0u) << "lateness from the new deadline";
    EXPECT_FALSE(readable(tw_queue_fd(q)));
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

TEST(QueueStopSync, WaitsForARunOnTheQueuesThread) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    tw_test::Gate gate;
    tw_test::OpenOnExit open_on_exit{gate};
    std::atomic<bool> in_cb{false}, cb_done{false}, released{false};
    struct Ctx {
        tw_test::Gate* gate;
        std::atomic<bool>*in, *done, *rel;
    } ctx{&gate, &in_cb, &cb_done, &released};
    tw_timer_spec s;
    tw_timer_spec_init(&s);
    s.delay_ns = 1 * kMs;
    s.period_ns = 1 * kMs;
    s.callback = [](void* arg, tw_timer) {
        auto* c = static_cast<Ctx*>(arg);
        c->in->store(true);
        EXPECT_TRUE(c->gate->wait(tw_test::kWait));
        c->done->store(true);
    };
    s.release = [](void* arg) { static_cast<Ctx*>(arg)->rel->store(true); };
    s.arg = &ctx;
    s.queue = q;
    tw_timer id;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    std::thread loop([&] { EXPECT_EQ(tw_queue_run(q, 1, -1), 1); });
    ASSERT_TRUE(wait_until([&] { return in_cb.load(); }));
    std::atomic<bool> stopped{false};
    std::thread stopper([&] {
        EXPECT_EQ(tw_timer_stop_sync(rt.get(), id), TW_OK);
        EXPECT_TRUE(cb_done.load()) << "returned while the run was in progress";
        EXPECT_TRUE(released.load()) << "returned before the release hook";
        stopped.store(true);
    });
    // The stopper must wait for the run (it cannot end while the gate is shut).
    ASSERT_TRUE(wait_until([&] { return rt_stats(rt.get()).stopped == 1; }));
    EXPECT_FALSE(stopped.load());
    gate.open();
    stopper.join();
    loop.join();
    EXPECT_TRUE(stopped.load());
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

TEST(QueueStopSync, FromItsOwnCallbackDoesNotWait) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    Probe p;
    p.rt = rt.get();
    p.stop_self_sync = true;
    start_on(rt.get(), q, p, 1 * kMs, 1 * kMs);
    EXPECT_EQ(tw_queue_run(q, 1, -1), 1);
    EXPECT_EQ(p.stop_self_rc.load(), TW_OK);
    EXPECT_EQ(p.released.load(), 1) << "released after the run, on this thread";
    EXPECT_EQ(p.released_on, std::this_thread::get_id());
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

TEST(QueuePeriodic, RunsNeverOverlapAndMissedPeriodsAreSkipped) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    Probe p;
    const tw_timer id = start_on(rt.get(), q, p, 2 * kMs, 2 * kMs);
    // Not running the queue for many periods: one due callback, not a burst.
    ASSERT_TRUE(wait_until([&] { return queue_stats(q).due == 1; }));
    std::this_thread::sleep_for(40ms);  // twenty more periods pass
    EXPECT_EQ(queue_stats(q).due, 1u);
    EXPECT_EQ(queue_stats(q).delivered, 1u);
    EXPECT_EQ(tw_queue_run(q, 100, 0), 1);
    EXPECT_EQ(tw_queue_run(q, 100, 0), 0);
    // Then every period, on this thread.
    while (p.runs.load() < 10) ASSERT_GE(tw_queue_run(q, 100, static_cast<std::int64_t>(kWait.count())), 1);
    EXPECT_EQ(tw_timer_stop(rt.get(), id), TW_OK);
    EXPECT_EQ(p.released.load(), 1);
    EXPECT_EQ(p.wrong_thread.load(), 0);
    EXPECT_EQ(p.early.load(), 0);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

// ---- re-entry, nesting ------------------------------------------------------------------
TEST(QueueRun, FromItsOwnCallbackIsEdeadlkAnotherQueueNests) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    tw_queue* q2 = make_queue(rt.get());
    Probe self;
    self.run_inside = q;  // its own queue: refused
    start_on(rt.get(), q, self, 0);
    EXPECT_EQ(tw_queue_run(q, 1, -1), 1);
    EXPECT_EQ(self.run_inside_rc.load(), TW_EDEADLK);

    Probe inner, outer;
    start_on(rt.get(), q2, inner, 0);
    ASSERT_TRUE(readable(tw_queue_fd(q2), 10000));
    outer.run_inside = q2;  // another queue: runs inner here, nested
    start_on(rt.get(), q, outer, 0);
    EXPECT_EQ(tw_queue_run(q, 1, -1), 1);
    EXPECT_EQ(outer.run_inside_rc.load(), 1);
    EXPECT_EQ(inner.runs.load(), 1);
    EXPECT_EQ(inner.wrong_thread.load(), 0);

    // Destroying the queue from its own callback: refused.
    struct Ctx {
        tw_queue* q;
        std::atomic<int> rc{1};
    } ctx{q};
    tw_timer_spec s;
    tw_timer_spec_init(&s);
    s.callback = [](void* arg, tw_timer) {
        auto* c = static_cast<Ctx*>(arg);
        c->rc.store(tw_queue_destroy(c->q));
    };
    s.arg = &ctx;
    s.queue = q;
    tw_timer id;
    ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    EXPECT_EQ(tw_queue_run(q, 1, -1), 1);
    EXPECT_EQ(ctx.rc.load(), TW_EDEADLK);
    EXPECT_EQ(tw_queue_destroy(q2), TW_OK);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

// ---- destroy and shutdown ------------------------------------------------------------------
TEST(QueueDestroy, CancelsItsTimersOnceOnTheCallingThreadOthersGoOn) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    tw_queue* keep = make_queue(rt.get());
    constexpr int kPending = 200;
    std::vector<Probe> pending(kPending);
    for (auto& p : pending) start_on(rt.get(), q, p, 3600ull * 1000 * kMs);
    Probe due;
    start_on(rt.get(), q, due, 0);
    ASSERT_TRUE(readable(tw_queue_fd(q), 10000));
    Probe other, on_worker;
    start_on(rt.get(), keep, other, 20 * kMs);
    on_worker.home = std::this_thread::get_id();
    {
        tw_timer_spec s = c_spec(probe_cb, &on_worker, probe_release, 20 * kMs);
        tw_timer id;
        ASSERT_EQ(tw_timer_start_ex(rt.get(), &s, &id), TW_OK);
    }
    const std::uint64_t stopped_before = rt_stats(rt.get()).stopped;
    ASSERT_EQ(tw_queue_destroy(q), TW_OK);
    for (auto& p : pending) {
        EXPECT_EQ(p.released.load(), 1);
        EXPECT_EQ(p.released_on, std::this_thread::get_id());
        EXPECT_EQ(p.runs.load(), 0);
    }
    EXPECT_EQ(due.released.load(), 1);
    EXPECT_EQ(due.runs.load(), 0);
    EXPECT_EQ(rt_stats(rt.get()).stopped - stopped_before, std::uint64_t{kPending + 1});
    // The other queue and the workers are unaffected.
    EXPECT_EQ(tw_queue_run(keep, 1, static_cast<std::int64_t>(kWait.count())), 1);
    EXPECT_EQ(other.runs.load(), 1);
    ASSERT_TRUE(wait_until([&] { return on_worker.released.load() == 1; }));
    EXPECT_EQ(on_worker.runs.load(), 1);
    // Slots are reused: a new queue works.
    tw_queue* again = make_queue(rt.get());
    Probe p;
    start_on(rt.get(), again, p, 0);
    EXPECT_EQ(tw_queue_run(again, 1, static_cast<std::int64_t>(kWait.count())), 1);
    EXPECT_EQ(tw_queue_destroy(again), TW_OK);
    EXPECT_EQ(tw_queue_destroy(keep), TW_OK);
}

TEST(QueueDestroy, WakesAThreadWaitingInRun) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    std::atomic<int> rc{1000};
    std::thread runner([&] { rc.store(tw_queue_run(q, 1, -1)); });
    ASSERT_TRUE(wait_until([&] { return queue_stats(q).runners == 1; }));
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
    runner.join();
    EXPECT_EQ(rc.load(), TW_ESHUTDOWN);
}

TEST(QueueShutdown, CancelsPendingAndDueTimersWakesRunnersAndLeavesTheFdReadable) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    tw_queue* idle = make_queue(rt.get());
    std::vector<Probe> pending(50);
    for (auto& p : pending) start_on(rt.get(), q, p, 3600ull * 1000 * kMs);
    Probe due;
    start_on(rt.get(), q, due, 0);
    ASSERT_TRUE(wait_until([&] { return queue_stats(q).due == 1; }));
    std::atomic<int> rc{1000};
    std::thread runner([&] { rc.store(tw_queue_run(idle, 1, -1)); });
    ASSERT_TRUE(wait_until([&] { return queue_stats(idle).runners == 1; }));
    ASSERT_EQ(tw_runtime_shutdown(rt.get()), TW_OK);
    runner.join();
    EXPECT_EQ(rc.load(), TW_ESHUTDOWN);
    for (auto& p : pending) EXPECT_EQ(p.released.load(), 1);
    EXPECT_EQ(due.released.load(), 1);
    EXPECT_EQ(due.runs.load(), 0);
    EXPECT_EQ(rt_stats(rt.get()).cancelled_at_shutdown, 51u);
    EXPECT_TRUE(readable(tw_queue_fd(q))) << "a loop polling it learns of the shutdown";
    EXPECT_EQ(tw_queue_run(q, 1, 0), TW_ESHUTDOWN);
    EXPECT_EQ(tw_queue_run(q, 1, -1), TW_ESHUTDOWN) << "never blocks after shutdown";
    tw_queue* late = reinterpret_cast<tw_queue*>(1);
    EXPECT_EQ(tw_queue_create(rt.get(), &late), TW_ESHUTDOWN);
    EXPECT_EQ(late, nullptr);
    EXPECT_EQ(queue_stats(q).due, 0u);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
    // `idle` is left for tw_runtime_destroy (LeakSanitizer checks it is freed).
}

TEST(QueueShutdown, RuntimeDestroyFreesQueuesStillAlive) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    Probe p;
    start_on(rt.get(), q, p, 3600ull * 1000 * kMs);
    tw_runtime* raw = rt.release();
    EXPECT_EQ(tw_runtime_destroy(raw), TW_OK);
    EXPECT_EQ(p.released.load(), 1);
}

// ---- forced races -------------------------------------------------------------------------
// Parks the thread `who` the first time it reaches the hook point `what`
// (src/runtime/test_hooks.hpp: 'b' a run's DISPATCHED -> RUNNING, 'c' a
// stop's cancel, 'r' a reset, each after its load and before its CAS) until
// released, so that another thread acts in exactly that window. Every way
// out of DISPATCHED of a bound timer is taken under its queue's transition
// mutex (delivery_queue.hpp, issue 20): a thread parked at 'b' holds it (a
// run), and so does one parked at 'c' or 'r' (a stop or reset of a bound
// timer); the other side waits for its CAS. Park::seen: another thread
// reached hook point 'q' (a stop or reset of a bound timer about to take its
// queue's transition mutex, before its CAS). (test_support/park.hpp)
using Park = tw_test::ThreadPark;

/// A queue with one timer due (not yet run), and a thread that parks at the
/// hook point `what` inside `call` (a run, stop or reset) while the test
/// acts in that window.
struct DueRace {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    Probe p;
    tw_timer id = start_on(rt.get(), q, p, 0);
    Park park;
    std::atomic<int> rc{1000};  // what `call` returned
    std::thread parked;

    template <class Call>
    [[nodiscard]] bool park_in(char what, Call call) {
        // Not parked yet (a previous test left it set: waiting for it would
        // return before this thread armed the hook).
        Park::parked = false;
        parked = std::thread([this, what, call] {
            Park::arm(std::this_thread::get_id(), what, 'q');
            rc.store(call());
        });
        return wait_until([] { return Park::parked.load(); });
    }
    void release() {
        Park::release();
        parked.join();
    }
    ~DueRace() {
        if (parked.joinable()) release();
    }
};

// A stop lands inside a run's begin window (after the run popped the due
// item, before its DISPATCHED -> RUNNING): it waits for the run's CAS (the
// queue's transition mutex), so the run wins, the one-shot runs once, and
// the stop reports TW_ENOENT. (On a4e5bb9 the stop's CAS got in first: the
// run found its item stale. Either order is exact; the mutex is what makes
// a stale item impossible to accept again, see QueueDeliveryItems in
// queue_lifecycle_test.cpp.)
TEST(QueueRace, StopInsideARunsBeginWindowWaitsForTheRun) {
    DueRace r;
    ASSERT_TRUE(readable(tw_queue_fd(r.q), 10000));
    ASSERT_TRUE(r.park_in('b', [&r] { return tw_queue_run(r.q, 8, 0); }));
    std::atomic<int> stop_rc{1000};
    std::thread stopper([&] { stop_rc = tw_timer_stop(r.rt.get(), r.id); });
    ASSERT_TRUE(wait_until([] { return Park::seen.load(); })) << "the stop reached its queue's mutex";
    r.release();
    stopper.join();
    EXPECT_EQ(r.rc.load(), 1);
    EXPECT_EQ(r.p.runs.load(), 1);
    EXPECT_EQ(stop_rc.load(), TW_ENOENT);
    EXPECT_EQ(r.p.released.load(), 1);
    EXPECT_EQ(queue_stats(r.q).due, 0u);
    EXPECT_FALSE(readable(tw_queue_fd(r.q)));
    EXPECT_EQ(tw_queue_destroy(r.q), TW_OK);
}

// The other order: a run begins while a stop is inside its cancel window.
// The stop holds the queue's transition mutex: the run waits for its CAS,
// so the stop wins (TW_OK, the hook once), the run finds no live item and
// runs nothing, and nothing is left due.
TEST(QueueRace, RunInsideAStopsCancelWindowWaitsForTheStop) {
    DueRace r;
    ASSERT_TRUE(readable(tw_queue_fd(r.q), 10000));
    ASSERT_TRUE(r.park_in('c', [&r] { return tw_timer_stop(r.rt.get(), r.id); }));
    std::atomic<int> run_rc{1000};
    std::thread runner([&] { run_rc = tw_queue_run(r.q, 8, 0); });
    r.release();
    runner.join();
    EXPECT_EQ(r.rc.load(), TW_OK);
    EXPECT_EQ(r.p.released.load(), 1);
    EXPECT_EQ(r.p.runs.load(), 0);
    EXPECT_EQ(run_rc.load(), 0);
    EXPECT_EQ(queue_stats(r.q).due, 0u);
    EXPECT_FALSE(readable(tw_queue_fd(r.q)));
    EXPECT_EQ(tw_queue_destroy(r.q), TW_OK);
}

// A reset lands inside a run's begin window: it waits for the run's CAS,
// finds the one-shot running (not its own callback: not re-armed) and
// reports TW_ENOENT; the timer runs once.
TEST(QueueRace, ResetInsideARunsBeginWindowWaitsForTheRun) {
    DueRace r;
    ASSERT_TRUE(readable(tw_queue_fd(r.q), 10000));
    ASSERT_TRUE(r.park_in('b', [&r] { return tw_queue_run(r.q, 8, 0); }));
    std::atomic<int> reset_rc{1000};
    std::thread resetter([&] { reset_rc = tw_timer_reset(r.rt.get(), r.id, 20 * kMs); });
    ASSERT_TRUE(wait_until([] { return Park::seen.load(); })) << "the reset reached its queue's mutex";
    r.release();
    resetter.join();
    EXPECT_EQ(r.rc.load(), 1);
    EXPECT_EQ(reset_rc.load(), TW_ENOENT);
    EXPECT_EQ(r.p.runs.load(), 1);
    EXPECT_EQ(r.p.early.load(), 0);
    EXPECT_EQ(r.p.released.load(), 1);
    EXPECT_EQ(queue_stats(r.q).due, 0u);
    EXPECT_EQ(tw_queue_destroy(r.q), TW_OK);
}

// A run begins while a reset of its due timer is inside its window: the
// reset wins (the timer is taken back, re-armed), the run finds no live
// item, and the timer later runs once, at its new deadline.
TEST(QueueRace, RunInsideAResetsWindowWaitsAndTheTimerRunsLater) {
    DueRace r;
    ASSERT_TRUE(readable(tw_queue_fd(r.q), 10000));
    const std::uint64_t before = tw_now_ns();
    ASSERT_TRUE(r.park_in('r', [&r] { return tw_timer_reset(r.rt.get(), r.id, 20 * kMs); }));
    std::atomic<int> run_rc{1000};
    std::thread runner([&] { run_rc = tw_queue_run(r.q, 8, 0); });
    r.p.deadline_ns = before + 20 * kMs;  // a lower bound of the reset's deadline
    r.release();
    runner.join();
    EXPECT_EQ(r.rc.load(), TW_OK);
    EXPECT_EQ(run_rc.load(), 0);
    EXPECT_EQ(r.p.runs.load(), 0);
    EXPECT_EQ(tw_queue_run(r.q, 8, static_cast<std::int64_t>(kWait.count())), 1);
    EXPECT_EQ(r.p.runs.load(), 1);
    EXPECT_EQ(r.p.early.load(), 0);
    EXPECT_EQ(r.p.released.load(), 1);
    EXPECT_EQ(tw_queue_destroy(r.q), TW_OK);
}

// Many producers, two queues each polled by its own thread, random stops
// and resets (many of them while due): exact accounting, every run on its
// queue's thread, none early, nothing left due.
TEST(QueueRace, ProducersStopAndResetWhileTwoQueuesRun) {
    RtPtr rt = make_runtime(2, 2);
    tw_queue* qs[2] = {make_queue(rt.get()), make_queue(rt.get())};
    constexpr int kProducers = 3;
    constexpr int kPerProducer = tw_test::kSanitized ? 300 : 1500;
    std::vector<std::unique_ptr<Probe>> probes[kProducers];
    std::atomic<bool> stop_loops{false};
    std::thread::id loop_ids[2];
    std::atomic<int> ready{0};
    std::vector<std::thread> loops;
    for (int i = 0; i < 2; ++i)
        loops.emplace_back([&, i] {
            loop_ids[i] = std::this_thread::get_id();
            ready.fetch_add(1);
            pollfd pfd{tw_queue_fd(qs[i]), POLLIN, 0};
            while (!stop_loops.load()) {
                if (::poll(&pfd, 1, 5) == 1) {
                    EXPECT_GE(tw_queue_run(qs[i], 64, 0), 0);
                }
            }
        });
    ASSERT_TRUE(wait_until([&] { return ready.load() == 2; }));
    std::atomic<int> stops_ok{0};
    std::atomic<int> resets_ok{0};
    std::vector<std::thread> producers;
    for (int t = 0; t < kProducers; ++t)
        producers.emplace_back([&, t] {
            std::uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(t + 1);
            auto rnd = [&x] {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                return x;
            };
            std::vector<tw_timer> ids;
            for (int i = 0; i < kPerProducer; ++i) {
                const int qi = static_cast<int>(rnd() % 2);
                auto p = std::make_unique<Probe>();
                p->home = loop_ids[qi];
                const tw_timer id = start_on(rt.get(), qs[qi], *p, (rnd() % 3) * kMs);
                probes[t].push_back(std::move(p));
                ids.push_back(id);
                const std::uint64_t r = rnd() % 8;
                const tw_timer& victim = ids[static_cast<std::size_t>(rnd() % ids.size())];
                if (r == 0) {
                    if (tw_timer_stop(rt.get(), victim) == TW_OK) stops_ok.fetch_add(1);
                } else if (r == 1) {
                    if (tw_timer_stop_sync(rt.get(), victim) == TW_OK) stops_ok.fetch_add(1);
                } else if (r == 2) {
                    // A reset that succeeded took the timer back before it
                    // ran (a one-shot re-arms only then): its earliest start
                    // allowed is now this reset's deadline, whose lower
                    // bound `at` is read before the call -- later or earlier
                    // than the old one. While the call is in flight a run
                    // may serve either deadline, so the bound is first
                    // lowered to the smaller of the two (a run at the new,
                    // earlier deadline between the reset's CAS and the store
                    // below must not be judged by the old one: it was, and
                    // failed once in a fresh-clone run), then set to `at` once the
                    // reset succeeded. A failed reset (TW_ENOENT: it ran or
                    // was stopped) changes nothing; the lowered bound stays
                    // a true lower bound of its run.
                    const std::uint64_t delay = (rnd() % 3) * kMs;
                    Probe& vp = *probes[t][static_cast<std::size_t>(&victim - ids.data())];
                    const std::uint64_t at = tw_now_ns() + delay;
                    if (at < vp.deadline_ns.load()) vp.deadline_ns.store(at);
                    const int rc = tw_timer_reset(rt.get(), victim, delay);
                    EXPECT_TRUE(rc == TW_OK || rc == TW_ENOENT) << rc;
                    if (rc == TW_OK) {
                        vp.deadline_ns.store(at);
                        resets_ok.fetch_add(1);
                    }
                }
            }
        });
    for (auto& th : producers) th.join();
    const int total = kProducers * kPerProducer;
    ASSERT_TRUE(wait_until([&] {
        const tw_stats st = rt_stats(rt.get());
        return st.fired + st.stopped == static_cast<std::uint64_t>(total) && st.live == 0;
    })) << "fired " << rt_stats(rt.get()).fired << " stopped " << rt_stats(rt.get()).stopped;
    stop_loops.store(true);
    for (auto& th : loops) th.join();
    int runs = 0;
    for (auto& v : probes)
        for (auto& p : v) {
            EXPECT_EQ(p->released.load(), 1);
            EXPECT_LE(p->runs.load(), 1);
            EXPECT_EQ(p->wrong_thread.load(), 0);
            EXPECT_EQ(p->early.load(), 0);
            runs += p->runs.load();
        }
    EXPECT_EQ(runs + stops_ok.load(), total);
    EXPECT_GT(resets_ok.load(), 0) << "no reset ever took a timer back: the test exercised nothing";
    EXPECT_EQ(rt_stats(rt.get()).reset, static_cast<std::uint64_t>(resets_ok.load()));
    for (tw_queue* q : qs) {
        EXPECT_EQ(queue_stats(q).due, 0u);
        EXPECT_FALSE(readable(tw_queue_fd(q)));
        EXPECT_EQ(tw_queue_destroy(q), TW_OK);
    }
}

// ---- fork ------------------------------------------------------------------------------------
TEST(QueueFork, RunInAForkChildIsEforked) {
    RtPtr rt = make_runtime();
    tw_queue* q = make_queue(rt.get());
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        int bad = 0;
        if (tw_queue_run(q, 1, 0) != TW_EFORKED) bad |= 1;
        tw_queue* q2 = nullptr;
        if (tw_queue_create(rt.get(), &q2) != TW_EFORKED) bad |= 2;
        if (tw_queue_destroy(q) != TW_OK) bad |= 4;  // frees without running anything
        ::_exit(bad);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_EQ(tw_queue_destroy(q), TW_OK);
}

// ---- the C++ API -------------------------------------------------------------------------------
TEST(QueueCxx, RaiiStartOptionsAndErrors) {
    namespace tw = tickwheel;
    auto rt = std::make_unique<tw::Runtime>(tw_test::small_config());
    std::atomic<int> runs{0}, released{0};
    struct Counted {
        std::atomic<int>* runs;
        std::atomic<int>* released;
        std::thread::id home;
        bool armed = true;
        Counted(std::atomic<int>* r, std::atomic<int>* rel) : runs(r), released(rel), home(std::this_thread::get_id()) {}
        Counted(Counted&& o) noexcept : runs(o.runs), released(o.released), home(o.home) { o.armed = false; }
        ~Counted() {
            if (armed) released->fetch_add(1);
        }
        void operator()() const {
            EXPECT_EQ(std::this_thread::get_id(), home);
            runs->fetch_add(1);
        }
    };
    auto q = std::make_unique<tw::Queue>(*rt);
    EXPECT_GE(q->fd(), 0);
    EXPECT_EQ(&q->runtime(), rt.get());
    tw::StartOptions o;
    o.delay = 1ms;
    o.queue = q.get();
    rt->start(o, Counted(&runs, &released));
    EXPECT_EQ(q->run(4, tw::Queue::kForever), 1u);
    EXPECT_EQ(runs.load(), 1);
    EXPECT_EQ(released.load(), 1);
    EXPECT_THROW(q->run(0), tw::Error);

    // Another runtime's queue: invalid_argument, the callable released.
    tw::Runtime other(tw_test::small_config(1, 1));
    std::error_code ec;
    const tw::Timer t = other.start(o, tw::detail::Callback(Counted(&runs, &released)), ec);
    EXPECT_EQ(ec, tw::errc::invalid_argument);
    EXPECT_FALSE(t);
    EXPECT_EQ(released.load(), 2);

    // close(): cancels the pending ones here; the queue then refuses.
    o.delay = 1h;
    rt->start(o, Counted(&runs, &released));
    q->close(ec);
    EXPECT_FALSE(ec);
    EXPECT_EQ(released.load(), 3);
    EXPECT_THROW(q->run(1), tw::Error);
    rt->start(o, tw::detail::Callback(Counted(&runs, &released)), ec);
    EXPECT_EQ(ec, tw::errc::invalid_argument);
    EXPECT_EQ(released.load(), 4);
    q.reset();

    // A Queue may outlive its Runtime: run() then reports shutting_down.
    auto late = std::make_unique<tw::Queue>(*rt);
    o.queue = late.get();
    rt->start(o, Counted(&runs, &released));
    rt.reset();
    EXPECT_EQ(released.load(), 5) << "shutdown cancelled it";
    late->run(1, tw::Duration::zero(), ec);
    EXPECT_EQ(ec, tw::errc::shutting_down);
    late.reset();
    EXPECT_EQ(runs.load(), 1);
}

}  // namespace
