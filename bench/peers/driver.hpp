// SPDX-License-Identifier: MIT OR Apache-2.0
// bench/peers/driver.hpp -- the workloads, written once, run against every
// peer. A peer is a class P that drives one timer library through its own
// idiomatic API (see peer_*.cpp) and provides:
//
//   static constexpr bool kThreadSafe;  // any thread may start/stop (workload "mt")
//   static constexpr bool kHasDriver;   // fires timers on its own (lateness, idle)
//   struct Local { explicit Local(P&); };  // per caller thread (timer pools, counters)
//   using H = ...;                       // what start() returns: the caller's handle
//   explicit P(const twb::Opts&);
//   std::string name() const;
//   H start(Local&, std::int64_t delay_ns);          // with a trivial callback
//   bool stop(Local&, H);
//   bool rearm(Local&, H&, std::int64_t delay_ns);
//   void finish(Local&);   // publish per-thread counts (before drain())
//   void drain();          // wait until every request made so far is processed
//   void before_rep();     // e.g. libuv: uv_update_time
//   Sample expiry_rep(Local&, long n, const Opts&);
//   template <class F> void start_cb(Local&, std::int64_t delay_ns, F&& f);  // one-shot, f()
//   void start_slow(Local&);        // a periodic 10 ms callback that blocks 100 ms
//   void run_stream(Local&, const std::function<bool()>& tick, const std::function<bool()>& done);
//   void begin_idle();              // start firing machinery that waits for run (libuv)
//   (run_stream and begin_idle: PacedPeer's, for a peer that fires on its own threads)
//
// Workloads (see docs/bench/README.md for the exact definitions):
//   startstop  preload --pending timers due in [1 s, 100 s] (in deadline order,
//              see preload_delays()); each repetition
//              times --ops pairs (start one with a delay in [1 ms, 100 s],
//              stop a random pending one) and, for peers that hand requests
//              to other threads, waits until those have processed them.
//              Also reports RSS per pending timer (workload "memory").
//   rearm      preload --pending timers due in [20 s, 30 s]; --ops re-arms of
//              random timers, delays rising from 30 s to 60 s over the run, so
//              that every re-arm moves a deadline later (keepalive).
//   mt         --threads producers, each keeping --pending/threads timers and
//              doing --ops pairs; aggregate pairs/s.
//   expiry     --pending timers due over a --window-ms window, delivered as a
//              backlog (peer-specific, see expiry_rep); callbacks/s.
//   lateness   a steady stream of --rate timers/s with delays in
//              [0, --max-delay-ms]; each repetition is the timers started in
//              one --segment-s slice; with --slow, plus a periodic callback
//              that blocks 100 ms every 10 ms.
//   idle       --pending timers due in [60 s, 120 s]; process CPU% over
//              --seconds, split in --reps windows.
//   startstop_batch  startstop's pairs, --batch at a time: start --batch
//              timers with one call, stop --batch distinct random pending
//              ones with one call (peers with batch calls only: start_n,
//              stop_n, rearm_n; the others report "not applicable").
//   rearm_batch  rearm's re-arms, --batch random timers per call (one delay
//              per batch: the run's rising delay at the batch's first).
#pragma once

#include <barrier>
#include <thread>

#include "common.hpp"

namespace twb {

inline Params base_params(const Opts& o) {
    Params p;
    p.add("pending", static_cast<double>(o.pending)).add("ops", static_cast<double>(o.ops));
    return p;
}

/// Clock and CPU readings around one timed pass of a single-caller workload:
/// start, end of the caller's loop, and end of the peer's drain.
struct TimedPass {
    std::int64_t t0, t_loop, t1, c0, c1, tc0, tc_loop;
    double caller_ns(double ops) const { return static_cast<double>(t_loop - t0) / ops; }
    double wall_ns(double ops) const { return static_cast<double>(t1 - t0) / ops; }
    double cpu_ns(double ops) const { return static_cast<double>(c1 - c0) / ops; }
    /// The caller thread's CPU time in its loop (load-independent).
    double caller_cpu_ns(double ops) const { return static_cast<double>(tc_loop - tc0) / ops; }
};

/// Runs `pass()` as one timed repetition: the caller's loop, then the peer's
/// finish and drain, so the peer's own threads' work is counted.
template <class P, class Pass>
TimedPass timed_pass(P& p, typename P::Local& L, Pass&& pass) {
    TimedPass t{};
    p.before_rep();
    t.c0 = cpu_ns();
    t.tc0 = thread_cpu_ns();
    t.t0 = now_ns();
    pass();
    t.t_loop = now_ns();
    t.tc_loop = thread_cpu_ns();
    p.finish(L);
    p.drain();
    t.t1 = now_ns();
    t.c1 = cpu_ns();
    return t;
}

// ---- batches: startstop_batch, rearm_batch ----------------------------------------------
/// A peer with batch calls (tickwheel): start n timers, stop n, re-arm n to
/// one delay; the counts returned are those that succeeded.
template <class P>
concept HasBatch = requires(P& p, typename P::Local& L, typename P::H* h, const std::int64_t* d) {
    p.start_n(L, d, std::size_t{}, h);
    { p.stop_n(L, h, std::size_t{}) } -> std::convertible_to<std::size_t>;
    { p.rearm_n(L, h, std::size_t{}, std::int64_t{}) } -> std::convertible_to<std::size_t>;
};

// ---- startstop (+ memory) ------------------------------------------------------------
/// startstop's pairs one by one, or (`batched`, peers with HasBatch) --batch
/// at a time: start --batch timers with one call, stop --batch distinct
/// random pending ones with one call (workload startstop_batch; no memory
/// lines).
template <class P>
void startstop(P& p, const Opts& o, bool batched = false) {
    using H = typename P::H;
    typename P::Local L(p);
    const auto n = static_cast<std::size_t>(o.pending);
    std::mt19937_64 rng(o.seed);
    PairInputs in;
    in.delay.assign(static_cast<std::size_t>(o.ops), 0);
    in.victim.assign(static_cast<std::size_t>(o.ops), 0);
    std::vector<H> pending(n);  // the caller's handles: touched before the RSS baseline
    std::vector<std::int64_t> pre = preload_delays(rng, n, 1 * kSec, 100 * kSec, o.sorted_preload);
    const std::int64_t rss0 = rss_bytes();
    const std::int64_t tp0 = now_ns();
    for (std::size_t i = 0; i < n; ++i) pending[i] = p.start(L, pre[i]);
    p.finish(L);
    p.drain();
    const double preload_s = static_cast<double>(now_ns() - tp0) / 1e9;
    const std::int64_t rss1 = rss_bytes();
    // `pre` stays allocated: the baseline includes it.
    std::fprintf(stderr, "%s: preloaded %zu timers in %.2f s, RSS +%.1f MB (%.1f B/timer)\n", p.name().c_str(), n,
                 preload_s, static_cast<double>(rss1 - rss0) / 1e6, static_cast<double>(rss1 - rss0) / static_cast<double>(n));

    const auto b = static_cast<std::size_t>(o.batch);
    std::vector<H> fresh(batched ? b : 0), victims(batched ? b : 0);
    auto pass = [&](long ops) {
        if constexpr (HasBatch<P>) {
            if (batched) {
                const auto total = static_cast<std::size_t>(ops);
                for (std::size_t i = 0; i < total; i += b) {
                    const std::size_t m = std::min(b, total - i);
                    p.start_n(L, &in.delay[i], m, fresh.data());
                    for (std::size_t j = 0; j < m; ++j) victims[j] = pending[in.victim[i + j]];
                    p.stop_n(L, victims.data(), m);
                    for (std::size_t j = 0; j < m; ++j) pending[in.victim[i + j]] = fresh[j];
                }
                return;
            }
        }
        for (long i = 0; i < ops; ++i) {
            const H h = p.start(L, in.delay[static_cast<std::size_t>(i)]);
            H& v = pending[in.victim[static_cast<std::size_t>(i)]];
            p.stop(L, v);
            v = h;
        }
    };
    auto inputs = [&](long ops) {
        fill_pairs(in, rng, ops, o.pending, 1 * kMs, 100 * kSec);
        if (batched) distinct_victims(in, o.batch, o.pending);
    };
    for (int w = 0; w < o.warmup; ++w) {
        inputs(o.ops / 10);
        p.before_rep();
        pass(o.ops / 10);
        p.finish(L);
        p.drain();
    }
    const char* workload = batched ? "startstop_batch" : "startstop";
    auto samples = run_gbench(p.name() + "/" + workload + "/" + std::to_string(n), o.reps, [&] {
        inputs(o.ops);
        const TimedPass t = timed_pass(p, L, [&] { pass(o.ops); });
        Sample s;
        const auto ops = static_cast<double>(o.ops);
        s.wall_s = static_cast<double>(t.t1 - t.t0) / 1e9;
        s.set("wall_ns_per_pair", t.wall_ns(ops));
        s.set("cpu_ns_per_pair", t.cpu_ns(ops));
        s.set("caller_ns_per_pair", t.caller_ns(ops));
        s.set("caller_cpu_ns_per_pair", t.caller_cpu_ns(ops));
        s.set("drain_us", static_cast<double>(t.t1 - t.t_loop) / 1e3);
        if constexpr (requires { p.extra(s, n); }) p.extra(s, n);
        s.set("rss_bytes_per_timer", static_cast<double>(rss_bytes() - rss0) / static_cast<double>(n));
        return s;
    });
    Params params = base_params(o);
    std::vector<Sample> main, mem;
    for (auto& s : samples) {
        Sample a, m;
        a.values.assign(s.values.begin(), s.values.end() - 1);
        m.values.assign(s.values.end() - 1, s.values.end());
        main.push_back(a);
        mem.push_back(m);
    }
    if (batched) {
        params.add("batch", static_cast<double>(o.batch));
        emit_samples(workload, p.name(), params, main, {{"drain_us", "us"}, {"slots_per_pending", "records"}});
        return;
    }
    emit_samples("startstop", p.name(), params, main, {{"drain_us", "us"}, {"slots_per_pending", "records"}});
    emit("startstop", p.name(), params, "preload_s", "s", {preload_s});
    Params mp;
    mp.add("pending", static_cast<double>(n));
    emit_samples("memory", p.name(), mp, mem, {{"rss_bytes_per_timer", "B"}},
                 "RSS growth over the preload, measured after each repetition");
    emit("memory", p.name(), mp, "rss_bytes_per_timer_after_preload", "B",
         {static_cast<double>(rss1 - rss0) / static_cast<double>(n)});
}

// ---- rearm ------------------------------------------------------------------------------
/// rearm's re-arms one by one, or (`batched`, peers with HasBatch) --batch
/// random timers per call to one delay: the run's rising delay at the
/// batch's first (workload rearm_batch).
template <class P>
void rearm(P& p, const Opts& o, bool batched = false) {
    using H = typename P::H;
    typename P::Local L(p);
    const auto n = static_cast<std::size_t>(o.pending);
    std::mt19937_64 rng(o.seed + 1);
    std::vector<H> pending(n);
    {
        std::vector<std::int64_t> pre = preload_delays(rng, n, 20 * kSec, 30 * kSec, o.sorted_preload);
        for (std::size_t i = 0; i < n; ++i) pending[i] = p.start(L, pre[i]);
        p.finish(L);
        p.drain();
    }
    // Delays rise from 30 s to 60 s over every re-arm of the run, so each
    // re-arm moves its timer's deadline later (now only grows too).
    const long warm_ops = o.warmup ? o.ops / 10 : 0;
    const double total = static_cast<double>(warm_ops + o.reps * o.ops);
    long done = 0;
    PairInputs in;
    auto gen = [&](long ops) {
        in.delay.resize(static_cast<std::size_t>(ops));
        in.victim.resize(static_cast<std::size_t>(ops));
        for (long i = 0; i < ops; ++i) {
            in.delay[static_cast<std::size_t>(i)] =
                30 * kSec + static_cast<std::int64_t>(30.0 * 1e9 * static_cast<double>(done + i) / total);
            in.victim[static_cast<std::size_t>(i)] = static_cast<std::uint32_t>(rng() % n);
        }
        done += ops;
    };
    const auto b = static_cast<std::size_t>(o.batch);
    std::vector<H> hs(batched ? b : 0);
    auto pass = [&](long ops) {
        if constexpr (HasBatch<P>) {
            if (batched) {
                const auto count = static_cast<std::size_t>(ops);
                for (std::size_t i = 0; i < count; i += b) {
                    const std::size_t m = std::min(b, count - i);
                    for (std::size_t j = 0; j < m; ++j) hs[j] = pending[in.victim[i + j]];
                    p.rearm_n(L, hs.data(), m, in.delay[i]);
                }
                return;
            }
        }
        for (long i = 0; i < ops; ++i)
            p.rearm(L, pending[in.victim[static_cast<std::size_t>(i)]], in.delay[static_cast<std::size_t>(i)]);
    };
    if (warm_ops) {
        gen(warm_ops);
        p.before_rep();
        pass(warm_ops);
        p.finish(L);
        p.drain();
    }
    const char* workload = batched ? "rearm_batch" : "rearm";
    auto samples = run_gbench(p.name() + "/" + workload + "/" + std::to_string(n), o.reps, [&] {
        gen(o.ops);
        const TimedPass t = timed_pass(p, L, [&] { pass(o.ops); });
        Sample s;
        const auto ops = static_cast<double>(o.ops);
        s.wall_s = static_cast<double>(t.t_loop - t.t0) / 1e9;
        s.set("caller_ns_per_rearm", t.caller_ns(ops));
        s.set("wall_ns_per_rearm", t.wall_ns(ops));
        s.set("cpu_ns_per_rearm", t.cpu_ns(ops));
        s.set("caller_cpu_ns_per_rearm", t.caller_cpu_ns(ops));
        return s;
    });
    Params params = base_params(o);
    if (batched) params.add("batch", static_cast<double>(o.batch));
    emit_samples(workload, p.name(), params, samples, {});
}

/// The batch workloads: startstop and rearm through start_n / stop_n /
/// rearm_n; "not applicable" for a peer without them.
template <class P>
void batched(P& p, const Opts& o, void (*run)(P&, const Opts&, bool), const char* workload) {
    if constexpr (!HasBatch<P>) {
        (void)run;
        std::fprintf(stderr, "%s has no batch calls: workload %s not applicable\n", p.name().c_str(), workload);
    } else {
        run(p, o, true);
    }
}

// ---- mt: several producer threads -------------------------------------------------------
template <class P>
void mt(P& p, const Opts& o) {
    if constexpr (!P::kThreadSafe) {
        std::fprintf(stderr, "%s is not thread-safe: workload mt not applicable\n", p.name().c_str());
    } else {
        using H = typename P::H;
        const int T = o.threads;
        const long per = std::max<long>(1, o.pending / T);
        const int passes = (o.warmup ? 1 : 0) + o.reps;
        std::barrier sync(T + 1);
        std::vector<std::int64_t> done_at(static_cast<std::size_t>(T));
        std::vector<std::thread> th;
        for (int t = 0; t < T; ++t) {
            th.emplace_back([&, t] {
                typename P::Local L(p);
                std::mt19937_64 rng(o.seed * 1000 + static_cast<unsigned>(t));
                std::vector<H> pending(static_cast<std::size_t>(per));
                std::uniform_int_distribution<std::int64_t> preload(1 * kSec, 100 * kSec);
                for (auto& h : pending) h = p.start(L, preload(rng));
                p.finish(L);
                PairInputs in;
                for (int pass = 0; pass < passes; ++pass) {
                    const long ops = (o.warmup && pass == 0) ? o.ops / 10 : o.ops;
                    fill_pairs(in, rng, ops, per, 1 * kMs, 100 * kSec);
                    sync.arrive_and_wait();  // inputs ready
                    sync.arrive_and_wait();  // go
                    for (long i = 0; i < ops; ++i) {
                        const H h = p.start(L, in.delay[static_cast<std::size_t>(i)]);
                        H& v = pending[in.victim[static_cast<std::size_t>(i)]];
                        p.stop(L, v);
                        v = h;
                    }
                    done_at[static_cast<std::size_t>(t)] = now_ns();
                    p.finish(L);
                    sync.arrive_and_wait();  // all done
                }
                sync.arrive_and_wait();  // keep the Local (its timers) alive until the end
            });
        }
        std::vector<double> pps, caller_pps, cpu_pp;
        for (int pass = 0; pass < passes; ++pass) {
            const long ops = (o.warmup && pass == 0) ? o.ops / 10 : o.ops;
            sync.arrive_and_wait();
            const std::int64_t c0 = cpu_ns(), t0 = now_ns();
            sync.arrive_and_wait();
            sync.arrive_and_wait();
            const std::int64_t tc = *std::max_element(done_at.begin(), done_at.end());
            p.drain();
            const std::int64_t t1 = now_ns(), c1 = cpu_ns();
            if (o.warmup && pass == 0) continue;
            const double pairs = static_cast<double>(ops) * T;
            pps.push_back(pairs / (static_cast<double>(t1 - t0) / 1e9));
            caller_pps.push_back(pairs / (static_cast<double>(tc - t0) / 1e9));
            cpu_pp.push_back(static_cast<double>(c1 - c0) / pairs);
            std::fprintf(stderr, "%s mt T=%d: %.2f M pairs/s (callers %.2f M/s), cpu %.0f ns/pair\n", p.name().c_str(), T,
                         pps.back() / 1e6, caller_pps.back() / 1e6, cpu_pp.back());
        }
        sync.arrive_and_wait();
        for (auto& x : th) x.join();
        Params params = base_params(o);
        params.add("threads", T);
        emit("mt", p.name(), params, "pairs_per_s", "pairs/s", pps);
        emit("mt", p.name(), params, "caller_pairs_per_s", "pairs/s", caller_pps);
        emit("mt", p.name(), params, "cpu_ns_per_pair", "ns", cpu_pp);
    }
}

// ---- expiry -------------------------------------------------------------------------------
template <class P>
void expiry(P& p, const Opts& o) {
    typename P::Local L(p);
    std::vector<Sample> samples;
    for (int r = 0; r < o.reps; ++r) {
        samples.push_back(p.expiry_rep(L, o.pending, o));
        std::fprintf(stderr, "%s expiry rep %d: %.2f M callbacks/s\n", p.name().c_str(), r,
                     samples.back().values[0].second / 1e6);
    }
    Params params;
    params.add("timers", static_cast<double>(o.pending)).add("window_ms", static_cast<double>(o.window_ms));
    emit_samples("expiry", p.name(), params, samples,
                 {{"callbacks_per_s", "callbacks/s"}, {"delivery_ms", "ms"}, {"load_ns_per_timer", "ns"}});
}

/// tickwheel's expiry repetition (peer_tickwheel, peer_tickwheel_c): the
/// runtime runs at a tick of --resolution-us (the suite uses 1 s) from an
/// epoch in [epoch_lo, epoch_hi] (the CLOCK_MONOTONIC readings around its
/// creation). All n deadlines are spread over the window that ends at a
/// tick boundary B, so they come due together at B; loading finishes before
/// B. `start_at(deadline_ns, ctx)` starts one one-shot timer whose callback
/// calls ctx->delivered(). Delivered = n / (last callback - B).
template <class StartAt>
Sample tick_expiry_rep(ExpiryCtx& ctx, long n, const Opts& o, std::int64_t epoch_lo, std::int64_t epoch_hi,
                       StartAt&& start_at) {
    const std::int64_t res = o.resolution_us * kUs;
    const std::int64_t window = o.window_ms * kMs;
    if (res < window) {
        std::fprintf(stderr, "expiry: --resolution-us must be >= --window-ms (one tick holds the window)\n");
        std::exit(2);
    }
    ctx.reset(n);
    // Boundary B = epoch + k*res, at least 0.8 s away (time to load).
    const std::int64_t k = (now_ns() + 800 * kMs - epoch_lo) / res + 1;
    const std::int64_t B = epoch_lo + k * res;  // <= the true boundary (epoch >= epoch_lo)
    const std::int64_t lo = std::max(B - window, epoch_hi + (k - 1) * res) + 1;  // > the previous boundary
    std::mt19937_64 rng(o.seed + static_cast<unsigned>(k));
    std::uniform_int_distribution<std::int64_t> dl(lo, B);
    const std::int64_t t_load = now_ns();
    for (long i = 0; i < n; ++i) start_at(dl(rng), &ctx);
    const std::int64_t t_loaded = now_ns();
    if (t_loaded >= B) std::fprintf(stderr, "expiry: WARNING loading ended after the boundary\n");
    while (ctx.last.load() == 0 && now_ns() < B + 60 * kSec) sleep_until_ns(now_ns() + 1 * kMs);
    return expiry_sample(n, B, ctx.last.load(), t_load, t_loaded);
}

// ---- lateness (workloads 5 and 8) --------------------------------------------------------
template <class P>
void lateness(P& p, const Opts& o) {
    if constexpr (!P::kHasDriver) {
        std::fprintf(stderr, "%s has no driver thread: workload lateness not applicable\n", p.name().c_str());
    } else {
        typename P::Local L(p);
        const double stream_s = o.segment_s * o.reps;
        const auto total = static_cast<std::size_t>(static_cast<double>(o.rate) * stream_s);
        LatenessLog log(total);
        Stream stream(o.rate, total, o.max_delay_ms * kMs, o.seed, log);
        if (o.slow) p.start_slow(L);
        std::int64_t last_start = 0, give_up = 0;
        bool streaming = true;
        auto tick = [&] {
            if (!streaming) return false;
            streaming = stream.tick([&](std::size_t slot, std::int64_t d, std::int64_t deadline) {
                LatenessLog* lg = &log;
                p.start_cb(L, d, [lg, slot, deadline] { lg->record(slot, deadline); });
            });
            if (!streaming) {
                last_start = now_ns();
                give_up = last_start + o.max_delay_ms * kMs + 5 * kSec;
            }
            return streaming;
        };
        auto done = [&] { return log.fired.load(std::memory_order_acquire) >= total || now_ns() > give_up; };
        p.run_stream(L, tick, done);
        const double achieved = static_cast<double>(total) / (static_cast<double>(last_start - stream.t0) / 1e9);
        Params params;
        params.add("rate", static_cast<double>(o.rate))
            .add("resolution_us", static_cast<double>(o.resolution_us))
            .add("max_delay_ms", static_cast<double>(o.max_delay_ms))
            .add("segment_s", o.segment_s)
            .add("slow", o.slow ? 1 : 0);
        emit_lateness(o.slow ? "slow" : "lateness", p.name(), params, log, static_cast<double>(last_start - stream.t0) / 1e9,
                      o.reps, achieved);
    }
}

/// The default stream driver for peers with their own threads: the calling
/// thread paces the stream, then waits.
inline void paced_stream(const std::function<bool()>& tick, const std::function<bool()>& done) {
    while (tick()) sleep_until_ns(now_ns() + 500 * kUs);
    while (!done()) sleep_until_ns(now_ns() + 10 * kMs);
}

/// run_stream() and begin_idle() of a peer whose timers fire on its own
/// threads: the stream is paced by paced_stream(), and nothing waits for
/// the idle workload to start it. Such a peer derives from PacedPeer.
struct PacedPeer {
    template <class Local>
    void run_stream(Local&, const std::function<bool()>& tick, const std::function<bool()>& done) {
        paced_stream(tick, done);
    }
    void begin_idle() {}
};

// ---- idle -----------------------------------------------------------------------------------
template <class P>
void idle(P& p, const Opts& o) {
    if constexpr (!P::kHasDriver) {
        std::fprintf(stderr, "%s has no driver thread: workload idle not applicable\n", p.name().c_str());
    } else {
        typename P::Local L(p);
        std::mt19937_64 rng(o.seed + 2);
        for (std::int64_t d : preload_delays(rng, static_cast<std::size_t>(o.pending), 60 * kSec, 120 * kSec, o.sorted_preload))
            (void)p.start(L, d);
        p.finish(L);
        p.drain();
        p.begin_idle();
        sleep_until_ns(now_ns() + 1 * kSec);  // settle
        std::vector<double> pct;
        const auto win = static_cast<std::int64_t>(o.seconds / o.reps * 1e9);
        const std::int64_t c_all = cpu_ns(), t_all = now_ns();
        for (int r = 0; r < o.reps; ++r) {
            const std::int64_t c0 = cpu_ns(), t0 = now_ns();
            sleep_until_ns(t0 + win);
            pct.push_back(100.0 * static_cast<double>(cpu_ns() - c0) / static_cast<double>(now_ns() - t0));
        }
        const double total = 100.0 * static_cast<double>(cpu_ns() - c_all) / static_cast<double>(now_ns() - t_all);
        Params params;
        params.add("pending", static_cast<double>(o.pending)).add("seconds", o.seconds);
        emit("idle", p.name(), params, "cpu_percent", "%", pct);
        emit("idle", p.name(), params, "cpu_percent_whole", "%", {total});
        std::fprintf(stderr, "%s idle: %.3f%% of one core over %.0f s\n", p.name().c_str(), total, o.seconds);
    }
}

template <class P>
int run_main(int argc, char** argv) {
    const Opts o = parse(argc, argv);
    P p(o);
    if (o.workload == "startstop") startstop(p, o);
    else if (o.workload == "rearm") rearm(p, o);
    else if (o.workload == "mt") mt(p, o);
    else if (o.workload == "expiry") expiry(p, o);
    else if (o.workload == "lateness") lateness(p, o);
    else if (o.workload == "idle") idle(p, o);
    else if (o.workload == "startstop_batch") batched(p, o, &startstop<P>, "startstop_batch");
    else if (o.workload == "rearm_batch") batched(p, o, &rearm<P>, "rearm_batch");
    else {
        std::fprintf(stderr, "unknown --workload '%s'\n", o.workload.c_str());
        return 2;
    }
    quick_exit_ok();
}

}  // namespace twb
