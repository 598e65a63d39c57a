// SPDX-License-Identifier: MIT OR Apache-2.0
// libuv timers (what Node.js uses): uv_timer_init / uv_timer_start /
// uv_timer_stop on the loop's thread. libuv is not thread-safe: everything
// here runs on one thread, which also runs uv_run (workload mt: n/a).
//
// Handles are initialised once and reused through a free list (libuv's own
// advice for recurring timers: closing a handle needs a loop iteration).
// Timeouts are milliseconds relative to the loop's cached time
// (uv_update_time is called before each timed repetition and on each pacing
// tick of a stream), rounded up.
#include <uv.h>

#include <deque>
#include <thread>

#include "driver.hpp"

using namespace twb;

namespace {

void noop_cb(uv_timer_t*) {}

std::uint64_t ms_ceil(std::int64_t d) { return static_cast<std::uint64_t>((d + kMs - 1) / kMs); }

struct UvPeer {
    static constexpr bool kThreadSafe = false;
    static constexpr bool kHasDriver = true;
    using H = uv_timer_t*;
    struct Local {
        explicit Local(UvPeer&) {}
    };

    uv_loop_t loop;
    std::deque<uv_timer_t> pool;
    std::vector<uv_timer_t*> free_;

    explicit UvPeer(const Opts&) { uv_loop_init(&loop); }
    std::string name() const { return "libuv"; }

    uv_timer_t* get() {
        if (free_.empty()) {
            uv_timer_t* t = &pool.emplace_back();
            uv_timer_init(&loop, t);
            return t;
        }
        uv_timer_t* t = free_.back();
        free_.pop_back();
        return t;
    }
    H start(Local&, std::int64_t d) {
        uv_timer_t* t = get();
        uv_timer_start(t, noop_cb, ms_ceil(d), 0);
        return t;
    }
    bool stop(Local&, H t) {
        const bool active = uv_is_active(reinterpret_cast<uv_handle_t*>(t)) != 0;
        uv_timer_stop(t);
        free_.push_back(t);
        return active;
    }
    bool rearm(Local&, H& t, std::int64_t d) {
        return uv_timer_start(t, noop_cb, ms_ceil(d), 0) == 0;  // restarts an active timer
    }
    void finish(Local&) {}
    void drain() {}
    void before_rep() { uv_update_time(&loop); }

    // Streams: the loop thread paces itself with a 1 ms repeating timer.
    template <class F>
    void start_cb(Local&, std::int64_t d, F&& f) {
        struct T {
            uv_timer_t h;
            std::decay_t<F> f;
        };
        auto* t = new T{{}, std::forward<F>(f)};
        uv_timer_init(&loop, &t->h);
        t->h.data = t;
        uv_timer_start(
            &t->h,
            [](uv_timer_t* h) {
                auto* x = static_cast<T*>(h->data);
                x->f();
                uv_close(reinterpret_cast<uv_handle_t*>(h), [](uv_handle_t* hh) { delete static_cast<T*>(hh->data); });
            },
            ms_ceil(d), 0);
    }
    uv_timer_t slow;
    void start_slow(Local&) {
        uv_timer_init(&loop, &slow);
        uv_timer_start(&slow, [](uv_timer_t*) { std::this_thread::sleep_for(std::chrono::milliseconds(100)); }, 10, 10);
    }
    struct StreamCtx {
        UvPeer* self;
        const std::function<bool()>* tick;
        const std::function<bool()>* done;
        bool streaming = true;
        uv_timer_t pace;
    };
    void run_stream(Local&, const std::function<bool()>& tick, const std::function<bool()>& done) {
        StreamCtx sc{this, &tick, &done, true, {}};
        uv_timer_init(&loop, &sc.pace);
        sc.pace.data = &sc;
        uv_timer_start(
            &sc.pace,
            [](uv_timer_t* h) {
                auto* c = static_cast<StreamCtx*>(h->data);
                uv_update_time(&c->self->loop);
                if (c->streaming) c->streaming = (*c->tick)();
                if (!c->streaming && (*c->done)()) uv_stop(&c->self->loop);
            },
            0, 1);
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    void begin_idle() {
        std::thread([this] { uv_run(&loop, UV_RUN_DEFAULT); }).detach();
    }

    // Expiry: n timers due over the window from the loop's time at load;
    // uv_run starts after the window has passed and delivers the backlog.
    struct ExpCtx {
        long done = 0;
        long n = 0;
        std::int64_t last = 0;
    } ctx;
    static void exp_cb(uv_timer_t* h) {
        auto* c = static_cast<ExpCtx*>(h->data);
        if (++c->done == c->n) c->last = now_ns();
    }
    Sample expiry_rep(Local&, long n, const Opts& o) {
        ctx.done = 0;
        ctx.n = n;
        std::vector<uv_timer_t*> mine;
        for (long i = 0; i < n; ++i) mine.push_back(get());
        std::mt19937_64 rng(o.seed);
        uv_update_time(&loop);
        const std::int64_t t_load = now_ns();
        for (uv_timer_t* t : mine) {
            t->data = &ctx;
            uv_timer_start(t, exp_cb, rng() % static_cast<std::uint64_t>(o.window_ms + 1), 0);
        }
        const std::int64_t t_loaded = now_ns();
        sleep_until_ns(t_load + (o.window_ms + 2) * kMs);
        const std::int64_t t0 = now_ns();
        uv_run(&loop, UV_RUN_DEFAULT);
        for (uv_timer_t* t : mine) free_.push_back(t);
        return expiry_sample(n, t0, ctx.last, t_load, t_loaded);
    }
};

}  // namespace

int main(int argc, char** argv) { return run_main<UvPeer>(argc, argv); }
