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

struct TickwheelPeer : PacedPeer {
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

    // Expiry: one tick of --resolution-us holds the window (tick_expiry_rep).
    ExpiryCtx ctx;
    Sample expiry_rep(Local&, long n, const Opts& o) {
        return tick_expiry_rep(ctx, n, o, epoch_lo, epoch_hi, [this](std::int64_t deadline, ExpiryCtx* c) {
            rt.start_at(tickwheel::TimePoint(ns(deadline)), [c] { c->delivered(); });
        });
    }
};

}  // namespace

int main(int argc, char** argv) { return run_main<TickwheelPeer>(argc, argv); }
