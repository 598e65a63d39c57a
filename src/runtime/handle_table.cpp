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

void HandleTable::release_chain(std::uint32_t top, std::uint32_t bottom, std::uint32_t bottom_gen) noexcept {
    Record& last = at(bottom);
    std::uint64_t head = free_head_.load(std::memory_order_relaxed);
    std::uint64_t next;
    do {
        // The bottom record links to the current top; nobody can reach the
        // chain before the CAS publishes it, so these stores race with no pop.
        // Release: whoever sees this FREE word sees what its owner did before.
        last.ctl.store(Ctl::make(bottom_gen, State::Free, head & 0xFFFFFFFFu), std::memory_order_release);
        next = ((head >> 32) + 1) << 32 | (std::uint64_t{top} + 1);
    } while (!free_head_.compare_exchange_weak(head, next, std::memory_order_release, std::memory_order_relaxed));
}

bool HandleTable::allocate(std::uint32_t& index) noexcept {
    std::uint64_t head = free_head_.load(std::memory_order_acquire);
    while ((head & 0xFFFFFFFFu) != 0) {
        const auto top = static_cast<std::uint32_t>(head) - 1;
        // The link may be stale if `top` was popped meanwhile; then the tag
        // has moved on and the CAS fails.
        const std::uint64_t link = Ctl::deadline(at(top).ctl.load(std::memory_order_relaxed));
        const std::uint64_t next = ((head >> 32) + 1) << 32 | (link & 0xFFFFFFFFu);
        if (free_head_.compare_exchange_weak(head, next, std::memory_order_acquire, std::memory_order_acquire)) {
            index = top;
            return true;
        }
    }
    const std::uint64_t fresh = next_fresh_.fetch_add(1, std::memory_order_relaxed);
    if (fresh >= kCapacity) {
        next_fresh_.store(kCapacity, std::memory_order_relaxed);  // keep it from wrapping
        return false;
    }
    if (make_chunk(static_cast<std::uint32_t>(fresh / kChunkSize)) == nullptr) {
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
