// SPDX-License-Identifier: MIT OR Apache-2.0
// DPDK rte_timer (librte_timer): per-lcore skip lists, each under its own
// spinlock. Every timer here is owned by one lcore (lcore 1, the "manager")
// whose thread calls rte_timer_manage() in a loop and runs the callbacks;
// producers on other lcores call rte_timer_reset / rte_timer_stop on the
// manager's list directly (the caller does the skip-list work under the
// list's lock: nothing is queued, so drain() has nothing to wait for).
//
// The EAL is started without a NIC or hugepages:
//   --lcores 0@(cpus),1@(cpus) --no-huge --no-pci --no-shconf --no-telemetry
//   --log-level=lib.eal:error
// (cpus = the CPUs this process may run on: both lcores float over all of
// them, like every other peer's threads, instead of being pinned one per
// core). lcore 0 is the main thread (the caller); the producer threads of
// workload mt are non-EAL threads that take an lcore id with
// rte_thread_register(), as rte_timer's per-lcore API needs. If the EAL
// cannot start, the program says why on stderr and exits with status 77.
//
// DPDK's own examples spin on rte_timer_manage(), taking a whole core; here
// the manager sleeps --resolution-us (default 1000) between calls, so the
// other peers' producers keep both cores (and workload 6 measures what that
// polling costs). rte_timer has no way to wake the manager for an earlier
// timer, so the poll period bounds its lateness (like a tick).
// Delays are converted to timer cycles (the TSC), rounded up, at the rate
// measured against CLOCK_MONOTONIC over 200 ms at start: rte_get_timer_hz()
// may report the CPU's nominal rate (2.1 GHz on the machine of the first
// runs, whose TSC counted 2.0959 GHz: every 1 s delay fired 2 ms late),
// which would make lateness measure a calibration error. Both rates are
// printed.
// Timer structures (120 bytes) are made once and reused through a
// per-thread free list.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_pause.h>
#include <rte_timer.h>
#include <rte_version.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <deque>
#include <thread>

#include "driver.hpp"

using namespace twb;

namespace {

constexpr unsigned kManager = 1;  // the lcore that owns every timer
constexpr int kEalUnavailable = 77;

void noop_cb(rte_timer*, void*) {}

/// The CPUs this process may run on, as "a,b,c".
std::string allowed_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::string s;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) {
                if (!s.empty()) s += ',';
                s += std::to_string(c);
            }
    }
    return s.empty() ? "0" : s;
}

struct DpdkPeer : PacedPeer {
    static constexpr bool kThreadSafe = true;
    static constexpr bool kHasDriver = true;
    using H = rte_timer*;

    struct Local {
        DpdkPeer& p;
        std::deque<rte_timer> store;
        std::vector<rte_timer*> free_;
        bool registered = false;
        explicit Local(DpdkPeer& pp) : p(pp) {
            if (rte_lcore_id() == LCORE_ID_ANY) {
                if (rte_thread_register() != 0) {
                    std::fprintf(stderr, "peer_dpdk: rte_thread_register() failed: %s\n", rte_strerror(rte_errno));
                    std::exit(1);
                }
                registered = true;
            }
        }
        ~Local() {
            // Take this thread's timers off the manager's list before their
            // memory goes (the manager would walk freed nodes).
            for (rte_timer& t : store) rte_timer_stop_sync(&t);
            if (registered) rte_thread_unregister();
        }
        Local(const Local&) = delete;
        Local& operator=(const Local&) = delete;
        rte_timer* get() {
            if (free_.empty()) {
                rte_timer* t = &store.emplace_back();
                rte_timer_init(t);
                return t;
            }
            rte_timer* t = free_.back();
            free_.pop_back();
            return t;
        }
    };

    double ticks_per_ns = 0;
    std::int64_t poll_ns;
    alignas(64) std::atomic<bool> quit{false};
    alignas(64) std::atomic<bool> paused{false};

    explicit DpdkPeer(const Opts& o) : poll_ns(std::max<long>(1, o.resolution_us) * kUs) {
        rte_openlog_stream(stderr);  // EAL messages never mix with the JSON lines on stdout
        const std::string cpus = allowed_cpus();
        const std::string lcores = "0@(" + cpus + "),1@(" + cpus + ")";
        std::vector<std::string> args = {"peer_dpdk",   "--lcores",      lcores,         "--no-huge",
                                         "--no-pci",    "--no-shconf",   "--no-telemetry", "--log-level=lib.eal:error"};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::string line;
        for (auto& a : args) line += " " + a;
        // rte_eal_init() calls rte_panic() (abort) on some failures, e.g.
        // when it cannot create its threads: that is "cannot start" too.
        struct sigaction sa{}, old{};
        sa.sa_handler = [](int) {
            static const char msg[] = "peer_dpdk: DPDK EAL cannot start: rte_eal_init() panicked (see above)\n";
            (void)!write(2, msg, sizeof msg - 1);
            _exit(kEalUnavailable);
        };
        sigaction(SIGABRT, &sa, &old);
        const int eal = rte_eal_init(static_cast<int>(args.size()), argv.data());
        sigaction(SIGABRT, &old, nullptr);
        if (eal < 0) {
            std::fprintf(stderr,
                         "peer_dpdk: DPDK EAL cannot start: rte_eal_init() failed: %s (rte_errno %d); EAL arguments:%s\n",
                         rte_strerror(rte_errno), rte_errno, line.c_str());
            std::fflush(stderr);
            _exit(kEalUnavailable);
        }
        if (rte_timer_subsystem_init() != 0) {
            std::fprintf(stderr, "peer_dpdk: DPDK EAL cannot start: rte_timer_subsystem_init() failed: %s\n",
                         rte_strerror(rte_errno));
            std::fflush(stderr);
            _exit(kEalUnavailable);
        }
        ticks_per_ns = measured_ticks_per_ns();
        const double hz = static_cast<double>(rte_get_timer_hz());
        std::fprintf(stderr,
                     "%s: EAL up (%s); timer: rte_get_timer_hz() %.6f GHz, measured %.6f GHz (%+.3f%%), using the "
                     "measured rate; manager lcore %u polls every %ld us\n",
                     rte_version(), line.c_str() + 1, hz / 1e9, ticks_per_ns,
                     100.0 * (hz / 1e9 - ticks_per_ns) / ticks_per_ns, kManager, static_cast<long>(poll_ns / kUs));
        if (rte_lcore_id() != 0 || rte_eal_remote_launch(manager, this, kManager) != 0) {
            std::fprintf(stderr, "peer_dpdk: cannot launch the manager on lcore %u\n", kManager);
            std::exit(1);
        }
    }
    std::string name() const { return "dpdk-timer"; }

    /// Timer cycles per CLOCK_MONOTONIC ns, over 200 ms (each end: a cycle
    /// reading between two clock readings).
    static double measured_ticks_per_ns() {
        auto read = [](std::uint64_t& c, double& t) {
            const std::int64_t a = now_ns();
            c = rte_get_timer_cycles();
            const std::int64_t b = now_ns();
            t = static_cast<double>(a) / 2 + static_cast<double>(b) / 2;
        };
        std::uint64_t c0, c1;
        double t0, t1;
        read(c0, t0);
        sleep_until_ns(now_ns() + 200 * kMs);
        read(c1, t1);
        return static_cast<double>(c1 - c0) / (t1 - t0);
    }

    static int manager(void* a) {
        auto* p = static_cast<DpdkPeer*>(a);
        while (!p->quit.load(std::memory_order_relaxed)) {
            if (p->paused.load(std::memory_order_acquire)) {
                p->paused.wait(true, std::memory_order_acquire);
                continue;
            }
            rte_timer_manage();
            sleep_until_ns(now_ns() + p->poll_ns);
        }
        return 0;
    }

    std::uint64_t ticks(std::int64_t d) const {
        return static_cast<std::uint64_t>(std::ceil(static_cast<double>(d) * ticks_per_ns));
    }

    H start(Local& L, std::int64_t d) {
        rte_timer* t = L.get();
        if (rte_timer_reset(t, ticks(d), SINGLE, kManager, noop_cb, nullptr) != 0)  // a free timer: never RUNNING
            rte_timer_reset_sync(t, ticks(d), SINGLE, kManager, noop_cb, nullptr);
        return t;
    }
    bool stop(Local& L, H t) {
        const bool pending = rte_timer_pending(t) != 0;
        rte_timer_stop_sync(t);  // waits out a callback running on the manager
        L.free_.push_back(t);
        return pending;
    }
    bool rearm(Local&, H& t, std::int64_t d) {
        rte_timer_reset_sync(t, ticks(d), SINGLE, kManager, noop_cb, nullptr);  // moves a pending timer
        return true;
    }
    void finish(Local&) {}
    void drain() {}
    void before_rep() {}

    // Streams: a timer per start, freed by its own callback (rte_timer_stop
    // from inside the callback releases it, as rte_timer.h documents).
    template <class F>
    void start_cb(Local&, std::int64_t d, F&& f) {
        struct T {
            rte_timer t;
            std::decay_t<F> f;
        };
        auto* x = new T{{}, std::forward<F>(f)};
        rte_timer_init(&x->t);
        rte_timer_reset_sync(&x->t, ticks(d), SINGLE, kManager,
                             [](rte_timer* t, void* a) {
                                 auto* y = static_cast<T*>(a);
                                 y->f();
                                 rte_timer_stop(t);
                                 delete y;
                             },
                             x);
    }
    // A periodic 10 ms timer whose callback blocks 100 ms (blocks the one
    // manager lcore: workload 8 is not run for this peer).
    rte_timer slow;
    void start_slow(Local&) {
        rte_timer_init(&slow);
        rte_timer_reset_sync(&slow, ticks(10 * kMs), PERIODICAL, kManager,
                             [](rte_timer*, void*) { std::this_thread::sleep_for(std::chrono::milliseconds(100)); },
                             nullptr);
    }

    // Expiry: the manager is paused while n timers due over the window are
    // filed; once the window has passed it is woken and its next
    // rte_timer_manage() delivers the whole backlog.
    ExpiryCtx ctx;
    Sample expiry_rep(Local& L, long n, const Opts& o) {
        ctx.reset(n);
        paused.store(true, std::memory_order_release);
        std::vector<rte_timer*> mine;
        for (long i = 0; i < n; ++i) mine.push_back(L.get());
        std::mt19937_64 rng(o.seed);
        const std::int64_t t_load = now_ns();
        for (rte_timer* t : mine) {
            const auto d = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(o.window_ms * kMs));
            rte_timer_reset_sync(t, ticks(d), SINGLE, kManager,
                                 [](rte_timer*, void* a) { static_cast<ExpiryCtx*>(a)->delivered(); }, &ctx);
        }
        const std::int64_t t_loaded = now_ns();
        sleep_until_ns(t_load + (o.window_ms + 2) * kMs);
        const std::int64_t t0 = now_ns();
        paused.store(false, std::memory_order_release);
        paused.notify_one();
        while (ctx.done.load(std::memory_order_acquire) < n) sleep_until_ns(now_ns() + 1 * kMs);
        for (rte_timer* t : mine) L.free_.push_back(t);
        return expiry_sample(n, t0, ctx.last.load(), t_load, t_loaded);
    }
};

}  // namespace

int main(int argc, char** argv) { return run_main<DpdkPeer>(argc, argv); }
