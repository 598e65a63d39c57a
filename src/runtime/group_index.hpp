// SPDX-License-Identifier: MIT OR Apache-2.0
// GroupIndex: a shard's timers by group (tw_timer_spec.group), so that
// tw_group_stop() finds a group's timers without scanning all of them.
//
// start() adds (index, generation) to its group's list before it returns;
// tw_group_stop() takes each shard's list of the group whole (one short
// critical section per shard) and stops what it names, as stop() would: a
// timer whose start returned before the group stop began is in a list it
// takes; one started concurrently is either in it (stopped) or added after
// (left for a later call), never lost.
//
// Membership follows the timer's pending episodes (the owner table,
// timer_state.hpp): start() adds the entry after it publishes the word; a
// grouped one-shot that re-arms itself (RUNNING -> RUNNING_REARMED ->
// PENDING) is added again by the worker before the word makes it PENDING,
// since a group stop that took the group's list while it ran could not stop
// the run in progress and dropped its entry (issue 20, race 2); periodic
// timers keep theirs (a group stop stops them even while they run).
// Entries are not removed when a timer ends (a fired one-shot is recycled by
// a worker, which does not know the index); the generation tells a stale
// entry, and compaction bounds them and the duplicates re-arming leaves: a
// list is compacted (dead entries and duplicates dropped) when it doubles
// since its last compaction, and the whole index when its entries double
// since the last full pass (dropping groups with no live timer), so memory
// stays O(live grouped timers) and the cost per start O(log n) amortised.
// A std::mutex per shard: only starts with a group and group stops take it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace tickwheel::rt {

class HandleTable;

class GroupIndex {
public:
    /// An entry: the record's generation (high 32 bits) and index (low 32).
    static constexpr std::uint64_t entry(std::uint32_t gen, std::uint32_t index) noexcept {
        return (std::uint64_t{gen} << 32) | index;
    }
    static constexpr std::uint32_t gen_of(std::uint64_t e) noexcept { return static_cast<std::uint32_t>(e >> 32); }
    static constexpr std::uint32_t index_of(std::uint64_t e) noexcept { return static_cast<std::uint32_t>(e); }

    explicit GroupIndex(const HandleTable& table) noexcept : table_(table) {}

    /// Adds a started timer to `group` (!= 0). Throws std::bad_alloc (the
    /// caller then takes the start back). Any thread; O(1) amortised.
    void add(std::uint64_t group, std::uint32_t gen, std::uint32_t index);
    /// Takes the group's list (empty if none). Any thread; O(1) plus the
    /// list's size to move it out.
    std::vector<std::uint64_t> take(std::uint64_t group);
    /// Entries held (live and stale), for tests and metrics.
    std::size_t entries() const;
    /// entries() without the lock (a recent value). Any thread.
    std::size_t entries_hint() const noexcept { return hint_.load(std::memory_order_relaxed); }

private:
    bool live(std::uint64_t e) const noexcept;
    void compact(std::vector<std::uint64_t>& v) const noexcept;
    void compact_all() noexcept;

    struct List {
        std::vector<std::uint64_t> v;
        std::size_t after_compaction = 0;  // size after its last compaction
    };
    const HandleTable& table_;
    mutable std::mutex mu_;
    std::unordered_map<std::uint64_t, List> groups_;
    std::size_t entries_ = 0;
    std::size_t entries_after_full_ = 0;
    std::atomic<std::size_t> hint_{0};
};

}  // namespace tickwheel::rt
