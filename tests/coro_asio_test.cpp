// SPDX-License-Identifier: MIT OR Apache-2.0
// tickwheel/coro_asio.hpp with standalone Asio (libasio-dev; built again as
// coro_boost_asio_test with Boost.Asio, libboost-dev): coroutines
// resume inside io_context::run() on the Asio thread (and on a strand),
// exactly once, with their reason; at shutdown the wake-up is posted too.
#include <gtest/gtest.h>

#ifdef TW_TEST_BOOST_ASIO
#include <utility>  // Boost 1.74's asio/awaitable.hpp needs std::exchange
#include <boost/asio.hpp>
namespace asio = boost::asio;
#else
#include <asio.hpp>
#endif
#include <atomic>
#include <chrono>
#include <thread>

#include "tickwheel/coro_asio.hpp"

using namespace std::chrono_literals;
using tickwheel::wake;

namespace {
thread_local bool t_on_io = false;

struct Seen {
    std::atomic<int> resumed{0};
    wake why{};
    bool on_io = false;
    bool in_strand = false;
};

template <class Ex>
tickwheel::detached sleeper(tickwheel::Runtime* rt, tickwheel::asio_resumer<Ex>* on, tickwheel::Duration d,
                            std::stop_token st, Seen* s) {
    const wake w = co_await tickwheel::sleep_for(*rt, d, on->where(), std::move(st));
    s->why = w;
    s->on_io = t_on_io;
    if constexpr (!std::is_same_v<Ex, asio::io_context::executor_type>)
        s->in_strand = on->executor().running_in_this_thread();
    s->resumed.fetch_add(1);
}

void run_io(asio::io_context& io, const std::atomic<int>& done, int want) {
    t_on_io = true;
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (done.load() < want && std::chrono::steady_clock::now() < end) {
        io.run_for(5ms);
        io.restart();
    }
    t_on_io = false;
}
}  // namespace

TEST(CoroAsio, ResumesInsideIoContextRun) {
    asio::io_context io;  // before the runtime: a worker may still be inside post() when the coroutine ran
    tickwheel::Runtime rt;
    tickwheel::asio_resumer on_io(io.get_executor());
    Seen a, b;
    std::stop_source ss;
    sleeper(&rt, &on_io, 5ms, {}, &a);
    sleeper(&rt, &on_io, 1h, ss.get_token(), &b);
    ss.request_stop();
    std::atomic<int> done{0};
    std::thread watch([&] {
        while (a.resumed.load() + b.resumed.load() < 2) std::this_thread::sleep_for(1ms);
        done = 2;
    });
    run_io(io, done, 2);
    watch.join();
    EXPECT_EQ(a.resumed.load(), 1);
    EXPECT_EQ(b.resumed.load(), 1);
    EXPECT_EQ(a.why, wake::expired);
    EXPECT_EQ(b.why, wake::stopped);
    EXPECT_TRUE(a.on_io);
    EXPECT_TRUE(b.on_io);
}

TEST(CoroAsio, ResumesOnAStrand) {
    asio::io_context io;  // before the runtime: a worker may still be inside post() when the coroutine ran
    tickwheel::Runtime rt;
    using Strand = asio::strand<asio::io_context::executor_type>;
    tickwheel::asio_resumer<Strand> on_strand(asio::make_strand(io));
    Seen a;
    sleeper(&rt, &on_strand, 1ms, {}, &a);
    std::atomic<int> done{0};
    std::thread watch([&] {
        while (a.resumed.load() < 1) std::this_thread::sleep_for(1ms);
        done = 1;
    });
    run_io(io, done, 1);
    watch.join();
    EXPECT_EQ(a.why, wake::expired);
    EXPECT_TRUE(a.on_io);
    EXPECT_TRUE(a.in_strand);
}

TEST(CoroAsio, ShutdownPostsTheWakeUpToTheIoContext) {
    asio::io_context io;
    auto rt = std::make_unique<tickwheel::Runtime>();
    tickwheel::asio_resumer on_io(io.get_executor());
    Seen a;
    sleeper(rt.get(), &on_io, 1h, {}, &a);
    rt->shutdown();
    EXPECT_EQ(a.resumed.load(), 0);  // posted, not run on the shutting-down thread
    t_on_io = true;
    io.run();
    t_on_io = false;
    EXPECT_EQ(a.resumed.load(), 1);
    EXPECT_EQ(a.why, wake::shutdown);
    EXPECT_TRUE(a.on_io);
}
