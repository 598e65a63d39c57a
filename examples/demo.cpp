// SPDX-License-Identifier: MIT OR Apache-2.0
// tickwheel demo: a simulated server.
//
// Several "network threads" open connections, each guarded by an idle
// timeout (a one-shot timer). Simulated traffic re-arms the timeout (the
// keepalive pattern: re-armed on every packet, rarely fires); some
// connections close gracefully (stop), idle ones time out (the callback).
// A periodic timer prints a live line every second; a summary and an exact
// accounting check close the run (exit status 1 if anything is off).
//
//   demo [--metrics] [seconds=5] [threads=4] [connections per thread=20000]
//
// --metrics: after the summary, print the runtime's final metrics in the
// Prometheus text format (Runtime::metrics()), after a line
// "# tickwheel metrics" (a comment of that format).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include "tickwheel/runtime.hpp"

using namespace std::chrono;
using tickwheel::Clock;
using tickwheel::Runtime;

namespace {

struct Conn {
    std::atomic<bool> open{false};
    std::atomic<std::int64_t> deadline_ns{0};  // earliest moment its timeout may fire
    std::uint64_t timer = 0;                   // owned by the connection's thread
};

struct Totals {
    std::atomic<long> opened{0}, closed{0}, timed_out{0}, rearmed{0}, rearm_late{0}, early{0};
};

std::int64_t now_ns() { return duration_cast<nanoseconds>(Clock::now().time_since_epoch()).count(); }

void network_thread(Runtime& rt, Totals& t, std::vector<Conn>& conns, unsigned seed,
                    const std::atomic<bool>& running) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> idle_ms(100, 1000);
    while (running.load(std::memory_order_relaxed)) {
        for (int op = 0; op < 500; ++op) {
            Conn& c = conns[rng() % conns.size()];
            const milliseconds idle(idle_ms(rng));
            if (!c.open.load(std::memory_order_acquire)) {  // accept a new connection
                c.open.store(true, std::memory_order_relaxed);
                c.deadline_ns.store(now_ns() + nanoseconds(idle).count(), std::memory_order_relaxed);
                c.timer = rt.start(idle, [&c, &t] {  // idle timeout: close it
                              if (now_ns() < c.deadline_ns.load(std::memory_order_relaxed)) t.early++;
                              t.timed_out++;
                              c.open.store(false, std::memory_order_release);
                          }).id();
                t.opened++;
            } else if (rng() % 100 < 85) {  // a packet: push the idle timeout back
                const std::int64_t d = now_ns() + nanoseconds(idle).count();
                if (rt.reset(c.timer, idle)) {
                    c.deadline_ns.store(d, std::memory_order_relaxed);
                    t.rearmed++;
                } else {
                    t.rearm_late++;  // it timed out just before the packet
                }
            } else if (rt.stop(c.timer)) {  // graceful close
                t.closed++;
                c.open.store(false, std::memory_order_release);
            }
        }
        std::this_thread::sleep_for(milliseconds(2));
    }
}

}  // namespace

int main(int argc, char** argv) {
    bool print_metrics = false;
    std::vector<const char*> args;  // the positional ones
    for (int i = 1; i < argc; ++i) {
        if (std::string_view(argv[i]) == "--metrics")
            print_metrics = true;
        else
            args.push_back(argv[i]);
    }
    const int seconds_to_run = args.size() > 0 ? std::atoi(args[0]) : 5;
    const int nthreads = args.size() > 1 ? std::atoi(args[1]) : 4;
    const int per_thread = args.size() > 2 ? std::atoi(args[2]) : 20000;
    if (seconds_to_run <= 0 || nthreads <= 0 || per_thread <= 0 || args.size() > 3) {
        std::fprintf(stderr, "usage: demo [--metrics] [seconds>0] [threads>0] [connections per thread>0]\n");
        return 2;
    }

    Runtime rt;  // one shard per CPU, one TBB worker per CPU, 1 ms ticks
    Totals t;
    std::printf("tickwheel demo: %d network threads x %d connections, idle timeout 100-1000 ms, "
                "%u shards, %u workers, %lld us ticks, %d s\n",
                nthreads, per_thread, rt.shard_count(), rt.worker_count(),
                static_cast<long long>(duration_cast<microseconds>(rt.resolution()).count()), seconds_to_run);
    std::printf("%5s %9s %10s %10s %9s %9s %22s %11s\n", "t(s)", "open", "rearms/s", "timeouts/s",
                "closes/s", "pending", "pending per shard", "late p99");

    // The live line is itself a periodic timer.
    const auto t0 = Clock::now();
    long last_rearmed = 0, last_timed_out = 0, last_closed = 0;
    auto ticker = rt.start_periodic(seconds(1), [&](tickwheel::Timer) {
        const auto s = rt.stats();
        std::size_t pending = 0;
        char per_shard[64] = "";
        int off = 0;
        for (std::size_t i = 0; i < s.pending_per_shard.size(); ++i) {
            pending += s.pending_per_shard[i];
            if (i < 4 && off < 48)
                off += std::snprintf(per_shard + off, sizeof per_shard - static_cast<std::size_t>(off), "%s%zu",
                                     i ? "/" : "", s.pending_per_shard[i]);
        }
        const long re = t.rearmed.load(), to = t.timed_out.load(), cl = t.closed.load();
        std::printf("%5.1f %9ld %10ld %10ld %9ld %9zu %22s %8.0f us\n",
                    duration<double>(Clock::now() - t0).count(), t.opened.load() - cl - to, re - last_rearmed,
                    to - last_timed_out, cl - last_closed, pending, per_shard,
                    duration<double, std::micro>(s.lateness_p99).count());
        std::fflush(stdout);
        last_rearmed = re;
        last_timed_out = to;
        last_closed = cl;
    });

    std::atomic<bool> running{true};
    std::vector<std::vector<Conn>> conns(static_cast<std::size_t>(nthreads));
    std::vector<std::thread> threads;
    for (int i = 0; i < nthreads; ++i) {
        conns[static_cast<std::size_t>(i)] = std::vector<Conn>(static_cast<std::size_t>(per_thread));
        threads.emplace_back(network_thread, std::ref(rt), std::ref(t), std::ref(conns[static_cast<std::size_t>(i)]),
                             1234u + static_cast<unsigned>(i), std::cref(running));
    }
    std::this_thread::sleep_for(seconds(seconds_to_run));
    running = false;
    for (auto& th : threads) th.join();
    ticker.stop_sync();

    rt.shutdown();  // cancels the connections still open (their timers are pending)
    const auto s = rt.stats();
    const long opened = t.opened, closed = t.closed, timed_out = t.timed_out;
    const long at_shutdown = static_cast<long>(s.cancelled_at_shutdown);
    const bool exact = opened == closed + timed_out + at_shutdown;
    std::printf("\nsummary after %.1f s\n", duration<double>(Clock::now() - t0).count());
    std::printf("  connections opened        %ld\n", opened);
    std::printf("  closed gracefully (stop)  %ld\n", closed);
    std::printf("  timed out (callback)      %ld\n", timed_out);
    std::printf("  still open at shutdown    %ld (cancelled by shutdown)\n", at_shutdown);
    std::printf("  re-arms (reset)           %ld, %ld came after the timeout\n", t.rearmed.load(), t.rearm_late.load());
    std::printf("  timer starts/fires/stops  %llu / %llu / %llu\n", static_cast<unsigned long long>(s.started),
                static_cast<unsigned long long>(s.fired), static_cast<unsigned long long>(s.stopped));
    std::printf("  lateness p50/p99/p99.9/max %.0f / %.0f / %.0f / %.0f us (after the 1 ms tick boundary)\n",
                duration<double, std::micro>(s.lateness_p50).count(), duration<double, std::micro>(s.lateness_p99).count(),
                duration<double, std::micro>(s.lateness_p999).count(), duration<double, std::micro>(s.lateness_max).count());
    std::printf("  fired early               %ld\n", t.early.load());
    std::printf("  accounting                %s: opened = closed + timed out + cancelled at shutdown\n",
                exact ? "exact" : "MISMATCH");
    if (print_metrics) std::printf("\n# tickwheel metrics\n%s", rt.metrics().c_str());  // the final values
    return exact && t.early == 0 ? 0 : 1;
}
