// The hierarchical timing wheel: clock movement (advance), cascading and the
// next-expiry query. The O(1) insert/remove paths are inline in the header;
// the design and its invariants are explained at the top of wheel.hpp.
#include "tickwheel/wheel.hpp"

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

}  // namespace

Wheel::Wheel(tick_t now) noexcept : now_(now) {
    for (auto& level : slots_)
        for (auto& head : level) list_init(&head);
    list_init(&expired_);
    list_init(&overflow_);
}

// Re-files every node of `list` relative to now_ (they land on lower levels,
// on the expired list, or back on the overflow list). The list is detached
// first so re-filing into the same head is safe. Returns how many expired.
std::size_t Wheel::refile_list(ListHead* list) noexcept {
    std::size_t expired = 0;
    if (list_empty(list)) return 0;
    WheelLink* first = list->next;
    WheelLink* last = list->prev;
    list_init(list);
    last->next = nullptr;
    for (WheelLink* l = first; l != nullptr;) {
        WheelLink* next = l->next;
        file(node(l));
        expired += node(l)->loc_ == kExpiredList;
        l = next;
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

std::size_t Wheel::advance(tick_t t) noexcept {
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
            ListHead* head = &slots_[level][slot];
            expired += refile_list(head);
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
    if (!list_empty(&expired_)) return now_;
    for (unsigned level = 0; level < kLevels; ++level) {
        if (occupied_[level] != 0)
            return slot_start(now_, level, static_cast<unsigned>(__builtin_ctzll(occupied_[level])));
    }
    if (!list_empty(&overflow_)) return overflow_epoch_hint_;
    return kNever;
}

tick_t Wheel::earliest_deadline() const noexcept {
    tick_t best = kNever;
    const ListHead* list = nullptr;
    for (unsigned level = 0; level < kLevels && list == nullptr; ++level) {
        if (occupied_[level] != 0)
            list = &slots_[level][static_cast<unsigned>(__builtin_ctzll(occupied_[level]))];
    }
    if (list == nullptr) list = &overflow_;
    for (const WheelLink* l = list->next; l != list; l = l->next) {
        const tick_t d = static_cast<const WheelNode*>(l)->deadline_;
        if (d < best) best = d;
    }
    return best;
}

}  // namespace tickwheel
