// SPDX-License-Identifier: MIT OR Apache-2.0
// No allocation per wait (issue 24): the global operator new is replaced in
// this test binary and counts its calls. After a warm-up:
//  * through a delivery queue, the loop thread -- which runs the co_await,
//    the timer's start, q.run() and the resumption -- makes no call at all;
//  * on a worker, await_suspend (the start, the stop callback) makes none;
//  * on every thread together (the shard threads and advance() included),
//    a co_await sleep_for costs exactly what a plain callback timer costs:
//    the runtime's own per-batch allocations (Shard::flush_queued and
//    flush_fired hand each batch of due timers over in a fresh block, and
//    a manual advance() builds its lists) are not per wait and not the
//    coroutine layer's.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <thread>

#include "test_support/sanitizers.hpp"
#include "tickwheel/coro.hpp"

// The sanitizer runtimes define the global operator new/delete themselves
// (a second definition does not link): there the counting is off and the
// tests skip; they run in the release build.
#if TW_TEST_ASAN || TW_TEST_TSAN
#  define TW_NO_NEW_REPLACEMENT 1
#endif
namespace {
std::atomic<long> g_news{0};
std::atomic<bool> g_counting{false};  // every thread
thread_local bool t_counting = false;  // this thread only

#ifndef TW_NO_NEW_REPLACEMENT
// A breakpoint target for finding an allocation (gdb: break counted_alloc_hit).
[[gnu::noinline]] void counted_alloc_hit() { g_news.fetch_add(1, std::memory_order_relaxed); }

void* counted_alloc(std::size_t n, std::size_t align) {
    if (t_counting || g_counting.load(std::memory_order_relaxed)) counted_alloc_hit();
    if (n == 0) n = 1;
    void* p = align <= alignof(std::max_align_t) ? std::malloc(n)
                                                  : std::aligned_alloc(align, (n + align - 1) / align * align);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}
#endif
}  // namespace

#ifndef TW_NO_NEW_REPLACEMENT
void* operator new(std::size_t n) { return counted_alloc(n, 0); }
void* operator new[](std::size_t n) { return counted_alloc(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_alloc(n, std::size_t(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_alloc(n, std::size_t(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    try {
        return counted_alloc(n, 0);
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    try {
        return counted_alloc(n, 0);
    } catch (...) {
        return nullptr;
    }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif

using namespace std::chrono_literals;

namespace {
struct Loop {
    std::atomic<long> waits{0};
    std::atomic<long> bad{0};
    std::atomic<bool> quit{false};
    std::atomic<bool> finished{false};
};

// Counts await_suspend's allocations on whatever thread runs it (the
// awaiter may be gone when it returns: only the thread_local is touched).
template <class A>
struct counted {
    A inner;
    bool await_ready() noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h) {
        t_counting = true;
        const bool r = inner.await_suspend(h);
        t_counting = false;
        return r;
    }
    tickwheel::wake await_resume() noexcept { return inner.await_resume(); }
};

// One coroutine frame (allocated once), many waits.
tickwheel::detached looper(tickwheel::Runtime* rt, tickwheel::resume_on where, tickwheel::Duration d,
                           std::stop_token st, Loop* l) {
    while (!l->quit.load()) {
        // A named awaiter: g++ 12 destroys the members of a braced
        // temporary awaiter twice inside co_await (the stop_token's count).
        counted<tickwheel::sleep_awaiter> a{tickwheel::sleep_for(*rt, d, where, st)};
        const tickwheel::wake w = co_await a;
        if (w != tickwheel::wake::expired) { if (l->bad.fetch_add(1) == 0) std::printf("first bad wake: %s\n", tickwheel::to_string(w)); }
        l->waits.fetch_add(1);
    }
    l->finished = true;
}

// The same with a plain callback timer that re-arms itself from its callback.
struct Chain {
    tickwheel::Runtime* rt;
    tickwheel::StartOptions o;
    Loop* l;
    void arm() {
        Chain* self = this;
        rt->start(o, [self] {
            self->l->waits.fetch_add(1);
            if (!self->l->quit.load()) self->arm();
            else self->l->finished = true;
        });
    }
};

enum class Scope { thread, all };
template <class Step>
long allocations_during(Loop& l, long warmup, long measured, Scope scope, Step step) {
    while (l.waits.load() < warmup) step();
    g_news = 0;
    if (scope == Scope::all) g_counting = true;
    else t_counting = true;
    const long from = l.waits.load();
    while (l.waits.load() < from + measured) step();
    g_counting = false;
    t_counting = false;
    return g_news.load();
}
}  // namespace

#ifdef TW_NO_NEW_REPLACEMENT
#  define TW_SKIP_UNDER_SANITIZER() GTEST_SKIP() << "the sanitizer runtime owns operator new"
#else
#  define TW_SKIP_UNDER_SANITIZER() (void)0
#endif

TEST(CoroAlloc, NoAllocationPerWaitOnTheQueueThread) {
    TW_SKIP_UNDER_SANITIZER();
    tickwheel::Config c;
    c.resolution = 50us;
    tickwheel::Runtime rt(c);
    tickwheel::Queue q(rt);
    std::stop_source ss;  // a live source: the stop callback is registered at each wait
    Loop l;
    looper(&rt, tickwheel::on_queue(q), 0ns, ss.get_token(), &l);
    const long n = allocations_during(l, 2000, 2000, Scope::thread, [&] { q.run(64, 10ms); });
    EXPECT_EQ(n, 0) << "operator new calls on the loop thread during 2000 co_await sleep_for through a queue";
    l.quit = true;
    while (!l.finished.load()) q.run(64, 10ms);
    EXPECT_EQ(l.bad.load(), 0);
}

TEST(CoroAlloc, NoAllocationPerWaitInAwaitSuspendOnAWorker) {
    TW_SKIP_UNDER_SANITIZER();
    tickwheel::Config c;
    c.resolution = 50us;
    tickwheel::Runtime rt(c);
    std::stop_source ss;
    Loop l;
    looper(&rt, tickwheel::on_worker(), 0ns, ss.get_token(), &l);
    const auto end = std::chrono::steady_clock::now() + 20s;
    const long n = allocations_during(l, 2000, 2000, Scope::thread, [&] {
        if (std::chrono::steady_clock::now() > end) l.waits = 1L << 40;  // fail below rather than hang
        std::this_thread::sleep_for(1ms);
    });
    l.quit = true;
    while (!l.finished.load()) std::this_thread::sleep_for(1ms);
    EXPECT_LT(l.waits.load(), 1L << 40) << "the loop stalled";
    EXPECT_EQ(n, 0) << "operator new calls in await_suspend during 2000 co_await sleep_for on a worker";
    EXPECT_EQ(l.bad.load(), 0);
}

TEST(CoroAlloc, AWaitCostsWhatAPlainCallbackTimerCostsOnAManualRuntime) {
    TW_SKIP_UNDER_SANITIZER();
    tickwheel::Config c;
    c.manual_clock = true;
    long coro = 0, plain = 0;
    {
        tickwheel::Runtime rt(c);
        std::stop_source ss;
        Loop l;
        looper(&rt, tickwheel::on_worker(), 1ms, ss.get_token(), &l);
        coro = allocations_during(l, 2000, 2000, Scope::all, [&] { rt.advance(1ms); });
        l.quit = true;
        rt.advance(1ms);
        EXPECT_TRUE(l.finished.load());
        EXPECT_EQ(l.bad.load(), 0);
    }
    {
        tickwheel::Runtime rt(c);
        Loop l;
        Chain chain{&rt, {}, &l};
        chain.o.delay = 1ms;
        chain.arm();
        plain = allocations_during(l, 2000, 2000, Scope::all, [&] { rt.advance(1ms); });
        l.quit = true;
        rt.advance(1ms);
        EXPECT_TRUE(l.finished.load());
    }
    std::printf("operator new calls per 2000 waits, all threads: co_await %ld, plain callback %ld\n", coro, plain);
    EXPECT_EQ(coro, plain) << "the coroutine layer allocates per wait";
}
