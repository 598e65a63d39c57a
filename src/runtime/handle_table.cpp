// SPDX-License-Identifier: MIT OR Apache-2.0
#include "runtime/handle_table.hpp"

#include <sys/mman.h>

#include <ctime>

#include <cstdlib>
#include <new>
#include <type_traits>

#include "runtime/hazard.hpp"
#include "runtime/test_hooks.hpp"

namespace tickwheel::rt {

HandleTable::HandleTable()
    : chunks_(new std::atomic<Record*>[kMaxChunks]()), extras_(new std::atomic<Extra*>[kMaxChunks]()) {}

HandleTable::~HandleTable() {
    for (std::uint32_t c = 0; c < kMaxChunks; ++c) {
        free_chunk(chunks_[c].load(std::memory_order_relaxed));
        std::free(extras_[c].load(std::memory_order_relaxed));
    }
}

Extra* HandleTable::make_extra(std::uint32_t index) noexcept {
    const std::uint32_t c = index / kChunkSize;
    Extra* arr = extras_[c].load(std::memory_order_acquire);
    if (arr == nullptr) {
        // Zeroed memory is a valid array of Extra (atomics of integers, all
        // 0): calloc's lazily mapped pages stay unresident until touched.
        static_assert(std::is_trivially_destructible_v<Extra>);
        auto* fresh = static_cast<Extra*>(std::calloc(kChunkSize, sizeof(Extra)));
        if (fresh == nullptr) return nullptr;
        if (extras_[c].compare_exchange_strong(arr, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
            arr = fresh;
        } else {
            std::free(fresh);  // another thread published this chunk first
        }
    }
    return arr + index % kChunkSize;
}

void HandleTable::free_chunk(Record* first) noexcept {
    if (first == nullptr) return;
    for (std::uint32_t i = 0; i < kChunkSize; ++i) first[i].~Record();
    std::free(reinterpret_cast<ChunkHeader*>(first) - 1);
}

Record* HandleTable::make_chunk(std::uint32_t c) noexcept {
    Record* chunk = chunks_[c].load(std::memory_order_acquire);
    if (chunk != nullptr) return chunk;
    void* block = std::aligned_alloc(kChunkAlign, kChunkAlign);
    if (block == nullptr) return nullptr;
    // One 2 MiB chunk = one huge page where THP is in "madvise" mode (Debian's
    // default): a random record access then costs no TLB walk of 4 KiB pages.
    madvise(block, kChunkAlign, MADV_HUGEPAGE);
    auto* head = ::new (block) ChunkHeader{c};
    auto* fresh = reinterpret_cast<Record*>(head + 1);
    for (std::uint32_t i = 0; i < kChunkSize; ++i) ::new (static_cast<void*>(fresh + i)) Record();
    if (chunks_[c].compare_exchange_strong(chunk, fresh, std::memory_order_acq_rel, std::memory_order_acquire))
        return fresh;
    free_chunk(fresh);  // another thread published this chunk first
    return chunk;
}

void HandleTable::release_chain(std::uint32_t top, std::uint32_t bottom, std::uint32_t bottom_gen,
                                std::uint32_t count) noexcept {
    Record& last = at(bottom);
    std::uint64_t head = free_head_.load(std::memory_order_relaxed);
    std::uint64_t next;
    do {
        // The bottom record links to the current top; nobody can reach the
        // chain before the CAS publishes it, so this store races with no pop.
        TimerState::mark_free(last, bottom_gen, static_cast<std::uint32_t>(head));
        next = ((head >> 32) + 1) << 32 | (std::uint64_t{top} + 1);
    } while (!free_head_.compare_exchange_weak(head, next, std::memory_order_release, std::memory_order_relaxed));
    if (auto* f = test_hooks::freed.load(std::memory_order_relaxed)) f(top, count);
}

Record* HandleTable::allocate(std::uint32_t& index, std::uint32_t& gen) noexcept {
    std::uint64_t head = free_head_.load(std::memory_order_acquire);
    while ((head & 0xFFFFFFFFu) != 0) {
        const auto top = static_cast<std::uint32_t>(head) - 1;
        // The link may be stale if `top` was popped meanwhile; then the tag
        // has moved on and the CAS fails.
        const std::uint64_t link = TimerState::free_link(TimerState::load(at(top)));
        const std::uint64_t next = ((head >> 32) + 1) << 32 | (link & 0xFFFFFFFFu);
        if (free_head_.compare_exchange_weak(head, next, std::memory_order_acquire, std::memory_order_acquire)) {
            index = top;
            Record& r = at(top);
            gen = r.gen();
            return &r;
        }
    }
    const std::uint64_t fresh = next_fresh_.fetch_add(1, std::memory_order_relaxed);
    if (fresh >= kCapacity) {
        next_fresh_.store(kCapacity, std::memory_order_relaxed);  // keep it from wrapping
        return nullptr;
    }
    if (make_chunk(static_cast<std::uint32_t>(fresh / kChunkSize)) == nullptr) {
        // No memory for the chunk: this index can never be used; that is fine.
        return nullptr;
    }
    index = static_cast<std::uint32_t>(fresh);
    Record& r = at(index);
    std::uint32_t first = test_hooks::first_generation.load(std::memory_order_relaxed);
    if (first == 0 || first > Id::kMaxGen) first = 1;
    r.set_gen(first);
    gen = first;
    return &r;
}

void HandleTable::recycle(Record& r, FreeChain& chain) noexcept {
    const std::uint32_t g = r.gen();
    if (g >= Id::kMaxGen) {
        // The last generation: an id with any generation could name a later
        // occupant, so this record is never used again (FREE, on no list:
        // the last id is answered "not found" forever).
        TimerState::mark_free(r, g, 0);
        retired_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    const std::uint32_t next = g + 1;
    r.set_gen(next);  // before the word changes: a thread that sees the new word sees the new generation
    // The next occupant starts as a common timer. After the generation moved
    // on: a query of the ending timer that reads the cleared flags then sees
    // the new generation and discards what it read. (A retired record keeps
    // its flags: it is never reused.)
    if (r.flags() != 0) r.set_flags(0);
    const std::uint32_t index = index_of(&r);
    if ((next & Ctl::kGenMask) == 0) {
        quarantine(r, index, next);  // the word's 10-bit generation wraps: wait for hazards
        return;
    }
    chain.add(index, next);
}

void HandleTable::quarantine(Record& r, std::uint32_t index, std::uint32_t gen) noexcept {
    std::uint32_t head = quarantine_head_.load(std::memory_order_relaxed);
    do {
        TimerState::mark_free(r, gen, head);
    } while (!quarantine_head_.compare_exchange_weak(head, index + 1, std::memory_order_release,
                                                     std::memory_order_relaxed));
    quarantined_.fetch_add(1, std::memory_order_relaxed);
}

void HandleTable::reclaim_quarantine() noexcept {
    std::uint32_t link = quarantine_head_.exchange(0, std::memory_order_acquire);
    if (link == 0) return;
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    last_reclaim_ns_ = std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
    // Every HazardScope entered before this barrier is visible to the scan
    // below; every one entered after it loads words written before it, so it
    // sees these records FREE under their new generation and acts on nothing.
    hazard_barrier();
    FreeChain freed(*this);
    std::uint64_t n = 0;
    while (link != 0) {
        const std::uint32_t index = link - 1;
        Record& r = at(index);
        link = TimerState::free_link(TimerState::load(r));
        if (hazard_held(&r)) {
            quarantine(r, index, r.gen());  // still in some thread's window: next pass (counted again)
        } else {
            freed.add(index, r.gen());
        }
        ++n;
    }
    quarantined_.fetch_sub(n, std::memory_order_relaxed);  // every record taken off the list above
}

std::uint32_t HandleTable::high_water() const noexcept {
    const std::uint64_t n = next_fresh_.load(std::memory_order_acquire);
    return static_cast<std::uint32_t>(n < kCapacity ? n : kCapacity);
}

}  // namespace tickwheel::rt
