// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/group_index.hpp"

#include <algorithm>
#include <new>

#include "runtime/handle_table.hpp"
#include "runtime/test_hooks.hpp"

namespace tickwheel::rt {

namespace {
constexpr std::size_t kMinCompact = 64;      // a list shorter than this is never compacted alone
constexpr std::size_t kMinFullCompact = 4096;  // nor the index while it holds fewer entries
}  // namespace

bool GroupIndex::live(std::uint64_t e) const noexcept {
    const Record* r = table_.find(index_of(e));
    if (r == nullptr || r->gen() != gen_of(e)) return false;  // recycled since
    // FREE under the entry's generation is a start in flight, not an ended
    // timer (a record's generation moves on when it is recycled): a clocked
    // start indexes its timer for clock steps before it publishes it (issue
    // 20, race 7), and a compaction meanwhile must keep that entry, or the
    // timer ignores every clock step (ClockIndex.AStartInFlight...).
    const State s = Ctl::state(TimerState::load(*r));
    return s != State::Cancelled;
}

void GroupIndex::compact(std::vector<std::uint64_t>& v) const noexcept {
    v.erase(std::remove_if(v.begin(), v.end(), [this](std::uint64_t e) { return !live(e); }), v.end());
    // And the duplicates a one-shot that re-armed itself adds (one per new
    // pending episode: see the header).
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
}

void GroupIndex::compact_all() noexcept {
    std::size_t total = 0;
    for (auto it = groups_.begin(); it != groups_.end();) {
        compact(it->second.v);
        it->second.after_compaction = it->second.v.size();
        total += it->second.v.size();
        if (it->second.v.empty() && it->second.claims == nullptr) {
            it = groups_.erase(it);
        } else {
            ++it;
        }
    }
    entries_ = total;
    entries_after_full_ = total;
}

GroupIndex::~GroupIndex() {
    for (Deferred* d = deferred_.load(std::memory_order_relaxed); d != nullptr;) {
        Deferred* next = d->next;
        delete d;
        d = next;
    }
}

void GroupIndex::merge_deferred() noexcept {
    Deferred* d = deferred_.load(std::memory_order_relaxed);
    if (d == nullptr) return;
    d = deferred_.exchange(nullptr, std::memory_order_acquire);
    while (d != nullptr) {
        Deferred* next = d->next;
        try {
            groups_[d->group].v.push_back(d->entry);
            ++entries_;
        } catch (...) {
            // No memory: the timer is left out of its group's index.
        }
        delete d;
        d = next;
    }
    hint_.store(entries_, std::memory_order_relaxed);
}

bool GroupIndex::add_from_worker(std::uint64_t group, std::uint32_t gen, std::uint32_t index) noexcept {
    {
        std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
        if (lock.owns_lock()) {
            merge_deferred();
            try {
                List& l = groups_[group];
                l.v.push_back(entry(gen, index));
                ++entries_;
                hint_.store(entries_, std::memory_order_relaxed);
                return true;
            } catch (...) {
                return false;
            }
        }
    }
    // A caller holds the lock (a group stop, a grouped start): don't wait.
    auto* d = new (std::nothrow) Deferred{group, entry(gen, index), nullptr};
    if (d == nullptr) return false;
    Deferred* head = deferred_.load(std::memory_order_relaxed);
    do {
        d->next = head;
    } while (!deferred_.compare_exchange_weak(head, d, std::memory_order_release, std::memory_order_relaxed));
    return true;
}

void GroupIndex::add(std::uint64_t group, std::uint32_t gen, std::uint32_t index) {
    std::lock_guard<std::mutex> lock(mu_);
    test_hooks::window(nullptr, 'g');  // a caller holding an index's lock
    merge_deferred();
    List& l = groups_[group];
    if (l.v.size() >= std::max(kMinCompact, 2 * l.after_compaction)) {
        const std::size_t before = l.v.size();
        compact(l.v);
        entries_ -= before - l.v.size();
        l.after_compaction = l.v.size();
    }
    l.v.push_back(entry(gen, index));
    ++entries_;
    if (entries_ >= std::max(kMinFullCompact, 2 * entries_after_full_)) compact_all();
    hint_.store(entries_, std::memory_order_relaxed);
}

std::vector<std::uint64_t> GroupIndex::take(std::uint64_t group) {
    std::lock_guard<std::mutex> lock(mu_);
    merge_deferred();
    const auto it = groups_.find(group);
    if (it == groups_.end()) return {};
    std::vector<std::uint64_t> v = std::move(it->second.v);
    groups_.erase(it);
    entries_ -= v.size();
    hint_.store(entries_, std::memory_order_relaxed);
    return v;
}

void GroupIndex::claim(std::uint64_t group, Claim& c) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    test_hooks::window(nullptr, 'G');  // a group stop holding the group index's lock
    merge_deferred();
    const auto it = groups_.find(group);
    if (it == groups_.end()) return;
    List& l = it->second;
    c.mine = std::move(l.v);
    l.v.clear();
    l.after_compaction = 0;
    entries_ -= c.mine.size();
    hint_.store(entries_, std::memory_order_relaxed);
    std::size_t n = 0;
    for (const Claim* o = l.claims; o != nullptr; o = o->next_) n += o->mine.size();
    if (n != 0) {
        try {
            c.others.reserve(n);
            for (const Claim* o = l.claims; o != nullptr; o = o->next_)
                c.others.insert(c.others.end(), o->mine.begin(), o->mine.end());
        } catch (...) {  // std::bad_alloc
            c.others.clear();
            c.others_complete = false;
        }
    }
    if (c.mine.empty() && l.claims == nullptr) {
        groups_.erase(it);  // nothing to show a later claim
        return;
    }
    // Registered even with nothing of its own when others were copied
    // incompletely: wait_earlier() finds its place by its sequence number.
    c.index_ = this;
    c.group_ = group;
    c.seq_ = ++claim_seq_;
    c.next_ = l.claims;
    if (l.claims != nullptr) l.claims->prev_ = &c;
    l.claims = &c;
}

void GroupIndex::Claim::release() noexcept {
    GroupIndex* const gi = index_;
    if (gi == nullptr) return;
    {
        std::lock_guard<std::mutex> lock(gi->mu_);
        const auto it = gi->groups_.find(group_);
        // (The list exists: it is never erased while it has claims.)
        List& l = it->second;
        if (prev_ != nullptr) {
            prev_->next_ = next_;
        } else {
            l.claims = next_;
        }
        if (next_ != nullptr) next_->prev_ = prev_;
        next_ = prev_ = nullptr;
        index_ = nullptr;
        if (l.claims == nullptr && l.v.empty()) gi->groups_.erase(it);
    }
    gi->released_.notify_all();
}

void GroupIndex::Claim::wait_earlier() noexcept {
    GroupIndex* const gi = index_;
    if (gi == nullptr) return;
    std::unique_lock<std::mutex> lock(gi->mu_);
    gi->released_.wait(lock, [&] {
        const auto it = gi->groups_.find(group_);
        for (const Claim* o = it->second.claims; o != nullptr; o = o->next_)
            if (o->seq_ < seq_) return false;
        return true;
    });
}

std::size_t GroupIndex::entries() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t deferred = 0;
    for (const Deferred* d = deferred_.load(std::memory_order_acquire); d != nullptr; d = d->next) ++deferred;
    return entries_ + deferred;
}

}  // namespace tickwheel::rt
