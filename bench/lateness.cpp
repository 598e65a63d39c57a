// SPDX-License-Identifier: MIT OR Apache-2.0
// Lateness under a steady stream: `rate` timers per second with delays
// uniform in [0, max_delay], for `seconds`; lateness = callback start minus
// the deadline the caller computed (Clock::now() + delay before start()).
// Prints p50/p99/p99.9/max and the number of early firings (must be 0).
//
//   lateness [rate=100000] [seconds=5] [resolution_us=1000] [max_delay_ms=2000]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "tickwheel/runtime.hpp"

using namespace std::chrono;
using tickwheel::Clock;

int main(int argc, char** argv) {
    const long rate = argc > 1 ? std::atol(argv[1]) : 100000;
    const int secs = argc > 2 ? std::atoi(argv[2]) : 5;
    const long res_us = argc > 3 ? std::atol(argv[3]) : 1000;
    const long max_delay_ms = argc > 4 ? std::atol(argv[4]) : 2000;
    const std::size_t total = static_cast<std::size_t>(rate) * static_cast<std::size_t>(secs);

    tickwheel::Config cfg;
    cfg.resolution = microseconds(res_us);
    std::vector<std::int64_t> late(total, -1);
    std::atomic<std::size_t> done{0};
    std::atomic<long> early{0};
    {
        tickwheel::Runtime rt(cfg);
        std::mt19937_64 rng(1);
        std::uniform_int_distribution<std::int64_t> delay_ns(0, max_delay_ms * 1'000'000);
        const auto t0 = Clock::now();
        std::size_t started = 0;
        // Pace: every millisecond, start the timers that are due by now.
        while (started < total) {
            const auto target = static_cast<std::size_t>(
                std::min<double>(static_cast<double>(total),
                                 duration<double>(Clock::now() - t0).count() * static_cast<double>(rate)));
            for (; started < target; ++started) {
                const nanoseconds d(delay_ns(rng));
                const auto deadline = Clock::now() + d;
                const std::size_t slot = started;
                rt.start(d, [deadline, slot, &late, &done, &early] {
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
    }
    std::vector<std::int64_t> v(late.begin(), late.end());
    std::sort(v.begin(), v.end());
    auto q = [&](double p) { return static_cast<double>(v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))]) / 1000.0; };
    std::printf("rate=%ld/s seconds=%d resolution=%ld us timers=%zu fired=%zu early=%ld\n", rate, secs, res_us, total,
                done.load(), early.load());
    std::printf("lateness us: p50=%.0f p99=%.0f p99.9=%.0f max=%.0f\n", q(0.5), q(0.99), q(0.999), q(1.0));
    return early.load() == 0 && done.load() == total ? 0 : 1;
}
