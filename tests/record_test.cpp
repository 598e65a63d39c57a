// SPDX-License-Identifier: MIT OR Apache-2.0
// The 64-byte timer record (src/runtime/timer_record.hpp) and the callable it
// keeps (src/runtime/callable.hpp): one cache line per record, the registry
// of callable kinds (concurrent first registration, full registry -> box,
// no memory for the box -> no_memory with exactly one release), and every
// sort of callable -- 16 and 24 inline bytes, heap-boxed, throwing move, a C
// callback with a release hook -- run once and released once.
//
// The registry is process-wide and never forgets a kind: the test that fills
// it comes last in this file (ctest runs every test in a process of its own;
// run by hand, the tests after it would only see their callables boxed).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/callable.hpp"
#include "runtime/handle_table.hpp"
#include "runtime/test_hooks.hpp"
#include "test_support.hpp"
#include "test_support/capi.hpp"
#include "tickwheel/runtime.hpp"
#include "tickwheel/tickwheel.h"

namespace tw = tickwheel;
using namespace std::chrono_literals;
using tickwheel::rt::CallableKinds;
using tickwheel::rt::CallbackOps;
using tickwheel::rt::Extra;
using tickwheel::rt::HandleTable;
using tickwheel::rt::Record;

namespace {

using namespace tw_test::capi;

/// Runs and releases of one callable (its moved-from husks count neither).
struct Tally {
    std::atomic<int> runs{0};
    std::atomic<int> releases{0};
};

/// A callable of exactly `Bytes` bytes that counts its runs and its release
/// (its last destructor). `NothrowMove` false: the Callback heap-boxes it.
/// `Tag`: another type of the same size (a kind of its own).
template <std::size_t Bytes, bool NothrowMove = true, int Tag = 0>
struct Probe {
    explicit Probe(Tally& t) noexcept : tally(&t) {}
    Probe(Probe&& o) noexcept(NothrowMove) : tally(std::exchange(o.tally, nullptr)), pad(o.pad) {}
    Probe(const Probe&) = delete;
    Probe& operator=(const Probe&) = delete;
    Probe& operator=(Probe&&) = delete;
    ~Probe() {
        if (tally != nullptr) tally->releases.fetch_add(1);
    }
    void operator()() const { tally->runs.fetch_add(1); }

    Tally* tally;
    std::array<char, Bytes - sizeof(Tally*)> pad{};
};
static_assert(sizeof(Probe<16>) == 16 && sizeof(Probe<24>) == 24 && sizeof(Probe<40>) == 40);

tw::Config manual_config() {
    tw::Config c = tw_test::small_config(2, 1);
    c.manual_clock = true;
    c.resolution = 1ms;
    return c;
}

/// Runs `make()` (a fresh callable over a Tally) through a manual runtime
/// three ways -- fires, stopped before its deadline, periodic stopped after
/// three runs -- and checks each ran as often as it should and was released
/// exactly once.
template <class Make>
void runs_once_releases_once(Make make) {
    tw::Runtime rt(manual_config());
    Tally fired, stopped, periodic;
    rt.start(1ms, make(fired));
    const tw::Timer s = rt.start(5ms, make(stopped));
    const tw::Timer p = rt.start_periodic(1ms, make(periodic));
    EXPECT_TRUE(rt.stop(s));
    EXPECT_EQ(stopped.releases.load(), 1) << "released inside the stop";
    for (int k = 0; k < 3; ++k) rt.advance(1ms);  // (a manual SKIP timer runs once per advance)
    EXPECT_EQ(fired.runs.load(), 1);
    EXPECT_EQ(fired.releases.load(), 1) << "released after its only run";
    EXPECT_EQ(periodic.runs.load(), 3);
    EXPECT_EQ(periodic.releases.load(), 0);
    EXPECT_TRUE(rt.stop(p));
    for (int k = 0; k < 3; ++k) rt.advance(1ms);
    EXPECT_EQ(periodic.runs.load(), 3);
    EXPECT_EQ(periodic.releases.load(), 1);
    EXPECT_EQ(stopped.runs.load(), 0);
    EXPECT_EQ(stopped.releases.load(), 1);
    EXPECT_EQ(fired.releases.load(), 1);
}

/// The C API's callable: a callback, its argument and a release hook.
struct CTally {
    std::atomic<int> runs{0};
    std::atomic<int> releases{0};
};
void c_run(void* arg, tw_timer) { static_cast<CTally*>(arg)->runs.fetch_add(1); }
void c_release(void* arg) { static_cast<CTally*>(arg)->releases.fetch_add(1); }

}  // namespace

// ---- the record -------------------------------------------------------------------

TEST(Record, IsOneCacheLineAndEveryRecordIsLineAligned) {
    // (And its side record and period word are found from it, at either end
    // of a chunk.)
    static_assert(sizeof(Record) == 64 && alignof(Record) == 64);
    static_assert(sizeof(Extra) == 64 && alignof(Extra) == 64);
    static_assert(HandleTable::kChunkSize == 32767, "(2 MiB - the header's line) / 64");
    HandleTable table;
    // Two chunks' worth plus one: the first and last record of each chunk.
    const std::uint32_t n = HandleTable::kChunkSize * 2 + 1;
    for (std::uint32_t i = 0; i < n; ++i) {
        std::uint32_t index = 0, gen = 0;
        Record* r = table.allocate(index, gen);
        ASSERT_NE(r, nullptr);
        ASSERT_EQ(index, i);
        ASSERT_EQ(reinterpret_cast<std::uintptr_t>(r) % 64, 0u) << "record " << i;
        ASSERT_EQ(HandleTable::index_of(r), i);
        ASSERT_EQ(table.find(i), r);
        if (i % HandleTable::kChunkSize == 0 || i % HandleTable::kChunkSize == HandleTable::kChunkSize - 1 ||
            i + 1 == n) {
            Extra* x = table.make_extra(i);
            ASSERT_NE(x, nullptr);
            EXPECT_EQ(reinterpret_cast<std::uintptr_t>(x) % 64, 0u) << "the side record of " << i;
            EXPECT_EQ(&HandleTable::extra_of(*r), x);
            EXPECT_EQ(&table.extra(i), x);
            const auto slot = static_cast<std::uint16_t>(1 + i % tickwheel::rt::PeriodWord::kMaxQueueSlot);
            ASSERT_TRUE(table.set_period_word(i, tickwheel::rt::PeriodWord::make(1000 + i, slot)));
            EXPECT_EQ(HandleTable::queue_slot_of(*r), slot) << "the period word of " << i;
            EXPECT_EQ(HandleTable::period_ticks_of(*r), 1000u + i);
        }
    }
}

TEST(Record, FlagsAndGenerationShareAWordWithoutTouchingEachOther) {
    Record r;
    r.set_gen(Record::kGenMask);
    EXPECT_EQ(r.flags(), 0u);
    r.set_flags(Record::kHasExtra | Record::kPeriodic | Record::kHasQueue | Record::kClockMask);
    EXPECT_EQ(r.gen(), Record::kGenMask);
    EXPECT_TRUE(r.periodic());
    EXPECT_TRUE(r.fixed_rate()) << "SKIP";
    r.set_flags(static_cast<std::uint16_t>(r.flags() | (static_cast<std::uint16_t>(tw::rt::Policy::Delay)
                                                         << Record::kPolicyShift)));
    EXPECT_FALSE(r.fixed_rate()) << "DELAY";
    EXPECT_EQ(r.policy(), tw::rt::Policy::Delay);
    r.set_gen(7);
    EXPECT_EQ(r.gen(), 7u);
    EXPECT_EQ(r.flags(), 0u) << "a new generation starts as a common timer";
    EXPECT_FALSE(r.has_callable());
}

// ---- callables through the runtime -------------------------------------------------

TEST(RecordCallable, Lambda24BytesRunsOnceReleasesOnce) {
    runs_once_releases_once([](Tally& t) { return Probe<24>(t); });
}

TEST(RecordCallable, Lambda16BytesRunsOnceReleasesOnce) {
    runs_once_releases_once([](Tally& t) { return Probe<16>(t); });
}

TEST(RecordCallable, HeapBoxedCallableRunsOnceReleasesOnce) {
    runs_once_releases_once([](Tally& t) { return Probe<40>(t); });
}

TEST(RecordCallable, ThrowingMoveCallableRunsOnceReleasesOnce) {
    static_assert(!std::is_nothrow_move_constructible_v<Probe<16, false>>);
    runs_once_releases_once([](Tally& t) { return Probe<16, false>(t); });
}

TEST(RecordCallable, CapturingLambdasOfEverySizeRunTheirOwnCode) {
    // Plain lambdas (their ops tables: kinds of their own) with 8, 16, 24
    // and 32 bytes of captures, side by side in one runtime.
    tw::Runtime rt(manual_config());
    std::atomic<std::uint64_t> sum{0};
    std::atomic<std::uint64_t>* s = &sum;
    std::uint64_t a = 1, b = 10, c = 100;  // (not const: captured, not folded)
    rt.start(1ms, [s] { s->fetch_add(1000); });
    rt.start(1ms, [s, a] { s->fetch_add(a); });
    rt.start(1ms, [s, a, b] { s->fetch_add(a + b); });
    rt.start(1ms, [s, a, b, c] { s->fetch_add(a + b + c); });  // 32 bytes: heap-boxed by the Callback
    EXPECT_EQ(rt.advance(2ms), 4u);
    EXPECT_EQ(sum.load(), 1000u + 1 + 11 + 111);
}

TEST(RecordCallable, CCallbackWithReleaseHookRunsOnceReleasesOnce) {
    tw_config cfg = c_config(1, 0);
    cfg.flags = TW_CONFIG_MANUAL_CLOCK;
    tw_runtime* rt = create_runtime(cfg);
    ASSERT_NE(rt, nullptr);
    CTally fired, stopped;
    tw_timer_spec s = c_spec(c_run, &fired, c_release, 1'000'000);
    tw_timer t1 = 0, t2 = 0;
    ASSERT_EQ(tw_timer_start_ex(rt, &s, &t1), TW_OK);
    s.arg = &stopped;
    ASSERT_EQ(tw_timer_start_ex(rt, &s, &t2), TW_OK);
    EXPECT_EQ(tw_timer_stop(rt, t2), TW_OK);
    EXPECT_EQ(stopped.releases.load(), 1);
    EXPECT_EQ(tw_runtime_advance(rt, 2'000'000), 1) << "callbacks run";
    EXPECT_EQ(fired.runs.load(), 1);
    EXPECT_EQ(fired.releases.load(), 1);
    EXPECT_EQ(stopped.runs.load(), 0);
    EXPECT_EQ(tw_runtime_destroy(rt), TW_OK);
    EXPECT_EQ(fired.releases.load(), 1);
    EXPECT_EQ(stopped.releases.load(), 1);
}

TEST(RecordCallable, PendingAtShutdownIsReleasedOnceWithoutRunning) {
    Tally t;
    {
        tw::Runtime rt(manual_config());
        rt.start(1h, Probe<24>(t));
        rt.start(1h, Probe<40>(t));
    }
    EXPECT_EQ(t.runs.load(), 0);
    EXPECT_EQ(t.releases.load(), 2);
}

// ---- the registry of kinds -----------------------------------------------------------

namespace {
/// Distinct addresses to register as ops tables (never called: no record
/// holds their kinds).
CallbackOps* fake_ops(std::size_t i) {
    static std::vector<CallbackOps> pool(1u << 16);
    return &pool.at(i);
}
}  // namespace

TEST(CallableKinds, ConcurrentFirstRegistrationAgreesOnOneKindPerTable) {
    // Threads register the same new tables at once, each in its own order:
    // every table gets exactly one kind, the same for all, and its kind names it.
    constexpr unsigned kThreads = 6;
    constexpr std::size_t kTables = 300;
    std::vector<std::vector<std::uint16_t>> got(kThreads, std::vector<std::uint16_t>(kTables));
    std::atomic<unsigned> ready{0};
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            ready.fetch_add(1);
            while (ready.load() != kThreads) {
            }
            for (std::size_t k = 0; k < kTables; ++k) {
                const std::size_t i = t % 2 == 0 ? k : kTables - 1 - k;
                got[t][i] = CallableKinds::find(fake_ops(i));
            }
        });
    }
    for (auto& th : threads) th.join();
    std::vector<bool> seen(CallableKinds::kSlots, false);
    for (std::size_t i = 0; i < kTables; ++i) {
        const std::uint16_t k = got[0][i];
        ASSERT_GE(k, 2u) << "0 and 1 are reserved; the registry is far from full";
        for (unsigned t = 1; t < kThreads; ++t) ASSERT_EQ(got[t][i], k) << "table " << i << ", thread " << t;
        EXPECT_FALSE(seen[k]) << "two tables share kind " << k;
        seen[k] = true;
        EXPECT_EQ(CallableKinds::ops(k), fake_ops(i));
        EXPECT_EQ(CallableKinds::find(fake_ops(i)), k) << "found again";
    }
}

TEST(CallableKinds, ConcurrentFirstStartsOfANewCallableTypeAllRunAndRelease) {
    // The same registration race through the runtime: threads start timers
    // of a callable type no timer used before, at once.
    constexpr unsigned kThreads = 4;
    constexpr int kEach = 500;
    Tally t;
    {
        tw::Runtime rt(manual_config());
        std::atomic<unsigned> ready{0};
        std::vector<std::thread> threads;
        for (unsigned i = 0; i < kThreads; ++i) {
            threads.emplace_back([&] {
                ready.fetch_add(1);
                while (ready.load() != kThreads) {
                }
                for (int k = 0; k < kEach; ++k) rt.start(1ms, [p = Probe<8>(t)] { p(); });
            });
        }
        for (auto& th : threads) th.join();
        EXPECT_EQ(rt.advance(2ms), kThreads * kEach);
    }
    EXPECT_EQ(t.runs.load(), static_cast<int>(kThreads * kEach));
    EXPECT_EQ(t.releases.load(), static_cast<int>(kThreads * kEach));
}

// Last in the file: it fills the process-wide registry for good (see the top).
TEST(CallableKinds, FullRegistryBoxesAndNoMemoryForTheBoxFailsWithOneRelease) {
    // Fill every slot: register distinct tables until no new one finds room
    // (a table is refused when kMaxProbe slots from its hash are taken).
    std::size_t i = 0;
    for (; CallableKinds::registered() < CallableKinds::kSlots && i < (1u << 16); ++i)
        (void)CallableKinds::find(fake_ops(i));
    ASSERT_EQ(CallableKinds::registered(), CallableKinds::kSlots) << "after " << i << " tables";
    EXPECT_EQ(CallableKinds::find(fake_ops(i)), CallableKinds::kNone) << "full: a new table gets no kind";

    // New callable types are boxed and behave as any other.
    // (Types of their own: no test before this one registered them.)
    runs_once_releases_once([](Tally& t) { return Probe<24, true, 1>(t); });
    runs_once_releases_once([](Tally& t) { return Probe<40, true, 1>(t); });
    runs_once_releases_once([](Tally& t) { return Probe<16, false, 1>(t); });

    // No memory for the box: the start fails with no_memory, nothing runs,
    // and the callable is released exactly once (by the failed start).
    tw::Runtime rt(manual_config());
    Tally t;
    std::error_code ec;
    tw::StartOptions o;
    o.delay = 1ms;
    tw::rt::test_hooks::fail_box_allocs.store(1);
    const tw::Timer failed = rt.start(o, tw::detail::Callback(Probe<24, true, 2>(t)), ec);
    tw::rt::test_hooks::fail_box_allocs.store(0);
    EXPECT_EQ(ec, tw::errc::no_memory);
    EXPECT_EQ(failed.id(), 0u);
    EXPECT_EQ(t.releases.load(), 1);
    EXPECT_EQ(rt.stats().live, 0u) << "the record was given back";
    // With memory again, the same type starts (boxed) and runs.
    const tw::Timer ok = rt.start(o, tw::detail::Callback(Probe<24, true, 2>(t)), ec);
    EXPECT_FALSE(ec);
    EXPECT_NE(ok.id(), 0u);
    EXPECT_EQ(rt.advance(2ms), 1u);
    EXPECT_EQ(t.runs.load(), 1);
    EXPECT_EQ(t.releases.load(), 2);
}
