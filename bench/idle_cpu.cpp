// SPDX-License-Identifier: MIT OR Apache-2.0
// CPU used by the whole process while N timers are pending and none is due:
// start N timers due in [60 s, 120 s], then measure process CPU time (all
// threads: shards, workers) over `seconds` of wall time, and count the
// wake-ups of the shards' threads (their voluntary context switches: each is
// one futex sleep that ended) and of all the process's threads.
//   idle_cpu [timers=1000000] [seconds=10]
#include <dirent.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "tickwheel/runtime.hpp"

using namespace std::chrono;

static double cpu_seconds() {
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/// Voluntary context switches of this process's threads: the shards'
/// (named tw-shard-N) and all of them.
struct Switches {
    long shards = 0, all = 0;
};
static Switches switches() {
    Switches s;
    DIR* d = opendir("/proc/self/task");
    if (d == nullptr) return s;
    while (const dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string dir = std::string("/proc/self/task/") + e->d_name;
        char comm[64] = {};
        if (FILE* f = std::fopen((dir + "/comm").c_str(), "r")) {
            if (std::fgets(comm, sizeof comm, f) == nullptr) comm[0] = 0;
            std::fclose(f);
        }
        long vol = 0;
        if (FILE* f = std::fopen((dir + "/status").c_str(), "r")) {
            char line[256];
            while (std::fgets(line, sizeof line, f) != nullptr)
                if (std::sscanf(line, "voluntary_ctxt_switches: %ld", &vol) == 1) break;
            std::fclose(f);
        }
        s.all += vol;
        if (std::strncmp(comm, "tw-shard-", 9) == 0) s.shards += vol;
    }
    closedir(d);
    return s;
}

int main(int argc, char** argv) {
    const long n = argc > 1 ? std::atol(argv[1]) : 1000000;
    const int secs = argc > 2 ? std::atoi(argv[2]) : 10;
    tickwheel::Runtime rt;
    std::mt19937_64 rng(3);
    for (long i = 0; i < n; ++i) rt.start(milliseconds(60000 + static_cast<long>(rng() % 60000)), [] {});
    std::this_thread::sleep_for(milliseconds(500));  // let the shards file them
    const Switches s0 = switches();
    const double c0 = cpu_seconds();
    const auto t0 = steady_clock::now();
    std::this_thread::sleep_for(seconds(secs));
    const double cpu = cpu_seconds() - c0;
    const double wall = duration<double>(steady_clock::now() - t0).count();
    const Switches s1 = switches();
    std::printf("pending=%ld wall=%.1f s cpu=%.3f s -> %.4f%% of one core; wake-ups: shards %ld (%.1f/s), "
                "all threads %ld (the main thread's sleeps included)\n",
                n, wall, cpu, 100.0 * cpu / wall, s1.shards - s0.shards,
                static_cast<double>(s1.shards - s0.shards) / wall, s1.all - s0.all);
}
