// SPDX-License-Identifier: MIT OR Apache-2.0
// What can delay a timer, and what cannot (issue 31; docs/site/guide/
// concepts.md, "What can delay a timer"). Through the shared library, one
// JSON line per case:
//   blocking   B callbacks that block for 500 ms each on a runtime with W
//              workers (default 2), then a 20 ms timer: its lateness. With
//              B >= W every worker is busy, and the timer waits for one.
//              Also what stats() said (issue 34): 200 ms after the timer
//              was due, the busy workers, the timers waiting for one and
//              the oldest run's age; after it ran, the largest driver and
//              wait stages and callback duration.
//   frozen     a thread that starts and stops timers in a loop is held in a
//              signal handler (as a debugger's stop would hold it) for 400
//              ms, 10 times at random points, while a 5 ms periodic timer of
//              its shard runs: the periodic timer's largest gap between runs
//              (or from the freeze's start or to its end), and how many of
//              the 10 freezes held it back more than 100 ms.
//   nice19     the same loop at nice 19, pinned to CPU 0 beside a thread
//              that spins there, 5 windows of 400 ms: the largest gap.
//   idle       the same at SCHED_IDLE.
// Usage: delay_sources [--workers W] [--rounds R]
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tickwheel/runtime.hpp"

namespace {
using namespace std::chrono_literals;
namespace tw = tickwheel;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

/// What the runtime's stats said (issue 34): while the 20 ms timer waited
/// (200 ms after it was due), and its run's stages (the largest: the
/// blockers' own are ~0).
struct Said {
    std::uint64_t busy = 0, waiting = 0;
    double oldest_ms = 0, driver_ms = 0, wait_ms = 0, run_max_ms = 0;
};
double ms(tw::Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double blocking(unsigned workers, unsigned blockers, Said& said) {
    tw::Config c;
    c.workers = workers;
    tw::Runtime rt(c);
    for (unsigned i = 0; i < blockers; ++i) (void)rt.start(0ns, [] { std::this_thread::sleep_for(500ms); });
    std::this_thread::sleep_for(5ms);  // (the blockers have begun)
    std::atomic<double> fired{-1};
    const auto t0 = Clock::now();
    (void)rt.start(20ms, [&] { fired = ms_since(t0); });
    std::this_thread::sleep_for(220ms);
    if (fired.load() < 0) {
        const tw::Stats during = rt.stats();
        said.busy = during.workers_busy;
        said.waiting = during.waiting_for_worker;
        said.oldest_ms = ms(during.oldest_run_age);
    }
    while (fired.load() < 0) std::this_thread::sleep_for(1ms);
    while (rt.stats().run_duration_samples < blockers + 1) std::this_thread::sleep_for(1ms);
    const tw::Stats after = rt.stats();
    said.driver_ms = ms(after.driver_lateness_max);
    said.wait_ms = ms(after.wait_lateness_max);
    said.run_max_ms = ms(after.run_duration_max);
    return fired.load() - 20.0;
}

struct Gap {
    std::atomic<std::int64_t> last{0}, max{0};
    std::atomic<bool> on{false};
    static std::int64_t now() { return Clock::now().time_since_epoch().count(); }
    void to(std::int64_t t) {
        const std::int64_t p = last.exchange(t);
        std::int64_t m = max.load();
        while (t - p > m && !max.compare_exchange_weak(m, t - p)) {
        }
    }
    void tick() {
        if (on.load()) to(now());
    }
    void begin() {
        max = 0;
        last = now();
        on = true;
    }
    double end_ms() {
        on = false;
        to(now());
        return static_cast<double>(max.load()) / 1e6;
    }
};

std::atomic<bool> g_hold{false};
void on_usr1(int) {
    while (g_hold.load()) {
    }
}

void pin(unsigned cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/// The largest gaps of a 5 ms periodic timer over `windows` windows of 400
/// ms while a start/stop thread of its shard is held in a signal handler
/// ("frozen") or runs at nice 19 ("nice19") or SCHED_IDLE ("idle") on CPU 0
/// beside a thread spinning there. Returns the worst gap; `stalled` counts
/// the windows with a gap above 100 ms.
double periodic_gap(const char* how, int windows, int& stalled) {
    tw::Config c;
    c.shards = 1;
    tw::Runtime rt(c);
    Gap gap;
    tw::StartOptions o;
    o.delay = 5ms;
    o.period = 5ms;
    (void)rt.start(o, [&] { gap.tick(); });
    std::atomic<bool> stop{false};
    std::atomic<pid_t> tid{0};
    const bool frozen = std::strcmp(how, "frozen") == 0;
    std::thread caller([&] {
        tid = static_cast<pid_t>(syscall(SYS_gettid));
        if (!frozen) {
            pin(0);
            if (std::strcmp(how, "nice19") == 0) {
                setpriority(PRIO_PROCESS, static_cast<id_t>(tid.load()), 19);
            } else {
                sched_param sp{};
                pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
            }
        }
        while (!stop.load()) {
            const tw::Timer t = rt.start(10s, [] {});
            (void)rt.stop(t);
        }
    });
    while (tid.load() == 0) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);
    double worst = 0;
    stalled = 0;
    for (int w = 0; w < windows; ++w) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5 + (w * 7) % 23));  // (a different point each time)
        std::atomic<bool> spin{true};
        std::thread spinner;
        if (!frozen)
            spinner = std::thread([&] {
                pin(0);
                while (spin.load()) {
                }
            });
        if (frozen) {
            g_hold = true;
            syscall(SYS_tgkill, getpid(), tid.load(), SIGUSR1);
        }
        gap.begin();
        std::this_thread::sleep_for(400ms);
        const double g = gap.end_ms();
        g_hold = false;
        spin = false;
        if (spinner.joinable()) spinner.join();
        worst = std::max(worst, g);
        stalled += g > 100.0;
    }
    stop = true;
    caller.join();
    return worst;
}
}  // namespace

int main(int argc, char** argv) {
    unsigned workers = 2, rounds = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--workers") == 0) workers = static_cast<unsigned>(std::atoi(argv[i + 1]));
        if (std::strcmp(argv[i], "--rounds") == 0) rounds = static_cast<unsigned>(std::atoi(argv[i + 1]));
    }
    struct sigaction sa{};
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, nullptr);
    for (unsigned r = 0; r < rounds; ++r) {
        for (unsigned b : {0u, 1u, workers, 2 * workers}) {
            Said said;
            const double late = blocking(workers, b, said);
            std::printf("{\"case\":\"blocking\",\"workers\":%u,\"blockers\":%u,\"late_ms\":%.1f,"
                        "\"stats_driver_max_ms\":%.1f,\"stats_wait_max_ms\":%.1f,\"stats_run_max_ms\":%.1f,"
                        "\"workers_busy\":%llu,\"waiting_for_worker\":%llu,\"oldest_run_age_ms\":%.1f}\n",
                        workers, b, late, said.driver_ms, said.wait_ms, said.run_max_ms,
                        static_cast<unsigned long long>(said.busy), static_cast<unsigned long long>(said.waiting),
                        said.oldest_ms);
        }
        for (const char* how : {"frozen", "nice19", "idle"}) {
            int stalled = 0;
            const int windows = std::strcmp(how, "frozen") == 0 ? 10 : 5;
            const double worst = periodic_gap(how, windows, stalled);
            std::printf("{\"case\":\"%s\",\"windows\":%d,\"stalled_over_100ms\":%d,\"max_gap_ms\":%.1f}\n", how,
                        windows, stalled, worst);
        }
        std::fflush(stdout);
    }
}
