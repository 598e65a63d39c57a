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
// the chunk's number (and its side arrays, once made: the Extra arena and
// the period words), then the records, each one 64-byte line. A record's
// index is therefore computed from its address (index_of), and records need
// not store it; its side entries are found the same way.
//
// Memory given back after a peak (issue 34; trim(), revive()). A chunk's
// memory stays mapped for the table's life, but its pages may be given
// back to the kernel (MADV_DONTNEED: they read as zeros until written): the
// shard's driver, once the shard has far more free records than it needs
// and has been quiet (Shard::maybe_trim), takes the whole free stack and
// gives back every page (64 records) whose records are all on it and that
// no thread is acting on; a chunk all of whose pages go goes whole, its
// header page and side arrays too. Those records are off every list until
// a start that finds the free stack empty pops their chunk from the
// released list and makes them again (revive): FREE, at a generation above
// every one they had (the chunk's floor), so that an id of theirs stays
// stale. The owner rules: timer_state.hpp ("records given back").
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "runtime/caller_cells.hpp"
#include "runtime/timer_state.hpp"

namespace tickwheel::rt {

class FreeChain;

class HandleTable {
public:
    // One chunk fills one 2 MiB block (a huge page): a 64-byte header, then as
    // many records as fit (32767 of 64 bytes: every line of the block but the
    // header's; a chunk is resident whole from its creation, which constructs
    // its records). The division by this constant compiles to a multiplication.
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
    /// side arena is one lazily mapped array per records chunk (anonymous
    /// mmap: zeroed, line-aligned), so only the pages of timers that have an
    /// Extra become resident. Any thread.
    Extra* make_extra(std::uint32_t index) noexcept;
    /// The side record of a record whose flags say it has one (kHasExtra,
    /// read after validating the id); its chunk exists then. Through the
    /// table's copy of the chunk's side pointers, not its header (which a
    /// whole chunk given back to the kernel has not: trim()), so a reader
    /// racing with the timer's end (a query, a reset) reads zeros there, never
    /// through a null pointer.
    Extra& extra(std::uint32_t index) const noexcept {
        Extra* arr = meta_[index / kChunkSize].extras.load(std::memory_order_acquire);
        return arr != nullptr ? arr[index % kChunkSize] : no_extra();
    }
    /// The same, from the record (through its chunk's header: no table
    /// needed). For the record's owner, or a reader racing with its end: a
    /// header zeroed by trim() gives a zero Extra nobody else uses.
    static Extra& extra_of(const Record& r) noexcept {
        const ChunkHeader* head = header_of(&r);
        Extra* arr = head->extras.load(std::memory_order_acquire);
        return arr != nullptr ? arr[&r - first_of(head)] : no_extra();
    }

    /// Sets record `index`'s period word (timer_record.hpp, PeriodWord;
    /// start(), owning the record, before publishing it), creating its
    /// chunk's array of period words on first use (8 bytes per record,
    /// lazily mapped like the side arena). False if there is no memory for
    /// it. Any thread.
    bool set_period_word(std::uint32_t index, std::uint64_t word) noexcept;
    /// The period word of a record whose flags say kPeriodic or kHasQueue
    /// (read after validating the id, or by the shard that files it).
    static std::uint64_t period_word_of(const Record& r) noexcept {
        const ChunkHeader* head = header_of(&r);
        const std::atomic<std::uint64_t>* arr = head->period_words.load(std::memory_order_acquire);
        // (Null only in a chunk given back whole: a reader racing with the
        // timer's end. It then reads "no period, no queue".)
        return arr != nullptr ? arr[&r - first_of(head)].load(std::memory_order_relaxed) : 0;
    }
    static std::uint64_t period_ticks_of(const Record& r) noexcept {
        return PeriodWord::period_ticks(period_word_of(r));
    }
    static std::uint16_t queue_slot_of(const Record& r) noexcept { return PeriodWord::queue_slot(period_word_of(r)); }

    /// Where record `index` waits in a caller's cell (caller_cells.hpp:
    /// CallerCells::slot_code), or 0 if it was never placed in one. A hint
    /// written by the cell's owner when it places the record (relaxed), read
    /// by the owner's take-back and by the driver's Refile: both confirm it
    /// against the cell's entry (its generation), so a stale one only
    /// misses. Lazily mapped like the period words (4 bytes per record).
    /// False (set): no memory for the chunk's array. Any thread.
    bool set_cell_slot(std::uint32_t index, std::uint32_t code) noexcept;
    std::uint32_t cell_slot(std::uint32_t index) const noexcept {
        const Record& r = at(index);
        const ChunkHeader* head = header_of(&r);
        const std::atomic<std::uint32_t>* arr = head->cell_slots.load(std::memory_order_acquire);
        return arr == nullptr ? 0 : arr[&r - first_of(head)].load(std::memory_order_relaxed);
    }

    /// Takes a free record (FREE, callable empty) and sets `index` and `gen`
    /// to its index and its current generation (a never-used record gets
    /// its first). Returns nullptr when the index space or memory is
    /// exhausted. Any thread.
    Record* allocate(std::uint32_t& index, std::uint32_t& gen) noexcept;
    /// allocate() of up to `n` records at once (a batch start): the top of
    /// the free stack is walked and popped with one CAS -- each record's
    /// lines prefetched for writing as the walk reaches it --, the rest are
    /// fresh indices taken with one fetch_add. Fills recs/index/gen and
    /// returns how many (fewer than `n` only when the index space or memory
    /// is exhausted). Any thread.
    std::size_t allocate_n(std::size_t n, Record** recs, std::uint32_t* index, std::uint32_t* gen) noexcept;

    /// Ends a record's use: the caller owns it in a terminal state
    /// (CANCELLED, or RELEASING after its last run), it is in no wheel and
    /// its callable is destroyed. Bumps the generation and frees the record
    /// through `chain` (a FreeChain on this table), or quarantines it (its
    /// 10-bit generation wraps), or retires it (its generation is kMaxGen).
    /// Waiting stop_sync() callers are woken. Any thread. Also quarantined:
    /// a boot-time or wall-clock timer's record while some thread holds its
    /// own-clock deadline's lock (OwnDeadline, timer_state.hpp). Returns
    /// whether it went into quarantine (only the shard thread reclaims it:
    /// a caller off that thread wakes it, Shard::recycle_ended).
    bool recycle(Record& r, FreeChain& chain) noexcept;

    /// Frees the quarantined records no thread is acting on (one
    /// hazard_barrier() per call). The shard thread calls it when
    /// quarantine_due(). O(quarantined x threads).
    void reclaim_quarantine() noexcept;
    /// Whether some thread holds the own-clock deadline lock of `r` (any
    /// occupant's; false if its chunk has no side records).
    bool own_lock_held(const Record& r) const noexcept;
    /// recycle() of a boot-time or wall-clock timer: whether a thread holds
    /// its deadline lock (after a seq_cst fence). Out of line.
    [[gnu::noinline]] static bool own_lock_taken(const Record& r) noexcept;
    /// Whether a reclaim pass is worth its barrier: some record waits and
    /// either many do or `now_ns` is kQuarantineAgeNs past the last pass.
    bool quarantine_due(std::int64_t now_ns) const noexcept {
        const std::uint64_t n = quarantined_.load(std::memory_order_relaxed);
        return n != 0 && (n >= kQuarantineBatch || now_ns - last_reclaim_ns_ >= kQuarantineAgeNs);
    }
    std::uint64_t quarantined() const noexcept { return quarantined_.load(std::memory_order_relaxed); }
    /// Records retired at the last generation (64 bytes each, never reused:
    /// one per 2^24 - 1 timers started on a slot).
    std::uint64_t retired() const noexcept { return retired_.load(std::memory_order_relaxed); }
    static constexpr std::uint64_t kQuarantineBatch = 32;
    static constexpr std::int64_t kQuarantineAgeNs = 50'000'000;

    /// Pushes a chain of FREE records (top .. bottom, linked through their
    /// ctl words, see FreeChain) with one CAS; the bottom one becomes FREE
    /// under `bottom_gen` here. The caller owns them (terminal state,
    /// unlinked, callable destroyed). Any thread.
    /// `notify`: tell test_hooks::freed (false: records already counted free,
    /// moved from a caller's cell to the stack).
    void release_chain(std::uint32_t top, std::uint32_t bottom, std::uint32_t bottom_gen, std::uint32_t count,
                       bool notify = true) noexcept;
    /// A mirror of the free stack's top for allocate_n(): the records that
    /// chain pushes put on the stack, in stack order, in a ring of kMirror
    /// entries (64 KB, allocated by the first allocate_n(): runtimes that
    /// never start a batch have none). A shard frees its stopped timers'
    /// records in bursts, once per pass (a tick) or lazy wake-up: the ring
    /// holds the burst of a caller stopping a timer every 100 ns. allocate_n()
    /// finds the stack's top in it and prefetches the records below before
    /// it walks them. Only a hint: single pops, pushes racing each other and
    /// the ring's end leave it out of step, and the walk follows the
    /// records' links either way, so a wrong hint only wastes prefetches.
    static constexpr std::uint32_t kMirror = 16384;
    /// The records of a FreeChain the mirror learns (its last ones, the top).
    static constexpr std::uint32_t kChainMirror = 512;
    /// Appends a pushed chain's records, bottom first (release_chain()'s caller).
    void mirror_push(const std::uint32_t* bottom_first, std::uint32_t n) noexcept;

    /// Indices ever handed out: every allocated record is below this.
    std::uint32_t high_water() const noexcept;

    // ---- giving memory back after a peak (issue 34) ---------------------------
    /// The shard's driver (the only caller), when its free records exceed
    /// what it needs (Shard::maybe_trim): takes the whole free stack, and
    /// gives back to the kernel (MADV_DONTNEED) every page of records (64,
    /// 4 KiB) that holds only free records -- no live timer, no record a
    /// caller's cell keeps, none in quarantine, none a thread acts on
    /// (hazard) or holds the deadline lock of -- as long as at least
    /// `keep_free` free records stay resident; a chunk all of whose pages
    /// go goes whole (its header and side arrays too). The rest goes back
    /// on the free stack. Starts meanwhile take fresh indices (the stack is
    /// empty while the driver holds it: for the walk, ~6 ns a record).
    /// Returns the records given back. See "Giving memory back" in the
    /// owner rules (timer_state.hpp).
    std::uint64_t trim(std::uint64_t keep_free) noexcept;
    /// Whether chunks given back wait to be made again (allocate does).
    bool has_released() const noexcept {
        return static_cast<std::uint32_t>(released_head_.load(std::memory_order_relaxed)) != 0;
    }
    /// Called (any thread) whenever the table's resident records grow by a
    /// chunk -- one made, or one given back made again -- so that the
    /// shard's driver looks again at what it may give back: a burst of
    /// starts that a caller's cell holds posts nothing to the driver, which
    /// may be in a long sleep. Rare (once per 32,767 records); set once,
    /// before the table is shared.
    void on_grow(void (*fn)(void*) noexcept, void* ctx) noexcept {
        grow_fn_ = fn;
        grow_ctx_ = ctx;
    }
    /// Records given back to the kernel and not made again.
    std::uint64_t released_records() const noexcept { return released_records_.load(std::memory_order_relaxed); }
    /// Records resident now: high_water() less those given back to the
    /// kernel (trim()). Any thread; a recent value.
    std::uint64_t resident_slots() const noexcept {
        const std::uint64_t released = released_records_.load(std::memory_order_relaxed);
        const std::uint64_t hw = high_water();
        return hw > released ? hw - released : 0;
    }
    /// Bytes of records (whole chunks) and side arrays resident now, an
    /// upper bound (side arrays count whole once made). Any thread.
    std::uint64_t resident_bytes() const noexcept { return resident_bytes_.load(std::memory_order_relaxed); }

    /// Fetches a record's cache line (64 bytes, line-aligned) for writing
    /// (PREFETCHW: the line comes exclusive, the CAS or store that follows
    /// needs no second trip; a no-op on x86-64 CPUs without it). Batches
    /// issue these before their first locked instruction, so the records'
    /// cache misses overlap.
    static void prefetch(const Record* r) noexcept {
        static_assert(sizeof(Record) == 64);
#if defined(__x86_64__)
        __asm__ volatile("prefetchw %0" : : "m"(*reinterpret_cast<const char*>(r)));
#else
        __builtin_prefetch(r, 1, 3);
#endif
    }

    /// The index of a record of this table. O(1), no memory access but the
    /// chunk header.
    static std::uint32_t index_of(const Record* r) noexcept {
        const ChunkHeader* head = header_of(r);
        return head->number.load(std::memory_order_relaxed) * kChunkSize + static_cast<std::uint32_t>(r - first_of(head));
    }

private:
    static constexpr std::uintptr_t kChunkAlign = std::uintptr_t{2} << 20;
    struct alignas(64) ChunkHeader {
        // Atomic (relaxed: a plain load): a reader racing with a timer's end
        // may read it while revive() rewrites a whole chunk's header.
        std::atomic<std::uint32_t> number;
        std::atomic<Extra*> extras{nullptr};  // the chunk's side arena, created on demand
        std::atomic<std::atomic<std::uint64_t>*> period_words{nullptr};  // its period words, likewise
        std::atomic<std::atomic<std::uint32_t>*> cell_slots{nullptr};    // where its records wait in callers' cells
    };
    static_assert(sizeof(ChunkHeader) == 64 && sizeof(ChunkHeader) + sizeof(Record) * kChunkSize <= kChunkAlign);
    static const ChunkHeader* header_of(const Record* r) noexcept {
        return reinterpret_cast<const ChunkHeader*>(reinterpret_cast<std::uintptr_t>(r) & ~(kChunkAlign - 1));
    }
    static const Record* first_of(const ChunkHeader* head) noexcept { return reinterpret_cast<const Record*>(head + 1); }

    /// What the table keeps of each chunk beside it (trim(), revive()), and
    /// the chunk's side pointers (copies of its header's, which survive a
    /// whole chunk's release). One entry per possible chunk, in a lazily
    /// mapped array (zeroed: every entry starts resident, nothing released).
    struct ChunkMeta {
        std::atomic<Extra*> extras{nullptr};
        std::atomic<std::atomic<std::uint64_t>*> period_words{nullptr};
        std::atomic<std::atomic<std::uint32_t>*> cell_slots{nullptr};
        // kResident: none of its pages given back; kReleased: some are, and
        // it is on the released list (its fields below belong to whoever
        // pops it); written by trim() (the driver) before the list's CAS,
        // and by revive() (any thread) after its pop.
        std::atomic<std::uint32_t> state{0};
        std::uint32_t next = 0;      // the released list's link: chunk + 1 (0: end)
        std::uint32_t floor = 0;     // generation floor: records come back above every generation they had
        std::uint32_t released = 0;  // records on its given-back pages
        bool whole = false;          // every page, the header's too (rewritten by revive())
        std::uint64_t pages[8] = {};  // the pages given back (bit p: page p of the chunk's 512)
    };
    static constexpr std::uint32_t kResident = 0, kReleased = 1;
    static constexpr std::uint32_t kPageRecords = 4096 / sizeof(Record);  // 64
    static constexpr std::uint32_t kPages = static_cast<std::uint32_t>(kChunkAlign / 4096);  // 512
    /// A zero Extra for readers racing with a whole chunk's release.
    static Extra& no_extra() noexcept;
    /// Pops a released chunk and makes its records again: generations at
    /// its floor, FREE, on the free stack -- but one, returned in
    /// `index`/`gen` (nullptr: no released chunk). Any thread (allocate).
    Record* revive(std::uint32_t& index, std::uint32_t& gen) noexcept;

    Record* make_chunk(std::uint32_t c) noexcept;
    void grew() noexcept {
        if (grow_fn_ != nullptr) grow_fn_(grow_ctx_);
    }
    /// A fresh index's record, with its first generation; nullptr if no
    /// memory for its chunk (the index is then never used).
    Record* init_fresh(std::uint32_t index) noexcept;
    void quarantine(Record& r, std::uint32_t index, std::uint32_t gen) noexcept;
    void free_chunk(std::uint32_t c, Record* first) noexcept;

    std::unique_ptr<std::atomic<Record*>[]> chunks_;
    void (*grow_fn_)(void*) noexcept = nullptr;  // on_grow()
    void* grow_ctx_ = nullptr;
    ChunkMeta* meta_ = nullptr;  // kMaxChunks entries (mmap: pages resident once touched)
    // The released chunks: a stack linked through ChunkMeta::next, [ABA tag
    // : 32 | chunk + 1 : 32]; pushed by the driver (trim), popped by any
    // thread that finds the free stack empty (revive).
    alignas(64) std::atomic<std::uint64_t> released_head_{0};
    alignas(64) std::atomic<std::uint64_t> next_fresh_{0};
    // [ABA tag : 32 | top index + 1 : 32]; 0 in the low half = empty.
    alignas(64) std::atomic<std::uint64_t> free_head_{0};
    // Quarantine: a stack of FREE records linked like the free stack (index
    // + 1; 0 = empty), pushed by any thread, taken whole by the shard.
    alignas(64) std::atomic<std::uint32_t> quarantine_head_{0};
    std::atomic<std::uint64_t> quarantined_{0};
    std::atomic<std::uint64_t> retired_{0};
    // What the runtime holds of memory (resident_slots(), resident_bytes()).
    std::atomic<std::uint64_t> released_records_{0};
    std::atomic<std::uint64_t> resident_bytes_{0};
    std::int64_t last_reclaim_ns_ = 0;  // shard thread only
    // The mirror (relaxed: read only to prefetch): entries pushed (mod
    // 2^32; the ring holds the last kMirror), moved back by allocate_n()'s
    // pops.
    alignas(64) std::atomic<std::uint32_t> mirror_top_{0};
    std::atomic<std::atomic<std::uint32_t>*> mirror_{nullptr};  // kMirror entries, or none yet
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
        recent_[added_++ % HandleTable::kChainMirror] = index;
    }
    /// Pushes the chain onto the free stack (and tells the table's mirror).
    /// `notify`: see HandleTable::release_chain.
    void flush(bool notify = true) noexcept {
        if (top_ == 0) return;
        table_.release_chain(top_ - 1, bottom_, bottom_gen_, added_, notify);
        std::uint32_t bottom_first[HandleTable::kChainMirror];
        const std::uint32_t n = added_ < HandleTable::kChainMirror ? added_ : HandleTable::kChainMirror;
        for (std::uint32_t i = 0; i < n; ++i) bottom_first[i] = recent_[(added_ - n + i) % HandleTable::kChainMirror];
        table_.mirror_push(bottom_first, n);
        top_ = 0;
        added_ = 0;
    }
    /// Moves the chain into a caller's cell (CallerCells::keep: the cell's
    /// owner only) instead of the free stack, if it has room for all of it;
    /// else it stays, for flush(). True if moved.
    bool keep_in(CallerCells& cells, CallerCells::Cell& c) noexcept {
        if (top_ != 0 && cells.keep(c, top_ - 1, bottom_, bottom_gen_, added_)) {
            top_ = 0;
            added_ = 0;
            return true;
        }
        return false;
    }
    HandleTable& table() const noexcept { return table_; }

private:
    HandleTable& table_;
    std::uint32_t top_ = 0;  // top index + 1; 0 = empty
    std::uint32_t bottom_ = 0;
    std::uint32_t bottom_gen_ = 0;
    std::uint32_t added_ = 0;                          // records added since the last flush (test_hooks::freed)
    std::uint32_t recent_[HandleTable::kChainMirror];  // the last kChainMirror of them (a ring)
};

}  // namespace tickwheel::rt
