// SPDX-License-Identifier: MIT OR Apache-2.0
// CPU used by the whole process while N timers are pending and none is due:
// start N timers due in [60 s, 120 s], then measure process CPU time (all
// threads: shards, workers) over `seconds` of wall time, and count the
// wake-ups of the shards' threads (their voluntary context switches: each is
// one futex sleep that ended) and of all the process's threads.
//   idle_cpu [timers=1000000] [seconds=10]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "thread_stats.hpp"
#include "tickwheel/runtime.hpp"

using namespace std::chrono;

static double cpu_seconds() {
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char** argv) {
    const long n = argc > 1 ? std::atol(argv[1]) : 1000000;
    const int secs = argc > 2 ? std::atoi(argv[2]) : 10;
    tickwheel::Runtime rt;
    std::mt19937_64 rng(3);
    for (long i = 0; i < n; ++i) rt.start(milliseconds(60000 + static_cast<long>(rng() % 60000)), [] {});
    std::this_thread::sleep_for(milliseconds(500));  // let the shards file them
    const tw_threads::Totals s0 = tw_threads::read();
    const double c0 = cpu_seconds();
    const auto t0 = steady_clock::now();
    std::this_thread::sleep_for(seconds(secs));
    const double cpu = cpu_seconds() - c0;
    const double wall = duration<double>(steady_clock::now() - t0).count();
    const tw_threads::Totals s1 = tw_threads::read();
    std::printf("pending=%ld wall=%.1f s cpu=%.3f s -> %.4f%% of one core; wake-ups: shards %ld (%.1f/s), "
                "all threads %ld (the main thread's sleeps included)\n",
                n, wall, cpu, 100.0 * cpu / wall, s1.shard_wakeups - s0.shard_wakeups,
                static_cast<double>(s1.shard_wakeups - s0.shard_wakeups) / wall, s1.all_wakeups - s0.all_wakeups);
}
