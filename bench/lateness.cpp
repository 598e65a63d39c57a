// SPDX-License-Identifier: MIT OR Apache-2.0
// Lateness under a steady stream: `rate` timers per second with delays
// uniform in [0, max_delay], for `seconds`; lateness = callback start minus
// the deadline the caller computed (Clock::now() + delay before start()).
// Prints p50/p99/p99.9/max, the number of early firings (must be 0), and the
// process's CPU time (all threads, the pacing one included) per timer.
//
//   lateness [rate=100000] [seconds=5] [resolution_us=1000] [max_delay_ms=2000] [delivery=workers]
//
// delivery: `workers` (callbacks on the runtime's oneTBB workers), `queue`
// (a delivery queue whose fd an epoll thread polls, running the due
// callbacks with Queue::run on that thread), or `both`: the two, one after
// the other, in one process (the same machine state, for an A/B).
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "thread_stats.hpp"
#include "tickwheel/runtime.hpp"

using namespace std::chrono;
using tickwheel::Clock;

namespace {

struct Result {
    std::size_t fired = 0;
    long early = 0;
    double p50 = 0, p99 = 0, p999 = 0, max = 0;  // us
    double cpu_s = 0, wall_s = 0;                 // process CPU and wall time of the run
    tw_threads::Totals threads;                   // the same CPU by thread kind (clock-tick resolution)
};

double cpu_seconds() {
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

Result measure(long rate, int secs, long res_us, long max_delay_ms, bool queue) {
    const std::size_t total = static_cast<std::size_t>(rate) * static_cast<std::size_t>(secs);
    tickwheel::Config cfg;
    cfg.resolution = microseconds(res_us);
    std::vector<std::int64_t> late(total, -1);
    std::atomic<std::size_t> done{0};
    std::atomic<long> early{0};
    const double cpu0 = cpu_seconds();
    const auto wall0 = steady_clock::now();
    double cpu_s = 0, wall_s = 0;
    tw_threads::Totals threads;
    {
        tickwheel::Runtime rt(cfg);
        std::optional<tickwheel::Queue> q;  // only in queue mode: no queue, no queue costs
        if (queue) q.emplace(rt);
        std::atomic<bool> stop_loop{false};
        std::thread loop;
        if (queue) {
            // The program's event loop: epoll on the queue's fd, runs what is due.
            loop = std::thread([&] {
                const int ep = epoll_create1(EPOLL_CLOEXEC);
                epoll_event ev{};
                ev.events = EPOLLIN;
                epoll_ctl(ep, EPOLL_CTL_ADD, q->fd(), &ev);
                epoll_event out{};
                while (!stop_loop.load(std::memory_order_relaxed)) {
                    if (epoll_wait(ep, &out, 1, 50) == 1) q->run(4096);
                }
                ::close(ep);
            });
        }
        std::mt19937_64 rng(1);
        std::uniform_int_distribution<std::int64_t> delay_ns(0, max_delay_ms * 1'000'000);
        tickwheel::StartOptions o;
        o.queue = queue ? &*q : nullptr;
        const auto t0 = Clock::now();
        std::size_t started = 0;
        // Pace: every half millisecond, start the timers that are due by now.
        while (started < total) {
            const auto target = static_cast<std::size_t>(
                std::min<double>(static_cast<double>(total),
                                 duration<double>(Clock::now() - t0).count() * static_cast<double>(rate)));
            for (; started < target; ++started) {
                o.delay = nanoseconds(delay_ns(rng));
                const auto deadline = Clock::now() + o.delay;
                const std::size_t slot = started;
                rt.start(o, [deadline, slot, &late, &done, &early] {
                    const auto l = duration_cast<nanoseconds>(Clock::now() - deadline).count();
                    if (l < 0) early++;
                    late[slot] = l;
                    done++;
                });
            }
            std::this_thread::sleep_for(microseconds(500));
        }
        while (done.load() < total && Clock::now() - t0 < seconds(secs + max_delay_ms / 1000 + 10))
            std::this_thread::sleep_for(milliseconds(10));
        cpu_s = cpu_seconds() - cpu0;  // before the runtime's teardown
        threads = tw_threads::read();
        wall_s = duration<double>(steady_clock::now() - wall0).count();
        stop_loop.store(true);
        if (loop.joinable()) loop.join();
        if (q) {
            // Where a queue's lateness comes from: the runtime's part
            // (deadline -> fd readable) and the loop's (-> callback start).
            const tickwheel::QueueStats st = q->stats();
            auto us = [](tickwheel::Duration d) { return static_cast<double>(d.count()) / 1000.0; };
            std::printf("  queue: deadline->readable us p50=%.0f p99=%.0f p99.9=%.0f max=%.0f; "
                        "deadline->run us p50=%.0f p99=%.0f p99.9=%.0f max=%.0f (tick-rounded deadlines)\n",
                        us(st.signal_p50), us(st.signal_p99), us(st.signal_p999), us(st.signal_max), us(st.run_p50),
                        us(st.run_p99), us(st.run_p999), us(st.run_max));
        }
    }
    std::vector<std::int64_t> v(late.begin(), late.end());
    std::sort(v.begin(), v.end());
    auto at = [&](double p) {
        return static_cast<double>(v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))]) / 1000.0;
    };
    Result r;
    r.fired = done.load();
    r.early = early.load();
    r.p50 = at(0.5);
    r.p99 = at(0.99);
    r.p999 = at(0.999);
    r.max = at(1.0);
    r.cpu_s = cpu_s;
    r.wall_s = wall_s;
    r.threads = threads;
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    const long rate = argc > 1 ? std::atol(argv[1]) : 100000;
    const int secs = argc > 2 ? std::atoi(argv[2]) : 5;
    const long res_us = argc > 3 ? std::atol(argv[3]) : 1000;
    const long max_delay_ms = argc > 4 ? std::atol(argv[4]) : 2000;
    const std::string delivery = argc > 5 ? argv[5] : "workers";
    if (rate <= 0 || secs <= 0 || res_us <= 0 || max_delay_ms < 0 ||
        (delivery != "workers" && delivery != "queue" && delivery != "both")) {
        std::fprintf(stderr, "usage: lateness [rate] [seconds] [resolution_us] [max_delay_ms] [workers|queue|both]\n");
        return 2;
    }
    const std::size_t total = static_cast<std::size_t>(rate) * static_cast<std::size_t>(secs);
    bool ok = true;
    for (const bool queue : {false, true}) {
        if ((queue && delivery == "workers") || (!queue && delivery == "queue")) continue;
        const Result r = measure(rate, secs, res_us, max_delay_ms, queue);
        std::printf("delivery=%s rate=%ld/s seconds=%d resolution=%ld us timers=%zu fired=%zu early=%ld\n",
                    queue ? "queue(epoll)" : "workers", rate, secs, res_us, total, r.fired, r.early);
        std::printf("  lateness us: p50=%.0f p99=%.0f p99.9=%.0f max=%.0f\n", r.p50, r.p99, r.p999, r.max);
        std::printf("  cpu: %.2f s over %.1f s wall (%.1f%% of one core), %.2f us per timer\n", r.cpu_s, r.wall_s,
                    100.0 * r.cpu_s / r.wall_s, 1e6 * r.cpu_s / static_cast<double>(total));
        std::printf("  cpu by thread (s): shards %.2f, workers %.2f, other %.2f\n", r.threads.shard_cpu_s,
                    r.threads.worker_cpu_s, r.threads.other_cpu_s);
        ok = ok && r.early == 0 && r.fired == total;
    }
    return ok ? 0 : 1;
}
