// SPDX-License-Identifier: MIT OR Apache-2.0
/// @file
/// tickwheel/wheel.hpp -- the single-shard hierarchical timing wheel.
///
/// This is the data structure each shard of tickwheel::Runtime owns. It is
/// public because it is useful on its own (a single-threaded event loop can
/// embed it, and bench/ measures it directly), but it is NOT thread-safe: one
/// thread at a time may call any member function of a given Wheel.
///
/// ---------------------------------------------------------------------------
/// Design
/// ---------------------------------------------------------------------------
/// Time is an unsigned 64-bit count of ticks. The wheel never reads a clock:
/// the caller says what "now" is with advance(), so tests run on a virtual
/// clock and the runtime decides what a tick is (1 us to 1 s).
///
/// Levels. There are kLevels = 8 levels of kSlots = 64 slots. A slot of level
/// L spans 64^L ticks, so level 0 resolves single ticks and level 7 slots span
/// 2^42 ticks; together the levels cover deadlines up to 2^48 ticks ahead of
/// "now" (89 years at 1 us per tick). A timer is filed at the level of the
/// highest bit in which its deadline differs from now (deadline XOR now), in
/// the slot given by the deadline's 6-bit digit at that level. Why 64: one
/// 64-bit occupancy word per level, so "first non-empty slot" is one
/// count-trailing-zeros instruction. Each slot is kWays = 4 lists, filled in
/// turn (so 8 levels x 64 slots x 4 x 16 bytes of list head is 32 KiB per
/// wheel): cascading a slot walks its lists from both ends at once, eight
/// independent chains of loads whose cache misses overlap, where one list
/// walked from its head serialised them (see Cascading).
///
/// Bitmaps. Each level keeps a 64-bit word with bit s set iff slot s holds a
/// timer. The wheel maintains this invariant: every occupied slot of level L
/// has a digit strictly greater than now's digit at level L, and every timer
/// of level L shares all digits above L with now. Hence all level-L timers
/// are due before any level-(L+1) timer, the next event is the first set bit
/// of the lowest non-empty level, and finding it costs at most kLevels loads
/// plus one ctz -- never a scan of empty slots.
///
/// Cascading. When advance() reaches the start of a level-L slot, that slot's
/// timers are re-filed relative to the new now: they land on lower levels
/// (or expire if their deadline has come). A timer is therefore re-filed at
/// most kLevels times in its life (amortised O(levels)), and a far timer is
/// exactly as precise as a near one: it expires at the first advance() at or
/// after its deadline, never earlier and never a slot later. (Linux's wheel
/// gives up this precision to avoid cascading; we do not.) The price is a
/// burst: a high slot holds every timer due in its span (at 100,000 timers/s
/// and 100 us ticks a level-2 slot holds ~40,000), re-filed in one advance(),
/// at about one cache miss per node. Walking them as eight chains (four
/// lists, each from both ends) makes that ~4x shorter than one chain did.
///
/// Beyond the top level. A deadline in a later 2^48-tick epoch than now (the
/// levels hold only deadlines that share now's bits above 2^48; so every
/// deadline 2^48 or more ticks ahead, and near an epoch boundary also nearer
/// ones) is held on an overflow list and re-filed when now enters its epoch.
/// It is never rejected and never fires early. A lower bound of the earliest
/// epoch on the list is kept, so the list is scanned only when an epoch that
/// may hold a deadline begins (at 1 us per tick an epoch is 89 years, so this
/// list is empty in practice).
///
/// Idle gaps. advance() jumps straight from one non-empty slot to the next, so
/// advancing over an hour of 1 us ticks costs time proportional to the
/// non-empty slots visited, not to the 3.6e9 ticks elapsed.
///
/// Costs: insert O(1); remove O(1) (intrusive doubly linked slot lists, no
/// search); rearm O(1); next_expiry O(kLevels); advance O(slots visited +
/// timers moved), each timer moved at most kLevels + 1 times.
// ---------------------------------------------------------------------------
#pragma once

// C++20 or nothing: below it (or from C) this header stops with this one
// error instead of a wall of them (the rest of the file is skipped; the
// #endif is the file's last line). ctest cxx20_header_guard checks it.
#if !defined(__cplusplus) || __cplusplus < 202002L
#error "tickwheel/wheel.hpp is part of tickwheel's C++ API and needs C++20: compile with -std=c++20 (or later); from C or older C++ use the C API, <tickwheel/tickwheel.h>"
#else

#include <cstddef>
#include <cstdint>
#include <iosfwd>

/// The tickwheel C++ API: tickwheel::Runtime (runtime.hpp), tickwheel::Timer
/// (timer.hpp) and the single-threaded tickwheel::Wheel (wheel.hpp).
namespace tickwheel {

/// Ticks: the wheel's unit of time. What a tick is worth is up to the caller.
using tick_t = std::uint64_t;

class Wheel;
struct WheelTestAccess;  // tests only: corrupts internals to test Wheel::check()

/// The doubly linked list link shared by nodes and the wheel's list heads
/// (circular lists with a sentinel head, as in Linux's list_head).
struct WheelLink {
    /// The next link (the list head after the last node); null while unlinked.
    WheelLink* next = nullptr;
    /// The previous link (the list head before the first node); null while unlinked.
    WheelLink* prev = nullptr;
};

/// The intrusive part of a timer. Embed it (as a base or a member) in your
/// own timer object; the wheel links nodes, it never allocates or frees them.
/// A node must not be moved, copied or destroyed while it is in a wheel.
/// sizeof(WheelNode) == 32 on 64-bit targets.
class WheelNode : private WheelLink {
public:
    WheelNode() noexcept = default;
    WheelNode(const WheelNode&) = delete;
    WheelNode& operator=(const WheelNode&) = delete;

    /// True while the node is filed in a wheel (pending or expired-but-not-
    /// yet-popped).
    bool linked() const noexcept { return loc_ != kUnlinked; }
    /// The deadline (in ticks) the node was last inserted with.
    tick_t deadline() const noexcept { return deadline_; }

private:
    friend class Wheel;
    friend struct WheelTestAccess;
    static constexpr std::uint16_t kUnlinked = 0xFFFF;

    tick_t deadline_ = 0;
    std::uint16_t loc_ = kUnlinked;  // level * 64 + slot, or a special list
public:
    /// Spare bytes of the node's padding, free for the embedding object to
    /// use (the wheel never reads or writes them).
    std::uint16_t user16 = 0;
    /// More spare bytes of the padding, as user16.
    std::uint32_t user32 = 0;
};

/// A hierarchical timing wheel over tick_t time. Not thread-safe; see the
/// design notes at the top of this file.
class Wheel {
public:
    /// Bits of the deadline per level: a level's slot is a 6-bit digit.
    static constexpr unsigned kSlotBits = 6;
    /// Slots per level (64): one 64-bit occupancy word per level.
    static constexpr unsigned kSlots = 1u << kSlotBits;  // 64
    /// Number of levels; a level-L slot spans 64^L ticks.
    static constexpr unsigned kLevels = 8;
    /// Lists per slot (filled in turn; see the design notes).
    static constexpr unsigned kWays = 4;
    /// Deadlines at most this far ahead of now() are filed on the levels;
    /// further ones wait on the overflow list (still exact).
    static constexpr tick_t kLevelRange = tick_t{1} << (kSlotBits * kLevels);  // 2^48
    /// Returned by next_expiry() when the wheel is empty.
    static constexpr tick_t kNever = ~tick_t{0};

    /// A wheel whose clock starts at `now`.
    explicit Wheel(tick_t now = 0) noexcept;
    Wheel(const Wheel&) = delete;
    Wheel& operator=(const Wheel&) = delete;
    /// Unlinks nothing: destroying a wheel leaves its nodes' links dangling.
    /// Drain it first (remove or pop every node) if the nodes outlive it.
    ~Wheel() = default;

    /// The wheel's current time: the largest value ever passed to advance()
    /// (or the constructor's).
    tick_t now() const noexcept { return now_; }
    /// Number of nodes in the wheel, including expired ones not yet popped.
    std::size_t size() const noexcept { return size_; }
    /// True if size() == 0.
    bool empty() const noexcept { return size_ == 0; }

    /// Files `node` to expire at `deadline`. A deadline at or before now()
    /// (including 0) makes the node expired at once: the next pop_expired()
    /// returns it. Precondition: !node->linked(). O(1).
    void insert(WheelNode* node, tick_t deadline) noexcept;

    /// Takes `node` out of the wheel, wherever it is (pending or expired).
    /// Returns false, and does nothing, if the node was not linked. O(1).
    bool remove(WheelNode* node) noexcept;

    /// Moves a node to a new deadline (earlier or later); a node that was not
    /// linked is inserted. O(1).
    void rearm(WheelNode* node, tick_t deadline) noexcept {
        remove(node);
        insert(node, deadline);
    }

    /// Moves the clock to `t` and moves every node whose deadline is <= t to
    /// the expired list. A `t` below now() is treated as now() (time never
    /// goes back). Returns how many nodes became expired in this call.
    /// Cost: O(non-empty slots whose start is <= t, plus nodes re-filed).
    std::size_t advance(tick_t t) noexcept;
    /// advance(t) without the count: a level-0 slot that comes due -- every
    /// node in it is due, its deadline is the slot's start -- is moved to
    /// the expired lists whole (its kWays lists spliced on, O(kWays)),
    /// instead of node by node (a cache miss each, in a burst of many due
    /// together: the runtime's driver pops them next anyway). Until popped
    /// or removed, such a node keeps the location of its level-0 slot (see
    /// check()); remove(), rearm() and the pops treat it as expired.
    /// Cost: O(non-empty slots whose start is <= t, plus nodes re-filed from
    /// the levels above 0).
    void advance_uncounted(tick_t t) noexcept;

    /// Pops one expired node (in no particular order), unlinked, or nullptr
    /// if there is none. O(1). Inserting with a deadline <= now() while
    /// popping is allowed; the node is returned by a later pop.
    WheelNode* pop_expired() noexcept;
    /// Pops up to `max` expired nodes into `out` (unlinked, in no particular
    /// order) and returns how many. The expired nodes are kept in kWays
    /// lists (filled in turn, like a slot's); this takes them from both ends
    /// of every list at once, round by round, so that up to 2 * kWays cache
    /// misses overlap: a burst of many expired nodes, each on a cold line,
    /// is popped several times faster than one pop_expired() after the
    /// other. O(returned nodes + kWays).
    std::size_t pop_expired_n(WheelNode** out, std::size_t max) noexcept;
    /// True if pop_expired() would return a node. O(1).
    bool has_expired() const noexcept;

    /// The tick by which advance() must next be called: now() if expired
    /// nodes are waiting; otherwise a lower bound of the earliest pending
    /// deadline -- the start of the earliest non-empty slot, which equals the
    /// earliest deadline when that slot is on level 0; kNever if the wheel is
    /// empty. Sleeping until this tick and then calling advance() is exactly
    /// what a tickless driver does: a slot on a higher level costs one extra
    /// wake-up (to cascade) per level, never a missed or early expiry.
    /// O(kLevels).
    tick_t next_expiry() const noexcept;

    /// The exact earliest deadline among pending (not yet expired) nodes, or
    /// kNever. Scans one slot: O(nodes in the earliest non-empty slot), or
    /// O(overflow list) when only the overflow list is non-empty. Meant for
    /// tests and diagnostics.
    tick_t earliest_deadline() const noexcept;

    /// What check() found: every invariant holds (`ok()`, and the result
    /// converts to true), or the first violation in check()'s scan order.
    struct CheckResult {
        /// The violated invariant.
        enum class Fault : std::uint8_t {
            /// none: every invariant holds
            kNone = 0,
            kList,             ///< a list link: next is null or another list's head, or next->prev != self
            kLocation,         ///< a node's location field does not name the list it is on
            kBitmap,           ///< an occupancy bit disagrees with its slot's emptiness
            kSlotDue,          ///< a node on a level has a deadline <= now()
            kSlotLevel,        ///< a node's level is not the XOR rule's (top differing digit of deadline ^ now)
            kSlotDigit,        ///< a node's deadline digit at its level is not its slot
            kExpiredNotDue,    ///< a node on the expired list has a deadline > now()
            kOverflowNotFar,   ///< an overflow node's deadline is <= now() or in now()'s 2^48-epoch
            kOverflowHint,     ///< the overflow epoch hint is not a lower bound in (now(), earliest epoch]
            kSize,             ///< size() != the number of nodes found
            kNextExpiry,       ///< next_expiry() disagrees with the scan
            kEarliestDeadline  ///< earliest_deadline() disagrees with the scan
        };
        /// Where a fault was found.
        enum class List : std::uint8_t { kNone = 0, kSlot, kExpired, kOverflow };
        /// @var List::kNone
        /// no list: no fault, or one not tied to a list (kSize, kNextExpiry, ...)
        /// @var List::kSlot
        /// a slot of a level: see level and slot
        /// @var List::kExpired
        /// the expired list
        /// @var List::kOverflow
        /// the overflow list (deadlines beyond the top level)

        /// The violated invariant, or Fault::kNone.
        Fault fault = Fault::kNone;
        /// The list the fault was found on.
        List list = List::kNone;
        /// The slot's level, when list == kSlot.
        unsigned level = 0, slot = 0;  ///< the slot (its index in the level), when list == kSlot
        const WheelNode* node = nullptr;  ///< the offending node (kList: the last good one; null: the head)
        /// The wheel's value (a location, bit, level, slot, deadline, count,
        /// tick or, for kList, the address the bad link leads to); compare
        /// with `expected`.
        tick_t found = 0;
        /// What the scan computed for `found`, or the bound it violates (now()
        /// for kSlotDue, kExpiredNotDue and kOverflowNotFar).
        tick_t expected = 0;
        tick_t now = 0;  ///< the wheel's now() at the check

        /// True iff fault == Fault::kNone.
        bool ok() const noexcept { return fault == Fault::kNone; }
        /// ok().
        explicit operator bool() const noexcept { return ok(); }
        /// One sentence naming the violated invariant ("ok" if none); static.
        const char* what() const noexcept;
    };

    /// Verifies, by a slow scan of every slot and list, every invariant the
    /// design notes above state, and returns the first violation found:
    ///  - every list (the 512 slots, the expired and the overflow list) is
    ///    circular with consistent links (next->prev == self, no null link,
    ///    no link into another of the wheel's lists);
    ///  - every node's location field names the list it is on;
    ///  - bit s of level L's occupancy word is set iff slot (L, s) is non-empty;
    ///  - a node in slot (L, s) has deadline > now(), L is the level of the
    ///    highest bit of deadline ^ now() (so it shares every digit above L
    ///    with now() and its digit at L is greater than now()'s), and its
    ///    digit at L is s;
    ///  - an expired node has deadline <= now(), and its location is the
    ///    expired list's or, moved with its due level-0 slot by
    ///    advance_uncounted(), that slot's (the slot of its deadline's
    ///    lowest digit); an overflow node has
    ///    deadline > now() in a later 2^48-epoch than now();
    ///  - the overflow epoch hint is kNever when the overflow list is empty,
    ///    else a multiple of 2^48 in (now(), earliest overflow epoch];
    ///  - size() equals the number of nodes found;
    ///  - next_expiry() is now() if a node is expired, else the start of the
    ///    slot of the earliest deadline on the levels, else (overflow only) a
    ///    tick in (now(), earliest overflow epoch], else kNever; and
    ///    earliest_deadline() is the earliest pending deadline.
    /// For tests, fuzzers and debugging: the same one-thread-at-a-time rule
    /// as every other member; O(nodes + kLevels * kSlots); touches no state
    /// and allocates nothing. Nodes are assumed to be readable memory: a
    /// corrupt link is reported if it is null or points into the wheel, or
    /// if the node it reaches does not point back.
    CheckResult check() const noexcept;

private:
    friend struct WheelTestAccess;

    // The special values of WheelNode::loc_ besides level*64+slot.
    static constexpr std::uint16_t kExpiredList = 0xFFFE;
    static constexpr std::uint16_t kOverflowList = 0xFFFD;

    using ListHead = WheelLink;

    static WheelLink* link(WheelNode* n) noexcept { return static_cast<WheelLink*>(n); }
    static WheelNode* node(WheelLink* l) noexcept { return static_cast<WheelNode*>(l); }
    static void list_init(ListHead* h) noexcept { h->next = h->prev = h; }
    static bool list_empty(const ListHead* h) noexcept { return h->next == h; }
    static void list_push(ListHead* h, WheelNode* n) noexcept;
    static void list_unlink(WheelNode* n) noexcept;

    void file(WheelNode* node) noexcept;  // place node by its deadline_ relative to now_
    std::size_t refile_list(ListHead* list) noexcept;
    std::size_t refile_slot(unsigned level, unsigned slot) noexcept;
    std::size_t advance_impl(tick_t t, bool count) noexcept;
    bool slot_empty(unsigned level, unsigned slot) const noexcept;
    tick_t overflow_min_epoch() noexcept;

    tick_t now_;
    std::size_t size_ = 0;
    std::uint64_t occupied_[kLevels] = {};
    // Lower bound of the earliest epoch (deadline >> 48 << 48) on the
    // overflow list, kNever while the list is empty; refreshed exactly when
    // the overflow list is processed.
    tick_t overflow_epoch_hint_ = kNever;
    unsigned next_way_ = 0;  // the list of its slot the next filed node goes to
    alignas(64) ListHead slots_[kLevels][kSlots][kWays];  // a slot's lists share a cache line
    unsigned next_expired_way_ = 0;  // the expired list the next expired node goes to
    ListHead expired_[kWays];
    ListHead overflow_;
};

/// Prints a check() result: "ok", or the violated invariant and where.
std::ostream& operator<<(std::ostream& os, const Wheel::CheckResult& r);

// ---------------------------------------------------------------------------
// Inline hot paths.
// ---------------------------------------------------------------------------
inline void Wheel::list_push(ListHead* h, WheelNode* n) noexcept {
    WheelLink* l = link(n);
    l->next = h;
    l->prev = h->prev;
    h->prev->next = l;
    h->prev = l;
}

inline void Wheel::list_unlink(WheelNode* n) noexcept {
    WheelLink* l = link(n);
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->next = l->prev = nullptr;
}

inline void Wheel::file(WheelNode* node) noexcept {
    const tick_t d = node->deadline_;
    if (d <= now_) {
        node->loc_ = kExpiredList;
        list_push(&expired_[next_expired_way_++ & (kWays - 1)], node);
        return;
    }
    const tick_t diff = d ^ now_;
    if (diff >= kLevelRange) {
        node->loc_ = kOverflowList;
        list_push(&overflow_, node);
        const tick_t epoch = d & ~(kLevelRange - 1);
        if (epoch < overflow_epoch_hint_) overflow_epoch_hint_ = epoch;
        return;
    }
    const unsigned level = (63u - static_cast<unsigned>(__builtin_clzll(diff))) / kSlotBits;
    const unsigned slot = static_cast<unsigned>(d >> (level * kSlotBits)) & (kSlots - 1);
    node->loc_ = static_cast<std::uint16_t>(level * kSlots + slot);
    list_push(&slots_[level][slot][next_way_++ & (kWays - 1)], node);
    occupied_[level] |= std::uint64_t{1} << slot;
}

inline bool Wheel::slot_empty(unsigned level, unsigned slot) const noexcept {
    for (const ListHead& h : slots_[level][slot])
        if (!list_empty(&h)) return false;
    return true;
}

inline void Wheel::insert(WheelNode* node, tick_t deadline) noexcept {
    node->deadline_ = deadline;
    file(node);
    ++size_;
}

inline bool Wheel::remove(WheelNode* node) noexcept {
    const std::uint16_t loc = node->loc_;
    if (loc == WheelNode::kUnlinked) return false;
    if (loc < kLevels * kSlots) {
        const unsigned level = loc / kSlots, slot = loc % kSlots;
        // Alone in its list? Then the slot may empty: if its other lists are.
        const bool alone = link(node)->next == link(node)->prev;
        list_unlink(node);
        if (alone && slot_empty(level, slot)) occupied_[level] &= ~(std::uint64_t{1} << slot);
    } else {
        list_unlink(node);
    }
    if (loc == kOverflowList && list_empty(&overflow_)) overflow_epoch_hint_ = kNever;
    node->loc_ = WheelNode::kUnlinked;
    --size_;
    return true;
}

inline bool Wheel::has_expired() const noexcept {
    for (const ListHead& h : expired_)
        if (!list_empty(&h)) return true;
    return false;
}

inline WheelNode* Wheel::pop_expired() noexcept {
    ListHead* h = expired_;
    while (list_empty(h))
        if (++h == expired_ + kWays) return nullptr;
    WheelNode* n = node(h->next);
    list_unlink(n);
    n->loc_ = WheelNode::kUnlinked;
    --size_;
    return n;
}

inline std::size_t Wheel::pop_expired_n(WheelNode** out, std::size_t max) noexcept {
    // Each expired list is walked from both ends at once, all lists round by
    // round: the nodes' addresses come from the ends (the list heads, then
    // the links just read), so up to 2 * kWays misses are in flight. A taken
    // node's neighbour is not written (a store to a cold line would hold a
    // store-buffer entry for the whole miss): the lists' remaining ends are
    // re-attached to their heads once, at the end.
    struct Ends {
        WheelLink* front;
        WheelLink* back;
        bool live;
    };
    Ends e[kWays];
    unsigned live = 0;
    for (unsigned k = 0; k < kWays; ++k) {
        ListHead& h = expired_[k];
        e[k] = Ends{h.next, h.prev, !list_empty(&h)};
        live += e[k].live;
    }
    std::size_t n = 0;
    const auto take = [&](WheelLink* l) noexcept {
        l->next = l->prev = nullptr;
        node(l)->loc_ = WheelNode::kUnlinked;
        out[n++] = node(l);
        --size_;
    };
    while (live != 0 && n < max) {
        for (unsigned k = 0; k < kWays && n < max; ++k) {
            Ends& x = e[k];
            if (!x.live) continue;
            WheelLink* const f = x.front;
            WheelLink* const b = x.back;
            WheelLink* const after_front = f->next;  // read both links before either node is taken
            WheelLink* const before_back = b->prev;
            take(f);
            if (f == b || after_front == b) {  // the ends met: b is the last node (or f was)
                if (f != b) {
                    if (n == max) {  // only b is left
                        x.front = b;
                        continue;
                    }
                    take(b);
                }
                x.live = false;
                --live;
                list_init(&expired_[k]);
                continue;
            }
            if (n == max) {
                x.front = after_front;
                continue;
            }
            take(b);
            x.front = after_front;
            x.back = before_back;
        }
    }
    for (unsigned k = 0; k < kWays; ++k) {
        if (!e[k].live) continue;
        ListHead& h = expired_[k];
        h.next = e[k].front;
        e[k].front->prev = &h;
        h.prev = e[k].back;
        e[k].back->next = &h;
    }
    return n;
}

}  // namespace tickwheel

#endif  // C++20 (the check after #pragma once)
