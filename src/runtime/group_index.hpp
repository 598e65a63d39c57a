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
//
// Concurrent group stops of one group (issue 20, found by the history
// fuzzer): the first takes the list, the second would find it empty and
// return while a timer the first took is not stopped yet -- and that timer,
// started before the second began, could still run after the second
// returned. So a group stop claims the list (claim()): it moves the entries
// out as before, and registers them, for as long as it works through them,
// where a later claim of the same group finds them: that claim gets a copy
// of every entry an earlier claim still holds (Claim::others) and stops them
// too. A timer is stopped once whoever gets there first (stop() is
// idempotent by generation), so each group stop returns only after every
// timer in the list it saw is stopped, without ever waiting for another group
// stop (which could deadlock: a callback's or a release hook's group stop
// while another thread's TW_SYNC group stop waits for that callback). Only
// if the copy cannot be allocated does a claim wait for the earlier claims to
// finish (Claim::wait_earlier), unless it runs inside a callback or release
// hook.
//
// A std::mutex per shard: only starts with a group and group stops take it
// (callers); a worker re-indexing a grouped one-shot that re-armed itself
// never waits for it (add_from_worker; issue 31), and the driver never
// touches it (the clock-step index is clock_index.hpp, lock-free).
#pragma once

#include <atomic>
#include <condition_variable>
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
    ~GroupIndex();
    GroupIndex(const GroupIndex&) = delete;
    GroupIndex& operator=(const GroupIndex&) = delete;

    /// Adds a started timer to `group` (!= 0). Throws std::bad_alloc (the
    /// caller then takes the start back). Any thread; O(1) amortised.
    void add(std::uint64_t group, std::uint32_t gen, std::uint32_t index);
    /// add() for a worker, which never waits for a caller (issue 31): if a
    /// caller holds the lock, the entry is pushed onto a lock-free list
    /// that every holder of the lock merges first (so a claim made after
    /// this returned sees it, as if added under the lock). False: no memory
    /// for it (the timer is left out of its group's index).
    bool add_from_worker(std::uint64_t group, std::uint32_t gen, std::uint32_t index) noexcept;
    /// Takes the group's list (empty if none). Any thread; O(1) plus the
    /// list's size to move it out. (The clocked index's use: a group stop
    /// uses claim().)
    std::vector<std::uint64_t> take(std::uint64_t group);

    /// A group stop's claim on one shard's list of a group (see the top
    /// comment). While it lives, later claims of the group copy `mine`.
    class Claim {
    public:
        Claim() = default;
        Claim(const Claim&) = delete;
        Claim& operator=(const Claim&) = delete;
        ~Claim() { release(); }
        /// The entries this claim took from the list.
        std::vector<std::uint64_t> mine;
        /// The entries earlier claims of the group still held when this one
        /// was made (they are working through them; stop them as well).
        std::vector<std::uint64_t> others;
        /// False if `others` could not be allocated: call wait_earlier().
        bool others_complete = true;
        /// Waits until every claim of the group made before this one is
        /// released. Only after a failed copy (no memory); the caller must
        /// not be inside a callback or release hook.
        void wait_earlier() noexcept;
        /// Unregisters (the destructor does it too).
        void release() noexcept;

    private:
        friend class GroupIndex;
        GroupIndex* index_ = nullptr;  // set while registered
        std::uint64_t group_ = 0;
        std::uint64_t seq_ = 0;
        Claim* next_ = nullptr;  // the group's claims in progress (intrusive)
        Claim* prev_ = nullptr;
    };
    /// Makes `c` (fresh) a claim on the group's list: moves the list into
    /// c.mine and copies the entries of the group's earlier claims still in
    /// progress into c.others. Any thread; O(1) plus the entries moved and
    /// copied. Never throws (see Claim::others_complete).
    void claim(std::uint64_t group, Claim& c) noexcept;
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
        Claim* claims = nullptr;           // group stops in progress (kept while any)
    };
    /// Moves the deferred adds (add_from_worker) into the lists. Under mu_.
    void merge_deferred() noexcept;
    struct Deferred {
        std::uint64_t group;
        std::uint64_t entry;
        Deferred* next;
    };

    const HandleTable& table_;
    mutable std::mutex mu_;
    std::atomic<Deferred*> deferred_{nullptr};  // pushed by workers, taken whole under mu_
    std::unordered_map<std::uint64_t, List> groups_;
    std::size_t entries_ = 0;
    std::size_t entries_after_full_ = 0;
    std::atomic<std::size_t> hint_{0};
    std::uint64_t claim_seq_ = 0;          // under mu_
    std::condition_variable released_;     // a claim was released (wait_earlier)
};

}  // namespace tickwheel::rt
