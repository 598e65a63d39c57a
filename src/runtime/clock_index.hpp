// SPDX-License-Identifier: MIT OR Apache-2.0
// ClockIndex: a shard's boot-time and wall-clock timers, which its driver
// re-files when their clock moves against the monotonic one (a wall-clock
// step, a suspend). Starts add to it from any thread; only the driver reads
// it.
//
// No lock (issue 31, the progress rule): 1.5 kept these in a GroupIndex
// behind a mutex that clocked starts and the driver shared, so a caller
// preempted inside its start's add held back every re-clock of the shard
// (and 1.7's first cut, which only tried the lock, left wall-clock timers on
// stale ticks for as long). Now a start pushes its entry onto a lock-free
// stack (one CAS; a node allocated by the start: its failure fails the
// start, as before); the driver takes the whole stack with one exchange at
// each re-clock pass and keeps the entries in vectors of its own, where it
// drops those of ended timers.
//
// Ordering (issue 20, race 7, unchanged): a start adds its timer before it
// reads the clocks it files it by. A re-clock pass reads the offsets, then
// takes the stack: a push it does not see comes after its take in the
// stack head's modification order, so the start's readings came after the
// pass's offsets, and the next pass that sees an offset move sees the entry.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace tickwheel::rt {

class ClockIndex {
public:
    static constexpr unsigned kClocks = 3;  // (ClockId: 1 boot time, 2 wall clock; 0 unused)
    /// An entry: the record's generation (high 32 bits) and index (low 32).
    static constexpr std::uint64_t entry(std::uint32_t gen, std::uint32_t index) noexcept {
        return (std::uint64_t{gen} << 32) | index;
    }
    static constexpr std::uint32_t gen_of(std::uint64_t e) noexcept { return static_cast<std::uint32_t>(e >> 32); }
    static constexpr std::uint32_t index_of(std::uint64_t e) noexcept { return static_cast<std::uint32_t>(e); }

    ClockIndex() = default;
    ~ClockIndex() {
        for (auto& head : incoming_)
            for (Node* n = head.load(std::memory_order_relaxed); n != nullptr;) {
                Node* next = n->next;
                delete n;
                n = next;
            }
    }
    ClockIndex(const ClockIndex&) = delete;
    ClockIndex& operator=(const ClockIndex&) = delete;

    /// Indexes a started timer of clock `c` (1 or 2). Throws std::bad_alloc
    /// (the caller then takes the start back). Any thread; one allocation
    /// and one CAS; never waits.
    void add(std::uint64_t c, std::uint32_t gen, std::uint32_t index) {
        Node* n = new Node{entry(gen, index), nullptr};
        std::atomic<Node*>& head = incoming_[c % kClocks];
        Node* h = head.load(std::memory_order_relaxed);
        do {
            n->next = h;
        } while (!head.compare_exchange_weak(h, n, std::memory_order_release, std::memory_order_relaxed));
        hint_.fetch_add(1, std::memory_order_relaxed);
    }

    /// The driver: the entries of clock `c` (its own vector, after taking
    /// what starts pushed since). It may drop entries from it (resize) and
    /// must then call settled(). Never waits. Allocates: with no memory,
    /// what starts pushed since stays on the stack for the next pass.
    std::vector<std::uint64_t>& entries(unsigned c) noexcept {
        take_incoming(c);
        return mine_[c % kClocks];
    }
    /// The driver, after changing entries(): the hint becomes exact.
    void settled() noexcept {
        std::size_t n = 0;
        for (const auto& v : mine_) n += v.size();
        hint_.store(n, std::memory_order_relaxed);
    }
    /// How many entries there are (recent). Any thread.
    std::size_t entries_hint() const noexcept { return hint_.load(std::memory_order_relaxed); }

private:
    struct Node {
        std::uint64_t e;
        Node* next;
    };
    void take_incoming(unsigned c) noexcept {
        std::atomic<Node*>& head = incoming_[c % kClocks];
        if (head.load(std::memory_order_relaxed) == nullptr) return;
        std::vector<std::uint64_t>& v = mine_[c % kClocks];
        // Count first, reserve, then take: no allocation failure after the
        // exchange (a failed reserve leaves the nodes for the next pass).
        std::size_t n = 0;
        for (Node* p = head.load(std::memory_order_acquire); p != nullptr; p = p->next) ++n;
        try {
            v.reserve(v.size() + n + 64);
        } catch (...) {
            return;
        }
        Node* p = head.exchange(nullptr, std::memory_order_acquire);
        while (p != nullptr) {
            Node* next = p->next;
            if (v.size() == v.capacity()) {
                // (More pushed between the count and the exchange: keep the
                // rest for the next pass, on the stack again.)
                Node* h = head.load(std::memory_order_relaxed);
                Node* last = p;
                while (last->next != nullptr) last = last->next;
                do {
                    last->next = h;
                } while (!head.compare_exchange_weak(h, p, std::memory_order_release, std::memory_order_relaxed));
                return;
            }
            v.push_back(p->e);
            delete p;
            p = next;
        }
    }

    std::atomic<Node*> incoming_[kClocks] = {};
    std::vector<std::uint64_t> mine_[kClocks];  // the driver's
    std::atomic<std::size_t> hint_{0};
};

}  // namespace tickwheel::rt
