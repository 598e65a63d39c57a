// SPDX-License-Identifier: MIT OR Apache-2.0
// tickwheel's runtime through its C ABI (include/tickwheel/tickwheel.h),
// linked to the shared library (libtickwheel.so.1): the path C, Python
// (pybind11 and ctypes), Node (koffi) and Rust users take, with the
// shared library's thread-locals and the exported functions' PLT calls.
// peer_tickwheel drives the C++ API of the static library with the same
// workloads (driver.hpp); the difference between the two is what the
// shared-library path costs.
//
// tw_timer_start / tw_timer_stop / tw_timer_reset from the caller's
// thread(s), a no-op tw_callback; batches through tw_timer_start_n /
// stop_n / reset_n. "Drained": the clock runs until every shard's inbox is
// empty (tw_runtime_shard_stats), as peer_tickwheel does with Stats.
#include <thread>
#include <vector>

#include "driver.hpp"
#include "tickwheel/tickwheel.h"

using namespace twb;

namespace {

void noop(void*, tw_timer) {}

void check(int rc, const char* what) {
    if (rc < 0) {
        std::fprintf(stderr, "peer_tickwheel_c: %s: %s (%s)\n", what, tw_strerror(rc), tw_last_error_message());
        std::exit(1);
    }
}

std::uint64_t u64(std::int64_t d) { return static_cast<std::uint64_t>(std::max<std::int64_t>(0, d)); }

tw_runtime* create(const Opts& o) {
    tw_config c;
    tw_config_init(&c);
    c.resolution_ns = static_cast<std::uint64_t>(o.resolution_us) * 1000;
    if (o.workers > 0) c.workers = static_cast<std::uint32_t>(o.workers);
    tw_runtime* rt = nullptr;
    check(tw_runtime_create(&c, &rt), "tw_runtime_create");
    return rt;
}

struct TickwheelCPeer : PacedPeer {
    static constexpr bool kThreadSafe = true;
    static constexpr bool kHasDriver = true;
    using H = tw_timer;
    struct Local {
        explicit Local(TickwheelCPeer&) {}
    };

    // The runtime's tick epoch is the CLOCK_MONOTONIC time of its creation:
    // bracketed here (workload expiry aligns to ticks).
    std::int64_t epoch_lo;
    tw_runtime* rt;
    std::int64_t epoch_hi;
    std::uint32_t shards = 0;

    explicit TickwheelCPeer(const Opts& o) : epoch_lo(now_ns()), rt(create(o)), epoch_hi(now_ns()) {
        tw_stats st;
        tw_stats_init(&st);
        check(tw_runtime_stats(rt, &st), "tw_runtime_stats");
        shards = st.shards;
    }

    std::string name() const { return "tickwheel-capi"; }

    H start(Local&, std::int64_t d) {
        tw_timer id = 0;
        (void)tw_timer_start(rt, u64(d), 0, noop, nullptr, &id);
        return id;
    }
    bool stop(Local&, H h) { return tw_timer_stop(rt, h) == TW_OK; }
    bool rearm(Local&, H& h, std::int64_t d) { return tw_timer_reset(rt, h, u64(d)) == TW_OK; }

    // Batches (workloads startstop_batch, rearm_batch).
    std::vector<tw_timer_spec> specs;
    void start_n(Local&, const std::int64_t* d, std::size_t n, H* out) {
        if (specs.size() < n) {
            tw_timer_spec s;
            tw_timer_spec_init(&s);
            s.callback = noop;
            specs.resize(n, s);
        }
        for (std::size_t i = 0; i < n; ++i) specs[i].delay_ns = u64(d[i]);
        (void)tw_timer_start_n(rt, specs.data(), n, out);
    }
    std::size_t stop_n(Local&, const H* h, std::size_t n) {
        return static_cast<std::size_t>(std::max(0, tw_timer_stop_n(rt, h, n, nullptr)));
    }
    std::size_t rearm_n(Local&, H* h, std::size_t n, std::int64_t d) {
        return static_cast<std::size_t>(std::max(0, tw_timer_reset_n(rt, h, n, u64(d), nullptr)));
    }
    void finish(Local&) {}
    void before_rep() {}
    void drain() {
        for (;;) {
            bool empty = true;
            for (std::uint32_t i = 0; i < shards && empty; ++i) {
                std::uint64_t inbox = 0;
                check(tw_runtime_shard_stats(rt, i, nullptr, &inbox), "tw_runtime_shard_stats");
                empty = inbox == 0;
            }
            if (empty) return;
            sleep_until_ns(now_ns() + 20 * kUs);
        }
    }

    // A one-shot running f(): f lives on the heap until the release hook.
    template <class F>
    void start_cb(Local&, std::int64_t d, F&& f) {
        using Fn = std::decay_t<F>;
        tw_timer_spec s;
        tw_timer_spec_init(&s);
        s.delay_ns = u64(d);
        s.callback = [](void* a, tw_timer) { (*static_cast<Fn*>(a))(); };
        s.release = [](void* a) { delete static_cast<Fn*>(a); };
        s.arg = new Fn(std::forward<F>(f));
        tw_timer id = 0;
        check(tw_timer_start_ex(rt, &s, &id), "tw_timer_start_ex");
    }
    void start_slow(Local&) {
        tw_timer id = 0;
        check(tw_timer_start(rt, 10 * kMs, 10 * kMs,
                             [](void*, tw_timer) { std::this_thread::sleep_for(std::chrono::milliseconds(100)); },
                             nullptr, &id),
              "tw_timer_start (slow)");
    }

    // Expiry: one tick of --resolution-us holds the window (tick_expiry_rep);
    // absolute deadlines through tw_timer_spec.deadline_ns.
    ExpiryCtx ctx;
    Sample expiry_rep(Local&, long n, const Opts& o) {
        tw_timer_spec s;
        tw_timer_spec_init(&s);
        s.callback = [](void* a, tw_timer) { static_cast<ExpiryCtx*>(a)->delivered(); };
        return tick_expiry_rep(ctx, n, o, epoch_lo, epoch_hi, [&](std::int64_t deadline, ExpiryCtx* c) {
            s.deadline_ns = u64(deadline);
            s.arg = c;
            tw_timer id = 0;
            check(tw_timer_start_ex(rt, &s, &id), "tw_timer_start_ex (expiry)");
        });
    }
};

}  // namespace

int main(int argc, char** argv) { return run_main<TickwheelCPeer>(argc, argv); }
