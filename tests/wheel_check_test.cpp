// SPDX-License-Identifier: MIT OR Apache-2.0
// Tests of tickwheel::Wheel::check() (include/tickwheel/wheel.hpp): it passes
// on every state the public API can reach, and it reports each kind of
// corruption of the wheel's internals that a bug could cause -- a bitmap bit,
// a deadline changed without re-filing, a location field, broken list links,
// size, the clock, the overflow epoch hint -- with the right fault and place.
// Each corruption test also restores the state and checks that check()
// passes again, so the failure is due to the corruption alone.
#include "tickwheel/wheel.hpp"
#include "test_support/wheel.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <cstdint>
#include <deque>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace tickwheel {

// The test-only friend of Wheel and WheelNode: reaches the internals that
// check() verifies, so that tests can corrupt them.
struct WheelTestAccess {
    static std::uint64_t& occupied(Wheel& w, unsigned level) { return w.occupied_[level]; }
    static std::size_t& size(Wheel& w) { return w.size_; }
    static tick_t& now(Wheel& w) { return w.now_; }
    static tick_t& hint(Wheel& w) { return w.overflow_epoch_hint_; }
    /// The first of the slot's lists (kWays of them).
    static WheelLink& slot_head(Wheel& w, unsigned level, unsigned slot) { return w.slots_[level][slot][0]; }
    static WheelLink& expired_head(Wheel& w) { return w.expired_[0]; }  // the first of the expired lists (it holds the first expired node)
    static WheelLink& overflow_head(Wheel& w) { return w.overflow_; }

    static tick_t& deadline(WheelNode& n) { return n.deadline_; }
    static std::uint16_t& loc(WheelNode& n) { return n.loc_; }
    static WheelLink& links(WheelNode& n) { return n; }
    static bool on_level(const WheelNode& n) { return n.loc_ < Wheel::kLevels * Wheel::kSlots; }
    static unsigned level(const WheelNode& n) { return n.loc_ / Wheel::kSlots; }
    static unsigned slot(const WheelNode& n) { return n.loc_ % Wheel::kSlots; }
    static bool on_expired(const WheelNode& n) { return n.loc_ == Wheel::kExpiredList; }
    static bool on_overflow(const WheelNode& n) { return n.loc_ == Wheel::kOverflowList; }
};

}  // namespace tickwheel

namespace {

using namespace wheel_test;
using tickwheel::WheelLink;
using A = tickwheel::WheelTestAccess;
using Fault = Wheel::CheckResult::Fault;
using List = Wheel::CheckResult::List;

constexpr tick_t pow64(unsigned k) { return tick_t{1} << (Wheel::kSlotBits * k); }

::testing::AssertionResult passes(const Wheel& w) {
    const Wheel::CheckResult r = w.check();
    if (r.ok() && static_cast<bool>(r)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << r;
}

// check() fails with `fault` found on `list`.
::testing::AssertionResult fails_with(const Wheel& w, Fault fault, List list) {
    const Wheel::CheckResult r = w.check();
    if (r.ok() || static_cast<bool>(r)) return ::testing::AssertionFailure() << "check() passed";
    if (r.fault != fault || r.list != list)
        return ::testing::AssertionFailure() << "check() found another fault (" << static_cast<int>(r.fault) << " on list "
                                             << static_cast<int>(r.list) << "): " << r;
    std::cout << "[ caught ] " << r << '\n';
    return ::testing::AssertionSuccess();
}

// A wheel with nodes in every kind of place: the expired list, levels 0, 1,
// 3 and 7 (two nodes sharing one level-1 slot), and the overflow list (two
// epochs). now has a non-zero digit on every level.
struct Populated {
    static constexpr tick_t kStart = 0x0000'1234'5678'9ABCull;

    Wheel w{kStart};
    WheelNode expired, lv0, lv1a, lv1b, lv3, lv7, far1, far2;

    Populated() {
        w.insert(&expired, kStart - 5);
        w.insert(&lv0, kStart + 2);                            // same level-1 block: level 0
        w.insert(&lv1a, (kStart | (pow64(1) - 1)) + 1);        // next level-1 slot
        w.insert(&lv1b, (kStart | (pow64(1) - 1)) + 7);        // the same slot
        w.insert(&lv3, (kStart | (pow64(3) - 1)) + 5);         // next level-3 slot
        w.insert(&lv7, (kStart | (pow64(7) - 1)) + pow64(7));  // level 7
        w.insert(&far1, kRange * 3 + 17);                      // overflow, epoch 3
        w.insert(&far2, kRange * 9);                           // overflow, epoch 9
    }
    ~Populated() {
        for (WheelNode* n : all()) w.remove(n);
    }
    std::vector<WheelNode*> all() { return {&expired, &lv0, &lv1a, &lv1b, &lv3, &lv7, &far1, &far2}; }
};

// ---------------------------------------------------------------------------
// check() passes on every reachable state.
// ---------------------------------------------------------------------------

TEST(WheelCheckTest, DefaultResultIsOk) {
    const Wheel::CheckResult r;
    EXPECT_TRUE(r.ok());
    EXPECT_TRUE(static_cast<bool>(r));
    EXPECT_STREQ(r.what(), "ok");
    std::ostringstream os;
    os << r;
    EXPECT_EQ(os.str(), "ok");
}

TEST(WheelCheckTest, PassesOnEmptyWheels) {
    for (tick_t start : {tick_t{0}, tick_t{12345}, kRange - 1, kRange, kMax - 1, kMax}) {
        SCOPED_TRACE(hex(start));
        Wheel w(start);
        EXPECT_TRUE(passes(w));
        w.advance(start + 1000 < start ? kMax : start + 1000);
        EXPECT_TRUE(passes(w));
    }
}

TEST(WheelCheckTest, PassesOnAPopulatedWheelAndPlacesItsNodesAsDocumented) {
    Populated p;
    ASSERT_TRUE(passes(p.w));
    EXPECT_EQ(p.w.size(), 8u);
    // The fixture really covers the places it claims to.
    EXPECT_TRUE(A::on_expired(p.expired));
    EXPECT_EQ(A::level(p.lv0), 0u);
    EXPECT_EQ(A::level(p.lv1a), 1u);
    EXPECT_EQ(A::level(p.lv1b), 1u);
    EXPECT_EQ(A::slot(p.lv1a), A::slot(p.lv1b));
    EXPECT_EQ(A::level(p.lv3), 3u);
    EXPECT_EQ(A::level(p.lv7), 7u);
    EXPECT_TRUE(A::on_overflow(p.far1));
    EXPECT_TRUE(A::on_overflow(p.far2));
    EXPECT_EQ(A::hint(p.w), kRange * 3);
}

TEST(WheelCheckTest, PassesAfterEveryStepOfInsertRemoveRearmAdvancePop) {
    Populated p;
    Wheel& w = p.w;
    ASSERT_TRUE(passes(w));
    ASSERT_TRUE(w.remove(&p.lv1a));  // a shared slot keeps its bit
    ASSERT_TRUE(passes(w));
    ASSERT_TRUE(w.remove(&p.lv1b));  // now it empties
    ASSERT_TRUE(passes(w));
    w.rearm(&p.lv0, Populated::kStart + 40);
    ASSERT_TRUE(passes(w));
    w.rearm(&p.expired, kRange * 2);  // expired -> overflow, lowers the hint
    ASSERT_TRUE(passes(w));
    ASSERT_TRUE(w.remove(&p.expired));  // the hint is now a stale (still valid) lower bound
    ASSERT_TRUE(passes(w));
    EXPECT_EQ(A::hint(w), kRange * 2);
    // Step a tickless driver through every cascade and both overflow epochs.
    int steps = 0;
    while (!w.empty()) {
        const tick_t ne = w.next_expiry();
        ASSERT_NE(ne, kNever);
        w.advance(ne);
        ASSERT_TRUE(passes(w)) << "after advance(" << hex(ne) << ")";
        if (WheelNode* n = w.pop_expired()) {  // pop one, check, then the rest
            ASSERT_TRUE(passes(w));
            w.insert(n, 0);  // re-insert while popping: expired again
            ASSERT_TRUE(passes(w));
            while (w.pop_expired() != nullptr) ASSERT_TRUE(passes(w));
        }
        ASSERT_LT(++steps, 200);
    }
    EXPECT_TRUE(passes(w));
    EXPECT_EQ(A::hint(w), kNever);
}

TEST(WheelCheckTest, PassesAcrossEpochBoundariesAndAtTheEndOfTime) {
    Wheel w(kRange - 10);
    std::vector<WheelNode> nodes(8);
    w.insert(&nodes[0], kRange - 1);       // level 0
    w.insert(&nodes[1], kRange);           // next epoch: overflow, though 10 ticks ahead
    w.insert(&nodes[2], kRange + 5);       // overflow
    w.insert(&nodes[3], kRange * 2 - 1);   // overflow
    w.insert(&nodes[4], kMax);             // overflow, the last tick
    w.insert(&nodes[5], kMax - kRange);    // overflow
    ASSERT_TRUE(passes(w));
    for (tick_t t : {kRange - 1, kRange, kRange + 4, kRange + 5, kRange * 2 - 2, kRange * 2, kMax - kRange - 1, kMax - kRange,
                     kMax - 1}) {
        w.advance(t);
        ASSERT_TRUE(passes(w)) << "after advance(" << hex(t) << ")";
        while (w.pop_expired() != nullptr) ASSERT_TRUE(passes(w));
    }
    w.insert(&nodes[6], kMax);  // two nodes on kMax, on level 0 now
    ASSERT_TRUE(passes(w));
    w.advance(kMax);
    ASSERT_TRUE(passes(w));
    while (w.pop_expired() != nullptr) ASSERT_TRUE(passes(w));
    EXPECT_TRUE(w.empty());
    EXPECT_TRUE(passes(w));
}

TEST(WheelCheckTest, PassesThroughRandomOperations) {
    Rng rng{0xC0FFEE};
    for (int round = 0; round < 20; ++round) {
        const tick_t start = rng.one_in(2) ? rng.next() >> rng.in(0, 40) : kRange * rng.in(1, 5) - rng.in(1, 100);
        Wheel w(start);
        std::deque<WheelNode> nodes(64);
        for (int op = 0; op < 2000; ++op) {
            WheelNode& n = nodes[rng.below(nodes.size())];
            const tick_t now = w.now();
            const auto ahead = [&](tick_t span) { return now > kMax - span ? kMax : now + rng.in(0, span); };
            switch (rng.below(5)) {
                case 0: w.rearm(&n, ahead(pow64(static_cast<unsigned>(rng.in(0, 8))))); break;
                case 1: w.rearm(&n, rng.one_in(3) ? rng.next() : ahead(200)); break;
                case 2: w.remove(&n); break;
                case 3: {  // a tickless driver's step, or a jump
                    const tick_t ne = w.next_expiry();
                    w.advance(ne != kNever && rng.one_in(2) ? ne : ahead(rng.one_in(4) ? pow64(6) : 300));
                    break;
                }
                default: w.pop_expired(); break;
            }
            ASSERT_TRUE(passes(w)) << "round " << round << " op " << op;
        }
        for (WheelNode& n : nodes) w.remove(&n);
        ASSERT_TRUE(passes(w));
    }
}

// ---------------------------------------------------------------------------
// check() reports each kind of corruption.
// ---------------------------------------------------------------------------

TEST(WheelCheckTest, DetectsABitmapBitSetForAnEmptySlot) {
    Populated p;
    const unsigned slot = (A::slot(p.lv0) + 1) % Wheel::kSlots;  // empty
    ASSERT_EQ(A::occupied(p.w, 0) >> slot & 1, 0u);
    A::occupied(p.w, 0) ^= std::uint64_t{1} << slot;
    const Wheel::CheckResult r = p.w.check();
    ASSERT_TRUE(fails_with(p.w, Fault::kBitmap, List::kSlot));
    EXPECT_EQ(r.level, 0u);
    EXPECT_EQ(r.slot, slot);
    EXPECT_EQ(r.found, 1u);
    EXPECT_EQ(r.expected, 0u);
    A::occupied(p.w, 0) ^= std::uint64_t{1} << slot;
    EXPECT_TRUE(passes(p.w));
}

TEST(WheelCheckTest, DetectsABitmapBitClearedForAnOccupiedSlot) {
    Populated p;
    for (WheelNode* n : {&p.lv0, &p.lv1a, &p.lv3, &p.lv7}) {
        const unsigned level = A::level(*n), slot = A::slot(*n);
        A::occupied(p.w, level) &= ~(std::uint64_t{1} << slot);
        const Wheel::CheckResult r = p.w.check();
        ASSERT_TRUE(fails_with(p.w, Fault::kBitmap, List::kSlot)) << "level " << level;
        EXPECT_EQ(r.level, level);
        EXPECT_EQ(r.slot, slot);
        EXPECT_EQ(r.found, 0u);
        EXPECT_EQ(r.expected, 1u);
        A::occupied(p.w, level) |= std::uint64_t{1} << slot;
        ASSERT_TRUE(passes(p.w));
    }
}

TEST(WheelCheckTest, DetectsADeadlineMovedToAnotherSlotWithoutRefiling) {
    Populated p;
    const tick_t saved = A::deadline(p.lv3);
    A::deadline(p.lv3) = saved + pow64(3);  // the next level-3 digit: same level, other slot
    const Wheel::CheckResult r = p.w.check();
    ASSERT_TRUE(fails_with(p.w, Fault::kSlotDigit, List::kSlot));
    EXPECT_EQ(r.node, &p.lv3);
    EXPECT_EQ(r.level, 3u);
    EXPECT_EQ(r.found, A::slot(p.lv3));
    EXPECT_EQ(r.expected, (A::slot(p.lv3) + 1) % Wheel::kSlots);
    A::deadline(p.lv3) = saved;
    EXPECT_TRUE(passes(p.w));
}

TEST(WheelCheckTest, DetectsADeadlineMovedToAnotherLevelWithoutRefiling) {
    Populated p;
    const tick_t saved = A::deadline(p.lv1a);
    A::deadline(p.lv1a) = saved + pow64(4);  // now differs from now() at level 4
    Wheel::CheckResult r = p.w.check();
    ASSERT_TRUE(fails_with(p.w, Fault::kSlotLevel, List::kSlot));
    EXPECT_EQ(r.node, &p.lv1a);
    EXPECT_EQ(r.found, 1u);
    EXPECT_EQ(r.expected, 4u);
    // Beyond the levels (another epoch): the rule's level is kLevels.
    A::deadline(p.lv1a) = saved + kRange;
    r = p.w.check();
    ASSERT_TRUE(fails_with(p.w, Fault::kSlotLevel, List::kSlot));
    EXPECT_EQ(r.expected, Wheel::kLevels);
    // A deadline the rule files on level 0, left on level 7.
    A::deadline(p.lv7) = Populated::kStart + 1;
    A::deadline(p.lv1a) = saved;
    ASSERT_TRUE(fails_with(p.w, Fault::kSlotLevel, List::kSlot));
    A::deadline(p.lv7) = (Populated::kStart | (pow64(7) - 1)) + pow64(7);
    EXPECT_TRUE(passes(p.w));
}

TEST(WheelCheckTest, DetectsADueNodeLeftOnALevel) {
    Populated p;
    const tick_t saved = A::deadline(p.lv0);
    for (tick_t d : {Populated::kStart, Populated::kStart - 1, tick_t{0}}) {
        A::deadline(p.lv0) = d;
        const Wheel::CheckResult r = p.w.check();
        ASSERT_TRUE(fails_with(p.w, Fault::kSlotDue, List::kSlot)) << hex(d);
        EXPECT_EQ(r.node, &p.lv0);
        EXPECT_EQ(r.found, d);
        EXPECT_EQ(r.expected, Populated::kStart);
    }
    A::deadline(p.lv0) = saved;
    EXPECT_TRUE(passes(p.w));
}

TEST(WheelCheckTest, DetectsTheClockMovedWithoutCascading) {
    Populated p;
    A::now(p.w) = A::deadline(p.lv1b);  // past lv0 and lv1a: they should have expired
    EXPECT_FALSE(p.w.check().ok());
    ASSERT_TRUE(fails_with(p.w, Fault::kSlotDue, List::kSlot));
    A::now(p.w) = Populated::kStart;
    EXPECT_TRUE(passes(p.w));
}

TEST(WheelCheckTest, DetectsAnExpiredNodeWithAFutureDeadline) {
    Populated p;
    A::deadline(p.expired) = Populated::kStart + 1;
    const Wheel::CheckResult r = p.w.check();
    ASSERT_TRUE(fails_with(p.w, Fault::kExpiredNotDue, List::kExpired));
    EXPECT_EQ(r.node, &p.expired);
    A::deadline(p.expired) = Populated::kStart;  // due at now: fine
    EXPECT_TRUE(passes(p.w));
}

TEST(WheelCheckTest, DetectsAnOverflowNodeThatBelongsOnTheLevels) {
    Populated p;
    const tick_t saved = A::deadline(p.far2);
    for (tick_t d : {Populated::kStart + 100, (Populated::kStart | (kRange - 1)), Populated::kStart, tick_t{1}}) {
        A::deadline(p.far2) = d;
        const Wheel::CheckResult r = p.w.check();
        ASSERT_TRUE(fails_with(p.w, Fault::kOverflowNotFar, List::kOverflow)) << hex(d);
        EXPECT_EQ(r.node, &p.far2);
        EXPECT_EQ(r.found, d);
    }
    A::deadline(p.far2) = saved;
    EXPECT_TRUE(passes(p.w));
}

TEST(WheelCheckTest, DetectsALocationFieldThatNamesAnotherList) {
    Populated p;
    const std::uint16_t saved = A::loc(p.lv1b);
    const std::uint16_t wrong[] = {static_cast<std::uint16_t>(saved + 1), 0, A::loc(p.expired), A::loc(p.far1), 0xFFFF};
    for (std::uint16_t loc : wrong) {
        A::loc(p.lv1b) = loc;
        const Wheel::CheckResult r = p.w.check();
        ASSERT_TRUE(fails_with(p.w, Fault::kLocation, List::kSlot)) << loc;
        EXPECT_EQ(r.node, &p.lv1b);
        EXPECT_EQ(r.found, loc);
        EXPECT_EQ(r.expected, saved);
    }
    A::loc(p.lv1b) = saved;
    A::loc(p.far1) = A::loc(p.expired);
    ASSERT_TRUE(fails_with(p.w, Fault::kLocation, List::kOverflow));
    A::loc(p.far1) = A::loc(p.far2);
    EXPECT_TRUE(passes(p.w));
}

// advance_uncounted(): a due level-0 slot's lists join the expired lists
// whole; its nodes keep the slot's location until popped or removed.
// check() accepts exactly that location (the slot of the deadline's lowest
// digit) on the expired lists, remove() and the pops treat them as expired,
// and the slot, reused by the next lap, is independent of them.
TEST(WheelCheckTest, AdvanceUncountedSplicesADueLevel0SlotAndCheckAcceptsItsNodes) {
    constexpr tick_t kStart = 0x0000'1234'5678'9AC0ull;  // digit 0 at level 0
    Wheel w{kStart};
    WheelNode a, b, c, d, later;
    for (WheelNode* n : {&a, &b, &c, &d}) w.insert(n, kStart + 5);  // one level-0 slot, its 4 ways
    w.insert(&later, kStart + 9);
    ASSERT_TRUE(passes(w));
    const std::uint16_t slot5 = A::loc(a);
    w.advance_uncounted(kStart + 5);
    EXPECT_EQ(w.now(), kStart + 5);
    EXPECT_TRUE(w.has_expired());
    EXPECT_EQ(w.size(), 5u);
    EXPECT_EQ(A::loc(a), slot5) << "spliced, not walked: the node keeps its slot's location";
    ASSERT_TRUE(passes(w));
    // A spliced node's location must still be its deadline's slot.
    A::loc(c) = static_cast<std::uint16_t>(slot5 + 1);
    ASSERT_TRUE(fails_with(w, Fault::kLocation, List::kExpired));
    A::loc(c) = slot5;
    ASSERT_TRUE(passes(w));
    // remove() of a spliced node: as an expired one.
    EXPECT_TRUE(w.remove(&b));
    EXPECT_FALSE(b.linked());
    EXPECT_EQ(w.size(), 4u);
    ASSERT_TRUE(passes(w));
    // The next lap: slot 9 is spliced too, and a new node files into slot 5
    // again while a, c and d (location slot 5) wait on the expired lists.
    w.advance_uncounted(kStart + 64);
    WheelNode lap;
    w.insert(&lap, kStart + 64 + 5);
    EXPECT_EQ(A::loc(lap), slot5);
    ASSERT_TRUE(passes(w));
    EXPECT_TRUE(w.remove(&c));  // alone in no list: slot 5's bit stays (lap is there)
    ASSERT_TRUE(passes(w));
    EXPECT_EQ(w.next_expiry(), kStart + 64);  // expired nodes wait
    std::vector<WheelNode*> popped;
    while (WheelNode* n = w.pop_expired()) popped.push_back(n);
    std::sort(popped.begin(), popped.end());
    std::vector<WheelNode*> want{&a, &d, &later};
    std::sort(want.begin(), want.end());
    EXPECT_EQ(popped, want);
    for (WheelNode* n : popped) EXPECT_FALSE(n->linked());
    ASSERT_TRUE(passes(w));
    EXPECT_EQ(w.next_expiry(), kStart + 64 + 5);
    w.advance_uncounted(kStart + 64 + 5);
    WheelNode* out[4];
    ASSERT_EQ(w.pop_expired_n(out, 4), 1u);
    EXPECT_EQ(out[0], &lap);
    EXPECT_TRUE(w.empty());
    EXPECT_TRUE(passes(w));
}

TEST(WheelCheckTest, DetectsAPrevLinkThatDoesNotPointBack) {
    Populated p;
    WheelLink& b = A::links(p.lv1b);
    WheelLink* const saved = b.prev;
    b.prev = &A::links(p.lv0);
    const Wheel::CheckResult r = p.w.check();
    ASSERT_TRUE(fails_with(p.w, Fault::kList, List::kSlot));
    // The last good node: lv1a if the slot filed lv1b after it in the same
    // one of its lists, else the list's head (reported as null).
    const WheelNode* const before_b = saved == &A::links(p.lv1a) ? &p.lv1a : nullptr;
    EXPECT_EQ(r.node, before_b) << "the last good node: its next does not point back to it";
    b.prev = saved;
    EXPECT_TRUE(passes(p.w));
}

TEST(WheelCheckTest, DetectsANullNextLink) {
    Populated p;
    WheelLink& a = A::links(p.lv1a);
    WheelLink* const saved = a.next;
    a.next = nullptr;
    const Wheel::CheckResult r = p.w.check();
    ASSERT_TRUE(fails_with(p.w, Fault::kList, List::kSlot));
    EXPECT_EQ(r.node, &p.lv1a);
    EXPECT_EQ(r.found, 0u);
    a.next = saved;
    EXPECT_TRUE(passes(p.w));
}

TEST(WheelCheckTest, DetectsALinkIntoAnotherListOfTheWheel) {
    Populated p;
    WheelLink& a = A::links(p.lv1a);
    WheelLink* const saved = a.next;
    a.next = &A::overflow_head(p.w);
    ASSERT_TRUE(fails_with(p.w, Fault::kList, List::kSlot));
    a.next = &A::slot_head(p.w, 5, 5);
    ASSERT_TRUE(fails_with(p.w, Fault::kList, List::kSlot));
    a.next = saved;
    EXPECT_TRUE(passes(p.w));
}

TEST(WheelCheckTest, DetectsACycleThatMissesTheHeadWithoutLooping) {
    Populated p;
    WheelLink& b = A::links(p.lv1b);
    WheelLink* const saved = b.next;
    b.next = &A::links(p.lv1a);  // lv1a -> lv1b -> lv1a -> ...
    ASSERT_TRUE(fails_with(p.w, Fault::kList, List::kSlot));
    b.next = &b;  // a self-loop
    ASSERT_TRUE(fails_with(p.w, Fault::kList, List::kSlot));
    b.next = saved;
    EXPECT_TRUE(passes(p.w));
}

TEST(WheelCheckTest, DetectsABrokenListHead) {
    Populated p;
    WheelLink& head = A::expired_head(p.w);
    WheelLink* const saved = head.prev;
    head.prev = &head;  // the head's prev is not the last node
    ASSERT_TRUE(fails_with(p.w, Fault::kList, List::kExpired));
    head.prev = saved;
    WheelLink& empty = A::slot_head(p.w, 6, 0);
    empty.next = nullptr;
    const Wheel::CheckResult r = p.w.check();
    ASSERT_TRUE(fails_with(p.w, Fault::kList, List::kSlot));
    EXPECT_EQ(r.node, nullptr) << "the head itself";
    EXPECT_EQ(r.level, 6u);
    EXPECT_EQ(r.slot, 0u);
    empty.next = &empty;
    EXPECT_TRUE(passes(p.w));
}

// A node spliced out of its list by link surgery leaves consistent lists,
// but the wheel counts a node it no longer holds.
TEST(WheelCheckTest, DetectsANodeLostFromItsListBySize) {
    Populated p;
    WheelLink& b = A::links(p.lv1b);
    WheelLink* const prev = b.prev;
    WheelLink* const next = b.next;
    prev->next = next;
    next->prev = prev;
    const Wheel::CheckResult r = p.w.check();
    ASSERT_TRUE(fails_with(p.w, Fault::kSize, List::kNone));
    EXPECT_EQ(r.found, 8u);
    EXPECT_EQ(r.expected, 7u);
    prev->next = &b;
    next->prev = &b;
    EXPECT_TRUE(passes(p.w));
}

TEST(WheelCheckTest, DetectsAWrongSize) {
    Populated p;
    for (std::size_t wrong : {std::size_t{7}, std::size_t{9}, std::size_t{0}, ~std::size_t{0}}) {
        A::size(p.w) = wrong;
        const Wheel::CheckResult r = p.w.check();
        ASSERT_TRUE(fails_with(p.w, Fault::kSize, List::kNone)) << wrong;
        EXPECT_EQ(r.found, wrong);
        EXPECT_EQ(r.expected, 8u);
    }
    A::size(p.w) = 8;
    EXPECT_TRUE(passes(p.w));
    Wheel empty(77);
    A::size(empty) = 1;
    EXPECT_TRUE(fails_with(empty, Fault::kSize, List::kNone));
    A::size(empty) = 0;
    EXPECT_TRUE(passes(empty));
}

TEST(WheelCheckTest, DetectsAnOverflowHintThatIsNotALowerBoundAfterNow) {
    Populated p;
    const tick_t saved = A::hint(p.w);
    ASSERT_EQ(saved, kRange * 3);
    // Valid: any multiple of 2^48 in (now, earliest overflow epoch].
    A::hint(p.w) = kRange;
    EXPECT_TRUE(passes(p.w));
    // Invalid: above the earliest epoch (next_expiry() would be late), not
    // a multiple, at or before now (a driver would compute a negative sleep),
    // kNever with timers on the list.
    for (tick_t wrong : {kRange * 4, kRange * 3 + 1, tick_t{0}, Populated::kStart, kNever}) {
        A::hint(p.w) = wrong;
        const Wheel::CheckResult r = p.w.check();
        ASSERT_TRUE(fails_with(p.w, Fault::kOverflowHint, List::kOverflow)) << hex(wrong);
        EXPECT_EQ(r.found, wrong);
        EXPECT_EQ(r.expected, kRange * 3);
    }
    A::hint(p.w) = saved;
    EXPECT_TRUE(passes(p.w));
    // An empty overflow list has no hint (the defect behind the former
    // NextExpiryIsNeverBeforeNow failure was a hint left behind).
    Wheel w;
    A::hint(w) = kRange;
    EXPECT_TRUE(fails_with(w, Fault::kOverflowHint, List::kOverflow));
    A::hint(w) = kNever;
    EXPECT_TRUE(passes(w));
}

TEST(WheelCheckTest, PrintsTheViolatedInvariantAndWhere) {
    Populated p;
    A::occupied(p.w, 2) |= std::uint64_t{1} << 63;
    std::ostringstream os;
    os << p.w.check();
    A::occupied(p.w, 2) &= ~(std::uint64_t{1} << 63);
    const std::string s = os.str();
    std::cout << "[ message ] " << s << '\n';
    EXPECT_NE(s.find("occupancy bit"), std::string::npos) << s;
    EXPECT_NE(s.find("slot 63 of level 2"), std::string::npos) << s;
    EXPECT_NE(s.find("found 0x1, expected 0"), std::string::npos) << s;
    EXPECT_NE(s.find("now " + hex(Populated::kStart)), std::string::npos) << s;
    // Every fault has its own sentence.
    for (int f = 1; f <= static_cast<int>(Fault::kEarliestDeadline); ++f) {
        Wheel::CheckResult r;
        r.fault = static_cast<Fault>(f);
        EXPECT_STRNE(r.what(), "ok");
        EXPECT_STRNE(r.what(), "unknown fault");
    }
}

}  // namespace
