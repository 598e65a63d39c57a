// SPDX-License-Identifier: MIT OR Apache-2.0
// The 1.x C++ ABI's size handshake (runtime.hpp, "LINKING AND THE C++ ABI"):
// the exported start_sized()/stats_sized() behind the inline start() and
// stats() take the caller's sizeof of StartOptions/Stats, refuse a struct
// larger than the library knows (a program built against a newer header) or
// smaller than the 1.0 layout, and never write past the caller's size. The
// private entry points are reached the standard way (an explicit template
// instantiation may name private members), as an older or newer program's
// inline code would call them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <system_error>

#include "test_support.hpp"
#include "tickwheel/runtime.hpp"

namespace tw = tickwheel;
using namespace std::chrono_literals;

namespace {

// ---- access to the private exported entry points -----------------------------
struct StartSized {
    using type = tw::Timer (tw::Runtime::*)(const tw::StartOptions*, std::size_t, tw::detail::Callback&&,
                                            std::error_code&) noexcept;
    friend type member(StartSized);
};
struct StatsSized {
    using type = void (tw::Runtime::*)(tw::Stats*, std::size_t) const;
    friend type member(StatsSized);
};
template <class Tag, typename Tag::type M>
struct Expose {
    friend typename Tag::type member(Tag) { return M; }
};
template struct Expose<StartSized, &tw::Runtime::start_sized>;
template struct Expose<StatsSized, &tw::Runtime::stats_sized>;

/// Counts its destruction (the timer's release hook).
using Probe = tw_test::CountsRelease;

/// A caller's StartOptions followed by bytes a newer header would have.
struct NewerStartOptions {
    tw::StartOptions o;
    std::uint64_t added = 0;
};

tw::Timer start_with_size(tw::Runtime& rt, const tw::StartOptions* o, std::size_t size, std::atomic<int>* released,
                          std::error_code& ec) {
    return (rt.*member(StartSized{}))(o, size, tw::detail::Callback(Probe(released)), ec);
}

}  // namespace

TEST(RuntimeAbi, StartWithOurSizeWorks) {
    tw::Runtime rt(tw_test::small_config());
    std::atomic<int> released{0};
    tw::StartOptions o;
    o.delay = 1h;
    std::error_code ec;
    const tw::Timer t = start_with_size(rt, &o, sizeof(tw::StartOptions), &released, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(t);
    EXPECT_TRUE(rt.stop(t));
    EXPECT_EQ(released.load(), 1);
}

TEST(RuntimeAbi, StartRefusesAStructLargerThanTheLibraryKnows) {
    tw::Runtime rt(tw_test::small_config());
    std::atomic<int> released{0};
    NewerStartOptions newer;
    newer.o.delay = 1ms;
    std::error_code ec;
    const tw::Timer t = start_with_size(rt, &newer.o, sizeof(tw::StartOptions) + sizeof newer.added, &released, ec);
    EXPECT_EQ(ec, tw::errc::invalid_argument);
    EXPECT_FALSE(t);
    EXPECT_EQ(released.load(), 1) << "a refused start releases its callable, as every failed start";
    EXPECT_EQ(rt.stats().started, 0u);
}

TEST(RuntimeAbi, StartRefusesAStructSmallerThanVersion1) {
    tw::Runtime rt(tw_test::small_config());
    std::atomic<int> released{0};
    tw::StartOptions o;
    std::error_code ec;
    // Below the 1.0 size (32), or between released sizes (32, 40, 56): a field cut in two.
    for (const std::size_t size :
         {std::size_t{0}, std::size_t{31}, std::size_t{36}, std::size_t{48}, sizeof(tw::StartOptions) - 1}) {
        const tw::Timer t = start_with_size(rt, &o, size, &released, ec);
        EXPECT_EQ(ec, tw::errc::invalid_argument) << size;
        EXPECT_FALSE(t) << size;
    }
    std::error_code null_ec;
    EXPECT_FALSE(start_with_size(rt, nullptr, sizeof(tw::StartOptions), &released, null_ec));
    EXPECT_EQ(null_ec, tw::errc::invalid_argument);
    EXPECT_EQ(released.load(), 6);
    EXPECT_EQ(rt.stats().started, 0u);
}

// 1.0-1.2's `reserved` (offset 28) is 1.3's `policy`: 0 is still skip, and a
// value no PeriodPolicy names is still refused.
TEST(RuntimeAbi, UnknownPolicyIsRefused) {
    tw::Runtime rt(tw_test::small_config());
    tw::StartOptions o;
    o.delay = 1ms;
    o.period = 1ms;
    o.policy = static_cast<tw::PeriodPolicy>(3);
    EXPECT_THROW(rt.start(o, [] {}), tw::Error);
    try {
        rt.start(o, [] {});
    } catch (const tw::Error& e) {
        EXPECT_EQ(e.code(), tw::errc::invalid_argument);
    }
    EXPECT_EQ(rt.stats().started, 0u);
}

TEST(RuntimeAbi, StatsForANewerHeaderFillsWhatTheLibraryKnowsAndNoMore) {
    tw::Runtime rt(tw_test::small_config(3, 1));
    rt.start(1h, [] {});
    struct NewerStats {
        tw::Stats s;
        std::uint64_t added = 0x5eed;  // a newer header's field: keeps its default
    } newer;
    (rt.*member(StatsSized{}))(&newer.s, sizeof newer);
    EXPECT_EQ(newer.s.started, 1u);
    EXPECT_EQ(newer.s.pending_per_shard.size(), 3u);
    EXPECT_EQ(newer.added, 0x5eedu);
}

TEST(RuntimeAbi, StatsRefusesAStructSmallerThanVersion1) {
    tw::Runtime rt(tw_test::small_config());
    tw::Stats st;
    try {
        (rt.*member(StatsSized{}))(&st, 144);  // below 1.0's 152 (since 1.7 the struct is larger)
        ADD_FAILURE() << "a too small Stats was accepted";
    } catch (const tw::Error& e) {
        EXPECT_EQ(e.code(), tw::errc::invalid_argument);
    }
}

// 1.7 appended the stages, saturation and memory fields (issue 34): a caller
// built against the 1.0-1.5 header passes 152 bytes and gets exactly its
// fields; the bytes past them stay as the caller left them.
TEST(RuntimeAbi, StatsForA15CallerFillsItsFieldsAndNotTheNewOnes) {
    tw::Runtime rt(tw_test::small_config(1, 1));
    std::atomic<int> ran{0};
    rt.start(0ms, [&] { ran.fetch_add(1); });
    ASSERT_TRUE(tw_test::wait_until([&] { return ran.load() == 1 && rt.stats().run_duration_samples == 1; }));
    tw::Stats st;
    st.run_duration_samples = 0xAB;  // a field past the caller's 152 bytes
    st.resident_bytes = 0xCD;
    (rt.*member(StatsSized{}))(&st, 152);
    EXPECT_EQ(st.started, 1u);
    EXPECT_EQ(st.lateness_samples, 1u);
    EXPECT_EQ(st.run_duration_samples, 0xABu);
    EXPECT_EQ(st.resident_bytes, 0xCDu);
    const tw::Stats all = rt.stats();
    EXPECT_EQ(all.run_duration_samples, 1u);
    EXPECT_GT(all.resident_bytes, 0u);
}
