// SPDX-License-Identifier: MIT OR Apache-2.0
// Unit tests for tickwheel::Wheel (include/tickwheel/wheel.hpp).
//
// Most tests go through `Checker`, which mirrors the wheel with a reference
// (a multimap of pending deadlines plus the set of expired-not-popped nodes)
// and, on every advance(t), checks the PRECISION CONTRACT: the nodes popped
// after advance(t) are exactly those whose deadline is <= t (plus those that
// were already expired), every one of them has a deadline > the previous
// now() unless it was already expired, none is popped twice, and advance()
// returned the number that became expired in that call. After every step it
// also checks size(), earliest_deadline() (exact) and next_expiry() (the
// start of the earliest non-empty slot, as the header documents).
#include "tickwheel/wheel.hpp"
#include "test_support/wheel.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace wheel_test;


// 64^k, k <= 10.
constexpr tick_t pow64(unsigned k) { return tick_t{1} << (Wheel::kSlotBits * k); }

constexpr tick_t sat_add(tick_t a, tick_t b) { return a > kMax - b ? kMax : a + b; }

// The start of the slot a pending deadline `d` occupies when the clock is
// `now`, as wheel.hpp documents it: level = highest bit of (d ^ now) / 6,
// the slot start is d with the digits below that level cleared. Only for
// d in now's 2^48-epoch (otherwise the node is on the overflow list).
tick_t documented_slot_start(tick_t now, tick_t d) {
    const tick_t diff = d ^ now;
    const unsigned level = (63u - static_cast<unsigned>(__builtin_clzll(diff))) / Wheel::kSlotBits;
    return d & ~(pow64(level) - 1);
}

class Checker {
public:
    explicit Checker(tick_t start = 0) : w(start) {}
    Checker(const Checker&) = delete;
    Checker& operator=(const Checker&) = delete;
    ~Checker() {
        for (WheelNode& n : store_) w.remove(&n);
    }

    WheelNode* add(tick_t d) {
        WheelNode* n = &store_.emplace_back();
        w.insert(n, d);
        track(n, d);
        return n;
    }
    // A node allocated in the checker's storage but not inserted.
    WheelNode* make() { return &store_.emplace_back(); }
    void insert(WheelNode* n, tick_t d) {
        w.insert(n, d);
        track(n, d);
    }
    bool remove(WheelNode* n) {
        const bool tracked = untrack(n);
        const bool removed = w.remove(n);
        EXPECT_EQ(removed, tracked) << "remove() of a node whose reference linked state is " << tracked;
        return removed;
    }
    void rearm(WheelNode* n, tick_t d) {
        untrack(n);
        w.rearm(n, d);
        track(n, d);
    }

    std::size_t pending() const { return pending_.size(); }
    std::size_t expired() const { return expired_.size(); }
    std::size_t total() const { return pending_.size() + expired_.size(); }
    tick_t min_pending() const { return pending_.empty() ? kNever : pending_.begin()->first; }

    // advance(t), pop everything and verify the exact expiry set.
    ::testing::AssertionResult advance(tick_t t) {
        const tick_t prev = w.now();
        const tick_t eff = std::max(t, prev);
        std::set<const WheelNode*> already(expired_.begin(), expired_.end());
        std::set<const WheelNode*> expect = already;
        std::size_t newly = 0;
        const auto end = pending_.upper_bound(eff);
        for (auto it = pending_.begin(); it != end; ++it, ++newly) expect.insert(it->second);
        pending_.erase(pending_.begin(), end);
        expired_.clear();

        const std::size_t got = w.advance(t);
        if (got != newly)
            return ::testing::AssertionFailure() << "advance(" << hex(t) << ") from now " << hex(prev) << " returned "
                                                 << got << ", expected " << newly;
        if (w.now() != eff)
            return ::testing::AssertionFailure() << "advance(" << hex(t) << ") from " << hex(prev) << ": now() is "
                                                 << hex(w.now()) << ", expected " << hex(eff);
        std::set<const WheelNode*> popped;
        while (WheelNode* n = w.pop_expired()) {
            if (n->linked()) return ::testing::AssertionFailure() << "popped node still reports linked()";
            if (!popped.insert(n).second)
                return ::testing::AssertionFailure() << "node popped twice, deadline " << hex(n->deadline());
            if (expect.count(n) == 0)
                return ::testing::AssertionFailure()
                       << "popped a node that should not have expired: deadline " << hex(n->deadline()) << " after advance("
                       << hex(t) << ") from now " << hex(prev) << (n->deadline() > eff ? " (EARLY)" : " (unknown node)");
            if (n->deadline() > eff)
                return ::testing::AssertionFailure() << "early expiry: deadline " << hex(n->deadline()) << " > t " << hex(eff);
            if (already.count(n) == 0 && n->deadline() <= prev)
                return ::testing::AssertionFailure() << "late expiry: deadline " << hex(n->deadline())
                                                     << " <= previous now " << hex(prev);
        }
        if (popped.size() != expect.size()) {
            auto f = ::testing::AssertionFailure();
            f << "advance(" << hex(t) << ") from now " << hex(prev) << ": popped " << popped.size() << ", expected "
              << expect.size() << "; missing deadlines:";
            int shown = 0;
            for (const WheelNode* n : expect)
                if (popped.count(n) == 0 && shown++ < 8) f << ' ' << hex(n->deadline());
            return f;
        }
        if (w.has_expired()) return ::testing::AssertionFailure() << "has_expired() after popping everything";
        return queries();
    }

    // size(), empty(), has_expired(), earliest_deadline(), next_expiry().
    ::testing::AssertionResult queries() const {
        if (w.size() != total())
            return ::testing::AssertionFailure() << "size() " << w.size() << ", expected " << total();
        if (w.empty() != (total() == 0)) return ::testing::AssertionFailure() << "empty() disagrees with size()";
        if (w.has_expired() != !expired_.empty())
            return ::testing::AssertionFailure() << "has_expired() " << w.has_expired() << ", expected " << !expired_.empty();
        const tick_t earliest = min_pending();
        if (w.earliest_deadline() != earliest)
            return ::testing::AssertionFailure() << "earliest_deadline() " << hex(w.earliest_deadline()) << ", expected "
                                                 << hex(earliest);
        const tick_t ne = w.next_expiry();
        if (!expired_.empty()) {
            if (ne != w.now())
                return ::testing::AssertionFailure() << "next_expiry() " << hex(ne) << " with expired nodes waiting, expected now() "
                                                     << hex(w.now());
        } else if (pending_.empty()) {
            if (ne != kNever) return ::testing::AssertionFailure() << "next_expiry() " << hex(ne) << " on an empty wheel";
        } else if (((earliest ^ w.now()) < kRange)) {
            const tick_t want = documented_slot_start(w.now(), earliest);
            if (ne != want)
                return ::testing::AssertionFailure() << "next_expiry() " << hex(ne) << ", expected slot start " << hex(want)
                                                     << " (earliest " << hex(earliest) << ", now " << hex(w.now()) << ")";
        } else {
            // Only the overflow list is non-empty: a lower bound, at most the
            // start of the earliest deadline's 2^48-epoch.
            const tick_t epoch = earliest & ~(kRange - 1);
            if (ne > epoch)
                return ::testing::AssertionFailure() << "next_expiry() " << hex(ne) << " is past the epoch " << hex(epoch)
                                                     << " of the earliest (overflow) deadline " << hex(earliest);
        }
        return ::testing::AssertionSuccess();
    }

    // Advance to d-1 and d for every distinct pending deadline d (ascending),
    // checking each step; leaves the wheel empty.
    ::testing::AssertionResult step_through_deadlines() {
        std::set<tick_t> targets;
        for (const auto& [d, n] : pending_) {
            targets.insert(d - 1);
            targets.insert(d);
        }
        for (tick_t t : targets)
            if (auto r = advance(t); !r) return r;
        if (!w.empty()) return ::testing::AssertionFailure() << "wheel not empty after its last deadline";
        return ::testing::AssertionSuccess();
    }

    Wheel w;

private:
    void track(WheelNode* n, tick_t d) {
        if (d <= w.now())
            expired_.insert(n);
        else
            pending_.emplace(d, n);
    }
    bool untrack(WheelNode* n) {
        if (expired_.erase(n) != 0) return true;
        auto [lo, hi] = pending_.equal_range(n->deadline());
        for (auto it = lo; it != hi; ++it)
            if (it->second == n) {
                pending_.erase(it);
                return true;
            }
        return false;
    }

    std::multimap<tick_t, WheelNode*> pending_;
    std::set<WheelNode*> expired_;
    std::deque<WheelNode> store_;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---------------------------------------------------------------------------
// Layout.
// ---------------------------------------------------------------------------

TEST(WheelTest, NodeSizeFitsInACacheLine) {
    std::cout << "[ sizeof ] sizeof(WheelNode) = " << sizeof(WheelNode) << ", alignof = " << alignof(WheelNode) << '\n';
    ::testing::Test::RecordProperty("sizeof_WheelNode", static_cast<int>(sizeof(WheelNode)));
    EXPECT_LE(sizeof(WheelNode), 64u);
    if constexpr (sizeof(void*) == 8) {
        EXPECT_EQ(sizeof(WheelNode), 32u) << "wheel.hpp documents 32 bytes on 64-bit targets";
    }
}

TEST(WheelTest, RealisticTimerObjectFitsInACacheLine) {
    struct CTimer {
        WheelNode node;
        void (*fn)(void*);
        void* arg;
    };
    std::cout << "[ sizeof ] sizeof(WheelNode + fn + arg) = " << sizeof(CTimer) << '\n';
    ::testing::Test::RecordProperty("sizeof_CTimer", static_cast<int>(sizeof(CTimer)));
    EXPECT_LE(sizeof(CTimer), 64u);
    EXPECT_LE(alignof(CTimer), 64u);
}

TEST(WheelTest, UserFieldsAreNeverTouchedByTheWheel) {
    Wheel w;
    std::vector<WheelNode> nodes(200);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        nodes[i].user16 = static_cast<std::uint16_t>(0xA500 + i);
        nodes[i].user32 = static_cast<std::uint32_t>(0xDEAD0000u + i);
        w.insert(&nodes[i], i * i * i * i * 997);  // spread over levels
    }
    w.rearm(&nodes[7], 3);
    EXPECT_TRUE(w.remove(&nodes[9]));
    w.advance(tick_t{1} << 40);
    while (w.pop_expired() != nullptr) {
    }
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        EXPECT_EQ(nodes[i].user16, static_cast<std::uint16_t>(0xA500 + i)) << i;
        EXPECT_EQ(nodes[i].user32, static_cast<std::uint32_t>(0xDEAD0000u + i)) << i;
        w.remove(&nodes[i]);
    }
}

// ---------------------------------------------------------------------------
// Basic state.
// ---------------------------------------------------------------------------

TEST(WheelTest, NewWheelIsEmpty) {
    for (tick_t start : {tick_t{0}, tick_t{12345}, kRange - 1, kMax}) {
        SCOPED_TRACE(hex(start));
        Wheel w(start);
        EXPECT_EQ(w.now(), start);
        EXPECT_EQ(w.size(), 0u);
        EXPECT_TRUE(w.empty());
        EXPECT_FALSE(w.has_expired());
        EXPECT_EQ(w.pop_expired(), nullptr);
        EXPECT_EQ(w.next_expiry(), kNever);
        EXPECT_EQ(w.earliest_deadline(), kNever);
        EXPECT_EQ(w.advance(start), 0u);
        EXPECT_EQ(w.now(), start);
    }
    Wheel d;
    EXPECT_EQ(d.now(), 0u);
    WheelNode n;
    EXPECT_FALSE(n.linked());
}

TEST(WheelTest, AdvanceMovesNowEvenWhenEmpty) {
    Wheel w;
    EXPECT_EQ(w.advance(17), 0u);
    EXPECT_EQ(w.now(), 17u);
    EXPECT_EQ(w.advance(kRange * 3 + 5), 0u);
    EXPECT_EQ(w.now(), kRange * 3 + 5);
    EXPECT_EQ(w.advance(kMax), 0u);
    EXPECT_EQ(w.now(), kMax);
}

TEST(WheelTest, AdvanceBackwardsIsANoOp) {
    Checker c(1000);
    WheelNode* a = c.add(1001);
    WheelNode* b = c.add(5000);
    WheelNode* far = c.add(kRange * 2);
    const tick_t ne = c.w.next_expiry();
    for (tick_t t : {tick_t{0}, tick_t{1}, tick_t{999}}) {
        EXPECT_EQ(c.w.advance(t), 0u);
        EXPECT_EQ(c.w.now(), 1000u);
        EXPECT_EQ(c.w.pop_expired(), nullptr);
        EXPECT_EQ(c.w.next_expiry(), ne);
        EXPECT_TRUE(c.queries());
    }
    EXPECT_TRUE(a->linked() && b->linked() && far->linked());
    // Backwards after a real advance: still nothing moves.
    ASSERT_TRUE(c.advance(3000));
    ASSERT_TRUE(c.advance(2000));
    EXPECT_EQ(c.w.now(), 3000u);
    ASSERT_TRUE(c.step_through_deadlines());
}

// ---------------------------------------------------------------------------
// Deadlines at or before now().
// ---------------------------------------------------------------------------

TEST(WheelTest, ZeroAndPastDeadlinesExpireAtOnce) {
    Wheel w(1000);
    WheelNode zero, past, at_now, future;
    w.insert(&zero, 0);
    w.insert(&past, 999);
    w.insert(&at_now, 1000);
    w.insert(&future, 1001);
    EXPECT_TRUE(zero.linked() && past.linked() && at_now.linked() && future.linked());
    EXPECT_EQ(w.size(), 4u);
    EXPECT_TRUE(w.has_expired());
    EXPECT_EQ(w.next_expiry(), 1000u) << "expired nodes waiting: next_expiry() must be now()";
    EXPECT_EQ(w.earliest_deadline(), 1001u) << "expired nodes are not pending";
    // They are expired already: advance(now) did not expire them.
    EXPECT_EQ(w.advance(1000), 0u);
    std::set<WheelNode*> got;
    for (int i = 0; i < 3; ++i) {
        WheelNode* n = w.pop_expired();
        ASSERT_NE(n, nullptr);
        EXPECT_FALSE(n->linked());
        got.insert(n);
    }
    EXPECT_EQ(got, (std::set<WheelNode*>{&zero, &past, &at_now}));
    EXPECT_EQ(w.pop_expired(), nullptr);
    EXPECT_FALSE(w.has_expired());
    EXPECT_EQ(w.size(), 1u);
    EXPECT_EQ(w.next_expiry(), 1001u);
    EXPECT_EQ(w.advance(1001), 1u);
    EXPECT_EQ(w.pop_expired(), &future);
    EXPECT_TRUE(w.empty());
}

TEST(WheelTest, DeadlineZeroOnAFreshWheel) {
    Wheel w;
    WheelNode n;
    w.insert(&n, 0);
    EXPECT_TRUE(w.has_expired());
    EXPECT_EQ(w.next_expiry(), 0u);
    EXPECT_EQ(w.earliest_deadline(), kNever);
    EXPECT_EQ(w.advance(0), 0u);
    EXPECT_EQ(w.pop_expired(), &n);
    EXPECT_EQ(w.next_expiry(), kNever);
}

TEST(WheelTest, AdvanceCountsOnlyNodesThatExpireInThatCall) {
    Wheel w;
    std::vector<WheelNode> n(6);
    w.insert(&n[0], 5);
    w.insert(&n[1], 5);
    w.insert(&n[2], 70);
    w.insert(&n[3], 4096 * 3);
    EXPECT_EQ(w.advance(5), 2u);
    // Not popped: a second advance must not count them again.
    EXPECT_EQ(w.advance(6), 0u);
    w.insert(&n[4], 6);  // already due: straight to the expired list, not counted
    EXPECT_EQ(w.advance(69), 0u);
    EXPECT_EQ(w.advance(kRange), 2u);
    EXPECT_EQ(w.size(), 5u);
    int popped = 0;
    while (w.pop_expired() != nullptr) ++popped;
    EXPECT_EQ(popped, 5);
    EXPECT_TRUE(w.empty());
}

TEST(WheelTest, InsertingDueNodesWhilePoppingIsAllowed) {
    Wheel w;
    std::vector<WheelNode> n(10);
    for (int i = 0; i < 5; ++i) w.insert(&n[i], 10);
    ASSERT_EQ(w.advance(10), 5u);
    int popped = 0, reinserted = 0;
    while (WheelNode* p = w.pop_expired()) {
        ++popped;
        if (reinserted < 5) w.insert(&n[5 + reinserted++], 3);  // in the past
        EXPECT_FALSE(p->linked());
    }
    EXPECT_EQ(popped, 10);
    EXPECT_TRUE(w.empty());
}

// ---------------------------------------------------------------------------
// Same tick.
// ---------------------------------------------------------------------------

TEST(WheelTest, SameTickTimersExpireTogether) {
    for (tick_t d : {tick_t{1}, tick_t{63}, tick_t{777}, pow64(3) * 5 + 3, pow64(7) * 2 + 1, kRange + 9, kMax}) {
        SCOPED_TRACE(hex(d));
        Checker c;
        for (int i = 0; i < 1000; ++i) c.add(d);
        c.add(d + 1 == 0 ? d : d + 1);  // a neighbour (same tick when d == kMax)
        ASSERT_TRUE(c.queries());
        ASSERT_TRUE(c.advance(d - 1));
        EXPECT_EQ(c.total(), 1001u);
        const std::size_t before = c.pending();
        ASSERT_TRUE(c.advance(d));  // checks all 1000 (and only them) pop now
        EXPECT_EQ(before - c.pending(), d == kMax ? 1001u : 1000u);
        ASSERT_TRUE(c.step_through_deadlines());
    }
}

// ---------------------------------------------------------------------------
// Level boundaries, for many starting clocks (including carries).
// ---------------------------------------------------------------------------

class WheelBoundaryTest : public ::testing::TestWithParam<tick_t> {};

TEST_P(WheelBoundaryTest, EveryLevelBoundary) {
    const tick_t now = GetParam();
    Checker c(now);
    for (unsigned level = 0; level <= Wheel::kLevels; ++level) {
        const tick_t span = pow64(level);
        // Relative: 64^L - 1, 64^L, 64^L + 1 ahead of now.
        for (tick_t delta : {span - 1, span, span + 1}) c.add(sat_add(now, delta));
        // Absolute: the next few level-L slot starts above now (carries).
        if (level >= 1) {
            const tick_t base = now & ~(span - 1);
            for (tick_t k = 1; k <= 3; ++k) {
                if (base > kMax - k * span) break;
                const tick_t b = base + k * span;
                for (tick_t d : {b - 1, b, sat_add(b, 1)}) c.add(d);
            }
        }
    }
    ASSERT_TRUE(c.queries());
    ASSERT_TRUE(c.step_through_deadlines());
}

TEST_P(WheelBoundaryTest, TopOfLevelRangeAndOverflow) {
    const tick_t now = GetParam();
    Checker c(now);
    std::vector<tick_t> ds = {sat_add(now, kRange - 1), sat_add(now, kRange), sat_add(now, kRange + 1),
                              sat_add(now, kRange * 2), kMax - 1, kMax};
    for (unsigned b = 40; b <= 63; ++b) ds.push_back(tick_t{1} << b);
    // Epoch (2^48) boundaries above now.
    const tick_t epoch = now & ~(kRange - 1);
    for (tick_t k = 1; k <= 2; ++k)
        if (epoch <= kMax - k * kRange) {
            const tick_t e = epoch + k * kRange;
            for (tick_t d : {e - 1, e, sat_add(e, 1), sat_add(e, pow64(5) + 3)}) ds.push_back(d);
        }
    for (tick_t d : ds) {
        const std::size_t size = c.w.size();
        WheelNode* n = c.add(d);
        // Never rejected: linked and counted whatever the distance.
        EXPECT_TRUE(n->linked()) << hex(d);
        EXPECT_EQ(c.w.size(), size + 1) << hex(d);
        ASSERT_TRUE(c.queries()) << "after inserting " << hex(d);
    }
    ASSERT_TRUE(c.step_through_deadlines());
}

INSTANTIATE_TEST_SUITE_P(Clocks, WheelBoundaryTest,
                         ::testing::Values(tick_t{0}, tick_t{1}, tick_t{63}, tick_t{64}, tick_t{65}, tick_t{4095}, tick_t{4096},
                                           pow64(3) - 1, pow64(4) - 1, pow64(5) - 1, pow64(6) - 1, pow64(7) - 1,
                                           pow64(3) * 7 + pow64(1) * 63 + 63, kRange - 1, kRange, kRange + 1,
                                           tick_t{0x0000123456789ABCull}, kRange * 5 - pow64(4) - 1, (tick_t{1} << 63) - 1,
                                           kMax - (kRange * 2), kMax - 64),
                         [](const ::testing::TestParamInfo<tick_t>& p) { return "now_" + hex(p.param); });

TEST(WheelTest, OneTickAheadAcrossAnEpochBoundary) {
    // now = 2^48 - 1: deadline 2^48 is one tick ahead but in the next epoch.
    Checker c(kRange - 1);
    WheelNode* n = c.add(kRange);
    EXPECT_TRUE(n->linked());
    EXPECT_LE(c.w.next_expiry(), kRange);
    EXPECT_GT(c.w.next_expiry(), kRange - 1);
    ASSERT_TRUE(c.queries());
    ASSERT_TRUE(c.advance(kRange));
    EXPECT_FALSE(n->linked());

    // Every tick across the boundary, a few timers per tick.
    Checker d(kRange * 3 - 40);
    for (tick_t t = kRange * 3 - 39; t <= kRange * 3 + 40; ++t)
        for (int i = 0; i < 3; ++i) d.add(t);
    for (tick_t t = kRange * 3 - 39; t <= kRange * 3 + 41; ++t) ASSERT_TRUE(d.advance(t));
    EXPECT_TRUE(d.w.empty());
}

// ---------------------------------------------------------------------------
// Rearm.
// ---------------------------------------------------------------------------

TEST(WheelTest, RearmLaterAndEarlier) {
    Checker c;
    WheelNode* a = c.add(100);
    WheelNode* b = c.add(pow64(4) + 7);
    WheelNode* o = c.add(kRange * 4 + 3);
    c.add(50);
    c.rearm(a, pow64(3) * 2 + 1);  // later: level 1 -> level 3
    EXPECT_EQ(a->deadline(), pow64(3) * 2 + 1);
    c.rearm(b, 60);  // earlier: level 4 -> level 0
    c.rearm(o, 61);  // overflow -> level 0
    EXPECT_EQ(c.w.size(), 4u);
    ASSERT_TRUE(c.queries());
    ASSERT_TRUE(c.advance(100));  // a must no longer fire at 100
    EXPECT_TRUE(a->linked());
    c.rearm(a, kRange * 7);  // level -> overflow
    c.rearm(a, c.w.now() + 1);  // and back
    c.rearm(a, c.w.now() + 1);  // same deadline again
    ASSERT_TRUE(c.queries());
    ASSERT_TRUE(c.step_through_deadlines());
}

TEST(WheelTest, RearmToThePastExpiresAtOnce) {
    Checker c(500);
    WheelNode* a = c.add(900);
    c.rearm(a, 10);
    EXPECT_TRUE(c.w.has_expired());
    EXPECT_EQ(c.w.next_expiry(), 500u);
    ASSERT_TRUE(c.queries());
    ASSERT_TRUE(c.advance(500));
    EXPECT_FALSE(a->linked());
}

TEST(WheelTest, RearmOfAnExpiredNotPoppedNode) {
    Checker c;
    WheelNode* a = c.add(10);
    WheelNode* b = c.add(10);
    EXPECT_EQ(c.w.advance(10), 2u);  // expired, not popped (bypassing the checker on purpose)
    // Tell the checker what happened: both are expired now.
    c.rearm(a, 10);  // rearm to a due tick: stays expired
    c.rearm(b, 5000);  // rearm to the future: no longer expired
    EXPECT_EQ(c.w.size(), 2u);
    ASSERT_TRUE(c.queries());
    ASSERT_TRUE(c.advance(10));  // pops exactly a
    EXPECT_FALSE(a->linked());
    EXPECT_TRUE(b->linked());
    ASSERT_TRUE(c.advance(4999));
    ASSERT_TRUE(c.advance(5000));
    EXPECT_FALSE(b->linked());
    EXPECT_TRUE(c.w.empty());
}

TEST(WheelTest, RearmOfAnUnlinkedNodeInserts) {
    Checker c;
    WheelNode* n = c.make();
    c.rearm(n, 42);
    EXPECT_TRUE(n->linked());
    EXPECT_EQ(c.w.size(), 1u);
    ASSERT_TRUE(c.step_through_deadlines());
}

// ---------------------------------------------------------------------------
// Remove.
// ---------------------------------------------------------------------------

TEST(WheelTest, RemoveFromASlotInEveryOrder) {
    // Three nodes in one slot (level 0, then level 2 with distinct
    // deadlines, then the overflow list), a later node elsewhere; remove
    // the three in each of the 6 orders. While any remains next_expiry()
    // must still see the slot; once it is empty the occupancy bit must be
    // clear so next_expiry() moves on to the later node.
    struct Case {
        tick_t d[3];
        tick_t slot_start;
        tick_t later;
        tick_t later_next;  // next_expiry() once only `later` is left
    };
    const Case cases[] = {
        {{10, 10, 10}, 10, 20, 20},
        {{pow64(2) * 3 + 1, pow64(2) * 3 + 100, pow64(2) * 3 + 4000}, pow64(2) * 3, pow64(2) * 5, pow64(2) * 5},
        {{pow64(7) * 63, pow64(7) * 63 + 1, pow64(7) * 63 + 2}, pow64(7) * 63, kMax, kMax & ~(kRange - 1)},
    };
    int perm[3] = {0, 1, 2};
    for (const Case& cs : cases) {
        do {
            SCOPED_TRACE(hex(cs.slot_start) + " order " + std::to_string(perm[0]) + std::to_string(perm[1]) +
                         std::to_string(perm[2]));
            Checker c;
            WheelNode* n[3];
            for (int i = 0; i < 3; ++i) n[i] = c.add(cs.d[i]);
            WheelNode* later = c.add(cs.later);
            for (int k = 0; k < 3; ++k) {
                ASSERT_TRUE(c.remove(n[perm[k]]));
                EXPECT_FALSE(n[perm[k]]->linked());
                EXPECT_EQ(c.w.next_expiry(), k < 2 ? cs.slot_start : cs.later_next);
                ASSERT_TRUE(c.queries());
            }
            // The emptied slot must still work.
            WheelNode* again = c.add(cs.d[perm[0]]);
            EXPECT_EQ(c.w.next_expiry(), cs.slot_start);
            ASSERT_TRUE(c.step_through_deadlines());
            EXPECT_FALSE(again->linked());
            EXPECT_FALSE(later->linked());
        } while (std::next_permutation(perm, perm + 3));
    }
}

TEST(WheelTest, RemoveTheOnlyNodeOfASlotClearsItsBit) {
    Checker c;
    WheelNode* a = c.add(5);
    c.add(6);
    ASSERT_TRUE(c.remove(a));
    EXPECT_EQ(c.w.next_expiry(), 6u);
    ASSERT_TRUE(c.advance(5));  // nothing
    EXPECT_EQ(c.w.size(), 1u);
    ASSERT_TRUE(c.step_through_deadlines());
}

TEST(WheelTest, RemoveOfUnlinkedNodeReturnsFalse) {
    Wheel w;
    WheelNode fresh, n;
    EXPECT_FALSE(w.remove(&fresh));
    EXPECT_EQ(w.size(), 0u);
    w.insert(&n, 10);
    EXPECT_FALSE(w.remove(&fresh));
    EXPECT_EQ(w.size(), 1u);
    EXPECT_TRUE(w.remove(&n));
    EXPECT_FALSE(w.remove(&n)) << "second remove";
    EXPECT_EQ(w.size(), 0u);
    w.insert(&n, 10);
    w.advance(10);
    EXPECT_EQ(w.pop_expired(), &n);
    EXPECT_FALSE(w.remove(&n)) << "remove after pop";
    EXPECT_TRUE(w.empty());
    EXPECT_EQ(w.next_expiry(), kNever);
}

TEST(WheelTest, RemoveFromExpiredAndOverflowLists) {
    Checker c;
    WheelNode* e1 = c.add(0);
    WheelNode* e2 = c.add(0);
    WheelNode* o1 = c.add(kRange * 9);
    WheelNode* o2 = c.add(kRange * 9 + 1);
    c.add(kRange * 10);
    ASSERT_TRUE(c.remove(e1));
    EXPECT_TRUE(c.w.has_expired());
    ASSERT_TRUE(c.remove(e2));
    EXPECT_FALSE(c.w.has_expired());
    ASSERT_TRUE(c.remove(o2));
    ASSERT_TRUE(c.queries());
    ASSERT_TRUE(c.remove(o1));
    ASSERT_TRUE(c.queries());
    EXPECT_EQ(c.w.size(), 1u);
    ASSERT_TRUE(c.step_through_deadlines());
}

// ---------------------------------------------------------------------------
// Advance: single ticks and huge jumps.
// ---------------------------------------------------------------------------

TEST(WheelTest, AdvanceOneTickAtATime) {
    Checker c;
    for (tick_t d = 1; d <= 5000; ++d) c.add(d);
    for (tick_t d : {tick_t{64}, tick_t{4096}, tick_t{4097}}) c.add(d);  // doubles on boundaries
    for (tick_t t = 1; t <= 5001; ++t) ASSERT_TRUE(c.advance(t)) << "t=" << t;
    EXPECT_TRUE(c.w.empty());
}

TEST(WheelTest, OneHugeJumpAcrossAllLevels) {
    Checker c;
    const tick_t target = tick_t{1} << 40;
    for (unsigned level = 0; level < Wheel::kLevels; ++level)
        for (tick_t k : {tick_t{1}, tick_t{2}, tick_t{31}, tick_t{63}})
            for (tick_t off : {tick_t{0}, tick_t{5}}) c.add(k * pow64(level) + off);
    Rng rng{7};
    for (int i = 0; i < 2000; ++i) c.add(rng.in(1, target));
    for (tick_t d : {target, target + 1, tick_t{1} << 47, kRange, kRange + 1, kMax}) c.add(d);
    ASSERT_TRUE(c.queries());
    ASSERT_TRUE(c.advance(target));  // everything <= 2^40 expires in one call, exactly once
    EXPECT_EQ(c.w.earliest_deadline(), target + 1);
    ASSERT_TRUE(c.advance(target));  // nothing more
    ASSERT_TRUE(c.step_through_deadlines());
}

TEST(WheelTest, RandomJumpsNeverEarlyNeverTwice) {
    // The precision contract with jumps of every size and timers on every
    // level; Checker::advance verifies each popped deadline is in
    // (previous t, t] and that nothing due is left behind.
    Rng rng{20240611};
    Checker c;
    for (int i = 0; i < 3000; ++i) {
        const unsigned bits = static_cast<unsigned>(rng.in(0, 50));
        c.add(rng.in(1, tick_t{1} << bits));
    }
    for (int step = 0; step < 4000 && c.pending() > 0; ++step) {
        const unsigned bits = static_cast<unsigned>(rng.in(0, 44));
        ASSERT_TRUE(c.advance(sat_add(c.w.now(), rng.in(0, tick_t{1} << bits)))) << "step " << step;
        if (step % 4 == 0) c.add(sat_add(c.w.now(), rng.in(0, tick_t{1} << static_cast<unsigned>(rng.in(0, 49)))));
    }
    ASSERT_TRUE(c.step_through_deadlines());
}

TEST(WheelTest, PrecisionContractStepByStep) {
    // Small random steps interleaved with inserts, removes and rearms near
    // the current time: every node must pop at the first t >= its deadline.
    Rng rng{99};
    Checker c(pow64(4) - 300);  // crosses level 1..4 carries early on
    std::vector<WheelNode*> nodes;
    for (int step = 0; step < 30000; ++step) {
        const tick_t now = c.w.now();
        switch (rng.in(0, 5)) {
            case 0:
            case 1:
                nodes.push_back(c.add(now + rng.in(0, rng.in(0, 1) ? 64 : 300000)));
                break;
            case 2:
                if (!nodes.empty()) c.remove(nodes[rng.in(0, nodes.size() - 1)]);
                break;
            case 3:
                if (!nodes.empty()) c.rearm(nodes[rng.in(0, nodes.size() - 1)], now + rng.in(0, 5000));
                break;
            default:
                ASSERT_TRUE(c.advance(now + rng.in(0, rng.in(0, 3) ? 8 : 2000))) << "step " << step;
        }
    }
    ASSERT_TRUE(c.step_through_deadlines());
}

// ---------------------------------------------------------------------------
// next_expiry() / earliest_deadline().
// ---------------------------------------------------------------------------

TEST(WheelTest, NextExpirySemantics) {
    Wheel w(100);  // 100 = 64 + 36: level-0 block is [64, 128)
    EXPECT_EQ(w.next_expiry(), kNever);
    WheelNode a, b, c, e;
    w.insert(&a, 120);  // same level-1 block: level 0, next_expiry exact
    EXPECT_EQ(w.next_expiry(), 120u);
    EXPECT_EQ(w.earliest_deadline(), 120u);
    w.remove(&a);
    w.insert(&b, 64 * 5 + 3);  // level 1, slot 5: next_expiry = slot start
    EXPECT_EQ(w.next_expiry(), 64u * 5);
    EXPECT_EQ(w.earliest_deadline(), 64u * 5 + 3);
    w.insert(&c, 64 * 5 + 1);  // same slot, earlier
    EXPECT_EQ(w.next_expiry(), 64u * 5);
    EXPECT_EQ(w.earliest_deadline(), 64u * 5 + 1);
    w.insert(&e, 50);  // expired: next_expiry is now(), earliest unaffected
    EXPECT_EQ(w.next_expiry(), 100u);
    EXPECT_EQ(w.earliest_deadline(), 64u * 5 + 1);
    EXPECT_EQ(w.pop_expired(), &e);
    EXPECT_EQ(w.next_expiry(), 320u);
    // After cascading to the slot start the remaining level-0 deadline is exact.
    EXPECT_EQ(w.advance(320), 0u);
    EXPECT_EQ(w.next_expiry(), 321u);
    EXPECT_EQ(w.advance(321), 1u);
    EXPECT_EQ(w.pop_expired(), &c);
    EXPECT_EQ(w.next_expiry(), 323u);
    w.remove(&b);
    EXPECT_EQ(w.next_expiry(), kNever);
    EXPECT_EQ(w.earliest_deadline(), kNever);
}

TEST(WheelTest, NextExpiryIsALowerBoundOfEarliestDeadline) {
    Rng rng{5};
    for (int round = 0; round < 200; ++round) {
        Checker c(rng.in(0, tick_t{1} << rng.in(0, 63)));
        const int n = static_cast<int>(rng.in(1, 40));
        for (int i = 0; i < n; ++i) c.add(sat_add(c.w.now(), rng.in(1, tick_t{1} << rng.in(0, 60))));
        for (int i = 0; i < 10 && c.pending() > 0; ++i) {
            EXPECT_LE(c.w.next_expiry(), c.w.earliest_deadline());
            EXPECT_GT(c.w.next_expiry(), c.w.now());
            ASSERT_TRUE(c.queries());
            ASSERT_TRUE(c.advance(c.w.next_expiry()));
        }
    }
}

TEST(WheelTest, EarliestDeadlineIsExact) {
    Rng rng{11};
    Checker c(3);
    std::vector<WheelNode*> nodes;
    for (int i = 0; i < 3000; ++i) {
        if (nodes.empty() || rng.in(0, 2) != 0) {
            const unsigned bits = static_cast<unsigned>(rng.in(0, 63));
            nodes.push_back(c.add(rng.in(0, (tick_t{1} << bits) | ((tick_t{1} << bits) - 1))));
        } else {
            c.remove(nodes[rng.in(0, nodes.size() - 1)]);
        }
        ASSERT_EQ(c.w.earliest_deadline(), c.min_pending()) << "op " << i;
        ASSERT_TRUE(c.queries());
    }
}

TEST(WheelTest, DriverWakesOncePerLevelForAFarTimer) {
    // wheel.hpp: "a slot on a higher level costs one extra wake-up (to
    // cascade) per level". A timer with four non-zero digits is woken for at
    // digits 3, 2, 1 and 0; one whose lower digits are zero fires at once.
    Wheel w;
    WheelNode a, b;
    const tick_t d = pow64(3) * 5 + pow64(2) * 7 + 64 * 9 + 11;
    w.insert(&a, d);
    std::vector<tick_t> wakes;
    while (!w.empty()) {
        const tick_t t = w.next_expiry();
        wakes.push_back(t);
        w.advance(t);
        while (w.pop_expired() != nullptr) {
        }
    }
    EXPECT_EQ(wakes, (std::vector<tick_t>{pow64(3) * 5, pow64(3) * 5 + pow64(2) * 7, pow64(3) * 5 + pow64(2) * 7 + 64 * 9, d}));
    w.insert(&b, w.now() + pow64(3) * 2);  // from now = d: level 3 again, same lower digits
    const tick_t db = b.deadline();
    wakes.clear();
    while (!w.empty()) {
        const tick_t t = w.next_expiry();
        ASSERT_LE(t, db);
        wakes.push_back(t);
        w.advance(t);
        while (WheelNode* p = w.pop_expired()) EXPECT_EQ(p->deadline(), t);
    }
    EXPECT_EQ(wakes.back(), db);
    EXPECT_EQ(wakes.size(), 4u);

    Wheel z;
    WheelNode aligned;
    z.insert(&aligned, pow64(5) * 3);
    EXPECT_EQ(z.next_expiry(), pow64(5) * 3);
    EXPECT_EQ(z.advance(z.next_expiry()), 1u);
    EXPECT_EQ(z.pop_expired(), &aligned);
}

// ---------------------------------------------------------------------------
// Idle gaps and tickless drivers.
// ---------------------------------------------------------------------------

// Runs `fn` three times and returns the fastest run in seconds (robust
// against a busy machine; an O(ticks) loop would take hours regardless).
template <class Fn>
double best_of_3(Fn fn) {
    double best = 1e9;
    for (int i = 0; i < 3; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        fn();
        best = std::min(best, seconds_since(t0));
    }
    return best;
}

TEST(WheelTest, IdleGapOnAnEmptyWheelIsInstantaneous) {
    const double s = best_of_3([] {
        Wheel w;
        EXPECT_EQ(w.advance(tick_t{1} << 47), 0u);
        EXPECT_EQ(w.now(), tick_t{1} << 47);
        EXPECT_EQ(w.advance(kMax), 0u);
    });
    std::cout << "[ timing ] empty wheel 0 -> 2^47 -> 2^64-1: " << s * 1e3 << " ms\n";
    EXPECT_LT(s, 0.010);
}

TEST(WheelTest, IdleGapWithOneFarTimerIsInstantaneous) {
    const double s = best_of_3([] {
        Wheel w;
        WheelNode n, o;
        w.insert(&n, (tick_t{1} << 47) - 12345);
        w.insert(&o, kRange * 100 + 77);  // overflow list
        EXPECT_EQ(w.advance(tick_t{1} << 47), 1u);
        EXPECT_EQ(w.pop_expired(), &n);
        EXPECT_EQ(w.advance(kRange * 100 + 76), 0u);
        EXPECT_EQ(w.advance(kMax), 1u);
        EXPECT_EQ(w.pop_expired(), &o);
    });
    std::cout << "[ timing ] one far timer, 0 -> 2^47 and an overflow timer to 2^64-1: " << s * 1e3 << " ms\n";
    EXPECT_LT(s, 0.010);
}

TEST(WheelTest, IdleHourOfMicrosecondTicks) {
    constexpr tick_t kHour = 3'600'000'000ull;
    Rng rng{3600};
    std::vector<tick_t> deadlines(1000);
    for (tick_t& d : deadlines) d = rng.in(1, kHour);
    // One call over the whole hour.
    const double one = best_of_3([&] {
        Wheel w;
        std::vector<WheelNode> nodes(deadlines.size());
        for (std::size_t i = 0; i < nodes.size(); ++i) w.insert(&nodes[i], deadlines[i]);
        EXPECT_EQ(w.advance(kHour), nodes.size());
        std::size_t popped = 0;
        while (WheelNode* n = w.pop_expired()) popped += n->deadline() <= kHour;
        EXPECT_EQ(popped, nodes.size());
    });
    std::cout << "[ timing ] 1000 timers, one advance over 3.6e9 ticks: " << one * 1e3 << " ms\n";
    EXPECT_LT(one, 0.050);
    // And in one-second (1e6-tick) steps, checked exactly.
    Checker c;
    for (tick_t d : deadlines) c.add(d);
    const auto t0 = std::chrono::steady_clock::now();
    for (tick_t t = 1'000'000; t <= kHour; t += 1'000'000) ASSERT_TRUE(c.advance(t));
    EXPECT_TRUE(c.w.empty());
    EXPECT_LT(seconds_since(t0), 2.0);
}

// The tickless driver loop of wheel.hpp: sleep until next_expiry(), advance
// to it, pop. Every node must fire at exactly its deadline (t == deadline:
// next_expiry() is a lower bound of the earliest deadline, so a node due at
// t must have deadline == t), exactly once, and the number of wake-ups is
// bounded by the cascades: at most kLevels + 1 per node.
void run_driver(Rng& rng, std::size_t n, tick_t max_deadline, bool with_removals) {
    Wheel w;
    std::vector<WheelNode> nodes(n);
    std::vector<int> fired(n, 0);
    std::vector<bool> removed(n, false);
    for (std::size_t i = 0; i < n; ++i) {
        nodes[i].user32 = static_cast<std::uint32_t>(i);
        w.insert(&nodes[i], rng.in(0, max_deadline));
    }
    std::size_t wakes = 0;
    tick_t last = 0;
    while (!w.empty()) {
        const tick_t t = w.next_expiry();
        ASSERT_NE(t, kNever);
        if (!w.has_expired()) {
            ASSERT_LE(t, w.earliest_deadline());
        }
        w.advance(t);
        ASSERT_GE(w.now(), last);
        last = w.now();
        ++wakes;
        ASSERT_LE(wakes, n * (Wheel::kLevels + 1)) << "too many wake-ups";
        while (WheelNode* p = w.pop_expired()) {
            ASSERT_EQ(p->deadline(), t) << "fired at a tick other than its deadline";
            ++fired[p->user32];
        }
        if (with_removals && rng.in(0, 3) == 0) {
            const std::size_t i = rng.in(0, n - 1);
            if (w.remove(&nodes[i])) removed[i] = true;
        }
    }
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(fired[i], removed[i] ? 0 : 1) << "node " << i << " deadline " << nodes[i].deadline();
    std::cout << "[ driver ] " << n << " timers up to " << hex(max_deadline) << ": " << wakes << " wake-ups\n";
}

TEST(WheelTest, TicklessDriverFiresEveryTimerAtItsDeadline) {
    Rng rng{42};
    const auto t0 = std::chrono::steady_clock::now();
    run_driver(rng, 20000, tick_t{1} << 40, false);
    std::cout << "[ timing ] driver over 20000 timers in [0, 2^40]: " << seconds_since(t0) * 1e3 << " ms\n";
}

TEST(WheelTest, TicklessDriverWithOverflowAndRemovals) {
    Rng rng{43};
    run_driver(rng, 5000, kMax, true);
    run_driver(rng, 5000, kRange * 4, true);
}

// ---------------------------------------------------------------------------
// Regression tests for two defects of the overflow list, fixed in wheel.cpp
// (commit 0c314c0); they failed before the fix and pass now.
// ---------------------------------------------------------------------------

// next_expiry() falls back to overflow_epoch_hint_ when only the overflow
// list holds timers. The defect: remove() never raised that hint, and an
// advance() that crossed the hinted epoch while the overflow list was empty
// never refreshed it, so a later overflow insert left next_expiry() far
// *behind* now(), and a driver computing `sleep = next_expiry() - now()`
// underflowed to a ~2^64-tick sleep and missed the timer. (Now the hint is
// kNever whenever the list is empty; Wheel::check() verifies it.)
TEST(WheelTest, NextExpiryIsNeverBeforeNow) {
    Wheel w;
    WheelNode a, b;
    w.insert(&a, kRange);  // overflow list; hint = 2^48
    ASSERT_TRUE(w.remove(&a));
    w.advance(kRange + 10);  // crosses the hinted epoch with an empty overflow list
    w.insert(&b, kRange * 4);  // overflow list again
    EXPECT_GE(w.next_expiry(), w.now()) << "next_expiry() " << hex(w.next_expiry()) << " < now() " << hex(w.now())
                                        << "; next_expiry() - now() = " << hex(w.next_expiry() - w.now());
    EXPECT_LE(w.next_expiry(), w.earliest_deadline());
    w.remove(&b);
}

// wheel.hpp: advance() costs "O(non-empty slots whose start is <= t, plus
// nodes re-filed)" and the overflow list is scanned only when an epoch that
// may hold a deadline begins. The defect: whenever the levels were empty,
// every advance() rescanned the whole overflow list (overflow_min_epoch()
// before comparing with t), so a loop of small advances cost O(calls x
// overflow size). Now the hint is compared with t first.
TEST(WheelTest, SmallAdvancesDoNotRescanTheOverflowList) {
    constexpr std::size_t kTimers = 20000, kCalls = 20000;
    Wheel w;
    std::vector<WheelNode> nodes(kTimers);
    for (std::size_t i = 0; i < kTimers; ++i) w.insert(&nodes[i], kRange * 3 + i);
    const auto t0 = std::chrono::steady_clock::now();
    for (tick_t t = 1; t <= kCalls; ++t) ASSERT_EQ(w.advance(t), 0u);
    const double s = seconds_since(t0);
    std::cout << "[ timing ] " << kCalls << " advance(+1) with " << kTimers << " overflow timers: " << s * 1e3 << " ms\n";
    EXPECT_LT(s, 0.100) << "each advance() scanned the overflow list";
    for (WheelNode& n : nodes) w.remove(&n);
}

}  // namespace
