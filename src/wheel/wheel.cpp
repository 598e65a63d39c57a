// SPDX-License-Identifier: MIT OR Apache-2.0
// The hierarchical timing wheel: clock movement (advance), cascading and the
// next-expiry query. The O(1) insert/remove paths are inline in the header;
// the design and its invariants are explained at the top of wheel.hpp.
#include "tickwheel/wheel.hpp"

#include <cstdint>
#include <ostream>

namespace tickwheel {

namespace {

constexpr unsigned kBits = Wheel::kSlotBits;

// The first tick of `slot` on `level`, given that `now` lies in the same
// level-(level+1) block (the wheel's invariant for occupied slots).
constexpr tick_t slot_start(tick_t now, unsigned level, unsigned slot) noexcept {
    const unsigned shift = level * kBits;
    const tick_t block_mask = ~((tick_t{1} << (shift + kBits)) - 1);  // digits above `level`
    return (now & block_mask) | (tick_t{slot} << shift);
}

// The level the XOR rule files a pending deadline on: the digit of the
// highest bit in which it differs from now (diff = deadline ^ now != 0);
// kLevels if that bit is beyond the levels (the overflow list).
constexpr unsigned xor_level(tick_t diff) noexcept {
    if (diff >= Wheel::kLevelRange) return Wheel::kLevels;
    return (63u - static_cast<unsigned>(__builtin_clzll(diff))) / kBits;
}

}  // namespace

Wheel::Wheel(tick_t now) noexcept : now_(now) {
    for (auto& level : slots_)
        for (auto& slot : level)
            for (auto& head : slot) list_init(&head);
    for (ListHead& h : expired_) list_init(&h);
    list_init(&overflow_);
}

// Re-files every node of `list` relative to now_ (they land on lower levels,
// on the expired list, or back on the overflow list). The list is detached
// first so re-filing into the same head is safe. Returns how many expired.
// Walked from both ends at once: two independent chains of loads (see
// refile_slot). The order in which nodes are re-filed does not matter: the
// expired list is unordered.
std::size_t Wheel::refile_list(ListHead* list) noexcept {
    std::size_t expired = 0;
    if (list_empty(list)) return 0;
    WheelLink* front = list->next;
    WheelLink* back = list->prev;
    list_init(list);
    for (;;) {
        if (front == back) {  // the middle node of an odd count
            file(node(front));
            expired += node(front)->loc_ == kExpiredList;
            break;
        }
        WheelLink* const after_front = front->next;  // read both links before either node moves
        WheelLink* const before_back = back->prev;
        file(node(front));
        file(node(back));
        expired += (node(front)->loc_ == kExpiredList) + (node(back)->loc_ == kExpiredList);
        if (after_front == back) break;  // the two ends met
        front = after_front;
        back = before_back;
    }
    return expired;
}

// Re-files every node of slot (level, slot), as refile_list. A high slot can
// hold tens of thousands of nodes, and each costs about one cache miss; one
// list walked from its head serialises them (each node's address is in the
// one before), which made a level-2 cascade at 100,000 timers/s and 100 us
// ticks take ~7 ms, during which every timer coming due waited. So the
// slot's kWays lists are walked from both ends at once, round by round: each
// round first loads the next links of all (up to eight) chains, whose misses
// overlap, then re-files the nodes they came from.
std::size_t Wheel::refile_slot(unsigned level, unsigned slot) noexcept {
    struct Chain {
        WheelLink* front;
        WheelLink* back;
    };
    Chain chains[kWays];
    unsigned n = 0;
    for (ListHead& head : slots_[level][slot]) {
        if (list_empty(&head)) continue;
        chains[n++] = Chain{head.next, head.prev};
        list_init(&head);
    }
    std::size_t expired = 0;
    const auto refile = [&](WheelLink* l) noexcept {
        file(node(l));
        expired += node(l)->loc_ == kExpiredList;
    };
    while (n != 0) {
        Chain next[kWays];
        for (unsigned i = 0; i < n; ++i) next[i] = Chain{chains[i].front->next, chains[i].back->prev};
        unsigned left = 0;
        for (unsigned i = 0; i < n; ++i) {
            const Chain c = chains[i];
            refile(c.front);
            if (c.front == c.back) continue;  // the middle node of an odd count
            refile(c.back);
            if (next[i].front == c.back) continue;  // the two ends met
            chains[left++] = next[i];
        }
        n = left;
    }
    return expired;
}

// The exact earliest epoch (a multiple of kLevelRange) holding an overflow
// deadline. Scans the overflow list; called only when the levels are empty.
tick_t Wheel::overflow_min_epoch() noexcept {
    tick_t best = kNever;
    for (WheelLink* l = overflow_.next; l != &overflow_; l = l->next) {
        const tick_t epoch = node(l)->deadline_ & ~(kLevelRange - 1);
        if (epoch < best) best = epoch;
    }
    overflow_epoch_hint_ = best;
    return best;
}

std::size_t Wheel::advance(tick_t t) noexcept { return advance_impl(t, true); }

void Wheel::advance_uncounted(tick_t t) noexcept { (void)advance_impl(t, false); }

std::size_t Wheel::advance_impl(tick_t t, bool count) noexcept {
    std::size_t expired = 0;
    if (t < now_) t = now_;
    for (;;) {
        unsigned level = 0;
        while (level < kLevels && occupied_[level] == 0) ++level;
        if (level < kLevels) {
            const unsigned slot = static_cast<unsigned>(__builtin_ctzll(occupied_[level]));
            const tick_t start = slot_start(now_, level, slot);
            if (start > t) break;
            now_ = start;
            occupied_[level] &= ~(std::uint64_t{1} << slot);
            if (level == 0 && !count) {
                // Every node here is due at `start`: the slot's lists join
                // the expired ones whole (two links written per list), the
                // nodes keep this slot as their location (remove() and the
                // pops handle it: see advance_uncounted()).
                for (unsigned w = 0; w < kWays; ++w) {
                    ListHead& from = slots_[0][slot][w];
                    if (list_empty(&from)) continue;
                    ListHead& to = expired_[next_expired_way_++ & (kWays - 1)];
                    WheelLink* const first = from.next;
                    WheelLink* const last = from.prev;
                    first->prev = to.prev;
                    to.prev->next = first;
                    last->next = &to;
                    to.prev = last;
                    list_init(&from);
                }
                continue;
            }
            expired += refile_slot(level, slot);
            continue;
        }
        if (list_empty(&overflow_)) {
            overflow_epoch_hint_ = kNever;
            break;
        }
        // The hint is a lower bound of every overflow epoch: only when it is
        // due is the list scanned (at most once per epoch holding deadlines).
        if (overflow_epoch_hint_ > t) break;
        const tick_t epoch = overflow_min_epoch();
        if (epoch > t) break;
        now_ = epoch;
        overflow_epoch_hint_ = kNever;  // file() lowers it again for what stays
        expired += refile_list(&overflow_);
    }
    now_ = t;
    return expired;
}

tick_t Wheel::next_expiry() const noexcept {
    if (has_expired()) return now_;
    for (unsigned level = 0; level < kLevels; ++level) {
        if (occupied_[level] != 0)
            return slot_start(now_, level, static_cast<unsigned>(__builtin_ctzll(occupied_[level])));
    }
    if (!list_empty(&overflow_)) return overflow_epoch_hint_;
    return kNever;
}

tick_t Wheel::earliest_deadline() const noexcept {
    tick_t best = kNever;
    const auto scan = [&best](const ListHead* list) {
        for (const WheelLink* l = list->next; l != list; l = l->next) {
            const tick_t d = static_cast<const WheelNode*>(l)->deadline_;
            if (d < best) best = d;
        }
    };
    for (unsigned level = 0; level < kLevels; ++level) {
        if (occupied_[level] == 0) continue;
        for (const ListHead& head : slots_[level][static_cast<unsigned>(__builtin_ctzll(occupied_[level]))]) scan(&head);
        return best;
    }
    scan(&overflow_);
    return best;
}

// ---------------------------------------------------------------------------
// check(): the invariants of wheel.hpp, verified by a slow scan.
// ---------------------------------------------------------------------------

Wheel::CheckResult Wheel::check() const noexcept {
    using Fault = CheckResult::Fault;
    CheckResult r;
    r.now = now_;
    const auto fail = [&](Fault f, const WheelNode* n, tick_t found, tick_t expected) {
        r.fault = f;
        r.node = n;
        r.found = found;
        r.expected = expected;
        return false;
    };
    // The wheel's own list heads live inside *this; a node never does.
    const auto lo = reinterpret_cast<std::uintptr_t>(this);
    const auto inside_wheel = [lo](const WheelLink* l) {
        const auto a = reinterpret_cast<std::uintptr_t>(l);
        return a >= lo && a - lo < sizeof(Wheel);
    };

    std::size_t count = 0;
    bool any_level = false, any_overflow = false;
    tick_t earliest_level = kNever, earliest_overflow = kNever;

    // Walks one circular list: every link is checked before it is followed
    // (not null, not into another of the wheel's lists, and the node reached
    // points back), so a corrupt list ends the walk instead of looping: the
    // first node met twice would have to point back to two predecessors.
    // Every node's location must be `loc`; then `per_node` checks placement.
    // (An expired node may also carry the location of the level-0 slot it
    // was spliced from, advance_uncounted(): its deadline's lowest digit.)
    const auto loc_ok = [](const WheelNode* n, std::uint16_t loc) {
        return n->loc_ == loc ||
               (loc == kExpiredList && n->loc_ < kSlots && (n->deadline_ & (kSlots - 1)) == n->loc_);
    };
    const auto walk = [&](const ListHead* head, std::uint16_t loc, auto&& per_node) -> bool {
        const WheelLink* prev = head;
        const auto prev_node = [&] { return prev == head ? nullptr : static_cast<const WheelNode*>(prev); };
        for (const WheelLink* l = prev->next;; l = l->next) {
            if (l == nullptr || (l != head && inside_wheel(l)) || l->prev != prev)
                return fail(Fault::kList, prev_node(), reinterpret_cast<std::uintptr_t>(l), 0);
            if (l == head) return true;
            const WheelNode* n = static_cast<const WheelNode*>(l);
            if (!loc_ok(n, loc)) return fail(Fault::kLocation, n, n->loc_, loc);
            ++count;
            if (!per_node(n)) return false;
            prev = l;
        }
    };

    // The levels: every slot, empty or not.
    r.list = CheckResult::List::kSlot;
    for (unsigned level = 0; level < kLevels; ++level) {
        for (unsigned slot = 0; slot < kSlots; ++slot) {
            r.level = level;
            r.slot = slot;
            bool non_empty = false;
            for (const ListHead& head : slots_[level][slot]) {  // each of the slot's lists
                const bool ok = walk(&head, static_cast<std::uint16_t>(level * kSlots + slot), [&](const WheelNode* n) {
                    const tick_t d = n->deadline_;
                    if (d <= now_) return fail(Fault::kSlotDue, n, d, now_);
                    const unsigned want_level = xor_level(d ^ now_);
                    if (want_level != level) return fail(Fault::kSlotLevel, n, level, want_level);
                    const unsigned digit = static_cast<unsigned>(d >> (level * kBits)) & (kSlots - 1);
                    if (digit != slot) return fail(Fault::kSlotDigit, n, slot, digit);
                    if (!any_level || d < earliest_level) earliest_level = d;
                    any_level = true;
                    return true;
                });
                if (!ok) return r;
                non_empty |= head.next != &head;
            }
            const bool bit = (occupied_[level] >> slot) & 1;
            if (bit != non_empty) {
                fail(Fault::kBitmap, nullptr, bit, non_empty);
                return r;
            }
        }
    }
    r.level = r.slot = 0;

    r.list = CheckResult::List::kExpired;
    const std::size_t before_expired = count;
    for (const ListHead& h : expired_)
        if (!walk(&h, kExpiredList, [&](const WheelNode* n) {
                return n->deadline_ <= now_ || fail(Fault::kExpiredNotDue, n, n->deadline_, now_);
            }))
            return r;
    const bool any_expired = count != before_expired;

    r.list = CheckResult::List::kOverflow;
    if (!walk(&overflow_, kOverflowList, [&](const WheelNode* n) {
            const tick_t d = n->deadline_;
            if (d <= now_ || xor_level(d ^ now_) != kLevels) return fail(Fault::kOverflowNotFar, n, d, now_);
            if (!any_overflow || d < earliest_overflow) earliest_overflow = d;
            any_overflow = true;
            return true;
        }))
        return r;
    const tick_t overflow_epoch = any_overflow ? earliest_overflow & ~(kLevelRange - 1) : kNever;
    const tick_t hint = overflow_epoch_hint_;
    if (any_overflow ? (hint % kLevelRange != 0 || hint <= now_ || hint > overflow_epoch) : hint != kNever) {
        fail(Fault::kOverflowHint, nullptr, hint, overflow_epoch);
        return r;
    }

    // Whole-wheel answers against the scan.
    r.list = CheckResult::List::kNone;
    if (size_ != count) {
        fail(Fault::kSize, nullptr, size_, count);
        return r;
    }
    const tick_t ne = next_expiry();
    if (any_expired || any_level || !any_overflow) {
        tick_t want = kNever;
        if (any_expired)
            want = now_;
        else if (any_level)  // the start of the earliest deadline's slot
            want = earliest_level & ~((tick_t{1} << (xor_level(earliest_level ^ now_) * kBits)) - 1);
        if (ne != want) {
            fail(Fault::kNextExpiry, nullptr, ne, want);
            return r;
        }
    } else if (ne <= now_ || ne > overflow_epoch) {  // overflow only: a lower bound after now
        fail(Fault::kNextExpiry, nullptr, ne, overflow_epoch);
        return r;
    }
    const tick_t earliest = any_level ? earliest_level : any_overflow ? earliest_overflow : kNever;
    if (earliest_deadline() != earliest) fail(Fault::kEarliestDeadline, nullptr, earliest_deadline(), earliest);
    return r;
}

const char* Wheel::CheckResult::what() const noexcept {
    switch (fault) {
        case Fault::kNone: return "ok";
        case Fault::kList:
            return "broken list link: after `node` (null: the list head) next is null, points into another of the "
                   "wheel's lists, or reaches a node whose prev does not point back";
        case Fault::kLocation: return "a node's location field does not name the list it is on";
        case Fault::kBitmap: return "an occupancy bit disagrees with its slot (set iff the slot is non-empty)";
        case Fault::kSlotDue: return "a node on a level is due (deadline <= now) but not on the expired list";
        case Fault::kSlotLevel:
            return "a node is not on the level of the highest bit of deadline ^ now (it must share every digit "
                   "above its level with now, and differ at its level)";
        case Fault::kSlotDigit: return "a node's deadline digit at its level is not its slot";
        case Fault::kExpiredNotDue: return "a node on the expired list has a deadline > now";
        case Fault::kOverflowNotFar:
            return "a node on the overflow list has a deadline <= now or in now's 2^48-epoch (it belongs on a level)";
        case Fault::kOverflowHint:
            return "the overflow epoch hint is not kNever for an empty overflow list, or not a multiple of 2^48 in "
                   "(now, earliest overflow epoch]";
        case Fault::kSize: return "size() differs from the number of nodes on the wheel's lists";
        case Fault::kNextExpiry:
            return "next_expiry() is not now (expired nodes), the start of the earliest deadline's slot, a tick in "
                   "(now, earliest overflow epoch] (overflow only) or kNever (empty)";
        case Fault::kEarliestDeadline: return "earliest_deadline() is not the earliest pending deadline";
    }
    return "unknown fault";
}

std::ostream& operator<<(std::ostream& os, const Wheel::CheckResult& r) {
    if (r.ok()) return os << "ok";
    const auto flags = os.flags();
    os << "wheel invariant violated: " << r.what() << " [";
    switch (r.list) {
        case Wheel::CheckResult::List::kSlot: os << "slot " << r.slot << " of level " << r.level << ", "; break;
        case Wheel::CheckResult::List::kExpired: os << "expired list, "; break;
        case Wheel::CheckResult::List::kOverflow: os << "overflow list, "; break;
        case Wheel::CheckResult::List::kNone: break;
    }
    if (r.node != nullptr) os << "node " << static_cast<const void*>(r.node) << ", ";
    os << std::hex << std::showbase << "found " << r.found << ", expected " << r.expected << ", now " << r.now << ']';
    os.flags(flags);
    return os;
}

}  // namespace tickwheel
