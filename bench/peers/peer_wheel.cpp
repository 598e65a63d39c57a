// SPDX-License-Identifier: MIT OR Apache-2.0
// tickwheel's single-shard wheel (include/tickwheel/wheel.hpp) used
// directly, as a single-threaded event loop would embed it: no runtime, no
// threads, no atomics. The difference to the "tickwheel" peer is what the
// thread-safety layer (handle table, inboxes, shards, TBB hand-off) costs.
//
// Timers are intrusive nodes with a callback pointer, recycled through a
// free list; ticks are 1 ms; the wheel's clock is not advanced during
// startstop/rearm (nothing fires, as with libuv outside uv_run).
#include <deque>

#include "driver.hpp"
#include "tickwheel/wheel.hpp"
#include "../wheel_node.hpp"

using namespace twb;
using tickwheel::tick_t;
using tickwheel::Wheel;
using tickwheel::WheelNode;

namespace {

using twb_wheel::Node;

void noop(void*) {}

struct WheelPeer {
    static constexpr bool kThreadSafe = false;
    static constexpr bool kHasDriver = false;
    using H = Node*;
    struct Local {
        explicit Local(WheelPeer&) {}
    };

    Wheel w{0};
    std::deque<Node> nodes;
    std::vector<Node*> free_;

    explicit WheelPeer(const Opts&) {}
    std::string name() const { return "tickwheel-wheel"; }

    static tick_t ticks(std::int64_t d) { return static_cast<tick_t>((d + kMs - 1) / kMs); }
    Node* get() {
        if (free_.empty()) return &nodes.emplace_back();
        Node* n = free_.back();
        free_.pop_back();
        return n;
    }
    H start(Local&, std::int64_t d) {
        Node* n = get();
        n->fn = noop;
        w.insert(n, w.now() + ticks(d));
        return n;
    }
    bool stop(Local&, H n) {
        const bool r = w.remove(n);
        free_.push_back(n);
        return r;
    }
    bool rearm(Local&, H& n, std::int64_t d) {
        w.rearm(n, w.now() + ticks(d));
        return true;
    }
    void finish(Local&) {}
    void drain() {}
    void before_rep() {}

    // Expiry: n nodes due over the next window (1 ms ticks), then one
    // advance() to the end of the window (a driver waking after it) and every
    // expired node popped and its callback called. Same callback as the
    // other peers.
    struct ExpCtx {
        std::atomic<long> done{0};
        long n = 0;
        std::int64_t last = 0;
    } ctx;
    static void exp_cb(void* a) {
        auto* c = static_cast<ExpCtx*>(a);
        if (c->done.fetch_add(1, std::memory_order_relaxed) + 1 == c->n) c->last = now_ns();
    }
    Sample expiry_rep(Local&, long n, const Opts& o) {
        ctx.done = 0;
        ctx.n = n;
        std::vector<Node*> mine;
        for (long i = 0; i < n; ++i) mine.push_back(get());
        std::mt19937_64 rng(o.seed);
        const auto win = static_cast<tick_t>(o.window_ms);
        const tick_t base = w.now();
        const std::int64_t t_load = now_ns();
        for (Node* x : mine) {
            x->fn = exp_cb;
            x->arg = &ctx;
            w.insert(x, base + 1 + rng() % win);
        }
        const std::int64_t t0 = now_ns();
        w.advance(base + win);
        while (WheelNode* x = w.pop_expired()) {
            Node* nd = static_cast<Node*>(x);
            nd->fn(nd->arg);
            free_.push_back(nd);
        }
        return expiry_sample(n, t0, ctx.last, t_load, t0);
    }

    template <class F>
    void start_cb(Local&, std::int64_t, F&&) {}
    void start_slow(Local&) {}
    void run_stream(Local&, const std::function<bool()>&, const std::function<bool()>&) {}
    void begin_idle() {}
};

}  // namespace

int main(int argc, char** argv) { return run_main<WheelPeer>(argc, argv); }
