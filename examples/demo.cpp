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
//   demo [--metrics] --simulate HOURS [--time-scale K=1000] [--seed N=1234]
//        [threads=4] [connections per thread=20000]
//
// --metrics: after the summary, print the runtime's final metrics in the
// Prometheus text format (Runtime::metrics()), after a line
// "# tickwheel metrics" (a comment of that format).
//
// --simulate HOURS (> 0, fractional allowed): the same server replayed on a
// manual-clock runtime (Config::manual_clock), single-threaded and
// deterministic: the "network threads" are simulated producers, each with
// its own generator (seed N + i) and shard, taking turns at evenly staggered
// simulated times; between turns Runtime::advance() moves the clock and runs
// the idle timeouts (and the live line) that fall due, in deadline order, on
// the loop's thread. Nothing sleeps. Every time constant of the live demo is
// multiplied by K (--time-scale; 1 = the live demo's exact timing): with the
// default K = 1000 the idle timeout is 100-1000 s and each producer does a
// burst of 500 operations every 2 s, so 24 simulated hours are ~86 million
// timer operations (the live timing would be ~1 million per simulated
// second). The summary is the live one, plus the simulated and wall time;
// "fired early" is judged against the manual clock.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <string>
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

// The summary's counting lines and the accounting check, shared by the live
// run and --simulate. True if the accounting is exact and nothing fired early.
bool print_summary(long opened, long closed, long timed_out, long rearmed, long rearm_late, long early,
                   const tickwheel::Stats& s) {
    const long at_shutdown = static_cast<long>(s.cancelled_at_shutdown);
    const bool exact = opened == closed + timed_out + at_shutdown;
    std::printf("  connections opened        %ld\n", opened);
    std::printf("  closed gracefully (stop)  %ld\n", closed);
    std::printf("  timed out (callback)      %ld\n", timed_out);
    std::printf("  still open at shutdown    %ld (cancelled by shutdown)\n", at_shutdown);
    std::printf("  re-arms (reset)           %ld, %ld came after the timeout\n", rearmed, rearm_late);
    std::printf("  timer starts/fires/stops  %llu / %llu / %llu\n", static_cast<unsigned long long>(s.started),
                static_cast<unsigned long long>(s.fired), static_cast<unsigned long long>(s.stopped));
    std::printf("  lateness p50/p99/p99.9/max %.0f / %.0f / %.0f / %.0f us (after the 1 ms tick boundary)\n",
                duration<double, std::micro>(s.lateness_p50).count(), duration<double, std::micro>(s.lateness_p99).count(),
                duration<double, std::micro>(s.lateness_p999).count(), duration<double, std::micro>(s.lateness_max).count());
    std::printf("  fired early               %ld\n", early);
    std::printf("  accounting                %s: opened = closed + timed out + cancelled at shutdown\n",
                exact ? "exact" : "MISMATCH");
    return exact && early == 0;
}

// ---- --simulate: the same server on a manual clock -------------------------------

struct SimConn {
    bool open = false;
    std::int64_t deadline_ns = 0;  // earliest moment (manual clock) its timeout may fire
    std::uint64_t timer = 0;
};

struct Sim {
    explicit Sim(Runtime& r) : rt(r) {}
    Runtime& rt;
    long opened = 0, closed = 0, timed_out = 0, rearmed = 0, rearm_late = 0, early = 0;
    std::int64_t now_ns() const { return rt.now(tickwheel::TimerClock::monotonic).count(); }
};

// One simulated network thread: its connections, generator and shard.
struct Producer {
    std::vector<SimConn> conns;
    std::mt19937_64 rng;
    std::uniform_int_distribution<int> idle_ms{100, 1000};
    int shard = 0;
    std::size_t next = 0;  // the connection of the next operation, drawn one ahead (to prefetch it)
};

// One turn of a producer: the live network_thread's 500 operations (the same
// draws, except that each operation's connection is drawn one operation
// ahead), at the simulated time the clock shows.
void sim_burst(Sim& sim, Producer& p, long scale) {
    for (int op = 0; op < 500; ++op) {
        SimConn& c = p.conns[p.next];
        p.next = p.rng() % p.conns.size();
        __builtin_prefetch(&p.conns[p.next]);  // the table is larger than the cache: overlap the next miss
        const tickwheel::Duration idle = milliseconds(p.idle_ms(p.rng)) * scale;
        if (!c.open) {  // accept a new connection
            c.open = true;
            c.deadline_ns = sim.now_ns() + idle.count();
            tickwheel::StartOptions o;
            o.delay = idle;
            o.shard = p.shard;  // as each live thread has its own shard
            Sim* s = &sim;
            SimConn* cp = &c;
            c.timer = sim.rt.start(o, [s, cp] {  // idle timeout: runs inside advance(), on the loop's thread
                              if (s->now_ns() < cp->deadline_ns) s->early++;
                              s->timed_out++;
                              cp->open = false;
                          }).id();
            sim.opened++;
        } else if (p.rng() % 100 < 85) {  // a packet: push the idle timeout back
            const std::int64_t d = sim.now_ns() + idle.count();
            if (sim.rt.reset(c.timer, idle)) {
                c.deadline_ns = d;
                sim.rearmed++;
            } else {
                sim.rearm_late++;  // cannot happen here: a timeout closes the connection before the next turn
            }
        } else if (sim.rt.stop(c.timer)) {  // graceful close
            sim.closed++;
            c.open = false;
        }
    }
}

// "100 ms", or "100 s" for whole seconds.
/// The live line's pending column: the total, and the first four shards'
/// counts "a/b/c/d" into `buf`.
std::size_t pending_text(const tickwheel::Stats& s, char* buf, std::size_t cap) {
    std::size_t pending = 0;
    int off = 0;
    buf[0] = '\0';
    for (std::size_t i = 0; i < s.pending_per_shard.size(); ++i) {
        pending += s.pending_per_shard[i];
        if (i < 4 && off < 48)
            off += std::snprintf(buf + off, cap - static_cast<std::size_t>(off), "%s%zu", i ? "/" : "",
                                 s.pending_per_shard[i]);
    }
    return pending;
}

std::string ms_text(long ms) {
    return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

// "h:mm:ss.mmm" of a simulated duration.
std::string hms(std::int64_t ns) {
    const long long ms = ns / 1'000'000, s = ms / 1000;
    char buf[48];
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld.%03lld", s / 3600, s / 60 % 60, s % 60, ms % 1000);
    return buf;
}

int simulate(double hours, long scale, unsigned seed, int nthreads, int per_thread, bool print_metrics) {
    tickwheel::Config cfg;
    cfg.manual_clock = true;  // no driver threads: advance() drives the wheels and runs the callbacks here
    Runtime rt(cfg);
    Sim sim(rt);
    const auto total = duration_cast<tickwheel::Duration>(duration<double, std::ratio<3600>>(hours));
    const tickwheel::Duration round = milliseconds(2) * scale;  // the live thread's 2 ms sleep, scaled
    std::printf("tickwheel demo --simulate: %d network threads x %d connections, idle timeout %s to %s, "
                "500 operations per thread every %s (time scale x%ld), %u shards, manual clock, %lld us ticks, "
                "%g h, seed %u\n",
                nthreads, per_thread, ms_text(100 * scale).c_str(), ms_text(1000 * scale).c_str(),
                ms_text(2 * scale).c_str(), scale, rt.shard_count(),
                static_cast<long long>(duration_cast<microseconds>(rt.resolution()).count()), hours, seed);
    std::printf("%14s %9s %10s %10s %9s %9s %22s %9s\n", "t(h:m:s)", "open", "rearms/s", "timeouts/s",
                "closes/s", "pending", "pending per shard", "wall(s)");

    // The live line, every 1/24 of the run (at least 1 ms): a periodic timer
    // on the manual clock, run inside advance() like the timeouts.
    const auto wall0 = Clock::now();
    const tickwheel::Duration period = std::max<tickwheel::Duration>(total / 24, milliseconds(1));
    const std::int64_t t0 = sim.now_ns();
    long last_rearmed = 0, last_timed_out = 0, last_closed = 0;
    auto ticker = rt.start_periodic(period, [&](tickwheel::Timer) {
        const auto s = rt.stats();
        char per_shard[64];
        const std::size_t pending = pending_text(s, per_shard, sizeof per_shard);
        const double per_s = 1.0 / duration<double>(period).count();
        std::printf("%14s %9ld %10.1f %10.1f %9.1f %9zu %22s %9.2f\n", hms(sim.now_ns() - t0).c_str(),
                    sim.opened - sim.closed - sim.timed_out, static_cast<double>(sim.rearmed - last_rearmed) * per_s,
                    static_cast<double>(sim.timed_out - last_timed_out) * per_s,
                    static_cast<double>(sim.closed - last_closed) * per_s, pending, per_shard,
                    duration<double>(Clock::now() - wall0).count());
        std::fflush(stdout);
        last_rearmed = sim.rearmed;
        last_timed_out = sim.timed_out;
        last_closed = sim.closed;
    });

    std::vector<Producer> producers(static_cast<std::size_t>(nthreads));
    for (int i = 0; i < nthreads; ++i) {
        Producer& p = producers[static_cast<std::size_t>(i)];
        p.conns.resize(static_cast<std::size_t>(per_thread));
        p.rng.seed(seed + static_cast<unsigned>(i));
        p.shard = i;  // taken modulo the shard count
        p.next = p.rng() % p.conns.size();
    }
    // Producer k % n takes its turn at (k / n) rounds + (k % n) / n of a round:
    // each producer once per round, the producers evenly staggered.
    const std::int64_t round_ns = round.count(), total_ns = total.count();
    std::int64_t elapsed = 0;
    for (std::int64_t k = 0;; ++k) {
        const std::int64_t at = (k / nthreads) * round_ns + (k % nthreads) * round_ns / nthreads;
        if (at >= total_ns) break;
        rt.advance(tickwheel::Duration(at - elapsed));
        elapsed = at;
        sim_burst(sim, producers[static_cast<std::size_t>(k % nthreads)], scale);
    }
    rt.advance(tickwheel::Duration(total_ns - elapsed));
    ticker.stop();

    rt.shutdown();  // cancels the connections still open (their timers are pending)
    const auto wall = duration<double>(Clock::now() - wall0).count();
    const auto s = rt.stats();
    const double sim_s = duration<double>(total).count();
    std::printf("\nsummary after %g h (%g s) of simulated time, in %.2f s of wall time (%.0fx real time)\n", hours,
                sim_s, wall, wall > 0 ? sim_s / wall : 0.0);
    const bool ok = print_summary(sim.opened, sim.closed, sim.timed_out, sim.rearmed, sim.rearm_late, sim.early, s);
    if (print_metrics) std::printf("\n# tickwheel metrics\n%s", rt.metrics().c_str());  // the final values
    return ok ? 0 : 1;
}

// A number argument of a flag: all of `text` must be one (strtod), finite.
bool parse_number(const char* text, double& out) {
    char* end = nullptr;
    out = std::strtod(text, &end);
    return end != text && *end == '\0' && std::isfinite(out);
}

}  // namespace

int main(int argc, char** argv) {
    bool print_metrics = false;
    const char* sim_hours = nullptr;  // --simulate HOURS
    const char* sim_scale = nullptr;  // --time-scale K
    const char* sim_seed = nullptr;   // --seed N
    std::vector<const char*> args;  // the positional ones
    for (int i = 1; i < argc; ++i) {
        const std::string_view a(argv[i]);
        if (a == "--metrics") {
            print_metrics = true;
        } else if (a == "--simulate" || a == "--time-scale" || a == "--seed") {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "demo: %s needs a value\n", argv[i]);
                return 2;
            }
            (a == "--simulate" ? sim_hours : a == "--time-scale" ? sim_scale : sim_seed) = argv[++i];
        } else {
            args.push_back(argv[i]);
        }
    }
    if (sim_hours != nullptr) {
        double hours = 0, scale = 1000, seed = 1234, threads = 4, per = 20000;
        const char* bad = nullptr;
        if (!parse_number(sim_hours, hours) || !(hours > 0 && hours <= 100000))
            bad = "--simulate HOURS: a number of hours, > 0 and <= 100000 (fractional allowed)";
        else if (sim_scale != nullptr && (!parse_number(sim_scale, scale) || !(scale >= 1 && scale <= 1e6) ||
                                          scale != std::floor(scale)))
            bad = "--time-scale K: a whole number, 1..1000000";
        else if (sim_seed != nullptr &&
                 (!parse_number(sim_seed, seed) || !(seed >= 0 && seed <= 4294967295.0) || seed != std::floor(seed)))
            bad = "--seed N: a whole number, 0..4294967295";
        else if (args.size() > 2)
            bad = "with --simulate, the positional arguments are [threads] [connections per thread]";
        else if (args.size() > 0 && (!parse_number(args[0], threads) || !(threads >= 1 && threads <= 1024) ||
                                     threads != std::floor(threads)))
            bad = "threads: a whole number, 1..1024";
        else if (args.size() > 1 && (!parse_number(args[1], per) || !(per >= 1 && per * threads <= 10'000'000) ||
                                     per != std::floor(per)))
            bad = "connections per thread: a whole number >= 1, threads x connections <= 10000000";
        if (bad != nullptr) {
            std::fprintf(stderr,
                         "demo: %s\nusage: demo [--metrics] --simulate HOURS [--time-scale K=1000] [--seed N=1234] "
                         "[threads=4] [connections per thread=20000]\n",
                         bad);
            return 2;
        }
        try {
            return simulate(hours, static_cast<long>(scale), static_cast<unsigned>(seed), static_cast<int>(threads),
                            static_cast<int>(per), print_metrics);
        } catch (const std::exception& e) {  // no memory for the connections or the timers
            std::fprintf(stderr, "demo --simulate: %s\n", e.what());
            return 1;
        }
    }
    if (sim_scale != nullptr || sim_seed != nullptr) {
        std::fprintf(stderr, "demo: --time-scale and --seed go with --simulate\n");
        return 2;
    }
    const int seconds_to_run = args.size() > 0 ? std::atoi(args[0]) : 5;
    const int nthreads = args.size() > 1 ? std::atoi(args[1]) : 4;
    const int per_thread = args.size() > 2 ? std::atoi(args[2]) : 20000;
    if (seconds_to_run <= 0 || nthreads <= 0 || per_thread <= 0 || args.size() > 3) {
        std::fprintf(stderr, "usage: demo [--metrics] [seconds>0] [threads>0] [connections per thread>0]\n"
                             "       demo [--metrics] --simulate HOURS [--time-scale K] [--seed N] [threads>0] "
                             "[connections per thread>0]\n");
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
        char per_shard[64];
        const std::size_t pending = pending_text(s, per_shard, sizeof per_shard);
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
    std::printf("\nsummary after %.1f s\n", duration<double>(Clock::now() - t0).count());
    const bool ok = print_summary(t.opened, t.closed, t.timed_out, t.rearmed, t.rearm_late, t.early, s);
    if (print_metrics) std::printf("\n# tickwheel metrics\n%s", rt.metrics().c_str());  // the final values
    return ok ? 0 : 1;
}
