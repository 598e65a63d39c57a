// SPDX-License-Identifier: MIT OR Apache-2.0
// bench/peers/common.hpp -- what every peer program shares: the command
// line, clocks (wall, process CPU, RSS), statistics over repetitions, the
// JSON-lines output, the Google Benchmark harness for the single-caller
// micro-benchmarks, and the lateness log of the real-time workloads.
//
// Output: one JSON object per line on stdout, one per (run, metric):
//   {"workload":"startstop","peer":"tickwheel","params":{...},"metric":"wall_ns_per_pair",
//    "unit":"ns","median":..,"min":..,"max":..,"reps":5,"samples":[..]}
// Everything human-readable goes to stderr.
#pragma once

#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace twb {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC
using ns = std::chrono::nanoseconds;

constexpr std::int64_t kUs = 1'000;
constexpr std::int64_t kMs = 1'000'000;
constexpr std::int64_t kSec = 1'000'000'000;

inline std::int64_t now_ns() noexcept {
    return std::chrono::duration_cast<ns>(Clock::now().time_since_epoch()).count();
}

/// Process CPU time (all threads, user + system), ns.
inline std::int64_t cpu_ns() noexcept {
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (std::int64_t{ru.ru_utime.tv_sec} + ru.ru_stime.tv_sec) * kSec +
           (std::int64_t{ru.ru_utime.tv_usec} + ru.ru_stime.tv_usec) * kUs;
}

/// The calling thread's CPU time, ns: the caller's own cost, whatever the
/// machine's load (a preempted caller's wall time grows, this does not).
inline std::int64_t thread_cpu_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t{ts.tv_sec} * kSec + ts.tv_nsec;
}

/// Resident set size, bytes (/proc/self/statm).
inline std::int64_t rss_bytes() noexcept {
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr) return 0;
    long size = 0, resident = 0;
    if (std::fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
    std::fclose(f);
    return static_cast<std::int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

inline void sleep_until_ns(std::int64_t t) {
    for (;;) {
        const std::int64_t d = t - now_ns();
        if (d <= 0) return;
        timespec ts{static_cast<time_t>(d / kSec), static_cast<long>(d % kSec)};
        nanosleep(&ts, nullptr);
    }
}

// ---- command line --------------------------------------------------------------
struct Opts {
    std::string workload;
    long pending = 1000;
    long ops = 1'000'000;
    int threads = 1;        // producer threads (mt)
    int reps = 5;
    int io_threads = 1;     // asio: threads running the io_context
    int workers = 0;        // tickwheel: TBB workers (0 = default); mutex: worker threads (0 = 1)
    long rate = 100'000;    // lateness: timers per second
    long resolution_us = 1000;
    long max_delay_ms = 2000;
    double segment_s = 0.5; // lateness: one repetition = the timers started in one segment
    double seconds = 10;    // idle: measured wall time
    long window_ms = 1000;  // expiry: deadlines spread over this window
    bool slow = false;      // lateness: add the slow periodic callback (workload 8)
    unsigned seed = 1;
    int warmup = 1;         // untimed warm-up passes of ops/10 before the reps
    bool sorted_preload = true;  // --preload sorted|random (see preload_delays)
    long batch = 64;        // startstop_batch, rearm_batch: timers per batch call
};

inline Opts parse(int argc, char** argv) {
    Opts o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "missing value for %s\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--workload") o.workload = val();
        else if (a == "--pending") o.pending = std::atol(val().c_str());
        else if (a == "--ops") o.ops = std::atol(val().c_str());
        else if (a == "--threads") o.threads = std::atoi(val().c_str());
        else if (a == "--reps") o.reps = std::atoi(val().c_str());
        else if (a == "--io-threads") o.io_threads = std::atoi(val().c_str());
        else if (a == "--workers") o.workers = std::atoi(val().c_str());
        else if (a == "--rate") o.rate = std::atol(val().c_str());
        else if (a == "--resolution-us") o.resolution_us = std::atol(val().c_str());
        else if (a == "--max-delay-ms") o.max_delay_ms = std::atol(val().c_str());
        else if (a == "--segment-s") o.segment_s = std::atof(val().c_str());
        else if (a == "--seconds") o.seconds = std::atof(val().c_str());
        else if (a == "--window-ms") o.window_ms = std::atol(val().c_str());
        else if (a == "--slow") o.slow = true;
        else if (a == "--seed") o.seed = static_cast<unsigned>(std::atol(val().c_str()));
        else if (a == "--warmup") o.warmup = std::atoi(val().c_str());
        else if (a == "--preload") o.sorted_preload = val() != "random";
        else if (a == "--batch") o.batch = std::atol(val().c_str());
        else {
            std::fprintf(stderr,
                         "usage: %s --workload startstop|rearm|mt|expiry|lateness|idle|startstop_batch|rearm_batch\n"
                         "       [--pending N] [--ops N] [--threads T] [--reps R] [--io-threads K] [--workers W]\n"
                         "       [--rate R/s] [--resolution-us U] [--max-delay-ms M] [--segment-s S] [--seconds S]\n"
                         "       [--window-ms W] [--slow] [--seed S] [--warmup 0|1] [--preload sorted|random]\n"
                         "       [--batch B]\n",
                         argv[0]);
            std::exit(2);
        }
    }
    if (o.reps < 1) o.reps = 1;
    if (o.batch < 1) o.batch = 1;
    return o;
}

// ---- statistics and output ----------------------------------------------------------
inline double median_of(std::vector<double> v) {
    if (v.empty()) return std::nan("");
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

inline std::string json_num(double x) {
    if (!std::isfinite(x)) return "null";
    char buf[64];
    if (std::fabs(x) >= 1e15 || x == std::floor(x)) std::snprintf(buf, sizeof buf, "%.0f", x);
    else std::snprintf(buf, sizeof buf, "%.6g", x);
    return buf;
}

inline std::string json_str(const std::string& s) {
    std::string o(1, '"');
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        o += c;
    }
    o += '"';
    return o;
}

/// An ordered list of key -> JSON value (already encoded).
struct Params {
    std::vector<std::pair<std::string, std::string>> kv;
    Params& add(const std::string& k, double v) {
        kv.emplace_back(k, json_num(v));
        return *this;
    }
    Params& add(const std::string& k, const std::string& v) {
        kv.emplace_back(k, json_str(v));
        return *this;
    }
    std::string json() const {
        std::string o = "{";
        for (std::size_t i = 0; i < kv.size(); ++i) {
            if (i) o += ',';
            o += json_str(kv[i].first);
            o += ':';
            o += kv[i].second;
        }
        o += '}';
        return o;
    }
};

/// Prints one result line: median, min and max of `samples`.
inline void emit(const std::string& workload, const std::string& peer, const Params& params,
                 const std::string& metric, const std::string& unit, const std::vector<double>& samples,
                 const std::string& note = "") {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (double s : samples) lo = std::min(lo, s), hi = std::max(hi, s);
    std::string line;
    auto put = [&](const char* key, const std::string& value) {
        line += line.empty() ? "{\"" : ",\"";
        line += key;
        line += "\":";
        line += value;
    };
    put("workload", json_str(workload));
    put("peer", json_str(peer));
    put("params", params.json());
    put("metric", json_str(metric));
    put("unit", json_str(unit));
    put("median", json_num(median_of(samples)));
    put("min", json_num(lo));
    put("max", json_num(hi));
    put("reps", std::to_string(samples.size()));
    std::string arr = "[";
    for (std::size_t i = 0; i < samples.size(); ++i) {
        if (i) arr += ',';
        arr += json_num(samples[i]);
    }
    arr += ']';
    put("samples", arr);
    if (!note.empty()) put("note", json_str(note));
    line += "}\n";
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
}

/// One repetition's figures, in a fixed order; `wall_s` is what Google
/// Benchmark is told the repetition took.
struct Sample {
    double wall_s = 0;
    std::vector<std::pair<std::string, double>> values;
    void set(const std::string& k, double v) { values.emplace_back(k, v); }
};

/// The Google Benchmark harness of the single-caller micro-benchmarks: one
/// benchmark "iteration" is one repetition of the whole workload (e.g. one
/// million start+stop pairs), timed manually (it may include waiting for the
/// runtime to drain), repeated `reps` times. Google Benchmark's console
/// report goes to stderr; the samples are returned for emit().
inline std::vector<Sample> run_gbench(const std::string& name, int reps, const std::function<Sample()>& rep) {
    static bool initialized = false;
    if (!initialized) {
        // Static: Google Benchmark keeps argv[0] (its console report prints
        // it later; ASan found the stack copy read after its scope).
        static int argc = 1;
        static char arg0[] = "peer";
        static char* argv[] = {arg0, nullptr};
        benchmark::Initialize(&argc, argv);
        initialized = true;
    }
    std::vector<Sample> out;
    benchmark::RegisterBenchmark(name.c_str(),
                                 [&](benchmark::State& st) {
                                     for (auto _ : st) {
                                         Sample s = rep();
                                         st.SetIterationTime(s.wall_s);
                                         for (auto& [k, v] : s.values) st.counters[k] = v;
                                         out.push_back(std::move(s));
                                     }
                                 })
        ->Iterations(1)
        ->Repetitions(reps)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::ConsoleReporter reporter(benchmark::ConsoleReporter::OO_None);
    reporter.SetOutputStream(&std::cerr);
    reporter.SetErrorStream(&std::cerr);
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::ClearRegisteredBenchmarks();
    return out;
}

/// Emits every metric of `samples` (units from `units`, default "ns").
inline void emit_samples(const std::string& workload, const std::string& peer, const Params& params,
                         const std::vector<Sample>& samples, const std::map<std::string, std::string>& units,
                         const std::string& note = "") {
    if (samples.empty()) return;
    for (std::size_t m = 0; m < samples[0].values.size(); ++m) {
        std::vector<double> v;
        for (auto& s : samples) v.push_back(s.values[m].second);
        const std::string& k = samples[0].values[m].first;
        auto u = units.find(k);
        emit(workload, peer, params, k, u == units.end() ? "ns" : u->second, v, note);
    }
}

// ---- random inputs, generated outside the timed loops --------------------------------
struct PairInputs {
    std::vector<std::int64_t> delay;  // ns
    std::vector<std::uint32_t> victim;
};
/// Fills `in` in place (no reallocation at the same size: RSS readings stay
/// clean -- a freed and reallocated 8 MB array is not always returned to the
/// system).
inline void fill_pairs(PairInputs& in, std::mt19937_64& rng, long ops, long pending, std::int64_t lo, std::int64_t hi) {
    in.delay.resize(static_cast<std::size_t>(ops));
    in.victim.resize(static_cast<std::size_t>(ops));
    std::uniform_int_distribution<std::int64_t> d(lo, hi);
    for (long i = 0; i < ops; ++i) {
        in.delay[static_cast<std::size_t>(i)] = d(rng);
        in.victim[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(rng() % static_cast<std::uint64_t>(pending));
    }
}

/// Makes the victims of each run of `batch` consecutive pairs distinct (the
/// next index up, modulo `pending`, replaces a repeat): a batch stops each
/// of its victims once, as the single pairs would (where a repeated victim
/// is the timer the earlier pair just started).
inline void distinct_victims(PairInputs& in, long batch, long pending) {
    const auto b = static_cast<std::size_t>(batch);
    for (std::size_t i = 0; i < in.victim.size(); i += b) {
        const std::size_t end = std::min(in.victim.size(), i + b);
        for (std::size_t j = i; j < end; ++j)
            while (std::find(in.victim.begin() + static_cast<std::ptrdiff_t>(i), in.victim.begin() + static_cast<std::ptrdiff_t>(j),
                             in.victim[j]) != in.victim.begin() + static_cast<std::ptrdiff_t>(j))
                in.victim[j] = static_cast<std::uint32_t>((in.victim[j] + 1) % static_cast<std::uint64_t>(pending));
    }
}

/// Preload delays, uniform in [lo, hi], in ascending order: every peer then
/// files its preload in deadline order, which lets the ordered containers
/// (std::map, binary heaps) take it in O(1) amortised steps instead of a
/// cache miss per level -- ten million timers load in seconds, not minutes.
/// The timed phases start from the same set of deadlines either way.
inline std::vector<std::int64_t> preload_delays(std::mt19937_64& rng, std::size_t n, std::int64_t lo, std::int64_t hi,
                                                bool sorted = true) {
    std::vector<std::int64_t> d(n);
    std::uniform_int_distribution<std::int64_t> u(lo, hi);
    for (auto& x : d) x = u(rng);
    if (sorted) std::sort(d.begin(), d.end());
    return d;
}

// ---- lateness ------------------------------------------------------------------------
/// One entry per timer of a stream: callback start minus the deadline the
/// caller computed (Clock::now() + delay, read before the start call).
struct LatenessLog {
    static constexpr std::int64_t kUnfired = std::numeric_limits<std::int64_t>::min();
    std::vector<std::int64_t> late;
    std::vector<std::int64_t> started_at;  // ns since the stream began (for segments)
    std::atomic<std::size_t> fired{0};
    explicit LatenessLog(std::size_t n) : late(n, kUnfired), started_at(n, 0) {}
    void record(std::size_t slot, std::int64_t deadline_ns) noexcept {
        late[slot] = now_ns() - deadline_ns;
        fired.fetch_add(1, std::memory_order_release);
    }
};

/// The pacing of a steady stream: call tick() often (every ~0.5 ms); it starts
/// the timers due by now through start(slot, delay_ns, deadline_ns).
struct Stream {
    long rate;
    std::size_t total;
    std::int64_t t0 = 0;
    std::size_t started = 0;
    std::int64_t max_delay_ns;
    std::mt19937_64 rng;
    LatenessLog& log;
    Stream(long r, std::size_t n, std::int64_t maxd, unsigned seed, LatenessLog& l)
        : rate(r), total(n), max_delay_ns(maxd), rng(seed), log(l) {}
    template <class Start>
    bool tick(Start&& start) {
        if (t0 == 0) t0 = now_ns();
        const double el = static_cast<double>(now_ns() - t0) / 1e9;
        const auto target = static_cast<std::size_t>(std::min<double>(static_cast<double>(total), el * static_cast<double>(rate)));
        std::uniform_int_distribution<std::int64_t> d(0, max_delay_ns);
        for (; started < target; ++started) {
            const std::int64_t delay = d(rng);
            const std::int64_t now = now_ns();
            log.started_at[started] = now - t0;
            start(started, delay, now + delay);
        }
        return started < total;
    }
};

/// Emits the lateness of a finished stream: percentiles per segment (the
/// timers started in one segment_s slice are one repetition).
inline void emit_lateness(const std::string& workload, const std::string& peer, const Params& params,
                          const LatenessLog& log, double stream_s, int segments, double achieved_rate) {
    const std::size_t n = log.late.size();
    std::vector<std::vector<std::int64_t>> seg(static_cast<std::size_t>(segments));
    std::size_t unfired = 0;
    long early = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (log.late[i] == LatenessLog::kUnfired) {
            ++unfired;
            continue;
        }
        if (log.late[i] < 0) ++early;
        auto s = static_cast<std::size_t>(static_cast<double>(log.started_at[i]) / 1e9 / stream_s * segments);
        seg[std::min(s, seg.size() - 1)].push_back(log.late[i]);
    }
    std::vector<double> p50, p99, p999, mx, ear;
    for (auto& v : seg) {
        if (v.empty()) continue;
        std::sort(v.begin(), v.end());
        auto q = [&](double p) { return static_cast<double>(v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))]) / 1e3; };
        p50.push_back(q(0.5));
        p99.push_back(q(0.99));
        p999.push_back(q(0.999));
        mx.push_back(q(1.0));
        ear.push_back(static_cast<double>(std::count_if(v.begin(), v.end(), [](std::int64_t x) { return x < 0; })));
    }
    emit(workload, peer, params, "lateness_p50", "us", p50);
    emit(workload, peer, params, "lateness_p99", "us", p99);
    emit(workload, peer, params, "lateness_p999", "us", p999);
    emit(workload, peer, params, "lateness_max", "us", mx);
    emit(workload, peer, params, "early_per_segment", "count", ear);
    emit(workload, peer, params, "early_total", "count", {static_cast<double>(early)});
    emit(workload, peer, params, "unfired", "count", {static_cast<double>(unfired)});
    emit(workload, peer, params, "achieved_rate", "timers/s", {achieved_rate});
    std::fprintf(stderr, "%s %s: %zu timers, %zu unfired, %ld early, p99 median %.0f us\n", workload.c_str(),
                 peer.c_str(), n, unfired, early, median_of(p99));
}

[[noreturn]] inline void quick_exit_ok() {
    // Skip destructors: tearing down ten million timers proves nothing and
    // costs seconds.
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(0);
}

/// Expiry workload bookkeeping shared by the thread-safe peers: callbacks
/// delivered so far, how many are expected, and when the last one ran (ns).
struct ExpiryCtx {
    std::atomic<long> done{0};
    long n = 0;
    std::atomic<std::int64_t> last{0};
    void reset(long expected) {
        done = 0;
        n = expected;
        last = 0;
    }
    /// Called by each callback; the last one stamps `last`.
    void delivered() {
        if (done.fetch_add(1, std::memory_order_relaxed) + 1 == n) last.store(now_ns());
    }
};

/// The expiry workload's result: `n` callbacks delivered between `t_start`
/// and `t_last`, after loading them took `t_loaded - t_load` (all ns).
inline Sample expiry_sample(long n, std::int64_t t_start, std::int64_t t_last, std::int64_t t_load,
                            std::int64_t t_loaded) {
    Sample s;
    const double secs = static_cast<double>(t_last - t_start) / 1e9;
    s.wall_s = secs;
    s.set("callbacks_per_s", static_cast<double>(n) / secs);
    s.set("delivery_ms", secs * 1e3);
    s.set("load_ns_per_timer", static_cast<double>(t_loaded - t_load) / static_cast<double>(n));
    return s;
}

}  // namespace twb
