// SPDX-License-Identifier: MIT OR Apache-2.0
// Per-thread figures of this process from /proc/self/task, summed by thread
// name: how often threads slept (voluntary context switches: each is a
// sleep that ended, i.e. a wake-up) and the CPU time they used. The
// runtime names its threads tw-shard-N, tw-tbb-worker and tw-worker. Used
// by bench/idle_cpu, bench/lateness and tests/idle_test.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace tw_threads {

struct Totals {
    long shard_wakeups = 0, all_wakeups = 0;                  // voluntary context switches
    double shard_cpu_s = 0, worker_cpu_s = 0, other_cpu_s = 0;  // utime + stime (clock ticks)
};

/// Reads every thread of this process. Names: "tw-shard-*" are shards, any
/// name containing "worker" a worker, the rest "other".
inline Totals read() {
    Totals t;
    const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
    DIR* d = opendir("/proc/self/task");
    if (d == nullptr) return t;
    while (const dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string dir = std::string("/proc/self/task/") + e->d_name;
        char stat[1024] = {};
        if (FILE* f = std::fopen((dir + "/stat").c_str(), "r")) {
            stat[std::fread(stat, 1, sizeof stat - 1, f)] = 0;
            std::fclose(f);
        }
        // pid (comm) state ppid ... utime(14) stime(15)
        const char* open = std::strchr(stat, '(');
        const char* close = std::strrchr(stat, ')');
        if (open == nullptr || close == nullptr) continue;
        const std::string comm(open + 1, close);
        unsigned long ut = 0, st = 0;
        if (std::sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) continue;
        long vol = 0;
        if (FILE* f = std::fopen((dir + "/status").c_str(), "r")) {
            char line[256];
            while (std::fgets(line, sizeof line, f) != nullptr)
                if (std::sscanf(line, "voluntary_ctxt_switches: %ld", &vol) == 1) break;
            std::fclose(f);
        }
        const double cpu = static_cast<double>(ut + st) / hz;
        t.all_wakeups += vol;
        if (comm.rfind("tw-shard-", 0) == 0) {
            t.shard_wakeups += vol;
            t.shard_cpu_s += cpu;
        } else if (comm.find("worker") != std::string::npos) {
            t.worker_cpu_s += cpu;
        } else {
            t.other_cpu_s += cpu;
        }
    }
    closedir(d);
    return t;
}

}  // namespace tw_threads
