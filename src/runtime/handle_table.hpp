// HandleTable: a shard's timer records, addressed by 32-bit index.
//
// Records are allocated in fixed chunks of kChunkSize that are never moved or
// freed before the table is destroyed, so a pointer to a record (or an id
// naming one) stays dereferenceable for the runtime's whole life; staleness
// is decided by the record's generation, not by its memory. Free indices
// form a lock-free stack (Treiber, with a 32-bit ABA tag in the head word)
// whose links live in the free records' own `ctl` words (the deadline bits of
// a FREE ctl): the shard and the workers push recycled indices, any thread
// starting a timer pops one, and every access is atomic. When none is free, a
// fresh index is taken with one fetch_add and its chunk is created on first
// use (a CAS publishes it; a loser of that race frees its copy). No mutex.
// (A moodycamel queue served here first; used MPMC, its implicit producers
// recycle blocks with a release-only counter, which ThreadSanitizer reports
// as a race -- upstream issue #254 -- so it is kept for the MPSC inboxes.)
//
// Each chunk is one 2 MiB-aligned block: a 64-byte header holding the chunk's
// number, then the records. A record's index is therefore computed from its
// address (index_of), and records need not store it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "runtime/timer_record.hpp"

namespace tickwheel::rt {

class HandleTable {
public:
    static constexpr unsigned kChunkBits = 14;  // 16384 records (1.25 MiB) per chunk
    static constexpr std::uint32_t kChunkSize = 1u << kChunkBits;
    static constexpr std::uint32_t kMaxChunks = 1u << 14;  // 2^28 records per shard
    static constexpr std::uint64_t kCapacity = std::uint64_t{kChunkSize} * kMaxChunks;

    HandleTable();
    ~HandleTable();
    HandleTable(const HandleTable&) = delete;
    HandleTable& operator=(const HandleTable&) = delete;

    /// The record at `index`, or nullptr if that index was never allocated.
    /// Any thread; O(1).
    Record* find(std::uint32_t index) const noexcept {
        const std::uint32_t c = index >> kChunkBits;
        if (c >= kMaxChunks) return nullptr;
        Record* chunk = chunks_[c].load(std::memory_order_acquire);
        return chunk == nullptr ? nullptr : chunk + (index & (kChunkSize - 1));
    }
    /// The record at an index known to be allocated.
    Record& at(std::uint32_t index) const noexcept { return *find(index); }

    /// Takes a free index (its record is FREE and its callable empty).
    /// Returns false when the index space or memory is exhausted. Any thread.
    bool allocate(std::uint32_t& index) noexcept;
    /// Marks record `index` FREE under generation `gen` and pushes it on the
    /// free stack. The caller owns the record (terminal state, unlinked,
    /// callable destroyed). Any thread.
    void release(std::uint32_t index, std::uint32_t gen) noexcept;

    /// Indices ever handed out: every allocated record is below this.
    std::uint32_t high_water() const noexcept;

    /// The index of a record of this table. O(1), no memory access but the
    /// chunk header.
    static std::uint32_t index_of(const Record* r) noexcept {
        const auto addr = reinterpret_cast<std::uintptr_t>(r);
        const auto* head = reinterpret_cast<const ChunkHeader*>(addr & ~(kChunkAlign - 1));
        const auto* first = reinterpret_cast<const Record*>(head + 1);
        return (head->number << kChunkBits) + static_cast<std::uint32_t>(r - first);
    }

private:
    static constexpr std::uintptr_t kChunkAlign = std::uintptr_t{2} << 20;
    struct alignas(64) ChunkHeader {
        std::uint32_t number;
    };
    static_assert(sizeof(ChunkHeader) + sizeof(Record) * kChunkSize <= kChunkAlign);

    Record* make_chunk(std::uint32_t c) noexcept;
    static void free_chunk(Record* first) noexcept;

    std::unique_ptr<std::atomic<Record*>[]> chunks_;
    alignas(64) std::atomic<std::uint64_t> next_fresh_{0};
    // [ABA tag : 32 | top index + 1 : 32]; 0 in the low half = empty.
    alignas(64) std::atomic<std::uint64_t> free_head_{0};
};

}  // namespace tickwheel::rt
