// SPDX-License-Identifier: MIT OR Apache-2.0
// CallerCells: where a thread's newest timers wait for their shard.
//
// Why. A thread that starts a timer and stops it again before it is due --
// a request's timeout, a retransmit that the answer cancels; the kernel's
// wheel was designed around "~99% of timers are cancelled before expiry" --
// should not make the shard's driver file the timer into the wheel and then
// unlink it again: that moves the record's cache line to the driver's core
// and back, twice (measured: 100-230 ns a pair on 2 vCPUs, against ~60 ns
// when the whole pair stays on the caller's core). 1.5 kept the pair on the
// caller's core with a token: a caller took the driver's token and applied
// its message to the wheel itself. But a token is a lock: a caller
// preempted, at nice 19, stopped in a debugger or in a signal handler while
// it held the token stalled every timer of its shard (issue 31). A cell
// keeps the pair local without a lock.
//
// What. Each shard has kCells cells; a thread claims one in its default
// shard on its first plain start there (a monotonic one-shot with no
// options: start_plain) and keeps it until it exits. A cell holds up to
// kEntries timers of its owner, as (index, generation) entries, each with
// the tick it is due at, and up to kFreeMax FREE records for the owner's
// next starts. The owner's start fills a record, publishes its word
// PENDING and places it in an entry instead of posting an Insert; its stop,
// after the word's CAS made it CANCELLED, takes the entry back with one CAS
// and recycles the record into the cell's free list: the pair touches only
// lines of the owner's core. The shard's driver never needs the owner:
//   * before its pass, it takes (steals, by CAS) every entry that is due at
//     the pass's tick, and files the record into its wheel by its word's
//     deadline, like an Insert;
//   * before it parks, it reads every entry's due tick, and sleeps no later
//     than the earliest (the owner, after placing an entry, wakes a driver
//     that sleeps past it: the same fence pairing as an inbox post);
//   * a Refile (a reset to an earlier deadline) of a record the driver finds
//     in no list of its wheel makes it read the words of every entry at its
//     next pass and take those that are due earlier than their entry says.
// An entry is owned by whoever holds it: the owner, from its place until a
// successful take-back or until the driver's CAS takes it; the driver from
// its CAS. A place never leaves a timer nowhere: a full cell posts the
// evicted timer's Insert BEFORE its entry is overwritten (both may then be
// seen: the driver files the record once, an Insert of a linked record is
// dropped). A stop whose take-back fails (the driver took the entry) posts
// a Cancel, as for a timer in the wheel. A stop by another thread (not the
// owner) posts a Cancel too; the driver recycles the unlinked CANCELLED
// record, and the entry left in the cell is stale: its generation no longer
// matches, and whoever meets it drops it.
//
// Frozen owners. An owner stopped at any instruction holds nothing the
// driver waits for: its entries are taken by CAS when due, its free records
// are FREE records nobody else needs. What a frozen owner can delay is only
// its own call in progress (a start not yet placed: its id was never
// returned).
//
// Lifetime. A cell outlives neither its runtime nor its thread's claim: a
// thread's claims are released when the thread exits (its free records go
// back to the shard's free stack, unplaced entries stay for the driver or
// the cell's next owner), under the cells' Control mutex, which the runtime
// also takes once, when it destroys the shard. Neither the driver nor a
// worker ever takes it. In a fork() child a parent's cells are never
// touched (the runtime is unusable there).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "runtime/timer_record.hpp"

namespace tickwheel::rt {

class HandleTable;

class CallerCells {
public:
    static constexpr unsigned kCells = 32;    // per shard: threads beyond this post to the inbox
    static constexpr unsigned kEntries = 4;   // timers per cell (the owner's newest)
    static constexpr std::uint32_t kFreeMax = 16;  // FREE records kept per cell

    /// An entry: occupied bit, the record's 24-bit generation, its index.
    static constexpr std::uint64_t kOccupied = std::uint64_t{1} << 63;
    static constexpr std::uint64_t entry(std::uint32_t index, std::uint32_t gen) noexcept {
        return kOccupied | (std::uint64_t{gen & 0xFFFFFFu} << 32) | index;
    }
    static constexpr std::uint32_t index_of(std::uint64_t e) noexcept { return static_cast<std::uint32_t>(e); }
    static constexpr std::uint32_t gen_of(std::uint64_t e) noexcept {
        return static_cast<std::uint32_t>(e >> 32) & 0xFFFFFFu;
    }

    struct alignas(64) Cell {
        // Line 1: what the driver reads (the owner writes it).
        std::atomic<std::uint64_t> slot[kEntries] = {};  // 0 = empty, else entry()
        std::atomic<tick_t> due[kEntries] = {};          // written before its slot (release)
        // Line 2: the owner's alone (and the claim word).
        alignas(64) std::atomic<std::uint32_t> claimed{0};  // 1 while a thread owns the cell
        std::uint32_t free_top = 0;   // top index + 1 of the FREE records kept (linked as on the free stack)
        std::uint32_t free_n = 0;
        std::uint32_t next_evict = 0;
    };

    /// The lock a thread's exit and the shard's destruction take, and
    /// whether the cells still exist. Shared by the cells and every thread
    /// holding a claim.
    struct Control {
        std::mutex mu;
        bool alive = true;
    };

    explicit CallerCells(HandleTable& table);
    ~CallerCells();
    CallerCells(const CallerCells&) = delete;
    CallerCells& operator=(const CallerCells&) = delete;

    /// The calling thread's cell, claimed on first use if `claim` (a
    /// start), or nullptr: none yet (a stop), or all kCells are owned by
    /// other threads (the caller then posts to the inbox). `runtime_uid`
    /// names the runtime for the thread's cache. Any caller.
    Cell* mine(std::uint64_t runtime_uid, std::uint32_t shard, bool claim) noexcept;

    // ---- the owner ----
    /// Places a published PENDING record in `c`. If every entry is taken,
    /// the oldest is evicted: `evict(entry, due)` is called to post its
    /// Insert before its slot is reused.
    template <class Evict>
    void place(Cell& c, std::uint32_t index, std::uint32_t gen, tick_t due, Evict&& evict) noexcept {
        const std::uint64_t e = entry(index, gen);
        for (unsigned i = 0; i < kEntries; ++i) {
            if (c.slot[i].load(std::memory_order_relaxed) == 0) {
                c.due[i].store(due, std::memory_order_relaxed);
                c.slot[i].store(e, std::memory_order_release);
                return;
            }
        }
        const unsigned i = c.next_evict;
        c.next_evict = (i + 1) % kEntries;
        const std::uint64_t old = c.slot[i].load(std::memory_order_acquire);
        if (old != 0) evict(old, c.due[i].load(std::memory_order_relaxed));  // its Insert first: never nowhere
        c.due[i].store(due, std::memory_order_relaxed);
        c.slot[i].store(e, std::memory_order_release);  // (over `old`, or the 0 the driver's take left)
    }
    /// Takes the entry of (index, gen) back if `c` still holds it. True: the
    /// record was never seen by the driver (it is in no wheel); the caller
    /// owns its recycling.
    static bool take_back(Cell& c, std::uint32_t index, std::uint32_t gen) noexcept {
        std::uint64_t e = entry(index, gen);
        for (unsigned i = 0; i < kEntries; ++i)
            if (c.slot[i].load(std::memory_order_relaxed) == e)
                return c.slot[i].compare_exchange_strong(e, 0, std::memory_order_acq_rel, std::memory_order_relaxed);
        return false;
    }
    /// Pops a FREE record kept in `c` (as HandleTable::allocate), or nullptr.
    Record* allocate(Cell& c, std::uint32_t& index, std::uint32_t& gen) noexcept;
    /// Keeps the FREE records of a chain (top .. bottom, linked as on the
    /// free stack; FreeChain) in `c` if there is room for all; false
    /// otherwise (nothing taken).
    bool keep(Cell& c, std::uint32_t top, std::uint32_t bottom, std::uint32_t bottom_gen, std::uint32_t count) noexcept;

    // ---- the shard's driver ----
    /// Cells ever claimed: the driver reads [0, high_water()).
    unsigned high_water() const noexcept { return hw_.load(std::memory_order_acquire); }
    Cell& cell(unsigned i) noexcept { return cells_[i]; }
    const Cell& cell(unsigned i) const noexcept { return cells_[i]; }
    /// Takes slot `i` of `c` if it still holds `e`.
    static bool take(Cell& c, unsigned i, std::uint64_t e) noexcept {
        return c.slot[i].compare_exchange_strong(e, 0, std::memory_order_acq_rel, std::memory_order_relaxed);
    }

    /// Releases a claim (a thread's exit). Under the control's lock, only
    /// while the cells are alive.
    void release(Cell& c) noexcept;
    const std::shared_ptr<Control>& control() const noexcept { return control_; }

private:
    HandleTable& table_;
    std::shared_ptr<Control> control_;
    std::atomic<unsigned> hw_{0};
    Cell cells_[kCells];
};

}  // namespace tickwheel::rt
