#include "runtime/handle_table.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace tickwheel::rt {

HandleTable::HandleTable() : chunks_(new std::atomic<Record*>[kMaxChunks]()) {}

HandleTable::~HandleTable() {
    for (std::uint32_t c = 0; c < kMaxChunks; ++c) free_chunk(chunks_[c].load(std::memory_order_relaxed));
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

bool HandleTable::allocate(std::uint32_t& index) noexcept {
    if (free_.try_dequeue(index)) return true;
    const std::uint64_t fresh = next_fresh_.fetch_add(1, std::memory_order_relaxed);
    if (fresh >= kCapacity) {
        next_fresh_.store(kCapacity, std::memory_order_relaxed);  // keep it from wrapping
        return false;
    }
    if (make_chunk(static_cast<std::uint32_t>(fresh >> kChunkBits)) == nullptr) {
        // No memory for the chunk: this index can never be used; that is fine.
        return false;
    }
    index = static_cast<std::uint32_t>(fresh);
    return true;
}

std::uint32_t HandleTable::high_water() const noexcept {
    const std::uint64_t n = next_fresh_.load(std::memory_order_acquire);
    return static_cast<std::uint32_t>(n < kCapacity ? n : kCapacity);
}

}  // namespace tickwheel::rt
