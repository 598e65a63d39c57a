// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/group_index.hpp"

#include <algorithm>

#include "runtime/handle_table.hpp"

namespace tickwheel::rt {

namespace {
constexpr std::size_t kMinCompact = 64;      // a list shorter than this is never compacted alone
constexpr std::size_t kMinFullCompact = 4096;  // nor the index while it holds fewer entries
}  // namespace

bool GroupIndex::live(std::uint64_t e) const noexcept {
    const Record* r = table_.find(index_of(e));
    if (r == nullptr || r->gen() != gen_of(e)) return false;  // recycled since
    const State s = Ctl::state(TimerState::load(*r));
    return s != State::Free && s != State::Cancelled;
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
        if (it->second.v.empty()) {
            it = groups_.erase(it);
        } else {
            ++it;
        }
    }
    entries_ = total;
    entries_after_full_ = total;
}

void GroupIndex::add(std::uint64_t group, std::uint32_t gen, std::uint32_t index) {
    std::lock_guard<std::mutex> lock(mu_);
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
    const auto it = groups_.find(group);
    if (it == groups_.end()) return {};
    std::vector<std::uint64_t> v = std::move(it->second.v);
    groups_.erase(it);
    entries_ -= v.size();
    hint_.store(entries_, std::memory_order_relaxed);
    return v;
}

std::size_t GroupIndex::entries() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_;
}

}  // namespace tickwheel::rt
