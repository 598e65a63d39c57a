// SPDX-License-Identifier: MIT OR Apache-2.0
// The USDT probes' semaphores (issue 34; src/runtime/probes.hpp): zero while
// no tracer is attached (every probe site then costs a load and a branch),
// and with them raised -- as a tracer does -- every guarded path computes its
// arguments and fires its probe (a nop without a tracer) without changing
// what the runtime does: every start, stop, reset, batch, expiry, delivery
// and run is counted as without. (The notes themselves and a real tracer:
// ctest probes_notes and probes_bpftrace.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <span>
#include <vector>

#include "test_support.hpp"
#include "test_support/batch.hpp"
#include "tickwheel/runtime.hpp"

#if defined(TW_TEST_PROBES)
// The library's semaphores (hidden in the shared library; this test links
// the static one).
extern "C" {
extern volatile unsigned short tickwheel_start_semaphore, tickwheel_stop_semaphore, tickwheel_reset_semaphore,
    tickwheel_expire_semaphore, tickwheel_dispatch_semaphore, tickwheel_queue_deliver_semaphore,
    tickwheel_run_begin_semaphore, tickwheel_run_end_semaphore;
}
namespace {
volatile unsigned short* const kSemaphores[] = {
    &tickwheel_start_semaphore,         &tickwheel_stop_semaphore,      &tickwheel_reset_semaphore,
    &tickwheel_expire_semaphore,        &tickwheel_dispatch_semaphore,  &tickwheel_queue_deliver_semaphore,
    &tickwheel_run_begin_semaphore,     &tickwheel_run_end_semaphore,
};
}  // namespace
#endif

using namespace std::chrono;
using tw_test::wait_until;

namespace {
/// One of each thing a probe watches; returns the stats after.
tickwheel::Stats exercise() {
    tickwheel::Runtime rt(tw_test::small_config(2, 2));
    tickwheel::Queue q(rt);
    std::atomic<int> ran{0};
    // Started one by one: due soon, far, periodic, and on the queue.
    for (int i = 0; i < 20; ++i) rt.start(milliseconds(i % 3), [&] { ran.fetch_add(1); });
    const tickwheel::Timer far = rt.start(hours(1), [] {});
    tickwheel::StartOptions o;
    o.deadline = rt.clock_now() + milliseconds(2);
    o.queue = &q;
    rt.start(o, [&] { ran.fetch_add(1); });
    // A batch of starts, stops and resets.
    std::vector<tickwheel::Timer> out;
    std::vector<std::error_code> results;
    EXPECT_EQ(tw_test::start_batch(rt, 8, hours(1), out, results), 8u);
    std::error_code ec;
    std::vector<std::uint64_t> ids;
    for (const tickwheel::Timer& t : out) ids.push_back(t.id());
    EXPECT_EQ(rt.reset(std::span<const std::uint64_t>(ids), hours(2), std::span<std::error_code>(results), ec), 8u);
    EXPECT_EQ(rt.stop(std::span<const std::uint64_t>(ids), std::span<std::error_code>(results), ec), 8u);
    EXPECT_TRUE(rt.reset(far.id(), hours(2)));
    EXPECT_TRUE(rt.stop(far));
    EXPECT_FALSE(rt.stop(far));
    EXPECT_EQ(q.run(1, seconds(10)), 1u);
    EXPECT_TRUE(wait_until([&] { return ran.load() == 21 && rt.stats().run_duration_samples == 21; }));
    return rt.stats();
}
}  // namespace

TEST(Probes, SemaphoresAreZeroWithoutATracerAndRaisedOnesChangeNothing) {
#if !defined(TW_TEST_PROBES)
    GTEST_SKIP() << "built with -DTICKWHEEL_PROBES=OFF: no probes";
#else
    for (volatile unsigned short* s : kSemaphores) EXPECT_EQ(*s, 0u) << "a semaphore raised with no tracer attached";
    const tickwheel::Stats plain = exercise();
    for (volatile unsigned short* s : kSemaphores) *s = 1;  // as a tracer attached to every probe
    const tickwheel::Stats traced = exercise();
    for (volatile unsigned short* s : kSemaphores) *s = 0;
    for (const tickwheel::Stats* st : {&plain, &traced}) {
        EXPECT_EQ(st->started, 30u);
        EXPECT_EQ(st->fired, 21u);
        EXPECT_EQ(st->stopped, 9u);
        EXPECT_EQ(st->reset, 9u);
        EXPECT_EQ(st->lateness_samples, 21u);
    }
#endif
}
