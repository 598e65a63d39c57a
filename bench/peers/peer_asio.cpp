// SPDX-License-Identifier: MIT OR Apache-2.0
// Boost.Asio steady_timer on an io_context run by --io-threads threads (1 or
// 2; the multi-threaded choice of C++ users). start = expires_after +
// async_wait; stop = cancel(), after which the handler runs on an io thread
// with operation_aborted -- that is how Asio cancels, so that work is
// counted ("drained" waits until every cancelled handler has run).
//
// Timer objects belong to the calling thread (distinct objects may be used
// from different threads; Asio's timer queues are locked) and are reused
// through a free list, so start costs no construction or allocation of the
// timer object itself. Handlers are small, so Asio's handler-memory
// recycling applies.
#define BOOST_ERROR_CODE_HEADER_ONLY 1
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <memory>
#include <thread>

#include "driver.hpp"

using namespace twb;
namespace asio = boost::asio;
using boost::system::error_code;

namespace {

struct AsioPeer : PacedPeer {
    static constexpr bool kThreadSafe = true;
    static constexpr bool kHasDriver = true;
    using H = asio::steady_timer*;

    struct Local {
        AsioPeer& p;
        std::deque<asio::steady_timer> store;
        std::vector<asio::steady_timer*> free_;
        std::uint64_t expected = 0;  // cancelled waits whose handler must still run
        explicit Local(AsioPeer& pp) : p(pp) {}
        asio::steady_timer* get() {
            if (free_.empty()) return &store.emplace_back(p.io);
            asio::steady_timer* t = free_.back();
            free_.pop_back();
            return t;
        }
    };

    struct Handler {
        AsioPeer* p;
        void operator()(const error_code& ec) const {
            if (ec == asio::error::operation_aborted) p->aborted.fetch_add(1, std::memory_order_relaxed);
        }
    };

    int nthreads;
    asio::io_context io;
    std::unique_ptr<asio::executor_work_guard<asio::io_context::executor_type>> guard;
    std::vector<std::thread> runners;
    alignas(64) std::atomic<std::uint64_t> aborted{0};
    alignas(64) std::atomic<std::uint64_t> expected{0};

    explicit AsioPeer(const Opts& o) : nthreads(std::max(1, o.io_threads)), io(nthreads) {
        if (o.workload != "expiry") {  // expiry runs the io_context itself, after loading
            guard = std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(io.get_executor());
            for (int i = 0; i < nthreads; ++i) runners.emplace_back([this] { io.run(); });
        }
    }
    std::string name() const { return nthreads == 1 ? "asio-1t" : nthreads == 2 ? "asio-2t" : "asio-Nt"; }

    H start(Local& L, std::int64_t d) {
        asio::steady_timer* t = L.get();
        L.expected += t->expires_after(ns(d));
        t->async_wait(Handler{this});
        return t;
    }
    bool stop(Local& L, H t) {
        const std::size_t c = t->cancel();
        L.expected += c;
        L.free_.push_back(t);
        return c != 0;
    }
    bool rearm(Local& L, H& t, std::int64_t d) {
        const std::size_t c = t->expires_after(ns(d));  // cancels the pending wait
        L.expected += c;
        t->async_wait(Handler{this});
        return c != 0;
    }
    void finish(Local& L) {
        expected.fetch_add(L.expected);
        L.expected = 0;
    }
    void drain() {
        while (aborted.load() < expected.load()) sleep_until_ns(now_ns() + 20 * kUs);
    }
    void before_rep() {}

    template <class F>
    void start_cb(Local&, std::int64_t d, F&& f) {
        auto t = std::make_shared<asio::steady_timer>(io, ns(d));
        t->async_wait([t, f = std::forward<F>(f)](const error_code& ec) mutable {
            if (!ec) f();
        });
    }
    // Fixed rate every 10 ms, skipping missed periods; each run blocks 100 ms.
    std::unique_ptr<asio::steady_timer> slow;
    void arm_slow(asio::steady_timer::time_point next) {
        slow->expires_at(next);
        slow->async_wait([this](const error_code& ec) {
            if (ec) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            auto n = slow->expiry() + std::chrono::milliseconds(10);
            while (n <= asio::steady_timer::clock_type::now()) n += std::chrono::milliseconds(10);
            arm_slow(n);
        });
    }
    void start_slow(Local&) {
        slow = std::make_unique<asio::steady_timer>(io);
        arm_slow(asio::steady_timer::clock_type::now() + std::chrono::milliseconds(10));
    }

    // Expiry: n timers due over the window; the io_context is not running
    // while they are loaded; after the window has passed, --io-threads
    // threads run it and deliver the backlog.
    ExpiryCtx ctx;
    Sample expiry_rep(Local& L, long n, const Opts& o) {
        ctx.reset(n);
        std::vector<asio::steady_timer*> mine;
        for (long i = 0; i < n; ++i) mine.push_back(L.get());
        std::mt19937_64 rng(o.seed);
        const std::int64_t t_load = now_ns();
        const auto base = asio::steady_timer::clock_type::now();
        for (asio::steady_timer* t : mine) {
            t->expires_at(base + ns(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(o.window_ms * kMs))));
            t->async_wait([c = &ctx](const error_code& ec) {
                if (!ec) c->delivered();
            });
        }
        const std::int64_t t_loaded = now_ns();
        sleep_until_ns(t_load + (o.window_ms + 2) * kMs);
        io.restart();
        const std::int64_t t0 = now_ns();
        std::vector<std::thread> th;
        for (int i = 0; i < nthreads; ++i) th.emplace_back([this] { io.run(); });
        for (auto& x : th) x.join();
        for (asio::steady_timer* t : mine) L.free_.push_back(t);
        return expiry_sample(n, t0, ctx.last.load(), t_load, t_loaded);
    }
};

}  // namespace

int main(int argc, char** argv) { return run_main<AsioPeer>(argc, argv); }
