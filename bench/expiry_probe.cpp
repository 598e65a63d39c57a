// SPDX-License-Identifier: MIT OR Apache-2.0
// expiry_probe (issue 21): how fast a burst of due timers is delivered.
//
// Starts N one-shots from P producer threads, all with the same absolute
// deadline (CLOCK_MONOTONIC), on a runtime with W workers and S shards, with
// a trivial callback (an atomic counter increment and a clock read that
// checks "never early"), and measures over the burst:
//   callbacks_per_s              N / (last callback - first callback)
//   driver_cpu_ns_per_timer      CPU of the shard drivers (threads named
//                                tw-shard-*), from just before the deadline
//                                until the last callback ran, / N
//   process_cpu_ns_per_callback  the process's CPU over the same span / N
//                                (idle workers spinning through the burst
//                                show here)
//   burst_wall_ms                last callback - first callback
//   early                        callbacks that ran before the deadline (must be 0)
// One JSON object per run on stdout (--reps R runs, a fresh runtime each);
// progress and warnings on stderr. Links the shared library and uses only
// the C API, as outside users do.
//
//   expiry_probe [--timers N] [--producers P] [--workers W] [--shards S]
//                [--reps R] [--lead-ms L]
//
// --lead-ms: how far ahead of the start of the run the deadline lies (default
// 200 ms + 1 us per timer, so that the producers finish starting well before
// it; a run whose starts end after the deadline is reported on stderr).
#include <tickwheel/tickwheel.h>

#include <dirent.h>
#include <pthread.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

std::uint64_t mono_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint64_t clock_ns(clockid_t c) {
    timespec ts{};
    if (clock_gettime(c, &ts) != 0) return 0;
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

void sleep_until_mono(std::uint64_t t) {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(t / 1000000000ull);
    ts.tv_nsec = static_cast<long>(t % 1000000000ull);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
}

// The CPU-time clock of another thread of this process, by its tid (Linux's
// encoding, as glibc's pthread_getcpuclockid builds it: ~tid << 3 |
// CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED). Nanosecond resolution, unlike
// /proc's clock ticks.
clockid_t thread_cpu_clock(pid_t tid) {
    return static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6u);
}

// The tids of this process's threads whose name starts with prefix.
std::vector<pid_t> threads_named(const char* prefix) {
    std::vector<pid_t> out;
    DIR* d = opendir("/proc/self/task");
    if (d == nullptr) return out;
    while (const dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string path = std::string("/proc/self/task/") + e->d_name + "/comm";
        char comm[64] = {};
        if (FILE* f = std::fopen(path.c_str(), "r")) {
            comm[std::fread(comm, 1, sizeof comm - 1, f)] = 0;
            std::fclose(f);
        }
        if (std::strncmp(comm, prefix, std::strlen(prefix)) == 0) out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
    }
    closedir(d);
    return out;
}

std::uint64_t threads_cpu_ns(const std::vector<pid_t>& tids) {
    std::uint64_t sum = 0;
    for (const pid_t t : tids) sum += clock_ns(thread_cpu_clock(t));
    return sum;
}

struct Burst {
    std::uint64_t deadline = 0;
    std::uint64_t total = 0;
    std::atomic<std::uint64_t> ran{0};
    std::atomic<std::uint64_t> early{0};
    std::atomic<std::uint64_t> first_ns{0};
    std::atomic<std::uint64_t> last_ns{0};
    std::atomic<bool> done{false};
};

void on_fire(void* arg, tw_timer) {
    auto* b = static_cast<Burst*>(arg);
    const std::uint64_t now = mono_ns();
    if (now < b->deadline) b->early.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t n = b->ran.fetch_add(1, std::memory_order_relaxed);
    if (n == 0) b->first_ns.store(now, std::memory_order_relaxed);
    if (n + 1 == b->total) {
        b->last_ns.store(mono_ns(), std::memory_order_relaxed);
        b->done.store(true, std::memory_order_release);
        b->done.notify_all();
    }
}

struct Options {
    std::uint64_t timers = 1000000;
    unsigned producers = 1, workers = 0, shards = 0, reps = 5;
    std::uint64_t lead_ms = 0;  // 0 = 200 ms + 1 us per timer
};

[[noreturn]] void usage(const char* argv0) {
    std::fprintf(stderr,
                 "usage: %s [--timers N] [--producers P] [--workers W] [--shards S] [--reps R] [--lead-ms L]\n"
                 "  W, S: 0 (default) = the runtime's default\n",
                 argv0);
    std::exit(2);
}

bool run_once(const Options& o, int rep) {
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = o.workers;
    cfg.shards = o.shards;
    cfg.name = "expiry_probe";
    tw_runtime* rt = nullptr;
    if (int rc = tw_runtime_create(&cfg, &rt); rc != TW_OK) {
        std::fprintf(stderr, "tw_runtime_create: %d\n", rc);
        return false;
    }
    tw_stats st;
    tw_stats_init(&st);
    tw_runtime_stats(rt, &st);

    Burst b;
    b.total = o.timers;
    const std::uint64_t lead_ns =
        (o.lead_ms != 0 ? o.lead_ms * 1000000ull : 200000000ull + o.timers * 1000ull);
    const std::uint64_t t0 = mono_ns();
    b.deadline = t0 + lead_ns;

    std::atomic<int> failed{0};
    std::vector<std::thread> producers;
    for (unsigned p = 0; p < o.producers; ++p) {
        const std::uint64_t lo = o.timers * p / o.producers, hi = o.timers * (p + 1) / o.producers;
        producers.emplace_back([&, lo, hi] {
            constexpr std::size_t kBatch = 256;
            std::vector<tw_timer_spec> specs(kBatch);
            std::vector<tw_timer> ids(kBatch);
            for (auto& s : specs) {
                tw_timer_spec_init(&s);
                s.deadline_ns = b.deadline;
                s.callback = on_fire;
                s.arg = &b;
            }
            for (std::uint64_t i = lo; i < hi;) {
                const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kBatch, hi - i));
                if (tw_timer_start_n(rt, specs.data(), n, ids.data()) != static_cast<int>(n)) {
                    failed.fetch_add(1);
                    return;
                }
                i += n;
            }
        });
    }
    for (auto& t : producers) t.join();
    const std::uint64_t started = mono_ns();
    if (failed.load() != 0) {
        std::fprintf(stderr, "tw_timer_start_n failed\n");
        tw_runtime_destroy(rt);
        return false;
    }
    if (started + 20000000ull > b.deadline)
        std::fprintf(stderr, "warning: rep %d: starts ended %.1f ms before the deadline (< 20 ms): raise --lead-ms\n",
                     rep, (static_cast<double>(b.deadline) - static_cast<double>(started)) / 1e6);

    // Just before the deadline: the drivers have filed everything and sleep.
    if (b.deadline > 20000000ull + started) sleep_until_mono(b.deadline - 20000000ull);
    const std::vector<pid_t> drivers = threads_named("tw-shard-");
    const std::uint64_t drv0 = threads_cpu_ns(drivers);
    const std::uint64_t proc0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);

    b.done.wait(false, std::memory_order_acquire);

    const std::uint64_t proc1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    const std::uint64_t drv1 = threads_cpu_ns(drivers);
    const double n = static_cast<double>(o.timers);
    const std::uint64_t first = b.first_ns.load(), last = b.last_ns.load();
    const double wall_ns = static_cast<double>(last > first ? last - first : 1);
    std::printf(
        "{\"timers\": %llu, \"producers\": %u, \"workers\": %u, \"shards\": %u, \"callbacks_per_s\": %.0f, "
        "\"driver_cpu_ns_per_timer\": %.1f, \"process_cpu_ns_per_callback\": %.1f, \"burst_wall_ms\": %.3f, "
        "\"early\": %llu}\n",
        static_cast<unsigned long long>(o.timers), o.producers, st.workers, st.shards, n / (wall_ns / 1e9),
        static_cast<double>(drv1 - drv0) / n, static_cast<double>(proc1 - proc0) / n, wall_ns / 1e6,
        static_cast<unsigned long long>(b.early.load()));
    std::fflush(stdout);
    std::fprintf(stderr, "rep %d: starts took %.1f ms; first callback %.3f ms after the deadline; %zu driver threads\n",
                 rep, static_cast<double>(started - t0) / 1e6,
                 (static_cast<double>(first) - static_cast<double>(b.deadline)) / 1e6, drivers.size());
    if (int rc = tw_runtime_destroy(rt); rc != TW_OK) std::fprintf(stderr, "tw_runtime_destroy: %d\n", rc);
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) usage(argv[0]);
        const unsigned long long v = std::strtoull(argv[++i], nullptr, 10);
        if (a == "--timers") o.timers = v;
        else if (a == "--producers") o.producers = static_cast<unsigned>(v);
        else if (a == "--workers") o.workers = static_cast<unsigned>(v);
        else if (a == "--shards") o.shards = static_cast<unsigned>(v);
        else if (a == "--reps") o.reps = static_cast<unsigned>(v);
        else if (a == "--lead-ms") o.lead_ms = v;
        else usage(argv[0]);
    }
    if (o.timers == 0 || o.producers == 0 || o.producers > o.timers) usage(argv[0]);
    for (unsigned r = 0; r < o.reps; ++r)
        if (!run_once(o, static_cast<int>(r))) return 1;
    return 0;
}
