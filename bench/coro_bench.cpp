// SPDX-License-Identifier: MIT OR Apache-2.0
// coro_bench (issue 24): the cost of `co_await tickwheel::sleep_for` and its
// resumption through a delivery queue, against
//   plain  -- the same with a plain callback timer on the same queue (each
//             run starts the next timer, as each co_await does), and
//   asio   -- Asio's steady_timer awaited by asio::awaitable (use_awaitable)
//             on one io_context thread (standalone Asio, libasio-dev).
// K waiters each sleep `d` in a loop until M wake-ups happened in all; one
// loop thread runs q.run() / io.run(). Reported per wake-up: wall time on the
// loop and CPU time of the whole process (tickwheel's shard threads included;
// Asio has none). Rounds are interleaved (coro, plain, asio, coro, ...) so
// that the load of a shared machine falls on all three; the summary gives the
// min / median / max over rounds.
//
//   coro_bench [--waiters 1000] [--wakes 200000] [--delay-us 50] [--rounds 5]
#include <algorithm>
#include <asio.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "tickwheel/coro.hpp"

using namespace std::chrono_literals;

namespace {
long g_waiters = 1000, g_wakes = 200000, g_delay_us = 50;

struct Cost {
    double wall_ns = 0, cpu_ns = 0;
};

double cpu_now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

struct Meter {
    std::chrono::steady_clock::time_point w0 = std::chrono::steady_clock::now();
    double c0 = cpu_now_ns();
    Cost done(long n) const {
        const double wall = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - w0).count();
        return {wall / double(n), (cpu_now_ns() - c0) / double(n)};
    }
};

tickwheel::Config config() {
    tickwheel::Config c;
    c.resolution = 10us;
    return c;
}

// ---- tickwheel coroutine ---------------------------------------------------
long g_count = 0;  // only the loop thread touches it
bool g_quit = false;

tickwheel::detached coro_waiter(tickwheel::Runtime& rt, tickwheel::Queue& q, tickwheel::Duration d, long* live) {
    while (!g_quit) {
        const tickwheel::wake w = co_await tickwheel::sleep_for(rt, d, tickwheel::on_queue(q));
        if (w != tickwheel::wake::expired) break;
        if (++g_count >= g_wakes) g_quit = true;
    }
    --*live;
}

// A round on a delivery queue: a fresh runtime and queue, the counters reset,
// g_waiters waiters live (each decrements `live` when it ends); drain(m)
// runs the queue until none is, and answers the cost per wake since m.
struct QueueRound {
    tickwheel::Runtime rt{config()};
    tickwheel::Queue q{rt};
    long live = g_waiters;
    QueueRound() {
        g_count = 0;
        g_quit = false;
    }
    Cost drain(const Meter& m) {
        while (live > 0) q.run(1024, tickwheel::Queue::kForever);
        return m.done(g_count);
    }
};

Cost run_coro() {
    QueueRound r;
    const Meter m;
    for (long i = 0; i < g_waiters; ++i) coro_waiter(r.rt, r.q, std::chrono::microseconds(g_delay_us), &r.live);
    return r.drain(m);
}

// ---- plain callback timer --------------------------------------------------
struct Plain {
    tickwheel::Runtime* rt;
    tickwheel::StartOptions o;
    long* live;
    void arm() {
        Plain* self = this;
        rt->start(o, [self] {
            if (g_quit) {
                --*self->live;
                return;
            }
            if (++g_count >= g_wakes) g_quit = true;
            self->arm();
        });
    }
};

Cost run_plain() {
    QueueRound r;
    std::vector<Plain> timers(std::size_t(g_waiters), Plain{&r.rt, {}, &r.live});
    const Meter m;
    for (auto& p : timers) {
        p.o.delay = std::chrono::microseconds(g_delay_us);
        p.o.queue = &r.q;
        p.arm();
    }
    return r.drain(m);
}

// ---- Asio steady_timer + use_awaitable -------------------------------------
asio::awaitable<void> asio_waiter(std::chrono::microseconds d) {
    asio::steady_timer t(co_await asio::this_coro::executor);
    while (!g_quit) {
        t.expires_after(d);
        co_await t.async_wait(asio::use_awaitable);
        if (++g_count >= g_wakes) g_quit = true;
    }
}

Cost run_asio() {
    asio::io_context io(1);
    g_count = 0;
    g_quit = false;
    const Meter m;
    for (long i = 0; i < g_waiters; ++i)
        asio::co_spawn(io, asio_waiter(std::chrono::microseconds(g_delay_us)), asio::detached);
    io.run();
    return m.done(g_count);
}

long arg(int argc, char** argv, const char* name, long def) {
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], name) == 0) return std::atol(argv[i + 1]);
    return def;
}

void summary(const char* name, std::vector<Cost> v) {
    auto pick = [&](auto field) {
        std::vector<double> x;
        for (const Cost& c : v) x.push_back(c.*field);
        std::sort(x.begin(), x.end());
        return std::vector<double>{x.front(), x[x.size() / 2], x.back()};
    };
    const auto w = pick(&Cost::wall_ns), c = pick(&Cost::cpu_ns);
    std::printf("%-6s wall/wake ns: min %7.0f  median %7.0f  max %7.0f   cpu/wake ns: min %7.0f  median %7.0f  max %7.0f\n",
                name, w[0], w[1], w[2], c[0], c[1], c[2]);
}
}  // namespace

int main(int argc, char** argv) {
    g_waiters = arg(argc, argv, "--waiters", g_waiters);
    g_wakes = arg(argc, argv, "--wakes", g_wakes);
    g_delay_us = arg(argc, argv, "--delay-us", g_delay_us);
    const long rounds = arg(argc, argv, "--rounds", 5);
    std::printf("coro_bench: %ld waiters, %ld wake-ups per run, sleeps of %ld us, %ld rounds (interleaved)\n",
                g_waiters, g_wakes, g_delay_us, rounds);
    std::vector<Cost> coro, plain, asio_v;
    for (long r = 0; r < rounds; ++r) {
        coro.push_back(run_coro());
        plain.push_back(run_plain());
        asio_v.push_back(run_asio());
        std::printf("round %ld: coro %.0f/%.0f  plain %.0f/%.0f  asio %.0f/%.0f  (wall/cpu ns per wake)\n", r,
                    coro.back().wall_ns, coro.back().cpu_ns, plain.back().wall_ns, plain.back().cpu_ns,
                    asio_v.back().wall_ns, asio_v.back().cpu_ns);
    }
    summary("coro", coro);
    summary("plain", plain);
    summary("asio", asio_v);
    std::vector<double> ratio;
    for (long r = 0; r < rounds; ++r) ratio.push_back(coro[std::size_t(r)].cpu_ns / plain[std::size_t(r)].cpu_ns);
    std::sort(ratio.begin(), ratio.end());
    std::printf("coro/plain cpu ratio per round: min %.2f median %.2f max %.2f\n", ratio.front(),
                ratio[ratio.size() / 2], ratio.back());
    return 0;
}
