// SPDX-License-Identifier: MIT OR Apache-2.0
// coro_stress: T threads x N coroutines that co_await tickwheel::sleep_for
// and are stopped at random moments -- before the co_await (arming), while
// pending, while due in a queue, while being resumed, from their own thread
// and from another -- resumed on a worker, on one of two delivery queues (a
// loop thread each) or through a user executor (a thread with a deque).
// Checks, per coroutine: resumed exactly once; on the context it asked for;
// with a right reason (stopped only if a stop was requested, always if it was
// requested before the co_await; expired only once the deadline passed).
// Then a shutdown with coroutines still sleeping: each resumes exactly once
// with shutdown (on the shutting-down thread, or posted to the executor).
//
//   coro_stress [--threads 8] [--per-thread 1000000] [--window 2048] [--seed S]
//
// ctest runs it bounded (stress/CMakeLists.txt: 8 x 20,000 in release, less
// under the sanitizers); the full 8 x 10^6 is run by hand.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "handle_queue.hpp"
#include "tickwheel/coro.hpp"

using namespace std::chrono_literals;
using tickwheel::wake;

namespace {
thread_local int t_ctx = 0;  // 0: a runtime worker
constexpr int kQueueCtx = 100, kExecCtx = 200, kSpawnerCtx = 300, kShutdownCtx = 999;
constexpr int kQueues = 2;

std::atomic<long> g_failures{0};
void fail(const char* what, long idx) {
    if (g_failures.fetch_add(1) < 20) std::fprintf(stderr, "FAIL: %s (coroutine %ld)\n", what, idx);
}

// A user-supplied executor: one thread draining a deque.
struct Executor : stress::HandleQueue {
    std::thread th;
    static void post(void* self, std::coroutine_handle<> h) noexcept { static_cast<Executor*>(self)->push(h); }
    void start() {
        th = std::thread([this] {
            t_ctx = kExecCtx;
            std::unique_lock<std::mutex> lk(m);
            for (;;) {
                cv.wait(lk, [&] { return quit || !q.empty(); });
                if (q.empty()) return;
                auto h = q.front();
                q.pop_front();
                lk.unlock();
                h.resume();
                lk.lock();
            }
        });
    }
    void stop() {
        {
            std::lock_guard<std::mutex> lk(m);
            quit = true;
        }
        cv.notify_one();
        th.join();
    }
};

struct Rec {
    std::stop_source ss;
    std::atomic<int> resumed{0};
    wake why{};
    int ctx_want = 0;
    int ctx_got = -1;
    bool stop_before = false;
    std::atomic<bool> stop_asked{false};
    std::int64_t due_ns = 0;  // deadline (steady_clock ns)
    std::int64_t at_ns = 0;   // when it resumed
    long idx = 0;
};

std::int64_t now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

tickwheel::detached sleeper(tickwheel::Runtime* rt, tickwheel::resume_on where, tickwheel::Duration d, Rec* r) {
    const wake w = co_await tickwheel::sleep_for(*rt, d, where, r->ss.get_token());
    r->why = w;
    r->ctx_got = t_ctx;
    r->at_ns = now_ns();
    r->resumed.fetch_add(1, std::memory_order_acq_rel);
}

long arg(int argc, char** argv, const char* name, long def) {
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], name) == 0) return std::atol(argv[i + 1]);
    return def;
}
}  // namespace

int main(int argc, char** argv) {
    const int threads = int(arg(argc, argv, "--threads", 8));
    const long per_thread = arg(argc, argv, "--per-thread", 1'000'000);
    const long window = std::max(1L, std::min(per_thread, arg(argc, argv, "--window", 2048)));
    const std::uint64_t seed = std::uint64_t(arg(argc, argv, "--seed", long(std::random_device{}())));
    std::printf("coro_stress: %d threads x %ld coroutines (window %ld), seed %llu\n", threads, per_thread, window,
                static_cast<unsigned long long>(seed));
    const auto t_begin = std::chrono::steady_clock::now();

    auto rt = std::make_unique<tickwheel::Runtime>();
    std::vector<std::unique_ptr<tickwheel::Queue>> queues;
    std::vector<std::thread> loops;
    std::atomic<bool> loops_quit{false};
    for (int k = 0; k < kQueues; ++k) queues.push_back(std::make_unique<tickwheel::Queue>(*rt));
    for (int k = 0; k < kQueues; ++k)
        loops.emplace_back([&, k] {
            t_ctx = kQueueCtx + k;
            std::error_code ec;
            while (!loops_quit.load()) {
                queues[std::size_t(k)]->run(256, 1ms, ec);
                if (ec) break;  // shut down
            }
        });
    Executor ex;
    ex.start();

    const long windows = (per_thread + window - 1) / window;
    std::vector<std::unique_ptr<Rec[]>> recs;
    for (int t = 0; t < threads; ++t) recs.push_back(std::make_unique<Rec[]>(static_cast<std::size_t>(window)));
    std::barrier sync(threads);
    std::atomic<long> counts[5] = {};
    std::atomic<long> total{0};

    auto body = [&](int t) {
        t_ctx = kSpawnerCtx + t;
        std::mt19937_64 g(seed * 1000003u + std::uint64_t(t));
        Rec* mine = recs[std::size_t(t)].get();
        Rec* partner = recs[std::size_t((t + 1) % threads)].get();
        for (long w = 0; w < windows; ++w) {
            const long n = std::min(window, per_thread - w * window);
            for (long i = 0; i < n; ++i) {
                Rec& r = mine[std::size_t(i)];
                r.ss = std::stop_source();
                r.resumed.store(0);
                r.stop_asked.store(false);
                r.stop_before = false;
                r.ctx_got = -1;
                r.idx = (long(t) * per_thread) + w * window + i;
            }
            sync.arrive_and_wait();  // partners' records are ready
            for (long i = 0; i < n; ++i) {
                Rec& r = mine[std::size_t(i)];
                const unsigned kind = unsigned(g() % 4);
                tickwheel::resume_on where = tickwheel::on_worker();
                r.ctx_want = 0;
                if (kind == 1 || kind == 2) {
                    where = tickwheel::on_queue(*queues[kind - 1]);
                    r.ctx_want = kQueueCtx + int(kind - 1);
                } else if (kind == 3) {
                    where = tickwheel::on_executor(&ex, &Executor::post);
                    r.ctx_want = kExecCtx;
                }
                const unsigned roll = unsigned(g() % 100);
                const auto d = tickwheel::Duration(std::int64_t(g() % 3'000'000));  // 0 .. 3 ms
                if (roll < 10) {  // stopped before the co_await
                    r.stop_before = true;
                    r.stop_asked = true;
                    r.ss.request_stop();
                }
                r.due_ns = now_ns() + d.count();
                sleeper(rt.get(), where, d, &r);
                if (roll >= 10 && roll < 20) {  // right after arming, from this thread
                    r.stop_asked = true;
                    r.ss.request_stop();
                }
                if (roll >= 20 && roll < 30 && i > 0) {  // the partner's, from here: any moment of theirs
                    Rec& p = partner[std::size_t(g() % std::uint64_t(n))];
                    p.stop_asked = true;
                    p.ss.request_stop();
                }
            }
            // Stop more at random moments while they sleep, are due, resume.
            for (long k = 0; k < n / 8; ++k) {
                Rec& r = mine[std::size_t(g() % std::uint64_t(n))];
                r.stop_asked = true;
                r.ss.request_stop();
                if (k % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(g() % 300));
            }
            const auto give_up = std::chrono::steady_clock::now() + 60s;
            for (long i = 0; i < n; ++i) {
                Rec& r = mine[std::size_t(i)];
                while (r.resumed.load(std::memory_order_acquire) == 0) {
                    if (std::chrono::steady_clock::now() > give_up) {
                        fail("never resumed (lost)", r.idx);
                        std::fflush(stderr);
                        std::_Exit(1);
                    }
                    std::this_thread::sleep_for(100us);
                }
            }
            sync.arrive_and_wait();  // nobody touches the partner's records any more
            for (long i = 0; i < n; ++i) {
                Rec& r = mine[std::size_t(i)];
                if (r.resumed.load() != 1) fail("resumed more than once", r.idx);
                if (r.ctx_got != r.ctx_want) fail("resumed on the wrong context", r.idx);
                switch (r.why) {
                    case wake::stopped:
                        if (!r.stop_asked.load() && !r.ss.stop_requested()) fail("stopped without a stop", r.idx);
                        break;
                    case wake::expired:
                        if (r.stop_before) fail("expired although stopped before the co_await", r.idx);
                        if (r.at_ns < r.due_ns) fail("expired before its deadline", r.idx);
                        break;
                    default:
                        fail("a wrong reason (shutdown/timed_out/notified)", r.idx);
                }
                if (!r.stop_asked.load() && !r.ss.stop_requested() && r.why != wake::expired)
                    fail("not stopped, yet not expired", r.idx);
                counts[int(r.why)].fetch_add(1);
            }
            total.fetch_add(n);
        }
    };
    std::vector<std::thread> spawners;
    for (int t = 0; t < threads; ++t) spawners.emplace_back(body, t);
    for (auto& th : spawners) th.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_begin).count();
    std::printf("coro_stress: %ld coroutines in %.2f s: expired %ld, stopped %ld\n", total.load(), secs,
                counts[int(wake::expired)].load(), counts[int(wake::stopped)].load());

    // Shutdown with coroutines asleep: each resumes once with shutdown.
    constexpr int kAsleep = 3000;
    auto asleep = std::make_unique<Rec[]>(kAsleep);
    for (int i = 0; i < kAsleep; ++i) {
        Rec& r = asleep[std::size_t(i)];
        r.idx = i;
        tickwheel::resume_on where = tickwheel::on_worker();
        r.ctx_want = kShutdownCtx;
        if (i % 3 == 1) where = tickwheel::on_queue(*queues[std::size_t(i % kQueues)]);
        if (i % 3 == 2) {
            where = tickwheel::on_executor(&ex, &Executor::post);
            r.ctx_want = kExecCtx;
        }
        sleeper(rt.get(), where, 1h, &r);
    }
    t_ctx = kShutdownCtx;
    rt->shutdown();
    loops_quit = true;
    for (auto& l : loops) l.join();
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    for (int i = 0; i < kAsleep; ++i) {
        Rec& r = asleep[std::size_t(i)];
        while (r.resumed.load() == 0 && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(100us);
        if (r.resumed.load() != 1) fail("at shutdown: not resumed exactly once", r.idx);
        if (r.why != wake::shutdown) fail("at shutdown: not shutdown", r.idx);
        if (r.ctx_got != r.ctx_want) fail("at shutdown: the wrong context", r.idx);
    }
    ex.stop();
    queues.clear();
    rt.reset();
    for (int i = 0; i < kAsleep; ++i)
        if (asleep[std::size_t(i)].resumed.load() != 1) fail("resumed again after shutdown", i);
    if (g_failures.load() != 0) {
        std::printf("coro_stress: %ld FAILURES\n", g_failures.load());
        return 1;
    }
    std::printf("coro_stress: OK (shutdown: %d sleeping coroutines resumed once with shutdown)\n", kAsleep);
    return 0;
}
