// SPDX-License-Identifier: MIT OR Apache-2.0
// HandleTable: a shard's timer records, addressed by 32-bit index, and
// their whole life: allocation (with the first generation), recycling
// (generation + 1, FREE, back on the free stack), quarantine (a record whose
// 10-bit generation wraps waits until no thread acts on it, see hazard.hpp)
// and retirement (a record at the last 24-bit generation is never reused).
//
// Records are allocated in fixed chunks of kChunkSize that are never moved or
// freed before the table is destroyed, so a pointer to a record (or an id
// naming one) stays dereferenceable for the runtime's whole life; staleness
// is decided by the record's generation, not by its memory. Free indices
// form a lock-free stack (Treiber, with a 32-bit ABA tag in the head word)
// whose links live in the free records' own `ctl` words (the deadline bits of
// a FREE ctl): the shard and the workers push recycled indices (a burst at
// a time, see FreeChain), any thread starting a timer pops one, and every
// access is atomic. When none is free, a
// fresh index is taken with one fetch_add and its chunk is created on first
// use (a CAS publishes it; a loser of that race frees its copy). No mutex.
// (A moodycamel queue served here first; used MPMC, its implicit producers
// recycle blocks with a release-only counter, which ThreadSanitizer reports
// as a race -- upstream issue #254 -- so it is kept for the MPSC inboxes.)
//
// Each chunk is one 2 MiB-aligned block, filled: a 64-byte header holding
// the chunk's number, then the records. A record's index is therefore computed from its
// address (index_of), and records need not store it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "runtime/timer_state.hpp"

namespace tickwheel::rt {

class FreeChain;

class HandleTable {
public:
    // One chunk fills one 2 MiB block (a huge page): a 64-byte header, then as
    // many records as fit (26213 of 80 bytes: 99.98% of the block is records).
    // A power-of-two count would leave a third of every block unused, and with
    // transparent huge pages that third is resident memory too; the division
    // by this constant compiles to a multiplication.
    static constexpr std::uint32_t kChunkSize =
        static_cast<std::uint32_t>(((std::size_t{2} << 20) - 64) / sizeof(Record));
    static constexpr std::uint32_t kMaxChunks = 1u << 14;  // >= 2^28 records per shard
    static constexpr std::uint64_t kCapacity = std::uint64_t{kChunkSize} * kMaxChunks;
    static_assert(kCapacity <= std::uint64_t{1} << 32, "indices are 32-bit");

    HandleTable();
    ~HandleTable();
    HandleTable(const HandleTable&) = delete;
    HandleTable& operator=(const HandleTable&) = delete;

    /// The record at `index`, or nullptr if that index was never allocated.
    /// Any thread; O(1).
    Record* find(std::uint32_t index) const noexcept {
        const std::uint32_t c = index / kChunkSize;
        if (c >= kMaxChunks) return nullptr;
        Record* chunk = chunks_[c].load(std::memory_order_acquire);
        return chunk == nullptr ? nullptr : chunk + (index % kChunkSize);
    }
    /// The record at an index known to be allocated.
    Record& at(std::uint32_t index) const noexcept {
        return chunks_[index / kChunkSize].load(std::memory_order_acquire)[index % kChunkSize];
    }

    /// The side record (Extra) of record `index`, creating its chunk of the
    /// side arena on first use; nullptr if there is no memory for it. The
    /// side arena is one calloc'd array per records chunk, so only the pages
    /// of timers that have an Extra become resident. Any thread.
    Extra* make_extra(std::uint32_t index) noexcept;
    /// The side record of a record whose flags say it has one (kHasExtra,
    /// read after validating the id); its chunk exists then.
    Extra& extra(std::uint32_t index) const noexcept {
        return extras_[index / kChunkSize].load(std::memory_order_acquire)[index % kChunkSize];
    }

    /// Takes a free record (FREE, callable empty) and sets `index` and `gen`
    /// to its index and its current generation (a never-used record gets
    /// its first). Returns nullptr when the index space or memory is
    /// exhausted. Any thread.
    Record* allocate(std::uint32_t& index, std::uint32_t& gen) noexcept;

    /// Ends a record's use: the caller owns it in a terminal state
    /// (CANCELLED, or RELEASING after its last run), it is in no wheel and
    /// its callable is destroyed. Bumps the generation and frees the record
    /// through `chain` (a FreeChain on this table), or quarantines it (its
    /// 10-bit generation wraps), or retires it (its generation is kMaxGen).
    /// Waiting stop_sync() callers are woken. Any thread.
    void recycle(Record& r, FreeChain& chain) noexcept;

    /// Frees the quarantined records no thread is acting on (one
    /// hazard_barrier() per call). The shard thread calls it when
    /// quarantine_due(). O(quarantined x threads).
    void reclaim_quarantine() noexcept;
    /// Whether a reclaim pass is worth its barrier: some record waits and
    /// either many do or `now_ns` is kQuarantineAgeNs past the last pass.
    bool quarantine_due(std::int64_t now_ns) const noexcept {
        const std::uint64_t n = quarantined_.load(std::memory_order_relaxed);
        return n != 0 && (n >= kQuarantineBatch || now_ns - last_reclaim_ns_ >= kQuarantineAgeNs);
    }
    std::uint64_t quarantined() const noexcept { return quarantined_.load(std::memory_order_relaxed); }
    /// Records retired at the last generation (80 bytes each, never reused:
    /// one per 2^24 - 1 timers started on a slot).
    std::uint64_t retired() const noexcept { return retired_.load(std::memory_order_relaxed); }
    static constexpr std::uint64_t kQuarantineBatch = 32;
    static constexpr std::int64_t kQuarantineAgeNs = 50'000'000;

    /// Pushes a chain of FREE records (top .. bottom, linked through their
    /// ctl words, see FreeChain) with one CAS; the bottom one becomes FREE
    /// under `bottom_gen` here. The caller owns them (terminal state,
    /// unlinked, callable destroyed). Any thread.
    void release_chain(std::uint32_t top, std::uint32_t bottom, std::uint32_t bottom_gen, std::uint32_t count) noexcept;

    /// Indices ever handed out: every allocated record is below this.
    std::uint32_t high_water() const noexcept;

    /// The index of a record of this table. O(1), no memory access but the
    /// chunk header.
    static std::uint32_t index_of(const Record* r) noexcept {
        const auto addr = reinterpret_cast<std::uintptr_t>(r);
        const auto* head = reinterpret_cast<const ChunkHeader*>(addr & ~(kChunkAlign - 1));
        const auto* first = reinterpret_cast<const Record*>(head + 1);
        return head->number * kChunkSize + static_cast<std::uint32_t>(r - first);
    }

private:
    static constexpr std::uintptr_t kChunkAlign = std::uintptr_t{2} << 20;
    struct alignas(64) ChunkHeader {
        std::uint32_t number;
    };
    static_assert(sizeof(ChunkHeader) == 64 && sizeof(ChunkHeader) + sizeof(Record) * kChunkSize <= kChunkAlign);

    Record* make_chunk(std::uint32_t c) noexcept;
    void quarantine(Record& r, std::uint32_t index, std::uint32_t gen) noexcept;
    static void free_chunk(Record* first) noexcept;

    std::unique_ptr<std::atomic<Record*>[]> chunks_;
    std::unique_ptr<std::atomic<Extra*>[]> extras_;  // parallel to chunks_, created on demand
    alignas(64) std::atomic<std::uint64_t> next_fresh_{0};
    // [ABA tag : 32 | top index + 1 : 32]; 0 in the low half = empty.
    alignas(64) std::atomic<std::uint64_t> free_head_{0};
    // Quarantine: a stack of FREE records linked like the free stack (index
    // + 1; 0 = empty), pushed by any thread, taken whole by the shard.
    alignas(64) std::atomic<std::uint32_t> quarantine_head_{0};
    std::atomic<std::uint64_t> quarantined_{0};
    std::atomic<std::uint64_t> retired_{0};
    std::int64_t last_reclaim_ns_ = 0;  // shard thread only
};

/// Records one thread frees in a burst (a dispatched batch, a drained inbox),
/// pushed onto the table's free stack with one CAS when flushed instead of
/// one contended CAS each. Each record becomes FREE at once (stale ids see
/// it immediately, stop_sync() waiters are woken at once); only its reuse
/// waits for the flush, which the owner does at the end of the burst.
/// Single thread; not copyable.
class FreeChain {
public:
    explicit FreeChain(HandleTable& table) noexcept : table_(table) {}
    ~FreeChain() { flush(); }
    FreeChain(const FreeChain&) = delete;
    FreeChain& operator=(const FreeChain&) = delete;

    /// Marks record `index` FREE under generation `gen` and links it on top
    /// of the chain. The caller owns the record (see HandleTable::recycle).
    void add(std::uint32_t index, std::uint32_t gen) noexcept {
        TimerState::mark_free(table_.at(index), gen, top_);
        if (top_ == 0) {
            bottom_ = index;
            bottom_gen_ = gen;
        }
        top_ = index + 1;
        ++count_;
    }
    /// Pushes the chain onto the free stack.
    void flush() noexcept {
        if (top_ == 0) return;
        table_.release_chain(top_ - 1, bottom_, bottom_gen_, count_);
        top_ = 0;
        count_ = 0;
    }
    HandleTable& table() const noexcept { return table_; }

private:
    HandleTable& table_;
    std::uint32_t top_ = 0;  // top index + 1; 0 = empty
    std::uint32_t bottom_ = 0;
    std::uint32_t bottom_gen_ = 0;
    std::uint32_t count_ = 0;  // records in the chain (test_hooks::freed)
};

}  // namespace tickwheel::rt
