// SPDX-License-Identifier: MIT OR Apache-2.0
// model_bench: what the timer model (issue 12) costs and buys.
//
//   model_bench wakeups [N] [SPREAD_MS] [LEEWAY_MS]
//       N timers (default 100000) with deadlines spread uniformly over
//       SPREAD_MS (default 1000) from 500 ms from now, each with LEEWAY_MS of
//       leeway (default: run once with 0 and once with 10); prints the
//       shard drivers' wake-ups per second over the window (voluntary
//       context switches of the tw-shard-* threads, /proc/self/task) and
//       how late the callbacks ran (never early is checked: "early" must be 0).
//   model_bench group [PENDING]
//       cost of stop_group() for groups of 1, 1,000 and 100,000 timers while
//       PENDING (default 1000000) other timers are pending in other groups.
//   model_bench advance [N]
//       a manual-clock runtime: N timers (default 1000000) at random
//       deadlines over one simulated hour, advanced in 1 s steps; prints the
//       wall time per timer fired by advance() (the cost of virtual time).
//   model_bench query [PENDING]
//       cost of query() on a pending timer, with PENDING (default 1000000)
//       timers pending, one thread, random timers.
// A benchmark: it measures, it does not assert.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tickwheel/runtime.hpp"

namespace tw = tickwheel;
using namespace std::chrono;

namespace {

std::int64_t now_ns() { return tw::Runtime::now().time_since_epoch().count(); }

/// Voluntary context switches of this process's threads whose name starts
/// with `prefix` (a driver sleeping on its futex and woken counts one).
long switches_of(const char* prefix) {
    long total = 0;
    DIR* d = opendir("/proc/self/task");
    if (d == nullptr) return -1;
    while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string base = std::string("/proc/self/task/") + e->d_name;
        std::ifstream comm(base + "/comm");
        std::string name;
        std::getline(comm, name);
        if (name.rfind(prefix, 0) != 0) continue;
        std::ifstream st(base + "/status");
        std::string line;
        while (std::getline(st, line))
            if (line.rfind("voluntary_ctxt_switches:", 0) == 0) total += std::atol(line.c_str() + 24);
    }
    closedir(d);
    return total;
}

void wakeups(long n, long spread_ms, long leeway_ms) {
    tw::Runtime rt;
    std::vector<std::atomic<std::int64_t>> late(static_cast<std::size_t>(n));
    std::atomic<long> done{0}, early{0};
    std::mt19937_64 rng(1);
    const std::int64_t window_start = now_ns() + 500'000'000;  // after the starts
    for (long i = 0; i < n; ++i) {
        tw::StartOptions o;
        const std::int64_t d = window_start + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(spread_ms * 1'000'000));
        o.deadline = tw::TimePoint(nanoseconds(d));
        o.leeway = milliseconds(leeway_ms);
        rt.start(o, [&late, &done, &early, i, d] {
            const std::int64_t t = now_ns();
            if (t < d) early.fetch_add(1);
            late[static_cast<std::size_t>(i)] = t - d;
            done.fetch_add(1);
        });
    }
    // Count from the window's start to its end (+ leeway + a tick).
    while (now_ns() < window_start) std::this_thread::sleep_for(milliseconds(1));
    const long s0 = switches_of("tw-shard-");
    const std::int64_t t0 = now_ns();
    const std::int64_t end = window_start + spread_ms * 1'000'000 + leeway_ms * 1'000'000 + 2'000'000;
    while (now_ns() < end) std::this_thread::sleep_for(milliseconds(5));
    const long s1 = switches_of("tw-shard-");
    const double secs = static_cast<double>(now_ns() - t0) / 1e9;
    while (done.load() < n) std::this_thread::sleep_for(milliseconds(1));
    std::vector<std::int64_t> v;
    v.reserve(static_cast<std::size_t>(n));
    for (auto& x : late) v.push_back(x.load());
    std::sort(v.begin(), v.end());
    auto pct = [&](double p) { return static_cast<double>(v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))]) / 1e6; };
    std::printf("wakeups: %ld timers over %ld ms, leeway %2ld ms, %u shards: %7.0f driver wake-ups/s (%ld in %.2f s); "
                "lateness p50 %.2f ms p99 %.2f ms max %.2f ms; early %ld\n",
                n, spread_ms, leeway_ms, rt.shard_count(), static_cast<double>(s1 - s0) / secs, s1 - s0, secs, pct(0.5),
                pct(0.99), pct(1.0), early.load());
}

void group_cost(long pending) {
    tw::Runtime rt;
    for (long i = 0; i < pending; ++i) {
        tw::StartOptions o;
        o.delay = hours(1);
        o.group = (std::uint64_t{1} << 40) + static_cast<std::uint64_t>(i % 10000);  // never one of the measured groups
        rt.start(o, [] {});
    }
    for (long size : {1L, 1000L, 100000L}) {
        for (int rep = 0; rep < 3; ++rep) {
            const std::uint64_t g = 7 + static_cast<std::uint64_t>(size);
            for (long i = 0; i < size; ++i) {
                tw::StartOptions o;
                o.delay = hours(1);
                o.group = g;
                rt.start(o, [] {});
            }
            const auto t0 = steady_clock::now();
            const std::size_t n = rt.stop_group(g);
            const double us = duration<double, std::micro>(steady_clock::now() - t0).count();
            std::printf("group: stop_group of %6ld timers (%ld others pending): %10.1f us, %6.0f ns per timer (stopped %zu)\n",
                        size, pending, us, us * 1000.0 / static_cast<double>(size), n);
        }
    }
    const auto t0 = steady_clock::now();
    const std::size_t n = rt.stop_group(424242);
    std::printf("group: stop_group of an unknown group (%ld pending): %.1f us (stopped %zu)\n", pending,
                duration<double, std::micro>(steady_clock::now() - t0).count(), n);
}

void query_cost(long pending) {
    tw::Runtime rt;
    std::vector<std::uint64_t> ids;
    ids.reserve(static_cast<std::size_t>(pending));
    for (long i = 0; i < pending; ++i) ids.push_back(rt.start(hours(1), [] {}).id());
    std::mt19937_64 rng(3);
    std::vector<std::uint64_t> order(1'000'000);
    for (auto& x : order) x = ids[rng() % ids.size()];
    for (int rep = 0; rep < 3; ++rep) {
        std::uint64_t sum = 0;
        const auto t0 = steady_clock::now();
        for (const std::uint64_t id : order) {
            const auto i = rt.query(id);
            sum += i ? i->runs + static_cast<std::uint64_t>(i->state) : 1;
        }
        const double ns = duration<double, std::nano>(steady_clock::now() - t0).count() / static_cast<double>(order.size());
        std::printf("query: %ld pending, random ids: %.1f ns per query (check %llu)\n", pending, ns,
                    static_cast<unsigned long long>(sum));
    }
}

void advance_cost(long n) {
    tw::Config c;
    c.manual_clock = true;
    tw::Runtime rt(c);
    std::mt19937_64 rng(5);
    long fired = 0;
    for (long i = 0; i < n; ++i)
        rt.start(nanoseconds(static_cast<std::int64_t>(rng() % 3'600'000'000'000ull)), [&fired] { ++fired; });
    const auto t0 = steady_clock::now();
    std::size_t ran = 0;
    for (int s = 0; s < 3600; ++s) ran += rt.advance(seconds(1));
    const double secs = duration<double>(steady_clock::now() - t0).count();
    std::printf("advance: %ld timers over 1 simulated hour in 3600 steps of 1 s: %.3f s wall, %.0f ns per timer fired "
                "(ran %zu, fired %ld)\n",
                n, secs, secs * 1e9 / static_cast<double>(ran), ran, fired);
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    auto arg = [&](int i, long def) { return argc > i ? std::atol(argv[i]) : def; };
    if (mode == "wakeups") {
        if (argc > 4) {
            wakeups(arg(2, 100000), arg(3, 1000), arg(4, 10));
        } else {
            wakeups(arg(2, 100000), arg(3, 1000), 0);
            wakeups(arg(2, 100000), arg(3, 1000), 10);
        }
    } else if (mode == "group") {
        group_cost(arg(2, 1000000));
    } else if (mode == "advance") {
        advance_cost(arg(2, 1000000));
    } else if (mode == "query") {
        query_cost(arg(2, 1000000));
    } else {
        std::fprintf(stderr, "usage: model_bench wakeups [N] [SPREAD_MS] [LEEWAY_MS] | group [PENDING] | query [PENDING] | advance [N]\n");
        return 2;
    }
    return 0;
}
