// SPDX-License-Identifier: MIT OR Apache-2.0
// The dispatcher's resident drain tasks (dispatcher.hpp): every ticket of
// every batch is taken, a blocked item holds back only itself while a worker
// is free, batches submitted while every worker is busy run once one is free
// again, and destroying a dispatcher whose tasks linger neither hangs nor
// touches freed memory (ASan/TSan presets).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "runtime/dispatcher.hpp"
#include "test_support.hpp"

using namespace std::chrono;
using tickwheel::rt::Dispatcher;
using tickwheel::rt::FireItem;

namespace {

/// What the drain function does with an item: counts it in `ran[item.due]`;
/// an item whose `shard` field is 1 blocks until `gate` opens.
struct Sink {
    std::vector<std::atomic<int>> ran;
    tw_test::Gate gate;
    std::atomic<int> blocked{0};
    explicit Sink(std::size_t n) : ran(n) {}
    static void drain(void* self, Dispatcher::Cursor& items) noexcept {
        auto& s = *static_cast<Sink*>(self);
        while (const FireItem* it = items.next()) {
            if (it->shard == 1) {
                s.blocked.fetch_add(1);
                (void)s.gate.wait(seconds(60));
                s.blocked.fetch_sub(1);
            }
            s.ran[it->due].fetch_add(1);
        }
    }
};

FireItem item(std::size_t index, bool blocks = false) {
    return FireItem{nullptr, 0, blocks ? 1u : 0u, index};
}

}  // namespace

TEST(Dispatcher, EveryItemOfEveryBatchRunsOnce) {
    // 20: more drain tasks than a batch has lanes (Dispatcher::kMaxLanes).
    for (const unsigned workers : {1u, 2u, 3u, 20u}) {
        constexpr std::size_t kPerThread = 20000;
        Sink sink(2 * kPerThread);
        {
            Dispatcher d(workers, &Sink::drain, &sink);
            std::vector<std::thread> th;
            for (unsigned t = 0; t < 2; ++t)
                th.emplace_back([&, t] {
                    std::mt19937 rng(t);
                    std::size_t next = t * kPerThread, end = next + kPerThread;
                    FireItem batch[Dispatcher::kMaxBatch];
                    while (next < end) {
                        const std::size_t n = std::min<std::size_t>(end - next, 1 + rng() % Dispatcher::kMaxBatch);
                        for (std::size_t i = 0; i < n; ++i) batch[i] = item(next + i);
                        while (!d.submit(batch, n)) std::this_thread::yield();
                        next += n;
                        // Sometimes a pause, so that tasks linger, time out or are handed batches.
                        if (rng() % 16 == 0) std::this_thread::sleep_for(microseconds(rng() % 3000));
                    }
                });
            for (auto& x : th) x.join();
            d.wait_idle();
        }
        for (std::size_t i = 0; i < sink.ran.size(); ++i)
            ASSERT_EQ(sink.ran[i].load(), 1) << "item " << i << " with " << workers << " workers";
    }
}

TEST(Dispatcher, ABlockedItemHoldsBackOnlyItselfWhileAWorkerIsFree) {
    Sink sink(4);
    Dispatcher d(2, &Sink::drain, &sink);
    const FireItem first[] = {item(0, true), item(1)};
    ASSERT_TRUE(d.submit(first, 2));
    ASSERT_TRUE(tw_test::wait_until([&] { return sink.blocked.load() == 1 && sink.ran[1].load() == 1; }))
        << "the blocked item's batch-mate did not run";
    std::this_thread::sleep_for(milliseconds(5));  // the free task lingers, or has given its thread back
    const FireItem later[] = {item(2)};
    ASSERT_TRUE(d.submit(later, 1));
    ASSERT_TRUE(tw_test::wait_until([&] { return sink.ran[2].load() == 1; })) << "a later batch waited for the blocked item";
    EXPECT_EQ(sink.ran[0].load(), 0);
    sink.gate.open();
    d.wait_idle();
    EXPECT_EQ(sink.ran[0].load(), 1);
}

// Lanes (issue 21): a task blocked in its lane's first item holds back
// none of the items behind it in that lane -- the other task steals them --
// nor any of a later batch. The blocking item sits first in lane 0, then
// first in the last lane, with 2 and 3 workers.
TEST(Dispatcher, ABlockedItemHoldsBackNoneOfItsLaneMates) {
    for (const unsigned workers : {2u, 3u}) {
        for (const bool last_lane : {false, true}) {
            const std::size_t n = Dispatcher::kMaxBatch;
            Sink sink(n + 1);
            Dispatcher d(workers, &Sink::drain, &sink);
            FireItem batch[Dispatcher::kMaxBatch];
            const std::size_t blocker = last_lane ? n * (workers - 1) / workers : 0;
            for (std::size_t i = 0; i < n; ++i) batch[i] = item(i, i == blocker);
            ASSERT_TRUE(d.submit(batch, n));
            const auto others_ran = [&] {
                for (std::size_t i = 0; i < n; ++i)
                    if (i != blocker && sink.ran[i].load() != 1) return false;
                return true;
            };
            ASSERT_TRUE(tw_test::wait_until([&] { return sink.blocked.load() == 1 && others_ran(); }))
                << "items behind the blocked one waited (" << workers << " workers, blocker " << blocker << ")";
            const FireItem later[] = {item(n)};
            ASSERT_TRUE(d.submit(later, 1));
            ASSERT_TRUE(tw_test::wait_until([&] { return sink.ran[n].load() == 1; }));
            EXPECT_EQ(sink.ran[blocker].load(), 0);
            sink.gate.open();
            d.wait_idle();
            EXPECT_EQ(sink.ran[blocker].load(), 1);
        }
    }
}

TEST(Dispatcher, BatchesSubmittedWhileEveryWorkerIsBusyRunOnceOneIsFree) {
    Sink sink(3);
    Dispatcher d(1, &Sink::drain, &sink);
    const FireItem blocker[] = {item(0, true)};
    ASSERT_TRUE(d.submit(blocker, 1));
    ASSERT_TRUE(tw_test::wait_until([&] { return sink.blocked.load() == 1; }));
    const FireItem a[] = {item(1)}, b[] = {item(2)};
    ASSERT_TRUE(d.submit(a, 1));
    ASSERT_TRUE(d.submit(b, 1));
    EXPECT_EQ(sink.ran[1].load() + sink.ran[2].load(), 0);
    sink.gate.open();
    ASSERT_TRUE(tw_test::wait_until([&] { return sink.ran[1].load() == 1 && sink.ran[2].load() == 1; }))
        << "a ticket that waited while the only worker was busy was lost";
    d.wait_idle();
}

TEST(Dispatcher, DestroyedWhileItsTasksLinger) {
    for (int round = 0; round < 50; ++round) {
        Sink sink(8);
        {
            Dispatcher d(2, &Sink::drain, &sink);
            FireItem batch[8];
            for (std::size_t i = 0; i < 8; ++i) batch[i] = item(i);
            ASSERT_TRUE(d.submit(batch, 8));
            d.wait_idle();
            if (round % 2 == 0) std::this_thread::sleep_for(microseconds(200));  // tasks now linger
        }
        for (auto& r : sink.ran) ASSERT_EQ(r.load(), 1);
    }
}
