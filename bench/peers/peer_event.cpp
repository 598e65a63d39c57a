// SPDX-License-Identifier: MIT OR Apache-2.0
// libevent 2.1 timers, the thread-safe way C servers use them:
// evthread_use_pthreads() before the event_base exists, one loop thread
// running event_base_loop(EVLOOP_NO_EXIT_ON_EMPTY), and producer threads
// calling evtimer_add / event_del directly (each call takes the base's
// lock; an add that becomes the earliest deadline wakes the loop through its
// notification fd). Callbacks run on the loop thread.
//
// The base is made with EVENT_BASE_FLAG_PRECISE_TIMER (CLOCK_MONOTONIC, not
// the 1-4 ms coarse clock libevent picks by default, and a timerfd under
// epoll), so lateness compares with the other peers' nanosecond clocks; the
// time cache is libevent's default. Timeouts are struct timeval
// (microseconds), rounded up. Timeouts all differ, so libevent's O(1)
// "common timeout" queues do not apply: every timer is in the min-heap.
//
// Event structures are made once (event_new) and reused through a
// per-thread free list: start = evtimer_add on an idle event, stop =
// event_del, re-arm = evtimer_add on a pending one (libevent moves it in its
// heap). drain() activates a marker event and waits for its callback: the
// loop thread has then processed every wake-up the producers caused.
#include <event2/event.h>
#include <event2/thread.h>

#include <thread>

#include "driver.hpp"

using namespace twb;

namespace {

timeval tv_of(std::int64_t d_ns) {
    const std::int64_t us = (d_ns + kUs - 1) / kUs;
    return timeval{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
}

void noop_cb(evutil_socket_t, short, void*) {}

struct EventPeer : PacedPeer {
    static constexpr bool kThreadSafe = true;
    static constexpr bool kHasDriver = true;
    using H = event*;

    struct Local {
        EventPeer& p;
        std::vector<event*> free_;
        explicit Local(EventPeer& pp) : p(pp) {}
        event* get() {
            if (free_.empty()) return p.make(noop_cb, nullptr);
            event* e = free_.back();
            free_.pop_back();
            return e;
        }
    };

    event_base* base = nullptr;
    event* marker = nullptr;
    alignas(64) std::atomic<std::uint64_t> marks{0};
    std::thread loop;

    explicit EventPeer(const Opts& o) {
        if (evthread_use_pthreads() != 0) die("evthread_use_pthreads() failed");
        event_config* cfg = event_config_new();
        if (cfg == nullptr || event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER) != 0)
            die("event_config_new/event_config_set_flag failed");
        base = event_base_new_with_config(cfg);
        event_config_free(cfg);
        if (base == nullptr) die("event_base_new_with_config() failed");
        std::fprintf(stderr, "libevent %s, backend %s\n", event_get_version(), event_base_get_method(base));
        marker = event_new(base, -1, 0, [](evutil_socket_t, short, void* a) {
            static_cast<EventPeer*>(a)->marks.fetch_add(1, std::memory_order_release);
        }, this);
        if (marker == nullptr) die("event_new failed");
        // expiry runs the loop itself, after loading (the loop must not run
        // while the backlog is filed)
        if (o.workload != "expiry") loop = std::thread([this] { event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY); });
    }
    [[noreturn]] static void die(const char* what) {
        std::fprintf(stderr, "peer_event: %s\n", what);
        std::exit(1);
    }
    std::string name() const { return "libevent"; }

    event* make(event_callback_fn cb, void* arg) {
        event* e = evtimer_new(base, cb, arg);
        if (e == nullptr) die("evtimer_new failed (out of memory)");
        return e;
    }

    H start(Local& L, std::int64_t d) {
        event* e = L.get();
        const timeval tv = tv_of(d);
        evtimer_add(e, &tv);
        return e;
    }
    bool stop(Local& L, H e) {
        const bool ok = event_del(e) == 0;
        L.free_.push_back(e);
        return ok;
    }
    bool rearm(Local&, H& e, std::int64_t d) {
        const timeval tv = tv_of(d);
        return evtimer_add(e, &tv) == 0;  // a pending timer is moved to the new deadline
    }
    void finish(Local&) {}
    void drain() {
        const std::uint64_t want = marks.load(std::memory_order_acquire) + 1;
        event_active(marker, EV_TIMEOUT, 0);  // thread-safe: wakes the loop
        while (marks.load(std::memory_order_acquire) < want) sleep_until_ns(now_ns() + 20 * kUs);
    }
    void before_rep() {}

    // Streams: one-shot events made by event_base_once (libevent frees them
    // after the callback); the caller's thread paces the stream.
    template <class F>
    void start_cb(Local&, std::int64_t d, F&& f) {
        using Fn = std::decay_t<F>;
        auto* fn = new Fn(std::forward<F>(f));
        const timeval tv = tv_of(d);
        if (event_base_once(base, -1, EV_TIMEOUT, [](evutil_socket_t, short, void* a) {
                auto* g = static_cast<Fn*>(a);
                (*g)();
                delete g;
            }, fn, &tv) != 0)
            die("event_base_once failed");
    }
    // A persistent 10 ms timer whose callback blocks 100 ms (blocks the one
    // loop thread: workload 8 is not run for this peer).
    event* slow = nullptr;
    void start_slow(Local&) {
        slow = event_new(base, -1, EV_PERSIST, [](evutil_socket_t, short, void*) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }, nullptr);
        const timeval tv{0, 10'000};
        event_add(slow, &tv);
    }

    // Expiry: n timers due over the window, filed while no loop runs; once
    // the window has passed, this thread runs event_base_loop, which
    // delivers the backlog and returns when no event is left.
    ExpiryCtx ctx;
    Sample expiry_rep(Local& L, long n, const Opts& o) {
        ctx.reset(n);
        std::vector<event*> mine;
        for (long i = 0; i < n; ++i) {
            event* e = L.get();
            if (event_assign(e, base, -1, 0, [](evutil_socket_t, short, void* a) {
                    static_cast<ExpiryCtx*>(a)->delivered();
                }, &ctx) != 0)
                die("event_assign failed");
            mine.push_back(e);
        }
        std::mt19937_64 rng(o.seed);
        const std::int64_t t_load = now_ns();
        for (event* e : mine) {
            const timeval tv = tv_of(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(o.window_ms * kMs)));
            evtimer_add(e, &tv);
        }
        const std::int64_t t_loaded = now_ns();
        sleep_until_ns(t_load + (o.window_ms + 2) * kMs);
        const std::int64_t t0 = now_ns();
        event_base_loop(base, 0);
        for (event* e : mine) L.free_.push_back(e);
        return expiry_sample(n, t0, ctx.last.load(), t_load, t_loaded);
    }
};

}  // namespace

int main(int argc, char** argv) { return run_main<EventPeer>(argc, argv); }
