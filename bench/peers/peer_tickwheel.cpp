// SPDX-License-Identifier: MIT OR Apache-2.0
// tickwheel's runtime through its C++ API (include/tickwheel/runtime.hpp):
// Runtime::start / stop / reset from the caller's thread(s); shards file the
// requests; callbacks run on the TBB arena.
//
// "Drained": after a timed loop the clock runs until every shard's inbox is
// empty (Stats::inbox_per_shard), so the shards' work is counted.
#include <span>
#include <thread>
#include <vector>

#include "driver.hpp"
#include "tickwheel/runtime.hpp"

using namespace twb;

namespace {

tickwheel::Config make_config(const Opts& o) {
    tickwheel::Config c;
    c.resolution = std::chrono::microseconds(o.resolution_us);
    if (o.workers > 0) c.workers = static_cast<unsigned>(o.workers);
    return c;
}

struct TickwheelPeer {
    static constexpr bool kThreadSafe = true;
    static constexpr bool kHasDriver = true;
    using H = std::uint64_t;
    struct Local {
        explicit Local(TickwheelPeer&) {}
    };

    // The runtime's tick epoch is the CLOCK_MONOTONIC time of its
    // construction: bracketed here (workload expiry aligns to ticks).
    std::int64_t epoch_lo;
    tickwheel::Runtime rt;
    std::int64_t epoch_hi;

    explicit TickwheelPeer(const Opts& o) : epoch_lo(now_ns()), rt(make_config(o)), epoch_hi(now_ns()) {}

    std::string name() const { return "tickwheel"; }

    H start(Local&, std::int64_t d) { return rt.start(ns(d), [] {}).id(); }
    bool stop(Local&, H h) { return rt.stop(h); }
    bool rearm(Local&, H& h, std::int64_t d) { return rt.reset(h, ns(d)); }

    // Batches (workloads startstop_batch, rearm_batch): the span overloads.
    std::vector<tickwheel::StartOptions> batch_opts;
    std::vector<tickwheel::detail::Callback> batch_cbs;
    std::vector<tickwheel::Timer> batch_timers;
    void start_n(Local&, const std::int64_t* d, std::size_t n, H* out) {
        if (batch_opts.size() < n) {
            batch_opts.resize(n);
            batch_cbs.resize(n);
            batch_timers.resize(n);
        }
        for (std::size_t i = 0; i < n; ++i) {
            batch_opts[i].delay = ns(d[i]);
            batch_cbs[i] = [] {};
        }
        std::error_code ec;
        rt.start(std::span(batch_opts.data(), n), std::span(batch_cbs.data(), n), std::span(batch_timers.data(), n), {},
                 ec);
        for (std::size_t i = 0; i < n; ++i) out[i] = batch_timers[i].id();
    }
    std::size_t stop_n(Local&, const H* h, std::size_t n) { return rt.stop(std::span(h, n)); }
    std::size_t rearm_n(Local&, H* h, std::size_t n, std::int64_t d) { return rt.reset(std::span<const H>(h, n), ns(d)); }
    void finish(Local&) {}
    void before_rep() {}
    // Diagnostic: timer records ever allocated (the handle table's
    // high-water mark), per pending timer.
    void extra(Sample& s, std::size_t n) { s.set("slots_per_pending", static_cast<double>(rt.stats().slots) / static_cast<double>(n)); }
    void drain() {
        for (;;) {
            const tickwheel::Stats st = rt.stats();
            bool empty = true;
            for (std::size_t q : st.inbox_per_shard) empty &= q == 0;
            if (empty) return;
            sleep_until_ns(now_ns() + 20 * kUs);
        }
    }

    template <class F>
    void start_cb(Local&, std::int64_t d, F&& f) {
        rt.start(ns(d), std::forward<F>(f));
    }
    void start_slow(Local&) {
        rt.start_periodic(std::chrono::milliseconds(10), [] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); });
    }
    void run_stream(Local&, const std::function<bool()>& tick, const std::function<bool()>& done) {
        paced_stream(tick, done);
    }
    void begin_idle() {}

    // Expiry: the runtime runs at a tick of --resolution-us (the suite uses
    // 1 s). All n deadlines are spread over the window that ends at a tick
    // boundary B, so they come due together at B; loading finishes before B.
    // Delivered = n / (last callback - B).
    ExpiryCtx ctx;
    Sample expiry_rep(Local&, long n, const Opts& o) {
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
        ExpiryCtx* c = &ctx;
        for (long i = 0; i < n; ++i)
            rt.start_at(tickwheel::TimePoint(ns(dl(rng))), [c] {
                c->delivered();
            });
        const std::int64_t t_loaded = now_ns();
        if (t_loaded >= B) std::fprintf(stderr, "expiry: WARNING loading ended after the boundary\n");
        while (ctx.last.load() == 0 && now_ns() < B + 60 * kSec) sleep_until_ns(now_ns() + 1 * kMs);
        return expiry_sample(n, B, ctx.last.load(), t_load, t_loaded);
    }
};

}  // namespace

int main(int argc, char** argv) { return run_main<TickwheelPeer>(argc, argv); }
