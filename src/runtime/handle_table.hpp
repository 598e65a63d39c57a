// HandleTable: a shard's timer records, addressed by 32-bit index.
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

#include "runtime/timer_record.hpp"

namespace tickwheel::rt {

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
    Record& at(std::uint32_t index) const noexcept { return *find(index); }

    /// Takes a free index (its record is FREE and its callable empty).
    /// Returns false when the index space or memory is exhausted. Any thread.
    bool allocate(std::uint32_t& index) noexcept;

    /// Pushes a chain of FREE records (top .. bottom, linked through their
    /// ctl words, see FreeChain) with one CAS; the bottom one becomes FREE
    /// under `bottom_gen` here. The caller owns them (terminal state,
    /// unlinked, callable destroyed). Any thread.
    void release_chain(std::uint32_t top, std::uint32_t bottom, std::uint32_t bottom_gen) noexcept;

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
    static void free_chunk(Record* first) noexcept;

    std::unique_ptr<std::atomic<Record*>[]> chunks_;
    alignas(64) std::atomic<std::uint64_t> next_fresh_{0};
    // [ABA tag : 32 | top index + 1 : 32]; 0 in the low half = empty.
    alignas(64) std::atomic<std::uint64_t> free_head_{0};
};

/// Indices one thread frees in a burst (a dispatched batch, a drained inbox),
/// pushed onto the table's free stack with one CAS when flushed instead of
/// one contended CAS each. Each record becomes FREE at once (stale ids see
/// it immediately); its reuse, and the wake-up of stop_sync() callers
/// waiting on it, wait for the flush, which the owner does at the end of the
/// burst. (A worker wakes waiters itself at once, because its burst runs
/// user callbacks that may block; only its slots' reuse waits.) One fence per flush instead of one per record: a fence drains the
/// store buffer, and after a wheel unlink that buffer holds stores to cold
/// lines (measured: the shard spent 13% of a start+stop run in that fence).
/// Single thread; not copyable.
class FreeChain {
public:
    /// `waiters`: how many threads wait on some record's ctl word (see
    /// RuntimeCore::ctl_waiters); flush() notifies the chain's records only
    /// when it is not zero.
    FreeChain(HandleTable& table, const std::atomic<std::uint32_t>& waiters) noexcept
        : table_(table), waiters_(waiters) {}
    ~FreeChain() { flush(); }
    FreeChain(const FreeChain&) = delete;
    FreeChain& operator=(const FreeChain&) = delete;

    /// Marks record `index` FREE under generation `gen` (a release store, so
    /// that whoever sees FREE also sees everything done before) and links it
    /// on top of the chain. The caller owns the record as for release_chain().
    void add(std::uint32_t index, std::uint32_t gen) noexcept {
        table_.at(index).ctl.store(Ctl::make(gen, State::Free, top_), std::memory_order_release);
        if (top_ == 0) {
            bottom_ = index;
            bottom_gen_ = gen;
        }
        top_ = index + 1;
    }
    /// Wakes the chain's waiters, if any, and pushes the chain onto the free
    /// stack.
    void flush() noexcept {
        if (top_ == 0) return;
        // Pairs with the fence of a waiter (ctl_waiters + 1, fence, load
        // ctl): either it sees FREE, or we see it and notify.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (waiters_.load(std::memory_order_relaxed) != 0) {
            // Still ours: nobody else writes a FREE record before it is pushed.
            for (std::uint32_t link = top_; link != 0;) {
                Record& r = table_.at(link - 1);
                link = static_cast<std::uint32_t>(Ctl::deadline(r.ctl.load(std::memory_order_relaxed)));
                r.ctl.notify_all();
            }
        }
        table_.release_chain(top_ - 1, bottom_, bottom_gen_);
        top_ = 0;
    }

private:
    HandleTable& table_;
    const std::atomic<std::uint32_t>& waiters_;
    std::uint32_t top_ = 0;  // top index + 1; 0 = empty
    std::uint32_t bottom_ = 0;
    std::uint32_t bottom_gen_ = 0;
};

}  // namespace tickwheel::rt
